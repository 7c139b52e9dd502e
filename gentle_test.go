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
	// Between quarter seconds, the oldest slot counts for the share of it
	// the second still covers.
	assert.InDelta(t, 9.4, w.sum(at(3050*time.Millisecond).UnixNano()), 1e-9)
	assert.InDelta(t, 10.4, w.sum(at(2950*time.Millisecond).UnixNano()), 1e-9)
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
