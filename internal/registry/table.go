// Package registry holds the keys polite keeps state for: a sharded map
// that forgets the keys left idle, with no goroutine (Table).
package registry

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// shards is how many independently locked parts a table has, so that
// calls to different keys seldom wait for the same lock.
const shards = 64

// Table maps keys to values of type V, and forgets keys that stay idle. It
// is sharded by a hash of the key, so that keys do not contend. Each shard
// holds two generations, the keys used since its last rotation (young) and
// the keys used in the period before (old). A key found in old moves to
// young. Once the idle timeout has passed since a shard's last rotation,
// the next call that touches the shard rotates it: old is dropped, young
// becomes old (both are dropped when two timeouts have passed). So a key
// idle for the timeout is forgotten after one to two timeouts, at no cost
// beyond dropping a map, and with no goroutine. A pinned key (its server
// asked for a pause) is kept until its time.
type Table[V any] struct {
	idle   int64 // the idle timeout, in nanoseconds
	seed   maphash.Seed
	fresh  func(key string, now time.Time) *V // makes the value of a new key
	busy   func(v *V, now int64) bool         // reports whether v must outlive its key's idleness; nil: never
	shards [shards]Shard[V]
}

// A Shard is one part of a table.
type Shard[V any] struct {
	rotated atomic.Int64 // Unix nanoseconds of the last rotation; 0 before the first

	// mu guards the fields below.
	mu     sync.RWMutex
	young  map[string]*V
	old    map[string]*V
	pinned map[string]int64 // key → Unix nanoseconds it is kept until

	_ [64]byte // keep shards on separate cache lines
}

func (tb *Table[V]) Init(idle time.Duration, fresh func(string, time.Time) *V, busy func(*V, int64) bool) {
	tb.idle, tb.seed, tb.fresh, tb.busy = int64(idle), maphash.MakeSeed(), fresh, busy
	for i := range tb.shards {
		tb.shards[i].young = make(map[string]*V)
	}
}

// ShardOf returns the shard of key.
func (tb *Table[V]) ShardOf(key string) *Shard[V] {
	return &tb.shards[maphash.String(tb.seed, key)%shards]
}

// Peek returns the value of key, or nil, and whether it is young.
func (sh *Shard[V]) Peek(key string) (v *V, young bool) {
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	if v := sh.young[key]; v != nil {
		return v, true
	}
	return sh.old[key], false
}

// Ensure returns the value of key, making it if needed, and makes it
// young.
func (tb *Table[V]) Ensure(key string) *V {
	return tb.EnsureIn(tb.ShardOf(key), key, true, nil)
}

// Use returns the value of key, making it if needed, and makes it young,
// after rotating the key's shard if that is due.
func (tb *Table[V]) Use(key string, now time.Time) *V {
	sh := tb.ShardOf(key)
	tb.Rotate(sh, now.UnixNano())
	return tb.EnsureIn(sh, key, true, nil)
}

// EnsureIn returns the value of key in sh and makes it young; a key sh
// does not hold is made if create is set, and nil is returned otherwise.
// hold, if not nil, is called on the value under the shard's lock, so that
// no rotation can come between finding the value and holding it.
func (tb *Table[V]) EnsureIn(sh *Shard[V], key string, create bool, hold func(*V)) *V {
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

// Keep makes sure the value v that a call holds is still the key's, after
// the call: if the key was forgotten meanwhile (its call outlived an idle
// timeout), v is the key's again, unless a newer value has taken its
// place. It rotates the key's shard if that is due. rotated is the shard's
// last rotation when the call found v young: if it has not rotated since,
// v is still there.
func (tb *Table[V]) Keep(sh *Shard[V], key string, v *V, now time.Time, rotated int64) {
	tb.Rotate(sh, now.UnixNano())
	if sh.rotated.Load() == rotated {
		return
	}
	if held, young := sh.Peek(key); held == v && young {
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

// Pin keeps key, and its value, until until.
func (tb *Table[V]) Pin(key string, until time.Time) {
	sh := tb.ShardOf(key)
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

// Rotate drops the shard's old generation (and its young one too, if two
// timeouts have passed) if the idle timeout has passed since its last
// rotation. Of the keys dropped, it keeps those pinned until later and
// those whose values are busy: their forgetting would lose something.
func (tb *Table[V]) Rotate(sh *Shard[V], now int64) {
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

// Len returns the number of keys the table holds.
func (tb *Table[V]) Len() int {
	n := 0
	for i := range tb.shards {
		sh := &tb.shards[i]
		sh.mu.RLock()
		n += len(sh.young) + len(sh.old)
		sh.mu.RUnlock()
	}
	return n
}

// Shards returns the table's shards, for a walk over every key (see
// Shard.Values).
func (tb *Table[V]) Shards() []Shard[V] { return tb.shards[:] }

// Values returns the keys the shard holds and their values, read under
// its lock into keys and vals (reused), for a walk over them with no lock
// held.
func (sh *Shard[V]) Values(keys []string, vals []*V) ([]string, []*V) {
	sh.mu.RLock()
	defer sh.mu.RUnlock()
	for _, m := range [2]map[string]*V{sh.young, sh.old} {
		for k, v := range m {
			keys, vals = append(keys, k), append(vals, v)
		}
	}
	return keys, vals
}

// Rotated returns the shard's last rotation, Unix nanoseconds (see Keep).
func (sh *Shard[V]) Rotated() int64 { return sh.rotated.Load() }
