package polite

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
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

// ErrTooLarge reports that a request was not sent because its cost (see
// [WithCost]) is larger than the server's whole limit in some unit: no
// wait would let it through. Errors that match it with [errors.Is] are
// [*CostError] values.
var ErrTooLarge = errors.New("polite: request larger than the server's limit")

// CostError is the error returned for a request whose cost is larger than
// the limit the server states (or [WithQuota] states) in some unit. It
// matches [ErrTooLarge] with [errors.Is]. The request was not sent.
type CostError struct {
	Key   string  // the request's key (see [WithKey] and [Estimator])
	Unit  string  // the unit, as [Quota.Unit] names it
	Cost  float64 // the request's cost in Unit
	Limit float64 // the server's limit in Unit
}

// Error implements the error interface.
func (e *CostError) Error() string {
	return fmt.Sprintf("polite: %q: a request of %s %s is larger than the server's limit of %s",
		e.Key, strconv.FormatFloat(e.Cost, 'f', -1, 64), e.Unit, strconv.FormatFloat(e.Limit, 'f', -1, 64))
}

// Is reports whether target is [ErrTooLarge].
func (e *CostError) Is(target error) bool { return target == ErrTooLarge }

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

// Error implements the error interface. The text of Err is redacted as
// [Event.Reason] redacts it; Err itself is left as it was.
func (e *RobotsError) Error() string {
	switch {
	case e.Err != nil:
		return "polite: robots.txt of " + e.Host + " unreachable (" + redactedError(e.Err) + "), host off limits"
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
// transport error, which it keeps as it was; its text redacts the
// transport error's (see redactedError).
type budgetError struct{ err error }

func (e *budgetError) Error() string {
	return ErrRetryBudgetExhausted.Error() + ", last attempt: " + redactedError(e.err)
}

func (e *budgetError) Unwrap() []error { return []error{ErrRetryBudgetExhausted, e.err} }

// errNilResponse replaces the (nil, nil) result of a RoundTripper that
// breaks its contract, so that polite never returns (nil, nil) itself.
var errNilResponse = errors.New("polite: next RoundTripper returned a nil response and a nil error")

// redactedError returns err's text with the URL of every [*url.Error] in its
// chain redacted by redactURL, so that the text polite writes (its logs,
// [Event.Reason], the text of the errors it wraps) carries no password,
// query or fragment of a URL: an error of the wrapped RoundTripper, such as
// the *url.Error of an [http.Client] under polite, embeds the request's URL,
// and http.Client strips its password but keeps its query. The URL is
// replaced where it appears in the text, quoted (as url.Error formats it)
// or bare; a URL that an error formats in some other way is not found.
// err itself is not changed.
func redactedError(err error) string {
	s := err.Error()
	for _, ue := range urlErrors(err) {
		if ue.URL == "" {
			continue
		}
		r := redactURL(ue.URL)
		if r == ue.URL {
			continue
		}
		s = strings.ReplaceAll(s, strconv.Quote(ue.URL), strconv.Quote(r))
		s = strings.ReplaceAll(s, ue.URL, r)
	}
	return s
}

// urlErrors returns the [*url.Error] values of err's chain, and of the
// chains it joins.
func urlErrors(err error) []*url.Error {
	var out []*url.Error
	inChain(err, func(e error) bool {
		if ue, ok := e.(*url.Error); ok {
			out = append(out, ue)
		}
		return false // walk the whole chain
	})
	return out
}

// RedactURL returns u as polite writes it in its logs, its events'
// reasons and its errors' texts: with its secrets masked, as
// [url.URL.Redacted] masks a password, and more. The password becomes
// "xxxxx"; a user name without a password (often a token, as in
// https://TOKEN@host) becomes "xxxxx"; a query becomes "REDACTED"; a
// fragment is dropped. So "https://user:pass@host/p?api_key=k" gives
// "https://user:xxxxx@host/p?REDACTED". An opaque URL ("scheme:…") keeps
// its scheme only. u is not modified. A hook or a log of the caller's own
// uses it to name a request as polite does.
func RedactURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		if _, ok := c.User.Password(); ok {
			c.User = url.UserPassword(c.User.Username(), "xxxxx")
		} else {
			c.User = url.User("xxxxx")
		}
	}
	if c.RawQuery != "" || c.ForceQuery {
		c.RawQuery, c.ForceQuery = "REDACTED", false
	}
	c.Fragment, c.RawFragment = "", ""
	if c.Opaque != "" {
		c.Opaque = "REDACTED"
	}
	return c.String()
}

// redactURL is [RedactURL] of the raw URL an error carries; a raw URL
// that does not parse gives "<redacted URL>".
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<redacted URL>"
	}
	return RedactURL(u)
}
