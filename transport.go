// Package polite makes outbound HTTP calls well-behaved. Its [Transport]
// is an [http.RoundTripper] that wraps another one and paces, retries and
// listens to the server on its behalf:
//
//	client := &http.Client{Transport: polite.New(nil, polite.WithRate(10, 5))}
//
// # Pacing
//
// Each key (the request URL's host unless [WithKey] says otherwise) has a
// token bucket from golang.org/x/time/rate, and every attempt, retries
// included, waits for its turn and a token: calls are served in the order
// they came. The bucket's rate is the one [WithRate] sets, if any, until
// the server first throttles the key; from then on a controller sets it
// from the server's answers (see Adaptive rate below), never above the
// WithRate rate. When a server answers 429 or 503 with a Retry-After, the
// refused call waits for it before its retry; a Retry-After longer than its
// own rounding (2 seconds or more when it counts whole seconds, any when it
// counts milliseconds) also pauses the key: every call to that key waits
// until the pause ends instead of hitting the server too. A "Retry-After:
// 1" says no more than "slow down": servers round up to the second a wait
// of a few milliseconds, and holding every call for it would waste a
// second of the server's quota at each refusal; the key's controller,
// which heard the throttle, slows the other calls instead.
//
// A wait never outlives the request's context: a wait that would end after
// the deadline fails at once with a [*ThrottledError] that says how long it
// would have been, and a cancelled wait gives its place back.
//
// # Server signals
//
// Servers tell their clients their quota, and polite listens on every
// response, not only after a 429. [ParseSignals] reads Retry-After and its
// millisecond variants, the IETF RateLimit and RateLimit-Policy fields of
// every draft, X-RateLimit-* and X-Rate-Limit-* (GitHub, GitLab, X,
// Reddit, Discord), OpenAI's and Anthropic's headers and Shopify's call
// limit, into one [Signals] value, and keeps one picture of each quota: its
// limit over its window (stated, or learnt from how the reset advances)
// paces the key from the first responses, less a small margin, and is the
// limit the key's controller takes; when the reset is far against its
// rounding, R requests left until a reset in T go evenly at most R/T a
// second, counting the requests still in flight, and when R is spent, none
// goes until the reset. When the server names the bucket a request counted against
// (Discord's bucket, the IETF partition key, GitHub's resource), requests
// to that path, from any key, share the bucket's quota, so a spent search
// quota holds search requests only. A 403 that reports its quota spent
// (GitHub's primary limit) is a throttle like a 429.
//
// Values are hints, never a licence to hammer: malformed ones are ignored,
// a reset that never comes is held at most an hour, a spent quota with no
// usable reset holds the key a second, and a reset or Retry-After longer
// than [WithMaxRetryAfter] is refused rather than waited on.
//
// # Adaptive rate
//
// A client that is not told the server's limit must find it. Every
// attempt feeds its key's controller: a 429, or a 503 with Retry-After, is
// a throttle; any other outcome is not. [WithAdaptive] selects the
// controller: [Gentle] by default, [Cubic] (the AWS SDKs' adaptive retry
// mode, number for number), [AIMD], or none. The controllers are exported
// and usable outside HTTP.
//
// # Where polite departs from the AWS SDKs
//
// polite reproduces AWS's adaptive mode in [Cubic] and its retry quota in
// [RetryBudget], and departs from them where they serve callers of APIs
// they do not own poorly:
//
//   - The default controller is [Gentle], not Cubic. Cubic drops to 0.5
//     requests per second when the first response is a throttle, cuts the
//     rate by 0.7 at every throttle of a burst, and regrows on a curve
//     whose constant is absolute; on every real server of polite's bench
//     (README.md) it delivers less of the server's limit than Gentle does.
//   - One controller per key (host), not one per client: one slow host does
//     not slow the others.
//   - A throttle is an HTTP 429, or a 503 with Retry-After. AWS recognises
//     throttles by its own error codes only, and does not retry a bare 429.
//   - Retry-After is honoured, capped by [WithMaxRetryAfter], and pauses
//     the key when it is longer than its rounding. AWS ignores it.
//   - Calls waiting for a token queue in order, give their place back when
//     they stop waiting, and see a change of rate at once. AWS's waiters
//     sleep for the wait computed when they started.
//   - Every successful attempt refunds the retry budget in every mode, as
//     botocore does; AWS SDK for Go v2 credits nothing in adaptive mode, so
//     its quota never refills there (aws-sdk-go-v2#3550).
//   - Backoff is full jitter from 100ms, capped at 20s after the jitter;
//     AWS's legacy backoff starts at up to 2s and ends at a flat 20s.
//
// # What is retried
//
// A failed attempt is retried when it failed with
//   - a transport error that may pass: connection refused or reset, EOF
//     (or HTTP/2's GOAWAY closing the connection under the request),
//     timeouts, temporary DNS failures; never TLS or certificate errors, an
//     unsupported scheme, a redirect error, or an error of the request's
//     own context;
//   - status 408, 429, 500, 502, 503 or 504; never 501 or any other status.
//
// and the request can be sent again safely:
//   - its method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE), or
//     it carries an Idempotency-Key (or X-Idempotency-Key) header, or
//     [WithRetryNonIdempotent] is set, or the error proves that the server
//     did not process the request, whatever its method ([Unprocessed]):
//     the connection was never made (a dial error: refused, unreachable,
//     timed out; a temporary DNS failure), or the server refused its
//     HTTP/2 stream with REFUSED_STREAM (RFC 9113 §8.7);
//   - it has no body, or a body it can rebuild with
//     [http.Request.GetBody]; a body is never resent empty, and polite never
//     buffers bodies to make them replayable.
//
// Retries stop after [WithMaxAttempts] attempts, when the [RetryBudget] is
// empty, when the wait before the next attempt would end after the
// context deadline, and when the server asks for a longer wait than
// [WithMaxRetryAfter] allows.
//
// # Delays
//
// The wait before retry n is max(backoff(n), the server's delay). backoff(n)
// is drawn uniformly from [0, min(limit, base·2^(n-1))) (see
// [WithBackoff]); the server's delay is its Retry-After or, without one,
// the time until the reset of a quota it reports spent. Retry-After is
// read as delta-seconds, fractional ones too, or as an HTTP-date in any of
// its three formats; garbage and negative values are ignored, and a valid
// one too far to hold in a time.Duration (a date in the year 9999) is taken
// as the longest wait, over any [WithMaxRetryAfter]. Jitter never shortens
// a server-asked delay.
//
// # Retry budget
//
// A [RetryBudget] is the AWS SDKs' retry quota: 500 tokens; a retry costs 5
// (10 after a timeout); every successful attempt gives 1 back and a
// successful retry also gives its cost back. A long outage therefore costs
// about 100 retries, after which calls are sent once each until successes
// refill the budget. Each Transport has a budget of its own unless
// [WithRetryBudget] shares one, among transports or, through Redis, among
// the processes of a fleet.
//
// # Errors
//
// RoundTrip returns a response or an error, never both. When retries end
// on a 429 or 5xx, the last response is returned with its body unread and
// a nil error; every response that polite discards is drained (at most 4
// KiB) and closed. An error is returned only when no response was
// obtained: the last transport error, the context's cause, a
// [*ThrottledError] (matching [ErrThrottled]) when a wait was refused, a
// [*RobotsError] (matching [ErrRobotsUnreachable]) for a host off limits
// under [WithCrawlDelay], or an error matching both
// [ErrRetryBudgetExhausted] and the transport error when the budget
// stopped a retry. [http.Client] wraps these in a
// *url.Error; [errors.Is] and [errors.As] see through it.
//
// # Crawling
//
// A Transport keeps state only for the keys it has seen lately, so that a
// crawler can send to millions of hosts: a key idle for [WithIdleTimeout]
// (10 minutes by default) is forgotten within one to two timeouts, lazily,
// by the calls to other keys; no goroutine sweeps. A key is kept while
// forgetting it would lose something: a pause its server asked for, a
// quota spent until its reset, requests in flight or waiting, a bucket
// not yet refilled, a Crawl-delay not yet over. A live key costs about 220
// bytes with the defaults, 300 with [WithRate]. The keys are spread over
// 64 independently locked shards, so that calls to different hosts seldom
// wait for one another.
//
// Crawlers also want, per host: a cap on requests in flight
// ([WithMaxInFlight]), the Crawl-delay of its robots.txt
// ([WithCrawlDelay], randomized by [WithSpacingJitter]), and, over all
// hosts, a rate no crawl exceeds ([WithGlobalRate]). Under WithCrawlDelay
// a host whose robots.txt is unreachable is off limits, as RFC 9309 asks:
// requests to it fail with a [*RobotsError] (matching
// [ErrRobotsUnreachable]).
//
// # Fleets and windows
//
// An API's limit belongs to an account, not to a process. [WithFleet]
// shares a Transport's pacing with the other processes calling the API
// through a store (package github.com/politehttp/polite/fleet implements
// it on Redis): the configured and stated rates become fleet-wide, a
// pause one process hears holds them all, and when the store cannot
// answer each process paces at its share. [WithWindow] keeps a key to at
// most n requests in any interval of a length, as APIs that state "100 per
// minute" count them, locally or fleet-wide.
//
// # Observing it
//
// [WithHooks] calls functions on each attempt, retry, throttle, wait (with
// what it waits for: a [WaitCause]), refusal and empty budget;
// [WithLogger] logs the same to a log/slog Logger. [Transport.Keys] reads
// each key's rate and the server's limit as polite knows it. Package
// github.com/politehttp/polite/politeotel (a module of its own) turns all
// of it into OpenTelemetry metrics and trace events, and package
// github.com/politehttp/polite/politeretry gives a go-retryablehttp client
// polite's judgement.
//
// # Concurrency
//
// A Transport is safe for concurrent use by multiple goroutines. It starts
// no goroutines, and it holds no lock while it calls next, waits, or runs
// a hook. It never modifies the caller's request: retries send a clone.
package polite

import (
	"context"
	"io"
	"math"
	"net/http"
	"time"

	"golang.org/x/time/rate"
)

// drainLimit is how much of a discarded response body is read before it is
// closed, so that its connection can be reused without reading a large body.
const drainLimit = 4 << 10

// A Transport is an [http.RoundTripper] that paces, retries and listens to
// the server on behalf of the RoundTripper it wraps (see the package
// documentation).
//
// A Transport is safe for concurrent use by multiple goroutines. It holds
// per-key state and a retry budget, so it should be created once and
// reused. Create it with [New]; the zero value is not usable. A Transport
// is immutable after New.
type Transport struct {
	next   http.RoundTripper
	cfg    config
	keys   *registry
	global *keyState           // the WithGlobalRate bucket; nil without one
	robots *table[robotsEntry] // scheme://host → its robots.txt, under WithCrawlDelay
	budget Budget
}

var _ http.RoundTripper = (*Transport)(nil)

// New returns a Transport that sends requests through next, configured by
// opts. A nil next means [http.DefaultTransport].
func New(next http.RoundTripper, opts ...Option) *Transport {
	if next == nil {
		next = http.DefaultTransport
	}
	cfg := defaultConfig()
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	budget := cfg.budget
	if budget == nil {
		budget = NewRetryBudget(DefaultRetryBudgetCapacity)
	}
	t := &Transport{
		next:   next,
		cfg:    cfg,
		keys:   newRegistry(&cfg),
		budget: budget,
	}
	if cfg.globalRate > 0 {
		limit, burst := rate.Limit(cfg.globalRate), min(cfg.globalBurst, math.MaxInt32)
		t.global = &keyState{limiter: rate.NewLimiter(limit, burst), limit: limit, burst: int32(burst)}
	}
	if cfg.crawlDelay {
		t.robots = new(table[robotsEntry])
		t.robots.init(cfg.idle, func(time.Time) *robotsEntry { return new(robotsEntry) }, (*robotsEntry).busy)
	}
	if h := cfg.hooks.OnNew; h != nil {
		h(t)
	}
	return t
}

// RoundTrip sends req through the wrapped RoundTripper, waiting for
// permission before each attempt and retrying failed attempts as the
// package documentation describes. It returns a response or an error,
// never both, and does not modify req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := call{t: t, req: req, ctx: req.Context(), key: t.cfg.key(req), resent: -1}
	returned := false
	defer func() {
		if !returned {
			c.abandon()
		}
		if c.ks != nil {
			c.ks.release() // a slot the response's body holds keeps the key on its own
		}
	}()
	resp, err := c.run()
	returned = true
	return resp, err
}

// abandon lets go of what a call held when a panic (a hook's, the
// logger's, next's) ended it: the response it had not handed back or
// discarded, its slot under WithMaxInFlight, its place in the server's
// quota, a rebuilt body it had not sent. The panic goes on to the caller;
// the Transport's later calls to the key must not wait for this one.
// (Its places in the key's queues, and the sends its waits booked, are
// given back by the functions that take them, in deferred calls.)
func (c *call) abandon() {
	if c.live != nil {
		discard(c.live)
	}
	if c.slot != nil {
		releaseSlot(c.slot)
	}
	if c.quota != nil {
		c.quota.answered()
	}
	closeBody(c.body)
}

// resendKey is the context key of a retry's request: its value is how many
// times the request was sent before.
type resendKey struct{}

// ResendCount returns how many times a request had been sent before the
// attempt whose context ctx is: 0 for a first attempt, n for the n-th
// retry. It is the OpenTelemetry attribute http.request.resend_count of
// the attempt, for a RoundTripper under polite (such as otelhttp's) to
// read. It returns 0 for a context neither polite nor
// [ContextWithResendCount] made.
func ResendCount(ctx context.Context) int {
	n, _ := ctx.Value(resendKey{}).(int)
	return n
}

// ContextWithResendCount returns a copy of ctx that says the request it
// goes with has been sent n times before, by a layer that retries above
// polite (go-retryablehttp, through package politeretry). polite then
// numbers the request's attempts from n+1 in its events (and so in its
// metrics), and counts on from n in its own retries' contexts, so that
// spans under polite carry the resend count of the whole call. n < 0 is
// taken as 0.
func ContextWithResendCount(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, resendKey{}, max(n, 0))
}

// resends returns how many times a layer above polite had sent the request
// before, reading it from the context the first time it is needed: an
// event or a retry.
func (c *call) resends() int {
	if c.resent < 0 {
		c.resent = ResendCount(c.ctx)
	}
	return c.resent
}

// state returns the state of the call's key, or nil if the key needs none
// yet.
func (c *call) state() *keyState {
	if c.ks == nil {
		c.ks, c.shard, c.rotated = c.t.keys.lookup(c.key, false)
	}
	return c.ks
}

// need returns the state of the call's key, making it if needed.
func (c *call) need() *keyState {
	if c.ks == nil {
		c.ks, c.shard, c.rotated = c.t.keys.lookup(c.key, true)
	}
	return c.ks
}

// CloseIdleConnections closes the idle connections of the wrapped
// RoundTripper, if it has such a method.
func (t *Transport) CloseIdleConnections() {
	type closeIdler interface{ CloseIdleConnections() }
	if ci, ok := t.next.(closeIdler); ok {
		ci.CloseIdleConnections()
	}
}

// RetryBudget returns the retry budget the Transport takes its retries
// from.
func (t *Transport) RetryBudget() Budget { return t.budget }

// MaxRetryAfter returns the longest delay the server may ask for that the
// Transport waits on (see [WithMaxRetryAfter]), for a layer that retries
// above it to keep to the same limit.
func (t *Transport) MaxRetryAfter() time.Duration { return t.cfg.maxRetryAfter }

// call is the state of one RoundTrip.
type call struct {
	t           *Transport
	req         *http.Request // the caller's request, never modified
	ctx         context.Context
	key         string
	ks          *keyState        // the key's state, once it has one
	shard       *shard[keyState] // the key's registry shard, once looked up
	rotated     int64            // its last rotation when ks was found
	quota       *serverQuota     // the server quota the attempt in flight counts against, if any
	slot        *keyState        // the key whose WithMaxInFlight slot the attempt in flight holds
	attempt     int              // the attempt being made, 1-based
	resent      int              // the times a layer above sent the request before (ResendCount); -1 until read
	sent        uint32           // what the key's Gentle.sending said as the attempt was sent
	fleetGen    uint64           // the fleet's controller generation the attempt was booked under
	fleetShared bool             // the fleet's shared controller paced the attempt
	held        int              // retry cost held by the attempt in flight, refunded if it succeeds
	sched       *schedule        // backoff delays, made at the first retry
	site        *robotsEntry     // the robots.txt of the request's host, under WithCrawlDelay
	live        *http.Response   // the attempt's response while the call decides what to do with it
	body        io.ReadCloser    // a retry's rebuilt body, until it is sent
}

// failure is what makes an attempt worth retrying.
type failure struct {
	timeout       bool          // a transport timeout: the retry costs more
	retryAfter    time.Duration // the server's Retry-After, if hasRetryAfter
	hasRetryAfter bool
	untilReset    bool // retryAfter is the time until a spent quota's reset, not a Retry-After
	throttled     bool // the server throttled the attempt
	unsent        bool // the error proves the server never received the request
}

func (c *call) run() (*http.Response, error) {
	t := c.t
	// A request may be sent again if its body can be rebuilt, and if its
	// method (or its idempotency key, or WithRetryNonIdempotent) allows it
	// or the failure proves the server never received it.
	canRetry := t.cfg.maxAttempts > 1 && c.bodyReplayable()
	safe := c.methodReplayable()
	send := c.req // the first attempt sends the caller's request as is
	for c.attempt = 1; ; c.attempt++ {
		if err := c.admit(); err != nil {
			if c.quota != nil { // admitted by the quota, refused after it
				c.quota.answered()
				c.quota = nil
			}
			closeRequestBody(send)
			t.budget.Refund(c.held) // the retry was never sent
			return nil, err
		}
		c.sent = noSend
		if ks := c.ks; ks != nil && t.keys.adaptive == AdaptiveDefault {
			c.sent = ks.gentle.sending()
		}
		c.body = nil // next closes it, whatever happens
		resp, err := t.next.RoundTrip(send)
		c.releaseSlotAfter(resp)
		switch {
		case err != nil && resp != nil: // next broke its contract; keep the error
			discard(resp)
			resp = nil
		case err == nil && resp == nil:
			err = errNilResponse
		}
		c.live = resp
		now := time.Now()
		f, failed := c.judge(resp, err, now)
		if !failed {
			if err == nil {
				t.budget.Refund(successRefund + c.held)
			}
			return resp, err
		}
		c.held = 0 // a failed retry keeps its cost
		if !canRetry || !safe && !f.unsent {
			return resp, err
		}
		delay, ok := c.retryDelay(f, now)
		if !ok {
			return resp, err
		}
		var body io.ReadCloser
		if c.req.Body != nil && c.req.Body != http.NoBody {
			var bodyErr error
			if body, bodyErr = c.req.GetBody(); bodyErr != nil || body == nil {
				return resp, err // the body cannot be rebuilt: never resend it empty
			}
			c.body = body // closed by abandon if the call ends before it is sent
		}
		cost := retryCost
		if f.timeout {
			cost = timeoutRetryCost
		}
		if !t.budget.TryTake(cost) {
			closeBody(body)
			c.body = nil
			t.budgetExhausted(c.event(resp, err))
			if err != nil {
				return nil, &budgetError{err: err}
			}
			return resp, nil
		}
		c.held = cost
		e := c.event(resp, err)
		e.Delay, e.RetryAfter, e.Throttled = delay, f.retryAfter, f.throttled
		t.retrying(e)
		if resp != nil {
			discard(resp)
			c.live = nil
		}
		c.attempt++ // the wait is the next attempt's
		switch {
		case f.retryAfter < delay:
			c.waitingFor(delay, WaitBackoff, false)
		case f.untilReset:
			c.waitingFor(delay, WaitQuota, true)
		default:
			c.waitingFor(delay, WaitPause, true)
		}
		c.attempt--
		if err := sleep(c.ctx, delay); err != nil {
			closeBody(body)
			t.budget.Refund(c.held)
			return nil, err
		}
		send = c.req.Clone(context.WithValue(c.ctx, resendKey{}, c.resends()+c.attempt))
		send.Body = body
	}
}

// judge reports whether the attempt failed in a way worth retrying, and
// tells the key's state what the server said: every attempt feeds the
// key's controller; the quota the response reports paces the key, or the
// bucket the server names; and a throttle pauses the key (or the bucket)
// for the delay the server asked for.
func (c *call) judge(resp *http.Response, err error, now time.Time) (failure, bool) {
	if c.quota != nil {
		c.quota.answered()
		c.quota = nil
	}
	if err != nil {
		c.attempted(nil, err, false)
		if c.ctx.Err() != nil {
			return failure{}, false // the caller gave up: nothing was learnt
		}
		if ks := c.state(); ks != nil {
			c.observe(ks, now, outcomeFailed, 0)
		}
		retry, timeout := retryableError(err)
		return failure{timeout: timeout, unsent: Unprocessed(err)}, retry
	}
	code := resp.StatusCode
	s := ParseSignals(resp.Header, now)
	spent := s.HasQuota && s.Quota.Remaining < 1
	throttled := code == http.StatusTooManyRequests ||
		(code == http.StatusServiceUnavailable && s.HasRetryAfter) ||
		(code == http.StatusForbidden && spent) // GitHub's primary limit
	f := failure{throttled: throttled}
	f.retryAfter, f.hasRetryAfter = s.Delay(now)
	f.untilReset = f.hasRetryAfter && !s.HasRetryAfter
	if s.HasQuota || throttled && f.retryAfter > 0 {
		c.need() // the server said something to keep
	}
	if ks := c.state(); ks != nil {
		o := outcomeOK
		switch {
		case throttled:
			o = outcomeThrottled
		case code >= 500:
			o = outcomeFailed
		}
		c.observe(ks, now, o, c.heed(ks, s, throttled, now))
		c.tellFleet(ks, o)
	}
	c.attempted(resp, nil, throttled)
	if throttled {
		e := c.event(resp, nil)
		e.RetryAfter, e.Throttled = f.retryAfter, true
		c.t.throttled(e)
	}
	return f, throttled || retryableStatus(code)
}

// observe feeds the attempt's outcome, and the limit the server states
// (requests per second; 0 if none), to the key's controller, and keeps the
// key's state in the registry.
func (c *call) observe(ks *keyState, now time.Time, o outcome, stated float64) {
	ceiling, cap := c.t.keys.ceiling()
	ks.observe(c.t.keys.adaptive, now, o, stated, c.sent, ceiling, cap)
	c.t.keys.keep(c.shard, c.key, ks, now, c.rotated)
}

// heed applies what a response said to the key's quota and pause: the
// quota it reports paces the key, or the bucket it names (which the
// request's path is then known to count against); a throttle with a
// Retry-After that holds the key pauses the bucket, or the
// whole key if the server named none or said the limit is global. (A quota
// reported spent holds its calls through the quota itself.) It returns the
// limit the quota states, in requests per second; 0 if it states none.
func (c *call) heed(ks *keyState, s Signals, throttled bool, now time.Time) (stated float64) {
	var q *serverQuota
	switch {
	case s.Bucket != "":
		q = c.t.keys.bucket(c.req.URL.Host, s.Bucket)
		ks.route(c.req.URL.Path, q)
	case s.HasQuota:
		q = ks.ownQuota()
	}
	var fleetUntil time.Time // the pause to tell the fleet: one call for both reasons
	if s.HasQuota && (s.Quota.Unit == "" || s.Quota.Remaining < 1) {
		stated = q.sync(now, s.Quota)
		if c.t.cfg.fleet != nil && (s.Bucket == "" || s.Global) {
			fleetUntil = q.spentUntil() // spent until its reset: for the whole fleet
		}
	}
	if s.HasQuota && s.Quota.Remaining < 1 && !s.Quota.Reset.IsZero() {
		c.pin(s, minTime(s.Quota.Reset, now.Add(maxPause)))
	}
	// A Retry-After of a second or less, counted in whole seconds, says no
	// more than "slow down": servers round up to the second what is often a
	// few milliseconds of their bucket (go-chi/httprate always says 1), and
	// a key held for it would lose a second of its quota at every
	// overshoot. The retry waits for it; the key's controller, which heard
	// the throttle, slows the other calls. A longer delay, or one stated
	// to the millisecond, holds the key.
	if !throttled || !s.HasRetryAfter || s.RetryAfterSlack > 0 && s.RetryAfter <= s.RetryAfterSlack {
		c.pauseFleet(ks, fleetUntil, now)
		return stated
	}
	until := now.Add(min(s.RetryAfter, maxPause))
	c.pin(s, until)
	if q != nil && s.Bucket != "" && !s.Global {
		q.exhaust(until) // the bucket's: fleetUntil is zero
		return stated
	}
	ks.pause(until)
	c.pauseFleet(ks, maxTime(until, fleetUntil), now)
	return stated
}

// pin keeps the state that holds a pause or a spent quota (the key's, or
// the named bucket's) until until, however idle it is.
func (c *call) pin(s Signals, until time.Time) {
	if s.Bucket != "" {
		c.t.keys.pin(bucketKey(c.req.URL.Host, s.Bucket), until)
	}
	c.t.keys.pin(c.key, until)
}

// retryDelay returns how long to wait before the next attempt, or false
// when the call should not wait: attempts are used up, the server asked for
// more than the Transport waits on, or the next attempt could not be sent
// before the context deadline.
func (c *call) retryDelay(f failure, now time.Time) (time.Duration, bool) {
	cfg := &c.t.cfg
	if c.attempt >= cfg.maxAttempts || c.ctx.Err() != nil {
		return 0, false
	}
	if f.hasRetryAfter && f.retryAfter > cfg.maxRetryAfter {
		return 0, false
	}
	if c.sched == nil {
		c.sched = newSchedule(cfg.backoffBase, cfg.backoffMax)
	}
	delay := max(c.sched.next(cfg.random()), f.retryAfter)
	// The next attempt also waits for its key's pause and bucket: count
	// them, so that a retry that cannot be sent in time is not started.
	earliest := delay
	if ks := c.state(); ks != nil {
		pause, turn := ks.nextTurnWait(now.Add(delay))
		if pause > cfg.maxRetryAfter { // the next attempt would be refused
			return 0, false
		}
		earliest += max(pause, turn)
		if ks.quoted.Load() {
			if q := ks.quotaFor(c.req.URL.Path); q != nil {
				earliest += q.peek(now.Add(earliest))
			}
		}
	}
	if deadline, ok := c.ctx.Deadline(); ok && now.Add(earliest).After(deadline) {
		return 0, false
	}
	return delay, true
}

// refuse returns a *ThrottledError if a wait of d from now is not allowed:
// it would end after the context deadline, or it is a server pause longer
// than WithMaxRetryAfter. It returns nil if the wait is allowed.
func (c *call) refuse(d time.Duration, now time.Time, server bool) error {
	allowed := time.Duration(-1)
	if server && d > c.t.cfg.maxRetryAfter {
		allowed = c.t.cfg.maxRetryAfter
	}
	if deadline, ok := c.ctx.Deadline(); ok && now.Add(d).After(deadline) {
		left := max(deadline.Sub(now), 0)
		if allowed < 0 || left < allowed {
			allowed = left
		}
	}
	if allowed < 0 {
		return nil
	}
	err := &ThrottledError{Key: c.key, Wait: d, Allowed: allowed, Server: server}
	e := c.event(nil, err)
	e.Delay, e.Server = d, server
	c.t.refused(e, err)
	return err
}

// waiting reports a wait of d that the call is about to make, for a
// server pause or for pacing.
func (c *call) waiting(d time.Duration, cause WaitCause) {
	c.waitingFor(d, cause, cause == WaitPause)
}

// waitingFor reports a wait of d that the call is about to make, for
// cause; server reports that the server asked for it.
func (c *call) waitingFor(d time.Duration, cause WaitCause, server bool) {
	if d <= 0 || !c.t.listening() {
		return // nothing to tell, or no one to tell it: no Event (reading the budget may take a lock)
	}
	e := c.event(nil, nil)
	e.Delay, e.Server, e.Wait = d, server, cause
	c.t.waited(e)
}

// listening reports whether anyone hears of the Transport's waits.
func (t *Transport) listening() bool {
	return t.cfg.hooks.OnWait != nil || t.cfg.logger != nil
}

// pauseCause returns the cause of a wait made of a server pause and a
// turn for a token, which run at the same time: the longer of the two.
func pauseCause(pause, turn time.Duration) WaitCause {
	if pause > 0 && pause >= turn {
		return WaitPause
	}
	return WaitRate
}

// attempted reports the answer to the current attempt.
func (c *call) attempted(resp *http.Response, err error, throttled bool) {
	h := c.t.cfg.hooks.OnAttempt
	if h == nil {
		return
	}
	e := Event{Request: c.req, Key: c.key, Attempt: c.resends() + c.attempt, Err: err, Throttled: throttled}
	if resp != nil {
		e.StatusCode = resp.StatusCode
	}
	h(e) // no Budget: reading it may take a lock, on every attempt
}

// event returns an Event about the current attempt.
func (c *call) event(resp *http.Response, err error) Event {
	e := Event{Request: c.req, Key: c.key, Attempt: c.resends() + c.attempt, Err: err, Budget: c.t.budget.Remaining()}
	if resp != nil {
		e.StatusCode = resp.StatusCode
	}
	return e
}

// discard drains at most drainLimit bytes of a response body and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	_ = resp.Body.Close()
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

func closeBody(body io.ReadCloser) {
	if body != nil {
		_ = body.Close()
	}
}
