package problems

import (
	"fmt"
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
// 10,675, the damped rotation never) and the scale-invariant estimate of
// Auto's Tsit5 fires early (ode.Auto); and that Auto switches no
// trajectory of the non-stiff problems (Pleiades, Lorenz, Kepler, Van der
// Pol at μ = 1, Lotka–Volterra, Arenstorf, Lorenz-96 with d = 8 and 40)
// at rtol = atol from 1e-3 to 1e-12 over three times their spans. It logs
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
	}{
		// POLL and ROBER (to t = 1e11) at a pure relative tolerance.
		{Pollution(), 1e-6, pure, 30},
		{Pollution(), 1e-8, pure, 800},
		{rob, 1e-6, pure, 100},
		{rob, 1e-8, pure, 2500},
		{HIRES(), 1e-6, rel, 250},
		{HIRES(), 1e-8, rel, 900},
		{dampedRotation(1e3, 1e4, 0.05), 1e-6, same, 250},
		{dampedRotation(1e3, 1e4, 0.05), 1e-8, same, 600},
		{dampedRotation(1e3, 1e5, 0.05), 1e-6, same, 1800},
		{dampedRotation(1e3, 1e5, 0.05), 1e-8, same, 5000},
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
			}
		})
	}

	kep := Kepler()
	for _, pr := range []Problem{Pleiades(), Lorenz(), kep, VanDerPol(), lotkaVolterra(), arenstorf(), Lorenz96(8), Lorenz96(40)} {
		pr.T1 = pr.T0 + 3*(pr.T1-pr.T0)
		t.Run("non-stiff/"+pr.Name, func(t *testing.T) {
			t.Parallel()
			for _, rtol := range []float64{1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12} {
				if testing.Short() && rtol < 1e-9 {
					continue
				}
				a := solveAuto(t, pr, ode.Auto, rtol, rtol)
				if a.sw != a.steps {
					t.Errorf("%s rtol %g: Auto switched after %d Tsit5 steps of %d (t = %.3g); it is not stiff", pr.Name, rtol, a.sw, a.steps, a.tsw)
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
			b.Run(pr.Name+"/"+m.Name(), func(b *testing.B) {
				sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-30})
				if err != nil {
					b.Fatal(err)
				}
				p := ode.Problem{Field: pr.Field, Y0: pr.Y0, P: pr.P, T0: pr.T0, T1: pr.T1}
				var sol *ode.Solution
				for range b.N {
					if sol, err = sv.Solve(&p); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(sol.Stats.Accepted[0]), "steps")
				b.ReportMetric(float64(sol.Stats.FieldEvals[0]), "evals")
			})
		}
	}
}
