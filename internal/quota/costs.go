package quota

import (
	"math"
	"sync"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/signals"
	"github.com/politehttp/polite/internal/units"
)

// defaultCostWindow is how long a quota counted in a unit other than
// requests is taken to refill its limit over, until the server says or its
// answers show: LLM APIs count their tokens a minute.
const defaultCostWindow = time.Minute

// The room a key leaves in a bucket that refills, for other clients that
// take from the quota unseen (see costBucket.room): a quarter of the cost
// always, which lets a newcomer's requests through now and then (without
// it, a process that began 10 s after another starved in 5 runs of 5:
// TestCostLeavesRoomForClientsUnseen); three costs more while the server's
// count shows others (without, two that began together fell into the
// drain in 5 of 5; with two more, four processes starved none, where a
// fourth got 1-5 answers in 5 s to the others' 45). A reading shows one
// when the server's count lacks othersMin of the limit, or half the key's
// last cost if more, beyond the key's takings, and no more than othersMost
// times that cost (what a request like the key's explains: a key alone on
// the fake Anthropic API met lacks of 18 and 90 times its last cost, where
// its streams' output outran their estimates, and used 0.75 of its quota,
// leaving itself room; with 4, two processes that began together fell
// into the drain in 1 run of 60, none of 100 with 8); othersShown of them
// within a refill time of the quota (othersLeast at least) show others, for
// othersFor such spans (three within a second left a process starved at
// the start in 4 runs of 8: a starved one takes seldom). A quarter costs a
// key alone on the fake LLM APIs nothing (1.00-1.08 of the quota); a whole
// cost took a fifth of Anthropic's (0.73-0.84).
const (
	roomAlways  = 1.25
	roomShared  = 4
	othersMin   = 0.01
	othersMost  = 8
	othersShown = 2
	othersLeast = 10 * time.Second
	othersFor   = 2
)

// Costs is what a key knows of the quotas its server keeps in units
// other than requests: one bucket a unit, the requests waiting for their
// costs, and a ledger of what the key's requests took and gave back lately.
//
// A request takes its cost from every bucket at once, when every bucket
// holds it: the first waiting request first, the others behind it. The
// buckets follow the server: each response sets them to what the server
// says is left, plus what the ledger shows was taken or given back since
// the server counted (the requests sent after the one answered, and the
// settlements since), and refills them at the server's rate.
type Costs struct {
	mu      sync.Mutex
	units   [units.N]costBucket
	queue   gate.Queue[units.Vec] // the attempts waiting for their costs, with them
	ledger  ledger
	heard   bool // a response came back: the quotas it states are known
	probing bool // a request whose cost counts in a unit of unknown limit is out, before any response came back
}

// costBucket is the bucket of one unit: the quota's picture, and what the
// bucket holds by the key's count. A limit of 0 (unknown) holds no
// request; a window of 0 refills the limit in defaultCostWindow.
type costBucket struct {
	picture
	level   float64 // what the bucket holds, as of at; below 0: owed
	at      time.Time
	resetAt time.Time // when a quota renewed whole renews; zero if not known
	taken   float64   // the last cost a request of the key took
	// Of other clients that take from the quota unseen (see room): when
	// the server's count last showed them (Unix nanoseconds; 0: never),
	// and the readings that lacked a request's worth since shown.
	others, shown int64
	lacked        uint8
	counted       bool // the server's count was read once: the level follows it, not a guess
}

// Hold is the cost an attempt took, until it is settled or given back.
type Hold struct {
	cs      *Costs
	cost    units.Vec
	mark    Mark           // when it was taken, just before the attempt was sent
	settled bool           // guarded by cs.mu
	probe   bool           // the key's first contact: the others wait for its answer; guarded by cs.mu
	fleet   fleetapi.Fleet // the fleet that booked it with its send, if one did
	key     string         // the key, in that fleet
}

// A Configured is a quota WithQuota states: limit units every per.
type Configured struct {
	Limit float64
	Per   time.Duration
}

// NewCosts returns a key's quotas in units other than requests, their
// buckets as the configured ones state them (WithQuota), full at now.
func NewCosts(configured *[units.N]Configured, now time.Time) *Costs {
	cs := &Costs{}
	for u, q := range configured {
		if q.Limit > 0 {
			cs.units[u] = costBucket{picture: picture{limit: q.Limit, known: true, window: q.Per, refills: true}, level: q.Limit, at: now}
		}
	}
	return cs
}

// rate returns how many units a second b refills; 0 for a windowed quota
// or an unknown limit.
func (b *costBucket) rate() float64 {
	if b.limit <= 0 || !b.refills {
		return 0
	}
	return b.limit / b.refillTime().Seconds()
}

// refill brings b's level up to now.
func (b *costBucket) refill(now time.Time) {
	switch {
	case b.limit <= 0 || !now.After(b.at):
		return
	case !b.refills:
		if !b.resetAt.IsZero() && !now.Before(b.resetAt) {
			b.level, b.resetAt = math.Max(b.level, b.limit), time.Time{}
		}
	default:
		b.level = math.Min(b.limit, b.level+b.rate()*now.Sub(b.at).Seconds())
	}
	b.at = now
}

// room returns what b must hold at now beyond a request's cost for the
// request to go, once b follows the server's count: none for a quota
// renewed whole, nor for one whose limit is unknown, nor for one the server
// has not counted (WithQuota's, until an answer states it). A key that lets
// a request go the moment the bucket holds its cost drains it to the last
// token as it refills, and is never refused; another client that shares the
// quota unseen, its requests timed by its own controller, meets an empty
// bucket every time, is refused, and its controller falls to the least rate
// and stays there (two processes on the fake OpenAI API scaled to a second:
// 66-67 answers every 5 s to 0-6, 6 to 14 calls past their callers'
// deadlines in 5 runs of 5). And the key cannot tell: once the bucket is
// drained, the other's requests take nothing, so the server's count shows
// no other client. So a request goes once the bucket holds roomAlways
// times its cost (up to the limit), which lets another's request through
// now and then; the count then shows it (see unseen), and while it does,
// roomShared times, so that three others find their costs there. A key
// alone loses nothing to the room (the bucket refills at the same rate,
// held a little higher); a quota renewed whole would lose it at each
// reset.
func (b *costBucket) room(now time.Time, cost float64) float64 {
	if !b.counted || !b.refills || b.limit <= 0 {
		return 0
	}
	k := roomAlways
	if b.others != 0 && now.UnixNano()-b.others <= int64(othersFor)*int64(b.othersSpan()) {
		k = roomShared
	}
	return math.Max(0, math.Min(k*cost, b.limit)-cost)
}

// unseen records at now a reading of the server's count that lacks a
// request's worth beyond what the key's own takings explain: othersShown
// of them within b's othersSpan show other clients taking from the quota.
// One now and then is no proof: a key alone meets it where an estimate
// fell short of what the server counted by then (a stream's output: two
// in six minutes of the fake Anthropic API, each 7-12% of the limit).
func (b *costBucket) unseen(now time.Time) {
	n := now.UnixNano()
	if b.shown == 0 || n-b.shown > int64(b.othersSpan()) {
		b.shown, b.lacked = n, 0
	}
	if b.lacked++; b.lacked >= othersShown {
		b.others = n
	}
}

// othersSpan returns the span within which othersShown readings show
// other clients: the quota's refill time, and othersLeast at least.
func (b *costBucket) othersSpan() time.Duration { return max(b.refillTime(), othersLeast) }

// wait returns how long, from b's level at now, until b holds need; -1 if
// that cannot be told (a windowed quota whose renewal is unknown).
func (b *costBucket) wait(now time.Time, need float64) time.Duration {
	switch {
	case b.limit <= 0 || b.level >= need:
		return 0
	case !b.refills:
		if b.resetAt.IsZero() {
			return -1
		}
		return b.resetAt.Sub(now)
	}
	return secondsDuration((need - b.level) / b.rate())
}

// tooLargeLocked returns the first unit in which cost is larger than the
// limit the server (or WithQuota) stated, and false if none. It requires
// cs.mu held.
func (cs *Costs) tooLargeLocked(cost units.Vec) (units.Unit, float64, bool) {
	for u, b := range cs.units {
		if b.known && cost[u] > b.limit {
			return units.Unit(u), b.limit, true
		}
	}
	return 0, 0, false
}

// fitsLocked reports whether every bucket holds cost and the room that a
// request of cost leaves (see costBucket.room), at now (refilled). It
// requires cs.mu held.
func (cs *Costs) fitsLocked(now time.Time, cost units.Vec) bool {
	for u := range cs.units {
		b := &cs.units[u]
		if cost[u] > 0 && b.limit > 0 {
			b.refill(now)
			if b.level < cost[u]+b.room(now, cost[u]) {
				return false
			}
		}
	}
	return true
}

// takeLocked takes cost from every bucket at now and returns the hold.
// It requires cs.mu held.
func (cs *Costs) takeLocked(now time.Time, cost units.Vec) *Hold {
	for u := range cs.units {
		cs.units[u].level -= cost[u]
		if cost[u] > 0 {
			cs.units[u].taken = cost[u]
		}
	}
	cs.ledger.add(now.UnixNano(), cost.Negated())
	h := &Hold{cs: cs, cost: cost, mark: Mark{at: now, seq: cs.ledger.seq}}
	if cs.unknownLocked(cost) {
		// The first contact: the key's server has not said its quotas yet,
		// and the requests after this one wait for its answer (see
		// heldLocked).
		h.probe, cs.probing = true, true
	}
	return h
}

// unknownLocked reports whether cost counts in a unit whose limit is not
// known, before any response came back. It requires cs.mu held.
func (cs *Costs) unknownLocked(cost units.Vec) bool {
	if cs.heard {
		return false
	}
	for u := range cs.units {
		if cost[u] > 0 && cs.units[u].limit <= 0 {
			return true
		}
	}
	return false
}

// heldLocked reports whether a request of cost must wait for the answer to
// the key's first contact: one request goes while the server has said
// nothing of the quotas it counts in, so that none larger than the
// server's limit is sent, nor a crowd of them at once. It requires cs.mu
// held.
func (cs *Costs) heldLocked(cost units.Vec) bool {
	return cs.probing && cs.unknownLocked(cost)
}

// hear records that a response came back to h's request (nil: to a
// request that took no cost), which tells the quotas it states: the
// requests held for the first contact go on.
func (cs *Costs) hear(h *Hold) {
	cs.mu.Lock()
	cs.heard = true
	cs.endProbeLocked(h)
	cs.mu.Unlock()
}

// endProbeLocked ends the first contact if h was it (h may be nil), and
// wakes the first waiting request. It requires cs.mu held.
func (cs *Costs) endProbeLocked(h *Hold) {
	if h != nil && h.probe {
		h.probe, cs.probing = false, false
	}
	cs.wakeHeadLocked()
}

// unprobe ends the first contact if h was it and no answer came (an
// error): another request makes it.
func (cs *Costs) unprobe(h *Hold) {
	cs.mu.Lock()
	cs.endProbeLocked(h)
	cs.mu.Unlock()
}

// queuedLocked returns the costs of the requests queued, and cost.
// It requires cs.mu held.
func (cs *Costs) queuedLocked(cost units.Vec, p gate.Priority) units.Vec {
	for t := range cs.queue.All() {
		if t.Priority() < p {
			break // the rest wait behind it
		}
		for u := range cost {
			cost[u] += t.Value[u]
		}
	}
	return cost
}

// waitLocked returns how long, at the buckets' rates, until every bucket
// holds need and the room a request of cost own leaves (see
// costBucket.room), at now: the longest of its units' waits; -1 if that
// cannot be told. It requires cs.mu held.
func (cs *Costs) waitLocked(now time.Time, need, own units.Vec) time.Duration {
	var longest time.Duration
	for u := range cs.units {
		b := &cs.units[u]
		if need[u] <= 0 {
			continue
		}
		b.refill(now)
		w := b.wait(now, need[u]+b.room(now, own[u]))
		if w < 0 {
			return -1
		}
		longest = max(longest, w)
	}
	return longest
}

// sync takes q into b (see Costs.sync; since, early and late are the
// ledger's reading for b's unit), and reports whether the level rose and
// what the server had left by the reading, brought to now, before
// anything taken after the request was sent: the most a fleet's bucket
// holds now, less what it booked for sends since then (NaN if b's limit
// is unknown). The
// level is kept where it is if it lies within what the reading allows,
// and brought to the nearest bound of that if not: the ledger knows the
// key's own takings better than a reading whose turn is uncertain.
func (b *costBucket) sync(now, sent time.Time, q signals.Quota, own, since, early, late float64) (bool, float64) {
	if q.Remaining < 0 || math.IsNaN(q.Remaining) || math.IsInf(q.Remaining, 0) {
		return false, math.NaN()
	}
	lag := max(now.Sub(sent), 0)
	b.read(now, q, own, lag)
	if b.limit <= 0 {
		return false, math.NaN()
	}
	if b.at.IsZero() {
		b.level, b.at = b.limit, now
	}
	b.refill(now)
	counted := b.counted
	b.counted = true
	var base float64 // what the server had left, brought to now
	if q.Refill {
		base = math.Min(b.limit, q.Remaining+b.rate()*lag.Seconds())
	} else {
		if q.Reset.After(now) {
			b.resetAt = q.Reset.Add(q.Slack)
		}
		base = q.Remaining
	}
	slack := b.rounded(q) // how far below the server's count q.Remaining may be
	// A remaining rounded may be above the server's count as well as
	// below: the level is kept at most at what it says.
	lo, hi := base+since-early-slack, base+since+late
	switch {
	case b.level > hi:
		if lack := b.level - hi; counted && lack >= max(b.taken/2, b.limit*othersMin) && lack <= othersMost*b.taken {
			b.unseen(now) // another client's request, or an estimate short
		}
		b.level = hi
	case b.level < lo:
		b.level = lo
		return true, base
	}
	return false, base
}

// wakeHeadLocked wakes the first waiting request, to see whether its cost
// is there. It requires cs.mu held.
func (cs *Costs) wakeHeadLocked() { cs.queue.WakeHead() }

// Busy reports whether forgetting cs at now (Unix nanoseconds) would lose
// something: requests wait for their costs, or a bucket is not full again.
// A state locked at that moment is in use: busy.
func (cs *Costs) Busy(now int64) bool {
	if !cs.mu.TryLock() {
		return true
	}
	defer cs.mu.Unlock()
	if cs.queue.Len() > 0 {
		return true
	}
	t := time.Unix(0, now)
	for u := range cs.units {
		b := &cs.units[u]
		b.refill(t)
		if b.limit > 0 && b.level < b.limit && !(!b.refills && b.resetAt.IsZero()) {
			return true
		}
	}
	return false
}

// Status returns what cs knows of its quotas at now, one a unit whose
// limit is known.
func (cs *Costs) Status(now time.Time) []Status {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []Status
	for u := range cs.units {
		b := &cs.units[u]
		if b.limit <= 0 {
			continue
		}
		b.refill(now)
		w := b.refillTime()
		if !b.refills {
			w = 0
		}
		out = append(out, Status{Unit: units.Unit(u).String(), Limit: b.limit, Window: w, Left: b.level})
	}
	return out
}

// Waiting adds to counts how many attempts wait for their costs at each
// priority (see gate.Queue.Counts), and returns counts.
func (cs *Costs) Waiting(counts []gate.Count) []gate.Count {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.queue.Counts(counts)
}

// secondsDuration returns s seconds as a Duration, saturating.
func secondsDuration(s float64) time.Duration {
	if !(s < math.MaxInt64/float64(time.Second)) {
		return math.MaxInt64
	}
	return time.Duration(max(s, 0) * float64(time.Second))
}

// Status is what a key knows of its quota in one unit other than
// requests: the server's limit (as stated, or the least it can be), the
// time it takes to refill it (0 for one renewed whole at a reset), and
// what it holds now, as the key's requests count it (below 0: owed).
type Status struct {
	Unit   string
	Limit  float64
	Window time.Duration
	Left   float64
}

// shared reports whether a fleet books b's unit (see FleetRequest.Costs):
// its limit and the time it takes to refill are known (stated, learnt, or
// configured), not guessed. A windowed quota, or one whose rate is not
// known yet, is paced by each process from what the server says.
func (b *costBucket) shared() bool { return b.limit > 0 && b.known && b.window > 0 && b.refills }

// window returns the time b takes to refill its limit.
func (b *costBucket) refillTime() time.Duration {
	if b.window <= 0 {
		return defaultCostWindow
	}
	return b.window
}
