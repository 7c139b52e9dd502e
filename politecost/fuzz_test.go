package politecost

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/politehttp/polite"
)

// The fuzz targets below feed every reader of outside input (request
// bodies, answers' tails and heads, GraphQL queries) whatever the fuzzer
// makes: none may panic, loop, or return a cost that is negative or NaN.
// Their seed corpora are in testdata/fuzz, made from the bodies of
// testdata/.

// seeds adds the files of testdata/ named to f.
func seeds(f *testing.F, names ...string) {
	for _, name := range names {
		f.Add(testdata(f, name))
	}
}

// validCost fails t if a figure of c is negative or NaN.
func validCost(t *testing.T, c polite.Cost) {
	t.Helper()
	for _, x := range []float64{c.Tokens, c.InputTokens, c.OutputTokens, c.Points, c.Bytes} {
		if x < 0 || math.IsNaN(x) {
			t.Fatalf("cost %+v", c)
		}
	}
}

func FuzzOpenAIEstimate(f *testing.F) {
	f.Add([]byte(`{"model":"gpt-4.1","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":10,"n":2}`))
	f.Add([]byte(`{"model":"gpt-4.1","input":[{"role":"user","content":"hi"},{"type":"function_call_output","output":"x"}],"instructions":"be brief"}`))
	f.Add([]byte(`{"model":"e","input":[[1,2,3],"text"]}`))
	s := newSettings(nil)
	paths := []string{"/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/embeddings", "/openai/deployments/d/chat/completions"}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, p := range paths {
			req := post(t, "https://api.openai.com"+p, "")
			tokens, _ := s.openAITokens(req, body)
			validCost(t, polite.Cost{Tokens: tokens})
		}
	})
}

func FuzzAnthropicEstimate(f *testing.F) {
	f.Add([]byte(`{"model":"claude","max_tokens":100,"system":[{"type":"text","text":"x"}],"messages":[{"role":"user","content":[{"type":"tool_result","content":[{"type":"text","text":"y"}]}]}]}`))
	s := newSettings(nil)
	f.Fuzz(func(t *testing.T, body []byte) {
		in, out, _ := s.anthropicTokens(post(t, "https://api.anthropic.com/v1/messages", ""), body)
		validCost(t, polite.Cost{InputTokens: in, OutputTokens: out})
	})
}

func FuzzOpenAIUsage(f *testing.F) {
	seeds(f, "openai_chat.json", "openai_chat_stream.sse", "openai_responses.json", "openai_responses_stream.sse")
	f.Fuzz(func(t *testing.T, tail []byte) {
		u, ok := openAIUsage(nil, tail)
		validCost(t, u.Cost)
		if !ok && u.Cost != (polite.Cost{}) {
			t.Fatalf("no usage, yet %+v", u)
		}
	})
}

func FuzzAnthropicUsage(f *testing.F) {
	seeds(f, "anthropic_message.json", "anthropic_stream.sse")
	s := newSettings(nil)
	req := post(f, "https://api.anthropic.com/v1/messages", `{"model":"claude","max_tokens":100,"messages":[{"role":"user","content":"hello"}]}`)
	f.Fuzz(func(t *testing.T, tail []byte) {
		for _, ct := range []string{"", "application/json", "text/event-stream"} {
			u, _ := s.anthropicUsage(answer(req, ct), tail)
			validCost(t, u.Cost)
		}
	})
}

func FuzzGraphQLCost(f *testing.F) {
	f.Add(githubDocQuery, `{}`, "")
	f.Add(githubNodesQuery, `{"first": 10}`, "")
	f.Add(`query Q($n: Int = 5) { a(first: $n) { ...F } } fragment F on T { b(last: 3) { ... on U { c(first: $m) { id } } } }`, `{"m": 7}`, "Q")
	f.Add(`{ a(first: 1, b: {c: [1, "}", $d]}) @x(if: true) { """ } """ } }`, `{"d": null}`, "")
	f.Fuzz(func(t *testing.T, query, vars, opName string) {
		var v map[string]json.RawMessage
		_ = json.Unmarshal([]byte(vars), &v)
		doc := parseGraphQL(query)
		if op, ok := doc.op(opName); ok {
			r := doc.githubRequests(op, v)
			if !(r >= 0 && r <= gqlMaxRequests) {
				t.Fatalf("requests %v", r)
			}
		}
		body, err := json.Marshal(map[string]any{"query": query, "variables": v, "operationName": opName})
		if err != nil {
			return
		}
		if p := githubPoints(body); !(p >= 1) || math.IsInf(p, 0) {
			t.Fatalf("points %v", p)
		}
		sh := newShopify()
		req := post(t, shopifyURL, "")
		c, _, _ := sh.estimate(req, body)
		validCost(t, c)
	})
}

func FuzzGitHubUsage(f *testing.F) {
	seeds(f, "github_ratelimit.json", "github_rate_limited.json")
	f.Fuzz(func(t *testing.T, tail []byte) {
		u, _ := githubUsage(nil, tail)
		validCost(t, u.Cost)
	})
}

func FuzzShopifyUsage(f *testing.F) {
	seeds(f, "shopify_query.json", "shopify_throttled.json")
	req := post(f, shopifyURL, `{"query":"{ shop { name } }"}`)
	f.Fuzz(func(t *testing.T, tail []byte) {
		sh := newShopify()
		u, _ := sh.usage(answer(req, ""), tail)
		validCost(t, u.Cost)
		for _, q := range u.Quotas {
			if !(q.Limit > 0) || q.Remaining < 0 || q.Remaining > q.Limit || q.Window <= 0 || q.Unit != polite.UnitPoints {
				t.Fatalf("quota %+v", q)
			}
		}
		for _, c := range sh.learnt {
			if c < 0 || math.IsNaN(c) {
				t.Fatalf("learnt %v", c)
			}
		}
	})
}

func FuzzThrottle(f *testing.F) {
	seeds(f, "github_rate_limited.json", "github_secondary.json", "shopify_throttled.json", "shopify_query.json")
	req := post(f, shopifyURL, `{"query":"{ shop { name } }"}`)
	f.Fuzz(func(t *testing.T, head []byte) {
		if wait, _ := githubThrottle(nil, head); wait < 0 || wait > time.Minute {
			t.Fatalf("GitHub's wait %v", wait)
		}
		if wait, _ := newShopify().throttle(answer(req, ""), head); wait < 0 {
			t.Fatalf("Shopify's wait %v", wait)
		}
		if !strings.Contains(string(head), "THROTTLED") {
			if _, throttled := newShopify().throttle(answer(req, ""), head); throttled {
				t.Fatal("throttled without THROTTLED")
			}
		}
	})
}

// textChars counts a JSON string's characters as its decoded text has
// them (but a character beyond U+FFFF written as two escapes, which counts
// two), and an array's as the sum of its elements'.
func FuzzTextChars(f *testing.F) {
	f.Add(`"héllo \n \"q\" \u00e9 日本"`)
	f.Add(`["a", {"type":"text","text":"bc"}, [1, 2], null, {"input":{"x":1}}]`)
	f.Add(`{"content":[{"text":"x"}],"output":"yz","arguments":"{}"}`)
	f.Fuzz(func(t *testing.T, raw string) {
		b := []byte(raw)
		count, n := textChars(b, 0)
		if count < 0 || n < 0 || n > len(b) {
			t.Fatalf("count %d, length %d of %d", count, n, len(b))
		}
		var s string
		if !utf8.Valid(b) || json.Unmarshal(b, &s) != nil || strings.Contains(strings.ToLower(raw), `\ud`) {
			return
		}
		if want := utf8.RuneCountInString(s); count != want {
			t.Fatalf("%s: %d characters counted, %d decoded", raw, count, want)
		}
	})
}

// Nesting past maxTextDepth is skipped, not followed: the text within
// counts nothing, the value's length is whole.
func TestTextCharsDeep(t *testing.T) {
	deep := strings.Repeat(`[`, 1<<20) + `"abc"` + strings.Repeat(`]`, 1<<20)
	count, n := textChars([]byte(deep), 0)
	if count != 0 || n != len(deep) {
		t.Fatalf("count %d, length %d of %d", count, n, len(deep))
	}
	shallow := strings.Repeat(`[`, maxTextDepth) + `"abc"` + strings.Repeat(`]`, maxTextDepth)
	if count, _ := textChars([]byte(shallow), 0); count != 3 {
		t.Fatalf("count %d", count)
	}
}
