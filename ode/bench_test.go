package ode_test

import (
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/bench"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Benchmarks of the Lorenz protocol (bench.RunLorenz has the full
// protocol with accuracy; these are for benchstat). Names follow
// Benchmark<Verb><Problem><Method>/n=…/rtol=…, so that, for example,
//
//	go test ./ode -run '^$' -bench 'Lorenz.*/n=2048/' -count 10
//
// puts BenchmarkSolveLorenzTsit5 and the hand-written
// BenchmarkBaselineLorenzTsit5 side by side. The Serial variants run on one
// goroutine; the others use all cores. Every benchmark reports traj/s
// (trajectories per second) and steps/traj (mean accepted steps).

var (
	benchLorenzN      = []int{128, 2048, 32768}
	benchLorenzRelTol = []float64{1e-4, 1e-6, 1e-8}
)

// lorenzCases runs f for every (n, rtol) of the Lorenz protocol as a
// sub-benchmark n=…/rtol=….
func lorenzCases(b *testing.B, f func(b *testing.B, e *bench.LorenzEnsemble, set *ode.Settings)) {
	for _, n := range benchLorenzN {
		for _, rtol := range benchLorenzRelTol {
			b.Run(fmt.Sprintf("n=%d/rtol=%.0e", n, rtol), func(b *testing.B) {
				f(b, bench.ProtocolLorenz(n), &ode.Settings{Method: ode.Tsit5, RelTol: rtol, AbsTol: rtol * 1e-3})
			})
		}
	}
}

// reportTraj reports traj/s and steps/traj.
func reportTraj(b *testing.B, n int, stepsPerTraj float64) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "traj/s")
	b.ReportMetric(stepsPerTraj, "steps/traj")
}

func meanSteps(st ode.Stats) float64 {
	return float64(st.TotalAccepted()) / float64(len(st.Accepted))
}

func benchmarkSolveLorenz(b *testing.B, workers int) {
	lorenzCases(b, func(b *testing.B, e *bench.LorenzEnsemble, set *ode.Settings) {
		set.Exec = tape.ExecSettings{Workers: workers}
		p := e.Problem()
		sv, err := ode.NewSolver(p.Field, set)
		if err != nil {
			b.Fatal(err)
		}
		sol, err := sv.Solve(&p)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if _, err := sv.Solve(&p); err != nil {
				b.Fatal(err)
			}
		}
		reportTraj(b, p.N, meanSteps(sol.Stats))
	})
}

// BenchmarkSolveLorenzTsit5 times the library's forward solve.
func BenchmarkSolveLorenzTsit5(b *testing.B) { benchmarkSolveLorenz(b, 0) }

// BenchmarkSolveLorenzTsit5Serial times the forward solve on one goroutine.
func BenchmarkSolveLorenzTsit5Serial(b *testing.B) { benchmarkSolveLorenz(b, 1) }

// BenchmarkRecordLorenzTsit5 times recording a mesh.
func BenchmarkRecordLorenzTsit5(b *testing.B) {
	lorenzCases(b, func(b *testing.B, e *bench.LorenzEnsemble, set *ode.Settings) {
		p := e.Problem()
		sv, err := ode.NewSolver(p.Field, set)
		if err != nil {
			b.Fatal(err)
		}
		m, _, err := sv.Record(&p)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if _, _, err := sv.Record(&p); err != nil {
				b.Fatal(err)
			}
		}
		reportTraj(b, p.N, meanSteps(m.Stats))
	})
}

// BenchmarkGradLorenzTsit5 times the gradient of Σ‖y(1)‖² with respect to
// every parameter on a recorded mesh (the record is excluded).
func BenchmarkGradLorenzTsit5(b *testing.B) {
	lorenzCases(b, func(b *testing.B, e *bench.LorenzEnsemble, set *ode.Settings) {
		p := e.Problem()
		sv, err := ode.NewSolver(p.Field, set)
		if err != nil {
			b.Fatal(err)
		}
		m, _, err := sv.Record(&p)
		if err != nil {
			b.Fatal(err)
		}
		loss := ode.SumSquares()
		var g ode.Gradient
		if _, err := sv.Grad(&g, &p, loss, m); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if _, err := sv.Grad(&g, &p, loss, m); err != nil {
				b.Fatal(err)
			}
		}
		reportTraj(b, p.N, meanSteps(m.Stats))
	})
}

func benchmarkBaselineLorenz(b *testing.B, workers int) {
	lorenzCases(b, func(b *testing.B, e *bench.LorenzEnsemble, set *ode.Settings) {
		bs := &bench.BaselineSettings{RelTol: set.RelTol, AbsTol: set.AbsTol, Workers: workers}
		var st bench.BaselineStats
		y, err := bench.LorenzTsit5(nil, e, bs, &st)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if _, err := bench.LorenzTsit5(y, e, bs, nil); err != nil {
				b.Fatal(err)
			}
		}
		steps := 0
		for _, a := range st.Accepted {
			steps += a
		}
		reportTraj(b, len(e.Rho), float64(steps)/float64(len(e.Rho)))
	})
}

// BenchmarkBaselineLorenzTsit5 times the hand-written Go Tsit5 loop
// (bench.LorenzTsit5) on all cores, the baseline of
// BenchmarkSolveLorenzTsit5.
func BenchmarkBaselineLorenzTsit5(b *testing.B) { benchmarkBaselineLorenz(b, 0) }

// BenchmarkBaselineLorenzTsit5Serial times the baseline on one goroutine,
// the baseline of BenchmarkSolveLorenzTsit5Serial.
func BenchmarkBaselineLorenzTsit5Serial(b *testing.B) { benchmarkBaselineLorenz(b, 1) }

// BenchmarkGradRobertsonRodas5P times the gradient of Σ‖y(100)‖² over a
// Robertson ensemble (k1 = linspace(0.03, 0.05, n); bench.StiffEnsemble)
// with Rodas5P on a recorded mesh, atol = rtol·1e-4.
func BenchmarkGradRobertsonRodas5P(b *testing.B) {
	for _, n := range []int{128, 2048} {
		for _, rtol := range []float64{1e-4, 1e-6, 1e-8} {
			b.Run(fmt.Sprintf("n=%d/rtol=%.0e", n, rtol), func(b *testing.B) {
				p, _, err := bench.StiffEnsemble("robertson", n, 0)
				if err != nil {
					b.Fatal(err)
				}
				sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: ode.Rodas5P, RelTol: rtol, AbsTol: rtol * 1e-4})
				if err != nil {
					b.Fatal(err)
				}
				m, _, err := sv.Record(&p)
				if err != nil {
					b.Fatal(err)
				}
				loss := ode.SumSquares()
				var g ode.Gradient
				if _, err := sv.Grad(&g, &p, loss, m); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					if _, err := sv.Grad(&g, &p, loss, m); err != nil {
						b.Fatal(err)
					}
				}
				reportTraj(b, n, meanSteps(m.Stats))
			})
		}
	}
}
