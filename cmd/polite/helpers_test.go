package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// binary is the polite command built once for the package's tests, which
// run it end to end as a user does.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "polite-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "polite")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building polite:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left by the tests:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// closedURL returns the URL (http://host:port, no path) of a loopback
// port where nothing listens: a connection to it is refused.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return u
}

// result is what a run of the binary printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// runPolite runs the built binary with args in dir (the test's temporary
// directory if dir is ""), with stdin as its input, and fails the test if
// it does not end within limit.
func runPolite(t *testing.T, dir, stdin string, limit time.Duration, args ...string) result {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	return runPoliteIn(t, dir, stdin, nil, limit, args...)
}

// runPoliteEnv runs the built binary as runPolite does, in a temporary
// directory with no input, with env added to the environment.
func runPoliteEnv(t *testing.T, env []string, limit time.Duration, args ...string) result {
	t.Helper()
	return runPoliteIn(t, t.TempDir(), "", env, limit, args...)
}

// runPoliteIn runs the built binary with args in dir, with stdin as its
// input and env added to the environment, and fails the test if it does
// not end within limit.
func runPoliteIn(t *testing.T, dir, stdin string, env []string, limit time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	// The user's cache directory is the test's own: what polite get and
	// inspect remember of the hosts of one test (ports that come again)
	// must not reach another, nor the machine's.
	cmd.Env = append(append(os.Environ(), "XDG_CACHE_HOME="+t.TempDir()), env...)
	cmd.Stdin = bytes.NewBufferString(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("polite %q did not end within %v; stderr:\n%s", args, limit, stderr.String())
	}
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running polite %q: %v", args, err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}
