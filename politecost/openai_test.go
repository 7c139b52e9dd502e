package politecost

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The estimate of each kind of request to OpenAI's API: ceil(chars/4) of
// its input and n times its maximum output; 0 for the others.
func TestOpenAIEstimate(t *testing.T) {
	const chat = "https://api.openai.com/v1/chat/completions"
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	calls := `[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]`
	tests := []struct {
		name   string
		method string
		url    string
		body   string // "-": no body to read, its length only
		length int64
		opts   []Option
		tokens float64
		model  string
	}{
		{
			name: "chat",
			url:  chat,
			body: `{"model":"gpt-4.1","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Hello!"}],"max_tokens":100}`,
			// 28 + 6 characters: 9 tokens.
			tokens: 9 + 100, model: "gpt-4.1",
		},
		{
			name: "content parts and n",
			url:  chat,
			body: `{"model":"gpt-4o","n":2,"max_completion_tokens":300,"messages":[{"role":"user","content":[{"type":"text","text":"What is in this image?"},{"type":"image_url","image_url":{"url":"https://upload.wikimedia.org/wikipedia/commons/thumb/d/dd/Gfp-wisconsin-madison-the-nature-boardwalk.jpg/2560px-Gfp-wisconsin-madison-the-nature-boardwalk.jpg"}}]}]}`,
			// 22 characters of text: 6 tokens; the image counts nothing.
			tokens: 6 + 2*300, model: "gpt-4o",
		},
		{
			name:   "max_completion_tokens wins over max_tokens",
			url:    chat,
			body:   `{"model":"o3","messages":[{"role":"user","content":"abcd"}],"max_tokens":10,"max_completion_tokens":20}`,
			tokens: 1 + 20, model: "o3",
		},
		{
			name:   "no maximum: the default",
			url:    chat,
			body:   `{"model":"gpt-4.1","messages":[{"role":"user","content":"abcd"}]}`,
			tokens: 1 + DefaultMaxTokens, model: "gpt-4.1",
		},
		{
			name:   "no maximum: the default set",
			url:    chat,
			body:   `{"model":"gpt-4.1","messages":[{"role":"user","content":"abcd"}]}`,
			opts:   []Option{WithDefaultMaxTokens(32768)},
			tokens: 1 + 32768, model: "gpt-4.1",
		},
		{
			name:   "tools and tool calls count as their JSON",
			url:    chat,
			body:   `{"model":"gpt-4.1","max_tokens":0,"tools":` + tools + `,"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":` + calls + `},{"role":"tool","tool_call_id":"call_1","content":"20C"}]}`,
			tokens: ceil4(len(tools) + 8 + len(calls) + 3), model: "gpt-4.1",
		},
		{
			name:   "characters, not bytes; an escape is one",
			url:    chat,
			body:   `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"héllo wörld 日本 \n\t\"\u00e9"}]}`,
			tokens: ceil4(14 + 5), model: "m",
		},
		{
			name:   "Responses API: input and instructions",
			url:    "https://api.openai.com/v1/responses",
			body:   `{"model":"gpt-4.1","instructions":"Talk like a pirate.","input":"Tell me a three sentence bedtime story about a unicorn.","max_output_tokens":500}`,
			tokens: ceil4(19+55) + 500, model: "gpt-4.1",
		},
		{
			name:   "Responses API: input items",
			url:    "https://api.openai.com/v1/responses",
			body:   `{"model":"gpt-4.1","input":[{"role":"user","content":[{"type":"input_text","text":"what is in this image?"},{"type":"input_image","image_url":"https://example.com/a.jpg"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c","output":"sunny"}]}`,
			tokens: ceil4(22+7+5) + DefaultMaxTokens, model: "gpt-4.1",
		},
		{
			name:   "completions: best_of, and 16 by default",
			url:    "https://api.openai.com/v1/completions",
			body:   `{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test","n":2,"best_of":3}`,
			tokens: 5 + 3*16, model: "gpt-3.5-turbo-instruct",
		},
		{
			name:   "embeddings: no output; a token array counts its tokens",
			url:    "https://api.openai.com/v1/embeddings",
			body:   `{"model":"text-embedding-3-small","input":["The food was delicious",[1,2,3]]}`,
			tokens: ceil4(21) + 3, model: "text-embedding-3-small",
		},
		{
			name:   "a proxy's prefix and a trailing slash",
			url:    "https://gateway.example/openai/v1/chat/completions/",
			body:   `{"model":"gpt-4.1","messages":[{"role":"user","content":"abcd"}],"max_tokens":1}`,
			tokens: 2, model: "gpt-4.1",
		},
		{name: "a GET", method: http.MethodGet, url: "https://api.openai.com/v1/models", tokens: 0},
		{name: "another endpoint", url: "https://api.openai.com/v1/images/generations", body: `{"model":"gpt-image-1","prompt":"a cat"}`, tokens: 0},
		{name: "not JSON", url: chat, body: `{"model":`, tokens: 0},
		{name: "a body not given: its length", url: chat, body: "-", length: 4001, tokens: 1001 + DefaultMaxTokens},
		{name: "no body at all", url: chat, body: "-", tokens: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSettings(tt.opts)
			req := post(t, tt.url, "")
			if tt.method != "" {
				req.Method = tt.method
			}
			var body []byte
			if tt.body != "-" && tt.body != "" {
				body = []byte(tt.body)
			}
			req.ContentLength = tt.length
			tokens, model := s.openAITokens(req, body)
			assert.Equal(t, tt.tokens, tokens)
			assert.Equal(t, tt.model, model)
		})
	}
}

// ceil4 returns ceil(n/4).
func ceil4(n int) float64 { return float64((n + 3) / 4) }

// The usage of OpenAI's answers, JSON and streams, as the documentation
// shows them; an answer that states none leaves the estimate standing.
func TestOpenAIUsage(t *testing.T) {
	stream := testdata(t, "openai_chat_stream.sse")
	cut := stream[:bytes.LastIndex(stream, []byte("data: {"))] // the usage event lost
	tests := []struct {
		name   string
		body   []byte
		tokens float64
		ok     bool
	}{
		{name: "chat", body: testdata(t, "openai_chat.json"), tokens: 1117 + 46, ok: true},
		{name: "chat stream with include_usage", body: stream, tokens: 9 + 12, ok: true},
		{name: "Responses API", body: testdata(t, "openai_responses.json"), tokens: 36 + 87, ok: true},
		{name: "Responses API stream", body: testdata(t, "openai_responses_stream.sse"), tokens: 37 + 11, ok: true},
		{name: "embeddings", body: []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.0023064255,-0.009327292]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`), tokens: 8, ok: true},
		{name: "total only", body: []byte(`{"usage":{"total_tokens":77}}`), tokens: 77, ok: true},
		{name: "a stream cut before its usage", body: cut},
		{name: "a stream without include_usage", body: bytes.ReplaceAll(cut, []byte(`,"usage":null`), nil)},
		{name: "a refusal", body: []byte(`{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)},
		{name: "the usage object cut", body: []byte(`"usage":{"prompt_tokens":9,"completion_tok`)},
		{name: "usage in a string only", body: []byte(`{"choices":[{"message":{"content":"\"usage\":{\"total_tokens\":5}"}}]}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ok := openAIUsage(nil, tailOf(tt.body))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.tokens, u.Cost.Tokens)
			assert.Empty(t, u.Quotas)
		})
	}
}

// A long answer's tail is not a JSON document: the usage at its end is
// found all the same.
func TestOpenAIUsageInALongStream(t *testing.T) {
	var b strings.Builder
	for range 3000 {
		b.WriteString(`data: {"id":"chatcmpl-123","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"word "}}],"usage":null}` + "\n\n")
	}
	b.WriteString(`data: {"id":"chatcmpl-123","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":3000,"total_tokens":4000}}` + "\n\ndata: [DONE]\n\n")
	body := []byte(b.String())
	assert.Greater(t, len(body), 64<<10)
	u, ok := openAIUsage(nil, tailOf(body))
	assert.True(t, ok)
	assert.Equal(t, 4000.0, u.Cost.Tokens)
}

// Azure's estimate is OpenAI's, scoped by the deployment the path names.
func TestAzureDeployment(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/openai/deployments/gpt-4o-prod/chat/completions", "gpt-4o-prod"},
		{"/openai/deployments/emb/embeddings", "emb"},
		{"/openai/deployments/", ""},
		{"/openai/v1/chat/completions", ""},
		{"/v1/chat/completions", ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, deployment(tt.path), tt.path)
	}
}
