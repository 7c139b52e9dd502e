package fleet_test

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/politehttp/polite/fleetapi"
	"github.com/redis/go-redis/v9"
)

// reportLatency reports the p50 and p99 of lat, in µs.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// The latency a fleet adds to a request: one reserve script call on
// loopback Redis (leases off, so that every booking is a call), against a
// bare GET on the same Redis in the same run.
//
//	go test -run '^$' -bench 'Reserve|RedisGet' -count 6 ./fleet
func BenchmarkReserve(b *testing.B) {
	benchReserve(b, fleetapi.Request{PerSecond: 1e9, Burst: 1, MaxWait: -1})
}

// benchReserve books r back to back on a fleet of its own, reporting the
// latency of each booking.
func benchReserve(b *testing.B, r fleetapi.Request) {
	f := newFleet(b, newClient(b, sharedAddr(b)), fleet.WithNamespace(uniqueNamespace(b)), fleet.WithLease(0))
	lat := make([]time.Duration, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := f.Reserve(ctx, "api.example", r); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportLatency(b, lat)
}

// A booking that costs tokens too, back to back: each keeps the unit's
// bookings of the last second (at most 256, all of them here) for the
// bounds the server's answers set (see adjust.lua), against a booking of
// requests alone (BenchmarkReserve), in the same run:
//
//	REDIS_ADDR=127.0.0.1:6379 go test -run '^$' -bench 'Reserve' -count 6 ./fleet
func BenchmarkReserveWithCost(b *testing.B) {
	benchReserve(b, fleetapi.Request{PerSecond: 1e9, Burst: 1, MaxWait: -1, Costs: []fleetapi.Cost{{Unit: polite.UnitTokens, Amount: 1, Limit: 1e9, Per: time.Second}}})
}

func BenchmarkRedisGet(b *testing.B) {
	rdb := newClient(b, sharedAddr(b))
	lat := make([]time.Duration, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if err := rdb.Get(ctx, "polite-bench-absent").Err(); err != nil && err != redis.Nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportLatency(b, lat)
}

// What a success costs a fleet's retry budget (a refund counted in the
// process, told to Redis at most every 100 ms), against a process's own
// budget, in the same run, callers in parallel:
//
//	go test -run '^$' -bench 'Refund' -count 6 ./fleet
func BenchmarkRefund(b *testing.B) {
	b.Run("fleet", func(b *testing.B) {
		f := newFleet(b, newClient(b, sharedAddr(b)), fleet.WithNamespace(uniqueNamespace(b)))
		benchRefund(b, f.RetryBudget("api", 500))
	})
	b.Run("own", func(b *testing.B) {
		own := polite.NewRetryBudget(math.MaxInt)
		own.TryTake(math.MaxInt) // empty, so that a refund is never a no-op
		benchRefund(b, own)
	})
}

func benchRefund(b *testing.B, budget polite.Budget) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			budget.Refund(1)
		}
	})
}
