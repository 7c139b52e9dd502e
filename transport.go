package polite

import (
	"sync/atomic"

	"context"
	"github.com/politehttp/polite/internal/statuspage"
	"net/http"
	"time"

	"github.com/politehttp/polite/fleetapi"
	"github.com/politehttp/polite/internal/engine"
	"github.com/politehttp/polite/internal/gate"
)

// A Transport is an [http.RoundTripper] that paces, retries and listens to
// the server on behalf of the RoundTripper it wraps (see the package
// documentation).
//
// A Transport is safe for concurrent use by multiple goroutines. It holds
// per-key state and a retry budget, so it should be created once and
// reused. Create it with [New]; the zero value is not usable. A Transport
// is immutable after New.
//
// It is the HTTP edge of polite's engine: it turns each request into a
// call of the engine (a key, a route, a cost, a deadline), which admits
// each attempt through its gates, and each response or error into the
// engine's terms (see call.go and judge.go).
type Transport struct {
	next   http.RoundTripper
	cfg    config
	eng    *engine.Engine
	budget Budget
	book   atomic.Pointer[statuspage.Book] // the status page's history, from its first read (see StatusHandler)
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
	cfg.costs = cfg.costing()
	budget := cfg.budget
	if budget == nil {
		budget = NewRetryBudget(DefaultRetryBudgetCapacity)
	}
	t := &Transport{next: next, cfg: cfg, budget: budget}
	ec := engine.Config{
		PerSecond: cfg.perSecond, Burst: cfg.burst,
		GlobalRate: cfg.globalRate, GlobalBurst: cfg.globalBurst,
		Kind: cfg.adaptive.kind(), Idle: cfg.idle, MaxInFlight: cfg.maxInFlight,
		Window: cfg.window, Fleet: cfg.fleet,
		Quotas: cfg.quotas, Costs: cfg.costs,
		CrawlDelay: cfg.crawlDelay, SpacingJitter: cfg.spacingJitter, Random: cfg.random,
		FetchRobots: robotsFetcher(next),
	}
	if cfg.memory != nil {
		ec.Memory = memoryOf{cfg.memory}
	}
	t.eng = engine.New(ec)
	if h := cfg.hooks.OnNew; h != nil {
		h(t)
	}
	return t
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

// Fleet returns the fleet the Transport paces with ([WithFleet]), or nil.
func (t *Transport) Fleet() fleetapi.Fleet { return t.cfg.fleet }

// robotsFetcher returns how the engine's robots gate fetches a host's
// robots.txt, through next, under WithCrawlDelay (see robots.Site.Admit):
// for the first attempt that needs it. robots.txt is a request of its own,
// sent for the first time, whatever attempt of its call needs it.
func robotsFetcher(next http.RoundTripper) func(who gate.Who) (time.Duration, error, error) {
	return func(who gate.Who) (delay time.Duration, offLimits, err error) {
		req, _ := who.Edge.(*http.Request)
		ctx := who.Ctx
		if ResendCount(ctx) > 0 {
			ctx = ContextWithResendCount(ctx, 0)
		}
		delay, rerr, err := fetchRobots(ctx, next, req)
		if rerr != nil {
			return delay, rerr, err
		}
		return delay, nil, err
	}
}
