package tape_test

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// TestSameAs checks Program.SameAs against Hash: two traces of one
// function are the same (whatever the programs' names), and a trace that
// differs in an input's name or sharing, an op, a constant, an argument,
// an output or a callee is not, and hashes differently.
func TestSameAs(t *testing.T) {
	trace := func(name string, in []tape.Input, f func(v []tape.V) []tape.V) *tape.Program {
		t.Helper()
		p, err := tape.Trace(name, in, f)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	xy := []tape.Input{{Name: "x"}, {Name: "y"}}
	base := func(v []tape.V) []tape.V { return []tape.V{v[0].Mul(v[1]).AddC(2)} }
	callee := trace("g", xy, base)
	want := trace("f", xy, base)
	for _, c := range []struct {
		name string
		p    *tape.Program
		same bool
	}{
		{"the same trace, another name", trace("other", xy, base), true},
		{"an input's name", trace("f", []tape.Input{{Name: "x"}, {Name: "z"}}, base), false},
		{"an input shared", trace("f", []tape.Input{{Name: "x"}, {Name: "y", Shared: true}}, base), false},
		{"an op", trace("f", xy, func(v []tape.V) []tape.V { return []tape.V{v[0].Add(v[1]).AddC(2)} }), false},
		{"a constant", trace("f", xy, func(v []tape.V) []tape.V { return []tape.V{v[0].Mul(v[1]).AddC(3)} }), false},
		{"the arguments' order", trace("f", xy, func(v []tape.V) []tape.V { return []tape.V{v[1].Mul(v[0]).AddC(2)} }), false},
		{"another output", trace("f", xy, func(v []tape.V) []tape.V { return append(base(v), v[0]) }), false},
		{"a callee", trace("f", xy, func(v []tape.V) []tape.V { return tape.CallFunc(callee, v) }), false},
	} {
		if got := c.p.SameAs(want); got != c.same || want.SameAs(c.p) != got {
			t.Errorf("%s: SameAs %t (reversed %t), want %t", c.name, got, want.SameAs(c.p), c.same)
		}
		if (c.p.Hash() == want.Hash()) != c.same {
			t.Errorf("%s: equal hashes %t, want %t", c.name, c.p.Hash() == want.Hash(), c.same)
		}
	}
	// Callees compared in turn.
	c1 := trace("f", xy, func(v []tape.V) []tape.V { return tape.CallFunc(callee, v) })
	c2 := trace("f", xy, func(v []tape.V) []tape.V { return tape.CallFunc(trace("g", xy, base), v) })
	other := trace("f", xy, func(v []tape.V) []tape.V {
		return tape.CallFunc(trace("g", xy, func(v []tape.V) []tape.V { return []tape.V{v[0].Mul(v[1]).AddC(5)} }), v)
	})
	if !c1.SameAs(c2) || c1.SameAs(other) {
		t.Errorf("calls: SameAs of equal callees %t (want true), of different callees %t (want false)", c1.SameAs(c2), c1.SameAs(other))
	}
}
