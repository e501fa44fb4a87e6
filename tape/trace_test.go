package tape_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// nextLine returns the line after its caller's: the line of the call that
// should fail.
func nextLine() string {
	_, file, line, _ := runtime.Caller(1)
	return fmt.Sprintf("%s:%d", file, line+1)
}

// TestTraceErrors checks that misuse while tracing becomes a *TraceError
// naming the op and the line of the offending call in this file.
func TestTraceErrors(t *testing.T) {
	t.Parallel()
	var other tape.V
	if _, err := tape.Trace("other", withNames("z"), func(in []tape.V) []tape.V { other = in[0]; return in }); err != nil {
		t.Fatal(err)
	}
	var zero tape.V
	for _, tc := range []struct {
		name string
		f    func(in []tape.V, pos *string) []tape.V
		op   string
		msg  string
	}{
		{"mixed traces", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			return []tape.V{in[0].Add(other)}
		}, "Add", `argument 2 is from another trace (program "other", not "mixed traces")`},
		{"mixed traces/FMA", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			return []tape.V{tape.FMA(in[0], in[1], other)}
		}, "FMA", "argument 3 is from another trace"},
		{"zero V/second", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			return []tape.V{in[0].Mul(zero)}
		}, "Mul", "argument 2 is the zero V"},
		{"zero V/first", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			return []tape.V{zero.Sin()}
		}, "Sin", "argument 1 is the zero V"},
		{"zero V/Const", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			return []tape.V{zero.Const(1)}
		}, "Const", "called on the zero V"},
		{"Dense", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			return tape.Dense(in[:3], in[:2], in[:2])
		}, "Dense", "len(w) = 3, want len(b)*len(x) = 2*2 = 4"},
		{"Dot", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			return []tape.V{tape.Dot(in[:2], in[:1], in[2])}
		}, "Dot", "len(w) = 2, len(x) = 1; they must match"},
		{"Solve", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			return tape.Solve(in[:4], in[:3])
		}, "Solve", "len(w) = 4, len(rhs) = 3"},
		{"Solve/empty", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			return tape.Solve(nil, nil)
		}, "Solve", "len(w) = 0, len(rhs) = 0"},
		{"LU.Solve", func(in []tape.V, pos *string) []tape.V {
			lu := tape.Factor(in[:4], 2)
			*pos = nextLine()
			return lu.Solve(in[:3])
		}, "Solve", "len(rhs) = 3, want 2"},
		{"LU.SolveT", func(in []tape.V, pos *string) []tape.V {
			lu := tape.Factor(in[:1], 1)
			*pos = nextLine()
			return lu.SolveT(in[:2])
		}, "SolveT", "len(rhs) = 2, want 1"},
		{"Factor", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			tape.Factor(in[:3], 2)
			return in
		}, "Factor", "len(w) = 3, want d*d = 4"},
		{"Sum", func(in []tape.V, pos *string) []tape.V {
			*pos = nextLine()
			return []tape.V{tape.Sum(nil)}
		}, "Sum", "no values to sum"},
		{"Call", func(in []tape.V, pos *string) []tape.V {
			p := lorenzProgram(t)
			*pos = nextLine()
			return tape.Call(p, in[:3])
		}, "Call", "program lorenz has 7 inputs, got 3 values"},
		{"Call/mixed", func(in []tape.V, pos *string) []tape.V {
			p := mustTrace(t, "add", withNames("a", "b"), func(in []tape.V) []tape.V { return []tape.V{in[0].Add(in[1])} })
			*pos = nextLine()
			return tape.Call(p, []tape.V{in[0], other})
		}, "Call", "argument 2 is from another trace"},
		{"Call/zero", func(in []tape.V, pos *string) []tape.V {
			p := mustTrace(t, "add", withNames("a", "b"), func(in []tape.V) []tape.V { return []tape.V{in[0].Add(in[1])} })
			*pos = nextLine()
			return tape.Call(p, []tape.V{zero, in[0]})
		}, "Call", "argument 1 is the zero V"},
		{"Powi via Builder", func(in []tape.V, pos *string) []tape.V {
			b := in[0].Builder()
			*pos = nextLine()
			b.Emit(ops.OpPowi, 0.5, in[0].ID())
			return in
		}, "Powi", "Powi exponent 0.5 is not an integer"},
		{"Emit out of range", func(in []tape.V, pos *string) []tape.V {
			b := in[0].Builder()
			*pos = nextLine()
			b.Emit(ops.OpSin, 0, 99)
			return in
		}, "Sin", "argument 1 is v99, which does not exist"},
	} {
		var pos string
		p, err := tape.Trace(tc.name, withNames("a", "b", "c", "d"), func(in []tape.V) []tape.V { return tc.f(in, &pos) })
		var te *tape.TraceError
		if p != nil || !errors.As(err, &te) {
			t.Errorf("Case %v: want no program and a *TraceError, got %v and %#v", tc.name, p, err)
			continue
		}
		if te.Op != tc.op || !strings.Contains(te.Msg, tc.msg) || te.Pos != pos {
			t.Errorf("Case %v: want Op %q, Msg containing %q, Pos %q; got %q, %q, %q", tc.name, tc.op, tc.msg, pos, te.Op, te.Msg, te.Pos)
		}
		if want := "tape: " + tc.op + " at " + pos + ": "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Case %v: message %q, want prefix %q", tc.name, err, want)
		}
	}
}

func TestTraceOtherErrors(t *testing.T) {
	t.Parallel()
	var other tape.V
	if _, err := tape.Trace("other", withNames("z"), func(in []tape.V) []tape.V { other = in[0]; return in }); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    func(in []tape.V) []tape.V
		want string
		te   bool // a *TraceError
	}{
		{"output from another trace", func(in []tape.V) []tape.V { return []tape.V{other} }, "tape: Build: argument 1 is from another trace", true},
		{"zero output", func(in []tape.V) []tape.V { return []tape.V{in[0], {}} }, "tape: Build: argument 2 is the zero V", true},
		{"runtime error", func(in []tape.V) []tape.V { return in[:5] }, "tape: tracing runtime error: runtime error: slice bounds out of range", false},
		{"panic string", func(in []tape.V) []tape.V { panic("boom") }, "tape: tracing panic string: panic: boom", false},
	} {
		_, err := tape.Trace(tc.name, withNames("a"), tc.f)
		var te *tape.TraceError
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || errors.As(err, &te) != tc.te {
			t.Errorf("Case %v: want an error starting %q (TraceError %v), got %v", tc.name, tc.want, tc.te, err)
		}
	}
	var re runtime.Error
	_, err := tape.Trace("wrap", withNames("a"), func(in []tape.V) []tape.V { return in[:2] })
	if !errors.As(err, &re) {
		t.Errorf("Case wrap: want the runtime.Error wrapped, got %v", err)
	}
	// Catch, for callers that build with a Builder directly.
	b := tape.NewBuilder("direct", true)
	x := b.Input("x", false)
	err = tape.Catch("direct", func() { b.Emit(ops.OpAdd, 0, x.ID()) })
	var te *tape.TraceError
	if !errors.As(err, &te) || te.Op != "Add" || !strings.Contains(te.Msg, "Add takes 2 arguments, got 1") {
		t.Errorf("Case Catch: want a *TraceError for Add, got %v", err)
	}
	if err := tape.Catch("fine", func() {}); err != nil {
		t.Errorf("Case Catch: want nil, got %v", err)
	}
	if got := (&tape.TraceError{Op: "Mul", Msg: "bad"}).Error(); got != "tape: Mul: bad" {
		t.Errorf("Case TraceError without Pos: want %q, got %q", "tape: Mul: bad", got)
	}
}

func TestProgramString(t *testing.T) {
	t.Parallel()
	p := mustTrace(t, "show", []tape.Input{{Name: "x"}, {Name: "w", Shared: true}}, func(in []tape.V) []tape.V {
		x, w := in[0], in[1]
		s := tape.Solve([]tape.V{x, w, w, x}, []tape.V{x.Powi(-2), x.MulC(0.5)})
		return []tape.V{s[0], s[1].Add(w)}
	})
	p.Outputs[1].Sum = true
	want := `program show: 2 inputs, 10 values, 2 outputs
v0 = Input [0] x
v1 = Input [1] w shared
v2 = Powi [-2] v0
v3 = Const [0.5]
v4 = Mul v3 v0
v5 = LUFactor [2] v0 v1 v1 v0
v6 = LUSolve v5 v2 v4
v7 = Extract [0] v6
v8 = Extract [1] v6
v9 = Add v8 v1
out 0 out0 = v7
out 1 out1 = v9 (summed)
`
	if got := p.String(); got != want {
		t.Errorf("Case show: String gave\n%s\nwant\n%s", got, want)
	}
	if p.Len() != 10 || p.Width(5) != 6 || p.Width(6) != 2 || p.Width(7) != 1 {
		t.Errorf("Case show: Len %d, widths %d %d %d; want 10, 6, 2, 1", p.Len(), p.Width(5), p.Width(6), p.Width(7))
	}
	got2 := p.Eval(nil, []float64{2, 1})
	// W = [[2 1] [1 2]], b = [1/4, 1]: x = W⁻¹b = [-1/6, 7/12].
	if !within(got2[0], -1.0/6, 1e-15, 0) || !within(got2[1], 7.0/12+1, 1e-15, 0) {
		t.Errorf("Case show: Eval want [%v %v], got %v", -1.0/6, 7.0/12+1, got2)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	in := func(k float64) tape.Value { return tape.Value{Op: ops.OpInput, Aux: k} }
	x := []tape.Input{{Name: "x"}}
	for _, tc := range []struct {
		name string
		p    tape.Program
		want string
	}{
		{"ok", tape.Program{Inputs: x, Values: []tape.Value{in(0), {Op: ops.OpSin, Args: []tape.ID{0}}},
			Outputs: []tape.Output{{ID: 1}}}, ""},
		{"invalid op", tape.Program{Values: []tape.Value{{Op: ops.OpInvalid}}}, "has invalid op"},
		{"op out of range", tape.Program{Values: []tape.Value{{Op: ops.Op(ops.NumOps)}}}, "has invalid op"},
		{"forward reference", *invalidProgram(), "uses v2, which is not defined before it"},
		{"self reference", tape.Program{Inputs: x, Values: []tape.Value{in(0), {Op: ops.OpSin, Args: []tape.ID{1}}}}, "not defined before it"},
		{"input range", tape.Program{Inputs: x, Values: []tape.Value{in(1)}}, "is input 1, out of range or repeated"},
		{"input repeated", tape.Program{Inputs: x, Values: []tape.Value{in(0), in(0)}}, "out of range or repeated"},
		{"input missing", tape.Program{Inputs: []tape.Input{{Name: "x"}, {Name: "y"}}, Values: []tape.Value{in(0)}}, "input 1 (y) has no Input value"},
		{"arity", tape.Program{Inputs: x, Values: []tape.Value{in(0), {Op: ops.OpAdd, Args: []tape.ID{0}}}}, "Add takes 2 arguments, got 1"},
		{"extract width", tape.Program{Inputs: x, Values: []tape.Value{in(0),
			{Op: ops.OpLUFactor, Aux: 1, Args: []tape.ID{0}},
			{Op: ops.OpLUSolve, Args: []tape.ID{1, 0}},
			{Op: ops.OpExtract, Aux: 1, Args: []tape.ID{2}}}}, "extracts component 1 of a tuple of width 1"},
		{"output range", tape.Program{Inputs: x, Values: []tape.Value{in(0)}, Outputs: []tape.Output{{ID: 1}}}, "output 0 refers to v1, out of range"},
		{"output tuple", tape.Program{Inputs: x, Values: []tape.Value{in(0), {Op: ops.OpLUFactor, Aux: 1, Args: []tape.ID{0}}},
			Outputs: []tape.Output{{ID: 1}}}, "output 0 is a tuple"},
	} {
		err := tc.p.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Case %v: want no error, got %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Case %v: want an error containing %q, got %v", tc.name, tc.want, err)
		}
	}
}

// TestBuilder covers the Builder API used by callers that trace without
// Trace (package ode, package scan).
func TestBuilder(t *testing.T) {
	t.Parallel()
	b := tape.NewBuilder("b", true)
	y := b.Inputs("y", 2, false)
	s := b.Input("s", true)
	if b.Len() != 3 || b.Op(y[1].ID()) != ops.OpInput || b.Aux(y[1].ID()) != 1 || y[0].Builder() != b {
		t.Fatalf("Case inputs: Len %d, Op %v, Aux %v", b.Len(), b.Op(y[1].ID()), b.Aux(y[1].ID()))
	}
	c := b.ConstV(2)
	if b.ConstV(2).ID() != c.ID() {
		t.Errorf("Case constants: want the same ID for the same constant")
	}
	u := y[0].Mul(s).Add(c)
	if v := y[0].Mul(s).Add(c); v.ID() != u.ID() {
		t.Errorf("Case CSE: want the same value, got v%d and v%d", u.ID(), v.ID())
	}
	if got := b.Args(u.ID()); len(got) != 2 {
		t.Errorf("Case Args: want 2 arguments, got %v", got)
	}
	p, err := b.Build(u, y[1].Sqrt())
	if err != nil {
		t.Fatal(err)
	}
	if p.Inputs[0].Name != "y[0]" || p.Inputs[1].Name != "y[1]" || p.Inputs[2].Name != "s" || !p.Inputs[2].Shared {
		t.Errorf("Case names: got %+v", p.Inputs)
	}
	got := p.Eval(nil, []float64{3, 16, 0.5})
	if got[0] != 3.5 || got[1] != 4 {
		t.Errorf("Case Eval: want [3.5 4], got %v", got)
	}
	// A tracing builder does not merge values.
	nb := tape.NewBuilder("nb", false)
	z := nb.Input("z", false)
	if z.Sin().ID() == z.Sin().ID() {
		t.Errorf("Case no CSE: want two values")
	}
}
