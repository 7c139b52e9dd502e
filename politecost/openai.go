package politecost

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/politehttp/polite"
)

// OpenAI returns the options that pace requests to OpenAI's API by the
// tokens it charges: an estimate of each request's tokens before it is
// sent, as OpenAI reserves them, keyed by model, and its settlement to the
// tokens the answer states it used. OpenAI's rate-limit headers, which
// state the limits, are read by polite itself.
//
// The estimate of a POST to …/chat/completions, …/responses,
// …/completions or …/embeddings is ceil(characters/4) of its input (the
// messages' text, tool calls and tool definitions; the Responses API's
// input and instructions; a completion's prompt; an embedding's input)
// plus, but for embeddings, the output it may generate: n (or best_of)
// times its maximum (max_completion_tokens, max_tokens or
// max_output_tokens; if none, [WithDefaultMaxTokens]; 16, the API's
// default, for …/completions). Its scope is the request's model. Other
// requests cost one request only.
//
// The settlement reads the last "usage" object of the answer:
// prompt_tokens + completion_tokens (chat, completions, embeddings),
// input_tokens + output_tokens (Responses API), or total_tokens; from a
// JSON answer, or from a stream's last events (OpenAI sends a chat
// stream's usage only if stream_options.include_usage is true; without it
// the estimate stands until the headers correct it).
func OpenAI(opts ...Option) polite.Option {
	s := newSettings(opts)
	return polite.Options(
		polite.WithCost(func(req *http.Request, body []byte) (polite.Cost, string, error) {
			tokens, model := s.openAITokens(req, body)
			return polite.Cost{Tokens: tokens}, model, nil
		}),
		polite.WithUsage(openAIUsage),
	)
}

// AzureOpenAI returns the options that pace requests to an Azure OpenAI
// deployment by the tokens Azure charges. Azure reserves, for each
// request, its estimate of the tokens it may process (the prompt, and
// max_tokens times best_of) and settles nothing afterwards; it states
// what is left of the deployment's tokens and requests a minute
// (x-ratelimit-remaining-{tokens,requests}) but not the limit. So the
// estimate is OpenAI's (see [OpenAI]), its scope is the deployment (from
// the path /openai/deployments/{name}/…, else the body's model), and the
// answers are not read for their usage.
//
// tpm is the deployment's tokens-per-minute quota, as the Azure portal
// shows it: given, it holds requests from the first one on
// ([polite.WithQuota]); 0, polite learns a lower bound of the limit from
// what the answers say is left.
func AzureOpenAI(tpm float64, opts ...Option) polite.Option {
	s := newSettings(opts)
	return polite.Options(
		polite.WithCost(func(req *http.Request, body []byte) (polite.Cost, string, error) {
			tokens, model := s.openAITokens(req, body)
			if d := deployment(req.URL.Path); d != "" {
				model = d
			}
			return polite.Cost{Tokens: tokens}, model, nil
		}),
		polite.WithQuota(polite.UnitTokens, tpm, time.Minute),
	)
}

// openAIRequest is what the estimate reads of a request to OpenAI's API.
type openAIRequest struct {
	Model               string        `json:"model"`
	Messages            []chatMessage `json:"messages"`     // chat
	Input               chars         `json:"input"`        // responses, embeddings
	Instructions        chars         `json:"instructions"` // responses
	Prompt              chars         `json:"prompt"`       // completions
	Tools               rawLen        `json:"tools"`
	N                   number        `json:"n"`
	BestOf              number        `json:"best_of"`
	MaxTokens           number        `json:"max_tokens"`
	MaxCompletionTokens number        `json:"max_completion_tokens"`
	MaxOutputTokens     number        `json:"max_output_tokens"`
}

// chatMessage is what the estimate reads of a chat message.
type chatMessage struct {
	Content   chars  `json:"content"`
	ToolCalls rawLen `json:"tool_calls"`
}

// The endpoints the estimate knows.
const (
	endpointOther = iota
	endpointChat
	endpointResponses
	endpointCompletions
	endpointEmbeddings
)

// openAIEndpoint returns the endpoint of a request to path.
func openAIEndpoint(path string) int {
	path = strings.TrimSuffix(path, "/")
	switch {
	case strings.HasSuffix(path, "/chat/completions"):
		return endpointChat
	case strings.HasSuffix(path, "/responses"):
		return endpointResponses
	case strings.HasSuffix(path, "/completions"):
		return endpointCompletions
	case strings.HasSuffix(path, "/embeddings"):
		return endpointEmbeddings
	}
	return endpointOther
}

// openAITokens returns the tokens OpenAI reserves for req, whose body is
// body, and its model; 0 for a request it does not know.
func (s *settings) openAITokens(req *http.Request, body []byte) (float64, string) {
	ep := openAIEndpoint(req.URL.Path)
	if ep == endpointOther || req.Method != http.MethodPost {
		return 0, ""
	}
	maxOut := s.maxTokens
	if ep == endpointCompletions {
		maxOut = 16
	}
	if body == nil {
		// No body to read (none, or too large to be given): its length
		// is all there is to go by.
		if req.ContentLength <= 0 {
			return 0, ""
		}
		tokens := tokensOf(chars(min(req.ContentLength, math.MaxInt32)))
		if ep != endpointEmbeddings {
			tokens += maxOut
		}
		return tokens, ""
	}
	var r openAIRequest
	if json.Unmarshal(body, &r) != nil {
		return 0, "" // the server refuses it unread
	}
	var in chars
	outputs := 1.0
	switch ep {
	case endpointChat:
		for _, m := range r.Messages {
			in += m.Content + chars(m.ToolCalls)
		}
		in += chars(r.Tools)
		outputs = max(r.N.or(1), 1)
		maxOut = r.MaxCompletionTokens.or(r.MaxTokens.or(maxOut))
	case endpointResponses:
		in = r.Input + r.Instructions + chars(r.Tools)
		maxOut = r.MaxOutputTokens.or(maxOut)
	case endpointCompletions:
		in = r.Prompt
		outputs = max(r.N.or(1), r.BestOf.or(1), 1)
		maxOut = r.MaxTokens.or(maxOut)
	case endpointEmbeddings:
		in, outputs = r.Input, 0
	}
	return tokensOf(in) + outputs*maxOut, r.Model
}

// deployment returns the Azure OpenAI deployment a request to path is
// for: the segment after /deployments/; "" if none.
func deployment(path string) string {
	_, rest, ok := strings.Cut(path, "/deployments/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// openAIUsageFields is a usage object of OpenAI's API.
type openAIUsageFields struct {
	PromptTokens     number `json:"prompt_tokens"`
	CompletionTokens number `json:"completion_tokens"`
	InputTokens      number `json:"input_tokens"`
	OutputTokens     number `json:"output_tokens"`
	TotalTokens      number `json:"total_tokens"`
}

// openAIUsage reads the tokens an answer of OpenAI's API used from the
// last usage object of its body's tail.
func openAIUsage(_ *http.Response, tail []byte) (polite.Usage, bool) {
	var tokens float64
	found := lastObject(tail, "usage", func(obj []byte) bool {
		var u openAIUsageFields
		if json.Unmarshal(obj, &u) != nil {
			return false
		}
		switch {
		case u.PromptTokens.set || u.CompletionTokens.set:
			tokens = u.PromptTokens.or(0) + u.CompletionTokens.or(0)
		case u.InputTokens.set || u.OutputTokens.set:
			tokens = u.InputTokens.or(0) + u.OutputTokens.or(0)
		case u.TotalTokens.set:
			tokens = u.TotalTokens.or(0)
		default:
			return false
		}
		return true
	})
	if !found {
		return polite.Usage{}, false
	}
	return polite.Usage{Cost: polite.Cost{Tokens: tokens}}, true
}
