package polite

import (
	"strconv"
	"time"

	"github.com/politehttp/polite/internal/control"
)

// An AdaptiveMode selects the controller that sets each key's send rate
// from the server's throttling (see [WithAdaptive]).
type AdaptiveMode int

// The adaptive modes.
const (
	// AdaptiveDefault uses [Gentle], polite's own controller.
	AdaptiveDefault AdaptiveMode = iota
	// AdaptiveCubic uses [Cubic], the controller of the AWS SDKs' adaptive
	// retry mode, number for number.
	AdaptiveCubic
	// AdaptiveAIMD uses [AIMD]: additive increase, multiplicative decrease.
	AdaptiveAIMD
	// AdaptiveOff sets no rate from throttling; polite still honours
	// Retry-After and retries.
	AdaptiveOff
)

// String returns the mode's name.
func (m AdaptiveMode) String() string {
	switch m {
	case AdaptiveDefault:
		return "default"
	case AdaptiveCubic:
		return "cubic"
	case AdaptiveAIMD:
		return "aimd"
	case AdaptiveOff:
		return "off"
	}
	return "AdaptiveMode(" + strconv.Itoa(int(m)) + ")"
}

// valid returns m, or AdaptiveDefault if m is no mode.
func (m AdaptiveMode) valid() AdaptiveMode {
	if m < AdaptiveDefault || m > AdaptiveOff {
		return AdaptiveDefault
	}
	return m
}

// kind returns the controller every key of a Transport in mode m has.
func (m AdaptiveMode) kind() control.Kind { return control.Kind(m) }

// Gentle is polite's default send-rate controller (AdaptiveDefault). Like
// the AWS SDKs' CUBIC controller ([Cubic]) it sets a rate once the server
// first throttles and grows it back; unlike it, it measures the server's
// limit, holds just below it, and probes above it now and then, so that it
// wastes little of the server's quota; it opens a key's first contact as
// TCP's slow start does; and it hears a server that queues or holds
// rather than refuses. It is usable outside HTTP and safe for concurrent use. Create
// it with [NewGentle].
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
// When the server states its limit ([Gentle.UpdateStated]: in headers,
// with its window), that is the estimate from the first throttle on,
// instead of a floor, and a ceiling: Gentle never probes above it.
//
// # Queueing servers
//
// A server that holds what it cannot serve yet (nginx's limit_req without
// nodelay) refuses nothing until its queue is full: the round trip says
// so first. Gentle keeps the least round trip of the last 10 to 20
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
// # Servers that hold
//
// A server that slows instead of refusing (it holds each request past
// its limit longer than the one before, and never answers 429) gives no
// other sign than the round trip, and gives it late. A success whose
// round trip stands a quarter of a second and ten times the base above
// the base is a hold: a throttle, read as the others are, that tells its
// round trip late. After an event a hold made, the rate doubles in no
// fewer than 64 of that hold's round trips (1.1% a second when it took a
// second), for every request sent past the limit before the next hold is
// back is held longer. An endpoint slow of its own (an LLM API's long
// answers, a heavy page) spreads its round trips whatever the rate: when
// holds of requests sent while the rate stood still outnumber those sent
// while it rose by 3, they are the endpoint's, and no round trip is a hold
// from then on. For this every call's round trip is timed.
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
// the hold is 10% of the time since the drop (three quarters of a second
// at least), until that is four seconds again. A limit that rose is thus
// found within about 5 seconds after a drop (10% of the time it stayed
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
// next measurement. As Cubic, once the limit is found Gentle never grows
// past twice the measured rate of responses (a client that does not use
// its rate does not inflate it), and it never goes below 0.5 requests per
// second (nor above a billion, so that a probe no throttle answers never
// overflows). Its bucket holds a single request, so that it paces evenly:
// a server whose own bucket holds little sees no burst from it.
//
// # The server's limit and the callers
//
// Gentle paces below the server's limit for a while by design (climbing
// from a floor, halving while refused). The Transport judges a call's
// wait by the server's limit as Gentle knows it (stated, or measured by a
// throttle; unknown, and so never the reason for a refusal, while it is
// only a floor), not by Gentle's own rate: a call fails locally only when
// the server could not serve it in time.
type Gentle struct{ g control.Gentle }

// NewGentle returns a Gentle created at now, not enabled.
func NewGentle(now time.Time) *Gentle {
	g := new(Gentle)
	g.g.Init(now)
	return g
}

// Update feeds the outcome of one attempt that ended at now: throttled
// reports whether the server throttled it.
func (g *Gentle) Update(now time.Time, throttled bool) { g.UpdateStated(now, throttled, 0) }

// UpdateStated is Update for a server that states its limit: stated is its
// quota over its window, in requests per second (0 if unknown). Gentle
// takes it as the limit from the first throttle on, rather than measuring
// a floor, and never probes above it.
func (g *Gentle) UpdateStated(now time.Time, throttled bool, stated float64) {
	g.g.Observe(now, outcomeOf(throttled), stated, control.NoMark, 0)
}

// Rate returns the rate to send at, in requests per second.
func (g *Gentle) Rate() float64 { return g.g.Rate() }

// Limit returns the estimate of the server's limit, in requests per
// second: 0 until the first throttle.
func (g *Gentle) Limit() float64 { return g.g.Limit() }

// Enabled reports whether the rate applies: true from the first throttle
// on.
func (g *Gentle) Enabled() bool { return g.g.Enabled() }

// Cubic is the send-rate controller of the AWS SDKs' adaptive retry mode,
// reproduced number for number from AWS SDK for Go v2: it measures the
// rate of responses in half-second buckets aligned to Unix time (smoothed,
// weight 0.8); on a throttle it remembers the rate it was sending at
// (W_max: the measured rate, or the lower fill rate once enabled) and cuts
// the rate to 0.7·W_max; otherwise the rate follows the CUBIC curve
// 0.4·(t−K)³ + W_max, with t the time since the last throttle and
// K = ∛(W_max·0.3/0.4). The rate never exceeds twice the measured rate and
// never falls below 0.5 per second. It limits nothing until the first
// throttle, and from then on always.
//
// Cubic is polite's AdaptiveCubic mode and the baseline that the default
// controller ([Gentle]) is measured against. It is usable outside HTTP:
// feed it the outcome of every attempt with Update and send at Rate once
// Enabled. A Cubic is safe for concurrent use. Create it with [NewCubic].
type Cubic struct{ c control.Cubic }

// NewCubic returns a Cubic created at now: not enabled, with no measured
// rate, its first measurement bucket starting at the whole second before
// now, as in the AWS SDK.
func NewCubic(now time.Time) *Cubic {
	c := new(Cubic)
	c.c.Init(now)
	return c
}

// Update feeds the outcome of one attempt that ended at now: throttled
// reports whether the server throttled it (429, or 503 with Retry-After,
// in polite).
func (c *Cubic) Update(now time.Time, throttled bool) {
	c.c.Observe(now, outcomeOf(throttled), 0, control.NoMark, 0)
}

// Rate returns the fill rate of the send bucket, in requests per second.
func (c *Cubic) Rate() float64 { return c.c.Rate() }

// MeasuredRate returns the smoothed rate of responses, per second.
func (c *Cubic) MeasuredRate() float64 { return c.c.MeasuredRate() }

// Enabled reports whether the rate applies: true from the first throttle
// on.
func (c *Cubic) Enabled() bool { return c.c.Enabled() }

// AIMD is an additive-increase, multiplicative-decrease send-rate
// controller: each second without a throttle adds 2 requests per second to
// the rate; a throttle halves it, at most once a second, so that the burst
// of throttles from one overload counts once. At the first throttle the
// rate starts from half the measured rate of responses. As [Cubic], it
// never grows past twice the measured rate, never falls below 0.5 per
// second, and limits nothing until the first throttle.
//
// AIMD is polite's AdaptiveAIMD mode. It is usable outside HTTP and safe
// for concurrent use. Create it with [NewAIMD].
type AIMD struct{ a control.AIMD }

// NewAIMD returns an AIMD created at now, not enabled.
func NewAIMD(now time.Time) *AIMD {
	a := new(AIMD)
	a.a.Init(now)
	return a
}

// Update feeds the outcome of one attempt that ended at now.
func (a *AIMD) Update(now time.Time, throttled bool) {
	a.a.Observe(now, outcomeOf(throttled), 0, control.NoMark, 0)
}

// Rate returns the rate to send at, in requests per second.
func (a *AIMD) Rate() float64 { return a.a.Rate() }

// Enabled reports whether the rate applies: true from the first throttle
// on.
func (a *AIMD) Enabled() bool { return a.a.Enabled() }

// outcomeOf returns the outcome of an attempt that was throttled or not.
func outcomeOf(throttled bool) control.Outcome {
	if throttled {
		return control.Throttled
	}
	return control.OK
}
