package memfile

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/politehttp/polite/internal/control"
)

// FuzzMemoryFile reads any bytes as a memory file: it never panics, every
// entry it keeps makes sense (a limit positive, finite and within what
// Gentle paces at; no pause longer than a Transport keeps; nothing learnt
// in the future), and what it keeps is written and read back the same.
func FuzzMemoryFile(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	at := now.UnixMilli()
	f.Add([]byte(header + fmt.Sprintf("api.test\t99.5\tm\t0\t0\t%d\n", at)))
	f.Add([]byte(header + fmt.Sprintf("\"tab\\there\"\t10\ts\t60000\t%d\t%d\n", at+1000, at)))
	f.Add([]byte(header + fmt.Sprintf("x\tNaN\tm\t0\t0\t%d\nx\t1e400\tm\t0\t0\t%d\ny\t-0\tm\t0\t0\t%d\n", at, at, at)))
	f.Add([]byte(header + "cut\t1\tm\t0"))
	f.Add([]byte(header + fmt.Sprintf("stood\t50\tm\t0\t0\t%d\t%d\nlater\t50\tm\t0\t0\t%d\t%d\n", at, at-16000, at, at+1)))
	f.Add([]byte(header + fmt.Sprintf("seven\t50\tm\t0\t0\t%d\t%d\t1\n", at, at-16000)))
	f.Add([]byte(header + fmt.Sprintf("noburst\t85\tn\t0\t0\t%d\t%d\n", at, at-4000)))
	f.Add([]byte("polite memory 2\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		known, dropped, err := decode(bytes.NewReader(data), now, 1000)
		if dropped > 0 && err == nil {
			t.Fatalf("%d lines dropped, no error", dropped)
		}
		n := now.UnixNano()
		var all []keyedEntry
		for k, e := range known {
			if k == "" || !(e.limit >= 0) || math.IsInf(e.limit, 0) || e.limit > control.MaxRate ||
				e.at > n+int64(MaxSkew) || e.paused > n+int64(maxPause) || e.window < 0 || !e.matters(n) {
				t.Fatalf("%q: %+v kept", k, e)
			}
			all = append(all, keyedEntry{k, e})
		}
		var b bytes.Buffer
		b.WriteString(header)
		var line []byte
		for _, k := range all {
			line = k.e.appendLine(line[:0], k.key)
			b.Write(line)
		}
		again, dropped, err := decode(&b, now, 1000)
		if err != nil || dropped != 0 || len(again) != len(known) {
			t.Fatalf("written and read back: %d of %d, %d dropped, %v", len(again), len(known), dropped, err)
		}
		for k, e := range known {
			// Written to the millisecond.
			e.window, e.paused, e.at = e.window/1e6*1e6, e.paused/1e6*1e6, e.at/1e6*1e6
			if again[k] != e {
				t.Fatalf("%q: %+v read back as %+v", k, e, again[k])
			}
		}
	})
}

// BenchmarkFileMemoryMillion measures a crawler's memory of 1,000,000
// hosts: the file's size, the time to load it (ns/op), and the live heap
// each remembered host costs while the Transport holds no state for it
// (B/host).
//
//	go test -run '^$' -bench FileMemoryMillion -benchtime 3x .
func BenchmarkFileMemoryMillion(b *testing.B) {
	const hosts = 1_000_000
	path := filepath.Join(b.TempDir(), "memory")
	m, err := openStore(path)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for i := range hosts {
		at := now.Add(-time.Duration(i) * time.Millisecond)
		r := Record{Limit: float64(1 + i%500), Stated: i%3 == 0, At: at}
		if !r.Stated {
			r.Since = at.Add(-time.Duration(i%3600) * time.Second) // how long a measured limit had stood
		}
		m.Remember(fmt.Sprintf("host-%07d.example.com", i), r)
	}
	if err := m.Close(); err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	m = nil
	var before, after runtime.MemStats
	var loaded *Store
	for b.Loop() {
		if loaded != nil {
			loaded.Close() // written as loaded: nothing to write
			loaded = nil
		}
		runtime.GC()
		runtime.ReadMemStats(&before)
		if loaded, err = openStore(path); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if loaded.Len() != hosts {
		b.Fatalf("loaded %d hosts of %d", loaded.Len(), hosts)
	}
	b.ReportMetric(float64(st.Size())/1e6, "file-MB")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/hosts, "B/host")
	loaded.Close()
}

// openStore opens the Store at path with a FileMemory's defaults.
func openStore(path string) (*Store, error) {
	s, _, err := Open(path, Options{Entries: 1_000_000, Bytes: 100 << 20, Every: 30 * time.Second})
	return s, err
}
