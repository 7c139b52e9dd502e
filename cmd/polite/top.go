package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politestatus"
	"github.com/vbauerster/cupwriter"
)

// topUsage is the head of polite top's usage text.
const topUsage = `Usage: polite top [flags] ADDR

Shows a polite Transport's status page in the terminal, as top shows
processes, for a server with no browser at hand: the keys that wait most,
each with its state, its pace, the server's limit, the calls that wait by
priority, what it sent and had refused in the last minute, and the line in
words that says why it waits.

ADDR is where the program serves Transport.StatusHandler, as a URL
(http://127.0.0.1:6060/debug/polite/), or as host:port, read as
http://host:port/debug/polite/ (host:port/path as http://host:port/path).
polite top reads ADDR?format=json each -interval: on a terminal it
redraws the screen in place until Ctrl-C; elsewhere it prints one frame
after another. -once prints one frame and exits, for scripts.

Columns: KEY; STATE (starting, unthrottled, climbing, finding, holding, or
off); RATE/S, what the key is paced at; LIMIT/S, the server's limit as
polite knows it, stated by the server or measured from its throttles;
WAITING, the calls that wait, by priority; CALLS, the calls that hold the
key (waiting, in flight, between attempts); SENT, REFUSED and FAILED, the
attempts sent, those the server refused, and the calls that failed before
being sent, in the last minute. The line under a key says why it waits.

A read that fails shows its error in the frame, and top keeps trying.

Exit status: 0 when stopped by Ctrl-C or after -once's frame, 1 when -once
could not read the page, 2 when the command line is wrong.
`

// topDefaultPath is where a status page is read from when ADDR is only
// host:port: the path the library's documentation mounts it at.
const topDefaultPath = "/debug/polite/"

// topDefaultKeys is how many keys a frame shows without -n when the
// terminal's height is not known.
const topDefaultKeys = 20

// topMaxBody is the most of a status page read: a page of many keys with
// five minutes of history each is a few megabytes.
const topMaxBody = 64 << 20

// topFlags are the flags of polite top.
type topFlags struct {
	n        int
	search   string
	interval time.Duration
	once     bool
}

// register defines the flags on fs.
func (f *topFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.n, "n", 0, "keys to show, at most (default: as many as fit the terminal, or 20)")
	fs.StringVar(&f.search, "q", "", "show only the keys whose name holds `TEXT`")
	fs.DurationVar(&f.interval, "interval", time.Second, "time between two reads of the page")
	fs.BoolVar(&f.once, "once", false, "print one frame and exit")
}

// check reports flags whose values make no sense.
func (f *topFlags) check() error {
	switch {
	case f.n < 0:
		return fmt.Errorf("-n must be 1 or more, not %d", f.n)
	case f.interval <= 0:
		return fmt.Errorf("-interval must be more than 0, not %v", f.interval)
	}
	return nil
}

// runTop runs polite top.
func runTop(ctx context.Context, args []string, e *env) int {
	var f topFlags
	fs := newFlagSet("top", topUsage, e)
	f.register(fs)
	if code := parseFlags(fs, args, e); code >= 0 {
		return code
	}
	switch {
	case fs.NArg() > 1 && strings.HasPrefix(fs.Arg(1), "-"):
		return usageError(fs, "flags go before ADDR")
	case fs.NArg() != 1:
		return usageError(fs, "give one ADDR: the URL of a status page, or host:port")
	}
	if err := f.check(); err != nil {
		return usageError(fs, "%v", err)
	}
	u, err := statusURL(fs.Arg(0))
	if err != nil {
		return usageError(fs, "%v", err)
	}
	client := &http.Client{Timeout: max(5*time.Second, f.interval)}
	defer client.CloseIdleConnections()
	src := &topSource{client: client, url: u}
	tp := &topper{
		read:   src.read,
		screen: newTopScreen(e),
		flags:  f,
		addr:   src.shown(),
		loc:    time.Local,
	}
	if f.once {
		return tp.once(ctx, e.stderr)
	}
	return tp.loop(ctx, e.stderr)
}

// statusURL returns the URL of the status page at addr: a URL, or
// host:port (":port" for the local host), read as
// http://host:port/debug/polite/ (host:port/path as http://host:port/path).
// Its errors do not repeat addr, which may carry a password.
func statusURL(addr string) (*url.URL, error) {
	if addr == "" {
		return nil, errors.New("ADDR is empty: give the URL of a status page, or host:port")
	}
	bare := !strings.Contains(addr, "://")
	if bare {
		addr = "http://" + addr
	}
	u, err := url.Parse(addr)
	if err != nil {
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return nil, fmt.Errorf("ADDR is neither a URL (http://host:port/path/) nor host:port: %v", err)
	}
	if u.Hostname() == "" && u.Port() != "" {
		u.Host = net.JoinHostPort("localhost", u.Port())
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("ADDR is not an http or https URL (scheme %q)", u.Scheme)
	case u.Host == "":
		return nil, errors.New("ADDR has no host")
	}
	switch {
	case u.Path == "" && bare:
		u.Path = topDefaultPath
	case u.Path == "":
		u.Path = "/"
	}
	u.Fragment, u.RawFragment = "", ""
	return u, nil
}

// topSource reads a status page over HTTP.
type topSource struct {
	client *http.Client
	url    *url.URL
}

// shown returns the page's URL as top shows it: without its query, and
// with its password masked.
func (s *topSource) shown() string {
	u := *s.url
	u.RawQuery = ""
	return polite.RedactURL(&u)
}

// read returns the page with the n keys (the server's default if 0) that
// wait most among those whose name holds search.
func (s *topSource) read(ctx context.Context, n int, search string) (politestatus.Page, error) {
	var page politestatus.Page
	u := *s.url
	q := u.Query()
	q.Set("format", "json")
	q.Set("history", "0") // top charts nothing: the samples would be most of each answer
	q.Del("n")
	if n > 0 {
		q.Set("n", strconv.Itoa(n))
	}
	q.Del("q")
	if search != "" {
		q.Set("q", search)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return page, fmt.Errorf("reading %s: %v", s.shown(), err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		// A url.Error repeats the URL, query and all: say only its cause.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return page, fmt.Errorf("reading %s: %v", s.shown(), err)
	}
	defer resp.Body.Close()
	notPage := func(format string, args ...any) error {
		return fmt.Errorf("%s is not a polite status page: %s (is Transport.StatusHandler mounted at that path?)", s.shown(), fmt.Sprintf(format, args...))
	}
	if resp.StatusCode != http.StatusOK {
		return page, notPage("it answered %s", resp.Status)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		if mt == "" {
			mt = "no Content-Type"
		}
		return page, notPage("it answered %s, not JSON", mt)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, topMaxBody)).Decode(&page); err != nil {
		return page, notPage("its JSON does not read as a status page (%v)", err)
	}
	if page.Time.IsZero() {
		return page, notPage("its JSON has no time")
	}
	return page, nil
}

// topper draws a status page's frames: one, or one each interval.
type topper struct {
	// read returns the page of the n keys (the server's default if 0) that
	// wait most among those whose name holds search.
	read   func(ctx context.Context, n int, search string) (politestatus.Page, error)
	screen *topScreen
	flags  topFlags
	addr   string         // the page's URL as shown
	loc    *time.Location // the zone of the frame's times
}

// once draws one frame, or reports on stderr why it could not and
// returns exitFailure.
func (tp *topper) once(ctx context.Context, stderr io.Writer) int {
	width, height := tp.screen.size()
	page, err := tp.read(ctx, tp.keys(height), tp.flags.search)
	if err != nil {
		fmt.Fprintf(stderr, "polite top: %v\n", err)
		return exitFailure
	}
	v := topView{addr: tp.addr, search: tp.flags.search, page: &page, width: width, height: height, loc: tp.loc}
	if err := tp.screen.draw(v.lines()); err != nil {
		fmt.Fprintf(stderr, "polite top: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// loop draws a frame each interval until ctx is done (Ctrl-C), and
// returns exitOK then; or exitFailure if the screen cannot be written. A
// read that fails shows its error in the frame, over the last page read
// on a terminal.
func (tp *topper) loop(ctx context.Context, stderr io.Writer) int {
	tick := time.NewTicker(tp.flags.interval)
	defer tick.Stop()
	defer tp.screen.close()
	var last *politestatus.Page
	for {
		width, height := tp.screen.size()
		page, err := tp.read(ctx, tp.keys(height), tp.flags.search)
		if ctx.Err() != nil {
			return exitOK
		}
		v := topView{addr: tp.addr, search: tp.flags.search, width: width, height: height, loc: tp.loc, every: tp.flags.interval}
		if err != nil {
			v.err, v.failedAt = err, time.Now()
			if tp.screen.terminal {
				v.page = last // the last page stays in view, under the error
			}
		} else {
			last = &page
			v.page = last
		}
		if err := tp.screen.draw(v.lines()); err != nil {
			fmt.Fprintf(stderr, "polite top: %v\n", err)
			return exitFailure
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-tick.C:
		}
	}
}

// keys returns how many keys to ask for: -n, or as many as a screen of
// height lines holds (each key one line at least), or topDefaultKeys.
func (tp *topper) keys(height int) int {
	switch {
	case tp.flags.n > 0:
		return tp.flags.n
	case height > 0:
		return max(1, height-topHeadLines)
	}
	return topDefaultKeys
}

// topScreen is where top draws: a terminal, each frame drawn over the
// last, or any other writer, frames one after another.
type topScreen struct {
	w        io.Writer
	terminal bool
	// size returns the screen's width and height, 0 when not known.
	size  func() (width, height int)
	drawn bool // a frame was drawn
}

// newTopScreen returns e's stdout as a screen. Its width is the
// terminal's, or $COLUMNS elsewhere; its height the terminal's.
func newTopScreen(e *env) *topScreen {
	cw := cupwriter.New(e.stdout, false)
	s := &topScreen{w: e.stdout, terminal: cw.IsTerminal()}
	s.size = func() (int, int) {
		if s.terminal {
			if w, h, err := cw.GetTermSize(); err == nil && w > 0 && h > 0 {
				return w, h
			}
		}
		if c, err := strconv.Atoi(e.getenv("COLUMNS")); err == nil && c > 0 {
			return c, 0
		}
		return 0, 0
	}
	return s
}

// ANSI sequences of a terminal.
const (
	ansiHome       = "\x1b[H"
	ansiClear      = "\x1b[2J"
	ansiClearLine  = "\x1b[K" // to the end of the line
	ansiClearBelow = "\x1b[J"
	ansiHideCursor = "\x1b[?25l"
	ansiShowCursor = "\x1b[?25h"
)

// draw writes a frame of lines: on a terminal over the last one, from the
// top left, elsewhere after it, a blank line between them.
func (s *topScreen) draw(lines []string) error {
	var b strings.Builder
	switch {
	case s.terminal && !s.drawn:
		b.WriteString(ansiHideCursor + ansiHome + ansiClear)
	case s.terminal:
		b.WriteString(ansiHome)
	case s.drawn:
		b.WriteString("\n")
	}
	for _, l := range lines {
		b.WriteString(l)
		if s.terminal {
			b.WriteString(ansiClearLine)
		}
		b.WriteString("\n")
	}
	if s.terminal {
		b.WriteString(ansiClearBelow)
	}
	s.drawn = true
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		return fmt.Errorf("writing the frame: %w", err)
	}
	return nil
}

// close gives a terminal its cursor back; the last frame stays.
func (s *topScreen) close() {
	if s.terminal && s.drawn {
		_, _ = io.WriteString(s.w, ansiShowCursor)
	}
}

// topHeadLines is how many lines a frame's head takes: the title, the
// counts, a blank line and the columns' names (an error line is more).
const topHeadLines = 4
