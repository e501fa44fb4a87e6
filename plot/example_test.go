package plot_test

import (
	"bytes"
	"fmt"
	"image/png"
	"math"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/plot"
	"github.com/gradsolve-go/gradsolve/problems"
)

// ExampleTrajectories solves two Van der Pol oscillators at 101 save
// times and draws their states against time; Save would write the figure
// to a file, in the format of its extension.
func ExampleTrajectories() {
	pr, err := problems.ByName("vdp")
	if err != nil {
		fmt.Println(err)
		return
	}
	y0, p := pr.Ensemble(2)
	y0[2] = 1 // the second starts from y = (1, 0)
	prob := ode.Problem{Field: pr.Field, N: 2, Y0: y0, P: p, T0: 0, T1: 5,
		SaveAt: problems.LinSpace(make([]float64, 101), 0, 5)}
	sol, err := ode.Solve(prob, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fig, err := plot.Trajectories(sol, nil, nil, []string{"x", "x'"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fig.Plot.Title.Text = "Van der Pol, mu = 1"
	img, err := png.Decode(bytes.NewReader(fig.PNG()))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("axes: %s against %s\n", fig.Plot.Y.Label.Text, fig.Plot.X.Label.Text)
	fmt.Printf("x from %.3g to %.3g\n", fig.Plot.X.Min, fig.Plot.X.Max)
	fmt.Printf("PNG %v, SVG %t\n", img.Bounds().Size(), bytes.HasPrefix([]byte(fig.SVG()), []byte("<?xml")))
	// Output:
	// axes: y against t
	// x from 0 to 5
	// PNG (576,384), SVG true
}

// ExampleLoss draws a loss history on a logarithmic axis (every value is
// positive); a NaN step (a failed one) is left out as a gap.
func ExampleLoss() {
	history := []float64{10, 3, 1, math.NaN(), 0.1, 0.03}
	fig, err := plot.Loss(history)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("axes: %s against %s, y from %g to %g\n", fig.Plot.Y.Label.Text, fig.Plot.X.Label.Text, fig.Plot.Y.Min, fig.Plot.Y.Max)

	_, err = plot.Loss([]float64{math.NaN()})
	fmt.Println(err)
	// Output:
	// axes: loss against step, y from 0.03 to 10
	// plot: loss history 0 has no finite value (every one of its 1 steps is NaN or infinite)
}
