// Package politeotel exports what a [polite.Transport] does as
// OpenTelemetry metrics, and marks its waits and retries on the caller's
// trace. It is a module of its own, so that polite's core does not depend
// on OpenTelemetry.
//
//	t := polite.New(nil, polite.WithRate(10, 5), politeotel.New())
//
// [New] returns a [polite.Option]: the Transport reports its events to it
// (through [polite.WithHooks], which adds to any hooks of the caller's
// own), and its gauges read the Transport's state when the metrics are
// collected. Metrics go to the global MeterProvider unless
// [WithMeterProvider] names another; as OpenTelemetry's instrumentation
// rules ask, a provider set globally after New is used from then on.
//
// # Instruments
//
// Counters and histograms are recorded as the Transport works; gauges are
// read at collection. Units follow UCUM; attributes follow the HTTP
// client semantic conventions where one exists.
//
//	polite.client.attempts        counter    {attempt}     each request sent: polite.retry (true for a
//	                                                       retry), http.response.status_code or error.type
//	polite.client.retries         counter    {retry}       each retry decided: polite.reason (throttled,
//	                                                       server_error, timeout, transport_error)
//	polite.client.throttles       counter    {response}    each throttle: polite.throttle (429, 503, quota)
//	polite.client.refusals        counter    {request}     each call refused before it was sent: error.type
//	                                                       (throttled, retry_budget_exhausted,
//	                                                       robots_unreachable, too_large)
//	polite.client.wait.duration   histogram  s             each wait: polite.wait (rate, pause, quota,
//	                                                       slot, crawl_delay, backoff, cost)
//	polite.client.rate            gauge      {request}/s   per key: the rate its requests are paced at
//	polite.client.limit           gauge      {request}/s   per key: the server's limit, stated or estimated
//	polite.client.retry_budget    gauge      {token}       tokens left in the retry budgets
//	polite.fleet.fallbacks        counter    {call}        each Redis call that could not be made or
//	                                                       answered: polite.fleet.op, error.type
//	polite.fleet.duration         histogram  s             each Redis round trip: polite.fleet.op,
//	                                                       error.type on failure
//
// Every instrument but the budget and the fleet's carries server.address,
// the request's key (its host, unless [polite.WithKey] says otherwise;
// with server.port when the key is a host and port); those of single
// requests also carry http.request.method. The key attribute is bounded:
// the first [DefaultMaxKeys] distinct keys (see [WithMaxKeys]) keep their
// own value, and the others are reported together as [OverflowValue], so
// that a crawler of a million hosts does not make a million series; each
// instrument holds at most 1,000 attribute sets, past which new ones are
// counted under otel.metric.overflow=true, as the SDK does past its own
// cap. URLs and paths are never attributes.
//
// Attempts, waits and refusals, and polite's span events, also carry
// polite.priority, the call's priority (see [polite.Priority]): the name
// of its class (critical, interactive, default, batch, background), or
// its number for a value between classes ("10"), so that a program using
// the five classes makes at most five times the series of attempts, waits
// and refusals. The tenant of a call ([polite.ContextWithTenant]) may be a
// customer's name: it is never recorded, unless [WithTenantAttribute]
// says what to record for it (polite.tenant: a plan, a hash, a bucket),
// and then, on metrics, its first 100 distinct values keep theirs and the
// others share [OverflowValue].
//
// Counters are kept in an atomic integer per attribute set and reported
// when the metrics are collected (observable counters), so that counting
// costs a request an atomic addition. The gauges read every key of every
// Transport at each collection: a crawler holding a million keys pays for
// a walk over them, once a collection.
//
// Make one Option for a MeterProvider and give it to every Transport: the
// gauges of two Options on one provider would overwrite each other. A
// retry budget on Redis (a fleet's) is the fleet's, reported whole by
// every process: take its maximum across processes, not its sum.
//
// The wait histogram's buckets reach an hour (a Retry-After can be long);
// a wait is recorded as the Transport expects it when it begins (a
// wait for a [polite.WithMaxInFlight] place, whose length is not known
// in advance, as it ends).
//
// # Traces
//
// Put otelhttp's Transport under polite and each attempt is a client span
// of its own, as the HTTP semantic conventions ask, with
// http.request.resend_count set on retries by [ClientTrace]:
//
//	next := otelhttp.NewTransport(http.DefaultTransport, otelhttp.WithClientTrace(politeotel.ClientTrace))
//	t := polite.New(next, politeotel.New())
//
// polite's waits, retries, throttles and refusals are events on the span of
// the caller's context: the caller's own span, or, with otelhttp's
// Transport over polite as well, the span of the whole call.
package politeotel
