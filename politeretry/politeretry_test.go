package politeretry_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politeretry"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// server is a local server that counts the requests it gets and notes when
// each arrived.
type server struct {
	*httptest.Server
	requests atomic.Int64

	mu    sync.Mutex
	times []time.Time
}

// newServer starts a server that answers the n-th request (1-based) with
// handle.
func newServer(t *testing.T, handle func(n int64, w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.times = append(s.times, time.Now())
		s.mu.Unlock()
		handle(s.requests.Add(1), w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// arrivals returns when each request arrived.
func (s *server) arrivals() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.times...)
}

// always answers every request with status, the header pairs and a body
// naming the status.
func always(status int, header ...string) func(int64, http.ResponseWriter, *http.Request) {
	return func(_ int64, w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "status "+strconv.Itoa(status))
	}
}

// fastClient is NewClient with waits of a few milliseconds and two
// retries, counting its attempts.
func fastClient(t *testing.T, attempts *atomic.Int64, opts ...polite.Option) *retryablehttp.Client {
	t.Helper()
	c := politeretry.NewClient(opts...)
	c.RetryWaitMin, c.RetryWaitMax, c.RetryMax = time.Millisecond, 5*time.Millisecond, 2
	if attempts != nil {
		c.RequestLogHook = func(retryablehttp.Logger, *http.Request, int) { attempts.Add(1) }
	}
	t.Cleanup(c.HTTPClient.CloseIdleConnections)
	return c
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// response returns a response to a GET with the header pairs.
func response(status int, header ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h[header[i]] = []string{header[i+1]} // as written: names need not be canonical
	}
	req, _ := http.NewRequest(http.MethodGet, "http://api.test/", nil)
	return &http.Response{StatusCode: status, Header: h, Request: req, Body: http.NoBody}
}

// --- Backoff ---

func TestBackoffStaysWithinBoundsAtAnyAttempt(t *testing.T) {
	attempts := []int{math.MinInt, -1, 1 << 30, math.MaxInt}
	for n := range 101 {
		attempts = append(attempts, n)
	}
	for _, tc := range []struct {
		name     string
		min, max time.Duration
	}{
		{"1ms to 1s", time.Millisecond, time.Second},
		{"1ns to the longest", 1, math.MaxInt64},
		{"half the longest to the longest", math.MaxInt64 / 2, math.MaxInt64},
		{"min equals max", time.Second, time.Second},
		{"min above max", time.Minute, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range attempts {
				// The ceiling, in floats, which cannot overflow.
				ceiling := float64(tc.max)
				if n <= 0 {
					ceiling = math.Min(ceiling, float64(tc.min))
				} else {
					ceiling = math.Min(ceiling, float64(tc.min)*math.Pow(2, float64(n)))
				}
				for range 20 {
					d := politeretry.Backoff(tc.min, tc.max, n, nil)
					require.GreaterOrEqual(t, d, time.Duration(0), "attempt %d", n)
					require.Less(t, d, tc.max, "attempt %d", n)
					require.Less(t, float64(d), ceiling, "attempt %d", n)
				}
			}
		})
	}
}

func TestBackoffFullJitterSpreads(t *testing.T) {
	const draws = 2000
	ceiling := 8 * time.Millisecond // 1ms·2^3
	seen := map[time.Duration]bool{}
	low, high := time.Duration(math.MaxInt64), time.Duration(0)
	for range draws {
		d := politeretry.Backoff(time.Millisecond, time.Second, 3, nil)
		require.GreaterOrEqual(t, d, time.Duration(0))
		require.Less(t, d, ceiling)
		seen[d] = true
		low, high = min(low, d), max(high, d)
	}
	assert.Less(t, low, ceiling/10, "draws reach near 0")
	assert.Greater(t, high, ceiling*9/10, "draws reach near the ceiling")
	assert.Greater(t, len(seen), draws/2, "draws are spread, not a few values")
}

func TestBackoffOutOfRangeWaits(t *testing.T) {
	hinted := response(429, "Retry-After", "2")
	assert.Zero(t, politeretry.Backoff(time.Millisecond, 0, 3, hinted), "max 0: no wait, even for the server")
	assert.Zero(t, politeretry.Backoff(time.Millisecond, -time.Second, 3, hinted), "max < 0: no wait")
	assert.Zero(t, politeretry.Backoff(0, time.Second, 3, nil), "min 0: no jitter")
	assert.Zero(t, politeretry.Backoff(-time.Second, time.Second, 3, nil), "min < 0: no jitter")
	assert.Equal(t, 2*time.Second, politeretry.Backoff(0, time.Minute, 3, hinted), "min 0: the server's delay still counts")
	assert.Equal(t, 2*time.Second, politeretry.Backoff(-time.Second, time.Minute, 3, hinted))
}

func TestBackoffServerDelay(t *testing.T) {
	future := time.Now().Add(time.Hour).UTC()
	past := time.Now().Add(-time.Hour).UTC()
	const jitterOnly = -1
	for _, tc := range []struct {
		name     string
		resp     *http.Response
		low, max time.Duration // the result is in [low, max]; low jitterOnly: below min·2^0
	}{
		{"no response", nil, jitterOnly, 0},
		{"no hint", response(503), jitterOnly, 0},
		{"Retry-After seconds", response(429, "Retry-After", "2"), 2 * time.Second, 2 * time.Second},
		{"Retry-After fraction", response(503, "Retry-After", "0.25"), 250 * time.Millisecond, 250 * time.Millisecond},
		{"Retry-After-Ms", response(429, "Retry-After-Ms", "50"), 50 * time.Millisecond, 50 * time.Millisecond},
		{"retry-after-ms lower-case", response(429, "retry-after-ms", "70"), 70 * time.Millisecond, 70 * time.Millisecond},
		{"x-ms-retry-after-ms", response(503, "x-ms-retry-after-ms", "90"), 90 * time.Millisecond, 90 * time.Millisecond},
		{"ms wins over seconds", response(429, "Retry-After", "30", "Retry-After-Ms", "40"), 40 * time.Millisecond, 40 * time.Millisecond},
		{"IMF-fixdate", response(429, "Retry-After", future.Format(http.TimeFormat)), time.Hour - 2*time.Second, time.Hour},
		{"RFC 850 date", response(429, "Retry-After", future.Format(time.RFC850)), time.Hour - 2*time.Second, time.Hour},
		{"asctime date", response(429, "Retry-After", future.Format(time.ANSIC)), time.Hour - 2*time.Second, time.Hour},
		{"past date", response(429, "Retry-After", past.Format(http.TimeFormat)), jitterOnly, 0},
		{"garbage", response(429, "Retry-After", "soon"), jitterOnly, 0},
		{"negative", response(429, "Retry-After", "-5"), jitterOnly, 0},
		{"spent quota until reset", response(403, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "3"), 3 * time.Second, 3 * time.Second},
		{"quota left", response(200, "X-RateLimit-Remaining", "5", "X-RateLimit-Reset", "3"), jitterOnly, 0},
		{"IETF RateLimit spent", response(429, "RateLimit", `"default";r=0;t=4`), 4 * time.Second, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const minWait, maxWait = time.Millisecond, 2 * time.Hour
			for range 50 {
				d := politeretry.Backoff(minWait, maxWait, 0, tc.resp)
				if tc.low == jitterOnly {
					require.GreaterOrEqual(t, d, time.Duration(0))
					require.Less(t, d, minWait)
					continue
				}
				require.GreaterOrEqual(t, d, tc.low, "never below the server's delay")
				require.LessOrEqual(t, d, tc.max)
			}
		})
	}
}

// The server's delay wins over jitter at every attempt, as long as it is
// within max.
func TestBackoffNeverBelowServerDelay(t *testing.T) {
	resp := response(429, "Retry-After-Ms", "30")
	for n := range 40 {
		d := politeretry.Backoff(time.Millisecond, time.Second, n, resp)
		require.GreaterOrEqual(t, d, 30*time.Millisecond, "attempt %d", n)
		require.Less(t, d, time.Second, "attempt %d", n)
	}
}

// go-retryablehttp#247 and #295: its backoffs return Retry-After as is,
// over RetryWaitMax. PR #297: a huge value wraps to a negative wait.
func TestBackoffCapsWhatRetryablehttpDoesNot(t *testing.T) {
	const minWait, maxWait = time.Millisecond, 5 * time.Second
	for _, tc := range []struct {
		retryAfter string
		theirs     func(t *testing.T, d time.Duration)
	}{
		{"3600", func(t *testing.T, d time.Duration) {
			assert.Equal(t, time.Hour, d, "#247: not capped by RetryWaitMax")
		}},
		{"10000000000", func(t *testing.T, d time.Duration) {
			assert.Negative(t, d, "#297: 1e10 s wraps to a negative wait, a retry at once")
		}},
		{"9223372037", func(t *testing.T, d time.Duration) {
			assert.Negative(t, d, "#297: the smallest number of seconds that wraps")
		}},
		{"9999999999999999999", func(t *testing.T, d time.Duration) {
			assert.Equal(t, minWait, d, "too long for an int64: ignored, as if the server said nothing")
		}},
	} {
		t.Run(tc.retryAfter, func(t *testing.T) {
			resp := response(429, "Retry-After", tc.retryAfter)
			tc.theirs(t, retryablehttp.DefaultBackoff(minWait, maxWait, 0, resp))
			if tc.retryAfter != "9999999999999999999" {
				assert.Equal(t, retryablehttp.DefaultBackoff(minWait, maxWait, 0, resp),
					retryablehttp.RateLimitLinearJitterBackoff(minWait, maxWait, 0, resp), "#295: the same in the linear backoff")
			}
			for n := range 10 {
				assert.Equal(t, maxWait, politeretry.Backoff(minWait, maxWait, n, resp), "capped at max, attempt %d", n)
			}
		})
	}
}

// The same pitfall in a real client: with DefaultBackoff, "Retry-After:
// 10000000000" makes every wait negative, and the client retries hot.
func TestBackoffWrapInARealClient(t *testing.T) {
	srv := newServer(t, always(http.StatusTooManyRequests, "Retry-After", "10000000000"))
	for _, tc := range []struct {
		name    string
		backoff retryablehttp.Backoff
		check   func(t *testing.T, wait time.Duration)
	}{
		{"DefaultBackoff", retryablehttp.DefaultBackoff, func(t *testing.T, wait time.Duration) {
			assert.Negative(t, wait)
		}},
		{"politeretry.Backoff", politeretry.Backoff, func(t *testing.T, wait time.Duration) {
			assert.Equal(t, 5*time.Millisecond, wait)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.requests.Load()
			c := retryablehttp.NewClient() // its retry policy: only the backoff differs
			c.Logger, c.RetryWaitMin, c.RetryWaitMax, c.RetryMax = nil, time.Millisecond, 5*time.Millisecond, 2
			t.Cleanup(c.HTTPClient.CloseIdleConnections)
			var waits []time.Duration
			c.Backoff = func(min, max time.Duration, n int, resp *http.Response) time.Duration {
				d := tc.backoff(min, max, n, resp)
				waits = append(waits, d)
				return d
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second) // fail, not hang, on a long wait
			defer cancel()
			req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			require.NoError(t, err)
			_, err = c.Do(req)
			require.Error(t, err, "gives up after its retries")
			require.NotErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, int64(3), srv.requests.Load()-before)
			require.Len(t, waits, 2)
			for _, w := range waits {
				tc.check(t, w)
			}
		})
	}
}

// retryablehttp reads only RFC 1123 dates; polite reads all three
// HTTP-date formats.
func TestBackoffReadsEveryHTTPDateFormat(t *testing.T) {
	future := time.Now().Add(time.Hour).UTC()
	for _, layout := range []string{time.RFC850, time.ANSIC} {
		t.Run(layout, func(t *testing.T) {
			resp := response(503, "Retry-After", future.Format(layout))
			assert.Equal(t, time.Millisecond, retryablehttp.DefaultBackoff(time.Millisecond, 2*time.Hour, 0, resp),
				"retryablehttp ignores the date")
			d := politeretry.Backoff(time.Millisecond, 2*time.Hour, 0, resp)
			assert.InDelta(t, float64(time.Hour), float64(d), float64(2*time.Second))
		})
	}
}

// --- CheckRetry ---

func TestCheckRetryStatuses(t *testing.T) {
	for _, tc := range []struct {
		status int
		retry  bool
	}{
		{408, true}, {429, true}, {500, true}, {502, true}, {503, true}, {504, true},
		{501, false}, {505, false}, {400, false}, {404, false}, {200, false},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			srv := newServer(t, always(tc.status))
			resp, err := fastClient(t, nil).Get(srv.URL)
			if tc.retry {
				require.Error(t, err, "retries run out")
				assert.Contains(t, err.Error(), "giving up after 3 attempt(s)")
				assert.Equal(t, int64(3), srv.requests.Load(), "1 + RetryMax")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, "status "+strconv.Itoa(tc.status), readBody(t, resp), "handed back, body readable")
			assert.Equal(t, int64(1), srv.requests.Load(), "not retried")
		})
	}
}

// Where polite's rules and retryablehttp's DefaultRetryPolicy part.
func TestCheckRetryDiffersFromDefaultRetryPolicy(t *testing.T) {
	post := response(http.StatusServiceUnavailable)
	post.Request.Method = http.MethodPost
	for _, tc := range []struct {
		name         string
		resp         *http.Response
		ours, theirs bool
	}{
		{"408", response(http.StatusRequestTimeout), true, false},
		{"505", response(http.StatusHTTPVersionNotSupported), false, true},
		{"POST 503", post, false, true},
		{"429 Retry-After 3600", response(http.StatusTooManyRequests, "Retry-After", "3600"), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ours, _ := politeretry.CheckRetry(t.Context(), tc.resp, nil)
			theirs, _ := retryablehttp.DefaultRetryPolicy(t.Context(), tc.resp, nil)
			assert.Equal(t, tc.ours, ours, "politeretry.CheckRetry")
			assert.Equal(t, tc.theirs, theirs, "retryablehttp.DefaultRetryPolicy")
		})
	}
}

func TestCheckRetryOnlyResendsWhatMayBeSentTwice(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		header   string
		requests int64
	}{
		{"GET", http.MethodGet, "", 3},
		{"PUT", http.MethodPut, "", 3},
		{"DELETE", http.MethodDelete, "", 3},
		{"POST", http.MethodPost, "", 1},
		{"PATCH", http.MethodPatch, "", 1},
		{"POST with Idempotency-Key", http.MethodPost, "Idempotency-Key", 3},
		{"POST with X-Idempotency-Key", http.MethodPost, "X-Idempotency-Key", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var bodies []string
			var mu sync.Mutex
			srv := newServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies = append(bodies, string(b))
				mu.Unlock()
				always(http.StatusServiceUnavailable)(n, w, r)
			})
			req, err := retryablehttp.NewRequest(tc.method, srv.URL, strings.NewReader("payload"))
			require.NoError(t, err)
			if tc.header != "" {
				req.Header.Set(tc.header, "k-1")
			}
			resp, err := fastClient(t, nil).Do(req)
			assert.Equal(t, tc.requests, srv.requests.Load())
			if tc.requests == 1 {
				require.NoError(t, err, "the 503 is handed back")
				assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
				assert.Equal(t, "status 503", readBody(t, resp))
			} else {
				require.Error(t, err)
			}
			for _, b := range bodies {
				assert.Equal(t, "payload", b, "retryablehttp resends the whole body")
			}
		})
	}
}

// A POST answered 303 becomes a GET to the redirect's target; if that
// fails, retryablehttp would resend the POST. CheckRetry judges the
// caller's request, the first of the chain.
func TestCheckRetryJudgesTheCallersRequestAfterARedirect(t *testing.T) {
	for _, tc := range []struct {
		method, redirect string
		status           int
		requests         int64 // to the redirecting path and to the target, together
	}{
		{http.MethodPost, "303", http.StatusSeeOther, 2},
		{http.MethodGet, "302", http.StatusFound, 6},
	} {
		t.Run(tc.method+" "+tc.redirect, func(t *testing.T) {
			srv := newServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/start" {
					http.Redirect(w, r, "/target", tc.status)
					return
				}
				always(http.StatusServiceUnavailable)(n, w, r)
			})
			req, err := retryablehttp.NewRequest(tc.method, srv.URL+"/start", nil)
			require.NoError(t, err)
			resp, err := fastClient(t, nil).Do(req)
			assert.Equal(t, tc.requests, srv.requests.Load())
			if tc.method == http.MethodPost {
				require.NoError(t, err)
				assert.Equal(t, http.MethodGet, resp.Request.Method, "the last hop is a GET")
				assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
				_ = readBody(t, resp)
			} else {
				require.Error(t, err)
			}
		})
	}
}

func TestCheckRetryStopsWhenTheContextIsDone(t *testing.T) {
	t.Run("real client", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		srv := newServer(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			cancel() // the caller gives up while the server answers
			always(http.StatusServiceUnavailable)(n, w, r)
		})
		req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := fastClient(t, nil).Do(req)
		assert.Nil(t, resp)
		require.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, int64(1), srv.requests.Load())
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		retry, err := politeretry.CheckRetry(ctx, response(503), nil)
		assert.False(t, retry)
		assert.Equal(t, context.Canceled, err)
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel()
		retry, err := politeretry.CheckRetry(ctx, nil, &url.Error{Op: "Get", URL: "http://api.test/", Err: syscall.ECONNRESET})
		assert.False(t, retry)
		assert.Equal(t, context.DeadlineExceeded, err)
	})
}

func TestCheckRetryDoesNotRetryTLSErrors(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors the test causes
	srv.StartTLS()
	t.Cleanup(srv.Close)

	var attempts atomic.Int64
	_, err := fastClient(t, &attempts).Get(srv.URL) // the client does not trust the server's certificate
	var verifyErr *tls.CertificateVerificationError
	require.ErrorAs(t, err, &verifyErr)
	assert.Equal(t, int64(1), attempts.Load(), "not retried")
}

func TestCheckRetryRetriesConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now

	for _, tc := range []struct {
		method   string
		attempts int64
	}{
		{http.MethodGet, 3},
		{http.MethodPost, 1}, // without a response the headers are out of sight: not retried
	} {
		t.Run(tc.method, func(t *testing.T) {
			var attempts atomic.Int64
			req, err := retryablehttp.NewRequest(tc.method, addr, nil)
			require.NoError(t, err)
			req.Header.Set("Idempotency-Key", "k-1")
			_, err = fastClient(t, &attempts).Do(req)
			require.ErrorIs(t, err, syscall.ECONNREFUSED)
			assert.Equal(t, tc.attempts, attempts.Load())
		})
	}
}

// polite's refusals are made without sending anything: retrying them only
// burns attempts. retryablehttp's DefaultRetryPolicy retries them.
func TestCheckRetryNeverRetriesPolitesRefusals(t *testing.T) {
	t.Run("server pause over the cap", func(t *testing.T) {
		srv := newServer(t, always(http.StatusTooManyRequests, "Retry-After", "3600"))
		var attempts atomic.Int64
		c := fastClient(t, &attempts, polite.WithMaxRetryAfter(10*time.Millisecond))
		var seen error
		c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			seen = err
			return politeretry.CheckRetry(ctx, resp, err)
		}

		resp, err := c.Get(srv.URL)
		require.NoError(t, err)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "the pause is handed back")
		_ = readBody(t, resp)

		attempts.Store(0)
		_, err = c.Get(srv.URL) // polite holds the pause: refused without sending
		require.ErrorIs(t, err, polite.ErrThrottled)
		var throttled *polite.ThrottledError
		require.ErrorAs(t, err, &throttled)
		assert.True(t, throttled.Server)
		assert.Equal(t, int64(1), attempts.Load(), "not retried")
		assert.Equal(t, int64(1), srv.requests.Load(), "the server heard one request in two calls")

		var urlErr *url.Error
		require.ErrorAs(t, seen, &urlErr, "the refusal arrives in a *url.Error")
		retry, _ := retryablehttp.DefaultRetryPolicy(t.Context(), nil, seen)
		assert.True(t, retry, "retryablehttp's default would retry it")

		// The same transport under retryablehttp's default policy: every
		// retry is refused again, and nothing reaches the server.
		rh := retryablehttp.NewClient()
		rh.Logger, rh.HTTPClient, rh.RetryWaitMin, rh.RetryWaitMax, rh.RetryMax = nil, c.HTTPClient, time.Millisecond, 5*time.Millisecond, 2
		attempts.Store(0)
		rh.RequestLogHook = c.RequestLogHook
		_, err = rh.Get(srv.URL)
		require.ErrorIs(t, err, polite.ErrThrottled)
		assert.Equal(t, int64(3), attempts.Load(), "DefaultRetryPolicy burns every attempt")
		assert.Equal(t, int64(1), srv.requests.Load(), "none reached the server")
	})
	t.Run("robots.txt unreachable", func(t *testing.T) {
		srv := newServer(t, always(http.StatusInternalServerError))
		var attempts atomic.Int64
		_, err := fastClient(t, &attempts, polite.WithCrawlDelay(true)).Get(srv.URL + "/page")
		require.ErrorIs(t, err, polite.ErrRobotsUnreachable)
		assert.Equal(t, int64(1), attempts.Load(), "not retried")
		assert.Equal(t, int64(1), srv.requests.Load(), "only robots.txt was asked for")
	})
	for _, refusal := range []error{
		&polite.ThrottledError{Key: "api.test", Wait: time.Hour, Allowed: time.Minute, Server: true},
		&polite.RobotsError{Host: "api.test", StatusCode: 503},
		errors.Join(polite.ErrRetryBudgetExhausted, syscall.ECONNRESET),
	} {
		t.Run(refusal.Error(), func(t *testing.T) {
			err := &url.Error{Op: "Get", URL: "http://api.test/", Err: refusal}
			retry, got := politeretry.CheckRetry(t.Context(), nil, err)
			assert.False(t, retry)
			assert.Same(t, err, got)
			retry, _ = retryablehttp.DefaultRetryPolicy(t.Context(), nil, err)
			assert.True(t, retry, "retryablehttp's default would retry it")
		})
	}
}

// A server delay over polite.DefaultMaxRetryAfter, or one that ends after
// the deadline, stops the retries, and the response is handed back with
// its body, at once.
func TestCheckRetryHandsBackALongPause(t *testing.T) {
	t.Run("over the cap", func(t *testing.T) {
		srv := newServer(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, "slow down")
		})
		start := time.Now()
		resp, err := fastClient(t, nil).Get(srv.URL)
		require.NoError(t, err)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "3600", resp.Header.Get("Retry-After"))
		assert.Equal(t, "slow down", readBody(t, resp), "the body is readable")
		assert.Equal(t, int64(1), srv.requests.Load())
		assert.Less(t, time.Since(start), time.Second)
	})
	t.Run("past the deadline", func(t *testing.T) {
		srv := newServer(t, always(http.StatusTooManyRequests, "Retry-After-Ms", "500"))
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		resp, err := fastClient(t, nil).Do(req)
		require.NoError(t, err, "not the context's error (go-retryablehttp#129)")
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
		assert.Equal(t, "status 429", readBody(t, resp))
		assert.Equal(t, int64(1), srv.requests.Load())
	})
	t.Run("within the cap", func(t *testing.T) {
		retry, err := politeretry.CheckRetry(t.Context(), response(429, "Retry-After", "60"), nil)
		assert.True(t, retry, "a minute is waited for")
		assert.NoError(t, err)
		retry, err = politeretry.CheckRetry(t.Context(), response(429, "Retry-After", "61"), nil)
		assert.False(t, retry)
		assert.NoError(t, err)
	})
}

// --- NewClient ---

// Both layers retrying at their defaults make one call 20 requests;
// NewClient makes it RetryMax+1.
func TestNewClientRetriesInOneLayerOnly(t *testing.T) {
	const calls = 3
	perCall := func(t *testing.T, c *retryablehttp.Client, srv *server) []int64 {
		t.Helper()
		var counts []int64
		for range calls {
			before := srv.requests.Load()
			resp, err := c.Get(srv.URL)
			require.Error(t, err, "gives up")
			require.Nil(t, resp)
			counts = append(counts, srv.requests.Load()-before)
		}
		return counts
	}

	t.Run("NewClient", func(t *testing.T) {
		srv := newServer(t, always(http.StatusServiceUnavailable))
		c := politeretry.NewClient()
		c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 2*time.Millisecond // RetryMax stays 4
		t.Cleanup(c.HTTPClient.CloseIdleConnections)
		counts := perCall(t, c, srv)
		t.Logf("NewClient: requests per call %v", counts)
		assert.Equal(t, []int64{5, 5, 5}, counts, "RetryMax+1")
	})
	t.Run("both retrying", func(t *testing.T) {
		srv := newServer(t, always(http.StatusServiceUnavailable))
		c := retryablehttp.NewClient()
		c.Logger, c.RetryWaitMin, c.RetryWaitMax = nil, time.Millisecond, 2*time.Millisecond
		c.HTTPClient.Transport = polite.New(c.HTTPClient.Transport, polite.WithBackoff(time.Millisecond, 2*time.Millisecond))
		t.Cleanup(c.HTTPClient.CloseIdleConnections)
		counts := perCall(t, c, srv)
		t.Logf("polite retrying under retryablehttp: requests per call %v", counts)
		assert.Equal(t, []int64{20, 20, 20}, counts, "(1+3)·(1+4)")
	})
}

// Under NewClient polite still paces: a pause the server asks for holds
// the retry even when retryablehttp's own wait is shorter.
func TestNewClientKeepsPolitesPacing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		header  []string
		waitMax time.Duration
		gap     time.Duration
	}{
		// retryablehttp waits at most 5ms; polite holds the key for 50ms.
		{"Retry-After-Ms 50", []string{"Retry-After-Ms", "50"}, 5 * time.Millisecond, 50 * time.Millisecond},
		// Backoff waits for the server's second (RetryWaitMax 30s).
		{"Retry-After 1", []string{"Retry-After", "1"}, 30 * time.Second, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// In fake time, over a server in memory: NewClient's
				// settings, and polite in pace-only mode under them.
				var times []time.Time
				next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					times = append(times, time.Now())
					resp := response(http.StatusOK)
					if len(times) == 1 {
						resp = response(http.StatusTooManyRequests, tc.header...)
					}
					resp.Request = req
					return resp, nil
				})
				c := politeretry.NewClient()
				c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, tc.waitMax
				c.HTTPClient = &http.Client{Transport: polite.New(next, polite.WithMaxAttempts(1))}
				resp, err := c.Get("http://api.test/")
				require.NoError(t, err)
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				_ = readBody(t, resp)
				require.Len(t, times, 2)
				gap := times[1].Sub(times[0])
				t.Logf("second request %v after the first", gap)
				assert.GreaterOrEqual(t, gap, tc.gap)
			})
		})
	}
}

func TestNewClientSettings(t *testing.T) {
	opts := make([]polite.Option, 1, 4)
	opts[0] = polite.WithRate(100, 1)
	c := politeretry.NewClient(opts...)
	assert.Nil(t, c.Logger, "nothing logged to stderr")
	assert.NotNil(t, c.Backoff)
	assert.NotNil(t, c.CheckRetry)
	assert.NotNil(t, c.PrepareRetry)
	assert.IsType(t, &polite.Transport{}, c.HTTPClient.Transport)
	assert.Equal(t, 4, c.RetryMax, "retryablehttp's default")
	assert.Nil(t, opts[:2][1], "the caller's slice is left alone")
}

// Under NewClient, polite numbers retryablehttp's attempts of a call 1 to
// RetryMax+1 in its events, as it numbers its own retries, and the
// caller's request keeps its context.
func TestNewClientTellsPoliteOfItsRetries(t *testing.T) {
	srv := newServer(t, always(http.StatusServiceUnavailable))
	var mu sync.Mutex
	var attempts []int
	c := politeretry.NewClient(polite.WithHooks(polite.Hooks{OnAttempt: func(e polite.Event) {
		mu.Lock()
		attempts = append(attempts, e.Attempt)
		mu.Unlock()
	}}))
	c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 2*time.Millisecond
	t.Cleanup(c.HTTPClient.CloseIdleConnections)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	for range 2 {
		_, err := c.StandardClient().Do(req)
		require.Error(t, err)
	}
	assert.Equal(t, []int{1, 2, 3, 4, 5, 1, 2, 3, 4, 5}, attempts, "each call counts from 1 again")
	assert.Zero(t, polite.ResendCount(req.Context()), "the caller's request is left alone")
}

func TestPrepareRetryCountsOn(t *testing.T) {
	req, err := http.NewRequestWithContext(polite.ContextWithResendCount(t.Context(), 2), http.MethodGet, "http://a.test/", nil)
	require.NoError(t, err)
	require.NoError(t, politeretry.PrepareRetry(req))
	assert.Equal(t, 3, polite.ResendCount(req.Context()))
	assert.Zero(t, polite.ResendCount(polite.ContextWithResendCount(t.Context(), -4)), "a negative count is 0")
}

// NewClient's CheckRetry keeps to the Transport's WithMaxRetryAfter; the
// package's CheckRetry, to polite's default of a minute.
func TestNewClientKeepsToTheTransportsMaxRetryAfter(t *testing.T) {
	req, err := http.NewRequest(http.MethodGet, "http://a.test/", nil)
	require.NoError(t, err)
	asks := func(d string) *http.Response {
		return &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {d}}, Request: req}
	}
	long := politeretry.NewClient(polite.WithMaxRetryAfter(5 * time.Minute))
	short := politeretry.NewClient(polite.WithMaxRetryAfter(10 * time.Second))
	for _, c := range []struct {
		name  string
		check retryablehttp.CheckRetry
		after string
		want  bool
	}{
		{"5 min cap, 2 min asked", long.CheckRetry, "120", true},
		{"5 min cap, 6 min asked", long.CheckRetry, "360", false},
		{"10 s cap, 30 s asked", short.CheckRetry, "30", false},
		{"10 s cap, 5 s asked", short.CheckRetry, "5", true},
		{"CheckRetry, 2 min asked", politeretry.CheckRetry, "120", false},
		{"CheckRetry, 1 min asked", politeretry.CheckRetry, "60", true},
	} {
		retry, err := c.check(t.Context(), asks(c.after), nil)
		assert.NoError(t, err, c.name)
		assert.Equal(t, c.want, retry, c.name)
	}
	assert.Equal(t, 5*time.Minute, long.HTTPClient.Transport.(*polite.Transport).MaxRetryAfter())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
