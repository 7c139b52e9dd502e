package politeotel_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"

	"github.com/politehttp/polite"
	"github.com/politehttp/polite/politeotel"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
)

// throttledOnce is a server that throttles its first request, asking for
// 10 ms, and answers the others.
func throttledOnce() *httptest.Server {
	var n atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After-Ms", "10")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "ok")
	}))
}

// Metrics of a Transport, collected by hand: a throttled first attempt, a
// retry, and the wait between them.
func ExampleNew() {
	srv := throttledOnce()
	defer srv.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	client := &http.Client{Transport: polite.New(nil,
		polite.WithBackoff(0, 0), // no jitter: the wait is the server's
		politeotel.New(politeotel.WithMeterProvider(mp)))}
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				status, _ := p.Attributes.Value("http.response.status_code")
				reason, _ := p.Attributes.Value("polite.reason")
				fmt.Println(m.Name, status.Emit(), reason.Emit(), p.Value)
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				cause, _ := p.Attributes.Value("polite.wait")
				fmt.Println(m.Name, cause.Emit(), p.Count)
			}
		}
	}
	// Unordered output:
	// polite.client.attempts 429  1
	// polite.client.attempts 200  1
	// polite.client.retries 429 throttled 1
	// polite.client.throttles   1
	// polite.client.wait.duration pause 1
}

// The common case: metrics scraped by Prometheus, through OpenTelemetry's
// Prometheus exporter. A service serves the registry with promhttp; here
// it is gathered by hand.
func ExampleNew_prometheus() {
	srv := throttledOnce()
	defer srv.Close()
	registry := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(registry), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
	if err != nil {
		fmt.Println(err)
		return
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	defer mp.Shutdown(context.Background())

	client := &http.Client{Transport: polite.New(nil, politeotel.New(politeotel.WithMeterProvider(mp)))}
	defer client.CloseIdleConnections()
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	families, err := registry.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var b strings.Builder
	for _, f := range families {
		fmt.Println(f.GetName())
		_ = expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain)).Encode(f)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, "polite_client_attempts_total") {
			fmt.Println(strings.ReplaceAll(line, port, "PORT"))
		}
	}
	// Unordered output:
	// polite_client_attempts_total
	// polite_client_limit_per_second
	// polite_client_rate_per_second
	// polite_client_retry_budget
	// polite_client_retries_total
	// polite_client_throttles_total
	// polite_client_wait_duration_seconds
	// polite_client_attempts_total{http_request_method="GET",http_response_status_code="200",polite_priority="default",polite_retry="true",server_address="127.0.0.1",server_port="PORT"} 1
	// polite_client_attempts_total{http_request_method="GET",http_response_status_code="429",polite_priority="default",polite_retry="false",server_address="127.0.0.1",server_port="PORT"} 1
}

// Metrics exported to standard output, as JSON: the exporter of a quick
// look or a test. (Timestamps and the resource are left out here, for a
// stable output; the server is one in memory.)
func ExampleNew_stdout() {
	exporter, err := stdoutmetric.New(stdoutmetric.WithWriter(os.Stdout), stdoutmetric.WithoutTimestamps())
	if err != nil {
		fmt.Println(err)
		return
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithResource(resource.Empty()))

	client := &http.Client{Transport: polite.New(answer(ok()), politeotel.New(politeotel.WithMeterProvider(mp)))}
	resp, err := client.Get("http://api.example/items")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	_ = exporter.Export(context.Background(), &rm)
	// Output:
	// {"Resource":null,"ScopeMetrics":[{"Scope":{"Name":"github.com/politehttp/polite/politeotel","Version":"0.1.0","SchemaURL":"","Attributes":null},"Metrics":[{"Name":"polite.client.attempts","Description":"Requests sent to the server: first attempts and retries.","Unit":"{attempt}","Data":{"DataPoints":[{"Attributes":[{"Key":"http.request.method","Value":{"Type":"STRING","Value":"GET"}},{"Key":"http.response.status_code","Value":{"Type":"INT64","Value":200}},{"Key":"polite.priority","Value":{"Type":"STRING","Value":"default"}},{"Key":"polite.retry","Value":{"Type":"BOOL","Value":false}},{"Key":"server.address","Value":{"Type":"STRING","Value":"api.example"}}],"StartTime":"0001-01-01T00:00:00Z","Time":"0001-01-01T00:00:00Z","Value":1}],"Temporality":"CumulativeTemporality","IsMonotonic":true}},{"Name":"polite.client.retry_budget","Description":"Tokens left in the retry budgets.","Unit":"{token}","Data":{"DataPoints":[{"Attributes":[],"StartTime":"0001-01-01T00:00:00Z","Time":"0001-01-01T00:00:00Z","Value":500}]}}]}]}
}

// A service records its customers' plans on the metrics, never their
// names: the tenant attribute is what the user's function makes of the
// tenant, and without WithTenantAttribute no tenant is recorded at all.
// Every attempt carries its priority.
func ExampleWithTenantAttribute() {
	plans := map[string]string{"Acme Corp": "enterprise"} // the others are on the free plan
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	client := &http.Client{Transport: polite.New(answer(ok()), politeotel.New(
		politeotel.WithMeterProvider(mp),
		politeotel.WithTenantAttribute(func(customer string) string {
			if plan, ok := plans[customer]; ok {
				return plan
			}
			return "free" // a few values, whatever the number of customers
		}),
	))}
	for _, customer := range []string{"Acme Corp", "Globex", "Initech"} {
		ctx := polite.ContextWithTenant(context.Background(), customer)
		ctx = polite.ContextWithPriority(ctx, polite.PriorityInteractive)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.example/items", nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "polite.client.attempts" {
			for _, p := range d.DataPoints {
				priority, _ := p.Attributes.Value(politeotel.PriorityKey)
				tenant, _ := p.Attributes.Value(politeotel.TenantKey)
				fmt.Println(m.Name, priority.Emit(), tenant.Emit(), p.Value)
			}
		}
	}
	// Unordered output:
	// polite.client.attempts interactive enterprise 1
	// polite.client.attempts interactive free 2
}
