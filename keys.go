package polite

import (
	"iter"
	"time"
)

// KeyStatus is what a [Transport] knows of one key at a moment (see
// [Transport.Keys]).
type KeyStatus struct {
	// Key is the key (see [WithKey]).
	Key string
	// Rate is the rate the key's requests are paced at, in requests per
	// second: its token bucket's ([WithRate], or its controller's once
	// the server has throttled it), or the pace of the quota the server
	// reports (its limit over its window, or what is left of it spread
	// until its reset; for a server that names the buckets its routes
	// count against, the slowest of them), whichever is slower. 0 when
	// nothing paces the key.
	Rate float64
	// Limit is the server's limit for the key as polite knows it, in
	// requests per second: the quota the server states (the key's own,
	// or else the lowest of its routes' buckets), or else the
	// estimate of the key's controller (its rate at the last throttle).
	// 0 when neither is known.
	Limit float64
	// Costs are the key's quotas in units other than requests (see
	// [WithCost]), one a unit whose limit is known.
	Costs []CostStatus
	// Waiting is how many of the key's calls wait in line, by priority,
	// highest first: one entry for each priority that has calls waiting
	// (see [Priority]), nil when none waits. It counts the calls that wait
	// in a line: for the key's pacing or its server's pause, a place in
	// its [WithWindow], the server's quotas and costs, and a place in
	// flight ([WithMaxInFlight]); not those that wait for the fleet's
	// booking, for the [WithGlobalRate] bucket (every key's), or for a
	// retry's backoff. Each line is counted under its own lock, one
	// after another, so that a call moving between two may be missed or
	// counted twice. Calls pay nothing for it: it is counted when the
	// status is read.
	Waiting []PriorityCount
}

// PriorityCount is how many of a key's calls wait at one priority (see
// [KeyStatus.Waiting]).
type PriorityCount struct {
	Priority Priority
	Calls    int
}

// CostStatus is what a [Transport] knows of a key's quota in a unit other
// than requests (see [KeyStatus]).
type CostStatus struct {
	Unit   string        // the unit, as [Quota.Unit] names it
	Limit  float64       // the server's limit (as stated, or the least it can be)
	Window time.Duration // the time the quota takes to refill its limit; 0 for one renewed whole at a reset
	Left   float64       // what the quota holds now, as the key's requests count it; below 0: owed
}

// Keys returns the keys the Transport holds state for, with their status,
// in no particular order. Each status is read when the iteration reaches
// it, with no lock held while the caller's loop runs, so the iteration may
// miss keys made or see keys forgotten meanwhile. The keys are those used
// lately (see [WithIdleTimeout]): every key used, while a controller
// ([WithAdaptive]) or [WithRate] may pace it; under AdaptiveOff without
// WithRate, only keys whose server said something worth keeping (a quota,
// a pause), or that [WithMaxInFlight] or [WithWindow] needed.
func (t *Transport) Keys() iter.Seq[KeyStatus] {
	return func(yield func(KeyStatus) bool) {
		for s := range t.eng.Statuses() {
			ks := KeyStatus{Key: s.Key, Rate: s.Rate, Limit: s.Limit}
			for _, c := range s.Costs {
				ks.Costs = append(ks.Costs, CostStatus(c))
			}
			for _, c := range s.Waiting {
				ks.Waiting = append(ks.Waiting, PriorityCount{Priority: Priority(c.Priority), Calls: c.N})
			}
			if !yield(ks) {
				return
			}
		}
	}
}
