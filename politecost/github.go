package politecost

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/politehttp/polite"
)

// throttleHead is how much of a 2xx answer's head the GraphQL dialects
// read for a throttle stated in the body: GitHub's and Shopify's are a few
// hundred bytes, and stand alone.
const throttleHead = 4 << 10

// secondaryWait is how long GitHub asks a client to wait after its
// secondary rate limit when it says nothing more: "at least one minute".
const secondaryWait = time.Minute

// GitHubGraphQL returns the options that pace requests to GitHub's
// GraphQL API by the points it charges an hour: an estimate of each
// query's points before it is sent, its settlement to the points GitHub
// states it cost, and the throttles GitHub answers with a 200. GitHub's
// rate-limit headers (x-ratelimit-*, resource graphql, counted in points)
// are read by polite itself.
//
// The estimate of a POST to …/graphql follows GitHub's documented rule:
// for each connection (a field with a first or last argument), the
// requests needed to fetch it for every parent, assuming each connection
// around it returns as many nodes as its first or last asks for; their sum
// divided by 100 and rounded, and at least 1. A first or last given as a
// variable takes its value from the request's variables, else the
// variable's default, else 100 (GitHub's maximum). Named fragments, inline
// fragments, aliases and directives are read; a field under @skip or
// @include is counted as if fetched. Its scope is "graphql": GitHub counts
// its GraphQL API's points apart from its REST API's requests. A body
// that cannot be read costs 1 point.
//
// The settlement reads the cost of the last "rateLimit" object of the
// answer: ask for it (rateLimit { cost }) last in the query, so that it
// is at the end of the answer, read by polite. Without it, the estimate
// stands, and the headers correct it.
//
// A 200 whose errors include one of type RATE_LIMITED (the primary limit
// spent) is a throttle, retried at the reset the headers state; one whose
// error message tells of a secondary rate limit is a throttle retried
// after Retry-After, or else a minute, as GitHub asks.
func GitHubGraphQL() polite.Option {
	return polite.Options(
		polite.WithCost(githubEstimate),
		polite.WithUsage(githubUsage),
		polite.WithThrottleBody(throttleHead, githubThrottle),
	)
}

// graphQLRequest is what the estimates read of a GraphQL request's body.
type graphQLRequest struct {
	Query         string                     `json:"query"`
	OperationName string                     `json:"operationName"`
	Variables     map[string]json.RawMessage `json:"variables"`
}

// githubEstimate is GitHubGraphQL's Estimator.
func githubEstimate(req *http.Request, body []byte) (polite.Cost, string, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(strings.TrimSuffix(req.URL.Path, "/"), "/graphql") {
		return polite.Cost{}, "", nil
	}
	return polite.Cost{Points: githubPoints(body)}, "graphql", nil
}

// githubPoints returns the points GitHub charges the GraphQL request whose
// body is body (see GitHubGraphQL).
func githubPoints(body []byte) float64 {
	var r graphQLRequest
	if body == nil || json.Unmarshal(body, &r) != nil {
		return 1
	}
	doc := parseGraphQL(r.Query)
	op, ok := doc.op(r.OperationName)
	if !ok {
		return 1
	}
	return max(math.Round(doc.githubRequests(op, r.Variables)/100), 1)
}

// githubUsage reads the points a query cost from the last rateLimit
// object of its answer's tail.
func githubUsage(_ *http.Response, tail []byte) (polite.Usage, bool) {
	var cost float64
	found := lastObject(tail, "rateLimit", func(obj []byte) bool {
		var rl struct {
			Cost number `json:"cost"`
		}
		if json.Unmarshal(obj, &rl) != nil || !rl.Cost.set {
			return false
		}
		cost = rl.Cost.or(0)
		return true
	})
	if !found {
		return polite.Usage{}, false
	}
	return polite.Usage{Cost: polite.Cost{Points: cost}}, true
}

// githubThrottle reports whether a 200 of GitHub's GraphQL API, whose
// body begins with head, is a throttle (see GitHubGraphQL), and the wait
// it asks for.
func githubThrottle(_ *http.Response, head []byte) (time.Duration, bool) {
	// "econdary": GitHub writes "secondary rate limit", capitalised or not.
	if !bytes.Contains(head, []byte("RATE_LIMITED")) && !bytes.Contains(head, []byte("econdary rate limit")) {
		return 0, false
	}
	var body struct {
		Message string `json:"message"`
		Errors  []struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(head, &body) != nil {
		return 0, false // cut short: a throttle's body is small, and whole
	}
	secondary := func(msg string) bool { return strings.Contains(strings.ToLower(msg), "secondary rate limit") }
	for _, e := range body.Errors {
		if e.Type == "RATE_LIMITED" {
			return 0, true
		}
		if secondary(e.Message) {
			return secondaryWait, true
		}
	}
	if secondary(body.Message) {
		return secondaryWait, true
	}
	return 0, false
}
