package politecost

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/politehttp/polite"
)

// shopifyMutation is what Shopify documents a mutation to cost.
const shopifyMutation = 10

// shopifyLearnt bounds how many queries' costs a ShopifyGraphQL option
// remembers.
const shopifyLearnt = 1024

// ShopifyGraphQL returns the options that pace requests to Shopify's
// GraphQL Admin API by the points of its leaky bucket (one per app and
// store: the key, the store's host): an estimate of each query's points
// before it is sent, its settlement to the points Shopify states it cost,
// the bucket's state as Shopify states it in every answer, and the
// throttles Shopify answers with a 200.
//
// Shopify admits a query when its bucket holds the query's requested cost,
// which it computes from its schema: it cannot be computed here. So a
// query is charged, in order: the cost its caller states
// ([polite.ContextWithCost]); else the requestedQueryCost Shopify stated
// for the same query text (and operation name) before, remembered for the
// last 1,024 queries; else [WithDefaultPoints] (a mutation: at least 10,
// its documented cost). A POST to a path ending in /graphql.json is
// charged; other requests cost one request only.
//
// The settlement reads the answer's extensions.cost: actualQueryCost is
// what the query cost (Shopify gives the rest of the requested cost back;
// a query not run, with no actualQueryCost, cost nothing), and
// throttleStatus is the bucket itself: maximumAvailable points, of which
// currentlyAvailable are left, refilled at restoreRate a second, which
// sets the key's bucket of points. Reading requestedQueryCost to remember
// it reads the request's body again, through its GetBody.
//
// A 200 whose errors have the code THROTTLED is a throttle, retried once
// the bucket holds the requested cost: (requestedQueryCost −
// currentlyAvailable) / restoreRate seconds.
//
// The options hold the costs they learn: give the same Option to the
// Transports that talk to the same stores.
func ShopifyGraphQL(opts ...Option) polite.Option {
	_, opt := shopifyOf(opts...)
	return opt
}

// shopifyOf returns a ShopifyGraphQL option and its state.
func shopifyOf(opts ...Option) (*shopify, polite.Option) {
	sh := &shopify{points: newSettings(opts).points, seed: maphash.MakeSeed(), learnt: make(map[uint64]float64)}
	return sh, polite.Options(
		polite.WithCost(sh.estimate),
		polite.WithUsage(sh.usage),
		polite.WithThrottleBody(throttleHead, sh.throttle),
	)
}

// shopify is a ShopifyGraphQL option's state: the costs it learnt.
type shopify struct {
	points float64 // WithDefaultPoints
	seed   maphash.Seed

	mu     sync.Mutex
	learnt map[uint64]float64 // requestedQueryCost by query
}

// estimate is ShopifyGraphQL's Estimator.
func (sh *shopify) estimate(req *http.Request, body []byte) (polite.Cost, string, error) {
	if !isShopify(req) {
		return polite.Cost{}, "", nil
	}
	var r shopifyRequest
	if body == nil || json.Unmarshal(body, &r) != nil {
		return polite.Cost{Points: sh.points}, "", nil
	}
	id := sh.queryID(r)
	sh.mu.Lock()
	cost, ok := sh.learnt[id]
	sh.mu.Unlock()
	if ok {
		return polite.Cost{Points: cost}, "", nil
	}
	cost = sh.points
	if op, ok := parseGraphQL(r.Query).op(r.OperationName); ok && op.kind == "mutation" {
		cost = max(cost, shopifyMutation)
	}
	return polite.Cost{Points: cost}, "", nil
}

// isShopify reports whether req is a query to Shopify's GraphQL Admin
// API.
func isShopify(req *http.Request) bool {
	return req != nil && req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/graphql.json")
}

// shopifyRequest is what ShopifyGraphQL reads of a request's body: not
// its variables, which a query's cost does not depend on but through its
// first and last arguments.
type shopifyRequest struct {
	Query         string `json:"query"`
	OperationName string `json:"operationName"`
}

// queryID returns what identifies r's query: its text and its operation.
func (sh *shopify) queryID(r shopifyRequest) uint64 {
	var h maphash.Hash
	h.SetSeed(sh.seed)
	h.WriteString(r.Query)
	h.WriteByte(0)
	h.WriteString(r.OperationName)
	return h.Sum64()
}

// learn remembers the requested cost Shopify stated for the query resp
// answers, read from its request's body again.
func (sh *shopify) learn(resp *http.Response, requested number) {
	if !requested.set || resp == nil || !isShopify(resp.Request) {
		return
	}
	body := requestBody(resp)
	var r shopifyRequest
	if body == nil || json.Unmarshal(body, &r) != nil {
		return
	}
	id := sh.queryID(r)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.learnt[id]; !ok && len(sh.learnt) >= shopifyLearnt {
		for old := range sh.learnt { // one forgotten, at random
			delete(sh.learnt, old)
			break
		}
	}
	sh.learnt[id] = requested.or(0)
}

// shopifyCost is the extensions.cost object of Shopify's answers.
type shopifyCost struct {
	RequestedQueryCost number `json:"requestedQueryCost"`
	ActualQueryCost    number `json:"actualQueryCost"`
	ThrottleStatus     *struct {
		MaximumAvailable   number `json:"maximumAvailable"`
		CurrentlyAvailable number `json:"currentlyAvailable"`
		RestoreRate        number `json:"restoreRate"`
	} `json:"throttleStatus"`
}

// quota returns the bucket c's throttleStatus states, at now; false if it
// states none.
func (c shopifyCost) quota(now time.Time) (polite.Quota, bool) {
	ts := c.ThrottleStatus
	if ts == nil || !(ts.MaximumAvailable.or(0) > 0) || !(ts.RestoreRate.or(0) > 0) || !ts.CurrentlyAvailable.set {
		return polite.Quota{}, false
	}
	limit, rate := ts.MaximumAvailable.v, ts.RestoreRate.v
	left := min(ts.CurrentlyAvailable.or(0), limit)
	return polite.Quota{
		Limit:     limit,
		Remaining: left,
		Reset:     now.Add(seconds((limit - left) / rate)),
		Window:    seconds(limit / rate),
		Unit:      polite.UnitPoints,
		Refill:    true,
	}, true
}

// seconds returns s seconds as a Duration, saturating.
func seconds(s float64) time.Duration {
	const most = float64(1<<63-1) / float64(time.Second)
	if !(s < most) {
		return 1<<63 - 1
	}
	return time.Duration(max(s, 0) * float64(time.Second))
}

// lastCost returns the last extensions.cost object of b; false if none.
func lastCost(b []byte) (shopifyCost, bool) {
	var c shopifyCost
	found := lastObject(b, "cost", func(obj []byte) bool {
		var v shopifyCost
		if json.Unmarshal(obj, &v) != nil || !v.ActualQueryCost.set && !v.RequestedQueryCost.set && v.ThrottleStatus == nil {
			return false
		}
		c = v
		return true
	})
	return c, found
}

// usage is ShopifyGraphQL's UsageReader.
func (sh *shopify) usage(resp *http.Response, tail []byte) (polite.Usage, bool) {
	c, ok := lastCost(tail)
	if !ok {
		return polite.Usage{}, false
	}
	sh.learn(resp, c.RequestedQueryCost)
	u := polite.Usage{Cost: polite.Cost{Points: c.ActualQueryCost.or(0)}}
	if q, ok := c.quota(time.Now()); ok {
		u.Quotas = []polite.Quota{q}
	}
	return u, true
}

// throttle is ShopifyGraphQL's reader of throttles in a 200's body.
func (sh *shopify) throttle(resp *http.Response, head []byte) (time.Duration, bool) {
	if !bytes.Contains(head, []byte("THROTTLED")) {
		return 0, false
	}
	var body struct {
		Errors []struct {
			Extensions struct {
				Code string `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
		Extensions struct {
			Cost shopifyCost `json:"cost"`
		} `json:"extensions"`
	}
	if json.Unmarshal(head, &body) != nil {
		return 0, false // cut short: a throttle's body is small, and whole
	}
	for _, e := range body.Errors {
		if e.Extensions.Code != "THROTTLED" {
			continue
		}
		c := body.Extensions.Cost
		sh.learn(resp, c.RequestedQueryCost)
		var wait time.Duration
		if ts := c.ThrottleStatus; ts != nil && ts.RestoreRate.or(0) > 0 && c.RequestedQueryCost.set {
			wait = seconds((c.RequestedQueryCost.v - ts.CurrentlyAvailable.or(0)) / ts.RestoreRate.v)
		}
		return wait, true
	}
	return 0, false
}
