package polite

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ceilings drains n delays from a schedule with u just below 1, which gives
// the largest delay the jitter can draw for each retry.
func ceilings(base, limit time.Duration, n int) []time.Duration {
	s := newSchedule(base, limit)
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = s.next(math.Nextafter(1, 0))
	}
	return out
}

func TestScheduleDoublesUpToTheCap(t *testing.T) {
	got := ceilings(100*time.Millisecond, time.Second, 7)
	// The largest draw is one nanosecond below each ceiling.
	want := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
	for i := range want {
		want[i] = want[i]*time.Millisecond - 1
	}
	assert.Equal(t, want, got)
}

func TestScheduleCapHoldsAfterJitter(t *testing.T) {
	for _, limit := range []time.Duration{time.Nanosecond, time.Millisecond, 20 * time.Second, math.MaxInt64} {
		s := newSchedule(time.Millisecond, limit)
		for n := 1; n <= 200; n++ {
			d := s.next(rand.Float64())
			require.GreaterOrEqual(t, d, time.Duration(0), "retry %d", n)
			require.Less(t, d, limit, "retry %d, limit %v", n, limit)
		}
	}
}

// Attempt counts far past the point where base·2^(n-1) overflows an int64
// keep every delay within [0, cap).
func TestScheduleNeverOverflows(t *testing.T) {
	for _, base := range []time.Duration{time.Nanosecond, time.Second, math.MaxInt64 / 2, math.MaxInt64} {
		limit := time.Duration(math.MaxInt64)
		s := newSchedule(base, limit)
		for n := 1; n <= 10_000; n++ {
			d := s.next(math.Nextafter(1, 0))
			require.GreaterOrEqual(t, d, time.Duration(0), "base %v retry %d", base, n)
			require.Less(t, d, limit, "base %v retry %d", base, n)
			if n == 1 || n == 62 || n == 63 || n == 64 || n == 1000 || n == 10_000 {
				want := math.Min(float64(limit), float64(base)*math.Pow(2, float64(n-1)))
				assert.InDelta(t, want, float64(d), math.Max(want*1e-9, 1), "base %v retry %d: got %v", base, n, d)
			}
		}
	}
}

func TestFullJitterEdges(t *testing.T) {
	tests := []struct {
		name    string
		ceiling time.Duration
		u       float64
		want    time.Duration
	}{
		{"zero ceiling", 0, 0.5, 0},
		{"negative ceiling", -time.Second, 0.5, 0},
		{"zero draw", time.Second, 0, 0},
		{"negative draw", time.Second, -1, 0},
		{"NaN draw", time.Second, math.NaN(), 0},
		{"half", time.Second, 0.5, 500 * time.Millisecond},
		{"draw of 1", time.Second, 1, time.Second - 1},
		{"draw above 1", time.Second, 7, time.Second - 1},
		{"one nanosecond", time.Nanosecond, 0.999, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fullJitter(tt.ceiling, tt.u))
		})
	}
	// At the largest ceiling float64 keeps 53 bits: the draw stays below it.
	d := fullJitter(math.MaxInt64, math.Nextafter(1, 0))
	assert.Less(t, d, time.Duration(math.MaxInt64))
	assert.Greater(t, d, time.Duration(math.MaxInt64-1<<11))
}

func TestScheduleZeroRange(t *testing.T) {
	for _, bo := range [][2]time.Duration{{0, 0}, {0, time.Second}, {time.Second, time.Second}} {
		s := newSchedule(bo[0], bo[1])
		for range 10 {
			d := s.next(rand.Float64())
			assert.GreaterOrEqual(t, d, time.Duration(0))
			assert.LessOrEqual(t, d, max(bo[1]-1, 0))
		}
	}
	s := newSchedule(0, 0)
	assert.Zero(t, s.next(0.9), "no backoff at all")
}
