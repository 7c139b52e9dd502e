package quota

import (
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/signals"
	"github.com/politehttp/polite/internal/units"
)

// What an attempt took of its key's quotas in units other than requests
// (a Hold) is given back, in part or whole, by what became of it:
// dropped unsent (Drop), refused or lost on its way (Failed), answered
// (Answer), and settled once its response's body said what it cost
// (Settle, SettleUsage).

// Drop gives back all h took, for an attempt that was not sent.
func (h *Hold) Drop() { h.cs.retract(h) }

// Failed tells h of an attempt that got no answer: if it never reached
// the server (unprocessed), nothing was spent and all of it goes back;
// otherwise the estimate stands. Either way, another attempt may make the
// key's first contact.
func (h *Hold) Failed(unprocessed bool) {
	if unprocessed {
		h.cs.retract(h)
		return
	}
	h.cs.unprobe(h)
}

// Answer tells h of the answer to its attempt, received at now: a
// throttle gives back what it took (the server did not admit it), and
// the quotas the answer states (quotas) set the buckets. Under a fleet
// (f, the key in it), the bounds the reading sets are told to it.
func (h *Hold) Answer(now time.Time, throttled bool, quotas []signals.Quota, f fleetapi.Fleet, key string) {
	cs, own := h.cs, h.cost
	if throttled {
		cs.retract(h)
		own = units.Vec{}
	} else {
		cs.answered(h, now)
	}
	cs.sync(now, h.mark, quotas, own, h.mark.seq, f, key)
	cs.hear(h) // once the quotas it states are known
}

// Answer tells cs of an answer received at now to an attempt that took no
// cost, sent at sent (see Sent), whose quotas set the buckets.
func (cs *Costs) Answer(now time.Time, sent Mark, quotas []signals.Quota, f fleetapi.Fleet, key string) {
	cs.sync(now, sent, quotas, units.Vec{}, 0, f, key)
	cs.hear(nil)
}

// Sent returns the moment now of the key's ledger, for an attempt that
// took no cost and is sent now.
func (cs *Costs) Sent(now time.Time) Mark { return cs.mark(now) }

// Settle settles h to actual at now, what the attempt actually cost: what
// it took less actual goes back to the buckets (a surcharge if actual is
// more). It reports false if h was settled before.
func (h *Hold) Settle(actual units.Vec, now time.Time) bool { return h.cs.give(h, actual, now) }

// SettleUsage settles h to actual at now, as its response's body said,
// with the quotas the body states: they count what it cost, and nothing
// taken before now is missing from them; the settlements of the requests
// answered near it may be, or not (see bodyMark).
func (h *Hold) SettleUsage(actual units.Vec, quotas []signals.Quota, now time.Time) {
	h.cs.give(h, actual, now)
	h.cs.sync(now, h.cs.bodyMark(h, now), quotas, units.Vec{}, h.mark.seq, h.fleet, h.key)
}

// TakeBooked takes cost at now for a send a fleet booked it with (f, the
// key in it), and returns the hold: no wait, the fleet had the send wait
// its turn.
func (cs *Costs) TakeBooked(now time.Time, cost units.Vec, f fleetapi.Fleet, key string) *Hold {
	return cs.takeBooked(now, cost, f, key)
}
