package polite

import (
	"math"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/time/rate"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/engine"
)

// answer is an in-memory next that answers each request with the status
// the function gives for the n-th request (0-based), and Retry-After if
// the function gives one.
type answer func(n int) (status int, retryAfter string)

func (a answer) transport(calls *[]time.Time) http.RoundTripper {
	var mu sync.Mutex
	return roundTrip(func(req *http.Request) (*http.Response, error) {
		mu.Lock()
		n := len(*calls)
		*calls = append(*calls, time.Now())
		mu.Unlock()
		status, ra := a(n)
		h := http.Header{}
		if ra != "" {
			h.Set("Retry-After", ra)
		}
		return &http.Response{StatusCode: status, Header: h, Body: http.NoBody, Request: req}, nil
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func get(t *testing.T, tr *Transport, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func TestWithAdaptiveSelectsTheController(t *testing.T) {
	for _, tt := range []struct {
		mode AdaptiveMode
		want any
	}{
		{AdaptiveDefault, (*control.Gentle)(nil)},
		{AdaptiveCubic, (*control.Cubic)(nil)},
		{AdaptiveAIMD, (*control.AIMD)(nil)},
		{AdaptiveOff, nil},
		{AdaptiveMode(42), (*control.Gentle)(nil)},
	} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			tr := New(nil, WithAdaptive(tt.mode))
			ks := lookup(tr, "a.test")
			if tt.want == nil {
				assert.Nil(t, ks, "no state without a controller or a rate")
				return
			}
			require.NotNil(t, ks)
			assert.IsType(t, tt.want, tr.eng.Controller(ks))
		})
	}
	assert.Equal(t, "AdaptiveMode(42)", AdaptiveMode(42).String())
}

// A 429, or a 503 with Retry-After, is a throttle; a bare 503 is not.
func TestWhatThrottles(t *testing.T) {
	for _, tt := range []struct {
		status    int
		ra        string
		throttled bool
	}{
		{429, "", true}, {429, "1", true}, {503, "1", true}, {503, "", false}, {500, "1", false}, {200, "", false},
	} {
		t.Run(http.StatusText(tt.status)+" "+tt.ra, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls []time.Time
				next := answer(func(n int) (int, string) {
					if n == 0 {
						return 200, "" // so that the limit is not unknown
					}
					return tt.status, tt.ra
				}).transport(&calls)
				tr := New(next, WithMaxAttempts(1))
				get(t, tr, "http://a.test/")
				get(t, tr, "http://a.test/")
				assert.Equal(t, tt.throttled, tr.eng.Controller(lookup(tr, "a.test")).(*control.Gentle).Enabled())
			})
		})
	}
}

// Every attempt feeds the controller, retries included.
func TestEveryAttemptFeedsTheController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		next := answer(func(n int) (int, string) {
			if n < 3 {
				return 503, ""
			}
			return 200, ""
		}).transport(&calls)
		tr := New(next, WithAdaptive(AdaptiveCubic), WithBackoff(0, 0))
		assert.Equal(t, 200, get(t, tr, "http://a.test/"))
		c := tr.eng.Controller(lookup(tr, "a.test")).(*control.Cubic)
		assert.Equal(t, int32(4), c.Counted(), "four attempts, four updates, all in one measurement bucket")
	})
}

// Once throttled, the key's bucket follows the controller.
func TestBucketFollowsTheController(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls []time.Time
		next := answer(func(n int) (int, string) {
			if n == 300 {
				return 429, ""
			}
			return 200, ""
		}).transport(&calls)
		tr := New(next, WithMaxAttempts(1))
		start := time.Now()
		for range 300 { // 100 a second for 3 seconds: nothing throttled, nothing paced
			get(t, tr, "http://a.test/")
			time.Sleep(10 * time.Millisecond)
		}
		assert.Equal(t, 3*time.Second, time.Since(start))
		get(t, tr, "http://a.test/") // the 429
		ks := lookup(tr, "a.test")
		g := tr.eng.Controller(ks).(*control.Gentle)
		require.True(t, g.Enabled())
		assert.InDelta(t, 100, g.Limit(), 1e-9, "a floor: 300 accepted in 3 s")
		assert.InDelta(t, 99, ks.Bucket().Rate(), 1e-9, "the bucket at 0.99 of it")
		start = time.Now()
		for range 45 {
			get(t, tr, "http://a.test/")
		}
		// Paced one at a time from 99 a second, probing up from the floor
		// to at most twice the measured rate of responses: the 44 gaps
		// take between 44/200 and 44/99 s. Unpaced they would take none.
		elapsed := time.Since(start).Seconds()
		assert.GreaterOrEqual(t, elapsed, 44.0/200)
		assert.LessOrEqual(t, elapsed, 44.0/99)
	})
}

// A WithRate rate and burst are a ceiling the controller never lifts.
func TestWithRateIsACeilingForTheController(t *testing.T) {
	for _, mode := range []AdaptiveMode{AdaptiveDefault, AdaptiveCubic} {
		t.Run(mode.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := New(nil, WithRate(20, 2), WithAdaptive(mode))
				ks := lookup(tr, "a.test")
				ceiling, cap := tr.eng.Ceiling()
				ctl := tr.eng.Controller(ks)
				for range 1000 { // the server accepts 1000 a second
					time.Sleep(time.Millisecond)
					feed(ks, ctl, control.OK, 0, ceiling, cap)
				}
				feed(ks, ctl, control.Throttled, 0, ceiling, cap)
				r := ctl.Observe(time.Now(), control.OK, 0, control.NoMark, 0)
				require.True(t, r.Enabled)
				assert.Greater(t, r.PerSecond, 500.0, "the controller's rate")
				assert.Equal(t, 20.0, ks.Bucket().Rate(), "the bucket's rate")
				assert.Equal(t, min(r.Burst, 2), ks.Bucket().Burst(), "the bucket's burst: the controller's, at most 2")
			})
		})
	}
}

// A change of the rate reaches the calls already waiting: the head of the
// queue wakes on every change and waits for the new rate (go-peers.md §3,
// pitfall 20: x/time/rate does not re-time its reservations). Here the
// server's window is spent: a throttle and four refusals after it halve
// Gentle's rate four times; the window opens again while a call waits,
// and the call goes at the full rate instead of waiting out the halved
// one.
func TestRateChangesReachQueuedCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(nil)
		ks := lookup(tr, "a.test")
		for range 100 { // 100 responses a second for a second
			time.Sleep(10 * time.Millisecond)
			observe(ks, false)
		}
		for range 5 { // a spent window: refusals without a pause
			observe(ks, true)
		}
		halved := ks.Bucket().Rate()
		require.InDelta(t, 99.0/16, halved, 0.01, "0.99 of the 100 a second accepted, halved four times")

		for ks.Bucket().Take(time.Now()) { // empty the bucket
		}
		var c call
		require.NoError(t, c.init(tr, mustGet(t, "http://a.test/")))
		c.ec.Who.Attempt = 1
		start := time.Now()
		done := make(chan time.Duration)
		go func() {
			assert.NoError(t, tr.eng.Admit(&c.ec))
			c.ec.Release()
			done <- time.Since(start)
		}()
		synctest.Wait()    // queued for the token of 16/99 s from now
		observe(ks, false) // a success: the window opened
		full := ks.Bucket().Rate()
		require.InDelta(t, 99, full, 1)
		assert.InDelta(t, 1/full, (<-done).Seconds(), 1e-3, "waited for the new rate, not the halved one")
	})
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

// observe feeds ks's Gentle an outcome at the present, under no ceiling,
// as an answer would.
func observe(ks *engine.Key, throttled bool) {
	feed(ks, ks.Gentle(), outcomeOf(throttled), 0, rate.Inf, math.MaxInt32)
}

// feed feeds ctl, ks's controller, the outcome o of an attempt at the
// present, with the limit the server states, and makes ks's bucket
// follow it under the ceiling, as an answer would.
func feed(ks *engine.Key, ctl control.Controller, o control.Outcome, stated float64, ceiling rate.Limit, cap int) {
	now := time.Now()
	ks.Bucket().Follow(ctl, ctl.Observe(now, o, stated, control.NoMark, 0), now, 0, ceiling, cap)
}

// lookup returns the state tr holds for key; nil if none.
func lookup(tr *Transport, key string) *engine.Key {
	ks, _, _ := tr.eng.Lookup(key, false)
	if ks != nil {
		ks.Release() // the test reads the state: no call holds it
	}
	return ks
}
