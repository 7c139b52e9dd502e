package politeotel

import (
	"context"
	"net/http/httptrace"

	"github.com/politehttp/polite"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Attributes of polite's span events.
const (
	// AttemptKey names the attempt an event concerns, 1 for the first.
	AttemptKey = attribute.Key("polite.attempt")
	// DelayKey gives a wait, in seconds.
	DelayKey = attribute.Key("polite.delay")
)

// ClientTrace is for otelhttp.WithClientTrace, with otelhttp's Transport
// under polite's: it sets http.request.resend_count on the span of each
// retry, as the HTTP semantic conventions ask, from the count polite puts
// in the retry's context ([polite.ResendCount]). It traces nothing else;
// to trace more as well, see [ClientTraceWith].
func ClientTrace(ctx context.Context) *httptrace.ClientTrace {
	setResendCount(ctx)
	return &httptrace.ClientTrace{}
}

// ClientTraceWith returns a function for otelhttp.WithClientTrace that
// does what [ClientTrace] does and returns the ClientTrace that f makes
// (such as otelhttptrace.NewClientTrace's): otelhttp takes one such
// function only.
func ClientTraceWith(f func(context.Context) *httptrace.ClientTrace) func(context.Context) *httptrace.ClientTrace {
	return func(ctx context.Context) *httptrace.ClientTrace {
		setResendCount(ctx)
		if ct := f(ctx); ct != nil {
			return ct
		}
		return &httptrace.ClientTrace{} // httptrace.WithClientTrace panics on nil
	}
}

func setResendCount(ctx context.Context) {
	if n := polite.ResendCount(ctx); n > 0 {
		trace.SpanFromContext(ctx).SetAttributes(resendKey.Int(n))
	}
}

// recording returns the span of the request's context if it is recording,
// or nil: events are built only for a span that keeps them.
func recording(e polite.Event) trace.Span {
	if e.Request == nil {
		return nil
	}
	if span := trace.SpanFromContext(e.Request.Context()); span.IsRecording() {
		return span
	}
	return nil
}
