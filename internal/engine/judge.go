package engine

import (
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/fleetgate"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/memfile"
	"github.com/politehttp/polite/internal/quota"
	"github.com/politehttp/polite/internal/signals"
)

// An Answer is what became of an attempt, in the engine's terms: the edge
// reads it from a response or an error.
type Answer struct {
	Now time.Time // when the answer came
	// Failed reports that no answer came: a transport error. Unprocessed
	// reports that the error proves the server never received the
	// attempt; GaveUp that the caller's context is done (nothing was
	// learnt).
	Failed, Unprocessed, GaveUp bool
	// Outcome is what the answer says of the server's rate, Throttled
	// whether the server throttled the attempt.
	Outcome   control.Outcome
	Throttled bool
	// Signals are what the answer said of the server's limits, and
	// RetryAfter the delay they ask for (Signals.Delay), if HasRetryAfter.
	Signals       signals.Signals
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// Judge tells the engine what became of the call's attempt, and gives
// back the permits its answer ends: its place in the server's quota; its
// cost, given back where the server did not take it. Every answer feeds
// the key's controller; the quotas a response reports pace the key (or
// the bucket the server named); a throttle pauses the key (or the bucket)
// for the delay the server asked for; the fleet and the memory hear what
// they keep. It returns the cost the attempt took and still holds, which
// the edge settles once the response's body says what it actually cost
// (nil if none: an estimate with nothing to settle it by stands).
func (e *Engine) Judge(c *Call, a *Answer) *quota.Hold {
	placed := c.quota // the quota the attempt took a place in, its number there c.sent
	if placed != nil {
		placed.Answered()
		c.quota = nil
	}
	if a.Failed {
		if h := c.hold; h != nil {
			h.Failed(a.Unprocessed)
			c.hold = nil
		}
		if a.GaveUp {
			return nil
		}
		if k := c.state(e); k != nil {
			e.observe(c, k, a.Now, control.Failed, 0)
		}
		return nil
	}
	s := &a.Signals
	if s.HasQuota || a.Throttled && a.RetryAfter > 0 {
		c.need(e) // the server said something to keep
	}
	held := e.judgeCost(c, a)
	if k := c.state(e); k != nil {
		// A throttle of a request's cost is one of its key's requests
		// too: where other clients spend the same quota unseen, the key's
		// controller slows down for them.
		if a.Throttled {
			k.partsOf().refused.Add(1)
			e.refused.Add(1)
		}
		stated := e.heed(c, k, s, a.Throttled, a.Now, placed)
		if ctl := c.ctl; ctl != nil && (s.HasQuota || len(s.Quotas) > 0) {
			// A server that says what is left of its quota refuses past
			// it: its round trips are its own work.
			ctl.Quoted()
		}
		heldBack := e.observe(c, k, a.Now, a.Outcome, stated)
		e.tellFleet(c, k, a.Outcome)
		if e.cfg.Memory != nil && (a.Throttled || heldBack || s.HasQuota || a.HasRetryAfter) {
			// What a Memory keeps moves only with these: a limit measured
			// at a throttle (or a hold the controller read as one), a
			// quota stated, a pause asked for.
			e.remember(c, k, a.Now)
		}
	}
	return held
}

// judgeCost tells the call's costs what the answer says: a throttle gives
// back the cost the attempt took (the server did not admit it); the
// quotas it states set the buckets. It returns the cost still held.
func (e *Engine) judgeCost(c *Call, a *Answer) *quota.Hold {
	if !c.Costed {
		return nil
	}
	h := c.hold
	c.hold = nil
	if h != nil {
		h.Answer(a.Now, a.Throttled, a.Signals.Quotas, e.cfg.Fleet, c.Who.Key)
		if a.Throttled {
			return nil
		}
		return h
	}
	if len(a.Signals.Quotas) > 0 && e.cfg.Costs {
		if k := c.state(e); k != nil {
			e.costs(k, a.Now).Answer(a.Now, c.costSent, a.Signals.Quotas, e.cfg.Fleet, c.Who.Key)
		}
	}
	return nil
}

// observe feeds the attempt's outcome, and the limit the server states
// (requests per second; 0 if none), to the key's controller, makes the
// key's bucket follow it, and keeps the key's state in the registry. It
// reports whether the controller read a success as a hold (Rate.Held).
func (e *Engine) observe(c *Call, k *Key, now time.Time, o control.Outcome, stated float64) (held bool) {
	if ctl := c.ctl; ctl != nil {
		var rtt time.Duration
		if c.sentAt > 0 {
			rtt = now.Sub(e.epoch) - c.sentAt
		}
		ceiling, cap := e.Ceiling()
		r := ctl.Observe(now, o, stated, c.mark, rtt)
		held = r.Held
		k.pace.Follow(ctl, r, now, rtt, ceiling, cap)
	}
	e.Keep(c.sh, c.Who.Key, k, now, c.rotated)
	return held
}

// heed applies what a response said to the key's quota and pause: the
// quota it reports paces the key, or the bucket it names (which the
// call's route is then known to count against); a throttle with a
// Retry-After that holds the key pauses the bucket, or the whole key if
// the server named none or said the limit is global. (A quota reported
// spent holds its calls through the quota itself.) placed is the quota the
// attempt took a place in (nil if none). It returns the limit the quota
// states, in requests per second; 0 if it states none.
func (e *Engine) heed(c *Call, k *Key, s *signals.Signals, throttled bool, now time.Time, placed *quota.Quota) (stated float64) {
	var q *quota.Quota
	switch {
	case s.Bucket != "":
		q = e.buckets.get(c.Host, s.Bucket, now)
		k.route(c.Route, q)
	case s.HasQuota:
		q = k.ownQuota()
	}
	reading := &s.Quota // the answer's, read in place: it is on every answer's path
	spent := s.HasQuota && reading.Remaining < 1
	var renews time.Time // when a spent quota renews, held no longer than a pause
	if spent && !reading.Reset.IsZero() {
		renews = now.Add(gate.MaxPause)
		if r := reading.Renewal(now); r.Before(renews) {
			renews = r // a bucket that refills: when one unit is back
		}
	}
	var fleetUntil time.Time // the pause to tell the fleet: one call for both reasons
	switch {
	case !s.HasQuota:
	case reading.Unit == "":
		var sent uint64 // the attempt's number in q, if it was sent against it
		if placed == q {
			sent = c.sent
		}
		stated = q.Sync(now, *reading, sent, throttled)
	case spent:
		q.SpentElsewhere(now, renews) // its figures are not the requests'
	}
	if s.HasQuota && (reading.Unit == "" || spent) && e.cfg.Fleet != nil && (s.Bucket == "" || s.Global) {
		fleetUntil = q.SpentUntil() // spent until its reset: for the whole fleet
	}
	if !renews.IsZero() {
		e.pin(c, s.Bucket, renews)
	}
	// A Retry-After of a second or less, counted in whole seconds, says no
	// more than "slow down": servers round up to the second what is often a
	// few milliseconds of their bucket (go-chi/httprate always says 1), and
	// a key held for it would lose a second of its quota at every
	// overshoot. The retry waits for it; the key's controller, which heard
	// the throttle, slows the other calls. A longer delay, or one stated
	// to the millisecond, holds the key.
	if !throttled || !s.HasRetryAfter || s.RetryAfterSlack > 0 && s.RetryAfter <= s.RetryAfterSlack {
		e.pauseFleet(c, fleetUntil, now)
		return stated
	}
	until := now.Add(min(s.RetryAfter, gate.MaxPause))
	e.pin(c, s.Bucket, until)
	if q != nil && s.Bucket != "" && !s.Global {
		q.Exhaust(until) // the bucket's: fleetUntil is zero
		return stated
	}
	k.pace.Pause(until)
	if fleetUntil.After(until) {
		until = fleetUntil
	}
	e.pauseFleet(c, until, now)
	return stated
}

// pin keeps the state that holds a pause or a spent quota (the key's, and
// the bucket the server named) until until, however idle it is.
func (e *Engine) pin(c *Call, bucket string, until time.Time) {
	if bucket != "" {
		e.buckets.pin(c.Host, bucket, until)
	}
	e.keys.Pin(c.Who.Key, until)
}

// tellFleet tells the fleet's shared controller the outcome o of the
// call's attempt, if that controller paced it: a success is counted (with
// the key's next request), a throttle is a congestion event unless one
// came since the attempt was booked.
func (e *Engine) tellFleet(c *Call, k *Key, o control.Outcome) {
	if !c.shared {
		return
	}
	switch o {
	case control.OK:
		part(k, fleetPart, newOf[fleetgate.Key]()).Accept(c.gen)
	case control.Throttled:
		// An error leaves the event to the processes that can tell it.
		_ = e.cfg.Fleet.Throttled(c.Ctx, c.Who.Key, c.gen)
	}
}

// pauseFleet tells the fleet that the server asked for no request to the
// call's key until until.
func (e *Engine) pauseFleet(c *Call, until, now time.Time) {
	f := e.cfg.Fleet
	if f == nil || !until.After(now) {
		return
	}
	perSecond, burst := e.fleetRate(c)
	// An error leaves the pause to this process: the others learn of it
	// from the server.
	_ = f.Pause(c.Ctx, c.Who.Key, until.Sub(now), fleetapi.Request{PerSecond: perSecond, Burst: burst})
}

// remember tells the engine's Memory what the call's key learnt, if that
// changed since it last told it: its limit, or a pause.
func (e *Engine) remember(c *Call, k *Key, now time.Time) {
	var known control.Known
	n := now.UnixNano()
	if ctl := c.ctl; ctl != nil {
		known = ctl.Known(now)
	}
	paused := k.pace.PausedUntil(n)
	if q := peek(k, quotaPart); q != nil {
		if until := q.SpentUntil(); until.UnixNano() > max(paused, n) {
			paused = until.UnixNano()
		}
	}
	var window time.Duration
	if q := k.quotaFor(c.Route); q != nil {
		window = q.Window() // of the bucket the server named for the route, if it did
	}
	if known.Limit == 0 && paused == 0 && peek(k, memoPart) == nil {
		return // nothing learnt, nothing told
	}
	m := part(k, memoPart, newOf[memo]())
	m.mu.Lock()
	told, toldAt, toldPaused := m.told, m.at, m.paused
	known, moved := known.Worth(told, toldAt, n)
	// A window learnt after the stated limit was told (from the steps of
	// the quota's resets) is worth telling too.
	learnt := known.Stated && window > 0 && window != m.window
	if learnt && !moved {
		known, moved = told, true
	}
	if !moved && paused <= toldPaused {
		m.mu.Unlock()
		return
	}
	if known.Limit > 0 {
		m.told, m.at = known, n
		if known.Stated {
			m.window = window
		}
	}
	m.paused = max(paused, toldPaused)
	m.mu.Unlock()
	r := memfile.Record{Limit: known.Limit, Stated: known.Stated, At: now, NoBurst: known.NoBurst, CountsRefusals: known.CountsRefusals}
	if known.Stated {
		r.Window = window
	} else if known.Stood > 0 {
		r.Since = now.Add(-time.Duration(known.Stood) * time.Second)
	}
	if known.Limit == 0 && told.Limit > 0 {
		// A pause, with no limit known since the key's state was made: the
		// limit told before stands, as old as it was.
		r.Limit, r.Stated, r.At, r.NoBurst, r.CountsRefusals = told.Limit, told.Stated, time.Unix(0, toldAt), told.NoBurst, told.CountsRefusals
		if told.Stood > 0 && !told.Stated {
			r.Since = r.At.Add(-time.Duration(told.Stood) * time.Second)
		}
	}
	if paused > n {
		r.PausedUntil = time.Unix(0, paused)
	}
	e.cfg.Memory.Remember(c.Who.Key, r)
}

// SpentHolds reports whether the quota the call's route counts against
// holds a spent count until its reset (quota.Quota.SpentHolds); true if
// the key has none.
func (e *Engine) SpentHolds(c *Call) bool {
	if k := c.k; k != nil {
		if q := k.quotaFor(c.Route); q != nil {
			return q.SpentHolds()
		}
	}
	return true
}
