package politeotel_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politeotel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestNoSecretsInMetricsOrEvents plants secrets in a request's userinfo,
// query, fragment and headers, and in the URL of a transport error (an
// http.Client-style next names the URL in its *url.Error), and runs calls
// that throttle, retry, wait, fail and are refused. No value of any
// polite metric, nor any attribute of polite's span events, holds one.
// (The spans otelhttp makes are otelhttp's: its url.full keeps a query.)
func TestNoSecretsInMetricsOrEvents(t *testing.T) {
	secrets := []string{"pw-secret", "q-secret", "frag-secret", "hdr-secret", "cookie-secret", "err-secret"}
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		mp, rd := reader()
		uerr := &url.Error{Op: "Get", URL: "http://user:err-secret@a.test/p?key=err-secret", Err: errors.New("connection reset")}
		next := answer(status(429, "Retry-After", "1"), status(503), reply{err: uerr}, ok())
		tr := polite.New(next, polite.WithBackoff(0, 0), polite.WithMaxAttempts(4), polite.WithCrawlDelay(false),
			politeotel.New(politeotel.WithMeterProvider(mp)))
		over := otelhttp.NewTransport(tr, otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(noop.NewMeterProvider()))

		for _, u := range []string{
			"http://user:pw-secret@a.test/p?key=q-secret#frag-secret",
			"http://hdr-secret@b.test/p?key=q-secret",
		} {
			req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer hdr-secret")
			req.Header.Set("Cookie", "session=cookie-secret")
			resp, err := over.RoundTrip(req)
			if resp != nil {
				require.NoError(t, resp.Body.Close())
			}
			_ = err
		}
		// A call refused: its wait would pass its deadline.
		refusing := polite.New(answer(status(429, "Retry-After", "3600")), politeotel.New(politeotel.WithMeterProvider(mp)))
		_, _ = call(t, t.Context(), refusing, "http://user:pw-secret@c.test/p?key=q-secret")

		var rm metricdata.ResourceMetrics
		require.NoError(t, rd.Collect(context.Background(), &rm))
		var metrics strings.Builder
		n := 0
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if strings.HasPrefix(m.Name, "polite.") {
					for set := range values(m) { // each point's attributes, k=v,k=v
						fmt.Fprintf(&metrics, "%s %s\n", m.Name, set)
					}
					n++
				}
			}
		}
		require.Greater(t, n, 3, "polite's metrics were recorded")
		var events strings.Builder
		e := 0
		for _, s := range rec.Ended() {
			for _, ev := range s.Events() {
				if strings.HasPrefix(ev.Name, "polite.") {
					fmt.Fprint(&events, ev.Name)
					for _, kv := range ev.Attributes {
						fmt.Fprintf(&events, " %s=%s", kv.Key, kv.Value.Emit())
					}
					events.WriteString("\n")
					e++
				}
			}
		}
		require.Greater(t, e, 2, "polite's span events were recorded")
		// The dumps hold the attributes' values: a host is there, so a
		// secret would be.
		assert.Contains(t, metrics.String(), "a.test")
		assert.Contains(t, events.String(), "polite.wait=pause")
		for _, s := range secrets {
			assert.NotContains(t, metrics.String(), s, "a metric holds a secret")
			assert.NotContains(t, events.String(), s, "a span event holds a secret")
		}
		t.Logf("%d metrics, %d span events, no secret", n, e)
	})
}
