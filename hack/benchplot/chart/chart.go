package chart

import (
	"bytes"
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/hack/benchplot/results"
)

// Panels are the measurements plotted, left to right: the two targets of
// BENCHMARKS.md that compare the proxies.
var Panels = []string{results.TableComplete, results.CPUUntilTable}

// The size of one panel.
const (
	panelWidth  = 5 * vg.Inch
	panelHeight = 3.6 * vg.Inch
)

// series is one proxy's bars: its label, colour and where its bar sits
// within a group, in units of the distance between groups.
type series struct {
	proxy  string
	color  color.Color
	offset float64
}

var proxies = []series{
	{results.KubeProxy, color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}, -0.19},
	{results.Ours, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, +0.19},
}

// barFraction is a bar's width in units of the distance between groups:
// two bars at ±0.19 leave a gap between them and a wider one between
// groups.
const barFraction = 0.34

// SVG draws Panels side by side for the selected scales.
func SVG(sel []results.Selected) ([]byte, error) {
	if len(sel) == 0 {
		return nil, fmt.Errorf("no scales to plot")
	}
	var row []*plot.Plot
	var bars [][]*plotter.BarChart
	for _, name := range Panels {
		p, b, err := panel(sel, name)
		if err != nil {
			return nil, fmt.Errorf("plot %q: %w", name, err)
		}
		row, bars = append(row, p), append(bars, b)
	}
	c := vgsvg.New(panelWidth*vg.Length(len(row)), panelHeight)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Millimeter * 8,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, draw.New(c))
	for i, p := range row {
		// A bar's width is in canvas units while its place is in data
		// units: only now, with the data area known, can a width be a
		// fraction of the distance between groups.
		da := p.DataCanvas(canvases[0][i])
		w := (da.Max.X - da.Min.X) / vg.Length(p.X.Max-p.X.Min) * barFraction
		for _, b := range bars[i] {
			b.Width = w
		}
		p.Draw(canvases[0][i])
	}
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("write svg: %w", err)
	}
	return buf.Bytes(), nil
}

// panel is one measurement's grouped bars, with bars of a width still to
// be set.
func panel(sel []results.Selected, name string) (*plot.Plot, []*plotter.BarChart, error) {
	p := plot.New()
	p.Title.Text = name
	p.Title.Padding = vg.Millimeter * 3
	p.X.Label.Text = "services"
	var names []string
	for _, s := range sel {
		names = append(names, fmt.Sprintf("%s\n%s, %s", results.Thousands(s.Services), s.From.When.Format("Jan 2"), rounds(s.Rounds())))
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(sel))-0.5
	p.Y.Min = 0
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Millimeter * 4

	var all []*plotter.BarChart
	top := 0.0
	for _, sr := range proxies {
		var heights plotter.Values
		var whiskers errorBars
		var labels plotter.XYLabels
		for i, s := range sel {
			st := s.Stat(sr.proxy, name)
			heights = append(heights, st.Median) // 0, no bar, when missing
			if st.N == 0 {
				continue
			}
			if p.Y.Label.Text == "" && st.Unit != "" {
				p.Title.Text = name + " (" + st.Unit + ")"
				p.Y.Label.Text = "median over rounds (" + st.Unit + ")"
			}
			x := float64(i) + sr.offset
			if st.N > 1 {
				whiskers.XYs = append(whiskers.XYs, plotter.XY{X: x, Y: st.Median})
				whiskers.YErrors = append(whiskers.YErrors, struct{ Low, High float64 }{st.Median - st.Min, st.Max - st.Median})
			}
			labels.XYs = append(labels.XYs, plotter.XY{X: x, Y: st.Max})
			label := results.Format(st.Median)
			if st.LowerBound() {
				label = "> " + label // some rounds stopped waiting: BENCHMARKS.md's note
			}
			labels.Labels = append(labels.Labels, label)
			top = max(top, st.Max)
		}
		bars, err := plotter.NewBarChart(heights, 1) // the width is set in SVG
		if err != nil {
			return nil, nil, fmt.Errorf("%s bars: %w", sr.proxy, err)
		}
		bars.XMin = sr.offset
		bars.Color = sr.color
		bars.LineStyle.Width = 0
		p.Add(bars)
		p.Legend.Add(sr.proxy, bars)
		all = append(all, bars)
		if len(whiskers.XYs) > 0 {
			eb, err := plotter.NewYErrorBars(whiskers)
			if err != nil {
				return nil, nil, fmt.Errorf("%s whiskers: %w", sr.proxy, err)
			}
			eb.CapWidth = vg.Millimeter * 3
			p.Add(eb)
		}
		if len(labels.XYs) > 0 {
			l, err := plotter.NewLabels(labels)
			if err != nil {
				return nil, nil, fmt.Errorf("%s labels: %w", sr.proxy, err)
			}
			for i := range l.TextStyle {
				l.TextStyle[i].XAlign = text.XCenter
				l.TextStyle[i].YAlign = text.YBottom
			}
			l.Offset = vg.Point{Y: vg.Millimeter}
			p.Add(l)
		}
	}
	// Room above the tallest whisker for its label and the legend.
	p.Y.Max = top * 1.25
	return p, all, nil
}

func rounds(n int) string {
	if n == 1 {
		return "1 round"
	}
	return fmt.Sprintf("%d rounds", n)
}

// errorBars is the whiskers' input: points and their low and high
// distances.
type errorBars struct {
	plotter.XYs
	plotter.YErrors
}

func (e errorBars) Len() int { return len(e.XYs) }
