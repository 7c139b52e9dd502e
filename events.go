package polite

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// Hooks are functions that a [Transport] calls on its events (see
// [WithHooks]). Each receives an [Event]; nil hooks are skipped. Hooks run
// synchronously on the goroutine of the call, after the decision they
// report is made and with no lock held, so a hook may use the Transport.
type Hooks struct {
	// OnRetry is called when an attempt failed and is about to be retried,
	// before the wait. Attempt is the attempt that failed (1-based); Delay
	// is the wait before the next one; StatusCode or Err says why;
	// RetryAfter is what the server asked for; Budget is what is left of
	// the retry budget after paying for the retry.
	OnRetry func(Event)

	// OnThrottled is called when the server throttles a key: a 429, or a
	// 503 that carries Retry-After. RetryAfter is the pause the server
	// asked for, 0 if none.
	OnThrottled func(Event)

	// OnBudgetExhausted is called when a failed attempt is not retried
	// because the retry budget is empty. Budget is what the budget holds.
	OnBudgetExhausted func(Event)

	// OnWait is called before a request waits for permission to be sent:
	// Delay is the wait; Server reports whether it is a pause the server
	// asked for rather than local pacing.
	OnWait func(Event)

	// OnRefused is called when a wait is refused because it would end
	// after the context deadline or exceed the WithMaxRetryAfter cap. Err
	// is the [*ThrottledError] that the call returns.
	OnRefused func(Event)
}

// An Event describes something a [Transport] did for one call. Each hook
// in [Hooks] documents the fields it sets; the others are zero.
type Event struct {
	// Request is the caller's request. Hooks must not modify it.
	Request *http.Request
	// Key is the request's key (see [WithKey]).
	Key string
	// Attempt is the attempt the event concerns, 1 for the first.
	Attempt int
	// StatusCode is the status of the response behind the event, or 0.
	StatusCode int
	// Err is the transport error behind the event, or nil.
	Err error
	// Delay is a wait that polite is about to make.
	Delay time.Duration
	// RetryAfter is the delay the server asked for, or 0.
	RetryAfter time.Duration
	// Budget is the number of tokens in the retry budget.
	Budget int
	// Server reports whether a wait was asked for by the server.
	Server bool
}

// Reason returns a short description of why the event happened: "status
// 503" for a response, the error text for a transport error, or "" when
// neither is set.
func (e Event) Reason() string {
	switch {
	case e.Err != nil:
		return e.Err.Error()
	case e.StatusCode != 0:
		return "status " + strconv.Itoa(e.StatusCode)
	}
	return ""
}

func (t *Transport) retrying(e Event) {
	if h := t.cfg.hooks.OnRetry; h != nil {
		h(e)
	}
	t.log(e, slog.LevelDebug, "polite: retrying",
		slog.Duration("delay", e.Delay), slog.Duration("retry_after", e.RetryAfter), slog.Int("budget", e.Budget))
}

func (t *Transport) throttled(e Event) {
	if h := t.cfg.hooks.OnThrottled; h != nil {
		h(e)
	}
	t.log(e, slog.LevelInfo, "polite: server throttled", slog.Duration("retry_after", e.RetryAfter))
}

func (t *Transport) budgetExhausted(e Event) {
	if h := t.cfg.hooks.OnBudgetExhausted; h != nil {
		h(e)
	}
	t.log(e, slog.LevelWarn, "polite: retry budget exhausted, not retrying", slog.Int("budget", e.Budget))
}

func (t *Transport) waited(e Event) {
	if h := t.cfg.hooks.OnWait; h != nil {
		h(e)
	}
	t.log(e, slog.LevelDebug, "polite: waiting", slog.Duration("delay", e.Delay), slog.Bool("server", e.Server))
}

func (t *Transport) refused(e Event, err *ThrottledError) {
	if h := t.cfg.hooks.OnRefused; h != nil {
		h(e)
	}
	t.log(e, slog.LevelWarn, "polite: wait refused", slog.Duration("wait", err.Wait), slog.Duration("allowed", err.Allowed))
}

// log writes one record about e, if a logger is set and takes level.
func (t *Transport) log(e Event, level slog.Level, msg string, attrs ...slog.Attr) {
	l := t.cfg.logger
	if l == nil {
		return
	}
	ctx := context.Background()
	if e.Request != nil {
		ctx = e.Request.Context()
	}
	if !l.Enabled(ctx, level) {
		return
	}
	attrs = append(attrs, slog.String("key", e.Key), slog.Int("attempt", e.Attempt))
	if e.Request != nil {
		attrs = append(attrs, slog.String("method", e.Request.Method))
	}
	if e.StatusCode != 0 {
		attrs = append(attrs, slog.Int("status", e.StatusCode))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}
