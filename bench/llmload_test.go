package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite/internal/llmfake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runFake runs client c against a fresh fake of dialect d in process, in
// fake time, each request delayed by up to jitter on its way: the suite's
// copy of runLoopback. Fleet clients need Redis, which a bubble cannot
// reach: they are not run here.
func runFake(t *testing.T, d llmDialect, c llmClient, cfg llmConfig, jitter time.Duration) llmResult {
	t.Helper()
	require.False(t, c.fleet, "a fleet needs Redis, out of a bubble's reach")
	var r llmResult
	synctest.Test(t, func(t *testing.T) {
		api := d.newAPI(cfg.period)
		rt := c.build(newInProcess(api, jitter, cfg.seed), llmClientConfig{dialect: d, period: cfg.period, fleet: cfg.fleet, cleanup: func(func()) {}})
		rec := runLLM(api, d, &http.Client{Transport: rt}, "http://llm.test", cfg)
		r = summarizeLLM(d, c.name, cfg, rec)
	})
	return r
}

// fakeConfig is the fake-time runs' configuration: the bench's defaults
// at the real scale, a period of a minute, 4 minutes.
var fakeConfig = llmConfig{period: time.Minute, duration: 4 * time.Minute, workers: 64, deadline: 2 * time.Minute, fleet: 4, tooLarge: true, seed: 1}

// loopbackJitter is the jitter of the fake-time copy of the loopback
// bench: requests sent at once reach the server up to a millisecond apart,
// in another order, as on loopback on a busy 2-core machine: polite-cost
// must not count a request that a later one overtook on its way as
// counted by the server (it did, and was refused 3-5% of the time).
const loopbackJitter = time.Millisecond

// scaledDown reports that the fake-time runs of the LLM bench run scaled
// down: under the race detector, which slows them tenfold, and in short
// mode (go test -short, the quick tier). CI runs them in full without the
// race detector, in its LLM bench step.
func scaledDown() bool { return raceDetector || testing.Short() }

// The LLM bench in fake time, every dialect × every client but the fleet
// on Redis, requests reordered on their way as on loopback: the table the
// loopback bench prints, predicted (logged). The oracle uses the whole
// token quota, never refused, each wait within its FIFO bound; the
// cookbook's rule (no refund) about 0.78 of it where the server gives back
// the unused max_tokens (OpenAI), less where max_tokens is charged to a
// quota of its own (Anthropic's output tokens), all of it where the server
// gives nothing back (Azure). polite-cost, reordered as on loopback,
// meets the goals but the FIFO bound, which TestLLMCostInOrder
// holds it to: ≥ 0.95 of the token quota, ≤ 1% of attempts refused, no
// call failed, big requests at ≥ 0.9 of their share, none too large sent.
//
// Under the race detector, which slows these runs tenfold (a minute in
// all), and in short mode, only OpenAI's dialect runs, and only the
// clients the test judges; CI runs the whole table without the race
// detector, in its LLM bench step.
func TestLLMBenchInFakeTime(t *testing.T) {
	var results []llmResult
	for _, d := range llmDialects() {
		if scaledDown() && d.name != llmfake.OpenAI {
			continue
		}
		for _, c := range llmClients() {
			if c.fleet || scaledDown() && (c.name == "polite" || c.name == "polite-cost-alone") {
				continue
			}
			t.Run(d.name+"/"+c.name, func(t *testing.T) {
				r := runFake(t, d, c, fakeConfig, loopbackJitter)
				results = append(results, r)
				require.Empty(t, r.Err)
				require.Positive(t, r.TooLargeDrawn, "the mix draws requests too large")
				switch c.name {
				case "oracle":
					assert.GreaterOrEqual(t, r.Use, 0.95, "token quota used")
					assert.Zero(t, r.Refusals)
					assert.Zero(t, r.Errors)
					assert.GreaterOrEqual(t, r.BigShare, 0.9)
					assert.LessOrEqual(t, r.FIFOExcess, time.Duration(0), "every wait within its FIFO bound")
					assert.Zero(t, r.TooLargeSent)
					assert.Equal(t, r.TooLargeDrawn, r.TooLargeTyped)
				case "cookbook":
					// Azure's cookbook is its oracle but full at the start,
					// and may run a request's charge ahead of the server:
					// see newBucketPacer.
					assert.LessOrEqual(t, r.Refused, 0.01)
					assert.Zero(t, r.TooLargeSent)
					switch d.name {
					case llmfake.OpenAI:
						assert.InDelta(t, 0.78, r.Use, 0.04, "the bill's share of the estimate")
					case llmfake.Anthropic:
						assert.Less(t, r.Use, 0.5, "max_tokens charged to the output quota, and kept")
					case llmfake.Azure:
						assert.GreaterOrEqual(t, r.Use, 0.95, "Azure keeps the charge: nothing to give back")
					}
				case "polite-cost":
					assert.GreaterOrEqual(t, r.Use, 0.95, "token quota used")
					assert.LessOrEqual(t, r.Refused, 0.01, "attempts refused")
					assert.Zero(t, r.Errors, "calls failed in their callers' hands")
					assert.GreaterOrEqual(t, r.BigShare, 0.9, "big requests' share")
					assert.Equal(t, r.TooLargeDrawn, r.TooLargeTyped, "too large: a typed error")
					assert.Zero(t, r.TooLargeSent, "too large: none sent")
				}
			})
		}
	}
	var b strings.Builder
	writeLLMTable(&b, results, fakeConfig)
	t.Logf("in fake time, requests reordered by up to %v:\n%s", loopbackJitter, b.String())
}

// The loopback bench as the docs run it, the fake's minute scaled to 10 s
// (`go run ./bench -llm -period 10s -duration 40s`), in fake time over 4
// seeds: polite-cost uses the token quota there too. Its answers take 33 ms
// and 1.7 ms an output token, up to 7 s, and a key's controller read those
// far above its base as a server holding requests past its limit, and the
// rounds of them as a queue: on Anthropic's dialect, whose answers are the
// longest, it used 0.72, 0.79, 0.91 and 1.04 of the quota with nothing
// refused (0.66 to 1.02 on loopback), until the server's statement of its
// quota told the controller that its round trips are its own work. Under
// the race detector and in short mode, Anthropic's dialect alone; in short
// mode, its first seed alone.
func TestLLMBenchScaledInFakeTime(t *testing.T) {
	c := find(t, llmClients(), llmClientName, "polite-cost")
	seeds := uint64(4)
	if testing.Short() {
		seeds = 1
	}
	for _, d := range llmDialects() {
		if scaledDown() && d.name != llmfake.Anthropic {
			continue // the dialect whose answers are the longest
		}
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", d.name, seed), func(t *testing.T) {
				cfg := llmConfig{period: 10 * time.Second, duration: 40 * time.Second, workers: 64, deadline: 20 * time.Second, fleet: 4, tooLarge: true, seed: seed}
				r := runFake(t, d, c, cfg, loopbackJitter)
				require.Empty(t, r.Err)
				t.Logf("use %.3f, refused %.1f%%, %d calls failed in their callers' hands", r.Use, 100*r.Refused, r.Errors)
				assert.GreaterOrEqual(t, r.Use, 0.95, "token quota used")
				assert.LessOrEqual(t, r.Refused, 0.01, "attempts refused")
				assert.Zero(t, r.Errors, "calls failed in their callers' hands")
			})
		}
	}
}

// In order (no jitter), polite-cost meets the numbers on every
// dialect: at least 0.95 of the token quota, at most 1% refused, no call
// failed, big requests at 0.9 of their share or more, every wait within
// its FIFO bound, every request too large failed unsent with a
// *polite.CostError, but one on Anthropic's: its body (1.6 MB) is larger
// than an Estimator is given (polite.MaxEstimateBody), so politecost's
// estimate, from the Content-Length, has no model to scope the key by,
// and the key of the host alone knows no limit until that first one is
// refused.
//
// Under the race detector and in short mode only OpenAI's dialect runs
// (see TestLLMBenchInFakeTime).
func TestLLMCostInOrder(t *testing.T) {
	c := find(t, llmClients(), llmClientName, "polite-cost")
	for _, d := range llmDialects() {
		if scaledDown() && d.name != llmfake.OpenAI {
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			r := runFake(t, d, c, fakeConfig, 0)
			t.Logf("%.3f of the token quota, %s refused, %d errors, big share %.2f, FIFO excess %v, too large sent %d of %d",
				r.Use, percent(r.Refused), r.Errors, r.BigShare, r.FIFOExcess, r.TooLargeSent, r.TooLargeDrawn)
			assert.GreaterOrEqual(t, r.Use, 0.95, "token quota used")
			assert.LessOrEqual(t, r.Refused, 0.01, "attempts refused")
			assert.Zero(t, r.Errors, "calls failed in their callers' hands")
			assert.GreaterOrEqual(t, r.BigShare, 0.9, "big requests' share")
			assert.LessOrEqual(t, r.FIFOExcess, time.Duration(0), "every wait within its FIFO bound")
			assert.Equal(t, r.TooLargeDrawn, r.TooLargeTyped, "too large: a typed error")
			assert.Zero(t, r.TooLargeSent, "too large: none sent")
		})
	}
}
