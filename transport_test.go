package polite_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// --- Pacing ---------------------------------------------------------------

func TestRatePacesEachKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithRate(2, 1))
		start := time.Now()
		var atA, atB []time.Duration
		for range 4 {
			fetch(t, tr, "http://a.test/")
			atA = append(atA, time.Since(start))
		}
		fetch(t, tr, "http://b.test/")
		atB = append(atB, time.Since(start))

		s := time.Second
		assert.Equal(t, []time.Duration{0, s / 2, s, 3 * s / 2}, atA, "a.test is paced at 2/s")
		assert.Equal(t, []time.Duration{3 * s / 2}, atB, "b.test has a bucket of its own: no wait")
	})
}

func TestRateBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithRate(1, 3))
		start := time.Now()
		for range 4 {
			fetch(t, tr, "http://a.test/")
		}
		assert.Equal(t, time.Second, time.Since(start), "3 at once, the 4th after 1s")
	})
}

func TestNoRateMeansNoWait(t *testing.T) {
	for _, opt := range []polite.Option{
		polite.WithRate(0, 10), polite.WithRate(-1, 1), polite.WithRate(math.NaN(), 1),
		polite.WithRate(math.Inf(1), 1), nil,
	} {
		synctest.Test(t, func(t *testing.T) {
			tr := polite.New(newStub(status(200)), opt)
			start := time.Now()
			for range 100 {
				fetch(t, tr, "http://a.test/")
			}
			assert.Zero(t, time.Since(start))
		})
	}
}

func TestRateBurstBelowOneIsOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := polite.New(newStub(status(200)), polite.WithRate(10, 0))
		start := time.Now()
		for range 3 {
			fetch(t, tr, "http://a.test/")
		}
		assert.Equal(t, 200*time.Millisecond, time.Since(start))
	})
}

func TestWaitPastDeadlineFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithRate(1, 1))
		resp, err := get(t, t.Context(), tr, "http://a.test/") // takes the only token
		require.NoError(t, err)
		readBody(t, resp)

		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = (&http.Client{Transport: tr}).Do(mustRequest(t, ctx, "http://a.test/"))
		require.Error(t, err)
		assert.Zero(t, time.Since(start), "refused at once, not at the deadline")
		assert.ErrorIs(t, err, polite.ErrThrottled)
		var te *polite.ThrottledError
		require.ErrorAs(t, err, &te, "errors.As sees through *url.Error")
		assert.Equal(t, "a.test", te.Key)
		assert.Equal(t, time.Second, te.Wait)
		assert.Equal(t, 500*time.Millisecond, te.Allowed)
		assert.False(t, te.Server)
		var ue *url.Error
		assert.ErrorAs(t, err, &ue)
		assert.Equal(t, 1, next.calls(), "the refused request never reached the server")

		// The refused wait gave its token back: the next call waits 1s, not 2s.
		resp, err = get(t, t.Context(), tr, "http://a.test/")
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, time.Second, time.Since(start))
	})
}

// A wait that would end just as the deadline passes leaves no time to send:
// it is refused at once, as one past the deadline is, and never races the
// deadline (which of the two timers fires first is chance).
func TestWaitEndingAtTheDeadlineIsRefused(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			next := newStub(status(200))
			tr := polite.New(next, polite.WithRate(1, 1))
			resp, err := get(t, t.Context(), tr, "http://a.test/") // takes the only token
			require.NoError(t, err)
			readBody(t, resp)

			ctx, cancel := context.WithTimeout(t.Context(), time.Second) // the next token's instant
			defer cancel()
			start := time.Now()
			_, err = get(t, ctx, tr, "http://a.test/")
			assert.ErrorIs(t, err, polite.ErrThrottled)
			assert.Zero(t, time.Since(start), "refused at once")
			assert.Equal(t, 1, next.calls())
		})
	}
}

func TestCancelledWaitGivesTokenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithRate(1, 1))
		fetch(t, tr, "http://a.test/")

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() {
			_, err := tr.RoundTrip(mustRequest(t, ctx, "http://a.test/"))
			done <- err
		}()
		time.Sleep(300 * time.Millisecond)
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)

		start := time.Now()
		resp, err := get(t, t.Context(), tr, "http://a.test/")
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, 700*time.Millisecond, time.Since(start), "the cancelled waiter's token came back")
		assert.Equal(t, 2, next.calls())
	})
}

func TestDefaultKeyIsHost(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"http://api.test/a/b?q=1", "api.test"},
		{"http://API.Test/", "api.test"},
		{"http://api.tesT/", "api.test"},
		{"http://Åpi.test/", "åpi.test"},
		{"https://api.test:8443/x", "api.test:8443"},
		{"http://user:pw@api.test/x", "api.test"},
		{"http://[::1]:8080/x", "[::1]:8080"},
		{"http://api.test/%2Fsearch/issues", "api.test"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			var keys []string
			synctest.Test(t, func(t *testing.T) {
				tr := polite.New(newStub(status(200)), polite.WithHooks(polite.Hooks{
					OnWait: func(e polite.Event) { keys = append(keys, e.Key) },
				}), polite.WithRate(1, 1))
				for range 2 {
					fetch(t, tr, tt.give)
				}
			})
			assert.Equal(t, []string{tt.want}, keys)
		})
	}
}

func TestWithKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		byPath := func(r *http.Request) string { return strings.Split(r.URL.Path, "/")[1] }
		tr := polite.New(newStub(status(200)), polite.WithRate(1, 1), polite.WithKey(byPath))
		start := time.Now()
		for _, u := range []string{"http://a.test/search/x", "http://b.test/core/y", "http://c.test/search/z"} {
			fetch(t, tr, u)
		}
		assert.Equal(t, time.Second, time.Since(start), "both /search requests share one bucket across hosts")
	})
}

// --- What is retried ------------------------------------------------------

func TestRetriedStatuses(t *testing.T) {
	tests := []struct {
		give      int
		wantCalls int
	}{
		{408, 2}, {429, 2}, {500, 2}, {502, 2}, {503, 2}, {504, 2},
		{200, 1}, {201, 1}, {204, 1}, {301, 1}, {304, 1}, {400, 1}, {401, 1}, {403, 1},
		{404, 1}, {409, 1}, {422, 1}, {425, 1}, {501, 1}, {505, 1}, {599, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.give), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := newStub(status(tt.give), status(200))
				fetch(t, polite.New(next), "http://a.test/")
				assert.Equal(t, tt.wantCalls, next.calls())
			})
		})
	}
}

func TestRetriedTransportErrors(t *testing.T) {
	opErr := func(op string, err error) error { return &net.OpError{Op: op, Net: "tcp", Err: err} }
	tests := []struct {
		name      string
		give      error
		wantRetry bool
	}{
		{"connection refused", opErr("dial", os.NewSyscallError("connect", syscall.ECONNREFUSED)), true},
		{"connection reset", opErr("read", os.NewSyscallError("read", syscall.ECONNRESET)), true},
		{"broken pipe", opErr("write", os.NewSyscallError("write", syscall.EPIPE)), true},
		{"EOF", io.EOF, true},
		{"wrapped EOF", fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", io.ErrUnexpectedEOF), true},
		{"timeout", timeoutError{}, true},
		{"dial timeout", opErr("dial", timeoutError{}), true},
		{"DNS temporary", &net.DNSError{Err: "server misbehaving", Name: "a.test", IsTemporary: true}, true},
		{"DNS not found", &net.DNSError{Err: "no such host", Name: "a.test", IsNotFound: true}, false},
		{"unknown authority", &url.Error{Op: "Get", URL: "https://a.test", Err: x509.UnknownAuthorityError{}}, false},
		{"TLS alert", opErr("remote error", errors.New("tls: bad certificate")), false},
		{"unsupported scheme", errors.New(`unsupported protocol scheme "ftp"`), false},
		{"redirect", errors.New("stopped after 10 redirects"), false},
		{"foreign cancel", context.Canceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := newStub(fail(tt.give), status(200))
				resp, err := get(t, t.Context(), polite.New(next), "http://a.test/")
				if tt.wantRetry {
					require.NoError(t, err)
					readBody(t, resp)
					assert.Equal(t, 2, next.calls())
					return
				}
				assert.Equal(t, tt.give, err, "the error is returned as is")
				assert.Equal(t, 1, next.calls())
			})
		})
	}
}

func TestIdempotentMethodsOnly(t *testing.T) {
	tests := []struct {
		method    string
		header    string
		unsafe    bool
		wantCalls int
	}{
		{http.MethodGet, "", false, 2},
		{http.MethodHead, "", false, 2},
		{http.MethodOptions, "", false, 2},
		{http.MethodTrace, "", false, 2},
		{http.MethodPut, "", false, 2},
		{http.MethodDelete, "", false, 2},
		{http.MethodPost, "", false, 1},
		{http.MethodPatch, "", false, 1},
		{"CONNECT", "", false, 1},
		{http.MethodPost, "Idempotency-Key", false, 2},
		{http.MethodPost, "X-Idempotency-Key", false, 2},
		{http.MethodPatch, "Idempotency-Key", false, 2},
		{http.MethodPost, "", true, 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s/%v", tt.method, tt.header, tt.unsafe), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := newStub(status(503), status(200))
				tr := polite.New(next, polite.WithRetryNonIdempotent(tt.unsafe))
				req := replayableRequest(t, t.Context(), tt.method, "http://a.test/", "payload")
				if tt.header != "" {
					req.Header.Set(tt.header, `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
				}
				resp, err := roundTrip(t, tr, req)
				require.NoError(t, err)
				readBody(t, resp)
				assert.Equal(t, tt.wantCalls, next.calls())
			})
		})
	}
}

func TestBodyReplayedByteForByte(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503), status(502), status(200))
		req := replayableRequest(t, t.Context(), http.MethodPut, "http://a.test/doc", `{"n":42}`)
		resp, err := roundTrip(t, polite.New(next), req)
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, []string{`{"n":42}`, `{"n":42}`, `{"n":42}`}, next.reqBody)
	})
}

func TestBodyWithoutGetBodyIsNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503), status(200))
		body := newBody("payload")
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, "http://a.test/", body)
		require.NoError(t, err)
		require.Nil(t, req.GetBody)
		resp, err := roundTrip(t, polite.New(next), req)
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode, "the 503 is returned rather than resent with no body")
		readBody(t, resp)
		assert.Equal(t, []string{"payload"}, next.reqBody)
	})
}

func TestGetBodyErrorStopsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503), status(200))
		req := replayableRequest(t, t.Context(), http.MethodPut, "http://a.test/", "payload")
		req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
		resp, err := roundTrip(t, polite.New(next), req)
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		readBody(t, resp)
		assert.Equal(t, 1, next.calls())
	})
}

func TestMaxAttempts(t *testing.T) {
	for _, tt := range []struct{ give, want int }{{1, 1}, {2, 2}, {4, 4}, {0, 1}, {-5, 1}} {
		t.Run(fmt.Sprint(tt.give), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := newStub(status(503))
				tr := polite.New(next, polite.WithMaxAttempts(tt.give))
				resp, err := get(t, t.Context(), tr, "http://a.test/")
				require.NoError(t, err)
				assert.Equal(t, 503, resp.StatusCode)
				readBody(t, resp)
				assert.Equal(t, tt.want, next.calls())
			})
		})
	}
}

// --- Delays ---------------------------------------------------------------

func TestBackoffIsFullJitterUnderTheCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const base, limit = time.Second, 4 * time.Second
		ceilings := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second}
		var sum [5]time.Duration
		const runs = 200
		for range runs {
			next := newStub(status(500))
			tr := polite.New(next, polite.WithBackoff(base, limit), polite.WithMaxAttempts(len(ceilings)+1))
			fetch(t, tr, "http://a.test/")
			for i, g := range next.gaps() {
				require.GreaterOrEqual(t, g, time.Duration(0))
				require.Less(t, g, ceilings[i], "retry %d waited %v, ceiling %v", i+1, g, ceilings[i])
				sum[i] += g
			}
		}
		// Full jitter: the mean is half the ceiling. Over 200 runs the
		// standard error is ceiling/49; ±20% of the ceiling is 10 of them.
		for i, c := range ceilings {
			mean := sum[i] / runs
			assert.InDelta(t, float64(c/2), float64(mean), float64(c/5), "retry %d mean %v", i+1, mean)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	date := func(d time.Duration, layout string) string {
		return time.Now().Add(d).UTC().Format(layout)
	}
	tests := []struct {
		name string
		give func() string
		want time.Duration
	}{
		{"seconds", func() string { return "30" }, 30 * time.Second},
		{"fractional", func() string { return "1.5" }, 1500 * time.Millisecond},
		{"2.0", func() string { return "2.0" }, 2 * time.Second},
		{"zero", func() string { return "0" }, 0},
		{"spaces", func() string { return " 7 " }, 7 * time.Second},
		{"IMF-fixdate", func() string { return date(45*time.Second, http.TimeFormat) }, 45 * time.Second},
		{"RFC 850", func() string { return date(50*time.Second, "Monday, 02-Jan-06 15:04:05 GMT") }, 50 * time.Second},
		{"asctime", func() string { return date(55*time.Second, time.ANSIC) }, 55 * time.Second},
		{"past date", func() string { return date(-time.Hour, http.TimeFormat) }, 0},
		{"negative", func() string { return "-5" }, 0},
		{"garbage", func() string { return "soon" }, 0},
		{"exponent", func() string { return "1e3" }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := newStub(status(503, "Retry-After", tt.give()), status(200))
				tr := polite.New(next, polite.WithBackoff(0, 0))
				fetch(t, tr, "http://a.test/")
				assert.Equal(t, []time.Duration{tt.want}, next.gaps())
			})
		})
	}
}

// A Retry-After too far to hold in a Duration is still valid: "not before
// then". It is over any cap, so the response comes back at once, after one
// attempt, and the key is held as for any long pause.
func TestRetryAfterBeyondDurationIsOverCap(t *testing.T) {
	for _, v := range []string{"Fri, 31 Dec 9999 23:59:59 GMT", "99999999999999999999"} {
		t.Run(v, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := newStub(status(429, "Retry-After", v), status(200))
				tr := polite.New(next)
				start := time.Now()
				resp, err := get(t, t.Context(), tr, "http://a.test/")
				require.NoError(t, err)
				assert.Zero(t, time.Since(start), "no wait at all")
				assert.Equal(t, 429, resp.StatusCode)
				assert.Equal(t, "response 0", readBody(t, resp))
				assert.Equal(t, 1, next.calls(), "one attempt")

				_, err = get(t, t.Context(), tr, "http://a.test/")
				var te *polite.ThrottledError
				require.ErrorAs(t, err, &te)
				assert.True(t, te.Server)
				assert.Equal(t, 1, next.calls())
			})
		})
	}
}

func TestRetryAfterOverCapIsReturnedAsIs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(429, "Retry-After", "3600"), status(200))
		tr := polite.New(next, polite.WithMaxRetryAfter(2*time.Second))
		start := time.Now()
		resp, err := get(t, t.Context(), tr, "http://a.test/")
		require.NoError(t, err)
		assert.Zero(t, time.Since(start), "no wait at all")
		assert.Equal(t, 429, resp.StatusCode)
		assert.Equal(t, "3600", resp.Header.Get("Retry-After"))
		assert.Equal(t, "response 0", readBody(t, resp), "the body is unread and whole")
		assert.Equal(t, 1, next.calls())

		// Calls to the same key now fail at once while the server's pause lasts.
		_, err = get(t, t.Context(), tr, "http://a.test/")
		var te *polite.ThrottledError
		require.ErrorAs(t, err, &te)
		assert.True(t, te.Server)
		assert.Equal(t, time.Hour, te.Wait)
		assert.Equal(t, 2*time.Second, te.Allowed)
		assert.Equal(t, 1, next.calls())
	})
}

func TestMaxRetryAfterNegativeWaitsOnNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503, "Retry-After", "1"), status(200))
		resp, err := get(t, t.Context(), polite.New(next, polite.WithMaxRetryAfter(-time.Second)), "http://a.test/")
		require.NoError(t, err)
		assert.Equal(t, 503, resp.StatusCode)
		readBody(t, resp)
	})
}

func TestHostilePauseIsBounded(t *testing.T) {
	for _, give := range []string{"86400", "Sat, 01 Jan 2050 00:00:00 GMT"} {
		t.Run(give, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := newStub(status(429, "Retry-After", give), status(200))
				tr := polite.New(next)
				fetch(t, tr, "http://a.test/")
				time.Sleep(time.Hour - 2*time.Minute)
				_, err := get(t, t.Context(), tr, "http://a.test/")
				require.ErrorIs(t, err, polite.ErrThrottled, "the pause holds for an hour")
				time.Sleep(2 * time.Minute)
				resp, err := get(t, t.Context(), tr, "http://a.test/")
				require.NoError(t, err, "after an hour the key is usable again")
				assert.Equal(t, 200, resp.StatusCode)
				readBody(t, resp)
			})
		})
	}
}

// A call that finds others queued for the key's bucket queues behind them,
// even if it arrives at the very instant a token comes back.
func TestQueuedCallsAreServedFirst(t *testing.T) {
	for range 50 {
		synctest.Test(t, func(t *testing.T) {
			tr := polite.New(newStub(status(200)), polite.WithRate(1, 1))
			start := time.Now()
			served := make(chan string, 2)
			send := func(name string, after time.Duration) {
				time.Sleep(after)
				resp, err := tr.RoundTrip(mustRequest(t, t.Context(), "http://a.test/"))
				if err == nil {
					resp.Body.Close()
				}
				served <- name + " at " + time.Since(start).String()
			}
			go send("first", 0)
			synctest.Wait()
			<-served
			go send("queued", 0)             // waits for the token of t=1s
			go send("newcomer", time.Second) // arrives at t=1s
			assert.Equal(t, []string{"queued at 1s", "newcomer at 2s"}, []string{<-served, <-served})
		})
	}
}

func TestRequestBodyClosedWhenNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithRate(1, 1))
		fetch(t, tr, "http://a.test/")

		// Refused: the wait would pass the deadline.
		body := newBody("payload")
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, "http://a.test/", body)
		require.NoError(t, err)
		_, err = roundTrip(t, tr, req)
		require.ErrorIs(t, err, polite.ErrThrottled)
		assert.True(t, body.closed.Load(), "a refused request's body is closed, as RoundTrip must")

		// Cancelled while it waited.
		body = newBody("payload")
		ctx, cancel = context.WithCancel(t.Context())
		req, err = http.NewRequestWithContext(ctx, http.MethodPut, "http://a.test/", body)
		require.NoError(t, err)
		go func() {
			time.Sleep(100 * time.Millisecond)
			cancel()
		}()
		_, err = roundTrip(t, tr, req)
		require.ErrorIs(t, err, context.Canceled)
		assert.True(t, body.closed.Load())
		assert.Equal(t, 1, next.calls())
	})
}

func TestServerPauseHoldsConcurrentCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(429, "Retry-After", "10"), status(200))
		tr := polite.New(next, polite.WithBackoff(0, 0), polite.WithAdaptive(polite.AdaptiveOff))
		start := time.Now()
		done := make(chan time.Duration, 6)
		call := func() {
			resp, err := tr.RoundTrip(mustRequest(t, t.Context(), "http://a.test/"))
			if err == nil {
				resp.Body.Close()
			}
			done <- time.Since(start)
		}
		go call()
		synctest.Wait() // the first call got its 429 and waits 10s to retry
		for range 5 {
			go call()
		}
		synctest.Wait()
		assert.Equal(t, 1, next.calls(), "the other calls wait for the pause instead of hitting the server")
		for range 6 {
			assert.Equal(t, 10*time.Second, <-done)
		}
		assert.Equal(t, 7, next.calls())
	})
}

func TestNoPauseWithoutRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503, "Retry-After", "5"), status(200))
		tr := polite.New(next, polite.WithBackoff(0, 0), polite.WithMaxAttempts(1))
		fetch(t, tr, "http://a.test/")
		start := time.Now()
		resp, err := get(t, t.Context(), tr, "http://a.test/")
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, 5*time.Second, time.Since(start), "503 with Retry-After pauses the key")

		next = newStub(status(500, "Retry-After", "5"), status(200))
		tr = polite.New(next, polite.WithBackoff(0, 0), polite.WithMaxAttempts(1))
		for range 2 {
			resp, err = get(t, t.Context(), tr, "http://a.test/")
			require.NoError(t, err)
			readBody(t, resp)
		}
		assert.Equal(t, 5*time.Second, time.Since(start), "500 with Retry-After does not pause the key")
	})
}

func TestRetryThatCannotMeetTheDeadlineIsNotStarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503, "Retry-After", "30"), status(200))
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		resp, err := get(t, ctx, polite.New(next), "http://a.test/")
		require.NoError(t, err)
		assert.Zero(t, time.Since(start))
		assert.Equal(t, 503, resp.StatusCode)
		assert.Equal(t, "response 0", readBody(t, resp))
		assert.Equal(t, 1, next.calls())
	})
}

func TestClientTimeoutIsADeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503, "Retry-After", "30"), status(200))
		c := &http.Client{Transport: polite.New(next), Timeout: 10 * time.Second}
		start := time.Now()
		resp, err := c.Get("http://a.test/")
		require.NoError(t, err)
		assert.Zero(t, time.Since(start), "http.Client.Timeout reaches polite as the context deadline")
		assert.Equal(t, 503, resp.StatusCode)
		readBody(t, resp)
	})
}

func TestRetryCountsTheBucketAgainstTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503), status(200))
		tr := polite.New(next, polite.WithRate(0.1, 1), polite.WithBackoff(0, 0))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		resp, err := get(t, ctx, tr, "http://a.test/")
		require.NoError(t, err, "the next token comes in 10s, after the deadline: the 503 is returned")
		assert.Equal(t, 503, resp.StatusCode)
		readBody(t, resp)
		assert.Equal(t, 1, next.calls())
	})
}

func TestCancelDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503, "Retry-After", "30"), status(200))
		ctx, cancel := context.WithCancelCause(t.Context())
		go func() {
			time.Sleep(time.Second)
			cancel(errors.New("caller gave up"))
		}()
		start := time.Now()
		_, err := get(t, ctx, polite.New(next), "http://a.test/")
		assert.EqualError(t, err, "caller gave up", "the context's cause is returned")
		assert.Equal(t, time.Second, time.Since(start))
		assert.Equal(t, 1, next.calls())
		next.checkDiscarded(t, false)
	})
}

func mustRequest(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}
