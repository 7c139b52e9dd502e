package main

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// A chart is the demo's picture: for each scenario, a panel of the
// requests each client had accepted in every bin of the run, against the
// server's limit, with the bins where it was refused marked.
type chart struct {
	title    string
	subtitle string
	bin      time.Duration // the width of a bin
	d        time.Duration // the length of the run
	panels   []chartPanel
}

// A chartPanel is one scenario's panel.
type chartPanel struct {
	title string
	// limit is the server's limit in requests a bin, as a step line: each
	// point's value holds until the next point.
	limit  plotter.XYs
	series []chartSeries
}

// A chartSeries is one client's counts in a panel, bin by bin.
type chartSeries struct {
	client   string    // plain, oracle or polite: picks the style
	label    string    // the legend's name for it
	accepted []float64 // requests let through in each bin
	refused  []float64 // requests refused in each bin (429 or 503)
}

// A seriesStyle is how a client's line and marks are drawn.
type seriesStyle struct {
	color color.Color
	width vg.Length
}

// The chart's look.
const (
	chartWidth       = 11 * vg.Inch
	chartHeader      = 1.3 * vg.Inch // the title, subtitle and legend
	chartPanelHeight = 2.35 * vg.Inch
	chartDPI         = 110 // of a PNG
)

// styleOf returns the style of client's series: polite prominent, the
// others behind it.
func styleOf(client string) seriesStyle {
	switch client {
	case clientPolite:
		return seriesStyle{color: color.RGBA{R: 0x1f, G: 0x5f, B: 0xd0, A: 0xff}, width: vg.Points(2.2)}
	case clientPlain:
		return seriesStyle{color: color.RGBA{R: 0xf0, G: 0x80, B: 0x10, A: 0xff}, width: vg.Points(1)}
	default:
		// The oracle, the best a client can do: a wide pale band that
		// the others are read against.
		return seriesStyle{color: color.RGBA{R: 0xb8, G: 0xb8, B: 0xb8, A: 0xff}, width: vg.Points(5)}
	}
}

// limitStyle is how the server's limit is drawn: a dashed black step line.
func limitStyle() draw.LineStyle {
	return draw.LineStyle{Color: color.Black, Width: vg.Points(1.4), Dashes: []vg.Length{vg.Points(6), vg.Points(3)}}
}

// sansFont returns the chart's font at size points.
func sansFont(size vg.Length) font.Font {
	return font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size)
}

// sans returns the style of the chart's own text at size points.
func sans(size vg.Length) text.Style {
	return text.Style{Color: color.Black, Font: sansFont(size), Handler: plot.DefaultTextHandler}
}

// writeChart draws c and writes it to w as format, "svg" or "png".
func writeChart(w io.Writer, c *chart, format string) error {
	height := chartHeader + vg.Length(len(c.panels))*chartPanelHeight
	var canvas vg.CanvasWriterTo
	switch format {
	case "svg":
		canvas = vgsvg.New(chartWidth, height)
	case "png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(chartWidth, height), vgimg.UseDPI(chartDPI))}
	default:
		return fmt.Errorf("no chart format %q: use .svg or .png", format)
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	header := dc
	header.Min.Y = dc.Max.Y - chartHeader
	c.drawHeader(header)

	body := dc
	body.Max.Y = header.Min.Y
	plots := make([][]*plot.Plot, len(c.panels))
	for i, p := range c.panels {
		pl, err := c.plotPanel(p, p.ymax(), i == len(c.panels)-1)
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{pl}
	}
	tiles := draw.Tiles{
		Rows: len(plots), Cols: 1,
		PadX: vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadLeft: 4 * vg.Millimeter, PadRight: 6 * vg.Millimeter, PadBottom: 2 * vg.Millimeter,
	}
	canvases := plot.Align(plots, tiles, body)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return fmt.Errorf("drawing the chart: %w", err)
	}
	out := buf.Bytes()
	if format == "svg" {
		// The SVG names its font, Liberation Sans, and nothing else: a
		// viewer without it would fall back to a serif. Arial and
		// Helvetica have the same metrics, so the text keeps its place.
		out = bytes.ReplaceAll(out, []byte("font-family:Liberation Sans;"), []byte(svgFontFamily))
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("writing the chart: %w", err)
	}
	return nil
}

// svgFontFamily is the SVG's font, with fallbacks of the same metrics.
const svgFontFamily = "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"

// ymax returns the top of p's y axis: room for its highest accepted count
// and for 2.5 times its highest limit, so that a client's flood of
// refusals, marked at the top, clamped, does not squash the scale.
func (p chartPanel) ymax() float64 {
	top := 0.0
	for _, xy := range p.limit {
		top = max(top, 2.5*xy.Y)
	}
	for _, s := range p.series {
		for _, v := range s.accepted {
			top = max(top, v)
		}
	}
	return 5 * math.Ceil(max(top, 1)*1.05/5)
}

// plotPanel returns the plot of p, its y axis up to ymax; the last panel
// has the x axis's label.
func (c *chart) plotPanel(p chartPanel, ymax float64, last bool) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.title
	pl.Title.TextStyle.Font = sansFont(11)
	pl.Title.Padding = vg.Points(4)
	for _, ax := range []*plot.Axis{&pl.X, &pl.Y} {
		ax.Label.TextStyle.Font = sansFont(9)
		ax.Tick.Label.Font = sansFont(8)
	}
	pl.X.Min, pl.X.Max = 0, c.d.Seconds()
	pl.X.Tick.Marker = secondTicks{}
	if last {
		pl.X.Label.Text = "time since the start (s)"
	}
	pl.Y.Min, pl.Y.Max = 0, ymax
	pl.Y.Label.Text = fmt.Sprintf("accepted / %v", c.bin)

	grid := plotter.NewGrid()
	grid.Vertical.Color = color.Gray{Y: 0xe4}
	grid.Horizontal.Color = color.Gray{Y: 0xe4}
	pl.Add(grid)

	// Lines, the least important first, so that polite's is on top of
	// the others; the limit, dashed, on top of them all; the marks last.
	for _, s := range p.series {
		line, err := plotter.NewLine(c.points(s.accepted, ymax, false))
		if err != nil {
			return nil, fmt.Errorf("plotting %s in %s: %w", s.client, p.title, err)
		}
		st := styleOf(s.client)
		line.Color, line.Width = st.color, st.width
		pl.Add(line)
	}
	limit, err := plotter.NewLine(p.limit)
	if err != nil {
		return nil, fmt.Errorf("plotting the limit in %s: %w", p.title, err)
	}
	limit.LineStyle = limitStyle()
	limit.StepStyle = plotter.PostStep
	pl.Add(limit)
	for _, s := range p.series {
		pts := c.points(s.refused, ymax, true)
		if len(pts) == 0 {
			continue
		}
		marks, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, fmt.Errorf("plotting %s's refusals in %s: %w", s.client, p.title, err)
		}
		marks.GlyphStyle = refusalGlyph(s.client)
		pl.Add(marks)
	}
	return pl, nil
}

// points returns counts as points at the middle of their bins, each at
// most ymax; if sparse, only the bins whose count is not 0.
func (c *chart) points(counts []float64, ymax float64, sparse bool) plotter.XYs {
	pts := make(plotter.XYs, 0, len(counts))
	w := c.bin.Seconds()
	for i, v := range counts {
		if sparse && v == 0 {
			continue
		}
		pts = append(pts, plotter.XY{X: (float64(i) + 0.5) * w, Y: min(v, ymax)})
	}
	return pts
}

// refusalGlyph is the mark of a bin where client was refused.
func refusalGlyph(client string) draw.GlyphStyle {
	c := styleOf(client).color
	if client == clientOracle {
		c = color.Gray{Y: 0x70} // its band's grey is too pale for a mark
	}
	return draw.GlyphStyle{Color: c, Radius: vg.Points(2.2), Shape: draw.CrossGlyph{}}
}

// drawHeader draws the chart's title, subtitle and legend in c.
func (c *chart) drawHeader(dc draw.Canvas) {
	left := dc.Min.X + 6*vg.Millimeter
	title := sans(15)
	y := dc.Max.Y - 5*vg.Millimeter - title.Rectangle(c.title).Max.Y
	dc.FillText(title, vg.Point{X: left, Y: y}, c.title)
	sub := sans(10)
	sub.Color = color.Gray{Y: 0x40}
	for _, line := range strings.Split(c.subtitle, "\n") {
		y -= sub.Rectangle(line).Max.Y + vg.Points(3)
		dc.FillText(sub, vg.Point{X: left, Y: y}, line)
	}

	// The legend, a row at a time.
	sty := sans(10)
	thumb := 9 * vg.Millimeter
	for _, row := range c.legend() {
		y -= 5 * vg.Millimeter
		x := left
		for _, e := range row {
			h := sty.Rectangle(e.label).Max.Y
			// Several thumbnails share the icon's width, side by side.
			each := thumb / vg.Length(max(1, len(e.thumbs)))
			for i, t := range e.thumbs {
				at := x + vg.Length(i)*each
				icon := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
					Min: vg.Point{X: at, Y: y},
					Max: vg.Point{X: at + each, Y: y + h},
				}}
				t.Thumbnail(&icon)
			}
			x += thumb + vg.Points(4)
			dc.FillText(sty, vg.Point{X: x, Y: y}, e.label)
			x += sty.Width(e.label) + 9*vg.Millimeter
		}
	}
}

// A legendEntry is one name of the legend and how it is drawn.
type legendEntry struct {
	label  string
	thumbs []plot.Thumbnailer
}

// legend returns the rows of the chart's legend: the limit and each
// client, then what the marks mean.
func (c *chart) legend() [][]legendEntry {
	limit := &plotter.Line{LineStyle: limitStyle()}
	lines := []legendEntry{{label: "the server's limit", thumbs: []plot.Thumbnailer{limit}}}
	var marks []plot.Thumbnailer
	if len(c.panels) > 0 {
		for _, s := range c.panels[0].series {
			st := styleOf(s.client)
			line := &plotter.Line{LineStyle: draw.LineStyle{Color: st.color, Width: st.width}}
			lines = append(lines, legendEntry{label: s.label, thumbs: []plot.Thumbnailer{line}})
			marks = append(marks, &plotter.Scatter{GlyphStyle: refusalGlyph(s.client)})
		}
	}
	return [][]legendEntry{lines, {{
		label:  fmt.Sprintf("requests refused (429 or 503) in %v, in the colour of the client refused; more than the panel holds are marked at its top", c.bin),
		thumbs: marks,
	}}}
}

// secondTicks labels the x axis every 1, 2, 5, 10, 30 or 60 seconds, the
// shortest step that cuts the run into at most 15 (60 s for runs past 15
// minutes), and marks it every fifth of that step but at most every second:
// every second for steps up to 5 s, every 2, 6 or 12 s for longer ones.
type secondTicks struct{}

// Ticks implements plot.Ticker.
func (secondTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1.0
	for _, s := range []float64{1, 2, 5, 10, 30, 60} {
		step = s
		if (hi-lo)/s <= 15 {
			break
		}
	}
	minor := math.Max(1, step/5)
	var ticks []plot.Tick
	for v := math.Ceil(lo/minor) * minor; v <= hi+1e-9; v += minor {
		t := plot.Tick{Value: v}
		if math.Mod(v, step) < 1e-9 {
			t.Label = strconv.FormatFloat(v, 'f', -1, 64)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// xy returns the point (x, y).
func xy(x, y float64) plotter.XY { return plotter.XY{X: x, Y: y} }
