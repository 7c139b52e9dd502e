package polite_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// recorder collects the events of every hook, in order.
type recorder struct{ events []string }

func (r *recorder) hooks() polite.Hooks {
	add := func(name string) func(polite.Event) {
		return func(e polite.Event) {
			r.events = append(r.events, strings.Join([]string{
				name, e.Key, "attempt=" + strconv.Itoa(e.Attempt), "reason=" + e.Reason(),
				"delay=" + e.Delay.String(), "retry_after=" + e.RetryAfter.String(),
				"budget=" + strconv.Itoa(e.Budget), "server=" + map[bool]string{true: "yes", false: "no"}[e.Server],
			}, " "))
		}
	}
	return polite.Hooks{
		OnRetry:           add("retry"),
		OnThrottled:       add("throttled"),
		OnBudgetExhausted: add("budget"),
		OnWait:            add("wait"),
		OnRefused:         add("refused"),
	}
}

func TestHooksReportRetriesAndThrottling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		next := newStub(status(429, "Retry-After", "2"), fail(timeoutError{}), status(503), status(200))
		tr := polite.New(next, polite.WithBackoff(0, 0), polite.WithHooks(rec.hooks()), polite.WithAdaptive(polite.AdaptiveOff))
		fetch(t, tr, "http://a.test/")
		assert.Equal(t, []string{
			"throttled a.test attempt=1 reason=status 429 delay=0s retry_after=2s budget=500 server=no",
			"retry a.test attempt=1 reason=status 429 delay=2s retry_after=2s budget=495 server=no",
			"wait a.test attempt=2 reason= delay=2s retry_after=0s budget=495 server=yes",
			"retry a.test attempt=2 reason=i/o timeout delay=0s retry_after=0s budget=485 server=no",
			"retry a.test attempt=3 reason=status 503 delay=0s retry_after=0s budget=480 server=no",
		}, rec.events)
	})
}

func TestHooksReportWaitsAndRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		next := newStub(status(200), status(503, "Retry-After", "5"), status(200))
		tr := polite.New(next, polite.WithRate(1, 1), polite.WithMaxAttempts(1), polite.WithHooks(rec.hooks()), polite.WithAdaptive(polite.AdaptiveOff))
		for range 3 {
			fetch(t, tr, "http://a.test/")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		_, err := get(t, ctx, tr, "http://a.test/")
		require.ErrorIs(t, err, polite.ErrThrottled)
		assert.Equal(t, []string{
			"wait a.test attempt=1 reason= delay=1s retry_after=0s budget=500 server=no",
			"throttled a.test attempt=1 reason=status 503 delay=0s retry_after=5s budget=500 server=no",
			"wait a.test attempt=1 reason= delay=5s retry_after=0s budget=500 server=yes",
			"refused a.test attempt=1 reason=" + err.Error() + " delay=1s retry_after=0s budget=500 server=no",
		}, rec.events[:4])
	})
}

// Hooks run with no lock held: a hook may use the Transport, even for
// another call.
func TestHooksMayCallTheTransport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		next := newStub(status(503), status(200))
		var tr *polite.Transport
		var inner int
		tr = polite.New(next, polite.WithRate(100, 1), polite.WithHooks(polite.Hooks{
			OnRetry: func(e polite.Event) {
				resp, err := get(t, e.Request.Context(), tr, "http://b.test/")
				if err == nil {
					resp.Body.Close()
					inner = resp.StatusCode
				}
			},
		}))
		fetch(t, tr, "http://a.test/")
		assert.Equal(t, 200, inner)
	})
}

func TestEventReason(t *testing.T) {
	assert.Equal(t, "", polite.Event{}.Reason())
	assert.Equal(t, "status 503", polite.Event{StatusCode: 503}.Reason())
	assert.Equal(t, "boom", polite.Event{StatusCode: 503, Err: errors.New("boom")}.Reason())
}

func TestLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
			Level:       slog.LevelDebug,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
		}))
		next := newStub(status(429, "Retry-After", "1"), status(200))
		fetch(t, polite.New(next, polite.WithLogger(logger), polite.WithBackoff(0, 0)), "http://a.test/")
		assert.Equal(t,
			`level=INFO msg="polite: server throttled" retry_after=1s key=a.test attempt=1 method=GET status=429`+"\n"+
				`level=DEBUG msg="polite: retrying" delay=1s retry_after=1s budget=495 key=a.test attempt=1 method=GET status=429`+"\n"+
				`level=DEBUG msg="polite: waiting" delay=1s server=true for=pause key=a.test attempt=2 method=GET`+"\n",
			buf.String())
	})
}

func TestLoggerLevelIsRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
		next := newStub(status(503))
		tr := polite.New(next, polite.WithLogger(logger), polite.WithBackoff(0, 0), polite.WithRetryBudget(polite.NewRetryBudget(5)))
		fetch(t, tr, "http://a.test/")
		assert.Equal(t, 1, strings.Count(buf.String(), "\n"), "only the warning: %s", buf.String())
		assert.Contains(t, buf.String(), "retry budget exhausted")
	})
}

func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
