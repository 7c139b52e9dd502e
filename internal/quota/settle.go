package quota

import (
	"math"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/signals"
	"github.com/politehttp/polite/internal/units"
)

// How what an attempt took of its key's quotas in units other than
// requests is settled: given back where the server did not take it,
// corrected to what it actually cost, and read against what the server
// says is left, through the key's ledger; and what a fleet that books the
// costs is told of it.

// mark returns the moment now of the ledger, for an attempt sent now.
func (cs *Costs) mark(now time.Time) Mark {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return Mark{at: now, seq: cs.ledger.seq}
}

// give settles h: what it took less actual goes back to the buckets (a
// surcharge if actual is more), at now. It reports false if h was settled
// before.
func (cs *Costs) give(h *Hold, actual units.Vec, now time.Time) bool {
	cs.mu.Lock()
	if h.settled {
		cs.mu.Unlock()
		return false
	}
	h.settled = true
	var d units.Vec
	for u := range d {
		d[u] = h.cost[u] - actual[u]
	}
	if d.Zero() {
		cs.mu.Unlock()
		return true
	}
	for u := range cs.units {
		b := &cs.units[u]
		b.refill(now)
		b.level = math.Min(b.level+d[u], math.Max(b.limit, b.level))
	}
	cs.ledger.add(now.UnixNano(), d)
	cs.wakeHeadLocked()
	a := cs.adjustsLocked(h, d, nil, time.Time{})
	cs.mu.Unlock()
	h.tellFleet(a)
	return true
}

// retract gives back all h took, for an attempt the server did not admit
// (it throttled it, or never received it): as if it had never been taken,
// its taking is struck from the ledger, so that what a server counted
// before or after it is read right. It reports false if h was settled
// before.
func (cs *Costs) retract(h *Hold) bool {
	cs.mu.Lock()
	if h.settled {
		cs.mu.Unlock()
		return false
	}
	h.settled = true
	for u := range cs.units {
		b := &cs.units[u]
		b.level = math.Min(b.level+h.cost[u], math.Max(b.limit, b.level))
	}
	if e := cs.ledger.find(h.mark.seq); e != nil {
		e.d = units.Vec{}
	}
	cs.endProbeLocked(h) // wakes the head
	a := cs.adjustsLocked(h, h.cost, nil, time.Time{})
	cs.mu.Unlock()
	h.tellFleet(a)
	return true
}

// sync takes what a response received at now says of the quotas in units
// other than requests (quotas, as ParseSignals or a UsageReader read
// them), for a request sent at sent: the server counted what was taken
// before it, and none of what was taken or given back after, give or take
// the requests taken within costReorder of it. own is what the answered
// attempt itself took, if the server counted it, and ownSeq its number in
// the ledger (0 if none). A bucket whose limit is not stated is taken to
// be at least what was left and own.
//
// Under a fleet that books the costs, f and key name it: the most each
// quota can hold now, by the reading, is told to it, with when the server
// read it (sent: the fleet takes off what it booked for sends after it).
func (cs *Costs) sync(now time.Time, sent Mark, quotas []signals.Quota, own units.Vec, ownSeq uint64, f fleetapi.Fleet, key string) {
	if len(quotas) == 0 {
		return
	}
	cs.mu.Lock()
	r := cs.ledger.read(sent, ownSeq)
	raised := false
	atMost := units.Vec{math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()}
	for _, q := range quotas {
		u, ok := units.Named(q.Unit)
		if !ok {
			continue
		}
		var up bool
		up, atMost[u] = cs.units[u].sync(now, sent.at, q, own[u], r.since[u], r.early[u], r.late[u])
		raised = raised || up
	}
	if raised {
		cs.wakeHeadLocked()
	}
	var a []fleetapi.Adjust
	if f != nil {
		a = cs.adjustsLocked(&Hold{fleet: f, key: key}, units.Vec{}, &atMost, sent.at)
	}
	cs.mu.Unlock()
	if len(a) > 0 {
		f.Adjust(key, a)
	}
}

// bodyMark returns the moment of the ledger for the quotas that the body
// of h's answer states, read at now: the server stated them as it
// answered (when cs.answered recorded it in the ledger), after every cost
// taken before now; but of the
// requests it answered near then (within costReorder), it may or may not
// have given back what they did not use, and the key may not have yet:
// their takings count as not yet answered (reading.early), so that a
// settlement is not counted twice. Before, two answers at one instant,
// read in the other order, had one settlement counted twice.
func (cs *Costs) bodyMark(h *Hold, now time.Time) Mark {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if e := cs.ledger.find(h.mark.seq); e != nil && e.answered != 0 {
		return Mark{at: time.Unix(0, e.answered), seq: cs.ledger.seq, near: true}
	}
	// Answered too long ago for the ledger to hold its taking: what was
	// settled near then is long in the server's figures and the key's.
	return Mark{at: now, seq: cs.ledger.seq}
}

// answered records that the request of h was answered at now: from then on
// its taking is known to be in what the server says.
func (cs *Costs) answered(h *Hold, now time.Time) {
	cs.mu.Lock()
	if e := cs.ledger.find(h.mark.seq); e != nil {
		e.answered = now.UnixNano()
	}
	cs.mu.Unlock()
}

// Under a fleet that books costs (see FleetRequest.Costs), a key's cost
// state tells the fleet what the sends it booked gave back, and the bounds
// the server's answers set.

// adjustsLocked returns what to tell h's fleet, if it booked h: the costs
// given back (below 0: taken), and the bounds atMost sets (NaN: none) as
// the server read them at read, for each unit whose quota the fleet keeps.
// It requires cs.mu held.
func (cs *Costs) adjustsLocked(h *Hold, give units.Vec, atMost *units.Vec, read time.Time) []fleetapi.Adjust {
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
		adj := fleetapi.Adjust{Unit: units.Unit(u).String(), Limit: b.limit, Per: b.refillTime(), GiveBack: give[u], Bounded: bounded}
		if bounded {
			adj.AtMost, adj.Read = atMost[u], read
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

// fleetCosts returns cost as a fleet books it: in each unit it costs
// something whose quota the fleet can keep (see costBucket.shared).
func (cs *Costs) fleetCosts(cost units.Vec) []fleetapi.Cost {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []fleetapi.Cost
	for u := range cs.units {
		if b := &cs.units[u]; cost[u] > 0 && b.shared() {
			out = append(out, fleetapi.Cost{Unit: units.Unit(u).String(), Amount: cost[u], Limit: b.limit, Per: b.refillTime()})
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
