package politecost

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// typical returns a request body of about 2 KB of the dialect named: a
// system prompt and a short conversation for the LLM APIs, a query with
// nested connections, fragments and variables for the GraphQL APIs.
func typical(dialect string) string {
	system := strings.Repeat("You are a careful assistant that answers in short, plain sentences. ", 8)
	turn := strings.Repeat("Tell me about the history of the city of Lyon, its silk trade and its bridges. ", 5)
	msg := func(role, content string) map[string]any { return map[string]any{"role": role, "content": content} }
	var v any
	switch dialect {
	case "openai-chat":
		v = map[string]any{"model": "gpt-4.1", "max_completion_tokens": 1024, "temperature": 0.2,
			"messages": []any{msg("system", system), msg("user", turn), msg("assistant", turn), msg("user", turn)}}
	case "openai-responses":
		v = map[string]any{"model": "gpt-4.1", "instructions": system, "max_output_tokens": 1024,
			"input": []any{msg("user", turn), msg("assistant", turn), map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_text", "text": turn}}}}}
	case "anthropic":
		v = map[string]any{"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": system,
			"messages": []any{msg("user", turn), msg("assistant", turn), map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": turn}}}}}
	case "graphql":
		q := `query Repos($owner: String!, $repos: Int = 50, $issues: Int!, $after: String) {
  repositoryOwner(login: $owner) {
    login
    repositories(first: $repos, after: $after, orderBy: {field: UPDATED_AT, direction: DESC}) {
      totalCount
      pageInfo { hasNextPage endCursor }
      nodes {
        ...RepoFields
        issues(first: $issues, states: [OPEN], orderBy: {field: CREATED_AT, direction: DESC}) {
          totalCount
          nodes { ...IssueFields labels(first: 10) { nodes { name color } } }
        }
        pullRequests(last: 20, states: [OPEN, MERGED]) {
          nodes { number title author { login } reviews(first: 5) { nodes { state author { login } } } }
        }
      }
    }
  }
  rateLimit { cost remaining resetAt }
}
fragment RepoFields on Repository { name nameWithOwner description url stargazerCount forkCount isArchived updatedAt primaryLanguage { name } }
fragment IssueFields on Issue { number title url createdAt author { login } comments { totalCount } }`
		q += "\n# " + strings.Repeat("padding to two kilobytes ", 36)
		v = map[string]any{"query": q, "operationName": "Repos", "variables": map[string]any{"owner": "golang", "issues": 20, "after": nil}}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Each estimator on a typical 2 KB body, beside the baseline of decoding
// the same body into a map (what the estimators avoid).
func BenchmarkEstimate(b *testing.B) {
	s := newSettings(nil)
	sh := newShopify()
	known := newShopify()
	body := []byte(typical("graphql"))
	known.learnt[known.queryID(mustGraphQL(body))] = 120
	tests := []struct {
		name, dialect, url string
		est                func(*http.Request, []byte)
	}{
		{"openai-chat", "openai-chat", "https://api.openai.com/v1/chat/completions", func(r *http.Request, b []byte) { s.openAITokens(r, b) }},
		{"openai-responses", "openai-responses", "https://api.openai.com/v1/responses", func(r *http.Request, b []byte) { s.openAITokens(r, b) }},
		{"azure-openai", "openai-chat", "https://x.openai.azure.com/openai/deployments/d/chat/completions", func(r *http.Request, b []byte) { s.openAITokens(r, b); deployment(r.URL.Path) }},
		{"anthropic", "anthropic", "https://api.anthropic.com/v1/messages", func(r *http.Request, b []byte) { s.anthropicTokens(r, b) }},
		{"github-graphql", "graphql", "https://api.github.com/graphql", func(r *http.Request, b []byte) { _, _, _ = githubEstimate(r, b) }},
		{"shopify-graphql-new", "graphql", shopifyURL, func(r *http.Request, b []byte) { _, _, _ = sh.estimate(r, b) }},
		{"shopify-graphql-learnt", "graphql", shopifyURL, func(r *http.Request, b []byte) { _, _, _ = known.estimate(r, b) }},
		{"baseline-map", "openai-chat", "https://api.openai.com/v1/chat/completions", func(_ *http.Request, b []byte) {
			var m map[string]any
			_ = json.Unmarshal(b, &m)
		}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			body := []byte(typical(tt.dialect))
			req, _ := http.NewRequest(http.MethodPost, tt.url, nil)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				tt.est(req, body)
			}
		})
	}
}

// mustGraphQL decodes a GraphQL request's body.
func mustGraphQL(body []byte) shopifyRequest {
	var r shopifyRequest
	if err := json.Unmarshal(body, &r); err != nil {
		panic(err)
	}
	return r
}

// Each usage reader on the tail of a typical answer.
func BenchmarkUsage(b *testing.B) {
	s := newSettings(nil)
	sh := newShopify()
	tests := []struct {
		name string
		tail []byte
		read func([]byte)
	}{
		{"openai-json", testdata(b, "openai_chat.json"), func(t []byte) { openAIUsage(nil, t) }},
		{"openai-stream", testdata(b, "openai_chat_stream.sse"), func(t []byte) { openAIUsage(nil, t) }},
		{"anthropic-json", testdata(b, "anthropic_message.json"), func(t []byte) { s.anthropicUsage(answer(nil, "application/json"), t) }},
		{"anthropic-stream", testdata(b, "anthropic_stream.sse"), func(t []byte) { s.anthropicUsage(answer(nil, "text/event-stream"), t) }},
		{"github", testdata(b, "github_ratelimit.json"), func(t []byte) { githubUsage(nil, t) }},
		{"shopify", testdata(b, "shopify_query.json"), func(t []byte) { sh.usage(nil, t) }},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.tail)))
			b.ReportAllocs()
			for b.Loop() {
				tt.read(tt.tail)
			}
		})
	}
}
