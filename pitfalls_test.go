package polite_test

// Regression tests for the bugs that peer libraries have or had
// (shared/research/go-peers.md §3). Each would fail on the peer named.
// Pitfalls covered by tests elsewhere:
//
//	 1 uncapped Retry-After            TestRetryAfterOverCapIsReturnedAsIs, TestHostilePauseIsBounded
//	 3 HTTP-date coverage              TestRetryAfter, TestParseRetryAfter (headers_test.go)
//	 6 empty or truncated body replay  TestBodyWithoutGetBodyIsNotRetried, TestBodyReplayedByteForByte
//	 8 sleeping past the deadline      TestRetryThatCannotMeetTheDeadlineIsNotStarted, TestWaitPastDeadlineFailsAtOnce
//	10 cancelled waiter keeps token    TestCancelledWaitGivesTokenBack, TestPitfall10ConcurrentCancels
//	11 cap not enforced after jitter   TestBackoffIsFullJitterUnderTheCap, TestScheduleCapHoldsAfterJitter
//	12 backoff overflow                TestScheduleNeverOverflows (backoff_test.go)
//	13 zero-range jitter panics        TestFullJitterEdges (backoff_test.go)
//	15 POST retried by default         TestIdempotentMethodsOnly
//	16 retry-budget accounting         retrybudget_test.go
//	17 options that do nothing         TestEveryOptionHasAnEffect (options_test.go)
//	18 wrong limiter key               TestDefaultKeyIsHost, TestWithKey
//
// Pitfall 20 (runtime rate changes) concerns the adaptive rate controller.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// Pitfall 2: failsafe-go applies jitter to the Retry-After delay, so the
// retry can come before the server allowed it.
func TestPitfall02JitterNeverShortensRetryAfter(t *testing.T) {
	for _, bo := range [][2]time.Duration{{0, 0}, {time.Millisecond, time.Second}, {time.Second, 10 * time.Second}, {5 * time.Second, 5 * time.Second}} {
		synctest.Test(t, func(t *testing.T) {
			for range 100 {
				next := newStub(status(503, "Retry-After", "2"), status(429, "Retry-After", "1"), status(200))
				fetch(t, polite.New(next, polite.WithBackoff(bo[0], bo[1])), "http://a.test/")
				g := next.gaps()
				require.Len(t, g, 2)
				require.GreaterOrEqual(t, g[0], 2*time.Second, "backoff %v", bo)
				require.GreaterOrEqual(t, g[1], time.Second, "backoff %v", bo)
				require.Less(t, g[0], max(2*time.Second+1, bo[1]), "backoff %v", bo)
			}
		})
	}
}

// Pitfall 4: failsafe-go never closes the bodies of the responses it
// retries (3 opened, 1 closed), which leaks connections.
func TestPitfall04DiscardedBodiesAreDrainedAndClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		big := strings.Repeat("x", 1<<20)
		next := newStub(reply{status: 503, body: big}, reply{status: 502, body: big}, reply{status: 500, body: "short"}, reply{status: 200, body: big})
		resp, err := get(t, t.Context(), polite.New(next), "http://a.test/")
		require.NoError(t, err)
		next.checkDiscarded(t, true)
		assert.Equal(t, big, readBody(t, resp), "the returned body is whole")
		assert.Equal(t, int64(5), next.respBody[2].read.Load(), "a short body is drained to its end")
	})
}

// Pitfall 5: go-retryablehttp returns a response and an error together;
// failsafe-go hides the last response in an error; go-github-ratelimit
// returns an error although it has a response.
func TestPitfall05LastResponseReturnedWithoutError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503))
		resp, err := get(t, t.Context(), polite.New(next), "http://a.test/")
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		next.checkDiscarded(t, true)
		assert.Equal(t, "response 3", readBody(t, resp))
	})
}

func TestNextBreakingItsContractIsContained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := newBody("orphan")
		both := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return respond(req, 200, body), errors.New("both")
		})
		_, err := get(t, t.Context(), polite.New(both), "http://a.test/")
		assert.EqualError(t, err, "both")
		assert.True(t, body.closed.Load(), "the response that came with an error is closed")

		neither := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil })
		_, err = get(t, t.Context(), polite.New(neither), "http://a.test/")
		assert.Error(t, err)
	})
}

// Pitfall 7: go-retryablehttp and failsafe-go read a whole upload into
// memory to make it retryable.
func TestPitfall07BodiesAreNeverBuffered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got io.ReadCloser
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			got = req.Body
			_ = req.Body.Close() // unread, closed as a transport does
			return respond(req, 503, newBody("busy")), nil
		})
		upload := trackBody(io.LimitReader(zeros{}, 64<<20))
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://a.test/", upload)
		require.NoError(t, err)
		resp, err := roundTrip(t, polite.New(next), req)
		require.NoError(t, err)
		readBody(t, resp)
		assert.Same(t, upload, got, "next receives the caller's body itself")
		assert.Zero(t, upload.read.Load(), "polite read none of it")
	})
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// Pitfall 9: failsafe-go cancels the context it made for an attempt before
// the caller reads the body. polite makes no cancellable contexts: every
// attempt carries the caller's (a retry's adds its resend count to it), and
// the body is readable after RoundTrip returns.
func TestPitfall09BodyReadableAfterReturn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503), status(504), reply{status: 200, body: "the answer"})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		resp, err := get(t, ctx, polite.New(next), "http://a.test/")
		require.NoError(t, err)
		require.Len(t, next.reqs, 3)
		assert.Equal(t, ctx, next.reqs[0].Context(), "the first attempt carries the caller's context")
		for i, r := range next.reqs {
			assert.Equal(t, ctx.Done(), r.Context().Done(), "attempt %d is done when the caller's context is, not before", i+1)
			assert.Equal(t, i, polite.ResendCount(r.Context()), "attempt %d's resend count", i+1)
		}
		assert.NoError(t, ctx.Err())
		assert.Equal(t, "the answer", readBody(t, resp))
	})
}

// Pitfall 10, under concurrency: every cancelled waiter gives its token
// back, so the waiters that stay are served as if the others never came.
func TestPitfall10ConcurrentCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithRate(1, 1))
		fetch(t, tr, "http://a.test/")

		start := time.Now()
		var mu sync.Mutex
		var served []time.Duration
		cancelled, kept := make([]context.CancelFunc, 0, 5), 0
		var wg sync.WaitGroup
		for i := range 10 {
			ctx, cancel := context.WithCancel(t.Context())
			if i%2 == 0 {
				cancelled = append(cancelled, cancel)
			} else {
				kept++
				defer cancel()
			}
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustRequest(t, ctx, "http://a.test/"))
				if err != nil {
					return
				}
				resp.Body.Close()
				mu.Lock()
				served = append(served, time.Since(start))
				mu.Unlock()
			})
			synctest.Wait() // queue them in order
		}
		for _, cancel := range cancelled {
			cancel()
		}
		wg.Wait()
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second}, served)
	})
}

// Pitfall 14: failsafe-go's default policy retries at once; heimdall's
// default retrier has no delay.
func TestPitfall14DefaultPolicyBacksOffAndPays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var total time.Duration
		var tr *polite.Transport
		for range 20 {
			next := newStub(status(503))
			tr = polite.New(next)
			fetch(t, tr, "http://a.test/")
			for _, g := range next.gaps() {
				total += g
			}
		}
		// 60 retries with full jitter under 100ms, 200ms and 400ms ceilings:
		// the expected total is 3.5s; all 60 under 1ms is impossible in practice.
		assert.Greater(t, total, time.Second)
		assert.Equal(t, polite.DefaultRetryBudgetCapacity-3*5, tr.RetryBudget().Remaining(), "each retry paid 5")
	})
}

// Pitfall 19: go-retryablehttp and failsafe-go set Body on the caller's
// request.
func TestPitfall19CallersRequestIsNeverModified(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		attempt := 0
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			attempt++
			req.Header.Set("X-Attempt", strconv.Itoa(attempt)) // a careless next
			io.Copy(io.Discard, req.Body)
			req.Body.Close()
			return respond(req, 503, newBody("busy")), nil
		})
		req := replayableRequest(t, t.Context(), http.MethodPut, "http://a.test/x?y=1", "payload")
		req.Header.Set("Accept", "application/json")
		firstBody, getBody := req.Body, req.GetBody
		wantHeader := req.Header.Clone()
		wantURL := *req.URL

		resp, err := roundTrip(t, polite.New(next, polite.WithMaxAttempts(3)), req)
		require.NoError(t, err)
		readBody(t, resp)

		assert.Equal(t, http.MethodPut, req.Method)
		assert.Equal(t, wantURL, *req.URL)
		assert.Equal(t, firstBody, req.Body, "the caller's Body field is untouched")
		assert.Equal(t, int64(len("payload")), req.ContentLength)
		assert.NotNil(t, req.GetBody)
		assert.Equal(t, getBody != nil, req.GetBody != nil)
		// The first attempt is the caller's request itself (a RoundTripper
		// may not modify it); retries send clones, so what next does to a
		// retry never reaches the caller's request.
		require.Equal(t, 3, attempt)
		wantHeader.Set("X-Attempt", "1")
		assert.Equal(t, wantHeader, req.Header)
	})
}

// Pitfall 21: go-github-ratelimit retries secondary limits without bound.
func TestPitfall21AttemptsAreCappedWhateverTheServerSays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(429, "Retry-After", "1"))
		resp, err := get(t, t.Context(), polite.New(next), "http://a.test/")
		require.NoError(t, err)
		assert.Equal(t, 429, resp.StatusCode)
		readBody(t, resp)
		assert.Equal(t, 4, next.calls(), "the default: one try and three retries")
	})
}

// Pitfall 22: timers leaked by resty v2, avast/retry-go and
// projectdiscovery/retryablehttp-go. A storm of cancelled waits leaves no
// goroutine or timer behind: synctest fails the test if a goroutine of the
// bubble is still blocked when it ends, and goleak checks the process.
func TestPitfall22CancelStormLeaksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503, "Retry-After", "30"), status(200))
		tr := polite.New(next, polite.WithRate(1, 1))
		var wg sync.WaitGroup
		var cancels []context.CancelFunc
		for range 200 {
			ctx, cancel := context.WithCancel(t.Context())
			cancels = append(cancels, cancel)
			wg.Go(func() {
				resp, err := tr.RoundTrip(mustRequest(t, ctx, "http://a.test/"))
				if err == nil {
					resp.Body.Close()
				}
			})
		}
		synctest.Wait()
		for _, cancel := range cancels {
			cancel()
		}
		wg.Wait()
	})
}

// errors.Is and errors.As work through the *url.Error that http.Client
// wraps around every error.
func TestErrorsThroughHTTPClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refused := &urlTestError{}
		next := newStub(fail(refused))
		budget := polite.NewRetryBudget(0)
		_, err := (&http.Client{Transport: polite.New(next, polite.WithRetryBudget(budget))}).Get("http://a.test/")
		require.Error(t, err)
		var ue *url.Error
		require.ErrorAs(t, err, &ue)
		assert.ErrorIs(t, err, polite.ErrRetryBudgetExhausted)
		assert.ErrorIs(t, err, refused)
		var target *urlTestError
		assert.ErrorAs(t, err, &target)
		assert.Contains(t, err.Error(), "client-side")
	})
}

// urlTestError is a retryable transport error (it reports a timeout).
type urlTestError struct{}

func (*urlTestError) Error() string   { return "dial tcp: i/o timeout" }
func (*urlTestError) Timeout() bool   { return true }
func (*urlTestError) Temporary() bool { return true }
