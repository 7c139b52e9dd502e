// Package politeretry gives a [retryablehttp.Client]
// (github.com/hashicorp/go-retryablehttp) polite's judgement without
// giving up its API: [Backoff] and [CheckRetry] have retryablehttp's
// signatures and polite's rules, and [NewClient] puts a pacing-only
// [polite.Transport] under the client.
//
//	client := politeretry.NewClient(polite.WithRate(10, 5))
//	resp, err := client.Get("https://api.example/items")
//
// # When to use it
//
// Code that starts afresh needs only polite: an [http.Client] whose
// Transport is a [polite.Transport] paces, retries and listens to the
// server, with a retry budget shared across calls. Use politeretry when
// code already speaks retryablehttp (its Request, its hooks, its
// ErrorHandler, a library that takes a *retryablehttp.Client) and should
// keep doing so.
//
// # The recipe
//
// Only one layer may retry. [NewClient] does what follows, which can also
// be done by hand on a client of one's own, before its first use:
//
//	c := retryablehttp.NewClient()
//	c.Logger = nil
//	c.Backoff = politeretry.Backoff
//	c.CheckRetry = politeretry.CheckRetry
//	c.PrepareRetry = politeretry.PrepareRetry
//	c.HTTPClient.Transport = polite.New(c.HTTPClient.Transport, polite.WithMaxAttempts(1))
//
// polite, below, waits for its turn before every attempt, honours the
// pauses the server asks for, adapts its rate and gives up at once on a
// pause too long ([polite.ErrThrottled]); retryablehttp, above, retries,
// and PrepareRetry tells polite which attempt each retry is.
// Wrapping c.HTTPClient.Transport, rather than passing nil to
// [polite.New], keeps retryablehttp's pooled transport. Because polite
// holds a pause as an absolute time, retryablehttp's wait and polite's
// pause end together: nothing is waited for twice.
//
// # Pitfalls it fixes
//
// Each has a test in this package.
//
//   - Retry multiplication: polite retrying inside each of retryablehttp's
//     attempts makes (1+3)·(1+4) = 20 requests of one call; NewClient
//     makes polite pace only, so a call is at most RetryMax+1 requests.
//   - Retry-After not capped by RetryWaitMax (go-retryablehttp#247, and
//     #295 for RateLimitLinearJitterBackoff): retryablehttp waits an hour
//     on "Retry-After: 3600". Backoff never waits more than RetryWaitMax,
//     and CheckRetry hands such a response back at once.
//   - A huge Retry-After wraps to a negative wait (PR #297): with
//     "Retry-After: 10000000000" retryablehttp retries at once, hot, until
//     RetryMax. Backoff saturates instead.
//   - One HTTP-date format: retryablehttp reads Retry-After dates with
//     time.RFC1123 only (the form go-retryablehttp#144 added); Backoff reads
//     RFC 850 and asctime dates too, and the millisecond and rate-limit
//     headers polite reads.
//   - No jitter: DefaultBackoff is a bare min·2^n, so clients that failed
//     together retry together. Backoff draws full jitter.
//   - polite's refusals retried: a [polite.ThrottledError] or
//     [polite.RobotsError] arrives in a *url.Error, which
//     DefaultRetryPolicy retries, burning attempts without sending
//     anything. CheckRetry never retries them.
//   - POST retried on a 5xx or 429: retryablehttp retries whatever the
//     method. CheckRetry retries only idempotent methods and requests with
//     an Idempotency-Key, judging the caller's request, not the last hop
//     of a redirect.
//   - What is worth retrying: retryablehttp retries every 5xx but 501
//     (505 too) and any error its message patterns do not recognise, and
//     never a 408. CheckRetry uses [polite.Retryable]: 408, 429, 500, 502,
//     503 and 504, and transport errors classified by type, never TLS.
//   - Waiting past the deadline, then losing the response
//     (go-retryablehttp#129): when the server's delay ends after the
//     context's deadline, CheckRetry stops and the response is returned.
//   - Logging to stderr by default: NewClient sets Logger to nil.
//
// # What stays retryablehttp's
//
// When retries run out, retryablehttp drains the last response and
// returns an error ("giving up after 5 attempt(s)"). Its
// PassthroughErrorHandler keeps the response, but may then return it
// together with an error (go-retryablehttp#179), as after a cancelled
// context. On a cancelled context it returns the context's
// error, dropping the response. It buffers request bodies in memory to
// resend them. Its RetryMax counts per call: polite's retry budget, which
// bounds retries across calls, does not apply when retryablehttp retries.
package politeretry
