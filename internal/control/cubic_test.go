package control

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// awsEpsilon is the tolerance of AWS SDK for Go v2's own tests of its
// adaptive rate limiter (aws/retry/adaptive_ratelimit_test.go).
const awsEpsilon = 1e-15

// TestCubicFollowsAWSUpdateTable feeds Cubic the sequence of AWS SDK for
// Go v2's TestAdaptiveRateLimit_Update ("base"): a limiter created at Unix
// time 0, fed every 200ms, throttled at 2.0s and 3.2s. Measured rate and
// fill rate match AWS's to 1e-15.
func TestCubicFollowsAWSUpdateTable(t *testing.T) {
	steps := []struct {
		ms           int64
		throttled    bool
		wantMeasured float64
		wantFill     float64
	}{
		{200, false, 0, 0.5},
		{400, false, 0, 0.5},
		{600, false, 4.8, 0.5},
		{800, false, 4.8, 0.5},
		{1000, false, 4.16, 0.5},
		{1200, false, 4.16, 0.6912},
		{1400, false, 4.16, 1.0976},
		{1600, false, 5.632, 1.6384},
		{1800, false, 5.632, 2.3328},
		{2000, true, 4.3264, 3.02848},
		{2200, false, 4.3264, 3.4866391734702598},
		{2400, false, 4.3264, 3.8218744160402554},
		{2600, false, 5.665280, 4.053385727709987},
		{2800, false, 5.665280, 4.200373108479455},
		{3000, false, 4.333056, 4.282036558348658},
		{3200, true, 4.333056, 2.99742559084406},
		{3400, false, 4.333056, 3.4522263943863463},
	}
	c := NewCubic(time.Unix(0, 0))
	for _, s := range steps {
		c.Update(time.UnixMilli(s.ms), s.throttled)
		assert.InDelta(t, s.wantMeasured, c.MeasuredRate(), awsEpsilon, "measured rate at %dms", s.ms)
		assert.InDelta(t, s.wantFill, c.Rate(), awsEpsilon, "fill rate at %dms", s.ms)
		assert.Equal(t, s.ms >= 2000, c.Enabled(), "enabled at %dms", s.ms)
	}
}

// TestCubicCurveFollowsAWSCubicTable checks the CUBIC curve against AWS SDK
// for Go v2's TestAdaptiveRateLimit_cubic: W_max 10, last throttle at 5s.
// Its "success" case, and the first three steps of its "mixed" case, hold
// for any CUBIC implementation; the later "mixed" steps encode that test's
// own bookkeeping (it takes W_max after the decrease), which Update does
// not follow (shared/research/aws-adaptive-mode.md §1.6).
func TestCubicCurveFollowsAWSCubicTable(t *testing.T) {
	success := []float64{7, 9.64893600966, 10.000030849917364, 10.453284520772092,
		13.408697022224185, 21.26626835427364, 36.425998516920465}
	for i, want := range success {
		assert.InDelta(t, want, cubicCurve(float64(i), 10), awsEpsilon, "%ds after the throttle", i)
	}
	// mixed: 7 and 9.649 as above, then a throttle at 7s cuts 9.649 by β.
	assert.InDelta(t, 6.754255206761999, cubicCurve(1, 10)*cubicBeta, awsEpsilon)
}

func TestCubicMeasuresFromTheWholeSecondBeforeCreation(t *testing.T) {
	// Created at x.75s, the first response at x.875s already closes the
	// bucket [x.0, x.5): measured = 0.8·1/0.5.
	base := time.Unix(1_700_000_000, 0)
	c := NewCubic(base.Add(750 * time.Millisecond))
	c.Update(base.Add(875*time.Millisecond), false)
	assert.InDelta(t, 1.6, c.MeasuredRate(), awsEpsilon)
	assert.False(t, c.Enabled())
}

func TestCubicEarlyThrottleDropsToTheFloor(t *testing.T) {
	// A throttle before any rate is measured: fill 0.5/s, capacity 1, so the
	// next request waits 2s. This is the waste polite's default avoids.
	now := time.Unix(1_700_000_000, 0)
	c := NewCubic(now)
	rate, burst, enabled := c.update(now.Add(100*time.Millisecond), true)
	assert.True(t, enabled)
	assert.Equal(t, 0.5, rate)
	assert.Equal(t, 1, burst)
}

func TestCubicIsCappedAtTwiceTheMeasuredRate(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c := NewCubic(now)
	for i := range 100 { // 10 responses a second for 10s
		c.Update(now.Add(time.Duration(i)*100*time.Millisecond), false)
	}
	assert.InDelta(t, 10, c.MeasuredRate(), 1e-9)
	assert.InDelta(t, 20, c.Rate(), 1e-9, "the curve is far higher; the cap holds")
}
