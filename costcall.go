package polite

import (
	"bytes"
	"container/list"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/signals"
)

// estimateCost sets the call's cost, stated on its context or told by the
// WithCost Estimator, and adds the Estimator's scope to its key. It
// returns the Estimator's error, wrapped.
func (c *call) estimateCost() error {
	stated, ok := c.ctx.Value(costKey{}).(Cost)
	est := c.t.cfg.estimate
	if !ok && est == nil && !c.t.cfg.costs {
		return nil
	}
	cc := &callCost{}
	if ok {
		cc.cost = costOf(stated)
	}
	if est != nil {
		cost, scope, err := est(c.req, c.estimateBody())
		if err != nil {
			return fmt.Errorf("polite: estimating the cost of a request to %q: %w", c.key, err)
		}
		if !ok {
			cc.cost = costOf(cost)
		}
		if scope != "" {
			c.key += "|" + scope
		}
	}
	cc.costly = !cc.cost.zero()
	c.cost = cc
	return nil
}

// estimateBody returns the request's body for its Estimator, read through
// GetBody: nil without a body, without GetBody, or past MaxEstimateBody.
func (c *call) estimateBody() []byte {
	req := c.req
	if req.Body == nil || req.Body == http.NoBody || req.GetBody == nil {
		return nil
	}
	rc, err := req.GetBody()
	if err != nil || rc == nil {
		return nil
	}
	defer rc.Close()
	var buf bytes.Buffer
	if n := req.ContentLength; n > 0 && n <= MaxEstimateBody {
		buf.Grow(int(n))
	}
	if _, err := io.CopyN(&buf, rc, MaxEstimateBody+1); err != nil && err != io.EOF || buf.Len() > MaxEstimateBody {
		return nil
	}
	return buf.Bytes()
}

// costing reports whether requests may cost more than a request: a
// WithCost Estimator, or a WithQuota. New sets cfg.costs by it.
func (cfg *config) costing() bool {
	return cfg.estimate != nil || cfg.quotas != [numUnits]configuredQuota{}
}

// costs returns the key's cost state, making it if needed.
func (ks *keyState) costs(cfg *config, now time.Time) *costState {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	x := ks.extraLocked()
	if x.costs == nil {
		x.costs = newCostState(cfg, now)
	}
	return x.costs
}

// costState returns the key's cost state, or nil if it has none.
func (ks *keyState) costState() *costState {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.extra == nil {
		return nil
	}
	return ks.extra.costs
}

// admitCost returns when every bucket of the call's key holds the call's
// cost, taken for the attempt (c.hold), the calls that came first served
// first. It fails at once with a *CostError if the cost is larger than the
// server's limit in some unit, and with a *ThrottledError if the wait at
// the quotas' rates would not end before the deadline.
func (c *call) admitCost() error {
	cc := c.cost
	if cc == nil || !cc.costly {
		return nil
	}
	now := time.Now()
	cs := c.need().costs(&c.t.cfg, now)
	if cc.booked { // the fleet had the send wait for its turn
		cc.hold = cs.takeBooked(now, cc.cost, c.t.cfg.fleet, c.key)
		return nil
	}
	if err := c.costTooLarge(cs); err != nil {
		return err
	}
	cs.mu.Lock()
	if cs.queue.Len() == 0 && !cs.heldLocked(cc.cost) && cs.fitsLocked(now, cc.cost) {
		cc.hold = cs.takeLocked(now, cc.cost)
		cs.mu.Unlock()
		return nil
	}
	// A retry keeps its call's place: every call queued now came after it
	// (it was at the head when its first attempt was admitted), so it goes
	// first, and waits for its own cost alone.
	w := &costWaiter{wake: make(chan struct{}, 1), cost: cc.cost}
	var judged time.Duration
	var e *list.Element
	if c.attempt > 1 {
		judged = cs.waitLocked(now, cc.cost)
		e = cs.queue.PushFront(w)
	} else {
		judged = cs.waitLocked(now, cs.queuedLocked(cc.cost))
		e = cs.queue.PushBack(w)
	}
	cs.mu.Unlock()
	taken := false
	defer func() {
		if !taken { // refused, given up, or a panic in a hook: give the place up
			cs.mu.Lock()
			head := cs.queue.Front() == e
			cs.queue.Remove(e)
			if head {
				cs.wakeHeadLocked()
			}
			cs.mu.Unlock()
		}
	}()
	if judged > 0 {
		if err := c.refuse(judged, now, false); err != nil {
			return err
		}
		c.waitingFor(judged, WaitCost, false)
	}
	for {
		sleepFor := time.Duration(-1) // not the head: until woken
		now = time.Now()
		cs.mu.Lock()
		if cs.queue.Front() == e && !cs.heldLocked(cc.cost) {
			// The limit may have become known while the call waited.
			if u, limit, ok := cs.tooLargeLocked(cc.cost); ok {
				cs.mu.Unlock()
				return c.refuseCost(u, limit)
			}
			if cs.fitsLocked(now, cc.cost) {
				cs.queue.Remove(e)
				cc.hold = cs.takeLocked(now, cc.cost)
				taken = true
				cs.wakeHeadLocked() // the next may fit too
				cs.mu.Unlock()
				return nil
			}
			sleepFor = cs.waitLocked(now, cc.cost)
			if sleepFor < 0 {
				sleepFor = time.Second // a renewal not known yet: look again
			}
			sleepFor = max(sleepFor, time.Millisecond)
		}
		cs.mu.Unlock()
		if sleepFor >= 0 {
			if deadline, ok := c.ctx.Deadline(); ok && !now.Add(sleepFor).Before(deadline) {
				if err := c.refuse(sleepFor, now, false); err != nil {
					return err
				}
			}
		}
		if err := sleepOrWake(c.ctx, sleepFor, w.wake); err != nil {
			return err
		}
	}
}

// costTooLarge returns a *CostError if the call's cost is larger than the
// server's limit in some unit of cs, its key's cost state.
func (c *call) costTooLarge(cs *costState) error {
	u, limit, ok := cs.tooLarge(c.cost.cost)
	if !ok {
		return nil
	}
	return c.refuseCost(u, limit)
}

// refuseCost returns the *CostError of the call, whose cost is larger than
// limit in unit u, and reports it.
func (c *call) refuseCost(u unit, limit float64) error {
	err := &CostError{Key: c.key, Unit: u.String(), Cost: c.cost.cost[u], Limit: limit}
	c.t.tooLarge(c.event(nil, err), err)
	return err
}

// fleetCosts returns what the fleet books of the call's cost with its
// send, after checking that it is not too large; nil if nothing.
func (c *call) fleetCosts(ks *keyState) ([]fleetapi.Cost, error) {
	cc := c.cost
	if cc == nil || !cc.costly {
		return nil, nil
	}
	cc.booked = false
	cs := ks.costs(&c.t.cfg, time.Now())
	if err := c.costTooLarge(cs); err != nil {
		return nil, err
	}
	return cs.fleetCosts(cc.cost), nil
}

// judgeCost tells the key's cost state what an attempt's answer says: a
// throttle gives back the cost it took (the server did not admit it);
// the quotas the headers state set the buckets; and a response handed on
// carries the cost to be settled when its body is done with.
func (c *call) judgeCost(resp *http.Response, s *signals.Signals, throttled bool, now time.Time) {
	h := c.cost.hold
	c.cost.hold = nil
	var cs *costState
	var sent costMark
	var own costVec
	var ownSeq uint64
	if h != nil {
		cs, sent, own, ownSeq = h.cs, h.mark, h.cost, h.mark.seq
		if throttled {
			cs.retract(h)
			own = costVec{}
		} else {
			cs.answered(h, now)
		}
	} else if len(s.Quotas) > 0 && c.t.cfg.costs {
		if ks := c.state(); ks != nil {
			cs, sent = ks.costs(&c.t.cfg, now), c.cost.sent
		}
	}
	if cs == nil {
		return
	}
	cs.sync(now, sent, s.Quotas, own, ownSeq, c.t.cfg.fleet, c.key)
	cs.hear(h) // once the quotas it states are known
	if !throttled && h != nil && resp != nil && resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = newCostBody(resp, h, c.t.cfg.usage) // with no body, the estimate stands
	}
}

// costBody settles its request's cost when the caller is done with the
// response's body: read to the end, or closed. With a UsageReader it keeps
// the body's last MaxUsageTail bytes for it.
type costBody struct {
	io.ReadCloser
	resp *http.Response
	hold *costHold
	read UsageReader // nil: the estimate stands, unless Settle tells

	mu   sync.Mutex // guards tail and done: Close may come while Read runs
	tail []byte
	done bool // the tail was read, or the caller settled
}

// newCostBody returns resp's body wrapped to settle h.
func newCostBody(resp *http.Response, h *costHold, read UsageReader) io.ReadCloser {
	return &costBody{ReadCloser: resp.Body, resp: resp, hold: h, read: read}
}

func (b *costBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.read != nil && n > 0 {
		b.mu.Lock()
		if !b.done {
			b.keep(p[:n])
		}
		b.mu.Unlock()
	}
	if err == io.EOF {
		b.finish()
	}
	return n, err
}

func (b *costBody) Close() error {
	err := b.ReadCloser.Close()
	b.finish()
	return err
}

// keep adds p to the tail, keeping at most 2·MaxUsageTail bytes. It
// requires b.mu held.
func (b *costBody) keep(p []byte) {
	if len(p) >= MaxUsageTail {
		b.tail = append(b.tail[:0], p[len(p)-MaxUsageTail:]...)
		return
	}
	if len(b.tail)+len(p) > 2*MaxUsageTail {
		n := copy(b.tail, b.tail[len(b.tail)-(MaxUsageTail-len(p)):])
		b.tail = b.tail[:n]
	}
	b.tail = append(b.tail, p...)
}

// finish reads the usage from the tail, once, and settles the cost by it.
func (b *costBody) finish() {
	if b.read == nil {
		return
	}
	b.mu.Lock()
	tail, done := b.tail, b.done
	b.tail, b.done = nil, true
	b.mu.Unlock()
	if done {
		return
	}
	if len(tail) > MaxUsageTail {
		tail = tail[len(tail)-MaxUsageTail:]
	}
	u, ok := b.read(b.resp, tail)
	if !ok {
		return
	}
	now := time.Now()
	h := b.hold
	h.cs.give(h, costOf(u.Cost), now)
	// The quotas a body states count what it cost, and nothing taken
	// before now is missing from them; the settlements of the requests
	// answered near it may be, or not (see bodyMark).
	h.cs.sync(now, h.cs.bodyMark(h, now), internalQuotas(u.Quotas), costVec{}, h.mark.seq, h.fleet, h.key)
}

// settle settles the cost to actual, as the caller tells it (told), and
// reports whether it did: not if it was settled before.
func (b *costBody) settle(actual costVec, told bool) bool {
	if told {
		b.mu.Lock()
		b.tail, b.done = nil, true // the UsageReader need not read it
		b.mu.Unlock()
	}
	return b.hold.cs.give(b.hold, actual, time.Now())
}
