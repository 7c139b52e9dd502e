package polite

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/engine"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/headers"
)

// The path of one call, in order: RoundTrip (transport.go) makes a call
// and tells its cost (estimateCost, cost.go); run sends its attempts,
// each admitted by the engine (its gates, in order, in
// internal/engine/admit.go), sent through next, and judged (judge.go: the
// response read into the engine's terms, the engine told); a failure
// worth retrying waits for its delay (retryDelay) and goes round again.

// call is the state of one RoundTrip.
type call struct {
	t       *Transport
	req     *http.Request  // the caller's request, never modified
	ec      engine.Call    // the call as the engine sees it: its context, key, route and cost, its attempt's permits
	attempt int            // the attempt being made, 1-based
	resent  int            // the times a layer above sent the request before (ResendCount); -1 until read
	held    int            // retry cost held by the attempt in flight, refunded if it succeeds
	sched   *schedule      // backoff delays, made at the first retry
	live    *http.Response // the attempt's response while the call decides what to do with it
	body    io.ReadCloser  // a retry's rebuilt body, until it is sent
}

// failure is what makes an attempt worth retrying.
type failure struct {
	timeout       bool          // a transport timeout: the retry costs more
	retryAfter    time.Duration // the server's Retry-After, if hasRetryAfter
	hasRetryAfter bool
	untilReset    bool // retryAfter is the time until a spent quota's reset, not a Retry-After
	throttled     bool // the server throttled the attempt
	unsent        bool // the error proves the server never received the request
}

// run sends the call's attempts until one is worth returning, or the call
// must end: each admitted, sent, judged, and retried after its delay.
func (c *call) run() (*http.Response, error) {
	t := c.t
	// A request may be sent again if its body can be rebuilt, and if its
	// method (or its idempotency key, or WithRetryNonIdempotent) allows it
	// or the failure proves the server never received it.
	canRetry := t.cfg.maxAttempts > 1 && c.bodyReplayable()
	safe := c.methodReplayable()
	send := c.req // the first attempt sends the caller's request as is
	for c.attempt = 1; ; c.attempt++ {
		c.ec.Who.Attempt = c.attempt
		if err := t.eng.Admit(&c.ec); err != nil {
			closeRequestBody(send)
			t.budget.Refund(c.held) // the retry was never sent
			return nil, err
		}
		c.ec.Sending(t.eng)
		c.body = nil // next closes it, whatever happens
		resp, err := t.next.RoundTrip(send)
		c.releaseSlotAfter(resp)
		switch {
		case err != nil && resp != nil: // next broke its contract; keep the error
			discard(resp)
			resp = nil
		case err == nil && resp == nil:
			err = errNilResponse
		}
		c.live = resp
		now := t.eng.Now()
		f, failed := c.judge(resp, err, now)
		if !failed {
			if err == nil {
				t.budget.Refund(successRefund + c.held)
			}
			return resp, err
		}
		c.held = 0 // a failed retry keeps its cost
		if !canRetry || !safe && !f.unsent {
			return resp, err
		}
		delay, ok := c.retryDelay(f, now)
		if !ok {
			return resp, err
		}
		var body io.ReadCloser
		if c.req.Body != nil && c.req.Body != http.NoBody {
			var bodyErr error
			if body, bodyErr = c.req.GetBody(); bodyErr != nil || body == nil {
				return resp, err // the body cannot be rebuilt: never resend it empty
			}
			c.body = body // closed by abandon if the call ends before it is sent
		}
		cost := retryCost
		if f.timeout {
			cost = timeoutRetryCost
		}
		if !t.budget.TryTake(cost) {
			closeBody(body)
			c.body = nil
			t.budgetExhausted(c.event(resp, err))
			if err != nil {
				return nil, &budgetError{err: err}
			}
			return resp, nil
		}
		c.held = cost
		e := c.event(resp, err)
		e.Delay, e.RetryAfter, e.Throttled = delay, f.retryAfter, f.throttled
		t.retrying(e)
		if resp != nil {
			discard(resp)
			c.live = nil
		}
		c.ec.Who.Attempt = c.attempt + 1 // the wait is the next attempt's
		switch {
		case f.retryAfter < delay:
			c.ec.Tell(delay, gate.Backoff, false)
		case f.untilReset:
			c.ec.Tell(delay, gate.Quota, true)
		default:
			c.ec.Tell(delay, gate.Pause, true)
		}
		if err := c.ec.Sleep(delay); err != nil {
			closeBody(body)
			t.budget.Refund(c.held)
			return nil, err
		}
		send = c.req.Clone(context.WithValue(c.ec.Ctx, resendKey{}, c.resends()+c.attempt))
		send.Body = body
	}
}

// retryDelay returns how long to wait before the next attempt, or false
// when the call should not wait: attempts are used up, the server asked for
// more than the Transport waits on, or the next attempt could not be sent
// before the context deadline.
func (c *call) retryDelay(f failure, now time.Time) (time.Duration, bool) {
	cfg := &c.t.cfg
	if c.attempt >= cfg.maxAttempts || c.ec.Ctx.Err() != nil {
		return 0, false
	}
	if f.hasRetryAfter && f.retryAfter > cfg.maxRetryAfter {
		return 0, false
	}
	if c.sched == nil {
		c.sched = newSchedule(cfg.backoffBase, cfg.backoffMax)
	}
	delay := max(c.sched.next(cfg.random()), f.retryAfter)
	// The next attempt also waits for its key's pause and bucket, and its
	// quota: count them, so that a retry that cannot be sent in time is
	// not started.
	earliest, ok := c.t.eng.Earliest(&c.ec, now, delay)
	if !ok {
		return 0, false
	}
	if deadline, ok := c.ec.Ctx.Deadline(); ok && !now.Add(earliest).Before(deadline) {
		return 0, false
	}
	return delay, true
}

// abandon lets go of what a call held when a panic (a hook's, the
// logger's, next's) ended it: the response it had not handed back or
// discarded, what its attempt in flight held of the engine's gates (a
// slot, its place in the server's quota, its cost), a rebuilt body it had
// not sent. The panic goes on to the caller; the Transport's later calls
// to the key must not wait for this one. (Its places in the gates' queues,
// and the sends its waits booked, are given back by the gates that took
// them, in deferred calls.)
func (c *call) abandon() {
	if c.live != nil {
		discard(c.live)
	}
	c.ec.Drop()
	closeBody(c.body)
}

// resends returns how many times a layer above polite had sent the request
// before, reading it from the context the first time it is needed: an
// event or a retry.
func (c *call) resends() int {
	if c.resent < 0 {
		c.resent = ResendCount(c.ec.Ctx)
	}
	return c.resent
}

// attempted reports the answer to the current attempt.
func (c *call) attempted(resp *http.Response, err error, throttled bool) {
	h := c.t.cfg.hooks.OnAttempt
	if h == nil {
		return
	}
	e := Event{Request: c.req, Key: c.ec.Who.Key, Attempt: c.resends() + c.attempt, Priority: Priority(c.ec.Who.Priority), Tenant: c.ec.Who.Tenant, Err: err, Throttled: throttled}
	if resp != nil {
		e.StatusCode = resp.StatusCode
	}
	h(e) // no Budget: reading it may take a lock, on every attempt
}

// event returns an Event about the current attempt.
func (c *call) event(resp *http.Response, err error) Event {
	e := Event{Request: c.req, Key: c.ec.Who.Key, Attempt: c.resends() + c.attempt, Priority: Priority(c.ec.Who.Priority), Tenant: c.ec.Who.Tenant, Err: err, Budget: c.t.budget.Remaining()}
	if resp != nil {
		e.StatusCode = resp.StatusCode
	}
	return e
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
	c.t, c.req, c.resent = t, req, -1
	c.ec.Ctx, c.ec.MaxServerWait, c.ec.L = req.Context(), t.cfg.maxRetryAfter, (*edge)(t)
	c.ec.Who.Key, c.ec.Who.Edge, c.ec.Who.Place = t.cfg.key(req), req, t.cfg.placeOf(req)
	if err := c.estimateCost(); err != nil {
		return err
	}
	if req.URL != nil {
		c.ec.Host, c.ec.Route = req.URL.Host, req.URL.Path
		if t.cfg.crawlDelay {
			c.ec.Site = siteKey(req.URL)
		}
	}
	return nil
}

// siteKey returns the key of the robots.txt that applies to u, which is
// scoped by scheme and host (RFC 9309): the host alone for https, most
// crawls' scheme, so that a call builds no string (it did, one allocation
// a call); scheme://host for any other. A host holds no "://": the two
// kinds of key never meet.
func siteKey(u *url.URL) string {
	if u.Scheme == "https" {
		return u.Host
	}
	return u.Scheme + "://" + u.Host
}

// judge reports whether the attempt failed in a way worth retrying, and
// tells the engine what became of it, in its terms (engine.Answer): a
// transport error, or a response whose status and signals say whether the
// server throttled it, what it says of the server's rate, and the quotas
// and the pause it states. The engine feeds the key's controller, paces
// the key (or the bucket the server names) by the quotas, pauses it for
// the server's delay, and tells the fleet and the memory; the cost the
// attempt took goes with the response's body, to be settled when the
// caller is done with it.
func (c *call) judge(resp *http.Response, err error, now time.Time) (failure, bool) {
	t := c.t
	if err != nil {
		unprocessed := Unprocessed(err)
		t.eng.Judge(&c.ec, &engine.Answer{Now: now, Failed: true, Unprocessed: unprocessed, GaveUp: c.ec.Ctx.Err() != nil})
		c.attempted(nil, err, false)
		if c.ec.Ctx.Err() != nil {
			return failure{}, false // the caller gave up: nothing was learnt
		}
		retry, timeout := retryableError(err)
		return failure{timeout: timeout, unsent: unprocessed}, retry
	}
	code := resp.StatusCode
	var a engine.Answer // read into, not copied: it is large, and on every response's path
	a.Now, a.Outcome = now, control.OK
	s := &a.Signals
	headers.ParseInto(s, resp.Header, now)
	spent := s.HasQuota && s.Quota.Remaining < 1
	throttled := code == http.StatusTooManyRequests ||
		(code == http.StatusServiceUnavailable && s.HasRetryAfter) ||
		(code == http.StatusForbidden && spent) || // GitHub's primary limit
		bodyThrottle(t.cfg.throttleBody, resp, s)
	// A throttle refuses the request before the server processes it: it
	// may be sent again whatever its method.
	f := failure{throttled: throttled, unsent: throttled}
	f.retryAfter, f.hasRetryAfter = s.Delay(now)
	f.untilReset = f.hasRetryAfter && !s.HasRetryAfter
	a.Throttled, a.RetryAfter, a.HasRetryAfter = throttled, f.retryAfter, f.hasRetryAfter
	switch {
	case throttled:
		a.Outcome = control.Throttled
	case code >= 500:
		a.Outcome = control.Failed // says nothing of the rate
	}
	if h := t.eng.Judge(&c.ec, &a); h != nil && resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = newCostBody(resp, h, t.cfg.usage) // with no body, the estimate stands
	}
	if f.untilReset && !t.eng.SpentHolds(&c.ec) {
		// A count that comes back as it goes: its reset is when it is
		// whole again, not when the next request may go. The retry waits
		// its backoff, then the gates' pacing, as the key's other calls
		// do, not the reset (a fleet's interactive call, refused by
		// tollbooth, waited its "RateLimit-Reset: 1", a second).
		f.retryAfter, f.hasRetryAfter, f.untilReset = 0, false, false
	}
	c.attempted(resp, nil, throttled)
	if throttled {
		e := c.event(resp, nil)
		e.RetryAfter, e.Throttled = f.retryAfter, true
		t.throttled(e)
	}
	return f, throttled || retryableStatus(code)
}

// releaseSlotAfter frees the slot the attempt holds, if any, now if the
// attempt produced no response to hand back, or when the caller is done
// with the response's body otherwise.
func (c *call) releaseSlotAfter(resp *http.Response) {
	s := c.ec.Slot()
	if s == nil {
		return
	}
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		s.Release()
		return
	}
	resp.Body = &slotBody{ReadCloser: resp.Body, s: s}
}

// estimateCost sets the call's cost, stated on its context or told by the
// WithCost Estimator, and adds the Estimator's scope to its key. It
// returns the Estimator's error, wrapped.
func (c *call) estimateCost() error {
	stated, ok := c.ec.Ctx.Value(costKey{}).(Cost)
	est := c.t.cfg.estimate
	if !ok && est == nil && !c.t.cfg.costs {
		return nil
	}
	c.ec.Costed = true
	if ok {
		c.ec.Cost = costOf(stated)
	}
	if est != nil {
		cost, scope, err := est(c.req, c.estimateBody())
		if err != nil {
			return fmt.Errorf("polite: estimating the cost of a request to %q: %w", c.ec.Who.Key, err)
		}
		if !ok {
			c.ec.Cost = costOf(cost)
		}
		if scope != "" {
			c.ec.Who.Key += "|" + scope
		}
	}
	return nil
}

// estimateBody returns the request's body for its Estimator, read through
// GetBody: nil without a body, without GetBody, or past MaxEstimateBody.
func (c *call) estimateBody() []byte {
	req := c.req
	if req.Body == nil || req.Body == http.NoBody || req.GetBody == nil {
		return nil
	}
	rc, err := req.GetBody()
	if err != nil || rc == nil {
		return nil
	}
	defer rc.Close()
	var buf bytes.Buffer
	if n := req.ContentLength; n > 0 && n <= MaxEstimateBody {
		buf.Grow(int(n))
	}
	if _, err := io.CopyN(&buf, rc, MaxEstimateBody+1); err != nil && err != io.EOF || buf.Len() > MaxEstimateBody {
		return nil
	}
	return buf.Bytes()
}

// What is retried: which requests may be sent again, and which failures
// are worth it.

// bodyReplayable reports whether the request's body, if it has one, can
// be rebuilt for another attempt.
func (c *call) bodyReplayable() bool {
	req := c.req
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// methodReplayable reports whether the request may be sent more than once
// whatever becomes of its first attempt: its method is idempotent, it
// carries an idempotency key, or the Transport retries non-idempotent
// requests.
func (c *call) methodReplayable() bool {
	return c.t.cfg.retryUnsafe || Idempotent(c.req)
}
