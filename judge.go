package polite

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/engine"
	"github.com/politehttp/polite/internal/pace"
	"github.com/politehttp/polite/internal/signals"
)

// judge reports whether the attempt failed in a way worth retrying, and
// tells the engine what became of it, in its terms (engine.Answer): a
// transport error, or a response whose status and signals say whether the
// server throttled it, what it says of the server's rate, and the quotas
// and the pause it states. The engine feeds the key's controller, paces
// the key (or the bucket the server names) by the quotas, pauses it for
// the server's delay, and tells the fleet and the memory; the cost the
// attempt took goes with the response's body, to be settled when the
// caller is done with it.
func (c *call) judge(resp *http.Response, err error, now time.Time) (failure, bool) {
	t := c.t
	if err != nil {
		unprocessed := Unprocessed(err)
		t.eng.Judge(&c.ec, &engine.Answer{Now: now, Failed: true, Unprocessed: unprocessed, GaveUp: c.ctx.Err() != nil})
		c.attempted(nil, err, false)
		if c.ctx.Err() != nil {
			return failure{}, false // the caller gave up: nothing was learnt
		}
		retry, timeout := retryableError(err)
		return failure{timeout: timeout, unsent: unprocessed}, retry
	}
	code := resp.StatusCode
	s := signals.Parse(resp.Header, now)
	spent := s.HasQuota && s.Quota.Remaining < 1
	throttled := code == http.StatusTooManyRequests ||
		(code == http.StatusServiceUnavailable && s.HasRetryAfter) ||
		(code == http.StatusForbidden && spent) || // GitHub's primary limit
		c.bodyThrottle(resp, &s)
	// A throttle refuses the request before the server processes it: it
	// may be sent again whatever its method.
	f := failure{throttled: throttled, unsent: throttled}
	f.retryAfter, f.hasRetryAfter = s.Delay(now)
	f.untilReset = f.hasRetryAfter && !s.HasRetryAfter
	a := engine.Answer{Now: now, Outcome: control.OK, Throttled: throttled, Signals: s,
		RetryAfter: f.retryAfter, HasRetryAfter: f.hasRetryAfter}
	switch {
	case throttled:
		a.Outcome = control.Throttled
	case code >= 500:
		a.Outcome = control.Failed // says nothing of the rate
	}
	if h := t.eng.Judge(&c.ec, &a); h != nil && resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = newCostBody(resp, h, t.cfg.usage) // with no body, the estimate stands
	}
	c.attempted(resp, nil, throttled)
	if throttled {
		e := c.event(resp, nil)
		e.RetryAfter, e.Throttled = f.retryAfter, true
		t.throttled(e)
	}
	return f, throttled || retryableStatus(code)
}

// releaseSlotAfter frees the slot the attempt holds, if any, now if the
// attempt produced no response to hand back, or when the caller is done
// with the response's body otherwise.
func (c *call) releaseSlotAfter(resp *http.Response) {
	s := c.ec.Slot()
	if s == nil {
		return
	}
	if resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		s.Release()
		return
	}
	resp.Body = &slotBody{ReadCloser: resp.Body, s: s}
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
