package polite

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/politehttp/polite/internal/gate"
)

// Hooks are functions that a [Transport] calls on its events (see
// [WithHooks]). Each but OnNew receives an [Event]; nil hooks are skipped.
// Hooks run synchronously on the goroutine of the call, with no lock held,
// so a hook may use the Transport: after the decision they report is
// made, and, but for a wait for a WithMaxInFlight place, before the wait
// they report.
type Hooks struct {
	// OnRetry is called when an attempt failed and is about to be retried,
	// before the wait. Attempt is the attempt that failed (1-based); Delay
	// is the wait before the next one; StatusCode or Err says why, and
	// Throttled whether the server throttled it; RetryAfter is what the
	// server asked for; Budget is what is left of the retry budget after
	// paying for the retry.
	OnRetry func(Event)

	// OnThrottled is called when the server throttles a key: a 429, a 503
	// that carries Retry-After, or a 403 that reports its quota spent
	// (GitHub's primary limit). RetryAfter is the pause the server asked
	// for (or the time until the spent quota's reset), 0 if none.
	OnThrottled func(Event)

	// OnBudgetExhausted is called when a failed attempt is not retried
	// because the retry budget is empty. Budget is what the budget holds.
	OnBudgetExhausted func(Event)

	// OnWait is called before a request waits: Delay is the wait, Wait
	// what it waits for, Server whether it is a pause the server asked for
	// rather than local pacing, and Attempt the attempt that waits (for a
	// retry's delay, the retry). A call queued for its key's token whose
	// wait grows (the server paused the key meanwhile) is reported again,
	// for what it adds. A wait for a place under [WithMaxInFlight] has no
	// length known in advance: it is reported once it ends (the place
	// granted, or the call given up), with Delay the time waited.
	OnWait func(Event)

	// OnRefused is called when polite refuses a call without sending it:
	// a wait that would not end before the context deadline or exceed the
	// WithMaxRetryAfter cap (Err is the [*ThrottledError] that the call
	// returns), a host off limits under [WithCrawlDelay] (Err is the
	// [*RobotsError]), or a request larger than the server's limit (Err is
	// the [*CostError]).
	OnRefused func(Event)

	// OnAttempt is called when an attempt has been answered: StatusCode is
	// the response's status, or Err the transport error, and Throttled
	// whether the server throttled it; Attempt is 1 for the first attempt
	// of a call and more for its retries (counting those of a layer above,
	// see [ContextWithResendCount]). Budget is not set.
	OnAttempt func(Event)

	// OnNew is called once by [New], with the Transport it made, before
	// New returns: a set of hooks that also reads the Transport's state
	// from time to time (its [Transport.Keys] and [Transport.RetryBudget],
	// as an exporter of metrics does) learns of it there.
	OnNew func(*Transport)
}

// join returns hooks that call h's hooks and then o's.
func (h Hooks) join(o Hooks) Hooks {
	return Hooks{
		OnRetry:           both(h.OnRetry, o.OnRetry),
		OnThrottled:       both(h.OnThrottled, o.OnThrottled),
		OnBudgetExhausted: both(h.OnBudgetExhausted, o.OnBudgetExhausted),
		OnWait:            both(h.OnWait, o.OnWait),
		OnRefused:         both(h.OnRefused, o.OnRefused),
		OnAttempt:         both(h.OnAttempt, o.OnAttempt),
		OnNew:             both(h.OnNew, o.OnNew),
	}
}

// both returns a function that calls f and then g, either of which may be
// nil.
func both[T any](f, g func(T)) func(T) {
	switch {
	case f == nil:
		return g
	case g == nil:
		return f
	}
	return func(v T) { f(v); g(v) }
}

// A WaitCause says what a request waits for (see [Hooks.OnWait]).
type WaitCause uint8

// The causes of a wait.
const (
	// WaitRate is pacing: the key's token bucket, set by [WithRate] or
	// its controller, the [WithGlobalRate] bucket, a [WithWindow], or the
	// fleet's booking of a send.
	WaitRate WaitCause = iota + 1
	// WaitPause is a pause the server asked for with Retry-After.
	WaitPause
	// WaitQuota is the quota the server reports: spread evenly over what is
	// left of its window, or spent until its reset.
	WaitQuota
	// WaitSlot is a place among the requests in flight that
	// [WithMaxInFlight] allows.
	WaitSlot
	// WaitCrawlDelay is the spacing that a host's robots.txt asks for
	// ([WithCrawlDelay]).
	WaitCrawlDelay
	// WaitBackoff is the delay before a retry.
	WaitBackoff
	// WaitCost is the request's cost (see [WithCost]): the quotas it counts
	// against in tokens or points hold less than it, or requests ahead of
	// it wait for theirs.
	WaitCost
)

// String returns the cause's name, as the metrics of package politeotel
// name it: "rate", "pause", "quota", "slot", "crawl_delay", "backoff" or
// "cost".
func (w WaitCause) String() string {
	switch w {
	case WaitRate:
		return "rate"
	case WaitPause:
		return "pause"
	case WaitQuota:
		return "quota"
	case WaitSlot:
		return "slot"
	case WaitCrawlDelay:
		return "crawl_delay"
	case WaitBackoff:
		return "backoff"
	case WaitCost:
		return "cost"
	}
	return "WaitCause(" + strconv.Itoa(int(w)) + ")"
}

// An Event describes something a [Transport] did for one call. Each hook
// in [Hooks] documents the fields it sets; the others are zero.
type Event struct {
	// Request is the caller's request. Hooks must not modify it. It holds
	// the caller's secrets (its URL's password and query, its
	// Authorization and Cookie headers): polite never logs it.
	Request *http.Request
	// Key is the request's key (see [WithKey]).
	Key string
	// Attempt is the attempt the event concerns, 1 for the first.
	Attempt int
	// Priority is the request's priority (see [ContextWithPriority]).
	Priority Priority
	// Tenant is the request's tenant, or "" (see [ContextWithTenant]).
	// polite never logs it.
	Tenant string
	// StatusCode is the status of the response behind the event, or 0.
	StatusCode int
	// Err is the transport error behind the event, or nil, as it was
	// returned: its text may embed the request's URL (a [*url.Error]).
	// [Event.Reason] gives it redacted.
	Err error
	// Delay is a wait that polite is about to make.
	Delay time.Duration
	// RetryAfter is the delay the server asked for, or 0.
	RetryAfter time.Duration
	// Budget is the number of tokens in the retry budget.
	Budget int
	// Server reports whether a wait was asked for by the server.
	Server bool
	// Wait is what a wait is for; 0 in events that are not waits.
	Wait WaitCause
	// Throttled reports that the server throttled the attempt: a 429, a
	// 503 with Retry-After, or a 403 that reports its quota spent.
	Throttled bool
}

// Reason returns a short description of why the event happened: "status
// 503" for a response, the error text for a transport error, or "" when
// neither is set. The error text is redacted: a URL that a [*url.Error] in
// Err's chain embeds keeps no password, query or fragment
// ("https://user:xxxxx@host/path?REDACTED"). Hooks that log events should
// log Reason rather than Err, which is the error as it was returned, and
// not the Request, which is the caller's.
func (e Event) Reason() string {
	switch {
	case e.Err != nil:
		return redactedError(e.Err)
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
	t.log(e, slog.LevelDebug, "polite: waiting", slog.Duration("delay", e.Delay), slog.Bool("server", e.Server),
		slog.String("for", e.Wait.String()))
}

func (t *Transport) refused(e Event, err *ThrottledError) {
	if h := t.cfg.hooks.OnRefused; h != nil {
		h(e)
	}
	t.log(e, slog.LevelWarn, "polite: wait refused", slog.Duration("wait", err.Wait), slog.Duration("allowed", err.Allowed))
}

func (t *Transport) tooLarge(e Event, err *CostError) {
	if h := t.cfg.hooks.OnRefused; h != nil {
		h(e)
	}
	t.log(e, slog.LevelWarn, "polite: request larger than the server's limit", slog.String("unit", err.Unit),
		slog.Float64("cost", err.Cost), slog.Float64("limit", err.Limit))
}

func (t *Transport) offLimits(e Event) {
	if h := t.cfg.hooks.OnRefused; h != nil {
		h(e)
	}
	t.log(e, slog.LevelWarn, "polite: host off limits, robots.txt unreachable")
}

// log writes one record about e, if a logger is set and takes level. It
// writes nothing of the request but its method and key, and the error's
// text redacted (see [Event.Reason]): no header, no URL.
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
	if e.Priority != PriorityDefault {
		attrs = append(attrs, slog.String("priority", e.Priority.String()))
	}
	if e.Request != nil {
		attrs = append(attrs, slog.String("method", e.Request.Method))
	}
	if e.StatusCode != 0 {
		attrs = append(attrs, slog.Int("status", e.StatusCode))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", redactedError(e.Err)))
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}

// edge is the Transport as the engine's gates hear it (gate.Listener):
// it reports their waits and refusals as events, and makes the errors
// its callers see. (A type of its own, so that these methods are not the
// Transport's.)
type edge Transport

// Waiting reports a wait of d that who is about to make.
func (t *edge) Waiting(who gate.Who, d time.Duration, cause gate.Cause, server bool) {
	if !(*Transport)(t).listening() {
		return // no one to tell: no Event (reading the budget may take a lock)
	}
	e := t.event(who, nil)
	e.Delay, e.Server, e.Wait = d, server, WaitCause(cause)
	(*Transport)(t).waited(e)
}

// Refused returns the *ThrottledError of a wait of who not allowed.
func (t *edge) Refused(who gate.Who, wait, allowed time.Duration, server bool) error {
	err := &ThrottledError{Key: who.Key, Wait: wait, Allowed: allowed, Server: server}
	e := t.event(who, err)
	e.Delay, e.Server = wait, server
	(*Transport)(t).refused(e, err)
	return err
}

// TooLarge returns the *CostError of who, larger than the server's limit.
func (t *edge) TooLarge(who gate.Who, unit string, cost, limit float64) error {
	err := &CostError{Key: who.Key, Unit: unit, Cost: cost, Limit: limit}
	(*Transport)(t).tooLarge(t.event(who, err), err)
	return err
}

// OffLimits reports who refused, its host's robots.txt unreachable.
func (t *edge) OffLimits(who gate.Who, err error) {
	(*Transport)(t).offLimits(t.event(who, err))
}

// event returns an Event about who's attempt.
func (t *edge) event(who gate.Who, err error) Event {
	req, _ := who.Edge.(*http.Request)
	return Event{Request: req, Key: who.Key, Attempt: ResendCount(who.Ctx) + who.Attempt, Priority: Priority(who.Priority), Tenant: who.Tenant, Err: err, Budget: t.budget.Remaining()}
}

// listening reports whether anyone hears of the Transport's waits.
func (t *Transport) listening() bool {
	return t.cfg.hooks.OnWait != nil || t.cfg.logger != nil
}
