package polite_test

import (
	"net/http"
	"testing"

	"github.com/politehttp/polite"
)

// BenchmarkRoundTripQuota measures a call whose answer states a quota in
// requests that never holds it (a billion a second, reset in a second):
// every answer is read into the key's quota, and every attempt is
// numbered against it, with no wait; beside the bare next and polite
// over an answer that states nothing, in the same run.
func BenchmarkRoundTripQuota(b *testing.B) {
	stated := &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Header: http.Header{
		"X-Ratelimit-Limit":     {"1000000000"},
		"X-Ratelimit-Remaining": {"999999999"},
		"X-Ratelimit-Reset":     {"1"},
	}}
	quotaNext := roundTripFunc(func(*http.Request) (*http.Response, error) { return stated, nil })
	benchRoundTrips(b, "http://api.test/items", []namedRoundTripper{
		{"bare", quotaNext},
		{"polite", polite.New(okNext())},
		{"polite-quota", polite.New(quotaNext)},
	})
}
