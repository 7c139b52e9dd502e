package polite

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var epoch = time.Unix(1_700_000_000, 0)

// at returns the instant d after epoch.
func at(d time.Duration) time.Time { return epoch.Add(d) }

// feed sends n successes evenly over [from, to).
func feed(c controller, from, to time.Duration, n int) {
	for i := range n {
		c.observe(at(from+time.Duration(i)*(to-from)/time.Duration(n)), false, 0)
	}
}

// sent feeds g n outcomes of requests sent when g.sending said phase, evenly
// over [from, to).
func sent(g *Gentle, o outcome, phase uint32, from, to time.Duration, n int) {
	for i := range n {
		g.observeSent(at(from+time.Duration(i)*(to-from)/time.Duration(n)), o, 0, phase)
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
	before := g.sending()
	sent(g, outcomeOK, before, 0, time.Millisecond, 5) // a burst the server's bucket held
	g.observeSent(at(time.Millisecond), outcomeThrottled, 0, before)
	require.True(t, g.Enabled())
	assert.InDelta(t, 5, g.Limit(), 1e-9, "5 accepted, over a second at least")
	sent(g, outcomeOK, before, time.Millisecond, 2*time.Millisecond, 5) // in flight at the throttle
	assert.InDelta(t, 10, g.Limit(), 1e-9, "and 5 more that were in flight")
	assert.InDelta(t, 9.9, g.Rate(), 0.1)

	g.observeSent(at(251*time.Millisecond), outcomeOK, 0, g.sending())
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
	feed(g, 4*time.Second, 5*time.Second, 1) // held 4 s: still holding
	g.Update(at(5*time.Second), true)
	assert.InDelta(t, 25.0/4, g.Limit(), 1e-9, "a quarter at most")
}

// A probe that finds the limit risen probes on at once, doubling the rate
// every quarter of a second; otherwise the rate holds 4 seconds, then
// doubles every second, and every quarter of a second once it is 10%
// above the estimate without a throttle.
func TestGentleHoldsThenProbes(t *testing.T) {
	g := NewGentle(epoch)
	g.Update(at(0), true)
	feed(g, 0, 2*time.Second, 200)
	g.Update(at(2*time.Second), true) // W = 100, up from the floor
	curve := func(d time.Duration) float64 { return g.curve(at(d).UnixNano()) }
	assert.InDelta(t, 99, curve(2*time.Second), 1e-9)
	assert.InDelta(t, 198, curve(2250*time.Millisecond), 1e-9, "risen: probing on, fast")

	feed(g, 2*time.Second, 3*time.Second, 100)
	g.Update(at(3*time.Second), true) // W = 100 again
	assert.InDelta(t, 99, curve(3*time.Second+3900*time.Millisecond), 1e-9, "held 4 s")
	assert.InDelta(t, 99*math.Exp2(0.1), curve(7100*time.Millisecond), 1e-9, "then doubling every second")
	assert.InDelta(t, 110*math.Pow(198.0/110, 4), curve(8*time.Second), 1e-6, "and every quarter second past 110")

	feed(g, 3*time.Second, 5*time.Second, 100)
	g.Update(at(5*time.Second), true) // held: W = 50
	assert.InDelta(t, 49.5, curve(5*time.Second+3900*time.Millisecond), 1e-9, "held 4 s")
	assert.InDelta(t, 49.5*math.Exp2(0.1), curve(9100*time.Millisecond), 1e-9)
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
	before := g.sending()
	sent(g, outcomeOK, before, 0, time.Second, 100)
	g.observeSent(at(time.Second), outcomeThrottled, 0, before) // the first event: a floor of 100
	rate := g.Rate()
	sent(g, outcomeThrottled, before, time.Second, 1001*time.Millisecond, 10) // in flight
	assert.InDelta(t, rate, g.Rate(), 1e-9, "in flight at the event: the same event")

	after := g.sending()
	sent(g, outcomeThrottled, after, 1001*time.Millisecond, 1002*time.Millisecond, 3)
	assert.InDelta(t, rate/2, g.Rate(), 1e-6, "three sent together, refused after the cut: one halving")
	for i := range 2 { // two more round trips, each sent after the last halving
		sent(g, outcomeThrottled, g.sending(), 1002*time.Millisecond+time.Duration(i)*time.Millisecond, 1003*time.Millisecond+time.Duration(i)*time.Millisecond, 4)
	}
	assert.InDelta(t, rate/8, g.Rate(), 1e-6, "three round trips refused: three halvings")
	g.observeSent(at(1005*time.Millisecond), outcomeOK, 0, after)
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
	sent(g, outcomeFailed, g.sending(), 2*time.Second, 12*time.Second, 1000)
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
