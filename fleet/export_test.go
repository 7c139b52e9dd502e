package fleet

import "github.com/politehttp/polite/fleetapi"

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
