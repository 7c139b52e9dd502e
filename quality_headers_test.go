package polite_test

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// serverClockAhead is how far the header servers' clock runs ahead of the
// suite's: fake time starts in 2000, when a Unix reset would read as
// seconds from now, so the servers live in 2026 and say so in their Date,
// and polite must correct for the skew.
const serverClockAhead = 26 * 365 * 24 * time.Hour

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
type windowHeaders struct {
	dialect string
	window  time.Time
	count   float64
}

const headerWindow = 10 * time.Second

func (w *windowHeaders) allow(now time.Time, perSecond float64) (bool, int, []string) {
	if start := now.Truncate(headerWindow); !start.Equal(w.window) {
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
