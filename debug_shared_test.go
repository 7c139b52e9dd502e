//go:build qualitydebug

package polite_test

// TestDebugSharedTokenQuota with QP (processes, 2 if unset) and QNOCOST
// (set: the processes pace requests alone, no costs) runs QP Transports,
// none told of the others, 16 callers among them, against one fake
// OpenAI API whose token quota refills 2,000 a second (its minute scaled
// to a second; each request asks 200 and uses 150; 100 ms to answer), for
// 30 s of fake time, five times, and
// prints what each process got every 5 s, the calls failed in the
// callers' hands and their waits. With costs (the default), one process
// drains the bucket as it refills and the other starves (see
// docs/costs.md, "Processes that share a quota unseen"):
//
//	QP=2 go test -tags qualitydebug -run 'TestDebugSharedTokenQuota$' -v .

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/internal/llmfake"
)

func TestDebugSharedTokenQuota(t *testing.T) {
	procs, _ := strconv.Atoi(cmp.Or(os.Getenv("QP"), "2"))
	procs = max(procs, 1)
	const callers, length = 16, 30 * time.Second
	// 200 characters, 50 tokens, and 150 of max_tokens asked; 100 used.
	body := `{"model":"m","messages":[{"content":"` + strings.Repeat("x", 200) + `"}],"max_tokens":150,"output_tokens":100}`
	for run := range 5 {
		synctest.Test(t, func(t *testing.T) {
			srv := llmfake.NewOpenAI(1e6, 2000, llmfake.WithPeriod(time.Second))
			srv.Latency = func(int) time.Duration { return 100 * time.Millisecond }
			start := time.Now()
			end := start.Add(length)
			var mu sync.Mutex
			var waits []time.Duration
			var failed int
			var first error
			got := make([][int(length / (5 * time.Second))]int, procs)
			var wg sync.WaitGroup
			for p := range procs {
				var opts []polite.Option
				if os.Getenv("QNOCOST") == "" {
					opts = append(opts, polite.WithCost(chatCost), polite.WithUsage(chatUsage))
				}
				tr := polite.New(&handlerNext{h: srv}, opts...)
				for w := range callers / procs {
					wg.Go(func() {
						time.Sleep(time.Duration(p*callers/procs+w) * time.Millisecond)
						for time.Now().Before(end) {
							ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
							req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://llm.test/v1/chat/completions", strings.NewReader(body))
							at := time.Now()
							resp, err := tr.RoundTrip(req)
							mu.Lock()
							waits = append(waits, time.Since(at))
							switch {
							case err != nil:
								failed++
								if first == nil {
									first = fmt.Errorf("process %d, caller %d, at %v: %w", p, w, at.Sub(start), err)
								}
							case at.Before(end):
								got[p][min(int(at.Sub(start)/(5*time.Second)), len(got[p])-1)]++
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
			slices.Sort(waits)
			attempts, refused := srv.Counts()
			t.Logf("run %d: answered per process every 5 s %v; %d calls, %d failed (first: %v), %d of %d attempts refused; wait p50 %v, p99 %v, most %v",
				run, got, len(waits), failed, first, refused, attempts, waits[len(waits)/2], waits[len(waits)*99/100], waits[len(waits)-1])
		})
	}
}
