// Package memfile keeps what a Transport learnt of its keys' servers in
// one file (polite's Store): a store held in the process, written
// whole to a new file every little while, read back when opened.
package memfile

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
	"strings"
	"sync"
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/gate"
	"github.com/politehttp/polite/internal/periodic"
)

// header opens a memory file: its format and version.
const header = "polite memory 1\n"

// maxLine bounds a line of a memory file: a longer one is broken.
const maxLine = 4096

// MaxAge is how long a limit a record holds is trusted (polite's
// MemoryMaxAge): an older one is dropped once no pause holds it.
const MaxAge = 24 * time.Hour

// Record is what is remembered of one key: polite's Remembered, field for
// field, where each is documented for users.
type Record struct {
	Limit       float64
	Stated      bool
	Window      time.Duration
	PausedUntil time.Time
	At          time.Time
	Since       time.Time
	NoBurst     bool
}

// Options are a Store's bounds: its entries, its file's size, how often it
// writes the file.
type Options struct {
	Entries int
	Bytes   int64
	Every   time.Duration
}

// A Store is a memory kept in one file (see polite's FileMemory): safe for
// concurrent use.
type Store struct {
	path string
	opts Options

	// mu guards the fields below.
	mu    sync.Mutex
	known map[string]entry
	dirty bool

	saving sync.Mutex     // held while the file is written
	writer *periodic.Loop // writes the file every opts.Every
}

// entry is one key's record, kept small: a crawler holds a million.
type entry struct {
	limit   float64
	window  int64  // nanoseconds
	paused  int64  // Unix nanoseconds; 0 if none
	at      int64  // Unix nanoseconds
	stood   uint32 // seconds the limit had stood at at (Record.Since)
	stated  bool
	noBurst bool // measured on a server that lets no burst through (Record.NoBurst)
}

// Open returns a Store kept in the file at path, within opts, loaded with
// what the file holds; a file that does not exist is an empty memory (its
// directory is made when the file is first written). It always returns a
// usable Store; the error reports what could not be read (a file that
// cannot be opened, is not a memory file, or holds broken lines), and
// dropped how many lines were not read.
func Open(path string, opts Options) (s *Store, dropped int, err error) {
	m := &Store{path: path, opts: opts, known: make(map[string]entry)}
	dropped, err = m.load()
	// A failure is kept dirty, and tried again; Close reports it.
	m.writer = periodic.Start(opts.Every, func() { _ = m.Save() })
	return m, dropped, err
}

// Recall returns what m remembers of key.
func (m *Store) Recall(key string) (Record, bool) {
	m.mu.Lock()
	e, ok := m.known[key]
	m.mu.Unlock()
	if !ok {
		return Record{}, false
	}
	return e.remembered(), true
}

// Remember keeps r as what m knows of key. A Record with no limit and
// no pause forgets key.
func (m *Store) Remember(key string, r Record) {
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
	if len(m.known) >= 2*m.opts.Entries {
		m.pruneLocked(m.opts.Entries)
	}
}

// Len returns the number of keys m remembers.
func (m *Store) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.known)
}

// Save writes what m holds to its file now, if it changed since it was
// last written.
func (m *Store) Save() error {
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
func (m *Store) Close() error {
	m.writer.Stop()
	return m.Save()
}

// keyedEntry is an entry with its key, as written.
type keyedEntry struct {
	key string
	e   entry
}

// write writes all, the most recent first, within m's bounds, to a new
// file that then takes the place of m's.
func (m *Store) write(all []keyedEntry) error {
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
	size := int64(len(header))
	w.WriteString(header)
	var line []byte
	for i, k := range all {
		if i == m.opts.Entries {
			break
		}
		line = k.e.appendLine(line[:0], k.key)
		if size += int64(len(line)); size > m.opts.Bytes {
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

// load reads m's file, at most opts.Bytes of it.
func (m *Store) load() (int, error) {
	f, err := os.Open(m.path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	known, dropped, err := decode(io.LimitReader(f, m.opts.Bytes), time.Now(), m.opts.Entries)
	m.known = known
	return dropped, err
}

// errNotMemory reports a file that does not begin as a memory file does.
var errNotMemory = errors.New("not a polite memory file")

// decodeMemory reads a memory file from r, as of now: the entries of at
// most "most" keys, the lines it could not read, and why it could not read
// the first. An entry that no longer matters is skipped, not counted.
func decode(r io.Reader, now time.Time, most int) (map[string]entry, int, error) {
	known := make(map[string]entry)
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.ReadString('\n')
	if head != header {
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
		case err == bufio.ErrBufferFull || len(line) > maxLine:
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
func parseLine(line []byte, n int64) (string, entry, error) {
	tab := bytes.IndexByte(line, '\t')
	if tab < 0 {
		return "", entry{}, errors.New("too few fields")
	}
	key := string(line[:tab])
	if len(key) > 0 && key[0] == '"' {
		var err error
		if key, err = strconv.Unquote(key); err != nil {
			return "", entry{}, fmt.Errorf("key: %w", err)
		}
	}
	if key == "" || isBucketKey(key) {
		return "", entry{}, errors.New("no key")
	}
	e, err := parseEntry(line[tab+1:])
	if err != nil {
		return "", entry{}, err
	}
	// No pause is kept longer than maxPause from when it was asked for,
	// which was before now.
	if e.at > n+int64(MaxSkew) || e.paused > n+int64(maxPause) {
		return "", entry{}, errors.New("out of range")
	}
	return key, e, nil
}

// parseEntry parses the text of an entry (see Marshal).
func parseEntry(text []byte) (entry, error) {
	var fields [6][]byte // the sixth is optional
	for i := range fields {
		j := bytes.IndexByte(text, '\t')
		if j < 0 {
			if i < len(fields)-2 {
				return entry{}, errors.New("too few fields")
			}
			fields[i] = text
			break
		}
		if i == len(fields)-1 {
			return entry{}, errors.New("too many fields")
		}
		fields[i], text = text[:j], text[j+1:]
	}
	var e entry
	var err error
	if e.limit, err = strconv.ParseFloat(string(fields[0]), 64); err != nil ||
		!(e.limit >= 0) || math.IsInf(e.limit, 0) || e.limit > control.MaxRate {
		return entry{}, errors.New("bad limit")
	}
	switch string(fields[1]) {
	case "s":
		e.stated = true
	case "m":
	case "n":
		e.noBurst = true
	default:
		return entry{}, errors.New("bad source of the limit")
	}
	ints := [3]*int64{&e.window, &e.paused, &e.at}
	for i, p := range ints {
		ms, err := strconv.ParseInt(string(fields[2+i]), 10, 64)
		if err != nil || ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return entry{}, errors.New("bad number")
		}
		*p = ms * int64(time.Millisecond)
	}
	if e.window > int64(maxPause)*24 {
		return entry{}, errors.New("window out of range")
	}
	if fields[5] != nil {
		ms, err := strconv.ParseInt(string(fields[5]), 10, 64)
		if err != nil || ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return entry{}, errors.New("bad number")
		}
		if since := ms * int64(time.Millisecond); since > 0 && since < e.at && !e.stated {
			e.stood = uint32(min(e.at-since, int64(MaxAge)) / int64(time.Second))
		}
	}
	return e, nil
}

// appendLine appends the line of key and e to b.
func (e entry) appendLine(b []byte, key string) []byte {
	if needsQuote(key) {
		b = strconv.AppendQuote(b, key)
	} else {
		b = append(b, key...)
	}
	b = append(b, '\t')
	return append(e.appendText(b), '\n')
}

// appendText appends the text of e to b (see Marshal).
func (e entry) appendText(b []byte) []byte {
	b = strconv.AppendFloat(b, e.limit, 'g', -1, 64)
	switch {
	case e.stated:
		b = append(b, "\ts\t"...)
	case e.noBurst:
		b = append(b, "\tn\t"...)
	default:
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

// Marshal encodes r as a memory's stores keep it (see polite's
// Remembered.MarshalText).
func Marshal(r Record) []byte {
	e, _ := entryOf(r)
	return e.appendText(nil)
}

// Unmarshal decodes what Marshal encodes; text that is not that, or holds
// a number out of range, is an error.
func Unmarshal(text []byte) (Record, error) {
	e, err := parseEntry(text)
	if err != nil {
		return Record{}, err
	}
	return e.remembered(), nil
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
func entryOf(r Record) (entry, bool) {
	e := entry{stated: r.Stated, noBurst: r.NoBurst && !r.Stated, window: int64(max(r.Window, 0))}
	if r.Limit > 0 && !math.IsInf(r.Limit, 0) {
		e.limit = min(r.Limit, control.MaxRate)
	}
	if !r.At.IsZero() {
		e.at = max(r.At.UnixNano(), 0)
		if !r.Since.IsZero() && !r.Stated && r.Since.Before(r.At) {
			e.stood = uint32(min(r.At.Sub(r.Since), MaxAge, time.Duration(e.at)) / time.Second)
		}
	}
	if !r.PausedUntil.IsZero() {
		e.paused = max(r.PausedUntil.UnixNano(), 0)
	}
	return e, e.limit > 0 || e.paused > 0
}

// remembered returns e as a Record.
func (e entry) remembered() Record {
	r := Record{Limit: e.limit, Stated: e.stated, Window: time.Duration(e.window), NoBurst: e.noBurst}
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
func (e entry) matters(n int64) bool {
	return e.limit > 0 && n-e.at <= int64(MaxAge) || e.paused > n
}

// pruneLocked keeps the keep most recently learnt entries of m. It
// requires m.mu held.
func (m *Store) pruneLocked(keep int) {
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

// maxPause bounds a remembered pause: no pause is kept longer.
const maxPause = gate.MaxPause

// MaxSkew is how far in the future a remembered instant may be before its
// record is taken for broken (a clock set wrong, a hostile file).
const MaxSkew = time.Minute

// isBucketKey reports whether key is of the form polite once gave the
// buckets servers name, which no request key takes.
func isBucketKey(key string) bool { return strings.HasPrefix(key, "\x00bucket\x00") }
