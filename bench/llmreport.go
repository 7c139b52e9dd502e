package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/politehttp/polite/internal/llmfake"
)

// The LLM bench's -check thresholds for the polite-cost rows: gross
// breakage, not the goals (0.95 of the quota, 1% refused, no call failed),
// so that a noisy machine does not turn CI red. CI runs the bench in
// scaled time (-period 10s), whose Retry-After is coarser, and saw up to
// 0.9% refused there; the fake-time tests (TestLLMBenchInFakeTime,
// TestLLMCostInOrder) hold polite-cost to the goals.
const (
	llmCheckClient  = "polite-cost"
	llmMinUse       = 0.85
	llmMaxRefused   = 0.10
	llmMaxErrors    = 0.05 // of the calls
	llmTableColumns = 16
)

// writeLLMTable writes results as a markdown table, after a line stating
// the runs' parameters.
func writeLLMTable(w io.Writer, results []llmResult, cfg llmConfig) {
	fmt.Fprintf(w, "%v per run (the first %v left out), period %v, %d workers, deadline %v, %s\n\n",
		cfg.duration, cfg.period, cfg.period, cfg.workers, cfg.deadline, tooLargeNote(cfg.tooLarge))
	rows := [][]string{{"dialect", "client", "token use", "quotas' use", "refused", "refused by", "attempts/call",
		"calls", "failed", "errors/s", "timed out", "p50 ok", "p99 ok", "big share", "FIFO excess", "too large sent", "note"}}
	for _, r := range results {
		switch {
		case r.Skipped != "":
			rows = append(rows, llmBlank(r, "skipped: "+r.Skipped))
		case r.Err != "":
			rows = append(rows, llmBlank(r, "error: "+r.Err))
		default:
			rows = append(rows, []string{
				r.Dialect, r.Client,
				fmt.Sprintf("%.3f", r.Use), quotasCell(r.UseByQuota),
				percent(r.Refused), refusedCell(r.RefusedBy),
				fmt.Sprintf("%.2f", r.AttemptsPerCall),
				strconv.Itoa(r.Calls), strconv.Itoa(r.Failed), perSecondCell(r.ErrorsPerSecond), strconv.Itoa(r.TimedOut),
				formatDuration(r.P50), formatDuration(r.P99),
				fmt.Sprintf("%.2f", r.BigShare), signedDuration(r.FIFOExcess),
				fmt.Sprintf("%d of %d", r.TooLargeSent, r.TooLargeDrawn), "",
			})
		}
	}
	writeMarkdown(w, rows, func(i int) bool { return i >= 2 && i <= 15 && i != 3 && i != 5 })
}

// llmBlank returns the row of a run that was skipped or failed.
func llmBlank(r llmResult, why string) []string {
	row := make([]string, llmTableColumns+1)
	row[0], row[1], row[llmTableColumns] = r.Dialect, r.Client, note(why)
	return row
}

// tooLargeNote says whether the mix held requests too large.
func tooLargeNote(on bool) string {
	if on {
		return "1% of requests larger than the token limit"
	}
	return "no request too large"
}

// quotaAbbrev is how the table names each quota.
var quotaAbbrev = map[string]string{
	llmfake.QuotaRequests: "req", llmfake.QuotaTokens: "tok", llmfake.QuotaInputTokens: "in",
	llmfake.QuotaOutputTokens: "out", llmfake.TooLarge: "too large",
}

// quotaOrder is the order the table lists quotas in.
var quotaOrder = []string{llmfake.QuotaRequests, llmfake.QuotaTokens, llmfake.QuotaInputTokens, llmfake.QuotaOutputTokens, llmfake.TooLarge}

// quotasCell formats each quota's use: "req 0.21 tok 0.99".
func quotasCell(use map[string]float64) string {
	var parts []string
	for _, q := range quotaOrder {
		if u, ok := use[q]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f", quotaAbbrev[q], u))
		}
	}
	return strings.Join(parts, " ")
}

// refusedCell formats the refusals by quota: "tok 12, req 1"; "-" if none.
func refusedCell(by map[string]int) string {
	var parts []string
	for _, q := range quotaOrder {
		if n := by[q]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", quotaAbbrev[q], n))
		}
	}
	for _, q := range slices.Sorted(maps.Keys(by)) { // any other, should the fake gain one
		if _, known := quotaAbbrev[q]; !known && by[q] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", q, by[q]))
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

// signedDuration formats d with its sign: "-0.84s", "+2.10s".
func signedDuration(d time.Duration) string {
	if d < 0 {
		return "-" + formatDuration(-d)
	}
	if d == 0 {
		return "0"
	}
	return "+" + formatDuration(d)
}

// llmTimeline returns r's timeline as one line a bin: the requests
// admitted, the tokens kept (Anthropic's input and output), and the
// refusals by quota.
func llmTimeline(r llmResult, bin time.Duration) string {
	var b strings.Builder
	for i, t := range r.Timeline {
		fmt.Fprintf(&b, "  %7.1fs admitted %3d tokens %7d", (time.Duration(i) * bin).Seconds(), t.Admitted, t.Tokens)
		if t.OutputTokens > 0 {
			fmt.Fprintf(&b, " output %6d", t.OutputTokens)
		}
		if len(t.Refused) > 0 {
			fmt.Fprintf(&b, " refused %s", refusedCell(t.Refused))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// writeLLMJSON writes the runs' parameters and results to path.
func writeLLMJSON(path string, results []llmResult, cfg llmConfig) error {
	out := struct {
		Period   time.Duration `json:"period_ns"`
		Duration time.Duration `json:"duration_ns"`
		Workers  int           `json:"workers"`
		Deadline time.Duration `json:"deadline_ns"`
		Fleet    int           `json:"fleet"`
		TooLarge bool          `json:"too_large"`
		Results  []llmResult   `json:"results"`
	}{cfg.period, cfg.duration, cfg.workers, cfg.deadline, cfg.fleet, cfg.tooLarge, results}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// llmFailures returns a line for each polite-cost row that fails -check: a
// run that failed, a token quota used below llmMinUse, refusals above
// llmMaxRefused, calls failed in their callers' hands above llmMaxErrors,
// or any request too large sent. Skipped rows pass.
func llmFailures(results []llmResult) []string {
	var bad []string
	for _, r := range results {
		if r.Client != llmCheckClient || r.Skipped != "" {
			continue
		}
		name := r.Dialect + " × " + r.Client
		switch {
		case r.Err != "":
			bad = append(bad, fmt.Sprintf("%s: run failed: %s", name, r.Err))
			continue
		case r.Use < llmMinUse || r.Refused > llmMaxRefused:
			bad = append(bad, fmt.Sprintf("%s: %.3f of the token quota used (min %.2f), %s refused (max %s)",
				name, r.Use, llmMinUse, percent(r.Refused), percent(llmMaxRefused)))
		}
		if float64(r.Errors) > llmMaxErrors*float64(r.Calls) {
			bad = append(bad, fmt.Sprintf("%s: %d of %d calls failed in their callers' hands (max %s)", name, r.Errors, r.Calls, percent(llmMaxErrors)))
		}
		if r.TooLargeSent > 0 {
			bad = append(bad, fmt.Sprintf("%s: %d requests too large sent (max 0)", name, r.TooLargeSent))
		}
	}
	return bad
}
