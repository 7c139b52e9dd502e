package control

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A heldFlight is a request of heldRun in flight: when its answer comes,
// the mark it was sent with, and its round trip.
type heldFlight struct {
	due  time.Duration
	mark Mark
	rtt  time.Duration
}

// heldRun runs workers callers against a server that never refuses for
// length, each sending its next request once its last is answered, no
// faster between them all than g's rate once it applies; a request sent
// at an instant is answered after the round trip server gives it. It
// returns the phase g was in at each second's end.
func heldRun(g *Gentle, workers int, length time.Duration, server func(sent time.Duration) time.Duration) []uint32 {
	var flights []heldFlight // by when they are answered
	var phases []uint32
	now, next, free := time.Duration(0), time.Duration(0), workers
	for now < length {
		send := max(now, next)
		if free == 0 || len(flights) > 0 && flights[0].due <= send {
			f := flights[0]
			flights = flights[1:]
			now, free = f.due, free+1
			g.Observe(at(now), OK, 0, f.mark, f.rtt)
		} else {
			now, free = send, free-1
			rtt := server(now)
			f := heldFlight{due: now + rtt, mark: g.Sending(), rtt: rtt}
			i, _ := slices.BinarySearchFunc(flights, f.due, func(f heldFlight, due time.Duration) int { return cmp.Compare(f.due, due) })
			flights = slices.Insert(flights, i, f)
			if g.Enabled() {
				next = now + time.Duration(float64(time.Second)/g.Rate())
			}
		}
		for time.Duration(len(phases)+1)*time.Second <= now {
			phases = append(phases, g.phase.Load())
		}
	}
	return phases
}

// A server that slows instead of refusing (the bench's delay server: the
// n-th request of a second past the limit is held n seconds) is read from
// its holds: a hold is a throttle, and once one has been the signal the
// rate rises so little within a hold's round trip that the next probe
// costs a hold or two, not the callers' whole crowd. A server that holds
// nothing is never throttled by its round trips.
func TestGentleReadsAHoldAsAThrottle(t *testing.T) {
	const limit, base = 100, time.Millisecond
	holds := func(length time.Duration) (*Gentle, []time.Duration) {
		g := NewGentle(epoch)
		var held []time.Duration
		window, count := time.Duration(-1), 0
		heldRun(g, 16, length, func(sent time.Duration) time.Duration {
			if w := sent.Truncate(time.Second); w != window {
				window, count = w, 0
			}
			if count++; count > limit {
				held = append(held, sent)
				return base + time.Duration(count-limit)*time.Second
			}
			return base
		})
		return g, held
	}
	g, held := holds(60 * time.Second)
	require.True(t, g.Enabled(), "the holds throttled the key")
	assert.Equal(t, slowServer, g.slow)
	assert.InDelta(t, limit, g.Limit(), 0.05*limit, "W")
	late := 0
	for _, s := range held {
		if s >= 2*time.Second {
			late++
		}
	}
	// The first second's crowd is held (the key knew nothing yet); after
	// it, a probe every 4 to 30 s costs a hold or three.
	assert.LessOrEqual(t, late, 12, "holds after the first second, of %d", len(held))
	t.Logf("W %.1f, %d holds, %d after the first second", g.Limit(), len(held), late)

	// A lag of a second: the climb from the floor is 64 times slower than
	// a refusal's.
	g.mu.Lock()
	assert.InDelta(t, gentleHeldRTTs*(1+base.Seconds()), g.lagDouble(), 0.1)
	g.mu.Unlock()

	// None held: no throttle, and round trips are timed all along.
	quiet := NewGentle(epoch)
	heldRun(quiet, 1, 30*time.Second, func(time.Duration) time.Duration { return base })
	assert.False(t, quiet.Enabled())
	assert.True(t, quiet.Timed(), "an unthrottled key times its round trips, to see a hold")
}

// An endpoint whose own round trips spread far, whatever the rate (one
// request in 25 takes 2 s, the others 20 ms, four callers), is slowed by
// its first holds at most: holds of requests sent while the rate stood
// still outnumber those sent while it rose, and from then on no round trip
// is a hold.
func TestGentleTellsASlowEndpointFromAServerThatHolds(t *testing.T) {
	g := NewGentle(epoch)
	i := 0
	phases := heldRun(g, 4, 120*time.Second, func(time.Duration) time.Duration {
		if i++; i%25 == 0 {
			return 2 * time.Second
		}
		return 20 * time.Millisecond
	})
	assert.Equal(t, slowEndpoint, g.slow)
	events := 0 // seconds in which the phase moved: an event, or a first success after one
	for s := 1; s < len(phases); s++ {
		if phases[s] != phases[s-1] {
			events++
		}
	}
	assert.LessOrEqual(t, events, 2*(gentleHeldSteady+2), "seconds with an event, of %d", len(phases))
	assert.Equal(t, phases[len(phases)-60], phases[len(phases)-1], "no event in the last minute")
	g.mu.Lock()
	delivered := g.lastSecond(at(120 * time.Second).UnixNano())
	g.mu.Unlock()
	assert.Greater(t, g.Rate(), 1.5*delivered, "the rate no longer binds")
	t.Logf("%d seconds with an event; rate %.1f, %.1f a second delivered", events, g.Rate(), delivered)
}

// A server that states the quota it counts (an LLM API, whose answers
// take as long as the tokens they generate) refuses past it and holds
// nothing: once an answer has stated it (Quoted), no round trip is a hold,
// and no round of them a queue. The same LLM-like endpoint (one answer in
// three 1 to 7 s, the others 100 ms; 64 callers, 60 s) untold is throttled
// by its long answers; told, never. And the probe that a queue stops
// (TestGentleQueueingStopsAProbe's server) goes on when the server states
// its quota.
func TestGentleTakesAQuotedServersRoundTripsForItsOwn(t *testing.T) {
	llm := func(quoted bool) (*Gentle, []uint32) {
		g := NewGentle(epoch)
		if quoted {
			g.Quoted()
		}
		i := 0
		phases := heldRun(g, 64, 60*time.Second, func(time.Duration) time.Duration {
			if i++; i%3 == 0 {
				return time.Second + time.Duration(i%7)*time.Second
			}
			return 100 * time.Millisecond
		})
		return g, phases
	}
	untold, _ := llm(false)
	assert.True(t, untold.Enabled(), "untold, its long answers throttled the key")
	told, phases := llm(true)
	assert.False(t, told.Enabled(), "told, no round trip throttled the key")
	assert.Equal(t, phases[0], phases[len(phases)-1], "no event in 60 s")
	assert.True(t, told.Timed(), "its round trips are still timed: the first contact's rounds use them")

	queued := func(quoted bool) (rate float64, moved bool) {
		g := NewGentle(epoch)
		if quoted {
			g.Quoted()
		}
		g.Update(at(0), true)
		feedRTT := func(from, to time.Duration, n int, rtt time.Duration) {
			for i := range n {
				g.Observe(at(from+time.Duration(i)*(to-from)/time.Duration(n)), OK, 0, g.Sending(), rtt)
			}
		}
		feedRTT(0, 2*time.Second, 200, time.Millisecond)
		g.Update(at(2*time.Second), true)
		feedRTT(2*time.Second, 3*time.Second, 100, time.Millisecond)
		g.Update(at(3*time.Second), true)
		feedRTT(3*time.Second, 7*time.Second, 396, time.Millisecond)
		event := g.event
		feedRTT(7*time.Second, 7400*time.Millisecond, 40, 40*time.Millisecond)
		return g.Rate(), event != g.event
	}
	rate, moved := queued(false)
	assert.True(t, moved, "untold, a queue stops the probe")
	assert.Less(t, rate, 110.0)
	rate, moved = queued(true)
	assert.False(t, moved, "told, round trips show no queue")
	assert.Greater(t, rate, 110.0, "the probe goes on")
}
