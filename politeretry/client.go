package politeretry

import (
	"slices"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/politehttp/polite"
)

// NewClient returns a [retryablehttp.Client] that paces and listens as
// polite does and retries as retryablehttp does, by polite's rules. It is
// retryablehttp.NewClient() (RetryMax 4, RetryWaitMin 1s, RetryWaitMax
// 30s, a pooled transport of its own) with:
//
//   - Logger nil: nothing is logged to stderr (set Logger, or give polite
//     [polite.WithLogger], to log);
//   - Backoff and CheckRetry set to this package's [Backoff] and
//     [CheckRetry];
//   - HTTPClient.Transport wrapped in a [polite.Transport] made with opts
//     and then [polite.WithMaxAttempts](1), which overrides any attempts
//     opts set.
//
// polite thus paces every attempt, honours the server's pauses and adapts
// its rate, but never resends: retryablehttp does. Were both to retry at
// their defaults, polite's 4 attempts inside each of retryablehttp's 5
// would make one call up to 20 requests to a failing server. As polite
// does not retry, its retry budget ([polite.WithRetryBudget]) is not used.
//
// The client's fields may be changed before its first use, as
// retryablehttp asks (go-retryablehttp#119); keep its Backoff and
// CheckRetry, or wrap them, to keep polite's rules.
func NewClient(opts ...polite.Option) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.Backoff = Backoff
	c.CheckRetry = CheckRetry
	c.HTTPClient.Transport = polite.New(c.HTTPClient.Transport,
		append(slices.Clip(opts), polite.WithMaxAttempts(1))...)
	return c
}
