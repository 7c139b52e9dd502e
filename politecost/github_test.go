package politecost

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/politehttp/polite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The estimate of a request to GitHub's GraphQL API: its points, scoped
// "graphql"; other requests cost nothing.
func TestGitHubEstimate(t *testing.T) {
	body, err := json.Marshal(map[string]any{"query": githubDocQuery})
	require.NoError(t, err)
	tests := []struct {
		name   string
		method string
		url    string
		body   []byte
		points float64
		scope  string
	}{
		{name: "a query", url: "https://api.github.com/graphql", body: body, points: 51, scope: "graphql"},
		{name: "Enterprise Server", url: "https://ghe.example.com/api/graphql", body: body, points: 51, scope: "graphql"},
		{name: "no body to read: the minimum", url: "https://api.github.com/graphql", points: 1, scope: "graphql"},
		{name: "not JSON: the minimum", url: "https://api.github.com/graphql", body: []byte(`query { viewer { login } }`), points: 1, scope: "graphql"},
		{name: "the REST API", url: "https://api.github.com/repos/octocat/hello-world/issues", body: []byte(`{"title":"x"}`)},
		{name: "a GET", method: http.MethodGet, url: "https://api.github.com/graphql"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := post(t, tt.url, "")
			if tt.method != "" {
				req.Method = tt.method
			}
			cost, scope, err := githubEstimate(req, tt.body)
			require.NoError(t, err)
			assert.Equal(t, polite.Cost{Points: tt.points}, cost)
			assert.Equal(t, tt.scope, scope)
		})
	}
}

// The settlement reads rateLimit.cost, the last one, not one quoted in
// the data.
func TestGitHubUsage(t *testing.T) {
	tests := []struct {
		name   string
		body   []byte
		points float64
		ok     bool
	}{
		{name: "asked for", body: testdata(t, "github_ratelimit.json"), points: 1, ok: true},
		{name: "cost 0 is a cost", body: []byte(`{"data":{"rateLimit":{"cost":0}}}`), points: 0, ok: true},
		{name: "not asked for", body: []byte(`{"data":{"viewer":{"login":"octocat"}}}`)},
		{name: "asked for without its cost", body: []byte(`{"data":{"rateLimit":{"remaining":4999}}}`)},
		{name: "a throttle", body: testdata(t, "github_rate_limited.json")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ok := githubUsage(nil, tailOf(tt.body))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, polite.Usage{Cost: polite.Cost{Points: tt.points}}, u)
		})
	}
}

// A 200 of GitHub's GraphQL API is a throttle if an error says the
// primary limit is spent (its reset is in the headers, for polite), or a
// secondary limit was hit (a minute, unless Retry-After says).
func TestGitHubThrottle(t *testing.T) {
	tests := []struct {
		name      string
		head      []byte
		throttled bool
		wait      time.Duration
	}{
		{name: "primary", head: testdata(t, "github_rate_limited.json"), throttled: true},
		{name: "primary, with data", head: []byte(`{"data":null,"errors":[{"type":"RATE_LIMITED","message":"API rate limit exceeded"}]}`), throttled: true},
		{name: "secondary", head: testdata(t, "github_secondary.json"), throttled: true, wait: time.Minute},
		{name: "secondary, as an error", head: []byte(`{"errors":[{"message":"Secondary rate limit exceeded. Wait before retrying."}]}`), throttled: true, wait: time.Minute},
		{name: "another error", head: []byte(`{"errors":[{"type":"NOT_FOUND","path":["repository"],"message":"Could not resolve to a Repository with the name 'RATE_LIMITED'."}]}`)},
		{name: "data that says it", head: []byte(`{"data":{"issue":{"title":"RATE_LIMITED errors and the secondary rate limit"}}}`)},
		{name: "a head cut short", head: []byte(`{"data":{"issue":{"title":"RATE_LIMITED`)},
		{name: "data", head: testdata(t, "github_ratelimit.json")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wait, throttled := githubThrottle(nil, tt.head)
			assert.Equal(t, tt.throttled, throttled)
			assert.Equal(t, tt.wait, wait)
		})
	}
}
