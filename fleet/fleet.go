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
// succeeds. The calls queued for a turn when the breaker opens go on
// alone at once, and a probe that gets no turn within the timeout fails
// unsent, as one sent would: the round trips out are held by a Redis that
// answers nothing (a frozen or unreachable one holds them until the
// client's read timeout, 5 seconds by go-redis's default). The sends a process made on
// its own are booked with its next booking of the key, after its own last
// one, so that the fleet's schedule counts them. A call that times out
// while Redis answers others (a busy process, one slow node) waits on, up
// to four timeouts, for its round trip, and then goes on alone, the
// breaker closed; but until Redis has answered its round trip or one sent
// after it, only while Redis answers something at least every 50ms (every
// timeout, if shorter): an answer to a round trip sent before its own may
// be Redis's last before it froze. A frozen Redis thus holds no call more
// than 50ms past its deadline, whatever the timeout. Each change is
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
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/politehttp/polite/fleetapi"
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
	closed  bool          // Close was called: no flush starts
	down    bool          // the breaker is open
	opened  chan struct{} // closed when the breaker opens, to free the calls queued; nil until a call asks
	probeAt time.Time     // when open: when the next probe may go
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
