package tape_test

import (
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
