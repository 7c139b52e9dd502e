package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/politehttp/polite/politestatus"
)

// topView is one frame: a status page as a table, a head above it.
type topView struct {
	addr   string // the page's URL as shown
	search string // -q
	every  time.Duration
	page   *politestatus.Page // nil before the first page read
	// err is why the last read failed, at failedAt; nil if it did not.
	err      error
	failedAt time.Time
	// width and height are the screen's, 0 when not known: lines are cut
	// at width, and keys that do not fit height are left out.
	width, height int
	loc           *time.Location
}

// topColumns are the names of the table's columns.
var topColumns = []string{"KEY", "STATE", "RATE/S", "LIMIT/S", "WAITING", "CALLS", "SENT", "REFUSED", "FAILED"}

// topGap is what stands between two columns.
const topGap = "  "

// topLeft are the columns aligned left; the others, numbers, align right.
var topLeft = map[int]bool{0: true, 1: true, 3: true, 4: true}

// lines returns the frame's lines.
func (v *topView) lines() []string {
	title := "polite top  " + v.addr
	if v.every > 0 {
		title += "  every " + v.every.String()
	}
	if v.page != nil {
		title += "  " + v.page.Time.In(v.loc).Format("15:04:05")
	}
	head := []string{title}
	if v.err != nil {
		head = append(head, fmt.Sprintf("error at %s: %v; trying again", v.failedAt.In(v.loc).Format("15:04:05"), v.err))
	}
	if v.page == nil {
		return v.cut(head)
	}
	p := v.page
	rows := make([][]string, len(p.Top))
	for i := range p.Top {
		rows[i] = topRow(&p.Top[i])
	}
	// Keys go in while they fit the height, each its row and its reason.
	shown := len(p.Top)
	if v.height > 0 {
		// The head, the counts, a blank line, the columns' names, and a
		// last line left empty so that the screen does not scroll.
		room := v.height - len(head) - 3 - 1
		used := 0
		for i := range p.Top {
			need := 1
			if p.Top[i].Reason != "" {
				need++
			}
			if used+need > room {
				shown = i
				break
			}
			used += need
		}
	}
	rows = rows[:shown]

	counts := fmt.Sprintf("%d keys held", p.Keys)
	if p.Keys == 1 {
		counts = "1 key held"
	}
	if v.search != "" {
		counts += fmt.Sprintf(", %d match %q", p.Matched, v.search)
	}
	counts += fmt.Sprintf(", %d shown", shown)
	if n := len(p.Totals); n > 0 {
		s := p.Totals[n-1]
		counts += fmt.Sprintf("   last %.1f s: %d sent, %d refused, %d failed", s.Seconds, s.Sent, s.Refused, s.Failed)
	} else {
		counts += "   last second: not sampled yet (the next read will tell)"
	}
	out := append(head, counts, "")
	if len(p.Top) == 0 {
		if v.search != "" {
			out = append(out, fmt.Sprintf("no key's name holds %q", v.search))
		} else {
			out = append(out, "no key yet: the Transport has made no call")
		}
		return v.cut(out)
	}

	widths := make([]int, len(topColumns))
	for c, name := range topColumns {
		widths[c] = len(name)
	}
	for _, r := range rows {
		for c, cell := range r {
			widths[c] = max(widths[c], utf8.RuneCountInString(cell))
		}
	}
	// A long key gives way first, down to a dozen characters, so that the
	// figures keep to the screen.
	if v.width > 0 {
		total := len(topGap) * (len(widths) - 1)
		for _, w := range widths {
			total += w
		}
		if over := total - v.width; over > 0 {
			widths[0] = max(min(widths[0], 12), widths[0]-over)
		}
	}
	out = append(out, topFormat(topColumns, widths))
	for i, r := range rows {
		r[0] = truncate(r[0], widths[0])
		out = append(out, topFormat(r, widths))
		if reason := p.Top[i].Reason; reason != "" {
			out = append(out, "  "+reason)
		}
	}
	return v.cut(out)
}

// cut cuts each line at the screen's width, if known.
func (v *topView) cut(lines []string) []string {
	if v.width <= 0 {
		return lines
	}
	for i, l := range lines {
		lines[i] = truncate(l, v.width)
	}
	return lines
}

// topRow returns the cells of k's row.
func topRow(k *politestatus.Key) []string {
	limit := "-"
	if k.Limit > 0 {
		limit = topRate(k.Limit)
		if k.LimitSource != "" {
			limit += " " + k.LimitSource
		}
	}
	rate := "-"
	if k.Rate > 0 {
		rate = topRate(k.Rate)
	}
	return []string{
		k.Key, k.State, rate, limit, topWaiting(k.Waiting), strconv.Itoa(k.Calls),
		strconv.Itoa(k.LastMinute.Sent), strconv.Itoa(k.LastMinute.Refused), strconv.Itoa(k.LastMinute.Failed),
	}
}

// topFormat writes a row's cells in columns of widths.
func topFormat(cells []string, widths []int) string {
	var b strings.Builder
	for c, cell := range cells {
		if c > 0 {
			b.WriteString(topGap)
		}
		pad := strings.Repeat(" ", max(0, widths[c]-utf8.RuneCountInString(cell)))
		if topLeft[c] {
			if c == len(cells)-1 {
				pad = ""
			}
			b.WriteString(cell + pad)
		} else {
			b.WriteString(pad + cell)
		}
	}
	return b.String()
}

// topWaiting writes the calls that wait, by priority, highest first: "2
// interactive, 340 batch"; "-" when none do.
func topWaiting(ws []politestatus.Waiting) string {
	var parts []string
	for _, w := range ws {
		if w.Calls > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", w.Calls, w.Priority))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// topRate writes a rate a second with three significant digits or so.
func topRate(r float64) string {
	switch {
	case r >= 100:
		return strconv.FormatFloat(r, 'f', 0, 64)
	case r >= 10:
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return strconv.FormatFloat(r, 'f', 2, 64)
}

// truncate cuts s to width characters at most, its last one "…" if it
// was cut.
func truncate(s string, width int) string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}
