package gate

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heard is a Listener that records what it hears.
type heard struct {
	mu      sync.Mutex
	waits   []time.Duration
	refused []time.Duration // the allowed wait of each refusal
}

var errRefused = errors.New("refused")

func (h *heard) Waiting(_ Who, d time.Duration, _ Cause, _ bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.waits = append(h.waits, d)
}

func (h *heard) Refused(_ Who, _, allowed time.Duration, _ bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refused = append(h.refused, allowed)
	return errRefused
}

func (h *heard) TooLarge(Who, string, float64, float64) error { return errRefused }

func (h *heard) OffLimits(Who, error) {}

// A queue serves its tickets in order: PushFront before the others, the
// head's leaving wakes the next, a ticket that leaves from the middle
// wakes no one, and Grant hands the head what it waits for.
func TestQueueOrder(t *testing.T) {
	var q Queue[int]
	a, b, c := q.PushBack(1), q.PushBack(2), q.PushFront(0)
	require.Equal(t, 3, q.Len())
	var order []int
	for tk := range q.All() {
		order = append(order, tk.Value)
	}
	assert.Equal(t, []int{0, 1, 2}, order)
	assert.True(t, q.IsHead(c))

	q.Leave(a) // from the middle: nobody's turn changed
	assert.Empty(t, b.wake)
	assert.False(t, q.Remove(a), "a ticket out of the queue is not removed twice")
	assert.Equal(t, 2, q.Len())

	q.Leave(c) // the head: the next is woken
	assert.True(t, q.IsHead(b))
	assert.Len(t, b.wake, 1)
	q.WakeHead() // already signalled: no block, no second signal
	assert.Len(t, b.wake, 1)

	<-b.wake
	require.True(t, q.Grant())
	assert.True(t, b.Granted)
	assert.Len(t, b.wake, 1, "granted and woken")
	assert.Zero(t, q.Len())
	assert.False(t, q.Grant(), "nobody waits")
}

// A wait that cannot end before the deadline, or a server's pause longer
// than allowed, is refused with the longest wait allowed; a wait that
// fits is not; a wait of nothing never is.
func TestWaiterRefuses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		h := &heard{}
		w := &Waiter{MaxServerWait: time.Minute, L: h, Who: Who{Ctx: ctx}}
		now := time.Now()
		assert.NoError(t, w.Refuse(9*time.Second, now, false))
		assert.ErrorIs(t, w.Refuse(10*time.Second, now, false), errRefused, "it would end as the deadline passes")
		assert.NoError(t, w.Refuse(0, now, true))
		w.Ctx = t.Context()
		assert.ErrorIs(t, w.Refuse(2*time.Minute, now, true), errRefused, "a pause longer than allowed")
		assert.NoError(t, w.Refuse(2*time.Minute, now, false), "pacing of our own, no deadline")
		assert.Equal(t, []time.Duration{10 * time.Second, time.Minute}, h.refused)
	})
}

// For tells of the wait it makes and sleeps it out; a wait refused, or
// given up as the context ends, gives its place back.
func TestWaiterFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &heard{}
		w := &Waiter{MaxServerWait: time.Minute, L: h, Who: Who{Ctx: t.Context()}}
		start := time.Now()
		given := 0
		require.NoError(t, w.For(time.Second, start, Rate, false, func() { given++ }))
		assert.Equal(t, time.Second, time.Since(start))
		assert.Zero(t, given, "waited: the place is kept")
		assert.Equal(t, []time.Duration{time.Second}, h.waits)

		require.ErrorIs(t, w.For(2*time.Minute, time.Now(), Pause, true, func() { given++ }), errRefused)
		assert.Equal(t, 1, given, "refused: the place is given back")

		ctx, cancel := context.WithCancel(t.Context())
		w.Ctx = ctx
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		require.ErrorIs(t, w.For(time.Hour, time.Now(), Rate, false, func() { given++ }), context.Canceled)
		assert.Equal(t, 2, given, "given up: the place is given back")
	})
}

// A ticket waits until it is woken, or its context ends.
func TestTicketWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var q Queue[struct{}]
		w := &Waiter{L: &heard{}, Who: Who{Ctx: t.Context()}}
		mu.Lock()
		a, b := q.PushBack(struct{}{}), q.PushBack(struct{}{})
		mu.Unlock()
		done := make(chan time.Duration)
		start := time.Now()
		go func() {
			require.NoError(t, b.Wait(w, -1))
			done <- time.Since(start)
		}()
		time.Sleep(time.Second)
		mu.Lock()
		q.Leave(a)
		mu.Unlock()
		assert.Equal(t, time.Second, <-done, "woken as it became the head")
		assert.NoError(t, a.Wait(w, time.Millisecond), "a timed wait ends")
	})
}
