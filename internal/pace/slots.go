package pace

import (
	"sync"
	"time"

	"github.com/politehttp/polite/internal/gate"
)

// Slots caps a key's requests out at once (WithMaxInFlight): a request
// holds a slot from just before it is sent until its response is done
// with, or until it fails. Attempts that find every slot taken wait in
// order; a slot freed goes straight to the first of them.
type Slots struct {
	mu       sync.Mutex
	inflight int
	queue    gate.Queue[struct{}]
}

// Take returns when the attempt holds one of the key's limit slots, as
// long as its context allows (how long a slot takes to free is not known
// in advance), and how long it waited for it. On an error it holds none.
// A wait is told by the caller once it holds the slot, so that the slot is
// given back whatever the telling does.
func (s *Slots) Take(w *gate.Waiter, limit int) (waited time.Duration, err error) {
	s.mu.Lock()
	if s.inflight < limit && s.queue.Len() == 0 {
		s.inflight++
		s.mu.Unlock()
		return 0, nil
	}
	t, _ := s.queue.PushBack(struct{}{}, w.Place)
	s.mu.Unlock()
	start := time.Now()
	err = t.Wait(w, -1)
	if err == nil {
		return time.Since(start), nil // granted: Release handed it over
	}
	s.mu.Lock()
	granted := t.Granted
	if !granted {
		s.queue.Remove(t)
	}
	s.mu.Unlock()
	if granted {
		s.Release() // handed over as the attempt gave up: pass it on
	}
	return time.Since(start), err
}

// Release frees a slot, handing it to the first waiting attempt if there
// is one.
func (s *Slots) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.queue.Grant() {
		s.inflight--
	}
}

// Busy reports whether forgetting the slots would lose something: requests
// hold slots or wait for one. Slots locked at that moment are in use:
// busy.
func (s *Slots) Busy() bool {
	if !s.mu.TryLock() {
		return true
	}
	defer s.mu.Unlock()
	return s.inflight > 0 || s.queue.Len() > 0
}

// Waiting adds to counts how many attempts wait for a slot at each
// priority (see gate.Queue.Counts), and returns counts.
func (s *Slots) Waiting(counts []gate.Count) []gate.Count {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queue.Counts(counts)
}
