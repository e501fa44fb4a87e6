package problems_test

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// ExampleByName looks up a built-in problem, traces its field and
// evaluates it at the default initial state and parameters.
func ExampleByName() {
	pr, err := problems.ByName("lorenz")
	if err != nil {
		fmt.Println(err)
		return
	}
	prog, err := pr.Field.Program()
	if err != nil {
		fmt.Println(err)
		return
	}
	// Program inputs: t, then y, then the per-trajectory and shared
	// parameters.
	in := append(append([]float64{pr.T0}, pr.Y0...), pr.P...)
	fmt.Printf("%s: dim %d, %d parameters, t in [%g, %g]\n", pr.Name, pr.Field.Dim, pr.Field.Params, pr.T0, pr.T1)
	fmt.Printf("f(y0) = %.4g\n", prog.Eval(nil, in))

	// An ensemble of 4 trajectories sweeping ρ over [20, 30].
	y0, params := pr.Ensemble(4)
	rho := problems.LinSpace(make([]float64, 4), 20, 30)
	for i := range rho {
		params[i*pr.Field.Params+1] = rho[i]
	}
	fmt.Println(len(y0), params)

	_, err = problems.ByName("lorentz")
	fmt.Println(err)
	// Output:
	// lorenz: dim 3, 3 parameters, t in [0, 1]
	// f(y0) = [-10 28 0]
	// 12 [10 20 2.6666666666666665 10 23.333333333333332 2.6666666666666665 10 26.666666666666668 2.6666666666666665 10 30 2.6666666666666665]
	// problems: unknown problem "lorentz"; valid names are lorenz, vdp, vdp-stiff, lorenz96, lorenz96-64, lorenz96-256, linear, kepler, robertson, hires, pollution, brusselator, neural-robertson, pleiades, and lorenz96-<d> (d ≥ 4), brusselator-<cells> (cells ≥ 1) of other sizes
}

// ExampleBouncingBall drops a ball from 1 m with restitution 0.8, solves
// it through its bounces with the floor event, and compares the height
// at T = 1.5 s and its derivative with respect to the restitution with
// the closed form.
func ExampleBouncingBall() {
	f, floor := problems.BouncingBall()
	const h0, e, T = 1.0, 0.8, 1.5
	g, err := ode.Grad(nil, ode.Problem{Field: f, Y0: []float64{h0, 0}, P: []float64{e}, T1: T}, ode.Component(0), nil,
		&ode.Settings{RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{floor}})
	if err != nil {
		fmt.Println(err)
		return
	}
	x, dx, bounces := problems.BouncingBallClosedForm(h0, e, T)
	fmt.Printf("%d bounces (closed form %d)\n", g.Solution.Events[0], bounces)
	fmt.Printf("x(T)  = %.8f (closed form %.8f)\n", g.Solution.Y[0], x)
	fmt.Printf("dx/de = %.6f (closed form %.6f)\n", g.P[0], dx)
	// Output:
	// 2 bounces (closed form 2)
	// x(T)  = 0.40286202 (closed form 0.40286202)
	// dx/de = 2.639013 (closed form 2.639013)
}
