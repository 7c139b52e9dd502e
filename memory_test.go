package polite_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/politehttp/polite"
)

// A process restarted with memory holds the limit from its first second,
// refused at most 0.2% (no probe: the limit had stood 16 s, and so holds
// 16 s; see TestMemoryKeepsHowLongTheLimitStood), on every server of the
// bench whose limit is steady but the burst-1 one; a memory whose limit
// has since halved does no worse than a cold start. The first process
// runs 20 s against the same server (see scenario.learn), and leaves its
// FileMemory on disk. Each figure is the median of 5 runs: the order in which workers
// that wake at the same instant reach the server is the Go scheduler's,
// and the runs on HAProxy and the burst-1 server spread (a first process
// that left a limit 0.8 of the true one in one run of 12, say). Under the
// race detector, a server that states its limit, two that do not, and
// HAProxy; in short mode, nginx alone (CI runs it again without the race
// detector, on every server).
func TestMemoryRestartHoldsTheLimit(t *testing.T) {
	for _, sc := range benchScenarios(8 * time.Second) {
		if len(sc.schedule) > 1 || sc.down[1] > 0 {
			continue
		}
		if raceDetector && !slices.Contains([]string{"tollbooth", "throttled", "nginx", "haproxy"}, sc.name) {
			continue
		}
		if testing.Short() && sc.name != "nginx" {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			runs := 5
			switch sc.name {
			case "burst1":
				runs = 11 // its figures spread with the machine's jitter (below)
			case "haproxy":
				// A stale start is refused at twice the limit, and HAProxy
				// counts those refusals too: its runs spread more than a cold
				// start's (stale 0.93-0.98 against 0.96-1.00, medians of 5
				// under -race), and a median of 5 fell 0.001 under the margin
				// in one test of 8. Medians of 9: 0.027 under cold at worst in
				// 10 tests under -race.
				runs = 9
			}
			cold := sc.median(t, "polite", runs)
			warm := sc.median(t, "polite-memory", runs)
			stale := sc.median(t, "polite-memory-stale", runs)
			t.Logf("cold %.3f / %.2f%%, warm %.3f / %.2f%% (first second %d), stale %.3f / %.2f%%",
				cold.utilization, 100*cold.rejected, warm.utilization, 100*warm.rejected, warm.first,
				stale.utilization, 100*stale.rejected)
			for _, r := range []medianResult{cold, warm, stale} {
				assert.Zero(t, r.local, "%s: calls failed locally", r.client)
			}
			refusals := 0.006
			if sc.name == "burst1" {
				// Its limit is the machine's jitter's (see docs/bench.md),
				// and a warm start holds below it by the rules a cold start
				// learns for a server with no burst, which its memory says
				// (Remembered.NoBurst): cold 0.761 / 1.77%, warm 0.792-0.809
				// / 1.49-1.53%, stale 0.777-0.781 / 2.17-2.21% (2026-12-05).
				// Before the memory said it, warm 0.694-0.725 and stale
				// 0.650-0.660: the first refusal below the remembered limit
				// took it for stale and started over without those rules. (A
				// stale start is refused more: 1.72 and 1.93% against 1.44%
				// cold in two runs; 2.05% against 1.43% in each of four since
				// a limit just found is verified, 2026-11-29.)
				assert.GreaterOrEqual(t, warm.utilization, cold.utilization-0.02)
				assert.LessOrEqual(t, warm.rejected, cold.rejected+0.005)
				assert.GreaterOrEqual(t, stale.utilization, cold.utilization-0.05, "stale: no worse than cold")
				refusals = 0.008
			} else {
				assert.GreaterOrEqual(t, warm.utilization, 0.97)
				assert.GreaterOrEqual(t, warm.first, 97, "accepted in the first second")
				assert.LessOrEqual(t, warm.rejected, 0.002, "refused: one request of about 800 at most")
				assert.LessOrEqual(t, warm.rejected, cold.rejected+0.001)
				assert.GreaterOrEqual(t, stale.utilization, cold.utilization-0.05, "stale: no worse than cold")
			}
			assert.LessOrEqual(t, stale.rejected, cold.rejected+refusals, "stale: no worse than cold")
		})
	}
}

// A memory keeps how long the limit had stood, and a process restarted
// with it probes as seldom as the one before would have: the first
// process found the limit at once and saw its probes confirm it for 16 s
// (held 4, 4 and 8 s), so the next holds 16 s before its first probe, and
// then probes. (A memory without Since, as an older file holds, holds the
// 4 s of a new limit.)
func TestMemoryKeepsHowLongTheLimitStood(t *testing.T) {
	sc := scenario{name: "throttled", limiter: func() limiter { return &throttledGCRA{maxBurst: 9} },
		schedule: []step{{0, qualityLimit}}, length: 40 * time.Second}
	synctest.Test(t, func(t *testing.T) {
		mem := sc.learn(t, 1, 1)
		r, ok := mem.Recall("api.test")
		require.True(t, ok)
		require.False(t, r.Since.IsZero())
		assert.InDelta(t, 16, r.At.Sub(r.Since).Seconds(), 1.5, "stood when last told: found, then confirmed for 16 s")
		require.NoError(t, mem.Close())
	})
	r := sc.run(t, "polite-memory", 1)
	first := -1
	for b, n := range r.server.rejected {
		if n > 0 {
			first = b
			break
		}
	}
	require.GreaterOrEqual(t, first, 0, "probed within 40 s")
	probe := time.Duration(first) * qualityBin
	t.Logf("first refusal after the restart at %v", probe)
	assert.GreaterOrEqual(t, probe, 15*time.Second, "held as long as the limit had stood")
	assert.Less(t, probe, 18*time.Second, "then probed")
}

// medianResult is the median of each figure over runs of a scenario.
type medianResult struct {
	client                string
	utilization, rejected float64
	first, local          int // accepted in the first second; calls failed locally
}

// median runs the scenario n times through the client, seed 1, and
// returns the median of each figure.
func (sc scenario) median(t *testing.T, client string, n int) medianResult {
	var us, rs []float64
	var firsts, locals []int
	for range n {
		r := sc.run(t, client, 1)
		first := 0
		for b := range int(time.Second / qualityBin) {
			first += r.server.accepted[b]
		}
		us, rs, firsts, locals = append(us, r.utilization), append(rs, r.rejected), append(firsts, first), append(locals, r.local)
	}
	slices.Sort(us)
	slices.Sort(rs)
	slices.Sort(firsts)
	slices.Sort(locals)
	return medianResult{client: client, utilization: us[n/2], rejected: rs[n/2], first: firsts[n/2], local: locals[n-1]}
}

// A pause a server asked for outlives the process that heard it: the next
// process sends nothing to the key until it ends, and then goes on.
func TestMemoryKeepsAPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "memory")
		var sent atomic.Int32
		var pausedUntil time.Time
		next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
			sent.Add(1)
			if pausedUntil.IsZero() {
				pausedUntil = time.Now().Add(30 * time.Minute)
				return respond(req, http.StatusTooManyRequests, http.NoBody, "Retry-After", "1800"), nil
			}
			return respond(req, http.StatusOK, http.NoBody), nil
		})
		before, err := polite.OpenFileMemory(path)
		require.NoError(t, err)
		resp, err := polite.New(next, polite.WithMemory(before)).RoundTrip(mustRequest(t, t.Context(), "http://api.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "a pause longer than the Transport waits on")
		require.NoError(t, before.Close())

		time.Sleep(10 * time.Minute) // the restart
		after, err := polite.OpenFileMemory(path)
		require.NoError(t, err)
		defer after.Close()
		rt := polite.New(next, polite.WithMemory(after))
		_, err = rt.RoundTrip(mustRequest(t, t.Context(), "http://api.test/"))
		var throttled *polite.ThrottledError
		require.ErrorAs(t, err, &throttled, "20 minutes of pause left: more than the Transport waits on")
		assert.InDelta(t, 20*time.Minute, throttled.Wait, float64(time.Second))
		assert.Equal(t, int32(1), sent.Load(), "nothing sent to the paused key")

		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		resp, err = polite.New(next, polite.WithMemory(after), polite.WithMaxRetryAfter(time.Hour)).
			RoundTrip(mustRequest(t, ctx, "http://api.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, int32(2), sent.Load())
		assert.False(t, time.Now().Before(pausedUntil), "sent only once the pause was over")
	})
}

// mapMemory is a Memory in a map, which counts what it is told, and
// keeps each telling with when it came.
type mapMemory struct {
	mu       sync.Mutex
	known    map[string]polite.Remembered
	told     int
	tellings []telling
}

// telling is one Remember a mapMemory was told.
type telling struct {
	at time.Time
	r  polite.Remembered
}

func (m *mapMemory) Recall(key string) (polite.Remembered, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.known[key]
	return r, ok
}

func (m *mapMemory) Remember(key string, r polite.Remembered) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.known == nil {
		m.known = make(map[string]polite.Remembered)
	}
	m.known[key] = r
	m.told++
	m.tellings = append(m.tellings, telling{time.Now(), r})
}

// A record that makes no sense is not trusted: a limit that is no
// positive finite number, one learnt in the future or too long ago, a
// pause longer than the Transport keeps. The key then starts as a cold one
// does: its first requests go unpaced, one at a time.
func TestMemoryIgnoresWhatMakesNoSense(t *testing.T) {
	for name, r := range map[string]func(now time.Time) polite.Remembered{
		"NaN":      func(now time.Time) polite.Remembered { return polite.Remembered{Limit: math.NaN(), At: now} },
		"infinite": func(now time.Time) polite.Remembered { return polite.Remembered{Limit: math.Inf(1), At: now} },
		"negative": func(now time.Time) polite.Remembered { return polite.Remembered{Limit: -5, At: now} },
		"no time":  func(time.Time) polite.Remembered { return polite.Remembered{Limit: 1} },
		"future":   func(now time.Time) polite.Remembered { return polite.Remembered{Limit: 1, At: now.Add(time.Hour)} },
		"too old": func(now time.Time) polite.Remembered {
			return polite.Remembered{Limit: 1, At: now.Add(-25 * time.Hour)}
		},
		"paused past": func(now time.Time) polite.Remembered {
			return polite.Remembered{PausedUntil: now.Add(-time.Second), At: now}
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := &mapMemory{known: map[string]polite.Remembered{"api.test": r(time.Now())}}
				rt := polite.New(roundTripFunc(func(req *http.Request) (*http.Response, error) {
					return respond(req, http.StatusOK, http.NoBody), nil
				}), polite.WithMemory(mem))
				start := time.Now()
				for range 100 {
					resp, err := rt.RoundTrip(mustRequest(t, t.Context(), "http://api.test/"))
					require.NoError(t, err)
					resp.Body.Close()
				}
				assert.Zero(t, time.Since(start), "unpaced, as a key with no history")
			})
		})
	}
	t.Run("a pause for years", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := &mapMemory{known: map[string]polite.Remembered{
				"api.test": {PausedUntil: time.Now().AddDate(5, 0, 0), At: time.Now()},
			}}
			rt := polite.New(roundTripFunc(func(req *http.Request) (*http.Response, error) {
				return respond(req, http.StatusOK, http.NoBody), nil
			}), polite.WithMemory(mem), polite.WithMaxRetryAfter(2*time.Hour))
			start := time.Now()
			resp, err := rt.RoundTrip(mustRequest(t, t.Context(), "http://api.test/"))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, time.Hour, time.Since(start), "cut to the longest pause the Transport keeps")
		})
	})
}

// A remembered limit paces the key from its first request, and what the
// key learns is told to the Memory only when it changes (or an hour on).
func TestMemoryPacesFromTheFirstRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &mapMemory{known: map[string]polite.Remembered{"api.test": {Limit: 10, At: time.Now()}}}
		rt := polite.New(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return respond(req, http.StatusOK, http.NoBody), nil
		}), polite.WithMemory(mem))
		start := time.Now()
		for range 30 { // within the 4 s the rate holds before a probe
			resp, err := rt.RoundTrip(mustRequest(t, t.Context(), "http://api.test/"))
			require.NoError(t, err)
			resp.Body.Close()
		}
		took := time.Since(start)
		assert.InDelta(t, 9.9, 29/took.Seconds(), 0.05, "paced just below the remembered 10 a second: took %v", took)
		assert.Zero(t, mem.told, "nothing new learnt")
	})
}

// A limit the server states is remembered with its window, and what a
// throttle measures is remembered too.
func TestMemoryRemembersWhatWasLearnt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &mapMemory{}
		rt := polite.New(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return respond(req, http.StatusOK, http.NoBody,
				"RateLimit-Policy", `"default";q=600;w=60`, "RateLimit", `"default";r=599;t=60`), nil
		}), polite.WithMemory(mem))
		resp, err := rt.RoundTrip(mustRequest(t, t.Context(), "http://stated.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		r, ok := mem.Recall("stated.test")
		require.True(t, ok)
		assert.Equal(t, polite.Remembered{Limit: 10, Stated: true, Window: time.Minute, At: time.Now()}, r)
	})
}

func TestFileMemoryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir", "memory")
	m, err := polite.OpenFileMemory(path)
	require.NoError(t, err, "a file that does not exist is an empty memory")
	now := time.Now().Truncate(time.Millisecond)
	want := map[string]polite.Remembered{
		"api.test":            {Limit: 99.5, At: now},
		"stated.test":         {Limit: 10, Stated: true, Window: time.Minute, At: now.Add(-time.Hour)},
		"paused.test":         {PausedUntil: now.Add(time.Minute), At: now},
		"tab\there\nnewline":  {Limit: 1, At: now},
		`"quoted"`:            {Limit: 2, At: now},
		"ünïcode.test:8443/ä": {Limit: 3, At: now},
	}
	for k, r := range want {
		m.Remember(k, r)
	}
	m.Remember("old.test", polite.Remembered{Limit: 5, At: now.Add(-polite.MemoryMaxAge - time.Minute)})
	m.Remember("nothing.test", polite.Remembered{})
	require.NoError(t, m.Close())
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left")

	again, err := polite.OpenFileMemory(path)
	require.NoError(t, err)
	defer again.Close()
	assert.Equal(t, len(want), again.Len(), "what is no longer trusted is not kept")
	for k, r := range want {
		got, ok := again.Recall(k)
		if assert.True(t, ok, k) {
			assert.True(t, r.At.Equal(got.At) && r.PausedUntil.Equal(got.PausedUntil), k)
			r.At, r.PausedUntil, got.At, got.PausedUntil = time.Time{}, time.Time{}, time.Time{}, time.Time{}
			assert.Equal(t, r, got, k)
		}
	}
}

// A file that is broken, cut short, or hostile costs the keys it cannot
// vouch for, and says so in one error; what can be read is kept.
func TestFileMemoryBadFiles(t *testing.T) {
	now := time.Now()
	ms := func(t time.Time) int64 { return t.UnixMilli() }
	good := fmt.Sprintf("good.test\t50\tm\t0\t0\t%d\n", ms(now))
	for name, tc := range map[string]struct {
		content string
		kept    int
		dropped int
	}{
		"not a memory file": {content: "\x89PNG\r\n\x1a\n", kept: 0},
		"another version":   {content: "polite memory 2\n" + good, kept: 0},
		"cut short":         {content: "polite memory 1\n" + good + "cut.test\t50\tm\t0", kept: 1, dropped: 1},
		"hostile numbers": {content: "polite memory 1\n" + good +
			fmt.Sprintf("nan.test\tNaN\tm\t0\t0\t%d\n", ms(now)) +
			fmt.Sprintf("inf.test\t+Inf\tm\t0\t0\t%d\n", ms(now)) +
			fmt.Sprintf("huge.test\t1e300\tm\t0\t0\t%d\n", ms(now)) +
			fmt.Sprintf("neg.test\t-1\tm\t0\t0\t%d\n", ms(now)) +
			fmt.Sprintf("future.test\t1\tm\t0\t0\t%d\n", ms(now.Add(time.Hour))) +
			fmt.Sprintf("pause.test\t0\tm\t0\t%d\t%d\n", ms(now.AddDate(10, 0, 0)), ms(now)) +
			fmt.Sprintf("overflow.test\t1\tm\t0\t0\t%d\n", uint64(math.MaxInt64)) +
			fmt.Sprintf("source.test\t1\tx\t0\t0\t%d\n", ms(now)) +
			fmt.Sprintf("\"bad quote\t1\tm\t0\t0\t%d\n", ms(now)) +
			"few.test\t1\n" +
			strings.Repeat("x", 5000) + "\n",
			kept: 1, dropped: 11},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory")
			require.NoError(t, os.WriteFile(path, []byte(tc.content), 0o600))
			m, err := polite.OpenFileMemory(path)
			require.NotNil(t, m, "always usable")
			defer m.Close()
			var fe *polite.MemoryFileError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.dropped, fe.Dropped)
			assert.Equal(t, path, fe.Path)
			assert.Equal(t, tc.kept, m.Len())
			if tc.kept > 0 {
				r, ok := m.Recall("good.test")
				assert.True(t, ok)
				assert.Equal(t, 50.0, r.Limit)
			}
		})
	}
	t.Run("a directory", func(t *testing.T) {
		m, err := polite.OpenFileMemory(t.TempDir())
		require.NotNil(t, m)
		defer m.Close()
		var fe *polite.MemoryFileError
		require.ErrorAs(t, err, &fe)
		assert.Zero(t, m.Len())
	})
}

// The file keeps the most recently learnt entries within its bounds.
func TestFileMemoryBounds(t *testing.T) {
	now := time.Now()
	for name, opt := range map[string]polite.MemoryOption{
		"entries": polite.MemoryEntries(10),
		"bytes":   polite.MemoryBytes(int64(len("polite memory 1\n") + 10*len("key-00.test\t1\tm\t0\t0\t1700000000000\n"))),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory")
			m, err := polite.OpenFileMemory(path, opt)
			require.NoError(t, err)
			for i := range 30 {
				m.Remember(fmt.Sprintf("key-%02d.test", i), polite.Remembered{Limit: 1, At: now.Add(time.Duration(i) * time.Second)})
			}
			require.NoError(t, m.Close())
			again, err := polite.OpenFileMemory(path)
			require.NoError(t, err)
			defer again.Close()
			assert.Equal(t, 10, again.Len())
			for i := 20; i < 30; i++ {
				_, ok := again.Recall(fmt.Sprintf("key-%02d.test", i))
				assert.True(t, ok, "the most recent are kept: %d", i)
			}
		})
	}
}

// The FileMemory writes its file every little while, not only at Close.
func TestFileMemoryWritesInTheBackground(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "memory")
		m, err := polite.OpenFileMemory(path, polite.MemoryEvery(time.Second))
		require.NoError(t, err)
		defer m.Close()
		m.Remember("api.test", polite.Remembered{Limit: 7, At: time.Now()})
		_, err = os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist)
		time.Sleep(time.Second)
		synctest.Wait()
		other, err := polite.OpenFileMemory(path)
		require.NoError(t, err)
		defer other.Close()
		r, ok := other.Recall("api.test")
		require.True(t, ok)
		assert.Equal(t, 7.0, r.Limit)
	})
}

func ExampleOpenFileMemory() {
	dir, _ := os.MkdirTemp("", "polite")
	defer os.RemoveAll(dir)
	mem, err := polite.OpenFileMemory(filepath.Join(dir, "memory"))
	if err != nil {
		fmt.Println(err) // what was lost costs a cold start: log it and go on
	}
	defer mem.Close()
	client := &http.Client{Transport: polite.New(nil, polite.WithMemory(mem))}
	_ = client
	fmt.Println(mem.Len(), "keys remembered")
	// Output: 0 keys remembered
}

// A Remembered goes to text and back, to the millisecond; text that is
// not a Remembered's is an error and changes nothing.
func TestRememberedText(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_123)
	for _, r := range []polite.Remembered{
		{},
		{Limit: 99.5, At: at},
		{Limit: 10, Stated: true, Window: time.Minute, PausedUntil: at.Add(time.Hour), At: at},
		{Limit: 50, At: at, Since: at.Add(-16 * time.Second)},
		{Limit: 85, At: at, Since: at.Add(-4 * time.Second), NoBurst: true},
		{Limit: 97, At: at, Since: at.Add(-4 * time.Second), CountsRefusals: true},
		{Limit: 85, At: at, NoBurst: true, CountsRefusals: true},
	} {
		text, err := r.MarshalText()
		require.NoError(t, err)
		var got polite.Remembered
		require.NoError(t, got.UnmarshalText(text), "%s", text)
		assert.True(t, r.At.Equal(got.At) && r.PausedUntil.Equal(got.PausedUntil) && r.Since.Equal(got.Since), "%s", text)
		r.At, r.PausedUntil, r.Since, got.At, got.PausedUntil, got.Since = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
		assert.Equal(t, r, got)
	}
	text, _ := polite.Remembered{Limit: math.NaN(), At: at}.MarshalText()
	assert.Equal(t, "0\tm\t0\t0\t1800000000123", string(text))
	// Since: a sixth field, written only if known, cut to whole seconds
	// before At; a stated limit has none (it is never probed above).
	text, _ = polite.Remembered{Limit: 50, At: at, Since: at.Add(-16500 * time.Millisecond)}.MarshalText()
	assert.Equal(t, "50\tm\t0\t0\t1800000000123\t1799999984123", string(text))
	text, _ = polite.Remembered{Limit: 50, Stated: true, At: at, Since: at.Add(-16 * time.Second)}.MarshalText()
	assert.Equal(t, "50\ts\t0\t0\t1800000000123", string(text))
	// NoBurst: "n" for "m", a limit measured on a server that lets no
	// burst through; a stated limit is the server's, whatever its burst.
	text, _ = polite.Remembered{Limit: 85, At: at, NoBurst: true}.MarshalText()
	assert.Equal(t, "85\tn\t0\t0\t1800000000123", string(text))
	text, _ = polite.Remembered{Limit: 85, Stated: true, At: at, NoBurst: true}.MarshalText()
	assert.Equal(t, "85\ts\t0\t0\t1800000000123", string(text))
	// CountsRefusals: "c" after "m" or "n"; again, not after "s".
	text, _ = polite.Remembered{Limit: 97, At: at, CountsRefusals: true}.MarshalText()
	assert.Equal(t, "97\tmc\t0\t0\t1800000000123", string(text))
	text, _ = polite.Remembered{Limit: 85, At: at, NoBurst: true, CountsRefusals: true}.MarshalText()
	assert.Equal(t, "85\tnc\t0\t0\t1800000000123", string(text))
	text, _ = polite.Remembered{Limit: 85, Stated: true, At: at, CountsRefusals: true}.MarshalText()
	assert.Equal(t, "85\ts\t0\t0\t1800000000123", string(text))
	for _, bad := range []string{"", "1", "NaN\tm\t0\t0\t0", "1\tx\t0\t0\t0", "1\tsc\t0\t0\t0", "1\tc\t0\t0\t0", "1\tmcc\t0\t0\t0", "1\tcm\t0\t0\t0", "1\tm\t-1\t0\t0", "1\tm\t0\t0\t0\textra",
		"1e10\tm\t0\t0\t0", "1\tm\t0\t0\t0\t-5", "1\tm\t0\t0\t0\t5\t6"} {
		r := polite.Remembered{Limit: 7}
		assert.Error(t, r.UnmarshalText([]byte(bad)), "%q", bad)
		assert.Equal(t, polite.Remembered{Limit: 7}, r, "left as it was")
	}
}

// A pause a server asked for outlives the Transport that heard it: a
// Transport made later with the same memory (in real use, the process
// restarted) sends nothing to the host until the pause is over.
func ExampleWithMemory() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Retry-After", "3600") // come back in an hour
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	dir, _ := os.MkdirTemp("", "polite")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "memory")

	mem, _ := polite.OpenFileMemory(path)
	before := &http.Client{Transport: polite.New(nil, polite.WithMemory(mem))}
	resp, err := before.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("first process:", resp.StatusCode)
	mem.Close()

	mem, _ = polite.OpenFileMemory(path)
	defer mem.Close()
	after := &http.Client{Transport: polite.New(nil, polite.WithMemory(mem))}
	_, err = after.Get(srv.URL)
	fmt.Println("next process refused at once:", errors.Is(err, polite.ErrThrottled))
	fmt.Println("requests the server saw:", hits.Load())
	// Output:
	// first process: 429
	// next process refused at once: true
	// requests the server saw: 1
}

// A quota the server stated, remembered, paces the key from its first
// request as after the server's first answer: in a fleet, the first
// request of a process that joins books at the fleet-wide rate.
func TestMemoryRestoresAStatedQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := &mapMemory{known: map[string]polite.Remembered{
			"api.test": {Limit: 10, Stated: true, Window: time.Minute, At: time.Now()},
		}}
		f := &recordingFleet{}
		rt := polite.New(roundTripFunc(func(req *http.Request) (*http.Response, error) {
			return respond(req, http.StatusOK, http.NoBody), nil
		}), polite.WithMemory(mem), polite.WithFleet(f))
		resp, err := rt.RoundTrip(mustRequest(t, t.Context(), "http://api.test/"))
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, f.asks, 1)
		assert.InDelta(t, 9.8, f.asks[0].PerSecond, 0.01, "the stated rate, less the margin, fleet-wide")
		for k := range rt.Keys() {
			assert.Equal(t, 10.0, k.Limit)
		}
	})
}

// A limit lower than the one told is told once it has stood two holds
// (8 s), not at the probe that first settles it: a limiter that counts
// refusals (HAProxy) locks the client out for a moment after a probe's
// crossing, and a process restarted from the limit measured then started
// at 0.72 of the server's. A limit that dropped for good is told once it
// stands. Here the server's limit drops from 100 to 50 at 10 s.
func TestMemoryToldALowerLimitOnceItStands(t *testing.T) {
	sc := scenario{name: "throttled", limiter: func() limiter { return &throttledGCRA{maxBurst: 9} },
		schedule: []step{{0, qualityLimit}, {10 * time.Second, qualityLimit / 2}}, length: 30 * time.Second}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		mem := &mapMemory{}
		srv := sc.server(start, sc.schedule, 1)
		sc.drive(t, polite.New(srv, polite.WithSeed(1), polite.WithMemory(mem)), start)
		mem.mu.Lock()
		defer mem.mu.Unlock()
		require.NotEmpty(t, mem.tellings)
		first := -1
		for i, tl := range mem.tellings {
			at := tl.at.Sub(start)
			t.Logf("%v: %.1f", at.Round(100*time.Millisecond), tl.r.Limit)
			if tl.r.Limit < 0.8*qualityLimit && first < 0 {
				first = i
			}
			if at < 10*time.Second {
				assert.InDelta(t, qualityLimit, tl.r.Limit, 0.1*qualityLimit, "before the drop")
			}
		}
		require.GreaterOrEqual(t, first, 0, "the lower limit told, once it stood")
		assert.GreaterOrEqual(t, mem.tellings[first].at.Sub(start), 17*time.Second, "not before it stood 8 s")
		assert.InDelta(t, qualityLimit/2, mem.tellings[first].r.Limit, 0.15*qualityLimit/2)
	})
}
