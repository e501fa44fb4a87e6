package kerneltest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Test programs with their inputs and tolerances.

// OpClass says how an op's generated code is checked against its Eval.
type OpClass uint8

const (
	ExactOp OpClass = iota + 1 // IEEE-exact: bit for bit
	LibmOp                     // a libm function: within a few ulps
	LeafOp                     // Input, Const: no arithmetic
)

// OpClasses classifies every op. A new op must be added here, and to
// genExact or libmDomain, or TestOpCoverage fails.
var OpClasses = map[ops.Op]OpClass{
	ops.OpInput: LeafOp, ops.OpConst: LeafOp,
	ops.OpAdd: ExactOp, ops.OpSub: ExactOp, ops.OpMul: ExactOp, ops.OpDiv: ExactOp,
	ops.OpNeg: ExactOp, ops.OpFMA: ExactOp, ops.OpSquare: ExactOp, ops.OpPowi: ExactOp,
	ops.OpSqrt: ExactOp, ops.OpRelu: ExactOp, ops.OpAbs: ExactOp, ops.OpSign: ExactOp,
	ops.OpMin: ExactOp, ops.OpMax: ExactOp,
	ops.OpLt: ExactOp, ops.OpLe: ExactOp, ops.OpGt: ExactOp, ops.OpGe: ExactOp, ops.OpEq: ExactOp, ops.OpNe: ExactOp,
	ops.OpSelect: ExactOp, ops.OpDot: ExactOp,
	ops.OpLUFactor: ExactOp, ops.OpLUSolve: ExactOp, ops.OpLUSolveT: ExactOp, ops.OpExtract: ExactOp,
	ops.OpCall: ExactOp, ops.OpNoGrad: ExactOp, ops.OpAttach: ExactOp, ops.OpLUFactorShift: ExactOp,

	ops.OpPow: LibmOp, ops.OpExp: LibmOp, ops.OpExpm1: LibmOp, ops.OpLog: LibmOp, ops.OpLog1p: LibmOp,
	ops.OpSin: LibmOp, ops.OpCos: LibmOp, ops.OpTan: LibmOp, ops.OpTanh: LibmOp,
	ops.OpSigmoid: LibmOp, ops.OpSoftplus: LibmOp,
}

// libmDomain is the input range each libm op is tested on (besides the
// special values 0, -0, ±Inf, NaN).
var libmDomain = map[ops.Op][2]float64{
	ops.OpPow:      {0.01, 10},
	ops.OpExp:      {-700, 700},
	ops.OpExpm1:    {-5, 5},
	ops.OpLog:      {1e-300, 1e300},
	ops.OpLog1p:    {-0.999, 100},
	ops.OpSin:      {-100, 100},
	ops.OpCos:      {-100, 100},
	ops.OpTan:      {-1.5, 1.5},
	ops.OpTanh:     {-20, 20},
	ops.OpSigmoid:  {-40, 40},
	ops.OpSoftplus: {-40, 40},
}

// Program is a program, its inputs for n trajectories and how to
// compare its results.
type Program struct {
	P     *tape.Program
	In    [][]float64 // non-shared inputs, [k][i]
	Sh    []float64   // shared inputs
	Tol   Tolerance
	Float bool // well conditioned: also checked in float32
}

// Tolerance says how results compare: ULPs > 0 compares finite results
// within that many ulps, Rel > 0 within that relative error (of
// max(|want|, 1)); zero both: bit for bit. Non-finite results must match
// in class (NaN, ±Inf).
type Tolerance struct {
	ULPs int64
	Rel  float64
}

// N returns the number of trajectories.
func (tp *Program) N() int {
	if len(tp.In) == 0 {
		return 1
	}
	return len(tp.In[0])
}

// Eval returns P.Eval for every trajectory, outputs [m][i].
func (tp *Program) Eval() [][]float64 {
	n := tp.N()
	out := make([][]float64, len(tp.P.Outputs))
	for m := range out {
		out[m] = make([]float64, n)
	}
	in := make([]float64, len(tp.P.Inputs))
	res := make([]float64, len(tp.P.Outputs))
	for i := 0; i < n; i++ {
		k, j := 0, 0
		for q, inp := range tp.P.Inputs {
			if inp.Shared {
				in[q] = tp.Sh[j]
				j++
			} else {
				in[q] = tp.In[k][i]
				k++
			}
		}
		tp.P.Eval(res, in)
		for m := range out {
			out[m][i] = res[m]
		}
	}
	return out
}

// ulpDiff returns the distance of a and b in units in the last place.
func ulpDiff(a, b float64) int64 {
	ord := func(x float64) int64 {
		u := int64(math.Float64bits(x))
		if u < 0 {
			u = math.MinInt64 - u
		}
		return u
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}

// Check compares got with want under tol and returns a description of
// the first mismatch, or "".
func (tol Tolerance) Check(got, want float64) string {
	switch {
	case math.IsNaN(want) || math.IsNaN(got):
		if math.IsNaN(want) != math.IsNaN(got) {
			return fmt.Sprintf("got %v, want %v", got, want)
		}
		return ""
	case math.IsInf(want, 0) || math.IsInf(got, 0):
		if got != want {
			return fmt.Sprintf("got %v, want %v", got, want)
		}
		return ""
	}
	switch {
	case tol.ULPs > 0:
		if d := ulpDiff(got, want); d > tol.ULPs {
			return fmt.Sprintf("got %v, want %v (%d ulps)", got, want, d)
		}
	case tol.Rel > 0:
		if e := math.Abs(got-want) / math.Max(math.Abs(want), 1); e > tol.Rel {
			return fmt.Sprintf("got %v, want %v (relative error %.3g)", got, want, e)
		}
	default:
		if math.Float64bits(got) != math.Float64bits(want) {
			return fmt.Sprintf("got %v (%#x), want %v (%#x)", got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
	return ""
}

// Compare checks got ([m][i]) against tp.Eval and reports mismatches,
// at most a few per program.
func (tp *Program) Compare(t *testing.T, what string, got [][]float64, tol Tolerance) {
	t.Helper()
	want := tp.Eval()
	bad := 0
	for m := range want {
		for i := range want[m] {
			if msg := tol.Check(got[m][i], want[m][i]); msg != "" {
				if bad < 3 {
					t.Errorf("%s: program %s: output %d, trajectory %d: %s\ninputs %v", what, tp.P.Name, m, i, msg, tp.inputsOf(i))
				}
				bad++
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: program %s: %d mismatches in all", what, tp.P.Name, bad)
	}
}

// inputsOf returns trajectory i's inputs, for messages.
func (tp *Program) inputsOf(i int) []float64 {
	var x []float64
	for _, col := range tp.In {
		x = append(x, col[i])
	}
	return append(x, tp.Sh...)
}

// Builder appends values to a program directly (no simplification,
// any op), for generated test programs.
type Builder struct{ P *tape.Program }

// NewProg starts a program called name of nin per-trajectory and nshared
// shared inputs and returns it with the inputs' values.
func NewProg(name string, nin, nshared int) (*Builder, []tape.ID) {
	b := &Builder{P: &tape.Program{Name: name}}
	ids := make([]tape.ID, nin+nshared)
	for k := range ids {
		b.P.Inputs = append(b.P.Inputs, tape.Input{Name: fmt.Sprintf("x%d", k), Shared: k >= nin})
		ids[k] = b.Add(ops.OpInput, float64(k))
	}
	return b, ids
}

// Add appends a value of op with aux and args and returns its ID.
func (b *Builder) Add(op ops.Op, aux float64, args ...tape.ID) tape.ID {
	b.P.Values = append(b.P.Values, tape.Value{Op: op, Aux: aux, Args: args})
	return tape.ID(len(b.P.Values) - 1)
}

// Finish sets the program's outputs and returns it, failing t if it is
// not valid.
func (b *Builder) Finish(t testing.TB, outs ...tape.ID) *tape.Program {
	for m, id := range outs {
		b.P.Outputs = append(b.P.Outputs, tape.Output{Name: fmt.Sprintf("out%d", m), ID: id})
	}
	if err := b.P.Validate(); err != nil {
		t.Fatalf("test program %s: %v", b.P.Name, err)
	}
	return b.P
}

// specials are inputs mixed into random ones: signed zeros, infinities,
// NaN, ties.
var specials = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 2, math.Inf(1), math.Inf(-1), math.NaN()}

// randInput returns a random input: mostly N(0, 2²), sometimes a special
// value.
func randInput(r *rand.Rand) float64 {
	if r.IntN(8) == 0 {
		return specials[r.IntN(len(specials))]
	}
	return 2 * r.NormFloat64()
}

// genExact returns a random program of IEEE-exact ops over nin
// per-trajectory and 2 shared inputs: every exact op appears in some
// program of a few dozen.
func genExact(t testing.TB, r *rand.Rand, name string, nin, nvals int) *tape.Program {
	b, pool := NewProg(name, nin, 2)
	for _, c := range []float64{0, math.Copysign(0, -1), 1, 0.5, -3} {
		pool = append(pool, b.Add(ops.OpConst, c))
	}
	pick := func() tape.ID { return pool[r.IntN(len(pool))] }
	// Prefer recent values, so the program is deep rather than wide.
	recent := func() tape.ID {
		if r.IntN(2) == 0 {
			return pool[len(pool)-1-r.IntN(min(4, len(pool)))]
		}
		return pick()
	}
	scalar := []ops.Op{ops.OpAdd, ops.OpSub, ops.OpMul, ops.OpDiv, ops.OpNeg, ops.OpFMA, ops.OpSquare,
		ops.OpPowi, ops.OpSqrt, ops.OpRelu, ops.OpAbs, ops.OpSign, ops.OpMin, ops.OpMax,
		ops.OpLt, ops.OpLe, ops.OpGt, ops.OpGe, ops.OpEq, ops.OpNe, ops.OpSelect, ops.OpDot}
	for len(b.P.Values) < nvals {
		if r.IntN(8) == 0 { // a linear solve
			d := 1 + r.IntN(4)
			w := make([]tape.ID, d*d)
			for i := range w {
				w[i] = pick()
				if i%(d+1) == 0 && r.IntN(2) == 0 {
					w[i] = recent()
				}
			}
			f := b.Add(ops.OpLUFactor, float64(d), w...)
			for range 1 + r.IntN(2) {
				op := ops.OpLUSolve
				if r.IntN(2) == 0 {
					op = ops.OpLUSolveT
				}
				args := []tape.ID{f}
				for range d {
					args = append(args, recent())
				}
				x := b.Add(op, 0, args...)
				for c := range d {
					pool = append(pool, b.Add(ops.OpExtract, float64(c), x))
				}
			}
			if r.IntN(3) == 0 {
				pool = append(pool, b.Add(ops.OpExtract, float64(r.IntN(d*d+d)), f))
			}
			continue
		}
		op := scalar[r.IntN(len(scalar))]
		var id tape.ID
		switch op {
		case ops.OpPowi:
			id = b.Add(op, float64(r.IntN(11)-4), recent())
		case ops.OpDot:
			k := r.IntN(4)
			args := make([]tape.ID, 0, 2*k+1)
			for range 2*k + 1 {
				args = append(args, recent())
			}
			id = b.Add(op, 0, args...)
		default:
			args := make([]tape.ID, ops.Lookup(op).Arity)
			for i := range args {
				args[i] = recent()
			}
			id = b.Add(op, 0, args...)
		}
		pool = append(pool, id)
	}
	outs := []tape.ID{pool[len(pool)-1], pool[len(pool)-2], pick(), pick()}
	return b.Finish(t, outs...)
}

// RandInputs fills a test program's inputs for n trajectories with gen.
func RandInputs(p *tape.Program, n int, gen func() float64) (in [][]float64, sh []float64) {
	for _, inp := range p.Inputs {
		if inp.Shared {
			sh = append(sh, gen())
			continue
		}
		col := make([]float64, n)
		for i := range col {
			col[i] = gen()
		}
		in = append(in, col)
	}
	return in, sh
}

// withTies copies some inputs of each trajectory onto others, so that
// comparisons, Min and Max meet ties.
func withTies(r *rand.Rand, in [][]float64) {
	if len(in) < 2 {
		return
	}
	for i := range in[0] {
		if r.IntN(4) == 0 {
			a, b := r.IntN(len(in)), r.IntN(len(in))
			in[a][i] = in[b][i]
		}
	}
}

// libmProgram applies op to its inputs: one output per op, with inputs
// from the op's domain and the special values.
func libmProgram(t testing.TB, r *rand.Rand, op ops.Op, n int) Program {
	def := ops.Lookup(op)
	b, x := NewProg("libm_"+def.Name, def.Arity, 0)
	out := b.Add(op, 0, x...)
	p := b.Finish(t, out)
	dom := libmDomain[op]
	in := make([][]float64, def.Arity)
	for k := range in {
		in[k] = make([]float64, n)
		for i := range in[k] {
			switch {
			case i < len(specials):
				in[k][i] = specials[(i+k)%len(specials)]
			case op == ops.OpPow && k == 1:
				in[k][i] = 10*r.Float64() - 5
				if r.IntN(4) == 0 {
					in[k][i] = float64(r.IntN(9) - 4)
				}
			case dom[0] > 0: // log-uniform
				in[k][i] = math.Exp(math.Log(dom[0]) + r.Float64()*(math.Log(dom[1])-math.Log(dom[0])))
			default:
				in[k][i] = dom[0] + r.Float64()*(dom[1]-dom[0])
			}
		}
	}
	return Program{P: p, In: in, Tol: Tolerance{ULPs: 4}}
}

// Trace traces f into a program or fails the test.
func Trace(t testing.TB, name string, in []tape.Input, f func([]tape.V) []tape.V) *tape.Program {
	p, err := tape.Trace(name, in, f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// LorenzTest is the Lorenz field with shared parameters σ, ρ, β on n
// random states.
func LorenzTest(t testing.TB, r *rand.Rand, n int) Program {
	lorenz := Trace(t, "lorenz", []tape.Input{{Name: "y0"}, {Name: "y1"}, {Name: "y2"},
		{Name: "sigma", Shared: true}, {Name: "rho", Shared: true}, {Name: "beta", Shared: true}},
		func(in []tape.V) []tape.V {
			y0, y1, y2, sigma, rho, beta := in[0], in[1], in[2], in[3], in[4], in[5]
			return []tape.V{
				sigma.Mul(y1.Sub(y0)),
				y0.Mul(rho.Sub(y2)).Sub(y1),
				y0.Mul(y1).Sub(beta.Mul(y2)),
			}
		})
	in, _ := RandInputs(lorenz, n, func() float64 { return -20 + 40*r.Float64() })
	return Program{P: lorenz, In: in, Sh: []float64{10, 28, 8.0 / 3}, Float: true}
}

// modelPrograms are right-hand sides and steps of the kind the engine
// runs: Lorenz with shared parameters, a tanh MLP (Dense), a
// linearly-implicit Euler step of Robertson (LU solve of I − hJ).
func modelPrograms(t testing.TB, r *rand.Rand, n int) []Program {
	var tps []Program
	uni := func(lo, hi float64) func() float64 { return func() float64 { return lo + (hi-lo)*r.Float64() } }

	tps = append(tps, LorenzTest(t, r, n))

	// MLP 2 → 8 → 2 with tanh, weights shared, followed by its VJP.
	mlp := TanhNet(t, "mlp", 8)
	mlpVJP, err := tape.VJP(mlp, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*tape.Program{mlp, mlpVJP} {
		in, sh := RandInputs(p, n, uni(-1, 1))
		tps = append(tps, Program{P: p, In: in, Sh: sh, Tol: Tolerance{Rel: 1e-13}, Float: true})
	}

	// One linearly implicit Euler step of Robertson: (I − hJ) k = f(y),
	// y + h k, with the Jacobian traced by JVP.
	rob := Trace(t, "robertson_step", []tape.Input{{Name: "y1"}, {Name: "y2"}, {Name: "y3"}, {Name: "h"},
		{Name: "k1", Shared: true}, {Name: "k2", Shared: true}, {Name: "k3", Shared: true}},
		func(in []tape.V) []tape.V {
			y1, y2, y3, h, k1, k2, k3 := in[0], in[1], in[2], in[3], in[4], in[5], in[6]
			f := []tape.V{
				k1.Neg().Mul(y1).Add(k3.Mul(y2).Mul(y3)),
				k1.Mul(y1).Sub(k3.Mul(y2).Mul(y3)).Sub(k2.Mul(y2.Square())),
				k2.Mul(y2.Square()),
			}
			one, zero := h.Const(1), h.Const(0)
			jac := []tape.V{
				k1.Neg(), k3.Mul(y3), k3.Mul(y2),
				k1, k3.Mul(y3).Neg().Sub(k2.Mul(y2).MulC(2)), k3.Mul(y2).Neg(),
				zero, k2.Mul(y2).MulC(2), zero,
			}
			w := make([]tape.V, 9)
			for i := range w {
				id := zero
				if i%4 == 0 {
					id = one
				}
				w[i] = id.Sub(h.Mul(jac[i]))
			}
			lu := tape.Factor(w, 3)
			k := lu.Solve(f)
			kt := lu.SolveT(f)
			return []tape.V{y1.Add(h.Mul(k[0])), y2.Add(h.Mul(k[1])), y3.Add(h.Mul(k[2])), kt[0], kt[1], kt[2]}
		})
	in, _ := RandInputs(rob, n, uni(0, 1))
	for i := range in[3] {
		in[3][i] = math.Pow(10, -6+6*r.Float64()) // h
	}
	// Not in float32: I − hJ is singular to float32 precision for large h.
	tps = append(tps, Program{P: rob, In: in, Sh: []float64{0.04, 3e7, 1e4}})

	// Solves of d×d systems, d up to 8, diagonally dominant, and singular
	// ones (every entry of one column 0) in some trajectories.
	for _, d := range []int{1, 2, 5, 8} {
		b, x := NewProg(fmt.Sprintf("solve%d", d), d*d+d, 0)
		f := b.Add(ops.OpLUFactor, float64(d), x[:d*d]...)
		s := b.Add(ops.OpLUSolve, 0, append([]tape.ID{f}, x[d*d:]...)...)
		st := b.Add(ops.OpLUSolveT, 0, append([]tape.ID{f}, x[d*d:]...)...)
		var outs []tape.ID
		for c := range d {
			outs = append(outs, b.Add(ops.OpExtract, float64(c), s), b.Add(ops.OpExtract, float64(c), st))
		}
		p := b.Finish(t, outs...)
		in, _ := RandInputs(p, n, func() float64 { return r.NormFloat64() })
		for i := range n {
			for c := range d {
				in[c*d+c][i] += float64(2*d) * math.Copysign(1, in[c*d+c][i])
			}
			if i%5 == 0 {
				col := r.IntN(d)
				for row := range d {
					in[row*d+col][i] = 0
				}
			}
		}
		tps = append(tps, Program{P: p, In: in, Float: true})
	}
	// Factors of W = I + s·M (ops.OpLUFactorShift), M read from a call's
	// outputs and as scalars, masked where live = 0, with an attached
	// derivative (whose value the generated code does not compute).
	for _, d := range []int{1, 3, 6} {
		in := make([]tape.Input, d*d+d+2)
		for k := range in {
			in[k] = tape.Input{Name: fmt.Sprintf("x%d", k)}
		}
		mat := Trace(t, fmt.Sprintf("mat%d", d), in[:d*d], func(x []tape.V) []tape.V {
			out := make([]tape.V, d*d)
			for c := range out {
				out[c] = x[c].MulC(1.5)
			}
			return out
		})
		p := Trace(t, fmt.Sprintf("shiftsolve%d", d), in, func(x []tape.V) []tape.V {
			m, rhs, sc, live := x[:d*d], x[d*d:d*d+d], x[d*d+d], x[d*d+d+1]
			a := tape.FactorShift(tape.CallFunc(mat, m), sc, live, d)
			b := tape.FactorShift(m, sc, live, d)
			xa, xb := a.Solve(rhs), b.SolveT(rhs)
			var outs []tape.V
			for c := range d {
				outs = append(outs, tape.Attach(xa[c], tape.NoGrad(xb[c]).Log()), xb[c])
			}
			return outs
		})
		in2, _ := RandInputs(p, n, func() float64 { return 0.3 * r.NormFloat64() })
		for i := range n {
			in2[d*d+d][i] = 1 + r.Float64()  // s
			in2[d*d+d+1][i] = float64(i % 3) // live: 0, 1, 2
		}
		tps = append(tps, Program{P: p, In: in2, Float: true})
	}
	return tps
}

// edgePrograms apply each scalar exact op to every combination of the
// special values (and a few ordinary ones), so that ties, NaN, signed
// zeros and overflow meet every op.
func edgePrograms(t testing.TB) []Program {
	vals := append(slices.Clone(specials), 3, -2.5, 1e308, 5e-324)
	var tps []Program
	for op := ops.Op(1); int(op) < ops.NumOps; op++ {
		def := ops.Lookup(op)
		if OpClasses[op] != ExactOp || def.Eval == nil || op == ops.OpDot {
			continue
		}
		arity := def.Arity
		b, x := NewProg("edge_"+def.Name, arity, 0)
		var outs []tape.ID
		if op == ops.OpPowi {
			for n := -3; n <= 4; n++ {
				outs = append(outs, b.Add(op, float64(n), x[0]))
			}
		} else {
			outs = append(outs, b.Add(op, 0, x...))
		}
		n := 1
		for range arity {
			n *= len(vals)
		}
		in := make([][]float64, arity)
		for k := range in {
			in[k] = make([]float64, n)
		}
		for i := range n {
			j := i
			for k := range in {
				in[k][i] = vals[j%len(vals)]
				j /= len(vals)
			}
		}
		tps = append(tps, Program{P: b.Finish(t, outs...), In: in})
	}
	// Dot of one and two terms (FMA chains).
	for k := 1; k <= 2; k++ {
		b, x := NewProg(fmt.Sprintf("edge_Dot%d", k), 2*k+1, 0)
		p := b.Finish(t, b.Add(ops.OpDot, 0, x...))
		r := rand.New(rand.NewPCG(uint64(k), 7))
		in, _ := RandInputs(p, 500, func() float64 { return vals[r.IntN(len(vals))] })
		tps = append(tps, Program{P: p, In: in})
	}
	return tps
}

// AllPrograms returns the test set: random exact programs, one libm
// program per libm op, the edge programs and the model programs, n trajectories each.
func AllPrograms(t testing.TB, n int) []Program {
	r := rand.New(rand.NewPCG(1, 2))
	var tps []Program
	for k := range 40 {
		p := genExact(t, r, fmt.Sprintf("exact%d", k), 4, 30+r.IntN(40))
		in, sh := RandInputs(p, n, func() float64 { return randInput(r) })
		withTies(r, in)
		tps = append(tps, Program{P: p, In: in, Sh: sh})
	}
	for op := ops.Op(1); int(op) < ops.NumOps; op++ {
		if OpClasses[op] == LibmOp {
			tps = append(tps, libmProgram(t, r, op, n))
		}
	}
	tps = append(tps, edgePrograms(t)...)
	tps = append(tps, callPrograms(t, r, n)...)
	return append(tps, modelPrograms(t, r, n)...)
}

// TanhNet traces the network 2 → hidden → 2 with a tanh hidden layer:
// inputs x0, x1, then its hidden·5 + 2 weights (shared).
func TanhNet(t testing.TB, name string, hidden int) *tape.Program {
	in := []tape.Input{{Name: "x0"}, {Name: "x1"}}
	for k := range hidden*5 + 2 {
		in = append(in, tape.Input{Name: fmt.Sprintf("w%d", k), Shared: true})
	}
	return Trace(t, name, in, func(in []tape.V) []tape.V {
		x, w := in[:2], in[2:]
		h := tape.Dense(w[:2*hidden], x, w[2*hidden:3*hidden])
		for i := range h {
			h[i] = h[i].Tanh()
		}
		o := w[3*hidden:]
		return tape.Dense(o[:2*hidden], h, o[2*hidden:])
	})
}

// LorenzField is the Lorenz field f(y, σ, ρ, β) with shared parameters,
// made of a nested callee: cross(a, b, c) = (a·(b − c), a·b), which has
// no shared inputs.
func LorenzField(t testing.TB) *tape.Program {
	cross := Trace(t, "cross", []tape.Input{{Name: "a"}, {Name: "b"}, {Name: "c"}}, func(in []tape.V) []tape.V {
		return []tape.V{in[0].Mul(in[1].Sub(in[2])), in[0].Mul(in[1])}
	})
	return Trace(t, "lorenz_field", []tape.Input{{Name: "y0"}, {Name: "y1"}, {Name: "y2"},
		{Name: "sigma", Shared: true}, {Name: "rho", Shared: true}, {Name: "beta", Shared: true}},
		func(in []tape.V) []tape.V {
			y0, y1, y2, sigma, rho, beta := in[0], in[1], in[2], in[3], in[4], in[5]
			a := tape.CallFunc(cross, []tape.V{sigma, y1, y0})
			b := tape.CallFunc(cross, []tape.V{y0, rho, y2})
			return []tape.V{a[0], b[0].Sub(y1), b[1].Sub(beta.Mul(y2))}
		})
}

// RK4Step traces one classical Runge–Kutta step of field (inputs y0, y1,
// y2, then three shared parameters) that calls the field four times.
// Inputs: y0, y1, y2, h, then shared: scale, sigma, rho, beta. With
// scaled set the field gets scale·σ (computed, so passed in a local
// array), else the step's own σ, ρ, β (passed as gs_sh + 1).
func RK4Step(t testing.TB, field *tape.Program, scaled bool) *tape.Program {
	name := "rk4"
	if scaled {
		name = "rk4_scaled"
	}
	return Trace(t, name, []tape.Input{{Name: "y0"}, {Name: "y1"}, {Name: "y2"}, {Name: "h"},
		{Name: "scale", Shared: true}, {Name: "sigma", Shared: true}, {Name: "rho", Shared: true}, {Name: "beta", Shared: true}},
		func(in []tape.V) []tape.V {
			y, h, p := in[:3], in[3], in[5:8]
			if scaled {
				p = []tape.V{in[4].Mul(p[0]), p[1], p[2]}
			}
			f := func(y []tape.V) []tape.V { return tape.CallFunc(field, append(slices.Clone(y), p...)) }
			axpy := func(a float64, k []tape.V) []tape.V {
				z := make([]tape.V, 3)
				for i := range z {
					z[i] = y[i].Add(h.MulC(a).Mul(k[i]))
				}
				return z
			}
			k1 := f(y)
			k2 := f(axpy(0.5, k1))
			k3 := f(axpy(0.5, k2))
			k4 := f(axpy(1, k3))
			out := make([]tape.V, 3)
			for i := range out {
				s := k1[i].Add(k2[i].MulC(2)).Add(k3[i].MulC(2)).Add(k4[i])
				out[i] = y[i].Add(h.MulC(1.0 / 6).Mul(s))
			}
			return out
		})
}

// callPrograms are programs with calls: RK4 steps of the nested Lorenz
// field (shared parameters passed through and computed) and the VJP of
// one, whose callees are the field's own VJP programs.
func callPrograms(t testing.TB, r *rand.Rand, n int) []Program {
	field := LorenzField(t)
	step := RK4Step(t, field, false)
	vjp, err := tape.VJP(step, nil)
	if err != nil {
		t.Fatal(err)
	}
	var tps []Program
	for _, p := range []*tape.Program{field, step, RK4Step(t, field, true), vjp} {
		in, sh := RandInputs(p, n, func() float64 { return 4 * r.NormFloat64() })
		for k, inp := range p.Inputs {
			if inp.Name == "h" {
				for i := range in[k] {
					in[k][i] = 0.01 * r.Float64()
				}
			}
		}
		tps = append(tps, Program{P: p, In: in, Sh: sh, Float: p != vjp})
	}
	return tps
}
