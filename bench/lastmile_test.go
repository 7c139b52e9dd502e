package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The window-aligned server's windows are the wall clock's: a window of
// 2 s that the server started 1.5 s into ends 0.5 s later, and its reset
// is that end in whole Unix seconds.
func TestWindowAlignedTake(t *testing.T) {
	f := &fixedWindow{origin: time.Unix(0, 0), window: alignedWindow, quota: 3}
	at := func(ms int64) time.Time { return time.UnixMilli(1_000_000 + ms) } // Unix 1000 s: a window's start
	tests := []struct {
		ms    int64
		ok    bool
		used  int
		reset int64 // Unix seconds
	}{
		{1500, true, 1, 1002},
		{1600, true, 2, 1002},
		{1999, true, 3, 1002},
		{1999, false, 3, 1002},
		{2000, true, 1, 1004}, // the next window, at its first instant
		{3999, true, 2, 1004},
		{4000, true, 1, 1006},
	}
	for _, tt := range tests {
		ok, used, reset := f.take(at(tt.ms))
		assert.Equal(t, tt.ok, ok, tt.ms)
		assert.Equal(t, tt.used, used, tt.ms)
		assert.Equal(t, tt.reset, ceilUnix(reset), tt.ms)
		assert.Zero(t, reset.Nanosecond(), "windows end on whole seconds")
	}
}

// Every answer of the window-aligned server carries its limit, what is
// left and the window's end; a spent window refuses with a 429 that says
// the same and no Retry-After.
func TestWindowAlignedHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The bubble's clock starts at 2000-01-01T00:00:00Z, Unix 946684800: a window's start.
		time.Sleep(500 * time.Millisecond)
		f := &fixedWindow{origin: time.Unix(0, 0), window: alignedWindow, quota: 2}
		h := f.limit(okHandler())
		for i, want := range []struct {
			status    int
			remaining string
		}{{200, "1"}, {200, "0"}, {429, "0"}} {
			w := serve(h, context.Background())
			assert.Equal(t, want.status, w.Code, i)
			assert.Equal(t, "2", w.Header().Get("X-RateLimit-Limit"), i)
			assert.Equal(t, want.remaining, w.Header().Get("X-RateLimit-Remaining"), i)
			assert.Equal(t, "946684802", w.Header().Get("X-RateLimit-Reset"), i)
			assert.Equal(t, "Sat, 01 Jan 2000 00:00:00 GMT", w.Header().Get("Date"), i)
			assert.Empty(t, w.Header().Get("Retry-After"), i)
			assert.Empty(t, w.Header().Get("X-RateLimit-Used"), i, "GitHub's, not this server's")
		}
		time.Sleep(1500 * time.Millisecond)
		w := serve(h, context.Background())
		assert.Equal(t, 200, w.Code, "the next window")
		assert.Equal(t, "946684804", w.Header().Get("X-RateLimit-Reset"))
	})
}

// The window-seconds server's window opens at the first request after the
// last one expired, counts refused requests too, and is gone at its
// start + 1 s.
func TestWindowSecondsTake(t *testing.T) {
	t0 := time.Unix(1000, 123_456_789)
	f := &firstRequestWindow{window: time.Second, quota: 2}
	tests := []struct {
		after time.Duration
		count int
		left  time.Duration
	}{
		{0, 1, time.Second},
		{300 * time.Millisecond, 2, 700 * time.Millisecond},
		{500 * time.Millisecond, 3, 500 * time.Millisecond}, // refused, and counted
		{999 * time.Millisecond, 4, time.Millisecond},
		{time.Second, 1, time.Second}, // expired at start + 1 s: a new window opens
		{1700 * time.Millisecond, 2, 300 * time.Millisecond},
		{3500 * time.Millisecond, 1, time.Second},
	}
	for _, tt := range tests {
		count, left := f.take(t0.Add(tt.after))
		assert.Equal(t, tt.count, count, tt.after)
		assert.Equal(t, tt.left, left, tt.after)
	}
}

// The window-seconds server speaks as fastify's plugin does: lower-case
// x-ratelimit-* on every answer, a reset of 1 (seconds, rounded up), and
// past the limit a 429 with retry-after and fastify's JSON error.
func TestWindowSecondsHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &firstRequestWindow{window: time.Second, quota: 2}
		h := f.limit(okHandler())
		for i, want := range []struct {
			status    int
			remaining string
		}{{200, "1"}, {200, "0"}, {429, "0"}, {429, "0"}} {
			w := serve(h, context.Background())
			assert.Equal(t, want.status, w.Code, i)
			assert.Equal(t, []string{"2"}, w.Header()["x-ratelimit-limit"], i)
			assert.Equal(t, []string{want.remaining}, w.Header()["x-ratelimit-remaining"], i)
			assert.Equal(t, []string{"1"}, w.Header()["x-ratelimit-reset"], i)
			if want.status == 429 {
				assert.Equal(t, []string{"1"}, w.Header()["retry-after"], i)
				assert.Equal(t, "application/json; charset=utf-8", w.Header().Get("Content-Type"), i)
				assert.Equal(t, `{"statusCode":429,"error":"Too Many Requests","message":"Rate limit exceeded, retry in 1 second"}`, w.Body.String(), i)
			} else {
				assert.NotContains(t, w.Header(), "retry-after", i)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(600 * time.Millisecond) // the window opened 1 s ago
		w := serve(h, context.Background())
		assert.Equal(t, 200, w.Code)
		assert.Equal(t, []string{"1"}, w.Header()["x-ratelimit-remaining"])
	})
}

func TestSeconds(t *testing.T) {
	assert.Equal(t, "1 second", seconds(1))
	assert.Equal(t, "2 seconds", seconds(2))
	assert.Equal(t, "0 seconds", seconds(0))
}

// The delay server answers the first L requests of a window at once and
// holds the n-th past them n steps; a new window starts again at once.
func TestDelayTake(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := newDelayer(t0, time.Second, time.Second, 2)
	tests := []struct {
		after time.Duration
		hold  time.Duration
	}{
		{0, 0},
		{100 * time.Millisecond, 0},
		{200 * time.Millisecond, time.Second},
		{300 * time.Millisecond, 2 * time.Second},
		{999 * time.Millisecond, 3 * time.Second},
		{time.Second, 0}, // the next window
		{1500 * time.Millisecond, 0},
		{1600 * time.Millisecond, time.Second},
		{5 * time.Second, 0},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.hold, d.take(t0.Add(tt.after)), tt.after)
	}
}

// A held request is answered 200 after its hold, and the recorder counts
// it so; one whose client goes away, or that the server's stop finds
// held, ends at once as statusAbandoned, and the stop waits for it.
func TestDelayHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		d := newDelayer(time.Now(), time.Second, time.Second, 1)
		h := rec.wrap(d.limit(okHandler()))

		assert.Equal(t, 200, serve(h, context.Background()).Code)
		// Two past the limit at once: held 1 s and 2 s, in whichever order they came.
		var (
			mu    sync.Mutex
			holds []time.Duration
			wg    sync.WaitGroup
		)
		for range 2 {
			wg.Go(func() {
				began := time.Now()
				assert.Equal(t, 200, serve(h, context.Background()).Code)
				mu.Lock()
				holds = append(holds, time.Since(began))
				mu.Unlock()
			})
		}
		wg.Wait()
		assert.ElementsMatch(t, []time.Duration{time.Second, 2 * time.Second}, holds)

		// The window of 2 s to 3 s: one at once, then one whose client gives up.
		assert.Equal(t, 200, serve(h, context.Background()).Code)
		ctx, cancel := context.WithCancel(context.Background())
		var gaveUp *httptest.ResponseRecorder
		wg.Go(func() { gaveUp = serve(h, ctx) })
		time.Sleep(100 * time.Millisecond)
		cancel()
		wg.Wait()
		assert.Equal(t, statusAbandoned, gaveUp.Code)

		// One held when the server stops.
		var stopped *httptest.ResponseRecorder
		wg.Go(func() { stopped = serve(h, context.Background()) })
		synctest.Wait()
		began := time.Now()
		d.close()
		assert.Zero(t, time.Since(began), "the stop waits for no hold to run out")
		wg.Wait()
		assert.Equal(t, statusAbandoned, stopped.Code)
		assert.Equal(t, statusAbandoned, serve(h, context.Background()).Code, "after the stop, nothing is held")

		var statuses []int
		for _, a := range rec.arrivals() {
			statuses = append(statuses, a.status)
		}
		assert.Equal(t, []int{200, 200, 200, 200, statusAbandoned, statusAbandoned, statusAbandoned}, statuses)
	})
}

// The three servers over loopback, started as the bench starts them:
// the first answer and the first refusal on the wire.
func TestLastMileServersOverLoopback(t *testing.T) {
	tests := []struct {
		name           string
		first, refusal []string // lines each must hold
	}{
		{"window-aligned",
			[]string{"HTTP/1.1 200 OK", "X-Ratelimit-Limit: 4", "X-Ratelimit-Remaining: 3", "X-Ratelimit-Reset: ", "Date: "},
			[]string{"HTTP/1.1 429 Too Many Requests", "X-Ratelimit-Limit: 4", "X-Ratelimit-Remaining: 0"}},
		{"window-seconds",
			[]string{"HTTP/1.1 200 OK", "x-ratelimit-limit: 2", "x-ratelimit-remaining: 1", "x-ratelimit-reset: 1"},
			[]string{"HTTP/1.1 429 Too Many Requests", "x-ratelimit-remaining: 0", "retry-after: 1", `"message":"Rate limit exceeded, retry in 1 second"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := find(t, servers(), serverName, tt.name)
			first, refusal, err := sample(s, runConfig{limit: 2, duration: time.Second})
			require.NoError(t, err)
			for _, line := range tt.first {
				assert.Contains(t, first, line)
			}
			for _, line := range tt.refusal {
				assert.Contains(t, refusal, line)
			}
			assert.NotContains(t, first+refusal, "Retry-After", "fastify's is lower-case; the aligned window sends none")
		})
	}
}

// The delay server over loopback: the stop ends a request still held, at
// once, and the recorder counts it abandoned.
func TestDelayOverLoopback(t *testing.T) {
	origin := time.Now()
	d := newDelayer(origin, time.Hour, time.Hour, 1)
	inst, err := serveInProcess(d.limit, origin, d.close)
	require.NoError(t, err)
	get := func() error {
		resp, err := http.Get(inst.url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	require.NoError(t, get())
	errs := make(chan error, 1)
	go func() { errs <- get() }() // held an hour
	require.Eventually(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.seen == 2
	}, 5*time.Second, time.Millisecond)
	began := time.Now()
	arrivals, err := inst.stop()
	require.NoError(t, err)
	assert.Less(t, time.Since(began), time.Second, "the stop does not wait out the hold")
	assert.Error(t, <-errs)
	require.Len(t, arrivals, 2)
	assert.Equal(t, []int{200, statusAbandoned}, []int{arrivals[0].status, arrivals[1].status})
}

// serve serves one GET / through h with ctx, in process.
func serve(h http.Handler, ctx context.Context) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx))
	return w
}
