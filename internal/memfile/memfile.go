// Package memfile keeps what a Transport learnt of its keys' servers in
// one file (polite's Store): a store held in the process, written
// whole to a new file every little while, read back when opened.
package memfile

import (
	"bufio"
	"cmp"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/politehttp/polite/internal/periodic"
)

// header opens a memory file: its format and version.
const header = "polite memory 1\n"

// maxLine bounds a line of a memory file: a longer one is broken.
const maxLine = 4096

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
