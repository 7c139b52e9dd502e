package memfile

// The text of a record, as a memory file's lines and Redis's values hold
// it (see polite's Remembered.MarshalText).

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/politehttp/polite/internal/control"
	"github.com/politehttp/polite/internal/gate"
)

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
	source := fields[1]
	if len(source) == 2 && source[1] == 'c' && source[0] != 's' {
		e.counts, source = true, source[:1]
	}
	switch string(source) {
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
		b = append(b, "\ts"...)
	case e.noBurst:
		b = append(b, "\tn"...)
	default:
		b = append(b, "\tm"...)
	}
	if e.counts && !e.stated {
		b = append(b, 'c')
	}
	b = append(b, '\t')
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
	e := entry{stated: r.Stated, noBurst: r.NoBurst && !r.Stated, counts: r.CountsRefusals && !r.Stated, window: int64(max(r.Window, 0))}
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
	r := Record{Limit: e.limit, Stated: e.stated, Window: time.Duration(e.window), NoBurst: e.noBurst, CountsRefusals: e.counts}
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

// MaxAge is how long a limit a record holds is trusted (polite's
// MemoryMaxAge): an older one is dropped once no pause holds it.
const MaxAge = 24 * time.Hour

// Record is what is remembered of one key: polite's Remembered, field for
// field, where each is documented for users.
type Record struct {
	Limit          float64
	Stated         bool
	Window         time.Duration
	PausedUntil    time.Time
	At             time.Time
	Since          time.Time
	NoBurst        bool
	CountsRefusals bool
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
	counts  bool // measured on a server that counts the requests it refuses (Record.CountsRefusals)
}

// matters reports whether e still says something at n (Unix nanoseconds):
// a limit still trusted, or a pause not over.
func (e entry) matters(n int64) bool {
	return e.limit > 0 && n-e.at <= int64(MaxAge) || e.paused > n
}

// maxPause bounds a remembered pause: no pause is kept longer.
const maxPause = gate.MaxPause

// MaxSkew is how far in the future a remembered instant may be before its
// record is taken for broken (a clock set wrong, a hostile file).
const MaxSkew = time.Minute

// isBucketKey reports whether key is of the form polite once gave the
// buckets servers name, which no request key takes.
func isBucketKey(key string) bool { return strings.HasPrefix(key, "\x00bucket\x00") }
