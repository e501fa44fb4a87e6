package cuda

import (
	"fmt"
	"math"
	"testing"

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
// only.
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
			for _, op := range x.ops {
				var got [3][]float64
				for k, engine := range []string{private, shared, loops} {
					var tr Trace
					ctx := WithTrace(t.Context(), &tr)
					sv := x.c.solver(t, engine)
					p := x.c.prob
					switch op {
					case "solve":
						sol, err := sv.SolveContext(ctx, &p)
						if err != nil {
							t.Fatal(err)
						}
						got[k] = append(append(append([]float64{}, sol.Y...), sol.Ys...), sol.T...)
					case "grad":
						g, err := sv.GradContext(ctx, nil, &p, x.c.loss, nil)
						if err != nil {
							t.Fatal(err)
						}
						got[k] = append(append(append([]float64{g.Loss}, g.Y0...), g.P...), g.Shared...)
					}
					if l := tr.Stats().Layout; l != "wide" {
						t.Fatalf("%s on %s: the %s layout, not wide", op, engine, l)
					}
				}
				for k, form := range []string{"lane-private arrays by rows", "lane-private arrays in loops (Tuning.wideLoops)"} {
					a, b := got[k*2], got[1]
					if len(a) != len(b) || len(b) == 0 {
						t.Fatalf("%s: %d results with %s, %d with every array shared", op, len(a), form, len(b))
					}
					diff := 0
					for i := range b {
						if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
							if diff++; diff <= 5 {
								t.Errorf("%s: result %d: %v with %s, %v with every array shared", op, i, a[i], form, b[i])
							}
						}
					}
					if diff > 5 {
						t.Errorf("%s: %d of %d results differ with %s", op, diff, len(b), form)
					}
					t.Logf("%s, %s against every array shared: %d results, %d differ", op, form, len(b), diff)
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
