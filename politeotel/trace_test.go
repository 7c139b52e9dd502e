package politeotel_test

import (
	"context"
	"net/http/httptrace"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politeotel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// otelhttp's Transport under polite makes a client span for each attempt,
// with http.request.resend_count on retries; otelhttp's Transport over
// polite makes the span of the whole call, and polite's waits, retries and
// throttles are its events.
func TestTracesUnderAndOverPolite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		mp := noop.NewMeterProvider()
		under := otelhttp.NewTransport(answer(status(503, "Retry-After", "3"), status(502), ok()),
			otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp), otelhttp.WithClientTrace(politeotel.ClientTrace))
		tr := polite.New(under, polite.WithBackoff(0, 0), polite.WithAdaptive(polite.AdaptiveOff), politeotel.New(politeotel.WithMeterProvider(mp)))
		over := otelhttp.NewTransport(tr, otelhttp.WithTracerProvider(tp), otelhttp.WithMeterProvider(mp))

		resp, err := call(t, t.Context(), over, "http://a.test/")
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)

		spans := rec.Ended()
		require.Len(t, spans, 4, "three attempts and the call")
		call := spans[3]
		for i, s := range spans[:3] {
			assert.Equal(t, trace.SpanKindClient, s.SpanKind())
			assert.Equal(t, call.SpanContext().SpanID(), s.Parent().SpanID(), "attempt %d is a child of the call", i+1)
			n, ok := attr(s.Attributes(), "http.request.resend_count")
			if i == 0 {
				assert.False(t, ok, "a first attempt has no resend count")
				continue
			}
			assert.True(t, ok, "attempt %d has a resend count", i+1)
			assert.Equal(t, int64(i), n.AsInt64())
		}
		assert.Equal(t, 3*time.Second, spans[1].StartTime().Sub(spans[0].EndTime()), "the retry waited the Retry-After")

		var names []string
		for _, e := range call.Events() {
			names = append(names, e.Name)
		}
		assert.Equal(t, []string{"polite.throttled", "polite.retry", "polite.wait", "polite.retry"}, names)
		wait := call.Events()[2]
		cause, _ := attr(wait.Attributes, "polite.wait")
		delay, _ := attr(wait.Attributes, "polite.delay")
		assert.Equal(t, "pause", cause.AsString())
		assert.Equal(t, 3.0, delay.AsFloat64())
	})
}

func attr(kvs []attribute.KeyValue, key string) (attribute.Value, bool) {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// ClientTraceWith sets the resend count as ClientTrace does, and returns
// the ClientTrace the caller's function makes, or an empty one for nil.
func TestClientTraceWith(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, span := tp.Tracer("test").Start(polite.ContextWithResendCount(t.Context(), 2), "attempt")
	mine := &httptrace.ClientTrace{}
	assert.Same(t, mine, politeotel.ClientTraceWith(func(context.Context) *httptrace.ClientTrace { return mine })(ctx))
	assert.NotNil(t, politeotel.ClientTraceWith(func(context.Context) *httptrace.ClientTrace { return nil })(ctx))
	span.End()
	n, ok := attr(rec.Ended()[0].Attributes(), "http.request.resend_count")
	require.True(t, ok)
	assert.Equal(t, int64(2), n.AsInt64())
}
