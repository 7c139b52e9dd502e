package polite

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/politehttp/polite/internal/engine"
	"github.com/politehttp/polite/internal/gate"
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
	req     *http.Request // the caller's request, never modified
	ctx     context.Context
	key     string
	ec      engine.Call    // the call as the engine sees it: its key, route and cost, its attempt's permits
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
		now := time.Now()
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
		send = c.req.Clone(context.WithValue(c.ctx, resendKey{}, c.resends()+c.attempt))
		send.Body = body
	}
}

// retryDelay returns how long to wait before the next attempt, or false
// when the call should not wait: attempts are used up, the server asked for
// more than the Transport waits on, or the next attempt could not be sent
// before the context deadline.
func (c *call) retryDelay(f failure, now time.Time) (time.Duration, bool) {
	cfg := &c.t.cfg
	if c.attempt >= cfg.maxAttempts || c.ctx.Err() != nil {
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
	if deadline, ok := c.ctx.Deadline(); ok && !now.Add(earliest).Before(deadline) {
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
		c.resent = ResendCount(c.ctx)
	}
	return c.resent
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

// schedule yields the backoff delays of one call's retries. The un-jittered
// ceilings min(limit, base·2^(n-1)) come from a backoff/v4
// ExponentialBackOff with its own randomization off (backoff/v4 caps the
// interval before it randomizes, so its jitter can exceed the cap); full
// jitter is drawn on top, below the ceiling, so the cap holds after jitter.
// backoff/v4 saturates the interval at the cap, so no attempt count
// overflows.
//
// A schedule belongs to one call and is not safe for concurrent use. It is
// made only when a call retries, so calls that succeed at once allocate
// nothing for it.
type schedule struct {
	exp backoff.ExponentialBackOff
}

func newSchedule(base, limit time.Duration) *schedule {
	s := &schedule{exp: backoff.ExponentialBackOff{
		InitialInterval:     min(base, limit),
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         limit,
		MaxElapsedTime:      0, // never stop: attempts and the budget bound retries
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}}
	s.exp.Reset()
	return s
}

// next returns the delay before the next retry; u is a uniform draw from
// [0, 1).
func (s *schedule) next(u float64) time.Duration {
	return fullJitter(s.exp.NextBackOff(), u)
}

// fullJitter maps a uniform draw u in [0, 1) to a delay in [0, ceiling): 0
// when ceiling <= 0, never ceiling or more, whatever u and ceiling are.
func fullJitter(ceiling time.Duration, u float64) time.Duration {
	if ceiling <= 0 || !(u > 0) { // !(u > 0) also catches NaN
		return 0
	}
	d := time.Duration(u * float64(ceiling))
	if d >= ceiling || d < 0 { // float rounding near 1, or u >= 1
		return ceiling - 1
	}
	return d
}
