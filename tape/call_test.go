package tape_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Calls: programs traced with CallFunc keep their callees as Funcs. They
// are checked against the same programs traced with Call (inlined).

// callField is a right-hand side f(t, y, p) of d states and np parameters
// (inputs t, y…, p…), with a generator of random states and parameters.
type callField struct {
	name    string
	f, flat *tape.Program // flat: f traced with Call in place of CallFunc
	d       int
	gen     func(r *rand.Rand) (y, p []float64)
}

func (cf callField) np() int { return len(cf.f.Inputs) - 1 - cf.d }

// callFields returns the Lorenz field, an MLP field made with package nn,
// and a Lorenz field that calls a callee itself (nested calls).
func callFields(t testing.TB) []callField {
	lorenzGen := func(r *rand.Rand) (y, p []float64) {
		return []float64{uniform(r, -20, 20), uniform(r, -20, 20), uniform(r, 0, 40)},
			[]float64{uniform(r, 5, 15), uniform(r, 20, 30), uniform(r, 2, 3)}
	}
	// cross(a, b, c) = a·(b − c) and a·b, used twice by the nested field.
	cross := mustTrace(t, "cross", withNames("a", "b", "c"), func(in []tape.V) []tape.V {
		return []tape.V{in[0].Mul(in[1].Sub(in[2])), in[0].Mul(in[1])}
	})
	nested := func(call func(*tape.Program, []tape.V) []tape.V) *tape.Program {
		return mustTrace(t, "lorenz-nested", withNames("t", "y0", "y1", "y2", "sigma", "rho", "beta"), func(in []tape.V) []tape.V {
			y0, y1, y2 := in[1], in[2], in[3]
			sigma, rho, beta := in[4], in[5], in[6]
			a := call(cross, []tape.V{sigma, y1, y0})
			b := call(cross, []tape.V{y0, rho, y2})
			return []tape.V{a[0], b[0].Sub(y1), b[1].Sub(beta.Mul(y2)).Add(call(cross, []tape.V{y0, y1, y1})[0])}
		})
	}
	mlp := nn.NewMLP([]int{3, 16, 3}, nn.Tanh, nn.Identity)
	in := withNames("t", "y0", "y1", "y2")
	for i := 0; i < mlp.NumParams(); i++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("w%d", i), Shared: true})
	}
	neural := mustTrace(t, "mlp", in, func(in []tape.V) []tape.V {
		y := mlp.Apply(in[4:], in[1:4])
		for i := range y {
			y[i] = y[i].Sub(in[1+i].MulC(0.1))
		}
		return y
	})
	return []callField{
		{"lorenz", lorenzProgram(t), lorenzProgram(t), 3, lorenzGen},
		{"lorenz-nested", nested(tape.CallFunc), nested(tape.Call), 3, lorenzGen},
		{"mlp", neural, neural, 3, func(r *rand.Rand) (y, p []float64) {
			p = mlp.Init(nil, r)
			for i := range p {
				p[i] += uniform(r, -0.1, 0.1)
			}
			return randVec(r, 3), p
		}},
	}
}

// Dormand–Prince 5(4): seven stages, the shape of a Tsit5 step.
var (
	dpA = [][]float64{
		{},
		{1.0 / 5},
		{3.0 / 40, 9.0 / 40},
		{44.0 / 45, -56.0 / 15, 32.0 / 9},
		{19372.0 / 6561, -25360.0 / 2187, 64448.0 / 6561, -212.0 / 729},
		{9017.0 / 3168, -355.0 / 33, 46732.0 / 5247, 49.0 / 176, -5103.0 / 18656},
		{35.0 / 384, 0, 500.0 / 1113, 125.0 / 192, -2187.0 / 6784, 11.0 / 84},
	}
	dpC = []float64{0, 1.0 / 5, 3.0 / 10, 4.0 / 5, 8.0 / 9, 1, 1}
	dpE = []float64{71.0 / 57600, 0, -71.0 / 16695, 71.0 / 1920, -17253.0 / 339200, 22.0 / 525, -1.0 / 40}
)

// stepInputs are the inputs of a step over field cf: t, h, y…, then the
// parameters, shared.
func (cf callField) stepInputs() []tape.Input {
	in := append(withNames("t", "h"), names("y", cf.d)...)
	for i := 0; i < cf.np(); i++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("p%d", i), Shared: true})
	}
	return in
}

// stepGen returns random inputs of a step over cf.
func (cf callField) stepGen(r *rand.Rand, h float64) []float64 {
	y, p := cf.gen(r)
	return cat([]float64{uniform(r, 0, 1), h}, y, p)
}

// rkStep traces one Dormand–Prince step over field f (of the shape of
// cf), calling it with call (tape.Call or tape.CallFunc). Outputs: y1 (d), then the error
// estimate (d).
func rkStep(t testing.TB, cf callField, f *tape.Program, call func(*tape.Program, []tape.V) []tape.V) *tape.Program {
	return mustTrace(t, "dp5-"+cf.name, cf.stepInputs(), func(in []tape.V) []tape.V {
		tt, h, y, p := in[0], in[1], in[2:2+cf.d], in[2+cf.d:]
		k := make([][]tape.V, len(dpA))
		var ys []tape.V
		for s := range dpA {
			ys = make([]tape.V, cf.d)
			for i := range ys {
				acc := y[i]
				for j, a := range dpA[s] {
					if a != 0 {
						acc = acc.Add(h.Mul(k[j][i]).MulC(a))
					}
				}
				ys[i] = acc
			}
			ts := tt.Add(h.MulC(dpC[s]))
			k[s] = call(f, append(append([]tape.V{ts}, ys...), p...))
		}
		out := ys
		for i := 0; i < cf.d; i++ {
			var e tape.V
			for j, c := range dpE {
				if c == 0 {
					continue
				}
				if term := k[j][i].MulC(c); e.Builder() == nil {
					e = term
				} else {
					e = e.Add(term)
				}
			}
			out = append(out, h.Mul(e))
		}
		return out
	})
}

// rosenbrockStep traces a two-stage linearly implicit step over field f
// (of the shape of cf) that calls jac, the field's Jacobian program
// (outputs f then ∂f/∂y), and the field itself with call: W = I − hγJ, W k1 = f(y), W k2 =
// f(y + h k1/2), y1 = y + h(k1 + k2)/2. Its VJP needs second derivatives
// of the field.
func rosenbrockStep(t testing.TB, cf callField, f, jac *tape.Program, call func(*tape.Program, []tape.V) []tape.V) *tape.Program {
	const gamma = 0.4358665215
	d := cf.d
	return mustTrace(t, "ros2-"+cf.name, cf.stepInputs(), func(in []tape.V) []tape.V {
		tt, h, y, p := in[0], in[1], in[2:2+d], in[2+d:]
		fj := call(jac, append(append([]tape.V{tt}, y...), p...))
		f0, j := fj[:d], fj[d:]
		w := make([]tape.V, d*d)
		hg := h.MulC(gamma)
		for r := 0; r < d; r++ {
			for c := 0; c < d; c++ {
				w[r*d+c] = hg.Mul(j[r*d+c]).Neg()
				if r == c {
					w[r*d+c] = w[r*d+c].AddC(1)
				}
			}
		}
		lu := tape.Factor(w, d)
		k1 := lu.Solve(f0)
		y2 := make([]tape.V, d)
		for i := range y2 {
			y2[i] = y[i].Add(h.Mul(k1[i]).MulC(0.5))
		}
		k2 := lu.Solve(call(f, append(append([]tape.V{tt.Add(h.MulC(0.5))}, y2...), p...)))
		y1 := make([]tape.V, d)
		for i := range y1 {
			y1[i] = y[i].Add(h.Mul(k1[i].Add(k2[i])).MulC(0.5))
		}
		return y1
	})
}

// jvpCaller traces f(y) + J(y)·v for field cf with J·v from a call of the
// field's JVP program (call tape.Call or tape.CallFunc); inputs are the
// step's followed by v (d).
func jvpCaller(t testing.TB, cf callField, jvp *tape.Program, call func(*tape.Program, []tape.V) []tape.V) *tape.Program {
	d := cf.d
	in := append(cf.stepInputs(), names("v", d)...)
	return mustTrace(t, "jv-"+cf.name, in, func(in []tape.V) []tape.V {
		tt, y, p, v := in[0], in[2:2+d], in[2+d:len(in)-d], in[len(in)-d:]
		args := append(append([]tape.V{tt}, y...), p...)
		tan := append([]tape.V{tt.Const(0)}, v...)
		for range p {
			tan = append(tan, tt.Const(0))
		}
		r := call(jvp, append(args, tan...))
		out := make([]tape.V, d)
		for i := range out {
			out[i] = r[i].Add(r[d+i].Mul(in[1]))
		}
		return out
	})
}

// countValues returns the number of values of p and of its callees,
// each callee counted once.
func countValues(p *tape.Program) int {
	seen := make(map[*tape.Program]bool)
	var count func(p *tape.Program) int
	count = func(p *tape.Program) int {
		if seen[p] {
			return 0
		}
		seen[p] = true
		n := len(p.Values)
		for _, f := range p.Funcs {
			n += count(f)
		}
		return n
	}
	return count(p)
}

// callPair is a program traced with CallFunc and the same traced with
// Call, with a generator of inputs.
type callPair struct {
	name        string
	calls, flat *tape.Program
	gen         func(r *rand.Rand) []float64
}

func callPairs(t testing.TB) []callPair {
	var pairs []callPair
	for _, cf := range callFields(t) {
		cf := cf
		h := 0.01
		if cf.name == "mlp" {
			h = 0.1
		}
		gen := func(r *rand.Rand) []float64 { return cf.stepGen(r, h) }
		pairs = append(pairs, callPair{"dp5/" + cf.name, rkStep(t, cf, cf.f, tape.CallFunc), rkStep(t, cf, cf.flat, tape.Call), gen})
		ywrt := seq(1, 1+cf.d)
		jac := mustProgram(t, cf.name)(tape.Jacobian(cf.f, ywrt))
		jacFlat := mustProgram(t, cf.name)(tape.Jacobian(cf.flat, ywrt))
		pairs = append(pairs, callPair{"ros2/" + cf.name, rosenbrockStep(t, cf, cf.f, jac, tape.CallFunc),
			rosenbrockStep(t, cf, cf.flat, jacFlat, tape.Call), gen})
		jvp := mustProgram(t, cf.name)(tape.JVP(cf.f, nil))
		jvpFlat := mustProgram(t, cf.name)(tape.JVP(cf.flat, nil))
		vgen := func(r *rand.Rand) []float64 { return cat(cf.stepGen(r, h), randVec(r, cf.d)) }
		pairs = append(pairs, callPair{"jv/" + cf.name, jvpCaller(t, cf, jvp, tape.CallFunc), jvpCaller(t, cf, jvpFlat, tape.Call), vgen})
	}
	return pairs
}

// TestCallInline checks that a program traced with CallFunc evaluates, and
// after Inline executes, bit for bit like the program traced with Call.
func TestCallInline(t *testing.T) {
	t.Parallel()
	for _, pr := range callPairs(t) {
		if len(pr.calls.Funcs) == 0 || len(pr.flat.Funcs) != 0 {
			t.Errorf("Case %v: %d funcs traced with CallFunc and %d with Call", pr.name, len(pr.calls.Funcs), len(pr.flat.Funcs))
		}
		inl := mustProgram(t, pr.name)(tape.Inline(pr.calls))
		if len(inl.Funcs) != 0 {
			t.Errorf("Case %v: Inline left %d funcs", pr.name, len(inl.Funcs))
		}
		for _, v := range inl.Values {
			if v.Op == ops.OpCall {
				t.Fatalf("Case %v: Inline left a call", pr.name)
			}
		}
		r := rand.New(rand.NewPCG(3, 1))
		const n = 37
		in := make([][]float64, len(pr.calls.Inputs))
		for i := 0; i < n; i++ {
			x := pr.gen(r)
			want := pr.flat.Eval(nil, x)
			for name, q := range map[string]*tape.Program{"Eval": pr.calls, "Inline": inl} {
				got := q.Eval(nil, x)
				for k := range want {
					if !sameBits(got[k], want[k]) {
						t.Fatalf("Case %v %s: output %d want %v (inlined by Call), got %v", pr.name, name, k, want[k], got[k])
					}
				}
			}
			for k := range x {
				if i == 0 || !pr.calls.Inputs[k].Shared {
					in[k] = append(in[k], x[k])
				}
			}
		}
		want := evalAll(pr.flat, in, n)
		e, err := tape.NewExec(pr.calls, &tape.ExecSettings{BlockSize: 8, Workers: 2})
		if err != nil {
			t.Fatalf("Case %v: NewExec: %v", pr.name, err)
		}
		if len(e.Program().Funcs) != 0 {
			t.Errorf("Case %v: Exec runs a program with %d funcs, want it inlined", pr.name, len(e.Program().Funcs))
		}
		out := newOuts(pr.calls, n)
		if err := e.Run(out, in, n); err != nil {
			t.Fatalf("Case %v: Run: %v", pr.name, err)
		}
		for k := range want {
			for i := 0; i < n; i++ {
				if !sameBits(out[k][i], want[k][i]) {
					t.Fatalf("Case %v: Exec output %d trajectory %d want %v (inlined by Call), got %v", pr.name, k, i, want[k][i], out[k][i])
				}
			}
		}
	}
}

// relDiff returns the largest difference between a and b relative to
// the largest magnitude of b (normwise, so entries that cancel to nearly
// zero do not dominate).
func relDiff(a, b []float64) float64 {
	scale, d := 0.0, 0.0
	for i := range b {
		scale = math.Max(scale, math.Abs(b[i]))
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	if scale == 0 {
		return d
	}
	return d / scale
}

// TestCallDerivatives checks the transforms of programs with calls: VJP,
// JVP, Jacobian and Grad against the same transforms of the program traced with
// Call (to round-off), against central differences, and that the VJP of
// a step calls the VJP of its field rather than inlining it.
func TestCallDerivatives(t *testing.T) {
	t.Parallel()
	const trials = 4
	for _, pr := range callPairs(t) {
		t.Run(pr.name, func(t *testing.T) {
			t.Parallel()
			must := mustProgram(t, pr.name)
			m, nin := len(pr.calls.Outputs), len(pr.calls.Inputs)
			vjp, vjpFlat := must(tape.VJP(pr.calls, nil)), must(tape.VJP(pr.flat, nil))
			jvp, jvpFlat := must(tape.JVP(pr.calls, nil)), must(tape.JVP(pr.flat, nil))
			jac, jacFlat := must(tape.Jacobian(pr.calls, nil)), must(tape.Jacobian(pr.flat, nil))
			vjpInl := must(tape.Inline(vjp))
			if len(vjp.Funcs) == 0 {
				t.Errorf("Case %v: the VJP program has no funcs; want calls of the callees' VJPs", pr.name)
			}
			t.Logf("Case %v: VJP %d values with calls (funcs counted once), %d inlined", pr.name, countValues(vjp), len(vjpInl.Values))
			// A scalar loss through a call of the whole program: Grad.
			loss := mustTrace(t, "loss", pr.calls.Inputs, func(in []tape.V) []tape.V {
				y := tape.CallFunc(pr.calls, in)
				s := y[0].Square()
				for _, v := range y[1:] {
					s = s.Add(v.Square())
				}
				return []tape.V{s}
			})
			grad := must(tape.Grad(loss, nil))

			r := rand.New(rand.NewPCG(5, 2))
			worst := map[string]float64{}
			for trial := 0; trial < trials; trial++ {
				x := pr.gen(r)
				ybar, xdot := randVec(r, m), randVec(r, nin)
				fd := fdJacOf(pr.flat, x)
				check := func(what string, got, want, scale []float64, tol float64) {
					for k := range want {
						if !within(got[k], want[k], tol*scale[k], tol) {
							t.Errorf("Case %v %s: entry %d want %v (central differences), got %v", pr.name, what, k, want[k], got[k])
						}
					}
				}
				g := vjp.Eval(nil, cat(x, ybar))
				gFlat := vjpFlat.Eval(nil, cat(x, ybar))
				want, scale := fd.vjp(ybar)
				check("VJP", g, want, scale, 1e-6)
				worst["VJP"] = math.Max(worst["VJP"], relDiff(g, gFlat))
				worst["Inline(VJP)"] = math.Max(worst["Inline(VJP)"], relDiff(vjpInl.Eval(nil, cat(x, ybar)), gFlat))

				tan := jvp.Eval(nil, cat(x, xdot))
				tanFlat := jvpFlat.Eval(nil, cat(x, xdot))
				want, scale = fd.jvp(xdot)
				// Looser: the error estimate of a step cancels, which
				// costs central differences digits.
				check("JVP", tan[m:], want, scale, 2e-5)
				for i := 0; i < m; i++ {
					if !sameBits(tan[i], tanFlat[i]) {
						t.Errorf("Case %v JVP: primal output %d want %v, got %v", pr.name, i, tanFlat[i], tan[i])
					}
				}
				worst["JVP"] = math.Max(worst["JVP"], relDiff(tan[m:], tanFlat[m:]))
				worst["Jacobian"] = math.Max(worst["Jacobian"], relDiff(jac.Eval(nil, x), jacFlat.Eval(nil, x)))

				y := pr.flat.Eval(nil, x)
				gl := grad.Eval(nil, x)
				for i := range y {
					ybar[i] = 2 * y[i]
				}
				want, scale = fd.vjp(ybar)
				check("Grad", gl[1:], want, scale, 1e-6)
				worst["Grad"] = math.Max(worst["Grad"], relDiff(gl[1:], vjpFlat.Eval(nil, cat(x, ybar))))
			}
			for what, d := range worst {
				t.Logf("Case %v: %s with calls vs inlined: max normwise relative difference %.3g", pr.name, what, d)
				if d > 1e-13 {
					t.Errorf("Case %v: %s with calls differs from the inlined transform by %.3g (normwise relative)", pr.name, what, d)
				}
			}
		})
	}
}

// TestCallStructure checks what the transforms and passes do with calls:
// DeadCode drops unused calls and callees, Simplify merges identical
// calls, Call keeps the calls of the program it inlines, and VJP builds
// one VJP program per callee however often it is called.
func TestCallStructure(t *testing.T) {
	t.Parallel()
	f := mustTrace(t, "f", withNames("a", "b"), func(in []tape.V) []tape.V {
		return []tape.V{in[0].Mul(in[1]).Sin(), in[0].Add(in[1])}
	})
	g := mustTrace(t, "g", withNames("a"), func(in []tape.V) []tape.V { return []tape.V{in[0].Exp()} })
	p := mustTrace(t, "p", withNames("x", "y"), func(in []tape.V) []tape.V {
		u := tape.CallFunc(g, in[:1]) // dead
		a := tape.CallFunc(f, in)     // used
		b := tape.CallFunc(f, in)     // the same call again
		c := tape.CallFunc(f, []tape.V{in[1], in[0]})
		_ = u
		return []tape.V{a[0].Mul(b[1]), c[1]}
	})
	countCalls := func(p *tape.Program) int {
		n := 0
		for _, v := range p.Values {
			if v.Op == ops.OpCall {
				n++
			}
		}
		return n
	}
	if len(p.Funcs) != 2 || countCalls(p) != 4 {
		t.Fatalf("Case trace: %d funcs, %d calls; want 2 and 4", len(p.Funcs), countCalls(p))
	}
	x := []float64{0.3, -1.7}
	want := p.Eval(nil, x)
	for _, tc := range []struct {
		name         string
		q            *tape.Program
		funcs, calls int
	}{
		{"DeadCode", tape.DeadCode(p), 1, 3},
		{"Simplify", mustProgram(t, "Simplify")(tape.Simplify(p)), 1, 2},
		{"Inline", mustProgram(t, "Inline")(tape.Inline(p)), 0, 0},
	} {
		if len(tc.q.Funcs) != tc.funcs || countCalls(tc.q) != tc.calls {
			t.Errorf("Case %v: %d funcs, %d calls; want %d and %d\n%v", tc.name, len(tc.q.Funcs), countCalls(tc.q), tc.funcs, tc.calls, tc.q)
		}
		if len(tc.q.Funcs) == 1 && tc.q.Funcs[0] != f {
			t.Errorf("Case %v: the callee left is %s, want f", tc.name, tc.q.Funcs[0].Name)
		}
		if err := tc.q.Validate(); err != nil {
			t.Errorf("Case %v: %v", tc.name, err)
		}
		for k, y := range tc.q.Eval(nil, x) {
			if !sameBits(y, want[k]) {
				t.Errorf("Case %v: output %d want %v, got %v", tc.name, k, want[k], y)
			}
		}
	}
	if len(p.Values) != 14 || len(p.Funcs) != 2 {
		t.Errorf("Case DeadCode: modified its input")
	}

	// Call inlines p but keeps p's calls.
	q := mustTrace(t, "q", withNames("x", "y"), func(in []tape.V) []tape.V { return tape.Call(p, in) })
	if len(q.Funcs) != 2 || countCalls(q) != 4 {
		t.Errorf("Case Call: %d funcs, %d calls; want p's 2 and 4", len(q.Funcs), countCalls(q))
	}

	// VJP: f is called three times and differentiated once; the primal
	// calls stay for the values the sweep needs.
	vjp := mustProgram(t, "VJP")(tape.VJP(p, nil))
	var names []string
	for _, fn := range vjp.Funcs {
		names = append(names, fn.Name)
	}
	if got := strings.Join(names, " "); got != "f f.vjp" {
		t.Errorf("Case VJP: funcs %q, want %q", got, "f f.vjp")
	}
	fv := vjp.Funcs[1]
	if len(fv.Inputs) != 4 || len(fv.Outputs) != 2 || fv.Inputs[2].Name != "adj_out0" || fv.Outputs[1].Name != "grad_b" || fv.Outputs[0].Sum {
		t.Errorf("Case VJP: callee VJP has the wrong interface:\n%v", fv)
	}
	jvp := mustProgram(t, "JVP")(tape.JVP(p, []int{0}))
	fj := jvp.Funcs[len(jvp.Funcs)-1]
	if fj.Name != "f.jvp" || len(fj.Inputs) != 4 || len(fj.Outputs) != 2 || fj.Outputs[0].Name != "d_out0" {
		t.Errorf("Case JVP: callee JVP has the wrong interface:\n%v", fj)
	}
}

// TestCallString checks the printed form of a program with calls.
func TestCallString(t *testing.T) {
	t.Parallel()
	f := mustTrace(t, "f", []tape.Input{{Name: "a"}, {Name: "k", Shared: true}}, func(in []tape.V) []tape.V {
		return []tape.V{in[0].Mul(in[1]), in[0].Neg()}
	})
	p := mustTrace(t, "p", withNames("x"), func(in []tape.V) []tape.V {
		y := tape.CallFunc(f, []tape.V{in[0], in[0].Const(2)})
		return []tape.V{y[1].Add(y[0])}
	})
	want := `program p: 1 inputs, 6 values, 1 outputs, 1 funcs
v0 = Input [0] x
v1 = Const [2]
v2 = Call [0] f v0 v1
v3 = Extract [0] v2
v4 = Extract [1] v2
v5 = Add v4 v3
out 0 out0 = v5
func 0:
	program f: 2 inputs, 4 values, 2 outputs
	v0 = Input [0] a
	v1 = Input [1] k shared
	v2 = Mul v0 v1
	v3 = Neg v0
	out 0 out0 = v2
	out 1 out1 = v3
`
	if got := p.String(); got != want {
		t.Errorf("Case p: String gave\n%s\nwant\n%s", got, want)
	}
	if p.Width(2) != 2 || p.Width(3) != 1 {
		t.Errorf("Case p: widths %d, %d; want 2, 1", p.Width(2), p.Width(3))
	}
}

// TestCallValidate checks Validate's errors for bad calls, and CallFunc's
// errors while tracing.
func TestCallValidate(t *testing.T) {
	t.Parallel()
	in := func(k float64) tape.Value { return tape.Value{Op: ops.OpInput, Aux: k} }
	x := []tape.Input{{Name: "x"}}
	f := mustTrace(t, "f", withNames("a", "b"), func(in []tape.V) []tape.V { return []tape.V{in[0].Mul(in[1])} })
	summed := *f
	summed.Outputs = []tape.Output{{Name: "s", ID: f.Outputs[0].ID, Sum: true}}
	call := func(k float64, args ...tape.ID) tape.Value { return tape.Value{Op: ops.OpCall, Aux: k, Args: args} }
	ext := func(c float64, t tape.ID) tape.Value {
		return tape.Value{Op: ops.OpExtract, Aux: c, Args: []tape.ID{t}}
	}
	prog := func(funcs []*tape.Program, vals ...tape.Value) *tape.Program {
		return &tape.Program{Name: "p", Inputs: x, Values: append([]tape.Value{in(0)}, vals...),
			Outputs: []tape.Output{{ID: tape.ID(len(vals))}}, Funcs: funcs}
	}
	self := prog(nil, call(0, 0, 0), ext(0, 1))
	self.Funcs = []*tape.Program{self}
	loopA, loopB := prog(nil, call(0, 0), ext(0, 1)), prog(nil, call(0, 0), ext(0, 1))
	loopA.Funcs, loopB.Funcs = []*tape.Program{loopB}, []*tape.Program{loopA}
	for _, tc := range []struct {
		name string
		p    *tape.Program
		want string
	}{
		{"ok", prog([]*tape.Program{f}, call(0, 0, 0), ext(0, 1)), ""},
		{"unused func", prog([]*tape.Program{f, f}, call(1, 0, 0), ext(0, 1)), ""},
		{"index range", prog([]*tape.Program{f}, call(1, 0, 0), ext(0, 1)), "call of func 1; the program has 1 funcs"},
		{"index negative", prog([]*tape.Program{f}, call(-1, 0, 0), ext(0, 1)), "not a non-negative integer"},
		{"index fraction", prog([]*tape.Program{f}, call(0.5, 0, 0), ext(0, 1)), "not a non-negative integer"},
		{"arg count", prog([]*tape.Program{f}, call(0, 0), ext(0, 1)), "call of f, which has 2 inputs, with 1 arguments"},
		{"tuple arg", prog([]*tape.Program{f}, call(0, 0, 0), call(0, 0, 1), ext(0, 2)), "Call argument 1 is a tuple"},
		{"extract range", prog([]*tape.Program{f}, call(0, 0, 0), ext(1, 1)), "extracts component 1 of a tuple of width 1"},
		{"output a call", prog([]*tape.Program{f}, call(0, 0, 0)), "output 0 is a tuple"},
		{"nil func", prog([]*tape.Program{nil}, call(0, 0, 0), ext(0, 1)), "func 0 is nil"},
		{"invalid callee", prog([]*tape.Program{invalidProgram()}, call(0, 0), ext(0, 1)), "func 0: tape: program bad"},
		{"summed callee", prog([]*tape.Program{&summed}, call(0, 0, 0), ext(0, 1)), "output 0 (s) is summed"},
		{"self call", self, "func 0 (p) calls itself"},
		{"mutual calls", loopA, "calls itself"},
	} {
		err := tc.p.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Case %v: want no error, got %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Case %v: want an error containing %q, got %v", tc.name, tc.want, err)
		}
		if tc.want != "" {
			for name, tr := range map[string]func(*tape.Program) (*tape.Program, error){
				"VJP": func(p *tape.Program) (*tape.Program, error) { return tape.VJP(p, nil) }, "Inline": tape.Inline,
				"Simplify": tape.Simplify, "Exec": func(p *tape.Program) (*tape.Program, error) { _, err := tape.NewExec(p, nil); return nil, err },
			} {
				if _, err := tr(tc.p); err == nil {
					t.Errorf("Case %v: %s accepted the invalid program", tc.name, name)
				}
			}
		}
	}

	for _, tc := range []struct {
		name string
		f    func(in []tape.V) []tape.V
		want string
	}{
		{"count", func(in []tape.V) []tape.V { return tape.CallFunc(f, in[:1]) }, "program f has 2 inputs, got 1 values"},
		{"summed", func(in []tape.V) []tape.V { return tape.CallFunc(&summed, in) }, "output 0 (s) is summed"},
		{"invalid", func(in []tape.V) []tape.V { return tape.CallFunc(invalidProgram(), in[:1]) }, "not defined before it"},
		{"zero V", func(in []tape.V) []tape.V { return tape.CallFunc(f, []tape.V{{}, in[0]}) }, "argument 1 is the zero V"},
		{"mixed traces", func(in []tape.V) []tape.V {
			other := tape.NewBuilder("other", false).Input("z", false)
			return tape.CallFunc(f, []tape.V{in[0], other})
		}, "argument 2 is from another trace"},
	} {
		_, err := tape.Trace(tc.name, withNames("x", "y"), tc.f)
		var te *tape.TraceError
		if !errors.As(err, &te) || te.Op != "CallFunc" || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Case %v: want a CallFunc *TraceError containing %q, got %v", tc.name, tc.want, err)
		}
	}
}
