package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politestatus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stubNext is a RoundTripper of a func, standing for the network.
type stubNext func(*http.Request) (*http.Response, error)

// RoundTrip implements http.RoundTripper.
func (f stubNext) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// pausedTransport returns a Transport that holds two keys: ok.test, which
// answered 200, and busy.test, whose server answered 429 with a
// Retry-After of 30 s, and on which 2 batch calls and 1 interactive one
// wait until the test ends.
func pausedTransport(t *testing.T) *polite.Transport {
	t.Helper()
	next := stubNext(func(r *http.Request) (*http.Response, error) {
		resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}
		if r.URL.Host == "busy.test" {
			resp.StatusCode = http.StatusTooManyRequests
			resp.Header.Set("Retry-After", "30")
		}
		return resp, nil
	})
	tr := polite.New(next, polite.WithMaxAttempts(1))
	for _, u := range []string{"http://ok.test/a", "http://ok.test/b", "http://busy.test/a"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
		require.NoError(t, err)
		resp, err := tr.RoundTrip(req)
		require.NoError(t, err, u)
		resp.Body.Close()
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for _, p := range []polite.Priority{polite.PriorityBatch, polite.PriorityBatch, polite.PriorityInteractive} {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(polite.ContextWithPriority(ctx, p), http.MethodGet, "http://busy.test/b", nil)
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
			}
		})
	}
	require.Eventually(t, func() bool {
		p := tr.Status(time.Now(), 1, "busy")
		return len(p.Top) == 1 && p.Top[0].Waits() == 3
	}, 10*time.Second, 5*time.Millisecond, "the 3 calls never waited on busy.test")
	return tr
}

// statusServer serves tr's status page at /debug/polite/, as the
// library's documentation mounts it.
func statusServer(t *testing.T, tr *polite.Transport) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/debug/polite/", http.StripPrefix("/debug/polite", tr.StatusHandler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// runInProcess runs the command line args in the test's process, and
// returns what it printed and its exit status.
func runInProcess(t *testing.T, ctx context.Context, args ...string) result {
	t.Helper()
	var stdout, stderr getLockedBuffer
	e := &env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" }}
	code := run(ctx, args, e)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// TestTopOnce reads a Transport's status page as a program serves it, by
// URL and by host:port, and checks that the frame holds its keys, their
// state, their queue by priority and the reason line.
func TestTopOnce(t *testing.T) {
	tr := pausedTransport(t)
	srv := statusServer(t, tr)
	var busy politestatus.Key
	for _, k := range tr.Status(time.Now(), 5, "").Top {
		if k.Key == "busy.test" {
			busy = k
		}
	}
	require.Equal(t, "busy.test", busy.Key)

	for _, addr := range []string{srv.URL + "/debug/polite/", strings.TrimPrefix(srv.URL, "http://")} {
		t.Run(addr, func(t *testing.T) {
			r := runInProcess(t, t.Context(), "top", "-once", addr)
			require.Equal(t, exitOK, r.code, r.stderr)
			assert.Empty(t, r.stderr)
			t.Logf("frame:\n%s", r.stdout)
			assert.NotContains(t, r.stdout, "\x1b", "escape codes on a stdout that is no terminal")
			assert.Contains(t, r.stdout, "polite top  "+srv.URL+"/debug/polite/")
			assert.Contains(t, r.stdout, "2 keys held, 2 shown")
			assert.Regexp(t, `\nKEY +STATE +RATE/S +LIMIT/S +WAITING +CALLS +SENT +REFUSED +FAILED\n`, r.stdout)
			assert.Regexp(t, `\nbusy\.test +`+busy.State+` .* 1 interactive, 2 batch +3 `, r.stdout)
			assert.Regexp(t, `\nok\.test +unthrottled `, r.stdout)
			assert.Regexp(t, `\n  paused by the server's Retry-After until \d\d:\d\d:\d\d; queue of 2 batch calls behind 1 interactive one\n`, r.stdout)
		})
	}
	t.Run("-q", func(t *testing.T) {
		r := runInProcess(t, t.Context(), "top", "-once", "-q", "ok", "-n", "5", srv.URL+"/debug/polite/")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, `2 keys held, 1 match "ok", 1 shown`)
		assert.Contains(t, r.stdout, "\nok.test ")
		assert.NotContains(t, r.stdout, "busy.test")
	})
	t.Run("the binary", func(t *testing.T) {
		r := runPolite(t, "", "", 20*time.Second, "top", "-once", srv.URL+"/debug/polite/")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.Contains(t, r.stdout, "busy.test")
		assert.Contains(t, r.stdout, "paused by the server's Retry-After until ")
	})
}

// TestTopFailures checks top's errors: a command line that is wrong, an
// address where nothing listens, and answers that are no status page.
func TestTopFailures(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>hello</html>")
	})
	mux.HandleFunc("/notjson", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, "<html>hello</html>")
	})
	mux.HandleFunc("/other", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status": "ok"}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	closed := closedURL(t)

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"top"}, exitUsage, "give one ADDR"},
		{[]string{"top", "a:1", "b:2"}, exitUsage, "give one ADDR"},
		{[]string{"top", "a:1", "-once"}, exitUsage, "flags go before ADDR"},
		{[]string{"top", "-n", "-1", "a:1"}, exitUsage, "-n must be 1 or more"},
		{[]string{"top", "-interval", "0s", "a:1"}, exitUsage, "-interval must be more than 0"},
		{[]string{"top", "a b:1"}, exitUsage, "neither a URL"},
		{[]string{"top", "ftp://example.com/"}, exitUsage, `not an http or https URL (scheme "ftp")`},
		{[]string{"top", "-once", closed + "/debug/polite/"}, exitFailure, "connection refused"},
		{[]string{"top", "-once", srv.URL + "/html"}, exitFailure, srv.URL + "/html is not a polite status page: it answered text/html, not JSON"},
		{[]string{"top", "-once", srv.URL + "/notjson"}, exitFailure, "is not a polite status page: its JSON does not read"},
		{[]string{"top", "-once", srv.URL + "/other"}, exitFailure, "is not a polite status page: its JSON has no time"},
		{[]string{"top", "-once", srv.URL + "/nothing"}, exitFailure, "is not a polite status page: it answered 404 Not Found (is Transport.StatusHandler mounted at that path?)"},
	} {
		r := runInProcess(t, t.Context(), c.args...)
		assert.Equal(t, c.code, r.code, "%q: %s", c.args, r.stderr)
		assert.Contains(t, r.stderr, c.says, "%q", c.args)
		assert.Empty(t, r.stdout, "%q", c.args)
	}

	// A URL's password and query stay out of the errors.
	secret := strings.Replace(closed, "http://", "http://top-user:top-pass@", 1) + "/debug/polite/?token=top-token"
	r := runInProcess(t, t.Context(), "top", "-once", secret)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "top-user:xxxxx@")
	noSecret(t, "top's error", r.stderr, "top-pass", "top-token")

	r = runInProcess(t, t.Context(), "top", "-h")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "Usage: polite top [flags] ADDR")
	assert.Contains(t, r.stdout, "-interval")

	r = runInProcess(t, t.Context(), "help")
	assert.Regexp(t, `\n  top +show a program's polite status page`, r.stdout)
}

func TestTopStatusURL(t *testing.T) {
	for _, c := range []struct{ addr, want, err string }{
		{addr: "127.0.0.1:6060", want: "http://127.0.0.1:6060/debug/polite/"},
		{addr: ":6060", want: "http://localhost:6060/debug/polite/"},
		{addr: "[::1]:6060", want: "http://[::1]:6060/debug/polite/"},
		{addr: "http://h:1/debug/polite/", want: "http://h:1/debug/polite/"},
		{addr: "https://h/status?x=1#frag", want: "https://h/status?x=1"},
		{addr: "http://h:1", want: "http://h:1/"},
		{addr: "", err: "ADDR is empty"},
		{addr: "h", want: "http://h/debug/polite/"},
		{addr: "h:1/status/", want: "http://h:1/status/"},
		{addr: "a b:1", err: "neither a URL"},
		{addr: "ftp://h/", err: "not an http or https URL"},
		{addr: "http:///x", err: "no host"},
		{addr: "http://[::1/x", err: "neither a URL"},
	} {
		u, err := statusURL(c.addr)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.addr)
			continue
		}
		if assert.NoError(t, err, c.addr) {
			assert.Equal(t, c.want, u.String(), c.addr)
		}
	}
}

// topPage is a page of three keys at 12:03:04 UTC, of which the first
// has a long name.
func topPage() politestatus.Page {
	at := time.Date(2026, 12, 6, 12, 3, 4, 0, time.UTC)
	keys := []politestatus.Key{
		{
			Key: "api.example.com/a-very-long-route-name-that-goes-on", State: "holding", Rate: 9.5, Limit: 10, LimitSource: "stated",
			PausedUntil: at.Add(6 * time.Second),
			Waiting:     []politestatus.Waiting{{Priority: "interactive", Calls: 2}, {Priority: "batch", Calls: 340}},
			Calls:       343, LastMinute: politestatus.Counts{Sent: 570, Refused: 3, Failed: 1, Seconds: 60},
		},
		{Key: "b.example.com", State: "climbing", Rate: 120, Limit: 150, LimitSource: "measured", Calls: 4, LastMinute: politestatus.Counts{Sent: 7200}},
		{Key: "c.example.com", State: "unthrottled"},
	}
	for i := range keys {
		keys[i].Reason = politestatus.Reason(&keys[i], at, time.UTC)
	}
	return politestatus.Page{
		Time: at, Keys: 1234, Matched: 56, Top: keys,
		Totals: []politestatus.Sample{{Time: at.Add(-time.Second), Sent: 5}, {Time: at, Sent: 41, Refused: 2, Seconds: 1}},
	}
}

// TestTopView checks the frame drawn of a page: its head, its columns,
// each key's row and reason line, and how it fits a screen.
func TestTopView(t *testing.T) {
	page := topPage()
	v := topView{addr: "http://h:1/debug/polite/", search: "example", page: &page, loc: time.UTC}
	lines := v.lines()
	frame := strings.Join(lines, "\n")
	t.Logf("frame:\n%s", frame)
	require.Len(t, lines, 9)
	assert.Equal(t, "polite top  http://h:1/debug/polite/  12:03:04", lines[0])
	assert.Equal(t, `1234 keys held, 56 match "example", 3 shown   last 1.0 s: 41 sent, 2 refused, 0 failed`, lines[1])
	assert.Empty(t, lines[2])
	assert.Regexp(t, `^KEY +STATE +RATE/S +LIMIT/S +WAITING +CALLS +SENT +REFUSED +FAILED$`, lines[3])
	assert.Regexp(t, `^api\.example\.com/a-very-long-route-name-that-goes-on +holding +9\.50 +10\.0 stated +2 interactive, 340 batch +343 +570 +3 +1$`, lines[4])
	assert.Equal(t, "  paused by the server's Retry-After until 12:03:10; queue of 340 batch calls behind 2 interactive ones", lines[5])
	assert.Regexp(t, `^b\.example\.com +climbing +120 +150 measured +- +4 +7200 +0 +0$`, lines[6])
	assert.Equal(t, "  climbing back at 120/s after a throttle", lines[7])
	assert.Regexp(t, `^c\.example\.com +unthrottled +- +- +- +0 +0 +0 +0$`, lines[8], "a key with no reason has no reason line")
	// The columns line up: each row's figures end where their names do.
	end := strings.Index(lines[3], "CALLS") + len("CALLS")
	for _, l := range []string{lines[4], lines[6], lines[8]} {
		assert.Regexp(t, `^ *\d+$`, l[:end][strings.LastIndex(l[:end], " ")+1:], "CALLS of %q", l)
	}

	t.Run("width", func(t *testing.T) {
		v := v
		v.width = 120 // 27 short of the widest row
		lines := v.lines()
		for _, l := range lines {
			assert.LessOrEqual(t, utf8.RuneCountInString(l), 120, l)
		}
		assert.Regexp(t, `^api\.example\.com/a-[a-z-]+… +holding `, lines[4], "the long key gives way first")
		assert.Equal(t, 120, utf8.RuneCountInString(lines[4]), "the long key gives way to fit the width, no more")
		assert.Regexp(t, ` 1$`, lines[4], "the figures keep to the screen")
		assert.Regexp(t, `^b\.example\.com +climbing `, lines[6])
		assert.Equal(t, page.Top[0].Reason, strings.TrimPrefix(lines[5], "  "), "a reason that fits is whole")
		v.width = 60
		lines = v.lines()
		assert.Equal(t, "  paused by the server's Retry-After until 12:03:10; queue …", lines[5], "a reason that does not fit is cut")
	})
	t.Run("height", func(t *testing.T) {
		v := v
		v.height = 8 // the head (4 lines), a key and its reason, then b's row and reason do not fit with the line left blank
		lines := v.lines()
		assert.Contains(t, lines[1], "56 match \"example\", 1 shown")
		assert.Len(t, lines, 6)
		assert.NotContains(t, strings.Join(lines, "\n"), "b.example.com")
	})
	t.Run("error", func(t *testing.T) {
		v := v
		v.err, v.failedAt = errors.New("reading http://h:1/debug/polite/: connection refused"), page.Time.Add(3*time.Second)
		lines := v.lines()
		assert.Equal(t, "error at 12:03:07: reading http://h:1/debug/polite/: connection refused; trying again", lines[1])
		assert.Contains(t, lines[2], "3 shown", "the last page stays under the error")
		v.page = nil
		assert.Len(t, v.lines(), 2, "before a first page: the title and the error")
	})
	t.Run("no key", func(t *testing.T) {
		empty := politestatus.Page{Time: page.Time}
		v := topView{addr: "http://h:1/", page: &empty, loc: time.UTC}
		frame := strings.Join(v.lines(), "\n")
		assert.Contains(t, frame, "0 keys held, 0 shown   last second: not sampled yet")
		assert.Contains(t, frame, "no key yet: the Transport has made no call")
		v.search = "nope"
		assert.Contains(t, strings.Join(v.lines(), "\n"), `no key's name holds "nope"`)
	})
}

// TestTopLoop runs top's loop in fake time over a page that fails to read
// once, then reads: the error shows in a frame and top keeps trying,
// frames are drawn each interval, and Ctrl-C (the context done) ends it
// with status 0. On a terminal each frame is drawn over the last, the last
// page stays under an error, and the cursor comes back at the end.
func TestTopLoop(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		t.Run(fmt.Sprintf("terminal=%v", terminal), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				start := time.Now()
				var reads []time.Duration
				var asked []int
				read := func(ctx context.Context, n int, search string) (politestatus.Page, error) {
					reads = append(reads, time.Since(start))
					asked = append(asked, n)
					switch len(reads) {
					case 2:
						return politestatus.Page{}, errors.New("reading http://h:1/debug/polite/: connection refused")
					case 4:
						cancel() // Ctrl-C, during the read
						return politestatus.Page{}, ctx.Err()
					}
					p := topPage()
					p.Time = time.Now()
					return p, nil
				}
				var out, stderr strings.Builder
				screen := &topScreen{w: &out, terminal: terminal, size: func() (int, int) { return 0, 0 }}
				if terminal {
					screen.size = func() (int, int) { return 200, 24 }
				}
				tp := &topper{read: read, screen: screen, flags: topFlags{interval: 2 * time.Second}, addr: "http://h:1/debug/polite/", loc: time.UTC}
				assert.Equal(t, exitOK, tp.loop(ctx, &stderr))
				assert.Empty(t, stderr.String())
				assert.Equal(t, []time.Duration{0, 2 * time.Second, 4 * time.Second, 6 * time.Second}, reads)
				got := out.String()
				t.Logf("output: %q", got)
				if !terminal {
					assert.Equal(t, []int{topDefaultKeys, topDefaultKeys, topDefaultKeys, topDefaultKeys}, asked)
					assert.NotContains(t, got, "\x1b")
					frames := strings.Split(got, "\n\npolite top ")
					require.Len(t, frames, 3)
					assert.Contains(t, frames[0], "api.example.com")
					assert.Contains(t, frames[1], "error at 00:00:02: reading http://h:1/debug/polite/: connection refused; trying again")
					assert.NotContains(t, frames[1], "api.example.com", "no stale page off a terminal")
					assert.Contains(t, frames[2], "api.example.com")
					return
				}
				assert.Equal(t, []int{24 - topHeadLines, 24 - topHeadLines, 24 - topHeadLines, 24 - topHeadLines}, asked, "as many keys as the terminal's height may show")
				require.True(t, strings.HasPrefix(got, ansiHideCursor+ansiHome+ansiClear), "the first frame clears the screen")
				assert.True(t, strings.HasSuffix(got, ansiClearBelow+ansiShowCursor), "the cursor comes back")
				frames := strings.Split(got, ansiHome)
				require.Len(t, frames, 4, "one frame each read but the last, each from the top left")
				assert.Contains(t, frames[2], "error at 00:00:02")
				assert.Contains(t, frames[2], "api.example.com", "the last page stays under the error")
				assert.Regexp(t, regexp.QuoteMeta(ansiClearLine+"\n"), frames[3])
			})
		})
	}
}
