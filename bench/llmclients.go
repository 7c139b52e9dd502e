package main

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/llmfake"
	"github.com/politehttp/polite/politecost"
)

// An llmClient is one client of the LLM bench.
type llmClient struct {
	name  string
	fleet bool // a fleet sharing Redis
	// build returns the client's RoundTripper for one run, sending
	// through tr.
	build func(tr http.RoundTripper, cfg llmClientConfig) http.RoundTripper
}

// llmClientConfig is what an LLM client may know of a run. Only the oracle
// and the cookbook read the limits (the cookbook as its user configures
// it), and polite-cost on Azure the TPM, which Azure does not state.
type llmClientConfig struct {
	dialect llmDialect
	period  time.Duration
	fleet   int
	redis   string
	cleanup func(func()) // registers what to close when the run ends
}

// llmClients returns every client of the LLM bench, in the order the table
// lists them.
func llmClients() []llmClient {
	return []llmClient{
		{name: "oracle", build: func(tr http.RoundTripper, cfg llmClientConfig) http.RoundTripper {
			return &pacerTransport{next: tr, pacer: newBucketPacer(cfg.dialect, cfg.period, true, false)}
		}},
		{name: "cookbook", build: func(tr http.RoundTripper, cfg llmClientConfig) http.RoundTripper {
			return &pacerTransport{next: tr, pacer: newBucketPacer(cfg.dialect, cfg.period, false, true)}
		}},
		{name: "polite", build: func(tr http.RoundTripper, _ llmClientConfig) http.RoundTripper {
			return polite.New(tr)
		}},
		{name: "polite-cost", build: func(tr http.RoundTripper, cfg llmClientConfig) http.RoundTripper {
			return polite.New(tr, dialectOption(cfg))
		}},
		{name: "polite-cost-alone", build: func(tr http.RoundTripper, cfg llmClientConfig) http.RoundTripper {
			rts := make([]http.RoundTripper, max(cfg.fleet, 1))
			for i := range rts {
				rts[i] = polite.New(tr, dialectOption(cfg))
			}
			return &spread{rts: rts}
		}},
		{name: "polite-cost-fleet", fleet: true, build: func(tr http.RoundTripper, cfg llmClientConfig) http.RoundTripper {
			return buildFleet(tr, clientConfig{fleet: cfg.fleet, redis: cfg.redis, cleanup: cfg.cleanup}, nil, dialectOption(cfg)).Transport
		}},
	}
}

// llmClientName returns c's name, for pick.
func llmClientName(c llmClient) string { return c.name }

// llmNeedsRedis reports whether any of cls is a fleet on Redis.
func llmNeedsRedis(cls []llmClient) bool {
	for _, c := range cls {
		if c.fleet {
			return true
		}
	}
	return false
}

// dialectOption returns politecost's options for the run's dialect, with
// its defaults. Azure states no limit: AzureOpenAI takes the deployment's
// TPM as its user configures it; in scaled time (a period other than a
// minute) the same quota over the period replaces it.
func dialectOption(cfg llmClientConfig) polite.Option {
	switch cfg.dialect.name {
	case llmfake.Anthropic:
		return politecost.Anthropic()
	case llmfake.Azure:
		if cfg.period != time.Minute {
			return polite.Options(politecost.AzureOpenAI(cfg.dialect.tpm), polite.WithQuota(polite.UnitTokens, cfg.dialect.tpm, cfg.period))
		}
		return politecost.AzureOpenAI(cfg.dialect.tpm)
	}
	return politecost.OpenAI()
}

// pacerTransport sends each request once, when its pacer lets it, and
// tells the pacer how it ended. It reads the request's draw from its
// context (see drawKey).
type pacerTransport struct {
	next  http.RoundTripper
	pacer *bucketPacer
}

// RoundTrip waits for the pacer, sends req once, and tells the pacer how
// it ended.
func (p *pacerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	d, _ := drawOf(req)
	if err := p.pacer.reserve(req.Context(), d); err != nil {
		return nil, err
	}
	resp, err := p.next.RoundTrip(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	p.pacer.done(d, status)
	return resp, err
}

// bucketPacer paces by the quotas of a dialect of the fake, as the OpenAI
// cookbook's parallel processor does: one bucket a quota (requests,
// tokens; Anthropic's input and output tokens), each holding a period's
// limit and refilled continuously, from which a request takes what the
// server will charge it (one request; its prompt and max_tokens), first
// come first served, and which never holds a request larger than a limit
// (errLLMTooLarge). With refund (the oracle), an answer gives back what
// the server gives back (the unused max_tokens, but on Azure), and a
// refusal all it took (the server took nothing); without (the cookbook's
// rule), nothing comes back.
type bucketPacer struct {
	dialect string
	refund  bool

	turn             chan struct{} // held while a request waits its turn: first come, first served
	state            sync.Mutex    // guards the buckets
	reqs, toks, outs llmfake.Bucket
}

// newBucketPacer returns a bucketPacer of d's limits a period, full or
// empty.
//
// The oracle starts empty: it gives up the server's first burst (the
// first period is left out of the measures anyway) for a margin of a
// whole bucket over the server's. Its buckets otherwise follow the
// server's to the token, so that, starting full, it would run ahead of
// them: the server's bucket, full until the first requests arrive, loses
// the refill of those milliseconds while its copy, spent at once, gains
// it; from then on the copy holds what the server lacks, and every request
// that counts on it is refused (and gives its charge back, which is then
// counted on again).
func newBucketPacer(d llmDialect, period time.Duration, refund, full bool) *bucketPacer {
	now := time.Now()
	bucket := func(limit float64) llmfake.Bucket {
		b := llmfake.Bucket{Capacity: limit, At: now, Period: period}
		if full {
			b.Level = limit
		}
		return b
	}
	return &bucketPacer{dialect: d.name, refund: refund, turn: make(chan struct{}, 1),
		reqs: bucket(d.rpm), toks: bucket(d.tpm), outs: bucket(d.otpm)}
}

// charge returns what the server charges d at admission: its tokens (on
// Anthropic its input tokens) and its output tokens (Anthropic's max_tokens;
// 0 elsewhere).
func (p *bucketPacer) charge(d llmfake.Draw) (tokens, outputs float64) {
	if p.dialect == llmfake.Anthropic {
		return float64(d.Prompt), float64(d.MaxTokens)
	}
	return float64(d.Estimate()), 0
}

// reserve waits until d's charge fits every bucket and takes it.
func (p *bucketPacer) reserve(ctx context.Context, d llmfake.Draw) error {
	tokens, outputs := p.charge(d)
	if tokens > p.toks.Capacity || outputs > p.outs.Capacity {
		return errLLMTooLarge
	}
	select {
	case p.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.turn }()
	for {
		p.state.Lock()
		now := time.Now()
		p.reqs.Refill(now)
		p.toks.Refill(now)
		p.outs.Refill(now)
		wait := max(p.reqs.Wait(1), p.toks.Wait(tokens), p.outs.Wait(outputs))
		if wait == 0 {
			p.reqs.Level--
			p.toks.Level -= tokens
			p.outs.Level -= outputs
		}
		p.state.Unlock()
		if wait == 0 {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// done tells the pacer how d ended: the answer's status, 0 if none.
func (p *bucketPacer) done(d llmfake.Draw, status int) {
	if !p.refund {
		return
	}
	tokens, outputs := p.charge(d)
	p.state.Lock()
	defer p.state.Unlock()
	now := time.Now()
	switch {
	case status == http.StatusTooManyRequests: // the server took nothing
		p.reqs.Give(now, 1)
		p.toks.Give(now, tokens)
		p.outs.Give(now, outputs)
	case status != http.StatusOK:
	case p.dialect == llmfake.OpenAI:
		p.toks.Give(now, float64(d.MaxTokens-d.Output))
	case p.dialect == llmfake.Anthropic:
		p.outs.Give(now, float64(d.MaxTokens-d.Output))
	}
}
