package cuda

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The stability probe of package ode (ode.Plan.Probe, ode.Job.CheckStability)
// in the kernels (solve.cuh, kernelgen.Config.Probe): a gradient of Tsit5
// or Vern7 on a fast mode that the solution does not excite is refused
// on every engine alike (Status Stiff), and Method Auto switches it to
// Rodas5P before its first unstable step; in every layout, the wide one
// included (docs/more-results.md, "Session 53 (H1)" and "(H5)").

// probeCase returns a PK ensemble (a' = −ka·a, c' = ka·a − ke·c) of n
// trajectories on [0, 2]: for even i nothing in the gut (a0 = 0) and
// absorption 200–1000 (a fast mode the solution does not excite: the
// probe marks them stiff), for odd i a0 > 0 and absorption 0.5–3 (not
// stiff); the loss c(T).
func probeCase(n int) (ode.Problem, ode.Loss) {
	rng := rand.New(rand.NewPCG(53, 5))
	f := ode.Field{Name: "pk-probe", Dim: 2, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), p[0].Mul(y[0]).Sub(p[1].Mul(y[1]))}
	}}
	p := ode.Problem{Field: f, N: n, T1: 2}
	for i := range n {
		if i%2 == 0 {
			p.Y0 = append(p.Y0, 0, 0.5+rng.Float64())
			p.P = append(p.P, 200+800*rng.Float64(), 0.2+0.3*rng.Float64())
		} else {
			p.Y0 = append(p.Y0, 0.5+rng.Float64(), 0.5+rng.Float64())
			p.P = append(p.P, 0.5+2.5*rng.Float64(), 0.2+0.3*rng.Float64())
		}
	}
	return p, ode.Loss{Name: "c", F: func(y, _, _ []tape.V) tape.V { return y[1] }}
}

// probeAgree checks that engine refuses the trajectories the CPU engine's
// probe marks, with the same statuses and step counts, gives the others'
// gradients within 1e-10 of the CPU's, and that Method Auto's gradient
// (the probe switches the marked trajectories to Rodas5P before their
// first unstable step) agrees with the CPU's within 1e-8.
func probeAgree(t *testing.T, engine string, n int) {
	p, loss := probeCase(n)
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
		run := func(engine string) (*ode.Gradient, []*ode.TrajectoryError) {
			sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-11, Engine: engine})
			if err != nil {
				t.Fatal(err)
			}
			g, fails, err := sv.GradPartial(context.Background(), nil, &p, loss, nil, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", engine, m.Name(), err)
			}
			if _, err := sv.Grad(nil, &p, loss, nil); !errors.Is(err, ode.ErrStiff) {
				t.Errorf("%s %s: Grad: %v; want the marked trajectories refused (ode.ErrStiff)", engine, m.Name(), err)
			}
			return g, fails
		}
		wg, want := run("cpu")
		gg, got := run(engine)
		if len(want) != n/2 {
			t.Fatalf("%s: the CPU engine refused %d trajectories, want the %d unexcited ones (the test checks nothing otherwise)", m.Name(), len(want), n/2)
		}
		if len(got) != len(want) {
			t.Errorf("%s: %s refused %d trajectories, the CPU %d", m.Name(), engine, len(got), len(want))
			continue
		}
		for k, w := range want {
			g := got[k]
			if g.Index != w.Index || g.Status != w.Status || g.Accepted != w.Accepted || g.Rejected != w.Rejected {
				t.Errorf("%s: trajectory %d: %s %v after %d+%d steps; CPU %v after %d+%d", m.Name(), w.Index, engine, g.Status, g.Accepted, g.Rejected, w.Status, w.Accepted, w.Rejected)
			}
		}
		for i := 1; i < n; i += 2 {
			for k := 2 * i; k < 2*i+2; k++ {
				if d := math.Abs(gg.Y0[k] - wg.Y0[k]); !(d <= 1e-10*math.Max(1, math.Abs(wg.Y0[k]))) {
					t.Errorf("%s: trajectory %d: ∂L/∂y0 %v on %s, %v on the CPU", m.Name(), i, gg.Y0[k], engine, wg.Y0[k])
				}
			}
		}
	}
	auto := func(engine string) *ode.Gradient {
		g, err := ode.Grad(nil, p, loss, nil, &ode.Settings{Method: ode.Auto, RelTol: 1e-8, AbsTol: 1e-11, Engine: engine})
		if err != nil {
			t.Fatalf("Auto on %s: %v", engine, err)
		}
		return g
	}
	wa, ga := auto("cpu"), auto(engine)
	for k := range wa.Y0 {
		if d := math.Abs(ga.Y0[k] - wa.Y0[k]); !(d <= 1e-8*math.Max(1, math.Abs(wa.Y0[k]))) {
			t.Errorf("Auto: ∂L/∂y0[%d] %v on %s, %v on the CPU", k, ga.Y0[k], engine, wa.Y0[k])
		}
	}
}

// TestHostEngineProbe runs probeAgree on the host engines (the generated
// kernels compiled by g++): a thread per trajectory, and on the simulated
// warp the lanes and tile layouts (where the probe is called in lockstep).
func TestHostEngineProbe(t *testing.T) {
	needHost(t)
	for _, c := range []struct {
		engine string
		layout Layout
	}{{hostF64.name, LayoutThread}, {hostSim.name, LayoutLanes}, {hostSim.name, LayoutTile}} {
		t.Run(string(c.layout), func(t *testing.T) {
			probeAgree(t, tuned(t, c.engine, Tuning{Layout: c.layout}), 8)
		})
	}
}

// TestGPUProbe runs probeAgree on the GPU engine, on 64 trajectories. It
// skips without a GPU.
//
//	./cuda.test -test.run '^TestGPUProbe$' -test.v
func TestGPUProbe(t *testing.T) {
	needGPUEngine(t)
	probeAgree(t, "cuda", 64)
}

// probeWideTunings are the wide layout's forms that TestHostEngineProbeWide
// and TestGPUProbeWide run: 8 lanes a trajectory (the default at d = 2),
// a warp a trajectory with every array in shared memory (the copies'
// layout, Tuning.NoWidePrivate), and two warps a trajectory
// (Config.WideTrajWarps).
var probeWideTunings = []struct {
	name string
	tun  Tuning
}{
	{"lanes=8", Tuning{Layout: LayoutWide}},
	{"warp-shared", Tuning{Layout: LayoutWide, wideLanes: -1, NoWidePrivate: true}},
	{"warps=2", Tuning{Layout: LayoutWide, wideWarps: 2}},
}

// TestHostEngineProbeWide runs probeAgree on the host engine's wide
// layout (the simulated warp or block; wide.cuh's gs_body calls the
// probe's wide function) in the forms of probeWideTunings.
func TestHostEngineProbeWide(t *testing.T) {
	needHost(t)
	for _, c := range probeWideTunings {
		t.Run(c.name, func(t *testing.T) {
			probeAgree(t, tuned(t, hostSim.name, c.tun), 8)
		})
	}
}

// TestGPUProbeWide is TestHostEngineProbeWide on the device, on 64
// trajectories. It skips without a GPU.
//
//	./cuda.test -test.run '^TestGPUProbeWide$' -test.v
func TestGPUProbeWide(t *testing.T) {
	needGPUEngine(t)
	for _, c := range probeWideTunings {
		t.Run(c.name, func(t *testing.T) {
			probeAgree(t, tuned(t, "cuda", c.tun), 64)
		})
	}
}

// BenchmarkGPUProbeCost times whole Grad calls of 2^20 Lorenz
// trajectories on the device (timeGradCalls: rtol 1e-6, the record) with
// the stability probe in the record kernel (the default) and without it
// (Tuning.noProbe); run with -count to alternate them:
//
//	./cuda.test -test.run '^$' -test.bench 'GPUProbeCost' -test.count 5
func BenchmarkGPUProbeCost(b *testing.B) {
	needGPUEngine(b)
	for _, off := range []bool{false, true} {
		name := "probe"
		if off {
			name = "noprobe"
		}
		b.Run(name, func(b *testing.B) {
			timeGradCalls(b, 1<<20, Tuning{noProbe: off}, 0)
		})
	}
}
