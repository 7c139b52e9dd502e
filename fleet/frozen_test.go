package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/politehttp/polite/fleetapi"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
)

// A Redis frozen for 4 s (SIGSTOP: no connection is reset, as in a
// network partition or a stalled fork) holds no request longer than the
// fleet's timeout and 100ms, and fails none: two processes (one leasing
// above 200 a second, one booking each send in a call of its own) of two
// Transports each (at 100 and 1,000 a second), 16 callers over 8 hosts,
// each process on a go-redis client with its defaults (a read waits 5 s
// for Redis). A request's wait on Redis is the time its calls to the
// fleet took, pacing apart. After SIGCONT the fleet is back on shared
// state within a second.
func TestNoRequestWaitsOnAFrozenRedis(t *testing.T) {
	srv := startRedis(t)
	ns := uniqueNamespace(t)
	const (
		frozenAt  = time.Second
		frozenFor = 4 * time.Second
		length    = frozenAt + frozenFor + 1500*time.Millisecond
	)
	next := &hostCounter{}
	var fleets []*fleet.Fleet
	var calls []*redisCalls
	var trs []http.RoundTripper
	for p := range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: srv.addr}) // go-redis's defaults, as a user's
		t.Cleanup(func() { _ = rdb.Close() })
		lease := fleet.DefaultLease
		if p == 1 {
			lease = 0 // a call a send, at any rate
		}
		f := newFleet(t, rdb, fleet.WithNamespace(ns), fleet.WithMember(fmt.Sprint("p", p)), fleet.WithSize(2), fleet.WithLease(lease))
		warm(t, f)
		rc := &redisCalls{}
		fleets, calls = append(fleets, f), append(calls, rc)
		for _, perSecond := range []float64{100, 1000} {
			trs = append(trs, polite.New(next, polite.WithFleet(timedFleet{f, rc}), polite.WithRate(perSecond, 10)))
		}
	}

	var mu sync.Mutex
	var waits []time.Duration // each request's wait on Redis
	var failed []error
	stop := time.Now().Add(length)
	var wg sync.WaitGroup
	for i, tr := range trs {
		for w := range 4 { // two hosts a Transport, two callers a host
			host := fmt.Sprintf("h%d-%d.test", i, w/2)
			wg.Go(func() {
				for time.Now().Before(stop) {
					var waited time.Duration
					req, _ := http.NewRequestWithContext(context.WithValue(ctx, waitedKey{}, &waited), http.MethodGet, "http://"+host+"/", nil)
					resp, err := tr.RoundTrip(req)
					if err == nil {
						_ = resp.Body.Close()
					}
					mu.Lock()
					waits = append(waits, waited)
					if err != nil {
						failed = append(failed, err)
					}
					mu.Unlock()
				}
			})
		}
	}
	time.Sleep(frozenAt) // the callers run meanwhile: real Redis, real time
	srv.signal(t, syscall.SIGSTOP)
	frozen := time.Now()
	time.Sleep(frozenFor)
	srv.signal(t, syscall.SIGCONT)
	thawed := time.Now()
	wg.Wait()

	bound := fleet.DefaultTimeout + 100*time.Millisecond
	worst := slices.Max(waits)
	over := 0
	for _, w := range waits {
		if w > bound {
			over++
		}
	}
	t.Logf("%d requests, %d over %v; the longest waited %v on Redis", len(waits), over, bound, worst.Round(time.Millisecond))
	assert.LessOrEqual(t, worst, bound, "%d of %d requests waited on Redis longer than the timeout and 100ms", over, len(waits))
	assert.Empty(t, failed, "requests failed")
	for p, f := range fleets {
		opened, back := calls[p].since(frozen, thawed)
		t.Logf("p%d: first booking %v after SIGCONT", p, back.Round(time.Millisecond))
		assert.True(t, opened, "p%d: no call to Redis failed while it was frozen", p)
		assert.Less(t, back, time.Second, "p%d: back on shared state within a second of SIGCONT", p)
		assert.True(t, f.Available(), "p%d", p)
	}
}

// waitedKey is the context key of a request's wait on Redis, a
// *time.Duration that timedFleet adds to.
type waitedKey struct{}

// timedFleet is a Fleet whose calls to Redis on a request's path add the
// time they took to the request's wait (see waitedKey); its bookings'
// outcomes are recorded in calls.
type timedFleet struct {
	*fleet.Fleet
	calls *redisCalls
}

func (f timedFleet) Reserve(ctx context.Context, key string, r fleetapi.Request) (fleetapi.Grant, error) {
	defer timed(ctx, time.Now())
	g, err := f.Fleet.Reserve(ctx, key, r)
	f.calls.done(err)
	return g, err
}

func (f timedFleet) Pause(ctx context.Context, key string, d time.Duration, r fleetapi.Request) error {
	defer timed(ctx, time.Now())
	return f.Fleet.Pause(ctx, key, d, r)
}

func (f timedFleet) Throttled(ctx context.Context, key string, gen uint64) error {
	defer timed(ctx, time.Now())
	return f.Fleet.Throttled(ctx, key, gen)
}

// timed adds the time since start to the wait of ctx's request.
func timed(ctx context.Context, start time.Time) {
	if w, ok := ctx.Value(waitedKey{}).(*time.Duration); ok {
		*w += time.Since(start) // the request's own goroutine
	}
}

// redisCalls records when a process's bookings failed and succeeded.
type redisCalls struct {
	mu        sync.Mutex
	failures  []time.Time
	successes []time.Time
}

// done records a booking's outcome.
func (c *redisCalls) done(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.successes = append(c.successes, time.Now())
	} else if errors.Is(err, fleet.ErrUnavailable) {
		c.failures = append(c.failures, time.Now())
	}
}

// since reports whether a booking failed between frozen and thawed, and
// how long after thawed the first booking succeeded.
func (c *redisCalls) since(frozen, thawed time.Time) (opened bool, back time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, at := range c.failures {
		opened = opened || at.After(frozen) && at.Before(thawed)
	}
	back = time.Hour
	for _, at := range c.successes {
		if at.After(thawed) {
			back = min(back, at.Sub(thawed))
		}
	}
	return opened, back
}
