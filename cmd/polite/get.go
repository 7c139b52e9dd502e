package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/politehttp/polite"
)

// getUsage is the head of polite get's usage text.
const getUsage = `Usage:
  polite get [flags] URL...
  polite get [flags] -i FILE     one URL a line; -i - reads stdin
  polite get [flags] -           URLs from stdin

Fetches the URLs through one polite Transport: each host is paced to what
its server accepts (learnt from its answers, or set with -rate), throttled
requests wait as the server asks and are retried, and -robots keeps to each
host's Crawl-delay. In -i files, blank lines and lines starting with # are
skipped. URLs are handed to the workers host by host in turn, and no host
gets more than its share of them, so that a slow host does not hold them all;
a URL asleep before a retry (a Retry-After, a backoff) lends its worker to
another meanwhile. Redirects are followed (up to 10).

What polite learns of each host (the limit its server states, or the one
polite measures from its throttles; a pause it asks for, such as a
Retry-After of an hour) is remembered across runs, in polite/memory in the
user's cache directory or the -memory FILE: a run the next day starts each
host at its limit, without a first round of refusals, and sends nothing to a
host before a pause it asked for has ended. A limit is trusted for 24
hours; -no-memory starts every host from nothing.

Bodies of 2xx responses go to stdout, whole, in the order the URLs finish,
or with -o DIR each to its own file in DIR (made if needed). A file's name
is the URL's host and path, with every character but letters, digits, '.',
'-' and '_' made '_', no leading dot, no "..", at most 100 bytes, then '-'
and 12 hex digits of the URL's SHA-256, then the path's extension if it has
one: https://example.com/a/b.json becomes example.com_a_b-<hash>.json. A body
is written to a temporary file in DIR first, named .polite-*.part, renamed
when it is whole (mode 0644), and removed if it breaks; a process killed
outright (SIGKILL, or a second Ctrl-C) cannot remove it, and may leave a
.polite-*.part file in DIR. Bodies of other statuses are read and discarded.

-jsonl FILE writes one JSON object a line for each URL fetched, as it ends:
  url       the URL as given
  status    the final response's status, 0 when there was none
  bytes     body bytes received (up to the break, for a broken body)
  attempts  requests sent for it, retries and redirects included
  waited    seconds it waited in polite: pacing, pauses, backoff, robots.txt
  elapsed   seconds from the URL's start to the end of its body
  error     why there is no response or no whole body, "" when none
A non-2xx status is no "error", but the URL counts as failed.

A progress bar is drawn on stderr when it is a terminal, with under it the
line that says why the host that waits most waits (a Retry-After, a quota
spent, a queue), and a one-line summary is printed there at the end
(canceled and not started URLs are counted apart from the failed ones).
Ctrl-C stops the run: no new URL is started, the requests in flight are
cancelled (their lines say "canceled"; URLs not started get no line), and
the lines already written are whole.

Exit status: 0 when every URL got a 2xx response, 1 when any did not or the
run was interrupted, 2 when the command line is wrong. An empty -i file is
no error: nothing is fetched and the status is 0.
`

// getFlags are the flags of polite get.
type getFlags struct {
	transport transportFlags
	memory    memoryFlags
	input     string
	outDir    string
	jsonl     string
	workers   int
}

// register defines the flags on fs.
func (f *getFlags) register(fs *flag.FlagSet) {
	f.transport.register(fs)
	f.memory.register(fs)
	fs.StringVar(&f.input, "i", "", "read the URLs from `FILE`, one a line (- for stdin)")
	fs.StringVar(&f.outDir, "o", "", "write each body to a file in `DIR` rather than to stdout")
	fs.StringVar(&f.jsonl, "jsonl", "", "write one JSON line per URL to `FILE` (- for stdout, with -o only)")
	fs.IntVar(&f.workers, "workers", 32, "URLs fetched at once, at most, over all hosts (a URL asleep before a retry does not count)")
}

// check reports a command line that makes no sense: bad flag values, or
// URLs given both as arguments and with -i, or none at all.
func (f *getFlags) check(args []string) error {
	if err := f.transport.check(); err != nil {
		return err
	}
	switch {
	case f.workers < 1:
		return fmt.Errorf("-workers must be at least 1, not %d", f.workers)
	case f.jsonl == "-" && f.outDir == "":
		return errors.New("-jsonl - needs -o DIR: without it, stdout carries the bodies")
	case f.input != "" && len(args) > 0:
		return errors.New("give the URLs as arguments or with -i, not both")
	case f.input == "" && len(args) == 0:
		return errors.New("no URL to fetch: give URLs, -i FILE, or - to read them from stdin")
	case len(args) > 1 && slices.Contains(args, "-"):
		return errors.New(`"-" (URLs from stdin) must be the only argument`)
	}
	return nil
}

// runGet runs polite get.
func runGet(ctx context.Context, args []string, e *env) int {
	var f getFlags
	fs := newFlagSet("get", getUsage, e)
	f.register(fs)
	if code := parseFlags(fs, args, e); code >= 0 {
		return code
	}
	if err := f.check(fs.Args()); err != nil {
		return usageError(fs, "%v", err)
	}
	urls, err := readURLs(f.input, fs.Args(), e.stdin)
	if err != nil {
		fmt.Fprintf(e.stderr, "polite get: %v\n", err)
		return exitFailure
	}
	out, err := f.bodySink(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "polite get: %v\n", err)
		return exitFailure
	}
	lines, closeLines, err := f.jsonLines(e)
	if err != nil {
		fmt.Fprintf(e.stderr, "polite get: %v\n", err)
		return exitFailure
	}
	mem, closeMemory := f.memory.open(e, "get")
	g := newGetter(&f, out, lines, mem, e)
	sum := g.run(ctx, urls)
	closeMemory()
	if err := closeLines(); err != nil && sum.fault == nil {
		sum.fault = err
	}
	fmt.Fprintln(e.stderr, sum.String())
	if sum.fault != nil {
		fmt.Fprintf(e.stderr, "polite get: %v\n", sum.fault)
	}
	if sum.failed > 0 || sum.interrupted || sum.fault != nil {
		return exitFailure
	}
	return exitOK
}

// bodySink returns where the bodies go: the -o directory, made if it
// does not exist, or stdout.
func (f *getFlags) bodySink(e *env) (bodySink, error) {
	if f.outDir == "" {
		return newStreamSink(e.stdout), nil
	}
	if err := os.MkdirAll(f.outDir, 0o755); err != nil {
		return nil, fmt.Errorf("making the output directory: %w", err)
	}
	return dirSink{dir: f.outDir}, nil
}

// jsonLines returns the writer of the JSON lines (nil without -jsonl)
// and the function that closes its file.
func (f *getFlags) jsonLines(e *env) (*jsonlWriter, func() error, error) {
	switch f.jsonl {
	case "":
		return nil, func() error { return nil }, nil
	case "-":
		return &jsonlWriter{w: e.stdout, name: "stdout"}, func() error { return nil }, nil
	}
	file, err := os.Create(f.jsonl)
	if err != nil {
		return nil, nil, fmt.Errorf("creating the JSON lines file: %w", err)
	}
	closeFile := func() error {
		if err := file.Close(); err != nil {
			return fmt.Errorf("closing %s: %w", f.jsonl, err)
		}
		return nil
	}
	return &jsonlWriter{w: file, name: f.jsonl}, closeFile, nil
}

// getter fetches a list of URLs with one polite Transport.
type getter struct {
	flags  *getFlags
	client *http.Client
	out    bodySink
	lines  *jsonlWriter // nil without -jsonl
	e      *env
	tally  *getTally
}

// newGetter returns a getter that fetches with the Transport f asks for,
// remembering in mem (if not nil), writes bodies to out and JSON lines to
// lines (if not nil).
func newGetter(f *getFlags, out bodySink, lines *jsonlWriter, mem *polite.FileMemory, e *env) *getter {
	t := new(getTally)
	next := http.DefaultTransport.(*http.Transport).Clone()
	// Keep a connection for each worker that may be busy with one host,
	// rather than net/http's 2, so that polite's pace is not spent
	// opening connections.
	next.MaxIdleConnsPerHost = f.workers
	next.MaxIdleConns = max(next.MaxIdleConns, 2*f.workers)
	opts := append(f.transport.options(), polite.WithHooks(t.hooks()))
	if mem != nil {
		opts = append(opts, polite.WithMemory(mem))
	}
	return &getter{
		flags:  f,
		client: &http.Client{Transport: polite.New(wireTimer{next: next}, opts...)},
		out:    out,
		lines:  lines,
		e:      e,
		tally:  t,
	}
}

// run fetches urls with the flags' workers and returns the summary. It
// returns when every URL is done, or soon after ctx is cancelled: no URL
// is started after that, and those in flight are cancelled.
func (g *getter) run(ctx context.Context, urls []string) getSummary {
	start := time.Now()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sched := newGetScheduler(urls, g.flags.workers)
	bar := newGetProgress(g.e.stderr, len(urls), g.tally.throttled.Load, g.client.Transport.(*polite.Transport).Status)
	var wg sync.WaitGroup
	for {
		j, ok := sched.take(runCtx)
		if !ok {
			break
		}
		wg.Go(func() {
			rec := newGetRecord(sched, j)
			res, waited := g.fetch(runCtx, j.url, rec)
			sched.release(j)
			g.tally.add(res, waited)
			if g.lines != nil {
				if err := g.lines.write(res); err != nil {
					cancel(err)
				}
			}
			bar.increment()
		})
	}
	wg.Wait()
	g.client.CloseIdleConnections()
	bar.finish()
	sum := g.tally.summary(len(urls), time.Since(start))
	sum.interrupted = ctx.Err() != nil && (sum.done < sum.total || sum.canceled > 0)
	if cause := context.Cause(runCtx); ctx.Err() == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		sum.fault = cause
	}
	return sum
}
