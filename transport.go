package polite

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/engine"
	"github.com/politehttp/polite/internal/gate"
)

// drainLimit is how much of a discarded response body is read before it is
// closed, so that its connection can be reused without reading a large body.
const drainLimit = 4 << 10

// A Transport is an [http.RoundTripper] that paces, retries and listens to
// the server on behalf of the RoundTripper it wraps (see the package
// documentation).
//
// A Transport is safe for concurrent use by multiple goroutines. It holds
// per-key state and a retry budget, so it should be created once and
// reused. Create it with [New]; the zero value is not usable. A Transport
// is immutable after New.
//
// It is the HTTP edge of polite's engine: it turns each request into a
// call of the engine (a key, a route, a cost, a deadline), which admits
// each attempt through its gates, and each response or error into the
// engine's terms (see call.go and judge.go).
type Transport struct {
	next   http.RoundTripper
	cfg    config
	eng    *engine.Engine
	budget Budget
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport that sends requests through next, configured by
// opts. A nil next means [http.DefaultTransport].
func New(next http.RoundTripper, opts ...Option) *Transport {
	if next == nil {
		next = http.DefaultTransport
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	cfg.costs = cfg.costing()
	budget := cfg.budget
	if budget == nil {
		budget = NewRetryBudget(DefaultRetryBudgetCapacity)
	}
	t := &Transport{next: next, cfg: cfg, budget: budget}
	ec := engine.Config{
		PerSecond: cfg.perSecond, Burst: cfg.burst,
		GlobalRate: cfg.globalRate, GlobalBurst: cfg.globalBurst,
		Kind: cfg.adaptive.kind(), Idle: cfg.idle, MaxInFlight: cfg.maxInFlight,
		Window: cfg.window, Fleet: cfg.fleet,
		Quotas: cfg.quotas, Costs: cfg.costs,
		CrawlDelay: cfg.crawlDelay, SpacingJitter: cfg.spacingJitter, Random: cfg.random,
		FetchRobots: t.fetchRobots,
	}
	if cfg.memory != nil {
		ec.Memory = memoryOf{cfg.memory}
	}
	t.eng = engine.New(ec)
	if h := cfg.hooks.OnNew; h != nil {
		h(t)
	}
	return t
}

// RoundTrip sends req through the wrapped RoundTripper, waiting for
// permission before each attempt and retrying failed attempts as the
// package documentation describes. It returns a response or an error,
// never both, and does not modify req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var c call
	if err := c.init(t, req); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	returned := false
	defer func() {
		if !returned {
			c.abandon()
		}
		c.ec.Release() // a slot the response's body holds keeps the key on its own
	}()
	resp, err := c.run()
	returned = true
	return resp, err
}

// init makes c the call of req through t: its key (and the scope its
// cost adds to it), and what the engine knows of it. It returns the
// error of the call's Estimator, if any.
func (c *call) init(t *Transport, req *http.Request) error {
	c.t, c.req, c.ctx, c.key, c.resent = t, req, req.Context(), t.cfg.key(req), -1
	if err := c.estimateCost(); err != nil {
		return err
	}
	c.ec.Ctx, c.ec.MaxServerWait, c.ec.L = c.ctx, t.cfg.maxRetryAfter, (*edge)(t)
	c.ec.Who.Key, c.ec.Who.Edge = c.key, req
	if req.URL != nil {
		c.ec.Host, c.ec.Route = req.URL.Host, req.URL.Path
		if t.cfg.crawlDelay { // robots.txt is scoped by scheme and host (RFC 9309)
			c.ec.Site = req.URL.Scheme + "://" + req.URL.Host
		}
	}
	return nil
}

// resendKey is the context key of a retry's request: its value is how many
// times the request was sent before.
type resendKey struct{}

// ResendCount returns how many times a request had been sent before the
// attempt whose context ctx is: 0 for a first attempt, n for the n-th
// retry. It is the OpenTelemetry attribute http.request.resend_count of
// the attempt, for a RoundTripper under polite (such as otelhttp's) to
// read. It returns 0 for a context neither polite nor
// [ContextWithResendCount] made.
func ResendCount(ctx context.Context) int {
	n, _ := ctx.Value(resendKey{}).(int)
	return n
}

// ContextWithResendCount returns a copy of ctx that says the request it
// goes with has been sent n times before, by a layer that retries above
// polite (go-retryablehttp, through package politeretry). polite then
// numbers the request's attempts from n+1 in its events (and so in its
// metrics), and counts on from n in its own retries' contexts, so that
// spans under polite carry the resend count of the whole call. n < 0 is
// taken as 0.
func ContextWithResendCount(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, resendKey{}, max(n, 0))
}

// CloseIdleConnections closes the idle connections of the wrapped
// RoundTripper, if it has such a method.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if ci, ok := t.next.(closeIdler); ok {
		ci.CloseIdleConnections()
	}
}

// RetryBudget returns the retry budget the Transport takes its retries
// from.
func (t *Transport) RetryBudget() Budget { return t.budget }

// MaxRetryAfter returns the longest delay the server may ask for that the
// Transport waits on (see [WithMaxRetryAfter]), for a layer that retries
// above it to keep to the same limit.
func (t *Transport) MaxRetryAfter() time.Duration { return t.cfg.maxRetryAfter }

// Fleet returns the fleet the Transport paces with ([WithFleet]), or nil.
func (t *Transport) Fleet() fleetapi.Fleet { return t.cfg.fleet }

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
	return Event{Request: req, Key: who.Key, Attempt: ResendCount(who.Ctx) + who.Attempt, Err: err, Budget: t.budget.Remaining()}
}

// listening reports whether anyone hears of the Transport's waits.
func (t *Transport) listening() bool {
	return t.cfg.hooks.OnWait != nil || t.cfg.logger != nil
}

// discard drains at most drainLimit bytes of a response body and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	_ = resp.Body.Close()
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

func closeBody(body io.ReadCloser) {
	if body != nil {
		_ = body.Close()
	}
}
