package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// A progress shows the demo's progress on a terminal: one bar per scenario
// advancing with the run's time, with what each client has had accepted
// and refused so far. On anything else it draws nothing and, at the end,
// prints one plain line per scenario.
type progress struct {
	w      io.Writer
	p      *mpb.Progress // nil when w is not a terminal
	bars   []*mpb.Bar
	groups [][]*demoRun // each scenario's runs, in the order of clientNames
	origin time.Time
	d      time.Duration
}

// newProgress starts showing the progress of groups, the runs of each
// scenario, over a run of length d from origin, on w.
func newProgress(w io.Writer, groups [][]*demoRun, origin time.Time, d time.Duration) *progress {
	pr := &progress{w: w, groups: groups, origin: origin, d: d}
	cw := cupwriter.New(w, false)
	if !cw.IsTerminal() {
		return pr
	}
	pr.p = mpb.New(mpb.WithConsoleWriter(cw), mpb.WithRefreshRate(binWidth*2))
	for _, runs := range groups {
		bar := pr.p.AddBar(d.Milliseconds(),
			mpb.BarWidth(12),
			mpb.PrependDecorators(
				decor.Name(runs[0].sc.name, decor.WC{W: 7, C: decor.DindentRight}),
				decor.Any(func(s decor.Statistics) string {
					return fmt.Sprintf("%2d/%ds", s.Current/1000, d/time.Second)
				}, decor.WC{W: 7}),
			),
			mpb.AppendDecorators(decor.Any(func(decor.Statistics) string {
				return liveCounts(runs)
			})),
		)
		pr.bars = append(pr.bars, bar)
	}
	return pr
}

// tick moves the bars to now.
func (pr *progress) tick(now time.Time) {
	elapsed := min(max(now.Sub(pr.origin), 0), pr.d)
	for _, b := range pr.bars {
		b.SetCurrent(elapsed.Milliseconds())
	}
}

// finish completes the bars, or drops them if the run was interrupted, and
// waits until they are drawn. Without a terminal it prints one line per
// scenario of a run that completed.
func (pr *progress) finish(interrupted bool) {
	if pr.p == nil {
		if interrupted {
			return
		}
		for _, runs := range pr.groups {
			var parts []string
			for _, r := range runs {
				c := r.srv.tally.totals()
				parts = append(parts, fmt.Sprintf("%s %d accepted, %d refused", r.client, c.accepted, c.rejected+c.failed))
			}
			fmt.Fprintf(pr.w, "%-7s done: %s\n", runs[0].sc.name, strings.Join(parts, "; "))
		}
		return
	}
	for _, b := range pr.bars {
		if interrupted {
			b.Abort(false)
		} else {
			b.SetCurrent(pr.d.Milliseconds())
		}
	}
	pr.p.Wait()
}

// liveCounts says what each of runs has had accepted (✓) and refused (✗,
// 429s and 503s) so far.
func liveCounts(runs []*demoRun) string {
	var b strings.Builder
	for i, r := range runs {
		if i > 0 {
			b.WriteString("  ")
		}
		c := r.srv.tally.totals()
		fmt.Fprintf(&b, "%s %d✓ %d✗", r.client, c.accepted, c.rejected+c.failed)
	}
	return b.String()
}
