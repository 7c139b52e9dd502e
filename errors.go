package polite

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrThrottled reports that polite refused to wait for permission to send:
// the wait would have ended after the request's context deadline, or a
// pause the server asked for is longer than [WithMaxRetryAfter] allows.
// Errors that match it with [errors.Is] are [*ThrottledError] values.
var ErrThrottled = errors.New("polite: throttled")

// ErrRetryBudgetExhausted reports that a failed attempt was not retried
// because the [RetryBudget] was empty. It is a client-side decision: the
// server did not say it. It is returned, joined with the transport error of
// the last attempt, only when no response was obtained; when there is a
// response, that response is returned instead.
var ErrRetryBudgetExhausted = errors.New("polite: retry budget exhausted (client-side)")

// ThrottledError is the error returned when a request would have had to
// wait longer than allowed before it could be sent. It matches
// [ErrThrottled] with [errors.Is]. No request was sent to the server for
// the attempt that was refused.
type ThrottledError struct {
	// Key is the request's key (see [WithKey]).
	Key string
	// Wait is how long the request would have had to wait.
	Wait time.Duration
	// Allowed is the longest wait that was allowed: the time left before the
	// context deadline, or the [WithMaxRetryAfter] cap for server pauses.
	Allowed time.Duration
	// Server reports whether the wait was asked for by the server
	// (Retry-After on a 429 or 503) rather than by local pacing.
	Server bool
}

// Error implements the error interface.
func (e *ThrottledError) Error() string {
	source := "local pacing"
	if e.Server {
		source = "a server pause"
	}
	return fmt.Sprintf("polite: throttled: %q needs a wait of %v for %s, more than the %v allowed",
		e.Key, e.Wait, source, e.Allowed)
}

// Is reports whether target is [ErrThrottled].
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// ErrRobotsUnreachable reports that a request was not sent because its
// host's robots.txt could not be fetched (a 5xx, a 429 or a network error),
// under [WithCrawlDelay]: RFC 9309 then has crawlers assume the whole host
// disallowed. Errors that match it with [errors.Is] are [*RobotsError]
// values.
var ErrRobotsUnreachable = errors.New("polite: robots.txt unreachable, host off limits")

// RobotsError is the error returned for requests to a host whose
// robots.txt is unreachable. It matches [ErrRobotsUnreachable] with
// [errors.Is]. polite asks for robots.txt again a minute later.
type RobotsError struct {
	Host       string // the host
	StatusCode int    // the status robots.txt was answered with; 0 after a network error
	Err        error  // the network error; nil after a status
}

// Error implements the error interface.
func (e *RobotsError) Error() string {
	switch {
	case e.Err != nil:
		return "polite: robots.txt of " + e.Host + " unreachable (" + e.Err.Error() + "), host off limits"
	case e.StatusCode != 0:
		return "polite: robots.txt of " + e.Host + " unreachable (status " + strconv.Itoa(e.StatusCode) + "), host off limits"
	}
	return "polite: robots.txt of " + e.Host + " unreachable, host off limits"
}

// Is reports whether target is [ErrRobotsUnreachable].
func (e *RobotsError) Is(target error) bool { return target == ErrRobotsUnreachable }

// Unwrap returns the network error, if any.
func (e *RobotsError) Unwrap() error { return e.Err }

// budgetError is returned when a transport error was not retried because the
// retry budget was empty. It matches both ErrRetryBudgetExhausted and the
// transport error.
type budgetError struct{ err error }

func (e *budgetError) Error() string {
	return ErrRetryBudgetExhausted.Error() + ", last attempt: " + e.err.Error()
}

func (e *budgetError) Unwrap() []error { return []error{ErrRetryBudgetExhausted, e.err} }

// errNilResponse replaces the (nil, nil) result of a RoundTripper that
// breaks its contract, so that polite never returns (nil, nil) itself.
var errNilResponse = errors.New("polite: next RoundTripper returned a nil response and a nil error")
