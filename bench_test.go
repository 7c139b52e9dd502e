package polite_test

import (
	"io"
	"net/http"
	"strconv"
	"testing"

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
	cases := []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", next},
		{"polite", polite.New(next)},
		{"polite-rate", polite.New(next, polite.WithRate(1e12, 1<<30))},
		{"retryablehttp", &retryablehttp.RoundTripper{Client: rh}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodGet, "http://api.test/items", nil)
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
			}
		})
	}
}

// BenchmarkRoundTripParallel is BenchmarkRoundTrip from many goroutines,
// over 64 keys.
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
	reqs := make([]*http.Request, 64)
	for i := range reqs {
		reqs[i], _ = http.NewRequest(http.MethodGet, "http://host"+strconv.Itoa(i)+".test/", nil)
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
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
