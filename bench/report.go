package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// checked reports whether -check judges the rows of client: polite,
// polite restarted with memory, and a fleet of polite processes with the
// defaults.
func checked(client string) bool {
	switch client {
	case "polite", "polite-memory", "polite-fleet":
		return true
	}
	return false
}

// The -check thresholds for the polite rows.
const (
	minUtilization     = 0.7
	maxRejected        = 0.05
	oracleShare        = 0.6 // of the oracle's utilization in the same run, where that is under minUtilization
	tableNoteMaxLength = 80
)

// writeTable writes results as a markdown table, after a line stating the
// run's parameters.
func writeTable(w io.Writer, results []result, cfg runConfig) {
	fmt.Fprintf(w, "%v per run, %d workers, L = %g requests/s\n\n", cfg.duration, cfg.workers, cfg.limit)
	rows := [][]string{{"server", "client", "utilization", "rejected", "attempts/call", "p50", "p99", "p99 ok", "calls", "failed", "local/s", "timed out", "note"}}
	blank := func(r result, why string) []string {
		return []string{r.Server, r.Client, "", "", "", "", "", "", "", "", "", "", note(why)}
	}
	for _, r := range results {
		switch {
		case r.Skipped != "":
			rows = append(rows, blank(r, "skipped: "+r.Skipped))
		case r.Err != "":
			rows = append(rows, blank(r, "error: "+r.Err))
		default:
			rows = append(rows, []string{
				r.Server, r.Client,
				fmt.Sprintf("%.2f", r.Utilization),
				percent(r.Rejected),
				fmt.Sprintf("%.2f", r.AttemptsPerCall),
				formatDuration(r.P50), formatDuration(r.P99), formatDuration(r.P99OK),
				strconv.Itoa(r.Calls), strconv.Itoa(r.Failed),
				perSecondCell(r.LocalPerSecond), strconv.Itoa(r.TimedOut), firstSecondNote(r),
			})
		}
	}
	writeMarkdown(w, rows, func(i int) bool { return i >= 2 && i <= 11 })
}

// writeMarkdown writes rows, the first the header, as a markdown table,
// each cell padded to its column's width, the columns numeric tells
// aligned right.
func writeMarkdown(w io.Writer, rows [][]string, numeric func(int) bool) {
	widths := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	for i, row := range rows {
		writeRow(w, row, widths, numeric)
		if i == 0 {
			rule := make([]string, len(row))
			for j, n := range widths {
				rule[j] = strings.Repeat("-", n)
				if numeric(j) {
					rule[j] = rule[j][:n-1] + ":"
				}
			}
			writeRow(w, rule, widths, numeric)
		}
	}
}

// writeRow writes one table row, padding each cell to its column's width.
func writeRow(w io.Writer, row []string, widths []int, numeric func(int) bool) {
	var b strings.Builder
	b.WriteString("|")
	for i, cell := range row {
		pad := strings.Repeat(" ", widths[i]-len([]rune(cell)))
		if numeric(i) {
			b.WriteString(" " + pad + cell + " |")
		} else {
			b.WriteString(" " + cell + pad + " |")
		}
	}
	fmt.Fprintln(w, b.String())
}

// note returns s made fit for a table cell: one line, no pipes, bounded.
func note(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "|", "/")), " ")
	if r := []rune(s); len(r) > tableNoteMaxLength {
		s = string(r[:tableNoteMaxLength-1]) + "…"
	}
	return s
}

// percent formats a fraction as a percentage.
func percent(f float64) string {
	if f > 0 && f < 0.001 {
		return "<0.1%"
	}
	return fmt.Sprintf("%.1f%%", 100*f)
}

// perSecondCell formats a rate of calls per second for the table: 0 as
// "0", a rate under 0.1 with two significant digits.
func perSecondCell(f float64) string {
	switch {
	case f == 0:
		return "0"
	case f < 0.1:
		return fmt.Sprintf("%.2g", f)
	case f < 100:
		return fmt.Sprintf("%.1f", f)
	default:
		return fmt.Sprintf("%.0f", f)
	}
}

// formatDuration formats d with three significant digits or so.
func formatDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

// writeJSON writes the run's parameters and results to path.
func writeJSON(path string, results []result, cfg runConfig) error {
	out := struct {
		Duration time.Duration `json:"duration_ns"`
		Workers  int           `json:"workers"`
		Limit    float64       `json:"limit"`
		Results  []result      `json:"results"`
	}{cfg.duration, cfg.workers, cfg.limit, results}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// failures returns a line for each polite row that fails -check: a run
// that failed, utilization below minUtilization (or below oracleShare of
// the oracle's in the same run, if that is less), rejected above
// maxRejected, or, on a server in steady (whose limit neither changes nor
// goes down), any call failed locally: with 16 callers and 10-s deadlines,
// any rate above 1.6 a second needs no refusal. Skipped rows pass.
func failures(results []result, steady map[string]bool) []string {
	oracle := map[string]float64{} // the oracle's utilization, by server, where it ran
	for _, r := range results {
		if r.Client == "oracle" && r.Skipped == "" && r.Err == "" {
			oracle[r.Server] = r.Utilization
		}
	}
	var bad []string
	for _, r := range results {
		if !checked(r.Client) || r.Skipped != "" {
			continue
		}
		least := minUtilization
		if u, ok := oracle[r.Server]; ok {
			// A server that refuses even the oracle (one with no burst,
			// against requests that arrive with jitter) asks less: what
			// polite gets below 2% refused there is set by the machine's
			// jitter (0.55-0.73 of the limit on the burst-1 server on a
			// quiet machine, 0.40 on a busy CI one, the oracle 0.59 on
			// both); a collapse (0.01) is still caught.
			least = min(least, u*oracleShare)
		}
		switch {
		case r.Err != "":
			bad = append(bad, fmt.Sprintf("%s × %s: run failed: %s", r.Server, r.Client, r.Err))
		case r.Utilization < least || r.Rejected > maxRejected:
			bad = append(bad, fmt.Sprintf("%s × %s: utilization %.2f (min %.2f), rejected %s (max %s)",
				r.Server, r.Client, r.Utilization, least, percent(r.Rejected), percent(maxRejected)))
		case steady[r.Server] && r.Local > 0:
			bad = append(bad, fmt.Sprintf("%s × %s: %d calls failed locally (max 0 on a steady server)",
				r.Server, r.Client, r.Local))
		}
	}
	return bad
}

// steadyServers returns the names of the servers of srvs whose limit is
// the same for the whole run and that never go down.
func steadyServers(srvs []server, limit float64) map[string]bool {
	steady := map[string]bool{}
	for _, s := range srvs {
		p := s.profile(limit)
		steady[s.name] = !p.outage && p.rates[0] == p.rates[1] && p.rates[1] == p.rates[2]
	}
	return steady
}

// firstSecondNote returns the note of a client that restarts with memory:
// the utilization of its first second; and of one that joins a fleet:
// what the process that joined sent, and had refused.
func firstSecondNote(r result) string {
	switch {
	case r.Joined != nil:
		j := r.Joined
		ok, refused := 0, 0
		for _, b := range r.Timeline[min(int(j.At/timelineBin), len(r.Timeline)):] {
			ok, refused = ok+b.OK, refused+b.Refused
		}
		return fmt.Sprintf("joined at %v: %d of %d refused (fleet: %d of %d)", j.At, j.Refused.Load(), j.Attempts.Load(), refused, ok+refused)
	case r.FirstSecond == 0:
		return ""
	}
	return fmt.Sprintf("first second %.2f", r.FirstSecond)
}
