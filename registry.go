package polite

import (
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite/internal/control"
	"golang.org/x/time/rate"
)

// shards is how many independently locked parts a table has, so that
// calls to different keys seldom wait for the same lock.
const shards = 64

// table maps keys to values of type V, and forgets keys that stay idle. It
// is sharded by a hash of the key, so that keys do not contend. Each shard
// holds two generations, the keys used since its last rotation (young) and
// the keys used in the period before (old). A key found in old moves to
// young. Once the idle timeout has passed since a shard's last rotation,
// the next call that touches the shard rotates it: old is dropped, young
// becomes old (both are dropped when two timeouts have passed). So a key
// idle for the timeout is forgotten after one to two timeouts, at no cost
// beyond dropping a map, and with no goroutine. A pinned key (its server
// asked for a pause) is kept until its time.
type table[V any] struct {
	idle   int64 // the idle timeout, in nanoseconds
	seed   maphash.Seed
	fresh  func(key string, now time.Time) *V // makes the value of a new key
	busy   func(v *V, now int64) bool         // reports whether v must outlive its key's idleness; nil: never
	shards [shards]shard[V]
}

// shard is one part of a table.
type shard[V any] struct {
	rotated atomic.Int64 // Unix nanoseconds of the last rotation; 0 before the first

	// mu guards the fields below.
	mu     sync.RWMutex
	young  map[string]*V
	old    map[string]*V
	pinned map[string]int64 // key → Unix nanoseconds it is kept until

	_ [64]byte // keep shards on separate cache lines
}

func (tb *table[V]) init(idle time.Duration, fresh func(string, time.Time) *V, busy func(*V, int64) bool) {
	tb.idle, tb.seed, tb.fresh, tb.busy = int64(idle), maphash.MakeSeed(), fresh, busy
	for i := range tb.shards {
		tb.shards[i].young = make(map[string]*V)
	}
}

// shardOf returns the shard of key.
func (tb *table[V]) shardOf(key string) *shard[V] {
	return &tb.shards[maphash.String(tb.seed, key)%shards]
}

// peek returns the value of key, or nil, and whether it is young.
func (sh *shard[V]) peek(key string) (v *V, young bool) {
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if v := sh.young[key]; v != nil {
		return v, true
	}
	return sh.old[key], false
}

// ensure returns the value of key, making it if needed, and makes it
// young.
func (tb *table[V]) ensure(key string) *V {
	return tb.ensureIn(tb.shardOf(key), key, true, nil)
}

// use returns the value of key, making it if needed, and makes it young,
// after rotating the key's shard if that is due.
func (tb *table[V]) use(key string, now time.Time) *V {
	sh := tb.shardOf(key)
	tb.rotate(sh, now.UnixNano())
	return tb.ensureIn(sh, key, true, nil)
}

// ensureIn returns the value of key in sh and makes it young; a key sh
// does not hold is made if create is set, and nil is returned otherwise.
// hold, if not nil, is called on the value under the shard's lock, so that
// no rotation can come between finding the value and holding it.
func (tb *table[V]) ensureIn(sh *shard[V], key string, create bool, hold func(*V)) *V {
	sh.mu.RLock()
	if v := sh.young[key]; v != nil {
		if hold != nil {
			hold(v)
		}
		sh.mu.RUnlock()
		return v
	}
	absent := !create && sh.old[key] == nil
	sh.mu.RUnlock()
	if absent {
		return nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	v := sh.young[key]
	if v == nil {
		if v = sh.old[key]; v != nil {
			delete(sh.old, key)
		} else {
			v = tb.fresh(key, time.Now())
		}
		// A key is often part of a longer string (the host of a URL): held
		// as is, it would keep all of that alive.
		sh.young[strings.Clone(key)] = v
	}
	if hold != nil {
		hold(v)
	}
	return v
}

// keep makes sure the value v that a call holds is still the key's, after
// the call: if the key was forgotten meanwhile (its call outlived an idle
// timeout), v is the key's again, unless a newer value has taken its
// place. It rotates the key's shard if that is due. rotated is the shard's
// last rotation when the call found v young: if it has not rotated since,
// v is still there.
func (tb *table[V]) keep(sh *shard[V], key string, v *V, now time.Time, rotated int64) {
	tb.rotate(sh, now.UnixNano())
	if sh.rotated.Load() == rotated {
		return
	}
	if held, young := sh.peek(key); held == v && young {
		return
	}
	sh.mu.Lock()
	if sh.young[key] == nil {
		if sh.old[key] == v {
			delete(sh.old, key)
		}
		if sh.old[key] == nil {
			sh.young[strings.Clone(key)] = v
		}
	}
	sh.mu.Unlock()
}

// pin keeps key, and its value, until until.
func (tb *table[V]) pin(key string, until time.Time) {
	sh := tb.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.pinned == nil {
		sh.pinned = make(map[string]int64)
	}
	u := until.UnixNano()
	switch was, ok := sh.pinned[key]; {
	case !ok:
		sh.pinned[strings.Clone(key)] = u
	case u > was:
		sh.pinned[key] = u
	}
}

// rotate drops the shard's old generation (and its young one too, if two
// timeouts have passed) if the idle timeout has passed since its last
// rotation. Of the keys dropped, it keeps those pinned until later and
// those whose values are busy: their forgetting would lose something.
func (tb *table[V]) rotate(sh *shard[V], now int64) {
	last := sh.rotated.Load()
	if last == 0 {
		sh.rotated.CompareAndSwap(0, now)
		return
	}
	if now-last < tb.idle || !sh.rotated.CompareAndSwap(last, now) {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for key, until := range sh.pinned {
		if until <= now {
			delete(sh.pinned, key)
		}
	}
	kept := make(map[string]*V)
	keepFrom := func(dropped map[string]*V) {
		for key, v := range dropped {
			if sh.pinned[key] > now || tb.busy != nil && tb.busy(v, now) {
				kept[key] = v
			}
		}
	}
	keepFrom(sh.old)
	if now-last >= 2*tb.idle {
		keepFrom(sh.young)
		sh.old = nil
	} else {
		sh.old = sh.young
	}
	sh.young = kept
}

// len returns the number of keys the table holds.
func (tb *table[V]) len() int {
	n := 0
	for i := range tb.shards {
		sh := &tb.shards[i]
		sh.mu.RLock()
		n += len(sh.young) + len(sh.old)
		sh.mu.RUnlock()
	}
	return n
}

// registry is the table of the keys' states. Without a local rate or a
// controller, a key gets a state only when its server asks for a pause or
// reports a quota, or under WithMaxInFlight.
type registry struct {
	table[keyState]
	perSecond float64 // 0: no local limit
	burst     int
	adaptive  AdaptiveMode
	stateless bool   // keys need no state until their server asks for a pause
	memory    Memory // WithMemory's; nil if none
}

func newRegistry(cfg *config) *registry {
	r := &registry{
		perSecond: cfg.perSecond,
		burst:     cfg.burst,
		adaptive:  cfg.adaptive,
		stateless: cfg.perSecond == 0 && cfg.adaptive == AdaptiveOff && cfg.maxInFlight == 0 && cfg.memory == nil,
		memory:    cfg.memory,
	}
	r.init(cfg.idle, r.newKeyState, (*keyState).busy)
	return r
}

// lookup returns the state of key, creating it when need is set or when a
// local rate or a controller needs one; it returns nil for a key that
// needs no state yet. It also returns the key's shard and its last
// rotation, for keep. A state returned is held for the call: the registry
// keeps it, however long the call waits, until the call lets it go
// (keyState.release). Without that, a call that found the state and had
// not yet taken a token or a slot could be left with a state the registry
// forgot, while later calls to the key made a new one: two buckets, two
// counts in flight, and the key over its limits.
func (r *registry) lookup(key string, need bool) (*keyState, *shard[keyState], int64) {
	sh := r.shardOf(key)
	rotated := sh.rotated.Load()
	return r.ensureIn(sh, key, need || !r.stateless, (*keyState).hold), sh, rotated
}

// bucket returns the quota of the bucket that the server at host named,
// shared by every key whose requests count against it. Buckets live in the
// registry as keys of their own, so that idle ones are forgotten too.
func (r *registry) bucket(host, name string) *serverQuota {
	return r.ensure(bucketKey(host, name)).ownQuota()
}

// bucketKey is the registry's key for the bucket name of the server at
// host; no request key can take this form.
func bucketKey(host, name string) string {
	return "\x00bucket\x00" + host + "\x00" + name
}

// newKeyState makes the state of key at now: a new key's, or one
// remembered by the Transport's Memory.
func (r *registry) newKeyState(key string, now time.Time) *keyState {
	ks := &keyState{limit: rate.Inf}
	var other control.Controller
	r.adaptive.kind().Init(&ks.ctl, &other, now)
	if other != nil {
		ks.extra = &keyExtra{ctl: other}
	}
	if r.perSecond > 0 {
		ks.limit, ks.burst = rate.Limit(r.perSecond), int32(min(r.burst, math.MaxInt32))
		ks.limiter = rate.NewLimiter(ks.limit, int(ks.burst))
	}
	if r.memory != nil && !isBucketKey(key) {
		if rec, ok := r.memory.Recall(key); ok {
			ceiling, cap := r.ceiling()
			ks.recallLocked(rec, now, r.adaptive, ceiling, cap)
		}
	}
	return ks
}

// ceiling returns the WithRate rate and burst that no controller exceeds.
func (r *registry) ceiling() (rate.Limit, int) {
	if r.perSecond > 0 {
		return rate.Limit(r.perSecond), r.burst
	}
	return rate.Inf, math.MaxInt32
}
