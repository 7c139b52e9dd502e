package politeotel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// keyCap bounds the values of the key attribute: the first max keys keep
// theirs, the others share OverflowKey.
type keyCap struct {
	max  int
	mu   sync.RWMutex
	seen map[string]string // key → the key, held apart from the caller's strings
}

func newKeyCap(max int) *keyCap { return &keyCap{max: max, seen: make(map[string]string)} }

// value returns the key attribute's value for key.
func (c *keyCap) value(key string) string {
	c.mu.RLock()
	v, ok := c.seen[key]
	full := len(c.seen) >= c.max
	c.mu.RUnlock()
	switch {
	case ok:
		return v
	case full:
		return OverflowKey
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.seen[key]; ok {
		return v
	}
	if len(c.seen) >= c.max {
		return OverflowKey
	}
	v = strings.Clone(key) // a key is often part of a longer string: keep only it
	c.seen[v] = v
	return v
}

// The instruments whose attribute sets the cache holds.
const (
	instAttempts uint8 = iota
	instRetries
	instThrottles
	instRefusals
	instWaits
	instFleetCalls
	instFallbacks
)

// setKey names the attribute set of one measurement. All but the key are
// small codes, so that finding the set hashes one string.
type setKey struct {
	key     string // the request's key, or server.address; "" for the fleet's
	status  int32
	inst    uint8
	flag    bool // attempts: a retry
	method  uint8
	label   label // the instrument's own attribute: reason, throttle, wait, fleet op
	errType errKind
	// overflow names the set of the measurements past maxSets
	overflow bool
}

// options are the measurement options of one attribute set, made once:
// recording with them does not allocate. A counter's set also keeps its
// count, reported at collection.
type options struct {
	n        atomic.Int64
	overflow bool // the set of the measurements past maxSets
	rec      []metric.RecordOption
	observe  metric.ObserveOption
}

// maxSets bounds the attribute sets of each instrument, overflow set
// included: past 999 sets, measurements of new sets are reported under
// otel.metric.overflow=true, as the OpenTelemetry SDK reports those past
// its own cap (2,000 by default), and below that cap. The key attribute is bounded, and so
// are the others but the status code, so an instrument fills only with
// WithMaxKeys raised, or with a server that answers hundreds of codes.
const maxSets = 1000

// setCache holds the options of the attribute sets met, by the raw key
// of the request (the key attribute is bounded by keys: past its cap, by
// OverflowKey), so that a measurement takes one lookup.
type setCache struct {
	keys *keyCap
	mu   sync.RWMutex
	sets map[setKey]*options
	per  [instFallbacks + 1]int // the sets of each instrument
}

func newSetCache(keys *keyCap) *setCache {
	return &setCache{keys: keys, sets: make(map[setKey]*options)}
}

// get returns the options of k's attribute set; k.key is the request's key,
// which it bounds.
func (c *setCache) get(k setKey) *options {
	c.mu.RLock()
	o := c.sets[k]
	c.mu.RUnlock()
	if o != nil {
		return o
	}
	if k.key != "" {
		k.key = c.keys.value(k.key) // itself, held apart, or OverflowKey
		c.mu.RLock()
		o = c.sets[k]
		c.mu.RUnlock()
		if o != nil {
			return o
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if was := c.sets[k]; was != nil {
		return was
	}
	if c.per[k.inst] >= maxSets-1 {
		k = setKey{inst: k.inst, overflow: true}
		if was := c.sets[k]; was != nil {
			return was
		}
	}
	o = k.options()
	c.sets[k] = o
	c.per[k.inst]++
	return o
}

// all returns the instrument and options of every set in the cache.
func (c *setCache) all() iter.Seq2[uint8, *options] {
	return func(yield func(uint8, *options) bool) {
		c.mu.RLock()
		defer c.mu.RUnlock()
		for k, o := range c.sets {
			if !yield(k.inst, o) {
				return
			}
		}
	}
}

// options builds the measurement options of k's attribute set.
func (k setKey) options() *options {
	if k.overflow {
		opt := metric.WithAttributeSet(attribute.NewSet(attribute.Bool("otel.metric.overflow", true)))
		return &options{rec: []metric.RecordOption{opt}, observe: opt, overflow: true}
	}
	var kv []attribute.KeyValue
	if k.inst == instFleetCalls || k.inst == instFallbacks {
		kv = append(kv, FleetOpKey.String(k.label.String()))
	} else {
		kv = append(kv, serverAddress.String(k.key), methodKey.String(methodName(k.method)))
	}
	if k.status != 0 {
		kv = append(kv, statusKey.Int(int(k.status)))
	}
	if k.errType != errNone {
		kv = append(kv, errorTypeKey.String(k.errType.String()))
	}
	switch k.inst {
	case instAttempts:
		kv = append(kv, RetryKey.Bool(k.flag))
	case instRetries:
		kv = append(kv, ReasonKey.String(k.label.String()))
	case instThrottles:
		kv = append(kv, ThrottleKey.String(k.label.String()))
	case instWaits:
		kv = append(kv, WaitKey.String(k.label.String()))
	}
	opt := metric.WithAttributeSet(attribute.NewSet(kv...))
	return &options{rec: []metric.RecordOption{opt}, observe: opt}
}

// methodCode returns the code of a request's method: one of the methods
// of the semantic conventions, or _OTHER.
func methodCode(m string) uint8 {
	switch m {
	case http.MethodGet, "":
		return 0
	case http.MethodHead:
		return 1
	case http.MethodPost:
		return 2
	case http.MethodPut:
		return 3
	case http.MethodPatch:
		return 4
	case http.MethodDelete:
		return 5
	case http.MethodOptions:
		return 6
	case http.MethodTrace:
		return 7
	case http.MethodConnect:
		return 8
	}
	return 9
}

// methodName returns the name of a method code.
func methodName(c uint8) string {
	switch c {
	case 0:
		return http.MethodGet
	case 1:
		return http.MethodHead
	case 2:
		return http.MethodPost
	case 3:
		return http.MethodPut
	case 4:
		return http.MethodPatch
	case 5:
		return http.MethodDelete
	case 6:
		return http.MethodOptions
	case 7:
		return http.MethodTrace
	case 8:
		return http.MethodConnect
	}
	return "_OTHER"
}

// A label is the value of an instrument's own attribute.
type label uint8

const (
	labelNone label = iota
	// polite.reason
	reasonThrottled
	reasonServerError
	reasonTimeout
	reasonTransportError
	// polite.throttle
	throttle429
	throttle503
	throttleQuota
	// polite.fleet.op
	opReserve
	opCongest
	opPause
	opBudget
	opOther
	// polite.wait: the wait causes follow, from waitBase + cause
	waitBase
)

func (l label) String() string {
	switch l {
	case reasonThrottled:
		return "throttled"
	case reasonServerError:
		return "server_error"
	case reasonTimeout:
		return "timeout"
	case reasonTransportError:
		return "transport_error"
	case throttle429:
		return "429"
	case throttle503:
		return "503"
	case throttleQuota:
		return "quota"
	case opReserve:
		return "reserve"
	case opCongest:
		return "congest"
	case opPause:
		return "pause"
	case opBudget:
		return "budget"
	case opOther:
		return "_OTHER"
	}
	if l > waitBase {
		return polite.WaitCause(l - waitBase).String()
	}
	return ""
}

// waitLabel returns the label of a wait's cause.
func waitLabel(w polite.WaitCause) label {
	if w == 0 || w > 64 {
		w = polite.WaitRate
	}
	return waitBase + label(w)
}

// opLabel returns the label of a fleet's Redis call.
func opLabel(op string) label {
	switch op {
	case "reserve":
		return opReserve
	case "congest":
		return opCongest
	case "pause":
		return opPause
	case "budget":
		return opBudget
	}
	return opOther
}

// An errKind is an error.type: a short name from a bounded set.
type errKind uint8

const (
	errNone errKind = iota
	errThrottled
	errBudget
	errRobots
	errCanceled
	errDeadline
	errTLS
	errDNS
	errTimeout
	errRefused
	errReset
	errEOF
	errBreakerOpen
	errRedis
	errOther
)

func (k errKind) String() string {
	switch k {
	case errThrottled:
		return "throttled"
	case errBudget:
		return "retry_budget_exhausted"
	case errRobots:
		return "robots_unreachable"
	case errCanceled:
		return "canceled"
	case errDeadline:
		return "deadline_exceeded"
	case errTLS:
		return "tls"
	case errDNS:
		return "dns"
	case errTimeout:
		return "timeout"
	case errRefused:
		return "connection_refused"
	case errReset:
		return "connection_reset"
	case errEOF:
		return "eof"
	case errBreakerOpen:
		return "breaker_open"
	case errRedis:
		return "redis_error"
	case errOther:
		return "_OTHER"
	}
	return ""
}

// errorType returns the error.type of err: errOther for an error
// politeotel does not know.
func errorType(err error) errKind {
	var (
		dnsErr *net.DNSError
		netErr net.Error
		cert   *tls.CertificateVerificationError
		auth   x509.UnknownAuthorityError
		host   x509.HostnameError
	)
	switch {
	case err == nil:
		return errNone
	case errors.Is(err, polite.ErrThrottled):
		return errThrottled
	case errors.Is(err, polite.ErrRetryBudgetExhausted):
		return errBudget
	case errors.Is(err, polite.ErrRobotsUnreachable):
		return errRobots
	case errors.Is(err, context.Canceled):
		return errCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return errDeadline
	case errors.As(err, &cert), errors.As(err, &auth), errors.As(err, &host):
		return errTLS
	case errors.As(err, &dnsErr):
		return errDNS
	case errors.As(err, &netErr) && netErr.Timeout():
		return errTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return errRefused
	case errors.Is(err, syscall.ECONNRESET):
		return errReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errEOF
	}
	return errOther
}

// fleetErrorType returns the error.type of a fleet's failed call.
func fleetErrorType(err error) errKind {
	switch {
	case errors.Is(err, fleet.ErrBreakerOpen):
		return errBreakerOpen
	case errors.Is(err, fleet.ErrTimeout):
		return errTimeout
	}
	return errRedis
}

// retryReason returns why the attempt of e is retried.
func retryReason(e polite.Event) label {
	var netErr net.Error
	switch code := e.StatusCode; {
	case code == http.StatusTooManyRequests, code == http.StatusForbidden,
		code == http.StatusServiceUnavailable && e.RetryAfter > 0:
		return reasonThrottled
	case code == http.StatusRequestTimeout, code == http.StatusGatewayTimeout:
		return reasonTimeout
	case code >= 500:
		return reasonServerError
	case errors.As(e.Err, &netErr) && netErr.Timeout():
		return reasonTimeout
	}
	return reasonTransportError
}

// throttleKind returns how the server throttled: 429, 503, or quota (a
// response that reports the quota spent).
func throttleKind(code int) label {
	switch code {
	case http.StatusTooManyRequests:
		return throttle429
	case http.StatusServiceUnavailable:
		return throttle503
	}
	return throttleQuota
}

// recording returns the span of the request's context if it is recording,
// or nil: events are built only for a span that keeps them.
func recording(e polite.Event) trace.Span {
	if e.Request == nil {
		return nil
	}
	if span := trace.SpanFromContext(e.Request.Context()); span.IsRecording() {
		return span
	}
	return nil
}

// AttemptKey is the attribute of polite's span events that names the
// attempt an event concerns, 1 for the first.
const AttemptKey = attribute.Key("polite.attempt")

// DelayKey is the attribute of polite's span events that gives a wait, in
// seconds.
const DelayKey = attribute.Key("polite.delay")

// ClientTrace is for otelhttp.WithClientTrace, with otelhttp's Transport
// under polite's: it sets http.request.resend_count on the span of each
// retry, as the HTTP semantic conventions ask, from the count polite puts
// in the retry's context ([polite.ResendCount]). It traces nothing else.
func ClientTrace(ctx context.Context) *httptrace.ClientTrace {
	if n := polite.ResendCount(ctx); n > 0 {
		trace.SpanFromContext(ctx).SetAttributes(resendKey.Int(n))
	}
	return &httptrace.ClientTrace{}
}
