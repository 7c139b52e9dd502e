package polite

import (
	"fmt"
	"time"

	"github.com/politehttp/polite/internal/memfile"
)

// MemoryMaxAge is how long a limit a [Memory] holds is trusted: a
// Transport starts a key at a remembered limit learnt or confirmed within
// it, and ignores an older one. A remembered pause is kept to its end
// whatever its age (at most an hour after it was asked for, as the
// Transport keeps any server pause).
const MemoryMaxAge = memfile.MaxAge

// Memory keeps what a Transport learnt of its keys' servers, so that a
// Transport made later, after a restart or in another process, starts
// from it rather than from nothing (see [WithMemory]). polite provides
// two: [OpenFileMemory], one file on disk, and the fleet's (package
// fleet), in Redis, shared by a fleet's processes.
//
// Both methods are called on the path of a request: they must return at
// once, from the process's memory, and never wait on I/O (a store that
// persists does so in the background). They must be safe for concurrent
// use.
type Memory interface {
	// Recall returns what is remembered of key, and whether anything
	// is. A Transport calls it once, when the key is first used (or
	// used again after it was forgotten for idleness).
	Recall(key string) (Remembered, bool)
	// Remember keeps r as what is known of key, in place of what was.
	// A Transport calls it when what it knows of the key changes: a
	// limit learnt or moved, a pause asked for; and at a throttle or an
	// answer that states a quota an hour or more after it last told a
	// limit that stands, so that a limit the server keeps confirming is
	// not forgotten.
	Remember(key string, r Remembered)
}

// Remembered is what a Transport learnt of one key's server that is worth
// keeping across processes. Its zero value remembers nothing.
type Remembered struct {
	// Limit is the server's limit, in requests per second: the rate of
	// the quota it stated in its headers, or the limit polite measured
	// from its throttles; 0 if unknown.
	Limit float64
	// Stated reports that the server stated Limit in its headers.
	Stated bool
	// Window is the window of the quota the server stated, if it stated
	// one or its resets showed it (the quota is Limit·Window requests per
	// Window); 0 if not.
	Window time.Duration
	// PausedUntil is when a pause the server asked for ends (a
	// Retry-After that holds the key, a quota spent until its reset);
	// zero if none.
	PausedUntil time.Time
	// At is when Limit was learnt or last confirmed.
	At time.Time
	// Since is when Limit was found at about its value, if polite measured
	// it (zero if unknown): the probes made between Since and At found it
	// where it was. A limit that has stood longer is probed less often
	// (see [Gentle]), and so is a remembered one: a Transport
	// counts the time from Since to At as time it has stood, and not the
	// time since At.
	Since time.Time
	// NoBurst reports that polite measured Limit on a server that lets no
	// burst through: of the first two requests it sent at once, one
	// passed and the other was refused (x/time/rate with a burst of 1, for
	// one). Such a server refuses now and then below its limit, from the
	// way to it, and [Gentle] holds further below it there: a process
	// started from the memory holds as the one that learnt it did, which
	// only a first contact shows.
	NoBurst bool
	// CountsRefusals reports that polite measured Limit on a server that
	// counts the requests it refuses against its limit (HAProxy's
	// http_req_rate does): a client that goes on sending past the limit is
	// refused for a while after, whatever its rate meanwhile. [Gentle]
	// reads the refusals that follow its own crossing of the limit as that
	// lockout, not as a lower limit: a process started from the memory
	// does so from its first crossing, where one with no memory learns it
	// from its first contact, which a process whose remembered limit
	// proves stale may never make.
	CountsRefusals bool
}

// memoryOf is a Memory as the engine reads it: a memfile.Record has the
// fields of Remembered, one for one.
type memoryOf struct{ m Memory }

func (a memoryOf) Recall(key string) (memfile.Record, bool) {
	r, ok := a.m.Recall(key)
	return memfile.Record(r), ok
}

func (a memoryOf) Remember(key string, r memfile.Record) { a.m.Remember(key, Remembered(r)) }

// Defaults of a FileMemory. Each option's documentation repeats its
// default.
const (
	DefaultMemoryEntries = 1_000_000
	DefaultMemoryBytes   = 100 << 20
	DefaultMemoryEvery   = 30 * time.Second
)

// FileMemory is a [Memory] kept in one file: what the Transports that use
// it learn is held in the process and written to the file every little
// while ([MemoryEvery]) and at [FileMemory.Close]; what the file held is
// read when it is opened. A crawler restarted after a deploy, or a
// command run again the next day, starts from what the last run learnt.
//
// The file is written whole to a new file beside it, which then takes its
// place, so that a crash never leaves half a file. It is bounded: it keeps
// the most recently learnt entries, at most [MemoryEntries] of them and
// [MemoryBytes] of file (1,000,000 entries, and 100 MB, by default: about
// 60 bytes an entry, read in well under 2 seconds; see the figures in
// docs/memory.md), and drops what is no longer trusted ([MemoryMaxAge]) once no
// pause holds it. A FileMemory is safe for concurrent use, and may serve
// several Transports of one process; two processes should not share one
// file (the last to write wins; a fleet shares its memory through Redis).
type FileMemory struct {
	opts memfile.Options // set by the options, before the store is opened
	s    *memfile.Store
}

// A MemoryOption configures a [FileMemory].
type MemoryOption func(*FileMemory)

// MemoryEntries bounds how many keys a FileMemory keeps, the most recently
// learnt: n < 1 means the default, [DefaultMemoryEntries].
func MemoryEntries(n int) MemoryOption {
	return func(m *FileMemory) {
		if n >= 1 {
			m.opts.Entries = n
		}
	}
}

// MemoryBytes bounds the size of a FileMemory's file, in bytes: the most
// recently learnt entries that fit are written, and no more than that is
// read. n < 1 means the default, [DefaultMemoryBytes].
func MemoryBytes(n int64) MemoryOption {
	return func(m *FileMemory) {
		if n >= 1 {
			m.opts.Bytes = n
		}
	}
}

// MemoryEvery sets how often a FileMemory writes its file when what it
// holds has changed: d ≤ 0 means the default, [DefaultMemoryEvery]. The
// file is written at Close too.
func MemoryEvery(d time.Duration) MemoryOption {
	return func(m *FileMemory) {
		if d > 0 {
			m.opts.Every = d
		}
	}
}

// MemoryFileError reports what of a memory file could not be read. The
// keys it held are started from nothing, as they would be without memory.
type MemoryFileError struct {
	Path    string
	Dropped int   // lines that were not read: broken, or past the file's bound
	Err     error // why, for the first of them
}

func (e *MemoryFileError) Error() string {
	if e.Dropped == 0 {
		return fmt.Sprintf("polite: memory file %s: %v", e.Path, e.Err)
	}
	return fmt.Sprintf("polite: memory file %s: %d entries not read: %v", e.Path, e.Dropped, e.Err)
}

func (e *MemoryFileError) Unwrap() error { return e.Err }

// OpenFileMemory returns a FileMemory kept in the file at path, loaded
// with what the file holds; a file that does not exist is an empty memory
// (its directory is made when the file is first written).
//
// It always returns a usable FileMemory. The error, a
// *[MemoryFileError], reports what could not be read: a file that cannot
// be opened, is not a memory file, or holds broken lines (they are
// skipped, and those keys start from nothing). Log it and go on: a memory
// lost costs a cold start, nothing else.
//
// Close the FileMemory when done with it: it writes the file one last
// time and stops the goroutine that writes it.
func OpenFileMemory(path string, opts ...MemoryOption) (*FileMemory, error) {
	m := &FileMemory{opts: memfile.Options{Entries: DefaultMemoryEntries, Bytes: DefaultMemoryBytes, Every: DefaultMemoryEvery}}
	for _, opt := range opts {
		if opt != nil {
			opt(m)
		}
	}
	s, dropped, err := memfile.Open(path, m.opts)
	m.s = s
	if err != nil {
		return m, &MemoryFileError{Path: path, Dropped: dropped, Err: err}
	}
	return m, nil
}

// Recall returns what m remembers of key.
func (m *FileMemory) Recall(key string) (Remembered, bool) {
	r, ok := m.s.Recall(key)
	return Remembered(r), ok
}

// Remember keeps r as what m knows of key. A Remembered with no limit and
// no pause forgets key.
func (m *FileMemory) Remember(key string, r Remembered) { m.s.Remember(key, memfile.Record(r)) }

// Len returns the number of keys m remembers.
func (m *FileMemory) Len() int { return m.s.Len() }

// Save writes what m holds to its file now, if it changed since it was
// last written.
func (m *FileMemory) Save() error { return m.s.Save() }

// Close writes the file one last time and stops m's writer. m may still
// be used: what it learns afterwards is kept in the process only, until
// Save.
func (m *FileMemory) Close() error { return m.s.Close() }

// MarshalText encodes r as a Memory's stores keep it: five or six fields
// separated by tabs, the limit in requests per second, "s" if the server
// stated it, "m" if polite measured it, or "n" if polite measured it on
// a server that lets no burst through (NoBurst), either of these two
// followed by "c" on a server that counts its refusals (CountsRefusals),
// the window, the end of the
// pause and when the limit was learnt, these three in milliseconds (the
// instants since the Unix epoch; 0 if none), and, if known, Since (the
// instant, in milliseconds, cut to a whole number of seconds before At).
// A limit that is no positive finite number is written 0, and the
// instants are cut to the millisecond. It never fails.
func (r Remembered) MarshalText() ([]byte, error) { return memfile.Marshal(memfile.Record(r)), nil }

// UnmarshalText decodes what MarshalText encodes. Text that is not that,
// or holds a number out of range (a limit not finite, or over a billion
// requests a second; a window over a day), is an error, and r is left as
// it was.
func (r *Remembered) UnmarshalText(text []byte) error {
	v, err := memfile.Unmarshal(text)
	if err != nil {
		return fmt.Errorf("polite: remembered: %w", err)
	}
	*r = Remembered(v)
	return nil
}
