package fleet

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite"
	"github.com/redis/go-redis/v9"
)

// A shared retry budget's refunds are told to Redis in batches: with the
// next retry's call, or on a call of their own at most every budgetFlush.
// Its state outlives its last use by budgetIdle; a budget forgotten after
// that starts full again.
const (
	budgetFlush = 100 * time.Millisecond
	budgetIdle  = 10 * time.Minute
)

// Budget is a retry budget ([polite.Budget]) that the processes of a
// fleet share through Redis, so that together they cannot multiply an
// outage with retries: the AWS SDKs' retry quota, fleet-wide. Pass it to
// each process's Transport with [polite.WithRetryBudget]. Create it with
// [Fleet.RetryBudget]. It is safe for concurrent use.
//
// A retry takes its cost in one script call. The successes' refunds are
// counted in the process and told to Redis in batches, with the next
// retry or on a call of their own at most every 100 ms, so that a success
// costs no Redis call of its own; [Budget.Flush] tells them at once. While
// Redis cannot answer, the process takes its retries from a budget of its
// own holding its share: the capacity divided by the fleet's size
// ([WithSize], or the processes Redis last said shared a key).
type Budget struct {
	f        *Fleet
	keys     []string
	capacity int

	pending   atomic.Int64 // refunds not yet told to Redis
	known     atomic.Int64 // the tokens Redis last said the budget held
	lastFlush atomic.Int64 // when refunds were last told, Unix nanoseconds
	flushing  atomic.Bool  // a flush of its own is out

	mu    sync.Mutex                         // held to make local
	local atomic.Pointer[polite.RetryBudget] // while Redis cannot answer; nil while it can
}

var _ polite.Budget = (*Budget)(nil)

// RetryBudget returns the fleet's retry budget named name, of capacity
// tokens (below 0: 0), full when Redis holds no state for it. Every
// process that names the same budget on the same Redis and namespace
// shares it; they should agree on its capacity.
func (f *Fleet) RetryBudget(name string, capacity int) *Budget {
	b := &Budget{f: f, keys: []string{f.prefix("budget:"+name) + "b"}, capacity: max(capacity, 0)}
	b.known.Store(int64(b.capacity))
	return b
}

// budgetScript gives a budget the refunds told and takes a retry's cost
// from it if it holds that much (lua/budget.lua).
var budgetScript = redis.NewScript(budgetLua)

//go:embed lua/budget.lua
var budgetLua string

// TryTake implements [polite.Budget]: it takes cost tokens from the
// fleet's budget, with the refunds not yet told, and reports whether it
// held that many. While Redis cannot answer, it takes them from the
// process's share.
func (b *Budget) TryTake(cost int) bool {
	if cost <= 0 {
		return true
	}
	taken, err := b.call(context.Background(), cost)
	if err != nil {
		return b.fallback().TryTake(cost)
	}
	return taken
}

// Refund implements [polite.Budget]: it gives n tokens back, told to Redis
// with the next retry, or on a call of its own if none was told for
// 100 ms.
func (b *Budget) Refund(n int) {
	if n <= 0 {
		return
	}
	b.pending.Add(int64(n))
	if local := b.local.Load(); local != nil {
		local.Refund(n)
	}
	if time.Now().UnixNano()-b.lastFlush.Load() < int64(budgetFlush) || !b.flushing.CompareAndSwap(false, true) {
		return
	}
	if !b.f.startFlush() {
		b.flushing.Store(false)
		return
	}
	go func() {
		defer b.f.flushes.Done()
		defer b.flushing.Store(false)
		_, _ = b.call(context.Background(), 0) // an error keeps them for the next call
	}()
}

// Flush tells Redis the refunds not yet told, at once; a process may call
// it before it exits. It returns [ErrUnavailable] if Redis could not be
// told, or the context's cause.
func (b *Budget) Flush(ctx context.Context) error {
	_, err := b.call(ctx, 0)
	return err
}

// Remaining implements [polite.Budget]: the tokens the fleet's budget held
// when Redis last answered, with the refunds not yet told (while Redis
// cannot answer: the process's share).
func (b *Budget) Remaining() int {
	if !b.f.Available() {
		return b.fallback().Remaining()
	}
	return int(min(b.known.Load()+b.pending.Load(), int64(b.capacity)))
}

// Capacity implements [polite.Budget].
func (b *Budget) Capacity() int { return b.capacity }

// call tells Redis the pending refunds and takes cost (0: nothing).
func (b *Budget) call(ctx context.Context, cost int) (bool, error) {
	refund := b.pending.Swap(0)
	b.lastFlush.Store(time.Now().UnixNano())
	v, err := b.f.run(ctx, "budget", budgetScript, b.keys, b.capacity, refund, cost, budgetIdle.Milliseconds())
	if err == nil && len(v) != 2 {
		err = b.f.failed(fmt.Errorf("%w: budget replied %d values", ErrUnavailable, len(v)))
	}
	if err != nil {
		b.pending.Add(refund) // told with the next call that reaches Redis
		return false, err
	}
	b.known.Store(v[1])
	b.local.Store(nil) // the next outage starts from what Redis held
	return v[0] == 1, nil
}

// startFlush reports whether a budget may start a flush of its own (the
// fleet is not closed), and counts it for Close to wait for.
func (f *Fleet) startFlush() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.flushes.Add(1)
	return true
}

// fallback returns the process's own budget for while Redis cannot
// answer: its share of the capacity, made at the first need, as full as
// the fleet's budget was when Redis last answered.
func (b *Budget) fallback() *polite.RetryBudget {
	if local := b.local.Load(); local != nil {
		return local
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if local := b.local.Load(); local != nil {
		return local
	}
	share := b.capacity / b.f.Size()
	local := polite.NewRetryBudget(share)
	if b.capacity > 0 {
		held := int(b.known.Load()) * share / b.capacity
		local.TryTake(share - held)
	}
	b.local.Store(local)
	return local
}
