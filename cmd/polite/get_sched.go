package main

import (
	"container/list"
	"context"
	"net/url"
	"strings"
	"sync"
)

// getScheduler hands the URLs out, at most -workers calls at once, host
// by host in turn, and gives no host more calls at once than its share:
// the workers divided by the hosts that have URLs left, rounded up.
//
// polite makes each host's calls wait for that host's pace, so a call to
// a slow host waits; the share keeps slow hosts from holding every worker
// while others have work, and grows as hosts run out of URLs, so that the
// last host gets every worker.
//
// A call asleep before a retry (a Retry-After, a backoff) gives its place
// up until the retry is sent, so that a host whose calls were all refused
// at once does not sit idle for the length of the server's Retry-After
// while other calls could go at the pace polite has since set. Two bounds
// keep this from multiplying the calls when servers refuse: at most
// getMaxAsleep times -workers calls are asleep so at once, and a call gives
// its place up only while polite's retry budget still holds a retry for
// each of -workers calls (otherwise the calls let in could empty it, and
// the URLs refused after that would fail without a retry).
// Beyond either bound, a call asleep keeps its place.
//
// A scheduler is safe for concurrent use.
type getScheduler struct {
	mu      sync.Mutex
	more    *sync.Cond // signalled when a place frees
	workers int
	active  int           // calls holding a place
	asleep  int           // calls that gave their place up while asleep
	ring    *list.List    // of *getHostQueue: the hosts with URLs left, in turn
	cursor  *list.Element // the host to look at first; nil for the ring's front
}

// getMaxAsleep times -workers is the most calls that give their place up
// while asleep before a retry.
const getMaxAsleep = 2

// getRetryCost is what a retry takes from polite's retry budget (its package
// documentation states it; 10 after a timeout).
const getRetryCost = 5

// getHostQueue is one host's URLs not yet handed out, and how many of its
// calls hold a place.
type getHostQueue struct {
	urls []string
	busy int
}

// getJob is a URL handed out, with the queue of its host.
type getJob struct {
	url    string
	host   *getHostQueue
	asleep bool // it gave its place up; guarded by the scheduler's mu
}

// newGetScheduler returns a scheduler of urls for workers places. Hosts
// take turns in the order they first appear in urls, and each host's
// URLs go in their order there.
func newGetScheduler(urls []string, workers int) *getScheduler {
	s := &getScheduler{workers: max(workers, 1), ring: list.New()}
	s.more = sync.NewCond(&s.mu)
	byHost := make(map[string]*getHostQueue)
	for _, u := range urls {
		h := urlHost(u)
		q := byHost[h]
		if q == nil {
			q = new(getHostQueue)
			byHost[h] = q
			s.ring.PushBack(q)
		}
		q.urls = append(q.urls, u)
	}
	return s
}

// take waits for a free place and hands out the next URL: the first of
// the next host in turn that holds fewer places than its share. It
// returns false when no URL is left, or when ctx is done.
func (s *getScheduler) take(ctx context.Context) (*getJob, bool) {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.more.Broadcast()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.active >= s.workers && s.ring.Len() > 0 && ctx.Err() == nil {
		s.more.Wait()
	}
	n := s.ring.Len()
	if n == 0 || ctx.Err() != nil {
		return nil, false
	}
	share := (s.workers + n - 1) / n
	e := s.cursor
	if e == nil {
		e = s.ring.Front()
	}
	// Fewer places are held than there are workers, and the shares of
	// the hosts in the ring add up to at least the workers: one of them
	// is under its share. The least busy host is the fallback all the
	// same.
	pick := e
	for range n {
		q := e.Value.(*getHostQueue)
		if q.busy < share {
			pick = e
			break
		}
		if q.busy < pick.Value.(*getHostQueue).busy {
			pick = e
		}
		e = s.next(e)
	}
	q := pick.Value.(*getHostQueue)
	u := q.urls[0]
	q.urls[0] = ""
	q.urls = q.urls[1:]
	q.busy++
	s.active++
	s.cursor = s.next(pick)
	if len(q.urls) == 0 {
		if s.cursor == pick {
			s.cursor = nil
		}
		s.ring.Remove(pick)
	}
	return &getJob{url: u, host: q}, true
}

// sleep tells the scheduler that j's call is asleep before a retry, with
// budget tokens left in polite's retry budget: it gives its place up,
// unless getMaxAsleep times -workers calls have already, or the budget does
// not hold a retry for each of -workers calls.
func (s *getScheduler) sleep(j *getJob, budget int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j.asleep || s.asleep >= getMaxAsleep*s.workers || budget < getRetryCost*s.workers {
		return
	}
	j.asleep = true
	s.asleep++
	s.active--
	j.host.busy--
	s.more.Signal()
}

// wake tells the scheduler that j's call is sending again: it takes a
// place back, even if that makes more than -workers for a while.
func (s *getScheduler) wake(j *getJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakeLocked(j)
}

// wakeLocked is wake with s.mu held.
func (s *getScheduler) wakeLocked(j *getJob) {
	if !j.asleep {
		return
	}
	j.asleep = false
	s.asleep--
	s.active++
	j.host.busy++
}

// release tells the scheduler that j's call is over: its place is free.
func (s *getScheduler) release(j *getJob) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wakeLocked(j)
	s.active--
	j.host.busy--
	s.more.Signal()
}

// next returns the element after e in the ring, going round.
func (s *getScheduler) next(e *list.Element) *list.Element {
	if n := e.Next(); n != nil {
		return n
	}
	return s.ring.Front()
}

// urlHost returns the host that polite keys rawURL's calls by (its host
// and port, lower-cased), or "" if it does not parse.
func urlHost(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Host)
}
