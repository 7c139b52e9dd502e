package polite

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/signals"
)

// The path of one call, in order: RoundTrip (transport.go) makes a call
// and tells its cost (estimateCost, costcall.go); run sends its attempts, each admitted (admit: robots.txt, the key's
// pacing or its fleet's booking, the server's quota, the request's cost,
// a slot in flight), sent through next, and judged (judge: the server's
// signals heard, the key's controller fed); a failure worth retrying waits
// for its delay (retryDelay) and goes round again. Each stage is a method
// of its mechanism, in the file of that mechanism.

// call is the state of one RoundTrip.
type call struct {
	t           *Transport
	req         *http.Request // the caller's request, never modified
	ctx         context.Context
	key         string
	ks          *keyState        // the key's state, once it has one
	shard       *shard[keyState] // the key's registry shard, once looked up
	rotated     int64            // its last rotation when ks was found
	quota       *serverQuota     // the server quota the attempt in flight counts against, if any
	slot        *keyState        // the key whose WithMaxInFlight slot the attempt in flight holds
	attempt     int              // the attempt being made, 1-based
	resent      int              // the times a layer above sent the request before (ResendCount); -1 until read
	sent        control.Mark     // what the key's controller said as the attempt was sent
	sentAt      time.Time        // when the attempt was sent, if its key's controller times round trips
	fleetGen    uint64           // the fleet's controller generation the attempt was booked under
	fleetShared bool             // the fleet's shared controller paced the attempt
	held        int              // retry cost held by the attempt in flight, refunded if it succeeds
	sched       *schedule        // backoff delays, made at the first retry
	site        *robotsEntry     // the robots.txt of the request's host, under WithCrawlDelay
	live        *http.Response   // the attempt's response while the call decides what to do with it
	body        io.ReadCloser    // a retry's rebuilt body, until it is sent
	cost        *callCost        // what the call costs besides its requests; nil if nothing, and the Transport paces no costs
}

// callCost is what a call costs besides its requests (see WithCost), and
// where its attempt in flight stands.
type callCost struct {
	cost   costVec
	costly bool      // cost is not zero
	hold   *costHold // the cost the attempt in flight took, until judged
	sent   costMark  // when the attempt was sent, if it took nothing and its key has a cost state
	booked bool      // the fleet booked the attempt's cost with its send
}

// hold returns the cost the call's attempt in flight took, if any.
func (c *call) hold() *costHold {
	if c.cost == nil {
		return nil
	}
	return c.cost.hold
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
		if err := c.admit(); err != nil {
			if c.quota != nil { // admitted by the quota, refused after it
				c.quota.answered()
				c.quota = nil
			}
			if h := c.hold(); h != nil { // took its cost, refused after it
				h.cs.retract(h)
				c.cost.hold = nil
			}
			closeRequestBody(send)
			t.budget.Refund(c.held) // the retry was never sent
			return nil, err
		}
		c.sent, c.sentAt = control.NoMark, time.Time{}
		if ks := c.ks; ks != nil {
			if ctl := ks.controller(t.keys.adaptive); ctl != nil {
				c.sent = ctl.Sending()
				if ctl.Timed() || ks.is(keyStarting) {
					c.sentAt = time.Now()
				}
			}
		}
		if cc := c.cost; cc != nil && cc.hold == nil && t.cfg.costs {
			cc.sent = costMark{}
			if ks := c.state(); ks != nil {
				if cs := ks.costState(); cs != nil {
					cc.sent = cs.mark(time.Now())
				}
			}
		}
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
		c.attempt++ // the wait is the next attempt's
		switch {
		case f.retryAfter < delay:
			c.waitingFor(delay, WaitBackoff, false)
		case f.untilReset:
			c.waitingFor(delay, WaitQuota, true)
		default:
			c.waitingFor(delay, WaitPause, true)
		}
		c.attempt--
		if err := sleep(c.ctx, delay); err != nil {
			closeBody(body)
			t.budget.Refund(c.held)
			return nil, err
		}
		send = c.req.Clone(context.WithValue(c.ctx, resendKey{}, c.resends()+c.attempt))
		send.Body = body
	}
}

// admit returns when the call may send its next attempt: once any server
// pause of its key is over and, with a local rate, the key's bucket has
// given it a token. It refuses at once, with a *ThrottledError, a wait that
// would not end before the context deadline or a server pause longer than the
// Transport allows. If the context is done while the call waits, it
// returns the context's cause, having taken no token.
func (c *call) admit() error {
	if c.t.cfg.crawlDelay {
		if err := c.admitRobots(); err != nil {
			return err
		}
	}
	if c.t.cfg.fleet != nil {
		if err := c.admitFleets(); err != nil {
			return err
		}
	} else {
		if ks := c.state(); ks != nil {
			if err := c.admitOn(ks, c.t.keys.adaptive); err != nil {
				return err
			}
		}
		if g := c.t.global; g != nil {
			if err := c.admitOn(g, AdaptiveOff); err != nil {
				return err
			}
		}
		if c.t.cfg.window.N > 0 {
			if err := c.admitWindow(c.need()); err != nil {
				return err
			}
		}
	}
	if c.t.cfg.crawlDelay {
		if err := c.spaceRobots(); err != nil {
			return err
		}
	}
	if err := c.admitQuota(); err != nil {
		return err
	}
	if c.cost != nil {
		if err := c.admitCost(); err != nil {
			return err
		}
	}
	return c.acquireSlot()
}

// judge reports whether the attempt failed in a way worth retrying, and
// tells the key's state what the server said: every attempt feeds the
// key's controller; the quota the response reports paces the key, or the
// bucket the server names; and a throttle pauses the key (or the bucket)
// for the delay the server asked for.
func (c *call) judge(resp *http.Response, err error, now time.Time) (failure, bool) {
	if c.quota != nil {
		c.quota.answered()
		c.quota = nil
	}
	if err != nil {
		if h := c.hold(); h != nil {
			if Unprocessed(err) { // never reached the server: nothing was spent
				h.cs.retract(h)
			} else {
				h.cs.unprobe(h) // the estimate stands
			}
			c.cost.hold = nil
		}
		c.attempted(nil, err, false)
		if c.ctx.Err() != nil {
			return failure{}, false // the caller gave up: nothing was learnt
		}
		if ks := c.state(); ks != nil {
			c.observe(ks, now, control.Failed, 0)
		}
		retry, timeout := retryableError(err)
		return failure{timeout: timeout, unsent: Unprocessed(err)}, retry
	}
	code := resp.StatusCode
	s := signals.Parse(resp.Header, now)
	spent := s.HasQuota && s.Quota.Remaining < 1
	throttled := code == http.StatusTooManyRequests ||
		(code == http.StatusServiceUnavailable && s.HasRetryAfter) ||
		(code == http.StatusForbidden && spent) || // GitHub's primary limit
		c.bodyThrottle(resp, &s)
	// A throttle refuses the request before the server processes it: it
	// may be sent again whatever its method.
	f := failure{throttled: throttled, unsent: throttled}
	f.retryAfter, f.hasRetryAfter = s.Delay(now)
	f.untilReset = f.hasRetryAfter && !s.HasRetryAfter
	if s.HasQuota || throttled && f.retryAfter > 0 {
		c.need() // the server said something to keep
	}
	if c.cost != nil {
		c.judgeCost(resp, &s, throttled, now)
	}
	if ks := c.state(); ks != nil {
		// A throttle of a request's cost is one of its key's requests
		// too: where other clients spend the same quota unseen, the
		// key's controller slows down for them.
		o := control.OK
		switch {
		case throttled:
			o = control.Throttled
		case code >= 500:
			o = control.Failed
		}
		c.observe(ks, now, o, c.heed(ks, &s, throttled, now))
		c.tellFleet(ks, o)
		if c.t.cfg.memory != nil && (throttled || s.HasQuota || f.hasRetryAfter) {
			// What a Memory keeps moves only with these: a limit measured
			// at a throttle, a quota stated, a pause asked for.
			c.remember(ks, now)
		}
	}
	c.attempted(resp, nil, throttled)
	if throttled {
		e := c.event(resp, nil)
		e.RetryAfter, e.Throttled = f.retryAfter, true
		c.t.throttled(e)
	}
	return f, throttled || retryableStatus(code)
}

// observe feeds the attempt's outcome, and the limit the server states
// (requests per second; 0 if none), to the key's controller, and keeps the
// key's state in the registry.
func (c *call) observe(ks *keyState, now time.Time, o control.Outcome, stated float64) {
	ceiling, cap := c.t.keys.ceiling()
	var rtt time.Duration
	if !c.sentAt.IsZero() {
		rtt = now.Sub(c.sentAt)
	}
	ks.observe(c.t.keys.adaptive, now, o, stated, c.sent, rtt, ceiling, cap)
	c.t.keys.keep(c.shard, c.key, ks, now, c.rotated)
}

// heed applies what a response said to the key's quota and pause: the
// quota it reports paces the key, or the bucket it names (which the
// request's path is then known to count against); a throttle with a
// Retry-After that holds the key pauses the bucket, or the
// whole key if the server named none or said the limit is global. (A quota
// reported spent holds its calls through the quota itself.) It returns the
// limit the quota states, in requests per second; 0 if it states none.
func (c *call) heed(ks *keyState, s *signals.Signals, throttled bool, now time.Time) (stated float64) {
	var q *serverQuota
	switch {
	case s.Bucket != "":
		q = c.t.keys.bucket(c.req.URL.Host, s.Bucket)
		ks.route(c.req.URL.Path, q)
	case s.HasQuota:
		q = ks.ownQuota()
	}
	quota := &s.Quota // heed's own: judge is done with it
	if quota.Refill {
		// A bucket that refills (OpenAI's, Anthropic's): its reset is when
		// it is full again. Its limit over the window it refills in paces
		// the key; what is left is not counted down to the reset, and once
		// it is spent, a request may go again when one unit is back.
		if w, ok := signals.RefillWindow(*quota, now, 0); ok && quota.Window == 0 {
			quota.Window = w
		}
		if quota.Remaining < 1 {
			quota.Reset = quota.Renewal(now)
		} else {
			quota.Reset = time.Time{}
		}
	}
	var fleetUntil time.Time // the pause to tell the fleet: one call for both reasons
	if s.HasQuota && (quota.Unit == "" || quota.Remaining < 1) {
		stated = q.sync(now, *quota)
		if c.t.cfg.fleet != nil && (s.Bucket == "" || s.Global) {
			fleetUntil = q.spentUntil() // spent until its reset: for the whole fleet
		}
	}
	if s.HasQuota && quota.Remaining < 1 && !quota.Reset.IsZero() {
		c.pin(s.Bucket, minTime(quota.Reset, now.Add(maxPause)))
	}
	// A Retry-After of a second or less, counted in whole seconds, says no
	// more than "slow down": servers round up to the second what is often a
	// few milliseconds of their bucket (go-chi/httprate always says 1), and
	// a key held for it would lose a second of its quota at every
	// overshoot. The retry waits for it; the key's controller, which heard
	// the throttle, slows the other calls. A longer delay, or one stated
	// to the millisecond, holds the key.
	if !throttled || !s.HasRetryAfter || s.RetryAfterSlack > 0 && s.RetryAfter <= s.RetryAfterSlack {
		c.pauseFleet(ks, fleetUntil, now)
		return stated
	}
	until := now.Add(min(s.RetryAfter, maxPause))
	c.pin(s.Bucket, until)
	if q != nil && s.Bucket != "" && !s.Global {
		q.exhaust(until) // the bucket's: fleetUntil is zero
		return stated
	}
	ks.pause(until)
	c.pauseFleet(ks, maxTime(until, fleetUntil), now)
	return stated
}

// pin keeps the state that holds a pause or a spent quota (the key's, or
// the bucket the server named) until until, however idle it is.
func (c *call) pin(bucket string, until time.Time) {
	if bucket != "" {
		c.t.keys.pin(bucketKey(c.req.URL.Host, bucket), until)
	}
	c.t.keys.pin(c.key, until)
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
	// The next attempt also waits for its key's pause and bucket: count
	// them, so that a retry that cannot be sent in time is not started.
	earliest := delay
	if ks := c.state(); ks != nil {
		ceiling, _ := c.t.keys.ceiling()
		pause, turn := ks.nextTurnWait(now.Add(delay), ks.controller(c.t.keys.adaptive), ceiling)
		if pause > cfg.maxRetryAfter { // the next attempt would be refused
			return 0, false
		}
		earliest += max(pause, turn)
		if q := ks.quotaFor(c.req.URL.Path); q != nil {
			earliest += q.peek(now.Add(earliest))
		}
	}
	if deadline, ok := c.ctx.Deadline(); ok && !now.Add(earliest).Before(deadline) {
		return 0, false
	}
	return delay, true
}

// abandon lets go of what a call held when a panic (a hook's, the
// logger's, next's) ended it: the response it had not handed back or
// discarded, its slot under WithMaxInFlight, its place in the server's
// quota, a rebuilt body it had not sent. The panic goes on to the caller;
// the Transport's later calls to the key must not wait for this one.
// (Its places in the key's queues, and the sends its waits booked, are
// given back by the functions that take them, in deferred calls.)
func (c *call) abandon() {
	if c.live != nil {
		discard(c.live)
	}
	if c.slot != nil {
		releaseSlot(c.slot)
	}
	if c.quota != nil {
		c.quota.answered()
	}
	if h := c.hold(); h != nil {
		h.cs.retract(h)
	}
	closeBody(c.body)
}

// state returns the state of the call's key, or nil if the key needs none
// yet.
func (c *call) state() *keyState {
	if c.ks == nil {
		c.ks, c.shard, c.rotated = c.t.keys.lookup(c.key, false)
	}
	return c.ks
}

// need returns the state of the call's key, making it if needed.
func (c *call) need() *keyState {
	if c.ks == nil {
		c.ks, c.shard, c.rotated = c.t.keys.lookup(c.key, true)
	}
	return c.ks
}
