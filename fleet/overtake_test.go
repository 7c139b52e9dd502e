package fleet_test

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/politehttp/polite/fleetapi"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Process a has booked 3 s of batch sends ahead (300 at 100 a second);
// process b's interactive calls, one every 200 ms on the scripts' clock,
// each book a slot 5 to 15 ms ahead (the guard of 5 ms, then the next
// slot of the schedule), not 3 s behind the backlog. a hears of each
// overtaking, and its batch sends go an interval later for each one ahead
// of them: every send of the two processes, at the instant it goes, is
// still one interval from the next, as the GCRA booked them.
func TestAnInteractiveCallOvertakesAnotherProcesssBacklog(t *testing.T) {
	a, b, key, clock := backlogged(t)

	var as []fleetapi.Grant
	for range 300 {
		as = append(as, book(t, a, key, batch))
	}
	require.Equal(t, 2990*time.Millisecond, as[299].Wait, "the backlog is booked 3 s ahead")

	var bs []fleetapi.Grant
	for i := range 10 {
		clock(int64(i+1) * 200_000)
		g := book(t, b, key, interactive)
		assert.GreaterOrEqual(t, g.Wait, 5*time.Millisecond, "call %d: within the guard", i)
		assert.Less(t, g.Wait, 15*time.Millisecond, "call %d waited behind the backlog", i)
		bs = append(bs, g)
	}

	// a hears of the 10 overtakings on the key's channel (real Redis: the
	// messages take their time to come).
	last := as[len(as)-1]
	require.Eventually(t, func() bool {
		return a.Overtaken(key, batch.Priority, last) == 10*10*time.Millisecond
	}, 5*time.Second, time.Millisecond, "a's last batch send goes 10 intervals later")
	assert.Zero(t, a.Overtaken(key, batch.Priority, as[0]), "a send before the first overtaking stays")
	assert.Zero(t, b.Overtaken(key, interactive.Priority, bs[0]), "a higher priority is never overtaken by a lower one")

	intervalApart(t, sends(a, key, batch, as), sends(b, key, interactive, bs))

	// Calls of one priority book in order of arrival, as before: the
	// interactive calls behind one another, the batch behind the batch.
	clock(3_000_000)
	g1, g2 := book(t, b, key, interactive), book(t, b, key, interactive)
	assert.Equal(t, 10*time.Millisecond, g2.Wait-g1.Wait)
}

// Interactive calls that would take every slot (30 booked at once) leave
// the batch backlog they overtake a slot in every 10 of the schedule, the
// floor each process's queue keeps for a lower priority: no 10 intervals
// in a row hold more than 9 of them, and every send is still an interval
// from the next.
func TestOvertakingLeavesTheLowerPrioritiesAFloor(t *testing.T) {
	a, b, key, clock := backlogged(t)
	var as, bs []fleetapi.Grant
	for range 100 {
		as = append(as, book(t, a, key, batch))
	}
	clock(100_000)
	for range 30 {
		bs = append(bs, book(t, b, key, interactive))
	}
	last := as[len(as)-1]
	require.Eventually(t, func() bool {
		return a.Overtaken(key, batch.Priority, last) == 30*10*time.Millisecond
	}, 5*time.Second, time.Millisecond, "a hears of the 30 overtakings")
	ours := sends(b, key, interactive, bs)
	for i := 9; i < len(ours); i++ {
		assert.GreaterOrEqual(t, ours[i]-ours[i-9], int64(100_000), "10 overtakings within 10 intervals, from the %d-th", i-9)
	}
	assert.Less(t, ours[len(ours)-1]-ours[0], int64(340_000), "the overtakings go on, 9 in 10 slots")
	intervalApart(t, sends(a, key, batch, as), ours)
}

// The priorities of the overtaking tests, at 100 a second, burst 1.
var (
	batch       = fleetapi.Request{PerSecond: 100, Burst: 1, MaxWait: -1, Priority: int8(polite.PriorityBatch)}
	interactive = fleetapi.Request{PerSecond: 100, Burst: 1, MaxWait: -1, Priority: int8(polite.PriorityInteractive)}
)

// backlogged returns two processes of a fleet, a and b, a key they share,
// and the scripts' clock (set by the test, to µs from an instant of its
// own, 0 at first) for exact slots.
func backlogged(t *testing.T) (a, b *fleet.Fleet, key string, clock func(us int64)) {
	fleet.UseClock(t)
	addr := sharedAddr(t)
	ns := uniqueNamespace(t)
	key = "api.example"
	a = newFleet(t, newClient(t, addr), fleet.WithNamespace(ns), fleet.WithMember("a"))
	b = newFleet(t, newClient(t, addr), fleet.WithNamespace(ns), fleet.WithMember("b"))
	rdb := newClient(t, addr)
	const start = int64(1_700_000_000_000_000) // µs on the scripts' clock
	clock = func(us int64) {
		require.NoError(t, rdb.Set(ctx, fleet.ClockKey(ns, key), strconv.FormatInt(start+us, 10), time.Hour).Err())
	}
	clock(0)
	return a, b, key, clock
}

// book books a send of key at r through f, which grants it.
func book(t *testing.T, f *fleet.Fleet, key string, r fleetapi.Request) fleetapi.Grant {
	t.Helper()
	g, err := f.Reserve(ctx, key, r)
	require.NoError(t, err)
	require.True(t, g.Granted)
	return g
}

// sends returns the instants the sends f was granted go, in µs of the
// scripts' clock: at their slots, later by the overtakings f heard of.
func sends(f *fleet.Fleet, key string, r fleetapi.Request, gs []fleetapi.Grant) []int64 {
	var at []int64
	for _, g := range gs {
		at = append(at, g.At+f.Overtaken(key, r.Priority, g).Microseconds())
	}
	return at
}

// intervalApart checks that the sends of every process, together, go
// exactly one interval (10 ms) apart, as the GCRA booked them.
func intervalApart(t *testing.T, each ...[]int64) {
	t.Helper()
	all := slices.Concat(each...)
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		require.Equal(t, int64(10_000), all[i]-all[i-1], "sends %d and %d are not an interval apart", i-1, i)
	}
}

// The same through polite's Transports, in real time: process a sends a
// backlog of batch calls (100 callers at 100 a second, as fast as they
// are let through), process b an interactive call after another. b's calls
// wait no more than about two intervals of the limit and Redis's round
// trip (5-15 ms and the round trip, or a slot more when the floor leaves
// one to the batch: b's calls, back to back, would take 9 slots in 10),
// where, booked behind a's backlog, each would wait about a second; and
// the server sees the fleet keep to its rate.
func TestInteractiveCallsWaitBehindNoOtherProcesssBatch(t *testing.T) {
	addr := sharedAddr(t)
	ns := uniqueNamespace(t)
	next := &hostCounter{}
	process := func(member string) *http.Client {
		f := newFleet(t, newClient(t, addr), fleet.WithNamespace(ns), fleet.WithMember(member))
		warm(t, f)
		return &http.Client{Transport: polite.New(next, polite.WithFleet(f), polite.WithRate(100, 1))}
	}
	a, b := process("a"), process("b")
	get := func(hc *http.Client, p polite.Priority) {
		req, err := http.NewRequestWithContext(polite.ContextWithPriority(ctx, p), http.MethodGet, "http://api.example/", nil)
		require.NoError(t, err)
		resp, err := hc.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					get(a, polite.PriorityBatch)
				}
			}
		})
	}
	get(a, polite.PriorityBatch) // the backlog is booked: a second of it
	var waits []time.Duration
	for range 20 {
		began := time.Now()
		get(b, polite.PriorityInteractive)
		waits = append(waits, time.Since(began))
	}
	close(stop)
	wg.Wait()

	slices.Sort(waits)
	t.Logf("interactive waits: median %v, max %v", waits[len(waits)/2], waits[len(waits)-1])
	assert.Less(t, waits[len(waits)/2], 25*time.Millisecond, "median: two intervals and a round trip")
	assert.Less(t, waits[len(waits)-2], 40*time.Millisecond, "all but the longest: two intervals, a round trip, and a busy machine's lateness")
	inSecond, _, total, _ := next.worst(time.Second)
	t.Logf("%d arrivals, at most %d in a second", total, inSecond)
	assert.LessOrEqual(t, inSecond, 102, "the fleet kept to its rate")
}
