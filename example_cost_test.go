package polite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/politehttp/polite"
)

// An API that counts tokens: each request says what it may cost (its
// prompt and max_tokens), waits until the quota the server states holds
// it, and gives back what it did not use once its answer says so. The
// server here stands for an LLM API that states its quota as OpenAI's
// does; package politecost has these functions ready for real APIs.
func ExampleWithCost() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-ratelimit-limit-tokens", "10000")
		w.Header().Set("x-ratelimit-remaining-tokens", "9000")
		w.Header().Set("x-ratelimit-reset-tokens", "6s")
		fmt.Fprint(w, `{"answer":"hi","usage":{"total_tokens":120}}`)
	}))
	defer srv.Close()

	estimate := func(req *http.Request, body []byte) (polite.Cost, string, error) {
		var r struct {
			Model     string `json:"model"`
			Prompt    string `json:"prompt"`
			MaxTokens int    `json:"max_tokens"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return polite.Cost{}, "", err
		}
		// What the server charges on admission; the quota is the model's.
		return polite.Cost{Tokens: float64(len(r.Prompt)/4 + r.MaxTokens)}, r.Model, nil
	}
	usage := func(_ *http.Response, tail []byte) (polite.Usage, bool) {
		i := bytes.LastIndex(tail, []byte(`"usage":`))
		var u struct {
			Total float64 `json:"total_tokens"`
		}
		if i < 0 || json.Unmarshal(bytes.TrimRight(tail[i+len(`"usage":`):], "}\n"), &u) != nil {
			return polite.Usage{}, false
		}
		return polite.Usage{Cost: polite.Cost{Tokens: u.Total}}, true
	}
	tr := polite.New(nil, polite.WithCost(estimate), polite.WithUsage(usage))
	client := &http.Client{Transport: tr}
	defer client.CloseIdleConnections()

	resp, err := client.Post(srv.URL, "application/json", strings.NewReader(`{"model":"small","prompt":"Say hi.","max_tokens":1000}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body) // read to the end: the usage settles the cost
	resp.Body.Close()
	fmt.Println(string(body))
	for s := range tr.Keys() {
		for _, c := range s.Costs {
			fmt.Printf("%s: %s, limit %.0f %s a %v\n", strings.TrimPrefix(s.Key, strings.TrimPrefix(srv.URL, "http://")), "quota", c.Limit, c.Unit, c.Window)
		}
	}
	// Output:
	// {"answer":"hi","usage":{"total_tokens":120}}
	// |small: quota, limit 10000 tokens a 1m0s
}

// A request larger than the server's whole limit fails at once, unsent.
func ExampleCostError() {
	tr := polite.New(busyOnce(), polite.WithQuota(polite.UnitPoints, 1000, time.Hour))
	ctx := polite.ContextWithCost(context.Background(), polite.Cost{Points: 5000})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.example/graphql", nil)
	_, err := tr.RoundTrip(req)
	var ce *polite.CostError
	if errors.As(err, &ce) {
		fmt.Printf("%v: %.0f %s asked, %.0f allowed\n", errors.Is(err, polite.ErrTooLarge), ce.Cost, ce.Unit, ce.Limit)
	}
	// Output: true: 5000 points asked, 1000 allowed
}

// A caller that holds the usage itself (an SDK's typed answer) settles
// the cost with Settle.
func ExampleSettle() {
	tr := polite.New(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return respond(req, http.StatusOK, io.NopCloser(strings.NewReader(`{"usage":{"total_tokens":40}}`))), nil
	}), polite.WithQuota(polite.UnitTokens, 100, time.Minute))
	ctx := polite.ContextWithCost(context.Background(), polite.Cost{Tokens: 100})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://api.example/v1/chat", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	fmt.Println(polite.Settle(resp, polite.Cost{Tokens: 40}))
	for s := range tr.Keys() {
		fmt.Printf("%.0f tokens left\n", s.Costs[0].Left)
	}
	// Output:
	// true
	// 60 tokens left
}

// A GraphQL API that answers a spent quota with 200 and an error in the
// body: polite reads the body's head, and retries as after a 429.
func ExampleWithThrottleBody() {
	calls := 0
	tr := polite.New(roundTripFunc(func(req *http.Request) (*http.Response, error) {
		calls++
		if calls == 1 {
			return respond(req, http.StatusOK, io.NopCloser(strings.NewReader(`{"errors":[{"extensions":{"code":"THROTTLED"}}]}`))), nil
		}
		return respond(req, http.StatusOK, io.NopCloser(strings.NewReader(`{"data":{"shop":{"name":"x"}}}`))), nil
	}), polite.WithBackoff(0, 0), polite.WithThrottleBody(512, func(_ *http.Response, head []byte) (time.Duration, bool) {
		return 10 * time.Millisecond, bytes.Contains(head, []byte(`"THROTTLED"`))
	}))
	req, _ := http.NewRequest(http.MethodPost, "http://shop.example/admin/api/graphql.json", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(calls, "attempts:", string(body))
	// Output: 2 attempts: {"data":{"shop":{"name":"x"}}}
}
