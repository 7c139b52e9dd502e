package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// sampleTimeout bounds how long printSamples spends on one server.
const sampleTimeout = 5 * time.Second

// printSamples starts each server and sends it requests one after another,
// as fast as it answers, until it has refused one; it prints the first
// response and the first refusal, headers and body, as markdown. Servers
// that are not installed are noted and skipped.
func printSamples(w io.Writer, srvs []server, cfg runConfig) error {
	for _, s := range srvs {
		fmt.Fprintf(w, "### %s\n\n", s.name)
		allowed, refused, err := sample(s, cfg)
		switch {
		case errors.Is(err, errMissing):
			fmt.Fprintf(w, "skipped: %v\n\n", err)
			continue
		case err != nil:
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(w, "First response:\n\n```\n%s\n```\n\n", allowed)
		if refused == "" {
			fmt.Fprintf(w, "No refusal within %v.\n\n", sampleTimeout)
			continue
		}
		fmt.Fprintf(w, "First refusal:\n\n```\n%s\n```\n\n", refused)
	}
	return nil
}

// sample returns the first response of a fresh instance of s and its first
// refusal, if one comes within sampleTimeout, as the bytes on the wire.
func sample(s server, cfg runConfig) (first, refused string, err error) {
	prof := s.profile(cfg.limit)
	inst, err := s.start(serverConfig{limit: cfg.limit, duration: cfg.duration, profile: prof})
	if err != nil {
		return "", "", err
	}
	u, err := url.Parse(inst.url)
	if err == nil {
		first, refused, err = sampleConn(u.Host)
	}
	_, stopErr := inst.stop()
	return first, refused, errors.Join(err, stopErr)
}

// sampleConn sends GET / to host over one keep-alive connection (a new one
// whenever the server closes it), one request at a time, until a refusal
// or sampleTimeout, and returns the first response and the first refusal.
func sampleConn(host string) (first, refused string, err error) {
	deadline := time.Now().Add(sampleTimeout)
	var (
		conn net.Conn
		br   *bufio.Reader
		raw  bytes.Buffer // what was read from conn for the current response
	)
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for refused == "" && time.Now().Before(deadline) {
		if conn == nil {
			if conn, err = net.DialTimeout("tcp", host, time.Second); err != nil {
				return first, refused, err
			}
			_ = conn.SetDeadline(deadline)
			br = bufio.NewReader(io.TeeReader(conn, &raw))
		}
		raw.Reset()
		if _, err = fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: polite-bench\r\n\r\n", host); err != nil {
			return first, refused, err
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if first != "" && errors.Is(err, os.ErrDeadlineExceeded) {
				return first, "", nil // a server that holds requests (delay) held this one past sampleTimeout
			}
			return first, refused, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return first, refused, err
		}
		dump := strings.TrimSpace(strings.ReplaceAll(raw.String(), "\r\n", "\n"))
		switch {
		case first == "":
			first = dump
		case isRefusal(resp.StatusCode):
			refused = dump
		}
		if resp.Close {
			_ = conn.Close()
			conn = nil
		}
	}
	return first, refused, nil
}
