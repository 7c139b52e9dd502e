package main

import (
	"fmt"
	"io"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// getProgress is polite get's progress bar: URLs done of the total, their
// rate, the time left and the throttles so far. mpb draws it only when
// its output is a terminal; elsewhere it draws nothing.
type getProgress struct {
	p   *mpb.Progress
	bar *mpb.Bar
}

// newGetProgress returns a progress bar of total URLs on w; throttled
// returns the throttles so far.
func newGetProgress(w io.Writer, total int, throttled func() int64) *getProgress {
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
	return &getProgress{p: p, bar: bar}
}

// increment counts one URL done.
func (p *getProgress) increment() {
	p.bar.Increment()
}

// finish ends the bar, complete or not, and waits until it is drawn.
func (p *getProgress) finish() {
	p.bar.Abort(false)
	p.p.Wait()
}
