package ode_test

import (
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// BenchmarkSaveAtKepler times save times (issue 25): a 4,096-trajectory
// Kepler ensemble (one period, GM spread by ±5%) at RelTol 1e-8, with 1
// and with 1,000 save times evenly spaced over the span, Solve and Grad
// (record and gradient in one call, of the squares of every saved state),
// Tsit5 and Vern7, with saves read from the continuous extension
// (interp, the default) and re-stepped (step, Settings.Saves = SaveStep).
// "solve" allocates a new Solution on each call (131 MB of saved states
// at 1,000 save times, faulted in page by page); "solveto" reuses one
// (Solver.SolveTo), as "grad" reuses its Gradient.
// The ratio of saves=1000 to saves=1 in one mode is the cost of the save
// times:
//
//	go test ./ode -run '^$' -bench 'SaveAtKepler' -count 5
func BenchmarkSaveAtKepler(b *testing.B) {
	const n = 4096
	kp := problems.Kepler()
	gm := make([]float64, n)
	for i := range gm {
		gm[i] = 0.95 + 0.1*float64(i)/float64(n-1)
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
		for _, op := range []string{"solve", "solveto", "grad"} {
			for _, mode := range []ode.SaveMode{ode.SaveInterpolate, ode.SaveStep} {
				for _, k := range []int{1, 1000} {
					modeName := map[ode.SaveMode]string{ode.SaveInterpolate: "interp", ode.SaveStep: "step"}[mode]
					b.Run(fmt.Sprintf("%s/%s/%s/saves=%d", m.Name(), op, modeName, k), func(b *testing.B) {
						ts := make([]float64, k)
						for j := range ts {
							ts[j] = kp.T1 * float64(j+1) / float64(k)
						}
						p := ode.Problem{Field: kp.Field, N: n, Y0: kp.Y0, P: gm, T1: kp.T1, SaveAt: ts}
						sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-11, Saves: mode})
						if err != nil {
							b.Fatal(err)
						}
						loss := ode.Loss{Name: "saved-squares", F: func(_, ys, _ []tape.V) tape.V {
							s := ys[0].Square()
							for _, x := range ys[1:] {
								s = s.Add(x.Square())
							}
							return s
						}}
						var g ode.Gradient
						var sol0 ode.Solution
						run := func() (*ode.Solution, error) {
							switch op {
							case "solve":
								return sv.Solve(&p)
							case "solveto":
								return sv.SolveTo(&sol0, &p)
							}
							_, err := sv.Grad(&g, &p, loss, nil)
							return g.Solution, err
						}
						sol, err := run()
						if err != nil {
							b.Fatal(err)
						}
						b.ResetTimer()
						for range b.N {
							if _, err := run(); err != nil {
								b.Fatal(err)
							}
						}
						reportTraj(b, n, meanSteps(sol.Stats))
					})
				}
			}
		}
	}
}

// BenchmarkSaveAtKeplerRatio measures the dense-output targets side by
// side on the CPU engine (odetest.SaveRatio: 1 and 1,000 save times
// alternating, medians of both and of the ratios; targets ratio ≤ 1.5
// for Solve, ≤ 2 for Grad). The cuda package runs the same on its
// engines.
//
//	go test ./ode -run '^$' -bench 'SaveAtKeplerRatio' -benchtime 7x
func BenchmarkSaveAtKeplerRatio(b *testing.B) { odetest.SaveRatio(b, "") }
