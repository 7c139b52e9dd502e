package politecost_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/llmfake"
	"github.com/politehttp/polite/politecost"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handlerNext is a next RoundTripper that answers in process with h: the
// handler runs to its end (its latency passes in the bubble's time), and
// its answer comes back whole.
type handlerNext struct{ h http.Handler }

func (n handlerNext) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	n.h.ServeHTTP(rec, req)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// call sends req through tr and reads its answer's body to the end, as a
// caller does, so that polite settles its cost.
func call(t *testing.T, tr http.RoundTripper, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return resp, body
}

// newPost returns a POST of body to url.
func newPost(t *testing.T, ctx context.Context, url, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	return req
}

// The usage an answer states gives back what its estimate took too much,
// at once: against a quota of 6,000 tokens a minute (stated with
// WithQuota, the server stating none), three requests estimated at 3,000
// tokens that used 1,100 each go without waiting; without the settlement
// the third waits 30 s for the quota to refill.
func TestOpenAISettlesEachAnswer(t *testing.T) {
	server := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":250,"completion_tokens":850,"total_tokens":1100}}`)
	})
	body := `{"model":"gpt-4.1","max_tokens":2750,"messages":[{"role":"user","content":"` + strings.Repeat("abcd", 250) + `"}]}`
	tests := []struct {
		name   string
		opts   []polite.Option
		waited time.Duration
	}{
		{name: "settled", opts: []polite.Option{politecost.OpenAI()}, waited: 0},
		{name: "not settled", opts: []polite.Option{politecost.OpenAI(), polite.WithUsage(nil)}, waited: 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var costWaits atomic.Int64
				opts := append(tt.opts, polite.WithQuota(polite.UnitTokens, 6000, time.Minute),
					polite.WithHooks(polite.Hooks{OnWait: func(e polite.Event) {
						if e.Wait == polite.WaitCost {
							costWaits.Add(1)
						}
					}}))
				tr := polite.New(handlerNext{server}, opts...)
				start := time.Now()
				for range 3 {
					resp, _ := call(t, tr, newPost(t, context.Background(), "https://api.openai.com/v1/chat/completions", body))
					assert.Equal(t, http.StatusOK, resp.StatusCode)
				}
				took := time.Since(start)
				assert.InDelta(t, tt.waited.Seconds(), took.Seconds(), 0.5)
				assert.Equal(t, int64(min(tt.waited, 1)), costWaits.Load(), "waits for the cost")
			})
		})
	}
}

// left returns what the key's quota in unit holds, as tr counts it.
func left(t *testing.T, tr *polite.Transport, key, unit string) float64 {
	t.Helper()
	for k := range tr.Keys() {
		if k.Key != key {
			continue
		}
		for _, c := range k.Costs {
			if c.Unit == unit {
				return c.Left
			}
		}
	}
	t.Fatalf("no quota in %s for %q", unit, key)
	return 0
}

// One request to the fake OpenAI API (6,000 tokens a minute: 100 a
// second), estimated at 3,000 tokens (250 of prompt, max_tokens 2,750),
// that generates 100 in 1.2 s: the server's headers say 3,000 are left
// once it is admitted, 120 come back in the 1.2 s, and the usage at the
// end of the answer gives back the 2,650 not used, JSON or stream; a
// stream that does not ask for its usage leaves the estimate standing.
func TestOpenAISettlesFromTheAnswer(t *testing.T) {
	tests := []struct {
		name                 string
		stream, includeUsage bool
		left                 float64
	}{
		{name: "JSON", left: 3000 + 120 + 2650},
		{name: "stream with its usage", stream: true, includeUsage: true, left: 3000 + 120 + 2650},
		{name: "stream without its usage", stream: true, left: 3000 + 120},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := polite.New(handlerNext{llmfake.NewOpenAI(60, 6000)}, politecost.OpenAI())
				d := llmfake.Draw{Prompt: 250, MaxTokens: 2750, Output: 100}
				resp, body := call(t, tr, newPost(t, context.Background(), "https://api.openai.com/v1/chat/completions", d.Body("gpt-4.1", tt.stream, tt.includeUsage)))
				require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
				assert.Equal(t, "3000", resp.Header.Get("x-ratelimit-remaining-tokens"))
				assert.InDelta(t, tt.left, left(t, tr, "api.openai.com|gpt-4.1", polite.UnitTokens), 1)
			})
		})
	}
}

// One request to the fake Anthropic API (6,000 input and 6,000 output
// tokens a minute), estimated at 250 input tokens and 2,750 output tokens
// (its max_tokens), that generates 100 in 1.2 s: the usage at the end of
// the answer gives back the 2,650 output tokens not used, JSON or stream.
func TestAnthropicSettlesFromTheAnswer(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tr := polite.New(handlerNext{llmfake.NewAnthropic(60, 6000, 6000)}, politecost.Anthropic())
				d := llmfake.Draw{Prompt: 250, MaxTokens: 2750, Output: 100}
				resp, body := call(t, tr, newPost(t, context.Background(), "https://api.anthropic.com/v1/messages", d.Body("claude-sonnet-4-5", stream, false)))
				require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
				// The server says 3,000 are left (3,250, rounded to the
				// thousand); 120 come back in the 1.2 s, and 2,650 with the
				// usage.
				assert.Equal(t, "3000", resp.Header.Get("anthropic-ratelimit-output-tokens-remaining"))
				assert.InDelta(t, 3000+120+2650, left(t, tr, "api.anthropic.com|claude-sonnet-4-5", polite.UnitOutputTokens), 1)
			})
		})
	}
}

// Each model is a key of its own, as OpenAI counts its quotas.
func TestOpenAIKeysByModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := polite.New(handlerNext{llmfake.NewOpenAI(500, 200000)}, politecost.OpenAI())
		for _, model := range []string{"gpt-4.1", "gpt-4.1-mini", "gpt-4.1"} {
			resp, _ := call(t, tr, newPost(t, context.Background(), "https://api.openai.com/v1/chat/completions",
				`{"model":"`+model+`","max_tokens":10,"output_tokens":5,"messages":[{"role":"user","content":"Hello"}]}`))
			assert.Equal(t, http.StatusOK, resp.StatusCode)
		}
		var keys []string
		for k := range tr.Keys() {
			keys = append(keys, k.Key)
		}
		assert.ElementsMatch(t, []string{"api.openai.com|gpt-4.1", "api.openai.com|gpt-4.1-mini"}, keys)
	})
}

// runLLM runs 64 closed-loop callers of tr, each sending the next request
// of the LLM bench's mix to url as body makes it, for 4 minutes of the
// bubble's time, and counts the answers after the first minute.
func runLLM(tr http.RoundTripper, url string, body func(llmfake.Draw) string) *llmfake.Load {
	return llmfake.RunLoad(tr, url, llmfake.NewMix(1, 1<<30, false), body, 64, time.Minute, 4*time.Minute)
}

// Against the fake OpenAI API (500 requests and 200,000 tokens a minute,
// OpenAI's headers, the unused max_tokens given back at the end of each
// answer), 64 closed-loop callers of the LLM bench's mix, 4 minutes of
// fake time, the first left out: with the OpenAI dialect polite uses
// nearly all of the token quota and is hardly ever refused, whether the
// answers are JSON or streams that end with their usage.
func TestOpenAIUsesTheTokenQuota(t *testing.T) {
	const rpm, tpm = 500, 200000
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := llmfake.NewOpenAI(rpm, tpm)
				billed := llmfake.Billed(fake, time.Now().Add(time.Minute), time.Now().Add(4*time.Minute))
				tr := polite.New(handlerNext{fake}, politecost.OpenAI())
				load := runLLM(tr, "https://api.openai.com/v1/chat/completions",
					func(d llmfake.Draw) string { return d.Body("gpt-test", stream, true) })
				in, out := billed()
				use := (in + out) / (tpm * 3)
				attempts, refusals := fake.Counts()
				refused := float64(refusals) / float64(attempts)
				t.Logf("%.3f of the token quota used, %d of %d attempts refused (%.2f%%), %d answered",
					use, refusals, attempts, 100*refused, load.Done)
				assert.GreaterOrEqual(t, use, 0.95, "share of the token quota used")
				assert.LessOrEqual(t, refused, 0.01, "share of attempts refused")
				assert.Zero(t, load.Failed, "calls failed: %v", load.Err)
			})
		})
	}
}

// Against the fake Anthropic API (input and output tokens a minute, the
// output settled to what was generated, remaining rounded to the
// thousand), the same callers, JSON and streams: polite keeps to both
// quotas, and uses the one that binds whole (here the input tokens: the
// mix asks 1,695 input tokens a request on average, and 400,000 a minute
// allow 236 requests, which generate 0.91 of the output quota), with next
// to no refusal (0 of 1,235 attempts in one run).
func TestAnthropicUsesTheTokenQuotas(t *testing.T) {
	const rpm, itpm, otpm = 500, 400000, 80000
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fake := llmfake.NewAnthropic(rpm, itpm, otpm)
				billed := llmfake.Billed(fake, time.Now().Add(time.Minute), time.Now().Add(4*time.Minute))
				tr := polite.New(handlerNext{fake}, politecost.Anthropic())
				load := runLLM(tr, "https://api.anthropic.com/v1/messages",
					func(d llmfake.Draw) string { return d.Body("claude-test", stream, false) })
				ins, outs := billed()
				attempts, refusals := fake.Counts()
				refused := float64(refusals) / float64(attempts)
				t.Logf("%.3f of the input quota used, %.3f of the output quota, %d of %d attempts refused (%.2f%%), %d answered",
					ins/(itpm*3), outs/(otpm*3), refusals, attempts, 100*refused, load.Done)
				assert.LessOrEqual(t, refused, 0.01, "share of attempts refused")
				assert.Zero(t, load.Failed, "calls failed: %v", load.Err)
				assert.GreaterOrEqual(t, max(ins/(itpm*3), outs/(otpm*3)), 0.95, "share of the quota that binds used")
			})
		})
	}
}

// Against the fake Azure OpenAI API, which states only what is left and
// settles nothing: given the deployment's tokens a minute, polite keeps
// to it from the first request, keyed by the deployment.
func TestAzureOpenAIKeepsToItsTPM(t *testing.T) {
	const rpm, tpm = 1000, 200000
	synctest.Test(t, func(t *testing.T) {
		fake := llmfake.NewAzure(rpm, tpm)
		tr := polite.New(handlerNext{fake}, politecost.AzureOpenAI(tpm))
		load := runLLM(tr, "https://contoso.openai.azure.com/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21",
			func(d llmfake.Draw) string { return d.Body("gpt-4o", false, false) })
		use := load.Estimated / (tpm * 3)
		attempts, refusals := fake.Counts()
		refused := float64(refusals) / float64(attempts)
		t.Logf("%.3f of the token quota admitted, %d of %d attempts refused (%.2f%%), %d answered",
			use, refusals, attempts, 100*refused, load.Done)
		assert.GreaterOrEqual(t, use, 0.9, "share of the token quota used")
		assert.LessOrEqual(t, refused, 0.01, "share of attempts refused")
		assert.Zero(t, load.Failed, "calls failed: %v", load.Err)
		var keys []string
		for k := range tr.Keys() {
			keys = append(keys, k.Key)
		}
		assert.Equal(t, []string{"contoso.openai.azure.com|gpt-4o-prod"}, keys)
	})
}

// githubSpentOnce is GitHub's GraphQL API whose primary limit is spent
// at the first request, for 30 s: it answers it with a 200 and a
// RATE_LIMITED error, and the others with data.
func githubSpentOnce(attempts *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("x-ratelimit-limit", "5000")
		h.Set("x-ratelimit-resource", "graphql")
		if attempts.Add(1) == 1 {
			h.Set("x-ratelimit-remaining", "0")
			h.Set("x-ratelimit-used", "5000")
			// The reset in seconds from now: the bubble's clock starts in
			// 2000, which an epoch would read as long past.
			h.Set("x-ratelimit-reset", "30")
			fmt.Fprint(w, `{"errors":[{"type":"RATE_LIMITED","code":"graphql_rate_limit","message":"API rate limit already exceeded for user ID 583231."}]}`)
			return
		}
		h.Set("x-ratelimit-remaining", "4999")
		h.Set("x-ratelimit-used", "1")
		h.Set("x-ratelimit-reset", "3600")
		fmt.Fprint(w, `{"data":{"viewer":{"login":"octocat"},"rateLimit":{"cost":1}}}`)
	})
}

// GitHub answers a spent primary limit with a 200 and a RATE_LIMITED
// error: polite takes it for a throttle, holds the key until the reset
// the headers state, and retries the query then, though it is a POST (the
// server refused it unprocessed).
func TestGitHubRateLimitedWaitsForTheReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts atomic.Int64
		var throttles atomic.Int64
		tr := polite.New(handlerNext{githubSpentOnce(&attempts)}, politecost.GitHubGraphQL(),
			polite.WithHooks(polite.Hooks{OnThrottled: func(polite.Event) { throttles.Add(1) }}))
		start := time.Now()
		resp, body := call(t, tr, newPost(t, context.Background(), "https://api.github.com/graphql",
			`{"query":"query { viewer { login } rateLimit { cost } }"}`))
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, string(body), "octocat")
		assert.Equal(t, int64(2), attempts.Load())
		assert.Equal(t, int64(1), throttles.Load())
		assert.InDelta(t, 30, time.Since(start).Seconds(), 1.5)
	})
}

// fakeShopify is Shopify's GraphQL Admin API as its documentation tells
// it: a leaky bucket of points per store, a query admitted if the bucket
// holds its requested cost, answered after latency, the difference with
// its actual cost given back, and the bucket's state in every answer; a
// 200 with THROTTLED if the bucket does not hold the requested cost.
type fakeShopify struct {
	max, rate         float64 // the bucket: maximumAvailable, restoreRate
	requested, actual float64 // every query's costs
	latency           time.Duration

	mu                 sync.Mutex
	level              float64
	at                 time.Time
	attempts, throttle int
}

func (f *fakeShopify) refill(now time.Time) {
	if f.at.IsZero() {
		f.level, f.at = f.max, now
	}
	f.level = min(f.max, f.level+f.rate*now.Sub(f.at).Seconds())
	f.at = now
}

func (f *fakeShopify) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	f.mu.Lock()
	f.attempts++
	f.refill(time.Now())
	if f.level < f.requested {
		f.throttle++
		fmt.Fprintf(w, `{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED","documentation":"https://shopify.dev/api/usage/rate-limits"}}],"extensions":{"cost":{"requestedQueryCost":%g,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":%g,"currentlyAvailable":%g,"restoreRate":%g}}}}`,
			f.requested, f.max, f.level, f.rate)
		f.mu.Unlock()
		return
	}
	f.level -= f.requested
	f.mu.Unlock()
	// Answers at one fake instant come to the client in either order: one
	// that states the level after both refunds may be read before the
	// other's refund is given back (it was counted twice, and throttled
	// in about 1 run of 60 under -race, before the cost ledger took it for
	// uncertain: see polite's costState.bodyMark).
	time.Sleep(f.latency)
	f.mu.Lock()
	f.refill(time.Now())
	f.level += f.requested - f.actual
	level := f.level
	f.mu.Unlock()
	fmt.Fprintf(w, `{"data":{"products":{"edges":[{"node":{"id":"gid://shopify/Product/1","title":"Snowboard"}}]}},"extensions":{"cost":{"requestedQueryCost":%g,"actualQueryCost":%g,"throttleStatus":{"maximumAvailable":%g,"currentlyAvailable":%g,"restoreRate":%g}}}}`,
		f.requested, f.actual, f.max, level, f.rate)
}

// Against the fake Shopify (a bucket of 200 points refilled at 20 a
// second; each query requests 50 and costs 10), 16 closed-loop callers:
// the first wave, sent before anything is known, is partly throttled (and
// retried when Shopify's bucket holds the query's cost); from then on
// polite charges the cost Shopify stated for the query, keeps the bucket
// as Shopify states it, and is no longer throttled.
func TestShopifyLearnsTheQueryCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shop := &fakeShopify{max: 200, rate: 20, requested: 50, actual: 10, latency: 200 * time.Millisecond}
		tr := polite.New(handlerNext{shop}, politecost.ShopifyGraphQL())
		const query = `{"query":"query { products(first: 40) { edges { node { id title } } } }"}`
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		send := func(ctx context.Context) *http.Request {
			return newPost(t, ctx, "https://shop.myshopify.com/admin/api/2025-01/graphql.json", query)
		}
		var warm sync.WaitGroup
		for range 16 {
			warm.Go(func() {
				_, body := call(t, tr, send(ctx))
				assert.Contains(t, string(body), "Snowboard")
			})
		}
		warm.Wait()
		shop.mu.Lock()
		warmThrottles := shop.throttle
		shop.mu.Unlock()
		t.Logf("first wave: %d throttled", warmThrottles)

		var wg sync.WaitGroup
		var calls atomic.Int64
		for range 16 {
			wg.Go(func() {
				for ctx.Err() == nil {
					_, body := call(t, tr, send(context.Background()))
					assert.Contains(t, string(body), "Snowboard")
					calls.Add(1)
				}
			})
		}
		wg.Wait()
		shop.mu.Lock()
		defer shop.mu.Unlock()
		later := shop.throttle - warmThrottles
		// The bucket refills 20 points a second and each query costs 10:
		// 2 a second at most, as long as the requested 50 are there.
		t.Logf("then: %d calls in 2 minutes (%.2f a second), %d throttled", calls.Load(), float64(calls.Load())/120, later)
		assert.LessOrEqual(t, float64(later), 0.01*float64(calls.Load()), "throttled after the first wave")
		assert.GreaterOrEqual(t, float64(calls.Load())/120, 0.9*2, "share of the bucket's refill used")
	})
}

// A cost the caller states wins over the estimate: with the bucket
// stated up front (WithQuota) and each query's cost stated on its
// context, not even the first wave is throttled.
func TestShopifyStatedCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shop := &fakeShopify{max: 200, rate: 20, requested: 50, actual: 10, latency: 200 * time.Millisecond}
		tr := polite.New(handlerNext{shop}, politecost.ShopifyGraphQL(),
			polite.WithQuota(polite.UnitPoints, 200, 10*time.Second))
		ctx := polite.ContextWithCost(context.Background(), polite.Cost{Points: 50})
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				resp, body := call(t, tr, newPost(t, ctx, "https://shop.myshopify.com/admin/api/2025-01/graphql.json", `{"query":"{ products(first: 40) { nodes { id } } }"}`))
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				assert.True(t, bytes.Contains(body, []byte("Snowboard")))
			})
		}
		wg.Wait()
		assert.Zero(t, shop.throttle)
		assert.Equal(t, 16, shop.attempts)
	})
}
