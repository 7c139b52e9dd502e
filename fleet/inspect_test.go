package fleet_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
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

// throttler is an in-memory next that accepts limit requests a second
// with a token bucket of burst (full at first), throttles the others with
// a bare 429, and answers the first request after pause() with a 429 and
// "Retry-After: 2".
type throttler struct {
	limit, burst float64

	mu       sync.Mutex
	tokens   float64
	last     time.Time
	pausing  bool
	pausedAt time.Time // when it answered the pausing 429
	ok, no   int
}

func (s *throttler) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last.IsZero() {
		s.tokens = s.burst
	} else {
		s.tokens = min(s.burst, s.tokens+now.Sub(s.last).Seconds()*s.limit)
	}
	s.last = now
	resp := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{}, Request: req}
	switch {
	case s.pausing:
		s.pausing, s.pausedAt = false, now
		resp.StatusCode = http.StatusTooManyRequests
		resp.Header.Set("Retry-After", "2")
	case s.tokens >= 1:
		s.tokens--
		s.ok++
	default:
		resp.StatusCode = http.StatusTooManyRequests
		s.no++
	}
	return resp, nil
}

// pause makes the next request's answer a pause.
func (s *throttler) pause() {
	s.mu.Lock()
	s.pausing = true
	s.mu.Unlock()
}

// get sends a request for host through tr, and closes its answer.
func get(t *testing.T, tr http.RoundTripper, host string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/", nil)
	require.NoError(t, err)
	resp, err := tr.RoundTrip(req)
	if assert.NoError(t, err) {
		resp.Body.Close()
	}
}

// Two Transports (two processes) share a fleet whose shared controller
// paces a server that throttles; one hears a pause. Inspect says what
// Redis holds: both members, the limit the controller measured, the
// pause's end; and nothing for a key no one sent to.
func TestInspectSharedControllerAndPause(t *testing.T) {
	addr := sharedAddr(t)
	rdb := newClient(t, addr)
	ns := uniqueNamespace(t)
	a := newFleet(t, newClient(t, addr), fleet.WithNamespace(ns), fleet.WithMember("a"))
	b := newFleet(t, newClient(t, addr), fleet.WithNamespace(ns), fleet.WithMember("b"))
	srv := &throttler{limit: 50, burst: 5}
	trs := []http.RoundTripper{
		polite.New(srv, polite.WithFleet(a), polite.WithMaxAttempts(1)),
		polite.New(srv, polite.WithFleet(b), polite.WithMaxAttempts(1)),
	}
	const host = "api.example"
	stateKey := fleet.RedisKey(ns, host, "s")

	// Each Transport sends, two at a time, until the shared controller
	// has measured a limit (within a second: its slow start crosses 50 a
	// second within 0.1 s).
	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, tr := range trs {
		for range 2 {
			wg.Go(func() {
				for !stop.Load() {
					get(t, tr, host)
				}
			})
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := rdb.HExists(ctx, stateKey, "W").Result()
		require.NoError(t, err)
		if n || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling a real Redis
	}
	stop.Store(true)
	wg.Wait()
	srv.pause()
	get(t, trs[0], host)
	srv.mu.Lock()
	pausedAt, ok, no := srv.pausedAt, srv.ok, srv.no
	srv.mu.Unlock()
	require.False(t, pausedAt.IsZero(), "the pausing 429 was never sent")
	t.Logf("the server accepted %d, throttled %d", ok, no)

	states, err := a.Inspect(ctx, []string{host, "unknown.example"})
	require.NoError(t, err)
	require.Len(t, states, 2)
	w, err := rdb.HGet(ctx, stateKey, "W").Float64()
	require.NoError(t, err, "the shared controller measured no limit")
	s := states[0]
	t.Logf("%+v (W %v); paused until %v after the pausing 429", s, w, s.Paused.Sub(pausedAt))
	assert.True(t, s.Known)
	assert.Equal(t, 2, s.Members)
	assert.InEpsilon(t, w, s.Limit, 1e-9, "the controller's estimate")
	assert.InDelta(t, 50, s.Limit, 40, "a limit of 50 a second, roughly")
	// The pause runs 2 s from when the Transport heard the 429; placed on
	// this process's clock, within a round trip's jitter.
	assert.WithinDuration(t, pausedAt.Add(2*time.Second), s.Paused, 50*time.Millisecond)
	assert.False(t, s.Next.Before(s.Paused), "no send before the pause ends")
	assert.Equal(t, fleetapi.KeyState{}, states[1], "a key no one sent to")
}

// Fields of another shape than the scripts write read as zero, never an
// error; well-formed ones are placed on this process's clock, and only
// the live members count.
func TestInspectReadsFieldsDefensively(t *testing.T) {
	rdb := newClient(t, sharedAddr(t))
	ns := uniqueNamespace(t)
	f := newFleet(t, rdb, fleet.WithNamespace(ns))
	rnow, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	us := func(d time.Duration) string { return strconv.FormatInt(rnow.Add(d).UnixMicro(), 10) }
	for _, c := range []struct {
		name  string
		state []any // the state hash's fields, if any
		set   func(key string) error
		want  fleetapi.KeyState
		next  time.Duration // expected Next and Paused from now, if set
		pause time.Duration
	}{
		{name: "well-formed", state: []any{"W", "12.5", "tat", us(time.Second), "pause", us(500 * time.Millisecond)},
			set: func(key string) error {
				return rdb.ZAdd(ctx, fleet.RedisKey(ns, key, "m"),
					redis.Z{Score: float64(rnow.UnixMicro()), Member: "live"},
					redis.Z{Score: float64(rnow.Add(-4 * time.Second).UnixMicro()), Member: "gone"}).Err()
			},
			want: fleetapi.KeyState{Known: true, Members: 1, Limit: 12.5}, next: time.Second, pause: 500 * time.Millisecond},
		{name: "garbage", state: []any{"W", "fast", "tat", "12abc", "pause", ""},
			want: fleetapi.KeyState{Known: true}},
		{name: "not finite", state: []any{"W", "NaN", "tat", "inf", "pause", "1e400"},
			want: fleetapi.KeyState{Known: true}},
		{name: "negative, past, beyond a Duration", state: []any{"W", "-3", "tat", us(-time.Second), "pause", "1e30"},
			want: fleetapi.KeyState{Known: true}},
		{name: "keys of other types", set: func(key string) error {
			if err := rdb.Set(ctx, fleet.RedisKey(ns, key, "s"), "x", time.Minute).Err(); err != nil {
				return err
			}
			return rdb.Set(ctx, fleet.RedisKey(ns, key, "m"), "x", time.Minute).Err()
		}, want: fleetapi.KeyState{Known: true}},
		{name: "members alone", set: func(key string) error {
			return rdb.ZAdd(ctx, fleet.RedisKey(ns, key, "m"), redis.Z{Score: float64(rnow.UnixMicro()), Member: "a"}).Err()
		}, want: fleetapi.KeyState{Known: true, Members: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := c.name
			if c.state != nil {
				require.NoError(t, rdb.HSet(ctx, fleet.RedisKey(ns, key, "s"), c.state...).Err())
			}
			if c.set != nil {
				require.NoError(t, c.set(key))
			}
			t.Cleanup(func() {
				rdb.Del(ctx, fleet.RedisKey(ns, key, "s"), fleet.RedisKey(ns, key, "m"))
			})
			states, err := f.Inspect(ctx, []string{key})
			now := time.Now()
			require.NoError(t, err)
			require.Len(t, states, 1)
			got := states[0]
			if c.next > 0 {
				// Placed from Redis's clock read at the start: what ran
				// since is off by that much, and a round trip's jitter.
				assert.WithinDuration(t, now.Add(c.next), got.Next, 50*time.Millisecond)
				assert.WithinDuration(t, now.Add(c.pause), got.Paused, 50*time.Millisecond)
				got.Next, got.Paused = time.Time{}, time.Time{}
			}
			assert.Equal(t, c.want, got)
		})
	}
}

// Inspect asks for every key in one round trip, once Redis has the
// script; none at all for no key.
func TestInspectIsOneRoundTrip(t *testing.T) {
	rdb := newClient(t, sharedAddr(t))
	var pipelines atomic.Int64
	rdb.AddHook(pipelineCounter{&pipelines})
	f := newFleet(t, rdb, fleet.WithNamespace(uniqueNamespace(t)))
	keys := make([]string, 50)
	for i := range keys {
		keys[i] = "host-" + strconv.Itoa(i)
	}
	_, err := f.Inspect(ctx, keys) // loads the script if Redis lacks it
	require.NoError(t, err)
	pipelines.Store(0)
	states, err := f.Inspect(ctx, keys)
	require.NoError(t, err)
	assert.Len(t, states, len(keys))
	assert.Equal(t, int64(1), pipelines.Load())
	states, err = f.Inspect(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, states)
	assert.Equal(t, int64(1), pipelines.Load())
}

// pipelineCounter is a go-redis hook that counts the pipelines sent.
type pipelineCounter struct{ n *atomic.Int64 }

func (pipelineCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// A Redis that is down, or frozen, fails Inspect within the Fleet's
// timeout; an open breaker fails it at once, and a caller's context that
// ends first ends it.
func TestInspectFailsWithinTheTimeout(t *testing.T) {
	const timeout = 50 * time.Millisecond
	// Well within the timeout, but for a loaded machine's scheduling (a
	// call's timer fired 10 ms late under -race in CI).
	const slack = 40 * time.Millisecond
	t.Run("frozen", func(t *testing.T) {
		srv := startRedis(t)
		f := newFleet(t, newClient(t, srv.addr), fleet.WithTimeout(timeout))
		warm(t, f)
		srv.signal(t, syscall.SIGSTOP) // SIGCONT when the test stops it
		start := time.Now()
		_, err := f.Inspect(ctx, []string{"api.example"})
		took := time.Since(start)
		require.Error(t, err)
		assert.ErrorIs(t, err, fleet.ErrUnavailable)
		assert.ErrorIs(t, err, fleet.ErrTimeout)
		assert.Less(t, took, timeout+slack)
		assert.True(t, f.Available(), "Inspect opens no breaker")
	})
	t.Run("stopped", func(t *testing.T) {
		srv := startRedis(t)
		f := newFleet(t, newClient(t, srv.addr), fleet.WithTimeout(timeout))
		warm(t, f)
		srv.stop()
		start := time.Now()
		_, err := f.Inspect(ctx, []string{"api.example"})
		took := time.Since(start)
		require.Error(t, err)
		assert.ErrorIs(t, err, fleet.ErrUnavailable)
		assert.Less(t, took, timeout+slack)
	})
	t.Run("breaker open", func(t *testing.T) {
		srv := startRedis(t)
		f := newFleet(t, newClient(t, srv.addr), fleet.WithTimeout(timeout))
		warm(t, f)
		srv.stop()
		_, err := f.Reserve(ctx, "api.example", fleetapi.Request{PerSecond: 1, Burst: 1, MaxWait: -1})
		require.Error(t, err)
		require.False(t, f.Available())
		srv.restart(t)
		_, err = f.Inspect(ctx, []string{"api.example"})
		assert.ErrorIs(t, err, fleet.ErrBreakerOpen)
	})
	t.Run("context", func(t *testing.T) {
		srv := startRedis(t)
		f := newFleet(t, newClient(t, srv.addr), fleet.WithTimeout(time.Second))
		warm(t, f)
		srv.signal(t, syscall.SIGSTOP)
		cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := f.Inspect(cctx, []string{"api.example"})
		took := time.Since(start)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.False(t, errors.Is(err, fleet.ErrUnavailable), "the caller gave up: Redis is not to blame")
		assert.Less(t, took, 20*time.Millisecond+slack)
	})
}

// On a Redis Cluster, Inspect reads keys on every master in one call, each
// on its own node's clock.
func TestClusterInspect(t *testing.T) {
	c := startCluster(t, 3, 0)
	ns := uniqueNamespace(t)
	a := newFleet(t, c.client(t), fleet.WithNamespace(ns), fleet.WithMember("a"))
	b := newFleet(t, c.client(t), fleet.WithNamespace(ns), fleet.WithMember("b"))
	r := fleetapi.Request{PerSecond: 10, Burst: 1, MaxWait: -1}
	var keys []string
	for _, n := range c.nodes {
		keys = append(keys, clusterKeyOn(t, c, ns, n, "host-"))
	}
	for _, key := range keys {
		for _, f := range []*fleet.Fleet{a, b} {
			_, err := f.Reserve(ctx, key, r)
			require.NoError(t, err)
		}
	}
	require.NoError(t, a.Pause(ctx, keys[1], 2*time.Second, r))
	paused := time.Now()
	states, err := b.Inspect(ctx, append(keys, "unknown.example"))
	require.NoError(t, err)
	require.Len(t, states, len(keys)+1)
	for i, s := range states[:len(keys)] {
		assert.True(t, s.Known, keys[i])
		assert.Equal(t, 2, s.Members, keys[i])
		assert.Zero(t, s.Limit, "no shared controller paces %s", keys[i])
		// Two sends booked 100 ms apart: the next a further 100 ms on.
		if i != 1 {
			assert.WithinDuration(t, time.Now().Add(200*time.Millisecond), s.Next, 100*time.Millisecond, keys[i])
			assert.True(t, s.Paused.IsZero(), keys[i])
		}
	}
	assert.WithinDuration(t, paused.Add(2*time.Second), states[1].Paused, 50*time.Millisecond)
	assert.Equal(t, fleetapi.KeyState{}, states[len(keys)])
}
