package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/politehttp/polite/fleetapi"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// A call whose round trip Redis has not answered by its deadline waits on
// only while Redis serves what went after it: with a timeout of 400ms,
// round trip A out, round trip B sent after it, and A answered after B
// went (at once, or 20ms before B's deadline), a Redis frozen then holds
// B's call no longer than the timeout and 100ms, and the breaker opens;
// a Redis that answers a round trip sent after B while B is held (one
// slow node) keeps B's call waiting on, and answered, the breaker closed.
// Which round trip Redis answers is ordered by a proxy that holds each
// connection's requests until released.
func TestALateCallTellsAFrozenRedisFromASlowOne(t *testing.T) {
	const timeout = 400 * time.Millisecond
	r := fleetapi.Request{PerSecond: 1000, Burst: 1000, MaxWait: -1}
	for _, c := range []struct {
		name     string
		answerA  time.Duration // when A is answered, after B went; 0 at once
		frozen   bool          // Redis is frozen once A is answered; else B is answered at 1.5 timeouts
		bound    time.Duration // B's call returns within this
		answered bool          // B's call is answered
	}{
		{"frozen after answering A at once", 0, true, timeout + 100*time.Millisecond, false},
		{"frozen after answering A just before B's deadline", timeout - 20*time.Millisecond, true, timeout + 100*time.Millisecond, false},
		{"alive, B held, a round trip after B answered", 0, false, 2 * timeout, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := startRedis(t)
			p := startHoldProxy(t, srv.addr)
			rdb := redis.NewClient(&redis.Options{Addr: p.addr}) // go-redis's defaults, as a user's
			t.Cleanup(func() { _ = rdb.Close() })
			f := newFleet(t, rdb, fleet.WithNamespace(uniqueNamespace(t)), fleet.WithLease(0), fleet.WithTimeout(timeout))
			warm(t, f)
			openConns(t, rdb, 2) // so that no connection is opened while the proxy holds it
			reserve := func(key string) <-chan error { return reserveAsync(f, key, r) }

			p.holdAll()
			a := reserve("a") // round trip A
			connA := p.waitHeld(t, 1)[0]
			startB := time.Now()
			b := reserve("b") // round trip B, sent after A
			p.waitHeld(t, 2)
			var after <-chan error
			if !c.frozen {
				after = reserve("c") // queued: it goes once A is answered, after B, on A's connection
			}
			time.Sleep(time.Until(startB.Add(c.answerA)))
			p.release(connA)
			require.NoError(t, <-a, "A answered")
			if c.frozen {
				srv.signal(t, syscall.SIGSTOP)
				p.releaseAll() // B reaches a Redis that answers nothing
			} else {
				require.NoError(t, <-after, "the round trip after B answered")
				time.Sleep(time.Until(startB.Add(timeout * 3 / 2)))
				p.releaseAll()
			}
			err := <-b
			took := time.Since(startB)
			t.Logf("B's call returned after %v: %v", took.Round(time.Millisecond), err)
			assert.LessOrEqual(t, took, c.bound, "B's call waited on Redis")
			if c.answered {
				assert.NoError(t, err)
				assert.Greater(t, took, timeout, "B's call waited on past its deadline")
				assert.True(t, f.Available(), "the breaker closed")
			} else {
				assert.ErrorIs(t, err, fleet.ErrTimeout)
				assert.False(t, f.Available(), "the breaker open")
			}
		})
	}
}

// Calls queued behind two round trips that Redis does not answer go on
// alone as soon as the breaker opens, not at their own next timeout: with
// a timeout of 400ms and two round trips of 512 calls held (given 51 and
// 102ms more for their length), calls queued just after them return
// within 50ms of the breaker's opening, at about the timeout and 50ms,
// rather than at two timeouts.
func TestQueuedCallsGoAloneWhenTheBreakerOpens(t *testing.T) {
	const timeout = 400 * time.Millisecond
	r := fleetapi.Request{PerSecond: 1e6, Burst: 1e6, MaxWait: -1}
	srv := startRedis(t)
	p := startHoldProxy(t, srv.addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.addr}) // go-redis's defaults, as a user's
	t.Cleanup(func() { _ = rdb.Close() })
	var openedAt atomic.Int64
	f := newFleet(t, rdb, fleet.WithNamespace(uniqueNamespace(t)), fleet.WithLease(0), fleet.WithTimeout(timeout),
		fleet.WithOnChange(func(ok bool, _ error) {
			if !ok {
				openedAt.CompareAndSwap(0, time.Now().UnixNano())
			}
		}))
	warm(t, f)
	trips, _ := fleet.RoundTrips(f)
	reserve := func(key string) <-chan error { return reserveAsync(f, key, r) }

	openConns(t, rdb, 2) // so that no connection is opened while the proxy holds it
	p.holdAll()
	first := []<-chan error{reserve("a0")} // round trip A0, one call
	p.waitHeld(t, 1)
	first = append(first, reserve("b0")) // B0, one call
	held := p.waitHeld(t, 2)
	var long []<-chan error // the next two round trips, 512 calls each
	for i := range 1024 {
		long = append(long, reserve(fmt.Sprint("k", i)))
	}
	for fleet.Queued(f) < 1024 {
		time.Sleep(time.Millisecond) // real goroutines queueing: no fake time here
	}
	p.pass(held[0])
	p.pass(held[1])
	for _, done := range first {
		require.NoError(t, <-done, "A0 and B0 answered")
	}
	for n, _ := fleet.RoundTrips(f); n < trips+4; n, _ = fleet.RoundTrips(f) {
		time.Sleep(time.Millisecond)
	}
	require.Zero(t, fleet.Queued(f), "the 1,024 calls in two round trips")
	start := time.Now()
	var queued []<-chan error
	for i := range 8 {
		queued = append(queued, reserve(fmt.Sprint("q", i)))
	}
	var worst time.Duration
	for _, done := range queued {
		assert.ErrorIs(t, <-done, fleet.ErrUnavailable)
		worst = max(worst, time.Since(start))
	}
	for _, done := range long {
		assert.ErrorIs(t, <-done, fleet.ErrTimeout)
	}
	require.NotZero(t, openedAt.Load(), "the breaker opened")
	opened := time.Unix(0, openedAt.Load()).Sub(start)
	t.Logf("the breaker opened %v after the calls queued; the last of them returned after %v", opened.Round(time.Millisecond), worst.Round(time.Millisecond))
	assert.Less(t, worst, opened+50*time.Millisecond, "a queued call returned more than 50ms after the breaker opened")
}

// reserveAsync books a send of key on its own goroutine, and returns
// where its error comes.
func reserveAsync(f *fleet.Fleet, key string, r fleetapi.Request) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := f.Reserve(ctx, key, r)
		done <- err
	}()
	return done
}

// holdProxy is a TCP proxy to a Redis that holds, on each connection
// while it is held, what the client sends: a test orders the round trips
// Redis answers.
type holdProxy struct {
	addr string
	mu   sync.Mutex
	hold bool        // new connections start held
	held []*heldConn // the connections holding bytes, in the order they began to
	all  []*heldConn
}

// heldConn is one connection of a holdProxy.
type heldConn struct {
	client, server net.Conn
	held           bool   // what the client sends is kept in pending
	pending        []byte // held, to be sent on release
	listed         bool   // in holdProxy.held
}

// startHoldProxy starts a holdProxy to addr, holding nothing, closed when
// t ends.
func startHoldProxy(t testing.TB, addr string) *holdProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &holdProxy{addr: l.Addr().String()}
	t.Cleanup(func() {
		_ = l.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.all {
			_ = c.client.Close()
			_ = c.server.Close()
		}
	})
	go func() {
		for {
			client, err := l.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", addr)
			if err != nil {
				_ = client.Close()
				continue
			}
			p.mu.Lock()
			c := &heldConn{client: client, server: server, held: p.hold}
			p.all = append(p.all, c)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(client, server); _ = client.Close() }()
			go p.forward(c)
		}
	}()
	return p
}

// forward sends what c's client sends to its server, or holds it.
func (p *holdProxy) forward(c *heldConn) {
	defer c.server.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if c.held {
				if !c.listed {
					c.listed = true
					p.held = append(p.held, c)
				}
				c.pending = append(c.pending, buf[:n]...)
			} else {
				_, _ = c.server.Write(buf[:n])
			}
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// holdAll holds every connection, and those to come.
func (p *holdProxy) holdAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = true
	for _, c := range p.all {
		c.held = true
	}
}

// waitHeld waits, at most 5 seconds, until n connections hold bytes, and
// returns them in the order they began to.
func (p *holdProxy) waitHeld(t testing.TB, n int) []*heldConn {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p.mu.Lock()
		held := slices.Clone(p.held)
		p.mu.Unlock()
		if len(held) >= n {
			return held
		}
		require.True(t, time.Now().Before(deadline), "%d connections hold bytes, not %d", len(held), n)
		time.Sleep(time.Millisecond) // a real proxy: no fake time here
	}
}

// pass sends what c holds, and holds what comes next.
func (p *holdProxy) pass(c *heldConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.passLocked(c)
}

// openConns has rdb open n connections to Redis, idle in its pool.
func openConns(t testing.TB, rdb *redis.Client, n int) {
	t.Helper()
	conns := make([]*redis.Conn, n)
	for i := range conns {
		conns[i] = rdb.Conn()
		require.NoError(t, conns[i].Ping(ctx).Err())
	}
	for _, c := range conns {
		require.NoError(t, c.Close())
	}
}

// release sends what c holds, and holds nothing more of it.
func (p *holdProxy) release(c *heldConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.releaseLocked(c)
}

// releaseAll releases every connection, and holds no new one.
func (p *holdProxy) releaseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = false
	for _, c := range p.all {
		p.releaseLocked(c)
	}
}

func (p *holdProxy) releaseLocked(c *heldConn) {
	c.held = false
	p.passLocked(c)
}

func (p *holdProxy) passLocked(c *heldConn) {
	if len(c.pending) > 0 {
		_, _ = c.server.Write(c.pending)
		c.pending = nil
	}
}

// oneMemory is a Memory that recalls limit for every key, learnt a
// minute ago, and keeps nothing.
type oneMemory struct{ limit float64 }

func (m oneMemory) Recall(string) (polite.Remembered, bool) {
	return polite.Remembered{Limit: m.limit, At: time.Now().Add(-time.Minute), Since: time.Now().Add(-time.Hour)}, true
}
func (oneMemory) Remember(string, polite.Remembered) {}

// A fleet whose processes remember the key's limit and lose Redis paces
// the key at that limit in all, each process at its share, not each at
// the whole: a breaker open a tenth of a second at a remembering fleet's
// start let each of 3 processes' queued calls go at the whole rate, and
// HAProxy refused 5-10% of the bench's run. Three processes, 20 callers
// each, remember 60 a second; once Redis is stopped, they send about 60 a
// second between them (180 without the share).
func TestProcessesAloneTakeTheirShareOfARememberedRate(t *testing.T) {
	const limit, processes = 60.0, 3
	srv := startRedis(t)
	ns := uniqueNamespace(t)
	next := new(hostCounter)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for p := range processes {
		f := newFleet(t, newClient(t, srv.addr), fleet.WithNamespace(ns), fleet.WithMember(fmt.Sprint("p", p)), fleet.WithSize(processes))
		tr := polite.New(next, polite.WithFleet(f), polite.WithMemory(oneMemory{limit: limit}))
		for range 20 {
			wg.Go(func() {
				for ctx.Err() == nil {
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/items", nil)
					if resp, err := tr.RoundTrip(req); err == nil {
						_ = resp.Body.Close()
					}
				}
			})
		}
	}
	time.Sleep(time.Second) // the fleet's shared pacing, with Redis
	srv.stop()
	stopped := time.Now()
	time.Sleep(2500 * time.Millisecond) // alone
	cancel()
	wg.Wait()
	from, to := stopped.Add(500*time.Millisecond), stopped.Add(2500*time.Millisecond)
	n := 0
	for _, at := range next.arrivals["api.test"] {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	perSecond := float64(n) / to.Sub(from).Seconds()
	t.Logf("alone, the fleet sent %.1f a second (it remembers %v)", perSecond, limit)
	assert.LessOrEqual(t, perSecond, 1.2*limit, "the processes alone kept to the remembered rate between them")
	assert.GreaterOrEqual(t, perSecond, 0.5*limit, "the processes alone still send")
}
