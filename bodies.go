package polite

import (
	"io"
	"net/http"
	"sync/atomic"

	"github.com/politehttp/polite/internal/pace"
	"github.com/politehttp/polite/internal/signals"
)

// drainLimit is how much of a discarded response body is read before it is
// closed, so that its connection can be reused without reading a large body.
const drainLimit = 4 << 10

// discard drains at most drainLimit bytes of a response body and closes it.
func discard(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, drainLimit)
	_ = resp.Body.Close()
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

func closeBody(body io.ReadCloser) {
	if body != nil {
		_ = body.Close()
	}
}

// slotBody frees its request's slot when read to the end, or closed.
type slotBody struct {
	io.ReadCloser
	s    *pace.Slots
	done atomic.Bool
}

func (b *slotBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.release()
	}
	return n, err
}

func (b *slotBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

func (b *slotBody) release() {
	if b.done.CompareAndSwap(false, true) {
		b.s.Release()
	}
}

// bodyThrottle reports whether resp, a 2xx answer, is a throttle by its
// body under WithThrottleBody (tb), reading the body's head and putting it back
// in front of the rest; a Retry-After it tells goes into s, unless the
// headers had one.
func bodyThrottle(tb throttleBody, resp *http.Response, s *signals.Signals) bool {
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
