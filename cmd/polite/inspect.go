package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/politehttp/polite"
)

const inspectUsage = `Usage: polite inspect [flags] URL

Sends one request to URL (HEAD, or another method with -X) and prints what
polite understands of the server's limits: every rate-limit header it read,
the quota they describe (limit, window, remaining, reset, named bucket),
Retry-After, and the pacing polite would apply to the host. Nothing is
retried. With -json, prints the parsed signals as one JSON object
(polite.Signals: snake_case names, durations in seconds).

Some APIs send their rate-limit headers only on GET, or only to callers
who authenticate: use -X GET and -H 'Authorization: …'.

What polite remembers of the host from earlier runs of get and inspect
(-memory) is shown too, as it was before the request, and what the request
teaches is remembered.
`

// runInspect runs polite inspect.
func runInspect(ctx context.Context, args []string, e *env) int {
	fs := newFlagSet("inspect", inspectUsage, e)
	method := fs.String("X", http.MethodHead, "request method")
	asJSON := fs.Bool("json", false, "print the parsed signals as one JSON object")
	var headers headerFlag
	fs.Var(&headers, "H", "a request header, as 'Name: value' (repeatable)")
	var tf transportFlags
	tf.registerPacing(fs, 30*time.Second)
	var mf memoryFlags
	mf.register(fs)
	if code := parseFlags(fs, args, e); code >= 0 {
		return code
	}
	switch {
	case fs.NArg() > 1 && strings.HasPrefix(fs.Arg(1), "-"):
		return usageError(fs, "flags go before the URL")
	case fs.NArg() != 1:
		return usageError(fs, "give one URL")
	}
	if err := tf.check(); err != nil {
		return usageError(fs, "%v", err)
	}
	req, err := tf.newRequest(strings.ToUpper(*method), fs.Arg(0))
	if err != nil {
		return usageError(fs, "%v", err)
	}
	for _, h := range headers {
		req.Header.Add(h.name, h.value)
	}
	if tf.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, tf.timeout)
		defer cancel()
	}

	next := http.DefaultTransport.(*http.Transport).Clone()
	defer next.CloseIdleConnections()
	key := strings.ToLower(req.URL.Host) // polite's default key
	opts := tf.options()                 // one attempt: tf has no retries
	mem, closeMemory := mf.open(e, "inspect")
	defer closeMemory()
	var remembered polite.Remembered
	var known bool
	if mem != nil {
		remembered, known = mem.Recall(key)
		opts = append(opts, polite.WithMemory(mem))
	}
	tr := polite.New(next, opts...)
	start := time.Now()
	resp, err := tr.RoundTrip(req.WithContext(ctx))
	if err != nil {
		fmt.Fprintf(e.stderr, "polite inspect: %v\n", err)
		if mem != nil {
			fmt.Fprintf(e.stderr, "polite inspect: remembered for %s: %s\n", key, describeMemory(remembered, known, time.Now()))
		}
		return exitFailure
	}
	now := time.Now()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()

	signals := polite.ParseSignals(resp.Header, now)
	if *asJSON {
		out := json.NewEncoder(e.stdout)
		out.SetIndent("", "  ")
		if err := out.Encode(signals); err != nil {
			fmt.Fprintf(e.stderr, "polite inspect: %v\n", err)
			return exitFailure
		}
		return exitOK
	}
	status := keyStatus(tr, key)
	report := inspection{
		req: req, resp: resp, took: now.Sub(start), now: now,
		signals: signals, status: status, maxRetryAfter: tf.maxRetryAfter, rate: float64(tf.rate),
		memory: mem != nil, remembered: remembered, known: known,
	}
	if err := report.write(e.stdout); err != nil {
		fmt.Fprintf(e.stderr, "polite inspect: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// keyStatus returns what tr knows of key.
func keyStatus(tr *polite.Transport, key string) polite.KeyStatus {
	for s := range tr.Keys() {
		if s.Key == key {
			return s
		}
	}
	return polite.KeyStatus{Key: key}
}

// inspection is what inspect found, to be printed.
type inspection struct {
	req           *http.Request
	resp          *http.Response
	took          time.Duration
	now           time.Time
	signals       polite.Signals
	status        polite.KeyStatus
	maxRetryAfter time.Duration
	rate          float64 // -rate, 0 if none
	memory        bool    // a memory was used
	remembered    polite.Remembered
	known         bool // the memory held remembered for the host before the request
}

// write prints the inspection for a reader.
func (in *inspection) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s %s → %s in %v\n\n", in.req.Method, polite.RedactURL(in.req.URL), in.resp.Status, in.took.Round(time.Millisecond))

	var names []string
	for name := range in.resp.Header {
		if polite.IsSignalHeader(name) && name != "Date" && name != "Age" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		fmt.Fprintf(tw, "Rate-limit headers: none.\n")
	} else {
		fmt.Fprintf(tw, "Rate-limit headers read:\n")
		for _, name := range names {
			for _, v := range in.resp.Header[name] {
				fmt.Fprintf(tw, "  %s: %s\n", name, v)
			}
		}
	}

	s := in.signals
	fmt.Fprintf(tw, "\nWhat polite understands:\n")
	if s.HasRetryAfter {
		fmt.Fprintf(tw, "  Retry-After\t%s\n", withSlack(s.RetryAfter, s.RetryAfterSlack))
	} else {
		fmt.Fprintf(tw, "  Retry-After\tnone\n")
	}
	if s.HasQuota {
		q := s.Quota
		unit := q.Unit
		if unit == "" {
			unit = "requests"
		}
		line := fmt.Sprintf("%s of %s %s left", number(q.Remaining), number(q.Limit), unit)
		if q.Limit == 0 {
			line = fmt.Sprintf("%s %s left (limit not given)", number(q.Remaining), unit)
		}
		fmt.Fprintf(tw, "  quota\t%s\n", line)
		if q.Window > 0 {
			fmt.Fprintf(tw, "  window\t%v\n", q.Window)
		}
		if !q.Reset.IsZero() {
			fmt.Fprintf(tw, "  reset\tin %s, at %s\n", withSlack(max(q.Reset.Sub(in.now), 0), q.Slack), q.Reset.UTC().Format(time.RFC3339))
		}
		if q.Policy != "" {
			fmt.Fprintf(tw, "  policy\t%s\n", q.Policy)
		}
	} else {
		fmt.Fprintf(tw, "  quota\tnone reported\n")
	}
	if s.Bucket != "" {
		fmt.Fprintf(tw, "  bucket\t%s (a limit shared with other routes)\n", s.Bucket)
	}
	if s.Global {
		fmt.Fprintf(tw, "  global\tyes: the limit is on the whole client, not this route\n")
	}
	if s.Cached {
		fmt.Fprintf(tw, "  cached\tyes: the response came from a cache, its quota is left out\n")
	}

	fmt.Fprintf(tw, "\nWhat polite would do for %s:\n", in.status.Key)
	fmt.Fprintf(tw, "  next request\t%s\n", in.nextRequest())
	fmt.Fprintf(tw, "  waiting\t%s\n", waiting(in.status.Waiting))
	if in.status.Rate > 0 {
		by := ""
		switch {
		case in.signals.HasQuota && (in.rate == 0 || in.status.Rate < in.rate):
			by = " (by the quota: what is left of it spread until its reset, or its limit over its window, less a margin)"
		case in.rate > 0:
			by = " (-rate)"
		}
		fmt.Fprintf(tw, "  pace\t%s requests/s%s\n", number(in.status.Rate), by)
	} else if in.signals.HasQuota {
		fmt.Fprintf(tw, "  pace\tnone yet: the quota says too little to pace by (its window, or a reset far enough ahead); the next responses may tell\n")
	} else {
		fmt.Fprintf(tw, "  pace\tnone yet: requests go at once until the server throttles one (429, or 503 with Retry-After); polite then learns the host's limit\n")
	}
	if in.status.Limit > 0 {
		fmt.Fprintf(tw, "  server limit\t%s requests/s, as polite knows it\n", number(in.status.Limit))
	}
	if in.memory {
		fmt.Fprintf(tw, "  remembered\t%s\n", describeMemory(in.remembered, in.known, in.now))
	}
	if len(names) == 0 && in.req.Method == http.MethodHead {
		fmt.Fprintf(tw, "\nSome APIs send their limits only on GET: try -X GET.\n")
	}
	return tw.Flush()
}

// nextRequest says when polite would send the host's next request.
func (in *inspection) nextRequest() string {
	d, ok := in.signals.Delay(in.now)
	switch {
	case !ok || d <= 0:
		return "at once"
	case d > in.maxRetryAfter:
		return fmt.Sprintf("refused: the server asks for %v, over -max-retry-after %v; calls fail at once with polite.ErrThrottled", d.Round(time.Millisecond), in.maxRetryAfter)
	case in.signals.HasRetryAfter:
		return fmt.Sprintf("in %v: the pause the server asked for (Retry-After)", d.Round(time.Millisecond))
	}
	return fmt.Sprintf("in %v: the quota is spent until its reset", d.Round(time.Millisecond))
}

// waiting writes the calls that wait on a key, by priority, highest first
// ("2 interactive, 5 batch"), as [polite.KeyStatus.Waiting] counts them:
// inspect's own request has gone by the time it is printed, so this reads
// "none" but while another call of the same Transport waits.
func waiting(counts []polite.PriorityCount) string {
	if len(counts) == 0 {
		return "none"
	}
	parts := make([]string, len(counts))
	for i, c := range counts {
		class := c.Priority.String()
		if strings.HasPrefix(class, "Priority(") {
			class = "at priority " + strconv.Itoa(int(c.Priority))
		}
		parts[i] = strconv.Itoa(c.Calls) + " " + class
	}
	return strings.Join(parts, ", ") + " (by priority, highest first)"
}

// withSlack writes d, and how far from the server's true value it may be.
func withSlack(d, slack time.Duration) string {
	precision := time.Millisecond
	if slack >= time.Second {
		precision = time.Second // finer digits would only be noise
	}
	s := d.Round(precision).String()
	if slack > 0 {
		s += " (±" + slack.String() + ")"
	}
	return s
}

// number writes f without a needless fraction.
func number(f float64) string {
	if f == float64(int64(f)) && f < 1e15 && f > -1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

// headerFlag is a repeatable -H 'Name: value' flag.
type headerFlag []header

// header is one request header from the command line.
type header struct{ name, value string }

func (h *headerFlag) String() string { return "" }

func (h *headerFlag) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t\r\n") {
		return fmt.Errorf("%q is not a header: write 'Name: value'", s)
	}
	*h = append(*h, header{name: name, value: strings.TrimSpace(value)})
	return nil
}
