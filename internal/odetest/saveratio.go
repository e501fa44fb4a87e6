package odetest

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/cputime"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// SaveRatio runs the save-time benchmark of the dense-output targets
// (1,000 save times cost at most 1.5× one in Solve, 2× in Grad) on engine
// ("" for the default CPU engine): n = 4096 Kepler orbits (problems.Kepler,
// GM swept 0.95–1.05), rtol 1e-8, atol 1e-11, Tsit5 and Vern7, interpolated
// and stepped saves, ops "solve" (a new Solution each call), "solveto" (a
// reused one), "grad" (a reused Gradient, the loss Σ over saves of ‖ys‖²)
// and "grad-omit" (the same with Gradient.Omit = OmitStates|OmitStats:
// the loss and the gradients only, no saved states returned), and
// "grad-data" (grad with the data loss of a calibration, SavedResiduals:
// Σ over saves of ‖ys − d‖² against reference values d at the save times,
// each orbit's own, the saves of a solve with GM 1% higher) and
// "grad-data-w" (the same weighted by component, 1/σ_c² with σ = 1, 2,
// 1, 2: positions and velocities measured to different precisions). On an
// engine other than the CPU's it also runs "solveto-kept" and
// "grad-kept", solveto and grad with Settings.KeepSaves (the saves left
// on the device until read, and not read here: issue 23's "copied to the
// host only when the user reads it"); the CPU engine's saves are on the
// host anyway, so there they would be solveto and grad again.
//
// Each iteration runs the ensemble with 1 and with 1,000 save times,
// alternating, and reports the medians of both ("ms/1save",
// "ms/1000saves") and the median of the iterations' ratios ("ratio"), so
// that a machine whose load drifts during the run does not bias the
// ratio. Each iteration also writes the 1,000 save times' output (N·K·Dim
// values, 131 MB, into a reused array, trajectory by trajectory on every
// core) and reports the floor, the ratio a Solve that did nothing but
// write its output would reach: "floor" = (1 save + the write)/(1 save).
//
// It also reports the process's CPU time (user + system) of each call
// ("cpums/1save", "cpums/1000saves": medians) and the median of the
// iterations' ratios of those ("cpuratio"). On a machine shared with
// other jobs the wall times of a call wait for the cores as the load
// comes and goes; the CPU time it took is far steadier (Session 46 (H3)
// in docs/more-results.md: alternated runs of "cpuratio" within about
// ±0.05 where "ratio" spread ±0.3). Where the call keeps every core busy the
// two ratios agree; GC running beside a call counts in its CPU time.
func SaveRatio(b *testing.B, engine string) {
	const n = 4096
	kp := problems.Kepler()
	gm := make([]float64, n)
	for i := range gm {
		gm[i] = 0.95 + 0.1*float64(i)/float64(n-1)
	}
	loss := SavedSquares()
	ops := []string{"solve", "solveto", "grad", "grad-omit", "grad-data", "grad-data-w"}
	if engine != "" && engine != "cpu" {
		ops = append(ops, "solveto-kept", "grad-kept")
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
		for _, op := range ops {
			for _, mode := range []ode.SaveMode{ode.SaveInterpolate, ode.SaveStep} {
				modeName := map[ode.SaveMode]string{ode.SaveInterpolate: "interp", ode.SaveStep: "step"}[mode]
				b.Run(fmt.Sprintf("%s/%s/%s", m.Name(), op, modeName), func(b *testing.B) {
					kept := strings.HasSuffix(op, "-kept")
					sv, err := ode.NewSolver(kp.Field, &ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-11, Saves: mode, Engine: engine, KeepSaves: kept})
					if err != nil {
						b.Fatal(err)
					}
					type arm struct {
						p    ode.Problem
						g    ode.Gradient
						sol  ode.Solution
						loss ode.Loss
						d, c []float64 // wall and CPU ms of each call
					}
					var arms [2]*arm
					for a, k := range []int{1, 1000} {
						ts := make([]float64, k)
						for j := range ts {
							ts[j] = kp.T1 * float64(j+1) / float64(k)
						}
						arms[a] = &arm{p: ode.Problem{Field: kp.Field, N: n, Y0: kp.Y0, P: gm, T1: kp.T1, SaveAt: ts}}
						arms[a].loss = loss
						switch op {
						case "grad-omit":
							arms[a].g.Omit = ode.OmitStates | ode.OmitStats
						case "grad-data":
							arms[a].loss = SavedResiduals(b, sv, arms[a].p, nil)
						case "grad-data-w":
							arms[a].loss = SavedResiduals(b, sv, arms[a].p, []float64{1, 0.25, 1, 0.25})
						}
					}
					run := func(x *arm) error {
						var err error
						switch op {
						case "solve":
							_, err = sv.Solve(&x.p)
						case "solveto", "solveto-kept":
							_, err = sv.SolveTo(&x.sol, &x.p)
						default:
							_, err = sv.Grad(&x.g, &x.p, x.loss, nil)
						}
						return err
					}
					for _, x := range arms { // warm-up
						if err := run(x); err != nil {
							b.Fatal(err)
						}
					}
					var ratios, cpuRatios, floors []float64
					out := make([]float64, n*1000*kp.Field.Dim)
					b.ResetTimer()
					for range b.N {
						for _, x := range arms {
							t, c := time.Now(), cputime.Process()
							if err := run(x); err != nil {
								b.Fatal(err)
							}
							x.c = append(x.c, float64(cputime.Process()-c)/1e6)
							x.d = append(x.d, float64(time.Since(t))/1e6)
						}
						t1 := arms[0].d[len(arms[0].d)-1]
						ratios = append(ratios, arms[1].d[len(arms[1].d)-1]/t1)
						if c1 := arms[0].c[len(arms[0].c)-1]; c1 > 0 {
							cpuRatios = append(cpuRatios, arms[1].c[len(arms[1].c)-1]/c1)
						}
						t := time.Now()
						writeOutput(out, n)
						floors = append(floors, (t1+float64(time.Since(t))/1e6)/t1)
					}
					b.ReportMetric(Median(arms[0].d), "ms/1save")
					b.ReportMetric(Median(arms[1].d), "ms/1000saves")
					b.ReportMetric(Median(ratios), "ratio")
					if len(cpuRatios) > 0 { // (no CPU time where cputime cannot read it)
						b.ReportMetric(Median(arms[0].c), "cpums/1save")
						b.ReportMetric(Median(arms[1].c), "cpums/1000saves")
						b.ReportMetric(Median(cpuRatios), "cpuratio")
					}
					b.ReportMetric(Median(floors), "floor")
				})
			}
		}
	}
}

// SavedSquares is the save benchmarks' loss: the sum of the squares of
// every saved value, Σ_k Σ_c ys[k,c]² (a sum of terms of one save time
// each, whose cotangents the GPU engine computes in its reverse sweep).
func SavedSquares() ode.Loss {
	return ode.Loss{Name: "saved-squares", F: func(_, ys, _ []tape.V) tape.V {
		s := ys[0].Square()
		for _, x := range ys[1:] {
			s = s.Add(x.Square())
		}
		return s
	}}
}

// SavedResiduals is the data loss of a calibration against reference
// values at the save times: Σ_k Σ_c (ys[k,c] − d[k·Dim+c])², each term
// times w[c] where w is not nil, with data (DataDim K·Dim, each
// trajectory's own) the saves of problem p solved by sv with its
// parameters 1% higher.
func SavedResiduals(tb testing.TB, sv *ode.Solver, p ode.Problem, w []float64) ode.Loss {
	tb.Helper()
	p.P = append([]float64(nil), p.P...)
	for i := range p.P {
		p.P[i] *= 1.01
	}
	sol, err := sv.Solve(&p)
	if err != nil {
		tb.Fatal(err)
	}
	dim := p.Field.Dim
	return ode.Loss{Name: "saved-residuals", Data: sol.Ys, DataDim: len(p.SaveAt) * dim, F: func(_, ys, d []tape.V) tape.V {
		term := func(j int) tape.V {
			r := ys[j].Sub(d[j]).Square()
			if w != nil {
				r = r.MulC(w[j%dim])
			}
			return r
		}
		s := term(0)
		for j := 1; j < len(ys); j++ {
			s = s.Add(term(j))
		}
		return s
	}}
}

// Median returns the median of x (the upper one of an even count), 0 for
// none; x is not changed.
func Median(x []float64) float64 {
	y := append([]float64(nil), x...)
	sort.Float64s(y)
	if len(y) == 0 {
		return 0
	}
	return y[len(y)/2]
}

// writeOutput writes every value of out, the saved states of n
// trajectories, trajectory by trajectory, split over GOMAXPROCS
// goroutines: the least a solve that returns them costs.
func writeOutput(out []float64, n int) {
	w := runtime.GOMAXPROCS(0)
	per := len(out) / n
	var wg sync.WaitGroup
	for k := 0; k < w; k++ {
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			part := out[k*n/w*per : (k+1)*n/w*per]
			for i := range part {
				part[i] = float64(i)
			}
		}(k)
	}
	wg.Wait()
}
