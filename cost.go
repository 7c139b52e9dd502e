package polite

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/politehttp/polite/internal/quota"
	"github.com/politehttp/polite/internal/units"
)

// Cost is what a request spends of the quotas a server counts in units
// other than requests: an LLM API's tokens (OpenAI's and Azure's tokens a
// minute, Anthropic's input and output tokens a minute), a GraphQL API's
// points (GitHub's points an hour, Shopify's cost), bytes. The zero Cost
// spends nothing; negative, NaN and infinite fields count as 0.
//
// Every request also counts one against the key's request quotas, as
// without a Cost.
type Cost struct {
	Tokens       float64 // unit "tokens"
	InputTokens  float64 // unit "input-tokens"
	OutputTokens float64 // unit "output-tokens"
	Points       float64 // unit "points"
	Bytes        float64 // unit "content-bytes"
}

// The units of a [Cost], as [Quota.Unit] names them.
const (
	UnitTokens       = "tokens"
	UnitInputTokens  = "input-tokens"
	UnitOutputTokens = "output-tokens"
	UnitPoints       = "points"
	UnitBytes        = "content-bytes"
)

// IsZero reports whether c spends nothing.
func (c Cost) IsZero() bool { return costOf(c).Zero() }

// Of returns what c spends of unit (one of the Unit constants); 0 for a
// unit c does not count in.
func (c Cost) Of(unit string) float64 {
	u, ok := units.Named(unit)
	if !ok {
		return 0
	}
	return costOf(c)[u]
}

// An Estimator tells what a request will cost before it is sent, as the
// server will charge it on admission (for an LLM API: the prompt and the
// most it may generate, max_tokens), so that the request waits until every
// quota it counts against holds its cost.
//
// body is the request's body, read through [http.Request.GetBody] (at most
// [MaxEstimateBody] bytes; nil when the request has no body or no GetBody,
// or the body is larger). The Estimator must not modify req or body, and
// must be safe for concurrent use.
//
// scope, if not empty, is added to the request's key ("api.openai.com"
// becomes "api.openai.com|gpt-4.1"): LLM APIs count their quotas per model.
// An error fails the call unsent, wrapped in an error that says so.
type Estimator func(req *http.Request, body []byte) (cost Cost, scope string, err error)

// MaxEstimateBody is the most of a request's body an [Estimator] is given:
// enough for the largest prompts LLM APIs take (a million tokens, about 4
// MB), and for one larger than the server's limit to be told, unsent.
const MaxEstimateBody = 8 << 20

// costKey is the context key of a cost stated by the caller.
type costKey struct{}

// ContextWithCost returns a copy of ctx that states the cost of the request
// it goes with: it wins over the [Estimator] of [WithCost], and applies
// without one. A caller that knows the cost (a batch of known size, a
// query whose cost it computed) states it so.
func ContextWithCost(ctx context.Context, c Cost) context.Context {
	return context.WithValue(ctx, costKey{}, c)
}

// Usage is what a response body says a request actually cost, and of the
// quotas the server keeps for it.
type Usage struct {
	// Cost is what the request cost, as the server billed it: it replaces
	// the estimate in every unit (a unit left 0 cost nothing).
	Cost Cost
	// Quotas are the quotas the body states (Shopify's throttleStatus),
	// taken as a response's headers are.
	Quotas []Quota
}

// A UsageReader reads what a request cost from the end of its response's
// body: tail holds the body's last bytes (at most [MaxUsageTail]), as the
// caller read them. The usage of a JSON answer and of a stream of
// server-sent events is at its end. It reports false when tail says nothing
// of the cost: the estimate then stands. It must be safe for concurrent
// use and must not keep tail.
type UsageReader func(resp *http.Response, tail []byte) (Usage, bool)

// MaxUsageTail is the most of a response body's end a [UsageReader] is
// given.
const MaxUsageTail = 64 << 10

// Settle settles the cost of the request resp answers to actual, the
// request's usage as the caller read it (an SDK's typed usage), as a
// [UsageReader] would. It reports whether it did: resp must be the
// response polite returned, with the Body it had (an SDK may hand it over
// read), and not settled yet. A response settled by Settle is not read by
// the [UsageReader].
func Settle(resp *http.Response, actual Cost) bool {
	if resp == nil {
		return false
	}
	b, ok := resp.Body.(*costBody)
	return ok && b.settle(costOf(actual), true)
}

// costOf returns c as the engine counts it, one figure a unit, each made
// valid: at least 0, and finite.
func costOf(c Cost) units.Vec {
	return units.Vec{c.Tokens, c.InputTokens, c.OutputTokens, c.Points, c.Bytes}.Valid()
}

// costBody settles its request's cost when the caller is done with the
// response's body: read to the end, or closed. With a UsageReader it keeps
// the body's last MaxUsageTail bytes for it.
type costBody struct {
	io.ReadCloser
	resp *http.Response
	hold *quota.Hold
	read UsageReader // nil: the estimate stands, unless Settle tells

	mu   sync.Mutex // guards tail and done: Close may come while Read runs
	tail []byte
	done bool // the tail was read, or the caller settled
}

// newCostBody returns resp's body wrapped to settle h.
func newCostBody(resp *http.Response, h *quota.Hold, read UsageReader) io.ReadCloser {
	return &costBody{ReadCloser: resp.Body, resp: resp, hold: h, read: read}
}

func (b *costBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.read != nil && n > 0 {
		b.mu.Lock()
		if !b.done {
			b.keep(p[:n])
		}
		b.mu.Unlock()
	}
	if err == io.EOF {
		b.finish()
	}
	return n, err
}

func (b *costBody) Close() error {
	err := b.ReadCloser.Close()
	b.finish()
	return err
}

// keep adds p to the tail, keeping at most 2·MaxUsageTail bytes. It
// requires b.mu held.
func (b *costBody) keep(p []byte) {
	if len(p) >= MaxUsageTail {
		b.tail = append(b.tail[:0], p[len(p)-MaxUsageTail:]...)
		return
	}
	if len(b.tail)+len(p) > 2*MaxUsageTail {
		n := copy(b.tail, b.tail[len(b.tail)-(MaxUsageTail-len(p)):])
		b.tail = b.tail[:n]
	}
	b.tail = append(b.tail, p...)
}

// finish reads the usage from the tail, once, and settles the cost by it.
func (b *costBody) finish() {
	if b.read == nil {
		return
	}
	b.mu.Lock()
	tail, done := b.tail, b.done
	b.tail, b.done = nil, true
	b.mu.Unlock()
	if done {
		return
	}
	if len(tail) > MaxUsageTail {
		tail = tail[len(tail)-MaxUsageTail:]
	}
	u, ok := b.read(b.resp, tail)
	if !ok {
		return
	}
	b.hold.SettleUsage(costOf(u.Cost), internalQuotas(u.Quotas), time.Now())
}

// settle settles the cost to actual, as the caller tells it (told), and
// reports whether it did: not if it was settled before.
func (b *costBody) settle(actual units.Vec, told bool) bool {
	if told {
		b.mu.Lock()
		b.tail, b.done = nil, true // the UsageReader need not read it
		b.mu.Unlock()
	}
	return b.hold.Settle(actual, time.Now())
}
