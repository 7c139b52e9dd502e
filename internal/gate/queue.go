package gate

import (
	"iter"
	"time"
)

// A Queue is where attempts wait their turn at a gate, in order of
// arrival (a retry may keep its call's place at the front). Each waiting
// attempt holds a Ticket; the head of the queue is the one whose turn
// comes next. Unlike waiting on an instant booked ahead, an attempt that
// gives up leaves nothing behind: the tickets after it move up at once.
//
// Every gate that waits uses this one type, with the value its tickets
// carry (a cost, for the quotas in tokens). A Queue is guarded by the lock
// of the gate that owns it: its methods require that lock held, but for
// Ticket.Wait, which must be called without it. The zero Queue is empty.
type Queue[T any] struct {
	head, tail *Ticket[T]
	n          int
}

// A Ticket is one attempt's place in a Queue.
type Ticket[T any] struct {
	prev, next *Ticket[T]
	in         bool
	wake       chan struct{}
	// Granted reports that the gate handed the attempt what it waited for
	// as it left the queue (see Queue.Grant).
	Granted bool
	// Value is what the attempt waits with (its cost, for instance).
	Value T
}

// PushBack queues an attempt that waits with v behind every other, and
// returns its ticket.
func (q *Queue[T]) PushBack(v T) *Ticket[T] {
	t := &Ticket[T]{wake: make(chan struct{}, 1), Value: v, in: true}
	if q.tail == nil {
		q.head, q.tail = t, t
	} else {
		t.prev, q.tail.next, q.tail = q.tail, t, t
	}
	q.n++
	return t
}

// PushFront queues an attempt that waits with v before every other (a
// retry that keeps its call's place), and returns its ticket.
func (q *Queue[T]) PushFront(v T) *Ticket[T] {
	t := &Ticket[T]{wake: make(chan struct{}, 1), Value: v, in: true}
	if q.head == nil {
		q.head, q.tail = t, t
	} else {
		t.next, q.head.prev, q.head = q.head, t, t
	}
	q.n++
	return t
}

// Len returns how many attempts wait.
func (q *Queue[T]) Len() int { return q.n }

// IsHead reports whether t is the head of the queue: its turn comes next.
func (q *Queue[T]) IsHead(t *Ticket[T]) bool { return q.head == t }

// Remove takes t out of the queue, if it is in it, and reports whether it
// was the head. The new head is not woken (see Leave).
func (q *Queue[T]) Remove(t *Ticket[T]) (head bool) {
	if !t.in {
		return false
	}
	head = q.head == t
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
	t.prev, t.next, t.in = nil, nil, false
	q.n--
	return head
}

// Leave takes t out of the queue and, if it was the head, wakes the new
// head to look at the gate again.
func (q *Queue[T]) Leave(t *Ticket[T]) {
	if q.Remove(t) {
		q.WakeHead()
	}
}

// WakeHead signals the head of the queue, if any, to look at the gate
// again: its turn may have come, or its wait changed.
func (q *Queue[T]) WakeHead() {
	if h := q.head; h != nil {
		select {
		case h.wake <- struct{}{}:
		default: // already signalled
		}
	}
}

// Grant hands the head what it waits for: it leaves the queue, Granted,
// and wakes. It reports false if no attempt waits.
func (q *Queue[T]) Grant() bool {
	h := q.head
	if h == nil {
		return false
	}
	q.Remove(h)
	h.Granted = true
	h.wake <- struct{}{} // its own, unsignalled: it never blocks
	return true
}

// All returns the tickets in the queue, head first.
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
