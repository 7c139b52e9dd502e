package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// A bodySink keeps the bodies of the URLs. Its methods are safe for
// concurrent use.
type bodySink interface {
	// save reads body to the end and keeps it as the body of rawURL. A
	// body that breaks is not kept, not even in part.
	save(rawURL string, body io.Reader) error
}

// dirSink writes each body to its own file in dir, named by safeName.
type dirSink struct {
	dir string
}

// bodyFileMode is the mode of the files of -o, as downloaders leave
// them: os.CreateTemp makes its files 0600.
const bodyFileMode = 0o644

// bodyTempPattern is the pattern of the temporary files of -o, for
// os.CreateTemp: a body is written to one, then renamed.
const bodyTempPattern = ".polite-*.part"

// save writes body to a temporary file in the directory, and renames it
// to rawURL's safe name, mode bodyFileMode, once it is whole; it removes
// it otherwise.
func (s dirSink) save(rawURL string, body io.Reader) (err error) {
	tmp, err := os.CreateTemp(s.dir, bodyTempPattern)
	if err != nil {
		return fmt.Errorf("creating a file for the body: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, body); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(bodyFileMode); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	name := filepath.Join(s.dir, safeName(rawURL))
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("naming the body %s: %w", name, err)
	}
	return nil
}

// streamSink writes the bodies one after the other to one stream
// (stdout), each whole: a body is spooled until it has ended, in memory
// up to bodySpoolMemory bytes and in a temporary file beyond, then copied to
// the stream, so that bodies read at once do not interleave and a body
// that breaks writes nothing.
type streamSink struct {
	mu sync.Mutex // held while a body is copied to w
	w  io.Writer
}

// bodySpoolMemory is how much of a body streamSink keeps in memory; the rest
// goes to a temporary file.
const bodySpoolMemory = 1 << 20

// newStreamSink returns a streamSink that writes to w.
func newStreamSink(w io.Writer) *streamSink {
	return &streamSink{w: w}
}

// save spools body, then copies it to the stream.
func (s *streamSink) save(_ string, body io.Reader) error {
	var sp bodySpool
	defer sp.discard()
	if _, err := io.Copy(&sp, body); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := sp.writeTo(s.w); err != nil {
		return fmt.Errorf("writing the body to stdout: %w", err)
	}
	return nil
}

// bodySpool holds bytes in memory up to bodySpoolMemory, and in a temporary file
// beyond. Its zero value is empty and ready to use.
type bodySpool struct {
	buf  bytes.Buffer
	file *os.File // nil until the bytes outgrow the buffer
}

// Write implements io.Writer.
func (s *bodySpool) Write(p []byte) (int, error) {
	if s.file == nil && s.buf.Len()+len(p) <= bodySpoolMemory {
		return s.buf.Write(p)
	}
	if s.file == nil {
		f, err := os.CreateTemp("", "polite-body-*")
		if err != nil {
			return 0, fmt.Errorf("spooling a body: %w", err)
		}
		s.file = f
		if _, err := s.buf.WriteTo(f); err != nil {
			return 0, fmt.Errorf("spooling a body: %w", err)
		}
	}
	n, err := s.file.Write(p)
	if err != nil {
		return n, fmt.Errorf("spooling a body: %w", err)
	}
	return n, nil
}

// writeTo copies what the spool holds to w.
func (s *bodySpool) writeTo(w io.Writer) error {
	if s.file == nil {
		_, err := s.buf.WriteTo(w)
		return err
	}
	if _, err := s.file.Seek(0, io.SeekStart); err != nil {
		return err
	}
	_, err := io.Copy(w, s.file)
	return err
}

// discard frees the spool: it removes its temporary file, if any.
func (s *bodySpool) discard() {
	if s.file != nil {
		s.file.Close()
		os.Remove(s.file.Name())
	}
	s.buf = bytes.Buffer{}
}

// Limits of safeName.
const (
	maxNameStem = 100 // bytes of the name before its hash
	maxNameExt  = 8   // bytes of an extension after its dot, at most
	nameHashLen = 12  // hex digits of the URL's SHA-256
)

// safeName returns the name of the file that holds rawURL's body under
// -o: a single path element, never "." or "..", that cannot leave the
// directory nor hide in it, whatever the URL:
//
//   - the stem is the URL's host (its port after '_') and path, without the
//     path's extension, each character outside [A-Za-z0-9._-] made '_'
//     (so '/' and '\' too), runs of '_' and of '.' made one, leading and
//     trailing '.', '_' and '-' removed, cut to 100 bytes;
//   - then '-' and the first 12 hex digits of the SHA-256 of rawURL as
//     given, so that URLs that differ only in what was replaced (query,
//     fragment, odd characters, case) never share a file;
//   - then the last path element's extension, if it has one of at most 8
//     letters and digits: the file opens with the program it should.
//
// A URL that does not parse is named by its text, sanitized the same way.
func safeName(rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	hash := hex.EncodeToString(sum[:])[:nameHashLen]
	stem, ext := rawURL, ""
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		p := u.Path
		if e := path.Ext(p); len(e) > 1 && len(e) <= maxNameExt+1 && isAlnumASCII(e[1:]) {
			ext, p = e, strings.TrimSuffix(p, e)
		}
		stem = strings.ReplaceAll(u.Host, ":", "_") + "_" + p
	}
	stem = sanitizeName(stem)
	if len(stem) > maxNameStem {
		stem = strings.TrimRight(stem[:maxNameStem], "._-")
	}
	if stem == "" {
		return hash + ext
	}
	return stem + "-" + hash + ext
}

// sanitizeName returns s with each byte outside [A-Za-z0-9._-] made '_',
// runs of '_' and of '.' made one, and no '.', '_' or '-' at either end.
func sanitizeName(s string) string {
	var b strings.Builder
	var last byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isNameByte(c) {
			c = '_'
		}
		if (c == '_' || c == '.') && c == last {
			continue
		}
		b.WriteByte(c)
		last = c
	}
	return strings.Trim(b.String(), "._-")
}

// isNameByte reports whether c may appear in a file name as it is.
func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_'
}

// isAlnumASCII reports whether s is made of ASCII letters and digits only.
func isAlnumASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// jsonlWriter writes JSON lines, each with one Write, under a mutex: a
// run that stops at any point leaves whole lines only. After a failed
// write it writes nothing more and returns that error.
type jsonlWriter struct {
	mu   sync.Mutex
	w    io.Writer
	name string // for errors
	err  error
}

// write writes v as one JSON line.
func (l *jsonlWriter) write(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding a JSON line: %w", err)
	}
	line = append(line, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if _, err := l.w.Write(line); err != nil {
		l.err = fmt.Errorf("writing %s: %w", l.name, err)
	}
	return l.err
}
