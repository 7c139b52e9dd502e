package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/periodic"
	"github.com/redis/go-redis/v9"
)

// Constants of a fleet's Memory, each explained where it is used.
const (
	memoryMaxKeys = 100_000                // keys loaded at most when a Memory is made
	memoryEvery   = 200 * time.Millisecond // how often what was learnt is written to Redis
	memoryBatch   = 512                    // commands a pipeline carries at most
)

// Memory is a [polite.Memory] kept in the fleet's Redis, so that what one
// process learns of a key (its server's limit, a pause it asked for) is
// where a process that joins the fleet, or restarts, starts from. Make it
// with [Fleet.Memory] and give it to each process's Transport with
// [polite.WithMemory].
//
// A Memory holds what Redis held when it was made, and what its process
// learns after; it writes what its process learns to Redis every 200 ms,
// on a goroutine of its own, until [Memory.Close]. Each key's record is a
// Redis key of its own, beside the key's other state (one Cluster slot),
// kept as long as it is trusted ([polite.MemoryMaxAge], or to the end of
// its pause if later) and then left to expire. Recall and Remember never
// wait on Redis: a Redis that is down or slow costs the keys it would
// have told a cold start, and the records of the meanwhile are lost.
type Memory struct {
	f *Fleet

	mu      sync.Mutex
	known   map[string]polite.Remembered
	pending map[string]polite.Remembered // learnt, not yet written

	writer  *periodic.Loop // writes pending every memoryEvery
	failing bool           // the writer's last write failed (the writer's own)
}

var _ polite.Memory = (*Memory)(nil)

// Memory returns a Memory in the fleet's Redis, loaded with the records
// Redis holds under the fleet's namespace (at most 100,000 of them; a
// SCAN, and a GET for each, pipelined) within ctx. It always returns a
// usable Memory; the error says why the records were not all loaded (those
// keys start from nothing): log it and go on. Close the Memory when done.
func (f *Fleet) Memory(ctx context.Context) (*Memory, error) {
	m := &Memory{
		f:       f,
		known:   make(map[string]polite.Remembered),
		pending: make(map[string]polite.Remembered),
	}
	err := m.load(ctx)
	m.writer = periodic.Start(memoryEvery, m.flushNow)
	return m, err
}

// Recall implements [polite.Memory].
func (m *Memory) Recall(key string) (polite.Remembered, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.known[key]
	return r, ok
}

// Remember implements [polite.Memory].
func (m *Memory) Remember(key string, r polite.Remembered) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.known[key] = r
	m.pending[key] = r
}

// Len returns the number of keys m holds.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.known)
}

// Flush writes to Redis, within ctx, what m learnt and has not written
// yet. What could not be written is kept, to be written next time.
func (m *Memory) Flush(ctx context.Context) error {
	m.mu.Lock()
	pending := m.pending
	m.pending = make(map[string]polite.Remembered)
	m.mu.Unlock()
	if len(pending) == 0 {
		return nil
	}
	err := m.write(ctx, pending)
	if err != nil {
		m.mu.Lock()
		for k, r := range pending {
			if _, newer := m.pending[k]; !newer {
				m.pending[k] = r
			}
		}
		m.mu.Unlock()
	}
	return err
}

// Close stops m's writer, and writes what it has not written yet, with
// the fleet's timeout. m may still be used: what it learns afterwards is
// written by Flush only.
func (m *Memory) Close() error {
	m.writer.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 4*m.f.timeout)
	defer cancel()
	return m.Flush(ctx)
}

// flushNow writes what m learnt, with the fleet's timeout: the writer's
// work. A failure is logged once when writes start failing, and once when
// they work again.
func (m *Memory) flushNow() {
	ctx, cancel := context.WithTimeout(context.Background(), 4*m.f.timeout)
	err := m.Flush(ctx)
	cancel()
	if l := m.f.logger; l != nil && (err != nil) != m.failing {
		if err != nil {
			l.Warn("fleet: memory not written to Redis; kept to be written later", "err", err)
		} else {
			l.Warn("fleet: memory written to Redis again")
		}
	}
	m.failing = err != nil
}

// write sets the records of pending in Redis, each to expire once it is
// no longer trusted.
func (m *Memory) write(ctx context.Context, pending map[string]polite.Remembered) error {
	now := time.Now()
	pipe := m.f.rdb.Pipeline()
	n := 0
	for key, r := range pending {
		var ttl time.Duration
		if r.Limit > 0 && !r.At.IsZero() {
			ttl = polite.MemoryMaxAge - now.Sub(r.At)
		}
		if !r.PausedUntil.IsZero() {
			ttl = max(ttl, r.PausedUntil.Sub(now))
		}
		if ttl < time.Millisecond {
			continue // nothing it says is still in force
		}
		text, _ := r.MarshalText()
		pipe.Set(ctx, m.f.memoryKey(key), text, ttl)
		if n++; n == memoryBatch {
			if _, err := pipe.Exec(ctx); err != nil {
				return err
			}
			n = 0
		}
	}
	if n == 0 {
		return nil
	}
	_, err := pipe.Exec(ctx)
	return err
}

// load reads the records Redis holds under the fleet's namespace.
func (m *Memory) load(ctx context.Context) error {
	pattern := m.f.ns + ":v1:{*}:r"
	scan := func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
			if err != nil {
				return err
			}
			if err := m.loadKeys(ctx, c, keys); err != nil {
				return err
			}
			if cursor = next; cursor == 0 || m.Len() >= memoryMaxKeys {
				return nil
			}
		}
	}
	var err error
	switch c := m.f.rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, scan)
	case *redis.Ring:
		err = c.ForEachShard(ctx, scan)
	case *redis.Client:
		err = scan(ctx, c)
	default:
		err = errors.New("a client of a kind the fleet's memory cannot scan")
	}
	if err != nil {
		return fmt.Errorf("fleet: memory not loaded from Redis: %w", err)
	}
	return nil
}

// loadKeys reads the records of the Redis keys keys, on c.
func (m *Memory) loadKeys(ctx context.Context, c *redis.Client, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	pipe := c.Pipeline()
	gets := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		gets[i] = pipe.Get(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, k := range keys {
		text, err := gets[i].Bytes()
		key, ok := m.f.keyOfMemory(k)
		var r polite.Remembered
		if err != nil || !ok || r.UnmarshalText(text) != nil || len(m.known) >= memoryMaxKeys {
			continue // expired meanwhile, or not a record: the key starts from nothing
		}
		if _, learnt := m.known[key]; !learnt {
			m.known[key] = r
		}
	}
	return nil
}

// memoryKey returns the Redis key of the record of key.
func (f *Fleet) memoryKey(key string) string { return f.prefix(key) + "r" }

// keyOfMemory returns the polite key whose record the Redis key k is.
func (f *Fleet) keyOfMemory(k string) (string, bool) {
	rest, ok := strings.CutPrefix(k, f.ns+":v1:{")
	if !ok {
		return "", false
	}
	tag, ok := strings.CutSuffix(rest, "}:r")
	if !ok || strings.ContainsAny(tag, "{}") {
		return "", false
	}
	return tagUnescaper.Replace(tag), true
}
