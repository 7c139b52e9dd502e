package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"image/color"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/politehttp/polite/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// demoLimitTime bounds a short demo run: its duration, up to a second and
// a fifth waiting for the next whole second, the drain, and the build's
// slowness under -race on 2 shared cores.
const demoLimitTime = 30 * time.Second

// The tests that check the demo's results (checkResults) are not parallel:
// each demo runs 12 servers and 96 workers, and two at once on 2 cores,
// with other packages' tests beside them, would measure the machine's
// load more than the clients. They run before the parallel tests.

// TestDemoChartAndResults runs the demo as its README command does, briefly,
// and checks its results and the chart it draws.
func TestDemoChartAndResults(t *testing.T) {
	if testing.Short() {
		t.Skip("short: a 3-s demo whose results are judged (TestDemoInProcess draws a 1-s demo's chart)")
	}
	dir := t.TempDir()
	res := runPolite(t, dir, "", demoLimitTime, "demo", "-duration", "3s", "-o", "out.svg", "-json")
	require.Equal(t, exitOK, res.code, "stderr:\n%s", res.stderr)

	rep := decodeReport(t, res.stdout)
	assert.Equal(t, 0, rep.Fleet)
	assert.Equal(t, "out.svg", rep.Chart)
	checkResults(t, rep)

	// stderr is no terminal here: plain lines, one per scenario, and no
	// escape codes.
	assert.NotContains(t, res.stderr, "\x1b", "escape codes written to a file")
	for _, sc := range scenarios(demoLimit) {
		assert.Contains(t, res.stderr, sc.name+" ")
	}
	assert.Equal(t, len(scenarios(demoLimit)), strings.Count(res.stderr, " done: "), "stderr:\n%s", res.stderr)

	// The chart is in place, and nothing else: no temporary file left.
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"out.svg"}, names)

	f, err := os.Open(filepath.Join(dir, "out.svg"))
	require.NoError(t, err)
	defer f.Close()
	svg := parseSVG(t, f)

	for _, sc := range scenarios(demoLimit) {
		assert.Contains(t, svg.texts, sc.panelTitle(), "panel title of %s", sc.name)
		assert.True(t, svg.hasTextContaining(sc.title), "panel title of %s", sc.name)
	}
	legend := []string{"the server's limit", clientLabel(clientPlain, nil), clientLabel(clientOracle, nil), clientLabel(clientPolite, nil)}
	for _, name := range legend {
		assert.Contains(t, svg.texts, name, "legend")
	}
	for _, name := range []string{"limit", "plain", "oracle", "polite"} {
		assert.True(t, svg.hasTextContaining(name), "no text names %s", name)
	}

	// Every panel has a line for every client across the run (30 bins
	// of 100 ms), and its limit as a dashed line.
	panels := len(scenarios(demoLimit))
	for _, client := range clientNames() {
		assert.Equal(t, panels, svg.lines("stroke:"+hexColor(styleOf(client).color), 25), "lines of %s", client)
	}
	assert.Equal(t, panels, svg.lines("stroke-dasharray", 3), "dashed limit lines")
	// plain is refused all along: its marks are there, one a bin.
	assert.GreaterOrEqual(t, svg.crosses(hexColor(refusalGlyph(clientPlain).Color)), panels*25, "plain's refusal marks")
}

// TestDemoTable checks the table a person reads, and that no chart is
// written with -o "".
func TestDemoTable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	res := runPolite(t, dir, "", demoLimitTime, "demo", "-duration", "2s", "-o", "")
	require.Equal(t, exitOK, res.code, "stderr:\n%s", res.stderr)

	header := []string{"scenario", "client", "sent", "accepted", "rejected (429)", "rejected %", "failed (503)", "utilization"}
	for _, h := range header {
		assert.Contains(t, res.stdout, h)
	}
	rows := 0
	for _, line := range strings.Split(res.stdout, "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 7 && (fields[0] == clientPlain || fields[1] == clientPlain ||
			fields[0] == clientOracle || fields[0] == clientPolite) {
			rows++
		}
	}
	assert.Equal(t, len(scenarios(demoLimit))*len(clientNames()), rows, "rows in:\n%s", res.stdout)
	assert.NotContains(t, res.stdout, "Chart:")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "files written with -o \"\"")
}

// TestDemoFleet runs polite as a fleet of 2 on a real Redis.
func TestDemoFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("short: a 5-s demo on a real Redis (TestDemoFleetInProcessRedis runs a fleet's demo)")
	}
	addr := redistest.Addr(t)
	// 5 s, not 3: each refused call's retry holds its worker for the
	// bucket's Retry-After, a whole second rounded up, and the two members
	// start cold each. In 3 s, 20 refusals held 20 of the 8 workers' 24
	// seconds, and polite got 0.49-0.96 of the limit under -race; in 5 s,
	// 0.73-0.94 over 8 runs.
	res := runPoliteEnv(t, []string{"REDIS_ADDR=" + addr}, demoLimitTime, "demo", "-duration", "5s", "-fleet", "2", "-o", "", "-json")
	require.Equal(t, exitOK, res.code, "stderr:\n%s", res.stderr)
	assert.Contains(t, res.stderr, "2 Transports sharing one quota through Redis at "+addr)

	rep := decodeReport(t, res.stdout)
	assert.Equal(t, 2, rep.Fleet)
	assert.Empty(t, rep.Chart)
	checkResults(t, rep)

	// The fleet kept its state in that Redis, under this run's namespace:
	// a shared REDIS_ADDR may hold the keys of earlier runs.
	require.Regexp(t, `^polite-demo-[0-9]+$`, rep.FleetNamespace)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	keys, err := rdb.Keys(t.Context(), rep.FleetNamespace+":*").Result()
	require.NoError(t, err)
	assert.NotEmpty(t, keys, "no keys of the fleet %s in Redis", rep.FleetNamespace)
}

// TestDemoFleetInProcessRedis runs polite as a fleet of 2 without
// REDIS_ADDR: the demo shares the quota through a Redis of its own.
func TestDemoFleetInProcessRedis(t *testing.T) {
	t.Parallel()
	res := runPoliteEnv(t, []string{"REDIS_ADDR="}, demoLimitTime, "demo", "-duration", "1s", "-fleet", "2", "-o", "", "-json")
	require.Equal(t, exitOK, res.code, "stderr:\n%s", res.stderr)
	assert.Contains(t, res.stderr, "polite runs as 2 Transports sharing one quota through an in-process Redis (miniredis")

	rep := decodeReport(t, res.stdout)
	assert.Equal(t, 2, rep.Fleet)
	assert.Regexp(t, `^polite-demo-[0-9]+$`, rep.FleetNamespace)
	checkComplete(t, rep)
}

// TestDemoInterrupt interrupts a demo as Ctrl-C does once it has started:
// it ends at once, with status 1, and leaves no chart, whole or half.
func TestDemoInterrupt(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), demoLimitTime)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, binary, "demo", "-duration", "1h", "-o", "out.svg")
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Start())

	var lines []string
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.HasPrefix(sc.Text(), "polite demo: 3 clients") {
			require.NoError(t, cmd.Process.Signal(os.Interrupt))
		}
	}
	err = cmd.Wait()
	require.NoError(t, ctx.Err(), "the demo did not end when interrupted; stderr:\n%s", strings.Join(lines, "\n"))
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, exitFailure, exit.ExitCode())
	assert.Contains(t, lines, "polite demo: interrupted")
	assert.Empty(t, stdout.String())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "files left by an interrupted demo")
}

// TestDemoCommandLine checks the exit statuses of good and bad command
// lines, none of which runs the demo.
func TestDemoCommandLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // in stdout, if not ""
		stderr string // in stderr, if not ""
	}{
		{name: "help", args: []string{"-h"}, code: exitOK, stdout: "Usage: polite demo"},
		{name: "unknown flag", args: []string{"-nope"}, code: exitUsage, stderr: "-nope"},
		{name: "argument", args: []string{"extra"}, code: exitUsage, stderr: "unexpected arguments"},
		{name: "short duration", args: []string{"-duration", "500ms"}, code: exitUsage, stderr: "-duration"},
		{name: "negative fleet", args: []string{"-fleet", "-1"}, code: exitUsage, stderr: "-fleet"},
		{name: "chart format", args: []string{"-o", "demo.pdf"}, code: exitUsage, stderr: ".svg or .png"},
		{name: "missing directory", args: []string{"-o", "missing/demo.svg"}, code: exitFailure, stderr: "cannot write the chart to missing/demo.svg: no directory missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runPolite(t, "", "", 10*time.Second, append([]string{"demo"}, tt.args...)...)
			assert.Equal(t, tt.code, res.code, "stdout:\n%s\nstderr:\n%s", res.stdout, res.stderr)
			if tt.stdout != "" {
				assert.Contains(t, res.stdout, tt.stdout)
			}
			if tt.stderr != "" {
				assert.Contains(t, res.stderr, tt.stderr)
			}
			assert.NotContains(t, res.stderr, "polite demo: 3 clients", "the demo ran")
		})
	}
}

// TestDemoCreatePending checks the errors of a chart's file that cannot be
// written: a missing directory is said plainly, any other failure is
// reported as itself.
func TestDemoCreatePending(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))

	missing := filepath.Join(dir, "missing")
	_, err := createPending(filepath.Join(missing, "demo.svg"))
	assert.EqualError(t, err, "cannot write the chart to "+filepath.Join(missing, "demo.svg")+": no directory "+missing)

	_, err = createPending(filepath.Join(file, "demo.svg"))
	assert.ErrorContains(t, err, file+" is not a directory")

	// Not a missing directory, as any Stat failure once was said to be.
	long := filepath.Join(dir, strings.Repeat("x", 300))
	_, err = createPending(filepath.Join(long, "demo.svg"))
	require.ErrorIs(t, err, syscall.ENAMETOOLONG)
	assert.NotContains(t, err.Error(), "no directory")

	p, err := createPending(filepath.Join(dir, "demo.svg"))
	require.NoError(t, err)
	_, err = p.f.WriteString("<svg/>")
	require.NoError(t, err)
	require.NoError(t, p.commit())
	p.abort() // after commit: does nothing
	b, err := os.ReadFile(filepath.Join(dir, "demo.svg"))
	require.NoError(t, err)
	assert.Equal(t, "<svg/>", string(b))
}

// TestDemoOracleClosesBody checks that the oracle closes the request's
// body when it gives up waiting for a turn, as a RoundTripper must.
func TestDemoOracleClosesBody(t *testing.T) {
	next := demoStubNext(func(*http.Request) (*http.Response, error) {
		t.Error("the oracle sent a request whose context was done")
		return nil, errors.New("not sent")
	})
	o := newOracle(next, scenarioNamed(t, "bucket"), time.Now(), time.Second)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	body := &demoBody{Reader: strings.NewReader("body")}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/", body)
	require.NoError(t, err)

	resp, err := o.RoundTrip(req)
	require.ErrorIs(t, err, context.Canceled)
	assert.Nil(t, resp)
	assert.True(t, body.closed, "the body was not closed")
}

// demoStubNext is a func that implements http.RoundTripper: a stub next.
type demoStubNext func(*http.Request) (*http.Response, error)

// RoundTrip implements http.RoundTripper.
func (f demoStubNext) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// A demoBody is a request body that records whether it was closed.
type demoBody struct {
	io.Reader
	closed bool
}

// Close implements io.Closer.
func (c *demoBody) Close() error {
	c.closed = true
	return nil
}

// decodeReport decodes the demo's -json output.
func decodeReport(t *testing.T, stdout string) demoReport {
	t.Helper()
	var rep demoReport
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep), "stdout:\n%s", stdout)
	return rep
}

// checkComplete checks that rep has a result for every scenario and
// client, whose counts add up, and returns them by "scenario/client".
func checkComplete(t *testing.T, rep demoReport) map[string]demoResult {
	t.Helper()
	var names []string
	for _, s := range rep.Scenarios {
		names = append(names, s.Name)
	}
	var want []string
	for _, sc := range scenarios(demoLimit) {
		want = append(want, sc.name)
	}
	assert.Equal(t, want, names, "the report's scenarios")

	got := map[string]demoResult{}
	for _, r := range rep.Results {
		got[r.Scenario+"/"+r.Client] = r
	}
	assert.Len(t, rep.Results, len(scenarios(demoLimit))*len(clientNames()), "results")
	for _, sc := range scenarios(demoLimit) {
		for _, c := range clientNames() {
			r, ok := got[sc.name+"/"+c]
			if !assert.True(t, ok, "no result for %s/%s", sc.name, c) {
				continue
			}
			assert.Equal(t, r.Sent, r.Accepted+r.Rejected+r.Failed, "%s/%s", sc.name, c)
			assert.Positive(t, r.Sent, "%s/%s sent nothing", sc.name, c)
			assert.InDelta(t, sc.allowance(time.Duration(rep.DurationSeconds*float64(time.Second))), r.Allowed, 1e-6)
		}
	}
	return got
}

// checkResults checks that rep is complete, that the oracle used what the
// limit allowed, and that polite was refused far less than the plain
// client by the token bucket. Its bounds leave room for a loaded machine
// (2 shared cores, other packages' tests beside, -race): a client that
// misses its turns for want of a core uses less of the limit, and turns
// delayed then sent together may be refused.
func checkResults(t *testing.T, rep demoReport) {
	t.Helper()
	got := checkComplete(t, rep)
	for _, sc := range scenarios(demoLimit) {
		oracle := got[sc.name+"/"+clientOracle]
		assert.GreaterOrEqual(t, oracle.Utilization, 0.8, "the oracle's utilization in %s", sc.name)
		assert.LessOrEqual(t, oracle.Utilization, 1.05, "the oracle's utilization in %s", sc.name)
		// A turn the machine delays may fall into the next window.
		assert.Less(t, oracle.RejectedPct, 5.0, "the oracle refused in %s", sc.name)
	}
	plain, pol := got["bucket/"+clientPlain], got["bucket/"+clientPolite]
	assert.Greater(t, plain.RejectedPct, 40.0, "the plain client is refused most of the time")
	assert.Less(t, pol.RejectedPct, 20.0, "polite is refused rarely")
	assert.Less(t, 10*pol.Rejected, plain.Rejected, "polite is refused far less than plain")
	assert.Greater(t, pol.Utilization, 0.5, "polite gets most of what the limit allows")
	assert.Greater(t, got["outage/"+clientPlain].Failed, 2*got["outage/"+clientPolite].Failed,
		"plain hammers the server through its outage, polite does not")
}

// svgDoc is what the tests read of an SVG: its texts and its paths.
type svgDoc struct {
	texts []string
	paths []svgPath
}

// An svgPath is a path's outline and style.
type svgPath struct {
	d, style string
}

// parseSVG parses an SVG document from r, failing t if it is not XML.
func parseSVG(t *testing.T, r io.Reader) svgDoc {
	t.Helper()
	var doc svgDoc
	dec := xml.NewDecoder(r)
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "the chart is not XML")
		start, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if root == "" {
			root = start.Name.Local
		}
		switch start.Name.Local {
		case "text":
			var s string
			require.NoError(t, dec.DecodeElement(&s, &start))
			doc.texts = append(doc.texts, s)
		case "path":
			var p svgPath
			for _, a := range start.Attr {
				switch a.Name.Local {
				case "d":
					p.d = a.Value
				case "style":
					p.style = a.Value
				}
			}
			doc.paths = append(doc.paths, p)
		}
	}
	require.Equal(t, "svg", root, "the chart's root element")
	return doc
}

// hasTextContaining reports whether a text of doc contains s.
func (doc svgDoc) hasTextContaining(s string) bool {
	for _, txt := range doc.texts {
		if strings.Contains(txt, s) {
			return true
		}
	}
	return false
}

// lines returns the paths of doc whose style contains style and that have
// at least segments straight segments: lines across a panel.
func (doc svgDoc) lines(style string, segments int) int {
	n := 0
	for _, p := range doc.paths {
		if strings.Contains(p.style, style) && strings.Count(p.d, "L") >= segments {
			n++
		}
	}
	return n
}

// crosses returns the crosses of color (#RRGGBB) in doc: gonum draws each
// as two strokes of half a point, its legend's too.
func (doc svgDoc) crosses(color string) int {
	n := 0
	for _, p := range doc.paths {
		if strings.Contains(p.style, "stroke:"+color+";stroke-width:0.5") && strings.Count(p.d, "L") == 1 {
			n++
		}
	}
	return n / 2
}

// hexColor returns c as SVG writes it: #RRGGBB.
func hexColor(c color.Color) string {
	r, g, b, _ := c.RGBA()
	return fmt.Sprintf("#%02X%02X%02X", r>>8, g>>8, b>>8)
}
