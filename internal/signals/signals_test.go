package signals

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var now = time.Unix(1_700_000_000, 0)

func TestParseDecimalTakesOnlyPlainNonNegativeDecimals(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"0", 0, true},
		{"596", 596, true},
		{"596.0", 596, true},
		{"0.25", 0.25, true},
		{"123456789012345", 123456789012345, true},
		{"12345678901234567890", 12345678901234567890, true}, // past the exact path: ParseFloat
		{"", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1e3", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1.2.3", 0, false},
		{"NaN", 0, false},
		{"Inf", 0, false},
		{"0x10", 0, false},
		{strings.Repeat("9", 33), 0, false}, // longer than any header's number
	} {
		got, ok := ParseDecimal(c.in)
		assert.Equal(t, c.ok, ok, "%q", c.in)
		if c.ok {
			assert.Equal(t, c.want, got, "%q", c.in)
		}
	}
}

func TestSecondsRefusesWhatADurationCannotHold(t *testing.T) {
	d, ok := Seconds(1.5)
	assert.True(t, ok)
	assert.Equal(t, 1500*time.Millisecond, d)
	d, ok = Seconds(MaxSeconds)
	assert.True(t, ok)
	assert.Positive(t, d, "the most seconds does not overflow")
	for _, f := range []float64{-1, math.NaN(), math.Inf(1), MaxSeconds + 2, 1e300} {
		_, ok := Seconds(f)
		assert.False(t, ok, "%v", f)
	}
}

func TestRenewalOfAWindowIsItsResetOfABucketOneUnitBack(t *testing.T) {
	reset := now.Add(10 * time.Second)
	window := Quota{Limit: 100, Remaining: 0, Reset: reset}
	assert.Equal(t, reset, window.Renewal(now), "a window is renewed whole at its reset")

	bucket := Quota{Limit: 100, Remaining: 0, Reset: reset, Refill: true}
	assert.Equal(t, now.Add(100*time.Millisecond), bucket.Renewal(now), "full in 10 s at 100 a refill: one unit in a hundredth")

	past := Quota{Limit: 100, Remaining: 0, Reset: now.Add(-time.Second), Refill: true}
	assert.Equal(t, past.Reset, past.Renewal(now), "a reset already past is the renewal")
	noLimit := Quota{Remaining: 0, Reset: reset, Refill: true}
	assert.Equal(t, reset, noLimit.Renewal(now), "a bucket whose limit is unknown renews at its reset")
}

func TestDelayPutsRetryAfterFirstThenASpentQuota(t *testing.T) {
	spent := Quota{Limit: 10, Remaining: 0, Reset: now.Add(7 * time.Second)}
	for _, c := range []struct {
		name string
		s    Signals
		want time.Duration
		ok   bool
	}{
		{"nothing said", Signals{}, 0, false},
		{"Retry-After", Signals{RetryAfter: 3 * time.Second, HasRetryAfter: true}, 3 * time.Second, true},
		{"Retry-After over a spent quota", Signals{RetryAfter: 3 * time.Second, HasRetryAfter: true, Quota: spent, HasQuota: true}, 3 * time.Second, true},
		{"a spent quota", Signals{Quota: spent, HasQuota: true}, 7 * time.Second, true},
		{"a quota with some left", Signals{Quota: Quota{Limit: 10, Remaining: 1, Reset: now.Add(7 * time.Second)}, HasQuota: true}, 0, false},
		{"a spent quota with no reset", Signals{Quota: Quota{Limit: 10}, HasQuota: true}, 0, false},
		{"a spent quota whose reset is past", Signals{Quota: Quota{Limit: 10, Reset: now.Add(-time.Second)}, HasQuota: true}, 0, true},
	} {
		got, ok := c.s.Delay(now)
		assert.Equal(t, c.ok, ok, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}

func TestRefillWindowReadsABucketsRefillTime(t *testing.T) {
	bucket := func(limit, remaining float64, ahead, slack time.Duration) Quota {
		return Quota{Limit: limit, Remaining: remaining, Reset: now.Add(ahead), Slack: slack, Refill: true}
	}
	for _, c := range []struct {
		name  string
		q     Quota
		slack float64
		want  time.Duration
		ok    bool
	}{
		{"half lacking, full in 30 s: a minute", bucket(600, 300, 30*time.Second, 0), 0, time.Minute, true},
		{"near a minute is a minute", bucket(600, 300, 33*time.Second, 0), 0, time.Minute, true},
		{"far from any common window is read as it is", bucket(600, 300, 15*time.Second, 0), 0, 30 * time.Second, true},
		{"near a second is a second", bucket(10000, 5000, 520*time.Millisecond, 0), 0, time.Second, true},
		{"lacking under a hundredth says too little", bucket(10000, 9950, time.Second, 0), 0, 0, false},
		{"lacking within the rounding of what is left says too little", bucket(100000, 98000, time.Second, 500), 500, 0, false},
		{"full again within 50 ms says too little", bucket(600, 300, 40*time.Millisecond, 0), 0, 0, false},
		{"full again within 4 times its reset's slack says too little", bucket(600, 300, 3*time.Second, time.Second), 0, 0, false},
		{"a window, not a bucket, is not read", Quota{Limit: 600, Remaining: 300, Reset: now.Add(30 * time.Second)}, 0, 0, false},
		{"no limit", bucket(0, 300, 30*time.Second, 0), 0, 0, false},
	} {
		got, ok := RefillWindow(c.q, now, c.slack)
		assert.Equal(t, c.ok, ok, c.name)
		assert.Equal(t, c.want, got, c.name)
	}
}

func TestSignalsJSONRoundTrips(t *testing.T) {
	s := Signals{
		RetryAfter: 1500 * time.Millisecond, HasRetryAfter: true, RetryAfterSlack: time.Second,
		Quota:    Quota{Limit: 100, Remaining: 3, Reset: now.Add(time.Minute).UTC(), Slack: time.Second, Window: time.Minute, Policy: "default"},
		HasQuota: true,
		Quotas:   []Quota{{Limit: 30000, Remaining: 29000, Reset: now.Add(2 * time.Second).UTC(), Unit: "tokens", Refill: true}},
		Bucket:   "core", Global: true, Cached: true,
	}
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var back Signals
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, s, back)

	for _, bad := range []string{`{"retry_after": -1}`, `{"quota": {"window": 1e300}}`} {
		assert.Error(t, json.Unmarshal([]byte(bad), &back), bad)
	}
}
