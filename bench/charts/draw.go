package charts

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// colors give each library the same color in every chart.
var colors = map[string]color.Color{
	Holdfast:    color.RGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff},
	Rueidislock: color.RGBA{R: 0xe0, G: 0x7b, B: 0x16, A: 0xff},
	Redsync:     color.RGBA{R: 0x2c, G: 0x9a, B: 0x46, A: 0xff},
	Redislock:   color.RGBA{R: 0x8e, G: 0x4a, B: 0xb0, A: 0xff},
}

var grey = color.Gray{Y: 0x80}

// chart is one SVG file: a row of plots.
type chart struct {
	file  string
	build func(*Set) ([]*plot.Plot, error)
	// width of one plot; the height is fixed.
	width vg.Length
}

// charts are the files Draw writes, in order.
var charts = []chart{
	{"renewal-calls.svg", renewalCharts, 11 * vg.Centimeter},
	{"heap-per-hold.svg", heapCharts, 11 * vg.Centimeter},
	{"waiting-commands.svg", waitingCharts, 10 * vg.Centimeter},
	{"throughput.svg", throughputCharts, 9.5 * vg.Centimeter},
}

const chartHeight = 9 * vg.Centimeter

// Draw writes every chart as an SVG file into dir and returns the files'
// paths. A chart whose figures the run does not hold is an error, so that
// a partial run does not silently leave an old picture in place.
func Draw(s *Set, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range charts {
		plots, err := c.build(s)
		if err != nil {
			return out, fmt.Errorf("charts: %s: %w", c.file, err)
		}
		path := filepath.Join(dir, c.file)
		if err := saveRow(plots, c.width, path); err != nil {
			return out, fmt.Errorf("charts: %s: %w", c.file, err)
		}
		out = append(out, path)
	}
	return out, nil
}

// saveRow draws plots side by side into one SVG file.
func saveRow(plots []*plot.Plot, width vg.Length, path string) error {
	w := width * vg.Length(len(plots))
	img := vgsvg.New(w, chartHeight)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := img.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	return p
}

// logY puts the Y axis on a log scale with ticks at powers of ten.
func logY(p *plot.Plot) {
	// gonum centres an axis label on the arithmetic mean of the axis's
	// ends, near the top of a log axis, and pads the plot to fit it; the
	// quantity goes into the title instead.
	if p.Y.Label.Text != "" {
		p.Title.Text += "\n" + p.Y.Label.Text
		p.Y.Label.Text = ""
	}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = powTicks{top: math.Inf(1)}
}

// powTicks marks the powers of ten of an axis, labelled 1, 10, … 1k, 10k,
// 100k, 1M, up to top and unmarked above it (room left for a legend).
type powTicks struct{ top float64 }

func (t powTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)); ; e++ {
		v := math.Pow(10, e)
		if v > hi*1.0001 || v > t.top*1.0001 {
			return out
		}
		if v >= lo*0.9999 {
			out = append(out, plot.Tick{Value: v, Label: short(v)})
		}
	}
}

// short writes a power of ten as 1, 10, 100, 1k, 10k, 100k, 1M, ….
func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	}
	return fmt.Sprintf("%g", v)
}

// decades widens a log Y axis to whole powers of ten, so that it has at
// least two labelled ticks and the points do not sit on its ends.
func decades(p *plot.Plot) {
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(p.Y.Min)))
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(p.Y.Max)+0.15))
	if p.Y.Max/p.Y.Min < 100 {
		p.Y.Min = p.Y.Max / 100
	}
}

// sizes are the hold counts of the scale scenario.
var sizes = []struct {
	n    float64
	name string
}{{1_000, "1k"}, {10_000, "10k"}, {100_000, "100k"}}

// bySize plots metric of the scale scenario against the number of holds,
// one line per library that has it, on log-log axes. prefix is "scale-" or
// "scale-cluster-".
func bySize(s *Set, p *plot.Plot, prefix, metric string, libs []string) (int, error) {
	lines, lostAny := 0, false
	for _, lib := range libs {
		var pts, lost plotter.XYs
		for _, sz := range sizes {
			f, ok := s.Get(prefix+sz.name, lib, metric)
			if !ok || f.Value <= 0 {
				continue
			}
			pt := plotter.XY{X: sz.n, Y: f.Value}
			pts = append(pts, pt)
			if l, ok := s.Get(prefix+sz.name, lib, "lost_holds"); ok && l.Value > 0 {
				lost = append(lost, pt)
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return lines, err
		}
		l.Color, sc.Color = colors[lib], colors[lib]
		l.Width = vg.Points(1.5)
		sc.Shape = draw.CircleGlyph{}
		p.Add(l, sc)
		p.Legend.Add(lib, l, sc)
		if len(lost) > 0 {
			// A run that lost holds did not reach a steady state there:
			// its points are drawn as rings on white.
			bg, err := plotter.NewScatter(lost)
			if err != nil {
				return lines, err
			}
			bg.Color, bg.Shape, bg.Radius = color.White, draw.CircleGlyph{}, vg.Points(3.5)
			ring, err := plotter.NewScatter(lost)
			if err != nil {
				return lines, err
			}
			ring.Color, ring.Shape, ring.Radius = colors[lib], draw.RingGlyph{}, vg.Points(4)
			p.Add(bg, ring)
			lostAny = true
		}
		lines++
	}
	if lostAny {
		ring, err := plotter.NewScatter(plotter.XYs{{X: 1_000, Y: 1}})
		if err != nil {
			return lines, err
		}
		ring.Color, ring.Shape, ring.Radius = grey, draw.RingGlyph{}, vg.Points(4)
		p.Legend.Add("holds were lost", ring)
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 1_000, Label: "1,000"}, {Value: 10_000, Label: "10,000"}, {Value: 100_000, Label: "100,000"}})
	p.X.Min, p.X.Max = 700, 140_000
	logY(p)
	decades(p)
	p.Y.Tick.Marker = powTicks{top: p.Y.Max}
	p.Y.Max *= 30 // room for the legend above the lines
	return lines, nil
}

func renewalCharts(s *Set) ([]*plot.Plot, error) {
	var out []*plot.Plot
	for _, c := range []struct{ prefix, title string }{
		{"scale-", "One Redis server"},
		{"scale-cluster-", "Redis Cluster, 3 masters"},
	} {
		p := newPlot(c.title, "locks held", "renewal calls/s, log scale")
		// What a client renewing every hold once a second sends.
		ref, err := plotter.NewLine(plotter.XYs{{X: 1_000, Y: 1_000}, {X: 100_000, Y: 100_000}})
		if err != nil {
			return nil, err
		}
		ref.Color, ref.Dashes = grey, []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(ref)
		p.Legend.Add("one call per hold per second", ref)
		n, err := bySize(s, p, c.prefix, "renewal_commands_per_s", []string{Holdfast, Rueidislock, Redsync})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("no renewal_commands_per_s under %s*", c.prefix)
		}
		out = append(out, p)
	}
	return out, nil
}

func heapCharts(s *Set) ([]*plot.Plot, error) {
	var out []*plot.Plot
	for _, c := range []struct{ prefix, title string }{
		{"scale-", "One Redis server"},
		{"scale-cluster-", "Redis Cluster, 3 masters"},
	} {
		p := newPlot(c.title, "locks held", "heap bytes per held lock, log scale")
		n, err := bySize(s, p, c.prefix, "heap_bytes_per_lock", []string{Holdfast, Rueidislock, Redsync})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("no heap_bytes_per_lock under %s*", c.prefix)
		}
		out = append(out, p)
	}
	return out, nil
}

// perLibrary draws one figure per library as a bar (or, on a log scale, a
// point), with the min–max over rounds as an error bar and the median
// written beside it. It returns how many libraries had the figure.
func perLibrary(s *Set, p *plot.Plot, scenario, metric string, libs []string, log bool) (int, error) {
	var names []string
	for _, lib := range libs {
		f, ok := s.Get(scenario, lib, metric)
		if !ok || (log && f.Value <= 0) {
			continue
		}
		x := float64(len(names))
		names = append(names, lib)
		if log {
			sc, err := plotter.NewScatter(plotter.XYs{{X: x, Y: f.Value}})
			if err != nil {
				return 0, err
			}
			sc.Color, sc.Shape, sc.Radius = colors[lib], draw.CircleGlyph{}, vg.Points(5)
			p.Add(sc)
		} else {
			b, err := plotter.NewBarChart(plotter.Values{f.Value}, vg.Points(24))
			if err != nil {
				return 0, err
			}
			b.Color, b.XMin, b.LineStyle.Width = colors[lib], x, 0
			p.Add(b)
		}
		if f.Max > f.Min {
			e, err := plotter.NewYErrorBars(spread{plotter.XYs{{X: x, Y: f.Value}}, plotter.YErrors{{Low: f.Value - f.Min, High: f.Max - f.Value}}})
			if err != nil {
				return 0, err
			}
			p.Add(e)
		}
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: f.Max}}, Labels: []string{number(f.Value)}})
		if err != nil {
			return 0, err
		}
		lb.TextStyle[0].XAlign = text.XCenter
		lb.Offset = vg.Point{Y: vg.Points(4)}
		if log {
			lb.TextStyle[0].XAlign = text.XLeft
			lb.Offset = vg.Point{X: vg.Points(8), Y: -vg.Points(4)}
		}
		p.Add(lb)
	}
	if len(names) == 0 {
		return 0, nil
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(names))-0.4
	p.X.Tick.Label.Font.Size = vg.Points(9)
	if log {
		logY(p)
		decades(p)
	} else {
		p.Y.Min = 0
		p.Y.Max *= 1.12 // room for the labels
	}
	return len(names), nil
}

// spread is a point with its error bar.
type spread struct {
	plotter.XYs
	plotter.YErrors
}

func waitingCharts(s *Set) ([]*plot.Plot, error) {
	var out []*plot.Plot
	for _, c := range []struct{ scenario, title string }{
		{"waiting", "100 waiters on one lock, 5 s"},
		{"scale-waiters", "10,000 waiters on 1,000 locks, 3 s"},
	} {
		p := newPlot(c.title, "", "commands the waiters sent, log scale")
		n, err := perLibrary(s, p, c.scenario, "waiter_commands", Libraries, true)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("no waiter_commands in %s", c.scenario)
		}
		out = append(out, p)
	}
	return out, nil
}

func throughputCharts(s *Set) ([]*plot.Plot, error) {
	var out []*plot.Plot
	for _, c := range []struct{ scenario, metric, title, y string }{
		{"uncontended", "cycles_per_s", "Uncontended, 64 goroutines", "lock+release cycles/s"},
		{"hotlock", "handoffs_per_s", "One hot lock, 64 goroutines", "handoffs/s to another goroutine"},
		{"uncontended", "redis_cpu_us_per_cycle", "Redis CPU per cycle", "µs of redis-server CPU per cycle"},
	} {
		p := newPlot(c.title, "", c.y)
		n, err := perLibrary(s, p, c.scenario, c.metric, Libraries, false)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("no %s in %s", c.metric, c.scenario)
		}
		out = append(out, p)
	}
	return out, nil
}

// number formats a figure for a label or a table: three significant
// digits at most, thousands grouped.
func number(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 1000:
		return group(int64(math.Round(v)))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

func group(n int64) string {
	if n < 0 {
		return "-" + group(-n)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
