package polite

import (
	"container/list"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// A slot is the right of one request to be out to a key's server, under
// WithMaxInFlight: a request holds it from just before it is sent until its
// response is done with (its body read to the end or closed, or the
// response discarded), or until it fails. A robots.txt fetch under
// WithCrawlDelay holds one of its call's key for as long as the fetch
// lasts. Calls that find every slot taken wait in order; a slot freed goes
// straight to the first of them.

// slotWaiter is a call waiting for a slot.
type slotWaiter struct {
	wake    chan struct{}
	granted bool // a slot was handed over; guarded by the key's mu
}

// acquireSlot returns when the call holds one of its key's slots for its
// attempt, if the Transport caps requests in flight. It waits as long as
// its context allows: how long a slot takes to free is not known in
// advance.
func (c *call) acquireSlot() error {
	return c.takeSlot(&c.slot)
}

// takeSlot returns when the call holds one of its key's slots, if the
// Transport caps requests in flight, for a request it sends: its attempt,
// or a robots.txt fetch. It sets *held to the key's state as soon as it
// holds the slot (before it tells of its wait, which runs hooks), so that
// the slot is freed whatever happens next: releaseSlot(*held) is the
// holder's to call. It waits as long as the call's context allows.
func (c *call) takeSlot(held **keyState) error {
	limit := c.t.cfg.maxInFlight
	ks := c.state()
	if limit <= 0 || ks == nil {
		return nil
	}
	ks.mu.Lock()
	x := ks.extraLocked()
	if x.inflight < limit && (x.slotQueue == nil || x.slotQueue.Len() == 0) {
		x.inflight++
		ks.mu.Unlock()
		*held = ks
		return nil
	}
	if x.slotQueue == nil {
		x.slotQueue = list.New()
	}
	w := &slotWaiter{wake: make(chan struct{}, 1)}
	e := x.slotQueue.PushBack(w)
	ks.mu.Unlock()
	var start time.Time
	if c.t.listening() {
		start = time.Now()
	}
	select {
	case <-w.wake:
		*held = ks
		if !start.IsZero() { // a slot's wait has no known length: told once over
			c.waitingFor(time.Since(start), WaitSlot, false)
		}
		return nil
	case <-c.ctx.Done():
		ks.mu.Lock()
		granted := w.granted
		if !granted {
			x.slotQueue.Remove(e)
		}
		ks.mu.Unlock()
		if granted {
			releaseSlot(ks) // handed over as the call gave up: pass it on
		}
		if !start.IsZero() {
			c.waitingFor(time.Since(start), WaitSlot, false)
		}
		return c.ctx.Err()
	}
}

// releaseSlot frees a slot of ks, handing it to the first waiting call if
// there is one.
func releaseSlot(ks *keyState) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	x := ks.extra
	if x.slotQueue != nil {
		if e := x.slotQueue.Front(); e != nil {
			w := x.slotQueue.Remove(e).(*slotWaiter)
			w.granted = true
			w.wake <- struct{}{}
			return
		}
	}
	x.inflight--
}

// releaseSlotAfter frees the call's slot now if the attempt produced no
// response to hand back, or when the caller is done with the response's
// body otherwise.
func (c *call) releaseSlotAfter(resp *http.Response) {
	ks := c.slot
	if ks == nil {
		return
	}
	c.slot = nil
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		releaseSlot(ks)
		return
	}
	resp.Body = &slotBody{ReadCloser: resp.Body, ks: ks}
}

// slotBody frees its request's slot when read to the end, or closed.
type slotBody struct {
	io.ReadCloser
	ks   *keyState
	done atomic.Bool
}

func (b *slotBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func (b *slotBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

func (b *slotBody) release() {
	if b.done.CompareAndSwap(false, true) {
		releaseSlot(b.ks)
	}
}
