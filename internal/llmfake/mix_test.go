package llmfake

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The mix has the research's proportions: a tenth big, estimates of about
// 2,565 tokens on average, bills under 0.8 of them, and outputs within
// their max_tokens.
func TestLLMMix(t *testing.T) {
	m := NewMix(1, 200000, false)
	const n = 20000
	var big, estimate, bill int
	for range n {
		d := m.Next()
		assert.LessOrEqual(t, d.Output, d.MaxTokens)
		assert.Positive(t, d.Output)
		if d.Big {
			big++
		}
		estimate += d.Estimate()
		bill += d.Bill()
	}
	assert.InDelta(t, 0.1, float64(big)/n, 0.01, "big requests")
	assert.InDelta(t, 2565, float64(estimate)/n, 2565*0.03, "mean estimate")
	ratio := float64(bill) / float64(estimate)
	t.Logf("%d requests: %.1f%% big, mean estimate %.0f, mean bill %.0f (%.3f of the estimate)", n, 100*float64(big)/n, float64(estimate)/n, float64(bill)/n, ratio)
	assert.InDelta(t, 0.78, ratio, 0.03, "what a client that never refunds can use at most")
	assert.Len(t, Draw{Prompt: 3}.Content(), 12)
}

// With tooLarge, about 1% of the requests are larger than the server's
// limit.
func TestLLMMixTooLarge(t *testing.T) {
	m := NewMix(2, 60000, true)
	const n = 20000
	var over int
	for range n {
		if d := m.Next(); d.Estimate() > 60000 {
			over++
		}
	}
	assert.InDelta(t, 0.01, float64(over)/n, 0.003)
}
