package tape_test

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// The fuzz target decodes its bytes as a program for a small stack
// machine over 2 or 3 inputs, runs it twice — once traced, once in plain
// Go — and checks that Program.Eval and Exec.Run agree with plain Go bit
// for bit (or both give NaN), also when the program is called from
// another (CallFunc) and inlined again (Inline).

// Stack-machine instructions; an instruction byte is taken modulo fzNum.
const (
	fzA     = iota // push input 0
	fzB            // push input 1
	fzC            // push input 2 (input 0 with two inputs)
	fzConst        // push fzConsts[next byte]
	fzDup
	fzSwap
	fzNeg
	fzSquare
	fzSqrt
	fzExp
	fzExpm1
	fzLog
	fzLog1p
	fzSin
	fzCos
	fzTan
	fzTanh
	fzSigmoid
	fzSoftplus
	fzRelu
	fzAbs
	fzSign
	fzPowi // exponent int8(next byte) % 8
	fzAdd
	fzSub
	fzMul
	fzDiv
	fzPow
	fzMin
	fzMax
	fzLt
	fzLe
	fzGt
	fzGe
	fzEq
	fzNe
	fzDot1 // w x b
	fzFMA
	fzSelect
	fzDot2 // w0 w1 x0 x1 b
	fzNum
)

var fzConsts = []float64{0, 1, -1, 0.5, 2, 3, math.Copysign(0, -1), 1e-300, 1e300, math.Pi, math.Inf(1), math.NaN()}

// fzArity is the number of operands an instruction pops.
func fzArity(op int) int {
	switch {
	case op <= fzConst:
		return 0
	case op == fzDup:
		return 1
	case op == fzSwap:
		return 2
	case op <= fzPowi:
		return 1
	case op <= fzNe:
		return 2
	case op == fzDot1 || op == fzFMA || op == fzSelect:
		return 3
	}
	return 5
}

// Plain-Go versions of the ops whose formula is a documented choice.
func goSigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

func goSoftplus(x float64) float64 { return math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) }

func goPowi(x float64, n int) float64 {
	if n < 0 {
		return 1 / goPowi(x, -n)
	}
	r := 1.0
	for ; n > 0; n >>= 1 {
		if n&1 == 1 {
			r = float64(r * x)
		}
		x = float64(x * x)
	}
	return r
}

func b2f(c bool) float64 {
	if c {
		return 1
	}
	return 0
}

// fzItem is a stack entry: the traced value and its plain-Go value.
type fzItem struct {
	v tape.V
	x float64
}

// fzRun traces the program code over the inputs x (2 or 3) and computes it
// in plain Go alongside. It returns the traced program, the plain outputs,
// and whether every intermediate value was finite.
func fzRun(t *testing.T, code []byte, x []float64) (*tape.Program, []float64, bool) {
	var want []float64
	finite := true
	p, err := tape.Trace("fuzz", names("in", len(x)), func(in []tape.V) []tape.V {
		var st []fzItem
		push := func(v tape.V, x float64) {
			finite = finite && !math.IsNaN(x) && !math.IsInf(x, 0)
			st = append(st, fzItem{v, x})
		}
		for i := 0; i < len(x); i++ {
			finite = finite && !math.IsNaN(x[i]) && !math.IsInf(x[i], 0)
		}
		for pc := 0; pc < len(code); pc++ {
			op := int(code[pc]) % fzNum
			arg := byte(0)
			if op == fzConst || op == fzPowi {
				if pc+1 < len(code) {
					pc++
					arg = code[pc]
				}
			}
			k := fzArity(op)
			if len(st) < k || len(st)-k+1 > 16 {
				continue
			}
			a := append([]fzItem(nil), st[len(st)-k:]...)
			st = st[:len(st)-k]
			switch op {
			case fzA, fzB, fzC:
				j := (op - fzA) % len(x)
				push(in[j], x[j])
			case fzConst:
				c := fzConsts[int(arg)%len(fzConsts)]
				push(in[0].Const(c), c)
			case fzDup:
				push(a[0].v, a[0].x)
				push(a[0].v, a[0].x)
			case fzSwap:
				push(a[1].v, a[1].x)
				push(a[0].v, a[0].x)
			case fzNeg:
				push(a[0].v.Neg(), -a[0].x)
			case fzSquare:
				push(a[0].v.Square(), float64(a[0].x*a[0].x))
			case fzSqrt:
				push(a[0].v.Sqrt(), math.Sqrt(a[0].x))
			case fzExp:
				push(a[0].v.Exp(), math.Exp(a[0].x))
			case fzExpm1:
				push(a[0].v.Expm1(), math.Expm1(a[0].x))
			case fzLog:
				push(a[0].v.Log(), math.Log(a[0].x))
			case fzLog1p:
				push(a[0].v.Log1p(), math.Log1p(a[0].x))
			case fzSin:
				push(a[0].v.Sin(), math.Sin(a[0].x))
			case fzCos:
				push(a[0].v.Cos(), math.Cos(a[0].x))
			case fzTan:
				push(a[0].v.Tan(), math.Tan(a[0].x))
			case fzTanh:
				push(a[0].v.Tanh(), math.Tanh(a[0].x))
			case fzSigmoid:
				push(a[0].v.Sigmoid(), goSigmoid(a[0].x))
			case fzSoftplus:
				push(a[0].v.Softplus(), goSoftplus(a[0].x))
			case fzRelu:
				r := 0.0
				if a[0].x > 0 {
					r = a[0].x
				}
				push(a[0].v.Relu(), r)
			case fzAbs:
				push(a[0].v.Abs(), math.Abs(a[0].x))
			case fzSign:
				s := 0.0
				if a[0].x > 0 {
					s = 1
				} else if a[0].x < 0 {
					s = -1
				}
				push(a[0].v.Sign(), s)
			case fzPowi:
				n := int(int8(arg)) % 8
				push(a[0].v.Powi(n), goPowi(a[0].x, n))
			case fzAdd:
				push(a[0].v.Add(a[1].v), float64(a[0].x+a[1].x))
			case fzSub:
				push(a[0].v.Sub(a[1].v), float64(a[0].x-a[1].x))
			case fzMul:
				push(a[0].v.Mul(a[1].v), float64(a[0].x*a[1].x))
			case fzDiv:
				push(a[0].v.Div(a[1].v), float64(a[0].x/a[1].x))
			case fzPow:
				push(a[0].v.Pow(a[1].v), math.Pow(a[0].x, a[1].x))
			case fzMin:
				r := a[1].x
				if a[0].x <= a[1].x || a[0].x != a[0].x {
					r = a[0].x
				}
				push(tape.Min(a[0].v, a[1].v), r)
			case fzMax:
				r := a[1].x
				if a[0].x >= a[1].x || a[0].x != a[0].x {
					r = a[0].x
				}
				push(tape.Max(a[0].v, a[1].v), r)
			case fzLt:
				push(tape.Lt(a[0].v, a[1].v), b2f(a[0].x < a[1].x))
			case fzLe:
				push(tape.Le(a[0].v, a[1].v), b2f(a[0].x <= a[1].x))
			case fzGt:
				push(tape.Gt(a[0].v, a[1].v), b2f(a[0].x > a[1].x))
			case fzGe:
				push(tape.Ge(a[0].v, a[1].v), b2f(a[0].x >= a[1].x))
			case fzEq:
				push(tape.Eq(a[0].v, a[1].v), b2f(a[0].x == a[1].x))
			case fzNe:
				push(tape.Ne(a[0].v, a[1].v), b2f(a[0].x != a[1].x))
			case fzDot1:
				push(tape.Dot(vs(a[:1]), vs(a[1:2]), a[2].v), math.FMA(a[0].x, a[1].x, a[2].x))
			case fzFMA:
				push(tape.FMA(a[0].v, a[1].v, a[2].v), math.FMA(a[0].x, a[1].x, a[2].x))
			case fzSelect:
				r := a[2].x
				if a[0].x != 0 {
					r = a[1].x
				}
				push(tape.Select(a[0].v, a[1].v, a[2].v), r)
			case fzDot2:
				s := math.FMA(a[0].x, a[2].x, a[4].x)
				s = math.FMA(a[1].x, a[3].x, s)
				push(tape.Dot(vs(a[:2]), vs(a[2:4]), a[4].v), s)
			}
		}
		if len(st) == 0 {
			push(in[0], x[0])
		}
		st = st[max(0, len(st)-3):]
		out := make([]tape.V, len(st))
		for i, it := range st {
			out[i] = it.v
			want = append(want, it.x)
		}
		return out
	})
	if err != nil {
		t.Fatalf("Trace: %v", err)
	}
	return p, want, finite
}

func vs(items []fzItem) []tape.V {
	v := make([]tape.V, len(items))
	for i, it := range items {
		v[i] = it.v
	}
	return v
}

func sameBits(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || a != a && b != b
}

func FuzzTraceExpr(f *testing.F) {
	// Seeds: Lorenz's second component, a softplus of a dot, a guarded
	// log, every instruction once, and non-finite inputs.
	f.Add([]byte{fzA, fzC, fzConst, 5, fzSwap, fzSub, fzMul, fzB, fzSub}, 1.5, -0.25, 3.0)
	f.Add([]byte{128 + fzB, fzA, fzConst, 3, fzDot1, fzSoftplus, fzC, fzTanh, fzMul}, 0.3, -2.0, 0.7)
	f.Add([]byte{fzA, fzConst, 0, fzGt, fzA, fzConst, 1, fzSelect, fzLog}, -1.0, 2.0, 0.0)
	all := []byte{128}
	for op := 0; op < fzNum; op++ {
		all = append(all, fzA, fzB, fzC, fzC, fzA, byte(op), 7)
	}
	f.Add(all, 0.9, -1.1, 0.4)
	f.Add([]byte{fzA, fzB, fzDiv, fzA, fzConst, 10, fzMul, fzB, fzPowi, 250, fzA, fzDot2}, 0.0, 0.0, 0.0)
	f.Add([]byte{fzA, fzB, fzMin, fzA, fzB, fzMax, fzA, fzSqrt, fzPow}, math.Inf(-1), math.NaN(), 1e308)
	f.Add([]byte{fzA, fzConst, 6, fzAdd, fzSign, fzA, fzNeg, fzNeg, fzConst, 1, fzMul, fzConst, 0, fzFMA}, math.Copysign(0, -1), 1.0, 2.0)

	f.Fuzz(func(t *testing.T, code []byte, a, b, c float64) {
		if len(code) > 64 {
			code = code[:64]
		}
		x := []float64{a, b}
		if len(code) > 0 && code[0] >= 128 {
			x = append(x, c)
		}
		p, want, finite := fzRun(t, code, x)

		got := p.Eval(nil, x)
		for k := range want {
			if !sameBits(got[k], want[k]) {
				t.Fatalf("Eval output %d: want %v (plain Go), got %v\n%v", k, want[k], got[k], p)
			}
		}

		// The executor, over 5 identical trajectories, with input 1 per
		// trajectory and shared, in blocks of 2 (so blocks of 2 and 1).
		const n = 5
		for _, shared := range []bool{false, true} {
			q := *p
			q.Inputs = append([]tape.Input(nil), p.Inputs...)
			q.Inputs[1].Shared = shared
			in := make([][]float64, len(x))
			for k := range in {
				m := n
				if q.Inputs[k].Shared {
					m = 1
				}
				in[k] = make([]float64, m)
				for i := range in[k] {
					in[k][i] = x[k]
				}
			}
			out := make([][]float64, len(q.Outputs))
			for k := range out {
				out[k] = make([]float64, n)
			}
			e, err := tape.NewExec(&q, &tape.ExecSettings{BlockSize: 2, Workers: 2})
			if err != nil {
				t.Fatalf("NewExec: %v", err)
			}
			if err := e.Run(out, in, n); err != nil {
				t.Fatalf("Run: %v", err)
			}
			for k := range want {
				for i := 0; i < n; i++ {
					if !sameBits(out[k][i], want[k]) {
						t.Fatalf("Exec (input 1 shared: %v) output %d trajectory %d: want %v (plain Go), got %v\n%v", shared, k, i, want[k], out[k][i], p)
					}
				}
			}
		}

		// Simplify keeps every value when all of them are finite, and the
		// transforms accept every program.
		sp, err := tape.Simplify(p)
		if err != nil {
			t.Fatalf("Simplify: %v", err)
		}
		if finite {
			for k, s := range sp.Eval(nil, x) {
				if s != want[k] {
					t.Fatalf("Simplify output %d: want %v, got %v\n%v\n%v", k, want[k], s, p, sp)
				}
			}
		}
		if _, err := tape.VJP(p, nil); err != nil {
			t.Fatalf("VJP: %v", err)
		}
		if _, err := tape.JVP(p, nil); err != nil {
			t.Fatalf("JVP: %v", err)
		}

		// The program called from another: Eval gives the same bits,
		// Inline the same values when all are finite, and the transforms
		// accept the caller.
		caller, err := tape.Trace("caller", p.Inputs, func(in []tape.V) []tape.V { return tape.CallFunc(p, in) })
		if err != nil {
			t.Fatalf("Trace of a call: %v", err)
		}
		for k, y := range caller.Eval(nil, x) {
			if !sameBits(y, want[k]) {
				t.Fatalf("Eval of a call, output %d: want %v, got %v\n%v", k, want[k], y, caller)
			}
		}
		inl, err := tape.Inline(caller)
		if err != nil {
			t.Fatalf("Inline: %v", err)
		}
		if finite {
			for k, y := range inl.Eval(nil, x) {
				if y != want[k] {
					t.Fatalf("Inline output %d: want %v, got %v\n%v\n%v", k, want[k], y, caller, inl)
				}
			}
		}
		if _, err := tape.VJP(caller, nil); err != nil {
			t.Fatalf("VJP of a call: %v", err)
		}
		if _, err := tape.JVP(caller, nil); err != nil {
			t.Fatalf("JVP of a call: %v", err)
		}
	})
}
