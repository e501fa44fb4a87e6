package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostWideScalarsSame runs wide-layout kernels whose replicated
// scalars live partly in the warp's shared memory (Tuning.WideScalars:
// kernelgen's widespill.go) and with every one in registers
// (WideScalars -1, the source as before), and requires the same results
// bit for bit (only the storage moves): Lorenz-96 (d = 64, Tsit5, save
// times, shared parameters) on the simulated warp (32 threads, so the
// slots' stores by every lane and their reuse across __syncwarp()s run
// concurrently) with a budget of 4 values, and of 8 with launch bounds
// (Tuning.WideMinBlocks: the host's source compiles them away); Pollution with Rodas5P (d =
// 20, to t = 0.2, a save time: its reverse step keeps up to 183 values
// live) on the host engine at the default budget and at 16; without
// -short also Pollution with Rosenbrock23 on the host engine at 8.
// It logs how many results it compared.
func TestHostWideScalarsSame(t *testing.T) {
	needHost(t)
	t.Parallel()
	type tc struct {
		engine string
		tuns   []Tuning // compared with WideScalars -1
		c      engineCase
		ops    []string
	}
	sim, host := "cuda-host-sim", "cuda-host"
	cases := []tc{
		{sim, []Tuning{{WideScalars: 4}, {WideScalars: 8, WideMinBlocks: 6}}, wideSavesCase(2, 64), []string{"solve", "grad"}},
		{host, []Tuning{{}, {WideScalars: 16}}, wideRosCase(t, "pollution", ode.Rodas5P, 2, 0.2, true), []string{"solve", "grad"}},
	}
	if !testing.Short() {
		cases = append(cases, tc{host, []Tuning{{WideScalars: 8}}, wideRosCase(t, "pollution", ode.Rosenbrock23, 2, 0.2, true), []string{"grad"}})
	}
	for _, x := range cases {
		t.Run(fmt.Sprintf("%s-d=%d-%s", x.c.name, x.c.prob.Field.Dim, x.c.set.Method.Name()), func(t *testing.T) {
			t.Parallel()
			engines := []string{tuned(t, x.engine, Tuning{Layout: LayoutWide, WideScalars: -1})}
			for _, tun := range x.tuns {
				if n := wideSpilled(t, x.c, tun.WideScalars); n == 0 {
					t.Fatalf("WideScalars %d: the gradient kernel moves no value out of registers: the case checks nothing", tun.WideScalars)
				} else {
					t.Logf("WideScalars %d: %d values of the gradient kernel out of registers", tun.WideScalars, n)
				}
				tun.Layout = LayoutWide
				engines = append(engines, tuned(t, x.engine, tun))
			}
			for _, op := range x.ops {
				got := make([][]float64, len(engines))
				for k, engine := range engines {
					got[k] = wideResults(t, x.c, engine, op)
				}
				for k, tun := range x.tuns {
					form := fmt.Sprintf("WideScalars %d, WideMinBlocks %d", tun.WideScalars, tun.WideMinBlocks)
					sameWideResults(t, op, form, "no limit", got[k+1], got[0])
				}
			}
		})
	}
}

// wideSpilled returns how many replicated values the wide gradient
// kernel of case c moves out of registers with a budget of scalars
// (kernelgen.Config.WideScalars).
func wideSpilled(t *testing.T, c engineCase, scalars int) int {
	t.Helper()
	src := kernelSourceWith(t, c, ode.OpGrad, func(v *kernelgen.Config) { v.Wide, v.RowMajor, v.WideScalars = true, true, scalars })
	return strings.Count(src, "out of registers (widespill.go)")
}

// BenchmarkGPUWideRegs times the wide layout's gradient (Rodas5P; Lorenz-96: Tsit5) with the
// record (kernels: kernel-ms/op; whole calls: ms/op) of Pollution
// (d = 20, n = 4096, wideRosBenchCase: the large-state suite's shape,
// t ∈ [0, 0.5]) and HIRES (d = 8, n = 4096, layoutFillCase) under the
// register levers, side by side per problem, and reports each kernel's
// registers per thread (regs) and local memory per thread (local-B:
// spills and local arrays), as ptxas allocated them (the kernel's
// source compiled again with the engine's options: a hit in the disk
// cache). Every variant runs a warp per trajectory (Tuning.wideLanes
// -1), the kernels these levers were measured on:
//
//   - none: every replicated scalar in registers (Tuning.WideScalars
//     -1: the kernels before widespill.go), no launch bounds;
//   - s64: the defaults: a budget of 64 (kernelgen.DefaultWideScalars)
//     and launch bounds of as many blocks as shared memory lets run, at
//     most 7 (wideMinBlocks); s48, s96: other budgets;
//   - s64-b0: no launch bounds (Tuning.WideMinBlocks -1: the default
//     before session 42);
//   - s64-b6, s64-b7, none-b6: with launch bounds of 6 or 7 blocks of
//     two warps per multiprocessor (Tuning.WideMinBlocks: registers
//     capped at 168 or 144);
//   - s64-b10, s64-b12, s64-b16 (HIRES only: its warps' shared memory
//     lets 16 blocks run, and n = 4096 takes two rounds of the default's
//     16 warps): bounds of more blocks (registers capped at 96, 80, 64);
//   - s64-round (every case): bounds of as many blocks as one round of
//     the case's trajectories needs where shared memory lets them run
//     (Tuning.wideRound, wideRoundBlocks; at most 16);
//   - none-O3, s64-O3: ptxas at its full optimisation (Tuning.FastCompile
//     "none"), where the engine compiles kernels of 300,000 bytes of
//     source or more at -O1 (Pollution's: 1.8 MB): ptxas may allocate
//     registers better, and takes minutes longer to compile.
//
// HIRES (at most 25 replicated values live: no budget here moves one)
// runs s64, s64-b0, s64-b7, s64-b10, s64-b12 and s64-b16; Lorenz-96
// (d = 64 and 256, n = 4096, wideBenchGradCase) and the Brusselator
// (n = 1024) run s64, s64-b0, s64-b6, s64-b7 and s64-O3 only. The kernels' registers are reported as the engine configures
// them (chooseLayout on device 0).
//
// One device call (each variant compiles its kernel: about a minute for
// Pollution's on an empty cache):
//
//	go test ./cuda -run XXX -bench 'GPUWideRegs' -benchtime 5x -timeout 30m
func BenchmarkGPUWideRegs(b *testing.B) {
	needGPUEngine(b)
	variants := []struct {
		name string
		tun  Tuning
	}{
		{"none", Tuning{WideScalars: -1, WideMinBlocks: -1}},
		{"s64", Tuning{}},
		{"s64-b0", Tuning{WideMinBlocks: -1}},
		{"s48", Tuning{WideScalars: 48}},
		{"s96", Tuning{WideScalars: 96}},
		{"s64-b6", Tuning{WideMinBlocks: 6}},
		{"s64-b7", Tuning{WideMinBlocks: 7}},
		{"none-b6", Tuning{WideScalars: -1, WideMinBlocks: 6}},
		{"none-O3", Tuning{WideScalars: -1, FastCompile: "none"}},
		{"s64-O3", Tuning{FastCompile: "none"}},
		{"s64-b10", Tuning{WideMinBlocks: 10}},
		{"s64-b12", Tuning{WideMinBlocks: 12}},
		{"s64-b16", Tuning{WideMinBlocks: 16}},
		{"s64-round", Tuning{wideRound: true}},
	}
	cases := []struct {
		name string
		c    func() engineCase
	}{
		{"pollution", func() engineCase { return wideRosBenchCase(b, "pollution", 4096) }},
		{"hires", func() engineCase { return layoutFillCase(b, "hires", 4096) }},
		{"lorenz96-64", func() engineCase { return wideBenchGradCase(4096, 64) }},
		{"lorenz96-256", func() engineCase { return wideBenchGradCase(4096, 256) }},
		{"brusselator", func() engineCase { return wideRosBenchCase(b, "brusselator", 1024) }},
	}
	for _, pc := range cases {
		c := pc.c()
		for _, x := range variants {
			if !wideRegsRuns(pc.name, x.name) {
				continue
			}
			tun := x.tun
			// A warp per trajectory, the kernels these levers were
			// measured on (fewer lanes, the default for d ≤ 32 since
			// session 46: BenchmarkGPUWideLanes).
			tun.Layout, tun.wideLanes = LayoutWide, -1
			engine := tuned(b, "cuda", tun)
			b.Run(fmt.Sprintf("grad/%s/%s", pc.name, x.name), func(b *testing.B) {
				benchWide(b, c, "grad", engine, "wide")
				a := wideKernelAttrs(b, c, tun)
				b.ReportMetric(float64(a.Registers), "regs")
				b.ReportMetric(float64(a.LocalBytes), "local-B")
			})
		}
	}
}

// wideKernelAttrs returns the resources of case c's wide gradient kernel
// under tun (Layout LayoutWide), its configuration chosen as the engine
// chooses it on device 0 (chooseLayout), compiled for that device with
// the engine's options.
func wideKernelAttrs(b *testing.B, c engineCase, tun Tuning) driver.KernelAttrs {
	b.Helper()
	a, v := gradKernelAttrs(b, c, tun)
	if !v.Wide {
		b.Fatalf("%s: not in the wide layout under %+v", c.name, tun)
	}
	return a
}

// gradKernelAttrs returns the resources of case c's gradient kernel (with
// its record) under tun and its configuration, chosen as the engine
// chooses it on device 0 (chooseLayout) for c's trajectories, compiled
// for that device with the engine's options.
func gradKernelAttrs(b *testing.B, c engineCase, tun Tuning) (driver.KernelAttrs, kernelgen.Config) {
	b.Helper()
	return kernelAttrs(b, c, ode.OpGrad, tun)
}

// kernelAttrs is gradKernelAttrs for the kernel of operation op
// (ode.OpGrad, or any other for a solve's).
func kernelAttrs(b *testing.B, c engineCase, op ode.Op, tun Tuning) (driver.KernelAttrs, kernelgen.Config) {
	b.Helper()
	j := jobOf(b, c, op)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		b.Fatal(err)
	}
	d, err := driver.Open(0)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	info := d.Info()
	dev := device{sms: info.SMs, sharedLimit: max(maxShared, info.SharedOptin)}
	v := chooseLayout(kernelgen.ConfigOf(j), j.Plan, sp, layoutJob{n: c.prob.N}, Float64, false, dev, tun)
	src, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
	if err != nil {
		b.Fatal(err)
	}
	mod, _, err := d.Build(src, &driver.CompileSettings{Name: kernelgen.KernelName + ".cu", Options: tun.compileOptions(len(src))})
	if err != nil {
		b.Fatal(err)
	}
	defer mod.Unload()
	k, err := mod.Kernel(kernelgen.KernelName)
	if err != nil {
		b.Fatal(err)
	}
	a, err := k.Attrs()
	if err != nil {
		b.Fatal(err)
	}
	return a, v
}

// TestWideMinBlocks checks the wide layout's default launch bounds: as
// many blocks of kernelgen.WideWarps warps as the device's shared memory
// runs warps at once (kernelgen.WideOccupancy, the launch's rule), at most wideMaxMinBlocks; none where one block fits or
// the device is unknown; the tuning's count where it sets one.
func TestWideMinBlocks(t *testing.T) {
	const lim = 227 << 10
	perOf := func(blocks int) int { return ((lim+1024)/blocks - 1024) / kernelgen.WideWarps } // the largest warp for blocks two-warp blocks (kernelgen.WideOccupancy's rule)
	for _, c := range []struct {
		per, limit, tun, want int
	}{
		{1 << 10, lim, 0, wideMaxMinBlocks}, // small warps: the cap
		{perOf(5), lim, 0, 5},               // shared memory runs 5 blocks
		{perOf(5) + 1, lim, 0, 4},           // a byte more: 4
		{20464, lim, 0, 5},                  // Lorenz-96 d = 256's rows form (session 41)
		{perOf(2), lim, 0, 2},               // two blocks
		{perOf(1), lim, 0, 0},               // one block: no bounds
		{1 << 10, 0, 0, 0},                  // a host backend: none
		{1 << 10, lim, 6, 6},                // the tuning's count
		{perOf(2), lim, 7, 7},               // even where shared memory runs fewer
		{1 << 10, lim, -1, 0},               // none asked
	} {
		if got := wideMinBlocks(c.per, c.limit, c.tun); got != c.want {
			t.Errorf("wideMinBlocks(%d, %d, %d) = %d, want %d", c.per, c.limit, c.tun, got, c.want)
		}
	}
}

// TestWideRoundBlocks checks the bounds of one round of a job's warps
// (Tuning.wideRound): the blocks n trajectories need on the device, at
// least the default's, at most what shared memory runs and
// wideRoundMaxBlocks; the default where the device is unknown or bounds
// are off.
func TestWideRoundBlocks(t *testing.T) {
	const lim = 227 << 10
	perOf := func(blocks int) int { return ((lim+1024)/blocks - 1024) / kernelgen.WideWarps }
	h100 := device{sms: 132, sharedLimit: lim}
	for _, c := range []struct {
		def, per, n int
		dev         device
		want        int
	}{
		{7, 3456, 4096, h100, 16},            // HIRES at n = 4096: 4096 / 264 = 15.5
		{7, 3456, 2048, h100, 8},             // half the warps: 8
		{7, 3456, 1024, h100, 7},             // fewer than the default needs: the default
		{7, 3456, 1 << 20, h100, 16},         // many rounds: the cap
		{7, perOf(9), 4096, h100, 9},         // shared memory runs 9
		{5, perOf(5), 4096, h100, 5},         // and only 5
		{0, 3456, 4096, h100, 0},             // bounds off
		{7, 3456, 4096, device{}, 7},         // an unknown device
		{7, 3456, 4096, device{sms: 132}, 7}, // no shared-memory limit
	} {
		if got := wideRoundBlocks(c.def, c.per, c.n, c.dev); got != c.want {
			t.Errorf("wideRoundBlocks(%d, %d, %d, %+v) = %d, want %d", c.def, c.per, c.n, c.dev, got, c.want)
		}
	}
}

// wideRegsRuns reports whether BenchmarkGPUWideRegs runs variant v on
// case c: Pollution every variant but the HIRES-only bounds, HIRES the
// defaults and bounds, the others the defaults, bounds up to 7 and -O3.
func wideRegsRuns(c, v string) bool {
	if v == "s64-round" {
		return true
	}
	switch c {
	case "pollution":
		return v != "s64-b10" && v != "s64-b12" && v != "s64-b16"
	case "hires":
		return v == "s64" || v == "s64-b0" || v == "s64-b7" || v == "s64-b10" || v == "s64-b12" || v == "s64-b16"
	}
	return v == "s64" || v == "s64-b0" || v == "s64-b6" || v == "s64-b7" || v == "s64-O3"
}
