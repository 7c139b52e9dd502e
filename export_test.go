package polite

import (
	"math/rand/v2"
	"sync"
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
