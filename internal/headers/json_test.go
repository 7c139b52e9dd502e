package headers

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite/internal/signals"
)

func TestSignalsJSONRoundTrips(t *testing.T) {
	cases := map[string][]string{
		"retry-after seconds": {"Retry-After", "120"},
		"retry-after ms":      {"retry-after-ms", "1500"},
		"github":              {"X-RateLimit-Limit", "5000", "X-RateLimit-Remaining", "4999", "X-RateLimit-Reset", "1767229200", "X-RateLimit-Resource", "core"},
		"ietf":                {"RateLimit-Policy", `"burst";q=100;w=60`, "RateLimit", `"burst";r=40;t=30`},
		"discord":             {"X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "0", "X-RateLimit-Reset-After", "1.25", "X-RateLimit-Bucket", "abc", "X-RateLimit-Global", "true"},
		"cached":              {"Age", "10", "X-RateLimit-Limit", "5", "X-RateLimit-Remaining", "4"},
		"none":                {"Content-Type", "text/plain"},
	}
	for name, kv := range cases {
		t.Run(name, func(t *testing.T) {
			want := Parse(headers(kv...), vectorNow)
			b, err := json.Marshal(want)
			require.NoError(t, err)
			var got signals.Signals
			require.NoError(t, json.Unmarshal(b, &got), "%s", b)
			assert.True(t, want.Quota.Reset.Equal(got.Quota.Reset), "reset %v, want %v", got.Quota.Reset, want.Quota.Reset)
			got.Quota.Reset, want.Quota.Reset = time.Time{}, time.Time{}
			assert.Equal(t, want, got, "%s", b)
		})
	}
}

func TestSignalsJSONNames(t *testing.T) {
	s := Parse(headers("RateLimit-Policy", `"day";q=1000;w=86400;qu="requests"`, "RateLimit", `"day";r=3;t=600`, "Retry-After", "1.5"), vectorNow)
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, map[string]any{
		"retry_after": 1.5, "has_retry_after": true, "retry_after_slack": 0.0,
		"quota": map[string]any{
			"limit": 1000.0, "remaining": 3.0, "reset": "2026-01-01T00:10:00Z",
			"slack": 1.0, "window": 86400.0, "policy": "day", "unit": "",
		},
		"has_quota": true, "bucket": "", "global": false, "cached": false,
	}, m)

	var q signals.Quota
	require.NoError(t, json.Unmarshal([]byte(`{"limit":10,"remaining":2,"window":0.5}`), &q))
	assert.Equal(t, signals.Quota{Limit: 10, Remaining: 2, Window: 500 * time.Millisecond}, q, "a missing reset is the zero time")

	// null leaves a value as it was, as encoding/json does.
	require.NoError(t, json.Unmarshal([]byte(`null`), &q))
	assert.Equal(t, 10.0, q.Limit)
	got := s
	require.NoError(t, json.Unmarshal([]byte(`null`), &got))
	assert.Equal(t, s, got)
	require.NoError(t, json.Unmarshal([]byte(`{"has_quota":true,"quota":null}`), &got))
	assert.True(t, got.HasQuota)
}

func TestSignalsJSONRefusesBadDurations(t *testing.T) {
	for _, in := range []string{
		`{"retry_after":-1}`,
		`{"retry_after_slack":1e300}`,
		`{"quota":{"window":-0.5}}`,
		`{"quota":{"slack":1e19}}`,
		`{"retry_after":"soon"}`,
	} {
		var s signals.Signals
		assert.Error(t, json.Unmarshal([]byte(in), &s), in)
		assert.Equal(t, signals.Signals{}, s, "%s: a refused value leaves the signals as they were", in)
	}
	var s signals.Signals
	require.NoError(t, json.Unmarshal([]byte(`{"retry_after":9223372035}`), &s))
	assert.Equal(t, time.Duration(math.Round(9223372035*float64(time.Second))), s.RetryAfter, "the longest whole seconds a Duration holds")
}

func TestIsSignalHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"Retry-After": true, "retry-after-ms": true, "X-Ms-Retry-After-Ms": true, "x-amz-retry-after": true,
		"RateLimit": true, "ratelimit-policy": true, "RateLimit-Reset": true,
		"X-RateLimit-Limit": true, "x-rate-limit-remaining": true, "X-RateLimit-Reset-After": true,
		"X-RateLimit-Bucket": true, "X-RateLimit-Global": true, "X-RateLimit-Resource": true,
		"x-ratelimit-limit-requests": true, "x-ratelimit-reset-tokens": true,
		"anthropic-ratelimit-input-tokens-remaining": true, "X-Shopify-Shop-Api-Call-Limit": true,
		"X-Rate-Limit-Duration": true, "Date": true, "Age": true,
		"Content-Type": false, "X-RateLimit-Foo": false, "x-ratelimit-limit-bananas": false,
		"anthropic-ratelimit-cats-limit": false, "": false,
	} {
		assert.Equal(t, want, IsHeader(name), name)
	}
}
