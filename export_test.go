package polite

import (
	"math/rand/v2"
	"sync"
	"time"
)

// WithSeed makes the jitter of a Transport's backoff and spacing a
// deterministic sequence, so that a test in fake time runs the same every
// time. For tests only.
func WithSeed(seed uint64) Option {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed))
	return func(c *config) {
		c.random = func() float64 {
			mu.Lock()
			defer mu.Unlock()
			return r.Float64()
		}
	}
}

// MaxInWindow returns the most of sorted (in order) that lie in one
// interval (t-per, t]. For tests only.
func MaxInWindow(sorted []time.Time, per time.Duration) int { return maxInWindow(sorted, per) }

// maxInWindow returns the most instants of sorted that lie in one
// half-open interval (t-per, t].
func maxInWindow(sorted []time.Time, per time.Duration) int {
	most, lo := 0, 0
	for hi, t := range sorted {
		for !sorted[lo].After(t.Add(-per)) {
			lo++
		}
		most = max(most, hi-lo+1)
	}
	return most
}
