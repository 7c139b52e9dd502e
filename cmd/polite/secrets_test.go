package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noSecret fails the test if text holds one of secrets.
func noSecret(t *testing.T, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		assert.NotContains(t, text, s, "%s carries a secret", where)
	}
}

// TestInspectPrintsNoSecret checks that inspect's report and its errors
// carry neither the URL's userinfo and query nor the -H credentials: an
// inspection is made to be pasted into a bug report.
func TestInspectPrintsNoSecret(t *testing.T) {
	// A user name is shown beside a masked password, as polite's logs show
	// it; a user name alone is masked too (it may be a token).
	secrets := []string{"inspect-pass", "inspect-key", "inspect-token", "inspect-fragment"}
	srv := dialectServer(t, http.StatusTooManyRequests, "Retry-After", "1", "X-RateLimit-Limit", "10", "X-RateLimit-Remaining", "0")
	secretURL := func(base string) string {
		return strings.Replace(base, "http://", "http://inspect-user:inspect-pass@", 1) + "/v1/items?api_key=inspect-key#inspect-fragment"
	}

	r := runPolite(t, "", "", 20*time.Second, "inspect", "-H", "Authorization: Bearer inspect-token", secretURL(srv.URL))
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "/v1/items?REDACTED", "the report names the path it inspected")
	assert.Contains(t, r.stdout, "inspect-user:xxxxx@", "the report shows that the URL had userinfo")
	noSecret(t, "inspect's report", r.stdout+r.stderr, secrets...)

	closed := closedURL(t)
	r = runPolite(t, "", "", 20*time.Second, "inspect", "-H", "Authorization: Bearer inspect-token", secretURL(closed))
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "connection refused")
	noSecret(t, "inspect's error", r.stdout+r.stderr, secrets...)

	r = runPolite(t, "", "", 20*time.Second, "inspect", strings.Replace(srv.URL, "http://", "http://inspect-token@", 1)+"/")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "http://xxxxx@")
	noSecret(t, "inspect's report", r.stdout+r.stderr, secrets...)

	for _, bad := range []string{
		"http://inspect-user:inspect-pass@[::1/x?api_key=inspect-key",
		"ftp://inspect-user:inspect-pass@example.com/?api_key=inspect-key",
	} {
		r = runPolite(t, "", "", 20*time.Second, "inspect", bad)
		assert.Equal(t, exitUsage, r.code, r.stderr)
		noSecret(t, "inspect's usage error", r.stdout+r.stderr, secrets...)
	}
}

// TestGetErrorsCarryNoSecret checks that get's -jsonl error fields and its
// stderr carry no credentials of the URLs it was given, whatever ended
// them: a URL that does not parse, a scheme get does not fetch, a refused
// connection, a timeout; and a server that throttles past -max-retry-after
// gives its 429 with no error.
// Each line's url field is the URL as given, the one way to tell which
// line is whose; the error beside it does not repeat it.
func TestGetErrorsCarryNoSecret(t *testing.T) {
	secrets := []string{"get-pass", "get-key"}
	withSecrets := func(base, path string) string {
		return strings.Replace(base, "http://", "http://get-user:get-pass@", 1) + path + "?api_key=get-key"
	}
	handle := func(w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/throttled":
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		case "/slow":
			<-r.Context().Done()
		default:
			return false
		}
		return true
	}
	srv := newGetServer(t, nil, handle)
	closed := closedURL(t)

	urls := []string{
		"http://get-user:get-pass@[::1/x?api_key=get-key",
		"ftp://get-user:get-pass@example.com/?api_key=get-key",
		withSecrets(closed, "/refused"),
		// Another name of the same server: a key of its own, so that its
		// hour's pause does not hold the other URLs, whichever goes first.
		withSecrets(strings.Replace(srv.URL, "127.0.0.1", "localhost", 1), "/throttled"),
		withSecrets(srv.URL, "/slow"),
		withSecrets(srv.URL, "/fine"),
	}
	dir := t.TempDir()
	r := runPolite(t, dir, strings.Join(urls, "\n")+"\n", 30*time.Second,
		"get", "-i", "-", "-timeout", "500ms", "-max-retry-after", "10s", "-o", "out", "-jsonl", "out.jsonl")
	assert.Equal(t, exitFailure, r.code, r.stderr)
	noSecret(t, "get's stderr", r.stderr, secrets...)

	lines := byURL(t, readGetLines(t, filepath.Join(dir, "out.jsonl")))
	require.Len(t, lines, len(urls))
	for _, u := range urls {
		noSecret(t, "the error of "+u, lines[u].Error, secrets...)
	}
	assert.Contains(t, lines[urls[0]].Error, "not a URL")
	assert.Contains(t, lines[urls[1]].Error, `not an http or https URL (scheme "ftp")`)
	assert.Contains(t, lines[urls[2]].Error, "connection refused")
	assert.Equal(t, http.StatusTooManyRequests, lines[urls[3]].Status)
	assert.Contains(t, lines[urls[4]].Error, "timed out")
	assert.Empty(t, lines[urls[5]].Error)

	entries, err := os.ReadDir(filepath.Join(dir, "out"))
	require.NoError(t, err)
	require.Len(t, entries, 1, "the one body fetched")
	noSecret(t, "the body's file name", entries[0].Name(), secrets...)
}
