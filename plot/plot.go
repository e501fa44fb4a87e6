// Package plot draws gradsolve's results with gonum.org/v1/plot:
// trajectories (states against time), phase portraits, loss curves, and
// fitted against observed states. Every function returns a *Figure, which
// writes PNG, SVG or PDF (Save, WriteTo) and has PNG, SVG and HTML
// methods, so notebook kernels that look for them (GoNB through
// progress/notebook.Display, gophernotes) show it.
//
// # Shapes
//
// Solutions are ode.Solution values with save times: trajectory i's state
// at save time k is Ys[(i*K+k)*Dim:(i*K+k+1)*Dim], K = len(SaveAt). Plot
// dense curves by giving the problem many save times (see
// problems.LinSpace). Trajectory and component lists that are nil mean
// all (at most MaxLines trajectories). Saved states that an engine kept
// in its memory (ode.Settings.KeepSaves) are copied to the host first
// (Solution.HostSaves): the plot functions may set the solution's Ys.
package plot

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gradsolve-go/gradsolve/internal/atomicfile"
	"github.com/gradsolve-go/gradsolve/ode"
)

// Default figure size, the most trajectories drawn when none are named,
// and the most entries a legend lists (AddLegend).
const (
	DefaultWidth  = 6 * vg.Inch
	DefaultHeight = 4 * vg.Inch
	MaxLines      = 16
	MaxLegend     = 7
)

// AddLegend adds entry k of total to p's legend: name, drawn as thumbs. A
// legend lists at most MaxLegend entries, which fit beside the data of a
// figure of the default size (and are as many as the line colours of
// plotutil.DefaultColors, after which colours repeat): with more, entries
// MaxLegend−1 on are not listed, and entry MaxLegend−1 adds a line "and N
// more" in their place. Every figure of this package, and the command's,
// labels its lines through it.
func AddLegend(p *gplot.Plot, k, total int, name string, thumbs ...gplot.Thumbnailer) {
	switch {
	case total <= MaxLegend || k < MaxLegend-1:
		p.Legend.Add(name, thumbs...)
	case k == MaxLegend-1:
		p.Legend.Add(fmt.Sprintf("and %d more", total-k))
	}
}

// Figure is a plot with its size. Plot may be changed (titles, axes,
// more plotters) before writing.
type Figure struct {
	Plot          *gplot.Plot
	Width, Height vg.Length // 0 means DefaultWidth, DefaultHeight
}

func newFigure(title, x, y string) *Figure {
	p := gplot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	return &Figure{Plot: p}
}

func (f *Figure) size() (vg.Length, vg.Length) {
	w, h := f.Width, f.Height
	if w == 0 {
		w = DefaultWidth
	}
	if h == 0 {
		h = DefaultHeight
	}
	return w, h
}

// WriteTo writes the figure to w in the given format: "png", "svg",
// "pdf", "eps", "jpg" or "tif".
func (f *Figure) WriteTo(w io.Writer, format string) error {
	wd, ht := f.size()
	wt, err := f.Plot.WriterTo(wd, ht, format)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	_, err = wt.WriteTo(w)
	return err
}

// Formats are the formats WriteTo and Save write, by their file
// extensions.
var Formats = []string{"png", "svg", "pdf", "eps", "jpg", "jpeg", "tif", "tiff"}

// Save writes the figure to a file, in the format its extension names
// (.png, .svg, .pdf, ...: see Formats). The format is checked and the
// figure drawn before the file is touched; it is then written through a
// temporary file in the same directory, synced and renamed into place,
// so that an existing file is replaced whole or, on any error, left as it
// was.
func (f *Figure) Save(path string) error {
	ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	if ext == "" {
		return fmt.Errorf("plot: %s: the file name has no extension to choose a format (.png, .svg, .pdf)", path)
	}
	if !slices.Contains(Formats, ext) {
		return fmt.Errorf("plot: %s: unsupported format %q; want one of %s", path, ext, strings.Join(Formats, ", "))
	}
	var b bytes.Buffer
	if err := f.WriteTo(&b, ext); err != nil {
		return fmt.Errorf("plot: %s: %w", path, err)
	}
	if err := atomicfile.WriteFile(path, b.Bytes()); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// PNG returns the figure as PNG bytes (nil if drawing fails, which does
// not happen for the figures of this package).
func (f *Figure) PNG() []byte {
	var b bytes.Buffer
	if f.WriteTo(&b, "png") != nil {
		return nil
	}
	return b.Bytes()
}

// SVG returns the figure as an SVG document.
func (f *Figure) SVG() string {
	var b bytes.Buffer
	if f.WriteTo(&b, "svg") != nil {
		return ""
	}
	return b.String()
}

// HTML returns an <img> element with the PNG inline (a data URL).
func (f *Figure) HTML() string {
	return `<img src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(f.PNG()) + `"/>`
}

// pick returns idx, or 0..n−1 (at most max of them) if idx is nil, and
// checks the range.
func pick(what string, idx []int, n, max int) ([]int, error) {
	if idx == nil {
		for i := 0; i < n && i < max; i++ {
			idx = append(idx, i)
		}
		return idx, nil
	}
	for _, i := range idx {
		if i < 0 || i >= n {
			return nil, fmt.Errorf("plot: %s %d is out of range [0, %d)", what, i, n)
		}
	}
	return idx, nil
}

// checkSaved checks that sol has saved states on the host, first copying
// them there (Solution.HostSaves) if an engine kept them
// (ode.Settings.KeepSaves): a plot reads them.
func checkSaved(sol *ode.Solution) error {
	if sol == nil {
		return fmt.Errorf("plot: nil solution")
	}
	if err := sol.HostSaves(); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if len(sol.SaveAt) == 0 {
		return fmt.Errorf("plot: the solution has no saved states; give the problem save times (SaveAt) to plot against time")
	}
	if want := sol.N * len(sol.SaveAt) * sol.Dim; len(sol.Ys) != want {
		return fmt.Errorf("plot: the solution has %d saved values, want N·len(SaveAt)·Dim = %d·%d·%d = %d", len(sol.Ys), sol.N, len(sol.SaveAt), sol.Dim, want)
	}
	return nil
}

// finite reports whether v is neither NaN nor infinite.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// addRuns draws the points of xy in colour k as lines, one per run of
// points whose coordinates are finite (a lone point as a dot, which a
// line of one point is not): the others are gaps. Solutions have NaN
// states where a trajectory failed or after a terminal event, fits NaN
// or infinite losses at failed steps. It returns the first plotter
// drawn, for a legend, or nil if no point is finite.
func addRuns(p *gplot.Plot, xy plotter.XYs, k int) (gplot.Thumbnailer, error) {
	var first gplot.Thumbnailer
	ok := func(i int) bool { return finite(xy[i].X) && finite(xy[i].Y) }
	for s := 0; s < len(xy); {
		if !ok(s) {
			s++
			continue
		}
		e := s
		for e < len(xy) && ok(e) {
			e++
		}
		run := xy[s:e:e]
		s = e
		var th gplot.Thumbnailer
		if len(run) == 1 {
			sc, err := plotter.NewScatter(run)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: plotutil.Color(k), Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
			p.Add(sc)
			th = sc
		} else {
			l, err := plotter.NewLine(run)
			if err != nil {
				return nil, err
			}
			styled(l, k)
			p.Add(l)
			th = l
		}
		if first == nil {
			first = th
		}
	}
	return first, nil
}

// errNoFinite is the error of a figure of saved states none of which is
// finite.
func errNoFinite(trajs []int) error {
	return fmt.Errorf("plot: trajectories %v have no finite saved state to draw (a failed trajectory's states are NaN, as are save times after a terminal event)", trajs)
}

// saved returns the component c of trajectory i at every save time.
func saved(sol *ode.Solution, i, c int) plotter.XYs {
	K := len(sol.SaveAt)
	xy := make(plotter.XYs, K)
	for k, t := range sol.SaveAt {
		xy[k] = plotter.XY{X: t, Y: sol.Ys[(i*K+k)*sol.Dim+c]}
	}
	return xy
}

func styled(l *plotter.Line, k int) {
	l.Color = plotutil.Color(k)
	l.Width = vg.Points(1.2)
}

// Trajectories plots components comps of trajectories trajs against time
// at the solution's save times, one line per (trajectory, component),
// each component its own colour. names, if not nil, names the components
// (len Dim) in the legend. It returns an error if the solution has no
// saved states or an index is out of range.
func Trajectories(sol *ode.Solution, trajs, comps []int, names []string) (*Figure, error) {
	if err := checkSaved(sol); err != nil {
		return nil, err
	}
	trajs, err := pick("trajectory", trajs, sol.N, MaxLines)
	if err != nil {
		return nil, err
	}
	if comps, err = pick("component", comps, sol.Dim, sol.Dim); err != nil {
		return nil, err
	}
	fig := newFigure("", "t", "y")
	drawn := len(trajs) == 0 || len(comps) == 0
	for ci, c := range comps {
		legend := false
		for _, i := range trajs {
			th, err := addRuns(fig.Plot, saved(sol, i, c), ci)
			if err != nil {
				return nil, fmt.Errorf("plot: trajectory %d: %w", i, err)
			}
			if th != nil && !legend {
				AddLegend(fig.Plot, ci, len(comps), compName(names, c), th)
				legend = true
			}
			drawn = drawn || th != nil
		}
	}
	if !drawn {
		return nil, errNoFinite(trajs)
	}
	return fig, nil
}

func compName(names []string, c int) string {
	if c < len(names) {
		return names[c]
	}
	return fmt.Sprintf("y%d", c)
}

// Phase plots the phase portrait of trajectories trajs: component cy
// against component cx at the save times, one colour per trajectory.
func Phase(sol *ode.Solution, trajs []int, cx, cy int, names []string) (*Figure, error) {
	if err := checkSaved(sol); err != nil {
		return nil, err
	}
	trajs, err := pick("trajectory", trajs, sol.N, MaxLines)
	if err != nil {
		return nil, err
	}
	if _, err := pick("component", []int{cx, cy}, sol.Dim, 2); err != nil {
		return nil, err
	}
	fig := newFigure("", compName(names, cx), compName(names, cy))
	K := len(sol.SaveAt)
	drawn := len(trajs) == 0
	for ti, i := range trajs {
		xy := make(plotter.XYs, K)
		for k := range K {
			row := sol.Ys[(i*K+k)*sol.Dim:]
			xy[k] = plotter.XY{X: row[cx], Y: row[cy]}
		}
		th, err := addRuns(fig.Plot, xy, ti)
		if err != nil {
			return nil, fmt.Errorf("plot: trajectory %d: %w", i, err)
		}
		drawn = drawn || th != nil
	}
	if !drawn {
		return nil, errNoFinite(trajs)
	}
	return fig, nil
}

// Loss plots a loss history (one value per step) against the step, on a
// logarithmic axis when every value is positive. More histories (as
// per-policy comparisons) can be given with their labels in pairs to
// Losses.
func Loss(history []float64) (*Figure, error) {
	return Losses([]string{""}, [][]float64{history})
}

// Losses plots several loss histories, labelled, on one figure. Steps
// whose loss is NaN or infinite (a failed step) are left out, as gaps in
// their line; a history without a finite value is an error.
func Losses(labels []string, histories [][]float64) (*Figure, error) {
	if len(labels) != len(histories) {
		return nil, fmt.Errorf("plot: %d labels for %d loss histories", len(labels), len(histories))
	}
	if len(histories) == 0 {
		return nil, fmt.Errorf("plot: no loss history to draw")
	}
	fig := newFigure("", "step", "loss")
	positive := true
	for k, h := range histories {
		if len(h) == 0 {
			return nil, fmt.Errorf("plot: loss history %d is empty", k)
		}
		if !slices.ContainsFunc(h, finite) {
			return nil, fmt.Errorf("plot: loss history %d has no finite value (every one of its %d steps is NaN or infinite)", k, len(h))
		}
		for _, v := range h {
			if finite(v) && !(v > 0) {
				positive = false
			}
		}
	}
	if positive {
		fig.Plot.Y.Scale = gplot.LogScale{}
		fig.Plot.Y.Tick.Marker = gplot.LogTicks{Prec: -1}
	}
	for k, h := range histories {
		// One line per run of finite values.
		xy := make(plotter.XYs, len(h))
		for s, v := range h {
			xy[s] = plotter.XY{X: float64(s), Y: v}
		}
		th, err := addRuns(fig.Plot, xy, k)
		if err != nil {
			return nil, fmt.Errorf("plot: loss history %d: %w", k, err)
		}
		if labels[k] != "" {
			AddLegend(fig.Plot, k, len(labels), labels[k], th)
		}
	}
	if y := &fig.Plot.Y; positive && y.Min == y.Max {
		// A constant loss: a decade either side (the axis would pad it
		// by ±1, below 0 on the logarithmic scale).
		y.Min, y.Max = y.Min/10, y.Max*10
	}
	return fig, nil
}

// FitVsObserved plots observations as points and the fitted solution as
// lines, for trajectories trajs and components comps. observed holds
// each trajectory's observations at the solution's save times, row-major
// [N×K×Dim] as Solution.Ys (a NaN marks a missing observation; an
// infinite one is left out as well).
func FitVsObserved(fitted *ode.Solution, observed []float64, trajs, comps []int, names []string) (*Figure, error) {
	if err := checkSaved(fitted); err != nil {
		return nil, err
	}
	if len(observed) != len(fitted.Ys) {
		return nil, fmt.Errorf("plot: len(observed) = %d, want N·K·Dim = %d", len(observed), len(fitted.Ys))
	}
	fig, err := Trajectories(fitted, trajs, comps, names)
	if err != nil {
		return nil, err
	}
	trajs, _ = pick("trajectory", trajs, fitted.N, MaxLines)
	comps, _ = pick("component", comps, fitted.Dim, fitted.Dim)
	K, d := len(fitted.SaveAt), fitted.Dim
	for ci, c := range comps {
		for ti, i := range trajs {
			var xy plotter.XYs
			for k, t := range fitted.SaveAt {
				if v := observed[(i*K+k)*d+c]; finite(v) {
					xy = append(xy, plotter.XY{X: t, Y: v})
				}
			}
			if len(xy) == 0 {
				continue
			}
			sc, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, fmt.Errorf("plot: observations of trajectory %d: %w", i, err)
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: darker(plotutil.Color(ci)), Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
			fig.Plot.Add(sc)
			if ti == 0 && ci == 0 {
				fig.Plot.Legend.Add("observed", sc)
			}
		}
	}
	return fig, nil
}

func darker(c color.Color) color.Color {
	r, g, b, a := c.RGBA()
	return color.RGBA64{R: uint16(r * 3 / 4), G: uint16(g * 3 / 4), B: uint16(b * 3 / 4), A: uint16(a)}
}
