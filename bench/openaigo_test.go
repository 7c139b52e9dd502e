package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/llmfake"
	"github.com/politehttp/polite/politecost"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdkRun is what the fake OpenAI API saw of an openai-go client's run.
type sdkRun struct {
	calls, failed int     // calls made, and those that returned an error
	attempts      int     // requests the fake decided on
	refused       int     // of those, refused (429)
	use           float64 // tokens the fake kept after the first minute, over its quota of the rest of the run
	keys          []string
}

// runOpenAIGo runs 16 callers of an openai-go client built with opts over
// the in-process fake OpenAI API (500 requests and 200,000 tokens a
// minute) for 4 minutes of fake time, each asking for chat completions of
// about 1,000 prompt tokens with max_tokens 4,000, of which 500 are
// generated: an estimate of 5,000 tokens, a bill of 1,500.
func runOpenAIGo(t *testing.T, tr func(next http.RoundTripper) http.RoundTripper, opts ...option.RequestOption) sdkRun {
	t.Helper()
	var r sdkRun
	synctest.Test(t, func(t *testing.T) {
		const (
			tpm      = 200000
			duration = 4 * time.Minute
		)
		api := llmfake.NewOpenAI(500, tpm)
		start := time.Now()
		var mu sync.Mutex
		kept := 0
		api.Decided = func(d llmfake.Decision) {
			mu.Lock()
			defer mu.Unlock()
			r.attempts++
			if d.Refused != "" {
				r.refused++
			} else if d.At.Sub(start) >= time.Minute {
				kept += d.Kept.Tokens
			}
		}
		rt := tr(newInProcess(api, 0, 1))
		client := openai.NewClient(append([]option.RequestOption{
			option.WithHTTPClient(&http.Client{Transport: rt}),
			option.WithBaseURL("http://llm.test/v1/"),
			option.WithAPIKey("sk-test"),
			option.WithJSONSet("output_tokens", 500), // what the fake generates
		}, opts...)...)
		run, end := context.WithCancel(context.Background())
		time.AfterFunc(duration, end)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for run.Err() == nil {
					ctx, cancel := context.WithTimeout(run, 2*time.Minute) // each call's deadline
					_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
						Model:     "gpt-4.1",
						Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("word ", 800))},
						MaxTokens: openai.Int(4000),
					})
					cancel()
					if run.Err() != nil {
						return // the run's end: not counted
					}
					mu.Lock()
					r.calls++
					if err != nil {
						r.failed++
						var te *polite.ThrottledError
						if !errors.As(err, &te) {
							var ae *openai.Error
							require.ErrorAs(t, err, &ae, "an SDK error or a polite refusal")
						}
					}
					mu.Unlock()
					if err != nil {
						time.Sleep(time.Second) // the caller's own pause after a failed call
					}
				}
			})
		}
		wg.Wait()
		if p, ok := rt.(*polite.Transport); ok {
			for k := range p.Keys() {
				r.keys = append(r.keys, k.Key)
			}
		}
		r.use = float64(kept) / (tpm * (duration - time.Minute).Minutes())
	})
	return r
}

// The README's OpenAI client: openai-go over polite with politecost's
// OpenAI dialect and the SDK's own retries off. The SDK sets GetBody, so
// polite reads each request's estimate (and its model, the quota's scope)
// and settles it from the answer: the client uses the token quota with no
// attempt refused and no call failed. openai-go alone, with its two
// retries, is refused at every minute's turn and fails calls.
func TestOpenAIGoOverPolite(t *testing.T) {
	withPolite := runOpenAIGo(t, func(next http.RoundTripper) http.RoundTripper {
		return polite.New(next, politecost.OpenAI())
	}, option.WithMaxRetries(0))
	t.Logf("openai-go over polite: %.3f of the token quota, %d of %d attempts refused, %d of %d calls failed, keys %v",
		withPolite.use, withPolite.refused, withPolite.attempts, withPolite.failed, withPolite.calls, withPolite.keys)
	assert.Equal(t, []string{"llm.test|gpt-4.1"}, withPolite.keys, "keyed by the model read from the body")
	assert.GreaterOrEqual(t, withPolite.use, 0.95, "token quota used")
	assert.LessOrEqual(t, float64(withPolite.refused), 0.01*float64(withPolite.attempts), "attempts refused")
	assert.Zero(t, withPolite.failed, "calls failed")

	alone := runOpenAIGo(t, func(next http.RoundTripper) http.RoundTripper { return next })
	t.Logf("openai-go alone (2 retries): %.3f of the token quota, %d of %d attempts refused, %d of %d calls failed",
		alone.use, alone.refused, alone.attempts, alone.failed, alone.calls)
	assert.Greater(t, alone.refused, 10*max(withPolite.refused, 1), "openai-go alone is refused far more")
}
