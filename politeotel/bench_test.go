package politeotel_test

import (
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politeotel"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// BenchmarkRoundTrip measures what metrics add to a request that needs no
// wait: polite with politeotel on the OpenTelemetry SDK (and on a no-op
// provider) against polite without it, in the same run, over a next that
// allocates nothing. Each request records one attempt.
func BenchmarkRoundTrip(b *testing.B) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	metrics := politeotel.New(politeotel.WithMeterProvider(sdk))
	cases := []struct {
		name string
		rt   http.RoundTripper
	}{
		{"polite", polite.New(next)},
		{"polite-metrics", polite.New(next, metrics)},
		{"polite-metrics-noop", polite.New(next, politeotel.New(politeotel.WithMeterProvider(noop.NewMeterProvider())))},
		{"polite-rate", polite.New(next, polite.WithRate(1e12, 1<<30))},
		{"polite-rate-metrics", polite.New(next, polite.WithRate(1e12, 1<<30), metrics)},
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
				_, _ = io.Copy(io.Discard, resp.Body)
			}
		})
	}
}

// BenchmarkRoundTripParallel is BenchmarkRoundTrip from many goroutines
// over 1,024 keys, past the key attribute's cap of 100: the cost of
// metrics on many cores and many hosts, as a crawler pays it. Run it with
// -cpu 1,2.
func BenchmarkRoundTripParallel(b *testing.B) {
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody}
	next := roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil })
	sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	cases := []struct {
		name string
		rt   http.RoundTripper
	}{
		{"polite", polite.New(next)},
		{"polite-metrics", polite.New(next, politeotel.New(politeotel.WithMeterProvider(sdk)))},
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
					_, _ = io.Copy(io.Discard, resp.Body)
					i++
				}
			})
		})
	}
}
