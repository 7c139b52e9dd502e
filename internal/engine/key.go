package engine

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/fleetgate"
	"github.com/politehttp/polite/internal/pace"
	"github.com/politehttp/polite/internal/quota"
)

// A Key is the state of one key: one part for each mechanism, each
// reached through its own methods, under its own lock. Every key has its
// bucket and its controller; the parts few keys need (a quota its server
// reported, costs, a window, slots, a fleet's, what it told a memory) are
// made when first needed, each once, and never replaced.
//
// A crawler holds one Key per host, so it is kept small: one allocation,
// 224 bytes (the default controller lives inside it).
type Key struct {
	pace  pace.Bucket
	calls atomic.Int32 // calls holding the key (see Engine.Lookup): while one does, it is not forgotten
	// sent counts the attempts sent, for the key's status (see Counts);
	// it wraps. It sits beside calls, on one cache line, in what was
	// calls' padding: a status page walks a million keys reading both.
	sent  atomic.Uint32
	parts atomic.Pointer[parts] // what few keys need; nil until needed
	ctl   control.Cell          // the key's controller, if Gentle
}

// Counts returns the attempts sent to k's server, those it throttled and
// those refused before they were sent, since k was made: counters that
// wrap, read apart from each other, for a status that takes their
// differences over time.
func (k *Key) Counts() (sent, refused, failed uint32) {
	sent = k.sent.Load()
	if p := k.parts.Load(); p != nil {
		refused, failed = p.refused.Load(), p.failed.Load()
	}
	return sent, refused, failed
}

// Sent returns the attempts sent to k's server since k was made; it
// wraps (see Counts).
func (k *Key) Sent() uint32 { return k.sent.Load() }

// Calls returns how many calls hold k now: waiting in its lines, in
// flight, or between attempts.
func (k *Key) Calls() int { return int(k.calls.Load()) }

// parts is what few keys need. Each pointer is set once, under mu, and
// read without it.
type parts struct {
	mu     sync.Mutex                    // orders the making of the parts
	other  control.Controller            // the controller, if not Gentle (see control.Kind.Init); set as the key is made
	quota  atomic.Pointer[quota.Quota]   // the quota the server reports, for paths in no named bucket
	routes atomic.Pointer[routes]        // the named buckets the key's paths count against
	costs  atomic.Pointer[quota.Costs]   // the quotas in units other than requests, under WithCost
	window atomic.Pointer[pace.Window]   // the sends booked under WithWindow, without a fleet
	slots  atomic.Pointer[pace.Slots]    // the requests in flight, under WithMaxInFlight
	fleet  atomic.Pointer[fleetgate.Key] // what the key's fleet said and is owed
	memo   atomic.Pointer[memo]          // what the key last told its Memory
	// Attempts the server throttled, and attempts refused before they
	// were sent (a gate's error: a wait too long, a context done, a cost
	// too large, a path off limits), for the key's status (see Counts);
	// each wraps. Here, not in Key: few keys are ever refused.
	refused, failed atomic.Uint32
}

// hold marks k as held by a call, which will release it when it ends.
func (k *Key) hold() { k.calls.Add(1) }

// Release ends a call's hold on k.
func (k *Key) Release() { k.calls.Add(-1) }

// partsOf returns k's parts, making them if needed.
func (k *Key) partsOf() *parts {
	if p := k.parts.Load(); p != nil {
		return p
	}
	k.parts.CompareAndSwap(nil, new(parts))
	return k.parts.Load()
}

// part returns the part *ptr of k's parts, made by make if needed: once,
// whatever calls race for it.
func part[T any](k *Key, ptr func(*parts) *atomic.Pointer[T], make func() *T) *T {
	p := k.partsOf()
	a := ptr(p)
	if v := a.Load(); v != nil {
		return v
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if v := a.Load(); v != nil {
		return v
	}
	v := make()
	a.Store(v)
	return v
}

// peek returns the part *ptr of k's parts; nil if it was never made.
func peek[T any](k *Key, ptr func(*parts) *atomic.Pointer[T]) *T {
	p := k.parts.Load()
	if p == nil {
		return nil
	}
	return ptr(p).Load()
}

// The parts, by name.
func quotaPart(p *parts) *atomic.Pointer[quota.Quota]   { return &p.quota }
func routesPart(p *parts) *atomic.Pointer[routes]       { return &p.routes }
func costsPart(p *parts) *atomic.Pointer[quota.Costs]   { return &p.costs }
func windowPart(p *parts) *atomic.Pointer[pace.Window]  { return &p.window }
func slotsPart(p *parts) *atomic.Pointer[pace.Slots]    { return &p.slots }
func fleetPart(p *parts) *atomic.Pointer[fleetgate.Key] { return &p.fleet }
func memoPart(p *parts) *atomic.Pointer[memo]           { return &p.memo }
func newOf[T any]() func() *T                           { return func() *T { return new(T) } }

// controller returns the key's controller under kind; nil under KindOff.
func (k *Key) controller(kind control.Kind) control.Controller {
	var other control.Controller
	if p := k.parts.Load(); p != nil {
		other = p.other
	}
	return kind.Of(&k.ctl, other)
}

// Gentle returns the key's Gentle, for a test that looks inside it.
func (k *Key) Gentle() *control.Gentle { return k.ctl.Gentle() }

// Bucket returns the key's token bucket, for a test that looks inside it.
func (k *Key) Bucket() *pace.Bucket { return &k.pace }

// busy reports whether forgetting k at now, the present, would lose
// something, though it has been idle: calls hold it (they found it and
// have not ended), or a part of it is busy (a pause or a quota spent until
// later, attempts queued, slots held, sends that still count in its
// window, a bucket not refilled).
func (k *Key) busy(now int64) bool {
	if k.calls.Load() > 0 || k.pace.Busy(now) {
		return true
	}
	p := k.parts.Load()
	if p == nil {
		return false
	}
	if s := p.slots.Load(); s != nil && s.Busy() {
		return true
	}
	if w := p.window.Load(); w != nil && w.Busy(now) {
		return true
	}
	if c := p.costs.Load(); c != nil && c.Busy(now) {
		return true
	}
	return false
}

// quotaFor returns the quota that a request to route counts against, or
// nil if the server has reported none.
func (k *Key) quotaFor(route string) *quota.Quota {
	p := k.parts.Load()
	if p == nil {
		return nil
	}
	if r := p.routes.Load(); r != nil {
		if q := r.get(route); q != nil {
			return q
		}
	}
	return p.quota.Load()
}

// ownQuota returns the key's own quota, making it if needed.
func (k *Key) ownQuota() *quota.Quota { return part(k, quotaPart, newOf[quota.Quota]()) }

// maxRoutes bounds how many routes a key remembers the named bucket of.
const maxRoutes = 256

// routes maps a key's routes to the quotas of the buckets its server
// named for them.
type routes struct {
	mu sync.Mutex
	m  map[string]*quota.Quota
}

// get returns the quota of route's bucket; nil if none was named.
func (r *routes) get(route string) *quota.Quota {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[route]
}

// route records that requests to route count against the bucket quota q.
func (k *Key) route(route string, q *quota.Quota) {
	r := part(k, routesPart, newOf[routes]())
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[route] == q {
		return
	}
	if r.m == nil {
		r.m = make(map[string]*quota.Quota)
	}
	if len(r.m) < maxRoutes || r.m[route] != nil {
		r.m[route] = q
	}
	if own := peek(k, quotaPart); own != nil && own != q {
		q.Adopt(own) // a bucket named for the first time takes what the key's memory kept of its window
	}
}

// quotas returns the quotas the key's server reported: its own first,
// then those of the buckets its server named for its routes (few, though
// many routes may share them), each once.
func (k *Key) quotas() (qs []*quota.Quota, own bool) {
	p := k.parts.Load()
	if p == nil {
		return nil, false
	}
	if q := p.quota.Load(); q != nil {
		qs, own = append(qs, q), true
	}
	if r := p.routes.Load(); r != nil {
		r.mu.Lock()
		for _, q := range r.m {
			if !slices.Contains(qs, q) {
				qs = append(qs, q)
			}
		}
		r.mu.Unlock()
	}
	return qs, own
}

// memo is what a key last told its Memory, or was recalled from it.
type memo struct {
	mu     sync.Mutex
	told   control.Known // the limit, whether stated, and how long it had stood (whole seconds)
	window time.Duration // the window of the stated limit told, if known
	at     int64         // Unix nanoseconds of the telling
	paused int64         // Unix nanoseconds; 0 if none
}
