package fleet

import (
	"strings"
	"testing"

	"github.com/politehttp/polite/fleetapi"
	"github.com/redis/go-redis/v9"
)

// RedisKey returns the Redis key of polite key key with suffix s, m, w or
// r (its memory), under namespace ns.
func RedisKey(ns, key, suffix string) string {
	f := &Fleet{ns: ns}
	switch suffix {
	case "r":
		return f.memoryKey(key)
	case "s":
		return f.keys(key)[0]
	case "w":
		return f.keys(key)[1]
	}
	return f.keys(key)[2]
}

// RoundTrips returns the round trips f made to Redis and the script calls
// they carried.
func RoundTrips(f *Fleet) (trips, calls int64) {
	return f.batch.trips.Load(), f.batch.calls.Load()
}

// CostsTold reports whether f has told Redis every adjustment of its cost
// buckets it was given, none pending or being told.
func CostsTold(f *Fleet) bool {
	f.costs.mu.Lock()
	defer f.costs.mu.Unlock()
	return !f.costs.flushing && len(f.costs.pending) == 0
}

// PendingAdjust returns the adjustment of key's unit that f has not told
// Redis yet, if any.
func PendingAdjust(f *Fleet, key, unit string) (fleetapi.Adjust, bool) {
	f.costs.mu.Lock()
	defer f.costs.mu.Unlock()
	adj, ok := f.costs.pending[key][unit]
	return adj, ok
}

// CostsFlushing reports whether a flush of f's cost adjustments is out.
func CostsFlushing(f *Fleet) bool {
	f.costs.mu.Lock()
	defer f.costs.mu.Unlock()
	return f.costs.flushing
}

// clockRead is the one read of Redis's clock in reserve.lua and in
// congest.lua; clockFromKey is the Lua UseClock puts in its place: a read
// of a string key, the key's state key with ":clock" after it (in the same
// Cluster slot), in µs since 1970, as TIME's seconds and microseconds.
const (
	clockRead    = "redis.call('TIME')"
	clockFromKey = "{'0', redis.call('GET', KEYS[1] .. ':clock')}"
)

// UseClock has the shared controller's scripts (reserveScript and
// congestScript) read the time from the key ClockKey names, which the test
// sets, rather than from Redis's clock, until t ends: their Lua, with the
// one read of the clock in each replaced, so that a test drives the
// controller's time itself. A test that uses it must not run in parallel
// with others.
func UseClock(t testing.TB) {
	t.Helper()
	reserve, congest := reserveScript, congestScript
	reserveScript = redis.NewScript(clocked(t, recentLua+lanesLua+reserveLua))
	congestScript = redis.NewScript(clocked(t, recentLua+congestLua))
	t.Cleanup(func() { reserveScript, congestScript = reserve, congest })
}

// ClockKey returns the Redis key the scripts read the time from under
// UseClock, for polite key key under namespace ns.
func ClockKey(ns, key string) string { return RedisKey(ns, key, "s") + ":clock" }

// clocked returns src with its read of Redis's clock replaced by a read of
// the clock key; t fails unless src reads the clock exactly once.
func clocked(t testing.TB, src string) string {
	t.Helper()
	if n := strings.Count(src, clockRead); n != 1 {
		t.Fatalf("the script reads Redis's clock %d times, not once: UseClock no longer stands in for it", n)
	}
	return strings.Replace(src, clockRead, clockFromKey, 1)
}

// Channel returns the channel on which key's pauses and congestion events
// are published, under namespace ns.
func Channel(ns, key string) string { return (&Fleet{ns: ns}).channel(key) }

// Queued returns how many of f's script calls wait for a round trip.
func Queued(f *Fleet) int {
	f.batch.mu.Lock()
	defer f.batch.mu.Unlock()
	return len(f.batch.queue)
}
