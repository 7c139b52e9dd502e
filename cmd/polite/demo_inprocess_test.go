package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDemoInProcess runs a short demo in the test's process rather than
// the built binary, so that go test -race checks the demo's concurrent
// code: servers, workers, clients, progress and chart. Its results depend
// on the load of the race detector, so only their shape is checked; the
// goroutines it leaves, if any, fail the package (TestMain).
func TestDemoInProcess(t *testing.T) {
	t.Parallel()
	// The demo ends with an error, not a hang, if it outlives the limit.
	ctx, cancel := context.WithTimeout(t.Context(), demoLimitTime)
	defer cancel()
	svg := filepath.Join(t.TempDir(), "d.svg")
	var out, errb bytes.Buffer
	e := &env{
		stdin:  strings.NewReader(""),
		stdout: &out,
		stderr: &errb,
		getenv: func(string) string { return "" },
	}
	code := run(ctx, []string{"demo", "-duration", "1s", "-o", svg, "-json"}, e)
	require.Equal(t, exitOK, code, "stderr:\n%s", errb.String())

	rep := decodeReport(t, out.String())
	assert.Equal(t, 0, rep.Fleet)
	assert.Empty(t, rep.FleetNamespace)
	assert.Equal(t, svg, rep.Chart)
	checkComplete(t, rep)

	f, err := os.Open(svg)
	require.NoError(t, err)
	defer f.Close()
	doc := parseSVG(t, f)
	for _, sc := range scenarios(demoLimit) {
		assert.Contains(t, doc.texts, sc.panelTitle(), "panel title of %s", sc.name)
	}
}
