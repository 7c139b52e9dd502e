package polite_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/politehttp/polite"
)

// okNext is a next that answers every request with the same 200 response
// and allocates nothing, so that a benchmark measures only what wraps it.
func okNext() http.RoundTripper {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}
	return roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
}

// BenchmarkRoundTrip measures the overhead of the Transport on a request
// that needs no wait, against the bare next and go-retryablehttp's
// RoundTripper over the same next, in the same run.
func BenchmarkRoundTrip(b *testing.B) {
	next := okNext()
	rh := retryablehttp.NewClient()
	rh.HTTPClient = &http.Client{Transport: next}
	rh.Logger = nil
	benchRoundTrips(b, "http://api.test/items", []namedRoundTripper{
		{"bare", next},
		{"polite", polite.New(next)},
		{"polite-status", withStatusPage(polite.New(next))},
		{"polite-memory", polite.New(next, polite.WithMemory(new(benchMemory)))},
		{"polite-rate", polite.New(next, polite.WithRate(1e12, 1<<30))},
		{"polite-crawler", crawler(next)},
		{"retryablehttp", &retryablehttp.RoundTripper{Client: rh}},
	})
	// The key of a host's robots.txt is its host under https, with no
	// string built; scheme://host under http, one allocation a call.
	benchRoundTrips(b, "https://api.test/items", []namedRoundTripper{{"polite-crawler-https", crawler(next)}})
}

// withStatusPage returns t with its status page mounted on a mux, as a
// program serves it, and never read: what it costs a call (nothing, the
// goal being 20 ns or less).
func withStatusPage(t *polite.Transport) *polite.Transport {
	http.NewServeMux().Handle("/debug/polite/", http.StripPrefix("/debug/polite", t.StatusHandler()))
	return t
}

// namedRoundTripper is a case of a benchmark.
type namedRoundTripper struct {
	name string
	rt   http.RoundTripper
}

// crawler returns a Transport over next with a crawler's options, none of
// which waits.
func crawler(next http.RoundTripper) http.RoundTripper {
	return polite.New(next, polite.WithRate(1e12, 1<<30), polite.WithMaxInFlight(4),
		polite.WithGlobalRate(1e12, 1<<30), polite.WithCrawlDelay(true))
}

// benchRoundTrips runs each case as a sub-benchmark: a GET of url, its
// answer read to the end and closed, as a caller does.
// benchMemory is a Memory that remembers nothing, for the overhead of
// WithMemory itself.
type benchMemory struct{}

func (benchMemory) Recall(string) (polite.Remembered, bool) { return polite.Remembered{}, false }
func (benchMemory) Remember(string, polite.Remembered)      {}

func benchRoundTrips(b *testing.B, url string, cases []namedRoundTripper) {
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkRoundTripCost measures what pacing by cost adds to a request
// whose answer has a body (a JSON answer with its usage at the end):
// polite without a cost, with a cost its Estimator states, and with a
// UsageReader that settles it from the body, against the bare next, which
// makes each answer (its allocations are in every case).
func BenchmarkRoundTripCost(b *testing.B) {
	const answer = `{"id":"chatcmpl-1","choices":[{"message":{"content":"Hello there"}}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}`
	next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(answer))}, nil
	})
	stated := func(*http.Request, []byte) (polite.Cost, string, error) { return polite.Cost{Tokens: 16}, "", nil }
	quota := polite.WithQuota(polite.UnitTokens, 1e12, time.Second)
	benchRoundTrips(b, "http://api.test/v1/chat/completions", []namedRoundTripper{
		{"bare", next},
		{"polite", polite.New(next)},
		{"polite-cost", polite.New(next, quota, polite.WithCost(stated))},
		{"polite-cost-usage", polite.New(next, quota, polite.WithCost(stated), polite.WithUsage(chatUsage))},
	})
}

// BenchmarkRoundTripParallel is BenchmarkRoundTrip from many goroutines,
// over 1024 keys, each goroutine starting at a key of its own. Run it with
// -cpu 1,2 to see how it scales.
func BenchmarkRoundTripParallel(b *testing.B) {
	next := okNext()
	cases := []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", next},
		{"polite", polite.New(next)},
		{"polite-rate", polite.New(next, polite.WithRate(1e12, 1<<30))},
	}
	reqs := make([]*http.Request, 1024)
	for i := range reqs {
		reqs[i], _ = http.NewRequest(http.MethodGet, "http://host"+strconv.Itoa(i)+".test/", nil)
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var start atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(397)) // goroutines spread over the keys
				for pb.Next() {
					resp, err := c.rt.RoundTrip(reqs[i%len(reqs)])
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					i++
				}
			})
		})
	}
}

// BenchmarkParseSignals parses the headers of typical responses: GitHub's
// (X-RateLimit-* among a dozen others), Cloudflare's IETF fields, and
// OpenAI's durations.
func BenchmarkParseSignals(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	common := func(extra ...string) http.Header {
		h := http.Header{
			"Date":           {"Thu, 01 Jan 2026 00:00:00 GMT"},
			"Content-Type":   {"application/json; charset=utf-8"},
			"Cache-Control":  {"private, max-age=60, s-maxage=60"},
			"Vary":           {"Accept, Authorization, Cookie"},
			"Etag":           {`W/"0123456789abcdef"`},
			"Server":         {"github.com"},
			"X-Github-Media": {"github.v3; format=json"},
		}
		for i := 0; i+1 < len(extra); i += 2 {
			h.Set(extra[i], extra[i+1])
		}
		return h
	}
	cases := []struct {
		name string
		h    http.Header
	}{
		{"github", common("X-Ratelimit-Limit", "5000", "X-Ratelimit-Remaining", "4987", "X-Ratelimit-Reset", "1767226500",
			"X-Ratelimit-Used", "13", "X-Ratelimit-Resource", "core")},
		{"ietf", common("Ratelimit", `"default";r=50;t=30`, "Ratelimit-Policy", `"burst";q=100;w=60,"default";q=1000;w=3600`)},
		{"openai", common("X-Ratelimit-Limit-Requests", "60", "X-Ratelimit-Remaining-Requests", "59", "X-Ratelimit-Reset-Requests", "1s",
			"X-Ratelimit-Limit-Tokens", "150000", "X-Ratelimit-Remaining-Tokens", "149984", "X-Ratelimit-Reset-Tokens", "6m0s")},
		{"none", common()},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				polite.ParseSignals(c.h, now)
			}
		})
	}
}

// BenchmarkParseSignalsLongDate parses a response whose Retry-After is a
// megabyte that is not a number, against one with a valid HTTP-date, and
// against http.ParseTime of the same megabyte: what ParseSignals called
// on it before it refused values longer than any HTTP-date unparsed
// (time.Parse copies a value it fails on into its error, and
// http.ParseTime tries three layouts).
func BenchmarkParseSignalsLongDate(b *testing.B) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	long := strings.Repeat("x", 1<<20)
	date := http.Header{"Retry-After": {"Thu, 01 Jan 2026 00:00:30 GMT"}}
	mb := http.Header{"Retry-After": {long}}
	b.Run("date", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			polite.ParseSignals(date, now)
		}
	})
	b.Run("1MB", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			polite.ParseSignals(mb, now)
		}
	})
	b.Run("1MB-http.ParseTime", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = http.ParseTime(long)
		}
	})
}

// BenchmarkGentleFinding measures a success told to Gentle while it finds
// the limit from a floor, where each success computes the climb's bound
// from the last successes (findRate): the work on every response of a
// key that was throttled once.
//
//	go test -run '^$' -bench GentleFinding -benchmem -count 6 .
func BenchmarkGentleFinding(b *testing.B) {
	start := time.Unix(1_000_000, 0)
	g := polite.NewGentle(start)
	for i := range 50 {
		g.Update(start.Add(time.Duration(i)*10*time.Millisecond), false)
	}
	g.Update(start.Add(500*time.Millisecond), true) // the first event: a floor
	now := start.Add(600 * time.Millisecond)
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Millisecond)
		g.Update(now, false)
	}
	if !g.Enabled() {
		b.Fatal("no throttle was recorded")
	}
}
