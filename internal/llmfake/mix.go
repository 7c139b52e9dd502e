package llmfake

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
)

// Mix draws the requests of the LLM bench's callers: 90% small (a
// prompt of 300 to 800 tokens, max_tokens 512, an output drawn log-normal
// around 150 tokens) and 10% big (a prompt of 12,000 tokens, max_tokens
// 4,096, an output around 1,500), with, if tooLarge is set, 1% of requests
// larger than the server's token limit. An output never passes its
// max_tokens. With the medians, a request's estimate (prompt and
// max_tokens) averages about 2,565 tokens and its bill (prompt and output)
// about 1,980: a client that never gets the unused max_tokens back cannot
// use more than about 0.77 of a token quota.
type Mix struct {
	rng      *rand.Rand
	limit    int  // the server's token limit, for the requests too large for it
	tooLarge bool // 1% of requests are larger than limit
}

// NewMix returns a mix drawn from seed.
func NewMix(seed uint64, limit int, tooLarge bool) *Mix {
	return &Mix{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), limit: limit, tooLarge: tooLarge}
}

// Draw is one request of the mix: its prompt in tokens (4 characters
// each, as the fake counts them), its max_tokens, and the tokens it will
// generate.
type Draw struct {
	Prompt, MaxTokens, Output int
	Big                       bool
}

// Next draws a request.
func (m *Mix) Next() Draw {
	switch p := m.rng.Float64(); {
	case m.tooLarge && p < 0.01:
		return Draw{Prompt: m.limit + 1, MaxTokens: 16, Output: 16}
	case p < 0.1:
		return Draw{Prompt: 12000, MaxTokens: 4096, Output: m.logNormal(1500, 4096), Big: true}
	default:
		return Draw{Prompt: 300 + m.rng.IntN(501), MaxTokens: 512, Output: m.logNormal(150, 512)}
	}
}

// logNormal draws a count around median (σ 0.5), at least 1 and at most
// most.
func (m *Mix) logNormal(median float64, most int) int {
	v := median * math.Exp(0.5*m.rng.NormFloat64())
	return min(max(int(math.Round(v)), 1), most)
}

// Estimate is what the fake charges d at admission: its prompt and its
// max_tokens.
func (d Draw) Estimate() int { return d.Prompt + d.MaxTokens }

// Bill is what d costs once answered: its prompt and its output.
func (d Draw) Bill() int { return d.Prompt + d.Output }

// Content returns a prompt of d's size in the fake's count of 4
// characters a token.
func (d Draw) Content() string { return strings.Repeat("abcd", d.Prompt) }

// Body returns the JSON body of a request for d to model, streamed if
// stream, asking for the usage at the stream's end if includeUsage.
func (d Draw) Body(model string, stream, includeUsage bool) string {
	b, _ := json.Marshal(map[string]any{
		"model":          model,
		"messages":       []map[string]string{{"role": "user", "content": d.Content()}},
		"max_tokens":     d.MaxTokens,
		"output_tokens":  d.Output,
		"stream":         stream,
		"stream_options": map[string]bool{"include_usage": includeUsage},
	})
	return string(b)
}
