package politeretry

import (
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/politehttp/polite"
)

var _ retryablehttp.Backoff = Backoff

// Backoff is a [retryablehttp.Backoff]: it returns how long a
// retryablehttp.Client waits before retry attemptNum+1 (attemptNum is
// 0-based, as retryablehttp counts), given the response that failed (nil
// after a transport error).
//
// The wait is the longer of two delays, never more than max (the client's
// RetryWaitMax):
//
//   - full jitter: a duration drawn uniformly from [0, min(max, min·2^attemptNum));
//     the ceiling saturates at max, so no attemptNum overflows it, and a
//     negative attemptNum counts as 0;
//   - the server's delay, as polite reads it ([polite.ParseSignals] and
//     [polite.Signals.Delay]): Retry-After in seconds (fractions too) or an
//     HTTP-date in any of the three formats, retry-after-ms and its vendor
//     variants, X-RateLimit-Retry-After, or the time until the reset of a
//     quota the response reports spent. Jitter never shortens it.
//
// A server delay longer than max is cut to max: retryablehttp's own
// backoffs return Retry-After as is (go-retryablehttp#247, #295), and
// wrap a huge one to a negative wait that retries at once (PR #297).
// Under a [polite.Transport] a longer pause is still honoured: polite holds
// the retry until the pause ends, or refuses it with a [polite.ThrottledError]
// if the pause is longer than its [polite.WithMaxRetryAfter]; [NewClient]'s
// CheckRetry stops before that happens (the package's [CheckRetry], for
// pauses over a minute, polite's default).
//
// min <= 0 means no jitter: only the server's delay is waited for. max <= 0
// means no wait at all: Backoff returns 0. The result is never negative.
// Backoff reads only the response's headers (retryablehttp has drained its
// body) and is safe for concurrent use.
func Backoff(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration {
	if max <= 0 {
		return 0
	}
	wait := time.Duration(0)
	if ceiling := ceiling(min, max, attemptNum); ceiling > 0 {
		wait = rand.N(ceiling)
	}
	if resp != nil {
		now := time.Now()
		if d, ok := polite.ParseSignals(resp.Header, now).Delay(now); ok {
			wait = maxDuration(wait, d)
		}
	}
	return minDuration(wait, max)
}

// ceiling returns min(max, min·2^n) for max > 0, without overflow: 0 when
// min <= 0, min when n <= 0.
func ceiling(min, max time.Duration, n int) time.Duration {
	switch {
	case min <= 0:
		return 0
	case min >= max:
		return max
	case n <= 0:
		return min
	case n >= 63 || min > max>>n: // min·2^n > max
		return max
	}
	return min << n
}

// minDuration and maxDuration stand for the builtins, which Backoff's
// parameters, named as retryablehttp names them, shadow.
func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}
