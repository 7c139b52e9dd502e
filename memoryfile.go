package polite

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/periodic"
)

// Defaults of a FileMemory. Each option's documentation repeats its
// default.
const (
	DefaultMemoryEntries = 1_000_000
	DefaultMemoryBytes   = 100 << 20
	DefaultMemoryEvery   = 30 * time.Second
)

// memoryHeader opens a memory file: its format and version.
const memoryHeader = "polite memory 1\n"

// memoryMaxLine bounds a line of a memory file: a longer one is broken.
const memoryMaxLine = 4096

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
	path    string
	entries int
	bytes   int64
	every   time.Duration

	// mu guards the fields below.
	mu    sync.Mutex
	known map[string]memoryEntry
	dirty bool

	saving sync.Mutex     // held while the file is written
	writer *periodic.Loop // writes the file every m.every
}

// memoryEntry is one key's record, kept small: a crawler holds a million.
type memoryEntry struct {
	limit  float64
	window int64  // nanoseconds
	paused int64  // Unix nanoseconds; 0 if none
	at     int64  // Unix nanoseconds
	stood  uint32 // seconds the limit had stood at at (Remembered.Since)
	stated bool
}

// A MemoryOption configures a [FileMemory].
type MemoryOption func(*FileMemory)

// MemoryEntries bounds how many keys a FileMemory keeps, the most recently
// learnt: n < 1 means the default, [DefaultMemoryEntries].
func MemoryEntries(n int) MemoryOption {
	return func(m *FileMemory) {
		if n >= 1 {
			m.entries = n
		}
	}
}

// MemoryBytes bounds the size of a FileMemory's file, in bytes: the most
// recently learnt entries that fit are written, and no more than that is
// read. n < 1 means the default, [DefaultMemoryBytes].
func MemoryBytes(n int64) MemoryOption {
	return func(m *FileMemory) {
		if n >= 1 {
			m.bytes = n
		}
	}
}

// MemoryEvery sets how often a FileMemory writes its file when what it
// holds has changed: d ≤ 0 means the default, [DefaultMemoryEvery]. The
// file is written at Close too.
func MemoryEvery(d time.Duration) MemoryOption {
	return func(m *FileMemory) {
		if d > 0 {
			m.every = d
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
	m := &FileMemory{
		path:    path,
		entries: DefaultMemoryEntries,
		bytes:   DefaultMemoryBytes,
		every:   DefaultMemoryEvery,
		known:   make(map[string]memoryEntry),
	}
	for _, opt := range opts {
		if opt != nil {
			opt(m)
		}
	}
	err := m.load()
	// A failure is kept dirty, and tried again; Close reports it.
	m.writer = periodic.Start(m.every, func() { _ = m.Save() })
	return m, err
}

// Recall returns what m remembers of key.
func (m *FileMemory) Recall(key string) (Remembered, bool) {
	m.mu.Lock()
	e, ok := m.known[key]
	m.mu.Unlock()
	if !ok {
		return Remembered{}, false
	}
	return e.remembered(), true
}

// Remember keeps r as what m knows of key. A Remembered with no limit and
// no pause forgets key.
func (m *FileMemory) Remember(key string, r Remembered) {
	e, ok := entryOf(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !ok {
		if _, had := m.known[key]; had {
			delete(m.known, key)
			m.dirty = true
		}
		return
	}
	m.known[key] = e
	m.dirty = true
	if len(m.known) >= 2*m.entries {
		m.pruneLocked(m.entries)
	}
}

// Len returns the number of keys m remembers.
func (m *FileMemory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.known)
}

// Save writes what m holds to its file now, if it changed since it was
// last written.
func (m *FileMemory) Save() error {
	m.saving.Lock()
	defer m.saving.Unlock()
	m.mu.Lock()
	if !m.dirty {
		m.mu.Unlock()
		return nil
	}
	m.dirty = false
	all := make([]keyedEntry, 0, len(m.known))
	for k, e := range m.known {
		all = append(all, keyedEntry{k, e})
	}
	m.mu.Unlock()
	if err := m.write(all); err != nil {
		m.mu.Lock()
		m.dirty = true // try again next time
		m.mu.Unlock()
		return err
	}
	return nil
}

// Close writes the file one last time and stops m's writer. m may still
// be used: what it learns afterwards is kept in the process only, until
// Save.
func (m *FileMemory) Close() error {
	m.writer.Stop()
	return m.Save()
}

// keyedEntry is an entry with its key, as written.
type keyedEntry struct {
	key string
	e   memoryEntry
}

// write writes all, the most recent first, within m's bounds, to a new
// file that then takes the place of m's.
func (m *FileMemory) write(all []keyedEntry) error {
	now := time.Now().UnixNano()
	all = slices.DeleteFunc(all, func(k keyedEntry) bool { return !k.e.matters(now) })
	slices.SortFunc(all, func(a, b keyedEntry) int { return cmp.Compare(b.e.at, a.e.at) })
	if err := os.MkdirAll(filepath.Dir(m.path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(m.path), filepath.Base(m.path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // once renamed, there is nothing left to remove
	w := bufio.NewWriterSize(f, 64<<10)
	size := int64(len(memoryHeader))
	w.WriteString(memoryHeader)
	var line []byte
	for i, k := range all {
		if i == m.entries {
			break
		}
		line = k.e.appendLine(line[:0], k.key)
		if size += int64(len(line)); size > m.bytes {
			break
		}
		w.Write(line)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), m.path)
}

// load reads m's file, at most m.bytes of it.
func (m *FileMemory) load() error {
	f, err := os.Open(m.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &MemoryFileError{Path: m.path, Err: err}
	}
	defer f.Close()
	known, dropped, err := decodeMemory(io.LimitReader(f, m.bytes), time.Now(), m.entries)
	m.known = known
	if err != nil {
		return &MemoryFileError{Path: m.path, Dropped: dropped, Err: err}
	}
	return nil
}

// errNotMemory reports a file that does not begin as a memory file does.
var errNotMemory = errors.New("not a polite memory file")

// decodeMemory reads a memory file from r, as of now: the entries of at
// most "most" keys, the lines it could not read, and why it could not read
// the first. An entry that no longer matters is skipped, not counted.
func decodeMemory(r io.Reader, now time.Time, most int) (map[string]memoryEntry, int, error) {
	known := make(map[string]memoryEntry)
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.ReadString('\n')
	if head != memoryHeader {
		if err == io.EOF && head == "" {
			return known, 0, nil // empty
		}
		return known, 0, errNotMemory
	}
	n := now.UnixNano()
	dropped := 0
	var first error
	drop := func(err error) {
		if dropped++; first == nil {
			first = err
		}
	}
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull || len(line) > memoryMaxLine:
			for err == bufio.ErrBufferFull { // skip the rest of the line
				_, err = br.ReadSlice('\n')
			}
			drop(errors.New("line too long"))
			continue
		case err == io.EOF && len(line) > 0:
			drop(errors.New("truncated line")) // the file was cut
			return known, dropped, first
		case err == io.EOF:
			return known, dropped, first
		case err != nil:
			drop(err)
			return known, dropped, first
		}
		key, e, lineErr := parseLine(line[:len(line)-1], n)
		switch {
		case lineErr != nil:
			drop(lineErr)
		case len(known) >= most:
			drop(errors.New("more entries than the memory keeps"))
		case e.matters(n):
			if _, dup := known[key]; !dup {
				known[key] = e
			}
		}
	}
}

// parseLine parses one line of a memory file, as of n (Unix nanoseconds).
func parseLine(line []byte, n int64) (string, memoryEntry, error) {
	tab := bytes.IndexByte(line, '\t')
	if tab < 0 {
		return "", memoryEntry{}, errors.New("too few fields")
	}
	key := string(line[:tab])
	if len(key) > 0 && key[0] == '"' {
		var err error
		if key, err = strconv.Unquote(key); err != nil {
			return "", memoryEntry{}, fmt.Errorf("key: %w", err)
		}
	}
	if key == "" || isBucketKey(key) {
		return "", memoryEntry{}, errors.New("no key")
	}
	e, err := parseEntry(line[tab+1:])
	if err != nil {
		return "", memoryEntry{}, err
	}
	// No pause is kept longer than maxPause from when it was asked for,
	// which was before now.
	if e.at > n+int64(memorySkew) || e.paused > n+int64(maxPause) {
		return "", memoryEntry{}, errors.New("out of range")
	}
	return key, e, nil
}

// parseEntry parses the text of an entry (see Remembered.MarshalText).
func parseEntry(text []byte) (memoryEntry, error) {
	var fields [6][]byte // the sixth is optional
	for i := range fields {
		j := bytes.IndexByte(text, '\t')
		if j < 0 {
			if i < len(fields)-2 {
				return memoryEntry{}, errors.New("too few fields")
			}
			fields[i] = text
			break
		}
		if i == len(fields)-1 {
			return memoryEntry{}, errors.New("too many fields")
		}
		fields[i], text = text[:j], text[j+1:]
	}
	var e memoryEntry
	var err error
	if e.limit, err = strconv.ParseFloat(string(fields[0]), 64); err != nil ||
		!(e.limit >= 0) || math.IsInf(e.limit, 0) || e.limit > control.MaxRate {
		return memoryEntry{}, errors.New("bad limit")
	}
	switch string(fields[1]) {
	case "s":
		e.stated = true
	case "m":
	default:
		return memoryEntry{}, errors.New("bad source of the limit")
	}
	ints := [3]*int64{&e.window, &e.paused, &e.at}
	for i, p := range ints {
		ms, err := strconv.ParseInt(string(fields[2+i]), 10, 64)
		if err != nil || ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return memoryEntry{}, errors.New("bad number")
		}
		*p = ms * int64(time.Millisecond)
	}
	if e.window > int64(maxPause)*24 {
		return memoryEntry{}, errors.New("window out of range")
	}
	if fields[5] != nil {
		ms, err := strconv.ParseInt(string(fields[5]), 10, 64)
		if err != nil || ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return memoryEntry{}, errors.New("bad number")
		}
		if since := ms * int64(time.Millisecond); since > 0 && since < e.at && !e.stated {
			e.stood = uint32(min(e.at-since, int64(MemoryMaxAge)) / int64(time.Second))
		}
	}
	return e, nil
}

// appendLine appends the line of key and e to b.
func (e memoryEntry) appendLine(b []byte, key string) []byte {
	if needsQuote(key) {
		b = strconv.AppendQuote(b, key)
	} else {
		b = append(b, key...)
	}
	b = append(b, '\t')
	return append(e.appendText(b), '\n')
}

// appendText appends the text of e to b (see Remembered.MarshalText).
func (e memoryEntry) appendText(b []byte) []byte {
	b = strconv.AppendFloat(b, e.limit, 'g', -1, 64)
	if e.stated {
		b = append(b, "\ts\t"...)
	} else {
		b = append(b, "\tm\t"...)
	}
	b = strconv.AppendInt(b, e.window/int64(time.Millisecond), 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, e.paused/int64(time.Millisecond), 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, e.at/int64(time.Millisecond), 10)
	if e.stood > 0 && e.at > 0 {
		b = append(b, '\t')
		b = strconv.AppendInt(b, (e.at-int64(e.stood)*int64(time.Second))/int64(time.Millisecond), 10)
	}
	return b
}

// MarshalText encodes r as a Memory's stores keep it: five or six fields
// separated by tabs, the limit in requests per second, "s" if the server
// stated it or "m" if polite measured it, the window, the end of the
// pause and when the limit was learnt, these three in milliseconds (the
// instants since the Unix epoch; 0 if none), and, if known, Since (the
// instant, in milliseconds, cut to a whole number of seconds before At).
// A limit that is no positive finite number is written 0, and the
// instants are cut to the millisecond. It never fails.
func (r Remembered) MarshalText() ([]byte, error) {
	e, _ := entryOf(r)
	return e.appendText(nil), nil
}

// UnmarshalText decodes what MarshalText encodes. Text that is not that,
// or holds a number out of range (a limit not finite, or over a billion
// requests a second; a window over a day), is an error, and r is left as
// it was.
func (r *Remembered) UnmarshalText(text []byte) error {
	e, err := parseEntry(text)
	if err != nil {
		return fmt.Errorf("polite: remembered: %w", err)
	}
	*r = e.remembered()
	return nil
}

// needsQuote reports whether key must be written quoted: it holds a byte
// that would break its line, or begins with a quote.
func needsQuote(key string) bool {
	if key == "" || key[0] == '"' {
		return true
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < ' ' || c == 0x7f {
			return true
		}
	}
	return false
}

// entryOf returns the entry of r, and false if r holds nothing to keep.
func entryOf(r Remembered) (memoryEntry, bool) {
	e := memoryEntry{stated: r.Stated, window: int64(max(r.Window, 0))}
	if r.Limit > 0 && !math.IsInf(r.Limit, 0) {
		e.limit = min(r.Limit, control.MaxRate)
	}
	if !r.At.IsZero() {
		e.at = max(r.At.UnixNano(), 0)
		if !r.Since.IsZero() && !r.Stated && r.Since.Before(r.At) {
			e.stood = uint32(min(r.At.Sub(r.Since), MemoryMaxAge, time.Duration(e.at)) / time.Second)
		}
	}
	if !r.PausedUntil.IsZero() {
		e.paused = max(r.PausedUntil.UnixNano(), 0)
	}
	return e, e.limit > 0 || e.paused > 0
}

// remembered returns e as a Remembered.
func (e memoryEntry) remembered() Remembered {
	r := Remembered{Limit: e.limit, Stated: e.stated, Window: time.Duration(e.window)}
	if e.at > 0 {
		r.At = time.Unix(0, e.at)
		if e.stood > 0 {
			r.Since = r.At.Add(-time.Duration(e.stood) * time.Second)
		}
	}
	if e.paused > 0 {
		r.PausedUntil = time.Unix(0, e.paused)
	}
	return r
}

// matters reports whether e still says something at n (Unix nanoseconds):
// a limit still trusted, or a pause not over.
func (e memoryEntry) matters(n int64) bool {
	return e.limit > 0 && n-e.at <= int64(MemoryMaxAge) || e.paused > n
}

// pruneLocked keeps the keep most recently learnt entries of m. It
// requires m.mu held.
func (m *FileMemory) pruneLocked(keep int) {
	ats := make([]int64, 0, len(m.known))
	for _, e := range m.known {
		ats = append(ats, e.at)
	}
	slices.Sort(ats)
	cut := ats[len(ats)-keep] // the oldest at kept
	for k, e := range m.known {
		if e.at < cut {
			delete(m.known, k)
		}
	}
}
