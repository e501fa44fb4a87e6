package cuda

import (
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostWideMinSplitSame runs wide-layout kernels whose short runs of
// values are replicated statements (Tuning.WideMinSplit: kernelgen's
// Config.WideMinSplit) and the kernels with every run a loop split over
// the lanes (WideMinSplit -1; Pollution's default is 16), and requires the same results bit for bit
// (the same operations on the same operands in the same order; the
// chained sums' loops stay as they were): Pollution with Rodas5P (d =
// 20, to t = 0.2, a save time: its reactions' code is mostly runs of 4
// to 8 components) on the host engine at 8 and 16, and HIRES with
// Rodas5P (d = 8, forced wide, to t = 5, a save time) at 16, where every
// run but the chained sums' is then statements; without -short also
// Pollution with Rosenbrock23 on the simulated warp (32 threads: the
// gathers that replace a loop's array in the loops left run across the
// lanes) at 16. Each case checks first that the gradient kernel's source
// changes.
func TestHostWideMinSplitSame(t *testing.T) {
	needHost(t)
	t.Parallel()
	type tc struct {
		engine string
		splits []int // compared with -1
		c      engineCase
		ops    []string
	}
	sim, host := "cuda-host-sim", "cuda-host"
	cases := []tc{
		{host, []int{8, 16}, wideRosCase(t, "pollution", ode.Rodas5P, 2, 0.2, true), []string{"solve", "grad"}},
		{host, []int{16}, wideRosCase(t, "hires", ode.Rodas5P, 2, 5, true), []string{"solve", "grad"}},
	}
	if !testing.Short() {
		cases = append(cases, tc{sim, []int{16}, wideRosCase(t, "pollution", ode.Rosenbrock23, 2, 0.2, false), []string{"grad"}})
	}
	for _, x := range cases {
		t.Run(fmt.Sprintf("%s-%s", x.engine, x.c.name), func(t *testing.T) {
			t.Parallel()
			engines := []string{tuned(t, x.engine, Tuning{Layout: LayoutWide, WideMinSplit: -1})}
			for _, split := range x.splits {
				if wideSplitSame(t, x.c, split) {
					t.Fatalf("WideMinSplit %d: the gradient kernel's source is every run a loop's: the case checks nothing", split)
				}
				engines = append(engines, tuned(t, x.engine, Tuning{Layout: LayoutWide, WideMinSplit: split}))
			}
			for _, op := range x.ops {
				got := make([][]float64, len(engines))
				for k, engine := range engines {
					got[k] = wideResults(t, x.c, engine, op)
				}
				for k, split := range x.splits {
					sameWideResults(t, op, fmt.Sprintf("WideMinSplit %d", split), "every run a loop", got[k+1], got[0])
				}
			}
		})
	}
}

// wideSplitSame reports whether case c's wide gradient kernel with
// WideMinSplit split has the source of every run a loop (-1).
func wideSplitSame(t *testing.T, c engineCase, split int) bool {
	t.Helper()
	wide := func(v *kernelgen.Config) { v.Wide, v.RowMajor = true, true }
	def := kernelSourceWith(t, c, ode.OpGrad, func(v *kernelgen.Config) { wide(v); v.WideMinSplit = -1 })
	with := kernelSourceWith(t, c, ode.OpGrad, func(v *kernelgen.Config) { wide(v); v.WideMinSplit = split })
	return def == with
}

// TestGPUWideMinSplitSame is TestHostWideMinSplitSame on the device:
// the wide layout's kernels with Tuning.WideMinSplit 8 and 16 against
// every run a loop (-1), bit for bit (sameRuns: the solve,
// the gradient with the record, the gradient on the mesh, which runs in
// the thread layout and is the same kernel), for the large-state suite's
// Pollution and HIRES ensembles (layoutFillCase, 1,000 trajectories, the
// whole interval, Rodas5P). It skips without a GPU.
func TestGPUWideMinSplitSame(t *testing.T) {
	needGPUEngine(t)
	for _, name := range []string{"pollution", "hires"} {
		c := layoutFillCase(t, name, 1000)
		for _, split := range []int{8, 16} {
			t.Run(fmt.Sprintf("%s/split=%d", name, split), func(t *testing.T) {
				sameRuns(t, c, c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, WideMinSplit: split})), c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, WideMinSplit: -1})))
			})
		}
	}
}

// BenchmarkGPUWideSplit times the wide layout's gradient with the
// record and forward solve (kernels: kernel-ms/op; whole calls: ms/op)
// of the large-state suite's Pollution (d = 20) and HIRES (d = 8) shapes
// with Rodas5P (layoutFillCase, n = 4096, the whole interval, rtol 1e-6,
// atol 1e-10: the gpu-large suite's ensembles and tolerances), of the
// Brusselator (d = 64, Rodas5P, n = 1024, t ∈ [0, 0.5]: wideRosBenchCase)
// and of Lorenz-96 (d = 64, Tsit5, n = 4096: wideBenchGradCase; the
// gradient only) with Tuning.WideMinSplit -1 (every run a loop split over
// the lanes: the kernels before session 44), 8, 16 (the default from 16
// components) and 33 (every run shorter than a warp, Pollution's d = 20
// loops too, but the chained sums' statements), side by side, and
// reports the gradient kernel's registers per thread (regs) and local
// memory per thread (local-B), as ptxas allocated them
// (wideKernelAttrs), and each kernel's shared memory per warp (shared-B)
// and the warps an H100's shared memory runs at once on a multiprocessor
// (warps/SM, by kernelgen.WideOccupancy; the registers' cap of the launch
// bounds, 128 a thread, lets 16 run): Pollution's gradient takes 14,256 B
// a warp with every run a loop (15 warps in blocks of one, 1,980
// trajectories at once on 132 multiprocessors: n = 4096 in three rounds,
// the third 136 trajectories) and 13,544 B with WideMinSplit 8 or 16 (16
// warps, 2,112: two rounds). Each variant compiles its kernels once (a
// minute or so for Pollution's gradient on an empty cache); the gradients
// are timed in wideSplitRounds rounds, the variants in turn within each:
//
//	go test ./cuda -run XXX -bench 'GPUWideSplit' -benchtime 5x -timeout 40m
func BenchmarkGPUWideSplit(b *testing.B) {
	needGPUEngine(b)
	cases := map[string]engineCase{}
	caseOf := func(name string) engineCase {
		switch name {
		case "brusselator":
			return wideRosBenchCase(b, name, 1024)
		case "lorenz96-64":
			return wideBenchGradCase(4096, 64)
		}
		return layoutFillCase(b, name, 4096)
	}
	for round := range wideSplitRounds {
		for _, name := range []string{"pollution", "hires", "brusselator", "lorenz96-64"} {
			c, ok := cases[name]
			if !ok {
				c = caseOf(name)
				cases[name] = c
			}
			for _, split := range []int{-1, 8, 16, 33} {
				tun := Tuning{Layout: LayoutWide, WideMinSplit: split}
				engine := tuned(b, "cuda", tun)
				for _, op := range []string{"grad", "solve"} {
					if round > 0 && op == "solve" || name == "lorenz96-64" && op == "solve" {
						continue // (one round of the forward kernels says enough)
					}
					b.Run(fmt.Sprintf("%s/%s/split=%d", op, name, split), func(b *testing.B) {
						benchWide(b, c, op, engine, "wide")
						grad := op == "grad"
						if grad && round == 0 {
							a := wideKernelAttrs(b, c, tun)
							b.ReportMetric(float64(a.Registers), "regs")
							b.ReportMetric(float64(a.LocalBytes), "local-B")
						}
						per := wideSplitShared(b, c, grad, split)
						_, on := kernelgen.WideOccupancy(per, 227<<10)
						b.ReportMetric(float64(per), "shared-B")
						b.ReportMetric(float64(on), "warps/SM")
					})
				}
			}
		}
	}
}

// wideSplitRounds is how many times BenchmarkGPUWideSplit times each
// gradient, the variants in turn (go test's -count repeats a
// sub-benchmark in a row): the second and later rounds' names end in
// #01, #02.
const wideSplitRounds = 3

// wideSplitShared returns the shared memory per warp of case c's wide
// gradient (grad) or solve kernel with Tuning.WideMinSplit split.
func wideSplitShared(b *testing.B, c engineCase, grad bool, split int) int {
	b.Helper()
	op := ode.OpSolve
	if grad {
		op = ode.OpGrad
	}
	sp, err := kernelgen.NewStepPrograms(jobOf(b, c, op).Plan)
	if err != nil {
		b.Fatal(err)
	}
	per, err := sp.WideSharedPerWarpFor(kernelgen.Config{Grad: grad, WideMinSplit: split})
	if err != nil {
		b.Fatal(err)
	}
	return per
}
