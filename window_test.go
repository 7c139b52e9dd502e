package polite_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/proptest"
)

// WithWindow(100, time.Minute), 16 callers for 10 minutes: never 101
// requests in any minute, and at least 98% of the quota used.
func TestWindowNeverAllowsOneMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithWindow(100, time.Minute))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
					resp, err := tr.RoundTrip(req)
					if err != nil {
						return // refused: its wait would outlast the run
					}
					resp.Body.Close()
				}
			})
		}
		wg.Wait()
		next.mu.Lock()
		times := slices.Clone(next.times)
		next.mu.Unlock()
		require.NotEmpty(t, times)
		assert.LessOrEqual(t, proptest.MaxInWindow(times, time.Minute), 100)
		used := float64(len(times)) / (10 * 100)
		t.Logf("10 minutes of WithWindow(100, time.Minute): %d requests, %.3f of the quota", len(times), used)
		assert.GreaterOrEqual(t, used, 0.98)
	})
}

// A key's window outlives the key's idleness: WithWindow(3, time.Hour)
// with the idle timeout at a minute, 3 requests at once, then calls to
// other keys for 10 minutes, which rotate every shard of the registry
// many times over: the 4th request to the key still waits for the hour.
// Forgetting the key forgot the window's sends, and let 3 more go at once.
func TestWindowOutlivesIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithWindow(3, time.Hour), polite.WithIdleTimeout(time.Minute))
		start := time.Now()
		for range 3 {
			fetch(t, tr, "http://api.test/")
		}
		for round := range 10 {
			time.Sleep(time.Minute)
			for i := range 100 {
				fetch(t, tr, fmt.Sprintf("http://other%d-%d.test/", round, i))
			}
		}
		before := time.Now()
		fetch(t, tr, "http://api.test/")
		assert.GreaterOrEqual(t, time.Since(start), time.Hour, "the 4th request to api.test went %v after the first", time.Since(start))
		assert.Greater(t, time.Since(before), 49*time.Minute)
	})
}

// The window composes with the rate: a request waits for both.
func TestWindowComposesWithRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithRate(10, 1), polite.WithWindow(5, time.Second))
		start := time.Now()
		for range 6 {
			fetch(t, tr, "http://api.test/")
		}
		next.mu.Lock()
		defer next.mu.Unlock()
		var at []time.Duration
		for _, tm := range next.times {
			at = append(at, tm.Sub(start))
		}
		ms := time.Millisecond
		assert.Equal(t, []time.Duration{0, 100 * ms, 200 * ms, 300 * ms, 400 * ms, 1050 * ms}, at,
			"paced at 10 a second, and the 6th a window (and its guard) after the first")
	})
}

// A call that gives up its wait for the window gives its place back when
// no later call booked after it.
func TestWindowWaitRespectsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithWindow(1, time.Second))
		fetch(t, tr, "http://api.test/")
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := get(t, ctx, tr, "http://api.test/")
		var te *polite.ThrottledError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, 1, next.calls())
		start := time.Now()
		fetch(t, tr, "http://api.test/")
		assert.Equal(t, 1050*time.Millisecond, time.Since(start), "the refused call took no place")
	})
}
