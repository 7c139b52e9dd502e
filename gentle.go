package polite

import (
	"math"
	"sync"
	"time"
)

// Constants of Gentle. Rates are fractions of the estimated limit unless
// said otherwise; times are seconds since the last congestion event.
const (
	gentleBeta     = 0.9         // the rate right after an event
	gentleFall     = 0.25        // the rate right after an event that shows the limit fell
	gentleHold     = 0.98        // the rate held below the limit
	gentleClimb    = 2.0         // seconds to climb from the decrease to the hold
	gentleWait     = 2.0         // seconds held before a probe, at first
	gentlePatience = 3           // the hold doubles up to this many times, and halves down to -1
	gentleCreep    = 0.06        // the probe's first phase grows the hold by this fraction a second
	gentleCreepFor = 2.0         // seconds of the probe's first phase
	gentleProbe    = 1.0         // then the probe doubles the rate every this many seconds
	gentleSoon     = 3.0         // an event this soon after the last one shows the client stayed above the limit
	gentleCooldown = time.Second // throttles this soon after an event belong to it
	gentleDead     = 5           // refusals in a row, without a pause, that show a spent window
	gentleTrickle  = 0.1         // the rate while a window is spent, as a fraction of the rate
	gentleMinRate  = 0.5         // requests per second
)

// Gentle is polite's default send-rate controller (AdaptiveDefault). Like
// the AWS SDKs' CUBIC controller ([Cubic]) it limits nothing until the
// first throttle, then cuts the rate and grows it back; unlike it, it
// estimates the server's limit, holds just below it, and probes above it
// on a schedule, so that it wastes little of the server's quota. It is
// usable outside HTTP and safe for concurrent use. Create it with
// [NewGentle].
//
// # Estimating the limit
//
// A congestion event is the first throttle more than a second after the
// last event; throttles within that second belong to it, so that a burst
// of 429s from one overload counts once (Cubic cuts the rate at every
// throttle). At an event, Gentle estimates the limit W from what the
// server accepted, not from what the client sent:
//
//   - At the first throttle: the successful responses of the last second.
//     For a token bucket, a fixed or sliding window and a leaky bucket
//     alike, that is what the server lets through in a second. If Gentle is
//     younger than a second, it is only a floor (the server may let that
//     much through every fraction of a second): Gentle starts there, in the
//     probe's fast phase, and doubles the rate every second until the next
//     throttle. (Cubic uses the rate of all responses, which is 0 when the
//     very first response is a throttle, and then sends at 0.5 requests per
//     second.) If nothing has succeeded yet, the limit is unknown: Gentle
//     watches for a second, as the server's pauses allow, and estimates the
//     limit at the next throttle from what the server accepted meanwhile;
//     if nothing ever succeeds, it starts at 0.5 requests per second and
//     doubles the rate every second until the next throttle.
//   - Soon after the last event (within 3 seconds), the client stayed above
//     the limit: if the server paused the key at the last event, what it
//     accepted in between, pause included, is its limit if its bucket holds
//     a pause's worth; if it took all that in a burst as the pause ended
//     (within the last eighth of the time), it showed only what its bucket
//     holds, a floor, and Gentle probes from there as above. If it refused
//     without a pause, as a spent window does, it accepted its limit in the
//     last second.
//   - While holding a rate that held before: the limit fell, by an unknown
//     amount. Gentle drops to a quarter of the rate and climbs back; if the
//     limit fell far, the climb meets it soon and that event measures it.
//   - While probing: the limit is near the rate of a second or two before
//     (servers throttle with a lag), or, in the probe's fast phase, at most
//     what the server accepted in the last second. The hold before the
//     probe still holds, so W never falls below it (a probe's overshoot is
//     not a fall of the limit).
//
// # The rate
//
// After an event the rate drops to 0.9·W (cuts of 0.7 compound in Cubic),
// climbs back to 0.98·W in 2 seconds, holds there, then probes: it creeps
// up 6% a second for 2 seconds, then doubles every second until the next
// throttle. The hold lasts 2 seconds at first. A probe that finds nothing
// new but costs a pause (the server asked for one) doubles it, up to 16
// seconds: a server that pauses its clients may not save what they did not
// send meanwhile (a sliding window, a token bucket with a small burst), and
// then each pause costs its length in throughput. A probe that costs no
// pause halves it, down to 1 second; a probe that finds the limit risen
// sets it back to 2 seconds; a fall of the limit makes it at least 4
// seconds (a limit seldom rises again at once). A limit that rose is thus
// found within 7 to 22 seconds of the last event, and one that did not
// costs one small overshoot every 5 to 20 seconds. The curve is scaled to
// W, so it behaves alike at 1 and at 10,000 requests per second (Cubic's
// constant is absolute: slow at high rates, abrupt at low ones).
//
// When the server refuses 5 requests in a row without asking for a pause,
// its window is spent: Gentle sends a trickle (a tenth of the rate) until a
// request succeeds again, instead of spending the rest of the window on
// refusals. As Cubic, Gentle never grows past twice the measured rate of
// responses (a client that does not use its rate does not inflate it), and
// never goes below 0.5 requests per second. Its bucket holds a single
// request, so that it paces evenly: a server whose own bucket holds little
// (nginx's limit_req without a burst refuses any request that comes early)
// sees no burst from it, not even as a pause ends.
type Gentle struct {
	// mu guards the fields below. Instants are Unix nanoseconds, to keep a
	// Gentle small: a crawler holds one per host.
	mu        sync.Mutex
	created   int64
	event     int64   // the last congestion event
	watching  int64   // throttled before anything succeeded, at this instant; 0 if not
	rate      float64 // the rate to send at
	limit     float64 // W: the estimated limit of the server
	from      float64 // the rate right after the last event
	held      float64 // a rate that held, below which W does not fall; 0 if the limit fell
	accepted  int32   // successful responses since the last event
	pausedFor int32   // milliseconds of the longest pause the server asked for at or since the last event
	refused   int16   // throttles since the last success, up to 32767
	enabled   bool
	probed    bool   // the last event ended a probe
	fast      bool   // and came in its fast phase, after the creep held
	skip      bool   // the curve since the last event begins at the probe's fast phase
	patience  int8   // the hold before a probe is gentleWait·2^patience
	recent    window // successful responses of the last second
	responses meter  // all responses
}

// NewGentle returns a Gentle created at now, not enabled.
func NewGentle(now time.Time) *Gentle {
	g := new(Gentle)
	g.init(now)
	return g
}

// init makes g a Gentle created at now, not enabled.
func (g *Gentle) init(now time.Time) {
	n := now.UnixNano()
	g.responses, g.event, g.created = newMeter(now), n, n
}

// Update feeds the outcome of one attempt that ended at now: throttled
// reports whether the server throttled it.
func (g *Gentle) Update(now time.Time, throttled bool) { g.observe(now, throttled, 0) }

// UpdateThrottled feeds an attempt that ended at now and that the server
// throttled asking for a pause of retryAfter (Retry-After). The pause
// tells Gentle how to read what follows: a server that pauses its clients
// saves its capacity meanwhile.
func (g *Gentle) UpdateThrottled(now time.Time, retryAfter time.Duration) {
	g.observe(now, true, retryAfter)
}

func (g *Gentle) observe(now time.Time, throttled bool, pause time.Duration) (float64, int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	measured := g.responses.add(now)
	if !throttled {
		g.accepted++
		g.refused = 0
		g.recent.add(now.UnixNano())
		if g.enabled {
			g.rate = math.Max(gentleMinRate, math.Min(g.curve(now), math.Max(g.rate, 2*measured)))
		}
		return g.state()
	}
	g.refused = min(g.refused+1, math.MaxInt16)
	g.pausedFor = max(g.pausedFor, millis32(pause))
	n := now.UnixNano()
	if g.enabled && n-g.event < int64(gentleCooldown) {
		return g.state() // the same congestion event
	}
	since := g.phase(n)
	if !g.enabled && (g.watching == 0 && g.recent.sum(n) == 0 || n-g.watching < int64(gentleCooldown)) {
		// Throttled before anything succeeded: the limit is unknown. Watch
		// for a second, as the server's pauses allow, and measure what it
		// accepts meanwhile.
		if g.watching == 0 {
			g.watching, g.accepted = n, 0
		}
		return g.state()
	}
	previous := g.limit
	estimate, fall, lower := g.estimate(now, since)
	g.learn(previous, estimate, fall, pause)
	g.enabled = true
	g.limit = math.Max(estimate, gentleMinRate)
	g.from = math.Max(fall*g.limit, gentleMinRate)
	g.rate = g.from
	g.event = n
	g.accepted = 0
	g.pausedFor = millis32(pause)
	// If nothing succeeded, or the estimate is only a floor, start there, in
	// the probe's fast phase.
	g.skip = estimate == 0 || lower
	return g.state()
}

// estimate returns the estimated limit at an event since seconds after the
// last one, the fraction of it to drop to, and whether the estimate is only
// a floor. It updates what held. It requires g.mu held.
func (g *Gentle) estimate(now time.Time, since float64) (limit, fall float64, lower bool) {
	hold := gentleHold * g.limit
	probed, fast := g.probed, g.fast
	g.probed = since >= gentleClimb+g.wait()
	g.fast = since >= gentleClimb+g.wait()+gentleCreepFor
	n := now.UnixNano()
	recent := g.recent.sum(n)
	switch {
	case !g.enabled && g.watching != 0:
		return float64(g.accepted) / nanosToSeconds(n-g.watching), gentleBeta, false
	case !g.enabled:
		// Throttled within the first second, what was accepted so far is
		// only a floor: the server may well accept that much every
		// fraction of a second. Probe from there at once.
		seen := nanosToSeconds(n - g.created)
		return recent, gentleBeta, seen < 1
	case since < gentleSoon:
		paused := g.pausedFor > 0
		if !fast && !(probed && paused) {
			g.held = 0 // not a probe's overshoot draining: the limit fell
		}
		spanned := float64(g.accepted) / since
		switch {
		case paused:
			limit = spanned
			// What the server accepted in a burst once the pause was over
			// is what it saved during the pause, which is all the rate
			// it shows only if its bucket holds a pause's worth: the
			// limit is at least that.
			lower = since-float64(g.pausedFor)/1e3 < since/8
		case probed:
			limit = recent
		default:
			limit = math.Min(recent, spanned)
		}
	case !g.probed:
		g.held = 0
		return g.rate, gentleFall, false
	case !g.fast:
		g.held = math.Max(g.held, hold)
		limit = g.rate / (1 + 2*gentleCreep)
	case g.skip:
		// A probe from a floor: the floor held, and the limit is near
		// what the server accepted in the last second.
		g.held = math.Max(g.held, hold)
		limit = math.Max(math.Min(g.rate, recent), g.limit)
	default:
		g.held = math.Max(g.held, hold*(1+gentleCreep*(gentleCreepFor-1)))
		limit = math.Max(math.Min(g.rate, recent), hold*(1+gentleCreep*gentleCreepFor))
	}
	return math.Max(limit, g.held/gentleHold), gentleBeta, lower
}

// phase returns how far into its curve the rate is at n (Unix
// nanoseconds), in seconds: the time since the last event, or, for a curve
// that begins at the probe's fast phase, that much past its start. It
// requires g.mu held.
func (g *Gentle) phase(n int64) float64 {
	t := nanosToSeconds(n - g.event)
	if g.skip {
		t += gentleClimb + g.wait() + gentleCreepFor
	}
	return t
}

// wait returns how long the rate holds before a probe, in seconds. It
// requires g.mu held.
func (g *Gentle) wait() float64 {
	return math.Ldexp(gentleWait, int(g.patience))
}

// learn sets how long to hold before the next probe, at an event whose
// estimate follows the previous one: longer after the limit fell (it
// seldom rises again at once), and after a probe that found nothing new
// and cost a pause (a server that pauses its clients may not save what
// they did not send meanwhile); back to gentleWait when a probe found the
// limit risen. It requires g.mu held, and g.probed set for the event.
func (g *Gentle) learn(previous, estimate, fall float64, pause time.Duration) {
	switch {
	case !g.enabled: // the first event: nothing to compare with
	case fall == gentleFall || estimate < 0.7*previous:
		g.patience = max(g.patience, 1)
	case g.probed && estimate > 1.1*previous:
		g.patience = 0
	case g.probed && pause > 0:
		g.patience = min(g.patience+1, gentlePatience)
	case g.probed:
		g.patience = max(g.patience-1, -1) // a probe that cost no pause: probe sooner
	}
}

// curve returns the rate at now: a climb from the decrease back to the
// hold below the estimated limit, a hold, then a probe above it, first a
// creep, then a growth that doubles the rate every gentleProbe seconds. It
// requires g.mu held.
func (g *Gentle) curve(now time.Time) float64 {
	t, wait := g.phase(now.UnixNano()), g.wait()
	hold := gentleHold * g.limit
	switch {
	case t < gentleClimb:
		x := 1 - t/gentleClimb
		return hold - (hold-g.from)*x*x*x
	case t < gentleClimb+wait:
		return hold
	case t < gentleClimb+wait+gentleCreepFor:
		return hold * (1 + gentleCreep*(t-gentleClimb-wait))
	}
	crept := hold * (1 + gentleCreep*gentleCreepFor)
	return crept * math.Exp2((t-gentleClimb-wait-gentleCreepFor)/gentleProbe)
}

// state returns what observe returns. It requires g.mu held.
func (g *Gentle) state() (float64, int, bool) {
	rate := g.rate
	if g.refused >= gentleDead && g.pausedFor == 0 {
		rate = math.Max(gentleTrickle*rate, gentleMinRate) // a spent window
	}
	return rate, 1, g.enabled
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

// window counts events over the last second, in eleven slots of a tenth
// of a second: ten whole ones and the share of the oldest that the second
// still covers. (Coarser slots let a second that starts just before a
// fixed window's burst count part of it twice.)
type window struct {
	slots  [windowSlots]uint16 // oldest first
	newest int64               // the tenth-of-a-second period of the last slot
}

const (
	windowSlots = 11
	tenth       = int64(100 * time.Millisecond)
)

func (w *window) add(now int64) {
	w.advance(now / tenth)
	if last := &w.slots[windowSlots-1]; *last < math.MaxUint16 {
		*last++
	}
}

// advance moves the window so that its last slot is period i.
func (w *window) advance(i int64) {
	if k := i - w.newest; k > 0 {
		if k >= windowSlots {
			w.slots = [windowSlots]uint16{}
		} else {
			copy(w.slots[:], w.slots[k:])
			clear(w.slots[windowSlots-int(k):])
		}
		w.newest = i
	}
}

// sum returns the events of the second up to now.
func (w *window) sum(now int64) float64 {
	i := now / tenth
	elapsed := float64(now%tenth) / float64(tenth)
	n := 0.0
	for j, c := range w.slots {
		switch idx := w.newest - int64(windowSlots-1-j); {
		case idx == i-(windowSlots-1):
			n += float64(c) * (1 - elapsed)
		case idx > i-(windowSlots-1) && idx <= i:
			n += float64(c)
		}
	}
	return n
}

func nanosToSeconds(n int64) float64 { return float64(n) / float64(time.Second) }

// millis32 returns d in whole milliseconds, as an int32 (at most about 24
// days).
func millis32(d time.Duration) int32 {
	return int32(min(max(d.Milliseconds(), 0), math.MaxInt32))
}
