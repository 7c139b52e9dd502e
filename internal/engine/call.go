package engine

import (
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/pace"
	"github.com/politehttp/polite/internal/quota"
	"github.com/politehttp/polite/internal/registry"
	"github.com/politehttp/polite/internal/robots"
	"github.com/politehttp/polite/internal/units"
)

// A Call is one call's attempts at a key, as the engine sees them: what
// the call is (set by the edge), the key's state it holds, and the
// permits of the attempt in flight. The gates give an attempt its permits
// (admit.go); they are given back in one place, Drop, or by the answer
// (judge.go), never by the edge. A Call is not safe for concurrent use;
// the edge makes one for each call and reuses it for each attempt.
type Call struct {
	// Waiter is how the attempt waits; Who.Key is the call's key and
	// Who.Attempt its attempt, 1 for the first.
	gate.Waiter
	Host  string // the server's host: the buckets it names are its own
	Route string // the request's route (its path): a named bucket counts the routes it was named for
	Site  string // the key of the host's robots.txt (scheme://host), under CrawlDelay
	// Cost is what the call costs besides its requests, and Costed that
	// the call counts costs at all (one was stated, or the edge estimates
	// or configures them).
	Cost   units.Vec
	Costed bool

	k       *Key               // the key's state, once it has one; held until Release
	ctl     control.Controller // the key's controller, found with k; nil under KindOff
	sh      *registry.Shard[Key]
	rotated int64
	site    *robots.Site

	// The permits of the attempt in flight, in the order of the gates
	// that gave them.
	start  *pace.Bucket           // the key's bucket whose first contact counts it unanswered (see pace.Bucket.Unsent)
	quota  *quota.Quota           // the request quota it counts in flight against
	sent   uint64                 // the number it was sent as in quota (quota.Sending)
	hold   *quota.Hold            // what it took of the quotas in other units
	slot   *pace.Slots            // the slot it holds among the key's requests in flight
	gen    uint64                 // the fleet's controller generation it was booked under
	shared bool                   // the fleet's shared controller paced it
	alone  bool                   // the fleet could not answer, and the process paced it alone
	line   *gate.Ticket[struct{}] // its place in its key's fleet line, while it holds it (see admitFleet)
	booked bool                   // the fleet booked its cost with its send

	// What the attempt's sending told (see Sending).
	mark     control.Mark  // what the key's controller said as it was sent
	sentAt   time.Duration // when it was sent, since the engine's epoch, if its controller times round trips; else 0
	costSent quota.Mark    // the moment of the key's cost ledger, if it took no cost
}

// costly reports whether the call counts costs and costs something.
func (c *Call) costly() bool { return c.Costed && !c.Cost.Zero() }

// Release ends the call's hold on its key's state; the edge calls it once
// the call is over (a slot its response's body holds keeps the key on its
// own).
func (c *Call) Release() {
	if c.k != nil {
		c.k.Release()
	}
}

// state returns the state of the call's key, or nil if the key needs none
// yet.
func (c *Call) state(e *Engine) *Key {
	if c.k == nil {
		c.found(e, false)
	}
	return c.k
}

// need returns the state of the call's key, making it if needed.
func (c *Call) need(e *Engine) *Key {
	if c.k == nil {
		c.found(e, true)
	}
	return c.k
}

// found looks the call's key's state up (see Engine.Lookup), with its
// controller, which a key keeps for its life.
func (c *Call) found(e *Engine, need bool) {
	c.k, c.sh, c.rotated = e.Lookup(c.Who.Key, need)
	if c.k != nil {
		c.ctl = c.k.controller(e.cfg.Kind)
	}
}

// Drop gives back what the attempt in flight holds, for an attempt that
// is not sent, or a call a panic ended: its place in the server's quota,
// the cost it took, its slot. Its places in the gates' queues, and the
// sends its waits booked, are given back by the gates that took them.
func (c *Call) Drop() {
	if c.start != nil {
		c.start.Unsent()
		c.start = nil
	}
	if c.slot != nil {
		c.slot.Release()
		c.slot = nil
	}
	if c.hold != nil {
		c.hold.Drop()
		c.hold = nil
	}
	if c.quota != nil {
		c.quota.Answered()
		c.quota = nil
	}
}

// pace admits the call's attempt through its key's bucket, and holds the
// first contact's count of it, if the bucket took one, as a permit (see
// Call.Drop).
func (e *Engine) pace(c *Call, k *Key) error {
	ceiling, _ := e.Ceiling()
	unheard, err := k.pace.Admit(&c.Waiter, c.ctl, ceiling, &k.calls)
	if unheard {
		c.start = &k.pace
	}
	return err
}

// Sending records that the attempt is sent now: what the key's
// controller says of the moment, and the moment of its cost ledger.
func (c *Call) Sending(e *Engine) {
	c.start = nil // sent: its answer, or the server's silence, counts
	if c.k != nil {
		c.k.sent.Add(1)
	}
	c.mark, c.sentAt = control.NoMark, 0
	c.sent = 0
	if c.quota != nil {
		c.sent = c.quota.Sending()
	}
	if ctl := c.ctl; ctl != nil {
		c.mark = ctl.Sending()
		if ctl.Timed() || c.k.pace.Starting() {
			c.sentAt = max(time.Since(e.epoch), 1)
		}
	}
	if c.Costed && c.hold == nil && e.cfg.Costs {
		c.costSent = quota.Mark{}
		if k := c.state(e); k != nil {
			if cs := peek(k, costsPart); cs != nil {
				c.costSent = cs.Sent(time.Now())
			}
		}
	}
}

// Slot returns the slot the attempt holds, if any, and lets go of it: the
// edge gives it back once the attempt's response is done with.
func (c *Call) Slot() *pace.Slots {
	s := c.slot
	c.slot = nil
	return s
}
