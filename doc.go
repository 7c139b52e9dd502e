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
// A wait never outlives the request's context, and a cancelled wait gives
// its place back. A call fails locally, at once, with a [*ThrottledError]
// that says how long its wait would have been, only when the server asked
// for a pause longer than [WithMaxRetryAfter] allows, or when the wait
// would not end before the deadline even at the server's rate: the rate the
// server states, the one [WithRate] told the Transport, or the limit the
// key's controller has measured. The controller's own caution (climbing
// towards the limit from a floor, halving while refused) fails no call:
// the calls wait for the rate to come back.
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
// # Pacing by cost
//
// Some APIs count more than requests: an LLM API counts tokens a minute
// (OpenAI's and Azure's tokens, Anthropic's input and output tokens), a
// GraphQL API points (GitHub's an hour, Shopify's a second). The server
// charges a request its estimate when it admits it (the prompt and the
// most it may generate) and settles the actual cost when it is done. With
// [WithCost], a request tells its [Cost] before it waits, and waits until
// every quota of its key in those units holds it: the quotas each
// response states (OpenAI's, Anthropic's and GitHub's headers, learnt
// from the first response; a refilling bucket's reset, the time until it
// is full again, tells how fast it refills), or [WithQuota]'s. Requests
// take their costs first come first served, so that a large one is never
// passed over by small ones. [WithUsage] reads what a request actually
// cost from the end of its response's body (a JSON answer's usage, or the
// last event of a stream) and gives back at once what it did not use;
// [Settle] does the same for a caller that holds the usage. A throttled
// attempt gives its cost back, and every response sets each quota to what
// the server says is left. A request larger than the server's whole limit
// fails at once with a [*CostError]. Package
// github.com/politehttp/polite/politecost has these options ready for
// OpenAI, Anthropic, Azure OpenAI, and GitHub's and Shopify's GraphQL
// APIs.
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
// Under the default, a key with no history (and no [WithRate]) opens as
// TCP's slow start does when its calls crowd it: two requests, then a
// rate that doubles every round trip (20 ms at least), until the server
// throttles or states its quota, or the rate outgrows the callers; a
// caller that sends one request at a time is never held. And Gentle
// hears a server that queues rather than refuses: a round trip that rises
// above its own base while the rate rises stops the rise (see [Gentle]).
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
//     it delivers less of the server's limit than Gentle does (see
//     [The bench]).
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
//     HTTP/2 stream with REFUSED_STREAM (RFC 9113 §8.7); or the server
//     throttled it (a 429, a 503 with Retry-After, a spent quota's 403, a
//     throttle its body reports under [WithThrottleBody]), which refuses
//     a request before it is processed;
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
// not yet refilled, a Crawl-delay not yet over. A live key costs about 300
// bytes with the defaults, 380 with [WithRate] (figures in the [Crawling]
// guide). The keys are spread over
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
// it on Redis; a store of another kind implements [fleetapi.Fleet]): the
// configured and stated rates become fleet-wide, a pause one process
// hears holds them all, and when the store cannot answer each process
// paces at its share. [WithWindow] keeps a key to at
// most n requests in any interval of a length, as APIs that state "100 per
// minute" count them, locally or fleet-wide.
//
// # Memory
//
// [WithMemory] keeps what a Transport learns of each key (the server's
// limit, stated or measured; a pause it asked for) in a [Memory], and
// starts each key it has no state for from it: a process restarted holds
// each limit from its first request, and sends nothing to a key before a
// pause a server asked of the process before has ended. [OpenFileMemory]
// keeps it in a file; the fleet package's Fleet.Memory in the fleet's
// Redis, where a process joining a fleet finds what the others learnt.
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
//
// # Guides
//
// The repository's guides take each use and topic from start to end, each
// figure with the command that measured it:
//
//   - [Listening to the server]: the rate-limit header dialects polite
//     reads, and the one picture of each quota it keeps.
//   - [Adapting to the server]: the controllers, how the default finds a
//     limit, and which of its goals it meets.
//   - [Crawling]: per-host state, in-flight caps, robots.txt, a million
//     hosts.
//   - [Remembering across restarts]: [WithMemory], in a file or in Redis.
//   - [Fleet mode]: one quota shared through Redis, Cluster and Sentinel,
//     what failing open means; and [A fleet that learns the limit
//     together], the shared controller.
//   - [Pacing by cost]: tokens and points, package politecost, the LLM
//     bench.
//   - [Observability]: hooks, log/slog, OpenTelemetry metrics and traces.
//   - [Already using go-retryablehttp?]: package politeretry.
//   - [The command line]: polite demo, polite get, polite inspect.
//   - [Faults, hostile servers, secrets and load]: what the test suite
//     shows polite survives.
//   - [The bench]: polite against real servers and peers, and how to
//     reproduce it.
//   - [Overhead]: what a call costs, in time and allocations.
//   - [Testing and CI]: the test commands and what CI runs.
//
// [Listening to the server]: https://github.com/politehttp/polite/blob/main/docs/listening.md
// [Adapting to the server]: https://github.com/politehttp/polite/blob/main/docs/adapting.md
// [Crawling]: https://github.com/politehttp/polite/blob/main/docs/crawling.md
// [Remembering across restarts]: https://github.com/politehttp/polite/blob/main/docs/memory.md
// [Fleet mode]: https://github.com/politehttp/polite/blob/main/docs/fleet.md
// [A fleet that learns the limit together]: https://github.com/politehttp/polite/blob/main/docs/fleet-learning.md
// [Pacing by cost]: https://github.com/politehttp/polite/blob/main/docs/cost.md
// [Observability]: https://github.com/politehttp/polite/blob/main/docs/observability.md
// [Already using go-retryablehttp?]: https://github.com/politehttp/polite/blob/main/docs/retryablehttp.md
// [The command line]: https://github.com/politehttp/polite/blob/main/docs/cli.md
// [Faults, hostile servers, secrets and load]: https://github.com/politehttp/polite/blob/main/docs/faults.md
// [The bench]: https://github.com/politehttp/polite/blob/main/docs/bench.md
// [Overhead]: https://github.com/politehttp/polite/blob/main/docs/overhead.md
// [Testing and CI]: https://github.com/politehttp/polite/blob/main/docs/testing.md
package polite
