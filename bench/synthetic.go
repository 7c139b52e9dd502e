package main

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// githubWindow is the length of the github server's fixed windows.
const githubWindow = 5 * time.Second

// startBucket starts a synthetic server that follows cfg.profile exactly: a
// token bucket of capacity 10 refilled at the profile's rate (for one
// request at a time, the same decisions as GCRA with burst 10), answering
// 429 with Retry-After in whole seconds, rounded up and at least 1, and 503
// without Retry-After to everything during an outage.
func startBucket(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	b := &bucket{profile: cfg.profile, origin: origin, duration: cfg.duration, tokens: burst}
	return serveInProcess(b.limit, origin)
}

// A bucket is a token bucket of capacity burst whose refill rate follows a
// profile. It is safe for concurrent use.
type bucket struct {
	profile  profile
	origin   time.Time
	duration time.Duration

	mu     sync.Mutex
	tokens float64
	last   time.Duration // time since origin of the last refill
}

// take takes a token at now, if there is one; if not, it returns how long
// until there will be.
func (b *bucket) take(now time.Time) (ok bool, wait time.Duration) {
	elapsed := now.Sub(b.origin)
	b.mu.Lock()
	defer b.mu.Unlock()
	if elapsed > b.last {
		b.tokens = min(burst, b.tokens+b.profile.integral(b.last, elapsed, b.duration))
		b.last = elapsed
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	rate := b.profile.rateAt(elapsed, b.duration)
	return false, time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

// limit is the bucket's middleware.
func (b *bucket) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		if b.profile.downAt(now.Sub(b.origin), b.duration) {
			http.Error(w, "service unavailable", http.StatusServiceUnavailable)
			return
		}
		if ok, wait := b.take(now); !ok {
			secs := max(1, int(math.Ceil(wait.Seconds())))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			http.Error(w, "too many requests", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// startGitHub starts a synthetic GitHub-style server: fixed windows of
// githubWindow from the server's start, each allowing L×githubWindow
// requests, with GitHub's X-RateLimit-* headers on every answer and a 429
// without Retry-After once a window is spent.
func startGitHub(cfg serverConfig) (*instance, error) {
	origin := time.Now()
	quota := perWindow(cfg, githubWindow)
	f := &fixedWindow{origin: origin, window: githubWindow, quota: quota, github: true}
	return serveInProcess(f.limit, origin)
}

// A fixedWindow counts requests in fixed windows from origin. It is safe for
// concurrent use.
type fixedWindow struct {
	origin time.Time
	window time.Duration
	quota  int  // requests allowed in each window
	github bool // also GitHub's X-RateLimit-Used and -Resource, and its JSON body on a refusal

	mu    sync.Mutex
	index int64 // number of the current window
	used  int   // requests allowed in it so far
}

// take counts a request at now if the current window has room. It returns
// the requests used in the window, counting this one if allowed, and the
// window's end.
func (f *fixedWindow) take(now time.Time) (ok bool, used int, reset time.Time) {
	index := int64(now.Sub(f.origin) / f.window)
	f.mu.Lock()
	defer f.mu.Unlock()
	if index != f.index {
		f.index, f.used = index, 0
	}
	if f.used < f.quota {
		f.used++
		ok = true
	}
	return ok, f.used, f.origin.Add(time.Duration(index+1) * f.window)
}

// limit is the fixed window's middleware: a Date and X-RateLimit-Limit,
// -Remaining and -Reset (the window's end, Unix seconds rounded up) on
// every answer, and a 429 without Retry-After once the window is spent.
func (f *fixedWindow) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		ok, used, reset := f.take(now)
		h := w.Header()
		h.Set("Date", now.UTC().Format(http.TimeFormat))
		h.Set("X-RateLimit-Limit", strconv.Itoa(f.quota))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(f.quota-used))
		h.Set("X-RateLimit-Reset", strconv.FormatInt(ceilUnix(reset), 10))
		if f.github {
			h.Set("X-RateLimit-Used", strconv.Itoa(used))
			h.Set("X-RateLimit-Resource", "core")
		}
		switch {
		case ok:
			next.ServeHTTP(w, r)
		case f.github:
			h.Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"message":"API rate limit exceeded","status":"429"}`+"\n")
		default:
			http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
		}
	})
}

// ceilUnix returns t as Unix seconds, rounded up.
func ceilUnix(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
