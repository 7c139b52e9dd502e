// Package llmfake is a fake LLM API with the rate limits and headers of
// OpenAI's, Anthropic's and Azure OpenAI's, and the request mix of the
// LLM bench, for the tests and the bench of polite's cost pacing.
package llmfake

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// API is a fake LLM API with OpenAI's rate limits: requests and tokens
// per minute, each a bucket that holds a minute's quota and refills
// continuously. It admits a request when both buckets hold its cost (one
// request; ceil(characters/4) of the input plus max_tokens), charging the
// estimate; it answers after a latency that grows with the output, and
// then settles the tokens to the actual count, giving back the unused
// max_tokens. Its headers are OpenAI's, taken at admission:
// x-ratelimit-{limit,remaining,reset}-{requests,tokens}, the reset being
// the time until the bucket is full again, as a Go duration rounded to the
// millisecond. A refusal is a 429 with Retry-After (whole seconds, rounded
// up), retry-after-ms, and OpenAI's body: "Limit L, Used U, Requested R.
// Please try again in 1.234s." A request larger than the token limit is
// refused as "Request too large", whatever the buckets hold.
//
// A request is a JSON body {"model", "messages": [{"content"}],
// "max_tokens", "output_tokens", "stream", "stream_options":
// {"include_usage"}}: output_tokens is how many tokens the fake generates
// (at most max_tokens), as the bench's callers decide; a stream answers as
// server-sent events (see stream).
//
// Its dialect may be Anthropic's instead (see NewAnthropic), or Azure
// OpenAI's (see NewAzure). Its "minute" may be shorter (see WithPeriod),
// for a run that scales time down.
//
// An API is safe for concurrent use; set its fields before it serves.
type API struct {
	dialect  string        // OpenAI, Anthropic or Azure
	rpm, tpm float64       // limits per period (Anthropic's tpm: input tokens)
	otpm     float64       // Anthropic's output tokens per period
	period   time.Duration // the time a bucket takes to refill its limit: a minute unless WithPeriod
	// Latency is the time to answer a request that generates out tokens.
	Latency func(out int) time.Duration
	// Admitted, if set, is called for each request admitted, at its
	// admission, with its input tokens and the output tokens it will
	// generate: what it will be billed. It must not call the API.
	Admitted func(at time.Time, input, output int)
	// Decided, if set, is called for every request the API admits or
	// refuses, at that moment, with what it decided (see Decision). It
	// must not call the API.
	Decided func(Decision)

	mu               sync.Mutex
	reqs, toks, outs Bucket // outs: Anthropic's output tokens
	attempts         int64  // requests decided on, under mu
	refused          int64  // of those, refused, under mu
}

// Counts returns the requests the API has decided on, and those of them
// it refused.
func (a *API) Counts() (attempts, refused int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.attempts, a.refused
}

// A Decision is what the API decided about one request, as its Decided
// hook is told.
type Decision struct {
	At      time.Time     // when the API admitted or refused the request
	Request *http.Request // the request; its body has been read
	// Refused is the quota that refused the request (QuotaRequests,
	// QuotaTokens, QuotaInputTokens, QuotaOutputTokens or TooLarge), ""
	// if it was admitted.
	Refused string
	// Input is the request's input tokens (ceil(characters/4)), MaxTokens
	// its max_tokens, Output the tokens it generates (at most MaxTokens).
	Input, MaxTokens, Output int
	// Charged is what the admission took from each quota; Kept is what
	// each quota keeps once the answer is settled (the unused max_tokens
	// given back; Azure gives nothing back). Both are zero for a refusal.
	Charged, Kept Charge
}

// A Charge is an amount of each of the API's quotas.
type Charge struct {
	Requests int
	// Tokens is OpenAI's and Azure's tokens, Anthropic's input tokens.
	Tokens int
	// OutputTokens is Anthropic's output tokens; 0 in other dialects.
	OutputTokens int
}

// The quotas that may refuse a request, as Decision.Refused names them.
const (
	QuotaRequests     = "requests"
	QuotaTokens       = "tokens"        // OpenAI's and Azure's tokens
	QuotaInputTokens  = "input-tokens"  // Anthropic's input tokens
	QuotaOutputTokens = "output-tokens" // Anthropic's output tokens
	TooLarge          = "too-large"     // larger than a whole limit: no wait would admit it
)

// An Option configures an API.
type Option func(*API)

// WithPeriod makes the API's buckets refill their limits every period
// instead of every minute, and scales its default latency by period/minute:
// a run of period is a run of a minute with time scaled down. The limits
// stay as given (the headers still state them, and the messages still say
// "per min"), the resets shrink with the period; Retry-After stays in whole
// seconds, rounded up, as the real APIs send it, so it is coarser in scaled
// time. A period <= 0 is ignored.
func WithPeriod(period time.Duration) Option {
	return func(a *API) {
		if period > 0 {
			a.period = period
		}
	}
}

// The dialects of the fake.
const (
	OpenAI    = "openai"
	Anthropic = "anthropic"
	Azure     = "azure"
)

// NewOpenAI returns a fake LLM API with OpenAI's dialect, limited to rpm
// requests and tpm tokens a minute, answering after 200ms and 10ms an
// output token.
func NewOpenAI(rpm, tpm float64, opts ...Option) *API {
	return newAPI(OpenAI, rpm, tpm, 0, opts)
}

// newAPI returns a fake of dialect with its limits, its buckets full.
func newAPI(dialect string, rpm, tpm, otpm float64, opts []Option) *API {
	a := &API{dialect: dialect, rpm: rpm, tpm: tpm, otpm: otpm, period: time.Minute}
	for _, o := range opts {
		if o != nil {
			o(a)
		}
	}
	scale := float64(a.period) / float64(time.Minute)
	a.Latency = func(out int) time.Duration {
		return time.Duration(scale * float64(200*time.Millisecond+time.Duration(out)*10*time.Millisecond))
	}
	now := time.Now()
	a.reqs = Bucket{Capacity: rpm, Level: rpm, At: now, Period: a.period}
	a.toks = Bucket{Capacity: tpm, Level: tpm, At: now, Period: a.period}
	if dialect == Anthropic {
		a.outs = Bucket{Capacity: otpm, Level: otpm, At: now, Period: a.period}
	}
	return a
}

// NewAnthropic returns the fake with Anthropic's dialect: rpm requests,
// itpm input tokens and otpm output tokens a minute. Admission charges
// the input's estimate to the input bucket and max_tokens to the output
// bucket, which is settled to the tokens generated. Its headers are
// anthropic-ratelimit-{requests,input-tokens,output-tokens,tokens}-
// {limit,remaining,reset}, the reset being the RFC 3339 instant the bucket
// is full again, and the tokens' remaining rounded to the nearest
// thousand ("tokens" is the more restrictive of input and output).
func NewAnthropic(rpm, itpm, otpm float64, opts ...Option) *API {
	return newAPI(Anthropic, rpm, itpm, otpm, opts)
}

// NewAzure returns the fake with Azure OpenAI's dialect: it charges the
// estimate and settles nothing (Azure documents no settlement), and states
// only x-ratelimit-remaining-{requests,tokens}; a refusal says "Please
// retry after N seconds".
func NewAzure(rpm, tpm float64, opts ...Option) *API {
	return newAPI(Azure, rpm, tpm, 0, opts)
}

// TPM returns the API's limit of tokens a minute (Anthropic's: input
// tokens), a period under WithPeriod.
func (a *API) TPM() float64 { return a.tpm }

// RPM returns the API's limit of requests a minute (a period under
// WithPeriod).
func (a *API) RPM() float64 { return a.rpm }

// OTPM returns Anthropic's limit of output tokens a minute (a period under
// WithPeriod); 0 in the other dialects.
func (a *API) OTPM() float64 { return a.otpm }

// Dialect returns the API's dialect: OpenAI, Anthropic or Azure.
func (a *API) Dialect() string { return a.dialect }

// Period returns the time the API's buckets take to refill their limits:
// a minute, unless WithPeriod.
func (a *API) Period() time.Duration { return a.period }

// Request is the body of a request to the fake.
type Request struct {
	Model    string `json:"model"`
	Messages []struct {
		Content string `json:"content"`
	} `json:"messages"`
	MaxTokens     int  `json:"max_tokens"`
	OutputTokens  int  `json:"output_tokens"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// estimate returns what the fake charges at admission: ceil(chars/4) of
// the input, and max_tokens, and the input's count alone.
func (r Request) estimate() (cost, input int) {
	chars := 0
	for _, m := range r.Messages {
		chars += len(m.Content)
	}
	input = (chars + 3) / 4
	return input + r.MaxTokens, input
}

// ServeHTTP admits or refuses the request, and answers it with its usage.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.MaxTokens < 0 || req.OutputTokens < 0 {
		http.Error(w, `{"error":{"message":"invalid request","code":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	cost, input := req.estimate()
	out := min(req.OutputTokens, req.MaxTokens)
	inCost := cost // what the tokens bucket is charged
	if a.dialect == Anthropic {
		inCost = input // max_tokens goes to the output bucket
	}

	a.mu.Lock()
	now := time.Now()
	a.reqs.Refill(now)
	a.toks.Refill(now)
	a.outs.Refill(now)
	var refusal string
	var wait time.Duration
	d := Decision{At: now, Request: r, Input: input, MaxTokens: req.MaxTokens, Output: out}
	switch {
	case float64(inCost) > a.tpm || a.dialect == Anthropic && float64(req.MaxTokens) > a.otpm:
		d.Refused = TooLarge
		refusal = fmt.Sprintf("Request too large for %s on tokens per min (TPM): Limit %.0f, Requested %d.", req.Model, a.tpm, inCost)
	case !a.reqs.admits(1):
		d.Refused = QuotaRequests
		wait = a.reqs.Wait(1)
		refusal = fmt.Sprintf("Rate limit reached for %s on requests per min (RPM): Limit %.0f, Used %.0f, Requested 1. Please try again in %s.",
			req.Model, a.rpm, a.rpm-a.reqs.Level, seconds(wait))
	case !a.toks.admits(float64(inCost)):
		d.Refused = QuotaTokens
		if a.dialect == Anthropic {
			d.Refused = QuotaInputTokens
		}
		wait = a.toks.Wait(float64(inCost))
		refusal = fmt.Sprintf("Rate limit reached for %s on tokens per min (TPM): Limit %.0f, Used %.0f, Requested %d. Please try again in %s.",
			req.Model, a.tpm, a.tpm-a.toks.Level, inCost, seconds(wait))
	case a.dialect == Anthropic && !a.outs.admits(float64(req.MaxTokens)):
		d.Refused = QuotaOutputTokens
		wait = a.outs.Wait(float64(req.MaxTokens))
		refusal = fmt.Sprintf("This request would exceed the rate limit for your organization of %.0f output tokens per minute.", a.otpm)
	default:
		if a.Admitted != nil {
			a.Admitted(now, input, out)
		}
		a.reqs.Level--
		a.toks.Level -= float64(inCost)
		d.Charged = Charge{Requests: 1, Tokens: inCost}
		switch a.dialect {
		case Anthropic:
			a.outs.Level -= float64(req.MaxTokens)
			d.Charged.OutputTokens = req.MaxTokens
			d.Kept = Charge{Requests: 1, Tokens: inCost, OutputTokens: out}
		case OpenAI:
			d.Kept = Charge{Requests: 1, Tokens: input + out}
		default: // Azure settles nothing
			d.Kept = d.Charged
		}
	}
	a.attempts++
	if d.Refused != "" {
		a.refused++
	}
	if a.Decided != nil {
		a.Decided(d)
	}
	a.headers(w.Header(), now)
	a.mu.Unlock()

	h := w.Header()
	h.Set("Content-Type", "application/json")
	if refusal != "" {
		seconds := int(math.Ceil(wait.Seconds()))
		if wait > 0 {
			h.Set("Retry-After", strconv.Itoa(seconds))
			if a.dialect == OpenAI {
				h.Set("retry-after-ms", strconv.FormatInt(wait.Milliseconds(), 10))
			}
		}
		w.WriteHeader(http.StatusTooManyRequests)
		switch a.dialect {
		case Anthropic:
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{
				"type": "rate_limit_error", "message": refusal,
			}})
		case Azure:
			if wait > 0 {
				refusal = fmt.Sprintf("Requests to the ChatCompletions_Create Operation have exceeded the token rate limit of your current tier. Please retry after %d seconds.", seconds)
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"code": "429", "message": refusal}})
		default:
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
				"message": refusal, "type": "tokens", "code": "rate_limit_exceeded",
			}})
		}
		return
	}

	if req.Stream {
		a.stream(w, req, input, out)
		return
	}
	time.Sleep(a.Latency(out)) // the generation: the fake's own time
	a.settle(req.MaxTokens - out)
	if a.dialect == Anthropic {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"type": "message", "model": req.Model,
			"usage": map[string]int{"input_tokens": input, "output_tokens": out},
		})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"model": req.Model,
		"usage": map[string]int{"prompt_tokens": input, "completion_tokens": out, "total_tokens": input + out},
	})
}

// settle gives back unused tokens of max_tokens when an answer is done:
// OpenAI's to its tokens bucket, Anthropic's to its output bucket, up to
// the bucket's capacity; Azure settles nothing.
func (a *API) settle(unused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch a.dialect {
	case OpenAI:
		a.toks.Give(time.Now(), float64(unused))
	case Anthropic:
		a.outs.Give(time.Now(), float64(unused))
	}
}

// stream answers as server-sent events, the headers first: the output in
// chunks of up to 10 tokens, 200ms and then 10ms a token apart, and the
// usage at the end, after the settlement (OpenAI's only when the request
// asked for it with stream_options.include_usage; Anthropic's in its
// message_delta event).
func (a *API) stream(w http.ResponseWriter, req Request, input, out int) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	event := func(name string, v any) {
		b, _ := json.Marshal(v)
		if name != "" {
			fmt.Fprintf(w, "event: %s\n", name)
		}
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	if a.dialect == Anthropic {
		event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"model": req.Model, "usage": map[string]int{"input_tokens": input, "output_tokens": 1},
		}})
	}
	time.Sleep(a.Latency(0))
	for sent := 0; sent < out; {
		n := min(10, out-sent)
		time.Sleep(a.Latency(n) - a.Latency(0))
		sent += n
		text := strings.Repeat("abcd", n)
		if a.dialect == Anthropic {
			event("content_block_delta", map[string]any{"type": "content_block_delta", "delta": map[string]string{"type": "text_delta", "text": text}})
		} else {
			event("", map[string]any{"choices": []any{map[string]any{"delta": map[string]string{"content": text}}}})
		}
	}
	a.settle(req.MaxTokens - out)
	switch {
	case a.dialect == Anthropic:
		event("message_delta", map[string]any{"type": "message_delta", "usage": map[string]int{"output_tokens": out}})
		event("message_stop", map[string]any{"type": "message_stop"})
	default:
		if req.StreamOptions.IncludeUsage {
			event("", map[string]any{"choices": []any{}, "usage": map[string]int{"prompt_tokens": input, "completion_tokens": out, "total_tokens": input + out}})
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

// seconds formats d as OpenAI's messages do: seconds with up to three
// decimals ("1.234s"), or milliseconds under a second ("120ms").
func seconds(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
}

// headers sets the rate-limit headers of a's dialect on h, at now (the
// buckets refilled). It requires a.mu held.
func (a *API) headers(h http.Header, now time.Time) {
	count := func(level float64) string { return strconv.FormatFloat(math.Max(math.Floor(level), 0), 'f', 0, 64) }
	switch a.dialect {
	case Anthropic:
		thousands := func(level float64) string {
			return strconv.FormatFloat(math.Max(math.Round(level/1000)*1000, 0), 'f', 0, 64)
		}
		full := func(b *Bucket) string { return now.Add(b.Reset()).UTC().Format(time.RFC3339) }
		set := func(name string, limit float64, remaining string, b *Bucket) {
			h.Set("anthropic-ratelimit-"+name+"-limit", strconv.FormatFloat(limit, 'f', 0, 64))
			h.Set("anthropic-ratelimit-"+name+"-remaining", remaining)
			h.Set("anthropic-ratelimit-"+name+"-reset", full(b))
		}
		set("requests", a.rpm, count(a.reqs.Level), &a.reqs)
		set("input-tokens", a.tpm, thousands(a.toks.Level), &a.toks)
		set("output-tokens", a.otpm, thousands(a.outs.Level), &a.outs)
		// "tokens": the most restrictive of the two, by the time each
		// needs to be full again.
		if a.toks.Reset() >= a.outs.Reset() {
			set("tokens", a.tpm, thousands(a.toks.Level), &a.toks)
		} else {
			set("tokens", a.otpm, thousands(a.outs.Level), &a.outs)
		}
	case Azure:
		h.Set("x-ratelimit-remaining-requests", count(a.reqs.Level))
		h.Set("x-ratelimit-remaining-tokens", count(a.toks.Level))
	default:
		h.Set("x-ratelimit-limit-requests", strconv.FormatFloat(a.rpm, 'f', 0, 64))
		h.Set("x-ratelimit-limit-tokens", strconv.FormatFloat(a.tpm, 'f', 0, 64))
		h.Set("x-ratelimit-remaining-requests", count(a.reqs.Level))
		h.Set("x-ratelimit-remaining-tokens", count(a.toks.Level))
		h.Set("x-ratelimit-reset-requests", a.reqs.Reset().Round(time.Millisecond).String())
		h.Set("x-ratelimit-reset-tokens", a.toks.Reset().Round(time.Millisecond).String())
	}
}
