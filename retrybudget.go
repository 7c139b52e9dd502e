package polite

import (
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// DefaultRetryBudgetCapacity is the capacity of the retry budget that each
// [Transport] has unless [WithRetryBudget] gives it one: the AWS SDKs'
// retry quota.
const DefaultRetryBudgetCapacity = 500

// Costs of retries, in budget tokens, as in the AWS SDKs' retry quota.
const (
	retryCost        = 5  // a retry after a failed response or transport error
	timeoutRetryCost = 10 // a retry after a timeout
	successRefund    = 1  // every attempt that succeeds
)

// A Budget is what a [Transport] takes the cost of its retries from and
// gives tokens back to (see [WithRetryBudget]): a [*RetryBudget], the
// process's own, or one that several processes share, such as the one of
// package fleet, on Redis. A Transport calls TryTake before each retry and
// Refund after each attempt that succeeds, so Refund must not block;
// Remaining and Capacity are reported in events. Implementations are safe
// for concurrent use.
type Budget interface {
	// TryTake takes cost tokens and reports true if the budget holds
	// that many; otherwise it takes nothing and reports false. A cost
	// <= 0 takes nothing and reports true.
	TryTake(cost int) bool
	// Refund gives n tokens back, up to the capacity; n <= 0 does
	// nothing.
	Refund(n int)
	// Remaining returns the tokens the budget holds, as far as the
	// process knows.
	Remaining() int
	// Capacity returns the most tokens the budget holds.
	Capacity() int
}

var _ Budget = (*RetryBudget)(nil)

// A RetryBudget bounds retries so that an outage is not multiplied by
// them. It holds up to a capacity of tokens, starting full. A Transport
// takes 5 tokens for each retry (10 for a retry after a timeout) and gives
// 1 back for each attempt that succeeds, that is, gets a response that is
// not retried (any status but 408, 429, 500, 502, 503 and 504); a retry
// that succeeds also gives its own cost back, and so does a retry that is
// never sent because its wait was cancelled or refused. With the default
// capacity of 500 an outage allows about 100 retries before retrying
// stops, and it resumes as successes refill the budget.
//
// A RetryBudget is safe for concurrent use and may be shared by several
// transports with [WithRetryBudget]. Create it with [NewRetryBudget]; the
// zero value is a budget of capacity 0, which never allows a retry.
type RetryBudget struct {
	capacity int64
	tokens   atomic.Int64
}

// NewRetryBudget returns a full budget of the given capacity. A capacity
// below 0 is treated as 0.
func NewRetryBudget(capacity int) *RetryBudget {
	b := &RetryBudget{capacity: int64(max(capacity, 0))}
	b.tokens.Store(b.capacity)
	return b
}

// TryTake takes cost tokens and reports true if the budget holds that many;
// otherwise it takes nothing and reports false. A cost <= 0 takes nothing
// and reports true.
func (b *RetryBudget) TryTake(cost int) bool {
	if cost <= 0 {
		return true
	}
	for {
		cur := b.tokens.Load()
		if cur < int64(cost) {
			return false
		}
		if b.tokens.CompareAndSwap(cur, cur-int64(cost)) {
			return true
		}
	}
}

// Refund gives n tokens back; the budget never holds more than its
// capacity. n <= 0 does nothing.
func (b *RetryBudget) Refund(n int) {
	if n <= 0 {
		return
	}
	for {
		cur := b.tokens.Load()
		next := b.capacity
		if int64(n) < b.capacity-cur {
			next = cur + int64(n)
		}
		if next == cur || b.tokens.CompareAndSwap(cur, next) {
			return
		}
	}
}

// Remaining returns the number of tokens the budget holds now.
func (b *RetryBudget) Remaining() int { return int(b.tokens.Load()) }

// Capacity returns the most tokens the budget can hold.
func (b *RetryBudget) Capacity() int { return int(b.capacity) }

// schedule yields the backoff delays of one call's retries. The un-jittered
// ceilings min(limit, base·2^(n-1)) come from a backoff/v4
// ExponentialBackOff with its own randomization off (backoff/v4 caps the
// interval before it randomizes, so its jitter can exceed the cap); full
// jitter is drawn on top, below the ceiling, so the cap holds after jitter.
// backoff/v4 saturates the interval at the cap, so no attempt count
// overflows.
//
// A schedule belongs to one call and is not safe for concurrent use. It is
// made only when a call retries, so calls that succeed at once allocate
// nothing for it.
type schedule struct {
	exp backoff.ExponentialBackOff
}

func newSchedule(base, limit time.Duration) *schedule {
	s := &schedule{exp: backoff.ExponentialBackOff{
		InitialInterval:     min(base, limit),
		RandomizationFactor: 0,
		Multiplier:          2,
		MaxInterval:         limit,
		MaxElapsedTime:      0, // never stop: attempts and the budget bound retries
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}}
	s.exp.Reset()
	return s
}

// next returns the delay before the next retry; u is a uniform draw from
// [0, 1).
func (s *schedule) next(u float64) time.Duration {
	return fullJitter(s.exp.NextBackOff(), u)
}

// fullJitter maps a uniform draw u in [0, 1) to a delay in [0, ceiling): 0
// when ceiling <= 0, never ceiling or more, whatever u and ceiling are.
func fullJitter(ceiling time.Duration, u float64) time.Duration {
	if ceiling <= 0 || !(u > 0) { // !(u > 0) also catches NaN
		return 0
	}
	d := time.Duration(u * float64(ceiling))
	if d >= ceiling || d < 0 { // float rounding near 1, or u >= 1
		return ceiling - 1
	}
	return d
}
