package fleet

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/politehttp/polite/fleetapi"
)

// A key's costs are booked with its sends (see reserveScript); what the
// sends give back afterwards, and the bounds the server's answers set,
// are told to Redis in batches: a process keeps them per key and unit,
// and one flush at a time tells all it holds, one script call a key in
// one round trip, while those that come meanwhile wait for the next.

// costs holds the adjustments of the keys' cost buckets not yet told to
// Redis.
type costs struct {
	mu       sync.Mutex
	pending  map[string]map[string]fleetapi.Adjust // key → unit → the adjustment, summed
	flushing bool                                  // a flush is out
}

// Adjust implements [fleetapi.Fleet]: it keeps a, and tells Redis at once if
// no flush is out, or with the next one.
func (f *Fleet) Adjust(key string, a []fleetapi.Adjust) {
	if len(a) == 0 {
		return
	}
	c := &f.costs
	c.mu.Lock()
	for _, adj := range a {
		c.pendLocked(key, adj, false)
	}
	start := !c.flushing
	if start {
		c.flushing = true
	}
	c.mu.Unlock()
	if start {
		if !f.startFlush() {
			c.mu.Lock()
			c.flushing = false
			c.mu.Unlock()
			return
		}
		go f.flushCosts()
	}
}

// pendLocked adds adj to key's pending adjustments: after those pending,
// or, if older (an adjustment Redis could not be told, put back), before
// them, so that the newest states the quota. It requires c.mu held.
func (c *costs) pendLocked(key string, adj fleetapi.Adjust, older bool) {
	if c.pending == nil {
		c.pending = make(map[string]map[string]fleetapi.Adjust)
	}
	units := c.pending[key]
	if units == nil {
		units = make(map[string]fleetapi.Adjust, 1)
		c.pending[key] = units
	}
	was, ok := units[adj.Unit]
	switch {
	case !ok:
		units[adj.Unit] = adj
	case older:
		units[adj.Unit] = merge(adj, was)
	default:
		units[adj.Unit] = merge(was, adj)
	}
}

// merge returns the adjustment of was and then adj: what they give back,
// summed, and the lower of their bounds (with when the server read it),
// under adj's quota.
func merge(was, adj fleetapi.Adjust) fleetapi.Adjust {
	adj.GiveBack += was.GiveBack
	if was.Bounded && (!adj.Bounded || was.AtMost < adj.AtMost) {
		adj.AtMost, adj.Bounded, adj.Read = was.AtMost, true, was.Read
	}
	return adj
}

// flushCosts tells Redis the pending adjustments, until none is left. An
// adjustment Redis could not be told is kept for the next flush.
func (f *Fleet) flushCosts() {
	defer f.flushes.Done()
	c := &f.costs
	for {
		c.mu.Lock()
		pending := c.pending
		c.pending = nil
		if len(pending) == 0 {
			c.flushing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		var wg sync.WaitGroup
		failed := false
		var fmu sync.Mutex
		for key, units := range pending {
			wg.Go(func() {
				args := []any{grace.Microseconds(), len(units)}
				for _, adj := range units {
					most, read := -1.0, -1.0
					if adj.Bounded {
						most = max(adj.AtMost, 0)
						if !adj.Read.IsZero() {
							read = float64(max(time.Since(adj.Read).Microseconds(), 0))
						}
					}
					args = append(args, adj.Unit, num(adj.GiveBack), num(refillMicros(adj.Limit, adj.Per)), num(adj.Limit), num(most), num(read))
				}
				if _, err := f.run(context.Background(), "adjust", adjustScript, f.stateKey(key), args...); err != nil {
					fmu.Lock()
					failed = true
					fmu.Unlock()
					c.mu.Lock()
					for _, adj := range units {
						c.pendLocked(key, adj, true)
					}
					c.mu.Unlock()
				}
			})
		}
		wg.Wait()
		if failed {
			// Redis could not be told: the next Adjust, or the next flush
			// after Redis answers, tells what is kept.
			c.mu.Lock()
			c.flushing = false
			c.mu.Unlock()
			return
		}
	}
}

// appendCosts appends the arguments of reserveScript for costs: their
// number, and for each its unit, amount, refill time of a unit in µs and
// limit.
func appendCosts(args []any, costs []fleetapi.Cost) []any {
	if len(costs) == 0 {
		return args
	}
	args = append(args, len(costs))
	for _, c := range costs {
		args = append(args, c.Unit, num(c.Amount), num(refillMicros(c.Limit, c.Per)), num(c.Limit))
	}
	return args
}

// refillMicros returns how many µs a quota of limit every per takes to
// refill one unit.
func refillMicros(limit float64, per time.Duration) float64 {
	if !(limit > 0) {
		return 0
	}
	return float64(per.Microseconds()) / limit
}

// num formats x for a script: Lua reads it back exactly.
func num(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		x = 0
	}
	return strconv.FormatFloat(x, 'g', 17, 64)
}
