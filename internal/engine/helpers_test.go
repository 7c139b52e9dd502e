package engine

import (
	"time"

	"pgregory.net/rapid"
)

// propertyStart is the instant at which the clocks of the property tests
// start: far from the zero time, which x/time/rate treats specially.
var propertyStart = time.Unix(1_700_000_000, 0)

// drawGap draws how far a property test's clock moves on: often not at
// all, often a little, sometimes around scale, and sometimes a long way.
func drawGap(t *rapid.T, scale time.Duration) time.Duration {
	return time.Duration(rapid.OneOf(
		rapid.Just(int64(0)),
		rapid.Int64Range(1, int64(time.Millisecond)),
		rapid.Int64Range(int64(scale)/2, 3*int64(scale)),
		rapid.Int64Range(0, int64(1000*time.Hour)),
	).Draw(t, "gap"))
}
