package polite_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// endless is a body that never ends: it repeats line, counting the bytes
// read from it, and records whether it was closed.
type endless struct {
	line   string
	read   atomic.Int64
	closed atomic.Bool
	at     int
}

func (e *endless) Read(p []byte) (int, error) {
	if e.closed.Load() {
		return 0, errors.New("read after close")
	}
	n := 0
	for n < len(p) {
		c := copy(p[n:], e.line[e.at:])
		n += c
		e.at = (e.at + c) % len(e.line)
	}
	e.read.Add(int64(n))
	return n, nil
}

func (e *endless) Close() error {
	e.closed.Store(true)
	return nil
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileRetryAfter: whatever a throttling server writes in
// Retry-After, a call ends by the WithMaxRetryAfter cap (a minute): it
// waits out what it reads as a valid pause within the cap, and hands back
// the 429 at once for one over it, or a value it cannot read as one.
func TestHostileRetryAfter(t *testing.T) {
	for _, v := range []string{
		"99999999999999999999", "9223372036854775807", "1e308", "-1", "-0", "NaN", "Inf", "+5", "0x10",
		" 5 ", "5, 10", "5.000000000000000000001", "Sun, 06 Nov 1994 08:49:37 GMT", "Fri, 31 Dec 9999 23:59:59 GMT",
		"Thu, 01 Jan 1970 00:00:00 GMT", strings.Repeat("9", 10000), "\x00", "１０", "5\r\nX-Evil: 1",
	} {
		t.Run(v[:min(len(v), 24)], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := newStub(status(429, "Retry-After", v), status(200))
				tr := polite.New(next, polite.WithMaxRetryAfter(time.Minute), polite.WithBackoff(time.Millisecond, time.Second))
				start := time.Now()
				resp, err := get(t, context.Background(), tr, "http://api.test/")
				took := time.Since(start)
				require.NoError(t, err)
				resp.Body.Close()
				assert.LessOrEqual(t, took, time.Minute+time.Second, "waited past the cap")
				assert.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, resp.StatusCode)
				next.checkDiscarded(t, false)
			})
		})
	}
}

// TestHostileHeaders: 10,000 repeated fields and values of a megabyte
// are read in bounded time and memory: ParseSignals looks at what it
// needs of them, and a call through polite ends as usual.
func TestHostileHeaders(t *testing.T) {
	mb := strings.Repeat("9", 1<<20)
	many := make([]string, 10000)
	for i := range many {
		many[i] = `"p` + strings.Repeat("x", i%7) + `";q=10;w=1`
	}
	rates := make([]string, 10000)
	for i := range rates {
		rates[i] = `"p";r=` + strings.Repeat("1", i%5+1) + `;t=1`
	}
	cases := map[string]http.Header{
		"10,000 Retry-After":              {"Retry-After": make([]string, 10000)},
		"10,000 RateLimit-Policy":         {"Ratelimit-Policy": many, "Ratelimit": rates},
		"10,000 X-RateLimit-Remaining":    {"X-Ratelimit-Remaining": rates, "X-Ratelimit-Limit": many},
		"1 MB Retry-After":                {"Retry-After": {mb}},
		"1 MB RateLimit":                  {"Ratelimit": {`"p";r=` + mb}, "Ratelimit-Policy": {`"p";q=` + mb + `;w=` + mb}},
		"1 MB X-RateLimit-Reset":          {"X-Ratelimit-Reset": {mb}, "X-Ratelimit-Remaining": {"0"}},
		"1 MB of list":                    {"Ratelimit": {strings.Repeat(`"a";r=1,`, 1<<17)}},
		"1 MB of parameters":              {"Ratelimit-Policy": {`"a"` + strings.Repeat(`;q=1`, 1<<18)}},
		"1 MB Shopify":                    {"X-Shopify-Shop-Api-Call-Limit": {mb + "/" + mb}},
		"1 MB Anthropic reset":            {"Anthropic-Ratelimit-Requests-Reset": {mb}, "Anthropic-Ratelimit-Requests-Remaining": {"0"}},
		"1 MB OpenAI reset":               {"X-Ratelimit-Reset-Requests": {mb + "s"}, "X-Ratelimit-Remaining-Requests": {"0"}},
		"1 MB Date":                       {"Date": {mb}, "X-Ratelimit-Reset": {"1767225630"}},
		"1 MB of a header polite ignores": {"X-Whatever": {mb}},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var s polite.Signals
			start := time.Now()
			bytes := allocated(func() { s = polite.ParseSignals(h, now) })
			took := time.Since(start)
			// The input is up to a few MB; reading it must not cost many
			// times that, nor take long (a generous bound: -race, a
			// loaded machine).
			assert.Less(t, bytes, uint64(16<<20), "bytes allocated")
			assert.Less(t, took, 2*time.Second)
			assert.GreaterOrEqual(t, s.RetryAfter, time.Duration(0))
			assert.GreaterOrEqual(t, s.Quota.Remaining, 0.0)

			synctest.Test(t, func(t *testing.T) {
				next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					return respond(req, http.StatusTooManyRequests, io.NopCloser(strings.NewReader("")), flatten(h)...), nil
				})
				tr := polite.New(next, polite.WithMaxAttempts(2), polite.WithBackoff(time.Millisecond, time.Second))
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				resp, err := get(t, ctx, tr, "http://api.test/")
				if err == nil {
					resp.Body.Close()
				}
			})
		})
	}
}

// TestHostileDates: a megabyte in a header read as a date (Retry-After
// that is not a number, X-RateLimit-Retry-After, a reset, Date) is
// ignored without being copied: longer than any date, it is not parsed.
// time.Parse copies what it fails to parse into its error, and
// http.ParseTime tries three layouts: 6 MB a response before.
func TestHostileDates(t *testing.T) {
	pad := strings.Repeat("x", 1<<20)
	cases := map[string]http.Header{
		"Retry-After":               {"Retry-After": {pad}},
		"Retry-After, a date first": {"Retry-After": {"Sun, 06 Nov 1994 08:49:37 GMT" + pad}},
		"Retry-After, UTC last":     {"Retry-After": {"Sun, 06 Nov 1994 08:49:37" + pad + " UTC"}},
		"X-RateLimit-Retry-After":   {"X-Ratelimit-Retry-After": {pad}},
		"X-RateLimit-Reset":         {"X-Ratelimit-Reset": {pad}, "X-Ratelimit-Remaining": {"0"}},
		"Anthropic reset, RFC 3339": {"Anthropic-Ratelimit-Requests-Reset": {"2026-01-01T00:00:30Z" + pad}, "Anthropic-Ratelimit-Requests-Remaining": {"0"}},
		"Date":                      {"Date": {pad}, "X-Ratelimit-Reset": {"1767225630"}, "X-Ratelimit-Remaining": {"0"}},
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			const parses = 20
			var s polite.Signals
			bytes := allocated(func() {
				for range parses {
					s = polite.ParseSignals(h, now)
				}
			})
			// A copy of the value would be a megabyte a parse; a parse
			// that copies nothing allocates a few hundred bytes.
			assert.Less(t, bytes/parses, uint64(16<<10), "bytes allocated a parse")
			assert.False(t, s.HasRetryAfter, "a malformed date is ignored")
			if name == "Date" {
				assert.True(t, s.Quota.Reset.Equal(now.Add(30*time.Second)), "the reset stands, uncorrected")
			} else {
				assert.True(t, s.Quota.Reset.IsZero(), "a malformed reset is ignored")
			}
		})
	}
}

// flatten turns h into name, value pairs.
func flatten(h http.Header) []string {
	var kv []string
	for name, values := range h {
		for _, v := range values {
			kv = append(kv, name, v)
		}
	}
	return kv
}

// TestHostileBodies: a discarded response whose body never ends is read
// at most 4 KiB and closed, and the call goes on; robots.txt of 500 MB is
// read at most RFC 9309's 500 KiB (polite reads 512 KiB), and the host is
// served.
func TestHostileBodies(t *testing.T) {
	t.Run("an endless body discarded", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			body := &endless{line: "too many requests\n"}
			calls := 0
			next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				calls++
				if calls == 1 {
					return respond(req, http.StatusServiceUnavailable, body), nil
				}
				return respond(req, http.StatusOK, io.NopCloser(strings.NewReader("ok"))), nil
			})
			resp, err := get(t, context.Background(), polite.New(next), "http://api.test/")
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.LessOrEqual(t, body.read.Load(), int64(4<<10), "bytes drained")
			assert.True(t, body.closed.Load())
		})
	})
	t.Run("robots.txt of 500 MB", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			robots := &endless{line: "User-agent: *\nCrawl-delay: 2\n# " + strings.Repeat("x", 100) + "\n"}
			next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.URL.Path == "/robots.txt" {
					return respond(req, http.StatusOK, robots), nil
				}
				return respond(req, http.StatusOK, io.NopCloser(strings.NewReader("page"))), nil
			})
			tr := polite.New(next, polite.WithCrawlDelay(true))
			var bytes uint64
			bytes = allocated(func() {
				for range 2 {
					resp, err := get(t, context.Background(), tr, "http://site.test/page")
					require.NoError(t, err)
					resp.Body.Close()
				}
			})
			assert.LessOrEqual(t, robots.read.Load(), int64(512<<10+4<<10+4096), "bytes of robots.txt read")
			assert.Less(t, bytes, uint64(8<<20), "bytes allocated reading it")
			assert.True(t, robots.closed.Load())
		})
	})
	t.Run("robots.txt redirected from host to host", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var robotsAsked atomic.Int32
			next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if strings.HasSuffix(req.URL.Path, "robots.txt") {
					n := robotsAsked.Add(1)
					// Each hop goes to another host, forever.
					return respond(req, http.StatusMovedPermanently, io.NopCloser(strings.NewReader("")),
						"Location", "http://elsewhere"+strings.Repeat("x", int(n))+".test/robots.txt"), nil
				}
				return respond(req, http.StatusOK, io.NopCloser(strings.NewReader("page"))), nil
			})
			tr := polite.New(next, polite.WithCrawlDelay(true))
			resp, err := get(t, context.Background(), tr, "http://site.test/page")
			require.NoError(t, err, "too many redirects: robots.txt unavailable, no restriction")
			resp.Body.Close()
			assert.Equal(t, int32(6), robotsAsked.Load(), "robots.txt and its five redirects")
		})
	})
}
