package politeretry

import (
	"context"
	"net/http"
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
//   - Backoff, CheckRetry and PrepareRetry set to this package's
//     [Backoff], [CheckRetry] and [PrepareRetry] (CheckRetry with the
//     Transport's [polite.WithMaxRetryAfter] as the longest server delay
//     worth a retry);
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
//
// A retry counts as one for polite too ([PrepareRetry]): its events number
// it, metrics count it as a retry (package politeotel's polite.retry), and
// spans under polite carry its http.request.resend_count.
func NewClient(opts ...polite.Option) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.Backoff = Backoff
	c.PrepareRetry = PrepareRetry
	t := polite.New(c.HTTPClient.Transport, append(slices.Clip(opts), polite.WithMaxAttempts(1))...)
	c.HTTPClient.Transport = t
	maxRetryAfter := t.MaxRetryAfter()
	c.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
		return checkRetry(ctx, resp, err, maxRetryAfter)
	}
	return c
}

var _ retryablehttp.PrepareRetry = PrepareRetry

// PrepareRetry is a [retryablehttp.PrepareRetry] that tells polite, in the
// request's context, how many times retryablehttp has sent the request
// before ([polite.ContextWithResendCount]): under a [polite.Transport]
// that does not retry itself, every attempt would otherwise look like a
// first one. retryablehttp calls it on its own copy of the request before
// each retry, never on the caller's. Chain it in a PrepareRetry of your
// own if you set one.
func PrepareRetry(req *http.Request) error {
	ctx := req.Context()
	*req = *req.WithContext(polite.ContextWithResendCount(ctx, polite.ResendCount(ctx)+1))
	return nil
}
