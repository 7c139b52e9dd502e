package polite

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Constants of Gentle, each explained in its documentation.
const (
	gentleHold     = 0.99        // the share of the estimated limit the rate holds at
	gentleWait     = 4.0         // seconds held before a probe
	gentleDouble   = 1.0         // seconds in which a probe doubles the rate; a quarter of that while finding the limit
	gentleRisen    = 1.1         // a probe this far above the estimate without a throttle has found the limit risen
	gentleCooldown = time.Second // throttles this soon after an event belong to it, when the sending is unknown
	gentleMinRate  = 0.5         // requests per second
	gentleMaxRate  = 1e9         // requests per second: a probe that long unanswered by a throttle grows no further
)

// Gentle is polite's default send-rate controller (AdaptiveDefault). Like
// the AWS SDKs' CUBIC controller ([Cubic]) it limits nothing until the
// first throttle, then sets a rate and grows it back; unlike it, it
// measures the server's limit, holds just below it, and probes above it
// now and then, so that it wastes little of the server's quota. It is
// usable outside HTTP and safe for concurrent use. Create it with
// [NewGentle].
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
//     in flight at the event that succeed.
//
// When the server states its limit ([Gentle.UpdateStated]: in headers,
// with its window), that is the estimate from the first throttle on,
// instead of a floor, and a ceiling: Gentle never probes above it.
//
// # The rate
//
// After an event the rate holds at 0.99·W. After 4 seconds without a
// throttle it probes: it doubles every second until the next event, which
// measures the limit again; a probe that gets 10% above W without a
// throttle has found the limit risen, and doubles every quarter of a
// second from there. While the limit is being found (from a floor, and
// after each event that found it more than 5% higher) there is no hold,
// and the rate doubles every quarter of a second. A limit that rose is thus
// found within about 5 seconds, and one that did not costs about one
// refused request every 4 seconds. The curve is scaled to W, so it behaves
// alike at 1 and at 10,000 requests per second (Cubic's constant is
// absolute: slow at high rates, abrupt at low ones).
//
// A request sent after an event and refused before any succeeded shows the
// server still refusing at the new rate (a spent window, a limiter that
// counts refusals): such a refusal halves the rate, once per round trip
// (the refusals of requests sent before a halving do not halve again),
// until a request succeeds. A 5xx that is no throttle, or a transport
// error, says nothing of the limit: the rate neither grows nor falls, and
// the time an outage lasts is left out of the next measurement. As Cubic,
// once the limit is found Gentle never grows past twice the measured rate
// of responses (a client that does not use its rate does not inflate it),
// and it never goes below 0.5 requests per second (nor above a billion, so
// that a probe no throttle answers never overflows). Its bucket holds a
// single request, so that it paces evenly: a server whose own bucket holds
// little sees no burst from it.
type Gentle struct {
	// phase counts congestion events and the first success after each,
	// so that an attempt can tell whether it was sent after both (see
	// observeSent): it is odd from an event to the first success after it,
	// and moves on by 2 at each halving in between.
	phase atomic.Uint32

	// mu guards the fields below. Instants are Unix nanoseconds, to keep a
	// Gentle small: a crawler holds one per host.
	mu        sync.Mutex
	since     int64   // the last congestion event, or the first attempt before one (moved on by outages)
	last      int64   // the last outcome
	rate      float64 // the rate to send at, before halving
	limit     float64 // W: the estimate of the server's limit
	stated    float64 // the limit the server states; 0 if none
	event     uint32  // the phase right after the last event
	accepted  int32   // successes of requests sent since the last event
	spent     int16   // refusals of requests sent since the last event, before any success
	enabled   bool    // an event has come
	floor     bool    // W is only a floor
	finding   bool    // the last event found W more than 5% above the one before: the limit is still being found
	responses meter   // all responses
}

// NewGentle returns a Gentle created at now, not enabled.
func NewGentle(now time.Time) *Gentle {
	g := new(Gentle)
	g.init(now)
	return g
}

// init makes g a Gentle created at now, not enabled.
func (g *Gentle) init(now time.Time) {
	g.responses, g.since, g.last = newMeter(now), now.UnixNano(), now.UnixNano()
}

// Update feeds the outcome of one attempt that ended at now: throttled
// reports whether the server throttled it.
func (g *Gentle) Update(now time.Time, throttled bool) { g.observe(now, throttled, 0) }

// UpdateStated is Update for a server that states its limit: stated is its
// quota over its window, in requests per second (0 if unknown). Gentle
// takes it as the limit from the first throttle on, rather than measuring
// a floor, and never probes above it.
func (g *Gentle) UpdateStated(now time.Time, throttled bool, stated float64) {
	g.observe(now, throttled, stated)
}

// sending returns what an attempt sent now passes to observeSent.
func (g *Gentle) sending() uint32 { return g.phase.Load() }

func (g *Gentle) observe(now time.Time, throttled bool, stated float64) (float64, int, bool) {
	o := outcomeOK
	if throttled {
		o = outcomeThrottled
	}
	return g.observeSent(now, o, stated, noSend)
}

// noSend stands for an attempt whose sending is unknown: a throttle within
// gentleCooldown of the last event, or before a success since, belongs to
// it.
const noSend = math.MaxUint32

// observeSent is observe for an attempt that was sent when sending
// returned sent.
func (g *Gentle) observeSent(now time.Time, o outcome, stated float64, sent uint32) (float64, int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	measured := g.responses.add(now)
	n := now.UnixNano()
	previous := g.last
	g.last = n
	phase := g.phase.Load()
	// Where the attempt was sent: before the last event (in flight when
	// it came), after it but before its first success, or after both.
	order := 1
	if sent != noSend {
		switch d := int32(sent - g.event); {
		case d < 0:
			order = -1
		case sent%2 == 1:
			order = 0 // odd: no success had come since the event
		}
	}
	if stated > 0 {
		g.stated = stated
		if g.enabled && (g.floor || g.limit > stated) {
			g.limit, g.floor = stated, false
		}
	}
	switch o {
	case outcomeFailed:
		// An outage says nothing of the limit: the rate neither grows
		// nor falls, and the time it lasts is left out of the next
		// measurement.
		g.since = min(g.since+max(n-previous, 0), n)
		return g.state()
	case outcomeOK:
		if phase%2 == 1 && order >= 0 {
			g.phase.Store(phase + 1) // the first success of a request sent since the event
		}
		switch {
		case order >= 0:
			g.accepted = min(g.accepted+1, math.MaxInt32-1)
		case g.floor:
			g.limit++ // in flight at the first event: part of the floor, over a second
		}
		g.spent = 0
		switch {
		case g.enabled && g.finding:
			g.rate = g.curve(n) // finding the limit: the curve, however little was sent
		case g.enabled:
			g.rate = math.Max(gentleMinRate, math.Min(g.curve(n), math.Max(g.rate, 2*measured)))
		}
		return g.state()
	}
	if g.enabled {
		switch {
		case order < 0:
			return g.state() // the same congestion event
		case sent == noSend && (n-g.since < int64(gentleCooldown) || g.accepted == 0), order == 0:
			if g.accepted == 0 && phase%2 == 1 && (sent == noSend || sent == phase) {
				// Sent since the event and since the last halving, refused
				// before any success: the server is still refusing at the
				// new rate. The phase moves on (odd still), so that the
				// refusals of requests sent before this halving do not
				// halve again: one halving per round trip.
				g.spent = min(g.spent+1, 16)
				if sent != noSend {
					g.phase.Store(phase + 2)
				}
			}
			return g.state()
		}
	}
	g.congestion(n)
	return g.state()
}

// congestion records a congestion event at n (Unix nanoseconds) and
// measures the limit. It requires g.mu held.
func (g *Gentle) congestion(n int64) {
	span := nanosToSeconds(n - g.since)
	previous := g.limit
	measured := float64(g.accepted) / math.Max(span, 1e-3)
	switch {
	case !g.enabled && g.stated > 0:
		g.limit, g.floor = g.stated, false
	case !g.enabled:
		g.limit, g.floor = float64(g.accepted)/math.Max(span, 1), true
	case g.floor || span > g.hold():
		g.limit, g.floor = math.Max(previous, measured), false // during a probe
	default:
		g.limit = math.Min(previous, math.Max(measured, previous/4)) // while holding
	}
	if g.stated > 0 {
		g.limit = math.Min(g.limit, g.stated)
	}
	g.limit = math.Max(g.limit, gentleMinRate)
	g.finding = !g.enabled || g.floor || g.limit > 1.05*previous
	g.enabled = true
	g.event = g.phase.Load() | 1 // odd: an event, no success since
	g.phase.Store(g.event)
	g.since, g.accepted, g.spent = n, 0, 0
	g.rate = g.curve(n)
}

// hold returns how long the rate holds before a probe, in seconds. It
// requires g.mu held.
func (g *Gentle) hold() float64 {
	if g.finding {
		return 0 // probe on
	}
	return gentleWait
}

// curve returns the rate at n (Unix nanoseconds): 0.99·W held, then a probe
// that doubles it every gentleDouble seconds up to 1.1·W; past that, with
// no throttle, the limit has risen, and the probe doubles every quarter of
// gentleDouble, as while finding the limit. It is never above a stated
// limit. It requires g.mu held.
func (g *Gentle) curve(n int64) float64 {
	rate := gentleHold * g.limit
	t := nanosToSeconds(n-g.since) - g.hold()
	switch {
	case t <= 0:
	case g.finding:
		rate *= math.Exp2(4 * t / gentleDouble)
	default:
		rate *= math.Exp2(t / gentleDouble)
		if risen := gentleRisen * g.limit; rate > risen {
			rate = risen * math.Exp2(4*math.Log2(rate/risen))
		}
	}
	if g.stated > 0 {
		rate = math.Min(rate, g.stated)
	}
	// Doubling four times a second, a probe that finds no limit would
	// overflow to +Inf within minutes.
	return math.Min(rate, gentleMaxRate)
}

// state returns what observe returns. It requires g.mu held.
func (g *Gentle) state() (float64, int, bool) {
	return math.Max(math.Ldexp(g.rate, -int(g.spent)), gentleMinRate), 1, g.enabled
}

// Rate returns the rate to send at, in requests per second.
func (g *Gentle) Rate() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	rate, _, _ := g.state()
	return rate
}

// Limit returns the estimate of the server's limit, in requests per
// second: 0 until the first throttle.
func (g *Gentle) Limit() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.limit
}

// Enabled reports whether the rate applies: true from the first throttle
// on.
func (g *Gentle) Enabled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.enabled
}

func nanosToSeconds(n int64) float64 { return float64(n) / float64(time.Second) }
