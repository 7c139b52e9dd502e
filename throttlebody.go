package polite

import (
	"io"
	"net/http"
	"time"

	"github.com/politehttp/polite/internal/signals"
)

// MaxThrottleHead is the most of a response body's head that
// [WithThrottleBody] reads.
const MaxThrottleHead = 64 << 10

// WithThrottleBody tells polite of throttles that a response's status does
// not show: GraphQL APIs answer a spent quota with 200 and an error in the
// body (Shopify's THROTTLED, GitHub's RATE_LIMITED). For each response
// with a 2xx status, polite reads at most n bytes of the body's head (less
// if the body ends first) before it hands the response on, and calls read
// with them; the caller still reads the whole body. If read reports a
// throttle, the attempt is a throttle as a 429 is: it is retried after
// retryAfter (0: as the backoff says), and the key's pacing hears of it.
// read must be safe for concurrent use and must not keep head.
//
// Reading the head waits for it: do not use it where a 2xx answer streams
// slowly (server-sent events).
//
// Default: none. n is clamped to [1, MaxThrottleHead]; a nil read
// restores the default.
func WithThrottleBody(n int, read func(resp *http.Response, head []byte) (retryAfter time.Duration, throttled bool)) Option {
	return func(c *config) { c.throttleBody = throttleBody{n: min(max(n, 1), MaxThrottleHead), read: read} }
}

// throttleBody is what WithThrottleBody sets.
type throttleBody struct {
	n    int
	read func(resp *http.Response, head []byte) (time.Duration, bool)
}

// bodyThrottle reports whether resp, a 2xx answer, is a throttle by its
// body under WithThrottleBody, reading the body's head and putting it back
// in front of the rest; a Retry-After it tells goes into s, unless the
// headers had one.
func (c *call) bodyThrottle(resp *http.Response, s *signals.Signals) bool {
	tb := c.t.cfg.throttleBody
	if tb.read == nil || resp.StatusCode < 200 || resp.StatusCode > 299 || resp.Body == nil || resp.Body == http.NoBody {
		return false
	}
	head := make([]byte, tb.n)
	n, err := io.ReadFull(resp.Body, head)
	if err == io.ErrUnexpectedEOF {
		err = io.EOF
	}
	head = head[:n]
	resp.Body = &headBody{head: head, err: err, rest: resp.Body}
	delay, throttled := tb.read(resp, head)
	if throttled && delay > 0 && !s.HasRetryAfter {
		s.RetryAfter, s.HasRetryAfter, s.RetryAfterSlack = delay, true, 0
	}
	return throttled
}

// headBody is a body whose head was read: it reads the head again, then
// the rest (or the error that ended the head's reading).
type headBody struct {
	head []byte
	err  error // what reading the head ended with; nil if the rest may follow
	rest io.ReadCloser
}

func (b *headBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	return b.rest.Read(p)
}

func (b *headBody) Close() error { return b.rest.Close() }
