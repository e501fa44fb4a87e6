package odetest

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// AutoCase is an ensemble of Method Auto's benchmark: its name, problem
// and the methods the benchmark runs on it.
type AutoCase struct {
	Name    string
	P       ode.Problem
	Methods []ode.Method

	// RelTol and AbsTol are the case's tolerances; 0 means Auto's
	// benchmark's, 1e-6 and 1e-9.
	RelTol, AbsTol float64
}

// AutoCases returns Method Auto's benchmark ensembles of n trajectories
// (see Auto).
func AutoCases(n int) []AutoCase {
	vdp := func(lo, hi, t1 float64, stiff bool) ode.Problem {
		pr := problems.VanDerPol()
		if stiff {
			pr = problems.StiffVanDerPol(1e3)
		}
		return ode.Problem{Field: pr.Field, N: n, Y0: pr.Y0, P: problems.LinSpace(make([]float64, n), lo, hi), T1: t1}
	}
	mixed := vdp(0.5, 1.5, 2, false)
	for i := 0; i < n; i += 8 {
		mixed.P[i] = 1000
	}
	rb := problems.Robertson()
	k1 := problems.LinSpace(make([]float64, n), 0.03, 0.05)
	rp := make([]float64, 3*n)
	for i := range n {
		rp[3*i], rp[3*i+1], rp[3*i+2] = k1[i], rb.P[1], rb.P[2]
	}
	rob := ode.Problem{Field: rb.Field, N: n, Y0: rb.Y0, P: rp, T0: rb.T0, T1: rb.T1}
	return []AutoCase{
		{Name: "vdp", P: vdp(0.5, 1.5, 10, false), Methods: []ode.Method{ode.Tsit5, ode.Rodas5P, ode.Auto}},
		{Name: "robertson", P: rob, Methods: []ode.Method{ode.Rodas5P, ode.Auto}},
		{Name: "vdp-stiff", P: vdp(500, 1000, 2, true), Methods: []ode.Method{ode.Rodas5P, ode.Auto}},
		{Name: "mixed", P: mixed, Methods: []ode.Method{ode.Tsit5, ode.Rodas5P, ode.Auto}},
	}
}

// AutoTightCases returns Method Auto's benchmark ensembles of n
// trajectories at a tight tolerance, where Auto's stiffness test must fire
// early for Auto to stay near Rodas5P: Robertson's kinetics (k1 =
// linspace(0.03, 0.05), the classic k2, k3) to t = 1e11 at rtol 1e-8,
// atol 1e-30 (purely relative; y2 falls to 1e-13), the Bari test set's
// ROBER. Tsit5 is left out (its solve runs at its stability limit for
// 1e11 time units).
func AutoTightCases(n int) []AutoCase {
	rb := problems.Robertson()
	k1 := problems.LinSpace(make([]float64, n), 0.03, 0.05)
	rp := make([]float64, 3*n)
	for i := range n {
		rp[3*i], rp[3*i+1], rp[3*i+2] = k1[i], rb.P[1], rb.P[2]
	}
	rob := ode.Problem{Field: rb.Field, N: n, Y0: rb.Y0, P: rp, T0: rb.T0, T1: 1e11}
	return []AutoCase{
		{Name: "robertson-1e-8", P: rob, Methods: []ode.Method{ode.Rodas5P, ode.Auto}, RelTol: 1e-8, AbsTol: 1e-30},
	}
}

// Auto runs Method Auto's benchmark on engine ("" for the default CPU
// engine): Auto against Tsit5 and Rodas5P alone, for Solve and for Grad
// with the record (loss Σ y(t1)², RelTol 1e-6, AbsTol 1e-9), on ensembles
// of n trajectories: the non-stiff Van der Pol oscillator (μ =
// linspace(0.5, 1.5), t ∈ [0, 10]), Robertson's kinetics (stiff from the
// start; k1 = linspace(0.03, 0.05), t ∈ [0, 100]), the stiff Van der Pol
// oscillator (μ = linspace(500, 1000), t ∈ [0, 2], stiff after its
// initial layer), and a mixed Van der Pol ensemble (μ = 1000 for one
// trajectory in 8, linspace(0.5, 1.5) for the others, t ∈ [0, 2]). Tsit5
// is left out on Robertson and the stiff Van der Pol (its Grad refuses
// them, and its Solve runs at its stability limit), and its Grad on the
// mixed ensemble (refused). Auto also runs on each of autoEngines, named
// "Auto-" and the engine's name: the same arithmetic behind another
// executor (the CPU's, restarting instead of switching in place).
//
// The target: Auto within 1.5× of the better of Tsit5 and Rodas5P.
func Auto(b *testing.B, n int, engine string, autoEngines ...string) {
	for _, c := range append(AutoCases(n), AutoTightCases(n)...) {
		rtol, atol := 1e-6, 1e-9
		if c.RelTol != 0 {
			rtol, atol = c.RelTol, c.AbsTol
		}
		for _, op := range []string{"solve", "grad"} {
			for _, m := range c.Methods {
				if c.Name == "mixed" && op == "grad" && m == ode.Tsit5 {
					continue
				}
				engines := []string{engine}
				if m == ode.Auto {
					engines = append(engines, autoEngines...)
				}
				for _, e := range engines {
					name := m.Name()
					if e != engine {
						name = "Auto-" + e
					}
					b.Run(c.Name+"/"+op+"/"+name, func(b *testing.B) {
						p := c.P
						sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: m, RelTol: rtol, AbsTol: atol, Engine: e})
						if err != nil {
							b.Fatal(err)
						}
						run := AutoOp(sv, &p, op)
						if err := run(); err != nil {
							b.Fatal(err)
						}
						b.ResetTimer()
						for range b.N {
							if err := run(); err != nil {
								b.Fatal(err)
							}
						}
					})
				}
			}
		}
	}
}

// AutoOp returns a function that runs Method Auto's benchmark operation
// op ("solve": Solve; "grad": Grad with the record of the loss Σ y(t1)²,
// into one Gradient reused from call to call) of sv on p.
func AutoOp(sv *ode.Solver, p *ode.Problem, op string) func() error {
	var g ode.Gradient
	return func() error {
		if op == "solve" {
			_, err := sv.Solve(p)
			return err
		}
		_, err := sv.Grad(&g, p, ode.SumSquares(), nil)
		return err
	}
}
