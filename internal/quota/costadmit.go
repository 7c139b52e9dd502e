package quota

import (
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/units"
)

// Admit returns when every bucket holds the attempt's cost, taken for it
// (the Hold), the attempts that came first served first. A retry keeps
// its call's place: every attempt queued now came after it (it was at the
// head when its first attempt was admitted), so it goes first, and waits
// for its own cost alone. It fails at once, through w's Listener, if the
// cost is larger than the server's limit in some unit, and if the wait at
// the quotas' rates would not end before the deadline.
func (cs *Costs) Admit(w *gate.Waiter, cost units.Vec, retry bool) (*Hold, error) {
	if err := cs.tooLarge(w, cost); err != nil {
		return nil, err
	}
	now := time.Now()
	cs.mu.Lock()
	if cs.queue.Len() == 0 && !cs.heldLocked(cost) && cs.fitsLocked(now, cost) {
		h := cs.takeLocked(now, cost)
		cs.mu.Unlock()
		return h, nil
	}
	var judged time.Duration
	var t *gate.Ticket[units.Vec]
	if retry {
		judged = cs.waitLocked(now, cost, cost)
		t = cs.queue.PushFront(cost, w.Priority)
	} else {
		judged = cs.waitLocked(now, cs.queuedLocked(cost, w.Priority), cost)
		pl := w.Place
		pl.Size = cs.sizeLocked(cost)
		t, _ = cs.queue.PushBack(cost, pl)
	}
	cs.mu.Unlock()
	taken := false
	defer func() {
		if !taken { // refused, given up, or a panic in a listener: give the place up
			cs.mu.Lock()
			cs.queue.Leave(t)
			cs.mu.Unlock()
		}
	}()
	if judged > 0 {
		if err := w.Refuse(judged, now, false); err != nil {
			return nil, err
		}
		w.Tell(judged, gate.Cost, false)
	}
	for {
		sleepFor := time.Duration(-1) // not the head: until woken
		now = time.Now()
		cs.mu.Lock()
		if cs.queue.IsHead(t) && !cs.heldLocked(cost) {
			// The limit may have become known while the attempt waited.
			if u, limit, ok := cs.tooLargeLocked(cost); ok {
				cs.mu.Unlock()
				return nil, w.L.TooLarge(w.Who, u.String(), cost[u], limit)
			}
			if cs.fitsLocked(now, cost) {
				cs.queue.Served(t)
				h := cs.takeLocked(now, cost)
				taken = true
				cs.wakeHeadLocked() // the next may fit too
				cs.mu.Unlock()
				return h, nil
			}
			sleepFor = cs.waitLocked(now, cost, cost)
			if sleepFor < 0 {
				sleepFor = time.Second // a renewal not known yet: look again
			}
			sleepFor = max(sleepFor, time.Millisecond)
		}
		cs.mu.Unlock()
		if sleepFor >= 0 {
			if deadline, ok := w.Ctx.Deadline(); ok && !now.Add(sleepFor).Before(deadline) {
				if err := w.Refuse(sleepFor, now, false); err != nil {
					return nil, err
				}
			}
		}
		if err := t.Wait(w, sleepFor); err != nil {
			return nil, err
		}
	}
}

// tooLarge returns w's Listener's error if cost is larger than the
// server's limit in some unit.
func (cs *Costs) tooLarge(w *gate.Waiter, cost units.Vec) error {
	cs.mu.Lock()
	u, limit, ok := cs.tooLargeLocked(cost)
	cs.mu.Unlock()
	if !ok {
		return nil
	}
	return w.L.TooLarge(w.Who, u.String(), cost[u], limit)
}

// Booked returns cost as a fleet books it with the send (see FleetCosts),
// after checking, through w's Listener, that it is not too large.
func (cs *Costs) Booked(w *gate.Waiter, cost units.Vec) ([]fleetapi.Cost, error) {
	if err := cs.tooLarge(w, cost); err != nil {
		return nil, err
	}
	return cs.fleetCosts(cost), nil
}

// sizeLocked returns cost as its part of the quotas, for its tenant's
// share of the queue (see gate.Place.Size): the largest of its amounts
// over their buckets' limits, so that tenants share tokens and points,
// not calls (a tenant's call of 10,000 tokens weighs ten of 1,000); 0
// (a turn) while no limit it takes from is known. It requires cs.mu
// held.
func (cs *Costs) sizeLocked(cost units.Vec) float64 {
	size := 0.0
	for u, b := range cs.units {
		if b.known && b.limit > 0 && cost[u] > 0 {
			size = max(size, cost[u]/b.limit)
		}
	}
	return size
}
