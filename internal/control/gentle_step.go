package control

import (
	"math"
	"time"
)

// NewGentle returns a Gentle created at now, not enabled.
func NewGentle(now time.Time) *Gentle {
	g := new(Gentle)
	g.Init(now)
	return g
}

// Init makes g a Gentle created at now, not enabled.
func (g *Gentle) Init(now time.Time) {
	g.responses, g.since, g.ramp, g.last = newMeter(now), now.UnixNano(), now.UnixNano(), now.UnixNano()
	g.found, g.held = wholeSeconds(now.UnixNano()), -1
}

// Sending returns what an attempt sent now hands back to Observe.
func (g *Gentle) Sending() Mark { return Mark(g.phase.Load()) }

// Observe feeds the outcome o of an attempt that ended at now, sent when
// Sending returned mark, whose round trip took rtt (0 if unknown), with
// the limit the server states (requests per second; 0 if none). It reads
// the outcome as an event and hands it to step.
func (g *Gentle) Observe(now time.Time, o Outcome, stated float64, mark Mark, rtt time.Duration) Rate {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := now.UnixNano()
	in := input{n: n, gap: n - g.last, measured: g.responses.add(now), sent: uint32(mark), phase: g.phase.Load(), rtt: rtt}
	g.last = n
	in.order = g.sentIn(in.sent)
	if stated > 0 {
		in.stated = stated
		g.step(statedLimit, &in)
	}
	var e gentleEvent
	switch o {
	case Failed:
		e = outage
	case OK:
		e = success
		if g.heldOut(&in) {
			in.held = true
			e = g.throttle(&in)
		}
	default:
		e = g.throttle(&in)
	}
	if g.step(e, &in) {
		return Rate{PerSecond: 0, Burst: forgotten, Enabled: false, Forgot: true}
	}
	r, b, enabled := g.current()
	return Rate{PerSecond: r, Burst: b, Enabled: enabled, Held: in.held}
}

// sentIn returns when an attempt sent in phase sent was sent; after both
// if unknown.
func (g *Gentle) sentIn(sent uint32) sending {
	switch {
	case sent == noSend:
		return sentAfter
	case int32(sent-g.event) < 0:
		return sentBefore
	case sent%2 == 1: // odd: no success had come since the event
		return sentUnanswered
	}
	return sentAfter
}

// heldOut reports whether a success is a hold: its round trip stood
// gentleHeldMin seconds and gentleHeldTimes times the base above the base
// at least, as a server that slows instead of refusing holds a request
// past its limit. A hold is a throttle that tells its round trip late. A
// slow endpoint's round trips spread far too, whatever the rate: holds of
// requests sent while the rate stood still (neither W sought nor a probe)
// show that, those sent while it rose the server's limit; once the first
// outnumber the second by gentleHeldSteady, no round trip is a hold; nor
// is one of a server that states the quota it counts (see Quoted). It
// requires g.mu held.
func (g *Gentle) heldOut(in *input) bool {
	if g.slow == slowEndpoint || in.rtt <= 0 || g.quoted() {
		return false
	}
	base := float64(g.baseLocked()) / 1e6
	if added := in.rtt.Seconds() - base; base == 0 || added < gentleHeldMin || added < gentleHeldTimes*base {
		return false
	}
	switch {
	case in.order != sentAfter:
		// Sent before the last event, or before its first success, into
		// what the event found overdrawn: no proof either way.
	case g.state == holding && !g.probing(in.n-int64(in.rtt)):
		if g.steady++; g.steady >= gentleHeldSteady {
			g.slow = slowEndpoint
			return false
		}
	case g.steady > 0:
		g.steady--
	}
	return true
}

// throttle returns the event a throttle is: the attempt's sending (or,
// unknown, the time since the last event) says whether it belongs to an
// event already taken, shows the server still refusing, or is an event
// of its own. It requires g.mu held.
func (g *Gentle) throttle(in *input) gentleEvent {
	switch {
	case in.order == sentBefore:
		return late // in flight at the last event, or when a memory's limit was forgotten
	case g.state == unthrottled:
		return congestion
	case in.sent == noSend && (in.n-g.since < int64(gentleCooldown) || g.accepted == 0), in.order == sentUnanswered:
		if in.phase%2 == 1 && (in.sent == in.phase || in.sent == noSend && g.accepted == 0) {
			return refused // sent since the event and since the last halving, refused before any success
		}
		return late
	}
	return congestion
}

// step makes the transition event e brings at in.n: the one place where
// Gentle's state changes. It reports whether g forgot a limit a memory
// gave. It requires g.mu held. Each rule says why in a sentence; its
// figures are in docs/adapting.md ("Gentle's rules"). The transitions of
// the state:
//
//	unthrottled  congestion   climbing (W a floor), or finding (W stated)
//	climbing     congestion   finding (W found above the floor), or holding
//	                          (where a server with no burst begins refusing)
//	climbing     statedLimit  finding
//	finding      congestion   finding (W found higher), or holding
//	holding      congestion   holding (W lower, or confirmed, or a lockout),
//	                          finding (a probe found W higher), or
//	                          unthrottled (a memory's limit forgotten)
//	finding,     queueing     finding (W found higher), or holding
//	holding
//	any          recall       holding
//
// Successes, outages, refusals and late throttles change the rate, the
// measurement and the facts, not the state.
func (g *Gentle) step(e gentleEvent, in *input) (forgot bool) {
	n := in.n
	switch e {
	case statedLimit:
		// A stated limit is W's ceiling, and W itself where W was only a
		// floor: the server knows better than a climb.
		g.stated = in.stated
		g.recalled &^= recalledStated
		switch {
		case g.state == climbing:
			g.limit, g.state = in.stated, finding
		case g.state != unthrottled && g.limit > in.stated:
			g.limit = in.stated
		}

	case outage:
		// An outage says nothing of the limit: the rate neither grows nor
		// falls, and its time is left out of the next measurement.
		g.since = min(g.since+max(in.gap, 0), n)
		g.ramp = min(g.ramp+max(in.gap, 0), n)

	case success:
		if in.phase%2 == 1 && in.order >= sentUnanswered {
			g.phase.Store(in.phase + 1) // the first success of an attempt sent since the event
		}
		g.tally(in)
		if g.spent > 0 {
			// A success ends the halving: the curve goes on from where
			// it stood.
			g.thaw(n)
			if g.spent >= 2 && g.state == climbing && g.tight != tightStale && n-g.since >= int64(gentleLockedOut*float64(time.Second)) {
				// The first floor's halvings were refused twice and
				// more, for a quarter second at least: the server
				// counts refusals (waryCounts), and locked the first
				// contact out for its crossing. What the floor measured
				// is what it let through: hold there, probed after a
				// hold, rather than climb from it into the lockout
				// again. (Not after a memory's limit was forgotten:
				// that floor measured the stale rate's crossing, not
				// the server.)
				g.state, g.fresh, g.ramp, g.found = holding, true, n, wholeSeconds(n)
			}
			g.spent = 0
		}
		if delivered, queued := g.sample(n, in.rtt); queued && g.limitKnown() && g.rising(n) && !g.quoted() {
			in.delivered = delivered
			return g.step(queueing, in)
		}
		switch g.state {
		case climbing, finding:
			// The curve, but no higher than what succeeds allows: callers
			// held by a refusal must not come back into a rate that rose
			// meanwhile.
			g.rate = g.findRate(n)
		case holding:
			// The curve, but never past gentleGrowth times the rate of
			// responses: a client that does not use its rate does not
			// inflate it.
			g.rate = math.Max(gentleMinRate, math.Min(g.curve(n), math.Max(g.rate, gentleGrowth*in.measured)))
		}

	case queueing:
		// A queue the rising rate built is an event no refusal showed: W
		// becomes the rate the server served it at (half to twice W), and
		// the rise stops.
		previous := g.limit
		g.limit = g.bounded(min(max(in.delivered, previous/2), 2*previous))
		g.crossing = notCrossed
		g.state = holding
		if g.limit > (1+gentleMoved)*previous {
			g.state = finding
		}
		if moved(g.limit, previous) {
			g.found = wholeSeconds(n)
		}
		g.startEpoch(n, measuredEpoch)

	case late:
		// Its event, or its halving, was taken already.

	case refused:
		// The server still refuses at the new rate: halve it, once per
		// round trip, until a success; while finding, the curve stands
		// still meanwhile.
		if g.spent == 0 && g.seeking() {
			g.frozen = n
		}
		g.spent = min(g.spent+1, 16)
		if g.spent >= 2 {
			g.wary |= waryCounts // refused twice in a row: the server counts refusals
		}
		if in.sent != noSend {
			g.phase.Store(in.phase + 2) // the refusals of attempts sent before this halving do not halve again
		}

	case congestion:
		switch {
		case g.lockedOut(n):
			// Where the server counts refusals, a refusal soon after a
			// crossing is the crossing's lockout: it measures nothing,
			// and the hold restarts, halving until a success. Every
			// one within gentleLockout of a probe's; once another's, for
			// a limit that dropped looks the same.
			if g.crossing == crossed {
				g.crossing = riddenOut
			}
			g.startEpoch(n, lockoutEpoch)
		case g.recalled&recalledLimit != 0 && !g.probing(n) && g.tight != tightYes:
			// A memory's limit refused while the rate holds below it is
			// stale: start over as a key with no history, for a limit
			// measured from it would be far too low. (Not on a server
			// that lets no burst through: its refusals come below its
			// limit now and then, from the way to it, and a remembered
			// W is measured as any W is.)
			stated := g.stated
			if g.recalled&recalledStated != 0 {
				stated = 0 // the memory's, not an answer's
			}
			g.forget(n, stated)
			return true
		default:
			from, previous, past := g.state, g.limit, g.probing(n)
			if from == unthrottled && g.tight == tightUnknown {
				// The key's first throttle: of its first contact's
				// requests, more than one passed (a burst), or one, or
				// none yet, and those in flight tell (see tally).
				g.tight = tightNo
				if g.accepted <= 1 {
					g.tight = tightMaybe + tightness(g.accepted)
				}
			}
			g.recalled = 0 // measured since: no longer the memory's
			g.lag = 0
			if in.held {
				// The next hold tells a round trip as long as this one
				// late: the rate must rise little meanwhile (see lagDouble).
				g.lag = uint16(min(in.rtt.Milliseconds(), math.MaxUint16))
			}
			at := n
			if in.held && from == unthrottled {
				// The first hold: the silence before it is its own (the
				// callers were held with it), not time the server took
				// to accept what it did.
				at -= max(in.gap, 0)
			}
			whole := g.crossedWhole(in.rtt)
			g.limit = g.measure(at, past, whole)
			settles := from == climbing || from != unthrottled && past
			if settles {
				g.settled = float32(g.limit)
			}
			g.crossing = g.crosses(from, past, settles)
			if from == unthrottled || moved(g.limit, previous) {
				g.found = wholeSeconds(n) // moved: found anew (a probe that confirms W keeps found)
			}
			switch {
			case from == unthrottled && g.stated == 0:
				// The first throttle has no event before it: W is only a
				// floor, to climb from in round trips.
				g.state = climbing
			case whole:
				// A climb crossed a server with no burst where its refusals
				// begin, and W stands below that already: finding it
				// again would only cross it again.
				g.state = holding
			case from == unthrottled, g.limit > (1+gentleMoved)*previous:
				// Stated, or found higher: still being found, with no
				// hold.
				g.state = finding
			default:
				// Found where it was, or lower: hold below it, then probe.
				g.state = holding
			}
			g.startEpoch(n, measuredEpoch)
		}

	case recall:
		// A memory's limit is held as after an event that measured it,
		// for as long as it had stood, then probed; a throttle while it
		// holds shows it stale (see congestion).
		m := in.memory
		g.limit, g.settled, g.state, g.fresh, g.crossing = m.Limit, float32(m.Limit), holding, false, notCrossed
		g.recalled = recalledLimit
		if m.NoBurst {
			g.tight = tightYes // what the first contact showed, and no other can show again
		}
		if m.CountsRefusals {
			g.wary |= waryCounts // what a crossing showed, which a stale limit's may not show again
		}
		if m.Stated {
			g.stated = m.Limit
			g.recalled |= recalledStated
		}
		g.found = wholeSeconds(n - int64(m.Stood))
		g.startEpoch(n, rememberedEpoch)
	}
	return false
}

// startEpoch begins an epoch of kind k at n (Unix nanoseconds): the one
// place where one begins. The phase marks an event, so that attempts sent
// before it are told apart; the curve starts again; and, but after a
// lockout, the measurement of the next event starts from here. It
// requires g.mu held.
func (g *Gentle) startEpoch(n int64, k epochKind) {
	g.event = g.phase.Load() | 1 // odd: an event, no success since
	if k == rememberedEpoch {
		g.phase.Store(g.event + 1) // and a success since: the first throttle is an event of its own
	} else {
		g.phase.Store(g.event)
	}
	g.flags.And(^flagUntimed) // a throttle, or a memory: round trips matter again
	g.ramp, g.frozen, g.held, g.spent = n, 0, -1, 0
	if k != lockoutEpoch {
		g.since, g.accepted = n, 0
		g.recent, g.sampled = 0, 0 // a round measures what came after the event
	}
	g.rate = g.curve(n)
}

// forget makes g, at n (Unix nanoseconds), a Gentle with no history, as
// Init does, but for what it knows of round trips, and for the limit the
// server stated in an answer, which it keeps. It requires g.mu held.
func (g *Gentle) forget(n int64, stated float64) {
	g.round, g.limit, g.stated, g.state = 0, 0, 0, unthrottled
	g.fresh, g.queued, g.crossing, g.recalled, g.lag, g.steady = false, false, notCrossed, 0, 0, 0
	g.wary &= waryCounts // a server that counts refusals still does at its new limit
	g.tight = tightStale
	g.dropped, g.settled, g.second, g.least, g.found = 0, 0, [5]uint16{}, 0, wholeSeconds(n)
	g.startEpoch(n, rememberedEpoch)
	g.stated = stated
}
