package llmfake

import (
	"math"
	"time"
)

// Bucket is a bucket of Capacity units that refills at Capacity a
// Period (a minute if Period is 0). Its level may not go below 0 by an
// admission, but a settlement may surcharge it below.
type Bucket struct {
	Capacity, Level float64
	At              time.Time     // when Level was last brought up to date
	Period          time.Duration // the time to refill Capacity; 0: a minute
}

// per returns b's period.
func (b *Bucket) per() time.Duration {
	if b.Period <= 0 {
		return time.Minute
	}
	return b.Period
}

// Refill brings b's level up to now.
func (b *Bucket) Refill(now time.Time) {
	if now.After(b.At) {
		b.Level = math.Min(b.Capacity, b.Level+b.Capacity*float64(now.Sub(b.At))/float64(b.per()))
		b.At = now
	}
}

// Give gives n units back to b at now, up to its capacity.
func (b *Bucket) Give(now time.Time, n float64) {
	b.Refill(now)
	b.Level = math.Max(b.Level, math.Min(b.Capacity, b.Level+n))
}

// Wait returns how long until b holds n, at now (b refilled), rounded up
// to the nanosecond: b holds n once it has passed.
func (b *Bucket) Wait(n float64) time.Duration {
	if b.Level >= n {
		return 0
	}
	return time.Duration(math.Ceil((n - b.Level) / b.Capacity * float64(b.per())))
}

// admits reports whether the API admits a charge of n from b: whether b
// holds n, but for a billionth of its capacity. A client's copy of the
// bucket (the bench's oracle) refills it in other steps, so its level
// differs from the API's in the last bits: the API does not refuse it for
// them.
func (b *Bucket) admits(n float64) bool { return b.Level >= n-1e-9*b.Capacity }

// Reset returns the time until b is full again, at now (b refilled).
func (b *Bucket) Reset() time.Duration {
	return time.Duration((b.Capacity - b.Level) / b.Capacity * float64(b.per()))
}
