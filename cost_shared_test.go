package polite_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/llmfake"
)

// sharedQuotaRun is what procs processes saw that shared one token quota
// unseen (see runSharedTokenQuota).
type sharedQuotaRun struct {
	answered          [][6]int // per process, the calls answered that began in each 5 s of the run
	calls, failed     int
	first             error // the first call failed in its caller's hands
	attempts, refused int
	waits             []time.Duration // every call's, sorted
}

// runSharedTokenQuota runs procs Transports in a bubble, none told of the
// others, 16 callers among them (each call with a 10-s deadline), against
// one fake OpenAI API whose token quota refills 2,000 a second (its
// minute scaled to a second; each request asks 200 tokens and uses 150;
// 100 ms to answer), for 30 s. With costs, each Transport paces the token
// quota (WithCost, WithUsage); without, requests only.
func runSharedTokenQuota(t *testing.T, procs int, costs bool, later time.Duration) sharedQuotaRun {
	const callers, length = 16, 30 * time.Second
	// 200 characters, 50 tokens, and 150 of max_tokens asked; 100 used.
	body := `{"model":"m","messages":[{"content":"` + strings.Repeat("x", 200) + `"}],"max_tokens":150,"output_tokens":100}`
	var r sharedQuotaRun
	synctest.Test(t, func(t *testing.T) {
		srv := llmfake.NewOpenAI(1e6, 2000, llmfake.WithPeriod(time.Second))
		srv.Latency = func(int) time.Duration { return 100 * time.Millisecond }
		start := time.Now()
		end := start.Add(length)
		r.answered = make([][6]int, procs)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for p := range procs {
			var opts []polite.Option
			if costs {
				opts = append(opts, polite.WithCost(chatCost), polite.WithUsage(chatUsage))
			}
			tr := polite.New(&handlerNext{h: srv}, opts...)
			for c := range callers / procs {
				wg.Go(func() {
					time.Sleep(time.Duration(p)*later + time.Duration(p*callers/procs+c)*time.Millisecond)
					for time.Now().Before(end) {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://llm.test/v1/chat/completions", strings.NewReader(body))
						at := time.Now()
						resp, err := tr.RoundTrip(req)
						mu.Lock()
						r.calls++
						r.waits = append(r.waits, time.Since(at))
						if err != nil {
							r.failed++
							if r.first == nil {
								r.first = fmt.Errorf("process %d, caller %d, at %v: %w", p, c, at.Sub(start), err)
							}
						} else {
							r.answered[p][min(int(at.Sub(start)/(5*time.Second)), 5)]++
						}
						mu.Unlock()
						if err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							_ = resp.Body.Close()
						}
						cancel()
					}
				})
			}
		}
		wg.Wait()
		attempts, refused := srv.Counts()
		r.attempts, r.refused = int(attempts), int(refused)
	})
	slices.Sort(r.waits)
	return r
}

// Two processes that share one token quota unseen, each pacing its costs
// from what the server says is left, share it evenly, and no call fails in
// its caller's hands, whether they begin together or one 10 s after the
// other. A key that let a request go the moment its bucket held the cost
// drained the server's bucket to the last token as it refilled: the other
// process's requests all met an empty bucket, its controller fell to the
// least rate, and 6 to 14 calls ran past their deadlines (66-67 answers
// every 5 s to 0-6, in 5 runs of 5). Now a key leaves a quarter of the
// cost in the bucket, which lets a newcomer's requests through now and
// then (without it, one that came 10 s later starved in 3 runs of 5), and
// four costs once the server's count shows another client taking (without
// them, two that began together fell back into the drain in 5 of 5; see
// docs/cost.md).
func TestCostLeavesRoomForClientsUnseen(t *testing.T) {
	for _, later := range []time.Duration{0, 10 * time.Second} {
		t.Run(fmt.Sprintf("later=%v", later), func(t *testing.T) {
			r := runSharedTokenQuota(t, 2, true, later)
			t.Logf("answered per process every 5 s %v; %d calls, %d failed (%v); %d of %d attempts refused; wait p99 %v, most %v",
				r.answered, r.calls, r.failed, r.first, r.refused, r.attempts, r.waits[len(r.waits)*99/100], r.waits[len(r.waits)-1])
			assert.Zero(t, r.failed, "calls failed in their callers' hands: %v", r.first)
			var each [2]int
			from := int((later + 5*time.Second) / (5 * time.Second)) // once both have run 5 s
			for p := range 2 {
				for _, n := range r.answered[p][from:] {
					each[p] += n
				}
			}
			share := float64(each[0]) / float64(each[0]+each[1])
			assert.InDelta(t, 0.5, share, 0.1, "the first process's share of the answers once both have run 5 s: %v", each)
			assert.LessOrEqual(t, float64(r.refused)/float64(r.attempts), 0.02, "the share of attempts refused")
			assert.Less(t, r.waits[len(r.waits)*99/100], 3*time.Second, "p99 of the waits (each caller's fair turn: 1.2 s)")
		})
	}
}
