package tape_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

func mustProgram(t testing.TB, name string) func(*tape.Program, error) *tape.Program {
	return func(p *tape.Program, err error) *tape.Program {
		t.Helper()
		if err != nil {
			t.Fatalf("Case %v: %v", name, err)
		}
		return p
	}
}

func seq(lo, hi int) []int {
	s := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		s = append(s, i)
	}
	return s
}

// TestProblemDerivatives checks whole-program derivatives of ODE
// right-hand sides against central differences: the Jacobian program, the
// VJP and JVP programs and their consistency, and Grad of a loss built
// with Call.
func TestProblemDerivatives(t *testing.T) {
	t.Parallel()
	for _, pr := range odeProblems(t) {
		t.Run(pr.name, func(t *testing.T) {
			t.Parallel()
			must := mustProgram(t, pr.name)
			p := pr.p
			n, m := len(p.Inputs), len(p.Outputs)
			jac := must(tape.Jacobian(p, nil))
			wrtY := seq(1, 1+m)
			jacY := must(tape.Jacobian(p, wrtY))
			vjp := must(tape.VJP(p, nil))
			jvp := must(tape.JVP(p, nil))
			c := []float64{0.5, -1.25, 2}[:m]
			loss := mustTrace(t, pr.name+".loss", p.Inputs, func(in []tape.V) []tape.V {
				out := tape.Call(p, in)
				s := out[0].MulC(c[0])
				for i := 1; i < m; i++ {
					s = s.Add(out[i].MulC(c[i]))
				}
				return []tape.V{s}
			})
			grad := must(tape.Grad(loss, nil))
			tol := pr.tol

			rnd := rand.New(rand.NewPCG(1, 1))
			for trial := 0; trial < 5; trial++ {
				x := pr.gen(rnd)
				y := p.Eval(nil, x)
				f := fdJacOf(p, x)

				jo := jac.Eval(nil, x)
				jy := jacY.Eval(nil, x)
				for i := 0; i < m; i++ {
					if jo[i] != y[i] || jy[i] != y[i] {
						t.Errorf("Case %v x=%v: Jacobian program output %d want %v, got %v and %v", pr.name, x, i, y[i], jo[i], jy[i])
					}
					for k := 0; k < n; k++ {
						if got := jo[m+i*n+k]; !f.checkEntry(got, i, k, tol) {
							t.Errorf("Case %v x=%v: J[%d,%d] want %v (FD), got %v", pr.name, x, i, k, f.j.At(i, k), got)
						}
					}
					for j, k := range wrtY {
						if got, want := jy[m+i*len(wrtY)+j], jo[m+i*n+k]; got != want {
							t.Errorf("Case %v x=%v: J[%d,%d] with respect to y only want %v, got %v", pr.name, x, i, k, want, got)
						}
					}
				}

				ybar, xdot := randVec(rnd, m), randVec(rnd, n)
				g := vjp.Eval(nil, cat(x, ybar))
				want, scale := f.vjp(ybar)
				for k := range g {
					if !within(g[k], want[k], tol*scale[k], tol) {
						t.Errorf("Case %v x=%v: (Jᵀȳ)[%d] want %v (FD), got %v", pr.name, x, k, want[k], g[k])
					}
				}
				out := jvp.Eval(nil, cat(x, xdot))
				tw, tscale := f.jvp(xdot)
				for i := 0; i < m; i++ {
					if out[i] != y[i] {
						t.Errorf("Case %v x=%v: JVP primal output %d want %v, got %v", pr.name, x, i, y[i], out[i])
					}
					if !within(out[m+i], tw[i], tol*tscale[i], tol) {
						t.Errorf("Case %v x=%v: (J·ẋ)[%d] want %v (FD), got %v", pr.name, x, i, tw[i], out[m+i])
					}
				}
				fwd, rev, mag := 0.0, 0.0, 0.0
				for i := 0; i < m; i++ {
					fwd += ybar[i] * out[m+i]
					mag += math.Abs(ybar[i] * out[m+i])
				}
				for k := 0; k < n; k++ {
					rev += g[k] * xdot[k]
					mag += math.Abs(g[k] * xdot[k])
				}
				if math.Abs(fwd-rev) > 1e-13*mag {
					t.Errorf("Case %v x=%v: ⟨ȳ, J·ẋ⟩ = %v, ⟨Jᵀȳ, ẋ⟩ = %v; want them equal", pr.name, x, fwd, rev)
				}

				gl := grad.Eval(nil, x)
				lv := loss.Eval(nil, x)[0]
				if gl[0] != lv {
					t.Errorf("Case %v x=%v: Grad value want %v, got %v", pr.name, x, lv, gl[0])
				}
				gv := vjp.Eval(nil, cat(x, c))
				for k := 0; k < n; k++ {
					if !within(gl[1+k], gv[k], 1e-13*maxAbs(gv...), 1e-13) {
						t.Errorf("Case %v x=%v: Grad of the loss ∂/∂x[%d] want %v (VJP), got %v", pr.name, x, k, gv[k], gl[1+k])
					}
				}
			}
		})
	}
}

// TestGradMLP differentiates a tanh MLP whose weights are shared inputs:
// Grad marks their gradients Sum, and the executor's sums equal the sums
// over trajectories of the per-trajectory gradients.
func TestGradMLP(t *testing.T) {
	t.Parallel()
	must := mustProgram(t, "mlp")
	p := mlpProgram(t)
	g := must(tape.Grad(p, nil))
	nx := mlp2x16x16x1.sizes[0]
	nw := mlp2x16x16x1.nparams()
	if len(p.Inputs) != nx+nw || nw != 2*16+16+16*16+16+16+1 {
		t.Fatalf("Case mlp: %d inputs, want %d+%d", len(p.Inputs), nx, nw)
	}
	if len(g.Outputs) != 1+nx+nw {
		t.Fatalf("Case mlp: Grad has %d outputs, want %d", len(g.Outputs), 1+nx+nw)
	}
	if g.Outputs[0].Name != "value" || g.Outputs[0].Sum {
		t.Errorf("Case mlp: output 0 want value, not summed, got %+v", g.Outputs[0])
	}
	for k, in := range p.Inputs {
		o := g.Outputs[1+k]
		if o.Name != "grad_"+in.Name || o.Sum != in.Shared {
			t.Errorf("Case mlp: output %d want grad_%s with Sum %v, got %s with Sum %v", 1+k, in.Name, in.Shared, o.Name, o.Sum)
		}
	}

	rnd := rand.New(rand.NewPCG(1, 1))
	w := mlp2x16x16x1.weights(rnd)
	for trial := 0; trial < 3; trial++ {
		x := cat([]float64{uniform(rnd, -2, 2), uniform(rnd, -2, 2)}, w)
		got := g.Eval(nil, x)
		if v := p.Eval(nil, x)[0]; got[0] != v {
			t.Errorf("Case mlp: value want %v, got %v", v, got[0])
		}
		f := fdJacOf(p, x)
		for k := range p.Inputs {
			if !f.checkEntry(got[1+k], 0, k, 1e-6) {
				t.Errorf("Case mlp: ∂/∂%s want %v (FD), got %v", p.Inputs[k].Name, f.j.At(0, k), got[1+k])
			}
		}
	}

	// The executor over n trajectories with shared weights.
	const n = 1000
	in := make([][]float64, len(p.Inputs))
	for k := range in {
		if k < nx {
			in[k] = make([]float64, n)
			for i := range in[k] {
				in[k][i] = uniform(rnd, -2, 2)
			}
		} else {
			in[k] = []float64{w[k-nx]}
		}
	}
	out := make([][]float64, len(g.Outputs))
	for k, o := range g.Outputs {
		if o.Sum {
			out[k] = make([]float64, 1)
		} else {
			out[k] = make([]float64, n)
		}
	}
	e, err := tape.NewExec(g, &tape.ExecSettings{BlockSize: 64, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(out, in, n); err != nil {
		t.Fatal(err)
	}
	sum := make([]float64, len(g.Outputs))
	abs := make([]float64, len(g.Outputs))
	x := make([]float64, len(in))
	for i := 0; i < n; i++ {
		for k := range x {
			if k < nx {
				x[k] = in[k][i]
			} else {
				x[k] = in[k][0]
			}
		}
		v := g.Eval(nil, x)
		for k, o := range g.Outputs {
			if o.Sum {
				sum[k] += v[k]
				abs[k] += math.Abs(v[k])
			} else if out[k][i] != v[k] {
				t.Errorf("Case mlp: trajectory %d output %s want %v (Eval), got %v", i, o.Name, v[k], out[k][i])
			}
		}
	}
	for k, o := range g.Outputs {
		if o.Sum && !within(out[k][0], sum[k], 1e-13*abs[k], 0) {
			t.Errorf("Case mlp: %s summed over %d trajectories want %v, got %v", o.Name, n, sum[k], out[k][0])
		}
	}
}

// stageProgram is a linearly implicit (Rosenbrock-like) stage of the
// Lorenz system: k = (I − hγJ(y))⁻¹ f(y), built from the Jacobian program
// and a linear solve, plus a transposed solve so both solve ops appear.
func stageProgram(t testing.TB) *tape.Program {
	lor := lorenzProgram(t)
	jac := mustProgram(t, "lorenz.jac")(tape.Jacobian(lor, []int{1, 2, 3}))
	const gamma = 0.5
	return mustTrace(t, "stage", withNames("t", "y0", "y1", "y2", "sigma", "rho", "beta", "h"), func(in []tape.V) []tape.V {
		o := tape.Call(jac, in[:7])
		f, j := o[:3], o[3:]
		h := in[7]
		w := make([]tape.V, 9)
		for r := 0; r < 3; r++ {
			for c := 0; c < 3; c++ {
				d := 0.0
				if r == c {
					d = 1
				}
				w[r*3+c] = h.Const(d).Sub(h.Mul(j[r*3+c]).MulC(gamma))
			}
		}
		lu := tape.Factor(w, 3)
		k := lu.Solve(f)
		l := lu.SolveT(k)
		return []tape.V{k[0], k[1], k[2].Add(l[0].Mul(l[1]))}
	})
}

func stageGen(r *rand.Rand) []float64 {
	return []float64{uniform(r, 0, 1), uniform(r, -10, 10), uniform(r, -10, 10), uniform(r, 10, 30),
		10, 28, 8.0 / 3, uniform(r, 1e-3, 1e-2)}
}

// TestSecondDerivatives checks Hessian-vector products two ways, reverse
// over forward (VJP of the JVP program) and forward over reverse (JVP of
// the VJP program), against each other and against central differences of
// the JVP program.
func TestSecondDerivatives(t *testing.T) {
	t.Parallel()
	mlpGen := func(r *rand.Rand) []float64 {
		return cat([]float64{uniform(r, -2, 2), uniform(r, -2, 2)}, mlp2x16x16x1.weights(r))
	}
	for _, tc := range []struct {
		name string
		p    *tape.Program
		gen  func(*rand.Rand) []float64
		tol  float64
	}{
		{"lorenz", lorenzProgram(t), odeProblems(t)[0].gen, 1e-7},
		{"mlp", mlpProgram(t), mlpGen, 1e-6},
		{"stage", stageProgram(t), stageGen, 1e-6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			must := mustProgram(t, tc.name)
			p := tc.p
			n, m := len(p.Inputs), len(p.Outputs)
			jvp := must(tape.JVP(p, nil))
			rof := must(tape.VJP(jvp, seq(0, n)))       // inputs x, ẋ, ȳ(y), ȳ(ẏ)
			vjp := must(tape.VJP(p, nil))               // inputs x, ȳ
			for_ := must(tape.JVP(vjp, seq(0, n)))      // inputs x, ȳ, ẋ
			jac2 := must(tape.Jacobian(vjp, seq(0, n))) // outputs Jᵀȳ, then H (n×n)
			rnd := rand.New(rand.NewPCG(1, 1))
			for trial := 0; trial < 3; trial++ {
				x := tc.gen(rnd)
				ybar, xdot := randVec(rnd, m), randVec(rnd, n)
				hv1 := rof.Eval(nil, cat(x, xdot, make([]float64, m), ybar))
				hv2 := for_.Eval(nil, cat(x, ybar, xdot))[n:]
				h := jac2.Eval(nil, cat(x, ybar))[n:]
				out := make([]float64, 2*m)
				f := newFDJac(func(y, x []float64) {
					jvp.Eval(out, cat(x, xdot))
					y[0] = 0
					for i := 0; i < m; i++ {
						y[0] += ybar[i] * out[m+i]
					}
				}, 1, x)
				scale := maxAbs(hv1...)
				for k := 0; k < n; k++ {
					hv3 := 0.0
					for j := 0; j < n; j++ {
						hv3 += h[k*n+j] * xdot[j]
					}
					if !within(hv1[k], hv2[k], 1e-12*scale, 1e-12) || !within(hv1[k], hv3, 1e-12*scale, 1e-12) {
						t.Errorf("Case %v x=%v: (H·ẋ)[%d] reverse over forward %v, forward over reverse %v, Jacobian of VJP %v; want them equal",
							tc.name, x, k, hv1[k], hv2[k], hv3)
					}
					if !f.checkEntry(hv1[k], 0, k, tc.tol) {
						t.Errorf("Case %v x=%v: (H·ẋ)[%d] want %v (FD of the JVP), got %v", tc.name, x, k, f.j.At(0, k), hv1[k])
					}
				}
			}
		})
	}
}

// TestStageDerivatives checks first derivatives through the linear solves
// of the stage program against central differences.
func TestStageDerivatives(t *testing.T) {
	t.Parallel()
	p := stageProgram(t)
	jac := mustProgram(t, "stage")(tape.Jacobian(p, nil))
	n, m := len(p.Inputs), len(p.Outputs)
	rnd := rand.New(rand.NewPCG(1, 1))
	for trial := 0; trial < 5; trial++ {
		x := stageGen(rnd)
		f := fdJacOf(p, x)
		got := jac.Eval(nil, x)[m:]
		for i := 0; i < m; i++ {
			for k := 0; k < n; k++ {
				if !f.checkEntry(got[i*n+k], i, k, 1e-7) {
					t.Errorf("Case stage x=%v: J[%d,%d] want %v (FD), got %v", x, i, k, f.j.At(i, k), got[i*n+k])
				}
			}
		}
	}
}

func TestTransformShapes(t *testing.T) {
	t.Parallel()
	must := mustProgram(t, "shapes")
	p := mustTrace(t, "p", []tape.Input{{Name: "a"}, {Name: "w", Shared: true}, {Name: "unused"}}, func(in []tape.V) []tape.V {
		return []tape.V{in[0].Mul(in[1]), in[0].Sin()}
	})
	before := p.String()
	iface := func(p *tape.Program) (in, out string) {
		var a, b []string
		for _, s := range p.Inputs {
			a = append(a, fmt.Sprintf("%s%s", s.Name, map[bool]string{true: "*"}[s.Shared]))
		}
		for _, o := range p.Outputs {
			b = append(b, fmt.Sprintf("%s%s", o.Name, map[bool]string{true: "+"}[o.Sum]))
		}
		return strings.Join(a, " "), strings.Join(b, " ")
	}
	for _, tc := range []struct {
		name    string
		q       *tape.Program
		in, out string // * marks a shared input, + a summed output
	}{
		{"VJP", must(tape.VJP(p, nil)), "a w* unused adj_out0 adj_out1", "grad_a grad_w+ grad_unused"},
		{"VJP/wrt", must(tape.VJP(p, []int{1})), "a w* unused adj_out0 adj_out1", "grad_w+"},
		{"JVP", must(tape.JVP(p, nil)), "a w* unused d_a d_w* d_unused", "out0 out1 d_out0 d_out1"},
		{"JVP/wrt", must(tape.JVP(p, []int{0})), "a w* unused d_a", "out0 out1 d_out0 d_out1"},
		{"Jacobian", must(tape.Jacobian(p, []int{0, 1})), "a w* unused", "out0 out1 J[0,0] J[0,1] J[1,0] J[1,1]"},
		{"Jacobian/none", must(tape.Jacobian(p, []int{})), "a w* unused", "out0 out1"},
		{"Simplify", must(tape.Simplify(p)), "a w* unused", "out0 out1"},
		{"DeadCode", tape.DeadCode(p), "a w* unused", "out0 out1"},
	} {
		in, out := iface(tc.q)
		if in != tc.in || out != tc.out {
			t.Errorf("Case %v: inputs %q outputs %q, want %q and %q", tc.name, in, out, tc.in, tc.out)
		}
	}
	q := mustTrace(t, "q", []tape.Input{{Name: "a"}, {Name: "w", Shared: true}}, func(in []tape.V) []tape.V {
		return []tape.V{in[0].Mul(in[1]).Exp()}
	})
	g := must(tape.Grad(q, nil))
	if in, out := iface(g); in != "a w*" || out != "value grad_a grad_w+" {
		t.Errorf("Case Grad: inputs %q outputs %q, want %q and %q", in, out, "a w*", "value grad_a grad_w+")
	}
	if got, want := g.Eval(nil, []float64{0.5, 2}), []float64{math.E, 2 * math.E, 0.5 * math.E}; !within(got[0], want[0], 0, 1e-15) ||
		!within(got[1], want[1], 0, 1e-15) || !within(got[2], want[2], 0, 1e-15) {
		t.Errorf("Case Grad: want %v, got %v", want, got)
	}
	// An input the outputs do not depend on has a zero gradient.
	if got := must(tape.VJP(p, nil)).Eval(nil, []float64{1, 2, 3, 1, 1}); got[2] != 0 {
		t.Errorf("Case VJP: gradient of an unused input want 0, got %v", got[2])
	}
	if after := p.String(); after != before {
		t.Errorf("Case transforms: input program modified:\n%s\nwant\n%s", after, before)
	}

	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"Grad/outputs", func() error { _, err := tape.Grad(p, nil); return err }(), "needs exactly 1"},
		{"VJP/wrt", func() error { _, err := tape.VJP(p, []int{3}); return err }(), "cannot differentiate with respect to input 3"},
		{"JVP/wrt", func() error { _, err := tape.JVP(p, []int{-1}); return err }(), "cannot differentiate with respect to input -1"},
		{"Jacobian/wrt", func() error { _, err := tape.Jacobian(p, []int{0, 9}); return err }(), "with respect to input 9"},
		{"Grad/wrt", func() error { _, err := tape.Grad(q, []int{2}); return err }(), "with respect to input 2"},
		{"VJP/invalid", func() error { _, err := tape.VJP(invalidProgram(), nil); return err }(), "not defined before it"},
		{"Simplify/invalid", func() error { _, err := tape.Simplify(invalidProgram()); return err }(), "not defined before it"},
		{"JVP/invalid", func() error { _, err := tape.JVP(invalidProgram(), nil); return err }(), "not defined before it"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("Case %v: want an error containing %q, got %v", tc.name, tc.want, tc.err)
		}
	}
}

// TestSimplifyRandom builds random programs with every value finite,
// simplifies them and checks that no value changed, that the program did
// not grow, and that simplifying again changes nothing.
func TestSimplifyRandom(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 1))
	const n = 16
	shrunk := 0
	for c := 0; c < 200; c++ {
		name := fmt.Sprintf("random%d", c)
		rp := newRandomProgram(rnd, name, 1+rnd.IntN(3), 5+rnd.IntN(40), 1+rnd.IntN(3), n)
		sp, err := tape.Simplify(rp.p)
		if err != nil {
			t.Fatalf("Case %v: Simplify: %v", name, err)
		}
		if len(sp.Values) > len(rp.p.Values) {
			t.Errorf("Case %v: Simplify grew the program from %d to %d values", name, len(rp.p.Values), len(sp.Values))
		}
		if len(sp.Values) < len(rp.p.Values) {
			shrunk++
		}
		ssp, err := tape.Simplify(sp)
		if err != nil {
			t.Fatalf("Case %v: Simplify twice: %v", name, err)
		}
		if ssp.String() != sp.String() {
			t.Errorf("Case %v: Simplify is not idempotent:\n%v\nthen\n%v", name, sp, ssp)
		}
		for i := 0; i < n; i++ {
			x := rp.traj(i)
			got, want := sp.Eval(nil, x), rp.p.Eval(nil, x)
			for k := range want {
				if want[k] != rp.want[k][i] {
					t.Errorf("Case %v trajectory %d: Eval output %d want %v (op by op), got %v", name, i, k, rp.want[k][i], want[k])
				}
				if got[k] != want[k] {
					t.Errorf("Case %v trajectory %d x=%v: simplified output %d want %v, got %v\n%v\n%v", name, i, x, k, want[k], got[k], rp.p, sp)
				}
			}
		}
	}
	if shrunk < 100 {
		t.Errorf("Case random programs: Simplify shrank %d of 200; want most of them", shrunk)
	}
}

// TestSimplifyRules checks individual rules: what each becomes, and that
// the value is kept. The 0·x absorption changes a non-finite x·0 to 0.
func TestSimplifyRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		f      func(x, y tape.V) tape.V
		values int    // values of the simplified program (2 inputs included)
		last   string // op of its output value
	}{
		{"x+0", func(x, _ tape.V) tape.V { return x.Add(x.Const(0)) }, 2, "Input"},
		{"0+x", func(x, _ tape.V) tape.V { return x.Const(0).Add(x) }, 2, "Input"},
		{"x-0", func(x, _ tape.V) tape.V { return x.Sub(x.Const(0)) }, 2, "Input"},
		{"0-x", func(x, _ tape.V) tape.V { return x.Const(0).Sub(x) }, 3, "Neg"},
		{"x*1", func(x, _ tape.V) tape.V { return x.MulC(1) }, 2, "Input"},
		{"x*-1", func(x, _ tape.V) tape.V { return x.MulC(-1) }, 3, "Neg"},
		{"x*0", func(x, _ tape.V) tape.V { return x.MulC(0) }, 3, "Const"},
		{"x/1", func(x, _ tape.V) tape.V { return x.Div(x.Const(1)) }, 2, "Input"},
		{"0/x", func(x, _ tape.V) tape.V { return x.Const(0).Div(x) }, 3, "Const"},
		{"--x", func(x, _ tape.V) tape.V { return x.Neg().Neg() }, 2, "Input"},
		{"fma(0,x,y)", func(x, y tape.V) tape.V { return tape.FMA(x.Const(0), x, y) }, 2, "Input"},
		{"fma(x,y,0)", func(x, y tape.V) tape.V { return tape.FMA(x, y, x.Const(0)) }, 3, "Mul"},
		{"fma(1,x,y)", func(x, y tape.V) tape.V { return tape.FMA(x.Const(1), x, y) }, 3, "Add"},
		{"powi 0", func(x, _ tape.V) tape.V { return x.Powi(0) }, 3, "Const"},
		{"powi 1", func(x, _ tape.V) tape.V { return x.Powi(1) }, 2, "Input"},
		{"powi 2", func(x, _ tape.V) tape.V { return x.Powi(2) }, 3, "Square"},
		{"select const", func(x, y tape.V) tape.V { return tape.Select(x.Const(1), x, y) }, 2, "Input"},
		{"select same", func(x, y tape.V) tape.V { return tape.Select(y, x, x) }, 2, "Input"},
		{"fold", func(x, _ tape.V) tape.V { return x.Const(2).Mul(x.Const(3)).Exp() }, 3, "Const"},
		{"cse", func(x, y tape.V) tape.V { return x.Mul(y).Add(y.Mul(x)) }, 4, "Add"},
		{"cse sin", func(x, _ tape.V) tape.V { return x.Sin().Sub(x.Sin()) }, 4, "Sub"},
		{"dot no terms", func(x, y tape.V) tape.V { return tape.Dot([]tape.V{x.Const(0)}, []tape.V{x}, y) }, 2, "Input"},
		{"dot one term", func(x, y tape.V) tape.V { return tape.Dot([]tape.V{x, x.Const(0)}, []tape.V{y, y}, x) }, 3, "FMA"},
		{"dot one term no bias", func(x, y tape.V) tape.V { return tape.Dot([]tape.V{x}, []tape.V{y}, x.Const(0)) }, 3, "Mul"},
		{"dot fewer terms", func(x, y tape.V) tape.V {
			return tape.Dot([]tape.V{x, x.Const(0), y}, []tape.V{y, y, x}, x)
		}, 3, "Dot"},
		{"x+(-y)", func(x, y tape.V) tape.V { return x.Add(y.Neg()) }, 3, "Sub"},
		{"(-x)+y", func(x, y tape.V) tape.V { return x.Neg().Add(y) }, 3, "Sub"},
		{"x-(-y)", func(x, y tape.V) tape.V { return x.Sub(y.Neg()) }, 3, "Add"},
		{"2·(-x)", func(x, _ tape.V) tape.V { return x.Neg().MulC(2) }, 4, "Mul"},
		{"(-x)·y", func(x, y tape.V) tape.V { return x.Neg().Mul(y) }, 4, "Mul"},
		{"dead", func(x, y tape.V) tape.V { x.Exp(); return y }, 2, "Input"},
	} {
		p := mustTrace(t, tc.name, withNames("x", "y"), func(in []tape.V) []tape.V { return []tape.V{tc.f(in[0], in[1])} })
		sp, err := tape.Simplify(p)
		if err != nil {
			t.Fatalf("Case %v: %v", tc.name, err)
		}
		last := sp.Values[sp.Outputs[0].ID].Op.String()
		if len(sp.Values) != tc.values || last != tc.last {
			t.Errorf("Case %v: simplified to %d values ending in %s, want %d and %s:\n%v", tc.name, len(sp.Values), last, tc.values, tc.last, sp)
		}
		for _, x := range [][]float64{{0.7, -1.3}, {-2, 0.25}, {3, 0}} {
			if got, want := sp.Eval(nil, x)[0], p.Eval(nil, x)[0]; got != want {
				t.Errorf("Case %v x=%v: want %v, got %v", tc.name, x, want, got)
			}
		}
	}
	// The documented exception: x·0 is 0 even for a non-finite x.
	p := mustTrace(t, "absorb", withNames("x"), func(in []tape.V) []tape.V { return []tape.V{in[0].MulC(0)} })
	sp := mustProgram(t, "absorb")(tape.Simplify(p))
	if got, orig := sp.Eval(nil, []float64{math.Inf(1)})[0], p.Eval(nil, []float64{math.Inf(1)})[0]; got != 0 || !math.IsNaN(orig) {
		t.Errorf("Case absorb: Inf·0 want NaN before and 0 after Simplify, got %v and %v", orig, got)
	}
}

// TestLorenzVJPSize reports what simplification saves on the Lorenz VJP
// (parameters as inputs, and as constants) and checks that the simplified
// program is smaller and computes the same.
func TestLorenzVJPSize(t *testing.T) {
	t.Parallel()
	lorenzConst := mustTrace(t, "lorenz-const", withNames("t", "y0", "y1", "y2"), func(in []tape.V) []tape.V {
		return lorenzF(append(in, in[0].Const(10), in[0].Const(28), in[0].Const(8.0/3)))
	})
	gen := odeProblems(t)[0].gen
	for _, tc := range []struct {
		name              string
		p                 *tape.Program
		wantRaw, wantSimp int // pinned: a change in either is worth a look
	}{
		{"params", lorenzProgram(t), 30, 27},
		{"const", lorenzConst, 27, 23},
	} {
		p := tc.p
		raw := mustProgram(t, tc.name)(tape.VJPUnsimplified(p, nil))
		simp := mustProgram(t, tc.name)(tape.VJP(p, nil))
		t.Logf("Lorenz (%s): %d values; its VJP: %d values unsimplified (dead code removed), %d simplified",
			tc.name, len(p.Values), len(raw.Values), len(simp.Values))
		if len(simp.Values) >= len(raw.Values) {
			t.Errorf("Case %v: simplified VJP has %d values, unsimplified %d; want fewer", tc.name, len(simp.Values), len(raw.Values))
		}
		if len(raw.Values) != tc.wantRaw || len(simp.Values) != tc.wantSimp {
			t.Errorf("Case %v: VJP has %d values unsimplified and %d simplified, want %d and %d",
				tc.name, len(raw.Values), len(simp.Values), tc.wantRaw, tc.wantSimp)
		}
		if s := mustProgram(t, tc.name)(tape.Simplify(raw)); len(s.Values) != len(simp.Values) {
			t.Errorf("Case %v: Simplify of the raw VJP has %d values, want %d", tc.name, len(s.Values), len(simp.Values))
		}
		rnd := rand.New(rand.NewPCG(1, 1))
		for trial := 0; trial < 10; trial++ {
			x := cat(gen(rnd)[:len(p.Inputs)], randVec(rnd, 3))
			a, b := raw.Eval(nil, x), simp.Eval(nil, x)
			for k := range a {
				if a[k] != b[k] {
					t.Errorf("Case %v x=%v: output %d unsimplified %v, simplified %v", tc.name, x, k, a[k], b[k])
				}
			}
		}
	}
}

func TestDeadCode(t *testing.T) {
	t.Parallel()
	p := mustTrace(t, "dead", withNames("a", "b", "c"), func(in []tape.V) []tape.V {
		in[0].Exp().Sin() // dead
		u := in[1].Mul(in[2])
		in[2].Log() // dead
		return []tape.V{u.Add(in[1]), u}
	})
	q := tape.DeadCode(p)
	want := `program dead: 3 inputs, 5 values, 2 outputs
v0 = Input [0] a
v1 = Input [1] b
v2 = Input [2] c
v3 = Mul v1 v2
v4 = Add v3 v1
out 0 out0 = v4
out 1 out1 = v3
`
	if got := q.String(); got != want {
		t.Errorf("Case dead: DeadCode gave\n%s\nwant\n%s", got, want)
	}
	x := []float64{1, 2, 3}
	if a, b := p.Eval(nil, x), q.Eval(nil, x); a[0] != b[0] || a[1] != b[1] {
		t.Errorf("Case dead: want %v, got %v", a, b)
	}
	if len(p.Values) != 8 {
		t.Errorf("Case dead: DeadCode modified its input: %d values, want 8", len(p.Values))
	}
}

// invalidProgram uses a value before defining it.
func invalidProgram() *tape.Program {
	return &tape.Program{
		Name:   "bad",
		Inputs: []tape.Input{{Name: "x"}},
		Values: []tape.Value{
			{Op: ops.OpInput, Aux: 0},
			{Op: ops.OpAdd, Args: []tape.ID{0, 2}},
			{Op: ops.OpConst, Aux: 1},
		},
		Outputs: []tape.Output{{Name: "y", ID: 1}},
	}
}
