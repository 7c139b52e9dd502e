// Package proptest holds what the property tests of polite's packages
// share: the instant their clocks start at, how far they move on, and how
// many instants one window holds.
package proptest

import (
	"time"

	"pgregory.net/rapid"
)

// Start returns the instant at which the clocks of the property tests
// start: far from the zero time, which x/time/rate treats specially.
func Start() time.Time { return time.Unix(1_700_000_000, 0) }

// DrawGap draws how far a property test's clock moves on: often not at
// all, often a little, sometimes around scale, and sometimes a long way.
func DrawGap(t *rapid.T, scale time.Duration) time.Duration {
	return time.Duration(rapid.OneOf(
		rapid.Just(int64(0)),
		rapid.Int64Range(1, int64(time.Millisecond)),
		rapid.Int64Range(int64(scale)/2, 3*int64(scale)),
		rapid.Int64Range(0, int64(1000*time.Hour)),
	).Draw(t, "gap"))
}

// MaxInWindow returns the most instants of sorted (in order) that lie in
// one half-open interval (t-per, t].
func MaxInWindow(sorted []time.Time, per time.Duration) int {
	most, lo := 0, 0
	for hi, t := range sorted {
		for !sorted[lo].After(t.Add(-per)) {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}
