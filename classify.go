package polite

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"syscall"
)

// What is retried: which requests may be sent again, and which failures
// are worth it.

// bodyReplayable reports whether the request's body, if it has one, can
// be rebuilt for another attempt.
func (c *call) bodyReplayable() bool {
	req := c.req
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// methodReplayable reports whether the request may be sent more than once
// whatever becomes of its first attempt: its method is idempotent, it
// carries an idempotency key, or the Transport retries non-idempotent
// requests.
func (c *call) methodReplayable() bool {
	return c.t.cfg.retryUnsafe || Idempotent(c.req)
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
