package politeotel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
)

// The values of the attributes that politeotel names from bounded sets.

// methodCode returns the code of a request's method: one of the methods
// of the semantic conventions, or _OTHER.
func methodCode(m string) uint8 {
	switch m {
	case http.MethodGet, "":
		return 0
	case http.MethodHead:
		return 1
	case http.MethodPost:
		return 2
	case http.MethodPut:
		return 3
	case http.MethodPatch:
		return 4
	case http.MethodDelete:
		return 5
	case http.MethodOptions:
		return 6
	case http.MethodTrace:
		return 7
	case http.MethodConnect:
		return 8
	}
	return 9
}

// methodName returns the name of a method code.
func methodName(c uint8) string {
	switch c {
	case 0:
		return http.MethodGet
	case 1:
		return http.MethodHead
	case 2:
		return http.MethodPost
	case 3:
		return http.MethodPut
	case 4:
		return http.MethodPatch
	case 5:
		return http.MethodDelete
	case 6:
		return http.MethodOptions
	case 7:
		return http.MethodTrace
	case 8:
		return http.MethodConnect
	}
	return "_OTHER"
}

// priorityValue returns the value of the priority attribute: the name of
// p's class, or its number for a value between classes. There are at most
// 256, and only those a program uses are met.
func priorityValue(p polite.Priority) string {
	switch p {
	case polite.PriorityCritical, polite.PriorityInteractive, polite.PriorityDefault, polite.PriorityBatch,
		polite.PriorityBackground:
		return p.String()
	}
	return strconv.Itoa(int(p))
}

// A label is the value of an instrument's own attribute.
type label uint8

const (
	labelNone label = iota
	// polite.reason
	reasonThrottled
	reasonServerError
	reasonTimeout
	reasonTransportError
	// polite.throttle
	throttle429
	throttle503
	throttleQuota
	// polite.fleet.op
	opReserve
	opCongest
	opPause
	opBudget
	opAdjust
	opOther
	// polite.wait: the wait causes follow, from waitBase + cause
	waitBase
)

func (l label) String() string {
	switch l {
	case reasonThrottled:
		return "throttled"
	case reasonServerError:
		return "server_error"
	case reasonTimeout:
		return "timeout"
	case reasonTransportError:
		return "transport_error"
	case throttle429:
		return "429"
	case throttle503:
		return "503"
	case throttleQuota:
		return "quota"
	case opReserve:
		return "reserve"
	case opCongest:
		return "congest"
	case opPause:
		return "pause"
	case opBudget:
		return "budget"
	case opAdjust:
		return "adjust"
	case opOther:
		return "_OTHER"
	}
	if l > waitBase {
		return polite.WaitCause(l - waitBase).String()
	}
	return ""
}

// waitLabel returns the label of a wait's cause.
func waitLabel(w polite.WaitCause) label {
	if w == 0 || w > 64 {
		w = polite.WaitRate
	}
	return waitBase + label(w)
}

// opLabel returns the label of a fleet's Redis call.
func opLabel(op string) label {
	switch op {
	case "reserve":
		return opReserve
	case "congest":
		return opCongest
	case "pause":
		return opPause
	case "budget":
		return opBudget
	case "adjust":
		return opAdjust
	}
	return opOther
}

// An errKind is an error.type: a short name from a bounded set.
type errKind uint8

const (
	errNone errKind = iota
	errThrottled
	errBudget
	errRobots
	errCanceled
	errDeadline
	errTLS
	errDNS
	errTimeout
	errRefused
	errReset
	errEOF
	errBreakerOpen
	errRedis
	errOverloaded
	errTooLarge
	errOther
)

func (k errKind) String() string {
	switch k {
	case errThrottled:
		return "throttled"
	case errBudget:
		return "retry_budget_exhausted"
	case errRobots:
		return "robots_unreachable"
	case errTooLarge:
		return "too_large"
	case errCanceled:
		return "canceled"
	case errDeadline:
		return "deadline_exceeded"
	case errTLS:
		return "tls"
	case errDNS:
		return "dns"
	case errTimeout:
		return "timeout"
	case errRefused:
		return "connection_refused"
	case errReset:
		return "connection_reset"
	case errEOF:
		return "eof"
	case errBreakerOpen:
		return "breaker_open"
	case errRedis:
		return "redis_error"
	case errOverloaded:
		return "overloaded"
	case errOther:
		return "_OTHER"
	}
	return ""
}

// errorType returns the error.type of err: errOther for an error
// politeotel does not know.
func errorType(err error) errKind {
	switch {
	case err == nil:
		return errNone
	case errors.Is(err, polite.ErrThrottled):
		return errThrottled
	case errors.Is(err, polite.ErrRetryBudgetExhausted):
		return errBudget
	case errors.Is(err, polite.ErrRobotsUnreachable):
		return errRobots
	case errors.Is(err, polite.ErrTooLarge):
		return errTooLarge
	case errors.Is(err, context.Canceled):
		return errCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return errDeadline
	case is[*tls.CertificateVerificationError](err), is[x509.UnknownAuthorityError](err),
		is[x509.HostnameError](err):
		return errTLS
	case is[*net.DNSError](err):
		return errDNS
	case isTimeout(err):
		return errTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return errRefused
	case errors.Is(err, syscall.ECONNRESET):
		return errReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errEOF
	}
	return errOther
}

// is reports whether err's tree holds an error of type T. Each test
// allocates its own target only when it runs.
func is[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

// isTimeout reports whether err's tree holds a net.Error that timed out.
func isTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// fleetErrorType returns the error.type of a fleet's failed call.
func fleetErrorType(err error) errKind {
	switch {
	case errors.Is(err, fleet.ErrBreakerOpen):
		return errBreakerOpen
	case errors.Is(err, fleet.ErrTimeout):
		return errTimeout
	case errors.Is(err, fleet.ErrOverloaded):
		return errOverloaded
	}
	return errRedis
}

// retryReason returns why the attempt of e is retried: the server
// throttled it (as polite's controller heard it), timed out, failed, or the
// transport did.
func retryReason(e polite.Event) label {
	switch code := e.StatusCode; {
	case e.Throttled:
		return reasonThrottled
	case code == http.StatusRequestTimeout, code == http.StatusGatewayTimeout:
		return reasonTimeout
	case code >= 500:
		return reasonServerError
	case e.Err != nil && isTimeout(e.Err):
		return reasonTimeout
	}
	return reasonTransportError
}

// throttleKind returns how the server throttled: 429, 503, or quota (a
// response that reports the quota spent).
func throttleKind(code int) label {
	switch code {
	case http.StatusTooManyRequests:
		return throttle429
	case http.StatusServiceUnavailable:
		return throttle503
	}
	return throttleQuota
}
