package tape_test

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

// Test problems: right-hand sides of ODEs as traced programs, with inputs
// (t, y…, p…) per trajectory unless stated.

// lorenzF is the Lorenz system with σ, ρ, β the last three inputs.
func lorenzF(in []tape.V) []tape.V {
	y0, y1, y2 := in[1], in[2], in[3]
	sigma, rho, beta := in[4], in[5], in[6]
	return []tape.V{
		sigma.Mul(y1.Sub(y0)),
		y0.Mul(rho.Sub(y2)).Sub(y1),
		y0.Mul(y1).Sub(beta.Mul(y2)),
	}
}

func vdpF(in []tape.V) []tape.V {
	x, v, mu := in[1], in[2], in[3]
	one := x.Const(1)
	return []tape.V{v, mu.Mul(one.Sub(x.Square()).Mul(v).Sub(x))}
}

func robertsonF(in []tape.V) []tape.V {
	y1, y2, y3, k1, k2, k3 := in[1], in[2], in[3], in[4], in[5], in[6]
	a := k1.Mul(y1)
	b := k3.Mul(y2).Mul(y3)
	c := k2.Mul(y2.Square())
	return []tape.V{a.Neg().Add(b), a.Sub(b).Sub(c), c}
}

func names(prefix string, n int) []tape.Input {
	s := make([]tape.Input, n)
	for i := range s {
		s[i] = tape.Input{Name: fmt.Sprintf("%s%d", prefix, i)}
	}
	return s
}

func withNames(ns ...string) []tape.Input {
	s := make([]tape.Input, len(ns))
	for i, n := range ns {
		s[i] = tape.Input{Name: n}
	}
	return s
}

func mustTrace(t testing.TB, name string, in []tape.Input, f func([]tape.V) []tape.V) *tape.Program {
	t.Helper()
	p, err := tape.Trace(name, in, f)
	if err != nil {
		t.Fatalf("Case %v: Trace: %v", name, err)
	}
	return p
}

func lorenzProgram(t testing.TB) *tape.Program {
	return mustTrace(t, "lorenz", withNames("t", "y0", "y1", "y2", "sigma", "rho", "beta"), lorenzF)
}

// problem is a test program with a generator of random inputs at which it
// is smooth.
type problem struct {
	name string
	p    *tape.Program
	gen  func(r *rand.Rand) []float64
	tol  float64 // relative tolerance against finite differences
}

func uniform(r *rand.Rand, lo, hi float64) float64 { return lo + (hi-lo)*r.Float64() }

func odeProblems(t testing.TB) []problem {
	return []problem{
		{"lorenz", lorenzProgram(t), func(r *rand.Rand) []float64 {
			return []float64{uniform(r, 0, 1), uniform(r, -20, 20), uniform(r, -20, 20), uniform(r, 0, 40),
				uniform(r, 5, 15), uniform(r, 20, 30), uniform(r, 2, 3)}
		}, 1e-7},
		{"vdp", mustTrace(t, "vdp", withNames("t", "x", "v", "mu"), vdpF), func(r *rand.Rand) []float64 {
			return []float64{uniform(r, 0, 1), uniform(r, -2, 2), uniform(r, -3, 3), uniform(r, 0.5, 10)}
		}, 1e-7},
		{"robertson", mustTrace(t, "robertson", withNames("t", "y1", "y2", "y3", "k1", "k2", "k3"), robertsonF), func(r *rand.Rand) []float64 {
			return []float64{uniform(r, 0, 1), uniform(r, 0.5, 1), uniform(r, 1e-6, 1e-4), uniform(r, 0, 0.5),
				uniform(r, 0.02, 0.06), uniform(r, 2e7, 4e7), uniform(r, 5e3, 2e4)}
		}, 1e-6},
	}
}

// mlp is a tanh MLP 2→16→16→1 with a softplus output, its weights shared
// inputs. in = x (2, per trajectory) then the weights.
type mlp struct {
	sizes []int
}

func (m mlp) nparams() int {
	n := 0
	for l := 0; l+1 < len(m.sizes); l++ {
		n += m.sizes[l]*m.sizes[l+1] + m.sizes[l+1]
	}
	return n
}

func (m mlp) inputs() []tape.Input {
	in := names("x", m.sizes[0])
	for i := 0; i < m.nparams(); i++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("w%d", i), Shared: true})
	}
	return in
}

func (m mlp) f(in []tape.V) []tape.V {
	h := in[:m.sizes[0]]
	w := in[m.sizes[0]:]
	for l := 0; l+1 < len(m.sizes); l++ {
		a, b := m.sizes[l], m.sizes[l+1]
		W, bias := w[:a*b], w[a*b:a*b+b]
		w = w[a*b+b:]
		h = tape.Dense(W, h, bias)
		if l+2 < len(m.sizes) {
			for i := range h {
				h[i] = h[i].Tanh()
			}
		}
	}
	return []tape.V{h[0].Softplus()}
}

// weights returns random weights scaled by 1/√fan-in.
func (m mlp) weights(r *rand.Rand) []float64 {
	var w []float64
	for l := 0; l+1 < len(m.sizes); l++ {
		a, b := m.sizes[l], m.sizes[l+1]
		s := 1 / math.Sqrt(float64(a))
		for i := 0; i < a*b+b; i++ {
			w = append(w, s*uniform(r, -1.5, 1.5))
		}
	}
	return w
}

var mlp2x16x16x1 = mlp{sizes: []int{2, 16, 16, 1}}

func mlpProgram(t testing.TB) *tape.Program {
	return mustTrace(t, "mlp", mlp2x16x16x1.inputs(), mlp2x16x16x1.f)
}

// within is warp's gradcheck criterion |AD − FD| ≤ atol + rtol·|FD|.
func within(ad, fd, atol, rtol float64) bool {
	return math.Abs(ad-fd) <= atol+rtol*math.Abs(fd)
}

// sameFloat reports whether a and b are equal or both NaN.
func sameFloat(a, b float64) bool { return a == b || a != a && b != b }

func maxAbs(xs ...float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = math.Max(m, math.Abs(x))
	}
	return m
}

func cat(xs ...[]float64) []float64 {
	var s []float64
	for _, x := range xs {
		s = append(s, x...)
	}
	return s
}

func randVec(r *rand.Rand, n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = uniform(r, -1, 1)
	}
	return v
}

// Random programs. genOps are the ops random programs draw from; every
// one is built through the public tracing API.
type genOp struct {
	op    ops.Op
	arity int
	aux   func(r *rand.Rand) float64
	f     func(a []tape.V, aux float64) tape.V
}

var genOps = []genOp{
	{op: ops.OpAdd, arity: 2, f: func(a []tape.V, _ float64) tape.V { return a[0].Add(a[1]) }},
	{op: ops.OpSub, arity: 2, f: func(a []tape.V, _ float64) tape.V { return a[0].Sub(a[1]) }},
	{op: ops.OpMul, arity: 2, f: func(a []tape.V, _ float64) tape.V { return a[0].Mul(a[1]) }},
	{op: ops.OpDiv, arity: 2, f: func(a []tape.V, _ float64) tape.V { return a[0].Div(a[1]) }},
	{op: ops.OpNeg, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Neg() }},
	{op: ops.OpFMA, arity: 3, f: func(a []tape.V, _ float64) tape.V { return tape.FMA(a[0], a[1], a[2]) }},
	{op: ops.OpSquare, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Square() }},
	{op: ops.OpPow, arity: 2, f: func(a []tape.V, _ float64) tape.V { return a[0].Pow(a[1]) }},
	{op: ops.OpPowi, arity: 1, aux: func(r *rand.Rand) float64 { return float64(r.IntN(6) - 2) },
		f: func(a []tape.V, aux float64) tape.V { return a[0].Powi(int(aux)) }},
	{op: ops.OpSqrt, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Sqrt() }},
	{op: ops.OpExp, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Exp() }},
	{op: ops.OpExpm1, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Expm1() }},
	{op: ops.OpLog, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Log() }},
	{op: ops.OpLog1p, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Log1p() }},
	{op: ops.OpSin, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Sin() }},
	{op: ops.OpCos, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Cos() }},
	{op: ops.OpTan, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Tan() }},
	{op: ops.OpTanh, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Tanh() }},
	{op: ops.OpSigmoid, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Sigmoid() }},
	{op: ops.OpSoftplus, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Softplus() }},
	{op: ops.OpRelu, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Relu() }},
	{op: ops.OpAbs, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Abs() }},
	{op: ops.OpSign, arity: 1, f: func(a []tape.V, _ float64) tape.V { return a[0].Sign() }},
	{op: ops.OpMin, arity: 2, f: func(a []tape.V, _ float64) tape.V { return tape.Min(a[0], a[1]) }},
	{op: ops.OpMax, arity: 2, f: func(a []tape.V, _ float64) tape.V { return tape.Max(a[0], a[1]) }},
	{op: ops.OpLt, arity: 2, f: func(a []tape.V, _ float64) tape.V { return tape.Lt(a[0], a[1]) }},
	{op: ops.OpLe, arity: 2, f: func(a []tape.V, _ float64) tape.V { return tape.Le(a[0], a[1]) }},
	{op: ops.OpGt, arity: 2, f: func(a []tape.V, _ float64) tape.V { return tape.Gt(a[0], a[1]) }},
	{op: ops.OpGe, arity: 2, f: func(a []tape.V, _ float64) tape.V { return tape.Ge(a[0], a[1]) }},
	{op: ops.OpEq, arity: 2, f: func(a []tape.V, _ float64) tape.V { return tape.Eq(a[0], a[1]) }},
	{op: ops.OpNe, arity: 2, f: func(a []tape.V, _ float64) tape.V { return tape.Ne(a[0], a[1]) }},
	{op: ops.OpSelect, arity: 3, f: func(a []tape.V, _ float64) tape.V { return tape.Select(a[0], a[1], a[2]) }},
	{op: ops.OpDot, arity: 1, f: func(a []tape.V, _ float64) tape.V { return tape.Dot(nil, nil, a[0]) }},
	{op: ops.OpDot, arity: 3, f: func(a []tape.V, _ float64) tape.V { return tape.Dot(a[:1], a[1:2], a[2]) }},
	{op: ops.OpDot, arity: 5, f: func(a []tape.V, _ float64) tape.V { return tape.Dot(a[:2], a[2:4], a[4]) }},
	{op: ops.OpDot, arity: 7, f: func(a []tape.V, _ float64) tape.V { return tape.Dot(a[:3], a[3:6], a[6]) }},
}

// genConsts are the constants random programs use; 0, 1 and -1 give
// the simplifier work.
var genConsts = []float64{0, 1, -1, 2, 0.5, -3.25}

// randomProgram is a random program with its inputs and the value of
// every output for every trajectory, computed op by op with ops' Eval
// (independently of Program.Eval).
type randomProgram struct {
	p    *tape.Program
	in   [][]float64 // in[k]: n values, or 1 for a shared input
	want [][]float64 // want[k][i]: output k of trajectory i
	n    int
}

// newRandomProgram builds a program of about nval values over nin inputs
// (some shared) with nout outputs, for n trajectories drawn in [-2, 2].
// Every value is finite and at most 1e6 in magnitude for every trajectory:
// an op whose result is not is drawn again.
func newRandomProgram(r *rand.Rand, name string, nin, nval, nout, n int) *randomProgram {
	b := tape.NewBuilder(name, false)
	rp := &randomProgram{n: n}
	var pool []tape.V
	var conc [][]float64 // concrete values of pool[j], one per trajectory
	for k := 0; k < nin; k++ {
		shared := k > 0 && r.IntN(3) == 0
		pool = append(pool, b.Input(fmt.Sprintf("in%d", k), shared))
		vals := make([]float64, n)
		var in []float64
		if shared {
			in = []float64{uniform(r, -2, 2)}
			for i := range vals {
				vals[i] = in[0]
			}
		} else {
			in = make([]float64, n)
			for i := range in {
				in[i] = uniform(r, -2, 2)
			}
			copy(vals, in)
		}
		rp.in = append(rp.in, in)
		conc = append(conc, vals)
	}
	args := make([]float64, 8)
	for tries := 0; len(pool) < nin+nval && tries < 20*nval; tries++ {
		if r.IntN(8) == 0 {
			c := genConsts[r.IntN(len(genConsts))]
			pool = append(pool, b.ConstV(c))
			vals := make([]float64, n)
			for i := range vals {
				vals[i] = c
			}
			conc = append(conc, vals)
			continue
		}
		g := genOps[r.IntN(len(genOps))]
		aux := 0.0
		if g.aux != nil {
			aux = g.aux(r)
		}
		idx := make([]int, g.arity)
		for j := range idx {
			idx[j] = r.IntN(len(pool))
		}
		def := ops.Lookup(g.op)
		vals := make([]float64, n)
		ok := true
		for i := 0; i < n && ok; i++ {
			for j, x := range idx {
				args[j] = conc[x][i]
			}
			v := def.Eval(args[:g.arity], aux)
			vals[i] = v
			ok = math.Abs(v) <= 1e6
		}
		if !ok {
			continue
		}
		a := make([]tape.V, g.arity)
		for j, x := range idx {
			a[j] = pool[x]
		}
		pool = append(pool, g.f(a, aux))
		conc = append(conc, vals)
	}
	outs := make([]tape.V, nout)
	rp.want = make([][]float64, nout)
	for k := range outs {
		j := len(pool) - 1 - r.IntN(min(len(pool), 8))
		if k == 0 {
			j = len(pool) - 1
		}
		outs[k] = pool[j]
		rp.want[k] = conc[j]
	}
	p, err := b.Build(outs...)
	if err != nil {
		panic(err)
	}
	rp.p = p
	return rp
}

// traj returns the inputs of trajectory i.
func (rp *randomProgram) traj(i int) []float64 {
	x := make([]float64, len(rp.in))
	for k, in := range rp.in {
		if rp.p.Inputs[k].Shared {
			x[k] = in[0]
		} else {
			x[k] = in[i]
		}
	}
	return x
}

// fdJac is a Jacobian by central differences (gonum's fd.Central) taken
// with a step scaled to each input, h_k = 6e-6·s_k, s_k = max(|x_k|, 1),
// so inputs of very different magnitudes (Robertson's rate constants)
// are differentiated alike.
type fdJac struct {
	j   *mat.Dense // J[i][k] = ∂f_i/∂x_k
	s   []float64  // input scales
	row []float64  // row[i] = max_k |J[i][k]|·s_k: output i's scale
}

func newFDJac(f func(y, x []float64), m int, x []float64) fdJac {
	n := len(x)
	s := make([]float64, n)
	for k := range s {
		s[k] = math.Max(math.Abs(x[k]), 1)
	}
	xs := make([]float64, n)
	js := mat.NewDense(m, n, nil)
	fd.Jacobian(js, func(y, u []float64) {
		for k := range xs {
			xs[k] = x[k] + s[k]*u[k]
		}
		f(y, xs)
	}, make([]float64, n), &fd.JacobianSettings{Formula: fd.Central})
	row := make([]float64, m)
	j := mat.NewDense(m, n, nil)
	for i := 0; i < m; i++ {
		for k := 0; k < n; k++ {
			row[i] = math.Max(row[i], math.Abs(js.At(i, k)))
			j.Set(i, k, js.At(i, k)/s[k])
		}
	}
	return fdJac{j: j, s: s, row: row}
}

func fdJacOf(p *tape.Program, x []float64) fdJac {
	return newFDJac(func(y, x []float64) { p.Eval(y, x) }, len(p.Outputs), x)
}

// checkEntry reports whether ad matches entry (i, k) with tolerance tol
// relative to the entry and to output i's scale.
func (f fdJac) checkEntry(ad float64, i, k int, tol float64) bool {
	return within(ad, f.j.At(i, k), tol*f.row[i]/f.s[k], tol)
}

// vjp returns Jᵀȳ and its per-entry tolerance scale.
func (f fdJac) vjp(ybar []float64) (g, scale []float64) {
	m, n := f.j.Dims()
	g, scale = make([]float64, n), make([]float64, n)
	for k := 0; k < n; k++ {
		for i := 0; i < m; i++ {
			g[k] += ybar[i] * f.j.At(i, k)
			scale[k] += math.Abs(ybar[i]) * f.row[i] / f.s[k]
		}
	}
	return g, scale
}

// jvp returns J·ẋ and its per-entry tolerance scale.
func (f fdJac) jvp(xdot []float64) (t, scale []float64) {
	m, n := f.j.Dims()
	t, scale = make([]float64, m), make([]float64, m)
	for i := 0; i < m; i++ {
		for k := 0; k < n; k++ {
			t[i] += f.j.At(i, k) * xdot[k]
			scale[i] += math.Abs(xdot[k]) * f.row[i] / f.s[k]
		}
	}
	return t, scale
}
