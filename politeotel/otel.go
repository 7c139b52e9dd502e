package politeotel

import (
	"context"
	"net/http"
	"reflect"
	"sync"
	"time"
	"weak"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the name of politeotel's instrumentation scope: its meter's.
const ScopeName = "github.com/politehttp/polite/politeotel"

// Version is politeotel's version, given to its meter.
const Version = "0.1.0"

// DefaultMaxKeys is how many distinct keys keep their own value of the key
// attribute unless [WithMaxKeys] says otherwise.
const DefaultMaxKeys = 100

// OverflowValue is the value of the key attribute (server.address) for the
// keys past the cap of [WithMaxKeys].
const OverflowValue = "_OTHER"

// Attribute names of politeotel's own, for what the semantic conventions
// have no name for.
const (
	RetryKey    = attribute.Key("polite.retry")    // on attempts: whether the attempt is a retry
	ReasonKey   = attribute.Key("polite.reason")   // on retries: why the attempt is retried
	ThrottleKey = attribute.Key("polite.throttle") // on throttles: 429, 503 or quota
	WaitKey     = attribute.Key("polite.wait")     // on waits: what the request waited for
	FleetOpKey  = attribute.Key("polite.fleet.op") // on the fleet's metrics: the Redis call
	// PriorityKey is on attempts, waits and span events: the call's
	// priority, by the name of its class (critical, interactive, default,
	// batch, background), or its number for a value between classes
	// ("10").
	PriorityKey = attribute.Key("polite.priority")
	// TenantKey is on attempts, waits and span events, only under
	// [WithTenantAttribute]: what it makes of the call's tenant.
	TenantKey = attribute.Key("polite.tenant")
)

// Attribute names of the HTTP client semantic conventions.
const (
	serverAddress = attribute.Key("server.address")
	serverPort    = attribute.Key("server.port")
	methodKey     = attribute.Key("http.request.method")
	statusKey     = attribute.Key("http.response.status_code")
	errorTypeKey  = attribute.Key("error.type")
	resendKey     = attribute.Key("http.request.resend_count")
)

// An Option configures [New].
type Option func(*config)

type config struct {
	provider metric.MeterProvider
	maxKeys  int
	tenant   func(string) string
}

// WithMeterProvider sets the MeterProvider that makes politeotel's meter.
//
// Default: the global MeterProvider (otel.GetMeterProvider), which follows
// a provider set globally later. A nil mp keeps the default.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) {
		if mp != nil {
			c.provider = mp
		}
	}
}

// WithMaxKeys sets how many distinct keys keep their own value of the key
// attribute, server.address: the first n keys met; the others are reported
// together as [OverflowValue].
//
// Default: [DefaultMaxKeys] (100). n < 0 is treated as 0: every key is
// reported as OverflowValue.
func WithMaxKeys(n int) Option {
	return func(c *config) { c.maxKeys = max(n, 0) }
}

// maxTenants bounds the values of the tenant attribute: the first 100
// that [WithTenantAttribute]'s function returns keep theirs, the others
// share OverflowValue.
const maxTenants = 100

// WithTenantAttribute records the tenant of each call (see
// [polite.ContextWithTenant]) on its attempts, its waits and its span
// events, as the attribute polite.tenant, with the value that value
// returns for it: a tenant may be a customer's name, which a service must
// not send to its metrics backend, so the value is the user's to choose
// (a hash, a plan, a bucket of customers). A call of no tenant, or one
// for which value returns "", carries no tenant attribute. On metrics,
// the first 100 distinct values keep theirs and the others are reported
// together as [OverflowValue]: map many tenants to few values, for each
// value multiplies the series of the attempts and waits. value must be
// safe for concurrent use; it is called for each attempt and wait of a
// tenant's call.
//
// Default: no tenant is ever recorded. A nil value keeps the default.
func WithTenantAttribute(value func(tenant string) string) Option {
	return func(c *config) { c.tenant = value }
}

// New returns a [polite.Option] that makes a Transport report its work as
// the metrics in the package documentation, and mark it on the caller's
// trace. One Option may serve several Transports: their counts add up, and
// their gauges are read together (tokens left in each distinct retry
// budget are summed).
func New(opts ...Option) polite.Option {
	cfg := config{maxKeys: DefaultMaxKeys}
	for _, opt := range opts {
		if opt != nil {
			opt(&cfg)
		}
	}
	if cfg.provider == nil {
		cfg.provider = otel.GetMeterProvider()
	}
	m := newMetrics(cfg)
	return polite.WithHooks(polite.Hooks{
		OnAttempt:         m.attempted,
		OnRetry:           m.retrying,
		OnThrottled:       m.throttled,
		OnRefused:         m.refused,
		OnBudgetExhausted: m.budgetExhausted,
		OnWait:            m.waiting,
		OnNew:             m.watch,
	})
}

// waitBuckets are the bounds of the wait histogram, in seconds: from a
// millisecond to an hour, for server pauses are long.
var waitBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// fleetBuckets are the bounds of the Redis round-trip histogram, in
// seconds: from 100 µs to a second.
var fleetBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}

// metrics is what one New made: the instruments, the attribute sets met,
// and the Transports whose state the gauges read.
type metrics struct {
	attempts, retries, throttles, refusals metric.Int64ObservableCounter
	waits                                  metric.Float64Histogram
	rate, limit                            metric.Float64ObservableGauge
	budget                                 metric.Int64ObservableGauge
	fallbacks                              metric.Int64ObservableCounter
	fleetDuration                          metric.Float64Histogram

	keys    *keyCap
	sets    *setCache
	tenant  func(string) string // WithTenantAttribute's; nil: no tenant recorded
	tenants *keyCap             // bounds the tenant attribute's values

	mu         sync.Mutex
	transports []weak.Pointer[polite.Transport]
	fleets     map[weak.Pointer[fleet.Fleet]]bool // the fleets observed
}

func newMetrics(cfg config) *metrics {
	meter := cfg.provider.Meter(ScopeName, metric.WithInstrumentationVersion(Version))
	keys := newKeyCap(cfg.maxKeys)
	m := &metrics{keys: keys, sets: newSetCache(keys), fleets: make(map[weak.Pointer[fleet.Fleet]]bool),
		tenant: cfg.tenant, tenants: newKeyCap(maxTenants)}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		return must(meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc)))
	}
	gauge := func(name, desc string) metric.Float64ObservableGauge {
		return must(meter.Float64ObservableGauge(name, metric.WithUnit("{request}/s"), metric.WithDescription(desc)))
	}
	histogram := func(name, desc string, bounds []float64) metric.Float64Histogram {
		return must(meter.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(bounds...)))
	}
	m.attempts = counter("polite.client.attempts", "{attempt}", "Requests sent to the server: first attempts and retries.")
	m.retries = counter("polite.client.retries", "{retry}", "Failed attempts that polite decided to retry.")
	m.throttles = counter("polite.client.throttles", "{response}",
		"Responses by which the server throttled the client: 429, 503 with Retry-After, or 403 with the quota reported spent.")
	m.refusals = counter("polite.client.refusals", "{request}", "Calls or retries that polite refused without sending them.")
	m.fallbacks = counter("polite.fleet.fallbacks", "{call}",
		"Calls to Redis that could not be made or answered: the process went on alone.")
	m.waits = histogram("polite.client.wait.duration", "Waits before sending a request, by what was waited for.", waitBuckets)
	m.fleetDuration = histogram("polite.fleet.duration", "Round trips to Redis of a fleet.", fleetBuckets)
	m.rate = gauge("polite.client.rate", "The rate each key's requests are paced at.")
	m.limit = gauge("polite.client.limit", "The server's limit for each key: stated in its headers, or estimated from its throttling.")
	m.budget = must(meter.Int64ObservableGauge("polite.client.retry_budget", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens left in the retry budgets.")))
	must(meter.RegisterCallback(m.observe, m.rate, m.limit, m.budget))
	must(meter.RegisterCallback(m.observeCounts, m.attempts, m.retries, m.throttles, m.refusals, m.fallbacks))
	return m
}

// must returns v, and hands err, if any, to OpenTelemetry's error handler:
// an instrument that could not be made is a no-op, and the others still
// work.
func must[T any](v T, err error) T {
	if err != nil {
		otel.Handle(err)
	}
	return v
}

// watch learns of a Transport that New made with m's hooks: its state is
// read at collection, and its fleet, if it has one on Redis, reports its
// calls.
func (m *metrics) watch(t *polite.Transport) {
	m.mu.Lock()
	if len(m.transports) == cap(m.transports) {
		m.pruneLocked() // before the slice grows: Transports made and dropped, with no collection
	}
	m.transports = append(m.transports, weak.Make(t))
	f, _ := t.Fleet().(*fleet.Fleet)
	observe := f != nil && !m.fleets[weak.Make(f)]
	if observe {
		m.fleets[weak.Make(f)] = true
	}
	m.mu.Unlock()
	if observe {
		f.Observe(fleet.Observer{OnCall: m.fleetCall, OnFallback: m.fleetFallback})
	}
}

// live returns the Transports m watches that are still in use, and
// forgets the others.
func (m *metrics) live() []*polite.Transport {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked()
	out := make([]*polite.Transport, 0, len(m.transports))
	for _, w := range m.transports {
		if t := w.Value(); t != nil {
			out = append(out, t)
		}
	}
	return out
}

// pruneLocked forgets the Transports and fleets no longer in use. It
// requires m.mu held.
func (m *metrics) pruneLocked() {
	kept := m.transports[:0]
	for _, w := range m.transports {
		if w.Value() != nil {
			kept = append(kept, w)
		}
	}
	clear(m.transports[len(kept):])
	m.transports = kept
	for f := range m.fleets {
		if f.Value() == nil {
			delete(m.fleets, f)
		}
	}
}

// ctx returns the context to record an event's measurement in: the
// request's, so that exemplars link to its trace.
func ctx(e polite.Event) context.Context {
	if e.Request != nil {
		return e.Request.Context()
	}
	return context.Background()
}

func method(e polite.Event) string {
	if e.Request == nil {
		return http.MethodGet
	}
	return e.Request.Method
}

func (m *metrics) attempted(e polite.Event) {
	k := setKey{inst: instAttempts, key: e.Key, method: methodCode(method(e)), status: int32(e.StatusCode), flag: e.Attempt > 1,
		priority: e.Priority}
	if e.StatusCode == 0 && e.Err != nil {
		k.errType = errorType(e.Err)
	}
	k.tenant = m.tenantAttr(e)
	m.sets.get(k).n.Add(1)
}

// tenantOf returns the value of the tenant attribute for e's call, as
// WithTenantAttribute's function makes it, before the cap; "" for none.
func (m *metrics) tenantOf(e polite.Event) string {
	if m.tenant == nil || e.Tenant == "" {
		return ""
	}
	return m.tenant(e.Tenant)
}

// tenantAttr returns the value of the tenant attribute on the metrics of
// e's call: tenantOf's, bounded; "" for none.
func (m *metrics) tenantAttr(e polite.Event) string {
	if v := m.tenantOf(e); v != "" {
		return m.tenants.value(v)
	}
	return ""
}

// eventAttrs returns the attributes of a span event of e: kv, and the
// call's priority and, under WithTenantAttribute, its tenant.
func (m *metrics) eventAttrs(e polite.Event, kv ...attribute.KeyValue) trace.EventOption {
	kv = append(kv, PriorityKey.String(priorityValue(e.Priority)))
	if v := m.tenantOf(e); v != "" {
		kv = append(kv, TenantKey.String(v))
	}
	return trace.WithAttributes(kv...)
}

func (m *metrics) retrying(e polite.Event) {
	k := setKey{inst: instRetries, key: e.Key, method: methodCode(method(e)), status: int32(e.StatusCode), label: retryReason(e)}
	m.sets.get(k).n.Add(1)
	if span := recording(e); span != nil {
		span.AddEvent("polite.retry", m.eventAttrs(e, AttemptKey.Int(e.Attempt), ReasonKey.String(k.label.String()),
			DelayKey.Float64(e.Delay.Seconds())))
	}
}

func (m *metrics) throttled(e polite.Event) {
	k := setKey{inst: instThrottles, key: e.Key, method: methodCode(method(e)), label: throttleKind(e.StatusCode)}
	m.sets.get(k).n.Add(1)
	if span := recording(e); span != nil {
		span.AddEvent("polite.throttled", m.eventAttrs(e, AttemptKey.Int(e.Attempt), ThrottleKey.String(k.label.String()),
			attribute.Float64("polite.retry_after", e.RetryAfter.Seconds())))
	}
}

func (m *metrics) refused(e polite.Event) {
	k := setKey{inst: instRefusals, key: e.Key, method: methodCode(method(e)), errType: errorType(e.Err), priority: e.Priority}
	k.tenant = m.tenantAttr(e)
	m.sets.get(k).n.Add(1)
	if span := recording(e); span != nil {
		span.AddEvent("polite.refused", m.eventAttrs(e, AttemptKey.Int(e.Attempt), errorTypeKey.String(k.errType.String()),
			DelayKey.Float64(e.Delay.Seconds())))
	}
}

func (m *metrics) budgetExhausted(e polite.Event) {
	k := setKey{inst: instRefusals, key: e.Key, method: methodCode(method(e)), errType: errBudget, priority: e.Priority}
	k.tenant = m.tenantAttr(e)
	m.sets.get(k).n.Add(1)
	if span := recording(e); span != nil {
		span.AddEvent("polite.refused", m.eventAttrs(e, AttemptKey.Int(e.Attempt), errorTypeKey.String(errBudget.String())))
	}
}

func (m *metrics) waiting(e polite.Event) {
	k := setKey{inst: instWaits, key: e.Key, method: methodCode(method(e)), label: waitLabel(e.Wait), priority: e.Priority}
	k.tenant = m.tenantAttr(e)
	m.waits.Record(ctx(e), e.Delay.Seconds(), m.sets.get(k).rec...)
	if span := recording(e); span != nil {
		span.AddEvent("polite.wait", m.eventAttrs(e, AttemptKey.Int(e.Attempt), WaitKey.String(k.label.String()),
			DelayKey.Float64(e.Delay.Seconds())))
	}
}

func (m *metrics) fleetCall(op string, d time.Duration, err error) {
	k := setKey{inst: instFleetCalls, label: opLabel(op)}
	if err != nil {
		k.errType = fleetErrorType(err)
	}
	m.fleetDuration.Record(context.Background(), d.Seconds(), m.sets.get(k).rec...)
}

func (m *metrics) fleetFallback(op string, err error) {
	k := setKey{inst: instFallbacks, label: opLabel(op), errType: fleetErrorType(err)}
	m.sets.get(k).n.Add(1)
}

// observeCounts reports the counters: each attribute set's count, kept in
// an atomic integer, so that counting costs a request an addition.
func (m *metrics) observeCounts(_ context.Context, o metric.Observer) error {
	counters := [...]metric.Int64ObservableCounter{
		instAttempts:  m.attempts,
		instRetries:   m.retries,
		instThrottles: m.throttles,
		instRefusals:  m.refusals,
		instFallbacks: m.fallbacks,
	}
	// The overflow sets go last: the SDK folds every set it meets after
	// one marked otel.metric.overflow into it.
	for _, overflow := range []bool{false, true} {
		for inst, e := range m.sets.all() {
			if e.overflow == overflow && int(inst) < len(counters) && counters[inst] != nil {
				if n := e.n.Load(); n > 0 {
					o.ObserveInt64(counters[inst], n, e.observe)
				}
			}
		}
	}
	return nil
}

// observe reads the gauges: the rate and limit of every key of every live
// Transport, and the tokens left in their retry budgets.
func (m *metrics) observe(_ context.Context, o metric.Observer) error {
	type sums struct{ rate, limit float64 }
	byValue := make(map[string]*sums)
	budgets := make(map[polite.Budget]bool)
	var tokens int64
	for _, t := range m.live() {
		// A budget shared by several Transports counts once; one of a type
		// that cannot be a map key (a user's) counts for each.
		switch b := t.RetryBudget(); {
		case b == nil:
		case !reflect.TypeOf(b).Comparable():
			tokens += int64(b.Remaining())
		case !budgets[b]:
			budgets[b] = true
			tokens += int64(b.Remaining())
		}
		for ks := range t.Keys() {
			if ks.Rate <= 0 && ks.Limit <= 0 {
				continue
			}
			v, _ := m.keys.peek(ks.Key)
			if v == "" {
				v = OverflowValue // a key no request was counted under: no room is made for it
			}
			s := byValue[v]
			if s == nil {
				s = new(sums)
				byValue[v] = s
			}
			s.rate += ks.Rate
			if v == OverflowValue {
				s.limit += ks.Limit // the capacity of all the keys past the cap
			} else {
				s.limit = max(s.limit, ks.Limit) // one server, seen by several Transports
			}
		}
	}
	for v, s := range byValue {
		opt := metric.WithAttributes(serverAddress.String(v))
		if s.rate > 0 {
			o.ObserveFloat64(m.rate, s.rate, opt)
		}
		if s.limit > 0 {
			o.ObserveFloat64(m.limit, s.limit, opt)
		}
	}
	if len(budgets) > 0 {
		o.ObserveInt64(m.budget, tokens)
	}
	return nil
}
