package politecost

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/politehttp/polite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const shopifyURL = "https://shop.myshopify.com/admin/api/2025-01/graphql.json"

// newShopify returns a ShopifyGraphQL option's state.
func newShopify(opts ...Option) *shopify {
	sh, _ := shopifyOf(opts...)
	return sh
}

// The estimate of a Shopify query: the default, 10 for a mutation, and
// what Shopify stated before for the same query once it did.
func TestShopifyEstimate(t *testing.T) {
	const query = `{"query":"query { products(first: 50) { edges { node { id title } } } }"}`
	const mutation = `{"query":"mutation productCreate($input: ProductInput!) { productCreate(input: $input) { product { id } } }","variables":{"input":{"title":"Wax"}}}`
	tests := []struct {
		name   string
		opts   []Option
		method string
		url    string
		body   string
		points float64
	}{
		{name: "a query", url: shopifyURL, body: query, points: DefaultPoints},
		{name: "a query, the default set", opts: []Option{WithDefaultPoints(50)}, url: shopifyURL, body: query, points: 50},
		{name: "a mutation", opts: []Option{WithDefaultPoints(1)}, url: shopifyURL, body: mutation, points: 10},
		{name: "not JSON", url: shopifyURL, body: `{`, points: DefaultPoints},
		{name: "no body to read", url: shopifyURL, points: DefaultPoints},
		{name: "the REST API", url: "https://shop.myshopify.com/admin/api/2025-01/products.json", body: `{"product":{}}`},
		{name: "a GET", method: http.MethodGet, url: shopifyURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sh := newShopify(tt.opts...)
			req := post(t, tt.url, tt.body)
			if tt.method != "" {
				req.Method = tt.method
			}
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			cost, scope, err := sh.estimate(req, body)
			require.NoError(t, err)
			assert.Equal(t, polite.Cost{Points: tt.points}, cost)
			assert.Empty(t, scope)
		})
	}
}

// The settlement: actualQueryCost, and throttleStatus as the key's
// bucket of points; the requested cost is learnt for the query.
func TestShopifyUsage(t *testing.T) {
	const query = `{"query":"query { products(first: 50) { edges { node { id title } } } }"}`
	sh := newShopify()
	req := post(t, shopifyURL, query)
	before := time.Now()
	u, ok := sh.usage(answer(req, "application/json"), testdata(t, "shopify_query.json"))
	require.True(t, ok)
	assert.Equal(t, polite.Cost{Points: 4}, u.Cost)
	require.Len(t, u.Quotas, 1)
	q := u.Quotas[0]
	assert.Equal(t, 2000.0, q.Limit)
	assert.Equal(t, 1996.0, q.Remaining)
	assert.Equal(t, 20*time.Second, q.Window, "2,000 points at 100 a second")
	assert.Equal(t, polite.UnitPoints, q.Unit)
	assert.True(t, q.Refill)
	assert.WithinRange(t, q.Reset, before.Add(40*time.Millisecond), time.Now().Add(40*time.Millisecond), "4 points at 100 a second")

	cost, _, err := sh.estimate(post(t, shopifyURL, query), []byte(query))
	require.NoError(t, err)
	assert.Equal(t, polite.Cost{Points: 52}, cost, "the requested cost learnt")
	other := `{"query":"query { shop { name } }"}`
	cost, _, err = sh.estimate(post(t, shopifyURL, other), []byte(other))
	require.NoError(t, err)
	assert.Equal(t, polite.Cost{Points: DefaultPoints}, cost, "another query")

	tests := []struct {
		name string
		body string
		want polite.Usage
		ok   bool
	}{
		{name: "not run", body: `{"errors":[{"message":"Query cost is 1500, which exceeds the single query max cost limit (1000).","extensions":{"code":"MAX_COST_EXCEEDED"}}],"extensions":{"cost":{"requestedQueryCost":1500,"actualQueryCost":null,"throttleStatus":{"maximumAvailable":1000,"currentlyAvailable":1000,"restoreRate":50}}}}`,
			want: polite.Usage{Quotas: []polite.Quota{{Limit: 1000, Remaining: 1000, Window: 20 * time.Second, Unit: polite.UnitPoints, Refill: true}}}, ok: true},
		{name: "no throttle status", body: `{"data":{},"extensions":{"cost":{"requestedQueryCost":3,"actualQueryCost":2}}}`, want: polite.Usage{Cost: polite.Cost{Points: 2}}, ok: true},
		{name: "a bad throttle status", body: `{"data":{},"extensions":{"cost":{"actualQueryCost":2,"throttleStatus":{"maximumAvailable":0,"currentlyAvailable":1,"restoreRate":50}}}}`, want: polite.Usage{Cost: polite.Cost{Points: 2}}, ok: true},
		{name: "no cost", body: `{"data":{"product":{"cost":{"amount":"1.0"}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, ok := newShopify().usage(answer(nil, ""), []byte(tt.body))
			assert.Equal(t, tt.ok, ok)
			for i := range u.Quotas {
				u.Quotas[i].Reset = time.Time{}
			}
			assert.Equal(t, tt.want, u)
		})
	}
}

// A 200 with a THROTTLED error is a throttle, retried when the bucket
// holds the requested cost; its requested cost is learnt.
func TestShopifyThrottle(t *testing.T) {
	const query = `{"query":"{ orders(first: 60) { nodes { id } } }"}`
	sh := newShopify()
	wait, throttled := sh.throttle(answer(post(t, shopifyURL, query), ""), testdata(t, "shopify_throttled.json"))
	assert.True(t, throttled)
	assert.Equal(t, 80*time.Millisecond, wait, "(70 - 66) / 50 s")
	cost, _, err := sh.estimate(post(t, shopifyURL, query), []byte(query))
	require.NoError(t, err)
	assert.Equal(t, polite.Cost{Points: 70}, cost)

	for _, head := range []string{
		`{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}]}`,
		`{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}],"extensions":{"cost":{"requestedQueryCost":70,"throttleStatus":{"maximumAvailable":1000,"currentlyAvailable":66,"restoreRate":0}}}}`,
	} {
		wait, throttled = sh.throttle(answer(nil, ""), []byte(head))
		assert.True(t, throttled, head)
		assert.Zero(t, wait, "the backoff's: nothing to compute it from")
	}
	for _, head := range []string{
		string(testdata(t, "shopify_query.json")),
		`{"data":{"product":{"title":"THROTTLED"}}}`,
		`{"errors":[{"message":"Access denied","extensions":{"code":"ACCESS_DENIED"}}],"data":{"x":"THROTTLED"}}`,
		`{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"`,
	} {
		_, throttled = sh.throttle(answer(nil, ""), []byte(head))
		assert.False(t, throttled, head)
	}
}

// The costs learnt are bounded: past shopifyLearnt queries, one is
// forgotten for each new one.
func TestShopifyLearntBounded(t *testing.T) {
	sh := newShopify()
	for i := range shopifyLearnt + 10 {
		q := `{"query":"{ a` + strconv.Itoa(i) + ` }"}`
		sh.learn(answer(post(t, shopifyURL, q), ""), number{v: float64(i), set: true})
	}
	assert.Len(t, sh.learnt, shopifyLearnt)
}
