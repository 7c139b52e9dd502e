// Package engine is polite's engine: it admits each attempt of a call for
// a key, a cost and a deadline through an ordered list of gates (admit.go),
// each a mechanism of its own package that owns its state and its lock and
// waits through package gate; it holds what each gate gave the attempt
// (its permits) until the attempt is sent, answered or dropped
// (call.go); and it learns from each answer (judge.go). It knows
// nothing of HTTP: polite's Transport is one edge that drives it, turning
// requests and responses into its terms.
package engine

import (
	"math"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/memfile"
	"github.com/politehttp/polite/internal/quota"
	"github.com/politehttp/polite/internal/registry"
	"github.com/politehttp/polite/internal/robots"
	"github.com/politehttp/polite/internal/units"
)

// WindowGuard is added to a window's length: the sends are spaced by it
// more than the window asks, so that jitter between sending and arrival
// cannot put n+1 of them into one interval at the server.
const WindowGuard = 50 * time.Millisecond

// Config is what an engine is made with: polite's options, in the
// engine's terms. It is read-only once the engine is made.
type Config struct {
	PerSecond     float64 // the rate of each key's bucket (WithRate); 0: none
	Burst         int
	GlobalRate    float64 // the rate of every key's together (WithGlobalRate); 0: none
	GlobalBurst   int
	Kind          control.Kind    // each key's controller (WithAdaptive)
	Idle          time.Duration   // how long an idle key is kept (WithIdleTimeout)
	MaxInFlight   int             // requests out to a key at once (WithMaxInFlight); 0: no cap
	Window        fleetapi.Window // an exact window per key (WithWindow); N 0: none
	Fleet         fleetapi.Fleet  // the fleet the keys are shared with (WithFleet); nil: none
	Memory        Memory          // what is remembered of keys (WithMemory); nil: none
	Quotas        [units.N]quota.Configured
	Costs         bool // attempts may cost more than a request (WithCost, WithQuota)
	CrawlDelay    bool // each host's robots.txt spaces its requests (WithCrawlDelay)
	SpacingJitter float64
	Random        func() float64 // uniform in [0, 1): the jitter of the spacing
	// FetchRobots asks the host of the attempt who for its robots.txt, under
	// CrawlDelay (see robots.Fetch): the edge's, for the engine knows no
	// protocol.
	FetchRobots func(who gate.Who) (delay time.Duration, offLimits, err error)
}

// An Engine admits the attempts of every key of one edge (one polite
// Transport), and learns from their answers. It is safe for concurrent
// use.
type Engine struct {
	cfg     Config
	keys    registry.Table[Key]
	buckets buckets                      // the buckets the servers named, by host and name
	global  *Key                         // the WithGlobalRate bucket; nil without one
	sites   *registry.Table[robots.Site] // scheme://host → its robots.txt, under CrawlDelay
	// stateless: keys need no state until their server asks for a pause
	// or reports a quota (no rate, no controller, no cap, no memory).
	stateless bool
	// epoch is when the engine was made, with the clock's monotonic
	// reading: an attempt's send is timed as the time since it
	// (Call.Sending), one read of the monotonic clock where time.Now reads
	// the wall clock too.
	epoch time.Time
	// anchor is the last reading of the wall clock, of Now.
	anchor atomic.Pointer[anchor]
	// refused and failed add up the keys' counts of those (see
	// Key.Counts), which a walk of the keys would read apart, for a
	// status's totals.
	refused, failed atomic.Uint64
}

// Fleet returns the fleet the engine's keys are shared with; nil if none.
func (e *Engine) Fleet() fleetapi.Fleet { return e.cfg.Fleet }

// Totals returns every key's attempts throttled by their server and
// refused before they were sent, since the engine was made (see
// Key.Counts).
func (e *Engine) Totals() (refused, failed uint64) { return e.refused.Load(), e.failed.Load() }

// Ceiling returns the WithRate rate and burst that no controller exceeds.
func (e *Engine) Ceiling() (rate.Limit, int) {
	if e.cfg.PerSecond > 0 {
		return rate.Limit(e.cfg.PerSecond), e.cfg.Burst
	}
	return rate.Inf, math.MaxInt32
}

// Lookup returns the state of key, creating it when need is set or when a
// local rate or a controller needs one; it returns nil for a key that
// needs no state yet. It also returns the key's shard and its last
// rotation, for Keep. A state returned is held for the call: the registry
// keeps it, however long the call waits, until the call lets it go
// (Key.Release). Without that, a call that found the state and had not
// yet taken a token or a slot could be left with a state the registry
// forgot, while later calls to the key made a new one: two buckets, two
// counts in flight, and the key over its limits.
func (e *Engine) Lookup(key string, need bool) (*Key, *registry.Shard[Key], int64) {
	sh := e.keys.ShardOf(key)
	rotated := sh.Rotated()
	return e.keys.EnsureIn(sh, key, need || !e.stateless, (*Key).hold), sh, rotated
}

// Keep makes sure the state k that a call holds is still key's after the
// call (see registry.Table.Keep).
func (e *Engine) Keep(sh *registry.Shard[Key], key string, k *Key, now time.Time, rotated int64) {
	e.keys.Keep(sh, key, k, now, rotated)
}

// Keys returns the engine's table of keys, for a walk over them (see
// Status) or a test that looks inside it.
func (e *Engine) Keys() *registry.Table[Key] { return &e.keys }

// Sites returns the engine's table of robots.txt, for a test that looks
// inside it; nil without CrawlDelay.
func (e *Engine) Sites() *registry.Table[robots.Site] { return e.sites }

// Controller returns k's controller; nil under KindOff.
func (e *Engine) Controller(k *Key) control.Controller { return k.controller(e.cfg.Kind) }

// A Memory keeps what the engine learnt of its keys' servers (polite's
// Memory, whose Remembered has the fields of a memfile.Record, one for
// one).
type Memory interface {
	Recall(key string) (memfile.Record, bool)
	Remember(key string, r memfile.Record)
}

// costs returns k's quotas in units other than requests, made at now if
// needed, their buckets as the configured ones state them.
func (e *Engine) costs(k *Key, now time.Time) *quota.Costs {
	return part(k, costsPart, func() *quota.Costs { return quota.NewCosts(&e.cfg.Quotas, now) })
}
