// Package redistest starts a real redis-server for the tests of the
// packages that need one.
package redistest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Addr returns the address of a Redis for t: REDIS_ADDR if it is set, or
// else a redis-server started on a free port of 127.0.0.1 (keeping nothing
// on disk) and stopped when t ends. Without redis-server on the PATH, t
// fails: tests that need Redis never skip for want of it. In short mode
// (the quick tier), t skips rather than start one.
func Addr(t testing.TB) string {
	t.Helper()
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr
	}
	if testing.Short() {
		t.Skip("short: starts redis-server (set REDIS_ADDR to run it on a Redis of yours)")
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("these tests need Redis: set REDIS_ADDR or put redis-server on the PATH (apt-get install redis-server): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server at %s did not answer within 5s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
