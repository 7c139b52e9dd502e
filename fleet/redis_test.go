package fleet_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/politehttp/polite/fleet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// redisServer is a redis-server that a test started, on a free port of
// 127.0.0.1, keeping nothing on disk.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	args []string
}

// startRedis starts a redis-server for t, stopped when t ends. The tests
// of this package need a real Redis: without redis-server on the PATH
// they fail, never skip (CI installs it). In short mode (the quick tier)
// a test that would start one skips instead.
func startRedis(t testing.TB, extra ...string) *redisServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return startRedisOn(t, port, extra...)
}

// startRedisOn is startRedis on port.
func startRedisOn(t testing.TB, port int, extra ...string) *redisServer {
	t.Helper()
	return startRedisWith(t, port, "", extra...)
}

// startRedisConf starts a redis-server for t from the configuration file
// conf (which a sentinel rewrites), on a free port.
func startRedisConf(t testing.TB, conf string, extra ...string) *redisServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return startRedisWith(t, port, conf, extra...)
}

// startRedisWith starts a redis-server for t on port, from conf if set.
func startRedisWith(t testing.TB, port int, conf string, extra ...string) *redisServer {
	t.Helper()
	if testing.Short() {
		t.Skip("short: starts redis-server")
	}
	bin, err := exec.LookPath("redis-server")
	require.NoError(t, err, "the fleet tests need redis-server on the PATH (apt-get install redis-server)")
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	if conf != "" {
		s.args = []string{conf}
	}
	s.args = append(append(s.args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir()), extra...)
	s.cmd = exec.Command(bin, s.args...)
	require.NoError(t, s.cmd.Start())
	t.Cleanup(func() { s.stop() })
	s.waitReady(t)
	return s
}

// waitReady waits for the server to answer PING, at most 5 seconds.
func (s *redisServer) waitReady(t testing.TB) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		require.True(t, time.Now().Before(deadline), "redis-server at %s did not start: %v", s.addr, err)
		time.Sleep(20 * time.Millisecond) // polling a real process: no fake time here
	}
}

// stop kills the server and waits for it.
func (s *redisServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// restart starts the server again on the same port.
func (s *redisServer) restart(t testing.TB) {
	t.Helper()
	s.stop()
	bin, _ := exec.LookPath("redis-server")
	s.cmd = exec.Command(bin, s.args...)
	require.NoError(t, s.cmd.Start())
	s.waitReady(t)
}

// signal sends sig to the server (SIGSTOP hangs it, SIGCONT resumes it).
func (s *redisServer) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, s.cmd.Process.Signal(sig))
}

// sharedAddr returns REDIS_ADDR if set, for tests that do no harm to a
// shared server; otherwise the address of a server of the test's own,
// which short mode does not start.
func sharedAddr(t testing.TB) string {
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return addr
	}
	if testing.Short() {
		t.Skip("short: starts redis-server (set REDIS_ADDR to run it on a Redis of yours)")
	}
	return startRedis(t).addr
}

// newClient returns a client of addr that fails fast, closed when t ends.
func newClient(t testing.TB, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// uniqueNamespace returns a namespace no other test uses, so that tests
// on a shared Redis do not see each other's keys.
func uniqueNamespace(t testing.TB) string {
	return fmt.Sprintf("polite-test-%s-%d", filepath.Base(t.Name()), time.Now().UnixNano())
}

// newFleet returns a Fleet on rdb, closed when t ends.
func newFleet(t testing.TB, rdb redis.UniversalClient, opts ...fleet.Option) *fleet.Fleet {
	f := fleet.New(rdb, opts...)
	t.Cleanup(func() { _ = f.Close() })
	return f
}
