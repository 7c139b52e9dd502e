package pace

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/politehttp/polite/internal/proptest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Random arrivals, bursts and cancellations, for many n and per: the log
// never books n+1 sends into one interval of per, never books earlier than
// asked or before one booked earlier, holds at most windowSlices+1 entries, and delays a
// send by at most per/windowSlices beyond the exact instant.
func TestWindowLogNeverAllowsOneMore(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	epoch := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		n   int
		per time.Duration
	}{{1, time.Second}, {5, time.Second}, {100, time.Minute}, {1000, time.Minute}, {5000, time.Hour}} {
		var w windowLog
		var booked []time.Time
		now, floor := epoch, epoch
		for range 20 * tc.n {
			now = now.Add(time.Duration(rng.ExpFloat64() * float64(tc.per) / float64(2*tc.n)))
			at := w.book(now, tc.n, tc.per)
			floor = latest(floor, at)
			require.False(t, at.Before(now), "booked before it was asked")
			if len(booked) > 0 {
				require.False(t, at.Before(booked[len(booked)-1]), "booked out of order")
			}
			booked = append(booked, at)
			require.LessOrEqual(t, len(w.entries), windowSlices+1)
		}
		require.True(t, slices.IsSortedFunc(booked, func(a, b time.Time) int { return a.Compare(b) }))
		assert.LessOrEqual(t, proptest.MaxInWindow(booked, tc.per), tc.n, "n=%d per=%v", tc.n, tc.per)

		// Late by at most per/windowSlices: the exact log books the next
		// send no earlier than the merged one, and no later than that.
		exact := append([]time.Time(nil), booked...)
		next := w.book(now, tc.n, tc.per)
		earliest := now
		if k := len(exact) - tc.n; k >= 0 {
			earliest = latest(earliest, exact[k].Add(tc.per))
		}
		earliest = latest(earliest, floor) // bookings are monotonic
		assert.False(t, next.Before(earliest), "n=%d: earlier than exact", tc.n)
		assert.LessOrEqual(t, next.Sub(earliest), tc.per/windowSlices, "n=%d: later than exact by more than a slice", tc.n)
	}
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
