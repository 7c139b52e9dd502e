package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/politehttp/polite"
	"github.com/politehttp/polite/fleet"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// What one process of a fleet learns is where the next to join starts:
// its records are in Redis, each to expire once no longer trusted.
func TestMemorySharedThroughRedis(t *testing.T) {
	rdb := newClient(t, sharedAddr(t))
	ns := uniqueNamespace(t)
	a, err := newFleet(t, rdb, fleet.WithNamespace(ns)).Memory(t.Context())
	require.NoError(t, err)
	assert.Zero(t, a.Len())
	now := time.Now().Truncate(time.Millisecond)
	want := map[string]polite.Remembered{
		"api.test":       {Limit: 50, At: now},
		"stated.test":    {Limit: 10, Stated: true, Window: time.Minute, At: now.Add(-23 * time.Hour)},
		"paused.test":    {PausedUntil: now.Add(30 * time.Minute), At: now},
		"{braces}%.test": {Limit: 5, At: now},
	}
	for k, r := range want {
		a.Remember(k, r)
	}
	a.Remember("old.test", polite.Remembered{Limit: 5, At: now.Add(-25 * time.Hour)})
	require.NoError(t, a.Close())

	for k, ttl := range map[string]time.Duration{
		"api.test": polite.MemoryMaxAge, "stated.test": time.Hour, "paused.test": 30 * time.Minute,
	} {
		got, err := rdb.PTTL(t.Context(), fleet.RedisKey(ns, k, "r")).Result()
		require.NoError(t, err)
		assert.InDelta(t, ttl, got, float64(5*time.Second), "%s: kept as long as it is trusted", k)
	}
	exists, err := rdb.Exists(t.Context(), fleet.RedisKey(ns, "old.test", "r")).Result()
	require.NoError(t, err)
	assert.Zero(t, exists, "no longer trusted: not written")

	// Something that is no record, where one would be.
	require.NoError(t, rdb.Set(t.Context(), fleet.RedisKey(ns, "junk.test", "r"), "1e400\tm\t0\t0\t0", time.Minute).Err())

	b, err := newFleet(t, rdb, fleet.WithNamespace(ns)).Memory(t.Context())
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, len(want), b.Len())
	for k, r := range want {
		got, ok := b.Recall(k)
		if assert.True(t, ok, k) {
			assert.True(t, r.At.Equal(got.At) && r.PausedUntil.Equal(got.PausedUntil), k)
			r.At, r.PausedUntil, got.At, got.PausedUntil = time.Time{}, time.Time{}, time.Time{}, time.Time{}
			assert.Equal(t, r, got, k)
		}
	}
	other, err := newFleet(t, rdb, fleet.WithNamespace(ns+"-other")).Memory(t.Context())
	require.NoError(t, err)
	defer other.Close()
	assert.Zero(t, other.Len(), "another namespace, another memory")
}

// A Redis Cluster's records are on every master: a joining process reads
// them all.
func TestMemoryOnACluster(t *testing.T) {
	c := startCluster(t, 3, 0)
	ns := uniqueNamespace(t)
	a, err := newFleet(t, c.client(t), fleet.WithNamespace(ns)).Memory(t.Context())
	require.NoError(t, err)
	now := time.Now()
	for i := range 50 {
		a.Remember(fmt.Sprintf("host-%d.test", i), polite.Remembered{Limit: float64(i + 1), At: now})
	}
	require.NoError(t, a.Close())
	b, err := newFleet(t, c.client(t), fleet.WithNamespace(ns)).Memory(t.Context())
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, 50, b.Len())
	r, ok := b.Recall("host-7.test")
	assert.True(t, ok)
	assert.Equal(t, 8.0, r.Limit)
}

// A Redis that cannot be reached costs the memory, not the process: the
// Memory is usable, empty, and the error says why; what it learns is kept
// in the process, and written once Redis answers.
func TestMemoryWithoutRedis(t *testing.T) {
	srv := startRedis(t)
	rdb := newClient(t, srv.addr)
	ns := uniqueNamespace(t)
	f := newFleet(t, rdb, fleet.WithNamespace(ns))
	srv.stop()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	m, err := f.Memory(ctx)
	require.Error(t, err)
	require.NotNil(t, m)
	m.Remember("api.test", polite.Remembered{Limit: 3, At: time.Now()})
	r, ok := m.Recall("api.test")
	assert.True(t, ok)
	assert.Equal(t, 3.0, r.Limit)
	assert.Error(t, m.Flush(ctx), "Redis is down")

	srv.restart(t)
	require.NoError(t, m.Close(), "written once Redis answers")
	again, err := f.Memory(t.Context())
	require.NoError(t, err)
	defer again.Close()
	_, ok = again.Recall("api.test")
	assert.True(t, ok)
}

// A process that joins a fleet starts from what the fleet's processes
// learnt of each key. (The example runs an in-process Redis; in real use,
// pass a client of yours.)
func ExampleFleet_Memory() {
	mr, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	f := fleet.New(rdb)
	defer f.Close()
	mem, err := f.Memory(context.Background())
	if err != nil {
		fmt.Println(err) // what was not loaded costs a cold start: log it and go on
	}
	defer mem.Close()
	client := &http.Client{Transport: polite.New(nil, polite.WithFleet(f), polite.WithMemory(mem))}
	_ = client
	fmt.Println("the fleet remembers", mem.Len(), "keys")
	// Output: the fleet remembers 0 keys
}
