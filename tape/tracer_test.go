package tape_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// TestTracerRetrace checks tape.Tracer.Retrace against tape.Trace on
// random polynomial functions (constants included, so that the builder's
// map is used and cleared): a trace of another function is a new program
// SameAs Trace's, validated, whose values survive later retraces (it
// shares no storage with the tracer); a trace of the same function
// returns the program given, allocating nothing; a panic in the function
// is an error, and the tracer works after it.
func TestTracerRetrace(t *testing.T) {
	rnd := rand.New(rand.NewPCG(23, 40))
	inputs := []tape.Input{{Name: "x"}, {Name: "y"}, {Name: "s", Shared: true}}
	// fn returns a function of its inputs: terms of random products of
	// them, with random constants, seeded by k.
	fn := func(k int) func(in []tape.V) []tape.V {
		r := rand.New(rand.NewPCG(uint64(k), 7))
		terms := 2 + r.IntN(4)
		picks := make([][2]int, terms)
		consts := make([]float64, terms)
		for i := range picks {
			picks[i] = [2]int{r.IntN(3), r.IntN(3)}
			consts[i] = float64(r.IntN(5))
		}
		out := make([]tape.V, 2)
		return func(in []tape.V) []tape.V {
			s := in[0].Const(consts[0])
			for i, p := range picks {
				s = s.Add(in[p[0]].Mul(in[p[1]]).Mul(in[0].Const(consts[i])))
			}
			out[0], out[1] = s, s.Square()
			return out
		}
	}
	var tr tape.Tracer
	var kept []*tape.Program // every program Retrace returned new
	var keptWant []*tape.Program
	var last *tape.Program
	for trial := range 40 {
		k := rnd.IntN(6)
		f := fn(k)
		want, err := tape.Trace("f", inputs, f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tr.Retrace("f", inputs, f, last)
		if err != nil {
			t.Fatal(err)
		}
		same := last != nil && want.SameAs(last)
		switch {
		case same && got != last:
			t.Errorf("trial %d: the trace of the same function is not the program given", trial)
		case !same && got == last:
			t.Errorf("trial %d: the trace of another function is the program given", trial)
		case !got.SameAs(want):
			t.Errorf("trial %d: Retrace's program differs from Trace's", trial)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("trial %d: %v", trial, err)
		}
		if !same {
			kept, keptWant = append(kept, got), append(keptWant, want)
		}
		if same {
			if a := testing.AllocsPerRun(5, func() {
				if p, _ := tr.Retrace("f", inputs, f, last); p != last {
					t.Errorf("trial %d: the program given not returned", trial)
				}
			}); a != 0 {
				t.Errorf("trial %d: Retrace of the same program allocates %v times, want 0", trial, a)
			}
		}
		last = got
	}
	for i, p := range kept {
		if !p.SameAs(keptWant[i]) {
			t.Errorf("program %d changed after later retraces", i)
		}
	}
	if _, err := tr.Retrace("f", inputs, func(in []tape.V) []tape.V { panic("boom") }, last); err == nil {
		t.Error("a panic in the traced function: no error")
	}
	f := fn(3)
	want, _ := tape.Trace("f", inputs, f)
	if got, err := tr.Retrace("f", inputs, f, nil); err != nil || !got.SameAs(want) {
		t.Errorf("after a panic: err %v, same as Trace's %t", err, err == nil && got.SameAs(want))
	}
}

// BenchmarkRetrace is a Tracer's retrace of a loss of 1,000 save times
// of four components (the sum of the 4,000 saved values' squares, as
// odetest.SaveRatio's loss) that is the program given: what package ode
// pays on every Grad call of issue 25's save-ratio benchmark.
//
//	go test ./tape -run '^$' -bench Retrace -count 5
func BenchmarkRetrace(b *testing.B) {
	inputs := make([]tape.Input, 4000)
	for i := range inputs {
		inputs[i] = tape.Input{Name: fmt.Sprintf("ys[%d]", i)}
	}
	out := make([]tape.V, 1)
	f := func(ys []tape.V) []tape.V {
		s := ys[0].Square()
		for _, x := range ys[1:] {
			s = s.Add(x.Square())
		}
		out[0] = s
		return out
	}
	var tr tape.Tracer
	last, err := tr.Retrace("loss", inputs, f, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if p, _ := tr.Retrace("loss", inputs, f, last); p != last {
			b.Fatal("the program given not returned")
		}
	}
}

// TestTracerRetraceDiverge checks Retrace against Trace where the trace
// is the program given up to a point and then differs (Builder.match's
// views end there): a constant, an op, an input's name or an output
// changed at a random place, values added at the end or left off, and a
// panic part way; the program given stays as it was.
func TestTracerRetraceDiverge(t *testing.T) {
	rnd := rand.New(rand.NewPCG(25, 45))
	const n = 40
	inputs := func(rename int) []tape.Input {
		in := make([]tape.Input, n)
		for i := range in {
			in[i] = tape.Input{Name: fmt.Sprintf("x[%d]", i), Shared: i == n-1}
		}
		if rename >= 0 {
			in[rename].Name = "renamed"
		}
		return in
	}
	// fn is Σ_i c_i·x_i² over the first terms inputs, with the constant
	// of term konst changed, term mulAt a Mul where it is an Add, a panic
	// at term boom (each -1 for none), and a second output where two.
	fn := func(terms, konst, mulAt, boom int, two bool) func(in []tape.V) []tape.V {
		return func(in []tape.V) []tape.V {
			s := in[0].Square()
			for i := 1; i < terms; i++ {
				if i == boom {
					panic("boom")
				}
				c := float64(i%3 + 1)
				if i == konst {
					c = 7
				}
				x := in[i].Square().Mul(in[i].Const(c))
				if i == mulAt {
					s = s.Mul(x)
				} else {
					s = s.Add(x)
				}
			}
			if two {
				return []tape.V{s, s.Neg()}
			}
			return []tape.V{s}
		}
	}
	base := fn(n, -1, -1, -1, false)
	var tr tape.Tracer
	last, err := tr.Retrace("f", inputs(-1), base, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := tape.Trace("f", inputs(-1), base)
	for trial := range 60 {
		at := 1 + rnd.IntN(n-1)
		terms, konst, mulAt, boom, rename, two := n, -1, -1, -1, -1, false
		kind := []string{"same", "const", "op", "name", "output", "more", "fewer", "panic"}[trial%8]
		switch kind {
		case "const":
			konst = at
		case "op":
			mulAt = at
		case "name":
			rename = at
		case "output":
			two = true
		case "more":
			terms = n // (with the inputs of the base, one more term: x[0] again)
			f0 := fn(terms, -1, -1, -1, false)
			f := func(in []tape.V) []tape.V {
				out := f0(in)
				return []tape.V{out[0].Add(in[0])}
			}
			checkRetrace(t, &tr, trial, kind, inputs(-1), f, last, ref)
			continue
		case "fewer":
			terms = at
		case "panic":
			boom = at
		}
		f := fn(terms, konst, mulAt, boom, two)
		if kind == "panic" {
			if _, err := tr.Retrace("f", inputs(rename), f, last); err == nil {
				t.Errorf("trial %d: a panic part way: no error", trial)
			}
		} else {
			checkRetrace(t, &tr, trial, kind, inputs(rename), f, last, ref)
		}
		if !last.SameAs(ref) {
			t.Fatalf("trial %d (%s): the program given changed", trial, kind)
		}
		if trial%5 == 0 {
			// A trace that matches, then one with no program given.
			if got, err := tr.Retrace("f", inputs(-1), base, last); err != nil || got != last {
				t.Fatalf("trial %d: the base traced again: %v, the program given %t", trial, err, got == last)
			}
			checkRetrace(t, &tr, trial, "nil", inputs(-1), fn(n, at, -1, -1, false), nil, ref)
		}
	}
}

// checkRetrace checks one Retrace of f against the program given last
// (ref: a trace of it of its own) and against Trace.
func checkRetrace(t *testing.T, tr *tape.Tracer, trial int, kind string, in []tape.Input, f func([]tape.V) []tape.V, last, ref *tape.Program) {
	t.Helper()
	want, err := tape.Trace("f", in, f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tr.Retrace("f", in, f, last)
	if err != nil {
		t.Fatalf("trial %d (%s): %v", trial, kind, err)
	}
	same := want.SameAs(ref)
	if last == nil {
		same = false
	}
	switch {
	case kind == "nil" && last != nil, same != (kind == "same"):
		t.Fatalf("trial %d (%s): the case is wrong: Trace's program same as the given %t", trial, kind, same)
	case same && got != last, !same && got == last:
		t.Errorf("trial %d (%s): returned the program given %t, want %t", trial, kind, got == last, same)
	case !got.SameAs(want):
		t.Errorf("trial %d (%s): Retrace's program differs from Trace's", trial, kind)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("trial %d (%s): %v", trial, kind, err)
	}
	if last != nil && !last.SameAs(ref) {
		t.Fatalf("trial %d (%s): the program given changed", trial, kind)
	}
}
