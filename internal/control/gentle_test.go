package control

import (
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var epoch = time.Unix(1_700_000_000, 0)

// at returns the instant d after epoch.
func at(d time.Duration) time.Time { return epoch.Add(d) }

// feed sends n successes evenly over [from, to).
func feed(c Controller, from, to time.Duration, n int) {
	for i := range n {
		c.Observe(at(from+time.Duration(i)*(to-from)/time.Duration(n)), OK, 0, NoMark, 0)
	}
}

// sent feeds g n outcomes of requests sent when g.sending said phase, evenly
// over [from, to).
func sent(g *Gentle, o Outcome, phase Mark, from, to time.Duration, n int) {
	for i := range n {
		g.Observe(at(from+time.Duration(i)*(to-from)/time.Duration(n)), o, 0, phase, 0)
	}
}

func TestGentleLimitsNothingUntilThrottled(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 10*time.Second, 1000)
	assert.False(t, g.Enabled())
	assert.Zero(t, g.Limit())
}

// The first throttle has no event before it: what was accepted since the
// start, over at least a second, is a floor, the requests in flight at it
// that succeed included, and Gentle probes up from it at once, doubling
// the rate every quarter of a second, however little it sends meanwhile.
func TestGentleFirstThrottleIsAFloor(t *testing.T) {
	g := NewGentle(epoch)
	before := g.Sending()
	sent(g, OK, before, 0, time.Millisecond, 5) // a burst the server's bucket held
	g.Observe(at(time.Millisecond), Throttled, 0, before, 0)
	require.True(t, g.Enabled())
	assert.InDelta(t, 5, g.Limit(), 1e-9, "5 accepted, over a second at least")
	sent(g, OK, before, time.Millisecond, 2*time.Millisecond, 5) // in flight at the throttle
	assert.InDelta(t, 10, g.Limit(), 1e-9, "and 5 more that were in flight")
	assert.InDelta(t, 9.9, g.Rate(), 0.1)

	g.Observe(at(251*time.Millisecond), OK, 0, g.Sending(), 0)
	assert.InDelta(t, 19.8, g.Rate(), 1e-6, "doubled in a quarter of a second")
}

// Between two events the server had nothing left to give at both: when the
// client sent above the limit in between, what the server accepted over
// the time between them is its limit. An event during a probe shows the
// limit at least where it was: the estimate only grows.
func TestGentleProbeEventsMeasureTheLimit(t *testing.T) {
	g := NewGentle(epoch)
	g.Update(at(0), true) // a floor of 0.5 a second
	feed(g, 0, 2*time.Second, 200)
	g.Update(at(2*time.Second), true) // probing from the floor: 100 a second accepted
	assert.InDelta(t, 100, g.Limit(), 1e-9)
	assert.InDelta(t, 99, g.Rate(), 1e-9, "held at 0.99 of the limit")

	// Still finding the limit: the next probe starts at once.
	feed(g, 2*time.Second, 3*time.Second, 90)
	g.Update(at(3*time.Second), true)
	assert.InDelta(t, 100, g.Limit(), 1e-9, "90 in a second during a probe: the limit is no lower")
}

// An event while the rate holds below the estimate shows the limit lower:
// the estimate becomes what was accepted since the last event, a quarter
// of it at the least.
func TestGentleHoldingEventsLowerTheLimit(t *testing.T) {
	g := NewGentle(epoch)
	g.Update(at(0), true)
	feed(g, 0, 2*time.Second, 200)
	g.Update(at(2*time.Second), true) // W = 100
	feed(g, 2*time.Second, 3*time.Second, 100)
	g.Update(at(3*time.Second), true) // W = 100 again: held 8 s from now
	feed(g, 3*time.Second, 4*time.Second, 25)
	g.Update(at(4*time.Second), true) // while holding: the server let 25 through in that second
	assert.InDelta(t, 25, g.Limit(), 1e-9)
	assert.InDelta(t, 24.75, g.Rate(), 1e-9)
	sent(g, OK, g.Sending(), 4*time.Second, 4700*time.Millisecond, 1) // a drop, held 0.75 s: still holding
	g.Observe(at(4700*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, 25.0/4, g.Limit(), 1e-9, "a quarter at most")
}

// A probe that finds the limit risen probes on at once, doubling the rate
// every quarter of a second; a limit just found is verified by a probe
// after a second; otherwise the rate holds 4 seconds, then doubles every
// second, and every quarter of a second once it is 10% above the estimate
// without a throttle.
func TestGentleHoldsThenProbes(t *testing.T) {
	g := NewGentle(epoch)
	g.Update(at(0), true)
	feed(g, 0, 2*time.Second, 200)
	g.Update(at(2*time.Second), true) // W = 100, up from the floor
	curve := func(d time.Duration) float64 { return g.curve(at(d).UnixNano()) }
	assert.InDelta(t, 99, curve(2*time.Second), 1e-9)
	assert.InDelta(t, 198, curve(2250*time.Millisecond), 1e-9, "risen: probing on, fast")

	feed(g, 2*time.Second, 3*time.Second, 100)
	g.Update(at(3*time.Second), true) // W = 100 again: found
	assert.InDelta(t, 99, curve(3900*time.Millisecond), 1e-9, "held 1 s: the limit just found is verified")
	assert.InDelta(t, 99*math.Exp2(0.1), curve(4100*time.Millisecond), 1e-9)

	feed(g, 3*time.Second, 4500*time.Millisecond, 150)
	g.Update(at(4500*time.Millisecond), true) // the probe finds it where it was: W = 100, verified
	require.InDelta(t, 100, g.Limit(), 1e-9)
	assert.InDelta(t, 99, curve(4500*time.Millisecond+3900*time.Millisecond), 1e-9, "held 4 s")
	assert.InDelta(t, 99*math.Exp2(0.1), curve(8600*time.Millisecond), 1e-9, "then doubling every second")
	assert.InDelta(t, 110*math.Pow(198.0/110, 4), curve(9500*time.Millisecond), 1e-6, "and every quarter second past 110")

	feed(g, 4500*time.Millisecond, 6500*time.Millisecond, 100)
	g.Update(at(6500*time.Millisecond), true) // held: W = 50
	assert.InDelta(t, 49.5, curve(6500*time.Millisecond+3900*time.Millisecond), 1e-9, "held 4 s")
	assert.InDelta(t, 49.5*math.Exp2(0.1), curve(10600*time.Millisecond), 1e-9)
}

// A limit that stood and drops to less than half may come back: after such
// a drop the hold is 10% of the time since the drop, three quarters of a
// second at least, until it is four again; a limit just found too high and
// lowered at once is no drop, and holds four.
func TestGentleProbesSoonAfterADrop(t *testing.T) {
	g := NewGentle(epoch)
	g.Update(at(0), true)
	feed(g, 0, 2*time.Second, 200)
	g.Update(at(2*time.Second), true) // W = 100, up from the floor: fresh, and still finding
	sent(g, OK, g.Sending(), 2*time.Second, 2100*time.Millisecond, 10)
	g.Observe(at(2100*time.Millisecond), Throttled, 0, g.Sending(), 0) // a probe that finds it where it was: held
	sent(g, OK, g.Sending(), 2100*time.Millisecond, 2300*time.Millisecond, 8)
	g.Observe(at(2300*time.Millisecond), Throttled, 0, g.Sending(), 0) // while holding: W = 40, found too high
	curve := func(d time.Duration) float64 { return g.curve(at(d).UnixNano()) }
	require.InDelta(t, 40, g.Limit(), 1e-9)
	assert.InDelta(t, 39.6, curve(2300*time.Millisecond+3900*time.Millisecond), 1e-9, "held 4 s")

	for range 3 { // each probe finds the limit where it was
		now := nanosToSeconds(g.since) - nanosToSeconds(epoch.UnixNano())
		from := time.Duration(now * float64(time.Second))
		feed(g, from, from+5*time.Second, 250)
		g.Update(at(from+5*time.Second), true)
	}
	assert.False(t, g.fresh)
	from := time.Duration((nanosToSeconds(g.since) - nanosToSeconds(epoch.UnixNano())) * float64(time.Second))
	feed(g, from, from+2*time.Second, 30)
	g.Update(at(from+2*time.Second), true) // the settled limit drops to 15, under half
	require.Less(t, g.Limit(), gentleDrop*40)
	dropped := from + 2*time.Second
	assert.InDelta(t, gentleHold*g.Limit(), curve(dropped+700*time.Millisecond), 1e-9, "held 0.75 s")
	assert.Greater(t, curve(dropped+800*time.Millisecond), gentleHold*g.Limit(), "then probes")
	assert.InDelta(t, 1.2, g.hold(at(dropped+12*time.Second).UnixNano()), gentleShorten, "12 s after the drop (counted in whole seconds): held 1.2 s")
	assert.InDelta(t, 3.0, g.hold(at(dropped+30*time.Second).UnixNano()), gentleShorten, "30 s after it: 3 s")
	assert.InDelta(t, gentleWait, g.hold(at(dropped+41*time.Second).UnixNano()), 1e-9, "41 s after it: 4 s again")
}

// A key's first contact: gentleInitial requests at once, then a rate that
// doubles every round (the least round trip, 20 ms at least), until a
// throttle, a stated limit, or gentleRounds rounds end it.
func TestGentleFirstContact(t *testing.T) {
	g := NewGentle(epoch)
	r, _, ok := g.StartRate(at(0))
	require.True(t, ok)
	assert.InDelta(t, gentleInitial/gentleMinRound, r, 1e-9, "two a round")
	r, _, _ = g.StartRate(at(20 * time.Millisecond))
	assert.InDelta(t, 2*gentleInitial/gentleMinRound, r, 1e-6, "doubled in a round")
	_, _, ok = g.StartRate(at(time.Duration(gentleRounds+1) * 20 * time.Millisecond))
	assert.False(t, ok, "outgrown: unpaced")

	g = NewGentle(epoch)
	g.Observe(at(100*time.Millisecond), OK, 0, g.Sending(), 100*time.Millisecond) // a round trip of 100 ms
	r, _, _ = g.StartRate(at(200 * time.Millisecond))
	assert.InDelta(t, gentleInitial/0.1*4, r, 1e-6, "a round is the least round trip: two rounds since the first contact")

	g.Observe(at(210*time.Millisecond), Throttled, 0, g.Sending(), 100*time.Millisecond)
	_, _, ok = g.StartRate(at(220 * time.Millisecond))
	assert.False(t, ok, "a throttle ends it: the controller paces")

	g = NewGentle(epoch)
	g.UpdateStated(at(time.Millisecond), false, 100)
	_, _, ok = g.StartRate(at(2 * time.Millisecond))
	assert.False(t, ok, "a stated limit ends it: the quota paces")
}

// From a floor the rate doubles in round trips (eight of the least, a
// sixteenth of a second at least, a quarter at most), so that a floor far
// below the limit is left in a fraction of a second; once the limit has
// been measured, finding it higher again doubles every quarter second.
func TestGentleFindsFromAFloorInRoundTrips(t *testing.T) {
	g := NewGentle(epoch)
	g.Observe(at(0), OK, 0, g.Sending(), time.Millisecond)
	g.Observe(at(0), OK, 0, g.Sending(), time.Millisecond)
	g.Update(at(time.Millisecond), true) // a floor of 2 a second, two through: a burst
	require.Equal(t, climbing, g.state)
	require.Equal(t, tightNo, g.tight)
	curve := func(d time.Duration) float64 { return g.curve(at(d).UnixNano()) }
	base := curve(time.Millisecond)
	assert.InDelta(t, 2*base, curve(time.Millisecond+time.Duration(gentleDouble/16*float64(time.Second))), 1e-6, "eight round trips of 1 ms: a sixteenth of a second at least")

	// On a server with no burst, where a refusal costs one request, a
	// thirty-second.
	g = NewGentle(epoch)
	g.Observe(at(0), OK, 0, g.Sending(), time.Millisecond)
	g.Update(at(time.Millisecond), true) // one through, the next refused
	require.Equal(t, tightYes, g.tight)
	base = curve(time.Millisecond)
	assert.InDelta(t, 2*base, curve(time.Millisecond+time.Duration(gentleDouble/32*float64(time.Second))), 1e-6, "no burst: a thirty-second of a second at least")

	g = NewGentle(epoch)
	g.Observe(at(0), OK, 0, g.Sending(), 100*time.Millisecond)
	g.Update(at(time.Millisecond), true)
	assert.InDelta(t, gentleDouble/4, g.findDouble(), 1e-9, "eight round trips of 100 ms: a quarter second at most")
}

// While the limit is found from a floor, refusals halve the rate but never
// below a request every four doublings of the finding: the server is
// asked again within round trips, and the curve stands still meanwhile.
// (Refused twice and more, the floor's server counts refusals: the first
// success holds at the floor, see TestGentleHoldsAtAFloorItWasLockedOutAbove.)
func TestGentleHalvingWhileFindingKeepsAsking(t *testing.T) {
	g := NewGentle(epoch)
	g.Observe(at(0), OK, 0, g.Sending(), time.Millisecond)
	g.Update(at(time.Millisecond), true) // a floor of 1.5
	for i := range 6 {
		g.Observe(at(time.Duration(2+i)*time.Millisecond), Throttled, 0, g.Sending(), 0)
	}
	assert.InDelta(t, 1/(4*g.findDouble()), g.Rate(), 1e-9, "halved down to four a second, no further")
	before := g.curve(at(10 * time.Millisecond).UnixNano())
	assert.InDelta(t, before, g.curve(at(time.Second).UnixNano()), 1e-9, "the curve stands still while refused")
	g.Observe(at(time.Second), OK, 0, g.Sending(), time.Millisecond)
	assert.InDelta(t, gentleHold*g.Limit(), g.Rate(), 1e-9, "a success after refusals the server counted: held at the floor")
}

// A server that queues what it cannot serve shows it in the round trip:
// while a probe raises the rate, a round of round trips whose least stands
// above the base (two requests' worth at the rate, a millisecond and half
// the base at least) stops it, and the estimate becomes the rate the
// server served its queue at; no refusal is needed. A slow endpoint, slow
// from the first round trip, is its own base and shows nothing.
func TestGentleQueueingStopsAProbe(t *testing.T) {
	g := NewGentle(epoch)
	g.Update(at(0), true)
	feedRTT := func(from, to time.Duration, n int, rtt time.Duration) {
		for i := range n {
			g.Observe(at(from+time.Duration(i)*(to-from)/time.Duration(n)), OK, 0, g.Sending(), rtt)
		}
	}
	feedRTT(0, 2*time.Second, 200, time.Millisecond)
	g.Update(at(2*time.Second), true) // W = 100, found: probing on
	feedRTT(2*time.Second, 3*time.Second, 100, time.Millisecond)
	g.Update(at(3*time.Second), true) // W = 100 again: held 4 s
	require.InDelta(t, 100, g.Limit(), 1)
	feedRTT(3*time.Second, 7*time.Second, 396, time.Millisecond) // the hold: the base stays 1 ms
	require.Greater(t, g.curve(at(7500*time.Millisecond).UnixNano()), 110.0, "probing")
	event := g.event
	feedRTT(7*time.Second, 7400*time.Millisecond, 40, 40*time.Millisecond) // the server queues
	assert.Less(t, g.Rate(), 110.0, "the probe stopped")
	assert.InDelta(t, 100, g.Limit(), 10, "at the rate the queue was served")
	assert.NotEqual(t, event, g.event, "a congestion event, with no refusal")

	slow := NewGentle(epoch)
	slow.Update(at(0), true)
	for i := range 400 {
		slow.Observe(at(time.Duration(i)*10*time.Millisecond), OK, 0, slow.Sending(), 500*time.Millisecond)
	}
	slow.Update(at(4*time.Second), true)
	phase := slow.phase.Load()
	for i := range 200 { // a probe at an endpoint that answers in half a second, always
		slow.Observe(at(8*time.Second+time.Duration(i)*10*time.Millisecond), OK, 0, slow.Sending(), 500*time.Millisecond)
	}
	assert.Equal(t, phase+1, slow.phase.Load(), "no queueing event: only the first success since the throttle")
}

// serverLimit is what a wait is judged by: unknown (0) before a throttle
// and while the estimate is only a floor, the estimate once measured, and
// a stated limit whenever there is one.
func TestGentleServerLimit(t *testing.T) {
	g := NewGentle(epoch)
	assert.Zero(t, g.ServerLimit())
	g.Update(at(0), true)
	assert.Zero(t, g.ServerLimit(), "a floor says nothing of the limit")
	feed(g, 0, 2*time.Second, 200)
	g.Update(at(2*time.Second), true)
	assert.InDelta(t, 100, g.ServerLimit(), 1e-9, "measured")
	g.UpdateStated(at(3*time.Second), false, 80)
	assert.InDelta(t, 80, g.ServerLimit(), 1e-9, "stated")
}

// A server whose headers state its limit seeds the estimate at the first
// throttle, with no floor to climb from, and Gentle never probes above it.
// A limit stated after a floor replaces it.
func TestGentleTakesTheStatedLimit(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 20*time.Millisecond, 10)
	g.UpdateStated(at(20*time.Millisecond), true, 100)
	assert.InDelta(t, 100, g.Limit(), 1e-9)
	assert.InDelta(t, 99, g.Rate(), 1e-9)
	assert.InDelta(t, 100, g.curve(at(time.Hour).UnixNano()), 1e-9, "never above the stated limit")

	g = NewGentle(epoch)
	feed(g, 0, 20*time.Millisecond, 10)
	g.Update(at(20*time.Millisecond), true)
	require.InDelta(t, 10, g.Limit(), 1e-9, "a floor")
	g.UpdateStated(at(30*time.Millisecond), false, 100)
	assert.InDelta(t, 100, g.Limit(), 1e-9)
}

// Throttles of requests in flight when the rate was cut belong to the
// event; a request sent after the cut and refused before any succeeds
// shows the server still refusing: it halves the rate, once per round trip
// (requests sent before a halving do not halve again), until a success.
func TestGentleHalvesWhileStillRefused(t *testing.T) {
	g := NewGentle(epoch)
	before := g.Sending()
	sent(g, OK, before, 0, time.Second, 100)
	g.Observe(at(time.Second), Throttled, 0, before, 0) // the first event: a floor of 100
	rate := g.Rate()
	sent(g, Throttled, before, time.Second, 1001*time.Millisecond, 10) // in flight
	assert.InDelta(t, rate, g.Rate(), 1e-9, "in flight at the event: the same event")

	after := g.Sending()
	sent(g, Throttled, after, 1001*time.Millisecond, 1002*time.Millisecond, 3)
	assert.InDelta(t, rate/2, g.Rate(), 1e-6, "three sent together, refused after the cut: one halving")
	for i := range 2 { // two more round trips, each sent after the last halving
		sent(g, Throttled, g.Sending(), 1002*time.Millisecond+time.Duration(i)*time.Millisecond, 1003*time.Millisecond+time.Duration(i)*time.Millisecond, 4)
	}
	assert.InDelta(t, rate/8, g.Rate(), 1e-6, "three round trips refused: three halvings")
	g.Observe(at(1005*time.Millisecond), OK, 0, after, 0)
	assert.GreaterOrEqual(t, g.Rate(), rate, "a success: back to the curve")
	assert.InDelta(t, 100, g.Limit(), 1e-9, "the estimate is untouched")
}

// A 5xx or a transport error says nothing of the limit: the rate neither
// grows nor falls, and the time an outage lasts is left out of the next
// measurement.
func TestGentleIgnoresOutages(t *testing.T) {
	g := NewGentle(epoch)
	g.Update(at(0), true)
	feed(g, 0, 2*time.Second, 200)
	g.Update(at(2*time.Second), true) // W = 100, probing on
	rate := g.Rate()
	sent(g, Failed, g.Sending(), 2*time.Second, 12*time.Second, 1000)
	assert.InDelta(t, rate, g.Rate(), 1e-9)
	feed(g, 12*time.Second, 13*time.Second, 150)
	g.Update(at(13*time.Second), true)
	assert.InDelta(t, 150, g.Limit(), 1.5, "measured over the second the server answered, not the 11 since the event")
}

// Gentle never grows past twice the measured rate of responses once it has
// measured the limit (a client that does not use its rate does not
// inflate it), nor falls below 0.5 a second.
func TestGentleBounds(t *testing.T) {
	g := NewGentle(epoch)
	g.Update(at(0), true)
	assert.InDelta(t, gentleMinRate, g.Rate(), 1e-9, "nothing accepted: the least rate")
	assert.Equal(t, gentleMinRate, g.Limit())

	g = NewGentle(epoch)
	g.Update(at(0), true)
	feed(g, 0, 2*time.Second, 200)
	g.Update(at(2*time.Second), true)
	feed(g, 2*time.Second, 3*time.Second, 100)
	g.Update(at(3*time.Second), true)          // the same limit: held 8 s, then a probe
	feed(g, 3*time.Second, 60*time.Second, 57) // the client sends 1 a second
	assert.LessOrEqual(t, g.Rate(), 99.0, "no higher than it was: the probe's curve is far above")
}

func TestAIMD(t *testing.T) {
	a := NewAIMD(epoch)
	feed(a, 0, 5*time.Second, 500)
	assert.False(t, a.Enabled())
	a.Update(at(5*time.Second), true)
	require.True(t, a.Enabled())
	start := a.Rate()
	assert.InDelta(t, 50, start, 5, "half the measured rate")
	a.Update(at(5*time.Second+500*time.Millisecond), true)
	assert.Equal(t, start, a.Rate(), "within the cooldown: the same event")
	feed(a, 5500*time.Millisecond, 10500*time.Millisecond, 250)
	// 2 requests/s more each second, but for the half second after the
	// throttle, when the measured rate dipped and capped growth.
	assert.InDelta(t, start+2*4.5, a.Rate(), 0.5)
	grown := a.Rate()
	a.Update(at(11*time.Second), true)
	assert.InDelta(t, grown/2, a.Rate(), 1e-9)
	for i := range 20 {
		a.Update(at(12*time.Second+time.Duration(i)*time.Second), true)
	}
	assert.Equal(t, cubicMinFillRate, a.Rate(), "never below 0.5/s")
}

// The hold before a probe is as long as the limit has stood when the last
// event came, 4 s at least and 30 at most; a limit a Memory gave has stood
// as long as the Memory says (an older record says nothing: 4 s).
func TestGentleHoldsAsLongAsTheLimitStood(t *testing.T) {
	for _, c := range []struct {
		stood time.Duration
		hold  float64
	}{{0, gentleWait}, {3 * time.Second, gentleWait}, {16 * time.Second, 16}, {2 * time.Hour, gentleMaxWait}} {
		g := NewGentle(epoch)
		g.Recall(at(time.Minute), Recalled{Limit: 100, Stood: c.stood})
		assert.InDelta(t, c.hold, g.hold(at(time.Minute).UnixNano()), 0.5, "stood %v", c.stood)
		assert.InDelta(t, 99, g.curve(at(time.Minute+time.Duration((c.hold-0.6)*float64(time.Second))).UnixNano()), 1e-9, "held")
	}
	g := NewGentle(epoch)
	g.Update(at(0), true)
	feed(g, 0, time.Second, 100)
	g.Update(at(time.Second), true) // found from the floor: finding, no hold
	feed(g, time.Second, 2*time.Second, 100)
	g.Update(at(2*time.Second), true) // W = 100 again: found, verified a second later
	holds := []float64{}
	from := 2 * time.Second
	for range 6 { // each probe finds the limit where it was
		h := g.hold(at(from).UnixNano())
		holds = append(holds, h)
		to := from + time.Duration((h+0.1)*float64(time.Second))
		feed(g, from, to, int(100*(h+0.1)))
		g.Update(at(to), true)
		from = to
	}
	t.Logf("holds: %.1f", holds)
	assert.InDeltaSlice(t, []float64{gentleVerify, 4, 6.2, 12.5, 25.1, 30}, holds, 0.2, "found at 1 s, verified: each hold as long as the limit had stood")
}

// A limit just found is verified by a probe a second later, measured over
// the probe and the last second of the hold: where the finding found the
// limit low (callers held by a Retry-After, a loaded machine), that probe
// moves it most of the way, where a probe after 4 s moves it by a few
// percent. A server that counts refusals is not probed so soon.
func TestGentleVerifiesALimitJustFound(t *testing.T) {
	found := func() *Gentle {
		g := NewGentle(epoch)
		g.Update(at(0), true)
		feed(g, 0, time.Second, 80)
		g.Update(at(time.Second), true) // W = 80, up from the floor: finding
		feed(g, time.Second, 2*time.Second, 80)
		g.Update(at(2*time.Second), true) // W = 80 again: found
		require.InDelta(t, 80, g.Limit(), 1e-9)
		return g
	}
	// The server allows 100 a second and a burst of 10: the hold at 79.2
	// passes whole, then the probe's crossing takes 100 a second and the
	// burst, for 0.3 s.
	probe := func(g *Gentle, hold time.Duration) {
		from := 2*time.Second + hold
		feed(g, 2*time.Second, from, int(79.2*hold.Seconds()))
		feed(g, from, from+300*time.Millisecond, 40)
		g.Update(at(from+300*time.Millisecond), true)
	}

	g := found()
	assert.InDelta(t, gentleVerify, g.hold(at(2*time.Second).UnixNano()), 1e-9, "verified a second after it was found")
	probe(g, time.Second)
	verified := g.Limit()
	assert.Greater(t, verified, 90.0, "the verifying probe finds most of the 20 missing")

	g = found()
	g.fresh = false // as if verified already: a probe after 4 s
	probe(g, 4*time.Second)
	assert.Less(t, g.Limit(), 85.0, "a probe after 4 s finds little of it")

	g = found()
	g.wary = waryCounts
	assert.InDelta(t, gentleWait, g.hold(at(2*time.Second).UnixNano()), 1e-9, "a server that counts refusals: held 4 s")
}

// A server that refuses twice in a row after an event, before any success,
// counts refusals (HAProxy), and one whose burst is half a second of its
// limit or more makes a probe soon after a crossing measure its burst:
// their limits are not verified.
func TestGentleIsWaryOfSomeServers(t *testing.T) {
	g := NewGentle(epoch)
	g.Update(at(0), true)
	feed(g, 0, time.Second, 100)
	g.Update(at(time.Second), true) // W = 100, up from the floor
	g.Observe(at(time.Second+10*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.Zero(t, g.wary, "one refusal after an event: a bucket still empty")
	g.Observe(at(time.Second+20*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.Equal(t, uint8(waryCounts), g.wary, "refused again, sent after the first was refused")

	// A server whose burst is a second of its limit (10 at 10 a second):
	// a probe after a second's hold would measure the burst.
	g = NewGentle(epoch)
	feed(g, 0, 100*time.Millisecond, 10)
	g.Update(at(100*time.Millisecond), true) // a floor of 10: the burst
	feed(g, 100*time.Millisecond, 1100*time.Millisecond, 10)
	g.Update(at(1100*time.Millisecond), true) // W = 10
	require.InDelta(t, 10, g.Limit(), 1)
	assert.Equal(t, uint8(waryBurst), g.wary, "a burst of a second's worth")
	assert.InDelta(t, gentleWait, g.hold(at(1100*time.Millisecond).UnixNano()), 1e-9, "not verified: held 4 s")
}

// A refusal right after a probe's crossing, before a round of requests has
// passed, is an aftershock of the crossing: the estimate falls by 15% at
// most, whatever the handful of requests since measured, and the next probe
// verifies it a second later. After a round has passed, the event measures
// the limit as any event while holding does.
func TestGentleTakesAnAftershockForWhatItIs(t *testing.T) {
	g := probeCrossed(t, 0)
	sent(g, OK, g.Sending(), 4500*time.Millisecond, 4600*time.Millisecond, 3)
	g.Observe(at(4600*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, gentleAfter*100, g.Limit(), 1e-9, "3 requests in 0.1 s: down by 15% at most")
	assert.InDelta(t, gentleVerify, g.hold(at(4600*time.Millisecond).UnixNano()), 1e-9, "verified a second later")

	g = probeCrossed(t, 0)
	sent(g, OK, g.Sending(), 4500*time.Millisecond, 4767*time.Millisecond, gentleRound)
	g.Observe(at(4767*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, 30, g.Limit(), 0.5, "a round of 8 in 0.27 s: the limit is 30")
}

// Where the server counts refusals (HAProxy's http_req_rate), a probe's
// crossing (or a hold's) counts the requests it refused, and the server's
// window refuses the client for a while after it, even at 0.99·W: a
// refusal within gentleLockout of the crossing measures nothing. W stands,
// and the rate halves until a request succeeds. After a probe, every
// refusal within gentleLockout is its lockout, and the next event after
// it measures from the crossing: HAProxy's window, still full of the
// crossing, lets a few through between refusals, and a refusal 40 ms
// after the first measured half the limit from 2 requests; probe after
// probe, W spiralled (1 run in 100 refused 11 to 60 in a minute where 4
// is the rule). After a hold's crossing, one episode of refusals is the
// lockout: a limit that dropped looks the same where the machine is
// loaded; the next refusal measures it, as an aftershock where a handful
// of requests came between.
func TestGentleRidesOutALockout(t *testing.T) {
	g := probeCrossed(t, waryCounts)
	sent(g, OK, g.Sending(), 4500*time.Millisecond, 5100*time.Millisecond, 20) // the window still full of the crossing
	g.Observe(at(5100*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, 100, g.Limit(), 1e-9, "20 requests in 0.6 s after a crossing: the lockout, no measurement")
	rate := g.Rate()
	assert.InDelta(t, gentleHold*100, rate, 1e-9, "held where it was")
	g.Observe(at(5110*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, rate/2, g.Rate(), 1e-9, "refused again before a success: halved")
	sent(g, OK, g.Sending(), 5120*time.Millisecond, 5140*time.Millisecond, 2)
	assert.InDelta(t, gentleHold*100, g.Rate(), 1e-9, "a success: back to 0.99·W")
	g.Observe(at(5140*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, 100, g.Limit(), 1e-9, "refused again after 2 successes, 0.64 s after a probe's crossing: its lockout still, not a limit of 34")
	sent(g, OK, g.Sending(), 5150*time.Millisecond, 6600*time.Millisecond, 98)
	g.Observe(at(6600*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, 120/2.1, g.Limit(), 0.5, "2.1 s after the crossing: an event, measured from the crossing (120 accepted)")

	// After an event while holding (a W found a little high, held at:
	// the server overdrawn as by a probe), once.
	g = probeCrossed(t, waryCounts)
	sent(g, OK, g.Sending(), 4500*time.Millisecond, 7*time.Second, 245)
	g.Observe(at(7*time.Second), Throttled, 0, g.Sending(), 0) // while holding, after the lockout: W = 98
	require.InDelta(t, 98, g.Limit(), 1e-9)
	require.Equal(t, crossed, g.crossing)
	sent(g, OK, g.Sending(), 7*time.Second, 7020*time.Millisecond, 1)
	g.Observe(at(7020*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, 98, g.Limit(), 1e-9, "1 request in 20 ms after an event while holding: its lockout, not a limit of 50")
	// One episode here too: a limit that dropped looks the same where the
	// machine is loaded, and the next refusal measures it.
	sent(g, OK, g.Sending(), 7030*time.Millisecond, 7500*time.Millisecond, 24)
	g.Observe(at(7500*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, 50, g.Limit(), 1e-9, "refused again after a success, 0.5 s after the event: 25 requests measure 50")
	// The next refusal a handful of requests after the lockout is an
	// aftershock.
	g = probeCrossed(t, waryCounts)
	sent(g, OK, g.Sending(), 4500*time.Millisecond, 7*time.Second, 245)
	g.Observe(at(7*time.Second), Throttled, 0, g.Sending(), 0)
	sent(g, OK, g.Sending(), 7*time.Second, 7020*time.Millisecond, 1)
	g.Observe(at(7020*time.Millisecond), Throttled, 0, g.Sending(), 0) // the lockout
	sent(g, OK, g.Sending(), 7030*time.Millisecond, 7040*time.Millisecond, 2)
	g.Observe(at(7040*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, gentleAfter*98, g.Limit(), 1e-9, "3 requests in 40 ms after the event and its lockout: down by 15% at most, not to 75")

	// Where the server is not known to count refusals, the same refusal
	// is an event: 20 requests in 0.6 s measure 33.
	g = probeCrossed(t, 0)
	sent(g, OK, g.Sending(), 4500*time.Millisecond, 5100*time.Millisecond, 20)
	g.Observe(at(5100*time.Millisecond), Throttled, 0, g.Sending(), 0)
	assert.InDelta(t, 100.0/3, g.Limit(), 0.5, "an event while holding")
}

// probeCrossed returns a Gentle, wary as told, whose estimate of 100 a
// second held 4 s and whose probe crossed it 4.5 s in.
func probeCrossed(t *testing.T, wary uint8) *Gentle {
	t.Helper()
	g := NewGentle(epoch)
	g.Recall(at(0), Recalled{Limit: 100}) // W = 100, held 4 s
	g.wary = wary
	sent(g, OK, g.Sending(), 0, 4500*time.Millisecond, 450)
	g.Observe(at(4500*time.Millisecond), Throttled, 0, g.Sending(), 0) // the probe's crossing
	require.InDelta(t, 100, g.Limit(), 1e-9)
	require.Equal(t, probedOver, g.crossing)
	return g
}

// A Gentle lives inline in each key's state (see Cell), and a crawler
// holds a key a host: a key's whole state must stay at 224 B, which the
// root's million-key test (scale_test.go) holds to 300 B a key of live
// heap. Gentle's share of it is 176 B; its states and facts must fit in
// what its mode bits took.
func TestGentleSize(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(Gentle{}), uintptr(176))
}

// A server that lets no burst through refuses the second of a first
// contact's requests sent at once; there, what it accepted until a climb's
// refusal is well below the rate its refusals began at, and W is
// gentleTight of that rate at least. A server with a burst is measured as
// before, and so is a first throttle after a memory's limit was forgotten.
func TestGentleTakesAServerWithNoBurstAtItsCrossing(t *testing.T) {
	const limit = 100.0
	// climb runs a key's first contact (firstAccepted of its first
	// requests through), then the climb from its floor: each request at the
	// rate it sends at, or at demand a second if that is less, accepted
	// while that is the limit or less; the first past it (or after 10 s)
	// is refused. It returns the rate the key sent at then, and its rate.
	climb := func(g *Gentle, firstAccepted int, demand float64) (float64, float64) {
		first := g.Sending()
		sent(g, OK, first, 0, time.Millisecond, firstAccepted)
		g.Observe(at(time.Millisecond), Throttled, 0, first, 0) // the first throttle: a floor
		require.True(t, g.Enabled())
		now := time.Millisecond
		for {
			own := g.Rate()
			rate := min(own, demand)
			now += time.Duration(float64(time.Second) / rate)
			mark := g.Sending()
			if rate > limit || now > 10*time.Second {
				g.Observe(at(now), Throttled, 0, mark, 0) // refused as the climb crossed
				return rate, own
			}
			g.Observe(at(now), OK, 0, mark, 5*time.Millisecond)
		}
	}
	tight := NewGentle(epoch)
	crossing, _ := climb(tight, 1, math.Inf(1))
	assert.Equal(t, tightYes, tight.tight)
	assert.InDelta(t, gentleTight*crossing, tight.Limit(), 1e-9, "W: %v of the %.1f a second it was crossed at", gentleTight, crossing)
	loose := NewGentle(epoch)
	climb(loose, 11, math.Inf(1))
	assert.Equal(t, tightNo, loose.tight)
	assert.Less(t, loose.Limit(), 0.8*limit, "what was accepted, with a burst")
	stale := NewGentle(epoch)
	stale.mu.Lock()
	stale.forget(epoch.UnixNano(), 0)
	stale.mu.Unlock()
	climb(stale, 1, math.Inf(1))
	assert.Equal(t, tightStale, stale.tight, "a first throttle after a memory's limit was forgotten")
	assert.Less(t, stale.Limit(), 0.8*limit)
	// Callers who send less than the rate: a throttle at 40 a second
	// measures no more than gentleTightRound times what the last round of
	// successes came at.
	few := NewGentle(epoch)
	_, unused := climb(few, 1, 40)
	require.Equal(t, tightYes, few.tight)
	assert.Greater(t, unused, 3*40.0, "the rate, unused")
	assert.InDelta(t, gentleTight*gentleTightRound*40, few.Limit(), 1, "W")
}

// TestGentleTakesAClimbsCrossingAtTheRateItWasSentAt: on a server with no
// burst, a climb from a floor doubles faster than its rounds of successes
// come, whose rate lags far behind it. A crossing that comes back at once
// was sent at the rate the climb stands at: W is gentleTight of it, not
// of the lagging round (a climb from 1 a second to 100 measured 20 on the
// bench's burst1 server, and climbed four times). One that comes back a
// long round trip later was sent at a rate the climb has left: the round
// bounds it as before.
func TestGentleTakesAClimbsCrossingAtTheRateItWasSentAt(t *testing.T) {
	const limit = 100.0
	climb := func(rtt time.Duration) (crossed float64, g *Gentle) {
		g = NewGentle(epoch)
		first := g.Sending()
		sent(g, OK, first, 0, time.Millisecond, 1)
		g.Observe(at(time.Millisecond), Throttled, 0, first, 0) // the first throttle: 1 through, a floor of 1
		require.Equal(t, tightYes, g.tight)
		now := time.Millisecond
		for {
			rate := g.Rate()
			now += time.Duration(float64(time.Second) / rate)
			if rate > limit {
				// The last round of 8 successes, as a climb from 1 a
				// second leaves it: begun before the climb took off.
				g.mu.Lock()
				g.recent = 20
				g.mu.Unlock()
				g.Observe(at(now), Throttled, 0, g.Sending(), rtt)
				return rate, g
			}
			g.Observe(at(now), OK, 0, g.Sending(), 300*time.Microsecond)
		}
	}
	crossed, soon := climb(300 * time.Microsecond)
	assert.InDelta(t, gentleTight*crossed, soon.Limit(), 1e-9, "W from a crossing that came back at once")
	assert.Greater(t, soon.Limit(), 0.85*limit)
	assert.Equal(t, holding, soon.state, "below where refusals begin: held there, not found again")
	assert.False(t, soon.fresh, "and not verified a second later")
	crossed, late := climb(time.Second)
	assert.Less(t, late.Limit(), 0.5*gentleTight*crossed, "W from a crossing a round trip late: the round's")
	assert.GreaterOrEqual(t, late.Limit(), gentleTight*gentleTightRound*20)
	assert.Equal(t, finding, late.state, "found above the floor, still being found")
}

// On a server with no burst, an event while holding comes where a stall
// bunched a few requests, and two come close: a refusal 25 ms after the
// last event, one request between, is an aftershock that lowers W by 15%
// at most, not to the one request over 25 ms (43 a second, where the
// bench's burst1 halved W and lost a second). Elsewhere such a refusal
// measures what was accepted, as before.
func TestGentleTakesTwoRefusalsOfAServerWithNoBurstForAnAftershock(t *testing.T) {
	for _, tight := range []tightness{tightYes, tightNo} {
		g := NewGentle(epoch)
		first := g.Sending()
		sent(g, OK, first, 0, time.Millisecond, 1)
		g.Observe(at(time.Millisecond), Throttled, 0, first, 0)
		g.mu.Lock()
		g.tight = tight
		g.limit, g.state, g.crossing = 90, holding, notCrossed
		g.startEpoch(at(time.Second).UnixNano(), measuredEpoch)
		g.mu.Unlock()
		sent(g, OK, g.Sending(), time.Second, 3*time.Second, 178) // 0.99·W for 2 s
		g.Observe(at(3*time.Second), Throttled, 0, g.Sending(), 300*time.Microsecond)
		previous := g.Limit()
		require.InDelta(t, 89, previous, 1, "an event while holding: what was accepted")
		sent(g, OK, g.Sending(), 3*time.Second, 3*time.Second+20*time.Millisecond, 1)
		g.Observe(at(3*time.Second+25*time.Millisecond), Throttled, 0, g.Sending(), 300*time.Microsecond)
		if tight == tightYes {
			assert.InDelta(t, gentleAfter*previous, g.Limit(), 1e-9, "no burst: an aftershock, down by 15% at most")
		} else {
			assert.Less(t, g.Limit(), 0.5*previous, "a burst: one request over 25 ms measured")
		}
	}
}

// What a first contact shows of a server that lets no burst through (one
// of its first two requests passed, the other was refused) is worth
// remembering, for nothing else shows it again; a Gentle started from a
// memory that says so holds by that server's rules: a refusal while it
// holds below the remembered limit is measured, as any event's, for such
// a server refuses below its limit now and then, where one without a
// word of it takes the memory for stale and starts over, a first contact
// that could no longer tell (its stale rate drained any burst).
func TestGentleRemembersAServerWithNoBurst(t *testing.T) {
	for _, burst := range []bool{false, true} {
		g := NewGentle(epoch)
		first := g.Sending()
		passed := 1
		if burst {
			passed = 5
		}
		sent(g, OK, first, 0, time.Millisecond, passed)
		g.Observe(at(time.Millisecond), Throttled, 0, first, 0)
		assert.Equal(t, !burst, g.Known(at(time.Second)).NoBurst, "the first contact shows it: %d passed", passed)
	}
	for _, noBurst := range []bool{false, true} {
		g := NewGentle(epoch)
		g.Recall(at(0), Recalled{Limit: 85, NoBurst: noBurst})
		assert.Equal(t, noBurst, g.Known(at(0)).NoBurst, "told on: a process started from this one's memory")
		sent(g, OK, g.Sending(), 0, 2*time.Second, 150) // 75 a second, below the remembered limit
		r := g.Observe(at(2*time.Second), Throttled, 0, g.Sending(), 300*time.Microsecond)
		if noBurst {
			assert.False(t, r.Forgot, "no burst: a refusal below the limit is no sign of a stale memory")
			assert.InDelta(t, 75, g.Limit(), 1, "what was accepted since the memory")
			assert.True(t, g.Tight(), "and the rules for no burst hold")
		} else {
			assert.True(t, r.Forgot, "a memory refused below its limit is stale: start over")
		}
	}
}

// A server that counts refusals (HAProxy's http_req_rate) locks a client
// out while it goes on sending above its limit: the first contact's
// crossing had the first floor's halvings refused, twice and more. What
// that floor measured (the first contact's 100 requests, over a second)
// is what the server let through; once the lockout lets a request pass,
// the rate holds at the floor, probed after the hold of a server that
// counts refusals (4 s at least, no probe that verifies it sooner), where
// a climb from it crossed the limit again at once (4 refused in the
// fake-time copy of the bench's HAProxy). A floor whose halvings were
// refused once, or never, or for less than gentleLockedOut (a bucket
// refilled meanwhile: held at such a floor, a loaded machine's runs of
// TestControlQualityOnALoadedMachine fell to 0.84 of its limit), or
// measured after a memory's limit was forgotten (the floor of the stale
// rate's crossing: held there, a restart on HAProxy from a stale memory
// used 0.94 of the limit in CI's race step, where a cold start used
// 1.00), is climbed from as before.
func TestGentleHoldsAtAFloorItWasLockedOutAbove(t *testing.T) {
	ms := time.Millisecond
	lockedOut := func(refusals int, over time.Duration, forgot ...bool) *Gentle {
		g := NewGentle(epoch)
		if len(forgot) > 0 {
			g.mu.Lock()
			g.forget(epoch.UnixNano(), 0) // a memory's limit, refused
			g.mu.Unlock()
		}
		feed(g, 0, 100*ms, 100)    // the first contact: 100 accepted in a tenth of a second
		g.Update(at(100*ms), true) // its first throttle: a floor of 100 over a second
		for i := range refusals {
			g.Observe(at(100*ms+time.Duration(i+1)*(over-100*ms)/time.Duration(refusals+1)), Throttled, 0, g.Sending(), 0)
		}
		g.Observe(at(over), OK, 0, g.Sending(), ms) // the lockout over
		return g
	}
	g := lockedOut(3, time.Second)
	require.InDelta(t, 100, g.Limit(), 1, "the floor")
	assert.Equal(t, holding, g.state)
	assert.InDelta(t, gentleHold*100, g.Rate(), 0.5, "holding at the floor")
	assert.InDelta(t, gentleHold*100, g.curve(at(4900*ms).UnixNano()), 0.5, "for the hold of a server that counts refusals, unverified")
	assert.Greater(t, g.curve(at(5500*ms).UnixNano()), 100.0, "then a probe")

	assert.Equal(t, climbing, lockedOut(1, time.Second).state, "refused once: climbed from")
	assert.Equal(t, climbing, lockedOut(3, 300*ms).state, "refused for less than gentleLockedOut: climbed from")
	assert.Equal(t, climbing, lockedOut(3, time.Second, true).state, "after a memory's limit was forgotten: climbed from")
}

// A server that counts refusals (refused twice in a row after a crossing)
// is worth remembering too: a process whose remembered limit proves stale
// starts over as a first contact from a rate already cut, crosses the
// limit too gently to be refused twice, and without the memory's word
// read the refusals after its first probe's crossing as a lower limit
// (HAProxy, the limit halved since the memory: 0.94-0.97 of it used, from
// 0.99-1.00 with the word, TestMemoryRestartHoldsTheLimit). The word
// stands when the stale limit is forgotten: the server's way of counting
// did not change with its limit.
func TestGentleRemembersAServerThatCountsRefusals(t *testing.T) {
	ms := time.Millisecond
	g := NewGentle(epoch)
	feed(g, 0, 100*ms, 100)
	g.Update(at(100*ms), true)
	assert.False(t, g.Known(at(time.Second)).CountsRefusals, "refused once: no word of it")
	g.Update(at(150*ms), true)
	g.Update(at(250*ms), true)
	assert.True(t, g.Known(at(time.Second)).CountsRefusals, "refused twice in a row after a crossing")

	for _, counts := range []bool{false, true} {
		g := NewGentle(epoch)
		g.Recall(at(0), Recalled{Limit: 200, Stood: time.Minute, CountsRefusals: counts})
		assert.Equal(t, counts, g.Known(at(0)).CountsRefusals, "told on")
		sent(g, OK, g.Sending(), 0, 500*ms, 100)
		r := g.Observe(at(500*ms), Throttled, 0, g.Sending(), ms)
		require.True(t, r.Forgot, "the memory's limit refused below it: stale")
		assert.Equal(t, counts, g.wary&waryCounts != 0, "the word outlives the stale limit")
		assert.Equal(t, counts, g.Known(at(time.Second)).CountsRefusals)
	}
}
