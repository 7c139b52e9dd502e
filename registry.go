package polite

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// shards is how many independently locked parts the registry has, so that
// calls to different keys seldom wait for the same lock.
const shards = 64

// registry maps keys to their state. It is sharded by a hash of the key, so
// that keys do not contend, and it forgets keys that stay idle: each shard
// holds two generations, the keys used since its last rotation (young) and
// the keys used in the period before (old). A key found in old moves to
// young. Once the idle timeout has passed since a shard's last rotation, the
// next call that touches the shard rotates it: old is dropped, young
// becomes old (both are dropped when two timeouts have passed). So a key
// idle for the timeout is forgotten after one to two timeouts, at no cost
// beyond dropping a map, and with no goroutine. A key whose server asked
// for a pause, or whose quota is spent until a reset, is pinned and kept
// until then.
//
// Without a local rate or a controller, a key gets a state only when its
// server asks for a pause or reports a quota.
type registry struct {
	perSecond float64 // 0: no local limit
	burst     int
	adaptive  AdaptiveMode
	stateless bool  // keys need no state until their server asks for a pause
	idle      int64 // the idle timeout, in nanoseconds
	seed      maphash.Seed
	shards    [shards]shard
}

// shard is one part of the registry.
type shard struct {
	rotated atomic.Int64 // Unix nanoseconds of the last rotation; 0 before the first

	// mu guards the fields below.
	mu     sync.RWMutex
	young  map[string]*keyState
	old    map[string]*keyState
	pinned map[string]int64 // key → Unix nanoseconds it is kept until

	_ [64]byte // keep shards on separate cache lines
}

func newRegistry(cfg *config) *registry {
	r := &registry{
		perSecond: cfg.perSecond,
		burst:     cfg.burst,
		adaptive:  cfg.adaptive,
		stateless: cfg.perSecond == 0 && cfg.adaptive == AdaptiveOff && cfg.maxInFlight == 0,
		idle:      int64(cfg.idle),
		seed:      maphash.MakeSeed(),
	}
	for i := range r.shards {
		r.shards[i].young = make(map[string]*keyState)
	}
	return r
}

// shardOf returns the shard of key.
func (r *registry) shardOf(key string) *shard {
	return &r.shards[maphash.String(r.seed, key)%shards]
}

// lookup returns the state of key, creating it when a local rate or a
// controller needs one; it returns nil for a key that needs no state yet.
// It also returns the key's shard and its last rotation, for keep.
func (r *registry) lookup(key string) (*keyState, *shard, int64) {
	sh := r.shardOf(key)
	rotated := sh.rotated.Load()
	return r.find(sh, key), sh, rotated
}

func (r *registry) find(sh *shard, key string) *keyState {
	sh.mu.RLock()
	ks, young := sh.young[key], true
	if ks == nil {
		ks, young = sh.old[key], false
	}
	sh.mu.RUnlock()
	switch {
	case ks != nil && young:
		return ks
	case ks == nil && r.stateless:
		return nil
	}
	return r.ensureIn(sh, key)
}

// ensure returns the state of key, creating it if needed, and makes it
// young.
func (r *registry) ensure(key string) *keyState {
	return r.ensureIn(r.shardOf(key), key)
}

func (r *registry) ensureIn(sh *shard, key string) *keyState {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if ks := sh.young[key]; ks != nil {
		return ks
	}
	ks := sh.old[key]
	if ks != nil {
		delete(sh.old, key)
	} else {
		ks = r.newKeyState(time.Now())
	}
	sh.young[key] = ks
	return ks
}

// keep makes sure the state ks that a call holds is still the key's, after
// the call: if the key was forgotten meanwhile (its call outlived an idle
// timeout), ks is the key's again, unless a newer state has taken its
// place. It rotates the key's shard if that is due. rotated is the shard's
// last rotation when the call found ks young: if it has not rotated since,
// ks is still there.
func (r *registry) keep(sh *shard, key string, ks *keyState, now time.Time, rotated int64) {
	r.rotate(sh, now.UnixNano())
	if sh.rotated.Load() == rotated {
		return
	}
	sh.mu.RLock()
	held := sh.young[key] == ks
	sh.mu.RUnlock()
	if held {
		return
	}
	sh.mu.Lock()
	if sh.young[key] == nil {
		if sh.old[key] == ks {
			delete(sh.old, key)
		}
		if sh.old[key] == nil {
			sh.young[key] = ks
		}
	}
	sh.mu.Unlock()
}

// pin keeps key, and its state, until until: its server asked for a pause.
func (r *registry) pin(key string, until time.Time) {
	sh := r.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.pinned == nil {
		sh.pinned = make(map[string]int64)
	}
	if u := until.UnixNano(); u > sh.pinned[key] {
		sh.pinned[key] = u
	}
}

// rotate drops the shard's old generation if the idle timeout has passed
// since its last rotation, keeping pinned keys whose time has not come.
func (r *registry) rotate(sh *shard, now int64) {
	last := sh.rotated.Load()
	if last == 0 {
		sh.rotated.CompareAndSwap(0, now)
		return
	}
	if now-last < r.idle || !sh.rotated.CompareAndSwap(last, now) {
		return
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	dropYoung := now-last >= 2*r.idle
	young := make(map[string]*keyState)
	for key, until := range sh.pinned {
		if until <= now {
			delete(sh.pinned, key)
			continue
		}
		if ks := sh.young[key]; ks != nil && dropYoung {
			young[key] = ks
		} else if ks := sh.old[key]; ks != nil {
			young[key] = ks
		}
	}
	if dropYoung {
		sh.old = nil
	} else {
		sh.old = sh.young
		for key := range young {
			delete(sh.old, key)
		}
	}
	sh.young = young
}

// len returns the number of keys the registry holds.
func (r *registry) len() int {
	n := 0
	for i := range r.shards {
		sh := &r.shards[i]
		sh.mu.RLock()
		n += len(sh.young) + len(sh.old)
		sh.mu.RUnlock()
	}
	return n
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

func (r *registry) newKeyState(now time.Time) *keyState {
	ks := &keyState{limit: rate.Inf}
	switch r.adaptive {
	case AdaptiveDefault:
		ks.gentle.init(now)
		ks.ctl = &ks.gentle
	case AdaptiveCubic:
		ks.ctl = NewCubic(now)
	case AdaptiveAIMD:
		ks.ctl = NewAIMD(now)
	}
	if r.perSecond > 0 {
		ks.limit, ks.burst = rate.Limit(r.perSecond), int32(min(r.burst, math.MaxInt32))
		ks.limiter = rate.NewLimiter(ks.limit, int(ks.burst))
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
