package politecost_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politecost"
)

// spent returns the scope of tr's only key, and what its quota in unit
// has spent of limit, as tr counts it.
func spent(tr *polite.Transport, unit string, limit float64) (scope string, used float64) {
	for k := range tr.Keys() {
		_, scope, _ = strings.Cut(k.Key, "|")
		for _, c := range k.Costs {
			if c.Unit == unit {
				used = limit - c.Left
			}
		}
	}
	return scope, used
}

// A chat completion: polite takes its estimate (ceil(chars/4) of the
// messages and max_tokens) from the model's quota before sending it, and
// settles it to the usage the answer states once the caller has read it.
// The quota is stated here, and refills slowly enough to read; OpenAI
// states it in its headers, which polite reads.
func ExampleOpenAI() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":14,"completion_tokens":2,"total_tokens":16}}`)
	}))
	defer srv.Close()
	const quota = 1000000
	tr := polite.New(nil, politecost.OpenAI(), polite.WithQuota(polite.UnitTokens, quota, 24*time.Hour))
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	// 22 characters: 6 tokens, and max_tokens 100.
	body := `{"model":"gpt-4.1","max_tokens":100,"messages":[{"role":"user","content":"Say hello in one word."}]}`
	resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	model, used := spent(tr, polite.UnitTokens, quota)
	fmt.Printf("%s: %.0f tokens taken\n", model, used)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, used = spent(tr, polite.UnitTokens, quota)
	fmt.Printf("%s: %.0f tokens once settled\n", model, used)
	// Output:
	// gpt-4.1: 106 tokens taken
	// gpt-4.1: 16 tokens once settled
}

// A streamed message: polite takes its input estimate and max_tokens from
// the model's two quotas, and settles both from the stream's events: the
// input from message_start (cache writes count, cache reads do not), the
// output from the last message_delta.
func ExampleAnthropic() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\n"+
			`data: {"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","usage":{"input_tokens":9,"cache_creation_input_tokens":3,"cache_read_input_tokens":40,"output_tokens":1}}}`+"\n\n"+
			"event: content_block_delta\n"+
			`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello!"}}`+"\n\n"+
			"event: message_delta\n"+
			`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":5}}`+"\n\n"+
			"event: message_stop\n"+`data: {"type":"message_stop"}`+"\n\n")
	}))
	defer srv.Close()
	const quota = 1000000
	tr := polite.New(nil, politecost.Anthropic(),
		polite.WithQuota(polite.UnitInputTokens, quota, 24*time.Hour),
		polite.WithQuota(polite.UnitOutputTokens, quota, 24*time.Hour))
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	// 9 + 13 characters: 6 input tokens; max_tokens 1024.
	body := `{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"system":"Be brief.","messages":[{"role":"user","content":"Hello, Claude"}]}`
	resp, err := client.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	model, in := spent(tr, polite.UnitInputTokens, quota)
	_, out := spent(tr, polite.UnitOutputTokens, quota)
	fmt.Printf("%s: %.0f input and %.0f output tokens taken\n", model, in, out)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, in = spent(tr, polite.UnitInputTokens, quota)
	_, out = spent(tr, polite.UnitOutputTokens, quota)
	fmt.Printf("%s: %.0f input and %.0f output tokens once settled\n", model, in, out)
	// Output:
	// claude-sonnet-4-5: 6 input and 1024 output tokens taken
	// claude-sonnet-4-5: 12 input and 5 output tokens once settled
}

// An Azure OpenAI deployment states only what is left of its quota: given
// its tokens a minute, polite holds its requests to it from the first,
// keyed by the deployment the path names. Azure settles nothing: the
// estimate is what it charges.
func ExampleAzureOpenAI() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-ratelimit-remaining-requests", "179")
		w.Header().Set("x-ratelimit-remaining-tokens", "29894")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":14,"completion_tokens":2,"total_tokens":16}}`)
	}))
	defer srv.Close()
	tr := polite.New(nil, politecost.AzureOpenAI(30000))
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	body := `{"max_tokens":100,"messages":[{"role":"user","content":"Say hello in one word."}]}`
	resp, err := client.Post(srv.URL+"/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for k := range tr.Keys() {
		_, deployment, _ := strings.Cut(k.Key, "|")
		for _, c := range k.Costs {
			fmt.Printf("%s: %.0f %s every %v\n", deployment, c.Limit, c.Unit, c.Window)
		}
	}
	// Output:
	// gpt-4o-prod: 30000 tokens every 1m0s
}

// A query to GitHub's GraphQL API: polite takes the points GitHub's rule
// gives it (the example of GitHub's documentation: 51) and settles them to
// the cost the answer states, asked for with rateLimit { cost }. The
// quota is stated here; GitHub states it in its headers, which polite
// reads.
func ExampleGitHubGraphQL() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"data":{"viewer":{"login":"octocat","repositories":{"edges":[]}},"rateLimit":{"cost":1}}}`)
	}))
	defer srv.Close()
	const quota = 1000000
	tr := polite.New(nil, politecost.GitHubGraphQL(), polite.WithQuota(polite.UnitPoints, quota, 24*time.Hour))
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	query := `query { viewer { login repositories(first: 100) { edges { node { issues(first: 50) {
		edges { node { labels(first: 60) { edges { node { name } } } } } } } } } } rateLimit { cost } }`
	body := `{"query":` + fmt.Sprintf("%q", query) + `}`
	resp, err := client.Post(srv.URL+"/graphql", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	scope, used := spent(tr, polite.UnitPoints, quota)
	fmt.Printf("%s: %.0f points taken\n", scope, used)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_, used = spent(tr, polite.UnitPoints, quota)
	fmt.Printf("%s: %.0f point once settled\n", scope, used)
	// Output:
	// graphql: 51 points taken
	// graphql: 1 point once settled
}

// A query to Shopify's GraphQL Admin API: Shopify states the store's
// bucket in every answer (extensions.cost.throttleStatus), which becomes
// the key's quota of points, and the query's requested cost, which polite
// charges the same query from then on.
func ExampleShopifyGraphQL() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"data":{"products":{"edges":[{"node":{"id":"gid://shopify/Product/1","title":"Snowboard"}}]}},`+
			`"extensions":{"cost":{"requestedQueryCost":52,"actualQueryCost":4,"throttleStatus":{"maximumAvailable":2000.0,"currentlyAvailable":1996,"restoreRate":100.0}}}}`)
	}))
	defer srv.Close()
	tr := polite.New(nil, politecost.ShopifyGraphQL())
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	body := `{"query":"query { products(first: 50) { edges { node { id title } } } }"}`
	resp, err := client.Post(srv.URL+"/admin/api/2025-01/graphql.json", "application/json", strings.NewReader(body))
	if err != nil {
		fmt.Println(err)
		return
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(strings.Contains(string(answer), "Snowboard"))
	for k := range tr.Keys() {
		for _, c := range k.Costs {
			fmt.Printf("the store's bucket: %.0f %s, refilled in %v\n", c.Limit, c.Unit, c.Window)
		}
	}
	// Output:
	// true
	// the store's bucket: 2000 points, refilled in 20s
}
