package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/politehttp/polite/politestatus"
	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// getProgress is polite get's progress bar: URLs done of the total, their
// rate, the time left and the throttles so far, and under it the line that
// says why the host that waits most waits. mpb draws it only when its
// output is a terminal; elsewhere it draws nothing.
type getProgress struct {
	p      *mpb.Progress
	bar    *mpb.Bar
	reason *mpb.Bar // nil when w is not a terminal
}

// newGetProgress returns a progress bar of total URLs on w; throttled
// returns the throttles so far, status the Transport's status page (see
// polite.Transport.Status), read at most once a second while the bar is
// drawn.
func newGetProgress(w io.Writer, total int, throttled func() int64, status func(now time.Time, n int, search string) politestatus.Page) *getProgress {
	p := mpb.New(mpb.WithOutput(w))
	bar := p.AddBar(int64(total),
		mpb.PrependDecorators(
			decor.CountersNoUnit("%d/%d", decor.WCSyncSpaceR),
		),
		mpb.AppendDecorators(
			decor.AverageSpeed(0, "%.1f/s", decor.WCSyncSpace),
			decor.Name(" ETA "),
			decor.AverageETA(decor.ET_STYLE_GO),
			decor.Any(func(decor.Statistics) string {
				return fmt.Sprintf(" %d throttled", throttled())
			}),
		),
	)
	pr := &getProgress{p: p, bar: bar}
	if cupwriter.New(w, false).IsTerminal() {
		// A line of its own, which mpb cuts to the terminal's width.
		r := &getReason{status: status}
		pr.reason = p.New(0, mpb.NopStyle(), mpb.BarFillerTrim(), mpb.PrependDecorators(
			decor.Any(func(decor.Statistics) string { return r.at(time.Now()) }),
		))
	}
	return pr
}

// increment counts one URL done.
func (p *getProgress) increment() {
	p.bar.Increment()
}

// finish ends the bar, complete or not, and waits until it is drawn. The
// reason line goes: it said why a host waited, and nothing waits now.
func (p *getProgress) finish() {
	p.bar.Abort(false)
	if p.reason != nil {
		p.reason.Abort(true)
	}
	p.p.Wait()
}

// getReason is the progress's reason line, read from the Transport's
// status page at most once a second: a read walks every key.
type getReason struct {
	// status returns the Transport's status page at now: the n keys that
	// wait most among those whose name holds search.
	status func(now time.Time, n int, search string) politestatus.Page

	mu   sync.Mutex
	read time.Time // the last read; zero before the first
	line string    // what it said
}

// at returns the reason line at now: the last one read if it is less than
// a second old, or a new one.
func (r *getReason) at(now time.Time) string {
	r.mu.Lock()
	if !r.read.IsZero() && now.Sub(r.read) < time.Second {
		defer r.mu.Unlock()
		return r.line
	}
	r.mu.Unlock()
	line := reasonLine(r.status(now, 1, "")) // not under the lock: it takes the Transport's
	r.mu.Lock()
	defer r.mu.Unlock()
	r.read, r.line = now, line
	return line
}

// reasonLine says why the key that waits most on page waits, and which
// key it is ("api.example.com: paused by the server's Retry-After until
// 12:03:10"); "" if nothing paces it and nothing waits on it.
func reasonLine(page politestatus.Page) string {
	if len(page.Top) == 0 || page.Top[0].Reason == "" {
		return ""
	}
	return page.Top[0].Key + ": " + page.Top[0].Reason
}
