// Package fleet shares polite's pacing among the processes of a fleet
// through Redis, so that together they keep to one quota: plug it into a
// Transport with [polite.WithFleet].
//
//	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	f := fleet.New(rdb)
//	client := &http.Client{Transport: polite.New(nil,
//		polite.WithRate(100, 10), // 100 a second for the whole fleet
//		polite.WithFleet(f))}
//
// # What is shared
//
// Per polite key (the host, or what [polite.WithKey] returns), in a few
// Redis keys that share one hash tag (one Cluster slot):
//
//   - the pacing: a GCRA at the fleet-wide rate, booked by one script call
//     per request that returns how long to wait (a client needs "when may
//     I send", not only "allow or deny"), on Redis's clock, never the
//     processes';
//   - a server's pause: a Retry-After seen by one process holds every
//     process's next requests to the key, which then resume spaced, not in
//     a burst;
//   - an exact window quota ([polite.WithWindow]): the booked sends in a
//     sorted set, at most n in any interval of its length;
//   - the members: the processes that sent to the key in the last few
//     seconds, so that a process that cannot reach Redis knows its share.
//
// The key must name the owner of the quota: two API tokens calling one
// host are two quotas, and need [polite.WithKey] to tell them apart.
//
// Keys with no rate configured or stated are paced by one controller the
// fleet shares, or by each process's own ([WithSharedController]). A
// retry budget can be shared too ([Fleet.RetryBudget]), so that a fleet
// cannot multiply an outage with retries.
//
// # Many keys at once
//
// A process's calls to Redis queue, and each round trip carries every call
// queued when it goes, up to 512, as one pipeline (which a Cluster client
// splits by node); two round trips are out at once. A crawler with a
// thousand hosts in flight makes a few round trips at a time, never more
// than one a request: waiting for a turn is back-pressure, never a
// failure, and opens no breaker.
//
// # Failing open
//
// Every Redis call has a deadline: the timeout (50ms by default,
// [WithTimeout]) from the moment its round trip goes, and 100µs more for
// each call of the round trips out (Redis serves them in turn). It holds
// whatever client is passed in: go-redis does not stop a call at its
// context's deadline unless the client has ContextTimeoutEnabled, so the
// round trip runs apart and is abandoned at the deadline. A call that
// fails, or times out while Redis answers nothing else, opens a breaker:
// for a while no call is made, and the Transport paces each key on its
// own at the fleet's rate and burst divided by the fleet's size, from
// where the fleet's last booking for it left off (no burst of its own on
// top of the fleet's); then one call probes Redis (after 100ms, backing
// off to 300ms), and the fleet is back on shared state as soon as one
// succeeds. The sends a process made on its own are booked with its next
// booking of the key, after its own last one, so that the fleet's
// schedule counts them. A call that times out while Redis answers others
// (a busy process, one slow node) waits on, up to four timeouts, for its
// round trip, and then goes on alone, the breaker closed. Each change is
// logged once, at Warn, and reported to [WithOnChange]. No request fails
// because of Redis, nor waits longer than its share of these timeouts.
//
// # Failover
//
// After a failure, a Redis Cluster client ([redis.ClusterClient]) is asked
// to reload its map of the cluster at once: go-redis otherwise learns that
// a replica took over a dead master's slots only from a MOVED reply or
// every 60 seconds, and sends those slots' calls to the dead master
// meanwhile. During a failover the fleet paces on its own, as above, from
// the moment the master stops answering until its replica is promoted
// (the cluster's node timeout and election, about 2.5 seconds with a node
// timeout of 1 second) and a probe finds it: within 0.2 to 0.5 seconds of
// the promotion in polite's tests on a real cluster. A process that hears
// a pause published before Redis went holds for it while it paces on its
// own. A Sentinel-managed Redis ([redis.NewFailoverClient]) is followed
// by go-redis itself, which hears from the sentinels that a replica was
// promoted: the fleet shared again 0.09 to 0.25 seconds after the
// promotion in polite's tests (the sentinels took 3.8 seconds to promote
// it, with down-after-milliseconds 1000).
//
// # Redis
//
// Redis 6.2 or newer, or Valkey; single node, Sentinel, Cluster or Ring,
// through any [redis.UniversalClient]. The scripts are loaded once and
// called by hash (EVALSHA), and sent again when Redis has lost them
// (NOSCRIPT, after a restart, a failover or SCRIPT FLUSH). Replication
// is asynchronous: a failover can lose the last milliseconds of bookings,
// and let the fleet exceed the quota by that much.
package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/redis/go-redis/v9"
)

// Defaults of the options.
const (
	// DefaultTimeout bounds each Redis call: a loopback or LAN round trip
	// takes well under a millisecond, and a request should not wait longer
	// than this for Redis before it paces on its own.
	DefaultTimeout = 50 * time.Millisecond
	// DefaultNamespace prefixes every Redis key.
	DefaultNamespace = "polite"
)

// Constants of the fleet, each explained where it is used.
const (
	liveFor    = 3 * time.Second        // a member counts as live this long after its last call
	grace      = 10 * time.Minute       // state outlives its last use this long
	probeFirst = 100 * time.Millisecond // the breaker's first wait before it probes
	probeLast  = 300 * time.Millisecond // and its longest: two probes, at worst, after Redis returns, within a second
)

// ErrUnavailable reports that Redis could not be asked: it failed, did
// not answer within the timeout, or the breaker is open. The Transport
// then paces on its own. Errors that match it with [errors.Is] carry the
// cause.
var ErrUnavailable = errors.New("fleet: redis unavailable")

// The causes of [ErrUnavailable] that are not Redis's own errors: an error
// that matches either also matches ErrUnavailable.
var (
	// ErrBreakerOpen reports that no call was made: calls failed lately,
	// and the fleet waits before it tries Redis again.
	ErrBreakerOpen = errors.New("breaker open")
	// ErrTimeout reports that Redis did not answer within the timeout
	// ([WithTimeout]).
	ErrTimeout = errors.New("no answer within the timeout")
	// ErrOverloaded was returned when a process had too many calls to
	// Redis outstanding.
	//
	// Deprecated: calls queue for a round trip instead (see [Fleet]), and
	// none returns it.
	ErrOverloaded = errors.New("too many calls outstanding")

	// errBreaker is what a call the breaker holds returns, made once: the
	// breaker holds every call of an outage.
	errBreaker = fmt.Errorf("%w: %w", ErrUnavailable, ErrBreakerOpen)
)

// Fleet is a [fleetapi.Fleet] on Redis. It is safe for concurrent use. From
// its first booking it listens to the pauses other processes publish, on
// a goroutine and a connection of its own, until [Fleet.Close]; closing
// the Redis client is the caller's.
type Fleet struct {
	rdb      redis.UniversalClient
	ns       string
	timeout  time.Duration
	size     int
	member   string
	logger   *slog.Logger
	onChange func(available bool, err error)

	lease    time.Duration
	shared   bool
	batch    batcher      // the calls to Redis, queued and sent in pipelines
	lastLive atomic.Int64 // the members of the key of the last reply

	pmu     sync.Mutex
	pockets map[string]*pocket // key → what is left of its lease

	watchOnce sync.Once
	watcher   watcher // the pauses other processes publish

	flushes sync.WaitGroup // the retry budgets' flushes out, and the costs'
	costs   costs          // the adjustments of the keys' cost buckets not yet told

	observers atomic.Pointer[Observer] // what Observe added, joined; nil if none

	mu      sync.Mutex
	closed  bool      // Close was called: no flush starts
	down    bool      // the breaker is open
	probeAt time.Time // when open: when the next probe may go
	backoff time.Duration
	probing bool // a probe is out
}

var _ fleetapi.Fleet = (*Fleet)(nil)
var _ fleetapi.Congestion = (*Fleet)(nil)

// An Option configures a [Fleet].
type Option func(*Fleet)

// WithTimeout sets the deadline of each Redis call. Default:
// [DefaultTimeout]. d <= 0 means the default.
func WithTimeout(d time.Duration) Option {
	return func(f *Fleet) {
		if d > 0 {
			f.timeout = d
		}
	}
}

// WithNamespace prefixes every Redis key with ns, so that fleets (or
// deployments of different polite versions) do not share state. Default:
// [DefaultNamespace].
func WithNamespace(ns string) Option {
	return func(f *Fleet) {
		if ns != "" {
			f.ns = ns
		}
	}
}

// WithSize sets how many processes share the fleet, for the pacing of each
// while Redis cannot be asked: each paces at the fleet's rate divided by
// n. Default: 0, the number of processes that sent to the key lately as
// Redis last said (1 before Redis ever answered, so that a process that
// never reached Redis paces at the whole rate: set it when that would
// matter).
func WithSize(n int) Option {
	return func(f *Fleet) { f.size = max(n, 0) }
}

// WithMember names this process among the members (default: host name,
// process ID and a random suffix). Each process of the fleet needs its own
// name.
func WithMember(name string) Option {
	return func(f *Fleet) {
		if name != "" {
			f.member = name
		}
	}
}

// WithSharedController makes the fleet pace keys with no configured or
// stated rate by a controller shared through Redis (see
// [polite.WithFleet]) if on, or by each process's own controller if not.
// Default: true. The shared controller finds the limit of a server that
// states nothing from the throttles of every process, and counts one
// overload once: with 4 or 16 processes it used as much of the limit as
// their own controllers or more on every real server of polite's bench,
// with fewer refusals (see the figures in docs/fleet-learning.md). Each
// process's own controller paces it as if it were alone, and finds its
// share of the limit, not the limit.
func WithSharedController(on bool) Option {
	return func(f *Fleet) { f.shared = on }
}

// SharesController implements [fleetapi.Fleet]: whether
// [WithSharedController] is on.
func (f *Fleet) SharesController() bool { return f.shared }

// WithLogger logs each change between shared and local pacing to l, at
// Warn. Default: nil, silent.
func WithLogger(l *slog.Logger) Option {
	return func(f *Fleet) { f.logger = l }
}

// WithOnChange calls fn at each change between shared pacing (available
// true) and local pacing (false, with the error that caused it). It runs
// on the goroutine of a request, with no lock held. Default: nil.
func WithOnChange(fn func(available bool, err error)) Option {
	return func(f *Fleet) { f.onChange = fn }
}

// New returns a Fleet on rdb, configured by opts.
func New(rdb redis.UniversalClient, opts ...Option) *Fleet {
	f := &Fleet{
		rdb:     rdb,
		ns:      DefaultNamespace,
		timeout: DefaultTimeout,
		member:  defaultMember(),
		lease:   DefaultLease,
		backoff: probeFirst,
		shared:  true,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(f)
		}
	}
	return f
}

// Reserve implements [fleetapi.Fleet]: it books the next send for key, from
// the process's lease when it has one.
func (f *Fleet) Reserve(ctx context.Context, key string, r fleetapi.Request) (fleetapi.Grant, error) {
	f.watch()
	if owed := min(r.Owed, max(r.Burst, int(r.PerSecond), 1)); owed > 0 && r.Window.N == 0 {
		// Sends the process made on its own (while Redis could not answer,
		// or before the fleet paced the key at a rate): booked with this
		// one, so that the GCRA counts them (the first of the slots is this
		// send's; the lease, if any, is dropped).
		f.dropLease(key)
		g, _, err := f.reserveInterval(ctx, key, r, 1+owed)
		return g, err
	}
	if k := f.leaseSize(r); k > 1 {
		return f.reserveLeased(ctx, key, r, k)
	}
	g, _, err := f.reserveInterval(ctx, key, r, 1)
	return g, err
}

// reserveInterval books k sends for key in one script call, and returns
// the interval they were booked at: r's rate, or the shared controller's
// if lower.
func (f *Fleet) reserveInterval(ctx context.Context, key string, r fleetapi.Request, k int) (fleetapi.Grant, time.Duration, error) {
	ei, burst := interval(r.PerSecond, r.Burst)
	n, per := 0, int64(0)
	if r.Window.N > 0 && r.Window.Per > 0 {
		n, per = r.Window.N, r.Window.Per.Microseconds()
	}
	maxWait := int64(-1)
	if r.MaxWait >= 0 {
		maxWait = r.MaxWait.Microseconds()
	}
	adaptive := 0
	if r.Adaptive {
		adaptive = 1
	}
	args := []any{ei, burst, n, per, maxWait, f.member, liveFor.Microseconds(), grace.Microseconds(), k,
		adaptive, acceptedArg(r.Accepted), max(r.NotBefore.Microseconds(), 0)}
	args = appendCosts(args, r.Costs)
	v, err := f.run(ctx, "reserve", reserveScript, f.keys(key), args...)
	if err != nil {
		return fleetapi.Grant{}, 0, err
	}
	if len(v) != 6 {
		return fleetapi.Grant{}, 0, f.failed(fmt.Errorf("%w: reserve replied %d values", ErrUnavailable, len(v)))
	}
	f.lastLive.Store(v[3])
	return fleetapi.Grant{
		Granted: v[0] == 1,
		Later:   v[0] == 2,
		Wait:    time.Duration(max(v[1], 0)) * time.Microsecond,
		Paused:  time.Duration(max(v[2], 0)) * time.Microsecond,
		Members: int(v[3]),
		Gen:     uint64(max(v[4], 0)),
	}, time.Duration(max(v[5], 0)) * time.Microsecond, nil
}

// acceptedArg writes a request's successes for reserveScript: "gen:n"
// for each generation, comma-separated.
func acceptedArg(a []fleetapi.Accepted) string {
	var b []byte
	for _, x := range a {
		if x.N <= 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, x.Gen, 10)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(x.N), 10)
	}
	return string(b)
}

// Throttled implements [fleetapi.Fleet]: it tells key's shared controller
// of a throttle of a send booked under generation gen (see congestScript).
func (f *Fleet) Throttled(ctx context.Context, key string, gen uint64) error {
	_, err := f.run(ctx, "congest", congestScript, f.stateKey(key), gen, grace.Microseconds(), f.channel(key))
	return err
}

// Pause implements [fleetapi.Fleet]: it holds every process's sends to key
// for d.
func (f *Fleet) Pause(ctx context.Context, key string, d time.Duration, r fleetapi.Request) error {
	if d <= 0 {
		return nil
	}
	f.dropLease(key)
	ei, burst := interval(r.PerSecond, r.Burst)
	_, err := f.run(ctx, "pause", pauseScript, f.stateKey(key), max(d.Microseconds(), 1), ei, burst, grace.Microseconds(), f.channel(key))
	return err
}

// Size implements [fleetapi.Fleet]: the size set by [WithSize], or else the
// processes that sent to a key lately, as Redis last said; at least 1.
func (f *Fleet) Size() int {
	if f.size > 0 {
		return f.size
	}
	return int(max(f.lastLive.Load(), 1))
}

// Available reports whether the fleet paces on shared state: Redis
// answered the last call, or has not been asked yet.
func (f *Fleet) Available() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return !f.down
}

// interval returns the GCRA's emission interval in µs for perSecond (0 for
// no pacing) and the burst, at least 1.
func interval(perSecond float64, burst int) (int64, int) {
	if !(perSecond > 0) || math.IsInf(perSecond, 1) {
		return 0, max(burst, 1)
	}
	return max(int64(math.Round(1e6/perSecond)), 1), max(burst, 1)
}

// keys returns the Redis keys of polite key key: state, window, members.
// They share a hash tag, key with its braces escaped, so that they hash to
// one Cluster slot.
func (f *Fleet) keys(key string) []string {
	prefix := f.prefix(key)
	return []string{prefix + "s", prefix + "w", prefix + "m"}
}

// prefix returns what the Redis keys and the channel of key start with.
func (f *Fleet) prefix(key string) string {
	return f.ns + ":v1:{" + tagEscaper.Replace(key) + "}:"
}

// tagEscaper escapes braces (and percent signs) in a key, to stand in a
// Redis hash tag; tagUnescaper undoes it. Built once: a Replacer builds
// its tables at its first use.
var (
	tagEscaper   = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")
	tagUnescaper = strings.NewReplacer("%7B", "{", "%7D", "}", "%25", "%")
)

// stateKey returns the Redis key of key's state (keys(key)[0]) alone.
func (f *Fleet) stateKey(key string) []string { return []string{f.prefix(key) + "s"} }

// An Observer hears of a Fleet's calls to Redis (see [Fleet.Observe]).
// Its functions run on the goroutine that made the call (a request's, or
// that of a retry budget's flush of refunds), with no lock held; nil ones
// are skipped. A call whose caller gave up before Redis answered is not
// reported. Op names the call: "reserve"
// (a booking, or a lease of bookings), "congest" (a throttle told to the
// shared controller), "pause" (a pause told to the fleet), "budget" (the
// retry budget's take and refunds) or "adjust" (what the sends gave back
// of their costs, and the bounds the server's answers set).
type Observer struct {
	// OnCall is called when a call to Redis has been answered or has
	// failed: d is the time from the call to its answer (or to the
	// timeout), its wait for a round trip included, err nil or the error,
	// which matches [ErrUnavailable].
	OnCall func(op string, d time.Duration, err error)
	// OnFallback is called when Redis could not be asked (it failed, did
	// not answer in time, or the breaker is open), so that the process
	// goes on alone: a booking's request is paced locally, a retry takes
	// from the process's share of the budget, a throttle or a pause is not
	// told to the fleet. err says why, and matches [ErrUnavailable].
	OnFallback func(op string, err error)
}

// Observe adds o to what hears of the fleet's calls to Redis. It may be
// called at any time, from any goroutine; observers are never removed.
func (f *Fleet) Observe(o Observer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	joined := o
	if was := f.observers.Load(); was != nil {
		joined = Observer{OnCall: bothCall(was.OnCall, o.OnCall), OnFallback: bothFallback(was.OnFallback, o.OnFallback)}
	}
	f.observers.Store(&joined)
}

func bothCall(a, b func(string, time.Duration, error)) func(string, time.Duration, error) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(op string, d time.Duration, err error) { a(op, d, err); b(op, d, err) }
}

func bothFallback(a, b func(string, error)) func(string, error) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(op string, err error) { a(op, err); b(op, err) }
}

// run calls script (named op for observers) under the fleet's deadline and
// breaker, and returns its reply as integers.
func (f *Fleet) run(ctx context.Context, op string, script *redis.Script, keys []string, args ...any) ([]int64, error) {
	v, err := f.call(ctx, op, script, keys, args...)
	if err != nil && errors.Is(err, ErrUnavailable) {
		if o := f.observers.Load(); o != nil && o.OnFallback != nil {
			o.OnFallback(op, err)
		}
	}
	return v, err
}

// call is run without telling observers of a fallback.
func (f *Fleet) call(ctx context.Context, op string, script *redis.Script, keys []string, args ...any) ([]int64, error) {
	ok, probe := f.allow(time.Now())
	if !ok {
		return nil, errBreaker
	}
	c := &scriptCall{script: script, keys: keys, args: args, done: make(chan reply, 1)}
	f.submit(c)
	answered := false
	defer func() {
		if !answered {
			c.abandoned.Store(true) // not sent if still queued
		}
	}()
	start := time.Now()
	observed := func(err error) {
		if o := f.observers.Load(); o != nil && o.OnCall != nil {
			o.OnCall(op, time.Since(start), err)
		}
	}
	// The timeout runs from the moment the call's round trip goes: a call
	// that waits in the queue for its turn waits on, for the caller's
	// context only. The deadline holds whatever client is passed in:
	// go-redis does not stop a call at its context's deadline unless the
	// client has ContextTimeoutEnabled, so a round trip that outlives it is
	// abandoned.
	timer := time.NewTimer(f.timeout)
	defer timer.Stop()
	for {
		select {
		case r := <-c.done:
			answered = true
			if r.err != nil {
				err := f.failed(fmt.Errorf("%w: %w", ErrUnavailable, r.err))
				observed(err)
				return nil, err
			}
			f.succeeded()
			observed(nil)
			return r.v, nil
		case <-timer.C:
			due := c.due.Load()
			if due == 0 && !probe && !f.Available() {
				// Still queued, and a round trip failed meanwhile: go on
				// alone, as a call the breaker holds does.
				return nil, errBreaker
			}
			if left := time.Until(time.Unix(0, due)); due == 0 || left > 0 {
				if due == 0 {
					left = f.timeout
				}
				timer.Reset(left) // queued, or sent since: its round trip has time left
				continue
			}
			err := fmt.Errorf("%w: %w (%v)", ErrUnavailable, ErrTimeout, f.timeout)
			silent := time.Since(time.Unix(0, f.batch.answered.Load())) >= f.timeout
			if silent || probe {
				// Redis has answered nothing for a timeout: it is down
				// or hung, not slow for this call alone.
				observed(f.failed(err))
				return nil, err
			}
			// Redis answered other round trips meanwhile: a busy process,
			// or one slow node, delays this one, whose booking is likely
			// made. It waits on, up to slowWaits times its deadline,
			// rather than send on its own beside the fleet's schedule;
			// then it goes on alone, the breaker closed.
			if extra := time.Duration(slowWaits-1) * f.timeout; !c.extended {
				c.extended = true
				timer.Reset(extra)
				continue
			}
			observed(err)
			return nil, err
		case <-ctx.Done():
			// The caller gave up: Redis is not to blame. A probe gives its
			// turn to the next call.
			if probe {
				f.mu.Lock()
				f.probing = false
				f.mu.Unlock()
			}
			return nil, context.Cause(ctx)
		}
	}
}

// ints reads a script's reply: an integer or a list of integers.
func ints(res any) []int64 {
	switch v := res.(type) {
	case int64:
		return []int64{v}
	case []any:
		out := make([]int64, 0, len(v))
		for _, x := range v {
			if i, ok := x.(int64); ok {
				out = append(out, i)
			}
		}
		return out
	}
	return nil
}

// allow reports whether a Redis call may go at now: the breaker is
// closed, or it is open, its wait is over, and no other probe is out; then
// the call is the probe.
func (f *Fleet) allow(now time.Time) (ok, probe bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.down {
		return true, false
	}
	if f.probing || now.Before(f.probeAt) {
		return false, false
	}
	f.probing = true
	return true, true
}

// failed opens the breaker, or backs off when a probe failed, and
// returns err.
func (f *Fleet) failed(err error) error {
	f.mu.Lock()
	changed := !f.down
	switch {
	case !f.down:
		f.down, f.backoff = true, probeFirst
	case f.probing:
		f.probing, f.backoff = false, min(2*f.backoff, probeLast)
	default: // a call that was out when the breaker opened
		f.mu.Unlock()
		return err
	}
	// A jittered wait, so that the processes of a fleet do not probe in
	// step.
	wait := f.backoff/2 + time.Duration(mrand.Int64N(int64(f.backoff/2)+1))
	f.probeAt = time.Now().Add(wait)
	f.mu.Unlock()
	f.refresh()
	if changed {
		if f.logger != nil {
			f.logger.Warn("polite fleet: Redis unavailable, pacing locally", "err", err)
		}
		if f.onChange != nil {
			f.onChange(false, err)
		}
	}
	return err
}

// refresh has a Cluster client reload its map of the cluster, in the
// background, so that the next probe goes to the node that serves the
// slot now: after a failover, go-redis learns that a replica took over
// only from a MOVED reply or every 60 seconds, and until then sends the
// slot's calls to the dead master.
func (f *Fleet) refresh() {
	if c, ok := f.rdb.(interface{ ReloadState(context.Context) }); ok {
		c.ReloadState(context.Background())
	}
}

// succeeded closes the breaker.
func (f *Fleet) succeeded() {
	f.mu.Lock()
	changed := f.down
	f.down, f.probing, f.backoff = false, false, probeFirst
	f.mu.Unlock()
	if changed {
		if f.logger != nil {
			f.logger.Warn("polite fleet: Redis back, pacing on shared state")
		}
		if f.onChange != nil {
			f.onChange(true, nil)
		}
	}
}

func defaultMember() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
