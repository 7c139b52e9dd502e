package fleet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Calls to Redis are batched: a process's script calls queue, and each
// round trip carries every call queued when it goes (up to maxBatch), as
// one pipeline, which a Cluster client splits by node. A crawler with
// thousands of keys in flight thus makes a few round trips at a time, not
// thousands, and a call that waits for its turn is back-pressure, not a
// failure: only a round trip that fails or outlives the timeout opens the
// breaker.
const (
	maxBatch     = 512 // script calls in one round trip
	maxPipelines = 2   // round trips out at once: Redis serves one connection's pipeline at a time anyway
	// perCall is the time a round trip is given for each call it carries,
	// and each call of the round trips out before it (Redis serves them
	// first), beyond the Fleet's timeout: a script call costs Redis about
	// 20µs, and the process as much to write and read it, so that a round
	// trip of 512 calls is not taken for a failure when it is only long.
	perCall = 100 * time.Microsecond
	// slowWaits is how many timeouts in all a call waits for its round
	// trip while Redis answers: a slow round trip, not a failure.
	slowWaits = 4
	// maxSilence is the longest Redis may answer nothing, while a call's
	// round trip is late, before the call takes Redis for hung (or the
	// timeout, if shorter): a frozen Redis must not hold a call much past
	// its timeout, however long the timeout.
	maxSilence = 50 * time.Millisecond
	// coldTimeout is the least deadline of a round trip made before Redis
	// first answered the Fleet: the first dials the connection and, on a
	// Redis that has not seen polite's scripts, loads them (a second round
	// trip), in a process that has often just started everything else
	// too. At the Fleet's timeout alone, every process of the bench's
	// fleet that started under 10,000 callers on 2 cores timed its first
	// round trip out, paced alone with the breaker open, and had 30 to 85%
	// of its first seconds' requests refused. A Redis that refuses the
	// connection still fails at once; one that answers nothing holds the
	// first calls a second at most.
	coldTimeout = time.Second
	// starvedLag is how late a call's timer may fire before the call
	// takes its process for too busy to have read Redis's answer (see
	// call): on a process that is not, a timer fires within a millisecond.
	starvedLag = 10 * time.Millisecond
)

// scriptCall is one script call waiting for, or in, a round trip.
type scriptCall struct {
	script    *redis.Script
	keys      []string
	args      []any
	due       atomic.Int64 // when its round trip times out, Unix nanoseconds; 0 while queued
	trip      atomic.Int64 // the number of its round trip (see batcher.trips); 0 while queued
	abandoned atomic.Bool  // its caller went on without it: not sent if still queued
	done      chan reply   // the reply, once; buffered
}

// reply is what a script call came to.
type reply struct {
	v   []int64
	err error
}

// batcher queues a Fleet's script calls and runs them in pipelines.
type batcher struct {
	mu      sync.Mutex
	queue   []*scriptCall
	running int // pipelines out, at most maxPipelines

	answered     atomic.Int64 // when Redis last answered a round trip, Unix nanoseconds
	answeredTrip atomic.Int64 // the number of the last round trip to go of those Redis answered
	out          atomic.Int64 // script calls in round trips out
	trips        atomic.Int64 // round trips made, which numbers them in the order they go
	calls        atomic.Int64 // script calls they carried
}

// submit queues c, and starts a round trip for it unless maxPipelines are
// out: one of those takes it with the next batch.
func (f *Fleet) submit(c *scriptCall) {
	b := &f.batch
	b.mu.Lock()
	b.queue = append(b.queue, c)
	start := b.running < maxPipelines
	if start {
		b.running++
	}
	b.mu.Unlock()
	if start {
		go f.drain()
	}
}

// drain sends the queued calls, a batch a round trip, until none is left.
func (f *Fleet) drain() {
	b := &f.batch
	for {
		b.mu.Lock()
		n := min(len(b.queue), maxBatch)
		if n == 0 {
			b.running--
			b.queue = nil // let a grown queue's array go
			b.mu.Unlock()
			return
		}
		batch := make([]*scriptCall, 0, n)
		for _, c := range b.queue[:n] {
			if !c.abandoned.Load() {
				batch = append(batch, c)
			}
		}
		b.queue = b.queue[n:]
		b.mu.Unlock()
		if len(batch) > 0 {
			f.roundTrip(batch)
		}
	}
}

// roundTrip sends batch as one pipeline and hands each call its reply.
// Scripts go by hash (EVALSHA); those Redis has lost (NOSCRIPT, after a
// restart, a failover or SCRIPT FLUSH) go again whole, in a second round
// trip, which also loads them. The deadline is the Fleet's timeout, and
// perCall for each call of the batch and of the round trips out, from the
// moment the batch goes; the waiting callers enforce it, since a client
// may not honour it (see call).
func (f *Fleet) roundTrip(batch []*scriptCall) {
	n := int64(len(batch))
	ahead := f.batch.out.Add(n)
	defer f.batch.out.Add(-n)
	budget := f.timeout + time.Duration(ahead)*perCall
	if f.batch.answered.Load() == 0 {
		budget = max(budget, coldTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	due := time.Now().Add(budget).UnixNano()
	trip := f.batch.trips.Add(1)
	for _, c := range batch {
		c.trip.Store(trip)
		c.due.Store(due)
	}
	f.batch.calls.Add(int64(len(batch)))
	cmds := f.evalPipelined(ctx, len(batch), func(i int) (*redis.Script, []string, []any) {
		c := batch[i]
		return c.script, c.keys, c.args
	}, func() { f.batch.trips.Add(1) })
	for _, cmd := range cmds {
		if err := cmd.Err(); err == nil || isRedisError(err) {
			f.batch.answer(trip, time.Now()) // Redis is there
			break
		}
	}
	for i, c := range batch {
		res, err := cmds[i].Result()
		c.done <- reply{ints(res), err}
	}
}

// evalPipelined runs n script calls (call(i) gives the i-th's script, keys
// and args) in one pipeline by their SHA, and again, whole, in a second
// one, those Redis has lost the script for (NOSCRIPT: a restart, a
// failover, a SCRIPT FLUSH), calling retrying (if not nil) before that
// second round trip. Each command carries its own error.
func (f *Fleet) evalPipelined(ctx context.Context, n int, call func(i int) (*redis.Script, []string, []any), retrying func()) []*redis.Cmd {
	cmds := make([]*redis.Cmd, n)
	pipe := f.rdb.Pipeline()
	for i := range n {
		script, keys, args := call(i)
		cmds[i] = script.EvalSha(ctx, pipe, keys, args...)
	}
	_, _ = pipe.Exec(ctx)
	var again []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return cmds
	}
	if retrying != nil {
		retrying()
	}
	pipe = f.rdb.Pipeline()
	for _, i := range again {
		script, keys, args := call(i)
		cmds[i] = script.Eval(ctx, pipe, keys, args...)
	}
	_, _ = pipe.Exec(ctx)
	return cmds
}

// answer records that Redis answered round trip n at now.
func (b *batcher) answer(n int64, now time.Time) {
	b.answered.Store(now.UnixNano())
	for {
		last := b.answeredTrip.Load()
		if last >= n || b.answeredTrip.CompareAndSwap(last, n) {
			return
		}
	}
}

// answers reports, at now, whether Redis has answered round trip n or one
// that went after it, and for how long it has answered nothing.
func (b *batcher) answers(n int64, now time.Time) (served bool, quiet time.Duration) {
	return b.answeredTrip.Load() >= n, now.Sub(time.Unix(0, b.answered.Load()))
}

// isRedisError reports whether err is a reply of Redis's (a script's
// error, NOSCRIPT, MOVED), rather than a failure to reach it.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
