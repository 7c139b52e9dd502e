package polite

import (
	"testing"

	"pgregory.net/rapid"
)

// TestPropertyRetryBudget checks a RetryBudget against a model through
// random sequences of takes and refunds: it never holds more than its
// capacity nor fewer than 0 tokens, grants a take only if the cost fits,
// and takes nothing when it refuses.
func TestPropertyRetryBudget(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(-5, 600).Draw(t, "capacity")
		b := NewRetryBudget(capacity)
		tokens := max(capacity, 0) // the model
		if b.Capacity() != tokens || b.Remaining() != tokens {
			t.Fatalf("new budget: capacity %d, remaining %d; want %d full", b.Capacity(), b.Remaining(), tokens)
		}
		cost := rapid.OneOf(rapid.IntRange(-3, 12), rapid.SampledFrom([]int{retryCost, timeoutRetryCost, successRefund}), rapid.IntRange(0, 1000))
		t.Repeat(map[string]func(*rapid.T){
			"take": func(t *rapid.T) {
				c := cost.Draw(t, "cost")
				got := b.TryTake(c)
				want := c <= 0 || tokens >= c
				if got != want {
					t.Fatalf("TryTake(%d) with %d tokens = %v, want %v", c, tokens, got, want)
				}
				if got && c > 0 {
					tokens -= c
				}
			},
			"refund": func(t *rapid.T) {
				n := cost.Draw(t, "n")
				b.Refund(n)
				if n > 0 {
					tokens = min(tokens+n, max(capacity, 0))
				}
			},
			"": func(t *rapid.T) {
				r := b.Remaining()
				if r < 0 || r > b.Capacity() {
					t.Fatalf("remaining %d outside [0, %d]", r, b.Capacity())
				}
				if r != tokens {
					t.Fatalf("remaining %d, model %d", r, tokens)
				}
			},
		})
	})
}
