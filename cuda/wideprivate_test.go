package cuda

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostWidePrivateSame runs kernels of the wide layout with their
// lane-private arrays unrolled over their rows (the default; kernelgen's
// wideprivate.go) and with every array in the warp's shared memory
// (Tuning.NoWidePrivate, the layout as it was), and with the private
// arrays' loops kept as loops (Tuning.wideLoops), and asks the same
// results bit for bit:
// only the storage moved, not the arithmetic. On a simulated warp (32 lanes, each
// its own private rows): Lorenz-96 (d = 64, Tsit5) with shared parameters
// and five save times, the solve (states and saved states) and the
// gradient with the record; d = 70 (not a multiple of 32) the gradient.
// On the host's one lane (every component its own: the rows of 32
// components each), the wide layout forced: Pollution (d = 20, Rodas5P,
// a save time), HIRES (d = 8, Rodas5P) and the neural Robertson problem
// (a 2-16-16-1 network) likewise; with -short Lorenz-96 with d = 64
// only. The gradient's reverse steps write λ' into the lanes' own rows
// by default (kernelgen's wideLayout.PrivOut: the kernel's source says
// so, widePrivOut), into the warp's shared memory with NoWidePrivate; it
// logs both kernels' shared memory per warp.
func TestHostWidePrivateSame(t *testing.T) {
	needHost(t)
	t.Parallel()
	type tc struct {
		engine string // the base engine, tuned by tun
		tun    Tuning
		c      engineCase
		ops    []string
	}
	sim, host := "cuda-host-sim", "cuda-host"
	wide := Tuning{Layout: LayoutWide}
	cases := []tc{{sim, Tuning{}, wideSavesCase(3, 64), []string{"solve", "grad"}}}
	if !testing.Short() {
		cases = append(cases, tc{sim, Tuning{}, wideSavesCase(2, 70), []string{"grad"}},
			tc{host, wide, wideRosCase(t, "pollution", ode.Rodas5P, 2, 0.2, true), []string{"solve", "grad"}},
			tc{host, wide, wideRosCase(t, "hires", ode.Rodas5P, 2, 5, true), []string{"solve", "grad"}},
			tc{host, wide, layoutFillCase(t, "neural-robertson", 3), []string{"grad"}})
	}
	for _, x := range cases {
		t.Run(fmt.Sprintf("%s-d=%d", x.c.name, x.c.prob.Field.Dim), func(t *testing.T) {
			t.Parallel()
			private := tuned(t, x.engine, x.tun)
			tun := x.tun
			tun.NoWidePrivate = true
			shared := tuned(t, x.engine, tun)
			tun.NoWidePrivate, tun.wideLoops = false, true
			loops := tuned(t, x.engine, tun)
			if slices.Contains(x.ops, "grad") {
				own, perOwn := widePrivOut(t, x.c, false)
				all, perAll := widePrivOut(t, x.c, true)
				t.Logf("grad: %d B of shared memory per warp (lambda' lane-private %t), %d B with every array shared (%t)", perOwn, own, perAll, all)
				if !own || all || perOwn > perAll {
					t.Errorf("grad: lambda' lane-private %t (%d B a warp), with every array shared %t (%d B); want true, false and no more bytes", own, perOwn, all, perAll)
				}
			}
			for _, op := range x.ops {
				var got [3][]float64
				for k, engine := range []string{private, shared, loops} {
					got[k] = wideResults(t, x.c, engine, op)
				}
				for k, form := range []string{"lane-private arrays by rows", "lane-private arrays in loops (Tuning.wideLoops)"} {
					sameWideResults(t, op, form, "every array shared", got[k*2], got[1])
				}
			}
		})
	}
}

// BenchmarkGPUWidePrivate times the gradient with the record in the wide
// layout with lane-private arrays unrolled over their rows (the default:
// registers) against every array in the warp's shared memory
// (Tuning.NoWidePrivate) and against the private arrays' loops kept
// (Tuning.wideLoops: local memory), the three side by side per
// problem: Lorenz-96 with d = 64 and 256 (the large-state suite's
// case, n = 4096, Tsit5: wideBenchGradCase), Pollution (n = 4096) and
// the Brusselator (n = 1024) with Rodas5P (wideRosBenchCase), HIRES
// (n = 4096, Rodas5P: layoutFillCase), the wide layout forced for all;
// kernel-ms is the trace's kernel time, ms/op the whole call's:
//
//	go test ./cuda -run XXX -bench 'GPUWidePrivate' -benchtime 5x -count 3
func BenchmarkGPUWidePrivate(b *testing.B) {
	needGPUEngine(b)
	engines := []struct{ name, engine string }{
		{"rows", tuned(b, "cuda", Tuning{Layout: LayoutWide})},
		{"shared", tuned(b, "cuda", Tuning{Layout: LayoutWide, NoWidePrivate: true})},
		{"loops", tuned(b, "cuda", Tuning{Layout: LayoutWide, wideLoops: true})},
	}
	cases := []struct {
		name string
		c    func() engineCase
	}{
		{"lorenz96-64", func() engineCase { return wideBenchGradCase(4096, 64) }},
		{"lorenz96-256", func() engineCase { return wideBenchGradCase(4096, 256) }},
		{"pollution", func() engineCase { return wideRosBenchCase(b, "pollution", 4096) }},
		{"hires", func() engineCase { return layoutFillCase(b, "hires", 4096) }},
		{"brusselator", func() engineCase { return wideRosBenchCase(b, "brusselator", 1024) }},
	}
	for _, pc := range cases {
		c := pc.c()
		for _, e := range engines {
			b.Run(fmt.Sprintf("grad/%s/%s", pc.name, e.name), func(b *testing.B) { benchWide(b, c, "grad", e.engine, "wide") })
		}
	}
}

// widePrivOut reports whether the wide layout's gradient kernel of case
// c, with every array in the warp's shared memory (all:
// kernelgen.Config.WideShared) or not, writes its reverse steps' λ' into
// the lanes' own rows (the steps take gs_po, the driver's lamo), and its
// shared memory per warp in bytes.
func widePrivOut(t *testing.T, c engineCase, all bool) (bool, int) {
	t.Helper()
	// (WideScalars -1: the placements compared without the replicated
	// values' slots, which trade shared memory for registers on purpose:
	// TestHostWideScalarsSame.)
	src, info := kernelSourceInfo(t, c, ode.OpGrad, func(v *kernelgen.Config) {
		v.Wide, v.RowMajor, v.WideShared, v.WideScalars = true, true, all, -1
	})
	return strings.Contains(src, ", gs_real* gs_po) {") && strings.Contains(src, "lamo[c / GS_WSTRIDE]"), info.WideShared
}

// TestHostWideFormsCompile times the host compile (g++, the simulated
// warp's flags: -O1) of Lorenz-96's wide gradient kernel (d = 256, Tsit5:
// the large-state suite's case, wideBenchGradCase) in its three forms:
// lane-private arrays in loops (Tuning.wideLoops), by rows (the default,
// kernelgen.Config.WideRows: the loops over the private arrays unrolled)
// and every array shared (Tuning.NoWidePrivate); it logs each source's
// bytes and compile time (a proxy for NVRTC's, which the cold start's 5 s
// at d = 256 bounds: TestGPUColdStart) and asks that each compiles and
// that only the rows form has the loops over the rows. Not with -short.
func TestHostWideFormsCompile(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles three kernels of about a megabyte")
	}
	c := wideBenchGradCase(4, 256)
	j := jobOf(t, c, ode.OpGrad)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	be := newSimBackend(1 << 30)
	for _, f := range []struct {
		name      string
		rows, all bool
	}{{"loops", false, false}, {"rows", true, false}, {"shared", false, true}} {
		v := kernelgen.ConfigOf(j)
		v.Wide, v.RowMajor, v.WideRows, v.WideShared = true, true, f.rows, f.all
		start := time.Now()
		src, info, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
		if err != nil {
			t.Fatal(err)
		}
		gen := time.Since(start)
		start = time.Now()
		if _, err := be.compile(src, kernelgen.KernelName, nil); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		t.Logf("%s: %d bytes of source (generated in %.2f s), %d B of shared memory per warp, g++ -O1 in %.1f s",
			f.name, len(src), gen.Seconds(), info.WideShared, time.Since(start).Seconds())
		if rows := strings.Contains(src, "for (int gs_row = 0;"); rows != f.rows {
			t.Errorf("%s: loops over the lanes' rows %t, want %t", f.name, rows, f.rows)
		}
	}
}

// wideResults runs op ("solve": the states, saved states and end times;
// "grad": the loss and the gradients) of c on engine, in the wide layout
// (it fails the test in another), and returns its results in one slice.
func wideResults(t *testing.T, c engineCase, engine, op string) []float64 {
	t.Helper()
	var tr Trace
	ctx := WithTrace(t.Context(), &tr)
	sv := c.solver(t, engine)
	p := c.prob
	var got []float64
	switch op {
	case "solve":
		sol, err := sv.SolveContext(ctx, &p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(append(append([]float64{}, sol.Y...), sol.Ys...), sol.T...)
	case "grad":
		g, err := sv.GradContext(ctx, nil, &p, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		got = append(append(append([]float64{g.Loss}, g.Y0...), g.P...), g.Shared...)
	default:
		t.Fatalf("wideResults: operation %q", op)
	}
	if l := tr.Stats().Layout; l != "wide" {
		t.Fatalf("%s on %s: the %s layout, not wide", op, engine, l)
	}
	return got
}

// sameWideResults checks that the results got of op (wideResults) with
// form are those of the same op with ref, want, bit for bit: the same
// number, not none, and each the same bits (the first 5 that differ
// named, then their count). It logs how many differ.
func sameWideResults(t *testing.T, op, form, ref string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) || len(want) == 0 {
		t.Fatalf("%s: %d results with %s, %d with %s", op, len(got), form, len(want), ref)
	}
	diff := 0
	for i := range want {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			if diff++; diff <= 5 {
				t.Errorf("%s: result %d: %v with %s, %v with %s", op, i, got[i], form, want[i], ref)
			}
		}
	}
	if diff > 5 {
		t.Errorf("%s: %d of %d results differ with %s", op, diff, len(want), form)
	}
	t.Logf("%s, %s against %s: %d results, %d differ", op, form, ref, len(want), diff)
}
