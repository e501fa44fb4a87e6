package problems

import (
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// Benchmarks of the larger problems on the CPU engine (issue 26): how the
// cost of tracing, of building the plan and its reverse, and of a
// gradient grows with d. Each benchmark has the sub-benchmarks
//
//	trace    Field.Program: tracing the field
//	setup    ode.NewSolver and Plan.Reverse: the step programs and their
//	         reverse (for Rodas5P the Jacobian, its second derivatives and
//	         the W solves), what a first call pays before any work
//	cold     setup plus the first Grad (record and gradient), which also
//	         builds the executor's plans: a first call, whole
//	forward  Solver.Solve on a warm solver
//	grad     Solver.Grad with the record, on a warm solver
//
// forward and grad report steps/traj (accepted steps per trajectory) and
// us/step/traj, the time per accepted step and trajectory. The ensembles
// are small for a laptop; the sweeps are those of the suite: F =
// linspace(7, 9, n) for Lorenz-96, α = linspace(0.01, 0.03, n) for the
// Brusselator, k1 = linspace(0.28, 0.42, n) (0.35 ± 20%) for POLL. Run
// with -benchtime=3x: a cold iteration takes seconds for the Brusselator.
//
//	go test ./problems -run '^$' -bench . -benchtime=3x

type benchCase struct {
	pr         Problem
	method     ode.Method
	n          int
	k          int     // the swept per-trajectory parameter
	lo, hi     float64 // its range
	rtol, atol float64
}

func BenchmarkLorenz96_64(b *testing.B) {
	benchProblem(b, benchCase{pr: Lorenz96(64), method: ode.Tsit5, n: 64, lo: 7, hi: 9, rtol: 1e-6, atol: 1e-9})
}

func BenchmarkLorenz96_256(b *testing.B) {
	benchProblem(b, benchCase{pr: Lorenz96(256), method: ode.Tsit5, n: 64, lo: 7, hi: 9, rtol: 1e-6, atol: 1e-9})
}

func BenchmarkBrusselator(b *testing.B) {
	benchProblem(b, benchCase{pr: Brusselator(32), method: ode.Rodas5P, n: 16, lo: 0.01, hi: 0.03, rtol: 1e-6, atol: 1e-10})
}

func BenchmarkPollution(b *testing.B) {
	benchProblem(b, benchCase{pr: Pollution(), method: ode.Rodas5P, n: 64, lo: 0.28, hi: 0.42, rtol: 1e-6, atol: 1e-10})
}

func benchProblem(b *testing.B, c benchCase) {
	prob := sweep(c.pr, c.k, LinSpace(make([]float64, c.n), c.lo, c.hi))
	set := &ode.Settings{Method: c.method, RelTol: c.rtol, AbsTol: c.atol}
	loss := ode.SumSquares()
	b.Run("trace", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.pr.Field.Program(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("setup", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sv, err := ode.NewSolver(c.pr.Field, set)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sv.Plan().Reverse(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sv, err := ode.NewSolver(c.pr.Field, set)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := sv.Grad(nil, &prob, loss, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	sv, err := ode.NewSolver(c.pr.Field, set)
	if err != nil {
		b.Fatal(err)
	}
	g, err := sv.Grad(nil, &prob, loss, nil) // builds what the first call builds
	if err != nil {
		b.Fatal(err)
	}
	steps := 0
	for _, a := range g.Mesh.Stats.Accepted {
		steps += a
	}
	perStep := func(b *testing.B) {
		b.ReportMetric(float64(steps)/float64(c.n), "steps/traj")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(steps)/1e3, "us/step/traj")
	}
	b.Run("forward", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sv.Solve(&prob); err != nil {
				b.Fatal(err)
			}
		}
		perStep(b)
	})
	b.Run("grad", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sv.Grad(g, &prob, loss, nil); err != nil {
				b.Fatal(err)
			}
		}
		perStep(b)
		b.ReportMetric(float64(g.StoredBytes), "stored-B")
	})
}

// BenchmarkLargeScale sweeps d and n on warm solvers (issue 26: is d = 256
// pathological on the CPU engine?): Lorenz-96 with Tsit5 at d = 8, 64,
// 256 and n = 256, 1024, 4096; Rodas5P on Lorenz-96 (d = 8, 64) and the
// Brusselator (d = 64) at n = 256 and 1024. Each case has forward
// (Solver.Solve) and grad (Solver.Grad with the record) and reports
// ns/step/comp, the time per accepted step, trajectory and state
// component: flat in d for Tsit5 on the sparse Lorenz-96 field, O(d²)
// for Rodas5P (dense LU, d³/3 per step). stored-B is the peak of the
// stored states of a worker's chunk.
//
//	go test ./problems -run '^$' -bench LargeScale -benchtime=1x -count=3
func BenchmarkLargeScale(b *testing.B) {
	var cases []benchCase
	for _, d := range []int{8, 64, 256} {
		for _, n := range []int{256, 1024, 4096} {
			cases = append(cases, benchCase{pr: Lorenz96(d), method: ode.Tsit5, n: n, lo: 7, hi: 9, rtol: 1e-6, atol: 1e-9})
		}
	}
	for _, d := range []int{8, 64} {
		for _, n := range []int{256, 1024} {
			cases = append(cases, benchCase{pr: Lorenz96(d), method: ode.Rodas5P, n: n, lo: 7, hi: 9, rtol: 1e-6, atol: 1e-9})
		}
	}
	for _, n := range []int{256, 1024} {
		cases = append(cases, benchCase{pr: Brusselator(32), method: ode.Rodas5P, n: n, lo: 0.01, hi: 0.03, rtol: 1e-6, atol: 1e-10})
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("%s/%s/n=%d", c.pr.Name, methodName(c.method), c.n), func(b *testing.B) { benchWarm(b, c) })
	}
}

// benchWarm runs forward and grad of c on one warm solver.
func benchWarm(b *testing.B, c benchCase) {
	prob := sweep(c.pr, c.k, LinSpace(make([]float64, c.n), c.lo, c.hi))
	set := &ode.Settings{Method: c.method, RelTol: c.rtol, AbsTol: c.atol}
	loss := ode.SumSquares()
	sv, err := ode.NewSolver(c.pr.Field, set)
	if err != nil {
		b.Fatal(err)
	}
	g, err := sv.Grad(nil, &prob, loss, nil)
	if err != nil {
		b.Fatal(err)
	}
	steps := 0
	for _, a := range g.Mesh.Stats.Accepted {
		steps += a
	}
	d := c.pr.Field.Dim
	perStep := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(steps)/float64(d), "ns/step/comp")
	}
	b.Run("forward", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sv.Solve(&prob); err != nil {
				b.Fatal(err)
			}
		}
		perStep(b)
	})
	b.Run("grad", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := sv.Grad(g, &prob, loss, nil); err != nil {
				b.Fatal(err)
			}
		}
		perStep(b)
		b.ReportMetric(float64(g.StoredBytes), "stored-B")
	})
}

// methodName names the methods of the benchmarks.
func methodName(m ode.Method) string {
	switch m {
	case ode.Tsit5:
		return "tsit5"
	case ode.Rodas5P:
		return "rodas5p"
	}
	return "method"
}
