package ode_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// decayField is y' = −λ·y with λ = p[0].
func decayField() ode.Field {
	return ode.Field{Name: "decay", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Neg()}
	}}
}

// meshEnd returns the time trajectory i's steps reach from t0, summed as a
// replay sums them.
func meshEnd(m *ode.Mesh, t0 float64, i int) float64 {
	t := t0
	for s := 0; s < m.Len[i]; s++ {
		t += m.H[s*m.N+i]
	}
	return t
}

// TestTimeFarFromOrigin checks that spans far from t = 0 meet the
// tolerance: y' = −λy on [1e12, 1e12 + 1] came out 3.5e-4 off at RelTol
// 1e-8 with status ok, because t + h rounds at |t| = 1e12 (ulp 1.2e-4)
// and the steps summed to less than the span. Every step is now an exact
// advance of t: the mesh sums to T1 − T0 exactly, the state is within a
// small multiple of the tolerance, and a span the tolerance cannot be met
// on is refused.
func TestTimeFarFromOrigin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		t0, span, lambda, rtol float64
	}{
		{1e12, 1, 1, 1e-8},
		{-1e12 - 1, 1, 1, 1e-8},
		{1e12, 1, 3, 1e-6},
		{3e9, 7, 0.5, 1e-10},
		{1e15, 1e3, 1e-3, 1e-6},
		{-1e15 - 1e3, 1e3, 1e-3, 1e-6},
		{0, 1, 1, 1e-8}, // near the origin, for comparison
	} {
		for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
			name := fmt.Sprintf("%s on [%v, +%v] at rtol %v", m.Name(), c.t0, c.span, c.rtol)
			if m == ode.Rosenbrock23 && c.rtol < 1e-7 {
				continue // order 2: too many steps
			}
			p := ode.Problem{Field: decayField(), Y0: []float64{1}, P: []float64{c.lambda}, T0: c.t0, T1: c.t0 + c.span}
			span := p.T1 - p.T0 // the span float64 holds
			sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: m, RelTol: c.rtol, AbsTol: 1e-14})
			if err != nil {
				t.Fatal(err)
			}
			mesh, sol, err := sv.Record(&p)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			// As accurate as the same problem from t = 0 (Rosenbrock23, of
			// order 2, is 20–100 tolerances off there).
			want := math.Exp(-c.lambda * span)
			at0 := p
			at0.T0, at0.T1 = 0, span
			near, err := ode.Solve(at0, &ode.Settings{Method: m, RelTol: c.rtol, AbsTol: 1e-14})
			if err != nil {
				t.Fatal(err)
			}
			e0 := math.Abs(near.Y[0]-want) / want
			if e := math.Abs(sol.Y[0]-want) / want; !(e <= math.Max(20*c.rtol, 3*e0)) {
				t.Errorf("%s: y(T1) = %v, want %v: relative error %.3g, more than 20·rtol and 3× that from t = 0 (%.3g)", name, sol.Y[0], want, e, e0)
			}
			if end := meshEnd(mesh, p.T0, 0); end != p.T1 || sol.T[0] != p.T1 {
				t.Errorf("%s: the mesh reaches %v and the solve %v, want T1 = %v exactly", name, end, sol.T[0], p.T1)
			}
			for s := 0; s < mesh.Len[0]; s++ {
				// Every step is an exact advance: t + h − t == h.
				tk := p.T0
				for k := 0; k < s; k++ {
					tk += mesh.H[k]
				}
				if h := mesh.H[s]; (tk+h)-tk != h {
					t.Errorf("%s: step %d (%v at t = %v) is not an exact advance of t", name, s, h, tk)
					break
				}
			}
			rep, err := sv.Replay(&p, mesh)
			if err != nil || rep.Y[0] != sol.Y[0] {
				t.Errorf("%s: replay gives %v (%v), record %v", name, rep.Y, err, sol.Y[0])
			}
		}
	}
	// Where float64 resolves no step the tolerance needs, the solve is
	// refused with the reason, never a silently wrong state.
	p := ode.Problem{Field: decayField(), Y0: []float64{1}, P: []float64{1}, T0: 1e15, T1: 1e15 + 100}
	_, err := ode.Solve(p, &ode.Settings{RelTol: 1e-8})
	wantErr(t, "y' = −y on [1e15, 1e15 + 100]", err, "step size underflow", "float64 resolves no step below 4ε·|t|", "far from the time origin")
}

// TestInitialStepAnySpan checks the automatic first step on tiny and huge
// spans, at t0 = 0 and far from it: y' = −λy on [t0, t0 + 1/λ] is the same
// problem in any unit of time. With λ = 1e200 Hairer's d2 = ‖f1 − f0‖/h0
// overflowed, so the first step was 0 and the solve ended in "step size
// underflow".
func TestInitialStepAnySpan(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ t0, lambda float64 }{
		{0, 1e200}, {0, 1e300}, {0, 1e250}, {0, 1e-300}, {0, 1e-200}, {0, 1},
		{-1 / 1e300, 1e300}, {1e15, 1e-3}, {-1e15, 1e-3}, {1e-200, 1e200},
	} {
		for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P} {
			for _, rtol := range []float64{1e-4, 1e-8} {
				name := fmt.Sprintf("%s, λ = %v from t0 = %v at rtol %v", m.Name(), c.lambda, c.t0, rtol)
				p := ode.Problem{Field: decayField(), Y0: []float64{1}, P: []float64{c.lambda}, T0: c.t0, T1: c.t0 + 1/c.lambda}
				sol, err := ode.Solve(p, &ode.Settings{Method: m, RelTol: rtol, AbsTol: 1e-14})
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				want := math.Exp(-c.lambda * (p.T1 - p.T0))
				if e := math.Abs(sol.Y[0]-want) / want; !(e <= 20*rtol) {
					t.Errorf("%s: y(T1) = %v, want %v (relative error %.3g)", name, sol.Y[0], want, e)
				}
				if n := sol.Stats.Accepted[0] + sol.Stats.Rejected[0]; n > 200 {
					t.Errorf("%s: %d steps for one time constant", name, n)
				}
			}
		}
	}
}

// TestMeshMustReachT1 checks that a mesh is replayed only if its steps
// reach each trajectory's T1: a mesh with a step removed replayed to a
// wrong state with status ok. Meshes built by hand with k uniform steps
// (t1 − t0)/k reach T1 to rounding and are accepted.
func TestMeshMustReachT1(t *testing.T) {
	t.Parallel()
	f := lorenzField()
	p := lorenzEnsemble(f, []float64{20, 22, 24, 26})
	sv, err := ode.NewSolver(f, &ode.Settings{Method: ode.Tsit5})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(i int, change func(h []float64) []float64) *ode.Mesh {
		b := *m
		b.Len = slices.Clone(m.Len)
		steps := make([]float64, m.Len[i])
		for s := range steps {
			steps[s] = m.H[s*m.N+i]
		}
		steps = change(steps)
		b.Len[i] = len(steps)
		b.Rows = max(m.Rows, len(steps))
		b.H = make([]float64, b.Rows*m.N)
		copy(b.H, m.H)
		for s := 0; s < b.Rows; s++ {
			v := 0.0
			if s < len(steps) {
				v = steps[s]
			}
			b.H[s*m.N+i] = v
		}
		return &b
	}
	for _, c := range []struct {
		name string
		mesh *ode.Mesh
		want []string
	}{
		{"a middle step removed", edit(2, func(h []float64) []float64 { return slices.Delete(h, 5, 6) }), []string{"trajectory 2", "but it ends at T1 = 1", "a step is missing"}},
		{"the last step removed", edit(1, func(h []float64) []float64 { return h[:len(h)-1] }), []string{"trajectory 1", "T1 = 1"}},
		{"a step added", edit(3, func(h []float64) []float64 { return append(h, 0.01) }), []string{"trajectory 3", "reaching t = 1.01"}},
		{"a step halved", edit(0, func(h []float64) []float64 { h[3] /= 2; return h }), []string{"trajectory 0"}},
		{"the first step doubled", edit(0, func(h []float64) []float64 { h[0] *= 2; return h }), []string{"trajectory 0"}},
	} {
		_, err := sv.Replay(&p, c.mesh)
		wantErr(t, c.name+" (Replay)", err, c.want...)
		_, err = sv.Grad(nil, &p, ode.SumSquares(), c.mesh)
		wantErr(t, c.name+" (Grad)", err, c.want...)
	}

	// Uniform hand-built meshes: accepted, for any count and span.
	for _, c := range []struct {
		t0, t1 float64
		k      int
	}{{0, 1, 3}, {0, 1, 7}, {0, 1, 1000}, {0, 1, 12345}, {0.1, 0.7, 49}, {-1, 1, 999}, {1e12, 1e12 + 1, 10}, {0, 1e-300, 30}} {
		q := ode.Problem{Field: decayField(), Y0: []float64{1}, P: []float64{1}, T0: c.t0, T1: c.t1}
		h := (c.t1 - c.t0) / float64(c.k)
		mesh := &ode.Mesh{N: 1, Rows: c.k, H: make([]float64, c.k), Len: []int{c.k}, Status: []ode.Status{ode.OK}, T0: c.t0}
		for s := range mesh.H {
			mesh.H[s] = h
		}
		if _, err := ode.Replay(q, mesh, &ode.Settings{Method: ode.Tsit5}); err != nil {
			t.Errorf("uniform mesh of %d steps on [%v, %v]: %v", c.k, c.t0, c.t1, err)
		}
		if c.k < 10 {
			continue
		}
		// One of those steps missing is a real gap. (At 1e12 a step is
		// 0.1 here: a hand-built step of 0.01, 80 ulps of t, rounds by up
		// to half an ulp per step, and 100 of them miss T1 by as much as
		// a step.)
		short := *mesh
		short.Len = []int{c.k - 1}
		if _, err := ode.Replay(q, &short, &ode.Settings{Method: ode.Tsit5}); err == nil || !strings.Contains(err.Error(), "trajectory 0") {
			t.Errorf("uniform mesh of %d steps on [%v, %v] without its last step: got %v, want an error", c.k, c.t0, c.t1, err)
		}
	}
}

// TestMeshFloat32Reach checks that a mesh recorded by a float32 engine
// (its steps exact advances of t in float32, summing to T1 rounded to
// float32) is replayed in float64, as comparing an f32 record with an
// f64 replay of the same mesh needs, while the same steps from a float64
// engine miss T1 = 0.1 by 1.5e-9 and are refused.
func TestMeshFloat32Reach(t *testing.T) {
	t.Parallel()
	var steps []float64
	t32, h32, end := float32(0), float32(0.0123), float32(0.1)
	for t32 < end {
		next := t32 + h32
		if next >= end {
			next = end
		}
		steps = append(steps, float64(next-t32))
		t32 = next
	}
	q := ode.Problem{Field: decayField(), Y0: []float64{1}, P: []float64{1}, T1: 0.1}
	for _, c := range []struct {
		engine string
		ok     bool
	}{{"test-float32", true}, {"cpu", false}, {"", false}} {
		mesh := &ode.Mesh{N: 1, Rows: len(steps), H: steps, Len: []int{len(steps)}, Status: []ode.Status{ode.OK}, Engine: c.engine}
		_, err := ode.Replay(q, mesh, &ode.Settings{Method: ode.Tsit5})
		switch {
		case c.ok && err != nil:
			t.Errorf("mesh from %q: %v", c.engine, err)
		case !c.ok:
			wantErr(t, "mesh from "+c.engine, err, "trajectory 0", "but it ends at T1 = 0.1")
		}
	}
}

// measure returns the largest error of ys (n states of dimension 2 at
// times ts) against the exact solution, in units of the tolerance
// atol + rtol·‖y(t)‖∞.
func measure(a [4]float64, y0 [2]float64, ys, ts []float64, rtol, atol float64) float64 {
	worst := 0.0
	for k, tk := range ts {
		ex := expm2(a, y0, tk)
		sc := atol + rtol*math.Max(math.Abs(ex[0]), math.Abs(ex[1]))
		for c := 0; c < 2; c++ {
			worst = math.Max(worst, math.Abs(ys[2*k+c]-ex[c])/sc)
		}
	}
	return worst
}

// expm2 returns exp(A·t)·y0 for a 2×2 matrix A (row-major), by Taylor
// series with scaling and squaring.
func expm2(a [4]float64, y0 [2]float64, t float64) [2]float64 {
	m := [4]float64{a[0] * t, a[1] * t, a[2] * t, a[3] * t}
	s := 0
	for n := math.Abs(m[0]) + math.Abs(m[1]) + math.Abs(m[2]) + math.Abs(m[3]); n > 0.5; n /= 2 {
		s++
	}
	for i := range m {
		m[i] = math.Ldexp(m[i], -s)
	}
	mul := func(x, y [4]float64) [4]float64 {
		return [4]float64{x[0]*y[0] + x[1]*y[2], x[0]*y[1] + x[1]*y[3], x[2]*y[0] + x[3]*y[2], x[2]*y[1] + x[3]*y[3]}
	}
	e, term := [4]float64{1, 0, 0, 1}, [4]float64{1, 0, 0, 1}
	for k := 1; k < 30; k++ {
		term = mul(term, m)
		for i := range term {
			term[i] /= float64(k)
		}
		for i := range e {
			e[i] += term[i]
		}
	}
	for ; s > 0; s-- {
		e = mul(e, e)
	}
	return [2]float64{e[0]*y0[0] + e[1]*y0[1], e[2]*y0[0] + e[3]*y0[1]}
}

// solverT returns a Solver for f, failing the test if it cannot be made.
func solverT(t *testing.T, f ode.Field, s *ode.Settings) *ode.Solver {
	t.Helper()
	sv, err := ode.NewSolver(f, s)
	if err != nil {
		t.Fatal(err)
	}
	return sv
}

// f32Engine is an engine whose arithmetic is float32's: only NewSolver's
// check of the tolerance is tested, so it runs nothing.
type f32Engine struct{}

func (f32Engine) Name() string                            { return "test-float32" }
func (f32Engine) Available() error                        { return nil }
func (f32Engine) Prepare(*ode.Plan) (ode.Executor, error) { return nil, nil }
func (f32Engine) UnitRoundoff() float64                   { return 0x1p-24 }

func init() { ode.Register(f32Engine{}) }

// TestEnginePrecision checks that an engine refuses tolerances its
// arithmetic cannot meet: cuda-f32 at RelTol 1e-10 returned states 1.6e-2
// off with status ok. An engine reports its unit roundoff u
// (ode.PrecisionEngine); NewSolver refuses RelTol < ode.MinRelTol(u).
func TestEnginePrecision(t *testing.T) {
	t.Parallel()
	if got, want := ode.MinRelTol(0x1p-53), 10*0x1p-52; got != want {
		t.Errorf("MinRelTol(float64) = %v, want 10ε = %v", got, want)
	}
	if got, want := ode.MinRelTol(0x1p-24), 100*0x1p-23; got != want {
		t.Errorf("MinRelTol(float32) = %v, want 100ε = %v", got, want)
	}
	for _, c := range []struct {
		rtol float64
		ok   bool
	}{{1e-10, false}, {1e-6, false}, {1.1e-5, false}, {1.2e-5, true}, {1e-4, true}} {
		_, err := ode.NewSolver(lorenzField(), &ode.Settings{Engine: "test-float32", RelTol: c.rtol})
		switch {
		case c.ok && err != nil:
			t.Errorf("RelTol %v: %v", c.rtol, err)
		case !c.ok:
			wantErr(t, fmt.Sprintf("RelTol %v", c.rtol), err, fmt.Sprintf("RelTol = %v is below 1.2e-05", c.rtol), "engine test-float32", "u = 6e-08")
		}
	}
	// The CPU engine is float64: its floor is 10ε, as before.
	if _, err := ode.NewSolver(lorenzField(), &ode.Settings{RelTol: 1e-14}); err != nil {
		t.Errorf("cpu at RelTol 1e-14: %v", err)
	}
}

// TestGradStiffStopsEarly checks that Grad with an explicit method on a
// stiff problem refuses as soon as the stiffness test fires, at a cost
// comparable to the Rodas5P solve: it ran 25 s and reached 4.1 GB, the
// whole span at the stability limit, before refusing. The error names the
// time where the trajectory stopped (it said T1 = 100 for a stop at
// 3.26). Steps are counted, not time.
func TestGradStiffStopsEarly(t *testing.T) {
	t.Parallel()
	rob := problems.Robertson()
	for _, c := range []struct {
		name string
		p    ode.Problem
	}{
		{"Robertson", ode.Problem{Field: rob.Field, Y0: rob.Y0, P: rob.P, T1: rob.T1}},
		{"a stiff linear system", ode.Problem{Field: ode.Field{Name: "stifflinear", Dim: 2, F: func(_ tape.V, y, _ []tape.V) []tape.V {
			return []tape.V{y[0].MulC(-500.5).Add(y[1].MulC(499.5)), y[0].MulC(499.5).Add(y[1].MulC(-500.5))}
		}}, Y0: []float64{2, 0}, T1: 100}},
	} {
		stiff, err := ode.Solve(c.p, &ode.Settings{Method: ode.Rodas5P})
		if err != nil {
			t.Fatalf("%s: Rodas5P: %v", c.name, err)
		}
		budget := 5 * (stiff.Stats.TotalAccepted() + stiff.Stats.TotalRejected())
		for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
			name := c.name + ", " + m.Name()
			sv := solverT(t, c.p.Field, &ode.Settings{Method: m, MaxSteps: 1 << 22})
			_, err := sv.GradContext(context.Background(), nil, &c.p, ode.SumSquares(), nil)
			var te *ode.TrajectoryError
			if !errors.As(err, &te) || te.Status != ode.Stiff || !errors.Is(err, ode.ErrStiff) {
				t.Errorf("%s: got %v, want a *TrajectoryError with Status Stiff", name, err)
				continue
			}
			t.Logf("%s: refused at t = %.4g after %d steps; Rodas5P solves it in %d", name, te.T, te.Accepted+te.Rejected, budget/5)
			if n := te.Accepted + te.Rejected; n == 0 || n > budget {
				t.Errorf("%s: refused after %d steps; want at most 5× the Rodas5P solve's (%d)", name, n, budget/5)
			}
			if !(te.T > c.p.T0 && te.T < c.p.T1) {
				t.Errorf("%s: the error's time is %v, want where it stopped, inside (T0, T1)", name, te.T)
			}
			wantErr(t, name, err, fmt.Sprintf("trajectory 0 stopped at t=%.6g", te.T), "stiffness test of "+m.Name()+" fired", "use Rodas5P")
			// Auto switches there to Rodas5P, which solves the rest.
			auto, err := ode.Solve(c.p, &ode.Settings{Method: ode.Auto})
			if err != nil || auto.Method != "Auto" || auto.Switch == nil || auto.Switch[0] >= auto.Stats.Accepted[0] {
				t.Errorf("%s: Auto: %v (method %v, switch %v of %v steps)", name, err, auto.Method, auto.Switch, auto.Stats.Accepted)
			}
		}
	}
}

// TestFieldSameComputation checks that a problem's field is compared with
// the solver's by what it computes: two Fields made by calling the same
// constructor twice were refused as "problem field kinetics is not the
// solver's field kinetics". A field that computes something else is
// refused with the reason.
func TestFieldSameComputation(t *testing.T) {
	t.Parallel()
	kinetics := func(k float64) ode.Field {
		return ode.Field{Name: "kinetics", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
			r := p[0].Mul(y[0]).MulC(k)
			return []tape.V{r.Neg(), r}
		}}
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Rodas5P} {
		sv := solverT(t, kinetics(2), &ode.Settings{Method: m})
		p := ode.Problem{Field: kinetics(2), Y0: []float64{1, 0}, P: []float64{1}, T1: 1}
		if _, err := sv.Solve(&p); err != nil {
			t.Errorf("%s, the same constructor twice: %v", m.Name(), err)
		}
		if _, err := sv.Grad(nil, &p, ode.SumSquares(), nil); err != nil {
			t.Errorf("%s, the same constructor twice (Grad): %v", m.Name(), err)
		}
		p.Field = kinetics(3)
		_, err := sv.Solve(&p)
		wantErr(t, m.Name()+", another constant", err, "problem field kinetics does not compute what the solver's field kinetics does", "traced programs differ", "the constant 3 against the constant 2")
		p.Field = vdpField()
		_, err = sv.Solve(&p)
		wantErr(t, m.Name()+", another function", err, "problem field vanderpol does not compute what the solver's field kinetics does", "traced programs differ")
	}
}
