package polite_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// Every option changes what a user can observe (go-peers.md §3, pitfall 17:
// go-github-ratelimit's WithNoSleep did nothing). Each case runs the same
// scenario without and with the option, in fake time, and compares what
// came out.
func TestEveryOptionHasAnEffect(t *testing.T) {
	// scenario runs calls against a script and reports calls seen by the
	// server and the fake time it took.
	scenario := func(t *testing.T, method string, urls []string, script []reply, opts ...polite.Option) string {
		var out string
		synctest.Test(t, func(t *testing.T) {
			next := newStub(script...)
			tr := polite.New(next, opts...)
			start := time.Now()
			for _, u := range urls {
				req := replayableRequest(t, t.Context(), method, u, "body")
				resp, err := roundTrip(t, tr, req)
				if err == nil {
					readBody(t, resp)
				}
			}
			out = fmt.Sprintf("calls=%d elapsed=%v", next.calls(), time.Since(start))
		})
		return out
	}
	var logs bytes.Buffer
	var hooked int
	three := []string{"http://a.test/1", "http://b.test/2", "http://a.test/3"}
	tests := []struct {
		name   string
		method string
		script []reply
		base   []polite.Option
		opt    polite.Option
		check  func(t *testing.T)
	}{
		{name: "WithRate", script: []reply{status(200)}, opt: polite.WithRate(1, 1)},
		{name: "WithKey", script: []reply{status(200)}, base: []polite.Option{polite.WithRate(1, 1)},
			opt: polite.WithKey(func(*http.Request) string { return "one key for all" })},
		{name: "WithMaxAttempts", script: []reply{status(503)}, opt: polite.WithMaxAttempts(2)},
		{name: "WithBackoff", script: []reply{status(503)}, opt: polite.WithBackoff(0, 0)},
		{name: "WithMaxRetryAfter", script: []reply{status(503, "Retry-After", "5")}, opt: polite.WithMaxRetryAfter(time.Second)},
		{name: "WithRetryBudget", script: []reply{status(503)}, opt: polite.WithRetryBudget(polite.NewRetryBudget(5))},
		{name: "WithRetryNonIdempotent", method: http.MethodPost, script: []reply{status(503)}, opt: polite.WithRetryNonIdempotent(true)},
		{name: "WithLogger", script: []reply{status(503)},
			opt:   polite.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
			check: func(t *testing.T) { assert.NotEmpty(t, logs.String()) }},
		{name: "WithHooks", script: []reply{status(503)},
			opt:   polite.WithHooks(polite.Hooks{OnRetry: func(polite.Event) { hooked++ }}),
			check: func(t *testing.T) { assert.Positive(t, hooked) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			without := scenario(t, method, three, tt.script, tt.base...)
			with := scenario(t, method, three, tt.script, append(tt.base, tt.opt)...)
			if tt.check != nil {
				tt.check(t)
				return
			}
			require.NotEqual(t, without, with, "the option changed nothing")
			t.Logf("without: %s; with: %s", without, with)
		})
	}
}

func TestOptionsApplyInOrderLastWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503))
		tr := polite.New(next, polite.WithMaxAttempts(5), polite.WithMaxAttempts(2))
		fetch(t, tr, "http://a.test/")
		assert.Equal(t, 2, next.calls())
	})
}

func TestBackoffClamps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503))
		tr := polite.New(next, polite.WithBackoff(-time.Second, -time.Second))
		fetch(t, tr, "http://a.test/")
		assert.Equal(t, []time.Duration{0, 0, 0}, next.gaps(), "negative durations are 0")

		next = newStub(status(503))
		tr = polite.New(next, polite.WithBackoff(time.Hour, time.Second))
		resp, err := get(t, t.Context(), tr, "http://a.test/")
		require.NoError(t, err)
		readBody(t, resp)
		for _, g := range next.gaps() {
			assert.Less(t, g, time.Second, "a base above the limit is lowered to it")
		}
	})
}
