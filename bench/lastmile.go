package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The servers of issue 37: three kinds of limit the others do not cover.
// window-aligned counts in windows of the wall clock, window-seconds
// states its reset as seconds to wait, and delay slows instead of
// refusing.

const (
	// alignedWindow is the length of the window-aligned server's windows.
	alignedWindow = 2 * time.Second
	// secondsWindow is the length of the window-seconds server's windows.
	secondsWindow = time.Second
	// delayWindow is the length of the delay server's windows, and
	// delayStep how much longer each request past the limit in a window
	// is held than the one before it.
	delayWindow = time.Second
	delayStep   = time.Second
)

// statusAbandoned is what the delay server records for a request it held
// and never answered, because its client went away or the server stopped:
// nginx's 499 ("client closed request"). It is neither a 2xx nor a
// refusal, so the run counts it as an attempt only.
const statusAbandoned = 499

// startWindowAligned starts a synthetic server of fixed windows aligned to
// the wall clock: window k covers Unix time [2k s, 2k+2 s), whatever the
// server's start, so a run's first window is cut short by the time the
// run started into it. Each window allows 2·L requests (200 at L = 100).
// Every answer carries a Date, X-RateLimit-Limit (2·L),
// X-RateLimit-Remaining and X-RateLimit-Reset, the window's end as Unix
// seconds (whole: the windows end on even seconds); a spent window
// answers 429 with the same headers, Remaining 0 and no Retry-After.
func startWindowAligned(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	quota := perWindow(cfg, alignedWindow)
	f := &fixedWindow{origin: time.Unix(0, 0), window: alignedWindow, quota: quota}
	return serveInProcess(f.limit, origin)
}

// startWindowSeconds starts a synthetic server that behaves as fastify's
// rate-limit plugin (@fastify/rate-limit 11.2.0, its LocalStore) does with
// max L and timeWindow 1 s (its defaults are 1000 a minute), as read from
// its index.js and store/LocalStore.js:
//
//   - A fixed window of 1 s opened by the first request after the last one
//     expired (at or after its start + 1 s), aligned to nothing. Every
//     request counts, refused ones too; with continueExceeding off (the
//     default) they do not extend the window, so counting them changes
//     nothing but the count.
//   - Every answer carries x-ratelimit-limit (L), x-ratelimit-remaining
//     (max(0, L − count), so 0 on a refusal) and x-ratelimit-reset, the
//     time left in the window in seconds rounded up: always 1 at a 1-s
//     window, never a Unix time. The names go on the wire lower-case, as
//     fastify writes every header; Go's client canonicalizes them.
//   - A request past L in its window gets 429 with those headers,
//     retry-after in the same seconds, and the body fastify's error
//     handler makes of the plugin's error: {"statusCode":429,"error":"Too
//     Many Requests","message":"Rate limit exceeded, retry in 1 second"}
//     (application/json; charset=utf-8).
//
// The plugin keys by the client's IP by default; the bench's clients all
// come from 127.0.0.1, so one counter serves them all. It reads the clock
// in milliseconds, this server in nanoseconds, which changes nothing but
// where within a millisecond a window ends.
func startWindowSeconds(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	quota := perWindow(cfg, secondsWindow)
	f := &firstRequestWindow{window: secondsWindow, quota: quota}
	return serveInProcess(f.limit, origin)
}

// A firstRequestWindow counts requests in fixed windows, each opened by
// the first request after the previous one expired, as fastify's
// rate-limit plugin does. It is safe for concurrent use.
type firstRequestWindow struct {
	window time.Duration
	quota  int // requests allowed in each window

	mu     sync.Mutex
	opened time.Time // when the current window opened; zero before the first request
	count  int       // requests in it so far, refused ones too
}

// take counts a request at now and returns the requests of its window so
// far, this one included (over quota: refused), and the time left in the
// window, always above 0.
func (f *firstRequestWindow) take(now time.Time) (count int, left time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.opened.IsZero() || !now.Before(f.opened.Add(f.window)) {
		f.opened, f.count = now, 0
	}
	f.count++
	return f.count, f.opened.Add(f.window).Sub(now)
}

// limit is the window's middleware.
func (f *firstRequestWindow) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count, left := f.take(time.Now())
		secs := int(math.Ceil(left.Seconds()))
		reset := strconv.Itoa(secs)
		h := w.Header()
		// Set directly, to keep fastify's lower-case names on the wire.
		h["x-ratelimit-limit"] = []string{strconv.Itoa(f.quota)}
		h["x-ratelimit-remaining"] = []string{strconv.Itoa(max(0, f.quota-count))}
		h["x-ratelimit-reset"] = []string{reset}
		if count <= f.quota {
			next.ServeHTTP(w, r)
			return
		}
		h["retry-after"] = []string{reset}
		h.Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusTooManyRequests)
		body, _ := json.Marshal(struct { // of strings and an int: cannot fail
			StatusCode int    `json:"statusCode"`
			Error      string `json:"error"`
			Message    string `json:"message"`
		}{http.StatusTooManyRequests, "Too Many Requests", "Rate limit exceeded, retry in " + seconds(secs)})
		_, _ = w.Write(body)
	})
}

// seconds writes n seconds as the ms package's long format does: "1
// second", "2 seconds".
func seconds(n int) string {
	if n == 1 {
		return "1 second"
	}
	return fmt.Sprintf("%d seconds", n)
}

// startDelay starts a synthetic server that slows instead of refusing:
// fixed windows of 1 s from the server's start; the n-th request of a
// window, n > L, is held (n − L) seconds from its arrival and then
// answered 200, so every request past L waits a second longer than the
// one before it. It never refuses and sends no rate-limit header. A held
// request that its client gives up on, or that the server's stop finds
// still held, ends at once, recorded as statusAbandoned; the stop waits
// for every held request to end.
func startDelay(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	quota := perWindow(cfg, delayWindow)
	d := newDelayer(origin, delayWindow, delayStep, quota)
	return serveInProcess(d.limit, origin, d.close)
}

// A delayer counts requests in fixed windows from origin and holds those
// past quota in a window. It is safe for concurrent use.
type delayer struct {
	origin time.Time
	window time.Duration
	step   time.Duration // the hold of the first request past quota, and each one's more than the one before
	quota  int           // requests answered at once in each window
	quit   chan struct{} // closed when the server stops
	held   sync.WaitGroup

	mu     sync.Mutex
	index  int64 // number of the current window
	seen   int   // requests in it so far
	closed bool  // quit is closed: hold no more
}

// newDelayer returns a delayer of windows of window from origin, each
// answering quota requests at once and holding the n-th past it n steps.
func newDelayer(origin time.Time, window, step time.Duration, quota int) *delayer {
	return &delayer{origin: origin, window: window, step: step, quota: quota, quit: make(chan struct{})}
}

// take counts a request at now and returns how long to hold it: 0 for the
// first quota requests of its window, (n − quota) steps for the n-th.
func (d *delayer) take(now time.Time) time.Duration {
	index := int64(now.Sub(d.origin) / d.window)
	d.mu.Lock()
	defer d.mu.Unlock()
	if index != d.index {
		d.index, d.seen = index, 0
	}
	d.seen++
	return time.Duration(max(0, d.seen-d.quota)) * d.step
}

// enter registers a held request, unless the server has stopped.
func (d *delayer) enter() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.held.Add(1)
	return true
}

// close ends every held request and waits for them to return. It is the
// instance's closer, run once the server is closed.
func (d *delayer) close() {
	d.mu.Lock()
	if !d.closed {
		d.closed = true
		close(d.quit)
	}
	d.mu.Unlock()
	d.held.Wait()
}

// limit is the delayer's middleware.
func (d *delayer) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hold := d.take(time.Now())
		if hold > 0 {
			if !d.enter() {
				w.WriteHeader(statusAbandoned)
				return
			}
			defer d.held.Done()
			t := time.NewTimer(hold)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				w.WriteHeader(statusAbandoned)
				return
			case <-d.quit:
				w.WriteHeader(statusAbandoned)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
