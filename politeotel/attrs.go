package politeotel

import (
	"iter"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/politehttp/polite"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// keyCap bounds the values of the key attribute: the first max keys keep
// theirs, the others share OverflowValue. Reading takes no lock: the keys
// are a map that is copied to be added to, at most max times.
type keyCap struct {
	max  int
	mu   sync.Mutex                        // serializes additions
	seen atomic.Pointer[map[string]string] // key → the key, held apart from the caller's strings
}

func newKeyCap(max int) *keyCap {
	c := &keyCap{max: max}
	c.seen.Store(new(map[string]string))
	return c
}

// value returns the key attribute's value for key, counting key among the
// first max keys if there is room.
func (c *keyCap) value(key string) string {
	if v, ok := c.peek(key); ok || v == OverflowValue {
		return v
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.peek(key); ok || v == OverflowValue {
		return v
	}
	v := strings.Clone(key) // a key is often part of a longer string: keep only it
	seen := maps.Clone(*c.seen.Load())
	if seen == nil {
		seen = make(map[string]string)
	}
	seen[v] = v
	c.seen.Store(&seen)
	return v
}

// peek returns the key attribute's value for key and true if key is among
// the first max keys; OverflowValue if there is no room left for it; ""
// otherwise.
func (c *keyCap) peek(key string) (string, bool) {
	seen := *c.seen.Load()
	if v, ok := seen[key]; ok {
		return v, true
	}
	if len(seen) >= c.max {
		return OverflowValue, false
	}
	return "", false
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
	instruments // how many
)

// setKey names the attribute set of one measurement. All but the key are
// small codes, so that finding the set hashes one string.
type setKey struct {
	key      string // the request's key, or the key attribute's value; "" for the fleet's
	status   int32
	inst     uint8
	flag     bool // attempts: a retry
	method   uint8
	label    label // the instrument's own attribute: reason, throttle, wait, fleet op
	errType  errKind
	overflow bool            // the set of the measurements past maxSets
	priority polite.Priority // attempts, waits and refusals: the call's
	tenant   string          // attempts and waits, under WithTenantAttribute: its value, bounded; "" for none
}

// options are the measurement options of one attribute set, made once:
// recording with them does not allocate. A counter's set also keeps its
// count, reported at collection.
type options struct {
	n        atomic.Int64
	overflow bool
	rec      []metric.RecordOption
	observe  metric.ObserveOption
}

// maxSets bounds the attribute sets of each instrument, overflow set
// included: past 999 sets, measurements of new sets are reported under
// otel.metric.overflow=true, as the OpenTelemetry SDK reports those past
// its own cap (2,000 by default), and below that cap. The key attribute is
// bounded, and so are the others but the status code, so an instrument
// fills only with WithMaxKeys raised, or with a server that answers
// hundreds of codes.
const maxSets = 1000

// setCache holds the options of the attribute sets met, by the raw key of
// the request (the key attribute is bounded by keys: past its cap, by
// OverflowValue), so that a measurement takes one lookup, and no lock: the
// sets are a map that is copied to be added to.
type setCache struct {
	keys *keyCap
	sets atomic.Pointer[map[setKey]*options]
	mu   sync.Mutex       // serializes additions and guards per
	per  [instruments]int // the sets of each instrument
}

func newSetCache(keys *keyCap) *setCache {
	c := &setCache{keys: keys}
	c.sets.Store(new(map[setKey]*options))
	return c
}

// get returns the options of k's attribute set; k.key is the request's
// key, which it bounds.
func (c *setCache) get(k setKey) *options {
	if o := (*c.sets.Load())[k]; o != nil {
		return o
	}
	if k.key != "" {
		k.key = c.keys.value(k.key) // itself, held apart, or OverflowValue
		if o := (*c.sets.Load())[k]; o != nil {
			return o
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sets := *c.sets.Load()
	if o := sets[k]; o != nil {
		return o
	}
	if c.per[k.inst] >= maxSets-1 {
		k = setKey{inst: k.inst, overflow: true}
		if o := sets[k]; o != nil {
			return o
		}
	}
	o := k.options()
	sets = maps.Clone(sets)
	if sets == nil {
		sets = make(map[setKey]*options)
	}
	sets[k] = o
	c.sets.Store(&sets)
	c.per[k.inst]++
	return o
}

// all returns the instrument and options of every set in the cache.
func (c *setCache) all() iter.Seq2[uint8, *options] {
	return func(yield func(uint8, *options) bool) {
		for k, o := range *c.sets.Load() {
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
		kv = append(kv, address(k.key)...)
		kv = append(kv, methodKey.String(methodName(k.method)))
	}
	if k.status != 0 {
		kv = append(kv, statusKey.Int(int(k.status)))
	}
	if k.errType != errNone {
		kv = append(kv, errorTypeKey.String(k.errType.String()))
	}
	if k.inst == instAttempts || k.inst == instWaits || k.inst == instRefusals {
		kv = append(kv, PriorityKey.String(priorityValue(k.priority)))
		if k.tenant != "" {
			kv = append(kv, TenantKey.String(k.tenant))
		}
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

// address returns the attributes that name a key: server.address, and
// server.port when the key is a host and port (as the default key, the
// URL's host, is when the URL has a port).
func address(key string) []attribute.KeyValue {
	if host, port, err := net.SplitHostPort(key); err == nil && host != "" {
		if p, err := strconv.Atoi(port); err == nil && p > 0 && p < 1<<16 {
			return []attribute.KeyValue{serverAddress.String(host), serverPort.Int(p)}
		}
	}
	return []attribute.KeyValue{serverAddress.String(key)}
}
