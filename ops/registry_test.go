package ops

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// Ops whose derivative rules are intentionally nil, with the reason.
var (
	noVJP = map[Op]string{
		OpInput:         "an input has no arguments; transforms seed it",
		OpConst:         "a constant has no arguments",
		OpSign:          "the derivative of Sign is 0 everywhere it exists",
		OpLt:            "comparisons are piecewise constant",
		OpLe:            "comparisons are piecewise constant",
		OpGt:            "comparisons are piecewise constant",
		OpGe:            "comparisons are piecewise constant",
		OpEq:            "comparisons are piecewise constant",
		OpNe:            "comparisons are piecewise constant",
		OpLUFactor:      "the solves that use the factors carry the derivatives with respect to the matrix",
		OpCall:          "package tape differentiates a call through the callee program",
		OpNoGrad:        "a stop-gradient has a zero derivative",
		OpLUFactorShift: "its solves treat the matrix as a constant; a caller attaches the derivative (OpAttach)",
	}
	noJVP = map[Op]string{
		OpInput:         "transforms seed input tangents themselves",
		OpConst:         "a constant has a zero tangent",
		OpSign:          "the derivative of Sign is 0 everywhere it exists",
		OpLt:            "comparisons are piecewise constant",
		OpLe:            "comparisons are piecewise constant",
		OpGt:            "comparisons are piecewise constant",
		OpGe:            "comparisons are piecewise constant",
		OpEq:            "comparisons are piecewise constant",
		OpNe:            "comparisons are piecewise constant",
		OpCall:          "package tape differentiates a call through the callee program",
		OpNoGrad:        "a stop-gradient has a zero derivative",
		OpLUFactorShift: "its solves treat the matrix as a constant",
	}
	// Ops the interpreter and the executor handle themselves: they need
	// no Eval, EvalTuple or Block.
	builtin = map[Op]bool{OpInput: true, OpConst: true, OpExtract: true, OpCall: true}
)

func TestRegistry(t *testing.T) {
	t.Parallel()
	names := make(map[string]Op)
	for op := Op(1); int(op) < NumOps; op++ {
		def := Lookup(op)
		if def.Name == "" {
			t.Errorf("Case %d: missing Name", op)
			continue
		}
		if prev, ok := names[def.Name]; ok {
			t.Errorf("Case %v: Name also used by op %d", def.Name, prev)
		}
		names[def.Name] = op
		if got := op.String(); got != def.Name {
			t.Errorf("Case %v: String() want %q, got %q", def.Name, def.Name, got)
		}
		tuple := IsTuple(op)
		switch {
		case builtin[op]:
			if def.Eval != nil || def.EvalTuple != nil || def.Block != nil {
				t.Errorf("Case %v: handled by the executor, want no Eval, EvalTuple or Block", op)
			}
		case tuple:
			if def.EvalTuple == nil || def.Eval != nil {
				t.Errorf("Case %v: a tuple op needs EvalTuple and no Eval", op)
			}
			if def.Block == nil {
				t.Errorf("Case %v: missing Block", op)
			}
			if def.C != nil {
				t.Errorf("Case %v: a tuple op has no C expression (package cuda emits it)", op)
			}
		default:
			if def.Eval == nil || def.EvalTuple != nil {
				t.Errorf("Case %v: a scalar op needs Eval and no EvalTuple", op)
			}
			if def.Block == nil {
				t.Errorf("Case %v: missing Block", op)
			}
		}
		if !tuple && op != OpInput && op != OpExtract && def.C == nil {
			t.Errorf("Case %v: missing C", op)
		}
		if _, ok := noVJP[op]; ok != (def.VJP == nil) {
			t.Errorf("Case %v: VJP nil want %v, got %v", op, ok, def.VJP == nil)
		}
		if _, ok := noJVP[op]; ok != (def.JVP == nil) {
			t.Errorf("Case %v: JVP nil want %v, got %v", op, ok, def.JVP == nil)
		}
		switch op {
		case OpDot, OpLUFactor, OpLUFactorShift, OpLUSolve, OpLUSolveT, OpCall:
			if def.Arity != -1 {
				t.Errorf("Case %v: Arity want -1, got %d", op, def.Arity)
			}
		default:
			if def.Arity < 0 || def.Arity > 3 {
				t.Errorf("Case %v: Arity want 0…3, got %d", op, def.Arity)
			}
		}
		if def.Mixed && (tuple || def.Block == nil) {
			t.Errorf("Case %v: Mixed set on an op without a scalar Block", op)
		}
	}
	if got := Op(NumOps).String(); got != "Op("+strconv.Itoa(NumOps)+")" {
		t.Errorf("String of an out-of-range op: want Op(%d), got %q", NumOps, got)
	}
}

func TestLookupPanics(t *testing.T) {
	t.Parallel()
	for _, op := range []Op{OpInvalid, Op(NumOps), 255} {
		func() {
			defer func() {
				r := recover()
				if r == nil {
					t.Errorf("Case %d: Lookup did not panic", op)
					return
				}
				if s, _ := r.(string); !strings.HasPrefix(s, "ops: no definition") {
					t.Errorf("Case %d: panic want prefix %q, got %v", op, "ops: no definition", r)
				}
			}()
			Lookup(op)
		}()
	}
}

func TestWidth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		op        Op
		aux, aux0 float64
		want      int
		tuple     bool
	}{
		{OpAdd, 0, 0, 1, false},
		{OpExtract, 3, 0, 1, false},
		{OpLUFactor, 1, 0, 2, true},
		{OpLUFactor, 3, 0, 12, true},
		{OpLUSolve, 0, 3, 3, true},
		{OpLUSolveT, 0, 5, 5, true},
		{OpCall, 2, 0, -1, true},
	} {
		if got := Width(tc.op, tc.aux, tc.aux0); got != tc.want {
			t.Errorf("Case %v(%v, %v): Width want %d, got %d", tc.op, tc.aux, tc.aux0, tc.want, got)
		}
		if got := IsTuple(tc.op); got != tc.tuple {
			t.Errorf("Case %v: IsTuple want %v, got %v", tc.op, tc.tuple, got)
		}
	}
}

func TestCheckArgs(t *testing.T) {
	t.Parallel()
	s := OpInput // any scalar argument
	for _, tc := range []struct {
		name   string
		op     Op
		aux    float64
		argOps []Op
		argAux []float64
		want   string // substring of the error; "" for none
	}{
		{"Add", OpAdd, 0, []Op{s, s}, []float64{0, 1}, ""},
		{"Add/arity", OpAdd, 0, []Op{s}, []float64{0}, "Add takes 2 arguments, got 1"},
		{"FMA/arity", OpFMA, 0, []Op{s, s}, []float64{0, 1}, "FMA takes 3 arguments, got 2"},
		{"Sin/tuple", OpSin, 0, []Op{OpLUSolve}, []float64{0}, "Sin argument 0 is a tuple"},
		{"Dot/bias", OpDot, 0, []Op{s}, []float64{0}, ""},
		{"Dot/k=2", OpDot, 0, []Op{s, s, s, s, s}, make([]float64, 5), ""},
		{"Dot/even", OpDot, 0, []Op{s, s}, []float64{0, 1}, "Dot takes 2k+1 arguments"},
		{"Dot/empty", OpDot, 0, nil, nil, "Dot takes 2k+1 arguments"},
		{"Powi", OpPowi, -3, []Op{s}, []float64{0}, ""},
		{"Powi/fraction", OpPowi, 0.5, []Op{s}, []float64{0}, "Powi exponent 0.5 is not an integer"},
		{"LUFactor", OpLUFactor, 2, []Op{s, s, s, s}, make([]float64, 4), ""},
		{"LUFactor/d=0", OpLUFactor, 0, nil, nil, "LUFactor dimension 0 is not a positive integer"},
		{"LUFactor/d=1.5", OpLUFactor, 1.5, []Op{s}, []float64{0}, "not a positive integer"},
		{"LUFactor/count", OpLUFactor, 2, []Op{s, s, s}, make([]float64, 3), "takes 4 arguments, got 3"},
		{"LUSolve", OpLUSolve, 0, []Op{OpLUFactor, s, s}, []float64{2, 0, 0}, ""},
		{"LUSolve/nofactor", OpLUSolve, 0, []Op{s, s, s}, []float64{2, 0, 0}, "needs an LUFactor as its first argument"},
		{"LUSolveT/count", OpLUSolveT, 0, []Op{OpLUFactor, s}, []float64{2, 0}, "takes 2 right-hand-side values, got 1"},
		{"LUSolve/tuple-rhs", OpLUSolve, 0, []Op{OpLUFactor, OpLUSolve}, []float64{1, 0}, "argument 1 is a tuple"},
		{"Extract", OpExtract, 5, []Op{OpLUFactor}, []float64{2}, ""},
		{"Extract/range", OpExtract, 6, []Op{OpLUFactor}, []float64{2}, "Extract component 6 out of range"},
		{"Extract/negative", OpExtract, -1, []Op{OpLUSolve}, []float64{0}, "out of range"},
		{"Extract/fraction", OpExtract, 0.5, []Op{OpLUSolve}, []float64{0}, "out of range"},
		{"Extract/scalar", OpExtract, 0, []Op{s}, []float64{0}, "Extract of a non-tuple"},
		{"Extract/call", OpExtract, 7, []Op{OpCall}, []float64{0}, ""},
		{"Call", OpCall, 2, []Op{s, s, s}, make([]float64, 3), ""},
		{"Call/no-args", OpCall, 0, nil, nil, ""},
		{"Call/negative", OpCall, -1, []Op{s}, []float64{0}, "not a non-negative integer"},
		{"Call/fraction", OpCall, 0.5, []Op{s}, []float64{0}, "not a non-negative integer"},
		{"Call/tuple-arg", OpCall, 0, []Op{s, OpLUSolve}, []float64{0, 0}, "Call argument 1 is a tuple"},
	} {
		err := CheckArgs(tc.op, tc.aux, tc.argOps, tc.argAux)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Case %v: want no error, got %v", tc.name, err)
		case tc.want != "" && err == nil:
			t.Errorf("Case %v: want error containing %q, got nil", tc.name, tc.want)
		case tc.want != "" && !strings.Contains(err.Error(), tc.want):
			t.Errorf("Case %v: want error containing %q, got %v", tc.name, tc.want, err)
		}
	}
}

func TestC(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		op   Op
		aux  float64
		args []string
		want string
	}{
		{OpConst, 0.5, nil, "0.5"},
		{OpConst, 1, nil, "1.0"},
		{OpConst, -2, nil, "-2.0"},
		{OpConst, 1e300, nil, "1e+300"},
		{OpConst, math.NaN(), nil, "(0.0/0.0)"},
		{OpConst, math.Inf(1), nil, "(1.0/0.0)"},
		{OpConst, math.Inf(-1), nil, "(-1.0/0.0)"},
		{OpAdd, 0, []string{"a", "b"}, "(a + b)"},
		{OpDiv, 0, []string{"a", "b"}, "(a / b)"},
		{OpNeg, 0, []string{"a"}, "(-a)"},
		{OpFMA, 0, []string{"a", "b", "c"}, "fma(a, b, c)"},
		{OpSquare, 0, []string{"a"}, "(a * a)"},
		{OpPowi, -3, []string{"a"}, "gs_powi(a, -3)"},
		{OpSin, 0, []string{"a"}, "sin(a)"},
		{OpAbs, 0, []string{"a"}, "fabs(a)"},
		{OpMin, 0, []string{"a", "b"}, "gs_min(a, b)"},
		{OpLe, 0, []string{"a", "b"}, "((a <= b) ? 1.0 : 0.0)"},
		{OpSelect, 0, []string{"c", "a", "b"}, "((c != 0.0) ? a : b)"},
		{OpDot, 0, []string{"b"}, "b"},
		{OpDot, 0, []string{"w0", "w1", "x0", "x1", "b"}, "fma(w1, x1, fma(w0, x0, b))"},
	} {
		if got := Lookup(tc.op).C(tc.args, tc.aux); got != tc.want {
			t.Errorf("Case %v %v: C want %q, got %q", tc.op, tc.args, tc.want, got)
		}
	}
	// Every scalar op's expression uses each of its arguments, except
	// Attach's second, whose value is never needed.
	for op := Op(1); int(op) < NumOps; op++ {
		def := Lookup(op)
		if def.C == nil || def.Arity <= 0 || op == OpAttach {
			continue
		}
		args := []string{"ARG_A", "ARG_B", "ARG_C"}[:def.Arity]
		got := def.C(args, 2)
		for _, a := range args {
			if !strings.Contains(got, a) {
				t.Errorf("Case %v: C %q does not use argument %s", op, got, a)
			}
		}
	}
}
