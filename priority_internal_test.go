package polite

import (
	"context"
	"net/http"
	"testing"
)

// BenchmarkPlaceOf measures what a call pays to find its place in line
// (priority, tenant) when its context gives neither, under eight layers
// of other values, as a server's or a tracer's context has.
func BenchmarkPlaceOf(b *testing.B) {
	type layer int
	ctx := context.Background()
	for i := range 8 {
		ctx = context.WithValue(ctx, layer(i), i)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.test/", nil)
	c := &config{}
	b.ReportAllocs()
	for b.Loop() {
		_ = c.placeOf(req)
	}
}
