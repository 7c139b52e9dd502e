package polite

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"syscall"
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

// Idempotent reports whether req may be sent more than once by its
// method or headers, as polite decides before it retries: its method is
// idempotent (GET, HEAD, OPTIONS, TRACE, PUT, DELETE; RFC 9110 §9.2.2),
// or it carries an Idempotency-Key or X-Idempotency-Key header (present,
// even empty, as net/http counts a key present with a nil value). It does
// not look at the body.
func Idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	_, ok := req.Header["Idempotency-Key"]
	if !ok {
		_, ok = req.Header["X-Idempotency-Key"]
	}
	return ok
}

// Retryable reports whether a failed attempt is worth sending again by
// polite's rules: a response with status 408, 429, 500, 502, 503 or 504
// (never 501), or, when resp is nil, a transport error that may pass
// (connection refused or reset, EOF, timeouts, temporary DNS failures; never
// TLS or certificate errors, context.Canceled, or an error polite does not
// know). It judges the failure only: whether the request's context is done
// (a deadline exceeded looks like any timeout), and whether the request
// may be sent again (its method, its body), are the caller's to check.
// Code that retries on its own, such as a go-retryablehttp CheckRetry,
// uses it to retry what polite would.
func Retryable(resp *http.Response, err error) bool {
	if resp != nil {
		return retryableStatus(resp.StatusCode)
	}
	if err == nil {
		return false
	}
	retry, _ := retryableError(err)
	return retry
}

// retryableStatus reports whether a response status is worth retrying.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, http.StatusInternalServerError,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryableError reports whether a transport error may pass if the request
// is sent again, and whether it is a timeout. Errors are classified by
// type, never by message; an error polite does not know is not retried.
func retryableError(err error) (retry, timeout bool) {
	if isTLSError(err) {
		return false, false
	}
	if errors.Is(err, context.Canceled) {
		return false, false
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return dnsErr.IsTimeout || dnsErr.IsTemporary, dnsErr.IsTimeout
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return true, true
	}
	var opErr *net.OpError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, net.ErrClosed), errors.As(err, &opErr), isGoAway(err):
		return true, false
	}
	return false, false
}

// Unprocessed reports whether err, a failed attempt's error, proves that
// the server did not process the request, so that sending it again cannot
// do twice what the request does, whatever its method: the connection was
// never made (a dial error: refused, unreachable, timed out; a DNS
// failure), or the server refused the request's HTTP/2 stream with
// REFUSED_STREAM, by which it says it processed nothing (RFC 9113 §8.7).
// polite retries such a request even when its method is not idempotent
// (its body must still be one it can rebuild).
//
// net/http itself sends such a request again while it can (a REFUSED_STREAM
// up to 6 times in a minute; an HTTP/1 request it had not begun to write,
// at once); this judges what it hands up when it stops. A GOAWAY is not
// among them: net/http replays the requests a GOAWAY left unprocessed, and
// one it hands up was covered by the GOAWAY, so may have been processed.
// Neither is a connection reset or closed after it was made: the server
// may have read the request.
func Unprocessed(err error) bool {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return true
	}
	return inChain(err, isRefusedStream)
}

// http2RefusedStream is HTTP/2's error code REFUSED_STREAM.
const http2RefusedStream = 0x7

// isRefusedStream reports whether err itself (not its chain) is an HTTP/2
// stream error with the code REFUSED_STREAM: net/http's bundled
// http2StreamError, which is unexported, or golang.org/x/net/http2's
// StreamError, told by type and by their field Code, never by the message.
func isRefusedStream(err error) bool {
	v := reflect.ValueOf(err)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return false
		}
		v = v.Elem()
	}
	t := v.Type()
	if v.Kind() != reflect.Struct ||
		!(t.PkgPath() == "net/http" && t.Name() == "http2StreamError" ||
			t.PkgPath() == "golang.org/x/net/http2" && t.Name() == "StreamError") {
		return false
	}
	code := v.FieldByName("Code")
	return code.IsValid() && code.CanUint() && code.Uint() == http2RefusedStream
}

// inChain reports whether is holds for err or any error it wraps, through
// Unwrap() error and Unwrap() []error.
func inChain(err error, is func(error) bool) bool {
	if err == nil {
		return false
	}
	if is(err) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return inChain(u.Unwrap(), is)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if inChain(e, is) {
				return true
			}
		}
	}
	return false
}

// isGoAway reports whether err is HTTP/2's GOAWAY that closed the
// connection under a request it covered: the HTTP/1 connection closed
// mid-request (EOF) in HTTP/2's terms. A GOAWAY below the request's stream
// never comes here: net/http sends such a request again itself. The error
// types are net/http's bundled http2GoAwayError, which is unexported, and
// golang.org/x/net/http2's GoAwayError: they are told by their type's
// package and name, never by the message.
func isGoAway(err error) bool {
	return inChain(err, func(err error) bool {
		t := reflect.TypeOf(err)
		if t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		return t.PkgPath() == "net/http" && t.Name() == "http2GoAwayError" ||
			t.PkgPath() == "golang.org/x/net/http2" && t.Name() == "GoAwayError"
	})
}

// isTLSError reports whether err comes from TLS: a handshake or certificate
// failure that sending again will not cure.
func isTLSError(err error) bool {
	var (
		verifyErr  *tls.CertificateVerificationError
		recordErr  tls.RecordHeaderError
		alertErr   tls.AlertError
		echErr     *tls.ECHRejectionError
		authErr    x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
		opErr      *net.OpError
	)
	if errors.As(err, &verifyErr) || errors.As(err, &recordErr) || errors.As(err, &alertErr) ||
		errors.As(err, &echErr) || errors.As(err, &authErr) || errors.As(err, &hostErr) ||
		errors.As(err, &invalidErr) {
		return true
	}
	// crypto/tls reports alerts as *net.OpError with these operations.
	return errors.As(err, &opErr) && (opErr.Op == "remote error" || opErr.Op == "local error")
}
