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
)

// rotateAll rotates every shard of tb at now, as calls to keys in every
// shard would.
func rotateAll[V any](tb *table[V], now time.Time) {
	for i := range tb.shards {
		tb.rotate(&tb.shards[i], now.UnixNano())
	}
}

// held returns the value tb holds for key, without touching it; nil if
// none.
func held[V any](tb *table[V], key string) *V {
	v, _ := tb.shardOf(key).peek(key)
	return v
}

func newIntTable(idle time.Duration, busy func(*int, int64) bool) *table[int] {
	tb := new(table[int])
	tb.init(idle, func(string, time.Time) *int { return new(int) }, busy)
	return tb
}

// A key is forgotten once idle for one to two timeouts; a key in use is
// kept, whatever its age.
func TestTableForgetsIdleKeys(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	tb := newIntTable(time.Minute, nil)
	rotateAll(tb, t0) // the first rotation starts the clock

	a := tb.use("a", at(0))
	tb.use("b", at(0))
	rotateAll(tb, at(61*time.Second)) // young → old
	assert.Same(t, a, held(tb, "a"), "idle for one timeout: still held")
	assert.Same(t, a, tb.use("a", at(70*time.Second)), "used again: the same state")

	rotateAll(tb, at(122*time.Second))
	assert.Nil(t, held(tb, "b"), "idle for two rotations: forgotten")
	assert.Same(t, a, held(tb, "a"), "used since the last rotation but one: held")
	assert.Equal(t, 1, tb.len())

	rotateAll(tb, at(10*time.Minute)) // two timeouts since the last rotation
	assert.Equal(t, 0, tb.len(), "both generations dropped")
	assert.NotSame(t, a, tb.use("a", at(10*time.Minute)), "a forgotten key starts afresh")
}

// A pinned key outlives its idleness until its time, and is then
// forgotten.
func TestTablePinnedKeys(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tb := newIntTable(time.Minute, nil)
	rotateAll(tb, t0)
	a := tb.use("a", t0)
	tb.pin("a", t0.Add(5*time.Minute))
	for m := 1; m <= 5; m++ {
		rotateAll(tb, t0.Add(time.Duration(m)*time.Minute))
		require.Same(t, a, held(tb, "a"), "minute %d: pinned", m)
	}
	rotateAll(tb, t0.Add(6*time.Minute))
	rotateAll(tb, t0.Add(7*time.Minute))
	assert.Nil(t, held(tb, "a"), "its time over, the key is forgotten like any other")
	assert.Empty(t, tb.shardOf("a").pinned, "and so is its pin")
}

// A busy value outlives its key's idleness.
func TestTableKeepsBusyValues(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tb := newIntTable(time.Minute, func(v *int, _ int64) bool { return *v > 0 })
	rotateAll(tb, t0)
	busy, idle := tb.use("busy", t0), tb.use("idle", t0)
	*busy = 1
	rotateAll(tb, t0.Add(10*time.Minute))
	assert.Same(t, busy, held(tb, "busy"))
	assert.Nil(t, held(tb, "idle"))
	*busy = 0
	rotateAll(tb, t0.Add(20*time.Minute))
	assert.Nil(t, held(tb, "busy"), "no longer busy: forgotten")
	_ = idle
}

// A call that outlives the idle timeout puts its state back when it ends,
// unless a newer state has taken the key meanwhile.
func TestTableKeep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tb := newIntTable(time.Minute, nil)
	rotateAll(tb, t0)
	sh := tb.shardOf("a")
	rotated := sh.rotated.Load()
	a := tb.ensureIn(sh, "a", true, nil)
	rotateAll(tb, t0.Add(5*time.Minute)) // the call is still out: a is dropped
	require.Nil(t, held(tb, "a"))
	tb.keep(sh, "a", a, t0.Add(5*time.Minute), rotated)
	assert.Same(t, a, held(tb, "a"), "the call's state is the key's again")

	rotated = sh.rotated.Load()
	rotateAll(tb, t0.Add(10*time.Minute))
	newer := tb.use("a", t0.Add(10*time.Minute))
	tb.keep(sh, "a", a, t0.Add(10*time.Minute), rotated)
	assert.Same(t, newer, held(tb, "a"), "a newer state is not replaced")
}

// A key whose bucket has not refilled is not forgotten: a rate slower than
// the idle timeout still holds.
func TestSlowRateOutlivesIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := New(okTransport(), WithRate(1.0/3600, 1), WithIdleTimeout(time.Minute))
		get(t, tr, "http://a.test/") // the token of the hour
		ks := held(&tr.keys.table, "a.test")
		require.NotNil(t, ks)
		for range 30 {
			time.Sleep(time.Minute)
			rotateAll(&tr.keys.table, time.Now())
		}
		require.Same(t, ks, held(&tr.keys.table, "a.test"), "half an hour later, the bucket is still empty")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		_, err := tr.RoundTrip(mustGet(t, "http://a.test/").WithContext(ctx))
		var te *ThrottledError
		require.ErrorAs(t, err, &te, "the next token is half an hour away")
		assert.Equal(t, 30*time.Minute, te.Wait.Round(time.Minute))

		time.Sleep(31 * time.Minute) // the bucket is full again
		rotateAll(&tr.keys.table, time.Now())
		time.Sleep(2 * time.Minute)
		rotateAll(&tr.keys.table, time.Now())
		assert.Nil(t, held(&tr.keys.table, "a.test"), "refilled and idle: forgotten")
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
			rotateAll(&tr.keys.table, time.Now())
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
			rotateAll(tr.robots, time.Now())
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
