package fit_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/fit"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestUnseen53FitPendulum (session 53) fits a problem fit had not seen:
// the damped driven pendulum d²θ/dt² = −γ·dθ/dt − sin θ + A·cos Ωt, with
// three independent fits (Fits = 3) of (γ, A) to θ observed at eight
// times on four trajectories each (their own initial states), from a
// start far from every truth, with the saves' data and Loss.Mean; then
// Ω, shared, alone. Every fitted value must come within 1e-3 of the
// value that made the data.
func TestUnseen53FitPendulum(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "driven-pendulum", Dim: 2, Params: 2, Shared: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[1], p[1].Mul(p[2].Mul(t).Cos()).Sub(p[0].Mul(y[1])).Sub(y[0].Sin())}
	}}
	rng := rand.New(rand.NewPCG(53, 3))
	const fits, per = 3, 4
	n := fits * per
	truth := []float64{0.3, 0.5, 0.15, 0.8, 0.6, 0.2}
	y0, p := make([]float64, 2*n), make([]float64, 2*n)
	for i := range n {
		y0[2*i], y0[2*i+1] = rng.Float64()*1.4-0.7, rng.Float64()*0.6-0.3
		p[2*i], p[2*i+1] = truth[2*(i/per)], truth[2*(i/per)+1]
	}
	save := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	K := len(save)
	const omega = 0.9
	prob := ode.Problem{Field: f, N: n, Y0: y0, P: p, Shared: []float64{omega}, T1: 8, SaveAt: save}
	sol, err := ode.Solve(prob, &ode.Settings{RelTol: 1e-10, AbsTol: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]float64, n*K)
	for i := range n {
		for k := range K {
			data[i*K+k] = sol.Ys[(i*K+k)*2]
		}
	}
	loss := ode.Loss{DataDim: K, Data: data, Mean: true, F: func(_, ys, d []tape.V) tape.V {
		s := ys[0].Sub(d[0]).Square()
		for k := 1; k < K; k++ {
			s = s.Add(ys[2*k].Sub(d[k]).Square())
		}
		return s
	}}
	start := prob
	start.P = make([]float64, 2*n)
	for i := range start.P {
		start.P[i] = 0.1
	}
	res, err := fit.Fit(context.Background(), fit.Problem{ODE: start, Loss: loss, Vars: fit.Vars{P: []int{0, 1}}, Fits: fits},
		&ode.Settings{RelTol: 1e-8}, &fit.Settings{Steps: 400, Optimizer: &optim.Adam{LearnRate: 0.03}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("(γ, A) of 3 fits: loss %.3g → %.3g in %d steps; fitted %.6f (truth %v)", res.History[0], res.FinalLoss, len(res.History), res.X, truth)
	for j, x := range res.X {
		if math.Abs(x-truth[j]) > 1e-3 {
			t.Errorf("fitted value %d = %v, want %v", j, x, truth[j])
		}
	}

	// Ω, shared by all trajectories, from 0.8.
	start = prob
	start.Shared = []float64{0.8}
	res, err = fit.Fit(context.Background(), fit.Problem{ODE: start, Loss: loss, Vars: fit.Vars{Shared: true}},
		&ode.Settings{RelTol: 1e-8}, &fit.Settings{Steps: 300, Optimizer: &optim.Adam{LearnRate: 0.01}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Ω: loss %.3g → %.3g; fitted %.6f (truth %v)", res.History[0], res.FinalLoss, res.X[0], omega)
	if math.Abs(res.X[0]-omega) > 1e-3 {
		t.Errorf("fitted Ω = %v, want %v", res.X[0], omega)
	}
}
