package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// TestStatusPageInABrowser opens the status page (Transport.StatusHandler)
// in a real browser, Debian's chromium driven by chromedp, while a polite
// Transport sends to a backend over loopback, and checks what a person
// sees: the backend's row, its chart drawn as the page polls, the reason
// line when the backend pauses polite with a Retry-After, and the search
// box. Real sockets, a real browser and the page's own one-second polling:
// each wait is real and bounded. The page's screenshot is written to
// $POLITE_SCREENSHOT if set (to look at), else to the test's directory.
//
// It skips when chromium is missing, unless POLITE_REQUIRE_BROWSER=1 (as
// in CI), and in short mode.
func TestStatusPageInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("short: starts chromium")
	}
	chromium := findChromium(t)
	start := time.Now()

	// The backend answers 200 until told to throttle: then 429 with a
	// Retry-After of 30 s.
	var throttle atomic.Bool
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if throttle.Load() {
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(w, "ok\n")
	}))
	defer backend.Close()
	backendURL, err := url.Parse(backend.URL)
	require.NoError(t, err)
	host := backendURL.Host

	// Another key, called once, so that a search has a row to leave out.
	quiet := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer quiet.Close()

	pt := polite.New(backend.Client().Transport)
	client := &http.Client{Transport: pt}
	resp, err := client.Get(quiet.URL)
	require.NoError(t, err, "calling the quiet server")
	resp.Body.Close()
	mux := http.NewServeMux()
	mux.Handle("/debug/polite/", http.StripPrefix("/debug/polite", pt.StatusHandler()))
	status := httptest.NewServer(mux)
	defer status.Close()

	// Three callers send to the backend until the test ends, each at most
	// every 20 ms, so that the machine is left to the browser.
	callers, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	for range 3 {
		wg.Go(func() { call(callers, client, backend.URL+"/items") })
	}

	// Chromium lives 90 s at most, whatever hangs.
	life, end := context.WithTimeout(t.Context(), 90*time.Second)
	defer end()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(life,
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 800),
	)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithLogf(t.Logf))
	defer cancelBrowser()
	// The first action starts chromium, which lives as long as ctx: each
	// action after it has a deadline of its own (see do and waitFor).
	require.NoError(t, chromedp.Do(ctx), "starting chromium")
	require.NoError(t, do(ctx, chromedp.Navigate(status.URL+"/debug/polite/")), "opening the status page")
	t.Logf("chromium opened the page in %v", time.Since(start).Round(time.Millisecond))

	// (a) The backend's key comes as a row, with its state and rate.
	v := waitFor(t, ctx, host, 10*time.Second, "the backend's row", func(v view) bool {
		return v.Found && v.State != "" && v.Rate != ""
	})
	assert.Equal(t, host, v.Name, "the row's key")
	assert.Contains(t, v.Count, "2 keys", "the count above the table")
	assert.Equal(t, 2, v.Rows, "the table's rows: the backend and the quiet server")

	// (b) The row's chart is drawn once the page has read it twice or more:
	// a line of two points or more.
	v = waitFor(t, ctx, host, 15*time.Second, "the row's chart drawn", func(v view) bool {
		return strings.Contains(v.Sent, " L") || strings.Contains(v.RateLine, " L")
	})
	t.Logf("the chart's lines: sent %q, rate %q", v.Sent, v.RateLine)

	// (c) The backend pauses polite: the reason line says so.
	throttle.Store(true)
	v = waitFor(t, ctx, host, 15*time.Second, "the reason line after a Retry-After", func(v view) bool {
		return strings.Contains(v.Reason, "paused by the server's Retry-After until")
	})
	t.Logf("the reason line: %q", v.Reason)
	// A second more, so that the chart shows the refusals in the screenshot.
	waitFor(t, ctx, host, 10*time.Second, "the refusals charted", func(v view) bool { return v.Refused > 0 })

	// (d) A search that matches nothing empties the table; the backend's
	// host brings its row back.
	const nothing = "no-such-host.invalid"
	require.NoError(t, do(ctx, chromedp.SendKeys(chromedp.ID("q"), nothing)))
	v = waitFor(t, ctx, host, 10*time.Second, "an empty table for a search that matches nothing", func(v view) bool {
		return v.Rows == 0 && strings.Contains(v.Count, "0 shown")
	})
	assert.Contains(t, v.Count, "0 holding", "the count above the table")
	// Erased as a person does, key by key: chromedp.Clear sets the value
	// attribute, which leaves what was typed in the box.
	require.NoError(t, do(ctx, chromedp.SendKeys(chromedp.ID("q"), strings.Repeat(kb.Backspace, len(nothing))+host)))
	waitFor(t, ctx, host, 10*time.Second, "the row back for a search of its host", func(v view) bool {
		return v.Found && v.Rows == 1 && strings.Contains(v.Count, "1 holding “"+host+"”, 1 shown")
	})

	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100)) // 100: a PNG
	require.NoError(t, err, "the page's screenshot")
	shot := os.Getenv("POLITE_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "status.png")
	}
	require.NoError(t, os.WriteFile(shot, png, 0o644))
	t.Logf("the page's screenshot: %s (%d bytes); the test took %v", shot, len(png), time.Since(start).Round(time.Millisecond))
}

// do runs the actions in the browser of ctx, within 10 s.
func do(ctx context.Context, steps ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return chromedp.Do(ctx, steps...)
}

// findChromium returns the path of Debian's chromium; without one it skips
// the test, or fails it if POLITE_REQUIRE_BROWSER=1.
func findChromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		path, err = exec.LookPath("/usr/bin/chromium")
	}
	if err == nil {
		return path
	}
	msg := "chromium is not installed (apt-get install chromium): the status page is not tested in a browser"
	if os.Getenv("POLITE_REQUIRE_BROWSER") == "1" {
		t.Fatal(msg + ", and POLITE_REQUIRE_BROWSER=1 requires it")
	}
	t.Skip(msg)
	return ""
}

// call sends GETs of u through client until ctx is done, at most one each
// 20 ms; each call's deadline is 5 s.
func call(ctx context.Context, client *http.Client, u string) {
	for ctx.Err() == nil {
		func() {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
		}()
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// A view is what the page shows of one key's row, and of the page around it.
type view struct {
	Found    bool   `json:"found"`
	Name     string `json:"name"`
	State    string `json:"state"`
	Rate     string `json:"rate"`
	Limit    string `json:"limit"`
	Minute   string `json:"minute"`
	Reason   string `json:"reason"`
	Sent     string `json:"sent"`     // the d of the chart's path.sent
	RateLine string `json:"rateLine"` // the d of its path.rate
	Refused  int    `json:"refused"`  // the chart's rect.refused
	Rows     int    `json:"rows"`     // the table's tr.key
	Count    string `json:"count"`
	Error    string `json:"error"`
}

// viewJS reads a view of the row whose data-key is KEY.
const viewJS = `(() => {
	const key = KEY;
	const v = {found: false, rows: 0, refused: 0};
	const rows = document.querySelectorAll("#keys tbody tr.key");
	v.rows = rows.length;
	v.count = document.getElementById("count").textContent;
	v.error = document.getElementById("error").textContent;
	const tr = Array.from(rows).find(tr => tr.dataset.key === key);
	if (!tr) return v;
	const text = c => tr.querySelector("td." + c).textContent;
	const d = c => { const p = tr.querySelector("td.history svg.chart path." + c); return p ? p.getAttribute("d") : ""; };
	Object.assign(v, {found: true, name: text("name"), state: text("state"), rate: text("rate"),
		limit: text("limit"), minute: text("minute"), reason: text("reason"),
		sent: d("sent"), rateLine: d("rate"),
		refused: tr.querySelectorAll("td.history svg.chart rect.refused").length});
	return v;
})()`

// waitFor reads the page's view of key every 200 ms until ok holds of it,
// and fails the test, with the last view read, if it does not within
// limit. The page itself must show no error.
func waitFor(t *testing.T, ctx context.Context, key string, limit time.Duration, what string, ok func(view) bool) view {
	t.Helper()
	k, err := json.Marshal(key)
	require.NoError(t, err)
	js := strings.Replace(viewJS, "KEY", string(k), 1)
	began := time.Now()
	deadline := began.Add(limit)
	var v view
	for {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err = chromedp.Run(tctx, chromedp.Evaluate[view](js))
		cancel()
		if err != nil {
			t.Fatalf("waiting for %s: reading the page: %v", what, err)
		}
		if v.Error != "" {
			t.Fatalf("waiting for %s: the page shows an error: %s", what, v.Error)
		}
		if ok(v) {
			t.Logf("%s after %v", what, time.Since(began).Round(10*time.Millisecond))
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v; the page shows: %+v", what, limit, v)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, context.Cause(ctx))
		case <-time.After(200 * time.Millisecond):
		}
	}
}
