package control

import (
	"math"
	"time"
)

// sample takes the round trip rtt of a success that came at n (Unix
// nanoseconds). Every gentleRound successes it compares the least round
// trip of the round with the base, the least of the last one to two
// epochs of gentleBaseEpoch seconds: two rounds in a row that took
// gentleQueued requests' worth longer at the rate (at least
// gentleMinQueue, and the base itself) show the server queueing the
// requests rather than refusing them; then it also returns the rate at
// which the round's successes came, the rate the server serves its queue
// at. The least of a round, not each round trip, is compared, and two
// rounds, so that a new connection or a stall of the client's is not
// taken for a queue; a slow endpoint is slow from its first round trip,
// which makes it the base. It requires g.mu held.
func (g *Gentle) sample(n int64, rtt time.Duration) (delivered float64, queueing bool) {
	if rtt <= 0 {
		return 0, false
	}
	us := uint32(min(max(rtt/time.Microsecond, 1), math.MaxUint32))
	if sec := uint32(n / int64(time.Second)); sec-g.epoch >= gentleBaseEpoch {
		g.base[0], g.base[1], g.epoch = g.base[1], 0, sec
	}
	if g.base[1] == 0 || us < g.base[1] {
		g.base[1] = us
	}
	if g.sampled == 0 || us < g.least {
		g.least = us
	}
	if g.sampled == 0 {
		g.round = n
	}
	if g.sampled++; g.sampled < gentleRound {
		return 0, false
	}
	g.sampled = 0
	if g.state == unthrottled && g.slow == slowEndpoint {
		g.flags.Or(flagUntimed) // a base, and no hold to look for: enough until a throttle
	}
	base := g.baseLocked()
	span := nanosToSeconds(n - g.round)
	if span <= 0 {
		return 0, false
	}
	delivered = float64(gentleRound-1) / span
	g.recent = float32(delivered)
	added := float64(g.least) - float64(base)
	threshold := max(gentleMinQueue, float64(base), gentleQueued/math.Max(g.rate, gentleMinRate)*1e6)
	before := g.queued
	g.queued = added > threshold
	return delivered, before && g.queued
}

// baseLocked returns the least round trip of the last one to two epochs,
// in microseconds; 0 if none. It requires g.mu held.
func (g *Gentle) baseLocked() uint32 {
	base := g.base[1]
	if b := g.base[0]; b != 0 && (base == 0 || b < base) {
		base = b
	}
	return base
}

// roundLocked returns a round of a first contact, in seconds: the least
// round trip, gentleMinRound at least. It requires g.mu held.
func (g *Gentle) roundLocked() float64 {
	if base := g.baseLocked(); base > 0 {
		return max(gentleMinRound, float64(base)/1e6)
	}
	return gentleMinRound
}

// Timed reports whether the round trips of attempts matter to g: always,
// for a round trip far above the base is a hold (see heldOut), which a
// server that slows instead of refusing gives no other sign of; but once
// holds have shown the endpoint's own slowness, a key no server has
// throttled does not read the clock for them after a round has given it
// a base, which costs a clock's read (50 ns on a virtual machine's clock)
// on a call that needs no wait.
func (g *Gentle) Timed() bool { return g.flags.Load()&flagUntimed == 0 }

// Quoted tells g that an answer stated the quota the server counts the
// key's requests (or their costs) against. Such a server refuses past its
// quota and says how much is left; it neither holds a request past its
// limit nor queues it, so that a round trip far above the base is its own
// work (an LLM's answer takes as long as the tokens it generates: 0.1 to 7
// s on the LLM bench's fake Anthropic API, its minute scaled to 10 s), and
// g reads neither holds (see heldOut) nor a queue (see sample) from round
// trips from then on. It costs one atomic load once told.
func (g *Gentle) Quoted() {
	if g.flags.Load()&flagQuoted == 0 {
		g.flags.Or(flagQuoted)
	}
}

// quoted reports whether an answer stated the quota the server counts
// the key against (see Quoted).
func (g *Gentle) quoted() bool { return g.flags.Load()&flagQuoted != 0 }

// StartRate returns the rate at which a key with no history is paced at
// now, its first contact, with the burst its bucket holds (gentleInitial),
// and true; false once it is over. A first contact lasts until the server
// throttles, states a limit, or the rate outgrows any demand:
// gentleInitial requests go at once, then the rate doubles every round
// (the least round trip, gentleMinRound at least), as TCP's slow start
// doubles its window, so that a server whose burst is small refuses the
// few requests of one round, not the whole crowd of callers.
func (g *Gentle) StartRate(now time.Time) (float64, int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, ok := g.startRateLocked(now.UnixNano())
	return r, gentleInitial, ok
}

// startRateLocked is StartRate at n (Unix nanoseconds). It requires g.mu
// held.
func (g *Gentle) startRateLocked(n int64) (float64, bool) {
	if g.state != unthrottled || g.stated > 0 {
		return 0, false
	}
	round := g.roundLocked()
	t := nanosToSeconds(n-g.ramp) / round
	if t > gentleRounds {
		return 0, false
	}
	return gentleInitial / round * math.Exp2(max(t, 0)), true
}
