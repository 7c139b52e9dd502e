package polite

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// schedule yields the backoff delays of one call's retries. The un-jittered
// ceilings min(limit, base·2^(n-1)) come from a backoff/v4
// ExponentialBackOff with its own randomization off (backoff/v4 caps the
// interval before it randomizes, so its jitter can exceed the cap); full
// jitter is drawn on top, below the ceiling, so the cap holds after jitter.
// backoff/v4 saturates the interval at the cap, so no attempt count
// overflows.
//
// A schedule belongs to one call and is not safe for concurrent use. It is
// made only when a call retries, so calls that succeed at once allocate
// nothing for it.
type schedule struct {
	exp backoff.ExponentialBackOff
}

func newSchedule(base, limit time.Duration) *schedule {
	s := &schedule{exp: backoff.ExponentialBackOff{
		InitialInterval:     min(base, limit),
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         limit,
		MaxElapsedTime:      0, // never stop: attempts and the budget bound retries
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}}
	s.exp.Reset()
	return s
}

// next returns the delay before the next retry; u is a uniform draw from
// [0, 1).
func (s *schedule) next(u float64) time.Duration {
	return fullJitter(s.exp.NextBackOff(), u)
}

// fullJitter maps a uniform draw u in [0, 1) to a delay in [0, ceiling): 0
// when ceiling <= 0, never ceiling or more, whatever u and ceiling are.
func fullJitter(ceiling time.Duration, u float64) time.Duration {
	if ceiling <= 0 || !(u > 0) { // !(u > 0) also catches NaN
		return 0
	}
	d := time.Duration(u * float64(ceiling))
	if d >= ceiling || d < 0 { // float rounding near 1, or u >= 1
		return ceiling - 1
	}
	return d
}
