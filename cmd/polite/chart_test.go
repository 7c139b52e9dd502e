package main

import (
	"bytes"
	"image/png"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// testChart returns a chart of two panels of 20 bins: the clients at the
// limit of 10 a bin, plain refused 40 times a bin, polite refused once.
func testChart() *chart {
	c := &chart{title: "the title", subtitle: "line one\nline two", bin: binWidth, d: 2 * time.Second}
	for _, name := range []string{"first panel", "second panel"} {
		p := chartPanel{title: name + "\ncaption", limit: plotter.XYs{xy(0, 10), xy(1, 5), xy(2, 5)}}
		for _, client := range clientNames() {
			s := chartSeries{client: client, label: clientLabel(client, nil)}
			for i := range 20 {
				s.accepted = append(s.accepted, 10)
				refused := 0.0
				switch {
				case client == clientPlain:
					refused = 40
				case client == clientPolite && i == 3:
					refused = 1
				}
				s.refused = append(s.refused, refused)
			}
			p.series = append(p.series, s)
		}
		c.panels = append(c.panels, p)
	}
	return c
}

// TestWriteChartSVG draws testChart as SVG and checks its texts, its
// lines and its marks.
func TestWriteChartSVG(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, writeChart(&buf, testChart(), "svg"))
	svg := parseSVG(t, &buf)

	for _, s := range []string{"the title", "line one", "line two", "first panel", "second panel", "caption",
		"the server's limit", "plain http.Client", "oracle (told the limit)", "polite (told nothing)"} {
		assert.Contains(t, svg.texts, s)
	}
	for _, client := range clientNames() {
		assert.Equal(t, 2, svg.lines("stroke:"+hexColor(styleOf(client).color), 19), "lines of %s", client)
	}
	assert.Equal(t, 2, svg.lines("stroke-dasharray", 3), "limit lines")
	// plain refused in every bin, clamped to the top; polite once a panel.
	assert.Equal(t, 2*20+1, svg.crosses(hexColor(refusalGlyph(clientPlain).Color)), "plain's marks and its legend's")
	assert.Equal(t, 2*1+1, svg.crosses(hexColor(refusalGlyph(clientPolite).Color)), "polite's marks and its legend's")
	assert.Equal(t, 1, svg.crosses(hexColor(refusalGlyph(clientOracle).Color)), "the oracle's legend only: it was never refused")
}

// TestWriteChartPNG draws testChart as PNG and checks its size and that
// polite's line is drawn.
func TestWriteChartPNG(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, writeChart(&buf, testChart(), "png"))
	img, err := png.Decode(&buf)
	require.NoError(t, err)
	b := img.Bounds()
	assert.InDelta(t, float64(chartWidth/vg.Inch)*chartDPI, b.Dx(), 1)
	assert.InDelta(t, float64((chartHeader+2*chartPanelHeight)/vg.Inch)*chartDPI, b.Dy(), 1)

	// polite's line is drawn: some pixels are its blue.
	pr, pg, pb, _ := styleOf(clientPolite).color.RGBA()
	blue := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bb, _ := img.At(x, y).RGBA()
			if r == pr && g == pg && bb == pb {
				blue++
			}
		}
	}
	assert.Greater(t, blue, 500, "pixels of polite's blue")
}

// TestWriteChartFormat checks that an unknown format is refused.
func TestWriteChartFormat(t *testing.T) {
	assert.ErrorContains(t, writeChart(&bytes.Buffer{}, testChart(), "pdf"), `no chart format "pdf"`)
}

// TestPanelYmax checks the top of a panel's y axis.
func TestPanelYmax(t *testing.T) {
	tests := []struct {
		name     string
		limit    float64
		accepted float64
		want     float64
	}{
		{name: "room for 2.5 times the limit", limit: 10, accepted: 12, want: 30},
		{name: "the highest count", limit: 10, accepted: 52, want: 55},
		{name: "nothing", limit: 0, accepted: 0, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := chartPanel{
				limit:  plotter.XYs{xy(0, tt.limit), xy(1, tt.limit)},
				series: []chartSeries{{client: clientPlain, accepted: []float64{tt.accepted}}},
			}
			assert.Equal(t, tt.want, p.ymax())
		})
	}
}

// TestSecondTicks checks the labels of the time axis for short and long
// runs.
func TestSecondTicks(t *testing.T) {
	labels := func(lo, hi float64) []string {
		var out []string
		for _, tk := range (secondTicks{}).Ticks(lo, hi) {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	assert.Equal(t, []string{"0", "1", "2", "3"}, labels(0, 3))
	assert.Equal(t, []string{"0", "2", "4", "6", "8", "10", "12", "14", "16", "18", "20", "22", "24"}, labels(0, 24))
	assert.Equal(t, []string{"0", "5", "10", "15", "20", "25", "30", "35", "40", "45", "50", "55", "60"}, labels(0, 60))

	// The marks: every second, up to a step of 5 s; then a fifth of
	// the step.
	spacing := func(lo, hi float64) float64 {
		ticks := (secondTicks{}).Ticks(lo, hi)
		require.GreaterOrEqual(t, len(ticks), 2)
		return ticks[1].Value - ticks[0].Value
	}
	for _, tt := range []struct{ hi, want float64 }{{3, 1}, {24, 1}, {60, 1}, {120, 2}, {300, 6}, {3600, 12}} {
		assert.InDelta(t, tt.want, spacing(0, tt.hi), 1e-9, "marks of a run of %gs", tt.hi)
	}
}
