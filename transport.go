package polite

import (
	"context"
	"io"
	"math"
	"net/http"
	"time"

	"golang.org/x/time/rate"
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
type Transport struct {
	next   http.RoundTripper
	cfg    config
	keys   *registry
	global *keyState           // the WithGlobalRate bucket; nil without one
	robots *table[robotsEntry] // scheme://host → its robots.txt, under WithCrawlDelay
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
	t := &Transport{
		next:   next,
		cfg:    cfg,
		keys:   newRegistry(&cfg),
		budget: budget,
	}
	if cfg.globalRate > 0 {
		limit, burst := rate.Limit(cfg.globalRate), min(cfg.globalBurst, math.MaxInt32)
		t.global = &keyState{limiter: rate.NewLimiter(limit, burst), limit: limit, burst: int32(burst)}
	}
	if cfg.crawlDelay {
		t.robots = new(table[robotsEntry])
		t.robots.init(cfg.idle, func(string, time.Time) *robotsEntry { return new(robotsEntry) }, (*robotsEntry).busy)
	}
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
	c := call{t: t, req: req, ctx: req.Context(), key: t.cfg.key(req), resent: -1}
	if err := c.estimateCost(); err != nil {
		closeRequestBody(req)
		return nil, err
	}
	returned := false
	defer func() {
		if !returned {
			c.abandon()
		}
		if c.ks != nil {
			c.ks.release() // a slot the response's body holds keeps the key on its own
		}
	}()
	resp, err := c.run()
	returned = true
	return resp, err
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

// resends returns how many times a layer above polite had sent the request
// before, reading it from the context the first time it is needed: an
// event or a retry.
func (c *call) resends() int {
	if c.resent < 0 {
		c.resent = ResendCount(c.ctx)
	}
	return c.resent
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

// refuse returns a *ThrottledError if a wait of d from now is not allowed:
// it would not end before the context deadline, or it is a server pause longer
// than WithMaxRetryAfter. It returns nil if the wait is allowed.
func (c *call) refuse(d time.Duration, now time.Time, server bool) error {
	if d <= 0 {
		// No wait to refuse: a call whose deadline passed while it waited
		// ends with its context's error, not a refusal of a wait of 0.
		return nil
	}
	allowed := time.Duration(-1)
	if server && d > c.t.cfg.maxRetryAfter {
		allowed = c.t.cfg.maxRetryAfter
	}
	if deadline, ok := c.ctx.Deadline(); ok && !now.Add(d).Before(deadline) {
		// A wait that ends as the deadline passes leaves no time to send.
		left := max(deadline.Sub(now), 0)
		if allowed < 0 || left < allowed {
			allowed = left
		}
	}
	if allowed < 0 {
		return nil
	}
	err := &ThrottledError{Key: c.key, Wait: d, Allowed: allowed, Server: server}
	e := c.event(nil, err)
	e.Delay, e.Server = d, server
	c.t.refused(e, err)
	return err
}

// waiting reports a wait of d that the call is about to make, for a
// server pause or for pacing.
func (c *call) waiting(d time.Duration, cause WaitCause) {
	c.waitingFor(d, cause, cause == WaitPause)
}

// waitingFor reports a wait of d that the call is about to make, for
// cause; server reports that the server asked for it.
func (c *call) waitingFor(d time.Duration, cause WaitCause, server bool) {
	if d <= 0 || !c.t.listening() {
		return // nothing to tell, or no one to tell it: no Event (reading the budget may take a lock)
	}
	e := c.event(nil, nil)
	e.Delay, e.Server, e.Wait = d, server, cause
	c.t.waited(e)
}

// listening reports whether anyone hears of the Transport's waits.
func (t *Transport) listening() bool {
	return t.cfg.hooks.OnWait != nil || t.cfg.logger != nil
}

// pauseCause returns the cause of a wait made of a server pause and a
// turn for a token, which run at the same time: the longer of the two.
func pauseCause(pause, turn time.Duration) WaitCause {
	if pause > 0 && pause >= turn {
		return WaitPause
	}
	return WaitRate
}

// attempted reports the answer to the current attempt.
func (c *call) attempted(resp *http.Response, err error, throttled bool) {
	h := c.t.cfg.hooks.OnAttempt
	if h == nil {
		return
	}
	e := Event{Request: c.req, Key: c.key, Attempt: c.resends() + c.attempt, Err: err, Throttled: throttled}
	if resp != nil {
		e.StatusCode = resp.StatusCode
	}
	h(e) // no Budget: reading it may take a lock, on every attempt
}

// event returns an Event about the current attempt.
func (c *call) event(resp *http.Response, err error) Event {
	e := Event{Request: c.req, Key: c.key, Attempt: c.resends() + c.attempt, Err: err, Budget: c.t.budget.Remaining()}
	if resp != nil {
		e.StatusCode = resp.StatusCode
	}
	return e
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
