package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/pace"
	"github.com/politehttp/polite/internal/proptest"
	"github.com/politehttp/polite/internal/registry"
)

// registryHold is a key a property test holds: a call in flight (a slot
// taken), a call queued for a token, or a call that found the key's state
// and has taken neither yet.
type registryHold struct {
	kind    string // "slot", "queue" or "found"
	key     string
	ks      *Key
	sh      *registry.Shard[Key]
	rotated int64
	leave   func() // takes the call's place out of the queue, when kind is "queue"
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
		cfg := Config{Kind: control.KindOff, MaxInFlight: 1 << 20}
		cfg.Idle = time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(time.Hour)).Draw(t, "idle"))
		r := New(cfg)
		// Six keys share a shard, so that they rotate it for each other;
		// two more have shards of their own. The seed of the shards is
		// random, but this layout is not, so a failure replays.
		var keys []string
		shared, others := r.keys.ShardOf("k0"), map[*registry.Shard[Key]]bool{}
		for i := 0; len(keys) < 8; i++ {
			k := fmt.Sprint("k", i)
			switch sh := r.keys.ShardOf(k); {
			case sh == shared && len(keys) < 6:
				keys = append(keys, k)
			case sh != shared && len(keys) >= 6 && !others[sh]:
				keys, others[sh] = append(keys, k), true
			}
		}
		var (
			now     = proptest.Start()
			lastUse = make(map[string]time.Time)
			holds   []*registryHold
		)
		key := rapid.SampledFrom(keys)
		heldState := func(k string) *Key {
			for _, h := range holds {
				if h.key == k {
					return h.ks
				}
			}
			return nil
		}
		t.Repeat(map[string]func(*rapid.T){
			"wait": func(t *rapid.T) { now = now.Add(proptest.DrawGap(t, cfg.Idle)) },
			"call": func(t *rapid.T) {
				k := key.Draw(t, "key")
				ks, sh, rotated := r.Lookup(k, true)
				if want := heldState(k); want != nil && ks != want {
					t.Fatalf("a call to %q found a new state while another holds it", k)
				}
				r.Keep(sh, k, ks, now, rotated)
				ks.Release()
				lastUse[k] = now
			},
			"hold": func(t *rapid.T) {
				k := key.Draw(t, "key")
				h := &registryHold{key: k}
				h.ks, h.sh, h.rotated = r.Lookup(k, true)
				if want := heldState(k); want != nil && h.ks != want {
					t.Fatalf("a call to %q found a new state while another holds it", k)
				}
				switch h.kind = rapid.SampledFrom([]string{"slot", "queue", "found"}).Draw(t, "kind"); h.kind {
				case "queue":
					h.leave = h.ks.pace.Join()
				case "slot":
					slots := part(h.ks, slotsPart, newOf[pace.Slots]())
					if _, err := slots.Take(&gate.Waiter{Who: gate.Who{Ctx: context.Background()}}, cfg.MaxInFlight); err != nil {
						t.Fatal(err)
					}
				}
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
					h.leave()
				case "slot":
					peek(h.ks, slotsPart).Release()
				}
				r.Keep(h.sh, h.key, h.ks, now, h.rotated)
				h.ks.Release()
				lastUse[h.key] = now
			},
			"": func(t *rapid.T) {
				for _, h := range holds {
					if v, _ := h.sh.Peek(h.key); v != h.ks {
						t.Fatalf("key %q forgotten while held (held since the shard's rotation at %v, now %v)",
							h.key, time.Duration(h.rotated-proptest.Start().UnixNano()), now.Sub(proptest.Start()))
					}
				}
				for k, used := range lastUse {
					if heldState(k) != nil {
						continue
					}
					sh := r.keys.ShardOf(k)
					if now.Sub(used) < cfg.Idle {
						if v, _ := sh.Peek(k); v == nil {
							t.Fatalf("key %q forgotten %v after its last use (idle timeout %v)", k, now.Sub(used), cfg.Idle)
						}
						continue
					}
					if rot := time.Unix(0, sh.Rotated()); rot.Sub(used) >= 2*cfg.Idle {
						if v, _ := sh.Peek(k); v != nil {
							t.Fatalf("key %q idle since %v kept by a rotation at %v (idle timeout %v)",
								k, used.Sub(proptest.Start()), rot.Sub(proptest.Start()), cfg.Idle)
						}
					}
				}
			},
		})
	})
}
