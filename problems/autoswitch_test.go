package problems

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// dampedRotation returns y' = [[−a, ω], [−ω, −a]]·y, p = (a, ω), y0 =
// (1, 0): eigenvalues −a ± iω, a normal Jacobian whose Euclidean
// stiffness estimate is exactly h·|λ|. For ω/a = 10 the eigenvalues lie
// at 95.7° from the positive real axis, where Tsit5's stability boundary
// (about 2.8) is below the stiffness test's threshold 0.985·3.5068.
func dampedRotation(a, omega, t1 float64) Problem {
	return Problem{
		Name: fmt.Sprintf("damped-rotation-%g", omega),
		Field: ode.Field{Name: "damped-rotation", Dim: 2, Params: 2,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				a, w := p[0], p[1]
				return []tape.V{
					w.Mul(y[1]).Sub(a.Mul(y[0])),
					a.Mul(y[1]).Add(w.Mul(y[0])).Neg(),
				}
			}},
		Y0: []float64{1, 0},
		P:  []float64{a, omega},
		T1: t1,
	}
}

// largeFast returns y1' = −3e3·(y1 − 1e3), y2' = −1e3·y2, y3' = 0.1·y2 −
// 0.5·y3 from (1e3 + 1, 1e-3, 1e-2) on [0, 10]: stiff, its fast mode in
// the large component y1 near its equilibrium, y2 decaying to 0.
func largeFast() Problem {
	return Problem{
		Name: "large-fast",
		Field: ode.Field{Name: "large-fast", Dim: 3,
			F: func(_ tape.V, y, _ []tape.V) []tape.V {
				return []tape.V{y[0].MulC(-3e3).AddC(3e6), y[1].MulC(-1e3), y[1].MulC(0.1).Sub(y[2].MulC(0.5))}
			}},
		Y0: []float64{1e3 + 1, 1e-3, 1e-2},
		T1: 10,
	}
}

// growthChain returns A → B, A + B → C, B + C → D with unit rates from
// (1, 0, 0, 0) on [0, 10]: a non-stiff field whose products grow from 0
// (as t, t², t³), so that at a purely relative tolerance Hairer's initial
// step is tiny and the first steps ramp up.
func growthChain() Problem {
	return Problem{
		Name: "growth-chain",
		Field: ode.Field{Name: "growth-chain", Dim: 4, Params: 3,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				r1 := p[0].Mul(y[0])
				r2 := p[1].Mul(y[0]).Mul(y[1])
				r3 := p[2].Mul(y[1]).Mul(y[2])
				return []tape.V{r1.Add(r2).Neg(), r1.Sub(r2).Sub(r3), r2.Sub(r3), r3}
			}},
		Y0: []float64{1, 0, 0, 0},
		P:  []float64{1, 1, 1},
		T1: 10,
	}
}

// autoRun is Method Auto's solve of one trajectory of pr, with Rodas5P's
// and Tsit5's on it for comparison.
type autoRun struct {
	sw, steps, evals int     // Tsit5 steps before the switch (steps if none), accepted steps, field evaluations
	tsw              float64 // the time of the switch (T1 if none)
}

func solveAuto(t *testing.T, pr Problem, m ode.Method, rtol, atol float64) autoRun {
	t.Helper()
	p := ode.Problem{Field: pr.Field, Y0: pr.Y0, P: pr.P, T0: pr.T0, T1: pr.T1}
	sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: m, RelTol: rtol, AbsTol: atol})
	if err != nil {
		t.Fatal(err)
	}
	mesh, sol, err := sv.Record(&p)
	if err != nil {
		t.Fatalf("%s %s rtol %g: %v", pr.Name, m.Name(), rtol, err)
	}
	r := autoRun{steps: sol.Stats.Accepted[0], evals: sol.Stats.FieldEvals[0], tsw: pr.T1}
	r.sw = r.steps
	if sol.Switch != nil {
		r.sw = sol.Switch[0]
	}
	if r.sw < r.steps {
		tt := pr.T0
		for s := range r.sw {
			tt += mesh.H[s*mesh.N]
		}
		r.tsw = tt
	}
	return r
}

// TestAutoSwitchPoint pins where Method Auto switches a trajectory from
// Tsit5 to Rodas5P (its Tsit5 steps before the switch, at most max) on
// stiff problems whose stiff modes live in small components or off the
// real axis, where Hairer's Euclidean estimate fired late or never
// (issue 25: POLL at rtol 1e-8 after 73,880 Tsit5 steps, ROBER after
// 10,675, the damped rotation never; session 52's scale-invariant ρ_r:
// 643 and 2,031) and Auto's test (its estimates ρ_r and ρ_e, its boundary
// and error floor: ode.Auto) fires early; that POLL does not switch on the
// ramp of Hairer's initial steps (before t = 1e-11: steps 5× the last, with
// error norms below 1e-2, where the relative estimates read about 4 at
// every step and Auto once switched at t = 8.8e-14); and that Auto switches
// no trajectory of the non-stiff problems (Pleiades, Lorenz, Kepler, Van
// der Pol at μ = 1, Lotka–Volterra, Arenstorf, Lorenz-96 with d = 8 and
// 40, and a chain A → B, A + B → C, B + C → D whose products grow from 0)
// at rtol = atol from 1e-3 to 1e-12 over three times their spans, nor at a
// purely relative tolerance (atol 1e-30) from 1e-4 to 1e-10. It logs
// Auto's accepted steps and field evaluations against Rodas5P's.
func TestAutoSwitchPoint(t *testing.T) {
	t.Parallel()
	rob := Robertson()
	rob.T1 = 1e11
	pure := func(float64) float64 { return 1e-30 }
	rel := func(r float64) float64 { return 1e-4 * r }
	same := func(r float64) float64 { return r }
	for _, c := range []struct {
		pr   Problem
		rtol float64
		atol func(float64) float64
		max  int
		tmin float64 // the switch at t ≥ tmin
	}{
		// POLL and ROBER (to t = 1e11) at a pure relative tolerance.
		{Pollution(), 1e-6, pure, 80, 1e-11},
		{Pollution(), 1e-8, pure, 150, 1e-11},
		{rob, 1e-6, pure, 100, 0},
		{rob, 1e-8, pure, 200, 0},
		{HIRES(), 1e-6, rel, 200, 0},
		{HIRES(), 1e-8, rel, 600, 0},
		{dampedRotation(1e3, 1e4, 0.05), 1e-6, same, 250, 0},
		{dampedRotation(1e3, 1e4, 0.05), 1e-8, same, 600, 0},
		{dampedRotation(1e3, 1e5, 0.05), 1e-6, same, 1800, 0},
		{dampedRotation(1e3, 1e5, 0.05), 1e-8, same, 5000, 0},
		// A fast mode in a large component near its equilibrium, beside
		// one decaying to 0: the relative estimates weigh the latter by
		// its own rate however small it is; Hairer's ρ_2 fires.
		{largeFast(), 1e-6, same, 60, 0},
		{largeFast(), 1e-8, pure, 500, 0},
	} {
		name := fmt.Sprintf("%s/%g", c.pr.Name, c.rtol)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := solveAuto(t, c.pr, ode.Auto, c.rtol, c.atol(c.rtol))
			r := solveAuto(t, c.pr, ode.Rodas5P, c.rtol, c.atol(c.rtol))
			t.Logf("%s: Auto: %d Tsit5 steps before the switch (t = %.3g), %d steps, %d field evaluations; Rodas5P %d steps, %d field evaluations",
				name, a.sw, a.tsw, a.steps, a.evals, r.steps, r.evals)
			if a.sw == a.steps {
				t.Errorf("%s: Auto did not switch (%d Tsit5 steps), want a switch within %d", name, a.steps, c.max)
			} else if a.sw > c.max {
				t.Errorf("%s: Auto switched after %d Tsit5 steps of %d (t = %.3g), want within %d", name, a.sw, a.steps, a.tsw, c.max)
			} else if a.tsw < c.tmin {
				t.Errorf("%s: Auto switched at t = %.3g (after %d Tsit5 steps), before %g: on the initial steps' ramp", name, a.tsw, a.sw, c.tmin)
			}
		})
	}

	kep := Kepler()
	for _, pr := range []Problem{Pleiades(), Lorenz(), kep, VanDerPol(), lotkaVolterra(), arenstorf(), Lorenz96(8), Lorenz96(40), growthChain()} {
		pr.T1 = pr.T0 + 3*(pr.T1-pr.T0)
		t.Run("non-stiff/"+pr.Name, func(t *testing.T) {
			t.Parallel()
			for _, rtol := range []float64{1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12} {
				if testing.Short() && rtol < 1e-9 {
					continue
				}
				atols := []float64{rtol}
				if rtol == 1e-4 || rtol == 1e-6 || rtol == 1e-8 || rtol == 1e-10 {
					atols = append(atols, 1e-30)
				}
				for _, atol := range atols {
					a := solveAuto(t, pr, ode.Auto, rtol, atol)
					if a.sw != a.steps {
						t.Errorf("%s rtol %g atol %g: Auto switched after %d Tsit5 steps of %d (t = %.3g); it is not stiff", pr.Name, rtol, atol, a.sw, a.steps, a.tsw)
					}
				}
			}
		})
	}
}

// BenchmarkAutoTight times one trajectory of POLL and of ROBER (to t =
// 1e11) at rtol 1e-8, atol 1e-30 (TestAutoSwitchPoint's cases) with
// Method Auto and with Rodas5P, the better of Tsit5 and Rodas5P there
// (Tsit5 alone reaches MaxSteps on both, at its stability limit), on the
// CPU engine, reporting the accepted steps and field evaluations:
//
//	go test ./problems -run '^$' -bench 'AutoTight' -count 5
func BenchmarkAutoTight(b *testing.B) {
	rob := Robertson()
	rob.T1 = 1e11
	for _, pr := range []Problem{Pollution(), rob} {
		for _, m := range []ode.Method{ode.Rodas5P, ode.Auto} {
			p := ode.Problem{Field: pr.Field, Y0: pr.Y0, P: pr.P, T0: pr.T0, T1: pr.T1}
			b.Run(pr.Name+"/"+m.Name(), func(b *testing.B) { benchSolve(b, &p, ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-30}) })
		}
	}
}

// benchSolve times Solve of p with settings set after one untimed call
// (which builds what Solve builds on first need: Method Auto's Rodas5P
// solver, its plan with the Jacobian's programs), reporting the first
// trajectory's accepted steps and field evaluations.
func benchSolve(b *testing.B, p *ode.Problem, set ode.Settings) {
	sv, err := ode.NewSolver(p.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	sol, err := sv.Solve(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if sol, err = sv.Solve(p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(sol.Stats.Accepted[0]), "steps")
	b.ReportMetric(float64(sol.Stats.FieldEvals[0]), "evals")
}

// BenchmarkAutoMatrix times Method Auto against Tsit5 and Rodas5P on one
// trajectory and on an ensemble of 64 of the non-stiff Van der Pol
// oscillator (μ = 1, or linspace(0.5, 1.5); t ∈ [0, 10]), POLL (its rate
// k1 times linspace(0.9, 1.1)) and ROBER to t = 1e11 (k1 = linspace(0.03,
// 0.05)), at rtol 1e-6 and 1e-8 with a purely relative tolerance (atol
// 1e-30; vdp atol = rtol), Solve on the CPU engine, reporting the
// accepted steps and field evaluations of the first trajectory. Tsit5 is
// left out on POLL and ROBER (it runs at its stability limit, and on
// ROBER reaches MaxSteps):
//
//	go test ./problems -run '^$' -bench 'AutoMatrix' -benchtime 5x
func BenchmarkAutoMatrix(b *testing.B) {
	rob := Robertson()
	rob.T1 = 1e11
	for _, pr := range []Problem{VanDerPol(), Pollution(), rob} {
		for _, rtol := range []float64{1e-6, 1e-8} {
			atol := 1e-30
			if pr.Name == "vdp" {
				atol = rtol
			}
			for _, n := range []int{1, 64} {
				p := ode.Problem{Field: pr.Field, N: n, Y0: pr.Y0, P: pr.P, T0: pr.T0, T1: pr.T1}
				if pr.Name == "vdp" {
					p.T1 = 10
				}
				if n > 1 {
					np := len(pr.P)
					p.P = make([]float64, n*np)
					s := LinSpace(make([]float64, n), 0.9, 1.1)
					for i := range n {
						copy(p.P[i*np:], pr.P)
						switch pr.Name {
						case "vdp":
							p.P[i*np] = 0.5 + (s[i]-0.9)*5
						case "robertson":
							p.P[i*np] = 0.03 + (s[i]-0.9)*0.1
						default:
							p.P[i*np] *= s[i]
						}
					}
				}
				methods := []ode.Method{ode.Rodas5P, ode.Auto}
				if pr.Name == "vdp" {
					methods = append(methods, ode.Tsit5)
				}
				for _, m := range methods {
					b.Run(fmt.Sprintf("%s/%g/n%d/%s", pr.Name, rtol, n, m.Name()), func(b *testing.B) {
						benchSolve(b, &p, ode.Settings{Method: m, RelTol: rtol, AbsTol: atol})
					})
				}
			}
		}
	}
}

// TestAutoNoSwitchEnsembles checks that Method Auto switches no
// trajectory of non-stiff ensembles of 64: Van der Pol with μ =
// linspace(0.5, 3) on [0, 30], Lorenz with ρ = linspace(10, 40) on [0,
// 10], Kepler with GM = linspace(0.8, 2) over two of its default
// periods, at rtol = atol 1e-4, 1e-6, 1e-8 and 1e-10, and that their steps
// are Tsit5's.
func TestAutoNoSwitchEnsembles(t *testing.T) {
	t.Parallel()
	const n = 64
	vary := func(pr Problem, k int, lo, hi, t1 float64) ode.Problem {
		np := len(pr.P)
		p := make([]float64, n*np)
		v := LinSpace(make([]float64, n), lo, hi)
		for i := range n {
			copy(p[i*np:], pr.P)
			p[i*np+k] = v[i]
		}
		return ode.Problem{Field: pr.Field, N: n, Y0: pr.Y0, P: p, T0: pr.T0, T1: t1}
	}
	for _, c := range []struct {
		name string
		p    ode.Problem
	}{
		{"vdp", vary(VanDerPol(), 0, 0.5, 3, 30)},
		{"lorenz", vary(Lorenz(), 1, 10, 40, 10)},
		{"kepler", vary(Kepler(), 0, 0.8, 2, 4*math.Pi)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, rtol := range []float64{1e-4, 1e-6, 1e-8, 1e-10} {
				steps := map[ode.Method][]int{}
				for _, m := range []ode.Method{ode.Auto, ode.Tsit5} {
					sv, err := ode.NewSolver(c.p.Field, &ode.Settings{Method: m, RelTol: rtol, AbsTol: rtol})
					if err != nil {
						t.Fatal(err)
					}
					sol, err := sv.Solve(&c.p)
					if err != nil {
						t.Fatalf("%s rtol %g: %v", m.Name(), rtol, err)
					}
					steps[m] = sol.Stats.Accepted
					for i, sw := range sol.Switch {
						if sw != sol.Stats.Accepted[i] {
							t.Errorf("%s rtol %g: trajectory %d (p = %v) switched after %d Tsit5 steps of %d; it is not stiff",
								c.name, rtol, i, c.p.P[i*len(c.p.P)/n:(i+1)*len(c.p.P)/n], sw, sol.Stats.Accepted[i])
						}
					}
				}
				if !slices.Equal(steps[ode.Auto], steps[ode.Tsit5]) {
					t.Errorf("%s rtol %g: Auto's steps %v, Tsit5's %v", c.name, rtol, steps[ode.Auto], steps[ode.Tsit5])
				}
			}
		})
	}
}
