package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"
)

// How long an external server may take to start and to stop.
const (
	startTimeout = 5 * time.Second
	stopTimeout  = 5 * time.Second
)

// A child is an external server running as a child process of the bench,
// in a temporary directory of its own that holds its configuration and
// logs.
type child struct {
	name   string
	dir    string
	cmd    *exec.Cmd
	output *bytes.Buffer // its stdout and stderr, when they are not a log
	exited chan struct{} // closed when the process has been waited for
	err    error         // its exit status, once exited is closed
}

// lookBinary finds the program name on PATH or in /usr/sbin, where Debian
// installs nginx and HAProxy and where a non-root PATH often does not look.
func lookBinary(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	p := filepath.Join("/usr/sbin", name)
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return p, nil
	}
	return "", fmt.Errorf("%s: %w", name, errMissing)
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// startChild starts cmd, which runs in dir, and waits until addr accepts a
// TCP connection (no HTTP request, so no token is spent). On failure it
// stops the process and removes dir.
func startChild(name, dir, addr string, cmd *exec.Cmd) (*child, error) {
	c := &child{name: name, dir: dir, cmd: cmd, exited: make(chan struct{})}
	if cmd.Stdout == nil {
		c.output = &bytes.Buffer{}
		cmd.Stdout = c.output
	}
	if cmd.Stderr == nil {
		if c.output == nil {
			c.output = &bytes.Buffer{}
		}
		cmd.Stderr = c.output
	}
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	go func() {
		c.err = cmd.Wait()
		close(c.exited)
	}()
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			_ = conn.Close()
			return c, nil
		}
		select {
		case <-c.exited:
			err := fmt.Errorf("%s exited at start: %v: %s", name, c.err, c.describe())
			_ = os.RemoveAll(dir)
			return nil, err
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			err := fmt.Errorf("%s did not listen on %s within %v: %s", name, addr, startTimeout, c.describe())
			_ = c.stop()
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
}

// stop ends the process (SIGTERM, then SIGKILL after stopTimeout); call it
// once. It leaves the directory for the caller to read and remove.
func (c *child) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
	return fmt.Errorf("%s ignored SIGTERM for %v and was killed", c.name, stopTimeout)
}

// describe returns the last lines the process wrote, and of any error log
// in its directory, for an error message.
func (c *child) describe() string {
	var parts []string
	if c.output != nil {
		if s := strings.TrimSpace(c.output.String()); s != "" {
			parts = append(parts, lastLines(s, 5))
		}
	}
	if b, err := os.ReadFile(filepath.Join(c.dir, "error.log")); err == nil && len(b) > 0 {
		parts = append(parts, lastLines(strings.TrimSpace(string(b)), 5))
	}
	if len(parts) == 0 {
		return "no output"
	}
	return strings.Join(parts, " | ")
}

// lastLines returns the last n lines of s, joined by " / ".
func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " / ")
}

// readLog reads an access log of lines "<time> <status>", where time is
// Unix seconds with a fraction (nginx's $msec) or Unix milliseconds
// (HAProxy's date(0,ms)), and skips any other line.
func readLog(path string) ([]arrival, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []arrival
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if a, ok := parseLogLine(sc.Text()); ok {
			out = append(out, a)
		}
	}
	return out, sc.Err()
}

// parseLogLine parses one line of readLog's format.
func parseLogLine(line string) (arrival, bool) {
	ts, st, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return arrival{}, false
	}
	status, err := strconv.Atoi(st)
	if err != nil || status < 100 || status > 599 {
		return arrival{}, false
	}
	var at time.Time
	if whole, frac, dot := strings.Cut(ts, "."); dot {
		sec, err1 := strconv.ParseInt(whole, 10, 64)
		ms, err2 := strconv.ParseInt(frac, 10, 64)
		if err1 != nil || err2 != nil || len(frac) != 3 {
			return arrival{}, false
		}
		at = time.Unix(sec, ms*int64(time.Millisecond))
	} else {
		ms, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			return arrival{}, false
		}
		at = time.UnixMilli(ms)
	}
	return arrival{at: at, status: status}, true
}

// writeTemplate writes t executed with data to path.
func writeTemplate(path string, t *template.Template, data any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := t.Execute(f, data); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return f.Close()
}

// startLogged starts cmd, a server that writes its access log to
// dir/access.log and listens on addr, and returns the instance, whose stop
// stops it, reads the log and removes dir.
func startLogged(name, dir, addr string, cmd *exec.Cmd) (*instance, error) {
	c, err := startChild(name, dir, addr, cmd)
	if err != nil {
		return nil, err
	}
	origin := time.Now()
	stop := func() ([]arrival, error) {
		defer os.RemoveAll(dir)
		stopErr := c.stop()
		arrivals, readErr := readLog(filepath.Join(dir, "access.log"))
		return arrivals, errors.Join(stopErr, readErr)
	}
	return &instance{url: "http://" + addr + "/", origin: origin, stop: stop}, nil
}
