package polite_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// busy is a next whose requests take a second each; it records the most it
// saw at once.
type busy struct {
	now, peak atomic.Int32
}

func (b *busy) RoundTrip(req *http.Request) (*http.Response, error) {
	n := b.now.Add(1)
	for {
		p := b.peak.Load()
		if n <= p || b.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(time.Second)
	b.now.Add(-1)
	return respond(req, http.StatusOK, newBody("page")), nil
}

func TestMaxInFlightCapsEachKey(t *testing.T) {
	for _, mode := range []polite.AdaptiveMode{polite.AdaptiveDefault, polite.AdaptiveOff} {
		t.Run(mode.String(), func(t *testing.T) { testMaxInFlight(t, mode) })
	}
}

func testMaxInFlight(t *testing.T, mode polite.AdaptiveMode) {
	synctest.Test(t, func(t *testing.T) {
		next := &busy{}
		tr := polite.New(next, polite.WithMaxInFlight(2), polite.WithAdaptive(mode))
		start := time.Now()
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustRequest(t, t.Context(), "http://a.test/"))
				if assert.NoError(t, err) {
					readBody(t, resp)
				}
			})
		}
		resp, err := tr.RoundTrip(mustRequest(t, t.Context(), "http://b.test/")) // another key: not held
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, time.Second, time.Since(start))
		wg.Wait()
		assert.Equal(t, int32(3), next.peak.Load(), "two for a.test, one for b.test")
		assert.Equal(t, 3*time.Second, time.Since(start), "five requests, two at a time")
	})
}

// A place is held until the caller is done with the body.
func TestMaxInFlightHoldsUntilTheBodyIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithMaxInFlight(1))
		first, err := tr.RoundTrip(mustRequest(t, t.Context(), "http://a.test/"))
		require.NoError(t, err)

		done := make(chan struct{})
		go func() {
			resp, err := tr.RoundTrip(mustRequest(t, t.Context(), "http://a.test/"))
			if assert.NoError(t, err) {
				readBody(t, resp)
			}
			close(done)
		}()
		synctest.Wait()
		assert.Equal(t, 1, next.calls(), "the second waits while the first body is open")
		readBody(t, first) // read to the end and closed
		<-done
		assert.Equal(t, 2, next.calls())

		// A caller that gives up waiting leaves the line.
		held, err := tr.RoundTrip(mustRequest(t, t.Context(), "http://a.test/"))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = tr.RoundTrip(mustRequest(t, ctx, "http://a.test/"))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		readBody(t, held)
		resp, err := tr.RoundTrip(mustRequest(t, t.Context(), "http://a.test/"))
		require.NoError(t, err, "the place is free again")
		readBody(t, resp)
	})
}

// Retries take a place again; responses polite discards free theirs.
func TestMaxInFlightWithRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503), status(503), status(200))
		tr := polite.New(next, polite.WithMaxInFlight(1), polite.WithBackoff(0, 0))
		fetch(t, tr, "http://a.test/")
		assert.Equal(t, 3, next.calls())
		resp, err := get(t, t.Context(), tr, "http://a.test/")
		require.NoError(t, err, "no place leaked")
		readBody(t, resp)
	})
}

func TestGlobalRateOnTopOfKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := polite.New(newStub(status(200)), polite.WithGlobalRate(2, 1))
		start := time.Now()
		for _, host := range []string{"a.test", "b.test", "c.test", "d.test"} {
			fetch(t, tr, "http://"+host+"/")
		}
		assert.Equal(t, 1500*time.Millisecond, time.Since(start), "2 a second, whatever the host")

		// Both must allow: the key's 1/s holds under a global 10/s.
		tr = polite.New(newStub(status(200)), polite.WithGlobalRate(10, 1), polite.WithRate(1, 1))
		start = time.Now()
		for range 2 {
			fetch(t, tr, "http://a.test/")
		}
		assert.Equal(t, time.Second, time.Since(start))

		// A global wait past the deadline is refused at once.
		tr = polite.New(newStub(status(200)), polite.WithGlobalRate(0.5, 1))
		fetch(t, tr, "http://a.test/")
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := get(t, ctx, tr, "http://b.test/")
		var te *polite.ThrottledError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, 2*time.Second, te.Wait)
	})
}
