package main

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/llmfake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run's record, summarized: the window starts after the first period;
// the token quota's use is what the fake keeps of the requests it admitted
// in it; each call's wait is held to its FIFO bound; calls too large, cut
// by the run's end, and failed in their callers' hands count apart.
func TestSummarizeLLM(t *testing.T) {
	d := llmDialect{name: llmfake.OpenAI, rpm: 60, tpm: 600} // a request and 10 tokens a second
	cfg := llmConfig{period: time.Minute, duration: 2 * time.Minute}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	admit := func(id, s, charged, kept int) llmDecision {
		return llmDecision{id: id, at: at(s), charged: llmfake.Charge{Requests: 1, Tokens: charged}, kept: llmfake.Charge{Requests: 1, Tokens: kept}}
	}
	rec := llmRecord{
		start: t0,
		decisions: []llmDecision{
			admit(3, 90, 100, 100), // out of order: the summary sorts them
			admit(1, 0, 100, 50),   // before the window
			admit(2, 70, 200, 150),
			{id: 3, at: at(80), refused: llmfake.QuotaTokens},
			{id: 4, at: at(65), refused: llmfake.TooLarge},
		},
		calls: []llmCall{
			{id: 1, start: at(0), end: at(10), status: 200},
			{id: 2, start: at(65), end: at(75), status: 200, draw: llmfake.Draw{Big: true}},
			{id: 3, start: at(75), end: at(95), status: 200},
			{id: 4, start: at(65), end: at(65), tooLarge: true, err: &polite.CostError{Unit: "tokens", Cost: 601, Limit: 600}},
			{id: 5, start: at(100), end: at(100), err: &polite.ThrottledError{Wait: time.Minute}},
			{id: 6, start: at(110), end: at(120), cut: true, draw: llmfake.Draw{Big: true}},
		},
	}
	r := summarizeLLM(d, "x", cfg, rec)
	assert.InDelta(t, 250.0/600, r.Use, 1e-9, "150 and 100 kept in the window, of 600")
	assert.InDelta(t, 2.0/60, r.UseByQuota[llmfake.QuotaRequests], 1e-9)
	assert.Equal(t, 4, r.Attempts)
	assert.Equal(t, 2, r.Refusals)
	assert.InDelta(t, 0.5, r.Refused, 1e-9)
	assert.Equal(t, map[string]int{llmfake.QuotaTokens: 1, llmfake.TooLarge: 1}, r.RefusedBy)
	assert.Equal(t, 3, r.Calls, "2, 3 and 5: 1 ended before the window, 4 was too large, 6 was cut")
	assert.Equal(t, 2, r.OK)
	assert.Equal(t, 1, r.Failed)
	assert.Equal(t, 1, r.Errors)
	assert.Equal(t, map[string]int{"throttled": 1}, r.ErrorsBy)
	assert.InDelta(t, 1, r.AttemptsPerCall, 1e-9, "3 attempts for 3 calls")
	assert.Equal(t, 10*time.Second, r.P50)
	assert.Equal(t, 20*time.Second, r.P99)
	assert.Equal(t, 4, r.Drawn, "2, 3, 5 and the cut 6")
	assert.Equal(t, 2, r.BigDrawn)
	assert.Equal(t, 1, r.BigOK)
	assert.InDelta(t, 1, r.BigShare, 1e-9, "half the answers, half the draws")
	// Call 3 waited 15 s for 100 tokens at 10 a second, ahead of it
	// nothing: its bound is 10 s + 1 s.
	assert.Equal(t, 4*time.Second, r.FIFOExcess)
	assert.Equal(t, 1, r.OverFIFO)
	assert.Equal(t, 1, r.TooLargeDrawn)
	assert.Equal(t, 1, r.TooLargeSent)
	assert.Equal(t, 1, r.TooLargeTyped)
	require.Len(t, r.Timeline, 19, "bins of 5 s, to the last decision at 90 s")
	assert.Equal(t, llmBin{Admitted: 1, Tokens: 50}, r.Timeline[0])
	assert.Equal(t, llmBin{Refused: map[string]int{llmfake.TooLarge: 1}}, r.Timeline[13])
	assert.Equal(t, llmBin{Admitted: 1, Tokens: 100}, r.Timeline[18])
}

// The FIFO bound counts what the fake admitted from a call's start to its
// admission, its own charge included, at the slowest quota's rate, plus a
// second (scaled with the period).
func TestFIFOBound(t *testing.T) {
	d := llmDialect{name: llmfake.Anthropic, rpm: 60, tpm: 600, otpm: 60}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	admitted := []llmDecision{
		{at: t0, charged: llmfake.Charge{Requests: 1, Tokens: 100, OutputTokens: 10}},
		{at: t0.Add(time.Second), charged: llmfake.Charge{Requests: 1, Tokens: 100, OutputTokens: 10}},
		{at: t0.Add(2 * time.Second), charged: llmfake.Charge{Requests: 1, Tokens: 10, OutputTokens: 20}},
	}
	sums := []llmfake.Charge{{}, {Requests: 1, Tokens: 100, OutputTokens: 10}, {Requests: 2, Tokens: 200, OutputTokens: 20}, {Requests: 3, Tokens: 210, OutputTokens: 40}}
	// From 1 s to 2 s: 110 input tokens (11 s), 30 output tokens (30 s).
	assert.Equal(t, 31*time.Second, fifoBound(t0.Add(time.Second), t0.Add(2*time.Second), admitted, sums, d, time.Minute))
	assert.Equal(t, 11*time.Second, fifoBound(t0, t0, admitted, sums, d, time.Minute), "the first alone: 100 input, 10 output tokens")
	assert.Equal(t, 5*time.Second+time.Second/6, fifoBound(t0.Add(time.Second), t0.Add(2*time.Second), admitted, sums, d, 10*time.Second),
		"a period of 10 s: everything a sixth")
}

// The cookbook's rule takes a request's charge from its buckets, first
// come first served, and gives nothing back; the oracle gives back what
// the server does, and a refusal's whole charge; neither sends what no
// bucket could hold.
func TestBucketPacer(t *testing.T) {
	d := llmDialect{name: llmfake.OpenAI, rpm: 600, tpm: 6000} // 100 tokens a second
	draw := llmfake.Draw{Prompt: 1000, MaxTokens: 2000, Output: 500}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		cookbook := newBucketPacer(d, time.Minute, false, true)
		require.NoError(t, cookbook.reserve(context.Background(), draw))
		require.NoError(t, cookbook.reserve(context.Background(), draw)) // 6,000 taken
		cookbook.done(draw, http.StatusOK)                               // nothing back
		require.NoError(t, cookbook.reserve(context.Background(), draw))
		assert.Equal(t, 30*time.Second, time.Since(start), "3,000 tokens at 100 a second")
		assert.ErrorIs(t, cookbook.reserve(context.Background(), llmfake.Draw{Prompt: 6000, MaxTokens: 1}), errLLMTooLarge)

		start = time.Now()
		oracle := newBucketPacer(d, time.Minute, true, false) // empty
		require.NoError(t, oracle.reserve(context.Background(), draw))
		assert.Equal(t, 30*time.Second, time.Since(start), "it starts empty")
		oracle.done(draw, http.StatusOK) // 1,500 of max_tokens back
		require.NoError(t, oracle.reserve(context.Background(), draw))
		assert.Equal(t, 45*time.Second, time.Since(start), "1,500 back: 15 s more")
		oracle.done(draw, http.StatusTooManyRequests) // all 3,000 back
		require.NoError(t, oracle.reserve(context.Background(), draw))
		assert.Equal(t, 45*time.Second, time.Since(start))

		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		assert.ErrorIs(t, oracle.reserve(ctx, draw), context.Canceled)
	})
}

// -check fails a polite-cost row under 0.85 of the quota or over 10%
// refused, with over 5% of its calls failed in their callers' hands or
// any request too large sent, or whose run failed; other clients pass
// whatever they got.
func TestLLMFailures(t *testing.T) {
	good := llmResult{Dialect: "openai", Client: "polite-cost", Use: 0.9, Refused: 0.05, Calls: 100, Errors: 1}
	assert.Empty(t, llmFailures([]llmResult{good, {Client: "polite", Use: 0.1, Refused: 0.5, Errors: 9}, {Client: "polite-cost", Skipped: "x"}}))
	for _, bad := range []llmResult{
		{Use: 0.8, Refused: 0.01}, {Use: 0.9, Refused: 0.11}, {Use: 0.9, Calls: 100, Errors: 6}, {Use: 0.9, TooLargeSent: 1}, {Err: "boom"},
	} {
		bad.Dialect, bad.Client = "openai", "polite-cost"
		assert.Len(t, llmFailures([]llmResult{good, bad}), 1, "%+v", bad)
	}
}
