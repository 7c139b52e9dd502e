package polite

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/quota"
	"github.com/politehttp/polite/internal/units"
)

// Defaults of the options. Each option's documentation repeats its default.
const (
	DefaultMaxAttempts   = 4
	DefaultBackoffBase   = 100 * time.Millisecond
	DefaultBackoffMax    = 20 * time.Second
	DefaultMaxRetryAfter = time.Minute
	DefaultIdleTimeout   = 10 * time.Minute
)

// An Option configures a [Transport]. Options are applied in order by
// [New]; when two options set the same thing, the last one wins, but
// [WithHooks], which adds. Values
// out of range are clamped as each option documents; no option panics.
type Option func(*config)

// config is what the options set. It is read-only after New.
type config struct {
	perSecond     float64 // 0: no local limit
	burst         int
	key           func(*http.Request) string
	maxAttempts   int
	backoffBase   time.Duration
	backoffMax    time.Duration
	maxRetryAfter time.Duration
	budget        Budget
	retryUnsafe   bool
	adaptive      AdaptiveMode
	idle          time.Duration
	maxInFlight   int     // 0: no cap
	globalRate    float64 // 0: no global limit
	globalBurst   int
	crawlDelay    bool
	spacingJitter float64
	random        func() float64 // uniform in [0, 1): the jitter of backoff and spacing
	logger        *slog.Logger
	hooks         Hooks
	fleet         fleetapi.Fleet                    // nil: each Transport paces alone
	window        fleetapi.Window                   // N 0: none
	estimate      Estimator                         // nil: requests cost no more than a request
	usage         UsageReader                       // nil: estimates stand
	priority      func(*http.Request) gate.Priority // nil: PriorityDefault, unless the context gives one (WithPriority)
	tenantWeight  func(tenant string) float64       // nil: 1 for every tenant
	classes       map[gate.Priority]gate.Class      // how each priority shares turns (WithPriorityFloor, WithPriorityWeight); nil: the defaults
	quotas        [units.N]quota.Configured         // WithQuota's, by unit
	throttleBody  throttleBody                      // WithThrottleBody's; read nil: none
	costs         bool                              // requests may cost more than a request (costing), set by New
	memory        Memory                            // WithMemory's; nil if none
}

// Options returns an Option that applies opts in order: a bundle of
// options, as a package of ready-made settings for an API returns one.
func Options(opts ...Option) Option {
	return func(c *config) {
		for _, opt := range opts {
			if opt != nil {
				opt(c)
			}
		}
	}
}

func defaultConfig() config {
	return config{
		key:           hostKey,
		maxAttempts:   DefaultMaxAttempts,
		backoffBase:   DefaultBackoffBase,
		backoffMax:    DefaultBackoffMax,
		maxRetryAfter: DefaultMaxRetryAfter,
		idle:          DefaultIdleTimeout,
		random:        rand.Float64,
	}
}

// WithRate paces the requests of each key (see [WithKey]) with a token
// bucket that refills at perSecond tokens per second and holds at most
// burst tokens; every attempt, retries included, takes one token. Calls
// that find the bucket empty wait in the order they came, and a call that
// stops waiting (its context is done) gives its place to the next.
//
// Default: no local limit. perSecond <= 0, NaN or +Inf means no local
// limit; burst < 1 is treated as 1.
func WithRate(perSecond float64, burst int) Option {
	return func(c *config) { c.perSecond, c.burst = validRate(perSecond, burst) }
}

// validRate returns a rate and burst as WithRate and WithGlobalRate take
// them: 0, 0 (no limit) for a rate that is not a positive number, and a
// burst of at least 1.
func validRate(perSecond float64, burst int) (float64, int) {
	if math.IsNaN(perSecond) || math.IsInf(perSecond, 0) || perSecond <= 0 {
		return 0, 0
	}
	return perSecond, max(burst, 1)
}

// WithKey sets the function that names the key of a request: requests with
// the same key share a token bucket and a server pause. The function must
// be safe for concurrent use and must not modify the request.
//
// Default: the request URL's host (with its port, if any), lower-cased. A
// nil function restores the default.
func WithKey(key func(*http.Request) string) Option {
	return func(c *config) {
		if key == nil {
			key = hostKey
		}
		c.key = key
	}
}

// WithMaxAttempts sets how many times a request is sent at most, the first
// attempt included: 1 means never retry.
//
// Default: 4 (one attempt and three retries). n < 1 is treated as 1.
func WithMaxAttempts(n int) Option {
	return func(c *config) { c.maxAttempts = max(n, 1) }
}

// WithBackoff sets the delay before retry n (n = 1, 2, …): a duration drawn
// uniformly from [0, min(limit, base·2^(n-1))) ("full jitter"). The result
// never exceeds limit, whatever n. When the server asks for a longer delay
// (Retry-After), the server's delay is used instead; jitter never shortens
// it.
//
// Default: base 100ms, limit 20s. Negative durations are treated as 0; a
// base above limit is lowered to limit. WithBackoff(0, 0) retries without
// delay unless the server asks for one.
func WithBackoff(base, limit time.Duration) Option {
	return func(c *config) {
		base, limit = nonNegative(base), nonNegative(limit)
		c.backoffBase, c.backoffMax = min(base, limit), limit
	}
}

// WithMaxRetryAfter sets the longest delay the server may ask for that
// polite waits on: a Retry-After, or the time until the reset of a quota
// the server reports spent. A response that asks for a longer delay is
// returned to the caller as is, and calls to the same key (or bucket) fail
// at once with a [*ThrottledError] while the server's pause lasts (a pause
// is kept for at most one hour, so a hostile value cannot block a key for
// longer).
//
// Default: 1 minute. A negative d is treated as 0: no server-asked delay is
// waited on.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(c *config) { c.maxRetryAfter = nonNegative(d) }
}

// WithRetryBudget makes the Transport take the cost of its retries from b,
// which may be shared with other transports (a [*RetryBudget]) or with
// other processes (a fleet's, on Redis), so that together they cannot
// multiply an outage with retries.
//
// Default: each Transport has a budget of its own, of capacity
// [DefaultRetryBudgetCapacity]. A nil b restores the default.
func WithRetryBudget(b Budget) Option {
	if rb, ok := b.(*RetryBudget); ok && rb == nil {
		b = nil
	}
	return func(c *config) { c.budget = b }
}

// WithRetryNonIdempotent sets whether requests whose method is not
// idempotent (POST, PATCH, …, see RFC 9110 §9.2.2) are retried even when
// they carry no Idempotency-Key header. Only enable it when the server is
// known to apply such requests at most once.
//
// Default: false: only GET, HEAD, OPTIONS, TRACE, PUT and DELETE requests,
// requests with an Idempotency-Key or X-Idempotency-Key header, requests
// whose error proves the server did not process them (see [Unprocessed]),
// and requests the server throttled (it refused them unprocessed) are
// retried.
func WithRetryNonIdempotent(retry bool) Option {
	return func(c *config) { c.retryUnsafe = retry }
}

// WithMaxInFlight caps the requests out to each key's server at once, as
// servers with a concurrent-request limit (Stripe's, a crawler's per-host
// politeness) ask. A request holds its place from just before it is sent
// until the caller has read its body to the end or closed it (or polite has
// discarded it), or until it fails; retries take a place again, and so
// does every fetch of robots.txt under [WithCrawlDelay], the first and
// those after it, for as long as the fetch lasts. Calls that find every
// place taken wait in the order they came, as long as their context
// allows. The cap needs callers to close response bodies, as net/http
// asks: a caller that holds every place of a key (its bodies open) and
// calls the key again waits as any call does, for its request or for the
// robots.txt it needs, until a place is free or the call's context ends.
//
// Default: no cap. n < 1 means no cap.
func WithMaxInFlight(n int) Option {
	return func(c *config) { c.maxInFlight = max(n, 0) }
}

// WithGlobalRate paces all the Transport's requests, whatever their key,
// with one token bucket of perSecond tokens a second holding at most burst,
// on top of each key's own pacing: a request goes when both allow it.
// Calls wait for it in the order they came.
//
// Default: no global limit. perSecond <= 0, NaN or +Inf means no global
// limit; burst < 1 is treated as 1.
func WithGlobalRate(perSecond float64, burst int) Option {
	return func(c *config) { c.globalRate, c.globalBurst = validRate(perSecond, burst) }
}

// WithIdleTimeout sets how long a key's state (its bucket, controller,
// queue and what its server said) is kept after its last use. A key idle
// that long is forgotten within one to two timeouts, lazily, by the calls
// that follow (polite starts no goroutine). A key is kept while forgetting
// it would lose something: a pause its server asked for or a quota spent
// until a reset (until then), calls in progress (in flight, or waiting
// for their turn), sends that still count in its WithWindow window, a
// bucket not yet refilled, a Crawl-delay not yet over. A forgotten key starts afresh
// when it is used again. Memory is thus bounded by the keys used within
// the last two timeouts: about 300 bytes a key with the defaults, 380 with
// WithRate, and more with WithMaxInFlight and WithCrawlDelay (see the
// figures in docs/crawling.md).
//
// Default: 10 minutes. d below a millisecond is treated as a millisecond.
func WithIdleTimeout(d time.Duration) Option {
	return func(c *config) { c.idle = max(d, time.Millisecond) }
}

// WithLogger makes the Transport log its decisions to l: retries at level
// Debug, server throttling at Info, refusals and an empty retry budget at
// Warn.
//
// Default: nil, silent.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithHooks adds functions that the Transport calls on its events. Hooks
// run synchronously on the goroutine of the call, with no lock held; they
// must be safe for concurrent use and should return quickly. Unlike other
// options, WithHooks adds to what earlier ones set: each event calls the
// hooks of every WithHooks, in the order of the options, so that hooks of
// a caller's own and those of a package (such as politeotel's metrics)
// both run.
//
// Default: no hooks. Nil fields of h are skipped.
func WithHooks(h Hooks) Option {
	return func(c *config) { c.hooks = c.hooks.join(h) }
}

// hostKey is the default key: the URL's host, lower-cased. It allocates only
// when the host has upper-case letters.
func hostKey(req *http.Request) string {
	if req.URL == nil {
		return ""
	}
	h := req.URL.Host
	for i := 0; i < len(h); i++ {
		if c := h[i]; c-'A' <= 'Z'-'A' || c >= 0x80 {
			return strings.ToLower(h)
		}
	}
	return h // most hosts are lower-case already
}

func nonNegative(d time.Duration) time.Duration { return max(d, 0) }

// WithFleet shares the Transport's pacing with every other Transport
// configured with the same fleet store, in this process or another, so
// that together they keep to one quota. Under WithFleet:
//
//   - [WithRate], [WithGlobalRate] and [WithWindow] are fleet-wide: every
//     process configured with WithRate(100, 10) means 100 a second for the
//     whole fleet, booked in the store, one round trip per attempt (fewer
//     where the store leases several sends at once);
//   - a pause a server asks for (a Retry-After that holds the key, a quota
//     spent until its reset) seen by one process holds every process's
//     calls to that key: the next they make, and those already booked
//     that the store tells of it ([fleetapi.Fleet.Paused]);
//   - the rate of a quota the server states in its headers (its limit
//     over its window) paces the fleet, fleet-wide, as WithRate does;
//   - with neither, each process's own controller ([WithAdaptive]) paces
//     it as if it were alone, and the fleet shares the server's pauses;
//     or, if the fleet shares a controller
//     ([fleetapi.Fleet.SharesController]; a fleet of package fleet does by
//     default), that one paces the fleet: its state lives in the store,
//     one per key, so that a throttle seen by several processes at once
//     counts once and a rise one process finds is used by all. It works
//     as [Gentle] does: it measures the server's limit from the successes
//     of every process between congestion events, holds just below it,
//     and probes above it now and then.
//
// When the store cannot answer, the Transport fails open: it paces each
// key on its own at the fleet's rate divided by the fleet's size
// ([fleetapi.Fleet.Size]), honours the pauses it saw, and goes back to the
// store when it answers again. No call fails or waits because of the
// store.
//
// Package [github.com/politehttp/polite/fleet] is such a store, on Redis;
// package [fleetapi] says what a store of another kind implements.
//
// Default: nil, each Transport paces alone.
func WithFleet(f fleetapi.Fleet) Option {
	return func(c *config) { c.fleet = f }
}

// WithWindow keeps each key (see [WithKey]) to at most n requests in any
// interval of length per, as APIs that state "100 per minute" enforce it.
// It composes with [WithRate] and the server's signals: a request waits
// for all of them. The window counts attempts as they are sent, retries
// included, and spaces the n+1-th from the first by per plus a guard of
// 50ms, which absorbs the jitter between sending and arrival.
//
// A Transport keeps each key's window in memory: at most 257 entries, the
// sends of each 1/256 of per merged into one that counts them at the
// latest of their instants, so that it never allows n+1 and delays a
// send by at most per/256 beyond the exact instant. Under [WithFleet] the
// window is fleet-wide and exact.
//
// Default: none. n < 1 or per <= 0 means none.
func WithWindow(n int, per time.Duration) Option {
	return func(c *config) {
		if n < 1 || per <= 0 {
			c.window = fleetapi.Window{}
			return
		}
		c.window = fleetapi.Window{N: n, Per: per}
	}
}

// MaxThrottleHead is the most of a response body's head that
// [WithThrottleBody] reads.
const MaxThrottleHead = 64 << 10

// WithThrottleBody tells polite of throttles that a response's status does
// not show: GraphQL APIs answer a spent quota with 200 and an error in the
// body (Shopify's THROTTLED, GitHub's RATE_LIMITED). For each response
// with a 2xx status, polite reads at most n bytes of the body's head (less
// if the body ends first) before it hands the response on, and calls read
// with them; the caller still reads the whole body. If read reports a
// throttle, the attempt is a throttle as a 429 is: it is retried after
// retryAfter (0: as the backoff says), and the key's pacing hears of it.
// read must be safe for concurrent use and must not keep head.
//
// Reading the head waits for it: do not use it where a 2xx answer streams
// slowly (server-sent events).
//
// Default: none. n is clamped to [1, MaxThrottleHead]; a nil read
// restores the default.
func WithThrottleBody(n int, read func(resp *http.Response, head []byte) (retryAfter time.Duration, throttled bool)) Option {
	return func(c *config) { c.throttleBody = throttleBody{n: min(max(n, 1), MaxThrottleHead), read: read} }
}

// throttleBody is what WithThrottleBody sets.
type throttleBody struct {
	n    int
	read func(resp *http.Response, head []byte) (time.Duration, bool)
}

// costing reports whether requests may cost more than a request: a
// WithCost Estimator, or a WithQuota. New sets cfg.costs by it.
func (cfg *config) costing() bool {
	return cfg.estimate != nil || cfg.quotas != [units.N]quota.Configured{}
}

// WithAdaptive selects how each key's send rate adapts to the server.
// Every attempt of a key, retries included, feeds that key's controller:
// a 429, or a 503 with Retry-After, is a throttle; any other outcome is
// not. A controller limits nothing until the key's first throttle; from
// then on the key's token bucket follows the controller's rate, and a
// [WithRate] rate is a ceiling it never exceeds. Calls waiting for a token
// see a rate change at once.
//
// Default: AdaptiveDefault. An unknown mode is treated as AdaptiveDefault.
func WithAdaptive(mode AdaptiveMode) Option {
	return func(c *config) { c.adaptive = mode.valid() }
}

// WithCost makes each request wait, besides its turn as a request, until
// every quota of its key that counts in the units of its cost holds that
// cost (see [Cost]): est tells the cost before the request is sent, unless
// the caller stated it ([ContextWithCost]). A key holds one bucket for
// each unit whose limit it knows: stated by the server's headers
// (OpenAI's, Anthropic's and every dialect [ParseSignals] reads, from the
// first response), by a [UsageReader] (a body that states its quota), or
// configured with [WithQuota]. A unit whose limit is not known yet does
// not hold the request.
//
// Requests take their costs first come first served: the first waiting
// request goes as soon as every bucket holds its cost, and the requests
// behind it wait for it, so that a large request is never passed over by
// small ones. A request whose cost in some unit is larger than the server's
// whole limit fails at once with a [*CostError], unsent, as no wait would
// help it; one whose wait at the quota's rate would pass its deadline, with
// a [*ThrottledError].
//
// After the response, each bucket is set to what the server says is left
// (less the costs of the requests it had not counted yet), and the cost
// is settled to what the request actually cost: read from the response
// body by [WithUsage], or told by [Settle]. A throttled attempt gives its
// cost back (the server did not admit it); its retry takes the cost again,
// in its call's place: before the calls that came after it.
//
// Default: none; requests cost one request each. A nil est restores the
// default (a cost stated on the context still applies).
func WithCost(est Estimator) Option {
	return func(c *config) { c.estimate = est }
}

// WithUsage settles the cost of each request that had one (see [WithCost])
// from its response: read is called with the end of the body once the
// caller has read it to the end or closed it. A request that cost less than
// its estimate gives the rest back to its key's buckets at once, as the
// server does (an LLM API gives back the tokens of max_tokens not
// generated); one that cost more takes the difference.
//
// Default: none; a request's estimate stands until the server's headers
// correct it. A nil read restores the default.
func WithUsage(read UsageReader) Option {
	return func(c *config) { c.usage = read }
}

// WithQuota states a quota the server keeps in unit (one of the Unit
// constants): limit units every per, refilled continuously, for each key,
// until the server states its own. Use it where the server states no
// limit in its headers (Azure OpenAI states only what is left), or to be
// held to it from the first request.
//
// Default: none. A unit polite does not count in, a limit that is not a
// positive number, or a per <= 0 is ignored.
func WithQuota(unit string, limit float64, per time.Duration) Option {
	return func(c *config) {
		u, ok := units.Named(unit)
		if !ok || !(limit > 0) || math.IsInf(limit, 1) || per <= 0 {
			return
		}
		c.quotas[u] = quota.Configured{Limit: limit, Per: per}
	}
}

// WithMemory makes the Transport remember what it learns of each key's
// server in m, and start each key it has no state for from what m
// remembers:
//
//   - a limit learnt or confirmed within [MemoryMaxAge] paces the key from
//     its first request: a quota the server stated paces it as after its
//     first answer (and, under [WithFleet], paces the whole fleet), and
//     the key's controller (the default, [Gentle]) starts at the limit,
//     stated or measured from throttles, its rate held just below it with
//     no first contact to find it again. It is a hint, not the truth: the
//     server's answers correct a stated quota; a throttle while the rate
//     holds below the limit shows it stale, and the key starts over as
//     one with no history does (no worse than without memory, but for
//     the requests refused before that throttle);
//   - a pause the server asked for is kept to its end: no request goes
//     to the key before it (nor, under [WithFleet], to the key's fleet).
//
// A record that makes no sense (a limit not a positive finite number, an
// instant far in the future, a pause longer than the Transport keeps) is
// ignored or cut to size, never trusted. m is called on the path of
// requests and must not block (see [Memory]).
//
// Default: nil, a Transport starts every key from nothing.
func WithMemory(m Memory) Option {
	return func(c *config) { c.memory = m }
}
