package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/politehttp/polite/internal/llmfake"
)

// The LLM bench: closed-loop callers of the research's request mix against
// the fake LLM API (internal/llmfake), through one client. The same loop
// runs on loopback in real time (go run ./bench -llm) and in process in
// fake time (the tests), so that the suite predicts the bench.

// llmDialect is one dialect of the fake as the bench runs it: its limits a
// period, and the path and model of its requests.
type llmDialect struct {
	name           string  // llmfake.OpenAI, llmfake.Anthropic or llmfake.Azure
	rpm, tpm, otpm float64 // requests, tokens (Anthropic's: input tokens) and Anthropic's output tokens a period
	path           string  // the request's path (and query)
	model          string
}

// llmDialects returns every dialect, in the order the table lists them:
// OpenAI's and Azure's 500 requests and 200,000 tokens a minute;
// Anthropic's 500 requests, 400,000 input tokens and 80,000 output tokens
// (the limits of the politecost tests).
func llmDialects() []llmDialect {
	return []llmDialect{
		{name: llmfake.OpenAI, rpm: 500, tpm: 200000, path: "/v1/chat/completions", model: "gpt-bench"},
		{name: llmfake.Anthropic, rpm: 500, tpm: 400000, otpm: 80000, path: "/v1/messages", model: "claude-bench"},
		{name: llmfake.Azure, rpm: 500, tpm: 200000, path: "/openai/deployments/gpt-bench/chat/completions?api-version=2024-10-21", model: "gpt-bench"},
	}
}

// dialectName returns d's name, for pick.
func dialectName(d llmDialect) string { return d.name }

// newAPI returns a fresh fake of d whose buckets refill in period, full.
func (d llmDialect) newAPI(period time.Duration) *llmfake.API {
	switch d.name {
	case llmfake.Anthropic:
		return llmfake.NewAnthropic(d.rpm, d.tpm, d.otpm, llmfake.WithPeriod(period))
	case llmfake.Azure:
		return llmfake.NewAzure(d.rpm, d.tpm, llmfake.WithPeriod(period))
	}
	return llmfake.NewOpenAI(d.rpm, d.tpm, llmfake.WithPeriod(period))
}

// llmConfig is the work every LLM run is given.
type llmConfig struct {
	period   time.Duration // the fake's "minute"
	duration time.Duration // the run's length; the first period is left out of the measures
	workers  int           // closed-loop callers
	deadline time.Duration // each call's deadline; none if 0
	fleet    int           // the processes of a fleet client
	redis    string        // the Redis of the fleet clients
	tooLarge bool          // 1% of the mix is larger than the server's token limit
	seed     uint64        // the mix's seed
}

// callHeader carries a call's number to the fake, so that the server's
// decisions can be matched to the callers' calls.
const callHeader = "X-Bench-Call"

// drawKey is the context key of a call's draw: what the oracle and the
// cookbook are told (the cookbook counts it from the request, as the
// oracle knows it).
type drawKey struct{}

// drawOf returns the draw a request's context carries.
func drawOf(req *http.Request) (llmfake.Draw, bool) {
	d, ok := req.Context().Value(drawKey{}).(llmfake.Draw)
	return d, ok
}

// llmCall is one call as its caller saw it.
type llmCall struct {
	id         int
	draw       llmfake.Draw
	tooLarge   bool      // drawn larger than the server's token limit
	start, end time.Time // when the caller made it, and when it had the body read or the error
	status     int       // the answer's status; 0 with an error
	err        error
	cut        bool // the run ended before the call did: only its draw counts
}

// llmDecision is one decision of the fake, tied to the call it was for.
type llmDecision struct {
	id            int
	at            time.Time
	refused       string // "" if admitted
	charged, kept llmfake.Charge
}

// llmRecord is what both sides of an LLM run saw.
type llmRecord struct {
	start     time.Time
	calls     []llmCall
	decisions []llmDecision
}

// llmRecorder collects the fake's decisions until closed: a loopback
// server's handlers may outlive the run (a generation in progress when the
// caller gave up), and what they decide then is not the run's.
type llmRecorder struct {
	mu        sync.Mutex
	decisions []llmDecision
	closed    bool
}

// hook returns the fake's Decided hook that records into r.
func (r *llmRecorder) hook() func(llmfake.Decision) {
	return func(d llmfake.Decision) {
		id, _ := strconv.Atoi(d.Request.Header.Get(callHeader))
		r.mu.Lock()
		defer r.mu.Unlock()
		if !r.closed {
			r.decisions = append(r.decisions, llmDecision{id: id, at: d.At, refused: d.Refused, charged: d.Charged, kept: d.Kept})
		}
	}
}

// close stops recording and returns what was recorded.
func (r *llmRecorder) close() []llmDecision {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return r.decisions
}

// runLLM runs cfg.workers closed-loop callers of hc against the fake api
// served at base (its scheme and host), for cfg.duration from now: each
// draws the next request of one mix shared by all (in turn), posts it with
// its deadline, reads the answer to its end, and draws again. It returns
// what the callers and the fake saw; the run's end cancels the calls in
// progress, which are marked cut.
func runLLM(api *llmfake.API, d llmDialect, hc *http.Client, base string, cfg llmConfig) llmRecord {
	rec := &llmRecorder{}
	api.Decided = rec.hook()
	mix := llmfake.NewMix(cfg.seed, int(d.tpm), cfg.tooLarge)
	url := base + d.path
	start := time.Now()
	ctx, end, stop := runClock(start, cfg.duration)
	defer stop()

	var mu sync.Mutex // guards mix, next and calls
	next := 0
	var calls []llmCall
	var wg sync.WaitGroup
	for range cfg.workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				draw := mix.Next()
				next++
				c := llmCall{id: next, draw: draw, tooLarge: draw.Prompt > int(d.tpm)}
				mu.Unlock()
				callLLM(ctx, hc, url, d, cfg.deadline, &c)
				c.cut = !c.end.Before(end) || c.err != nil && ctx.Err() != nil
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
				if c.err != nil && !c.end.After(c.start) {
					// Refused at once (a wait past the deadline, a request
					// over the quota): in fake time, a worker that spun
					// here would stop the clock, and the reset that ends
					// the refusals would never come (a run hung so once,
					// until go test's timeout). On loopback the clock moves
					// while the call runs, and the worker calls again at once.
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return llmRecord{start: start, calls: calls, decisions: rec.close()}
}

// callLLM makes the call c with hc: a POST of its draw to url, with its
// deadline, the body read to its end and closed.
func callLLM(ctx context.Context, hc *http.Client, url string, d llmDialect, deadline time.Duration, c *llmCall) {
	callCtx := context.WithValue(ctx, drawKey{}, c.draw)
	if deadline > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(callCtx, deadline)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, url, bytes.NewReader([]byte(c.draw.Body(d.model, false, false))))
	if err != nil {
		panic(err) // the URL is the bench's own
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(callHeader, strconv.Itoa(c.id))
	c.start = time.Now()
	resp, err := hc.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		c.status = resp.StatusCode
		if err != nil {
			c.status = 0
		}
	}
	c.err, c.end = err, time.Now()
}

// inProcess is a RoundTripper that answers with a handler in process, in
// the caller's goroutine: the fake-time copy of loopback. The handler runs
// to its end (its latency passes) before the answer comes back whole.
//
// With jitter, each request reaches the handler after a delay drawn
// uniformly below it, as on loopback, where requests sent at once over
// many connections reach the server in another order than they were sent
// (a millisecond or so on a busy machine; more across a network).
type inProcess struct {
	h      http.Handler
	jitter time.Duration
	mu     sync.Mutex // guards rng
	rng    *rand.Rand
}

// newInProcess returns an inProcess answering with h, its jitter drawn
// from seed.
func newInProcess(h http.Handler, jitter time.Duration, seed uint64) *inProcess {
	return &inProcess{h: h, jitter: jitter, rng: rand.New(rand.NewPCG(seed, seed))}
}

// RoundTrip serves req with the handler, after its jitter, and returns
// the whole answer; a request whose context is done is not served.
func (p *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	if p.jitter > 0 {
		p.mu.Lock()
		delay := time.Duration(p.rng.Int64N(int64(p.jitter)))
		p.mu.Unlock()
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
		}
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	w := &inProcessWriter{header: http.Header{}}
	p.h.ServeHTTP(w, req)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status: strconv.Itoa(w.status) + " " + http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: req,
	}, nil
}

// inProcessWriter is the ResponseWriter of inProcess.
type inProcessWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// Header returns the answer's header.
func (w *inProcessWriter) Header() http.Header { return w.header }

// WriteHeader sets the answer's status, once.
func (w *inProcessWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

// Write adds b to the answer's body (status 200 if none was set).
func (w *inProcessWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

// errLLMTooLarge is the oracle's and the cookbook's error for a request
// larger than the server's limit: they know the limits, and send nothing
// that no wait would admit.
var errLLMTooLarge = errors.New("bench: the request is larger than the server's limit")
