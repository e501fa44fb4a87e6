package ops_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/diff/fd"
	"gonum.org/v1/gonum/mat"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The derivative rules are checked through package tape: each case is a
// small traced program, differentiated with tape.VJP and tape.JVP and
// evaluated with Program.Eval.

// opCase is one op (or one variant of an op) applied to random inputs
// that keep away from the op's non-differentiable points.
type opCase struct {
	name string
	n    int                          // number of inputs
	gen  func(r *rand.Rand) []float64 // n random inputs
	f    func(x []tape.V) []tape.V    // the traced function
	atol float64                      // 0: 1e-7
	rtol float64                      // 0: 1e-6
	// firstOrder: only the first derivatives are the value's (an
	// attached derivative, OpAttach, whose own derivative is not).
	firstOrder bool
}

// uniform returns a number in [lo, hi).
func uniform(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

// away returns a number in ±[lo, hi).
func away(r *rand.Rand, lo, hi float64) float64 {
	x := uniform(r, lo, hi)
	if r.IntN(2) == 0 {
		return -x
	}
	return x
}

// in returns a generator of n inputs in [lo, hi).
func in(n int, lo, hi float64) func(*rand.Rand) []float64 {
	return func(r *rand.Rand) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = uniform(r, lo, hi)
		}
		return x
	}
}

// apart returns a generator of two inputs in [lo, hi) at least gap apart.
func apart(lo, hi, gap float64) func(*rand.Rand) []float64 {
	return func(r *rand.Rand) []float64 {
		for {
			x, y := uniform(r, lo, hi), uniform(r, lo, hi)
			if math.Abs(x-y) >= gap {
				return []float64{x, y}
			}
		}
	}
}

func unary(name string, lo, hi float64, f func(x tape.V) tape.V) opCase {
	return opCase{name: name, n: 1, gen: in(1, lo, hi), f: func(x []tape.V) []tape.V { return []tape.V{f(x[0])} }}
}

func binary(name string, gen func(*rand.Rand) []float64, f func(x, y tape.V) tape.V) opCase {
	return opCase{name: name, n: 2, gen: gen, f: func(x []tape.V) []tape.V { return []tape.V{f(x[0], x[1])} }}
}

// wellConditioned returns a generator of a random d×d row-major matrix with
// a dominant diagonal followed by nrhs·d right-hand-side values.
func wellConditioned(d, nrhs int) func(*rand.Rand) []float64 {
	return func(r *rand.Rand) []float64 {
		x := make([]float64, d*d+nrhs*d)
		for i := range x {
			x[i] = uniform(r, -1, 1)
		}
		for i := 0; i < d; i++ {
			x[i*d+i] += away(r, float64(d), 2*float64(d))
		}
		return x
	}
}

func opCases() []opCase {
	cs := []opCase{
		binary("Add", in(2, -2, 2), tape.V.Add),
		binary("Sub", in(2, -2, 2), tape.V.Sub),
		binary("Mul", in(2, -2, 2), tape.V.Mul),
		binary("Div", func(r *rand.Rand) []float64 { return []float64{uniform(r, -2, 2), away(r, 0.5, 2)} }, tape.V.Div),
		binary("Div/same", func(r *rand.Rand) []float64 { return []float64{away(r, 0.5, 2), 0} },
			func(x, _ tape.V) tape.V { return x.Div(x) }),
		unary("Neg", -2, 2, tape.V.Neg),
		{name: "FMA", n: 3, gen: in(3, -2, 2), f: func(x []tape.V) []tape.V { return []tape.V{tape.FMA(x[0], x[1], x[2])} }},
		unary("Square", -2, 2, tape.V.Square),
		binary("Pow", func(r *rand.Rand) []float64 { return []float64{uniform(r, 0.5, 2), uniform(r, -2, 2)} }, tape.V.Pow),
		unary("Pow/negative-base-const-exponent", -2, -0.5, func(x tape.V) tape.V { return x.Pow(x.Const(3)) }),
		unary("Pow/const-base", -2, 2, func(x tape.V) tape.V { return x.Const(1.5).Pow(x) }),
		// A traced exponent of exactly 0 (a zero-order rate): ∂/∂x is 0
		// and ∂²/∂x∂y is 1/x, which the guard of Pow's rule at x = y = 0
		// must leave alone.
		binary("Pow/zero-exponent", func(r *rand.Rand) []float64 { return []float64{uniform(r, 0.5, 2), 0} }, tape.V.Pow),
		unary("Sqrt", 0.1, 3, tape.V.Sqrt),
		unary("Exp", -2, 2, tape.V.Exp),
		unary("Expm1", -2, 2, tape.V.Expm1),
		unary("Log", 0.1, 3, tape.V.Log),
		unary("Log1p", -0.5, 3, tape.V.Log1p),
		unary("Sin", -4, 4, tape.V.Sin),
		unary("Cos", -4, 4, tape.V.Cos),
		unary("Tan", -1.2, 1.2, tape.V.Tan),
		unary("Tanh", -3, 3, tape.V.Tanh),
		unary("Sigmoid", -5, 5, tape.V.Sigmoid),
		unary("Softplus", -5, 5, tape.V.Softplus),
		{name: "Relu", n: 1, gen: func(r *rand.Rand) []float64 { return []float64{away(r, 0.1, 2)} },
			f: func(x []tape.V) []tape.V { return []tape.V{x[0].Relu()} }},
		{name: "Abs", n: 1, gen: func(r *rand.Rand) []float64 { return []float64{away(r, 0.1, 2)} },
			f: func(x []tape.V) []tape.V { return []tape.V{x[0].Abs()} }},
		{name: "Sign", n: 1, gen: func(r *rand.Rand) []float64 { return []float64{away(r, 0.1, 2)} },
			f: func(x []tape.V) []tape.V { return []tape.V{x[0].Sign()} }},
		binary("Min", apart(-2, 2, 0.1), tape.Min),
		binary("Max", apart(-2, 2, 0.1), tape.Max),
		binary("Lt", apart(-2, 2, 0.1), tape.Lt),
		binary("Le", apart(-2, 2, 0.1), tape.Le),
		binary("Gt", apart(-2, 2, 0.1), tape.Gt),
		binary("Ge", apart(-2, 2, 0.1), tape.Ge),
		binary("Eq", apart(-2, 2, 0.1), tape.Eq),
		binary("Ne", apart(-2, 2, 0.1), tape.Ne),
	}
	// Select: the condition comes from a comparison of the first input with
	// 0, so a finite difference of it does not flip the branch.
	for _, branch := range []struct {
		name   string
		lo, hi float64
	}{{"true", 0.5, 2}, {"false", -2, -0.5}} {
		lo, hi := branch.lo, branch.hi
		cs = append(cs, opCase{name: "Select/" + branch.name, n: 3,
			gen: func(r *rand.Rand) []float64 {
				return []float64{uniform(r, lo, hi), uniform(r, -2, 2), uniform(r, -2, 2)}
			},
			f: func(x []tape.V) []tape.V {
				return []tape.V{tape.Select(tape.Gt(x[0], x[0].Const(0)), x[1].Sin(), x[2].Mul(x[0]))}
			}})
	}
	for _, n := range []int{-3, -1, 0, 1, 2, 3, 7} {
		cs = append(cs, unary(fmt.Sprintf("Powi/n=%d", n), 0.5, 1.5, func(x tape.V) tape.V { return x.Powi(n) }))
		cs = append(cs, unary(fmt.Sprintf("Powi/negative-base/n=%d", n), -1.5, -0.5, func(x tape.V) tape.V { return x.Powi(n) }))
	}
	for _, k := range []int{0, 1, 2, 5} {
		cs = append(cs, opCase{name: fmt.Sprintf("Dot/k=%d", k), n: 2*k + 1, gen: in(2*k+1, -2, 2),
			f: func(x []tape.V) []tape.V { return []tape.V{tape.Dot(x[:k], x[k:2*k], x[2*k])} }})
	}
	for _, d := range []int{1, 2, 3, 5, 8} {
		cs = append(cs,
			opCase{name: fmt.Sprintf("Solve/d=%d", d), n: d*d + d, gen: wellConditioned(d, 1),
				f: func(x []tape.V) []tape.V { return tape.Solve(x[:d*d], x[d*d:]) }},
			opCase{name: fmt.Sprintf("SolveT/d=%d", d), n: d*d + d, gen: wellConditioned(d, 1),
				f: func(x []tape.V) []tape.V { return tape.Factor(x[:d*d], d).SolveT(x[d*d:]) }},
			// One factorisation used by two solves, as a Rosenbrock step does.
			opCase{name: fmt.Sprintf("Factor-Solve-SolveT/d=%d", d), n: d*d + 2*d, gen: wellConditioned(d, 2),
				f: func(x []tape.V) []tape.V {
					lu := tape.Factor(x[:d*d], d)
					a := lu.Solve(x[d*d : d*d+d])
					b := lu.SolveT(x[d*d+d:])
					out := make([]tape.V, d)
					for i := range out {
						out[i] = a[i].Mul(b[i])
					}
					return out
				}},
			// A factor whose solves treat W = I + s·M as a constant, with
			// W's derivative attached as a Rosenbrock step does:
			// dx = −W⁻¹(ds·M + s·dM)·x, from the solve of
			// corr = −s·(M·NoGrad(x)).
			opCase{name: fmt.Sprintf("FactorShift-Attach/d=%d", d), n: d*d + d + 1, firstOrder: true,
				gen: func(r *rand.Rand) []float64 { return append(wellConditioned(d, 1)(r), uniform(r, 0.2, 1)) },
				f: func(x []tape.V) []tape.V {
					m, rhs, sc := x[:d*d], x[d*d:d*d+d], x[d*d+d]
					lu := tape.FactorShift(m, sc, sc.Const(1), d)
					x0 := lu.Solve(rhs)
					sg := make([]tape.V, d)
					for i := range sg {
						sg[i] = tape.NoGrad(x0[i])
					}
					corr := make([]tape.V, d)
					for i := range corr {
						corr[i] = sc.Mul(tape.Dot(m[i*d:(i+1)*d], sg, sc.Const(0))).Neg()
					}
					dx := lu.Solve(corr)
					out := make([]tape.V, d)
					for i := range out {
						out[i] = tape.Attach(x0[i], dx[i])
					}
					return out
				}},
		)
	}
	// Call: a callee of two inputs and two outputs, called twice, once on
	// the outputs of the first call; and a call inside a callee.
	callee, err := tape.Trace("callee", inputs(2), func(x []tape.V) []tape.V {
		return []tape.V{x[0].Mul(x[1]).Sin(), x[0].Exp().Add(x[1].Square())}
	})
	if err != nil {
		panic(err)
	}
	outer, err := tape.Trace("outer", inputs(2), func(x []tape.V) []tape.V {
		y := tape.CallFunc(callee, []tape.V{x[1], x[0]})
		return []tape.V{y[0].Tanh(), y[1].Mul(x[0])}
	})
	if err != nil {
		panic(err)
	}
	cs = append(cs,
		opCase{name: "Call", n: 2, gen: in(2, -1, 1), f: func(x []tape.V) []tape.V {
			y := tape.CallFunc(callee, x)
			z := tape.CallFunc(callee, []tape.V{y[1], x[0]})
			return []tape.V{y[0], z[0].Mul(z[1])}
		}},
		opCase{name: "Call/nested", n: 2, gen: in(2, -1, 1), f: func(x []tape.V) []tape.V {
			y := tape.CallFunc(outer, x)
			return []tape.V{y[0].Add(y[1]), tape.CallFunc(callee, []tape.V{y[1], x[1]})[1]}
		}},
	)
	return cs
}

func inputs(n int) []tape.Input {
	s := make([]tape.Input, n)
	for i := range s {
		s[i] = tape.Input{Name: fmt.Sprintf("x%d", i)}
	}
	return s
}

func (tc opCase) trace(t *testing.T) *tape.Program {
	t.Helper()
	p, err := tape.Trace(tc.name, inputs(tc.n), tc.f)
	if err != nil {
		t.Fatalf("Case %v: Trace: %v", tc.name, err)
	}
	return p
}

func (tc opCase) tol() (atol, rtol float64) {
	atol, rtol = tc.atol, tc.rtol
	if atol == 0 {
		atol = 1e-7
	}
	if rtol == 0 {
		rtol = 1e-6
	}
	return atol, rtol
}

// within is warp's gradcheck criterion |AD − FD| ≤ atol + rtol·|FD|.
func within(ad, fd, atol, rtol float64) bool {
	return math.Abs(ad-fd) <= atol+rtol*math.Abs(fd)
}

// fdJacobian returns the central-difference Jacobian of p's outputs with
// respect to all its inputs at x.
func fdJacobian(p *tape.Program, x []float64) *mat.Dense {
	j := mat.NewDense(len(p.Outputs), len(x), nil)
	fd.Jacobian(j, func(y, x []float64) { p.Eval(y, x) }, x, &fd.JacobianSettings{Formula: fd.Central})
	return j
}

func randVec(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = uniform(r, -1, 1)
	}
	return v
}

func dot(a, b []float64) (s, abs float64) {
	for i := range a {
		s += a[i] * b[i]
		abs += math.Abs(a[i] * b[i])
	}
	return s, abs
}

func cat(xs ...[]float64) []float64 {
	var s []float64
	for _, x := range xs {
		s = append(s, x...)
	}
	return s
}

// TestOpDerivatives is the sweep over every op: VJP and JVP against central
// differences, and against each other (⟨ȳ, J·ẋ⟩ = ⟨Jᵀȳ, ẋ⟩).
func TestOpDerivatives(t *testing.T) {
	t.Parallel()
	cases := opCases()

	// The cases must use every op of the set.
	used := make(map[ops.Op]bool)
	for _, tc := range cases {
		p, err := tape.Trace(tc.name, inputs(tc.n), tc.f)
		if err != nil {
			t.Fatalf("Case %v: Trace: %v", tc.name, err)
		}
		for _, v := range p.Values {
			used[v.Op] = true
		}
	}
	for op := ops.Op(1); int(op) < ops.NumOps; op++ {
		if !used[op] {
			t.Errorf("Case %v: no derivative test uses the op", op)
		}
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.trace(t)
			vjp, err := tape.VJP(p, nil)
			if err != nil {
				t.Fatalf("Case %v: VJP: %v", tc.name, err)
			}
			jvp, err := tape.JVP(p, nil)
			if err != nil {
				t.Fatalf("Case %v: JVP: %v", tc.name, err)
			}
			m := len(p.Outputs)
			if len(vjp.Inputs) != tc.n+m || len(vjp.Outputs) != tc.n {
				t.Fatalf("Case %v: VJP program has %d inputs and %d outputs, want %d and %d",
					tc.name, len(vjp.Inputs), len(vjp.Outputs), tc.n+m, tc.n)
			}
			if len(jvp.Inputs) != 2*tc.n || len(jvp.Outputs) != 2*m {
				t.Fatalf("Case %v: JVP program has %d inputs and %d outputs, want %d and %d",
					tc.name, len(jvp.Inputs), len(jvp.Outputs), 2*tc.n, 2*m)
			}
			atol, rtol := tc.tol()
			rnd := rand.New(rand.NewPCG(1, 1))
			for trial := 0; trial < 5; trial++ {
				x := tc.gen(rnd)
				x0 := append([]float64(nil), x...)
				y := p.Eval(nil, x)
				j := fdJacobian(p, x)
				ybar, xdot := randVec(rnd, m), randVec(rnd, tc.n)

				// Reverse mode: Jᵀȳ.
				g := vjp.Eval(nil, cat(x, ybar))
				for k := 0; k < tc.n; k++ {
					want := 0.0
					for i := 0; i < m; i++ {
						want += ybar[i] * j.At(i, k)
					}
					if !within(g[k], want, atol, rtol) {
						t.Errorf("Case %v x=%v: (Jᵀȳ)[%d] want %v (FD), got %v", tc.name, x, k, want, g[k])
					}
				}

				// Forward mode: the primal outputs unchanged, and J·ẋ.
				out := jvp.Eval(nil, cat(x, xdot))
				for i := 0; i < m; i++ {
					if out[i] != y[i] {
						t.Errorf("Case %v x=%v: JVP primal output %d want %v, got %v", tc.name, x, i, y[i], out[i])
					}
					want := 0.0
					for k := 0; k < tc.n; k++ {
						want += j.At(i, k) * xdot[k]
					}
					if !within(out[m+i], want, atol, rtol) {
						t.Errorf("Case %v x=%v: (J·ẋ)[%d] want %v (FD), got %v", tc.name, x, i, want, out[m+i])
					}
				}

				// ⟨ȳ, J·ẋ⟩ = ⟨Jᵀȳ, ẋ⟩.
				fwd, fa := dot(ybar, out[m:])
				rev, ra := dot(g, xdot)
				if math.Abs(fwd-rev) > 1e-13*(fa+ra)+1e-300 {
					t.Errorf("Case %v x=%v: ⟨ȳ, J·ẋ⟩ = %v, ⟨Jᵀȳ, ẋ⟩ = %v; want them equal", tc.name, x, fwd, rev)
				}
				for i := range x {
					if x[i] != x0[i] {
						t.Fatalf("Case %v: input %d modified: want %v, got %v", tc.name, i, x0[i], x[i])
					}
				}
			}
		})
	}
}

// TestOpSecondDerivatives differentiates each op's JVP program in reverse
// mode, ∂/∂x ⟨ȳ, J(x)·ẋ⟩, and checks it against central differences of the
// JVP program: the derivative rules are themselves differentiable.
func TestOpSecondDerivatives(t *testing.T) {
	t.Parallel()
	for _, tc := range opCases() {
		if tc.firstOrder {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.trace(t)
			n, m := tc.n, len(p.Outputs)
			jvp, err := tape.JVP(p, nil)
			if err != nil {
				t.Fatalf("Case %v: JVP: %v", tc.name, err)
			}
			wrt := make([]int, n)
			for k := range wrt {
				wrt[k] = k
			}
			hvp, err := tape.VJP(jvp, wrt)
			if err != nil {
				t.Fatalf("Case %v: VJP of JVP: %v", tc.name, err)
			}
			atol, rtol := tc.tol()
			atol, rtol = 10*atol, 10*rtol
			rnd := rand.New(rand.NewPCG(1, 1))
			for trial := 0; trial < 3; trial++ {
				x := tc.gen(rnd)
				ybar, xdot := randVec(rnd, m), randVec(rnd, n)
				// Cotangents: 0 for the primal outputs, ȳ for the tangents.
				got := hvp.Eval(nil, cat(x, xdot, make([]float64, m), ybar))
				out := make([]float64, 2*m)
				want := fd.Gradient(nil, func(x []float64) float64 {
					jvp.Eval(out, cat(x, xdot))
					s, _ := dot(ybar, out[m:])
					return s
				}, x, &fd.Settings{Formula: fd.Central})
				for k := range want {
					if !within(got[k], want[k], atol, rtol) {
						t.Errorf("Case %v x=%v: ∂⟨ȳ, J·ẋ⟩/∂x[%d] want %v (FD), got %v", tc.name, x, k, want[k], got[k])
					}
				}
			}
		})
	}
}

// TestConventions checks the documented derivatives at points where the
// op is not differentiable.
func TestConventions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		f     func(x []tape.V) tape.V
		x     []float64
		wantG []float64 // gradient (VJP with ȳ = 1)
	}{
		{"relu'(0)=0", func(x []tape.V) tape.V { return x[0].Relu() }, []float64{0}, []float64{0}},
		{"relu'(-0)=0", func(x []tape.V) tape.V { return x[0].Relu() }, []float64{math.Copysign(0, -1)}, []float64{0}},
		{"abs'(0)=0", func(x []tape.V) tape.V { return x[0].Abs() }, []float64{0}, []float64{0}},
		{"sign'=0", func(x []tape.V) tape.V { return x[0].Sign() }, []float64{0}, []float64{0}},
		{"sign'(2)=0", func(x []tape.V) tape.V { return x[0].Sign() }, []float64{2}, []float64{0}},
		{"min tie to first", func(x []tape.V) tape.V { return tape.Min(x[0], x[1]) }, []float64{1, 1}, []float64{1, 0}},
		{"max tie to first", func(x []tape.V) tape.V { return tape.Max(x[0], x[1]) }, []float64{1, 1}, []float64{1, 0}},
		{"min(x, x)", func(x []tape.V) tape.V { return tape.Min(x[0], x[0]) }, []float64{3}, []float64{1}},
		{"comparison at a tie", func(x []tape.V) tape.V { return tape.Le(x[0], x[1]) }, []float64{1, 1}, []float64{0, 0}},
		{"select condition", func(x []tape.V) tape.V { return tape.Select(x[0], x[1], x[2]) }, []float64{0, 2, 3}, []float64{0, 0, 1}},
		{"sqrt'(0)=+Inf", func(x []tape.V) tape.V { return x[0].Sqrt() }, []float64{0}, []float64{math.Inf(1)}},
		{"pow at x=y=0", func(x []tape.V) tape.V { return x[0].Pow(x[1]) }, []float64{0, 0}, []float64{0, 0}},
		{"pow at x=0, y=1", func(x []tape.V) tape.V { return x[0].Pow(x[1]) }, []float64{0, 1}, []float64{1, 0}},
	} {
		n := len(tc.x)
		p, err := tape.Trace(tc.name, inputs(n), func(x []tape.V) []tape.V { return []tape.V{tc.f(x)} })
		if err != nil {
			t.Fatalf("Case %v: Trace: %v", tc.name, err)
		}
		g, err := tape.Grad(p, nil)
		if err != nil {
			t.Fatalf("Case %v: Grad: %v", tc.name, err)
		}
		got := g.Eval(nil, tc.x)[1:]
		jac, err := tape.Jacobian(p, nil)
		if err != nil {
			t.Fatalf("Case %v: Jacobian: %v", tc.name, err)
		}
		row := jac.Eval(nil, tc.x)[1:]
		for k := range tc.wantG {
			if got[k] != tc.wantG[k] {
				t.Errorf("Case %v: reverse-mode ∂/∂x[%d] want %v, got %v", tc.name, k, tc.wantG[k], got[k])
			}
			if row[k] != tc.wantG[k] {
				t.Errorf("Case %v: forward-mode ∂/∂x[%d] want %v, got %v", tc.name, k, tc.wantG[k], row[k])
			}
		}
	}
}

// TestPowZeroBase checks the second derivatives of x^y at a base of
// exactly 0 with the exponents whose first derivatives there are finite
// (y = 0, 1, 2: a state that starts at 0 in a rate of a traced order):
// a Rosenbrock step's gradient differentiates the Jacobian's y·x^(y−1),
// and 0·x^(−1) there was 0·Inf = NaN.
func TestPowZeroBase(t *testing.T) {
	t.Parallel()
	p, err := tape.Trace("pow", inputs(2), func(x []tape.V) []tape.V { return []tape.V{x[0].Pow(x[1])} })
	if err != nil {
		t.Fatal(err)
	}
	jvp, err := tape.JVP(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	hvp, err := tape.VJP(jvp, []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		x, y float64
		dxx  float64 // ∂²x^y/∂x²
	}{{0, 0, 0}, {0, 1, 0}, {0, 2, 2}} {
		// ⟨ȳ, J·ẋ⟩ with ẋ = (1, 0), ȳ = 1: its gradient is the Hessian's
		// first column.
		got := hvp.Eval(nil, []float64{tc.x, tc.y, 1, 0, 0, 1})
		if got[0] != tc.dxx || math.IsNaN(got[1]) || math.IsInf(got[1], 0) {
			t.Errorf("x^y at (%v, %v): ∂²/∂x² = %v (want %v), ∂²/∂x∂y = %v (want finite)", tc.x, tc.y, got[0], tc.dxx, got[1])
		}
	}
}

// TestDerivativeFormulas checks the derivative rules of the scalar ops
// against their closed forms, to rounding: sharper than finite
// differences, and a check that each rule is the formula it claims.
func TestDerivativeFormulas(t *testing.T) {
	t.Parallel()
	sech2 := func(x float64) float64 { c := math.Cosh(x); return 1 / (c * c) }
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	for _, tc := range []struct {
		name string
		f    func(x []tape.V) tape.V
		grad func(x []float64) []float64
		x    []float64
	}{
		{"Add", func(x []tape.V) tape.V { return x[0].Add(x[1]) }, func(x []float64) []float64 { return []float64{1, 1} }, []float64{0.3, -1.2}},
		{"Sub", func(x []tape.V) tape.V { return x[0].Sub(x[1]) }, func(x []float64) []float64 { return []float64{1, -1} }, []float64{0.3, -1.2}},
		{"Mul", func(x []tape.V) tape.V { return x[0].Mul(x[1]) }, func(x []float64) []float64 { return []float64{x[1], x[0]} }, []float64{0.3, -1.2}},
		{"Div", func(x []tape.V) tape.V { return x[0].Div(x[1]) }, func(x []float64) []float64 { return []float64{1 / x[1], -x[0] / (x[1] * x[1])} }, []float64{0.3, -1.2}},
		{"FMA", func(x []tape.V) tape.V { return tape.FMA(x[0], x[1], x[2]) }, func(x []float64) []float64 { return []float64{x[1], x[0], 1} }, []float64{0.3, -1.2, 2}},
		{"Pow", func(x []tape.V) tape.V { return x[0].Pow(x[1]) }, func(x []float64) []float64 {
			return []float64{x[1] * math.Pow(x[0], x[1]-1), math.Pow(x[0], x[1]) * math.Log(x[0])}
		}, []float64{1.7, -0.4}},
		{"Powi", func(x []tape.V) tape.V { return x[0].Powi(-3) }, func(x []float64) []float64 { return []float64{-3 / math.Pow(x[0], 4)} }, []float64{1.3}},
		{"Sqrt", func(x []tape.V) tape.V { return x[0].Sqrt() }, func(x []float64) []float64 { return []float64{0.5 / math.Sqrt(x[0])} }, []float64{2.5}},
		{"Exp", func(x []tape.V) tape.V { return x[0].Exp() }, func(x []float64) []float64 { return []float64{math.Exp(x[0])} }, []float64{0.7}},
		{"Expm1", func(x []tape.V) tape.V { return x[0].Expm1() }, func(x []float64) []float64 { return []float64{math.Exp(x[0])} }, []float64{0.7}},
		{"Log", func(x []tape.V) tape.V { return x[0].Log() }, func(x []float64) []float64 { return []float64{1 / x[0]} }, []float64{0.7}},
		{"Log1p", func(x []tape.V) tape.V { return x[0].Log1p() }, func(x []float64) []float64 { return []float64{1 / (1 + x[0])} }, []float64{0.7}},
		{"Sin", func(x []tape.V) tape.V { return x[0].Sin() }, func(x []float64) []float64 { return []float64{math.Cos(x[0])} }, []float64{0.7}},
		{"Cos", func(x []tape.V) tape.V { return x[0].Cos() }, func(x []float64) []float64 { return []float64{-math.Sin(x[0])} }, []float64{0.7}},
		{"Tan", func(x []tape.V) tape.V { return x[0].Tan() }, func(x []float64) []float64 { c := math.Cos(x[0]); return []float64{1 / (c * c)} }, []float64{0.7}},
		{"Tanh", func(x []tape.V) tape.V { return x[0].Tanh() }, func(x []float64) []float64 { return []float64{sech2(x[0])} }, []float64{0.7}},
		{"Sigmoid", func(x []tape.V) tape.V { return x[0].Sigmoid() }, func(x []float64) []float64 { s := sig(x[0]); return []float64{s * (1 - s)} }, []float64{0.7}},
		{"Softplus", func(x []tape.V) tape.V { return x[0].Softplus() }, func(x []float64) []float64 { return []float64{sig(x[0])} }, []float64{-0.7}},
		{"Relu", func(x []tape.V) tape.V { return x[0].Relu() }, func(x []float64) []float64 { return []float64{1} }, []float64{0.7}},
		{"Abs", func(x []tape.V) tape.V { return x[0].Abs() }, func(x []float64) []float64 { return []float64{-1} }, []float64{-0.7}},
		{"Min", func(x []tape.V) tape.V { return tape.Min(x[0], x[1]) }, func(x []float64) []float64 { return []float64{0, 1} }, []float64{0.3, -1.2}},
		{"Max", func(x []tape.V) tape.V { return tape.Max(x[0], x[1]) }, func(x []float64) []float64 { return []float64{1, 0} }, []float64{0.3, -1.2}},
		{"Dot", func(x []tape.V) tape.V { return tape.Dot(x[:2], x[2:4], x[4]) }, func(x []float64) []float64 {
			return []float64{x[2], x[3], x[0], x[1], 1}
		}, []float64{0.3, -1.2, 2, 0.5, 7}},
	} {
		n := len(tc.x)
		p, err := tape.Trace(tc.name, inputs(n), func(x []tape.V) []tape.V { return []tape.V{tc.f(x)} })
		if err != nil {
			t.Fatalf("Case %v: %v", tc.name, err)
		}
		vjp, err := tape.VJP(p, nil)
		if err != nil {
			t.Fatalf("Case %v: %v", tc.name, err)
		}
		jvp, err := tape.JVP(p, nil)
		if err != nil {
			t.Fatalf("Case %v: %v", tc.name, err)
		}
		want := tc.grad(tc.x)
		const ybar = -1.5
		g := vjp.Eval(nil, append(append([]float64(nil), tc.x...), ybar))
		xdot := []float64{0.25, -2, 1, 0.5, -1}[:n]
		tan := jvp.Eval(nil, append(append([]float64(nil), tc.x...), xdot...))[1]
		wantTan := 0.0
		for k := range want {
			if !within(g[k], ybar*want[k], 0, 1e-14) {
				t.Errorf("Case %v: ∂/∂x[%d]·ȳ want %v, got %v", tc.name, k, ybar*want[k], g[k])
			}
			wantTan += want[k] * xdot[k]
		}
		if !within(tan, wantTan, 1e-15, 1e-14) {
			t.Errorf("Case %v: J·ẋ want %v, got %v", tc.name, wantTan, tan)
		}
	}
}
