package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/llmfake"
)

// The LLM priority scenario (issue 38): chat and batch on one token quota,
// the fake OpenAI API's (500 requests and 200,000 tokens a period), both
// paced by their costs through one polite Transport with politecost's
// OpenAI(). llmBatchCallers closed-loop callers keep a backlog of batch
// calls (the LLM bench's mix, no request too large, no deadline: a batch
// job has none); a chat call (a small request of the mix) comes every
// chatEvery, with the run's deadline, as a person waits on it. polite
// without priorities, every call at the default one, then with the chat
// calls at PriorityInteractive and the batch ones at PriorityBatch.
const (
	llmBatchCallers = 64
	chatEvery       = 500 * time.Millisecond
	chatSeed        = 2 // the seed of the chat calls' draws; the batch's is the LLM bench's, 1
)

// The LLM priority scenario's defaults: a period of 10 s (the fake's
// minute scaled down, its latencies with it) and 6 periods a run.
const (
	prioritiesLLMPeriod  = 10 * time.Second
	prioritiesLLMPeriods = 6
)

// llmPriorityResult is one run of the LLM priority scenario.
type llmPriorityResult struct {
	client string
	sum    llmResult       // the fake's counts of every call: token use, refusals
	chats  int             // chat calls that ended in the window
	failed int             // of those, the ones not answered 200
	errors int             // of those, the ones failed in the caller's hands (an error instead of an answer)
	waits  []time.Duration // of the chat calls answered 200, from the call to the fake's admission, sorted
	batch  int             // batch calls answered 200 that ended in the window
	err    error
}

// benchPrioritiesLLM runs the LLM priority scenario without and with
// priorities, prints a table, and returns the exit status. period,
// duration and deadline are the command line's; a -period or -duration
// not given takes the scenario's defaults.
func benchPrioritiesLLM(period, duration, deadline time.Duration) int {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["period"] {
		period = prioritiesLLMPeriod
	}
	if !set["duration"] {
		duration = prioritiesLLMPeriods * period
	}
	if period < time.Second || duration <= period || deadline < 0 {
		fail(fmt.Errorf("with -priorities-llm, need -period >= 1s, -duration > -period and -deadline >= 0"))
	}
	d := llmDialects()[0]
	cfg := llmConfig{period: period, duration: duration, workers: llmBatchCallers, deadline: deadline, seed: 1}
	results := withAndWithout([]string{d.name}, "polite-cost", "priorities", func(_ int, prioritized bool, client string) llmPriorityResult {
		r := runPrioritiesLLM(d, prioritized, cfg)
		r.client = client
		return r
	}, func(r llmPriorityResult) (string, error) {
		return fmt.Sprintf("%.3f of the token quota, %d chat calls, %d failed", r.sum.Use, r.chats, r.failed), r.err
	})
	window := (duration - period).Seconds()
	row := func(r llmPriorityResult) ([]string, error) {
		cells := []string{r.client}
		if r.err != nil {
			return cells, r.err
		}
		return append(cells, fmt.Sprintf("%.3f", r.sum.Use), percent(r.sum.Refused), refusedCell(r.sum.RefusedBy),
			strconv.Itoa(r.chats), strconv.Itoa(r.failed), strconv.Itoa(r.errors), quantile(r.waits, 0.5),
			quantile(r.waits, 0.99), quantile(r.waits, 1), fmt.Sprintf("%.2f", float64(r.batch)/window)), nil
	}
	return writeScenario(fmt.Sprintf("%v per run (the first %v left out), the fake %s: %.0f requests and %.0f tokens a period, %d batch callers, a chat call every %v (deadline %v)",
		duration, period, d.name, d.rpm, d.tpm, llmBatchCallers, chatEvery, deadline),
		[]string{"client", "token use", "refused", "refused by", "chat calls", "failed", "in caller's hands", "wait p50", "wait p99", "wait max", "batch/s"},
		func(i int) bool { return i >= 1 && i != 3 }, results, row)
}

// runPrioritiesLLM runs the LLM priority scenario once against a fresh
// fake of d on loopback: prioritized, the chat and batch calls say their
// priorities; otherwise every call has the default one.
func runPrioritiesLLM(d llmDialect, prioritized bool, cfg llmConfig) llmPriorityResult {
	api := d.newAPI(cfg.period)
	base, stopServer, err := serveLLM(api)
	if err != nil {
		return llmPriorityResult{err: err}
	}
	rec := &llmRecorder{}
	api.Decided = rec.hook()
	tr := newTransport(llmBatchCallers + 16)
	hc := &http.Client{Transport: polite.New(tr, dialectOption(llmClientConfig{dialect: d, period: cfg.period}))}
	url := base + d.path

	start := time.Now()
	cs := startCallers(start, cfg.duration)
	defer cs.stop()
	batchCtx, chatCtx := priorityContexts(cs.ctx, prioritized)

	var mu sync.Mutex // guards batchMix, next, calls and chat
	batchMix, chatMix := llmfake.NewMix(cfg.seed, int(d.tpm), false), llmfake.NewMix(chatSeed, int(d.tpm), false)
	next := 0
	var calls []llmCall
	chat := map[int]bool{}
	// one makes a call of draw with ctx and deadline, and records it.
	one := func(ctx context.Context, draw func() llmfake.Draw, isChat bool, deadline time.Duration) {
		mu.Lock()
		next++
		c := llmCall{id: next, draw: draw()}
		chat[c.id] = isChat
		mu.Unlock()
		callLLM(ctx, hc, url, d, deadline, &c)
		c.cut = !c.end.Before(cs.end) || c.err != nil && ctx.Err() != nil
		mu.Lock()
		calls = append(calls, c)
		mu.Unlock()
	}
	cs.loop(cs.ctx, llmBatchCallers, func() { one(batchCtx, batchMix.Next, false, 0) })
	cs.every(chatEvery, func() { one(chatCtx, func() llmfake.Draw { return smallDraw(chatMix) }, true, cfg.deadline) })
	waitErr := cs.wait()
	tr.CloseIdleConnections()
	r := summarizePrioritiesLLM(d, cfg, llmRecord{start: start, calls: calls, decisions: rec.close()}, chat)
	r.err = errors.Join(waitErr, stopServer())
	return r
}

// smallDraw draws from m until a small request comes: a chat call's.
func smallDraw(m *llmfake.Mix) llmfake.Draw {
	for {
		if d := m.Next(); !d.Big {
			return d
		}
	}
}

// summarizePrioritiesLLM computes a row from a run's record, over the
// window from the end of the first period (see summarizeLLM): the fake's
// counts of every call, and the chat calls' and the batch calls' own.
func summarizePrioritiesLLM(d llmDialect, cfg llmConfig, rec llmRecord, chat map[int]bool) llmPriorityResult {
	r := llmPriorityResult{sum: summarizeLLM(d, "polite-cost", cfg, rec)}
	from, to := rec.start.Add(cfg.period), rec.start.Add(cfg.duration)
	admitted := map[int]time.Time{}
	for _, dec := range rec.decisions {
		if dec.refused == "" {
			admitted[dec.id] = dec.at
		}
	}
	for _, c := range rec.calls {
		if c.cut || c.end.Before(from) || !c.end.Before(to) {
			continue
		}
		if !chat[c.id] {
			if c.status == http.StatusOK {
				r.batch++
			}
			continue
		}
		r.chats++
		switch {
		case c.err != nil:
			r.failed++
			r.errors++
		case c.status != http.StatusOK:
			r.failed++
		default:
			if at, ok := admitted[c.id]; ok {
				r.waits = append(r.waits, at.Sub(c.start))
			}
		}
	}
	slices.Sort(r.waits)
	return r
}
