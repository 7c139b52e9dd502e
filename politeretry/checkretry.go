package politeretry

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/politehttp/polite"
)

var _ retryablehttp.CheckRetry = CheckRetry

// CheckRetry is a [retryablehttp.CheckRetry] with polite's rules. It
// decides, in this order:
//
//  1. The request's context is done: (false, ctx.Err()), as retryablehttp's
//     DefaultRetryPolicy.
//  2. err matches [polite.ErrThrottled], [polite.ErrRetryBudgetExhausted] or
//     [polite.ErrRobotsUnreachable]: (false, err). These are polite's own
//     refusals, made without sending anything; retrying them only burns
//     attempts (retryablehttp's DefaultRetryPolicy retries them: they
//     arrive in a *url.Error that matches none of its patterns).
//  3. The failure is not worth retrying by [polite.Retryable] (any status
//     but 408, 429, 500, 502, 503 and 504; a TLS or certificate error, an
//     error polite does not know): (false, nil).
//  4. The request may not be sent twice: (false, nil). It may when its
//     method is GET, HEAD, OPTIONS, TRACE, PUT or DELETE, or when it
//     carries an Idempotency-Key or X-Idempotency-Key header, as polite
//     decides for itself; retryablehttp retries POST on a 5xx by default.
//     The request judged is the caller's, the first of a redirect chain
//     (resp.Request is the last hop, which a 303 turns into a GET, while
//     retryablehttp resends the first). Without a response, only the
//     *url.Error that http.Client returns is left, which names the method
//     but not the headers: GET, HEAD, OPTIONS, TRACE, PUT and DELETE are
//     retried, other methods are not, whatever their headers, even after
//     an error that proves its server did not process the request
//     ([polite.Unprocessed]), which polite retries for itself: the error
//     may come from a later hop of a redirect chain whose first request
//     the server did process, and it does not say.
//  5. The server asked for a delay ([polite.Signals.Delay]) longer than
//     [polite.DefaultMaxRetryAfter] (the Transport's [polite.WithMaxRetryAfter]
//     under [NewClient]), or one that ends after the context's deadline:
//     (false, nil), so that retryablehttp hands the response (a 429 with
//     its body) to the caller at once instead of waiting in vain.
//
// Otherwise it returns (true, nil). When it returns (false, nil) with a
// response, retryablehttp returns that response with a nil error and its
// body unread; when it returns an error, retryablehttp (without an
// ErrorHandler) returns that error, wrapped in its "giving up" error,
// which [errors.Is] sees through, and closes the response.
//
// A request body is never an issue: retryablehttp buffers it and sends it
// again whole.
func CheckRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	return checkRetry(ctx, resp, err, polite.DefaultMaxRetryAfter)
}

// checkRetry is CheckRetry with the longest server delay worth waiting for.
func checkRetry(ctx context.Context, resp *http.Response, err error, maxRetryAfter time.Duration) (bool, error) {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return false, ctxErr
	}
	if errors.Is(err, polite.ErrThrottled) || errors.Is(err, polite.ErrRetryBudgetExhausted) ||
		errors.Is(err, polite.ErrRobotsUnreachable) {
		return false, err
	}
	if !polite.Retryable(resp, err) || !replayable(resp, err) {
		return false, nil
	}
	if resp != nil {
		now := time.Now()
		if delay, ok := polite.ParseSignals(resp.Header, now).Delay(now); ok {
			if delay > maxRetryAfter {
				return false, nil
			}
			if deadline, ok := ctx.Deadline(); ok && now.Add(delay).After(deadline) {
				return false, nil
			}
		}
	}
	return true, nil
}

// replayable reports whether the request that got resp or err may be sent
// again: see CheckRetry, rule 4. A response without its Request (which
// http.Client always sets) is judged as a transport error is.
func replayable(resp *http.Response, err error) bool {
	if resp != nil && resp.Request != nil {
		req := resp.Request
		for req.Response != nil && req.Response.Request != nil { // back to the caller's request
			req = req.Response.Request
		}
		return polite.Idempotent(req)
	}
	// http.Client names the first request's method in Op, as "Get", "Post".
	var urlErr *url.Error
	return errors.As(err, &urlErr) && polite.Idempotent(&http.Request{Method: strings.ToUpper(urlErr.Op)})
}
