package pace

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/proptest"
)

// TestPropertyBucket drives a key's bucket, as WithRate makes it and
// Admit and waitTurn take from it, through random
// sequences of takes, queued calls that give up, and clock moves. Over any
// prefix it grants at most burst + rate × elapsed tokens; a call that
// leaves the queue takes no token; and the turn a call is told to wait for
// does bring it a token.
func TestPropertyBucket(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		perSecond := rapid.Float64Range(0.001, 1000).Draw(t, "perSecond")
		burst := rapid.IntRange(1, 50).Draw(t, "burst")
		var b Bucket
		b.Init(perSecond, burst)
		now, granted := proptest.Start(), 0
		var queued []*gate.Ticket[struct{}]
		t.Repeat(map[string]func(*rapid.T){
			"wait": func(t *rapid.T) {
				now = now.Add(proptest.DrawGap(t, time.Duration(float64(time.Second)/perSecond)))
			},
			"take": func(t *rapid.T) {
				b.mu.Lock()
				if b.limiter.AllowN(now, 1) {
					granted++
				}
				b.mu.Unlock()
			},
			"queue": func(t *rapid.T) {
				b.mu.Lock()
				tk, _ := b.moreLocked().queue.PushBack(struct{}{}, gate.Place{})
				queued = append(queued, tk)
				b.mu.Unlock()
			},
			"give up": func(t *rapid.T) {
				if len(queued) == 0 {
					t.Skip("no call queued")
				}
				i := rapid.IntRange(0, len(queued)-1).Draw(t, "i")
				before := b.limiter.TokensAt(now)
				b.mu.Lock()
				b.more.queue.Leave(queued[i])
				b.mu.Unlock()
				queued = append(queued[:i], queued[i+1:]...)
				if after := b.limiter.TokensAt(now); after != before {
					t.Fatalf("leaving the queue changed the tokens: %v → %v", before, after)
				}
				if n := b.more.queue.Len(); n != len(queued) {
					t.Fatalf("queue holds %d, want %d", n, len(queued))
				}
			},
			"turn": func(t *rapid.T) {
				b.mu.Lock()
				turn := b.turnWaitLocked(now, 1)
				b.mu.Unlock()
				if turn > 1000*time.Hour {
					return
				}
				at := now.Add(turn)
				if tok := b.limiter.TokensAt(at); tok < 1-1e-9 {
					t.Fatalf("after its turn wait of %v a call finds %v tokens", turn, tok)
				}
			},
			"": func(t *rapid.T) {
				elapsed := now.Sub(proptest.Start()).Seconds()
				bound := float64(burst) + perSecond*elapsed
				if float64(granted) > math.Floor(bound+1e-6) {
					t.Fatalf("granted %d tokens in %v; at most %v (burst %d, %v/s)", granted, now.Sub(proptest.Start()), bound, burst, perSecond)
				}
				// x/time/rate counts in whole nanoseconds: it may grant a
				// token up to a nanosecond early, a debt of rate × 1ns.
				slop := perSecond*1e-9 + 1e-9
				if tok := b.limiter.TokensAt(now); tok < -slop || tok > float64(burst)+slop {
					t.Fatalf("bucket holds %v tokens, outside [0, %d]", tok, burst)
				}
			},
		})
	})
}
