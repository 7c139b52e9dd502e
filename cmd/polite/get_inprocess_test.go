package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// getLockedBuffer is a bytes.Buffer safe for concurrent use: the streams
// of a command run in process, which the progress bar may write to from
// its own goroutine.
type getLockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write implements io.Writer.
func (b *getLockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written.
func (b *getLockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestGetInProcess runs polite get in the test's process, not the built
// binary, so that go test -race checks its concurrent code (the workers,
// the scheduler, the tally, the sinks, polite's hooks): 36 URLs over 3
// throttling hosts, with few workers, so that calls wait for places,
// sleep before retries and give their places up, into -o DIR and -jsonl
// FILE.
func TestGetInProcess(t *testing.T) {
	const hosts, perHost = 3, 12
	var servers []*getServer
	var urls []string
	for range hosts {
		srv := newGetServer(t, newGetBucket(20, 4), nil)
		servers = append(servers, srv)
		urls = append(urls, getURLs(srv.URL, "doc/", perHost)...)
	}
	dir := t.TempDir()
	out, jsonl := filepath.Join(dir, "out"), filepath.Join(dir, "out.jsonl")
	var stdout, stderr getLockedBuffer
	e := &env{
		stdin:  strings.NewReader(strings.Join(urls, "\n") + "\n"),
		stdout: &stdout,
		stderr: &stderr,
		getenv: func(string) string { return "" },
	}
	code := run(t.Context(), []string{"get", "-workers", "6", "-o", out, "-jsonl", jsonl, "-"}, e)
	t.Logf("stderr: %s", strings.TrimSpace(stderr.String()))
	require.Equal(t, exitOK, code, stderr.String())
	assert.Empty(t, stdout.String(), "bodies go to -o, lines to -jsonl")
	assert.NotContains(t, stderr.String(), "\x1b", "escape codes on a stderr that is no terminal")
	assert.Contains(t, stderr.String(), "polite: 36 URLs in ")

	lines := byURL(t, readGetLines(t, jsonl))
	require.Len(t, lines, len(urls))
	for _, u := range urls {
		l, ok := lines[u]
		if !assert.True(t, ok, "no line for %s", u) {
			continue
		}
		assert.Equal(t, http.StatusOK, l.Status, u)
		assert.Empty(t, l.Error, u)
		assert.GreaterOrEqual(t, l.Elapsed, l.Waited, u)
		name := filepath.Join(out, safeName(u))
		body, err := os.ReadFile(name)
		if assert.NoError(t, err, u) {
			assert.Equal(t, getBody(u[strings.Index(u, "/doc/"):]), string(body), u)
		}
		if fi, err := os.Stat(name); assert.NoError(t, err, u) {
			assert.Equal(t, os.FileMode(0o644), fi.Mode().Perm(), name)
		}
	}
	files, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Len(t, files, len(urls), "one file per URL, no temporary file left")

	refused := 0
	for _, s := range servers {
		for _, h := range s.answered() {
			if h.status == http.StatusTooManyRequests {
				refused++
			}
		}
	}
	assert.Positive(t, refused, "the servers never throttled: no retry was checked")
	assert.Equal(t, refused, summaryCount(t, stderr.String(), "throttled"))
}
