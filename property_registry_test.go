package polite

import (
	"container/list"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// registryHold is a key a property test holds: a call in flight (a slot
// taken), a call queued for a token, or a call that found the key's state
// and has taken neither yet.
type registryHold struct {
	kind    string // "slot", "queue" or "found"
	key     string
	ks      *keyState
	sh      *shard[keyState]
	rotated int64
	queued  *list.Element // the call's place in the queue, when kind is "queue"
}

// TestPropertyRegistry drives a registry through calls to a few keys, as
// Transport makes them (lookup, then keep and release when the call ends),
// some of which stay in flight, queued, or between the two, with clock moves of any size. A key held
// is never forgotten, whatever time passes and whatever other keys do;
// every call finds the state that a call holding its key holds; and a key
// idle is kept for one idle timeout after its last use, and forgotten by
// any rotation of its shard two idle timeouts or more after it.
func TestPropertyRegistry(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := defaultConfig()
		cfg.adaptive = AdaptiveOff
		cfg.idle = time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Hour)).Draw(t, "idle"))
		r := newRegistry(&cfg)
		// Six keys share a shard, so that they rotate it for each other;
		// two more have shards of their own. The seed of the shards is
		// random, but this layout is not, so a failure replays.
		var keys []string
		shared, others := r.shardOf("k0"), map[*shard[keyState]]bool{}
		for i := 0; len(keys) < 8; i++ {
			k := fmt.Sprint("k", i)
			switch sh := r.shardOf(k); {
			case sh == shared && len(keys) < 6:
				keys = append(keys, k)
			case sh != shared && len(keys) >= 6 && !others[sh]:
				keys, others[sh] = append(keys, k), true
			}
		}
		var (
			now     = propertyStart
			lastUse = make(map[string]time.Time)
			holds   []*registryHold
		)
		key := rapid.SampledFrom(keys)
		heldState := func(k string) *keyState {
			for _, h := range holds {
				if h.key == k {
					return h.ks
				}
			}
			return nil
		}
		t.Repeat(map[string]func(*rapid.T){
			"wait": func(t *rapid.T) { now = now.Add(drawGap(t, cfg.idle)) },
			"call": func(t *rapid.T) {
				k := key.Draw(t, "key")
				ks, sh, rotated := r.lookup(k, true)
				if want := heldState(k); want != nil && ks != want {
					t.Fatalf("a call to %q found a new state while another holds it", k)
				}
				r.keep(sh, k, ks, now, rotated)
				ks.release()
				lastUse[k] = now
			},
			"hold": func(t *rapid.T) {
				k := key.Draw(t, "key")
				h := &registryHold{key: k}
				h.ks, h.sh, h.rotated = r.lookup(k, true)
				if want := heldState(k); want != nil && h.ks != want {
					t.Fatalf("a call to %q found a new state while another holds it", k)
				}
				h.ks.mu.Lock()
				x := h.ks.extraLocked()
				switch h.kind = rapid.SampledFrom([]string{"slot", "queue", "found"}).Draw(t, "kind"); h.kind {
				case "queue":
					if x.queue == nil {
						x.queue = list.New()
					}
					h.queued = x.queue.PushBack(&waiter{wake: make(chan struct{}, 1)})
				case "slot":
					x.inflight++
				}
				h.ks.mu.Unlock()
				holds = append(holds, h)
				lastUse[k] = now
			},
			"release": func(t *rapid.T) {
				if len(holds) == 0 {
					t.Skip("no key held")
				}
				i := rapid.IntRange(0, len(holds)-1).Draw(t, "i")
				h := holds[i]
				holds = append(holds[:i], holds[i+1:]...)
				switch h.kind {
				case "queue":
					h.ks.leave(h.queued)
				case "slot":
					h.ks.mu.Lock()
					h.ks.extra.inflight--
					h.ks.mu.Unlock()
				}
				r.keep(h.sh, h.key, h.ks, now, h.rotated)
				h.ks.release()
				lastUse[h.key] = now
			},
			"": func(t *rapid.T) {
				for _, h := range holds {
					if v, _ := h.sh.peek(h.key); v != h.ks {
						t.Fatalf("key %q forgotten while held (held since the shard's rotation at %v, now %v)",
							h.key, time.Duration(h.rotated-propertyStart.UnixNano()), now.Sub(propertyStart))
					}
				}
				for k, used := range lastUse {
					if heldState(k) != nil {
						continue
					}
					sh := r.shardOf(k)
					if now.Sub(used) < cfg.idle {
						if v, _ := sh.peek(k); v == nil {
							t.Fatalf("key %q forgotten %v after its last use (idle timeout %v)", k, now.Sub(used), cfg.idle)
						}
						continue
					}
					if rot := time.Unix(0, sh.rotated.Load()); rot.Sub(used) >= 2*cfg.idle {
						if v, _ := sh.peek(k); v != nil {
							t.Fatalf("key %q idle since %v kept by a rotation at %v (idle timeout %v)",
								k, used.Sub(propertyStart), rot.Sub(propertyStart), cfg.idle)
						}
					}
				}
			},
		})
	})
}
