package control

import (
	"math"
	"time"
)

// Constants of AIMD.
const (
	aimdIncrease = 2.0         // requests per second added each second
	aimdDecrease = 0.5         // multiplicative decrease
	aimdCooldown = time.Second // throttles within this time of a decrease count once
)

// AIMD is an additive-increase, multiplicative-decrease send-rate
// controller: each second without a throttle adds 2 requests per second to
// the rate; a throttle halves it, at most once a second, so that the burst
// of throttles from one overload counts once. At the first throttle the
// rate starts from half the measured rate of responses. As [Cubic], it
// never grows past twice the measured rate, never falls below 0.5 per
// second, and limits nothing until the first throttle.
//
// AIMD is polite's AdaptiveAIMD mode. It is safe for concurrent use.
// Create it with [NewAIMD], or Init one in place.
type AIMD struct {
	plain // the rate, and the lock that guards the fields below

	peak         float64 // the rate before the last decrease
	responses    meter
	last         time.Time // the last update
	lastDecrease time.Time
}

// NewAIMD returns an AIMD created at now, not enabled.
func NewAIMD(now time.Time) *AIMD {
	a := new(AIMD)
	a.Init(now)
	return a
}

// Init makes a an AIMD created at now (see [NewAIMD]).
func (a *AIMD) Init(now time.Time) {
	a.responses, a.last = newMeter(now), now
}

// Observe feeds the outcome of one attempt that ended at now: any answer
// but a throttle counts as a success.
func (a *AIMD) Observe(now time.Time, o Outcome, _ float64, _ Mark, _ time.Duration) Rate {
	r, b, e := a.update(now, o == Throttled)
	return Rate{PerSecond: r, Burst: b, Enabled: e}
}

// update feeds the outcome of one attempt that ended at now: throttled
// reports whether the server throttled it.
func (a *AIMD) update(now time.Time, throttled bool) (float64, int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	measured := a.responses.add(now)
	elapsed := max(now.Sub(a.last).Seconds(), 0)
	a.last = now
	switch {
	case throttled && !a.enabled:
		a.enabled = true
		a.peak = measured
		a.rate = math.Max(measured*aimdDecrease, cubicMinFillRate)
		a.lastDecrease = now
	case throttled:
		if now.Sub(a.lastDecrease) >= aimdCooldown {
			a.peak = a.rate
			a.rate = math.Max(a.rate*aimdDecrease, cubicMinFillRate)
			a.lastDecrease = now
		}
	case a.enabled:
		grown := a.rate + aimdIncrease*elapsed
		a.rate = math.Max(a.rate, math.Min(grown, 2*measured))
	}
	return a.rate, max(int(a.rate), 1), a.enabled
}

// ServerLimit returns the rate before the last decrease; 0 before the
// first throttle.
func (a *AIMD) ServerLimit() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.enabled {
		return 0
	}
	return math.Max(a.peak, a.rate)
}

// Estimate returns 0: AIMD's status shows no estimate of the limit.
func (a *AIMD) Estimate() float64 { return 0 }

// State returns Unthrottled until the first throttle, then Climbing since
// the last decrease: AIMD grows its rate by steps toward no known limit.
func (a *AIMD) State() (State, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.enabled {
		return Unthrottled, time.Time{}
	}
	return Climbing, a.lastDecrease
}
