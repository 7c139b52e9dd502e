package gate

import (
	"iter"
	"slices"
	"time"
)

// DefaultFloor is the share of a gate's turns each priority below the
// highest one waiting keeps while it has attempts waiting, unless its
// Class says otherwise: a tenth, so that work of a lower priority goes
// on, slowly, under any load of a higher one (see Queue).
const DefaultFloor = 0.1

// maxFloor bounds a class's floor: the highest priority waiting keeps
// something of the turns, however the lower ones are set.
const maxFloor = 0.95

// A Queue is where attempts wait their turn at a gate: in order of
// priority, then of their tenants' fair shares, then arrival (a retry may
// keep its call's place at the front of its priority), but for the floor
// each lower priority keeps. Each
// waiting attempt holds a Ticket; the head of the queue is the one whose
// turn comes next. Unlike waiting on an instant booked ahead, an attempt
// that gives up leaves nothing behind: the tickets after it move up at
// once.
//
// The floor: each priority with attempts waiting, but the highest, earns
// its floor's share of a turn (DefaultFloor, a tenth, unless its Class
// sets another) at every turn the queue serves (Served, Grant), and
// spends a whole one on a turn of its own. Once it has earned a whole
// turn, its first attempt is the head, ahead of the higher ones: under a
// backlog of a higher priority, each lower one waiting gets its floor's
// share of the turns, and none of them starves (but one whose floor is
// set to 0). A priority that has no attempt waiting earns nothing, and
// keeps nothing of what it had earned; nor does one served as the
// highest waiting. Priorities whose Class has a weight share by weight
// instead: each of them, below the highest waiting, has for its floor its
// weight over the weights of all those waiting, so that, all backlogged,
// they take turns in the ratio of their weights, the highest the rest.
//
// The tenants' shares, within a priority: start-time fair queueing. Each
// attempt is tagged with a start, the later of its priority's virtual time
// (the start of the last attempt served there) and the end of its tenant's
// last attempt; its tenant's end moves on by its size (Place.Size: a turn,
// or its cost) over its weight; attempts go in order of their starts,
// then arrival. Tenants that all have work waiting
// get turns in the ratio of their weights; one that has none takes
// nothing, and its share goes to the others (work-conserving); one that
// comes back starts at the virtual time, with nothing banked. The
// attempts of no tenant share as one tenant of weight 1: with no tenants,
// the order is the order of arrival.
//
// Every gate that waits uses this one type, with the value its tickets
// carry (a cost, for the quotas in tokens). A Queue is guarded by the lock
// of the gate that owns it: its methods require that lock held, but for
// Ticket.Wait, which must be called without it. The zero Queue is empty.
type Queue[T any] struct {
	head, tail *Ticket[T]
	n          int
	classes    []class[T] // the priorities with attempts waiting, highest first
}

// A class is the attempts of one priority waiting in a Queue: they stand
// together in it, from first on.
type class[T any] struct {
	prio   Priority
	first  *Ticket[T]
	n      int
	earned float64            // the turns earned toward the floor (see Queue)
	share  Class              // its floor or weight, as its last attempt came with
	vtime  float64            // the start of the last attempt served (see Queue)
	ends   map[string]float64 // the end of each tenant's last attempt, while it may be later than vtime
}

// A Ticket is one attempt's place in a Queue.
type Ticket[T any] struct {
	prev, next *Ticket[T]
	in         bool
	prio       Priority
	start      float64 // its start among the attempts of its priority (see Queue)
	tenant     string
	wake       chan struct{}
	// Granted reports that the gate handed the attempt what it waited for
	// as it left the queue (see Queue.Grant).
	Granted bool
	// Value is what the attempt waits with (its cost, for instance).
	Value T
}

// PushBack queues an attempt that waits with v at pl: behind every other
// of a higher priority, among those of its own by its tenant's share (see
// Queue), and before every one of a lower priority. It returns its ticket
// and its place in that order: the number of attempts that wait ahead of
// it.
func (q *Queue[T]) PushBack(v T, pl Place) (t *Ticket[T], ahead int) {
	c := q.classOf(pl.Priority)
	start := max(c.vtime, c.ends[pl.Tenant])
	if c.ends == nil {
		c.ends = make(map[string]float64, 1)
	}
	c.ends[pl.Tenant] = start + size(pl.Size)/weight(pl.Weight)
	c.share = pl.Class
	t = &Ticket[T]{wake: make(chan struct{}, 1), Value: v, in: true, prio: pl.Priority, start: start, tenant: pl.Tenant}
	after, behind := q.before(pl.Priority, start)
	q.insertAfter(t, after)
	if c = q.classOf(pl.Priority); c.first == nil || c.first == t.next {
		c.first = t
	}
	return t, q.n - 1 - behind
}

// weight returns w as a tenant's weight: 1 if it is no positive finite
// number.
func weight(w float64) float64 {
	if !(w > 0) || w > 1e9 {
		return 1
	}
	return w
}

// size returns s as an attempt's size: 1 if it is no positive finite
// number.
func size(s float64) float64 {
	if !(s > 0) || s > 1e12 {
		return 1
	}
	return s
}

// before returns the ticket after which an attempt of priority p whose
// start is start goes (nil: first), and how many wait behind it.
func (q *Queue[T]) before(p Priority, start float64) (after *Ticket[T], behind int) {
	after, behind = q.lastAtLeast(p)
	for after != nil && after.prio == p && after.start > start {
		after, behind = after.prev, behind+1
	}
	return after, behind
}

// PushFront queues an attempt that waits with v, at priority p, before
// every other of priority p or lower and behind every one of a higher
// priority (a retry that keeps its call's place), and returns its ticket.
func (q *Queue[T]) PushFront(v T, p Priority) *Ticket[T] {
	t := &Ticket[T]{wake: make(chan struct{}, 1), Value: v, in: true, prio: p, start: q.classOf(p).vtime}
	var after *Ticket[T]
	for next := q.head; next != nil && next.prio > p; next = next.next {
		after = next
	}
	q.insertAfter(t, after)
	q.classOf(p).first = t
	return t
}

// Ahead returns how many attempts wait ahead of one that would join at pl
// (see PushBack), as the order of priority and shares has them: the
// floors of the lower priorities may take some turns before it.
func (q *Queue[T]) Ahead(pl Place) int {
	start := 0.0
	for i := range q.classes {
		if c := &q.classes[i]; c.prio == pl.Priority {
			start = max(c.vtime, c.ends[pl.Tenant])
		}
	}
	_, behind := q.before(pl.Priority, start)
	return q.n - behind
}

// lastAtLeast returns the last ticket of priority p or higher (nil if
// none) and how many wait behind it. It walks from the tail, past the
// attempts of a lower priority: a backlog of one priority costs nothing to
// join at its own.
func (q *Queue[T]) lastAtLeast(p Priority) (last *Ticket[T], behind int) {
	last = q.tail
	for last != nil && last.prio < p {
		last, behind = last.prev, behind+1
	}
	return last, behind
}

// insertAfter puts t in the queue right after after (first, if nil), and
// counts it in its class.
func (q *Queue[T]) insertAfter(t, after *Ticket[T]) {
	if after == nil {
		t.next = q.head
		q.head = t
	} else {
		t.prev, t.next = after, after.next
		after.next = t
	}
	if t.next != nil {
		t.next.prev = t
	} else {
		q.tail = t
	}
	q.n++
	q.classOf(t.prio).n++
}

// classOf returns the class of priority p, made (with no attempt) if
// there is none.
func (q *Queue[T]) classOf(p Priority) *class[T] {
	i := 0
	for ; i < len(q.classes) && q.classes[i].prio >= p; i++ {
		if q.classes[i].prio == p {
			return &q.classes[i]
		}
	}
	q.classes = append(q.classes, class[T]{})
	copy(q.classes[i+1:], q.classes[i:])
	q.classes[i] = class[T]{prio: p}
	return &q.classes[i]
}

// served moves c's virtual time on to the start of t, whose turn came,
// and forgets the ends that no longer matter: t's tenant's, if it has
// nothing else waiting, and, once they outnumber the attempts waiting, of
// every tenant that has none (a tenant whose attempts gave up their
// places, say), so that ends kept are few under any churn of tenants.
func (c *class[T]) served(t *Ticket[T]) {
	c.vtime = max(c.vtime, t.start)
	if c.ends[t.tenant] <= c.vtime {
		delete(c.ends, t.tenant) // nothing else waiting: it starts at the virtual time
	}
	if len(c.ends) > 2*c.n+8 {
		for tenant, end := range c.ends {
			if end <= c.vtime {
				delete(c.ends, tenant)
			}
		}
	}
}

// Priority returns the priority t waits at.
func (t *Ticket[T]) Priority() Priority { return t.prio }

// Len returns how many attempts wait.
func (q *Queue[T]) Len() int { return q.n }

// A Count is how many attempts wait at one priority.
type Count struct {
	Priority Priority
	N        int
}

// Counts adds to counts, a list highest priority first (as Counts
// returns it), how many attempts wait in q at each priority, and returns
// the list. It reads what q keeps of each priority waiting, not its
// tickets: the cost is in the priorities, few, not the attempts, and it
// is paid by whoever reads a gate's state, never by an attempt.
func (q *Queue[T]) Counts(counts []Count) []Count {
	for i := range q.classes {
		if c := &q.classes[i]; c.n > 0 {
			counts = AddCount(counts, c.prio, c.n)
		}
	}
	return counts
}

// AddCount adds n attempts waiting at priority p to counts, a list
// highest priority first, and returns the list: the counts of a key's
// several queues, summed.
func AddCount(counts []Count, p Priority, n int) []Count {
	i := 0
	for ; i < len(counts) && counts[i].Priority >= p; i++ {
		if counts[i].Priority == p {
			counts[i].N += n
			return counts
		}
	}
	return slices.Insert(counts, i, Count{Priority: p, N: n})
}

// next returns the attempt whose turn comes next: the first of the
// highest priority that has earned a turn toward its floor, or else the
// first in the queue; nil if none waits.
func (q *Queue[T]) next() *Ticket[T] {
	for i := 1; i < len(q.classes); i++ {
		if q.classes[i].earned >= 1-1e-9 { // ten tenths make a turn, in floating point too
			return q.classes[i].first
		}
	}
	return q.head
}

// floor returns the share of the turns the class at i keeps while higher
// priorities wait (see Queue).
func (q *Queue[T]) floor(i int) float64 {
	c := &q.classes[i]
	if c.share.Weight > 0 {
		sum := 0.0
		for j := range q.classes {
			sum += max(q.classes[j].share.Weight, 0)
		}
		return min(c.share.Weight/sum, maxFloor)
	}
	if c.share.Floor < 0 || c.share.Floor > 0 {
		return min(max(c.share.Floor, 0), maxFloor)
	}
	if c.share.Strict {
		return 0
	}
	return DefaultFloor
}

// IsHead reports whether t is the head of the queue: its turn comes next.
func (q *Queue[T]) IsHead(t *Ticket[T]) bool { return t.in && q.next() == t }

// Remove takes t out of the queue, if it is in it, and reports whether it
// was the head. The new head is not woken (see Leave).
func (q *Queue[T]) Remove(t *Ticket[T]) (head bool) {
	if !t.in {
		return false
	}
	head = q.next() == t
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		q.head = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		q.tail = t.prev
	}
	c := q.classOf(t.prio)
	if c.first == t {
		c.first = t.next
		if t.next != nil && t.next.prio != t.prio {
			c.first = nil
		}
	}
	if c.n--; c.n == 0 {
		// What it had earned, and its tenants' ends, go with it: a
		// priority that comes back starts anew.
		i := len(q.classes) - 1
		for q.classes[i].prio != t.prio {
			i--
		}
		q.classes = append(q.classes[:i], q.classes[i+1:]...)
	}
	t.prev, t.next, t.in = nil, nil, false
	q.n--
	return head
}

// Leave takes t out of the queue, as an attempt that gives up its place,
// and, if it was the head, wakes the new head to look at the gate again.
func (q *Queue[T]) Leave(t *Ticket[T]) {
	if q.Remove(t) {
		q.WakeHead()
	}
}

// Served takes t out of the queue as an attempt whose turn came, counts
// the turn toward the floors (see Queue), and wakes the new head to look
// at the gate again.
func (q *Queue[T]) Served(t *Ticket[T]) {
	if q.serve(t) {
		q.WakeHead()
	}
}

// serve takes t out of the queue as an attempt whose turn came, and
// counts the turn toward the floors; false if t was not in the queue.
func (q *Queue[T]) serve(t *Ticket[T]) bool {
	if !t.in {
		return false
	}
	for i := range q.classes {
		c := &q.classes[i]
		if c.prio == t.prio {
			c.served(t)
		}
		if i == 0 {
			if c.prio == t.prio {
				// Served as the highest waiting: it needs no floor, and
				// banks nothing toward one. Kept, a batch that took every
				// turn between an interactive trickle's calls had earned
				// a tenth of a turn at each of them, and from the tenth
				// on one of them in nine found a batch call ahead of it
				// (0.5-0.7 s behind a large cost on the bench).
				c.earned = 0
			}
			continue
		}
		c.earned += q.floor(i)
		if c.prio == t.prio {
			c.earned = max(c.earned-1, 0)
		}
	}
	q.Remove(t)
	return true
}

// WakeHead signals the head of the queue, if any, to look at the gate
// again: its turn may have come, or its wait changed.
func (q *Queue[T]) WakeHead() {
	if h := q.next(); h != nil {
		select {
		case h.wake <- struct{}{}:
		default: // already signalled
		}
	}
}

// Grant hands the head what it waits for: it leaves the queue, served
// (see Served), Granted, and wakes; no other is woken. It reports false
// if no attempt waits.
func (q *Queue[T]) Grant() bool {
	h := q.next()
	if h == nil {
		return false
	}
	q.serve(h)
	h.Granted = true
	select {
	case h.wake <- struct{}{}:
	default: // signalled already, as the head it had become
	}
	return true
}

// All returns the tickets in the queue, in order of priority, then
// arrival.
func (q *Queue[T]) All() iter.Seq[*Ticket[T]] {
	return func(yield func(*Ticket[T]) bool) {
		for t := q.head; t != nil; t = t.next {
			if !yield(t) {
				return
			}
		}
	}
}

// Wait sleeps for d (until woken, if d < 0), until t is woken (see
// WakeHead and Grant), or until the waiter's context is done, and returns
// nil or the context's cause. It must be called without the gate's lock.
func (t *Ticket[T]) Wait(w *Waiter, d time.Duration) error {
	return sleepOrWake(w.Ctx, d, t.wake)
}
