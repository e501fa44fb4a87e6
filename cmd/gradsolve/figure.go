package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	gplot "gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/plot"
	"github.com/gradsolve-go/gradsolve/problems"
)

// This file draws the -plot figures of solve and grad with package plot.

const (
	// plotLines is the most trajectories -plot draws against time.
	plotLines = 4
	// densePoints is the number of times at which -plot draws a single
	// trajectory solved without -saveat.
	densePoints = 201
	// markedPoints is the most save times whose states -plot marks.
	markedPoints = 40
)

// figureFormat returns the format of a figure file from its extension:
// "png", "svg" or "pdf".
func figureFormat(path string) (string, error) {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".png", ".svg", ".pdf":
		return ext[1:], nil
	case "":
		return "", fmt.Errorf("%q has no extension; name a .png, .svg or .pdf file", path)
	}
	return "", fmt.Errorf("%q: %s is not a figure format; name a .png, .svg or .pdf file", path, ext)
}

// writeFigure draws the figure of out (see figure) to f, commits f and
// returns what it shows. Errors name f's path.
func (j *job) writeFigure(f *atomicFile, out *outcome) (string, error) {
	format, err := figureFormat(f.Path())
	if err != nil {
		return "", err
	}
	fig, what, err := j.figure(out)
	if err != nil {
		return "", fmt.Errorf("%s: %v", f.Path(), err)
	}
	if err := fig.WriteTo(f, format); err != nil {
		return "", fmt.Errorf("writing %s: %v", f.Path(), err)
	}
	if err := f.Commit(); err != nil {
		return "", err
	}
	return what, nil
}

// figure returns the -plot figure of out and what it shows:
//   - with -saveat, the states at the save times of up to plotLines
//     trajectories (evenly spaced over the ensemble, failed ones left out);
//   - one trajectory without -saveat: its states at densePoints times, from
//     a second solve with those save times;
//   - an ensemble without -saveat: the final states (grad: the gradient
//     with respect to the per-trajectory parameters) against the first
//     -vary quantity, or against the trajectory's index.
func (j *job) figure(out *outcome) (*plot.Figure, string, error) {
	sol := out.sol
	if sol == nil {
		return nil, "", errors.New("nothing to plot: the run produced no solution")
	}
	names := j.stateNames()
	title := j.pr.Name
	switch {
	case len(j.prob.SaveAt) > 0:
		trajs := okSample(sol, plotLines)
		if len(trajs) == 0 {
			return nil, "", errors.New("nothing to plot: no trajectory finished")
		}
		fig, err := plot.Trajectories(sol, trajs, nil, names)
		if err != nil {
			return nil, "", err
		}
		if len(sol.SaveAt) <= markedPoints {
			if err := markSaved(fig, sol, trajs); err != nil {
				return nil, "", err
			}
		}
		what := "the states at the save times"
		if j.n() > 1 {
			what = fmt.Sprintf("the states at the save times of %s", trajList(trajs, j.n()))
		}
		fig.Plot.Title.Text = fmt.Sprintf("%s: %s", title, what)
		return fig, what, nil
	case j.n() == 1:
		if len(okSample(sol, 1)) == 0 {
			return nil, "", errors.New("nothing to plot: the trajectory failed")
		}
		dense, err := j.denseSolve(out)
		if err != nil {
			return nil, "", fmt.Errorf("solving again at %d times for the plot: %v", densePoints, err)
		}
		fig, err := plot.Trajectories(dense, nil, nil, names)
		if err != nil {
			return nil, "", err
		}
		what := fmt.Sprintf("the states at %d times, solved again", densePoints)
		fig.Plot.Title.Text = fmt.Sprintf("%s: %s", title, what)
		return fig, what, nil
	}
	return j.summaryFigure(out)
}

// summaryFigure plots one value per trajectory of an ensemble: its final
// state, or the gradient with respect to its parameters, against the
// first -vary quantity or the index.
func (j *job) summaryFigure(out *outcome) (*plot.Figure, string, error) {
	n, d, np := j.n(), j.prob.Field.Dim, j.prob.Field.Params
	xname, x := "trajectory index", func(i int) float64 { return float64(i) }
	if len(j.opts.vary) > 0 {
		v := j.opts.vary[0]
		xname = j.varyName(v)
		src, w := j.prob.P, np
		if v.Target == varyY0 {
			src, w = j.prob.Y0, d
		}
		x = func(i int) float64 { return src[i*w+v.Index] }
	}
	vals, w, labels := out.sol.Y, d, j.stateNames()
	what := "the final states"
	ylabel := "y(t1)"
	if g := out.grad; g != nil {
		if np > 0 {
			vals, w, labels = g.P, np, nil
			for _, p := range j.pnames {
				labels = append(labels, "dL/d"+p)
			}
		} else {
			vals, w = g.Y0, d
			labels = nil
			for c := 0; c < d; c++ {
				labels = append(labels, fmt.Sprintf("dL/dy0[%d]", c))
			}
		}
		what = "the gradient of " + j.loss.String()
		ylabel = "gradient"
	}
	p := gplot.New() // styled as package plot's figures: a grid, the legend at the top
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.X.Label.Text, p.Y.Label.Text = xname, ylabel
	fig := &plot.Figure{Plot: p}
	what += " against " + xname
	fig.Plot.Title.Text = fmt.Sprintf("%s: %s of %d trajectories", j.pr.Name, what, n)
	drawn := 0
	for c := 0; c < w; c++ {
		var xy plotter.XYs
		for i := 0; i < n; i++ {
			xi, yi := x(i), vals[i*w+c]
			if finite(xi) && finite(yi) && out.sol.Status[i] == ode.OK {
				xy = append(xy, plotter.XY{X: xi, Y: yi})
			}
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, "", err
		}
		l.Color = plotutil.Color(c)
		l.Width = vg.Points(1.2)
		fig.Plot.Add(l)
		plot.AddLegend(fig.Plot, c, w, labels[c], l)
		drawn++
	}
	if drawn == 0 {
		return nil, "", errors.New("nothing to plot: no trajectory finished")
	}
	return fig, what, nil
}

// stateNames names the state components y[0], y[1], ...
func (j *job) stateNames() []string {
	names := make([]string, j.prob.Field.Dim)
	for c := range names {
		names[c] = fmt.Sprintf("y[%d]", c)
	}
	return names
}

// denseSolve solves the job's single trajectory again with densePoints
// save times over [t0, t1], with the solver that ran.
func (j *job) denseSolve(out *outcome) (*ode.Solution, error) {
	if out.solver == nil {
		return nil, errors.New("no solver")
	}
	p := j.prob
	p.SaveAt = problems.LinSpace(make([]float64, densePoints), p.T0, p.T1)
	return out.solver.Solve(&p)
}

// okSample returns at most k evenly spaced trajectories of sol whose
// status is OK.
func okSample(sol *ode.Solution, k int) []int {
	var idx []int
	for _, i := range sampleIndices(sol.N, k) {
		if i < len(sol.Status) && sol.Status[i] == ode.OK {
			idx = append(idx, i)
		}
	}
	return idx
}

// trajList names the trajectories idx of an ensemble of n.
func trajList(idx []int, n int) string {
	s := make([]string, len(idx))
	for k, i := range idx {
		s[k] = fmt.Sprint(i)
	}
	if len(idx) == 1 {
		return "trajectory " + s[0]
	}
	return fmt.Sprintf("trajectories %s of %d", strings.Join(s, ", "), n)
}

// markSaved adds a point at each saved state of trajectories trajs, in the
// colour of its component's line.
func markSaved(fig *plot.Figure, sol *ode.Solution, trajs []int) error {
	K, d := len(sol.SaveAt), sol.Dim
	for c := 0; c < d; c++ {
		for _, i := range trajs {
			xy := make(plotter.XYs, K)
			for k, t := range sol.SaveAt {
				xy[k] = plotter.XY{X: t, Y: sol.Ys[(i*K+k)*d+c]}
			}
			sc, err := plotter.NewScatter(xy)
			if err != nil {
				return err
			}
			sc.GlyphStyle = draw.GlyphStyle{Color: plotutil.Color(c), Radius: vg.Points(2), Shape: draw.CircleGlyph{}}
			fig.Plot.Add(sc)
		}
	}
	return nil
}
