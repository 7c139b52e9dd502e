// Package quota keeps polite's picture of the quotas a key's server
// reports, in every unit it counts (requests; tokens, points, bytes): one
// picture a quota, read from every response by one method whatever its
// unit. And it is the gate that holds an attempt until the quotas it
// counts against let it go, by one of two pacing rules: a quota in
// requests (Quota) spreads what is left of its window over the time left
// and holds the attempts once it is spent; the quotas in other units
// (Costs) hold an attempt until each holds its cost, first come first
// served.
package quota

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/signals"
)

// Margin is the share of the server's quota that pacing leaves
// unused, against the rounding of its numbers and the jitter of the
// network.
const Margin = 0.02

// hint is how long a key waits when its server reports its quota
// spent without a usable reset time (none, or one already past): a hint to
// slow down, never a licence to hammer.
const hint = time.Second

// falls is how far a count must fall with no rise between to be taken
// for a window's: a bucket that refills as it goes rises again within the
// few requests of a first contact's second round.
const falls = 4

// coarse is how many times the slack of its reset a time must be for
// the reset to be counted down to: shorter than that, the rounding of the
// reset is too large a part of it.
const coarse = 4

// A Quota is polite's picture of a quota a server reports, for a key
// or for every key whose server names the same bucket. Every response
// resyncs it, and it paces requests by it:
//
//   - Its rate is the limit over the window, as its picture holds them
//     (stated, or learnt: see picture), once the server stated the
//     limit. The rate is a ceiling from then on, less Margin, whether the
//     server counts in windows or refills a bucket; and it is what the
//     key's controller takes for the server's limit.
//   - What is left until the reset is counted down when the reset is far
//     against its rounding: a window, or a time to the reset, of at least
//     coarse times its slack, or, the window unknown, a reset that
//     stays put and was once that far. This suits long windows, and quotas
//     shared with other clients. What is left is spent evenly by the
//     earliest the renewal may come; once it is spent, nothing goes until
//     the reset, and if it is still spent then, until the latest the
//     renewal may come. A reset within its rounding (a 1-second window
//     stated in whole seconds, a token bucket's time to refill) says too
//     little: such a quota paces at its rate, and its throttles speak for
//     it.
type Quota struct {
	// sends counts the requests sent against the quota (Sending): each
	// one's number tells whether it went after an answer was read.
	sends atomic.Uint64
	// mu guards the fields below.
	mu sync.Mutex
	picture
	far      bool          // the last reset was once at least coarse times its slack ahead
	rounding time.Duration // the rounding of the last reset stated (its slack)
	resetAt  time.Time     // when the quota renews, if what is left is counted down; zero if not
	slack    time.Duration // how far from resetAt, either way, the renewal may come
	left     float64       // requests that may still go before the renewal, if counted
	next     time.Time     // the earliest the next request may go
	inflight int           // requests sent against the quota and not answered yet
	// queue holds the attempts that found the quota spent, in order of
	// priority (see Admit): at the renewal they go one after another, the
	// highest first, not in a crowd whose order is the scheduler's.
	queue gate.Queue[struct{}]
	// How the count moves (see count): the least remaining read since it
	// last rose, and what it was when it last rose.
	low, top  float64
	passed    float64   // answers of the server's accepting since the count last rose (or was first read)
	judged    bool      // a rise is judged (see count): the window the first answer found is over, or was no fresh window's
	lowSent   uint64    // sends when low was read: a request numbered above was sent after
	bound     time.Time // the earliest reset stated since the count last rose: the latest the renewal may come
	boundSent uint64    // sends when bound was seen passed: a request numbered above was sent after it
	beyond    bool      // a reset was once stated more than its rounding ahead
	fell      bool      // the count once fell by falls with no rise between: a window's, or a bucket's that refills slower than it is spent
	renews    bool      // the count once rose by half the limit or more after it fell by as much: a window renewed whole
	early     bool      // a request sent after the bound of the renewal found the count not renewed: the resets are truncated, and bound nothing
	refilled  bool      // the count rose before it fell by half the limit: a bucket that refills as it goes, not a window
	latest    bool      // what is left is spread until the latest the renewal may come, not the earliest
	loose     bool      // latest, and counted only for it (a reset near against its rounding): held for once seen renewed whole
	opened    time.Time // the first answer read of the window: the count's first, or the one that showed it rise; zero until a count is read
	spread    float64   // while latest, the limit over the time its window's first answer saw to the renewal: the most a window is spent at
}

// Sync takes what a response received at now says of the quota, and
// returns the quota's rate, its limit over its window in requests per
// second (0 if unknown). The requests still in flight are not in the
// server's count yet. sent is the number Sending gave the answered request
// (0 if none or unknown), throttled whether the server refused it.
func (q *Quota) Sync(now time.Time, quota signals.Quota, sent uint64, throttled bool) float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.read(now, quota, 0, 0) {
		q.far = false
	}
	rose := q.count(now, quota.Remaining, sent, throttled)
	if rose && q.windowed() && q.next.After(now) {
		// A window renewed: the spacing of the last one's last places (one
		// left spread over the second before its reset) is not the new
		// one's. (Not a bucket's: it rises as it refills, and its spacing
		// holds.)
		// Kept, it held every call until a second after the renewal, and
		// that second's silence, with one call in the window, read as a
		// bucket that refills: the whole limit went at once (a second of
		// the quality suite's window-seconds, 16 refused).
		q.next = now
	}
	if !rose && q.windowed() && q.boundSent > 0 && sent > q.boundSent {
		q.early = true // sent after the bound, and counted in the same window
	}
	if quota.Slack > 0 && quota.Reset.Sub(now) > quota.Slack {
		q.beyond = true
	}
	if quota.Refill {
		// A bucket that refills (OpenAI's, Anthropic's): its limit over
		// the time it refills in paces the key; what is left is not
		// counted down to its reset (when it is full again), and once it
		// is spent, a request may go again when one unit is back.
		if quota.Remaining < 1 {
			quota.Reset = quota.Renewal(now)
		} else {
			quota.Reset = time.Time{}
		}
	}
	q.bind(now, quota, rose)
	q.rounding = quota.Slack
	ahead := quota.Reset.Sub(now)
	far := ahead >= coarse*quota.Slack
	q.far = q.far || far
	counted := quota.Slack == 0 || far || q.put && q.far
	if q.window > 0 {
		counted = q.window >= coarse*quota.Slack
	}
	// A window's count is spread until the latest its renewal may come:
	// a reset stated in whole seconds bounds the renewal, it does not
	// time it, and what is spent by the earliest leaves the callers held
	// until the renewal comes, by as much as the rounding. Near its reset,
	// a window's rate is a guess (see paceLocked), or learnt from resets
	// that tell its end only to their rounding, and what is left is the
	// one figure sure to hold: it is counted down however near the
	// reset (loose). Not where the count refills as it goes, or the
	// resets were seen to come before the renewal (truncated: they bound
	// nothing); nor by a reset not ahead; nor where the server states a
	// window no longer than the reset's rounding (tollbooth's
	// X-Rate-Limit-Duration: 1 beside a bucket's level): its rate paces
	// it, and its reset says too little.
	q.latest = q.known && q.windowed() && !q.early && !quota.Refill && ahead > 0 &&
		(q.window == 0 || q.rated || !q.stated || q.window > quota.Slack)
	q.loose = q.latest && !counted
	counted = counted || q.latest
	switch {
	case !counted:
		q.resetAt = time.Time{} // only the rate paces
	case ahead > 0:
		// One far ahead is a hint, not a sentence: it holds at most
		// gate.MaxPause, as a server's pause does. A reset stated in
		// whole seconds is a bound on the renewal, not its instant: the
		// answers of one window each bound it, and the earliest of their
		// bounds holds (a count of seconds rounded up, as "1" is, bounds
		// it best from the window's first answer).
		reset := q.bound
		if q.early {
			reset = reset.Add(quota.Slack) // truncated: the renewal comes up to a rounding after it
		}
		reset = minTime(reset, now.Add(gate.MaxPause))
		if q.latest && (rose || reset != q.resetAt) {
			// The first answer of a window: the limit over the time to
			// the latest its renewal may come is as fast as a window is
			// spent (see beyondSpread).
			q.spread = q.limit / reset.Sub(now).Seconds() * (1 - Margin)
		}
		q.resetAt, q.slack = reset, quota.Slack
		q.left = quota.Remaining - float64(q.inflight)
	case quota.Remaining < 1 && !quota.Reset.IsZero() && ahead > -quota.Slack:
		// Spent, and the reset has come: the renewal is late, by at most
		// the reset's slack.
		q.resetAt, q.slack, q.left = quota.Reset.Add(quota.Slack), 0, 0
	case quota.Remaining < 1:
		q.resetAt, q.slack, q.left = now.Add(hint), 0, 0
	default:
		q.resetAt = time.Time{} // renewed, with no reset ahead: only the rate paces
	}
	q.queue.WakeHead() // an answer may renew what the head waits for before the reset it slept to
	return q.rateLocked()
}

// rateLocked returns the server's rate, its limit over its window; 0 if
// unknown. It requires q.mu held.
func (q *Quota) rateLocked() float64 {
	if !q.known || q.window <= 0 {
		return 0
	}
	return q.limit / q.window.Seconds()
}

// paceLocked returns the rate the quota paces its requests at, less the
// margin: its rate, or, until the window is learnt, the limit over one
// unit of the reset's rounding (a second) when the reset stays put (it
// ends a window, it is not a bucket's time to refill) and is too near to
// count down to: the shortest window its resets could tell apart, so that
// the first window of a 1-second quota (go-chi/httprate, ulule/limiter,
// sethvargo/go-limiter) is paced rather than spent in a burst. That guess
// paces only: it is not the limit the key's controller takes. It
// requires q.mu held.
//
// kept keeps the guess while the reset has moved since it stayed put (a
// new window, or jitter of its rounding), until two responses agree
// again: a fleet keeps it, for its processes paced by it and by nothing
// at once would spend the window together. One process does not: its
// own controller paces it meanwhile (with the guess kept, httprate's
// 1-second window at 10 a second and 200 ms of latency got 0.85-0.89 of
// its limit in the quality suite, against 0.90-0.91).
func (q *Quota) paceLocked(kept bool) float64 {
	rate := q.rateLocked()
	if rate == 0 && q.known && (q.put || kept && q.windows || q.near()) && !q.far && q.rounding > 0 && (q.resetAt.IsZero() || q.latest) {
		rate = q.limit / q.rounding.Seconds()
	}
	return rate * (1 - Margin)
}

// Reserve takes a place for a request at now and returns how long it must
// wait for it. spent reports a wait until the quota renews, which is the
// server's to ask for, rather than even pacing; then no place is taken,
// and the caller reserves again once it has waited. A place taken counts
// as a request in flight from then on (what the server says of its quota
// meanwhile does not know of it), until answered; a caller that does not
// send after all gives it back with release, saying whether it was
// counted down (took).
//
// share is the part of the quota this process spends: 1 alone, 1/N in a
// fleet of N. In a fleet the quota's rate paces the whole fleet through
// its store (fleetRate); here only what is left until the reset is
// spread, at the process's share.
func (q *Quota) Reserve(now time.Time, share float64, fleet bool) (wait time.Duration, spent, took bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.reserveLocked(now, share, fleet, true)
}

// reserveLocked is Reserve with q.mu held; unless take, it takes nothing,
// and only tells the wait a place taken at now would have (see Admit).
func (q *Quota) reserveLocked(now time.Time, share float64, fleet, take bool) (wait time.Duration, spent, took bool) {
	if !q.bound.IsZero() && !now.Before(q.bound) && q.boundSent == 0 {
		q.boundSent = max(q.sends.Load(), 1) // what is sent from here on goes after the bound
	}
	// Its share of the quota's rate: a process alone, the whole; in a
	// fleet whose store cannot answer, its part (see fleetgate).
	ceiling := q.paceLocked(false) * min(max(share, 0), 1)
	if fleet {
		ceiling = 0
	}
	if q.resetAt.IsZero() {
		return q.space(now, ceiling, take), false, false
	}
	// In a fleet, what is left is counted down by this process's sends
	// only: the other processes' in flight, about as many as this one's
	// each, are not in the server's count yet, and would be refused at
	// the end of the window.
	others := 0.0
	if fleet && share > 0 && share < 1 {
		others = float64(q.inflight) * (1/share - 1)
	}
	if q.left-others < 1 {
		// Spent until the renewal; but a count near its reset is held for
		// only once it has been seen renewed whole: a sliding window's
		// comes back as it goes.
		if now.Before(q.resetAt) && (!q.loose || q.renews) {
			return q.resetAt.Sub(now), true, false
		}
		// Renewed: the next response tells how much. Until it does, a
		// window whose length is still a guess is spent no faster than
		// the last was spread: the callers it held must not crowd the
		// new one.
		if take {
			q.resetAt = time.Time{}
		}
		return q.space(now, q.beyondSpread(ceiling), take), false, false
	}
	// Spend what is left evenly by the earliest the renewal may come (the
	// latest, while the window is a guess); from then on, at the
	// ceiling, counting down what is left.
	rate := q.beyondSpread(ceiling)
	// From the last place taken on: the places already taken are spaced
	// before it, and what is left comes after them.
	if spread, ok := q.spreadLocked(maxTime(now, q.next), share); ok {
		rate = spread
		if ceiling > 0 {
			rate = min(rate, ceiling)
		}
		if q.latest && q.spread > 0 {
			rate = min(rate, q.spread)
		}
	}
	if take {
		q.left--
	}
	return q.space(now, rate, take), false, true
}

// spreadLocked returns the rate, in requests a second, at which share of
// what is left of the quota is spent from from on by the earliest its
// renewal may come (the latest, if latest), if what is left is counted
// down and there is time before then. It requires q.mu held.
func (q *Quota) spreadLocked(from time.Time, share float64) (float64, bool) {
	if q.resetAt.IsZero() || q.left < 1 {
		return 0, false
	}
	aim := q.resetAt.Sub(from)
	if !q.latest {
		aim -= q.slack
	}
	if aim <= 0 {
		return 0, false
	}
	return q.left / aim.Seconds() * (1 - Margin) * share, true
}

// Peek returns how long a request would wait at instant at, without taking
// a place: an estimate for deciding whether a retry fits before a deadline.
func (q *Quota) Peek(at time.Time) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.left < 1 && at.Before(q.resetAt) { // spent until a renewal still ahead
		return q.resetAt.Sub(at)
	}
	return max(q.next.Sub(at), 0)
}

// Exhaust marks the quota spent until until, as a server's Retry-After for
// a bucket does.
func (q *Quota) Exhaust(until time.Time) {
	q.mu.Lock()
	if until.After(q.resetAt) || q.left >= 1 {
		q.resetAt, q.slack = until, 0
	}
	q.latest, q.loose = false, false // the server's hold, not a bound: it holds whatever the count
	// Nothing is left until the reset, whatever comes back: a place
	// counted down before and given back (release) does not make one, so
	// what is left is less those in flight.
	q.left = min(q.left, -float64(q.inflight))
	q.mu.Unlock()
}

// SpentElsewhere holds the quota's requests, from now, until renews, when a
// quota of the same server in another unit (tokens, points) renews that a
// response reported spent; for a hint's while if renews is not ahead. Its
// figures are not the requests': only the hold is taken.
func (q *Quota) SpentElsewhere(now, renews time.Time) {
	if !renews.After(now) {
		renews = now.Add(hint)
	}
	q.Exhaust(renews)
}

// space returns the wait for the next slot at rate per second, and, if
// take, takes it, counting a request in flight from then on. A rate of 0
// spaces nothing. It requires q.mu held.
func (q *Quota) space(now time.Time, rate float64, take bool) time.Duration {
	if take {
		q.inflight++
	}
	if rate <= 0 || math.IsInf(rate, 1) {
		return 0
	}
	slot := q.next
	if slot.Before(now) {
		slot = now
	}
	if take {
		q.next = slot.Add(time.Duration(float64(time.Second) / rate))
	}
	return slot.Sub(now)
}

// SpentUntil returns when the quota renews if it is spent until then (as
// Reserve holds it); the zero time if it is not.
func (q *Quota) SpentUntil() time.Time {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.left >= 1 || q.resetAt.IsZero() {
		return time.Time{}
	}
	return q.resetAt
}

// Window returns the window the quota renews or refills its limit in, as
// the server stated it, a reading of its bucket showed it, or the steps
// of its resets did; 0 if unknown (or only kept for a memory's rate).
func (q *Quota) Window() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rated {
		return 0
	}
	return q.window
}

// Windowed reports whether the quota's reset stayed put across responses:
// it ends a window, in which the server counts every request until the
// reset, not a bucket that refills meanwhile.
func (q *Quota) Windowed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.windows
}

// FleetPace returns the rate the quota paces a fleet's requests at, less
// the margin (see paceLocked); 0 if none.
func (q *Quota) FleetPace() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.paceLocked(true)
}

// Release gives back a place that Reserve took for a request that was not
// sent; took is what Reserve said.
func (q *Quota) Release(took bool) {
	q.mu.Lock()
	if took {
		q.left++
	}
	q.inflight = max(q.inflight-1, 0)
	q.mu.Unlock()
}

// Answered counts the end of a request that Reserve let go.
func (q *Quota) Answered() {
	q.mu.Lock()
	q.inflight = max(q.inflight-1, 0)
	q.mu.Unlock()
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Remembered returns the quota a memory kept: limit requests a second
// over window, as the server stated it after its first answer: its rate
// paces, until an answer says what is left. known reports that the
// window is the quota's (stated, or learnt: see Window); if not, it only
// keeps the rate, and the resets show the window.
func Remembered(limit float64, window time.Duration, known bool) *Quota {
	return &Quota{picture: picture{limit: limit * window.Seconds(), known: true, window: window, rated: !known}}
}
