package polite

import (
	"container/list"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestPropertyBucket drives a key's bucket, as a registry with WithRate
// makes it and admitOn and waitTurn take from it, through random
// sequences of takes, queued calls that give up, and clock moves. Over any
// prefix it grants at most burst + rate × elapsed tokens; a call that
// leaves the queue takes no token; and the turn a call is told to wait for
// does bring it a token.
func TestPropertyBucket(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := defaultConfig()
		cfg.adaptive = AdaptiveOff
		cfg.perSecond, cfg.burst = validRate(
			rapid.Float64Range(0.001, 1000).Draw(t, "perSecond"),
			rapid.IntRange(1, 50).Draw(t, "burst"))
		ks := newRegistry(&cfg).newKeyState("k", propertyStart)
		now, granted := propertyStart, 0
		var queued []*list.Element
		t.Repeat(map[string]func(*rapid.T){
			"wait": func(t *rapid.T) {
				now = now.Add(drawGap(t, time.Duration(float64(time.Second)/cfg.perSecond)))
			},
			"take": func(t *rapid.T) {
				ks.mu.Lock()
				if ks.limiter.AllowN(now, 1) {
					granted++
				}
				ks.mu.Unlock()
			},
			"queue": func(t *rapid.T) {
				ks.mu.Lock()
				x := ks.extraLocked()
				if x.queue == nil {
					x.queue = list.New()
				}
				queued = append(queued, x.queue.PushBack(&waiter{wake: make(chan struct{}, 1)}))
				ks.mu.Unlock()
			},
			"give up": func(t *rapid.T) {
				if len(queued) == 0 {
					t.Skip("no call queued")
				}
				i := rapid.IntRange(0, len(queued)-1).Draw(t, "i")
				before := ks.limiter.TokensAt(now)
				ks.leave(queued[i])
				queued = append(queued[:i], queued[i+1:]...)
				if after := ks.limiter.TokensAt(now); after != before {
					t.Fatalf("leaving the queue changed the tokens: %v → %v", before, after)
				}
				if n := ks.extra.queue.Len(); n != len(queued) {
					t.Fatalf("queue holds %d, want %d", n, len(queued))
				}
			},
			"turn": func(t *rapid.T) {
				ks.mu.Lock()
				turn := ks.turnWaitLocked(now, 1)
				ks.mu.Unlock()
				if turn > 1000*time.Hour {
					return
				}
				at := now.Add(turn)
				if tok := ks.limiter.TokensAt(at); tok < 1-1e-9 {
					t.Fatalf("after its turn wait of %v a call finds %v tokens", turn, tok)
				}
			},
			"": func(t *rapid.T) {
				elapsed := now.Sub(propertyStart).Seconds()
				bound := float64(cfg.burst) + cfg.perSecond*elapsed
				if float64(granted) > math.Floor(bound+1e-6) {
					t.Fatalf("granted %d tokens in %v; at most %v (burst %d, %v/s)", granted, now.Sub(propertyStart), bound, cfg.burst, cfg.perSecond)
				}
				// x/time/rate counts in whole nanoseconds: it may grant a
				// token up to a nanosecond early, a debt of rate × 1ns.
				slop := cfg.perSecond*1e-9 + 1e-9
				if tok := ks.limiter.TokensAt(now); tok < -slop || tok > float64(cfg.burst)+slop {
					t.Fatalf("bucket holds %v tokens, outside [0, %d]", tok, cfg.burst)
				}
			},
		})
	})
}
