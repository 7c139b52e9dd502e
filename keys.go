package polite

import (
	"iter"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"golang.org/x/time/rate"
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
		var states []*keyState
		var keys []string
		for i := range t.keys.shards {
			sh := &t.keys.shards[i]
			states, keys = states[:0], keys[:0]
			sh.mu.RLock()
			for _, m := range [2]map[string]*keyState{sh.young, sh.old} {
				for k, ks := range m {
					if strings.HasPrefix(k, "\x00") { // a named bucket, not a key
						continue
					}
					keys, states = append(keys, k), append(states, ks)
				}
			}
			sh.mu.RUnlock()
			now := time.Now()
			for j, ks := range states {
				if !yield(t.status(keys[j], ks, now)) {
					return
				}
			}
		}
	}
}

// status returns the status of key, whose state is ks, at now.
func (t *Transport) status(key string, ks *keyState, now time.Time) KeyStatus {
	s := KeyStatus{Key: key}
	ks.mu.Lock()
	if ks.limiter != nil && ks.limit != rate.Inf && ks.limit > 0 {
		s.Rate = float64(ks.limit)
	}
	// The key's own quota first, then those of the buckets its server
	// named for its routes (few, though many routes may share them).
	var quotas []*serverQuota
	ctl := ks.controllerLocked(t.keys.adaptive)
	members, own := 0, false
	var costs *costState
	if x := ks.extra; x != nil {
		members, costs = x.members, x.costs
		if x.quota != nil {
			quotas, own = append(quotas, x.quota), true
		}
		for _, q := range x.routes {
			if !slices.Contains(quotas, q) {
				quotas = append(quotas, q)
			}
		}
	}
	ks.mu.Unlock()
	share := 1.0
	if f := t.cfg.fleet; f != nil && len(quotas) > 0 {
		share = 1 / float64(max(f.Size(), members, 1))
	}
	for i, q := range quotas {
		q.mu.Lock()
		limit := q.rateLocked()
		paced := limit * (1 - quotaMargin)
		if spread, ok := q.spreadLocked(now, share); ok && (paced == 0 || spread < paced) {
			paced = spread
		}
		q.mu.Unlock()
		if paced > 0 && (s.Rate == 0 || paced < s.Rate) {
			s.Rate = paced
		}
		switch {
		case limit <= 0 || own && i > 0 && s.Limit > 0: // the key's own limit stands
		case s.Limit == 0 || limit < s.Limit:
			s.Limit = limit
		}
	}
	if s.Limit == 0 {
		if ctl != nil {
			s.Limit = ctl.Estimate()
		}
	}
	if math.IsInf(s.Limit, 0) || math.IsNaN(s.Limit) {
		s.Limit = 0
	}
	if costs != nil {
		s.Costs = costs.status(now)
	}
	return s
}

// Fleet returns the fleet the Transport paces with ([WithFleet]), or nil.
func (t *Transport) Fleet() fleetapi.Fleet { return t.cfg.fleet }
