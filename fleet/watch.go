package fleet

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A pause one process sets is published on its key's channel; every Fleet
// that has booked a send listens to its namespace's channels, so that the
// sends it booked before the pause, asleep until their slot, hold for it
// rather than go out during it (fleetapi.Fleet.Paused). A Fleet that
// misses a message (Redis down, a reconnection) learns of the pause at its
// next booking, as without listening.

// watcher listens to the pauses of a Fleet's namespace.
type watcher struct {
	mu     sync.Mutex
	until  map[string]time.Time    // key → the end of its pause, as published
	events map[string]uint64       // key → the generation its shared controller's last event began, as published
	passes map[string][]overtaking // key → its last overtakings, as published, oldest first (see Overtaken)
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

// channel returns the channel of key's pauses.
func (f *Fleet) channel(key string) string {
	return f.prefix(key) + "ev"
}

// watch starts listening, once, unless the Fleet is closed.
func (f *Fleet) watch() {
	f.watchOnce.Do(func() {
		w := &f.watcher
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.closed {
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		w.cancel, w.done = cancel, make(chan struct{})
		go func() {
			defer close(w.done)
			// Subscribed here, not on the request's goroutine: the
			// subscription dials Redis and waits for its handshake, under
			// no deadline of the Fleet's (a Redis frozen at a process's
			// start held its first booking 6 s, go-redis's timeouts,
			// before the booking's own deadline began).
			ps := f.rdb.PSubscribe(ctx, f.ns+":v1:*:ev")
			defer ps.Close()
			ch := ps.Channel()
			for {
				select {
				case <-ctx.Done():
					return
				case m, ok := <-ch:
					if !ok {
						return
					}
					f.heard(m)
				}
			}
		}()
	})
}

// heard records a pause, an event of the shared controller ("e" and
// the generation it began), or an overtaking ("o", see lua/lanes.lua),
// published on a key's channel.
func (f *Fleet) heard(m *redis.Message) {
	key, ok := f.keyOf(m.Channel)
	if o, over := strings.CutPrefix(m.Payload, "o"); over {
		if p, err := parseOvertaking(o); ok && err == nil {
			f.heardOvertaking(key, p)
		}
		return
	}
	if g, event := strings.CutPrefix(m.Payload, "e"); event {
		gen, err := strconv.ParseUint(g, 10, 64)
		if ok && err == nil {
			f.heardEvent(key, gen)
		}
		return
	}
	us, err := strconv.ParseInt(m.Payload, 10, 64)
	if !ok || err != nil || us <= 0 {
		return
	}
	until := time.Now().Add(time.Duration(us) * time.Microsecond)
	w := &f.watcher
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.until == nil {
		w.until = make(map[string]time.Time)
	}
	if len(w.until) >= maxPockets { // forget the pauses that are over
		now := time.Now()
		for k, u := range w.until {
			if !u.After(now) {
				delete(w.until, k)
			}
		}
	}
	if len(w.until) < maxPockets && until.After(w.until[key]) {
		w.until[key] = until
	}
}

// heardEvent records that key's shared controller began generation gen
// with a congestion event. It holds maxPockets keys at most: a new key
// past that forgets them all, and a send whose event was forgotten goes at
// the slot it was booked.
func (f *Fleet) heardEvent(key string, gen uint64) {
	w := &f.watcher
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.events == nil || len(w.events) >= maxPockets && w.events[key] == 0 {
		w.events = make(map[string]uint64)
	}
	w.events[key] = max(w.events[key], gen)
}

// Congested reports whether key's shared controller has had a congestion
// event since generation gen, as this process last heard, without asking
// Redis: a send it booked under gen, asleep until its slot, books again at
// the new rate rather than go at the old one (the event let the queue
// of such sends go).
func (f *Fleet) Congested(key string, gen uint64) bool {
	w := &f.watcher
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.events[key] > gen
}

// keyOf returns the polite key of a pause channel of the namespace.
func (f *Fleet) keyOf(channel string) (string, bool) {
	rest, ok := strings.CutPrefix(channel, f.ns+":v1:{")
	if !ok {
		return "", false
	}
	tag, ok := strings.CutSuffix(rest, "}:ev")
	if !ok {
		return "", false
	}
	return tagUnescaper.Replace(tag), true
}

// Paused implements [fleetapi.Fleet]: how long key stays paused, as this
// process last heard, without asking Redis.
func (f *Fleet) Paused(key string) time.Duration {
	w := &f.watcher
	w.mu.Lock()
	defer w.mu.Unlock()
	return max(time.Until(w.until[key]), 0)
}

// Close stops listening for pauses, and waits for the refunds its retry
// budgets were telling Redis. The Fleet still books sends and takes
// retries; it learns of pauses at its bookings only, and a budget tells
// its refunds with its next retry ([Budget.Flush]). It does not close the
// Redis client.
func (f *Fleet) Close() error {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.flushes.Wait()
	w := &f.watcher
	w.mu.Lock()
	w.closed = true
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return nil
}
