package politeotel_test

import (
	"context"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// reply is one scripted answer of a stub server.
type reply struct {
	status int
	header []string // name, value, …
	err    error
}

// script is an in-memory next RoundTripper that answers with its replies
// in turn, the last one forever, per host.
type script struct {
	mu      sync.Mutex
	replies []reply
	sent    map[string]int
	reqs    []*http.Request
}

func answer(replies ...reply) *script { return &script{replies: replies, sent: map[string]int{}} }

func (s *script) RoundTrip(req *http.Request) (*http.Response, error) {
	s.mu.Lock()
	i := min(s.sent[req.URL.Host], len(s.replies)-1)
	s.sent[req.URL.Host]++
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	if req.Body != nil {
		_ = req.Body.Close()
	}
	r := s.replies[i]
	if r.err != nil {
		return nil, r.err
	}
	h := http.Header{}
	for j := 0; j+1 < len(r.header); j += 2 {
		h.Add(r.header[j], r.header[j+1])
	}
	return &http.Response{StatusCode: r.status, Header: h, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
}

func ok() reply                          { return reply{status: 200} }
func status(code int, h ...string) reply { return reply{status: code, header: h} }

// call sends a GET to url through rt and reads the answer away.
func call(t *testing.T, ctx context.Context, rt http.RoundTripper, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	if resp != nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	return resp, err
}

// reader returns a MeterProvider and the reader that collects from it.
func reader() (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	r := sdkmetric.NewManualReader()
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(r)), r
}

// collect returns the metrics r holds, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// values returns the values of a counter or gauge, or the sums of a
// histogram's points, by their attribute sets written "k=v,k=v" (sorted).
func values(m metricdata.Metrics) map[string]float64 {
	out := map[string]float64{}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out[enc(p.Attributes)] += float64(p.Value)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out[enc(p.Attributes)] = float64(p.Value)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out[enc(p.Attributes)] = p.Value
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			out[enc(p.Attributes)] += p.Sum
		}
	}
	return out
}

// counts returns the counts of a histogram's points, by attribute set.
func counts(m metricdata.Metrics) map[string]uint64 {
	out := map[string]uint64{}
	if d, ok := m.Data.(metricdata.Histogram[float64]); ok {
		for _, p := range d.DataPoints {
			out[enc(p.Attributes)] += p.Count
		}
	}
	return out
}

func enc(s attribute.Set) string {
	var kv []string
	for _, a := range s.ToSlice() {
		kv = append(kv, string(a.Key)+"="+a.Value.Emit())
	}
	sort.Strings(kv)
	return strings.Join(kv, ",")
}
