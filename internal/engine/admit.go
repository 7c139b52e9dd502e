package engine

import (
	"time"

	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/pace"
)

// Admit returns when every gate lets the call's next attempt go, in this
// order:
//
//  1. robots: the host's robots.txt is known and does not put the host
//     off limits (under CrawlDelay; one attempt fetches it, through the
//     edge, and the others wait);
//  2. pacing: with a fleet, the fleet's booking of the send (fleet.go);
//     without one, the key's bucket (its rate, its server's pause, its
//     first contact), the bucket of every key together (WithGlobalRate),
//     and the key's window (WithWindow);
//  3. spacing: the host's Crawl-delay since its last request (under
//     CrawlDelay);
//  4. quotas: the server's quota in requests, spread over what is left of
//     its window, then its quotas in every other unit the attempt costs,
//     first come first served;
//  5. slots: a place among the key's requests in flight (MaxInFlight).
//
// Each gate waits through the call's Waiter: a wait that cannot end in
// time is refused at once, with the edge's error. A gate that admits the
// attempt may give it a permit (its place in the server's quota, its
// cost, its slot), which the call holds until the attempt is answered or
// dropped; if a later gate refuses the attempt, or its context ends while
// it waits, Admit drops every permit the earlier gates gave.
//
// The gates are called in a fixed sequence, each a method of its
// mechanism, rather than through a list of interfaces: a call through an
// interface would move each call's state to the heap.
func (e *Engine) Admit(c *Call) error {
	c.gen, c.shared, c.booked, c.alone = 0, false, false, false
	if err := e.admit(c); err != nil {
		c.Drop()
		if c.k != nil {
			c.k.partsOf().failed.Add(1)
			e.failed.Add(1)
		}
		return err
	}
	return nil
}

// admit runs the gates of Admit.
func (e *Engine) admit(c *Call) error {
	if e.sites != nil {
		if err := e.admitSite(c); err != nil {
			return err
		}
	}
	if e.cfg.Fleet != nil {
		if err := e.admitFleet(c); err != nil {
			return err
		}
	} else if err := e.admitLocal(c); err != nil {
		return err
	}
	if e.sites != nil {
		if err := c.site.Space(&c.Waiter, e.cfg.SpacingJitter, e.cfg.Random); err != nil {
			return err
		}
	}
	if err := e.admitQuotas(c); err != nil {
		return err
	}
	if e.cfg.MaxInFlight > 0 {
		return e.admitSlot(c)
	}
	return nil
}

// admitSite is the robots gate: the host's robots.txt, fetched through
// the edge (Config.FetchRobots) by the first attempt that needs it.
func (e *Engine) admitSite(c *Call) error {
	now := time.Now()
	if c.site == nil { // a retry has it already
		c.site = e.sites.Use(c.Site, now)
	}
	return c.site.Admit(&c.Waiter, now, func() (time.Duration, error, error) { return e.fetchRobots(c) })
}

// fetchRobots fetches robots.txt for the call through the edge. The fetch
// is a request to the key's server: under MaxInFlight it takes one of the
// key's slots, as an attempt does, waiting for it if the key has none
// free, and holds it until the fetch ends.
func (e *Engine) fetchRobots(c *Call) (delay time.Duration, offLimits, err error) {
	if e.cfg.MaxInFlight > 0 {
		if k := c.state(e); k != nil {
			var slot *pace.Slots
			defer func() {
				if slot != nil {
					slot.Release()
				}
			}()
			if err := e.takeSlot(c, k, &slot); err != nil {
				return 0, nil, err
			}
		}
	}
	return e.cfg.FetchRobots(c.Who)
}

// admitLocal is the pacing gate without a fleet: the key's bucket, the
// global bucket, the key's window.
func (e *Engine) admitLocal(c *Call) error {
	ceiling, _ := e.Ceiling()
	if k := c.state(e); k != nil {
		if err := e.pace(c, k); err != nil {
			return err
		}
	}
	if g := e.global; g != nil {
		if _, err := g.pace.Admit(&c.Waiter, nil, ceiling, &g.calls); err != nil {
			return err
		}
	}
	if w := e.cfg.Window; w.N > 0 {
		return part(c.need(e), windowPart, newOf[pace.Window]()).Admit(&c.Waiter, w.N, w.Per+WindowGuard)
	}
	return nil
}

// admitQuotas is the gate of the server's quotas: in requests (the key's
// own, or the bucket its server named for the call's route), then in
// every other unit the call costs.
func (e *Engine) admitQuotas(c *Call) error {
	k := c.state(e)
	if k == nil {
		if !c.costly() {
			return nil
		}
		// A call with a cost is held to the quotas from the first: a
		// quota configured (WithQuota) is known before any answer, and a
		// key with no state of its own let every call through it (30
		// calls of 1,000 tokens at once, under 10,000 a second).
		k = c.need(e)
	}
	if q := k.quotaFor(c.Route); q != nil {
		// In a fleet the quota's rate paces the whole fleet through its
		// store; while the store cannot answer, the quota paces this
		// process's share itself.
		if err := q.Admit(&c.Waiter, e.share(k), e.cfg.Fleet != nil && !c.alone); err != nil {
			return err
		}
		c.quota = q
	}
	if !c.costly() {
		return nil
	}
	now := time.Now()
	cs := e.costs(c.need(e), now)
	if c.booked { // the fleet had the send wait for its turn
		c.hold = cs.TakeBooked(now, c.Cost, e.cfg.Fleet, c.Who.Key)
		return nil
	}
	h, err := cs.Admit(&c.Waiter, c.Cost, c.Who.Attempt > 1)
	if err != nil {
		return err
	}
	c.hold = h
	return nil
}

// admitSlot is the gate of the key's requests in flight: it returns when
// the attempt holds one of the key's slots (c.slot).
func (e *Engine) admitSlot(c *Call) error {
	k := c.state(e)
	if k == nil {
		return nil
	}
	return e.takeSlot(c, k, &c.slot)
}

// takeSlot takes one of k's slots for c, waiting as long as c's context
// allows (how long a slot takes to free is not known in advance), and
// tells the wait. It sets *held to the slots it took one of before it
// tells the wait, which runs the edge's hooks: whoever holds *held gives
// the slot back.
func (e *Engine) takeSlot(c *Call, k *Key, held **pace.Slots) error {
	slots := part(k, slotsPart, newOf[pace.Slots]())
	waited, err := slots.Take(&c.Waiter, e.cfg.MaxInFlight)
	if err == nil {
		*held = slots
	}
	c.Tell(waited, gate.Slot, false) // a slot's wait has no known length: told once over
	return err
}
