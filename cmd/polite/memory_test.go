package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/politehttp/polite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// polite get remembers, by default, in the user's cache directory: a host
// that asked for an hour's pause gets nothing from the next run, and
// polite inspect says what is remembered of it; -no-memory forgets.
func TestGetRemembersAPause(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()
	cache := t.TempDir()
	env := []string{"XDG_CACHE_HOME=" + cache}

	r := runPoliteEnv(t, env, 30*time.Second, "get", srv.URL+"/a")
	assert.Equal(t, exitFailure, r.code, "a pause over -max-retry-after fails the URL")
	_, err := os.Stat(filepath.Join(cache, "polite", "memory"))
	require.NoError(t, err, "remembered in the user's cache directory")

	r = runPoliteEnv(t, env, 30*time.Second, "get", srv.URL+"/b")
	assert.Equal(t, exitFailure, r.code)
	assert.Equal(t, int32(1), hits.Load(), "nothing sent to a host before its pause ends: %s", r.stderr)

	r = runPoliteEnv(t, env, 30*time.Second, "inspect", srv.URL+"/c")
	assert.Equal(t, exitFailure, r.code)
	assert.Regexp(t, `remembered for 127\.0\.0\.1:\d+: paused for (59m\d+s|1h0m0s) more, as the server asked`, r.stderr)
	assert.Equal(t, int32(1), hits.Load())

	r = runPoliteEnv(t, env, 30*time.Second, "get", "-no-memory", srv.URL+"/d")
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Equal(t, int32(2), hits.Load())
}

// A limit the server states is remembered with its window, and inspect
// shows it; -memory names the file.
func TestInspectShowsTheRememberedLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("RateLimit-Policy", `"default";q=600;w=60`)
		w.Header().Set("RateLimit", `"default";r=599;t=60`)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "mem")
	r := runPolite(t, "", "", 30*time.Second, "inspect", "-memory", file, srv.URL)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `remembered +nothing\n`, r.stdout)
	r = runPolite(t, "", "", 30*time.Second, "inspect", "-memory", file, srv.URL)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Regexp(t, `remembered +limit 10 requests/s \(600 per 1m0s, as the server stated\), \d+s ago`, r.stdout)
}

// A memory file that is not one costs the run its memory, in one line, and
// nothing else.
func TestGetWithABrokenMemory(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") }))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "mem")
	require.NoError(t, os.WriteFile(file, []byte("\x00\x01garbage"), 0o600))
	r := runPolite(t, "", "", 30*time.Second, "get", "-memory", file, srv.URL)
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "polite get: polite: memory file "+file+": not a polite memory file; those hosts start from nothing\n")
}

// What inspect says of a remembered limit: how it was learnt, how long it
// had stood when measured from throttles, and its age.
func TestDescribeMemory(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	at := now.Add(-2 * time.Second)
	for _, c := range []struct {
		r    polite.Remembered
		want string
	}{
		{polite.Remembered{Limit: 10, Stated: true, Window: time.Minute, At: at},
			"limit 10 requests/s (600 per 1m0s, as the server stated), 2s ago"},
		{polite.Remembered{Limit: 98, At: at, Since: at.Add(-16 * time.Second)},
			"limit 98 requests/s, as polite measured from the server's throttles (it had stood 16s), 2s ago"},
		{polite.Remembered{Limit: 98, At: at},
			"limit 98 requests/s, as polite measured from the server's throttles, 2s ago"},
		{polite.Remembered{Limit: 85, At: at, NoBurst: true},
			"limit 85 requests/s, as polite measured from the server's throttles, a server that lets no burst through, 2s ago"},
		{polite.Remembered{Limit: 97, At: at, CountsRefusals: true},
			"limit 97 requests/s, as polite measured from the server's throttles, a server that counts the requests it refuses, 2s ago"},
	} {
		assert.Equal(t, c.want, describeMemory(c.r, true, now))
	}
}
