package cuda

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// BenchmarkGPUSaveRatio is the dense-output targets' benchmark
// (odetest.SaveRatio: 1 against 1,000 save times, Tsit5 and Vern7, Solve
// and Grad) on the GPU engine. It skips without a GPU.
//
//	cuda.test -test.run '^$' -test.bench GPUSaveRatio -test.benchtime 7x
func BenchmarkGPUSaveRatio(b *testing.B) {
	needGPUEngine(b)
	odetest.SaveRatio(b, "cuda")
}

// BenchmarkGPUSaveSplit splits the time of a Kepler call (4,096 orbits,
// Tsit5, rtol 1e-8) with 1 and with 1,000 save times into the device's
// kernels, the copies and the rest (host work), per call, for SolveTo,
// Grad and Grad with Gradient.Omit (loss and gradients only), so that the
// save ratios of BenchmarkGPUSaveRatio can be read: which part grows with
// the save times, and the first call's compile time ("compile-s": its
// kernels generated and compiled, or loaded from the disk cache). The loss
// is the saved states' sum of squares.
//
// The -kept variants keep the saves on the device
// (ode.Settings.KeepSaves: Solution.Resident, the saves kernel's
// rearrangement in the call, nothing of them copied back); -kept-read
// then reads them after each call (Solution.HostSaves: one copy,
// "read-ms/op", part of ns/op). Issue 25's targets compare saves=1000
// with saves=1 of the same variant: ns/op of solveto-kept ≤ 1.5× and of
// grad-kept ≤ 2×.
//
// The -tb variants of grad and grad-kept run the gradient kernel with the
// save times' cotangents stored by the loss VJP and read by the reverse
// sweep (Tuning.StoreSaveCots), the form before session 44, where the
// others compute them in the sweep (kernelgen's savecot.go); alternate
// them by runs of the binary (-test.count runs a sub-benchmark its times
// in a row). The -ungrouped
// variants of grad and grad-kept run the gradient kernel whose reverse
// sweep reads the save times' cotangents one save time at a time
// (Tuning.ungroupedCots), the form before session 47, where the others
// read a group of save times' times and cotangents at once
// (adjoint.cuh's gs_save_cots). The -thetas variants of grad and
// grad-kept run the gradient kernel whose reverse sweep reads each save
// time's quotient theta as the forward pass kept it (Tuning.keepThetas,
// kernelgen's KeepThetas), where the others divide again. The -divsaves
// variants of solveto-kept and grad-kept run the kernels whose forward
// pass divides for each save time's quotient and computes its
// interpolant under its own test (Tuning.divideSaves, the form before
// session 49), where the others take a group's quotients from the step's
// reciprocal (kernelgen's gs_quot, the same bits) and its interpolants
// together; in the sweep too, the grouped save times' quotients come
// from the step's reciprocal. grad-kept-full is grad-kept with its
// kernels compiled at full optimisation (Tuning.FastCompile "none":
// Vern7's gradient kernels of Kepler, about 350 kB of source, are
// otherwise compiled with --ptxas-options=-O1, from
// defaultFastCompileFrom). The -defer variants of solveto-kept and
// grad-kept run the engine with Tuning.deferSaves: the forward pass
// keeps what each accepted step's save times need in rows on the device
// and a second kernel of the module (gs_engine_saves, a thread a step
// and trajectory) interpolates them (in a gradient also the cotangents
// of the step's coefficients), a gradient's adjoint then running in a
// third (gs_engine_rev): the same results bit for bit. Their
// kernel-ms/op is all the kernels'. Since session 52 the default defers
// a solve's save times from deferSavesFrom of them and Vern7's gradient's
// (deferByDefault); the -inline variants run the engine with
// Tuning.inlineSaves, every save time evaluated in the forward pass.
// grad-kept, solveto-kept and their -ungrouped,
// -thetas, -divsaves, -defer, -inline and -full rows also report their kernel's
// registers ("regs") and local memory a thread ("local-B": spills and
// local arrays).
// solveto-kept-old and grad-kept-old are solveto-kept and
// grad-kept with the saved states in the form before session 46
// (Tuning.oldSaves: every save time's step written in a solve too, a
// dense step's stores in a loop of bounds m, and the kept saves
// rearranged into rows by the saves kernel after every call, where now
// the engine kernel writes them in place and they are rearranged when
// read), the same saves bit for bit:
//
//	cuda.test -test.run '^$' -test.bench GPUSaveSplit -test.benchtime 5x
//	for r in 1 2 3 4 5; do for v in grad-kept grad-kept-tb grad-kept-ungrouped; do
//	  cuda.test -test.run '^$' -test.bench "GPUSaveSplit/saves=(1|1000)/$v\$" -test.benchtime 20x
//	done; done
//	cuda.test -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/solveto-kept(-old)?$' -test.benchtime 20x -test.count 3
//	for r in 1 2 3 4 5; do for v in solveto-kept solveto-kept-divsaves grad-kept grad-kept-divsaves; do
//	  cuda.test -test.run '^$' -test.bench "GPUSaveSplit/saves=(1|1000)/$v\$" -test.benchtime 20x
//	  cuda.test -test.run '^$' -test.bench "GPUSaveSplit/Vern7/saves=(1|1000)/$v\$" -test.benchtime 20x
//	done; done
//	for r in 1 2 3 4 5; do for v in solveto-kept solveto-kept-defer grad-kept grad-kept-defer; do
//	  cuda.test -test.run '^$' -test.bench "GPUSaveSplit/saves=(1|1000)/$v\$" -test.benchtime 20x
//	  cuda.test -test.run '^$' -test.bench "GPUSaveSplit/Vern7/saves=(1|1000)/$v\$" -test.benchtime 20x
//	done; done
//
// The same calls with Vern7 are the Vern7 sub-benchmark's (its steps hold
// about twice Tsit5's save times):
//
//	cuda.test -test.run '^$' -test.bench 'GPUSaveSplit/Vern7/saves=(1|1000)/grad-kept$' -test.benchtime 20x
func BenchmarkGPUSaveSplit(b *testing.B) {
	needGPUEngine(b)
	engines := saveSplitEngines{engine: "cuda", stored: tuned(b, "cuda", Tuning{StoreSaveCots: true}), old: tuned(b, "cuda", Tuning{oldSaves: true}),
		ungrouped: tuned(b, "cuda", Tuning{ungroupedCots: true}), thetas: tuned(b, "cuda", Tuning{keepThetas: true}),
		divsaves: tuned(b, "cuda", Tuning{divideSaves: true}), full: tuned(b, "cuda", Tuning{FastCompile: "none"}),
		deferred: tuned(b, "cuda", Tuning{deferSaves: true}), inline: tuned(b, "cuda", Tuning{inlineSaves: true})}
	benchSaveSplit(b, engines, 4096, []ode.Method{ode.Tsit5})
	b.Run("Vern7", func(b *testing.B) { benchSaveSplit(b, engines, 4096, []ode.Method{ode.Vern7}) })
}

// BenchmarkHostSaveSplit is BenchmarkGPUSaveSplit on the host backend,
// for Tsit5 and Vern7 at n = 256: the kernels compiled as host C++ with
// -O2 (-ffp-contract=off) and run as a loop over the trajectories, each
// launch's kernel-ms/op its own time inside the process (hostMainOf),
// without the process and its files. Its kernels' ratio of 1,000 save
// times to one is the save path's cost per trajectory in instructions
// and host caches, not the device's latencies. It skips where g++ is
// missing.
//
//	go test ./cuda -run '^$' -bench 'HostSaveSplit/.*/(solveto|grad)$' -benchtime 3x
func BenchmarkHostSaveSplit(b *testing.B) {
	needHost(b)
	benchSaveHostOnce.Do(func() {
		for k, name := range []string{"cuda-host-o2-bench", "cuda-host-o2-bench-tb", "cuda-host-o2-bench-old", "cuda-host-o2-bench-ungrouped", "cuda-host-o2-bench-thetas", "cuda-host-o2-bench-divsaves", "cuda-host-o2-bench-defer", "cuda-host-o2-bench-inline"} {
			e := &Engine{name: name, prec: Float64, be: newHostBackend(1 << 32)}
			e.be.(*hostBackend).optimize = true
			tun := envTuning()
			tun.WaitForCompile, tun.StoreSaveCots, tun.oldSaves, tun.ungroupedCots, tun.keepThetas, tun.divideSaves = true, k == 1, k == 2, k == 3, k == 4, k == 5
			tun.deferSaves, tun.inlineSaves = k == 6, k == 7
			e.SetTuning(tun)
			ode.Register(e)
			benchSaveHost[k] = e
		}
	})
	engines := saveSplitEngines{engine: benchSaveHost[0].Name(), stored: benchSaveHost[1].Name(), old: benchSaveHost[2].Name(),
		ungrouped: benchSaveHost[3].Name(), thetas: benchSaveHost[4].Name(), divsaves: benchSaveHost[5].Name(), full: benchSaveHost[0].Name(),
		deferred: benchSaveHost[6].Name(), inline: benchSaveHost[7].Name()}
	benchSaveSplit(b, engines, 256, []ode.Method{ode.Tsit5, ode.Vern7})
}

// benchSaveHost are BenchmarkHostSaveSplit's engines, registered at its
// first run: cuda-host with kernels compiled with -O2, no memo, and the
// same with Tuning.StoreSaveCots, with Tuning.oldSaves, with
// Tuning.ungroupedCots, with Tuning.keepThetas, with
// Tuning.divideSaves, with Tuning.deferSaves and with Tuning.inlineSaves.
var (
	benchSaveHostOnce sync.Once
	benchSaveHost     [8]*Engine
)

// saveSplitAttrOps are the rows of BenchmarkGPUSaveSplit that report
// their kernel's registers and local memory (a solve's for the solveto
// rows, else the gradient's), with the tuning of their engine's kernel.
var saveSplitAttrOps = map[string]Tuning{"grad-kept": {}, "grad-kept-ungrouped": {ungroupedCots: true}, "grad-kept-thetas": {keepThetas: true},
	"grad-kept-divsaves": {divideSaves: true}, "solveto-kept": {}, "solveto-kept-divsaves": {divideSaves: true}, "grad-kept-full": {FastCompile: "none"},
	"solveto-kept-defer": {deferSaves: true}, "grad-kept-defer": {deferSaves: true},
	"solveto-kept-inline": {inlineSaves: true}, "grad-kept-inline": {inlineSaves: true}}

// saveSplitAttrs are the kernels' resources BenchmarkGPUSaveSplit reports,
// by method, save times and row.
var saveSplitAttrs = map[string]driver.KernelAttrs{}

// saveSplitEngines are the engines of benchSaveSplit's variants: engine
// the default; stored (the -tb variants) with Tuning.StoreSaveCots; old
// (-old) with Tuning.oldSaves; ungrouped (-ungrouped) with
// Tuning.ungroupedCots; thetas (-thetas) with Tuning.keepThetas;
// divsaves (-divsaves) with Tuning.divideSaves; full (-full) with
// Tuning.FastCompile "none" (on the host backend, which runs no NVRTC,
// the default engine); deferred (-defer) with Tuning.deferSaves; inline
// (-inline) with Tuning.inlineSaves.
type saveSplitEngines struct {
	engine, stored, old, ungrouped, thetas, divsaves, full, deferred, inline string
}

// benchSaveSplit runs BenchmarkGPUSaveSplit's calls on the engines e, for
// n orbits and the methods ms (a level of sub-benchmarks where there are
// several).
func benchSaveSplit(b *testing.B, e saveSplitEngines, n int, ms []ode.Method) {
	if len(ms) > 1 {
		for _, m := range ms {
			b.Run(m.Name(), func(b *testing.B) { benchSaveSplit(b, e, n, []ode.Method{m}) })
		}
		return
	}
	engine, stored, old, ungrouped := e.engine, e.stored, e.old, e.ungrouped
	kp := problems.Kepler()
	loss := odetest.SavedSquares()
	set := ode.Settings{Method: ms[0], RelTol: 1e-8, AbsTol: 1e-11, Engine: engine}
	sv, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.KeepSaves = true
	svKeep, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.Engine = stored
	svKeepTB, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.Engine = old
	svKeepOld, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.Engine = ungrouped
	svKeepUngrouped, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.KeepSaves = false
	svUngrouped, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.Engine = stored
	svTB, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.Engine = e.thetas
	svThetas, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.KeepSaves = true
	svKeepThetas, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.Engine = e.divsaves
	svKeepDivSaves, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.Engine = e.full
	svKeepFull, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.Engine = e.deferred
	svKeepDefer, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	set.Engine = e.inline
	svKeepInline, err := ode.NewSolver(kp.Field, &set)
	if err != nil {
		b.Fatal(err)
	}
	for _, k := range []int{1, 1000} {
		ts := make([]float64, k)
		for j := range ts {
			ts[j] = kp.T1 * float64(j+1) / float64(k)
		}
		p := ode.Problem{Field: kp.Field, N: n, Y0: kp.Y0, P: kp.P, T1: kp.T1, SaveAt: ts}
		for _, op := range []string{"solveto", "grad", "grad-tb", "grad-omit", "solveto-kept", "solveto-kept-old", "solveto-kept-read", "grad-kept", "grad-kept-old", "grad-kept-tb", "grad-kept-read", "grad-ungrouped", "grad-kept-ungrouped", "grad-thetas", "grad-kept-thetas", "solveto-kept-divsaves", "grad-kept-divsaves", "grad-kept-full", "solveto-kept-defer", "grad-kept-defer", "solveto-kept-inline", "grad-kept-inline"} {
			b.Run(fmt.Sprintf("saves=%d/%s", k, op), func(b *testing.B) {
				var sol ode.Solution
				var g ode.Gradient
				if op == "grad-omit" {
					g.Omit = ode.OmitStates | ode.OmitStats
				}
				solver := sv
				switch {
				case op == "grad-tb":
					solver = svTB
				case op == "grad-kept-tb":
					solver = svKeepTB
				case op == "grad-ungrouped":
					solver = svUngrouped
				case op == "grad-kept-ungrouped":
					solver = svKeepUngrouped
				case op == "grad-thetas":
					solver = svThetas
				case op == "grad-kept-thetas":
					solver = svKeepThetas
				case strings.HasSuffix(op, "-kept-divsaves"):
					solver = svKeepDivSaves
				case op == "grad-kept-full":
					solver = svKeepFull
				case strings.HasSuffix(op, "-kept-defer"):
					solver = svKeepDefer
				case strings.HasSuffix(op, "-kept-inline"):
					solver = svKeepInline
				case strings.HasSuffix(op, "-kept-old"):
					solver = svKeepOld
				case strings.Contains(op, "-kept"):
					solver = svKeep
				}
				read := strings.HasSuffix(op, "-read")
				var tr Trace
				var reading time.Duration
				ctx := WithTrace(b.Context(), &tr)
				run := func() {
					var err error
					out := &sol
					if strings.HasPrefix(op, "solveto") {
						_, err = solver.SolveToContext(ctx, &sol, &p)
					} else {
						_, err = solver.GradContext(ctx, &g, &p, loss, nil)
						out = g.Solution
					}
					if err != nil {
						b.Fatal(err)
					}
					if read {
						t := time.Now()
						if err := out.HostSaves(); err != nil {
							b.Fatal(err)
						}
						reading += time.Since(t)
					}
				}
				run() // warm: kernels, buffers
				compile := tr.Stats().Compile
				tr.Reset()
				reading = 0
				b.ResetTimer()
				for range b.N {
					run()
				}
				b.StopTimer()
				s := tr.Stats()
				per := func(d time.Duration) float64 { return float64(d) / 1e6 / float64(b.N) }
				b.ReportMetric(per(s.Kernel), "kernel-ms/op")
				b.ReportMetric(per(s.Transfer), "copy-ms/op")
				b.ReportMetric(float64(s.Download)/1e6/float64(b.N), "down-MB/op")
				b.ReportMetric(compile.Seconds(), "compile-s")
				if read {
					b.ReportMetric(per(reading), "read-ms/op")
				}
				if strings.Contains(op, "-kept") && k > 1 && s.SavesKept == 0 {
					b.Fatal("no saves kept on the device")
				}
				if tun, ok := saveSplitAttrOps[op]; ok && e.engine == "cuda" {
					// The kernel's registers and local memory (as the
					// engine chooses it on this device), compiled once a
					// method, count and row.
					key := fmt.Sprintf("%s/%d/%s", ms[0].Name(), k, op)
					a, ok := saveSplitAttrs[key]
					if !ok {
						c := keplerSavesCase(k)
						c.prob.N, c.set.Method = n, ms[0]
						kop := ode.OpGrad
						if strings.HasPrefix(op, "solveto") {
							kop = ode.OpSolve
						}
						a, _ = kernelAttrs(b, c, kop, tun)
						saveSplitAttrs[key] = a
					}
					b.ReportMetric(float64(a.Registers), "regs")
					b.ReportMetric(float64(a.LocalBytes), "local-B")
				}
			})
		}
	}
}
