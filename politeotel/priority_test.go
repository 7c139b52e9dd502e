package politeotel_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politeotel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// prioritized runs four calls, one after another, through a Transport paced
// at one a second and made with politeotel's opts, each in a span of its
// own: an interactive call of the tenant "Acme Corp" (it goes at once), a
// batch call of "Globex", a call of priority 10 and no tenant, and a
// background call of "Initech"; each but the first waits a second for the
// rate. It returns the metrics and every span event, written
// "name k=v k=v" (in the order of their attributes).
func prioritized(t *testing.T, opts ...politeotel.Option) (map[string]metricdata.Metrics, []string) {
	t.Helper()
	var got map[string]metricdata.Metrics
	var events []string
	synctest.Test(t, func(t *testing.T) {
		mp, r := reader()
		rec := tracetest.NewSpanRecorder()
		tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
		tr := polite.New(answer(ok()), polite.WithRate(1, 1), polite.WithAdaptive(polite.AdaptiveOff),
			politeotel.New(append(opts, politeotel.WithMeterProvider(mp))...))
		for _, c := range []struct {
			p      polite.Priority
			tenant string
		}{{polite.PriorityInteractive, "Acme Corp"}, {polite.PriorityBatch, "Globex"}, {10, ""}, {polite.PriorityBackground, "Initech"}} {
			ctx := polite.ContextWithPriority(t.Context(), c.p)
			if c.tenant != "" {
				ctx = polite.ContextWithTenant(ctx, c.tenant)
			}
			ctx, span := tracer.Start(ctx, "call")
			_, err := call(t, ctx, tr, "http://a.test/")
			require.NoError(t, err)
			span.End()
		}
		got = collect(t, r)
		for _, s := range rec.Ended() {
			for _, e := range s.Events() {
				line := e.Name
				for _, kv := range e.Attributes {
					line += " " + string(kv.Key) + "=" + kv.Value.Emit()
				}
				events = append(events, line)
			}
		}
	})
	return got, events
}

// Attempts and waits carry the call's priority, by its class's name (or
// its number between classes), and so do the span events. The tenant is
// never recorded, on any metric or event, unless the user allows it; then
// it is recorded as the user's function makes it (a plan here, not the
// customer's name), and a call of no tenant, or whose tenant the function
// makes "", carries none.
func TestPriorityAndTenantAttributes(t *testing.T) {
	plans := map[string]string{"Acme Corp": "enterprise", "Globex": "free"}
	for _, c := range []struct {
		name         string
		opts         []politeotel.Option
		acme, globex string // the tenant attributes recorded, with their commas
		notIn        []string
	}{
		{"by default", nil, "", "", []string{"polite.tenant", "Acme", "Globex", "Initech"}},
		{"allowed", []politeotel.Option{politeotel.WithTenantAttribute(func(tenant string) string { return plans[tenant] })},
			",polite.tenant=enterprise", ",polite.tenant=free", []string{"Acme", "Globex", "Initech"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, events := prioritized(t, c.opts...)
			const ok200 = get + "http.response.status_code=200,"
			assert.Equal(t, map[string]float64{
				ok200 + "polite.priority=interactive,polite.retry=false" + c.acme + hostA: 1,
				ok200 + "polite.priority=batch,polite.retry=false" + c.globex + hostA:     1,
				ok200 + "polite.priority=10,polite.retry=false" + hostA:                   1,
				ok200 + "polite.priority=background,polite.retry=false" + hostA:           1,
			}, values(got["polite.client.attempts"]))
			assert.Equal(t, map[string]float64{
				get + "polite.priority=batch" + c.globex + ",polite.wait=rate" + hostA: 1,
				get + "polite.priority=10,polite.wait=rate" + hostA:                    1,
				get + "polite.priority=background,polite.wait=rate" + hostA:            1,
			}, values(got["polite.client.wait.duration"]), "a second each")
			assert.Equal(t, []string{
				"polite.wait polite.attempt=1 polite.wait=rate polite.delay=1 polite.priority=batch" + strings.ReplaceAll(c.globex, ",", " "),
				"polite.wait polite.attempt=1 polite.wait=rate polite.delay=1 polite.priority=10",
				"polite.wait polite.attempt=1 polite.wait=rate polite.delay=1 polite.priority=background",
			}, events)
			for name, m := range got {
				for set := range values(m) {
					for _, s := range c.notIn {
						assert.NotContains(t, set, s, "%s records no tenant's name", name)
					}
				}
			}
		})
	}
}

// The tenant attribute is bounded as the key is: the first 100 values
// keep theirs, the others share OverflowValue, and no count is lost.
func TestTenantAttributeIsBounded(t *testing.T) {
	mp, r := reader()
	tr := polite.New(answer(ok()), polite.WithAdaptive(polite.AdaptiveOff),
		politeotel.New(politeotel.WithMeterProvider(mp), politeotel.WithTenantAttribute(strings.Clone)))
	const tenants = 150
	for i := range tenants {
		_, err := call(t, polite.ContextWithTenant(context.Background(), "t"+strconv.Itoa(i)), tr, "http://a.test/")
		require.NoError(t, err)
	}
	got := values(collect(t, r)["polite.client.attempts"])
	assert.Len(t, got, 101, "100 tenants of their own and the others'")
	assert.Equal(t, float64(tenants-100),
		got[get+"http.response.status_code=200,polite.priority=default,polite.retry=false,polite.tenant=_OTHER"+hostA])
	assert.Equal(t, 1.0, got[get+"http.response.status_code=200,polite.priority=default,polite.retry=false,polite.tenant=t0"+hostA])
}

// A refusal carries the priority of the call refused, and its tenant as
// the user allows: which class a saturated quota turns away is seen.
func TestRefusalsCarryThePriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp, r := reader()
		tr := polite.New(answer(status(429, "Retry-After", "3600")), polite.WithMaxRetryAfter(time.Minute),
			politeotel.New(politeotel.WithMeterProvider(mp), politeotel.WithTenantAttribute(func(string) string { return "free" })))
		ctx := polite.ContextWithTenant(polite.ContextWithPriority(t.Context(), polite.PriorityBatch), "Globex")
		for range 2 { // the first is answered 429, the second refused: the key is paused an hour
			_, _ = call(t, ctx, tr, "http://a.test/")
		}
		assert.Equal(t, map[string]float64{
			"error.type=throttled," + method + ",polite.priority=batch,polite.tenant=free" + hostA: 1,
		}, values(collect(t, r)["polite.client.refusals"]))
	})
}
