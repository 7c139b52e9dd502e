package polite

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite/internal/engine"
	"github.com/politehttp/polite/internal/registry"
	"github.com/politehttp/polite/internal/robots"
)

// rotateAll rotates every shard of tb at now, as calls to keys in every
// shard would.
func rotateAll[V any](tb interface {
	Shards() []registry.Shard[V]
	Rotate(*registry.Shard[V], int64)
}, now time.Time) {
	shards := tb.Shards()
	for i := range shards {
		tb.Rotate(&shards[i], now.UnixNano())
	}
}

// held returns the value tb holds for key, without touching it; nil if
// none.
func held[V any](tb *registry.Table[V], key string) *V {
	v, _ := tb.ShardOf(key).Peek(key)
	return v
}

// A key whose bucket has not refilled is not forgotten: a rate slower than
// the idle timeout still holds.
func TestSlowRateOutlivesIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(okTransport(), WithRate(1.0/3600, 1), WithIdleTimeout(time.Minute))
		get(t, tr, "http://a.test/") // the token of the hour
		ks := held(tr.eng.Keys(), "a.test")
		require.NotNil(t, ks)
		for range 30 {
			time.Sleep(time.Minute)
			rotateAll[engine.Key](tr.eng.Keys(), time.Now())
		}
		require.Same(t, ks, held(tr.eng.Keys(), "a.test"), "half an hour later, the bucket is still empty")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := tr.RoundTrip(mustGet(t, "http://a.test/").WithContext(ctx))
		var te *ThrottledError
		require.ErrorAs(t, err, &te, "the next token is half an hour away")
		assert.Equal(t, 30*time.Minute, te.Wait.Round(time.Minute))

		time.Sleep(31 * time.Minute) // the bucket is full again
		rotateAll[engine.Key](tr.eng.Keys(), time.Now())
		time.Sleep(2 * time.Minute)
		rotateAll[engine.Key](tr.eng.Keys(), time.Now())
		assert.Nil(t, held(tr.eng.Keys(), "a.test"), "refilled and idle: forgotten")
	})
}

// A request that holds a WithMaxInFlight slot past the idle timeout keeps
// its key's state: the cap still holds.
func TestSlotOutlivesIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := io.NopCloser(strings.NewReader("a long download"))
		sent := 0
		next := roundTrip(func(req *http.Request) (*http.Response, error) {
			sent++
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: body, Request: req}, nil
		})
		tr := New(next, WithMaxInFlight(1), WithIdleTimeout(time.Minute))
		resp, err := tr.RoundTrip(mustGet(t, "http://a.test/"))
		require.NoError(t, err)
		for range 30 { // the body is read slowly, for half an hour
			time.Sleep(time.Minute)
			rotateAll[engine.Key](tr.eng.Keys(), time.Now())
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = tr.RoundTrip(mustGet(t, "http://a.test/").WithContext(ctx))
		require.True(t, errors.Is(err, context.DeadlineExceeded), "waited for the slot: %v", err)
		assert.Equal(t, 1, sent, "the second request was not sent while the first was out")
		resp.Body.Close()
	})
}

// The spacing a Crawl-delay imposes outlives the idle timeout.
func TestCrawlDelayOutlivesIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var sent []time.Time
		next := roundTrip(func(req *http.Request) (*http.Response, error) {
			body := ""
			if req.URL.Path == "/robots.txt" {
				body = "User-agent: *\nCrawl-delay: 60\n"
			} else {
				sent = append(sent, time.Now())
			}
			return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		})
		tr := New(next, WithCrawlDelay(true), WithIdleTimeout(time.Second))
		start := time.Now()
		get(t, tr, "http://a.test/1")
		for range 30 {
			time.Sleep(time.Second)
			rotateAll[robots.Site](tr.eng.Sites(), time.Now())
		}
		get(t, tr, "http://a.test/2")
		require.Len(t, sent, 2)
		assert.Equal(t, time.Minute, sent[1].Sub(start), "the second request waited out the Crawl-delay")
	})
}

func okTransport() http.RoundTripper {
	return roundTrip(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	})
}
