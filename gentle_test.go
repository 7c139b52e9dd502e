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

func TestGentleLimitsNothingUntilThrottled(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 10*time.Second, 1000)
	assert.False(t, g.Enabled())
	assert.Zero(t, g.Limit())
}

func TestGentleSeedsFromWhatTheServerAccepted(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500) // 100 a second
	g.UpdateThrottled(at(5*time.Second), time.Second)
	require.True(t, g.Enabled())
	assert.InDelta(t, 100, g.Limit(), 1)
	assert.InDelta(t, 90, g.Rate(), 1, "0.9 of the estimate")

	// Cubic, fed the same, drops to 0.7 of its measured rate of responses.
	c := NewCubic(epoch)
	feed(c, 0, 5*time.Second, 500)
	c.Update(at(5*time.Second), true)
	assert.InDelta(t, 70, c.Rate(), 2)
}

func TestGentleWatchesWhenNothingSucceeded(t *testing.T) {
	// Throttled before anything succeeded, the limit is unknown. Cubic drops
	// to 0.5/s here and climbs slowly; Gentle watches for a second, as the
	// server's pauses allow, and measures what the server accepts.
	g := NewGentle(epoch)
	_, _, enabled := g.observe(at(time.Millisecond), true, 20*time.Millisecond)
	assert.False(t, enabled)
	g.Update(at(500*time.Millisecond), true)
	assert.False(t, g.Enabled(), "still watching")
	feed(g, 100*time.Millisecond, 1100*time.Millisecond, 40)
	g.Update(at(1100*time.Millisecond), true)
	require.True(t, g.Enabled())
	assert.InDelta(t, 40/1.099, g.Limit(), 1e-9, "accepted per second since the first throttle")
}

func TestGentleStartsLowWhenNothingEverSucceeds(t *testing.T) {
	g := NewGentle(epoch)
	g.Update(at(0), true)
	rate, burst, enabled := g.observe(at(1100*time.Millisecond), true, 0)
	require.True(t, enabled)
	assert.Equal(t, gentleMinRate, rate)
	assert.Equal(t, 1, burst)
	now := 1100 * time.Millisecond
	for now < 5*time.Second { // send at the rate Gentle allows; all succeed
		rate, _, _ = g.observe(at(now), false, 0)
		now += time.Duration(float64(time.Second) / rate)
	}
	assert.Greater(t, g.Rate(), 4.0, "doubling from 0.5/s for about 4s")
}

func TestGentleCountsABurstOfThrottlesOnce(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500)
	g.Update(at(5*time.Second), true)
	after := g.Rate()
	for i := range 20 { // the rest of the overload, within a second
		g.Update(at(5*time.Second+time.Duration(i)*40*time.Millisecond), true)
	}
	g.Update(at(5*time.Second+900*time.Millisecond), false)
	assert.InDelta(t, after, g.Rate(), 5, "one decrease, then the climb")
	assert.InDelta(t, 100, g.Limit(), 1)
}

// The rate after an event: 0.9·W, a climb to 0.98·W in 2s, a hold for
// 2s, a creep of 6% a second for 2s, then doubling every second.
func TestGentleCurve(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500)
	g.Update(at(5*time.Second), true)
	w := g.Limit()
	tests := []struct {
		after time.Duration
		want  float64
	}{
		{0, 0.9 * w},
		{time.Second, 0.98*w - 0.08*w/8},
		{2 * time.Second, 0.98 * w},
		{3 * time.Second, 0.98 * w},
		{5 * time.Second, 0.98 * w * 1.06},
		{6 * time.Second, 0.98 * w * 1.12},
		{7 * time.Second, 0.98 * w * 1.12 * 2},
	}
	for _, tt := range tests {
		g.mu.Lock()
		got := g.curve(at(5*time.Second + tt.after))
		g.mu.Unlock()
		assert.InDelta(t, tt.want, got, 0.01, "%v after the event", tt.after)
	}
}

func TestGentleNeverGrowsPastTwiceTheMeasuredRate(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500)
	g.Update(at(5*time.Second), true)
	after := g.Rate()
	feed(g, 5*time.Second, 30*time.Second, 250) // the client now sends 10 a second
	assert.LessOrEqual(t, g.Rate(), gentleHold*g.Limit()+1e-9,
		"the curve probes far above the hold; a client that does not use its rate does not probe")
	assert.Greater(t, after, 0.0)
}

func TestGentleMeasuresTheLimitAfterAPause(t *testing.T) {
	// A token bucket of 40/s that paused the key 1s at the first event:
	// when the key resumes above the limit and is throttled again, what the
	// server accepted since the first event, pause included, is its limit.
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500)
	g.UpdateThrottled(at(5*time.Second), time.Second)
	feed(g, 6*time.Second, 7*time.Second, 80) // 40 saved in the pause + 40 refilled
	g.UpdateThrottled(at(7*time.Second), time.Second)
	assert.InDelta(t, 40, g.Limit(), 0.5)
}

func TestGentleMeasuresASpentWindow(t *testing.T) {
	// A fixed window of 25 a second, refusing without a pause: the second
	// event, soon after the first, sees what the window accepted.
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500)
	g.Update(at(5*time.Second+500*time.Millisecond), true) // a probe? no: a fall while holding would be later; this is the first
	feed(g, 6*time.Second, 6*time.Second+300*time.Millisecond, 25)
	g.Update(at(6*time.Second+600*time.Millisecond), true)
	assert.InDelta(t, 25, g.Limit(), 0.5)
}

func TestGentleFallsFarWhenThrottledWhileHolding(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500)
	g.Update(at(5*time.Second), true)
	feed(g, 5*time.Second, 8500*time.Millisecond, 340)
	g.Update(at(8500*time.Millisecond), true) // 3.5s after: holding
	assert.InDelta(t, 0.25*g.Limit(), g.Rate(), 0.5, "a quarter of the rate, then the climb")
}

func TestGentleTricklesWhileAWindowIsSpent(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500)
	g.Update(at(5*time.Second), true)
	before := g.Rate()
	for i := range gentleDead { // refused again and again, no pause
		g.Update(at(5*time.Second+time.Duration(i+1)*20*time.Millisecond), true)
	}
	assert.InDelta(t, math.Max(gentleTrickle*before, gentleMinRate), g.Rate(), 0.01)
	g.Update(at(5200*time.Millisecond), false) // the window opened again
	assert.Greater(t, g.Rate(), before*0.9)
}

func TestGentleFindsALimitThatRose(t *testing.T) {
	// Held at a limit of 25, then the server allows 100: the probe finds
	// it within about 8 seconds of the last event.
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 125)
	g.UpdateThrottled(at(5*time.Second), time.Second)
	require.InDelta(t, 25, g.Limit(), 1)
	now := 5 * time.Second
	for now < 14*time.Second && g.Rate() < 90 {
		rate, _, _ := g.observe(at(now), false, 0)
		now += time.Duration(float64(time.Second) / rate)
	}
	assert.GreaterOrEqual(t, g.Rate(), 90.0)
	assert.LessOrEqual(t, now-5*time.Second, 9*time.Second)
}

func TestWindowCountsTheLastSecond(t *testing.T) {
	var w window
	for i := range 30 {
		w.add(at(time.Duration(i) * 100 * time.Millisecond).UnixNano()) // 10 a second for 3s
	}
	assert.InDelta(t, 10, w.sum(at(3*time.Second).UnixNano()), 1e-9)
	// Between tenths of a second, the oldest slot counts for the share of
	// it the second still covers.
	assert.InDelta(t, 9.5, w.sum(at(3050*time.Millisecond).UnixNano()), 1e-9)
	assert.InDelta(t, 10.5, w.sum(at(2950*time.Millisecond).UnixNano()), 1e-9)
	assert.Zero(t, w.sum(at(10*time.Second).UnixNano()), "old slots do not count")
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

// Throttled within the first second, what the server accepted so far is
// only a floor (it may accept that much every fraction of a second):
// Gentle probes from it at once, doubling every second.
func TestGentleProbesFromAFloorAtTheStart(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 2*time.Millisecond, 5) // a bucket of 5, emptied at once
	g.UpdateThrottled(at(3*time.Millisecond), time.Second)
	require.True(t, g.Enabled())
	assert.InDelta(t, 5, g.Limit(), 1e-9, "the floor")
	g.mu.Lock()
	defer g.mu.Unlock()
	crept := gentleHold * 5 * (1 + gentleCreep*gentleCreepFor)
	assert.InDelta(t, crept, g.curve(at(3*time.Millisecond)), 1e-9, "the probe's fast phase, from the floor")
	assert.InDelta(t, 4*crept, g.curve(at(2*time.Second+3*time.Millisecond)), 1e-9)
}

// What the server accepts at once when a pause ends is what it saved
// during the pause: the rate it shows only if its bucket holds a pause's
// worth. Gentle takes it as a floor and probes from it, where a bucket
// that kept accepting for the following second would have measured the
// limit (TestGentleMeasuresTheLimitAfterAPause).
func TestGentleReadsABurstAfterAPauseAsAFloor(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500)
	g.UpdateThrottled(at(5*time.Second), time.Second)
	feed(g, 6*time.Second, 6*time.Second+5*time.Millisecond, 5) // a bucket of 5
	g.UpdateThrottled(at(6*time.Second+10*time.Millisecond), time.Second)
	w := g.Limit()
	assert.InDelta(t, 5/1.01, w, 1e-9)
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.InDelta(t, 2*gentleHold*w*(1+gentleCreep*gentleCreepFor), g.curve(at(7*time.Second+10*time.Millisecond)), 1e-9,
		"a second later, the rate has doubled")
}

// run drives g against a server that accepts up to limit(now) requests a
// second and throttles a client above it, asking for a pause (none if 0),
// from start for d, the client sending at g's rate. It returns the
// instants of the congestion events.
func run(g *Gentle, start, d time.Duration, limit func(time.Duration) float64, pause time.Duration) []time.Duration {
	var events []time.Duration
	for now := start; now < start+d; {
		rate := g.Rate()
		if rate > limit(now) {
			g.observe(at(now), true, pause)
			events = append(events, now)
			now += max(pause, gentleCooldown)
			continue
		}
		g.observe(at(now), false, 0)
		now += time.Duration(float64(time.Second) / rate)
	}
	return events
}

func gaps(events []time.Duration) []float64 {
	var gaps []float64
	for i := 1; i < len(events); i++ {
		gaps = append(gaps, (events[i] - events[i-1]).Seconds())
	}
	return gaps
}

// A probe that costs a pause and finds nothing new makes the next one
// wait twice as long, up to 16 s; a probe that finds the limit risen
// brings the wait back to 2 s. Probes that cost no pause come after a hold
// of 1 s.
func TestGentlePatience(t *testing.T) {
	g := NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500)
	g.UpdateThrottled(at(5*time.Second), time.Second) // W = 100, the true limit
	flat := func(time.Duration) float64 { return 100 }
	events := append([]time.Duration{5 * time.Second}, run(g, 5*time.Second, 80*time.Second, flat, time.Second)...)
	// From one event to the next: the climb (2 s), the hold, and the
	// creep until it passes the limit (1/0.98 = 1 + 0.06·t: 0.34 s).
	creep := (1/gentleHold - 1) / gentleCreep
	want := []float64{2, 4, 8, 16, 16}
	require.GreaterOrEqual(t, len(events), len(want)+1, "events at %v", events)
	for i, hold := range want {
		assert.InDelta(t, gentleClimb+hold+creep, gaps(events)[i], 0.05, "probe %d", i+1)
	}

	risen := func(now time.Duration) float64 {
		if now > events[len(events)-1]+time.Second {
			return 200
		}
		return 100
	}
	last := events[len(events)-1]
	more := run(g, last+time.Second, 60*time.Second, risen, time.Second)
	require.GreaterOrEqual(t, len(more), 2)
	assert.Greater(t, g.Limit(), 190.0, "the probes found the limit risen")
	// The probe that found the limit risen (after a hold of 16 s) brought
	// the hold back to 2 s: the next probe passes the creep (2 s) and
	// doubles from there.
	assert.Greater(t, more[0]-last, 16*time.Second)
	assert.Less(t, gaps(more)[0], gentleClimb+gentleWait+gentleCreepFor+1)

	g = NewGentle(epoch)
	feed(g, 0, 5*time.Second, 500)
	g.Update(at(5*time.Second), true)
	events = run(g, 5*time.Second, 30*time.Second, flat, 0)
	gs := gaps(events)
	assert.InDelta(t, gentleClimb+1+creep, gs[len(gs)-1], 0.05, "no pause: a hold of 1 s")
}
