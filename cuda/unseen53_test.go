package cuda

import (
	"errors"
	"flag"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Session 53's unseen problems (problems/unseen53_test.go, checked there
// on the CPU engine against closed forms and differences) on the GPU
// engine's kernels compiled as host C++ ("cuda-host"), against the CPU
// engine: statuses, accepted and rejected steps, states, saves, losses
// and gradients (per-trajectory and shared) to 1e-10 relative, and the
// engine's refusals of bad inputs. Every case compiles its own kernels
// with g++; the default set is one or two methods per problem, the rest
// (every method on every problem) behind -unseen53.gpu.

var unseen53GPU = flag.Bool("unseen53.gpu", false, "run every method on every session-53 unseen problem on the host engine (cuda/unseen53_test.go; minutes of g++)")

// prField53 is Prothero–Robinson, y' = λ·(y − sin ωt) + ω·cos ωt, λ per
// trajectory, ω shared (problems' protheroRobinson).
func prField53() ode.Field {
	return ode.Field{Name: "prothero-robinson", Dim: 1, Params: 1, Shared: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		wt := p[1].Mul(t)
		return []tape.V{p[0].Mul(y[0].Sub(wt.Sin())).Add(p[1].Mul(wt.Cos()))}
	}}
}

// sumLoss53 is L = y(T) + Σ_k ys_k of a one-component field.
var sumLoss53 = ode.Loss{Name: "sum53", F: func(y, ys, _ []tape.V) tape.V {
	s := y[0]
	for _, v := range ys {
		s = s.Add(v)
	}
	return s
}}

// prCase53 is Prothero–Robinson on [0, 3] with the λs given, three saves.
func prCase53(m ode.Method, lams []float64) engineCase {
	n := len(lams)
	y0 := make([]float64, n)
	for i := range y0 {
		y0[i] = 0.5 + 0.25*float64(i%4)
	}
	return engineCase{
		name: "prothero-robinson-" + m.Name(),
		prob: ode.Problem{Field: prField53(), N: n, Y0: y0, P: append([]float64(nil), lams...), Shared: []float64{2}, T1: 3, SaveAt: []float64{0.1, 1, 2.5}},
		set:  ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-10},
		loss: sumLoss53,
		tol:  1e-10,
	}
}

// kapsCase53 is Kaps' problem for ε = 1 … 1e-9 with two saves.
func kapsCase53(m ode.Method) engineCase {
	f := ode.Field{Name: "kaps", Dim: 2, Params: 1, Stiff: true, F: func(_ tape.V, y, p []tape.V) []tape.V {
		ie := p[0].Pow(p[0].Const(-1))
		return []tape.V{ie.AddC(2).Mul(y[0]).Neg().Add(y[1].Square().Mul(ie)), y[0].Sub(y[1]).Sub(y[1].Square())}
	}}
	eps := []float64{1, 1e-3, 1e-6, 1e-9}
	return engineCase{
		name: "kaps-" + m.Name(),
		prob: ode.Problem{Field: f, N: len(eps), Y0: []float64{1, 1, 1, 1, 1, 1, 1, 1}, P: eps, T1: 1, SaveAt: []float64{0.25, 0.75}},
		set:  ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-10},
		loss: ode.SumSquares(),
		tol:  1e-10,
	}
}

// heatCase53 is the heat equation on 40 points with κ per trajectory.
func heatCase53(m ode.Method, kap []float64) engineCase {
	const d = 40
	f := ode.Field{Name: "heat", Dim: d, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		out := make([]tape.V, d)
		for j := range d {
			s := y[j].MulC(-2)
			if j > 0 {
				s = s.Add(y[j-1])
			}
			if j < d-1 {
				s = s.Add(y[j+1])
			}
			out[j] = p[0].Mul(s)
		}
		return out
	}}
	rng := rand.New(rand.NewPCG(53, 40))
	y0 := make([]float64, len(kap)*d)
	for i := range y0 {
		y0[i] = rng.Float64()*2 - 1
	}
	return engineCase{
		name: "heat40-" + m.Name(),
		prob: ode.Problem{Field: f, N: len(kap), Y0: y0, P: append([]float64(nil), kap...), T1: 2, SaveAt: []float64{0.5}},
		set:  ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-10},
		loss: ode.SumSquares(),
		tol:  1e-10,
	}
}

// pendulumCase53 is the driven pendulum θ” = −γθ' − sin θ + A·cos Ωt,
// (γ, A) per trajectory, (Ω, κ) shared, with a kick (ω += κ as θ rises
// through 0) and a terminal stop (θ rises through 2.5); rows 0–3 end with
// 3, 1, 0 and 2 events on the CPU engine, row 0 stopped.
func pendulumCase53(m ode.Method) engineCase {
	f := ode.Field{Name: "driven-pendulum", Dim: 2, Params: 2, Shared: 2, F: func(t tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[1], p[1].Mul(p[2].Mul(t).Cos()).Sub(p[0].Mul(y[1])).Sub(y[0].Sin())}
	}}
	evs := []ode.Event{
		{Name: "kick", Direction: 1, G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0] },
			Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0], y[1].Add(p[3])} }},
		{Name: "over", Direction: 1, Terminal: true, G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0].AddC(-2.5) }},
	}
	return engineCase{
		name: "pendulum-events-" + m.Name(),
		prob: ode.Problem{Field: f, N: 4, Y0: []float64{1, 0, -0.5, 0.3, 0.2, -0.2, 1.5, 0.5},
			P: []float64{0.1, 0.5, 0.2, 0.9, 0.05, 1.2, 0.3, 0.3}, Shared: []float64{0.7, 0.15}, T1: 20, SaveAt: []float64{5, 10, 15}},
		set: ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: evs},
		loss: ode.Loss{Name: "pendulum53", F: func(y, ys, _ []tape.V) tape.V {
			s := y[0].Square().Add(y[1])
			for _, v := range ys {
				s = s.Add(v.Sin())
			}
			return s
		}},
		tol: 1e-10,
	}
}

// logisticCase53 is y' = r·y·(1 − y/K), a d = 1 field, r per trajectory
// and K shared, n trajectories (37: not a multiple of a warp), with a
// data loss: L = Σ_i (y_i(T) − data_i)² + Σ_k ys_k·s.
func logisticCase53(m ode.Method, n int) engineCase {
	f := ode.Field{Name: "logistic53", Dim: 1, Params: 1, Shared: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Mul(y[0].Div(p[1]).Neg().AddC(1))}
	}}
	rng := rand.New(rand.NewPCG(53, 37))
	y0, r, data := make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		y0[i], r[i], data[i] = 0.01+0.5*rng.Float64(), 0.5+2*rng.Float64(), 1+rng.Float64()
	}
	return engineCase{
		name: "logistic-" + m.Name(),
		prob: ode.Problem{Field: f, N: n, Y0: y0, P: r, Shared: []float64{2}, T1: 3, SaveAt: []float64{0, 1.5}},
		set:  ode.Settings{Method: m, RelTol: 1e-9, AbsTol: 1e-11},
		loss: ode.Loss{Name: "logistic53-data", Data: data, DataDim: 1,
			FP: func(y, ys, dt, _, s []tape.V) tape.V {
				return y[0].Sub(dt[0]).Square().Add(ys[1].Mul(s[0]))
			}},
		tol: 1e-10,
	}
}

// unseen53Cases returns the cases the test runs: a default set, or with
// all every method on every problem.
func unseen53Cases(all bool) []engineCase {
	stiffLams := []float64{-0.5, -10, -1e3, -1e5}
	cases := []engineCase{
		prCase53(ode.Tsit5, []float64{-0.5, -10}),
		prCase53(ode.Rodas5P, stiffLams),
		prCase53(ode.Rosenbrock23, []float64{-1e3}), // n = 1
		kapsCase53(ode.Rodas5P),
		heatCase53(ode.Rodas5P, []float64{0.01, 1, 100}),
		pendulumCase53(ode.Tsit5),
		logisticCase53(ode.Vern7, 37),
		prCase53(ode.Auto, stiffLams),
	}
	if !all {
		return cases
	}
	return append(cases,
		prCase53(ode.Vern7, []float64{-0.5, -10}),
		kapsCase53(ode.Rosenbrock23), kapsCase53(ode.Auto),
		heatCase53(ode.Tsit5, []float64{0.01, 1, 100}), heatCase53(ode.Vern7, []float64{0.01, 1}),
		heatCase53(ode.Rosenbrock23, []float64{0.01, 1, 100}), heatCase53(ode.Auto, []float64{0.01, 1, 100}),
		pendulumCase53(ode.Vern7), pendulumCase53(ode.Rodas5P), pendulumCase53(ode.Rosenbrock23),
		logisticCase53(ode.Tsit5, 1), logisticCase53(ode.Rodas5P, 37), logisticCase53(ode.Auto, 37),
	)
}

// TestHostEngineUnseen53 runs the unseen problems on the host engine
// against the CPU (compareEngines: every operation with events, Solve,
// Record, Replay, Loss and Grad with and without a mesh).
func TestHostEngineUnseen53(t *testing.T) {
	needHost(t)
	t.Parallel()
	testUnseen53(t, "cuda-host", *unseen53GPU || *long, false)
}

// TestGPUEngineUnseen53 runs the same on the GPU, every case, with the
// step-count slack of the other GPU comparisons (device exp and sin
// differ from Go's in the last bit).
func TestGPUEngineUnseen53(t *testing.T) {
	needGPUEngine(t)
	testUnseen53(t, "cuda", true, true)
}

// unseen53Drift lists the cases whose mesh drifts from the CPU's on the
// host engine (measured; the step counts stay equal and the states and
// gradients agree to 1e-10): the first step size differs in its last bit
// (the initial step's pow, g++'s libm against Go's), and the error
// estimate of the next step, at its rounding floor after Hairer's small
// first step (logistic Vern7, the pendulum with Tsit5) or cancelling in
// a stiff field (Kaps' 1/ε, Prothero–Robinson at λ = −1e3 over
// Rosenbrock23's 11,000 steps), turns that into 1e-6 to 1e-5 of the next
// step.
var unseen53Drift = map[string]bool{
	"kaps-Rodas5P": true, "kaps-Rosenbrock23": true, "kaps-Auto": true,
	"pendulum-events-Tsit5": true, "pendulum-events-Vern7": true, "pendulum-events-Rodas5P": true, "pendulum-events-Rosenbrock23": true,
	"logistic-Vern7": true, "logistic-Tsit5": true, "logistic-Rodas5P": true, "logistic-Auto": true,
	"prothero-robinson-Rosenbrock23": true,
}

// unseen53Cancel lists the cases whose ∂L/∂p is a cancellation, 0 for
// the exact solution (Kaps' ∂L/∂ε; ∂L/∂λ at λ = −1e3, e^{−100} and less):
// the engines' values are rounding and discretization noise, a relative
// comparison of them tests nothing. Their p·∂L/∂p (the sensitivity to a
// relative change of p, the quantity problems' TestUnseen53Kaps checks)
// is compared instead, to 1e-10 of the loss's scale.
var unseen53Cancel = map[string]bool{"kaps-Rodas5P": true, "kaps-Rosenbrock23": true, "kaps-Auto": true, "prothero-robinson-Rosenbrock23": true}

func testUnseen53(t *testing.T, engine string, all, gpu bool) {
	cases := unseen53Cases(all)
	if testing.Short() && !all {
		cases = cases[:3]
	}
	runUnseen53(t, engine, cases, gpu)
}

// runUnseen53 compares the cases on engine with the CPU (on a GPU, gpu
// set, with the other GPU comparisons' slack in the steps).
func runUnseen53(t *testing.T, engine string, cases []engineCase, gpu bool) {
	for _, c := range cases {
		t.Run(c.name+"-n"+strconv.Itoa(c.prob.N), func(t *testing.T) {
			o := eventOps
			o.drift = unseen53Drift[c.name]
			if gpu {
				o.knife, o.drift = max(1, c.prob.N/20), true
			}
			if !unseen53Cancel[c.name] {
				compareEngines(t, engine, c, o)
				return
			}
			o.ops = []string{"solve", "record", "replay", "loss", "lossmesh"}
			compareEngines(t, engine, c, o)
			compareScaledGrads53(t, engine, c)
		})
	}
}

// compareScaledGrads53 compares c's Grad on engine with the CPU's
// (recorded and on the CPU's mesh): states, saves and ∂L/∂y0 to c.tol
// relative, p·∂L/∂p to c.tol of the scale max(1, |L|, |∂L/∂y0|,
// |∂L/∂s|).
func compareScaledGrads53(t *testing.T, engine string, c engineCase) {
	t.Helper()
	cpu, dev := c.solver(t, "cpu"), c.solver(t, engine)
	mesh, _, err := cpu.Record(&c.prob)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*ode.Mesh{nil, mesh} {
		want, err := cpu.Grad(nil, &c.prob, c.loss, m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dev.Grad(nil, &c.prob, c.loss, m)
		if err != nil {
			t.Fatalf("%s: %v", engine, err)
		}
		what := c.name + " grad"
		if m != nil {
			what += "mesh"
		}
		d := c.prob.Field.Dim
		closeRows(t, what+" Y", got.Solution.Y, want.Solution.Y, d, c.tol, nil)
		closeRows(t, what+" Ys", got.Solution.Ys, want.Solution.Ys, d*len(c.prob.SaveAt), c.tol, nil)
		closeRows(t, what+" dL/dY0", got.Y0, want.Y0, d, c.tol, nil)
		closeRows(t, what+" dL/dShared", got.Shared, want.Shared, len(want.Shared), c.tol, nil)
		scale := 1.0
		for _, x := range append(append([]float64{want.Loss}, want.Y0...), want.Shared...) {
			scale = math.Max(scale, math.Abs(x))
		}
		worst := 0.0
		for k, x := range want.P {
			pk := c.prob.P[k]
			e := math.Abs(pk*got.P[k]-pk*x) / scale
			worst = math.Max(worst, e)
			if !(e <= c.tol) {
				t.Errorf("%s: p·∂L/∂p[%d] = %v, CPU %v (%.2g of the scale %v)", what, k, pk*got.P[k], pk*x, e, scale)
			}
		}
		t.Logf("%s: p·∂L/∂p within %.2g of the scale; ∂L/∂p %v, CPU %v", what, worst, got.P, want.P)
	}
}

// TestHostEngineUnseen53BadInput gives the host engine bad inputs a new
// user makes: the error must be ode.ErrInput, the same as the CPU
// engine's, and name the fix (the field or value to change).
func TestHostEngineUnseen53BadInput(t *testing.T) {
	needHost(t)
	t.Parallel()
	testUnseen53BadInput(t, "cuda-host")
}

// TestGPUEngineUnseen53BadInput is TestHostEngineUnseen53BadInput on the
// GPU.
func TestGPUEngineUnseen53BadInput(t *testing.T) {
	needGPUEngine(t)
	testUnseen53BadInput(t, "cuda")
}

func testUnseen53BadInput(t *testing.T, engine string) {
	good := prCase53(ode.Tsit5, []float64{-0.5, -10, -2})
	for _, b := range []struct {
		name  string
		edit  func(p *ode.Problem)
		words []string // the message must contain each
	}{
		{"nan-p", func(p *ode.Problem) { p.P[1] = math.NaN() }, []string{"P", "NaN"}},
		{"inf-shared", func(p *ode.Problem) { p.Shared[0] = math.Inf(1) }, []string{"Shared"}},
		{"t1s-before-t0", func(p *ode.Problem) { p.T0, p.T1, p.T1s = 1, 0, []float64{3, 0.5, 2} }, []string{"trajectory 1", "T0"}},
		{"saveat-outside", func(p *ode.Problem) { p.SaveAt = []float64{0.1, 4} }, []string{"SaveAt"}},
		{"y0-short", func(p *ode.Problem) { p.Y0 = p.Y0[:2] }, []string{"Y0"}},
	} {
		t.Run(b.name, func(t *testing.T) {
			msgs := map[string]string{}
			for _, e := range []string{"cpu", engine} {
				c := good
				c.prob.Y0 = append([]float64(nil), good.prob.Y0...)
				c.prob.P = append([]float64(nil), good.prob.P...)
				c.prob.Shared = append([]float64(nil), good.prob.Shared...)
				b.edit(&c.prob)
				sv := c.solver(t, e)
				for _, op := range []string{"solve", "grad"} {
					var err error
					if op == "solve" {
						_, err = sv.Solve(&c.prob)
					} else {
						_, err = sv.Grad(nil, &c.prob, c.loss, nil)
					}
					if err == nil {
						t.Errorf("%s %s: no error", e, op)
						continue
					}
					if !errors.Is(err, ode.ErrInput) {
						t.Errorf("%s %s: %v, not ErrInput", e, op, err)
					}
					for _, w := range b.words {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("%s %s: %q does not name %q", e, op, err, w)
						}
					}
					msgs[e+" "+op] = err.Error()
				}
			}
			for _, op := range []string{"solve", "grad"} {
				if w, g := msgs["cpu "+op], msgs[engine+" "+op]; w != g {
					t.Errorf("%s: %s says %q, the CPU %q", op, engine, g, w)
				}
			}
			t.Logf("%s", msgs["cpu grad"])
		})
	}
}

// TestHostSimEngineUnseen53 runs two of the cases on the simulated warp
// (cuda-host-sim, the kernels' device branch on 32 host threads): 37
// trajectories of a d = 1 field with a data loss (a full warp and a
// partial one) and the pendulum's events; with -unseen53.gpu every case.
func TestHostSimEngineUnseen53(t *testing.T) {
	needHost(t)
	t.Parallel()
	if testing.Short() && !*unseen53GPU {
		t.Skip("-short")
	}
	cases := []engineCase{logisticCase53(ode.Vern7, 37), pendulumCase53(ode.Tsit5)}
	if *unseen53GPU || *long {
		cases = unseen53Cases(true)
	}
	runUnseen53(t, "cuda-host-sim", cases, false)
}

// TestHostSimEngineUnseen53Layouts runs cases on the simulated warp with
// each warp layout forced (lanes, tile, wide; a job a layout does not
// run falls back as the layout's doc says, and the layout that ran is
// logged): the 40-point heat equation (explicit and Rosenbrock), the
// logistic field's 37 trajectories with a data loss, the pendulum's
// events. Behind -unseen53.gpu (g++ compiles each layout's kernels).
func TestHostSimEngineUnseen53Layouts(t *testing.T) {
	needHost(t)
	t.Parallel()
	if !*unseen53GPU && !*long {
		t.Skip("-unseen53.gpu")
	}
	testUnseen53Layouts(t, "cuda-host-sim", false)
}

// TestGPUEngineUnseen53Layouts is TestHostSimEngineUnseen53Layouts on
// the GPU.
func TestGPUEngineUnseen53Layouts(t *testing.T) {
	needGPUEngine(t)
	testUnseen53Layouts(t, "cuda", true)
}

func testUnseen53Layouts(t *testing.T, engine string, gpu bool) {
	for _, l := range []Layout{LayoutLanes, LayoutTile, LayoutWide} {
		t.Run(string(l), func(t *testing.T) {
			name := tuned(t, engine, Tuning{Layout: l})
			cases := []engineCase{heatCase53(ode.Tsit5, []float64{0.01, 1, 100}), heatCase53(ode.Rodas5P, []float64{0.01, 1, 100}),
				logisticCase53(ode.Vern7, 37), pendulumCase53(ode.Tsit5)}
			for _, c := range cases {
				_, st := c.tracedGrad(t, c.solver(t, name))
				t.Logf("%s: layout %s", c.name, st.Layout)
			}
			runUnseen53(t, name, cases, gpu)
		})
	}
}
