// Package pace holds the gates that space a key's attempts in time on the
// client's side: its token bucket (Bucket: the rate its controller or
// WithRate sets, the pauses its server asks for, the first contact of a
// key with no history), its exact window (Window), its requests in flight
// (Slots), and the pacing a key falls back on while its fleet cannot
// answer (Fallback). Each owns its state and its lock, and waits through
// package gate.
package pace

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/gate"
)

// growingNap bounds how long the head of a queue sleeps while its rate
// grows with time (see growLocked), so that it sees the growth.
const growingNap = 20 * time.Millisecond

// A first contact's attempts past its server's last answer: startUnheard
// may go before another answer comes, or before startQuiet times the
// least round trip it has heard has passed since it, and startUnheard more
// for each startSilence the server stays silent (see hushedLocked).
const (
	startUnheard = 4
	startQuiet   = 2
	startSilence = 2 * time.Second
)

// A Bucket is a key's token bucket: the rate its controller (or WithRate,
// or the Transport's WithGlobalRate) sets, the pause its server asked for,
// and the attempts waiting for a token.
//
// Attempts that find no token wait in a FIFO queue and take their token
// only when it is their turn and the token is there. Unlike waiting on an
// x/time/rate Reservation, which books a future instant, an attempt that
// gives up leaves nothing behind: the attempts queued after it move up at
// once; and when the rate changes, the head of the queue sees it at once.
//
// A crawler holds one Bucket per host, so it is kept small: the parts few
// keys need (a pause, a queue) are made only when needed. Its zero value
// is a bucket that paces nothing.
type Bucket struct {
	mu      sync.Mutex    // guards the fields below but flags
	limiter *rate.Limiter // the token arithmetic; nil until a rate applies (unpaced)
	more    *more         // what few keys need; nil until needed
	burst   int32         // the limiter's burst, as last set
	flags   atomic.Uint32 // starting, admitted: read without the lock
}

// more is the part of a Bucket that few keys need.
type more struct {
	pausedUntil int64 // Unix nanoseconds before which the server asked for no request; 0 if none
	changed     int64 // Unix nanoseconds of the last change of the limiter's rate or burst
	heard       int64 // Unix nanoseconds of the first contact's last answer, or of its start
	least       int64 // nanoseconds, the least round trip of the first contact's answers; 0 until one is timed
	unheard     int32 // attempts the first contact admitted since heard
	queue       gate.Queue[struct{}]
}

// The flags of a Bucket.
const (
	starting = 1 << iota // the bucket paces the key's first contact (control.Controller.StartRate)
	admitted             // an attempt was admitted unpaced, with no bucket (see Admit, startLocked)
)

// Init makes b pace at perSecond with burst (WithRate), as it is made.
func (b *Bucket) Init(perSecond float64, burst int) {
	b.limiter, b.burst = rate.NewLimiter(rate.Limit(perSecond), burst), int32(min(burst, math.MaxInt32))
}

// is reports whether flag f of b is set.
func (b *Bucket) is(f uint32) bool { return b.flags.Load()&f != 0 }

// mark sets or clears flag f of b.
func (b *Bucket) mark(f uint32, set bool) {
	for {
		old := b.flags.Load()
		next := old &^ f
		if set {
			next |= f
		}
		if old == next || b.flags.CompareAndSwap(old, next) {
			return
		}
	}
}

// Starting reports whether the bucket paces the key's first contact: the
// round trips of its attempts matter to its controller then.
func (b *Bucket) Starting() bool { return b.is(starting) }

// moreLocked returns b.more, making it if needed. It requires b.mu held.
func (b *Bucket) moreLocked() *more {
	if b.more == nil {
		b.more = new(more)
	}
	return b.more
}

// limitLocked returns the bucket's rate: Inf without a limiter. It
// requires b.mu held.
func (b *Bucket) limitLocked() rate.Limit {
	if b.limiter == nil {
		return rate.Inf
	}
	return b.limiter.Limit()
}

// Rate returns the rate the bucket paces at, in requests per second; 0
// when it paces nothing.
func (b *Bucket) Rate() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.limitLocked(); l != rate.Inf && l > 0 {
		return float64(l)
	}
	return 0
}

// Busy reports whether forgetting b at now (Unix nanoseconds), the
// present, would lose something: a pause not over, attempts queued, or a
// bucket not refilled (a rate slower than the idle timeout). A bucket
// locked at that moment is in use: busy.
func (b *Bucket) Busy(now int64) bool {
	if !b.mu.TryLock() {
		return true
	}
	defer b.mu.Unlock()
	if x := b.more; x != nil && (x.pausedUntil > now || x.queue.Len() > 0) {
		return true
	}
	return b.limiter != nil && b.limiter.TokensAt(time.Unix(0, now)) < float64(b.burst)
}

// pauseLeftLocked returns how long the key stays paused after now; 0 if
// it is not. It requires b.mu held.
func (b *Bucket) pauseLeftLocked(now time.Time) time.Duration {
	if b.more == nil || b.more.pausedUntil == 0 {
		return 0
	}
	return time.Duration(max(b.more.pausedUntil-now.UnixNano(), 0))
}

// pauseNowLocked returns how long the key stays paused after now, the
// present, and forgets a pause that is over, so that later attempts need
// not read the clock for it. It requires b.mu held.
func (b *Bucket) pauseNowLocked(now time.Time) time.Duration {
	left := b.pauseLeftLocked(now)
	if left == 0 && b.more != nil {
		b.more.pausedUntil = 0
	}
	return left
}

// PauseNow returns how long the key stays paused after now, the present.
func (b *Bucket) PauseNow(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pauseNowLocked(now)
}

// PausedUntil returns when the key's pause ends, Unix nanoseconds, if it
// is paused after now (Unix nanoseconds); 0 if not.
func (b *Bucket) PausedUntil(now int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.more == nil || b.more.pausedUntil <= now {
		return 0
	}
	return b.more.pausedUntil
}

// Pause extends the key's pause to until; a shorter pause never cuts a
// longer one.
func (b *Bucket) Pause(until time.Time) {
	b.mu.Lock()
	if x := b.moreLocked(); until.UnixNano() > x.pausedUntil {
		x.pausedUntil = until.UnixNano()
	}
	b.mu.Unlock()
}

// aheadLocked returns the number of attempts queued for a token ahead of
// one of priority p. It requires b.mu held.
func (b *Bucket) aheadLocked(pl gate.Place) int {
	if b.more == nil {
		return 0
	}
	return b.more.queue.Ahead(pl)
}

// waitingLocked returns the number of attempts queued for a token. It
// requires b.mu held.
func (b *Bucket) waitingLocked() int {
	if b.more == nil {
		return 0
	}
	return b.more.queue.Len()
}

// Waiting adds to counts how many attempts wait in line for a token or
// for the end of a pause at each priority (see gate.Queue.Counts), and
// returns counts.
func (b *Bucket) Waiting(counts []gate.Count) []gate.Count {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.more == nil {
		return counts
	}
	return b.more.queue.Counts(counts)
}

// turnWaitLocked returns how long after at the n-th attempt in line would
// get its token, if none gave up meanwhile. It requires b.mu held.
func (b *Bucket) turnWaitLocked(at time.Time, n int) time.Duration {
	return b.turnAtLocked(at, n, b.limitLocked())
}

// turnAtLocked returns how long after at the n-th attempt in line would
// get its token if the bucket refilled at limit. It requires b.mu held.
func (b *Bucket) turnAtLocked(at time.Time, n int, limit rate.Limit) time.Duration {
	if b.limiter == nil || limit == rate.Inf {
		return 0
	}
	missing := float64(n) - b.limiter.TokensAt(at)
	if missing <= 0 {
		return 0
	}
	nanos := math.Ceil(missing / float64(limit) * 1e9)
	if nanos >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(nanos)
}

// serverTurnLocked returns how long after at the n-th attempt in line
// would get its token if the bucket paced at the rate its server allows,
// as polite knows it (see judgedRateLocked): the wait by which an attempt
// may be refused. It requires b.mu held.
func (b *Bucket) serverTurnLocked(at time.Time, n int, ctl control.Controller, ceiling rate.Limit) time.Duration {
	if b.limiter == nil {
		return 0
	}
	return b.turnAtLocked(at, n, b.judgedRateLocked(ctl, ceiling))
}

// judgedRateLocked returns the rate at which the wait of the key's queue
// is judged: the rate of its bucket where the Transport was told it
// (WithRate, WithGlobalRate) and no controller sets it; otherwise the
// server's limit as the controller knows it (stated, or measured by
// throttles), never above the WithRate ceiling nor below the bucket's own
// rate, and unbounded while it is unknown. A controller may pace below the
// server's limit for a while (finding it from a floor, halving while
// refused): that is polite's own caution, and no call is refused for it.
// It requires b.mu held.
func (b *Bucket) judgedRateLocked(ctl control.Controller, ceiling rate.Limit) rate.Limit {
	limit := b.limitLocked()
	if ctl == nil || limit >= ceiling {
		return limit
	}
	server := rate.Inf
	if l := ctl.ServerLimit(); l > 0 {
		server = rate.Limit(l)
	}
	return max(limit, min(ceiling, server))
}

// NextTurnWait returns how long an attempt of priority p arriving at
// instant at would wait for its pause and its token, at the rate it would
// be judged by (see judgedRateLocked). It is an estimate for deciding
// whether a retry fits before a deadline.
func (b *Bucket) NextTurnWait(at time.Time, pl gate.Place, ctl control.Controller, ceiling rate.Limit) (pause, turn time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pauseLeftLocked(at), b.serverTurnLocked(at, b.aheadLocked(pl)+1, ctl, ceiling)
}

// wakeHeadLocked signals the head of the queue, if any, to look at the
// bucket again. It requires b.mu held.
func (b *Bucket) wakeHeadLocked() {
	if b.more != nil {
		b.more.queue.WakeHead()
	}
}

// changedLocked records that the bucket's rate changed at now, and wakes
// the head of the queue to see it. It requires b.mu held.
func (b *Bucket) changedLocked(now time.Time) {
	if b.more != nil {
		b.more.changed = now.UnixNano()
	}
	b.wakeHeadLocked()
}

// setRateLocked makes the bucket pace at limit with burst from now on, if
// it does not already, and wakes the head of the queue to see the new
// rate. It requires b.mu held.
func (b *Bucket) setRateLocked(now time.Time, limit rate.Limit, burst int) {
	if b.limiter == nil {
		b.limiter, b.burst = rate.NewLimiter(limit, burst), int32(burst)
		b.changedLocked(now)
		return
	}
	if limit == b.limiter.Limit() && int32(burst) == b.burst {
		return
	}
	b.limiter.SetLimitAt(now, limit)
	b.limiter.SetBurstAt(now, burst)
	b.burst = int32(burst)
	b.changedLocked(now)
}

// dropLocked makes the bucket pace nothing from now on. It requires b.mu
// held.
func (b *Bucket) dropLocked(now time.Time) {
	b.limiter, b.burst = nil, 0
	b.changedLocked(now)
}

// Join queues a place that waits for no token, as an attempt queued for
// one does, and returns what takes it out: for a test of what keeps a
// key that attempts wait on.
func (b *Bucket) Join() (leave func()) {
	b.mu.Lock()
	x := b.moreLocked()
	t, _ := x.queue.PushBack(struct{}{}, gate.Place{})
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		x.queue.Leave(t)
		b.mu.Unlock()
	}
}

// Burst returns how many tokens the bucket holds at most; 0 when it paces
// nothing.
func (b *Bucket) Burst() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.limiter == nil {
		return 0
	}
	return int(b.burst)
}

// Paced reports whether the bucket paces its key at a rate: it has a
// limiter.
func (b *Bucket) Paced() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limiter != nil
}

// Take takes a token at now if one is there, as an attempt that does not
// wait would: for a test that empties the bucket.
func (b *Bucket) Take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.limiter != nil && b.limiter.AllowN(now, 1)
}
