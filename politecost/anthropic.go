package politecost

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/politehttp/polite"
)

// Anthropic returns the options that pace requests to Anthropic's
// Messages API by the input and output tokens it counts a minute: an
// estimate of each request's tokens before it is sent, as Anthropic
// reserves them, keyed by model, and its settlement to the tokens the
// answer states. Anthropic's rate-limit headers, which state the limits,
// are read by polite itself.
//
// The estimate of a POST to …/messages counts, in input tokens,
// ceil(characters/4) of its system prompt, its messages' text (tool uses'
// input and tool results included; images and documents count nothing)
// and its tool definitions, and, in output tokens, its max_tokens (if
// absent, [WithDefaultMaxTokens]), which Anthropic reserves at the start
// of each request. Its scope is the request's model. Other requests cost
// one request only.
//
// The settlement counts in input tokens what Anthropic counts against its
// input limit: input_tokens + cache_creation_input_tokens (cache reads do
// not count), and in output tokens output_tokens. A JSON answer states
// them in its usage. A stream states the input in its first event
// (message_start) and the output, to date, in each message_delta: the
// last message_delta settles the output. Its input comes from that
// message_delta if it states it, else from message_start if the tail
// still holds it, else from the request's body estimated again (read
// through its GetBody: a stream of more than 64 KiB no longer holds its
// first event). A stream that ends before its message_delta (an error
// event, a caller who stopped reading) is not settled: its estimate
// stands until the headers correct it.
func Anthropic(opts ...Option) polite.Option {
	s := newSettings(opts)
	return polite.Options(
		polite.WithCost(func(req *http.Request, body []byte) (polite.Cost, string, error) {
			in, out, model := s.anthropicTokens(req, body)
			return polite.Cost{InputTokens: in, OutputTokens: out}, model, nil
		}),
		polite.WithUsage(s.anthropicUsage),
	)
}

// anthropicRequest is what the estimate reads of a request to the
// Messages API.
type anthropicRequest struct {
	Model    string `json:"model"`
	System   chars  `json:"system"`
	Messages []struct {
		Content chars `json:"content"`
	} `json:"messages"`
	Tools     rawLen `json:"tools"`
	MaxTokens number `json:"max_tokens"`
}

// anthropicTokens returns the input and output tokens Anthropic reserves
// for req, whose body is body, and its model; 0 for a request it does not
// know.
func (s *settings) anthropicTokens(req *http.Request, body []byte) (in, out float64, model string) {
	path := strings.TrimSuffix(req.URL.Path, "/")
	if req.Method != http.MethodPost || !strings.HasSuffix(path, "/messages") {
		return 0, 0, ""
	}
	if body == nil {
		if req.ContentLength <= 0 {
			return 0, 0, ""
		}
		return tokensOf(chars(min(req.ContentLength, 1<<31-1))), s.maxTokens, ""
	}
	var r anthropicRequest
	if json.Unmarshal(body, &r) != nil {
		return 0, 0, ""
	}
	c := r.System + chars(r.Tools)
	for _, m := range r.Messages {
		c += m.Content
	}
	return tokensOf(c), r.MaxTokens.or(s.maxTokens), r.Model
}

// anthropicUsageFields is a usage object of Anthropic's API.
type anthropicUsageFields struct {
	InputTokens              number `json:"input_tokens"`
	CacheCreationInputTokens number `json:"cache_creation_input_tokens"`
	OutputTokens             number `json:"output_tokens"`
}

// input returns the input tokens u counts against the input limit.
func (u anthropicUsageFields) input() float64 {
	return u.InputTokens.or(0) + u.CacheCreationInputTokens.or(0)
}

// anthropicUsage reads the tokens an answer of the Messages API used from
// its body's tail (see Anthropic).
func (s *settings) anthropicUsage(resp *http.Response, tail []byte) (polite.Usage, bool) {
	if eventStream(resp, tail) {
		return s.anthropicStreamUsage(resp, tail)
	}
	var u anthropicUsageFields
	found := lastObject(tail, "usage", func(obj []byte) bool {
		var v anthropicUsageFields
		if json.Unmarshal(obj, &v) != nil || !v.OutputTokens.set {
			return false
		}
		u = v
		return true
	})
	if !found {
		return polite.Usage{}, false
	}
	return polite.Usage{Cost: polite.Cost{InputTokens: u.input(), OutputTokens: u.OutputTokens.or(0)}}, true
}

// anthropicEvent is what the settlement reads of a stream's events.
type anthropicEvent struct {
	Type    string                `json:"type"`
	Usage   *anthropicUsageFields `json:"usage"` // message_delta
	Message *struct {
		Usage *anthropicUsageFields `json:"usage"`
	} `json:"message"` // message_start
}

// anthropicStreamUsage reads the tokens a stream of the Messages API used
// from its tail.
func (s *settings) anthropicStreamUsage(resp *http.Response, tail []byte) (polite.Usage, bool) {
	var start, delta *anthropicUsageFields
	eventData(tail, len(tail) >= polite.MaxUsageTail, func(data []byte) bool {
		isStart := bytes.Contains(data, []byte("message_start"))
		if !isStart && !bytes.Contains(data, []byte("message_delta")) {
			return true
		}
		var e anthropicEvent
		if json.Unmarshal(data, &e) != nil {
			return true
		}
		switch {
		case e.Type == "message_start" && e.Message != nil && e.Message.Usage != nil:
			start = e.Message.Usage
		case e.Type == "message_delta" && e.Usage != nil && e.Usage.OutputTokens.set:
			delta = e.Usage
		}
		return true
	})
	if delta == nil {
		return polite.Usage{}, false
	}
	cost := polite.Cost{OutputTokens: delta.OutputTokens.or(0)}
	switch {
	case delta.InputTokens.set:
		cost.InputTokens = delta.input()
	case start != nil && start.InputTokens.set:
		cost.InputTokens = start.input()
	default:
		body := requestBody(resp)
		if body == nil {
			return polite.Usage{}, false
		}
		in, _, _ := s.anthropicTokens(resp.Request, body)
		cost.InputTokens = in
	}
	return polite.Usage{Cost: cost}, true
}
