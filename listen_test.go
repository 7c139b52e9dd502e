package polite_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// quotaServer answers every request 200 with X-RateLimit-* headers for a
// quota of limit per window, renewed at whole windows, and 429 once it is
// spent. It counts what it refused.
type quotaServer struct {
	limit   int
	window  time.Duration
	start   time.Time
	used    int
	period  int
	refused int
	times   []time.Time
}

func (q *quotaServer) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	q.times = append(q.times, now)
	period := int(now.Sub(q.start) / q.window)
	if period != q.period {
		q.period, q.used = period, 0
	}
	reset := q.start.Add(time.Duration(period+1) * q.window)
	status := http.StatusOK
	if q.used >= q.limit {
		status = http.StatusTooManyRequests
		q.refused++
	} else {
		q.used++
	}
	return respond(req, status, http.NoBody,
		"X-RateLimit-Limit", strconv.Itoa(q.limit),
		"X-RateLimit-Remaining", strconv.Itoa(q.limit-q.used),
		"X-RateLimit-Reset-After", strconv.FormatFloat(reset.Sub(now).Seconds(), 'f', 3, 64),
	), nil
}

// With the quota in headers, polite spreads it over the window and is
// never refused: it slows down before the 429, not after.
func TestPacesByTheQuotaBeforeAnyRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &quotaServer{limit: 10, window: 10 * time.Second, start: time.Now()}
		tr := polite.New(srv)
		for range 25 {
			fetch(t, tr, "http://api.test/")
		}
		assert.Zero(t, srv.refused)
		// 10 per 10 seconds: the 25th request goes in the third window.
		assert.GreaterOrEqual(t, time.Since(srv.start), 20*time.Second)
		assert.Less(t, time.Since(srv.start), 30*time.Second)
	})
}

// A 200 that says nothing is left holds the next call until the reset.
func TestSpentQuotaHoldsCallsUntilTheReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				return respond(req, 200, http.NoBody, "RateLimit", `"default";r=0;t=30`), nil
			}
			return respond(req, 200, http.NoBody), nil
		})
		tr := polite.New(next)
		start := time.Now()
		for range 2 {
			fetch(t, tr, "http://api.test/")
		}
		assert.Equal(t, 30*time.Second, time.Since(start))

		// A caller whose deadline comes first is refused at once.
		calls = 0
		tr = polite.New(next)
		fetch(t, tr, "http://api.test/")
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := get(t, ctx, tr, "http://api.test/")
		var te *polite.ThrottledError
		require.ErrorAs(t, err, &te)
		assert.True(t, te.Server)
		assert.Equal(t, 30*time.Second, te.Wait)
	})
}

// A refusal from a bucket that refills, which says its reset is always a
// second away (tollbooth: "RateLimit-Reset: 1"), is retried after the
// backoff, not after the reset: the count comes back as it goes. A
// window's refusal is retried at its reset.
func TestARefusalOfABucketThatRefillsIsNotHeldToItsReset(t *testing.T) {
	for _, c := range []struct {
		name  string
		reset string
		least time.Duration
		most  time.Duration
	}{
		{"bucket", "1", 0, 200 * time.Millisecond}, // with tollbooth's X-Rate-Limit-Duration
		{"window", "30", 30 * time.Second, 31 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				quota := func(left int) []string {
					h := []string{"RateLimit-Limit", "100", "RateLimit-Reset", c.reset, "RateLimit-Remaining", strconv.Itoa(left)}
					if c.reset == "1" {
						h = append(h, "X-Rate-Limit-Limit", "100.00", "X-Rate-Limit-Duration", "1")
					}
					return h
				}
				next := newStub(status(200, quota(50)...), status(200, quota(49)...),
					status(http.StatusTooManyRequests, quota(0)...), status(200, quota(48)...))
				tr := polite.New(next)
				for range 2 {
					fetch(t, tr, "http://api.test/")
				}
				time.Sleep(time.Second)
				start := time.Now()
				resp := fetch(t, tr, "http://api.test/")
				assert.Equal(t, 200, resp.StatusCode)
				assert.GreaterOrEqual(t, time.Since(start), c.least)
				assert.Less(t, time.Since(start), c.most)
			})
		})
	}
}

// GitHub answers its primary limit with 403 and remaining 0: polite treats
// it as a throttle and retries after the reset.
func TestGitHub403WithNothingLeftIsAThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				return respond(req, 403, http.NoBody, "X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "20",
					"X-RateLimit-Resource", "core"), nil
			}
			return respond(req, 200, http.NoBody), nil
		})
		start := time.Now()
		resp := fetch(t, polite.New(next), "http://api.github.test/repos/a/b")
		assert.Equal(t, 200, resp.StatusCode)
		assert.Equal(t, 20*time.Second, time.Since(start))

		// A 403 without it is not retried.
		calls = 0
		forbidden := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			calls++
			return respond(req, 403, http.NoBody), nil
		})
		resp, err := get(t, t.Context(), polite.New(forbidden), "http://api.github.test/")
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, 1, calls)
	})
}

// Keys whose server names the same bucket share its quota: here each path
// is a key, and Discord's X-RateLimit-Bucket says two routes share one.
func TestKeysThatShareABucketShareItsQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.HasPrefix(req.URL.Path, "/channels") {
				return respond(req, 200, http.NoBody, "X-RateLimit-Bucket", "abcd1234",
					"X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "4.5"), nil
			}
			return respond(req, 200, http.NoBody), nil
		})
		byPath := polite.WithKey(func(r *http.Request) string { return r.URL.Path })
		tr := polite.New(next, byPath)
		for _, path := range []string{"/channels/1/messages", "/channels/2/messages"} {
			fetch(t, tr, "http://discord.test"+path)
		}
		start := time.Now()
		fetch(t, tr, "http://discord.test/channels/1/messages")
		assert.Equal(t, 4500*time.Millisecond, time.Since(start), "spent bucket, whichever key spent it")
		start = time.Now()
		resp, err := get(t, t.Context(), tr, "http://discord.test/users/@me")
		require.NoError(t, err)
		readBody(t, resp)
		assert.Zero(t, time.Since(start), "another bucket is not held")
	})
}

// One host, two buckets: GitHub's search quota is spent while core has
// plenty. Requests to search paths wait; the others go.
func TestABucketSpentHoldsOnlyItsPaths(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if strings.HasPrefix(req.URL.Path, "/search") {
				return respond(req, 200, http.NoBody, "X-RateLimit-Resource", "search",
					"X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "40"), nil
			}
			return respond(req, 200, http.NoBody, "X-RateLimit-Resource", "core",
				"X-RateLimit-Remaining", "4000", "X-RateLimit-Reset-After", "3600"), nil
		})
		tr := polite.New(next)
		for _, path := range []string{"/search/issues", "/repos/a/b"} {
			fetch(t, tr, "http://api.github.test"+path)
		}
		start := time.Now()
		fetch(t, tr, "http://api.github.test/repos/a/b")
		assert.Less(t, time.Since(start), time.Second, "core is not held by search")
		start = time.Now()
		resp, err := get(t, t.Context(), tr, "http://api.github.test/search/issues")
		require.NoError(t, err)
		readBody(t, resp)
		assert.InDelta(t, 40, time.Since(start).Seconds(), 1)
	})
}

// Discord's global limit holds every route of the key.
func TestGlobalLimitHoldsTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			calls++
			if calls == 1 {
				return respond(req, 429, http.NoBody, "X-RateLimit-Global", "true", "Retry-After", "3",
					"X-RateLimit-Bucket", "abcd1234"), nil
			}
			return respond(req, 200, http.NoBody), nil
		})
		tr := polite.New(next, polite.WithMaxAttempts(1))
		fetch(t, tr, "http://discord.test/channels/1/messages")
		start := time.Now()
		resp, err := get(t, t.Context(), tr, "http://discord.test/users/@me")
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, 3*time.Second, time.Since(start))
	})
}

// A cached response tells nothing about the quota now.
func TestCachedResponsesAreNotHeeded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return respond(req, 200, http.NoBody, "Age", "120", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "60"), nil
		})
		tr := polite.New(next)
		start := time.Now()
		for range 3 {
			fetch(t, tr, "http://api.test/")
		}
		assert.Zero(t, time.Since(start))
	})
}

// "Retry-After: 0" from a server under load is a hint, not a licence: the
// backoff still spaces each call's retries, and once Gentle has watched a
// second of refusals it paces the key from 0.5 requests a second.
func TestRetryAfterZeroUnderLoadIsNotALicence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var at []time.Time
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			at = append(at, time.Now())
			return respond(req, 429, io.NopCloser(strings.NewReader("<html>Too Many Requests</html>")), "Retry-After", "0"), nil
		})
		tr := polite.New(next)
		start := time.Now()
		for range 10 {
			first := len(at)
			fetch(t, tr, "http://api.test/")
			for i := first + 1; i < len(at); i++ {
				assert.Greater(t, at[i].Sub(at[i-1]), time.Duration(0), "a retry at once")
			}
		}
		assert.Greater(t, time.Since(start), 5*time.Second, "paced once watched")
	})
}
