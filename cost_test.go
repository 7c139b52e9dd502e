package polite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/llmfake"
)

// handlerNext is a next RoundTripper that answers in process with h: the
// handler runs to its end (its latency passes in the bubble's time), and
// its answer comes back whole, in a tracked body.
type handlerNext struct {
	h http.Handler
}

func (n *handlerNext) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	n.h.ServeHTTP(rec, req)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	var header []string
	for name, values := range rec.Header() {
		for _, v := range values {
			header = append(header, name, v)
		}
	}
	return respond(req, rec.Code, newBody(rec.Body.String()), header...), nil
}

// chatCost estimates a chat request to the fake LLM API as it charges it:
// ceil(characters/4) of the messages and max_tokens, scoped by model.
func chatCost(_ *http.Request, body []byte) (polite.Cost, string, error) {
	var r struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
		MaxTokens int `json:"max_tokens"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return polite.Cost{}, "", err
	}
	chars := 0
	for _, m := range r.Messages {
		chars += len(m.Content)
	}
	return polite.Cost{Tokens: float64((chars+3)/4 + r.MaxTokens)}, r.Model, nil
}

// chatUsage reads OpenAI's usage from the end of a JSON answer or a
// stream of events.
func chatUsage(_ *http.Response, tail []byte) (polite.Usage, bool) {
	i := bytes.LastIndex(tail, []byte(`"usage":`))
	if i < 0 {
		return polite.Usage{}, false
	}
	var u struct {
		Prompt     float64 `json:"prompt_tokens"`
		Completion float64 `json:"completion_tokens"`
	}
	if err := json.NewDecoder(bytes.NewReader(tail[i+len(`"usage":`):])).Decode(&u); err != nil {
		return polite.Usage{}, false
	}
	return polite.Usage{Cost: polite.Cost{Tokens: u.Prompt + u.Completion}}, true
}

// Against the fake OpenAI API (500 requests and 200,000 tokens a minute),
// 64 closed-loop callers of the bench's mix, 6 minutes of fake time, the
// first left out: polite learns the token quota from the headers, waits
// for it, and settles each answer from its usage, so that it uses nearly
// all of the quota and is hardly ever refused.
func TestCostUsesTheTokenQuota(t *testing.T) {
	const rpm, tpm = 500, 200000
	synctest.Test(t, func(t *testing.T) {
		fake := llmfake.NewOpenAI(rpm, tpm)
		from, to := time.Now().Add(time.Minute), time.Now().Add(6*time.Minute)
		billed := llmfake.Billed(fake, from, to)
		tr := polite.New(&handlerNext{h: fake}, polite.WithCost(chatCost), polite.WithUsage(chatUsage))
		run := llmfake.RunLoad(tr, "http://llm.test/v1/chat/completions", llmfake.NewMix(1, tpm, false),
			func(d llmfake.Draw) string { return d.Body("gpt-test", false, false) }, 64, time.Minute, 6*time.Minute)
		in, out := billed()
		use := (in + out) / (tpm * to.Sub(from).Minutes())
		attempts, refusals := fake.Counts()
		refused := float64(refusals) / float64(attempts)
		t.Logf("%.3f of the token quota, %d of %d attempts refused (%.2f%%), %d answered, big %d of %d",
			use, refusals, attempts, 100*refused, run.Done, run.BigDone, run.BigSent)
		assert.GreaterOrEqual(t, use, 0.95, "share of the token quota used")
		assert.LessOrEqual(t, refused, 0.01, "share of attempts refused")
		assert.Zero(t, run.Failed, "calls failed: %v", run.Err)
	})
}

// tokensQuota returns the header pairs of an OpenAI-style answer: limit
// tokens a minute, remaining left, full again in full.
func tokensQuota(limit, remaining int, full time.Duration) []string {
	return []string{"x-ratelimit-limit-tokens", strconv.Itoa(limit), "x-ratelimit-remaining-tokens", strconv.Itoa(remaining),
		"x-ratelimit-reset-tokens", full.String()}
}

// costRequest returns a request to url stating its cost in tokens.
func costRequest(t *testing.T, ctx context.Context, url string, tokens float64) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(polite.ContextWithCost(ctx, polite.Cost{Tokens: tokens}), http.MethodGet, url, nil)
	require.NoError(t, err)
	return req
}

// A request whose cost is larger than the limit the server states fails at
// once with a *CostError, unsent: no wait would let it through.
func TestCostLargerThanTheLimitFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200, tokensQuota(1000, 900, 6*time.Second)...))
		var refused []error
		tr := polite.New(next, polite.WithHooks(polite.Hooks{OnRefused: func(e polite.Event) { refused = append(refused, e.Err) }}))
		resp, err := roundTrip(t, tr, costRequest(t, context.Background(), "http://api.test/", 100))
		require.NoError(t, err)
		readBody(t, resp)

		_, err = tr.RoundTrip(costRequest(t, context.Background(), "http://api.test/", 1001))
		var ce *polite.CostError
		require.ErrorAs(t, err, &ce)
		assert.ErrorIs(t, err, polite.ErrTooLarge)
		assert.Equal(t, polite.CostError{Key: "api.test", Unit: "tokens", Cost: 1001, Limit: 1000}, *ce)
		assert.Equal(t, 1, next.calls(), "the request too large was not sent")
		assert.Contains(t, err.Error(), "a request of 1001 tokens is larger than the server's limit of 1000")
		assert.Equal(t, []error{err}, refused, "OnRefused heard of it")
	})
}

// Requests take their costs first come first served: a large request that
// must wait for the bucket to refill is not passed over by the small ones
// that come after it, though they would fit.
func TestCostFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var order []string
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			order = append(order, req.URL.Path)
			mu.Unlock()
			return respond(req, 200, http.NoBody), nil
		})
		// 600 tokens a minute: 10 a second, the bucket full.
		tr := polite.New(next, polite.WithQuota(polite.UnitTokens, 600, time.Minute))
		get := func(path string, tokens float64) {
			resp, err := tr.RoundTrip(costRequest(t, context.Background(), "http://api.test"+path, tokens))
			require.NoError(t, err)
			readBody(t, resp)
		}
		get("/first", 550) // 50 left
		var wg sync.WaitGroup
		wg.Go(func() { get("/large", 500) }) // waits 45 s for 450 more
		synctest.Wait()
		start := time.Now()
		for i := range 5 {
			wg.Go(func() { get("/small"+strconv.Itoa(i), 10) })
			synctest.Wait()
		}
		wg.Wait()
		assert.Equal(t, "/large", order[1], "the large request went first: %v", order)
		assert.Len(t, order, 7)
		assert.InDelta(t, 45, time.Since(start).Seconds()-5, 1, "the small ones went once the large one had its cost")
	})
}

// A throttled call's retry keeps its place in the key's queue: it goes
// before the calls that came after it, not behind them, which could hold it
// past its deadline when many wait.
func TestCostRetryKeepsItsPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var order []string
		throttled := false
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, req.URL.Path)
			if req.URL.Path == "/first" && !throttled {
				throttled = true
				return respond(req, 429, http.NoBody, "Retry-After", "1"), nil
			}
			return respond(req, 200, http.NoBody), nil
		})
		// 600 tokens a minute: 10 a second.
		tr := polite.New(next, polite.WithQuota(polite.UnitTokens, 600, time.Minute), polite.WithBackoff(0, 0))
		get := func(path string, tokens float64) {
			resp, err := tr.RoundTrip(costRequest(t, context.Background(), "http://api.test"+path, tokens))
			require.NoError(t, err)
			readBody(t, resp)
		}
		get("/drain", 600) // the bucket empty
		var wg sync.WaitGroup
		wg.Go(func() { get("/first", 100) }) // sent at 10 s, throttled, retried after 1 s
		synctest.Wait()
		for _, p := range []string{"/a", "/b"} {
			wg.Go(func() { get(p, 100) })
			synctest.Wait()
		}
		wg.Wait()
		// /a takes what the throttled attempt gave back while /first waits
		// out the server's second; then /first, before /b.
		assert.Equal(t, []string{"/drain", "/first", "/a", "/first", "/b"}, order)
	})
}

// A wait for the cost that would pass the deadline, at the quota's rate,
// fails at once with a *ThrottledError; a wait that fits is waited.
func TestCostWaitPastTheDeadlineIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		tr := polite.New(next, polite.WithQuota(polite.UnitTokens, 600, time.Minute)) // 10 a second
		resp, err := roundTrip(t, tr, costRequest(t, context.Background(), "http://api.test/", 600))
		require.NoError(t, err)
		readBody(t, resp)

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		_, err = tr.RoundTrip(costRequest(t, ctx, "http://api.test/", 400)) // 40 s
		var te *polite.ThrottledError
		require.ErrorAs(t, err, &te)
		assert.InDelta(t, 40, te.Wait.Seconds(), 0.01)
		assert.False(t, te.Server)
		assert.Zero(t, time.Since(start), "refused at once")

		resp, err = roundTrip(t, tr, costRequest(t, ctx, "http://api.test/", 200)) // 20 s
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, 20*time.Second, time.Since(start))
		assert.Equal(t, 2, next.calls())
	})
}

// A throttled attempt gives its cost back, and the bucket takes what the
// server says is left; the retry takes its cost again, once the bucket
// holds it and the room a key leaves.
func TestCostThrottleGivesTheCostBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The server's bucket refills 60,000 a minute (1,000 a second):
		// 100 left, the 2,000 asked for come in 1.9 s (its Retry-After).
		next := newStub(
			status(429, append(tokensQuota(60000, 100, 59900*time.Millisecond), "retry-after-ms", "1900")...),
			status(200, tokensQuota(60000, 100, 59900*time.Millisecond)...))
		tr := polite.New(next, polite.WithBackoff(0, 0))
		start := time.Now()
		resp, err := roundTrip(t, tr, costRequest(t, context.Background(), "http://api.test/", 2000))
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, 2, next.calls())
		// The retry waits for its cost and the quarter of it that a key
		// leaves in a bucket the server counts, for clients that share it
		// unseen (see TestCostLeavesRoomForClientsUnseen): 2.4 s.
		assert.Equal(t, 2400*time.Millisecond, time.Since(start))

		// The bucket holds what the server said was left, 100, refilled at
		// 1,000 a second: 2,000 more and the room take 2.4 s again. (The key's controller, which heard the throttle,
		// paces the requests too, within a millisecond of that.)
		start = time.Now()
		resp, err = roundTrip(t, tr, costRequest(t, context.Background(), "http://api.test/", 2000))
		require.NoError(t, err)
		readBody(t, resp)
		assert.InDelta(t, 2400*time.Millisecond, time.Since(start), float64(2*time.Millisecond))
	})
}

// The cost stated on the context wins over the Estimator's, and the
// Estimator's scope gives each model a bucket of its own.
func TestCostScopeAndContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(200))
		var keys []string
		est := func(req *http.Request, body []byte) (polite.Cost, string, error) {
			return polite.Cost{Tokens: 500}, req.URL.Query().Get("model"), nil
		}
		tr := polite.New(next, polite.WithCost(est), polite.WithQuota(polite.UnitTokens, 600, time.Minute),
			polite.WithHooks(polite.Hooks{OnAttempt: func(e polite.Event) { keys = append(keys, e.Key) }}))
		start := time.Now()
		for _, model := range []string{"a", "b"} {
			resp, err := roundTrip(t, tr, costRequest(t, context.Background(), "http://api.test/?model="+model, 0))
			require.NoError(t, err)
			readBody(t, resp)
		}
		assert.Zero(t, time.Since(start), "each model's bucket held 500")
		assert.Equal(t, []string{"api.test|a", "api.test|b"}, keys)

		// Stated on the context: 50, not the Estimator's 500.
		resp, err := roundTrip(t, tr, costRequest(t, context.Background(), "http://api.test/?model=a", 50))
		require.NoError(t, err)
		readBody(t, resp)
		assert.Zero(t, time.Since(start))
	})
}

// An Estimator's error fails the call, unsent, and says whose it is.
func TestCostEstimatorError(t *testing.T) {
	next := newStub(status(200))
	bad := errors.New("no model")
	tr := polite.New(next, polite.WithCost(func(*http.Request, []byte) (polite.Cost, string, error) { return polite.Cost{}, "", bad }))
	req := replayableRequest(t, context.Background(), http.MethodPost, "http://api.test/", `{}`)
	_, err := tr.RoundTrip(req)
	require.ErrorIs(t, err, bad)
	assert.Contains(t, err.Error(), `polite: estimating the cost of a request to "api.test"`)
	assert.Zero(t, next.calls())
}

// The Estimator reads the body through GetBody, and the request still
// sends its own body whole.
func TestCostEstimatorReadsTheBody(t *testing.T) {
	var seen, sent string
	next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		b, err := io.ReadAll(req.Body)
		require.NoError(t, err)
		sent = string(b)
		_ = req.Body.Close()
		return respond(req, 200, http.NoBody), nil
	})
	tr := polite.New(next, polite.WithCost(func(_ *http.Request, body []byte) (polite.Cost, string, error) {
		seen = string(body)
		return polite.Cost{Tokens: float64(len(body))}, "", nil
	}))
	req := replayableRequest(t, context.Background(), http.MethodPost, "http://api.test/", `{"prompt":"hello"}`)
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	readBody(t, resp)
	assert.Equal(t, `{"prompt":"hello"}`, seen)
	assert.Equal(t, `{"prompt":"hello"}`, sent)
}

// The usage read from the end of the body settles the cost when the caller
// has read it: the tokens not used come back at once. Settle does the same
// for a caller that holds the usage itself; a response is settled once.
func TestCostSettles(t *testing.T) {
	for _, how := range []string{"usage", "Settle"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					return respond(req, 200, newBody(strings.Repeat("x", 100<<10)+`{"usage":{"prompt_tokens":100,"completion_tokens":100}}`)), nil
				})
				opts := []polite.Option{polite.WithQuota(polite.UnitTokens, 600, time.Minute)}
				if how == "usage" {
					opts = append(opts, polite.WithUsage(chatUsage))
				}
				tr := polite.New(next, opts...)
				resp, err := roundTrip(t, tr, costRequest(t, context.Background(), "http://api.test/", 600))
				require.NoError(t, err)
				_, err = io.ReadAll(resp.Body)
				require.NoError(t, err)
				require.NoError(t, resp.Body.Close())
				if how == "Settle" {
					assert.True(t, polite.Settle(resp, polite.Cost{Tokens: 200}))
				}
				assert.False(t, polite.Settle(resp, polite.Cost{Tokens: 0}), "settled once")

				// 400 came back: a request of 400 goes at once.
				start := time.Now()
				resp, err = roundTrip(t, tr, costRequest(t, context.Background(), "http://api.test/", 400))
				require.NoError(t, err)
				readBody(t, resp)
				assert.Zero(t, time.Since(start))
			})
		})
	}
}

// A response polite did not pace by cost cannot be settled.
func TestSettleNeedsACost(t *testing.T) {
	tr := polite.New(newStub(status(200)))
	resp := fetch(t, tr, "http://api.test/")
	assert.False(t, polite.Settle(resp, polite.Cost{Tokens: 1}))
	assert.False(t, polite.Settle(nil, polite.Cost{Tokens: 1}))
}

// The usage of a stream of server-sent events is read at its end, from its
// last bytes, once; a body closed before its end is read from what came.
func TestCostUsageOfAStream(t *testing.T) {
	var tails []string
	read := func(_ *http.Response, tail []byte) (polite.Usage, bool) {
		tails = append(tails, string(tail))
		return chatUsage(nil, tail)
	}
	stream := strings.Repeat("data: {\"choices\":[{\"delta\":{\"content\":\"abcd\"}}]}\n\n", 3000) +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":9}}\n\ndata: [DONE]\n\n"
	next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return respond(req, 200, newBody(stream), "Content-Type", "text/event-stream"), nil
	})
	tr := polite.New(next, polite.WithUsage(read))
	resp, err := tr.RoundTrip(costRequest(t, context.Background(), "http://api.test/", 100))
	require.NoError(t, err)
	buf := make([]byte, 777) // reads of an odd size
	for {
		if _, err := resp.Body.Read(buf); err != nil {
			require.ErrorIs(t, err, io.EOF)
			break
		}
	}
	require.NoError(t, resp.Body.Close())
	require.Len(t, tails, 1)
	assert.Len(t, tails[0], polite.MaxUsageTail)
	assert.True(t, strings.HasSuffix(stream, tails[0]))
	u, ok := chatUsage(nil, []byte(tails[0]))
	require.True(t, ok)
	assert.Equal(t, 16.0, u.Cost.Tokens)
}

// A throttle that states nothing of the quota gives the cost back all the
// same: the retry goes when the server said, without waiting for the
// bucket to hold its cost again.
func TestCostThrottleWithoutQuotaGivesTheCostBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(429, "retry-after-ms", "100"), status(200))
		tr := polite.New(next, polite.WithBackoff(0, 0), polite.WithQuota(polite.UnitTokens, 600, time.Minute))
		start := time.Now()
		resp, err := roundTrip(t, tr, costRequest(t, context.Background(), "http://api.test/", 500))
		require.NoError(t, err)
		readBody(t, resp)
		assert.Equal(t, 100*time.Millisecond, time.Since(start))
		assert.Equal(t, 2, next.calls())
	})
}

// costStatus returns the status of key's quota in unit.
func costStatus(t *testing.T, tr *polite.Transport, key, unit string) polite.CostStatus {
	t.Helper()
	for s := range tr.Keys() {
		if s.Key != key {
			continue
		}
		for _, c := range s.Costs {
			if c.Unit == unit {
				return c
			}
		}
	}
	t.Fatalf("no %s quota for %s", unit, key)
	return polite.CostStatus{}
}

// The window a bucket that refills takes to be full again is read from its
// limit, what it lacks and the time to its reset: near a common window
// (here a minute) it is taken to be it. A reading that came back late
// says too little of a reset stated as an instant (Anthropic's), and is
// not learnt from.
func TestCostLearnsTheWindow(t *testing.T) {
	tests := []struct {
		name   string
		header []string
		late   time.Duration
		want   time.Duration
	}{
		{"a minute", tokensQuota(60000, 30000, 31*time.Second), 0, time.Minute},
		{"100 s", tokensQuota(60000, 45000, 25*time.Second), 0, 100 * time.Second},
		{"10 s, as an instant", []string{"anthropic-ratelimit-output-tokens-limit", "10000",
			"anthropic-ratelimit-output-tokens-remaining", "5000", "anthropic-ratelimit-output-tokens-reset", "2000-01-01T00:00:05Z"}, 0, 10 * time.Second},
		{"10 s, as an instant, read late", []string{"anthropic-ratelimit-output-tokens-limit", "10000",
			"anthropic-ratelimit-output-tokens-remaining", "5000", "anthropic-ratelimit-output-tokens-reset", "2000-01-01T00:00:06Z"}, time.Second, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
					time.Sleep(tt.late)
					return respond(req, 200, http.NoBody, tt.header...), nil
				})
				tr := polite.New(next, polite.WithCost(func(*http.Request, []byte) (polite.Cost, string, error) {
					return polite.Cost{Tokens: 1, OutputTokens: 1}, "", nil
				}))
				readBody(t, fetch(t, tr, "http://api.test/"))
				unit := polite.UnitTokens
				if strings.HasPrefix(tt.header[0], "anthropic") {
					unit = polite.UnitOutputTokens
				}
				assert.Equal(t, tt.want, costStatus(t, tr, "api.test", unit).Window)
			})
		})
	}
}

// A key whose server has not said its quotas yet sends one request whose
// cost counts in them, and holds the others until its answer: none larger
// than the server's limit is sent, nor a crowd of them at once.
func TestCostFirstContact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var sent []string
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			mu.Lock()
			sent = append(sent, req.URL.Path)
			mu.Unlock()
			time.Sleep(100 * time.Millisecond)
			return respond(req, 200, http.NoBody, tokensQuota(1000, 900, 6*time.Second)...), nil
		})
		tr := polite.New(next)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		get := func(path string, tokens float64) {
			resp, err := tr.RoundTrip(costRequest(t, context.Background(), "http://api.test"+path, tokens))
			if err != nil {
				errs <- err
				return
			}
			readBody(t, resp)
		}
		wg.Go(func() { get("/first", 100) })
		synctest.Wait()
		wg.Go(func() { get("/large", 5000) })
		for i := range 4 {
			wg.Go(func() { get("/small"+strconv.Itoa(i), 100) })
		}
		synctest.Wait()
		mu.Lock()
		assert.Equal(t, []string{"/first"}, sent, "the others wait for the first answer")
		mu.Unlock()
		wg.Wait()
		close(errs)
		var ce *polite.CostError
		for err := range errs {
			require.ErrorAs(t, err, &ce)
		}
		assert.NotNil(t, ce, "the large one failed")
		assert.Len(t, sent, 5)
		assert.NotContains(t, sent, "/large")
	})
}

// A response whose most constraining quota is one in tokens, spent, holds
// the key's requests until one token is back, but its figures are the
// tokens', not the requests': the key's limit stays the one the quota in
// requests stated (500 a minute), however many tokens the server allows.
func TestASpentQuotaInTokensLeavesTheRequestQuotaItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		requests := []string{"x-ratelimit-limit-requests", "500", "x-ratelimit-remaining-requests", "490",
			"x-ratelimit-reset-requests", "1.2s"}
		next := newStub(
			status(http.StatusOK, append(requests, tokensQuota(100, 90, 3*time.Second)...)...),
			status(http.StatusOK, append(requests, tokensQuota(100, 0, 30*time.Second)...)...),
			status(http.StatusOK, append(requests, tokensQuota(100, 50, 15*time.Second)...)...),
			status(http.StatusOK, append(requests, tokensQuota(100, 40, 18*time.Second)...)...),
		)
		tr := polite.New(next, polite.WithAdaptive(polite.AdaptiveOff))
		limit := func() float64 {
			for k := range tr.Keys() {
				return k.Limit
			}
			return 0
		}
		for i := range 4 {
			resp := fetch(t, tr, "http://llm.test/v1/chat/completions")
			require.NoError(t, resp.Body.Close())
			assert.InDelta(t, 500.0/60, limit(), 1e-9, "after response %d: the requests' limit, a second", i+1)
		}
		gaps := next.gaps()
		assert.Equal(t, 30*time.Second/100, gaps[1], "the tokens spent: the next request waits for one token, 30 s for 100")
		assert.InDelta(t, 60/(500*0.98), gaps[2].Seconds(), 1e-6, "then paced at the requests' rate, less the 2% margin")
	})
}

// A quota configured with WithQuota holds a key's calls from the first,
// on a key that has learnt nothing of its own (no controller, no answer
// stating anything): 30 calls of 1,000 tokens under 10,000 a second take
// 2 s, the bucket's 10,000 at once and the rest as it refills. They all
// went at once.
func TestAConfiguredQuotaHoldsFromTheFirstCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := polite.New(newStub(status(200)), polite.WithQuota(polite.UnitTokens, 10000, time.Second),
			polite.WithAdaptive(polite.AdaptiveOff))
		start := time.Now()
		for range 30 {
			resp, err := roundTrip(t, tr, costRequest(t, t.Context(), "http://api.test/", 1000))
			require.NoError(t, err)
			readBody(t, resp)
		}
		assert.Equal(t, 2*time.Second, time.Since(start))
	})
}
