package politecost

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The estimate of a request to the Messages API: ceil(chars/4) of its
// system prompt, messages and tools in input tokens, max_tokens in output
// tokens.
func TestAnthropicEstimate(t *testing.T) {
	const messages = "https://api.anthropic.com/v1/messages"
	tools := `[{"name":"get_weather","description":"Get the current weather in a given location","input_schema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}]`
	tests := []struct {
		name    string
		url     string
		body    string
		length  int64
		in, out float64
		model   string
	}{
		{
			name:  "system and messages",
			url:   messages,
			body:  `{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"You are a pirate.","messages":[{"role":"user","content":"Hello, world"}]}`,
			in:    ceil4(17 + 12),
			out:   1024,
			model: "claude-sonnet-4-5",
		},
		{
			name: "blocks: text, image, tool use and result, cached system",
			url:  messages,
			body: `{"model":"claude-opus-4-6","max_tokens":2048,"tools":` + tools + `,` +
				`"system":[{"type":"text","text":"You answer briefly.","cache_control":{"type":"ephemeral"}}],` +
				`"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQSkZJRgABAQAAAQABAAD"}},{"type":"text","text":"Weather in this city?"}]},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"location":"Paris"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"15 degrees"}]}]}]}`,
			in:    ceil4(len(tools) + 19 + 21 + len(`{"location":"Paris"}`) + 10),
			out:   2048,
			model: "claude-opus-4-6",
		},
		{
			name:  "no max_tokens: the default",
			url:   messages,
			body:  `{"model":"claude-haiku-4-5","messages":[{"role":"user","content":"abcd"}]}`,
			in:    1,
			out:   DefaultMaxTokens,
			model: "claude-haiku-4-5",
		},
		{name: "counting tokens costs none", url: messages + "/count_tokens", body: `{"model":"m","messages":[{"role":"user","content":"abcd"}]}`},
		{name: "batches are counted apart", url: messages + "/batches", body: `{"requests":[]}`},
		{name: "not JSON", url: messages, body: `[`},
		{name: "a body not given: its length", url: messages, length: 400, in: 100, out: DefaultMaxTokens},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSettings(nil)
			req := post(t, tt.url, "")
			req.ContentLength = tt.length
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			in, out, model := s.anthropicTokens(req, body)
			assert.Equal(t, tt.in, in, "input")
			assert.Equal(t, tt.out, out, "output")
			assert.Equal(t, tt.model, model)
		})
	}
}

// The usage of the Messages API's answers: input_tokens and
// cache_creation_input_tokens in input, output_tokens in output; a stream's
// from its message_start and its last message_delta.
func TestAnthropicUsage(t *testing.T) {
	stream := testdata(t, "anthropic_stream.sse")
	deltaAt := bytes.Index(stream, []byte("event: message_delta"))
	require.Positive(t, deltaAt)
	tests := []struct {
		name    string
		body    []byte
		ct      string
		in, out float64
		ok      bool
	}{
		{name: "JSON", body: testdata(t, "anthropic_message.json"), ct: "application/json", in: 2095 + 2051, out: 503, ok: true},
		{name: "stream", body: stream, ct: "text/event-stream; charset=utf-8", in: 25 + 10, out: 15, ok: true},
		{name: "stream, no content type", body: stream, in: 25 + 10, out: 15, ok: true},
		{
			name: "a message_delta that states the input wins",
			body: append(append([]byte(nil), stream[:deltaAt]...),
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"input_tokens\":30,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":100,\"output_tokens\":40}}\n\n"...),
			ct: "text/event-stream", in: 30, out: 40, ok: true,
		},
		{
			name: "the last message_delta wins",
			body: append(append([]byte(nil), stream...),
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"output_tokens\":99}}\n\n"...),
			ct: "text/event-stream", in: 35, out: 99, ok: true,
		},
		{
			name: "a stream ended by an error is not settled",
			body: append(append([]byte(nil), stream[:deltaAt]...),
				"event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n"...),
			ct: "text/event-stream",
		},
		{name: "a refusal", body: []byte(`{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 8,000 output tokens per minute."}}`), ct: "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSettings(nil)
			u, ok := s.anthropicUsage(answer(nil, tt.ct), tailOf(tt.body))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.in, u.Cost.InputTokens, "input")
			assert.Equal(t, tt.out, u.Cost.OutputTokens, "output")
			assert.Zero(t, u.Cost.Tokens)
		})
	}
}

// A stream longer than the tail has lost its message_start: its input is
// estimated again from the request's body, read through GetBody; without
// it, the stream is not settled.
func TestAnthropicUsageOfALongStream(t *testing.T) {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n")
	for range 2000 {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"more words\"}}\n\n")
	}
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":4000}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	body := []byte(b.String())
	require.Greater(t, len(body), 64<<10)
	tail := tailOf(body)
	require.NotContains(t, string(tail), "message_start")

	s := newSettings(nil)
	req := post(t, "https://api.anthropic.com/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":4000,"stream":true,"messages":[{"role":"user","content":"Write a long story, please"}]}`)
	u, ok := s.anthropicUsage(answer(req, "text/event-stream"), tail)
	assert.True(t, ok)
	assert.Equal(t, ceil4(26), u.Cost.InputTokens)
	assert.Equal(t, 4000.0, u.Cost.OutputTokens)

	req.GetBody = nil
	_, ok = s.anthropicUsage(answer(req, "text/event-stream"), tail)
	assert.False(t, ok)
	_, ok = s.anthropicUsage(answer(nil, "text/event-stream"), tail)
	assert.False(t, ok)
	_, ok = s.anthropicUsage(&http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}}, tail)
	assert.False(t, ok)
}
