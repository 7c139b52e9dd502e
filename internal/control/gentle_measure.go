package control

import (
	"math"
	"time"
)

// measure returns W as the congestion event at n (Unix nanoseconds)
// measures it, the rate past its hold (see probing) or not, and records
// what the event tells of W (fresh, dropped) and of the server (wary);
// whole reports a climb's crossing taken whole (see crossedWhole). What
// the server accepted since the last event, over the time since, is its
// limit when the client sent above it all along. It requires g.mu held.
func (g *Gentle) measure(n int64, past, whole bool) float64 {
	span := nanosToSeconds(n - g.since)
	previous := g.limit
	measured := float64(g.accepted) / math.Max(span, 1e-3)
	var limit float64
	switch {
	case g.state == unthrottled && g.stated > 0:
		// The first event, where the server states its limit: that.
		limit = g.stated
	case g.state == unthrottled:
		// The first event has none before it: what was accepted since the
		// first attempt, over a second at least, is only a floor, for a
		// server with a burst accepts that much in a moment.
		limit = float64(g.accepted) / math.Max(span, gentleFloorSpan)
	case g.state == climbing:
		// The end of the climb: the rate of the last round of successes
		// tells W better than the whole climb, but no more than the last
		// second's, for a window that allows a burst lets a round through
		// at any rate; on a server with no burst, the rate it was crossed
		// at (see tightRate).
		limit = max(previous, measured, min(float64(g.recent), g.lastSecond(n)), g.tightRate(whole))
		// A W taken whole from where refusals begin is no W found while
		// callers were held: no probe verifies it soon.
		g.fresh = !whole
		if previous > gentleBursty*limit {
			g.wary |= waryBurst // what came before the first refusal was a burst: a probe soon would measure it
		}
	case past:
		// A probe shows the limit at least where it was: W only grows, to
		// what the probe and the end of the hold measure (see probed).
		limit = max(previous, g.probed(n, span, measured), g.tightRate(false))
		switch {
		case limit > (1+gentleMoved)*previous:
			g.fresh = true
		case g.state == holding:
			g.fresh = false // after a hold, where it was: confirmed
		}
	default:
		// While holding, an event shows the limit lower, not how much: W
		// falls to what was accepted, by a factor of gentleFall at most,
		// and to gentleAfter of it at least in an aftershock, which a
		// handful of requests cannot measure: of a crossing, or, on a
		// server with no burst, of any event (its refusals come where a
		// stall bunched requests, a few at a time).
		least := previous / gentleFall
		aftershock := (g.crossing != notCrossed || g.tight == tightYes) && g.accepted < gentleRound
		if aftershock {
			least = gentleAfter * previous
		}
		limit = math.Min(previous, math.Max(measured, least))
		if (!g.fresh || span >= gentleShortWait) && limit < gentleDrop*previous {
			// A W that stood dropped (no W found too high): probe again
			// soon, for it may come back.
			g.dropped = uint32(n / int64(time.Second))
		}
		g.fresh = aftershock // an aftershock's W is verified soon (see verifies)
	}
	return g.bounded(limit)
}

// tightRate returns, on a server that lets no burst through, the least W
// a crossing shows (whole: a climb's, taken whole): gentleTight
// of the rate it was crossed at. Requests come up to a timer's lateness
// off their pace, and a server with no burst refuses the one that comes
// early: what it accepted until it refused is well below the rate at
// which its refusals begin, and a little below that rate they stop. The
// rate is the one sent at where callers use it all, but no more than
// gentleTightRound times the rate of the last round of successes: where
// callers send less, a W taken from a rate they left unused would be far
// above what they sent. At the end of a climb whose crossing came back
// within gentleTightLag of a doubling, all of it: the climb doubles within
// a round of successes, whose rate lags far behind it, it rises no higher
// than gentleDemand times what callers send (see findRate), and it has
// barely moved since the crossing was sent. 0 elsewhere. It requires g.mu
// held.
func (g *Gentle) tightRate(whole bool) float64 {
	switch {
	case g.tight != tightYes:
		return 0
	case whole:
		return gentleTight * g.rate
	}
	return gentleTight * min(g.rate, gentleTightRound*float64(g.recent))
}

// crossedWhole reports whether a climb's crossing whose round trip took
// rtt, on a server with no burst, came back within gentleTightLag of a
// doubling: its rate, all of it, is where the server's refusals begin
// (see tightRate). It requires g.mu held.
func (g *Gentle) crossedWhole(rtt time.Duration) bool {
	return g.tight == tightYes && g.state == climbing && rtt > 0 && rtt.Seconds() <= gentleTightLag*g.findDouble()
}

// tally counts a success toward the measurement of the next event: an
// attempt sent since the last event is accepted (and marks the probe's
// beginning if it is its first success); one in flight at the first
// event is part of the floor. It requires g.mu held.
func (g *Gentle) tally(in *input) {
	switch {
	case in.order >= sentUnanswered:
		if g.held < 0 && g.state == holding && g.probing(in.n) {
			g.held = g.accepted // the first success of the probe
		}
		g.accepted = min(g.accepted+1, math.MaxInt32-1)
	case g.state == climbing:
		g.limit++ // over a second at least, as the floor was measured
		// The first contact's requests in flight at its first throttle:
		// one through is no burst, more are one.
		switch {
		case g.tight < tightMaybe:
		case g.limit >= gentleInitial:
			g.tight = tightNo
		case g.tight == tightMaybe:
			g.tight = tightYes
		}
	}
	g.count(in.n)
}

// bounded returns limit, no higher than the stated limit and no lower
// than gentleMinRate.
func (g *Gentle) bounded(limit float64) float64 {
	if g.stated > 0 {
		limit = math.Min(limit, g.stated)
	}
	return math.Max(limit, gentleMinRate)
}

// probed returns the limit a probe measured at n (Unix nanoseconds), span
// seconds after the last event: measured, what was accepted since the last
// event over span, when the hold before the probe lasted gentleWait or
// less (gentleVerify, when it verifies); otherwise what was accepted in
// the probe and the last gentleWait of the hold (the hold's share of it,
// for its rate stood still), over that time, for over a long hold a risen
// limit would move W too little to be seen. It requires g.mu held.
func (g *Gentle) probed(n int64, span, measured float64) float64 {
	probe := min(max(nanosToSeconds(n-g.ramp)-g.hold(n), 0), span)
	holding := span - probe // seconds
	window := gentleWait
	if g.verifies() {
		window = gentleVerify
	}
	if holding <= window {
		return measured
	}
	before := g.accepted // in the hold: every success, if the probe had none
	if g.held >= 0 {
		before = g.held
	}
	counted := float64(g.accepted-before) + float64(before)*window/holding
	return counted / (probe + window)
}

// crosses reports whether an event that begins an epoch, from the state
// from, at a rate past its hold or not (past), that settles W or not (see
// step), overdrew the server: a probe; the end of a probe's finding, where
// the server counts refusals; the last crossing of a climb or a finding,
// where the server is not wary; or, where it counts refusals, a rate held
// at a W a little high, for its lockout follows (see lockedOut). It
// requires g.mu held.
func (g *Gentle) crosses(from gentleState, past, settles bool) crossing {
	counts := g.wary&waryCounts != 0
	switch {
	case from == holding && past:
		return probedOver
	case from == finding && past && counts || settles && g.wary == 0 || !settles && counts:
		return crossed
	}
	return notCrossed
}

// lockedOut reports whether a congestion event at n (Unix nanoseconds) is
// the lockout of a crossing: where the server counts refusals, a crossing
// (see crosses) counts the requests it refused too, and refuses the
// client for up to two of its periods after, even at gentleHold·W. After
// a probe (probedOver), every refusal in that time is its lockout: the
// window lets a request or two through between them, which measure
// nothing (2 in 40 ms measured half of HAProxy's limit, and the probes
// that followed spiralled down). After another crossing, one episode of
// refusals is the lockout, and the next refusal measures, for a limit
// that dropped looks the same on a loaded machine; as an aftershock (see
// measure) where a handful of requests came between. Not while W is
// found: a climb may end above the limit, and what follows measures it.
// It requires g.mu held.
func (g *Gentle) lockedOut(n int64) bool {
	return g.state == holding && g.wary&waryCounts != 0 && (g.crossing == crossed || g.crossing == probedOver) &&
		nanosToSeconds(n-g.since) < gentleLockout
}
