package quota

import (
	"math"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/units"
)

// Under a fleet that books costs (see FleetRequest.Costs), a key's cost
// state tells the fleet what the sends it booked gave back, and the bounds
// the server's answers set.

// adjustsLocked returns what to tell h's fleet, if it booked h: the costs
// given back (below 0: taken), and the bounds atMost sets (NaN: none),
// for each unit whose quota the fleet keeps. It requires cs.mu held.
func (cs *Costs) adjustsLocked(h *Hold, give units.Vec, atMost *units.Vec) []fleetapi.Adjust {
	if h == nil || h.fleet == nil {
		return nil
	}
	var a []fleetapi.Adjust
	for u := range cs.units {
		b := &cs.units[u]
		bounded := atMost != nil && !math.IsNaN(atMost[u])
		if !b.shared() || give[u] == 0 && !bounded {
			continue
		}
		adj := fleetapi.Adjust{Unit: units.Unit(u).String(), Limit: b.limit, Per: b.window(), GiveBack: give[u], Bounded: bounded}
		if bounded {
			adj.AtMost = atMost[u]
		}
		a = append(a, adj)
	}
	return a
}

// tellFleet tells h's fleet of a, if there is anything to tell.
func (h *Hold) tellFleet(a []fleetapi.Adjust) {
	if len(a) > 0 {
		h.fleet.Adjust(h.key, a)
	}
}

// shared reports whether a fleet books b's unit (see FleetRequest.Costs):
// its limit and the time it takes to refill are known (stated, learnt, or
// configured), not guessed. A windowed quota, or one whose rate is not
// known yet, is paced by each process from what the server says.
func (b *costBucket) shared() bool { return b.limit > 0 && b.known && b.per > 0 && !b.windowed }

// window returns the time b takes to refill its limit.
func (b *costBucket) window() time.Duration {
	if b.per <= 0 {
		return defaultCostWindow
	}
	return b.per
}

// fleetCosts returns cost as a fleet books it: in each unit it costs
// something whose quota the fleet can keep (see costBucket.shared).
func (cs *Costs) fleetCosts(cost units.Vec) []fleetapi.Cost {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []fleetapi.Cost
	for u := range cs.units {
		if b := &cs.units[u]; cost[u] > 0 && b.shared() {
			out = append(out, fleetapi.Cost{Unit: units.Unit(u).String(), Amount: cost[u], Limit: b.limit, Per: b.window()})
		}
	}
	return out
}

// takeBooked takes cost at now for a send the fleet booked it with, and
// returns the hold: no wait, the fleet had the send wait its turn.
func (cs *Costs) takeBooked(now time.Time, cost units.Vec, f fleetapi.Fleet, key string) *Hold {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for u := range cs.units {
		cs.units[u].refill(now)
	}
	h := cs.takeLocked(now, cost)
	h.fleet, h.key = f, key
	return h
}
