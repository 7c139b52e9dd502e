package control

// This file is a frozen copy of Gentle as it was at da7f263 (gentle.go
// and Gentle's methods in memory.go), renamed, so that
// TestGentleMatchesFrozen and FuzzGentleStates can show that Gentle's
// restructuring into explicit states changed nothing of what it does.
// Do not edit it: it is the reference, not the code.

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Constants of frozenGentle, each explained in its documentation.
const (
	frozenHold      = 0.99        // the share of the estimated limit the rate holds at
	frozenWait      = 4.0         // seconds held before a probe, at least
	frozenMaxWait   = 30.0        // seconds held before a probe, at most: the hold is as long as the limit has stood
	frozenShortWait = 0.75        // seconds held before a probe, at least, after a drop
	frozenShorten   = 0.15        // after a drop, the hold is this share of the time since, until it is frozenWait
	frozenDrop      = 0.5         // an event that lowers an estimate that stood below this share of it is a drop
	frozenVerify    = 1.0         // seconds held before the probe that verifies a limit just found, and the last of the hold it counts
	frozenAfter     = 0.85        // an aftershock of a crossing lowers the estimate by this share at most
	frozenBursty    = 0.5         // seconds: a server that lets through this long of its limit at once is not verified
	frozenLockout   = 2.0         // seconds after a crossing in which a server that counts refusals still refuses for it
	frozenDouble    = 1.0         // seconds in which a probe doubles the rate; a quarter of that while finding the limit
	frozenRisen     = 1.1         // a probe this far above the estimate without a throttle has found the limit risen
	frozenCooldown  = time.Second // throttles this soon after an event belong to it, when the sending is unknown
	frozenMinRate   = 0.5         // requests per second
	frozenMaxRate   = 1e9         // requests per second: a probe that long unanswered by a throttle grows no further
	frozenRound     = 8           // round trips whose least is compared with the base
	frozenFindRTTs  = 8           // least round trips in which the rate doubles while finding the limit
	frozenInitial   = 2           // requests a key with no history sends at once
	frozenMinRound  = 0.02        // seconds: the least round of the first contact
	frozenRounds    = 30          // rounds after which the first contact no longer paces
	frozenBaseEpoch = 10          // seconds: the base is the least round trip of the last one to two epochs
	frozenQueued    = 2.0         // requests' worth of added round trip that shows the server queueing
	frozenMinQueue  = 1000        // microseconds: less added round trip is noise
	frozenDemand    = 4.0         // while finding the limit, the rate is at most this many times that of the last successes
)

// frozenGentle is polite's default send-rate controller (AdaptiveDefault). Like
// the AWS SDKs' CUBIC controller ([Cubic]) it sets a rate once the server
// first throttles and grows it back; unlike it, it measures the server's
// limit, holds just below it, and probes above it now and then, so that it
// wastes little of the server's quota; it opens a key's first contact as
// TCP's slow start does; and it hears a server that queues rather than
// refuses. It is usable outside HTTP and safe for concurrent use. Create
// it with [newFrozenGentle].
//
// # First contact
//
// A key with no history sends 2 requests at once, then at a rate that
// doubles every round (the least round trip seen, 20 ms at least) until
// the server throttles, states a limit in its headers, or the rate has
// outgrown any demand (30 rounds): a server whose burst is small refuses
// the few requests of one round, not every caller's first. A caller that
// sends one request at a time is never held by it (the Transport paces a
// key's first contact only when its calls crowd it).
//
// # Measuring the limit
//
// A congestion event is a throttle of a request sent after the last event
// and after the first success of a request sent since: the throttles of
// requests already in flight when the rate was cut, and of those sent
// before anything passed again, belong to the last event, so that a burst
// of 429s from one overload counts once (Cubic cuts the rate at every
// throttle). Every event is a moment when the server had nothing left to
// give: a token bucket empty, a window spent. So what the server accepted
// between two events, over the time between them, is what it lets through
// in that time, its limit W, when the client sent above it all along; when
// the client sent less for a while, it is less than W. Hence:
//
//   - an event while the rate holds below the estimate shows the limit
//     lower: the estimate becomes what was accepted since the last event
//     over the time since, at most 4 times less (a cut that was not enough
//     shows the limit lower, not how much);
//   - an event while the rate probes above the estimate shows the limit at
//     least where it was: the estimate only grows, to what was accepted
//     since the last event over the time since, if that is more;
//   - the first event has no event before it: what was accepted since the
//     first attempt, over at least a second, is only a floor (a server
//     with a burst accepts that much in a moment), counting the requests
//     in flight at the event that succeed; the event that ends the climb
//     from it takes the rate at which the last round of successes came
//     (no more than the successes of the last second: a window that
//     allows a burst lets a round through at any rate), which tells the
//     limit better than the whole climb.
//
// When the server states its limit ([frozenGentle.UpdateStated]: in headers,
// with its window), that is the estimate from the first throttle on,
// instead of a floor, and a ceiling: frozenGentle never probes above it.
//
// # Queueing servers
//
// A server that holds what it cannot serve yet (nginx's limit_req without
// nodelay) refuses nothing until its queue is full: the round trip says
// so first. frozenGentle keeps the least round trip of the last 10 to 20
// seconds as the base and, every 8 successes, compares the least of them
// with it: when that stands two requests' worth above the base at the
// rate (a millisecond, and the base itself, at least) in two rounds in a
// row while the rate rises, the server is queueing. That is a congestion
// event no refusal showed: the rise stops, and the estimate becomes the
// rate at which the server served the last 8 (half to twice the last
// estimate). The least of a round, not each round trip, is compared, and
// two rounds, so that a new connection or a stall of the client's is not
// taken for a queue; an endpoint that is slow from its first round trip
// is its own base, and one whose round trips vary (10 to 20 ms) does not
// double its least; and while the rate holds, a slow moment is no signal
// at all.
//
// # The rate
//
// After an event the rate holds at 0.99·W. After a hold without a
// throttle it probes: the hold is as long as W has stood (since an event
// found it more than 5% from the estimate before; a probe that finds it
// where it was confirms it), 4 seconds at least and 30 at most, so that a
// limit the probes keep confirming is probed ever less often. A limit
// just found is verified sooner: the first probe after it comes after a
// second, and measures over the probe and that second only (a limit found
// while a refusal's Retry-After held most callers is found low, and a
// probe after a long hold moves it by a percent or two), unless the
// server has refused twice in a row after an event before any success
// (a server that counts refusals, as HAProxy, locks out a client that
// probes again so soon), or its first refusal came after a burst of half
// a second of its limit or more (the probe would measure the burst). A
// refusal right after a probe's crossing, before a round of 8 requests
// has passed, is an aftershock of it (the server overdrawn, met on the
// jitter of the requests): it lowers W by 15% at most, however little the
// few requests since measured, and W is verified again. Where the server
// counts refusals, a refusal within 2 seconds of a probe's crossing, or
// of an event while holding, is its lockout (the crossing's refusals,
// counted, refuse the client for a while even at 0.99·W): it measures
// nothing, W stands, and the rate halves until a request succeeds. The probe
// doubles the rate every second until the next event, which
// measures the limit again; a probe that gets 10% above W without a
// throttle has found the limit risen, and doubles every quarter of a
// second from there. While the limit is being found (from a floor, and
// after each event that found it more than 5% higher) there is no hold,
// and the rate doubles every quarter of a second; from a floor, every 8
// least round trips (a sixteenth of a second at least), so that a floor
// far below the limit is left in round trips, not seconds. But the rate
// while finding is at most 4 times that of the last successes (over the
// last second, or the last quarter second and a bit, whichever is more),
// twice 0.99·W and a first contact's first round at least: callers held
// by a refusal's Retry-After send nothing, and a curve that rose
// meanwhile would let them all go at once when they come back, into the
// same refusal. A limit that
// stood and drops to less than half may come back: after such a drop
// the hold is 15% of the time since the drop (three quarters of a second
// at least), until that is four seconds again. A limit that rose is thus
// found within about 5 seconds after a drop (15% of the time it stayed
// low, and the probe's climb), and within about as long as it had stood
// otherwise (30 seconds at most); one that did not move costs a refused
// request or two every 4 seconds at first, every 30 once it has stood
// that long. The curve is scaled to W, so it
// behaves alike at 1 and at 10,000 requests per second (Cubic's constant
// is absolute: slow at high rates, abrupt at low ones).
//
// A request sent after an event and refused before any succeeded shows the
// server still refusing at the new rate (a spent window, a limiter that
// counts refusals): such a refusal halves the rate, once per round trip
// (the refusals of requests sent before a halving do not halve again),
// until a request succeeds. While the limit is found from a floor, the
// curve stands still meanwhile, and the halving stops at a request every
// four of its doublings, so that the server is asked again soon: the rate
// never falls so low that nothing is sent to measure it. A 5xx that is no
// throttle, or a transport error, says nothing of the limit: the rate
// neither grows nor falls, and the time an outage lasts is left out of the
// next measurement. As Cubic, once the limit is found frozenGentle never grows
// past twice the measured rate of responses (a client that does not use
// its rate does not inflate it), and it never goes below 0.5 requests per
// second (nor above a billion, so that a probe no throttle answers never
// overflows). Its bucket holds a single request, so that it paces evenly:
// a server whose own bucket holds little sees no burst from it.
//
// # The server's limit and the callers
//
// frozenGentle paces below the server's limit for a while by design (climbing
// from a floor, halving while refused). The Transport judges a call's
// wait by the server's limit as frozenGentle knows it (stated, or measured by a
// throttle; unknown, and so never the reason for a refusal, while it is
// only a floor), not by frozenGentle's own rate: a call fails locally only when
// the server could not serve it in time.
type frozenGentle struct {
	// mu guards the fields below mu. Instants are Unix nanoseconds (or
	// seconds), and round trips microseconds, to keep a frozenGentle small: a
	// crawler holds one per host. (The fields are ordered by size, not by
	// topic, for the same reason.)
	mu     sync.Mutex
	since  int64   // the last congestion event, or the first attempt before one (moved on by outages)
	ramp   int64   // when the curve of the rate began (moved on by outages, and by refusals while finding)
	frozen int64   // when refusals stopped the curve while finding; 0 if they do not
	last   int64   // the last outcome
	round  int64   // when the first success of the round of round trips in progress came
	rate   float64 // the rate to send at, before halving
	limit  float64 // W: the estimate of the server's limit
	stated float64 // the limit the server states; 0 if none

	// phase counts congestion events and the first success after each,
	// so that an attempt can tell whether it was sent after both (see
	// Observe): it is odd from an event to the first success after it,
	// and moves on by 2 at each halving in between.
	phase atomic.Uint32
	// untimed reports that the round trips of attempts do not matter to g
	// for now (see timed).
	untimed atomic.Bool

	event     uint32    // the phase right after the last event
	base      [2]uint32 // the least round trip of the previous epoch and of the current one
	epoch     uint32    // Unix seconds when base[1]'s epoch began
	least     uint32    // the least round trip of the round in progress
	recent    float32   // the rate at which the successes of the last complete round came
	settled   float32   // W as the last event that probed or found it measured it (see known); 0 if none
	slot      uint32    // the quarter second, counted from the Unix epoch, that second[slot%5] counts
	dropped   uint32    // Unix seconds when a limit that stood last dropped; 0 if none
	found     uint32    // Unix seconds (rounded) when W was found at about its value: a probe that confirms it keeps it
	accepted  int32     // successes of requests sent since the last event
	held      int32     // of them, those that came before the probe after the event began; -1 until it does
	second    [5]uint16 // successes in each of the last five quarter seconds
	spent     int8      // refusals of requests sent since the last event, before any success (16 at most)
	sampled   uint8     // round trips in the round in progress
	enabled   bool      // an event has come
	floor     bool      // W is only a floor
	finding   bool      // the last event found W more than 5% above the one before: the limit is still being found
	fresh     bool      // W was just raised by finding it, and no probe or hold has confirmed it
	queued    bool      // the last complete round of round trips stood above the base
	crossed   uint8     // how the server was just overdrawn, if it was: frozenCrossedProbe, frozenCrossedHold (see congestion); 0 if not
	wary      uint8     // why a probe soon after a crossing would cost, if it would: frozenWaryCounts, frozenWaryBurst (see verifies, lockedOut)
	recalled  uint8     // what a Memory gave (recall) that no answer has confirmed: frozenRecalledLimit, frozenRecalledStated
	responses meter     // all responses
}

// newFrozenGentle returns a frozenGentle created at now, not enabled.
func newFrozenGentle(now time.Time) *frozenGentle {
	g := new(frozenGentle)
	g.Init(now)
	return g
}

// Init makes g a frozenGentle created at now, not enabled.
func (g *frozenGentle) Init(now time.Time) {
	g.responses, g.since, g.ramp, g.last = newMeter(now), now.UnixNano(), now.UnixNano(), now.UnixNano()
	g.found, g.held = frozenWholeSeconds(now.UnixNano()), -1
}

// frozenWholeSeconds returns n (Unix nanoseconds) in whole seconds, rounded, as
// frozenGentle keeps some instants.
func frozenWholeSeconds(n int64) uint32 {
	return uint32(max((n+int64(time.Second)/2)/int64(time.Second), 0))
}

// Sending returns what an attempt sent now hands back to Observe.
func (g *frozenGentle) Sending() Mark { return Mark(g.phase.Load()) }

// frozenNoSend is NoMark as frozenGentle's phase counts it.
const frozenNoSend = uint32(NoMark)

// Observe feeds the outcome o of an attempt that ended at now, sent when
// Sending returned mark, whose round trip took rtt (0 if unknown), with
// the limit the server states (requests per second; 0 if none).
func (g *frozenGentle) Observe(now time.Time, o Outcome, stated float64, mark Mark, rtt time.Duration) Rate {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, b, e := g.observeLocked(now, o, stated, uint32(mark), rtt)
	return Rate{PerSecond: r, Burst: b, Enabled: e, Forgot: b == frozenForgotten}
}

// observeLocked is Observe, with sent the phase the attempt was sent in.
// It requires g.mu held.
func (g *frozenGentle) observeLocked(now time.Time, o Outcome, stated float64, sent uint32, rtt time.Duration) (float64, int, bool) {
	measured := g.responses.add(now)
	n := now.UnixNano()
	previous := g.last
	g.last = n
	phase := g.phase.Load()
	// Where the attempt was sent: before the last event (in flight when
	// it came), after it but before its first success, or after both.
	order := 1
	if sent != frozenNoSend {
		switch d := int32(sent - g.event); {
		case d < 0:
			order = -1
		case sent%2 == 1:
			order = 0 // odd: no success had come since the event
		}
	}
	if stated > 0 {
		g.stated = stated
		g.recalled &^= frozenRecalledStated
		if g.enabled && (g.floor || g.limit > stated) {
			g.limit, g.floor = stated, false
		}
	}
	switch o {
	case Failed:
		// An outage says nothing of the limit: the rate neither grows
		// nor falls, and the time it lasts is left out of the next
		// measurement.
		g.since = min(g.since+max(n-previous, 0), n)
		g.ramp = min(g.ramp+max(n-previous, 0), n)
		return g.state()
	case OK:
		if phase%2 == 1 && order >= 0 {
			g.phase.Store(phase + 1) // the first success of a request sent since the event
		}
		switch {
		case order >= 0:
			if g.held < 0 && g.enabled && !g.finding && frozenNanosToSeconds(n-g.ramp) > g.hold(n) {
				g.held = g.accepted // the first success of the probe
			}
			g.accepted = min(g.accepted+1, math.MaxInt32-1)
		case g.floor:
			g.limit++ // in flight at the first event: part of the floor, over a second
		}
		if g.spent > 0 {
			g.thaw(n)
			g.spent = 0
		}
		g.count(n)
		if delivered, queueing := g.sample(n, rtt); queueing && g.enabled && !g.floor && g.rising(n) {
			g.queueing(n, delivered)
			return g.state()
		}
		switch {
		case g.enabled && g.finding:
			g.rate = g.findRate(n) // finding the limit
		case g.enabled:
			g.rate = math.Max(frozenMinRate, math.Min(g.curve(n), math.Max(g.rate, 2*measured)))
		}
		return g.state()
	}
	if order < 0 {
		// In flight at the last event (or when a limit a Memory gave was
		// frozenForgotten): the same congestion event.
		return g.state()
	}
	if g.enabled {
		switch {
		case sent == frozenNoSend && (n-g.since < int64(frozenCooldown) || g.accepted == 0), order == 0:
			if phase%2 == 1 && (sent == phase || sent == frozenNoSend && g.accepted == 0) {
				// Sent since the event and since the last halving, refused
				// before any success: the server is still refusing at the
				// new rate. The phase moves on (odd still), so that the
				// refusals of requests sent before this halving do not
				// halve again: one halving per round trip.
				if g.spent == 0 && g.finding {
					g.frozen = n
				}
				g.spent = min(g.spent+1, 16)
				if g.spent >= 2 {
					g.wary |= frozenWaryCounts // refused twice in a row: the server counts refusals
				}
				if sent != frozenNoSend {
					g.phase.Store(phase + 2)
				}
			}
			return g.state()
		}
	}
	if g.lockedOut(n, phase) {
		return g.state()
	}
	if g.congestion(n) {
		return 0, frozenForgotten, false
	}
	return g.state()
}

// lockedOut reports whether a throttle at n (Unix nanoseconds), the
// phase then, after the first success since the last event, is the
// lockout of a crossing, and if so takes it: where the server counts
// refusals (HAProxy's http_req_rate), a crossing of its limit (a probe's,
// or a hold's at a W found a little high) counts the requests it refused
// too, and its window refuses the client for up to two of its periods
// after, even at 0.99·W. Measured as an event while holding, such a
// refusal lowered W by 6 to 50%, and from each lower W a probe after 4 s
// crossed again: W spiralled down to a third of the limit in a run in
// six. So it measures nothing: W, the hold and the measurement of the
// next event stand; it halves the rate as the refusals of an event do,
// until a request succeeds. After a hold's crossing, one such episode
// only: a limit that drops on a loaded machine looks like a server that
// counts refusals (the halvings after the drop's event are refused twice
// in a row), and taking every refusal of the next 2 s for a lockout kept
// the old estimate that long (a GCRA 200 → 50 → 200 on a loaded machine,
// in fake time: 0.73-0.77 of the limit, against 0.78-0.79 with one
// episode); the next refusal measures the drop. Not after the finding of
// a first contact: its climb may end above the limit (HAProxy's first
// window lets any rate through), and what follows measures it. It
// requires g.mu held.
func (g *frozenGentle) lockedOut(n int64, phase uint32) bool {
	if g.wary&frozenWaryCounts == 0 || g.crossed == 0 || frozenNanosToSeconds(n-g.since) >= frozenLockout || g.finding {
		return false
	}
	if g.crossed == frozenCrossedHold {
		g.crossed = 0 // its one episode
	}
	g.event = phase | 1 // odd: refused, no success since
	g.phase.Store(g.event)
	g.ramp, g.frozen, g.held, g.spent = n, 0, -1, 0
	g.rate = g.curve(n)
	return true
}

// How the server was just overdrawn (frozenGentle.crossed).
const (
	frozenCrossedProbe = 1 + iota // by a probe after a hold, or by the finding's last crossing where the server is not wary
	frozenCrossedHold             // by a rate held at an estimate a little high, where the server counts refusals
)

// The reasons of frozenGentle.wary.
const (
	frozenWaryCounts = 1 << iota // the server counts refusals: refused twice in a row after an event
	frozenWaryBurst              // the server's burst is half a second of its limit or more
)

// frozenForgotten is the burst observeLocked returns when g has just frozenForgotten a
// limit a Memory gave (see congestion): the key starts over.
const frozenForgotten = -1

// congestion records a congestion event at n (Unix nanoseconds) and
// measures the limit; or, if the event shows a limit a Memory gave stale,
// forgets it, and reports that it did. It requires g.mu held.
func (g *frozenGentle) congestion(n int64) (forgot bool) {
	if g.recalled&frozenRecalledLimit != 0 {
		recalled := g.recalled
		g.recalled = 0
		if frozenNanosToSeconds(n-g.ramp) <= g.hold(n) {
			// A limit a Memory gave, refused while the rate held below it:
			// it is stale. g forgets it and starts over as a key with no
			// history does, from a first contact: measured from what was
			// accepted since, a limit would be far too low where the
			// server queues or counts in windows, and climbing from that
			// floor would meet the refusals of the stale rate's queue.
			stated := g.stated
			if recalled&frozenRecalledStated != 0 {
				stated = 0 // the Memory's, not an answer's
			}
			g.forgetLocked(n)
			g.stated = stated
			return true
		}
	}
	span := frozenNanosToSeconds(n - g.since)
	previous := g.limit
	// An event that ends the climb from a floor, or a probe (while the
	// limit is found, there is no hold), measures the limit as it stands;
	// one while the rate holds may come of a moment's trouble (a server
	// that counts refusals locks the client out for a while), and the
	// next probe tells whether the limit moved.
	settles := g.enabled && (g.floor || frozenNanosToSeconds(n-g.ramp) > g.hold(n))
	probing := settles && !g.floor && !g.finding // a probe after a hold
	measured := float64(g.accepted) / math.Max(span, 1e-3)
	switch {
	case !g.enabled && g.stated > 0:
		g.limit, g.floor = g.stated, false
	case !g.enabled:
		g.limit, g.floor = float64(g.accepted)/math.Max(span, 1), true
	case g.floor:
		// Found from a floor: what came back lately tells the limit better
		// than the whole ramp up to it: the rate of the last round of
		// successes, but no more than the successes of the last second (a
		// window that allows a burst lets a round through at any rate).
		g.limit, g.floor = max(previous, measured, min(float64(g.recent), g.lastSecond(n))), false
		g.fresh = true
		if previous > frozenBursty*g.limit {
			g.wary |= frozenWaryBurst // the floor, what came before the first refusal, is a burst of half a second's worth or more
		}
	case frozenNanosToSeconds(n-g.ramp) > g.hold(n):
		// During a probe: what was accepted since the last event counts the
		// hold too, so that a limit held far below the server's grows by
		// a little at each probe. (Taking the rate of the probe's last
		// successes when it came 10% above the estimate raised it a little
		// above HAProxy's limit now and then, from the burst of a probe:
		// HAProxy, which counts refusals, then refused all but a quarter.)
		// Of a hold longer than frozenWait, only its last frozenWait
		// seconds count: over a hold of 30 s, a probe that found the
		// limit risen would move the estimate by too little to be seen.
		g.limit = max(previous, g.probed(n, span, measured))
		switch {
		case g.limit > 1.05*previous:
			g.fresh = true
		case !g.finding: // after a hold, where it was: confirmed
			g.fresh = false
		}
	default:
		// While holding: what was accepted since the last event, a
		// quarter of the estimate at least (a cut that was not enough
		// shows the limit lower, not how much).
		least := previous / 4
		aftershock := g.crossed != 0 && g.accepted < frozenRound
		if aftershock {
			// Refused right after a probe's crossing, before a round of
			// requests had passed (or after the finding's last crossing,
			// where the server is not wary: where its burst is much of
			// its limit, the limit is often found too high, and such a
			// refusal is one more measurement of it): the server was
			// overdrawn by the crossing, and a client held at 0.99·W
			// meets what is left of it on the jitter of its requests. A
			// handful of requests over a fraction of a second measure
			// nothing (on a loaded machine they measured 0.4 to 0.7 of
			// the limit, and probes then took minutes to find it again):
			// the estimate falls by a share at most, and the next probe,
			// soon, verifies it (see hold).
			least = frozenAfter * previous
		}
		g.limit = math.Min(previous, math.Max(measured, least))
		if (!g.fresh || span >= frozenShortWait) && g.limit < frozenDrop*previous {
			// A limit that stood moves (a drop, not a limit found too
			// high): probe again soon, for it may come back.
			g.dropped = uint32(n / int64(time.Second))
		}
		g.fresh = aftershock
	}
	if g.stated > 0 {
		g.limit = math.Min(g.limit, g.stated)
	}
	g.limit = math.Max(g.limit, frozenMinRate)
	if settles {
		g.settled = float32(g.limit)
	}
	// The server was just overdrawn: by a probe; by the finding's last
	// crossing, where it is not wary; or, where it counts refusals, by a
	// rate held at an estimate a little high (its lockout follows, see
	// lockedOut).
	switch {
	case probing || settles && g.wary == 0:
		g.crossed = frozenCrossedProbe
	case !settles && g.wary&frozenWaryCounts != 0:
		g.crossed = frozenCrossedHold
	default:
		g.crossed = 0
	}
	if !g.enabled || math.Abs(g.limit-previous) > 0.05*previous {
		g.found = frozenWholeSeconds(n) // moved: found anew (a probe that confirms W keeps found)
	}
	g.finding = !g.enabled || g.floor || g.limit > 1.05*previous
	g.enabled = true
	g.untimed.Store(false)
	g.event = g.phase.Load() | 1 // odd: an event, no success since
	g.phase.Store(g.event)
	g.since, g.ramp, g.frozen, g.accepted, g.held, g.spent = n, n, 0, 0, -1, 0
	g.recent, g.sampled = 0, 0 // a round measures what came after the event
	g.rate = g.curve(n)
	return false
}

// probed returns the limit a probe measured at n (Unix nanoseconds), span
// seconds after the last event: measured, what was accepted since the last
// event over span, when the hold before the probe lasted frozenWait or
// less; otherwise what was accepted in the probe and the last frozenWait
// seconds of the hold (the hold's share of them, for its rate stood
// still), over that time. It requires g.mu held.
func (g *frozenGentle) probed(n int64, span, measured float64) float64 {
	probe := min(max(frozenNanosToSeconds(n-g.ramp)-g.hold(n), 0), span)
	holding := span - probe // seconds
	window := frozenWait
	if g.verifies() {
		window = frozenVerify
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

// verifies reports whether the next probe verifies a limit just found
// (by finding it, or after an aftershock, see congestion): it comes after
// a hold of frozenVerify, and measures over the probe and the last
// frozenVerify of the hold. A limit found while some callers were held
// (a refusal's Retry-After), or measured on a loaded machine, is often
// found low, and a probe after a hold of 4 seconds or more moves the
// estimate by a percent or two, so that a limit found at 0.8 of the
// server's took a minute to find; the probe that verifies it moves it
// most of the way. It costs a refused request or two once, where a limit
// is found, not every hold. Two servers are not verified: one that counts
// refusals (HAProxy), which locks out a client that probes again so soon
// after crossing its limit; and one whose burst is half a second of its
// limit or more (10 at 10 a second), for a probe after a second's hold
// measures its burst more than its limit. It requires g.mu held.
func (g *frozenGentle) verifies() bool { return g.fresh && !g.finding && g.wary == 0 }

// forgetLocked makes g, at n (Unix nanoseconds), a frozenGentle with no
// history, as init does, but for what it knows of round trips. It
// requires g.mu held.
func (g *frozenGentle) forgetLocked(n int64) {
	g.since, g.ramp, g.last, g.frozen, g.round = n, n, n, 0, 0
	g.rate, g.limit, g.stated = 0, 0, 0
	g.enabled, g.floor, g.finding, g.fresh, g.queued, g.crossed = false, false, false, false, false, 0
	g.accepted, g.held, g.spent, g.dropped, g.recent, g.settled, g.sampled, g.wary = 0, -1, 0, 0, 0, 0, 0, 0
	g.second, g.least, g.found = [5]uint16{}, 0, frozenWholeSeconds(n)
	g.event = g.phase.Load() | 1
	g.phase.Store(g.event + 1)
}

// hold returns how long the rate holds before a probe, in seconds, at n
// (Unix nanoseconds): none while finding the limit; after a drop of a
// limit that stood, 15% of the time since the drop, three quarters of a
// second at least, so that a limit that comes back soon is found soon, and
// one that stays low costs fewer probes as time goes by (the loss to a
// limit that came back is about 15% of the time it stayed low; the cost, a
// refused probe every hold); otherwise as long as the limit had stood when
// the hold began (found when the last event did, frozenWait at least,
// frozenMaxWait at most), so that a limit that probes keep confirming is
// probed ever less often: its probes cost a refused request or two every
// 30 seconds, not every 4, and a limit that rose after standing a while
// is found within about as long as it stood, 30 seconds at most. It
// requires g.mu held.
func (g *frozenGentle) hold(n int64) float64 {
	switch {
	case g.finding:
		return 0 // probe on
	case g.verifies():
		return frozenVerify
	case g.dropped != 0:
		if since := frozenNanosToSeconds(n) - float64(g.dropped); since < frozenWait/frozenShorten {
			return max(frozenShortWait, frozenShorten*since)
		}
		g.dropped = 0
	}
	return min(max(frozenNanosToSeconds(g.ramp)-float64(g.found), frozenWait), frozenMaxWait)
}

// findDouble returns the seconds in which the rate doubles while the limit
// is being found: frozenFindRTTs of the least round trip, so that a rate
// cut far below the limit comes back in round trips, but never slower
// than a quarter of frozenDouble (when round trips are long, or unknown).
// It requires g.mu held.
func (g *frozenGentle) findDouble() float64 {
	base := g.baseLocked()
	if base == 0 || !g.floor {
		return frozenDouble / 4
	}
	return min(max(frozenFindRTTs*float64(base)/1e6, frozenDouble/16), frozenDouble/4)
}

// rising reports whether the rate is above its hold at n (Unix
// nanoseconds): probing, or finding the limit. It requires g.mu held.
func (g *frozenGentle) rising(n int64) bool {
	return g.finding || frozenNanosToSeconds(n-g.ramp) > g.hold(n)
}

// sample takes the round trip rtt of a success that came at n (Unix
// nanoseconds). Every frozenRound successes it compares the least round
// trip of the round with the base, the least of the last one to two
// epochs of frozenBaseEpoch seconds: two rounds in a row that took
// frozenQueued requests' worth longer at the rate (at least
// frozenMinQueue, and the base itself) show the server queueing the
// requests rather than refusing them. Then it also returns the rate at
// which the round's successes came: the rate the server serves its queue
// at. The least of a round, not each round trip, is compared, so that a
// new connection or a pause of the client's is not taken for a queue; and
// a slow endpoint is slow from its first round trip, which makes it the
// base. It requires
// g.mu held.
func (g *frozenGentle) sample(n int64, rtt time.Duration) (delivered float64, queueing bool) {
	if rtt <= 0 {
		return 0, false
	}
	us := uint32(min(max(rtt/time.Microsecond, 1), math.MaxUint32))
	if sec := uint32(n / int64(time.Second)); sec-g.epoch >= frozenBaseEpoch {
		g.base[0], g.base[1], g.epoch = g.base[1], 0, sec
	}
	if g.base[1] == 0 || us < g.base[1] {
		g.base[1] = us
	}
	if g.sampled == 0 || us < g.least {
		g.least = us
	}
	if g.sampled == 0 {
		g.round = n
	}
	if g.sampled++; g.sampled < frozenRound {
		return 0, false
	}
	g.sampled = 0
	if !g.enabled {
		g.untimed.Store(true) // a base: enough until a throttle
	}
	base := g.baseLocked()
	span := frozenNanosToSeconds(n - g.round)
	if span <= 0 {
		return 0, false
	}
	delivered = float64(frozenRound-1) / span
	g.recent = float32(delivered)
	added := float64(g.least) - float64(base)
	threshold := max(frozenMinQueue, float64(base), frozenQueued/math.Max(g.rate, frozenMinRate)*1e6)
	// Two rounds in a row: a stall of the client's, or a slow moment of
	// the server's, seldom lasts sixteen round trips.
	before := g.queued
	g.queued = added > threshold
	return delivered, before && g.queued
}

// count counts a success at n (Unix nanoseconds) in its quarter second.
// It requires g.mu held.
func (g *frozenGentle) count(n int64) {
	g.turn(n)
	if c := &g.second[g.slot%5]; *c < math.MaxUint16 {
		*c++
	}
}

// turn moves the quarter seconds on to the one n (Unix nanoseconds) falls
// in, forgetting those more than a second before it. It requires g.mu
// held.
func (g *frozenGentle) turn(n int64) {
	slot := uint32(n / int64(time.Second/4))
	if d := slot - g.slot; d != 0 {
		for i := range min(d, 5) {
			g.second[(g.slot+1+i)%5] = 0
		}
		g.slot = slot
	}
}

// demand returns the rate of the last successes at n (Unix nanoseconds):
// that of the last second (lastSecond), or of the last whole quarter
// second and the one in progress, whichever is more, so that a rate that
// rises fast is seen soon. It requires g.mu held.
func (g *frozenGentle) demand(n int64) float64 {
	return max(g.successRate(n, 5), g.successRate(n, 2))
}

// lastSecond returns the rate of successes over the last second and a
// bit, up to n (Unix nanoseconds): the last four whole quarter seconds
// and the one in progress. It requires g.mu held.
func (g *frozenGentle) lastSecond(n int64) float64 { return g.successRate(n, 5) }

// successRate returns the rate of successes over the last k quarter
// seconds up to n (Unix nanoseconds), k at most 5: the k−1 whole ones
// before the one in progress, and that one. It requires g.mu held.
func (g *frozenGentle) successRate(n int64, k uint32) float64 {
	g.turn(n)
	sum := 0
	for i := range k {
		sum += int(g.second[(g.slot+5-i)%5])
	}
	return float64(sum) / (float64(k-1)/4 + frozenNanosToSeconds(n%int64(time.Second/4)))
}

// queueing records that the server queues at n (Unix nanoseconds), serving
// its queue at delivered requests per second, while the rate rises: a
// congestion event that no refusal showed. The rate stops rising and holds
// at 0.99 of the estimate, which becomes delivered (half to twice the
// last estimate, or anything above a floor). It requires g.mu held.
func (g *frozenGentle) queueing(n int64, delivered float64) {
	previous := g.limit
	if g.floor {
		g.limit = delivered
	} else {
		g.limit = min(max(delivered, previous/2), 2*previous)
	}
	if g.stated > 0 {
		g.limit = math.Min(g.limit, g.stated)
	}
	g.limit = max(g.limit, frozenMinRate)
	g.floor, g.crossed = false, 0
	g.finding = g.limit > 1.05*previous
	if math.Abs(g.limit-previous) > 0.05*previous {
		g.found = frozenWholeSeconds(n)
	}
	g.event = g.phase.Load() | 1
	g.phase.Store(g.event)
	g.since, g.ramp, g.frozen, g.accepted, g.held, g.spent = n, n, 0, 0, -1, 0
	g.recent, g.sampled = 0, 0 // a round measures what came after the event
	g.rate = g.curve(n)
}

// Grown returns the rate at now while the limit is being found, when the
// rate doubles every quarter of frozenDouble however few requests come
// back, up to 4 times the rate of the last successes (see findRate), so
// that a key whose rate starts from a low floor sends more as the curve
// rises, not only when its few requests come back; and false otherwise.
func (g *frozenGentle) Grown(now time.Time) (float64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.enabled || !g.finding {
		return 0, false
	}
	if r := g.findRate(now.UnixNano()); r > g.rate {
		g.rate = r
	}
	rate, _, _ := g.state()
	return rate, true
}

// Timed reports whether the round trips of attempts matter to g: until
// a first round has given it a base, and once a throttle has come.
// (While a key's first contact is paced they matter too, and the
// Transport times them then.) Between the two, a key no server has
// throttled does not read the clock for them: that read would be a third
// of the Transport's cost on the path of a call that needs no wait.
func (g *frozenGentle) Timed() bool { return !g.untimed.Load() }

// StartRate returns the rate at which a key with no history is paced at
// now, its first contact, with the burst its bucket holds (frozenInitial),
// and true; false once it is over. A key's first
// contact lasts until its server throttles it, states a limit, or the
// rate outgrows any demand: frozenInitial requests go at once, then the
// rate doubles every round (the least round trip, at least
// frozenMinRound), as TCP's slow start doubles its window, so that a
// server whose burst is small refuses the few requests of one round, not
// the whole crowd of callers, and one that states its quota in its first
// answers paces the key from the next request.
func (g *frozenGentle) StartRate(now time.Time) (float64, int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.startRateLocked(now.UnixNano())
	return r, frozenInitial, ok
}

// startRateLocked is StartRate at n (Unix nanoseconds). It requires g.mu
// held.
func (g *frozenGentle) startRateLocked(n int64) (float64, bool) {
	if g.enabled || g.stated > 0 {
		return 0, false
	}
	round := g.roundLocked()
	t := frozenNanosToSeconds(n-g.ramp) / round
	if t > frozenRounds {
		return 0, false
	}
	return frozenInitial / round * math.Exp2(max(t, 0)), true
}

// roundLocked returns a round of a first contact, in seconds: the least
// round trip, frozenMinRound at least. It requires g.mu held.
func (g *frozenGentle) roundLocked() float64 {
	if base := g.baseLocked(); base > 0 {
		return max(frozenMinRound, float64(base)/1e6)
	}
	return frozenMinRound
}

// baseLocked returns the least round trip of the last one to two epochs,
// in microseconds; 0 if none. It requires g.mu held.
func (g *frozenGentle) baseLocked() uint32 {
	base := g.base[1]
	if b := g.base[0]; b != 0 && (base == 0 || b < base) {
		base = b
	}
	return base
}

// ServerLimit returns the server's limit as far as g knows it: the limit
// it states, or the estimate once a throttle has measured it; 0 while it
// is unknown (no throttle yet, or only a floor).
func (g *frozenGentle) ServerLimit() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.stated > 0:
		return g.stated
	case g.enabled && !g.floor:
		return g.limit
	}
	return 0
}

// curve returns the rate at n (Unix nanoseconds): 0.99·W held, then a probe
// that doubles it every frozenDouble seconds up to 1.1·W; past that, with
// no throttle, the limit has risen, and the probe doubles every quarter of
// frozenDouble, as while finding the limit. It is never above a stated
// limit. It requires g.mu held.
func (g *frozenGentle) curve(n int64) float64 {
	rate := frozenHold * g.limit
	t := frozenNanosToSeconds(n-g.ramp) - g.hold(n)
	switch {
	case t <= 0:
	case g.finding && g.frozen != 0:
		rate *= math.Exp2(max(frozenNanosToSeconds(g.frozen-g.ramp), 0) / g.findDouble())
	case g.finding:
		rate *= math.Exp2(t / g.findDouble())
	default:
		rate *= math.Exp2(t / frozenDouble)
		if risen := frozenRisen * g.limit; rate > risen {
			rate = risen * math.Exp2(4*math.Log2(rate/risen))
		}
	}
	if g.stated > 0 {
		rate = math.Min(rate, g.stated)
	}
	// Doubling four times a second, a probe that finds no limit would
	// overflow to +Inf within minutes.
	return math.Min(rate, frozenMaxRate)
}

// findRate returns the rate at n (Unix nanoseconds) while the limit is
// being found: the curve, however little was sent, up to frozenDemand
// times the rate of the last successes (see demand), and no lower than
// twice 0.99·W and a first contact's first round (frozenInitial requests a
// round). A curve with no one sending would otherwise rise for as long as
// the callers are held (a refused call waits out its Retry-After: a key
// of a few callers can have them all held), and the callers coming back
// would all go at once, into the same refusal. It requires g.mu held.
func (g *frozenGentle) findRate(n int64) float64 {
	return min(g.curve(n), max(2*frozenHold*g.limit, frozenDemand*g.demand(n), frozenInitial/g.roundLocked()))
}

// state returns what observeLocked returns. It requires g.mu held.
func (g *frozenGentle) state() (float64, int, bool) {
	least := frozenMinRate
	if g.spent > 0 && g.finding {
		// Halving while the limit is found from a floor: still a request
		// every four doublings of the finding, so that the server is asked
		// again within round trips, not seconds.
		least = max(least, 1/(4*g.findDouble()))
	}
	return math.Max(math.Ldexp(g.rate, -int(g.spent)), least), 1, g.enabled
}

// thaw ends at n a time of refusals that began while finding the limit:
// the curve, which stood still meanwhile, goes on from where it stood. It
// requires g.mu held.
func (g *frozenGentle) thaw(n int64) {
	if g.frozen == 0 {
		return
	}
	g.ramp = min(g.ramp+max(n-g.frozen, 0), n)
	g.frozen = 0
}

// Rate returns the rate to send at, in requests per second.
func (g *frozenGentle) Rate() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	rate, _, _ := g.state()
	return rate
}

// Limit returns W, the estimate of the server's limit, in requests per
// second: 0 until the first throttle.
func (g *frozenGentle) Limit() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

// Enabled reports whether the rate applies: true from the first throttle
// on.
func (g *frozenGentle) Enabled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.enabled
}

// Estimate returns W, as Limit does.
func (g *frozenGentle) Estimate() float64 { return g.Limit() }

func frozenNanosToSeconds(n int64) float64 { return float64(n) / float64(time.Second) }

// The bits of frozenGentle.recalled.
const (
	frozenRecalledLimit  = 1 << iota // the estimate is a memory's, and no throttle has come since
	frozenRecalledStated             // the stated limit is a memory's, and no answer has stated one since
)

// Recall starts g at now from a limit a memory kept: as after a congestion
// event that measured it, the rate holds just below it, as long as it had
// stood (see hold), then probes (never above a stated limit); a throttle
// while it holds shows it stale (see congestion). It returns the rate to
// start at.
func (g *frozenGentle) Recall(now time.Time, r Recalled) (float64, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := now.UnixNano()
	g.limit, g.floor, g.finding, g.fresh, g.crossed, g.enabled = r.Limit, false, false, false, 0, true
	g.settled, g.recalled = float32(r.Limit), frozenRecalledLimit
	if r.Stated {
		g.stated = r.Limit
		g.recalled |= frozenRecalledStated
	}
	g.untimed.Store(false)
	// An event, and a success since: the first throttle is an event of
	// its own, which measures the limit again.
	g.event = g.phase.Load() | 1
	g.phase.Store(g.event + 1)
	g.since, g.ramp = n, n
	g.found = frozenWholeSeconds(n - int64(r.Stood))
	g.rate = g.curve(n)
	rate, _, _ := g.state()
	return rate, true
}

// Known returns the server's limit as g knows it at now, worth
// remembering, and whether the server stated it: the limit the server
// states, or the estimate as the last event that probed or found it
// measured it; 0 if neither. (An event while the rate holds may come of a
// moment's trouble, and the next probe says whether the limit moved: a
// process remembered at that moment would start too low.) A measured
// limit comes with how long it has stood, in whole seconds.
func (g *frozenGentle) Known(now time.Time) Known {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stated > 0 {
		return Known{Limit: g.stated, Stated: true}
	}
	var stood uint32
	if s := frozenWholeSeconds(now.UnixNano()); s > g.found && math.Abs(g.limit-float64(g.settled)) <= 0.05*float64(g.settled) {
		stood = s - g.found // (an event while the rate held moved the estimate since: not this one's)
	}
	return Known{Limit: float64(g.settled), Stated: false, Stood: stood}
}
