package robots

import (
	"context"
	"sync"
	"time"

	"github.com/politehttp/polite/internal/gate"
)

// A Site is what polite knows of one host's robots.txt, and the spacing
// of the requests to that host. Its zero value knows nothing yet.
type Site struct {
	// mu guards the fields below.
	mu       sync.Mutex
	fetching chan struct{} // closed when the fetch under way ends; nil if none
	expires  int64         // Unix nanoseconds until which what follows holds; 0 before the first fetch
	delay    time.Duration // the host's Crawl-delay (or Request-rate), capped
	err      error         // non-nil while robots.txt is unreachable: the host is off limits
	next     int64         // Unix nanoseconds before which no request may go to the host
}

// Busy reports whether forgetting s at now, the present, would lose
// something: its robots.txt is being fetched, or the host's spacing has
// not run out. A site locked at that moment is in use: busy.
func (s *Site) Busy(now int64) bool {
	if !s.mu.TryLock() {
		return true
	}
	defer s.mu.Unlock()
	return s.fetching != nil || s.next > now
}

// A Fetch asks the host for its robots.txt and returns its Crawl-delay
// for the attempt's user agent; offLimits, when robots.txt is unreachable
// (RFC 9309 then has crawlers assume the whole host disallowed); err, the
// context's cause, when the caller gave up.
type Fetch func() (delay time.Duration, offLimits, err error)

// Admit makes sure the host's robots.txt is known at now, fetching it
// with fetch if it is not (one attempt fetches; the others wait for it,
// and read the clock again once it is over), and refuses
// the attempt if robots.txt is unreachable: it tells w's Listener and
// returns the error fetch made. If the attempt's fetch ended with no
// answer (the caller gave up, or a panic), the site is left as it was, for
// another attempt to fetch: the attempts waiting never wait for a fetch
// that is over.
func (s *Site) Admit(w *gate.Waiter, now time.Time, fetch Fetch) error {
	for ; ; now = time.Now() {
		s.mu.Lock()
		switch n := now.UnixNano(); {
		case s.expires > n:
			err := s.err
			s.mu.Unlock()
			if err != nil {
				w.L.OffLimits(w.Who, err)
				return err
			}
			return nil
		case s.fetching != nil:
			wait := s.fetching
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-w.Ctx.Done():
				return context.Cause(w.Ctx)
			}
		}
		done := make(chan struct{})
		s.fetching = done
		s.mu.Unlock()
		if err := s.fetch(fetch, done); err != nil {
			return err
		}
	}
}

// fetch runs fetch for s, which the attempt marked as fetching with done,
// keeps what it says, and closes done.
func (s *Site) fetch(fetch Fetch, done chan struct{}) error {
	defer func() {
		s.mu.Lock()
		s.fetching = nil
		s.mu.Unlock()
		close(done)
	}()
	delay, offLimits, err := fetch()
	if err != nil {
		return err
	}
	s.mu.Lock()
	now := time.Now()
	s.delay, s.err = delay, offLimits
	s.expires = now.Add(TTL).UnixNano()
	if offLimits != nil {
		s.expires = now.Add(Retry).UnixNano()
	}
	s.mu.Unlock()
	return nil
}

// Space waits for the host's Crawl-delay since its last request,
// randomized by jitter (gaps of the delay times a factor drawn from
// [1−jitter, 1+jitter] with random), and takes the next slot.
func (s *Site) Space(w *gate.Waiter, jitter float64, random func() float64) error {
	s.mu.Lock()
	if s.delay <= 0 {
		s.mu.Unlock()
		return nil
	}
	now := time.Now()
	slot := max(s.next, now.UnixNano())
	gap := s.delay
	if jitter > 0 {
		gap = time.Duration(float64(gap) * (1 - jitter + 2*jitter*random()))
	}
	s.next = slot + int64(gap)
	s.mu.Unlock()
	wait := time.Duration(slot - now.UnixNano())
	if wait <= 0 {
		return nil
	}
	return w.For(wait, now, gate.CrawlDelay, false, func() {
		s.mu.Lock()
		if s.next == slot+int64(gap) { // no one came after: the slot is free again
			s.next = slot
		}
		s.mu.Unlock()
	})
}
