package gate

import (
	"context"
	"errors"
	"fmt"
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
	a, _ := q.PushBack(1, Place{})
	b, _ := q.PushBack(2, Place{})
	c := q.PushFront(0, 0)
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

// A queue orders its tickets by priority, then arrival: an attempt joins
// behind every other of its priority or higher and ahead of the lower
// ones, and learns how many wait ahead of it; a retry (PushFront) goes
// first of its priority, behind the higher ones. Joining a backlog at its
// own priority walks none of it.
func TestQueueOrdersByPriority(t *testing.T) {
	var q Queue[string]
	order := func() (s []string) {
		for tk := range q.All() {
			s = append(s, tk.Value)
		}
		return s
	}
	const batch, interactive, critical Priority = -1, 1, 2
	for i := range 3 {
		_, ahead := q.PushBack(fmt.Sprint("b", i), Place{Priority: batch})
		assert.Equal(t, i, ahead)
	}
	i0, ahead := q.PushBack("i0", Place{Priority: interactive})
	assert.Zero(t, ahead, "ahead of the batch backlog")
	assert.True(t, q.IsHead(i0))
	_, ahead = q.PushBack("d0", Place{})
	assert.Equal(t, 1, ahead, "behind the interactive one, ahead of the batch")
	_, ahead = q.PushBack("i1", Place{Priority: interactive})
	assert.Equal(t, 1, ahead, "behind the interactive one that came first")
	q.PushFront("retry", 0)
	q.PushFront("c0", critical)
	_, ahead = q.PushBack("b3", Place{Priority: batch})
	assert.Equal(t, 8, ahead)
	assert.Equal(t, []string{"c0", "i0", "i1", "retry", "d0", "b0", "b1", "b2", "b3"}, order())
	require.Equal(t, 9, q.Len())
	var back []string
	for tk := q.tail; tk != nil; tk = tk.prev {
		back = append([]string{tk.Value}, back...)
	}
	assert.Equal(t, order(), back, "linked both ways")
}

// Counts says how many attempts wait at each priority, highest first,
// whatever the order they came in and whoever leaves; AddCount sums the
// counts of two queues, as a key's status sums those of its gates.
func TestQueueCounts(t *testing.T) {
	var q Queue[struct{}]
	assert.Empty(t, q.Counts(nil), "nothing waits")
	const batch, interactive Priority = -20, 20
	var tickets []*Ticket[struct{}]
	for _, p := range []Priority{batch, 0, batch, interactive, batch, 5} {
		tk, _ := q.PushBack(struct{}{}, Place{Priority: p, Tenant: fmt.Sprint("t", p)})
		tickets = append(tickets, tk)
	}
	q.PushFront(struct{}{}, 0)
	assert.Equal(t, []Count{{interactive, 1}, {5, 1}, {0, 2}, {batch, 3}}, q.Counts(nil))
	q.Leave(tickets[3])
	q.Served(q.next())
	assert.Equal(t, []Count{{0, 2}, {batch, 3}}, q.Counts(nil),
		"the interactive one left, the one of priority 5 was served")

	var other Queue[int]
	other.PushBack(1, Place{Priority: interactive})
	other.PushBack(2, Place{Priority: batch})
	counts := other.Counts(q.Counts(nil))
	assert.Equal(t, []Count{{interactive, 1}, {0, 2}, {batch, 4}}, counts)
	assert.Equal(t, []Count{{-40, 1}}, AddCount(nil, -40, 1))
}

// Under a backlog of a higher priority, each lower priority waiting keeps
// a tenth of the turns (Floor), served in its order of arrival; with two
// lower ones, each keeps its tenth (DefaultFloor); one that has nothing waiting earns
// nothing meanwhile. Attempts that give up their place (Leave) take no
// turn.
func TestQueueKeepsAFloorForEachLowerPriority(t *testing.T) {
	var q Queue[string]
	const background, batch, interactive Priority = -40, -20, 20
	for i := range 300 {
		q.PushBack(fmt.Sprint("i", i), Place{Priority: interactive})
		q.PushBack(fmt.Sprint("b", i), Place{Priority: batch})
	}
	serve := func(turns int) (served []string) {
		for range turns {
			h := q.next()
			require.True(t, q.IsHead(h))
			q.Served(h)
			served = append(served, h.Value)
		}
		return served
	}
	served := serve(101)
	assert.Equal(t, []string{"i0", "i1", "i2", "i3", "i4", "i5", "i6", "i7", "i8", "i9", "b0", "i10"}, served[:12], "a turn in every ten, earned over ten")
	count := func(s []string, prefix string) (n int) {
		for _, v := range s {
			if v[:1] == prefix {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 10, count(served, "b"), "batch: a tenth of the turns")
	var order []string
	for _, v := range served {
		if v[:1] == "b" {
			order = append(order, v)
		}
	}
	assert.Equal(t, []string{"b0", "b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9"}, order, "in their order of arrival")

	for i := range 100 {
		q.PushBack(fmt.Sprint("g", i), Place{Priority: background})
	}
	served = serve(200)
	assert.InDelta(t, 20, count(served, "b"), 1, "batch keeps its tenth")
	assert.InDelta(t, 20, count(served, "g"), 1, "and background its own")

	// A lower priority with nothing waiting earns nothing.
	var r Queue[string]
	for i := range 50 {
		r.PushBack(fmt.Sprint("i", i), Place{Priority: interactive})
	}
	for range 40 {
		r.Served(r.next())
	}
	late, _ := r.PushBack("b", Place{Priority: batch})
	assert.False(t, r.IsHead(late), "no turns earned while it was not there")
	gaveUp, _ := r.PushBack("b-gone", Place{Priority: batch})
	r.Leave(gaveUp)
	assert.Equal(t, 11, r.Len())
}

// Within a priority, tenants that all have work waiting get turns in the
// ratio of their weights (1:2:5 here), each in its order of arrival; once
// one has nothing waiting, the others share its turns by their weights;
// a tenant that comes back banks nothing from the time it was away. With
// no tenant, the order is arrival.
func TestQueueSharesAPriorityBetweenTenants(t *testing.T) {
	var q Queue[string]
	weights := map[string]float64{"a": 1, "b": 2, "c": 5}
	for i := range 100 {
		for _, tenant := range []string{"a", "b", "c"} {
			n := i
			if tenant == "c" && i >= 20 {
				continue // c has 20 waiting only
			}
			q.PushBack(fmt.Sprint(tenant, n), Place{Tenant: tenant, Weight: weights[tenant]})
		}
	}
	serve := func(turns int) map[string]int {
		got := map[string]int{}
		last := map[string]int{"a": -1, "b": -1, "c": -1}
		for range turns {
			h := q.next()
			q.Served(h)
			tenant := h.Value[:1]
			got[tenant]++
			var n int
			_, _ = fmt.Sscan(h.Value[1:], &n)
			require.Greater(t, n, last[tenant], "a tenant's own in their order of arrival")
			last[tenant] = n
		}
		return got
	}
	assert.Equal(t, map[string]int{"a": 4, "b": 8, "c": 20}, serve(32), "1:2:5 while all wait")
	assert.Equal(t, map[string]int{"a": 10, "b": 20}, serve(30), "c has nothing waiting: a and b share its turns, 1:2")
	q.PushBack("c20", Place{Tenant: "c", Weight: 5})
	q.PushBack("c21", Place{Tenant: "c", Weight: 5})
	assert.Equal(t, map[string]int{"a": 1, "b": 2, "c": 2}, serve(5), "c back: nothing banked from its absence")

	// Tenants that come, give up their places and never come back leave
	// few ends behind, under a load that never lets the priority empty.
	var churn Queue[int]
	for i := range 2000 {
		churn.PushBack(i, Place{Tenant: "steady"})
		gone, _ := churn.PushBack(i, Place{Tenant: fmt.Sprint("t", i)})
		churn.Leave(gone)
		churn.Served(churn.next())
		churn.PushBack(i, Place{Tenant: "steady"})
	}
	require.Len(t, churn.classes, 1)
	assert.LessOrEqual(t, len(churn.classes[0].ends), 2*churn.Len()+8+1, "ends kept: %d for %d waiting", len(churn.classes[0].ends), churn.Len())

	var plain Queue[int]
	for i := range 5 {
		plain.PushBack(i, Place{})
	}
	var order []int
	for tk := range plain.All() {
		order = append(order, tk.Value)
	}
	assert.Equal(t, []int{0, 1, 2, 3, 4}, order)
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
		a, _ := q.PushBack(struct{}{}, Place{})
		b, _ := q.PushBack(struct{}{}, Place{})
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

// The cost of joining a queue: at one's own place behind a backlog of
// 10,000 attempts of one tenant (O(1)), and as another tenant, whose
// place is near the front (O(n): it walks the backlog it overtakes).
func BenchmarkQueuePushBack(b *testing.B) {
	for _, c := range []struct {
		name   string
		tenant string
	}{{"behind-its-own-backlog", "steady"}, {"ahead-of-another-tenants-backlog", "other"}} {
		b.Run(c.name, func(b *testing.B) {
			var q Queue[int]
			for i := range 10000 {
				q.PushBack(i, Place{Tenant: "steady"})
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				t, _ := q.PushBack(i, Place{Tenant: c.tenant})
				q.Leave(t)
				if c.tenant != "steady" {
					delete(q.classes[0].ends, c.tenant) // a tenant new each time
				}
			}
		})
	}
}

// A lower priority earns toward its floor only while a higher one waits:
// a batch backlog that takes every turn between the calls of an
// interactive trickle banks nothing, and each interactive call that comes
// is the head at once.
func TestQueueBanksNoFloorWhileHighest(t *testing.T) {
	var q Queue[string]
	const batch, interactive Priority = -20, 20
	for i := range 1000 {
		q.PushBack(fmt.Sprint("b", i), Place{Priority: batch})
	}
	for call := range 50 {
		c, _ := q.PushBack(fmt.Sprint("i", call), Place{Priority: interactive})
		require.True(t, q.IsHead(c), "interactive call %d behind a floor turn of the batch", call)
		q.Served(c)
		for range 9 {
			q.Served(q.next())
		}
	}
}

// A priority's Class sets its floor (or none, Strict), or makes the
// priorities that have weights share the turns by them: all backlogged,
// in the ratio of their weights, the highest taking the rest (each lower
// one's first turn comes once it has earned it: a turn short at most,
// and the highest as many over).
func TestQueueSharesByEachClass(t *testing.T) {
	const background, batch, interactive Priority = -40, -20, 20
	check := func(name string, n int, classes map[Priority]Class, want map[Priority]int) {
		t.Helper()
		var q Queue[string]
		for range n {
			for p := range want {
				q.PushBack("", Place{Priority: p, Class: classes[p]})
			}
		}
		got := map[Priority]int{}
		for range n {
			h := q.next()
			got[h.prio]++
			q.Served(h)
		}
		for p, w := range want {
			assert.InDelta(t, w, got[p], float64(len(want)-1), "%s: priority %d", name, p)
		}
	}
	check("a floor of a quarter", 100, map[Priority]Class{batch: {Floor: 0.25}}, map[Priority]int{interactive: 75, batch: 25})
	check("strict: no floor", 100, map[Priority]Class{batch: {Strict: true}}, map[Priority]int{interactive: 100, batch: 0})
	check("the default floor", 100, nil, map[Priority]int{interactive: 90, batch: 10})
	check("weights 3:1", 100, map[Priority]Class{interactive: {Weight: 3}, batch: {Weight: 1}}, map[Priority]int{interactive: 75, batch: 25})
	check("weights 3:2:1", 120, map[Priority]Class{interactive: {Weight: 3}, batch: {Weight: 2}, background: {Weight: 1}},
		map[Priority]int{interactive: 60, batch: 40, background: 20})
	check("a lower priority of a higher weight", 100, map[Priority]Class{interactive: {Weight: 1}, batch: {Weight: 3}},
		map[Priority]int{interactive: 25, batch: 75})
}
