package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

const demoUsage = `Usage: polite demo [flags]

Shows what polite does. It starts local servers that limit their clients
to 100 requests a second the way real APIs do:

  bucket  a token bucket that refuses with 429 and Retry-After
  window  fixed one-second windows announced in X-RateLimit-* headers,
          refusing with 429 without Retry-After, as GitHub does
  drop    a token bucket whose limit drops to a quarter, then rises again
  outage  a token bucket that answers 503 to everything for a third of the run

and drives three clients through each at the same time, every client with
a server of its own and 8 workers sending GET requests as fast as they are
let: a plain http.Client; the oracle, told the true limit, which paces at
it; and polite with its defaults, told nothing. It shows their progress,
prints what each server accepted and refused, and draws a chart of the
requests accepted every 100 ms against the limit (-o).

Everything runs on 127.0.0.1; nothing goes out to the network.
`

// demoLimit is the limit L of the demo's servers, in requests a second.
const demoLimit = 100.0

// demoFlags are polite demo's flags.
type demoFlags struct {
	duration time.Duration
	out      string
	json     bool
	fleet    int
	check    bool
}

// runDemo runs polite demo.
func runDemo(ctx context.Context, args []string, e *env) int {
	var f demoFlags
	fs := newFlagSet("demo", demoUsage, e)
	fs.DurationVar(&f.duration, "duration", 24*time.Second, "how long the clients run (at least 1s; all the scenarios run at once)")
	fs.StringVar(&f.out, "o", "demo.svg", `the chart's file, .svg or .png ("" for none)`)
	fs.BoolVar(&f.json, "json", false, "write the results as JSON on stdout instead of a table")
	fs.BoolVar(&f.check, "check", false, fmt.Sprintf("exit 1 unless polite delivered at least %.0f%% of the limit with at most %.0f%% refused on the servers whose limit holds (bucket, window)", 100*checkUtilization, checkRejectedPct))
	fs.IntVar(&f.fleet, "fleet", 0, "run polite as N Transports sharing one quota (polite.WithFleet) through the Redis at REDIS_ADDR, or one in this process (0: one Transport)")
	if code := parseFlags(fs, args, e); code >= 0 {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return usageError(fs, "unexpected arguments %q", fs.Args())
	case f.duration < time.Second || f.duration > time.Hour:
		return usageError(fs, "-duration must be between 1s and 1h, not %v", f.duration)
	case f.fleet < 0 || f.fleet > 64:
		return usageError(fs, "-fleet must be between 0 and 64, not %d", f.fleet)
	}
	format := ""
	if f.out != "" {
		format = strings.ToLower(strings.TrimPrefix(filepath.Ext(f.out), "."))
		if format != "svg" && format != "png" {
			return usageError(fs, "-o %q: the chart's file must end in .svg or .png", f.out)
		}
	}
	if err := demo(ctx, f, format, e); err != nil {
		fmt.Fprintf(e.stderr, "polite demo: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// demo runs the demo f asks for, and writes its chart as format.
func demo(ctx context.Context, f demoFlags, format string, e *env) error {
	var out *pendingFile
	if f.out != "" {
		var err error
		if out, err = createPending(f.out); err != nil {
			return err
		}
		defer out.abort()
	}
	var fl *fleetConfig
	if f.fleet > 0 {
		addr, desc, stop, err := startRedis(ctx, e)
		if err != nil {
			return err
		}
		defer stop()
		fl = &fleetConfig{size: f.fleet, addr: addr, ns: fmt.Sprintf("polite-demo-%d", time.Now().UnixNano())}
		fmt.Fprintf(e.stderr, "polite runs as %d Transports sharing one quota through %s\n", f.fleet, desc)
	}

	// The runs start at a whole second, so that the window server's
	// windows, aligned to Unix seconds, fall on the chart's seconds.
	origin := time.Now().Add(200 * time.Millisecond).Truncate(time.Second).Add(time.Second)
	groups, err := startRuns(origin, f.duration, fl)
	defer func() {
		for _, runs := range groups {
			for _, r := range runs {
				_ = r.close() // closed already, unless an error came first
			}
		}
	}()
	if err != nil {
		return err
	}

	fmt.Fprintf(e.stderr, "polite demo: %d clients × %d scenarios, each client with a local server of its own limiting it to %g requests a second, for %v\n",
		len(clientNames()), len(groups), demoLimit, f.duration)
	interrupted, err := drive(ctx, groups, origin, f.duration, e)
	for _, runs := range groups {
		for _, r := range runs {
			err = errors.Join(err, r.close())
		}
	}
	switch {
	case interrupted:
		return errors.New("interrupted")
	case err != nil:
		return err
	}

	rep := newReport(groups, f, fl, out)
	var chartErr error
	if out != nil {
		chartErr = writeChart(out.f, newChart(groups, f.duration, fl), format)
		if chartErr == nil {
			chartErr = out.commit()
		}
		if chartErr != nil {
			rep.Chart = ""
		}
	}
	if f.json {
		err = rep.writeJSON(e.stdout)
	} else {
		err = rep.writeTable(e.stdout)
	}
	if f.check {
		err = errors.Join(err, rep.check())
	}
	return errors.Join(chartErr, err)
}

// startRuns starts every scenario's server for every client, for a run of
// length d from origin, and returns the runs of each scenario in the order
// of scenarios and clientNames. After an error, the runs it returns are
// the ones started.
func startRuns(origin time.Time, d time.Duration, fl *fleetConfig) ([][]*demoRun, error) {
	var groups [][]*demoRun
	for _, sc := range scenarios(demoLimit) {
		var runs []*demoRun
		for _, name := range clientNames() {
			r, err := newRun(sc, name, origin, d, fl)
			if err != nil {
				return append(groups, runs), err
			}
			runs = append(runs, r)
		}
		groups = append(groups, runs)
	}
	return groups, nil
}

// drive runs every run's workers from origin for d, showing their progress
// on stderr, and reports whether ctx ended the runs early.
func drive(ctx context.Context, groups [][]*demoRun, origin time.Time, d time.Duration, e *env) (interrupted bool, err error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The end is a plain cancel, not a deadline, so that no client gives
	// up early because a wait would pass it.
	stop := time.AfterFunc(time.Until(origin.Add(d)), cancel)
	defer stop.Stop()

	var wg sync.WaitGroup
	for _, runs := range groups {
		for _, r := range runs {
			r.start(runCtx, &wg)
		}
	}
	pr := newProgress(e.stderr, groups, origin, d)
	t := time.NewTicker(binWidth)
	for runCtx.Err() == nil {
		select {
		case now := <-t.C:
			pr.tick(now)
		case <-runCtx.Done():
		}
	}
	t.Stop()
	interrupted = ctx.Err() != nil

	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(drainGrace):
		err = fmt.Errorf("clients still busy %v after the end of the run", drainGrace)
	}
	pr.finish(interrupted)
	return interrupted, err
}

// newReport returns the results of groups, run as f says; fl, if not nil,
// is how polite ran as a fleet, and out is the chart's file, if any.
func newReport(groups [][]*demoRun, f demoFlags, fl *fleetConfig, out *pendingFile) *demoReport {
	rep := &demoReport{
		LimitPerSecond:  demoLimit,
		DurationSeconds: f.duration.Seconds(),
		Workers:         demoWorkers,
		Fleet:           f.fleet,
	}
	if fl != nil {
		rep.FleetNamespace = fl.ns
	}
	if out != nil {
		rep.Chart = out.path
	}
	for _, runs := range groups {
		rep.Scenarios = append(rep.Scenarios, scenarioReport{Name: runs[0].sc.name, Title: runs[0].sc.title})
		for _, r := range runs {
			rep.Results = append(rep.Results, newResult(r, f.duration))
		}
	}
	return rep
}

// newChart returns the chart of groups over a run of length d; fl, if not
// nil, is how polite ran as a fleet.
func newChart(groups [][]*demoRun, d time.Duration, fl *fleetConfig) *chart {
	c := &chart{
		title: "polite demo: requests accepted every 100 ms, against the server's limit",
		subtitle: fmt.Sprintf("Three clients, each with %d workers sending GET requests as fast as they are let, against local servers limiting them to %g a second;\n"+
			"each client has a server of its own, and all ran at once for %v. Refusals are marked where they happened, by how many.", demoWorkers, demoLimit, d),
		bin: binWidth,
		d:   d,
	}
	perBin := binWidth.Seconds()
	for _, runs := range groups {
		sc := runs[0].sc
		p := chartPanel{title: sc.panelTitle() + "\n" + panelCaption(runs, d)}
		for i := range 3 {
			at := time.Duration(i) * d / 3
			p.limit = append(p.limit, xy(at.Seconds(), sc.allowedAt(at, d)*perBin))
		}
		p.limit = append(p.limit, xy(d.Seconds(), sc.allowedAt(d, d)*perBin))
		for _, r := range runs {
			s := chartSeries{client: r.client, label: clientLabel(r.client, fl)}
			for _, c := range r.srv.tally.series() {
				s.accepted = append(s.accepted, float64(c.accepted))
				s.refused = append(s.refused, float64(c.rejected+c.failed))
			}
			p.series = append(p.series, s)
		}
		c.panels = append(c.panels, p)
	}
	return c
}

// panelCaption says, for each of runs, the part of what the limit allowed
// that its server accepted, and the part of its requests refused.
func panelCaption(runs []*demoRun, d time.Duration) string {
	var parts []string
	for _, r := range runs {
		c := r.srv.tally.totals()
		refused := 0.0
		if n := c.sent(); n > 0 {
			refused = 100 * float64(c.rejected+c.failed) / float64(n)
		}
		parts = append(parts, fmt.Sprintf("%s %.0f%% of the limit, %s refused",
			r.client, 100*float64(c.accepted)/r.sc.allowance(d), percent(refused)))
	}
	return strings.Join(parts, "   ·   ")
}

// percent formats a percentage with the digits it needs to be read: 80%,
// 3.2%, 0.4%, <0.1%, 0%.
func percent(v float64) string {
	switch {
	case v == 0:
		return "0%"
	case v < 0.05:
		return "<0.1%"
	case v < 10:
		return fmt.Sprintf("%.1f%%", v)
	}
	return fmt.Sprintf("%.0f%%", v)
}

// clientLabel returns the chart's name for client; fl, if not nil, is how
// polite ran as a fleet.
func clientLabel(client string, fl *fleetConfig) string {
	switch client {
	case clientPlain:
		return "plain http.Client"
	case clientOracle:
		return "oracle (told the limit)"
	case clientPolite:
		if fl != nil {
			return fmt.Sprintf("polite, %d Transports sharing a quota (told nothing)", fl.size)
		}
		return "polite (told nothing)"
	}
	return client
}

// A pendingFile is a file written under a temporary name in its directory,
// and renamed into place once it is complete, so that a failed run never
// leaves half a chart, nor clobbers the last one.
type pendingFile struct {
	path string
	f    *os.File
	done bool
}

// createPending checks that path can be written, and returns a pending
// file for it.
func createPending(path string) (*pendingFile, error) {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("cannot write the chart to %s: no directory %s", path, dir)
	case err != nil:
		// Permission denied, a name too long…: the error says which.
		return nil, fmt.Errorf("cannot write the chart to %s: %w", path, err)
	case !fi.IsDir():
		return nil, fmt.Errorf("cannot write the chart to %s: %s is not a directory", path, dir)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, fmt.Errorf("cannot write the chart to %s: %w", path, err)
	}
	return &pendingFile{path: path, f: f}, nil
}

// commit puts the file in place.
func (p *pendingFile) commit() error {
	p.done = true
	err := errors.Join(p.f.Chmod(0o644), p.f.Close())
	if err == nil {
		err = os.Rename(p.f.Name(), p.path)
	}
	if err != nil {
		_ = os.Remove(p.f.Name())
		return fmt.Errorf("writing the chart to %s: %w", p.path, err)
	}
	return nil
}

// abort removes the file unless it was committed.
func (p *pendingFile) abort() {
	if p.done {
		return
	}
	p.done = true
	_ = p.f.Close()
	_ = os.Remove(p.f.Name())
}
