package polite_test

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// windowHeaders is a fixed window of 10 seconds that tells its clients
// their quota on every response, in a dialect:
//
//   - "github": X-RateLimit-Limit, -Remaining, -Used, -Reset (a Unix time
//     by the server's clock, in whole seconds) and -Resource, and a Date;
//     a refusal is a 429 with no Retry-After.
//   - "ietf": RateLimit "default";r=…;t=… (whole seconds, rounded up) and
//     RateLimit-Policy "default";q=…;w=10; a refusal is a 429 with
//     Retry-After.
//   - "openai": x-ratelimit-{limit,remaining,reset}-requests with the reset
//     as a duration (3.25s, 850ms); a refusal is a 429 with retry-after-ms.
//
// Its windows start at offset past the whole second, as a window that
// starts at a client's first request does: a reset stated in whole
// seconds is then up to a second early.
type windowHeaders struct {
	dialect string
	offset  time.Duration
	window  time.Time
	count   float64
}

const headerWindow = 10 * time.Second

func (w *windowHeaders) allow(now time.Time, perSecond float64) (bool, int, []string) {
	if start := now.Add(-w.offset).Truncate(headerWindow).Add(w.offset); !start.Equal(w.window) {
		w.window, w.count = start, 0
	}
	limit := math.Round(perSecond * headerWindow.Seconds())
	ok := w.count+1 <= limit
	if ok {
		w.count++
	}
	remaining := limit - w.count
	end := w.window.Add(headerWindow)
	left := end.Sub(now)
	var h []string
	switch w.dialect {
	case "github":
		server := now.Add(serverClockAhead)
		h = []string{
			"Date", server.UTC().Format(http.TimeFormat),
			"X-RateLimit-Limit", strconv.Itoa(int(limit)),
			"X-RateLimit-Remaining", strconv.Itoa(int(remaining)),
			"X-RateLimit-Used", strconv.Itoa(int(w.count)),
			"X-RateLimit-Reset", strconv.FormatInt(end.Add(serverClockAhead).Unix(), 10),
			"X-RateLimit-Resource", "core",
		}
	case "ietf":
		t := strconv.Itoa(int(math.Ceil(left.Seconds())))
		h = []string{
			"RateLimit", `"default";r=` + strconv.Itoa(int(remaining)) + ";t=" + t,
			"RateLimit-Policy", `"default";q=` + strconv.Itoa(int(limit)) + ";w=" + strconv.Itoa(int(headerWindow.Seconds())),
		}
		if !ok {
			h = append(h, "Retry-After", t)
		}
	case "openai":
		h = []string{
			"X-Ratelimit-Limit-Requests", strconv.Itoa(int(limit)),
			"X-Ratelimit-Remaining-Requests", strconv.Itoa(int(remaining)),
			"X-Ratelimit-Reset-Requests", left.Round(time.Millisecond).String(),
		}
		if !ok {
			h = append(h, "Retry-After-Ms", strconv.FormatInt(left.Milliseconds(), 10))
		}
	}
	if !ok {
		return false, http.StatusTooManyRequests, h
	}
	return true, 0, h
}

// githubWindow is a GitHub-style quota of 60 requests per 10-second
// window, whose windows start 3.7 s past the whole second.
var githubSixty = scenario{name: "github 60 per 10 s", limiter: func() limiter { return &windowHeaders{dialect: "github", offset: 3700 * time.Millisecond} },
	schedule: []step{{0, 6}}, length: 120 * time.Second, steady: 3700*time.Millisecond + headerWindow, workers: 8, latency: 20 * time.Millisecond, headers: true}

// A GitHub-style quota of 60 requests per 10-second window, stated in
// X-RateLimit-* with epoch resets and refused by a 429 without
// Retry-After: once the first window has shown the quota, no request is
// refused, window after window.
func TestGitHubWindowNoRefusalAfterFirst(t *testing.T) {
	for _, offset := range []time.Duration{0, 370 * time.Millisecond, 3700 * time.Millisecond, 9990 * time.Millisecond} {
		sc := githubSixty
		sc.limiter = func() limiter { return &windowHeaders{dialect: "github", offset: offset} }
		sc.steady = offset + headerWindow
		for _, c := range []string{"polite", "polite-cubic", "polite-off"} {
			r := sc.run(t, c, qualitySeed)
			t.Logf("windows from %v, %s: %.1f%% of the quota, %.2f%% refused", offset, c, 100*r.utilization, 100*r.rejected)
			assert.Zero(t, r.rejected, "%v %s", offset, c)
			assert.GreaterOrEqual(t, r.utilization, 0.95, "%v %s", offset, c)
		}
	}
}
