package llmfake

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// llmCall sends one request to api, in process, and returns the answer.
func llmCall(t *testing.T, api *API, chars, maxTokens, out int) *httptest.ResponseRecorder {
	t.Helper()
	return llmSend(t, api, chars, maxTokens, out, nil)
}

// llmSend sends one request to api, in process, with the fields of extra
// beside the model, the messages, max_tokens and output_tokens, and
// returns the answer.
func llmSend(t *testing.T, api *API, chars, maxTokens, out int, extra map[string]any) *httptest.ResponseRecorder {
	t.Helper()
	fields := map[string]any{
		"model":         "gpt-test",
		"messages":      []map[string]string{{"content": strings.Repeat("a", chars)}},
		"max_tokens":    maxTokens,
		"output_tokens": out,
	}
	for k, v := range extra {
		fields[k] = v
	}
	body, err := json.Marshal(fields)
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body))))
	return rec
}

// llmError returns the message of a refusal's body.
func llmError(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct {
		Error struct{ Message, Code string }
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	assert.Equal(t, "rate_limit_exceeded", body.Error.Code)
	return body.Error.Message
}

// The fake charges the estimate at admission (ceil(chars/4) + max_tokens),
// refuses what its tokens per minute do not hold with OpenAI's headers and
// body, and gives the unused max_tokens back when the answer is done.
func TestLLMAPIReservesAndSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		api := NewOpenAI(600, 60000) // 10 requests and 1,000 tokens a second
		// Each request: 1,000 input tokens and max_tokens 1,000, 100
		// generated: 2,000 charged, 1,100 billed, answered in 1.2s.
		var wg sync.WaitGroup
		var mu sync.Mutex
		var answers []*httptest.ResponseRecorder
		for range 30 {
			wg.Go(func() {
				rec := llmCall(t, api, 4000, 1000, 100)
				mu.Lock()
				answers = append(answers, rec)
				mu.Unlock()
			})
		}
		synctest.Wait() // the 30 admitted, generating

		rec := llmCall(t, api, 4000, 1000, 100)
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		h := rec.Header()
		assert.Equal(t, "0", h.Get("x-ratelimit-remaining-tokens"))
		assert.Equal(t, "1m0s", h.Get("x-ratelimit-reset-tokens"), "the time until the bucket is full")
		assert.Equal(t, "570", h.Get("x-ratelimit-remaining-requests"))
		assert.Equal(t, "3s", h.Get("x-ratelimit-reset-requests"))
		assert.Equal(t, "2", h.Get("Retry-After"))
		assert.Equal(t, "2000", h.Get("retry-after-ms"))
		assert.Equal(t, "Rate limit reached for gpt-test on tokens per min (TPM): Limit 60000, Used 60000, Requested 2000. Please try again in 2.000s.", llmError(t, rec))

		wg.Wait() // 1.2s later: 30 × 900 unused tokens back, and 1.2s of refill
		assert.Equal(t, 1200*time.Millisecond, time.Since(start), "200ms and 10ms a token generated")
		require.Len(t, answers, 30)
		var usage struct {
			Usage struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		assert.Equal(t, http.StatusOK, answers[0].Code)
		require.NoError(t, json.Unmarshal(answers[0].Body.Bytes(), &usage))
		assert.Equal(t, 1000, usage.Usage.Prompt)
		assert.Equal(t, 100, usage.Usage.Completion)

		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- llmCall(t, api, 4000, 1000, 100) }()
		synctest.Wait()
		// 27,000 given back and 1,200 refilled: 28,200, less this one's 2,000.
		rec = <-done
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "26200", rec.Header().Get("x-ratelimit-remaining-tokens"))
	})
}

// A request whose estimate is above the whole token limit is refused at
// once as too large, with no Retry-After: no wait would admit it.
func TestLLMAPIRefusesTooLarge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := NewOpenAI(600, 60000)
		rec := llmCall(t, api, 400, 60000, 10)
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		assert.Empty(t, rec.Header().Get("Retry-After"))
		assert.Equal(t, "Request too large for gpt-test on tokens per min (TPM): Limit 60000, Requested 60100.", llmError(t, rec))
		assert.Equal(t, "60000", rec.Header().Get("x-ratelimit-remaining-tokens"), "nothing charged")
	})
}

func TestLLMSeconds(t *testing.T) {
	assert.Equal(t, "1.234s", seconds(1234*time.Millisecond))
	assert.Equal(t, "120ms", seconds(120*time.Millisecond))
	assert.Equal(t, "1ms", seconds(time.Microsecond))
}

// Anthropic's dialect charges the input to the input bucket and
// max_tokens to the output bucket, settles the output to what was
// generated, and states each bucket with its remaining rounded to the
// thousand and its reset as the instant it is full again.
func TestAnthropicAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		api := NewAnthropic(50, 30000, 8000)
		// 1,000 input tokens, max_tokens 4,000, 100 generated.
		done := make(chan *httptest.ResponseRecorder, 2)
		for range 2 {
			go func() { done <- llmCall(t, api, 4000, 4000, 100) }()
		}
		synctest.Wait() // both admitted: the output bucket is spent
		rec := llmCall(t, api, 4000, 4000, 100)
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		h := rec.Header()
		assert.Equal(t, "28000", h.Get("anthropic-ratelimit-input-tokens-remaining"))
		assert.Equal(t, "0", h.Get("anthropic-ratelimit-output-tokens-remaining"))
		assert.Equal(t, start.Add(time.Minute).UTC().Format(time.RFC3339), h.Get("anthropic-ratelimit-output-tokens-reset"))
		assert.Equal(t, "8000", h.Get("anthropic-ratelimit-tokens-limit"), "the more restrictive: output")
		assert.Equal(t, "48", h.Get("anthropic-ratelimit-requests-remaining"))
		assert.Equal(t, "30", h.Get("Retry-After"), "4,000 of 8,000 a minute")
		assert.Empty(t, h.Get("retry-after-ms"))
		var body struct {
			Type  string
			Error struct{ Type, Message string }
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		assert.Equal(t, "rate_limit_error", body.Error.Type)

		<-done
		<-done // 1.2s: 2 × 3,900 output tokens given back, and 160 refilled: 7,960
		rec = llmCall(t, api, 40, 1000, 0)
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "7000", rec.Header().Get("anthropic-ratelimit-output-tokens-remaining"), "7,960 less 1,000: 6,960, to the thousand")
	})
}

// Azure's dialect states only what remains, and settles nothing: the
// estimate stays charged.
func TestAzureAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := NewAzure(60, 6000)
		rec := llmCall(t, api, 4000, 1000, 100) // 2,000 charged
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "4000", rec.Header().Get("x-ratelimit-remaining-tokens"))
		assert.Empty(t, rec.Header().Get("x-ratelimit-limit-tokens"))
		assert.Empty(t, rec.Header().Get("x-ratelimit-reset-tokens"))
		llmCall(t, api, 4000, 1000, 100)
		llmCall(t, api, 4000, 1000, 100)
		// 3.6s on: 6,000 charged, 360 refilled, nothing given back.
		rec = llmCall(t, api, 4000, 1000, 100)
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		assert.Equal(t, "17", rec.Header().Get("Retry-After"), "1,640 tokens at 100 a second")
		var body struct {
			Error struct{ Code, Message string }
		}
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		assert.Contains(t, body.Error.Message, "Please retry after 17 seconds.")
	})
}

// llmStreamCall sends one streaming request to api, in process, and
// returns the answer.
func llmStreamCall(t *testing.T, api *API, chars, maxTokens, out int, includeUsage bool) *httptest.ResponseRecorder {
	t.Helper()
	return llmSend(t, api, chars, maxTokens, out, map[string]any{
		"stream": true, "stream_options": map[string]bool{"include_usage": includeUsage},
	})
}

// sseData returns the data lines of an event stream.
func sseData(body string) []string {
	var data []string
	for line := range strings.Lines(body) {
		if d, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
			data = append(data, d)
		}
	}
	return data
}

// A stream carries its usage at its end, after the settlement, and only
// when asked for; the rate-limit headers come first, with the admission's
// charge.
func TestLLMAPIStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		api := NewOpenAI(600, 60000)
		rec := llmStreamCall(t, api, 4000, 1000, 25, true)
		assert.Equal(t, 450*time.Millisecond, time.Since(start), "200ms, then 10ms a token")
		assert.Equal(t, "text/event-stream", rec.Header().Get("Content-Type"))
		assert.Equal(t, "58000", rec.Header().Get("x-ratelimit-remaining-tokens"), "the admission's charge")
		data := sseData(rec.Body.String())
		require.Len(t, data, 5, "3 chunks of 10, 10 and 5 tokens, the usage, [DONE]")
		assert.Equal(t, "[DONE]", data[4])
		var last struct {
			Usage struct {
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		require.NoError(t, json.Unmarshal([]byte(data[3]), &last))
		assert.Equal(t, 25, last.Usage.Completion)

		rec = llmStreamCall(t, api, 4000, 1000, 5, false)
		// 58,000 + 975 given back + 450 refilled, less 2,000.
		assert.Equal(t, "57425", rec.Header().Get("x-ratelimit-remaining-tokens"))
		data = sseData(rec.Body.String())
		assert.Equal(t, []string{`{"choices":[{"delta":{"content":"abcdabcdabcdabcdabcd"}}]}`, "[DONE]"}, data, "no usage unless asked")
	})
}

// Anthropic's stream states the input at its start and the output in its
// message_delta.
func TestAnthropicAPIStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := NewAnthropic(50, 30000, 8000)
		rec := llmStreamCall(t, api, 4000, 4000, 12, false)
		body := rec.Body.String()
		assert.Contains(t, body, "event: message_start\ndata: ")
		assert.Contains(t, body, `"input_tokens":1000`)
		assert.Contains(t, body, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":12}}")
		assert.True(t, strings.HasSuffix(body, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
		assert.Equal(t, "4000", rec.Header().Get("anthropic-ratelimit-output-tokens-remaining"), "max_tokens charged at admission")
	})
}

// With a period of 10 seconds the fake is the same API with time scaled
// down six times: its buckets refill their limits in 10 s, its resets
// count in that period, and its answers take a sixth of the time.
func TestLLMAPIWithPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		// 60 requests and 6,000 tokens a second.
		api := NewOpenAI(600, 60000, WithPeriod(10*time.Second))
		assert.Equal(t, 10*time.Second, api.Period())
		var wg sync.WaitGroup
		for range 2 { // 1,000 input tokens, max_tokens 29,000: 30,000 charged each
			wg.Go(func() { assert.Equal(t, http.StatusOK, llmCall(t, api, 4000, 29000, 580).Code) })
		}
		synctest.Wait()
		rec := llmCall(t, api, 4000, 1000, 100) // 2,000
		require.Equal(t, http.StatusTooManyRequests, rec.Code)
		h := rec.Header()
		assert.Equal(t, "60000", h.Get("x-ratelimit-limit-tokens"), "the limit as given")
		assert.Equal(t, "0", h.Get("x-ratelimit-remaining-tokens"))
		assert.Equal(t, "10s", h.Get("x-ratelimit-reset-tokens"))
		assert.Equal(t, "598", h.Get("x-ratelimit-remaining-requests"))
		assert.Equal(t, "33ms", h.Get("x-ratelimit-reset-requests"), "2 requests at 60 a second")
		assert.Equal(t, "333", h.Get("retry-after-ms"), "2,000 tokens at 6,000 a second")
		assert.Equal(t, "1", h.Get("Retry-After"), "whole seconds, rounded up")

		time.Sleep(500 * time.Millisecond) // 3,000 refilled
		done := make(chan *httptest.ResponseRecorder)
		go func() { done <- llmCall(t, api, 4000, 1000, 100) }()
		rec = <-done
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "1000", rec.Header().Get("x-ratelimit-remaining-tokens"), "admitted at 500ms")
		assert.Equal(t, 700*time.Millisecond, time.Since(start), "(200ms + 100 × 10ms) / 6 after it was admitted")
		wg.Wait()
		assert.Equal(t, time.Second, time.Since(start), "(200ms + 580 × 10ms) / 6")
	})
}

// A settlement gives back at most what fills the bucket: the level never
// passes the limit.
func TestLLMAPISettlementStopsAtTheLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		api := NewOpenAI(600, 60000)
		require.Equal(t, http.StatusOK, llmCall(t, api, 4000, 59000, 100).Code) // 60,000 charged; 1.2 s later 1,200 refilled and 58,900 back
		rec := llmCall(t, api, 4000, 1000, 100)
		require.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "58000", rec.Header().Get("x-ratelimit-remaining-tokens"))
	})
}

// The Decided hook hears of every admission with what each quota is
// charged and keeps, and of every refusal with the quota that refused.
func TestLLMAPIDecided(t *testing.T) {
	tests := []struct {
		name     string
		api      func() *API
		admitted Decision // the first request's: 1,000 input tokens, max_tokens 1,000, 100 generated
		refusal  string   // the third request's
	}{
		{"openai", func() *API { return NewOpenAI(600, 4000) }, Decision{Input: 1000, MaxTokens: 1000, Output: 100,
			Charged: Charge{Requests: 1, Tokens: 2000}, Kept: Charge{Requests: 1, Tokens: 1100}}, QuotaTokens},
		{"azure", func() *API { return NewAzure(600, 4000) }, Decision{Input: 1000, MaxTokens: 1000, Output: 100,
			Charged: Charge{Requests: 1, Tokens: 2000}, Kept: Charge{Requests: 1, Tokens: 2000}}, QuotaTokens},
		{"anthropic-output", func() *API { return NewAnthropic(600, 60000, 2000) }, Decision{Input: 1000, MaxTokens: 1000, Output: 100,
			Charged: Charge{Requests: 1, Tokens: 1000, OutputTokens: 1000}, Kept: Charge{Requests: 1, Tokens: 1000, OutputTokens: 100}}, QuotaOutputTokens},
		{"anthropic-input", func() *API { return NewAnthropic(600, 2000, 60000) }, Decision{Input: 1000, MaxTokens: 1000, Output: 100,
			Charged: Charge{Requests: 1, Tokens: 1000, OutputTokens: 1000}, Kept: Charge{Requests: 1, Tokens: 1000, OutputTokens: 100}}, QuotaInputTokens},
		{"requests", func() *API { return NewOpenAI(2, 60000) }, Decision{Input: 1000, MaxTokens: 1000, Output: 100,
			Charged: Charge{Requests: 1, Tokens: 2000}, Kept: Charge{Requests: 1, Tokens: 1100}}, QuotaRequests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				api := tt.api()
				var mu sync.Mutex
				var got []Decision
				api.Decided = func(d Decision) {
					mu.Lock()
					defer mu.Unlock()
					assert.Equal(t, "/v1/chat/completions", d.Request.URL.Path)
					d.Request = nil
					got = append(got, d)
				}
				start := time.Now()
				var wg sync.WaitGroup
				for range 2 { // both admitted at once; the third finds a quota spent
					wg.Go(func() { llmCall(t, api, 4000, 1000, 100) })
				}
				synctest.Wait()
				assert.Equal(t, http.StatusTooManyRequests, llmCall(t, api, 4000, 1000, 100).Code)
				assert.Equal(t, http.StatusTooManyRequests, llmCall(t, api, 4, 1<<20, 1).Code, "larger than a whole limit")
				wg.Wait()
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, got, 4)
				want := tt.admitted
				want.At = start
				assert.Equal(t, want, got[0])
				assert.Equal(t, want, got[1])
				assert.Equal(t, Decision{At: start, Refused: tt.refusal, Input: 1000, MaxTokens: 1000, Output: 100}, got[2])
				assert.Equal(t, TooLarge, got[3].Refused)
				assert.Zero(t, got[3].Charged)
			})
		})
	}
}
