package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/politehttp/polite"
)

// The tenant scenario (issue 38): one key shared by three tenants of
// weights 1:2:5, all at the default priority, each with a backlog that
// never empties (tenantBacklog callers each, each sending again as soon
// as its last call ends, no deadline). At the run's middle the tenant of
// weight 5 goes idle: its callers give up their calls, waiting or not,
// and make no more. Two clients: polite told nothing of the tenants (its
// calls go in order of arrival), and polite told the weights
// (WithTenantWeight) and each call's tenant (ContextWithTenant).
const tenantBacklog = 1000

// tenantWeights are the scenario's tenants and their weights; the last
// goes idle at the run's middle.
var tenantWeights = []struct {
	name   string
	weight float64
}{{"a", 1}, {"b", 2}, {"c", 5}}

// takeoverWindow is the sliding window in which the tenant scenario looks
// for the others' taking the idle tenant's share, and takeoverStep its
// step.
const (
	takeoverWindow = 250 * time.Millisecond
	takeoverStep   = 10 * time.Millisecond
)

// tenantResult is one run of the tenant scenario.
type tenantResult struct {
	server, client        string
	utilization, rejected float64
	calls, failed         int       // calls that ended in the run (but those cut by the run's end or the idle tenant's stop), those that failed
	before, after         []int     // each tenant's sends before the idle point, and after it
	takeover              time.Time // the start of the first window after the idle point in which the others sent at the key's rate; zero if none
	idle                  time.Time
	err                   error
}

// benchTenants runs the tenant scenario on each server, prints a table,
// and returns the exit status.
func benchTenants(srvs []server, cfg runConfig) int {
	results := withAndWithout(serverNames(srvs), "polite", "tenants", func(i int, told bool, client string) tenantResult {
		r := runTenants(srvs[i], told, cfg)
		r.server, r.client = srvs[i].name, client
		return r
	}, func(r tenantResult) (string, error) {
		return fmt.Sprintf("utilization %.2f, sends before %v, after %v", r.utilization, r.before, r.after), r.err
	})
	var weights []string
	for _, t := range tenantWeights {
		weights = append(weights, fmt.Sprintf("%s %g", t.name, t.weight))
	}
	row := func(r tenantResult) ([]string, error) {
		cells := []string{r.server, r.client}
		if r.err != nil {
			return cells, r.err
		}
		took := "never"
		if !r.takeover.IsZero() {
			took = r.takeover.Sub(r.idle).Round(time.Millisecond).String()
		}
		return append(cells, fmt.Sprintf("%.2f", r.utilization), percent(r.rejected),
			strconv.Itoa(r.calls), strconv.Itoa(r.failed), shareCell(r.before, 0, 3), shareCell(r.before, 1, 3),
			shareCell(r.before, 2, 3), shareCell(r.after, 0, 2), shareCell(r.after, 1, 2), took), nil
	}
	return writeScenario(fmt.Sprintf("%v per run, L = %v requests/s, tenants of weights %s, %d callers each, the last idle from %v",
		cfg.duration, cfg.limit, strings.Join(weights, ", "), tenantBacklog, cfg.duration/2),
		[]string{"server", "client", "utilization", "rejected", "calls", "failed", "share a (1)", "share b (2)", "share c (5)", "after: a", "after: b", "taken over in"},
		func(i int) bool { return i >= 2 }, results, row)
}

// shareCell returns tenant i's share of sends, of the first n tenants,
// and in brackets that share over its weight's share of theirs (1: its
// weight's share exactly).
func shareCell(sends []int, i, n int) string {
	total, weights := 0, 0.0
	for j := range n {
		total += sends[j]
		weights += tenantWeights[j].weight
	}
	share := ratio(float64(sends[i]), float64(total))
	return fmt.Sprintf("%.1f%% (%.2f)", 100*share, share/(tenantWeights[i].weight/weights))
}

// tenantSends is a RoundTripper under polite that records when each
// attempt polite sends leaves, and its tenant (see tenantKey).
type tenantSends struct {
	next  http.RoundTripper
	mu    sync.Mutex
	sends []tenantSend
}

// tenantSend is one attempt sent: when, and the index of its tenant in
// tenantWeights.
type tenantSend struct {
	at     time.Time
	tenant int
}

// RoundTrip records req's send and sends it.
func (l *tenantSends) RoundTrip(req *http.Request) (*http.Response, error) {
	i, _ := req.Context().Value(tenantKey{}).(int)
	l.mu.Lock()
	l.sends = append(l.sends, tenantSend{at: time.Now(), tenant: i})
	l.mu.Unlock()
	return l.next.RoundTrip(req)
}

// tenantKey is the context key of a call's tenant, its index in
// tenantWeights, for the bench's own count of the sends, whether polite
// is told the tenant or not.
type tenantKey struct{}

// runTenants runs the tenant scenario once against a fresh instance of s:
// told, polite is told the tenants' weights and each call's tenant.
func runTenants(s server, told bool, cfg runConfig) tenantResult {
	sc, err := startScenario(s, cfg)
	if err != nil {
		return tenantResult{err: err}
	}
	log := &tenantSends{next: sc.tr}
	hc := &http.Client{Transport: polite.New(log, polite.WithTenantWeight(func(name string) float64 {
		for _, t := range tenantWeights {
			if t.name == name {
				return t.weight
			}
		}
		return 1
	}))}
	r := tenantResult{idle: sc.inst.origin.Add(cfg.duration / 2)}
	var calls, failed atomic.Int64
	ctxs := make([]context.Context, len(tenantWeights))
	for i, t := range tenantWeights {
		ctxs[i] = context.WithValue(sc.ctx, tenantKey{}, i)
		if told {
			ctxs[i] = polite.ContextWithTenant(ctxs[i], t.name)
		}
	}
	idleCtx, idle := context.WithCancel(ctxs[len(ctxs)-1])
	defer idle()
	ctxs[len(ctxs)-1] = idleCtx
	idleTimer := time.AfterFunc(time.Until(r.idle), idle)
	defer idleTimer.Stop()
	// The tenants' callers start in turn, one of each at a time, so that
	// in order of arrival too each tenant has a third of the calls waiting
	// from the start.
	for range tenantBacklog {
		for _, ctx := range ctxs {
			sc.backlog(ctx, 1, hc, func(ok bool, err error) {
				if !time.Now().Before(sc.end) || err != nil && ctx.Err() != nil {
					return // cut by the run's end or the tenant's going idle, not failed
				}
				calls.Add(1)
				if !ok {
					failed.Add(1)
				}
			})
		}
	}
	sum, err := sc.finish(cfg)
	if err != nil {
		return tenantResult{err: err}
	}
	r.utilization, r.rejected = sum.Utilization, sum.Rejected
	r.calls, r.failed = int(calls.Load()), int(failed.Load())
	log.mu.Lock()
	defer log.mu.Unlock()
	r.before, r.after, r.takeover = tenantShares(log.sends, sc.inst.origin, r.idle, sc.end)
	return r
}

// tenantShares counts each tenant's sends in [origin, idle) and in [idle,
// end), and finds the start of the first takeoverWindow from idle on in
// which the tenants left sent at least 0.9 of what all sent in a window of
// that length, on average, before idle (zero if none).
func tenantShares(sends []tenantSend, origin, idle, end time.Time) (before, after []int, takeover time.Time) {
	before, after = make([]int, len(tenantWeights)), make([]int, len(tenantWeights))
	var others []time.Time // the sends after idle of the tenants left
	for _, s := range sends {
		switch {
		case s.at.Before(origin) || !s.at.Before(end):
		case s.at.Before(idle):
			before[s.tenant]++
		default:
			after[s.tenant]++
			if s.tenant < len(tenantWeights)-1 {
				others = append(others, s.at)
			}
		}
	}
	all := 0
	for _, n := range before {
		all += n
	}
	goal := 0.9 * float64(all) * float64(takeoverWindow) / float64(idle.Sub(origin))
	for t := idle; !t.Add(takeoverWindow).After(end); t = t.Add(takeoverStep) {
		n := 0
		for _, at := range others {
			if !at.Before(t) && at.Before(t.Add(takeoverWindow)) {
				n++
			}
		}
		if float64(n) >= goal {
			return before, after, t
		}
	}
	return before, after, time.Time{}
}
