package quota

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/politehttp/polite/internal/proptest"
	"github.com/politehttp/polite/internal/signals"
)

// TestPropertyServerQuota drives a Quota through random responses
// (sync), reservations, releases, answers, Retry-Afters (exhaust) and
// clock moves. Requests in flight are never negative and are what the
// reservations left; between two responses, no more requests are counted
// down than what the last response left, less those in flight; a reserve
// never takes what is left below 0 (only a response does, counting the
// requests in flight against it); while it is spent, nothing goes until
// the reset, nor during a Retry-After for the quota; and at the reset the
// quota renews.
func TestPropertyServerQuota(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var (
			q    Quota
			now  = proptest.Start()
			held []bool // the reservations in flight, whether each was counted down
			// budget is how many more reservations may be counted down:
			// what the last response left, less those in flight then, plus
			// those given back since.
			budget  = math.Inf(1)
			counted bool      // the quota is counted down: budget applies
			paused  time.Time // a Retry-After for the quota holds until then, no response since
		)
		t.Repeat(map[string]func(*rapid.T){
			"wait": func(t *rapid.T) { now = now.Add(proptest.DrawGap(t, time.Second)) },
			"response": func(t *rapid.T) {
				quota := signals.Quota{
					Limit:     float64(rapid.IntRange(0, 100).Draw(t, "limit")),
					Remaining: float64(rapid.IntRange(0, 100).Draw(t, "remaining")),
					Window:    time.Duration(rapid.SampledFrom([]int64{0, int64(time.Second), int64(time.Minute), int64(time.Hour)}).Draw(t, "window")),
					Slack:     time.Duration(rapid.SampledFrom([]int64{0, int64(time.Millisecond), int64(time.Second)}).Draw(t, "slack")),
				}
				if rapid.Bool().Draw(t, "reset") {
					quota.Reset = now.Add(time.Duration(rapid.Int64Range(-int64(time.Minute), int64(2*time.Hour)).Draw(t, "ahead")))
				}
				// The answered request went at any time so far, or when
				// is unknown (0); the server refused it, or not.
				if rapid.Bool().Draw(t, "send") {
					q.Sending()
				}
				sent := rapid.Uint64Range(0, q.sends.Load()).Draw(t, "sent")
				q.Sync(now, quota, sent, rapid.Bool().Draw(t, "throttled"))
				paused = time.Time{}
				counted = !q.resetAt.IsZero()
				budget = math.Inf(1)
				if counted {
					budget = q.left
				}
			},
			"reserve": func(t *rapid.T) {
				resetAt, left := q.resetAt, q.left
				// A bound of a count near its reset holds only once the
				// count was seen renewed whole.
				holds := !q.loose || q.renews
				wait, spent, took := q.Reserve(now, 1, false)
				switch {
				case spent:
					if resetAt.IsZero() || left >= 1 || !now.Before(resetAt) || wait != resetAt.Sub(now) || !holds {
						t.Fatalf("spent for %v at %v with reset %v and %v left", wait, now, resetAt, left)
					}
					return
				case !resetAt.IsZero() && left < 1 && now.Before(resetAt) && holds:
					t.Fatalf("let a request go at %v with %v left before the reset at %v", now, left, resetAt)
				case now.Before(paused):
					t.Fatalf("let a request go at %v, during a Retry-After until %v", now, paused)
				case wait < 0:
					t.Fatalf("negative wait %v", wait)
				}
				if took {
					if budget < 1 {
						t.Fatalf("counted down a request with %v left of what the server said", budget)
					}
					budget--
				}
				held = append(held, took)
			},
			"release": func(t *rapid.T) {
				if len(held) == 0 {
					t.Skip("none in flight")
				}
				i := rapid.IntRange(0, len(held)-1).Draw(t, "i")
				q.Release(held[i])
				if held[i] {
					budget++
				}
				held = append(held[:i], held[i+1:]...)
			},
			"answered": func(t *rapid.T) {
				if len(held) == 0 {
					t.Skip("none in flight")
				}
				i := rapid.IntRange(0, len(held)-1).Draw(t, "i")
				q.Answered()
				held = append(held[:i], held[i+1:]...)
			},
			"retry-after": func(t *rapid.T) {
				until := now.Add(time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "retryAfter")))
				q.Exhaust(until)
				paused = maxTime(paused, until)
				budget = q.left // nothing is left until the reset: what a response left no longer counts
			},
			"": func(t *rapid.T) {
				if q.inflight < 0 || q.inflight != len(held) {
					t.Fatalf("%d in flight, want %d", q.inflight, len(held))
				}
				if !q.resetAt.IsZero() && q.left < 0 && q.left != budget {
					t.Fatalf("%v left: only a response, counting those in flight, may leave less than 0", q.left)
				}
				if !math.IsInf(budget, 1) && q.left > budget+1e-9 && !q.resetAt.IsZero() {
					t.Fatalf("%v left, but the server allowed only %v more", q.left, budget)
				}
			},
		})
	})
}

// TestPropertyServerQuotaReleaseDuringRetryAfter is the counterexample
// that TestPropertyServerQuota shrank to: a Retry-After for the quota
// (exhaust) marks it spent, and a place counted down before it and given
// back during it (release(true)) made what is left 1 again, so that the
// next request went before the Retry-After was over.
func TestPropertyServerQuotaReleaseDuringRetryAfter(t *testing.T) {
	var q Quota
	now := proptest.Start()
	q.Sync(now, signals.Quota{Remaining: 1, Reset: now.Add(time.Minute)}, 0, false)
	_, spent, took := q.Reserve(now, 1, false)
	if spent || !took {
		t.Fatalf("reserve = spent %v, took %v; want a place counted down", spent, took)
	}
	until := now.Add(time.Second)
	q.Exhaust(until)
	q.Release(took)
	if _, spent, _ := q.Reserve(now, 1, false); !spent {
		t.Errorf("a request went at %v, during a Retry-After until %v", now, until)
	}
}
