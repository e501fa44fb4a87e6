package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostEngineInputChecks checks that the inputs the GPU engine checks
// as it stages them (ode.CheckingExecutor: Y0 and P finite, a resident
// mesh's lengths) are refused with the errors of the CPU engine, which
// package ode checks itself, word for word: a value that is not finite
// anywhere in Y0 or P, in float64 and float32, one in each (Y0's error
// first, as package ode checks Y0 first), and with another error that
// package ode finds after it; and that results are unchanged where the
// inputs are good.
func TestHostEngineInputChecks(t *testing.T) {
	needHost(t)
	const n = 40
	c := lorenzCase(n, 1e-4)
	cpu, err := ode.NewSolver(c.prob.Field, &c.set)
	if err != nil {
		t.Fatal(err)
	}
	for _, eng := range []*Engine{hostF64, hostF32} {
		set := c.set
		set.Engine = eng.name
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name   string
			modify func(p *ode.Problem)
			want   string // in the error
		}{
			{"Y0 NaN", func(p *ode.Problem) { p.Y0[3*17+1] = math.NaN() }, "Y0[52] = NaN is not finite (trajectory 17, component 1)"},
			{"Y0 -Inf last", func(p *ode.Problem) { p.Y0[3*n-1] = math.Inf(-1) }, fmt.Sprintf("Y0[%d] = -Inf is not finite (trajectory %d, component 2)", 3*n-1, n-1)},
			{"P +Inf", func(p *ode.Problem) { p.P[3*5+2] = math.Inf(1) }, "P[17] = +Inf is not finite"},
			{"P first", func(p *ode.Problem) { p.P[0] = math.NaN() }, "P[0] = NaN is not finite"},
			{"Y0 after P", func(p *ode.Problem) { p.P[1] = math.NaN(); p.Y0[3*30] = math.Inf(1) }, "Y0[90] = +Inf is not finite (trajectory 30, component 0)"},
			{"Y0 and SaveAt", func(p *ode.Problem) { p.Y0[7] = math.NaN(); p.SaveAt = []float64{0.5, 0.25} }, "Y0[7] = NaN is not finite"},
			{"SaveAt alone", func(p *ode.Problem) { p.SaveAt = []float64{0.5, 0.25} }, "SaveAt is not sorted"},
		} {
			p := c.prob
			p.Y0, p.P = slices.Clone(c.prob.Y0), slices.Clone(c.prob.P)
			tc.modify(&p)
			_, gerr := sv.Grad(nil, &p, c.loss, nil)
			_, werr := cpu.Grad(nil, &p, c.loss, nil)
			if gerr == nil || werr == nil || gerr.Error() != werr.Error() || !strings.Contains(gerr.Error(), tc.want) {
				t.Errorf("%s, %s: error %v\nwant the CPU engine's %v (with %q)", eng.name, tc.name, gerr, werr, tc.want)
			}
		}
		// Good inputs: the results of checks made here.
		got, err := sv.Grad(nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		if eng == hostF64 {
			want, err := cpu.Grad(nil, &c.prob, c.loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got.Loss-want.Loss) > 1e-9*math.Abs(want.Loss) {
				t.Errorf("%s: loss %v, the CPU engine's %v", eng.name, got.Loss, want.Loss)
			}
		}
	}
}

// TestHostEngineResidentChecks checks the replay checks of a mesh whose
// steps are resident on the engine: a length outside [0, Rows] is refused
// with package ode's error (the engine checks it as it stages it), a mesh
// that Record returned with failed trajectories is refused, and a
// resident mesh whose memory a later record reused (a Gradient passed
// back) is checked in full again, not replayed on its voucher.
func TestHostEngineResidentChecks(t *testing.T) {
	needHost(t)
	c := lorenzCase(48, 1e-6)
	set := c.set
	set.Engine = residentEngine.name
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := sv.Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := rec.Mesh
	if m.Resident == nil {
		t.Fatal("the recorded mesh is not resident: the test checks nothing")
	}
	want, err := sv.Grad(nil, &c.prob, c.loss, m)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []int{m.Rows + 1, -1, math.MaxInt32 + 1} {
		const i = 29
		old := m.Len[i]
		m.Len[i] = bad
		_, err := sv.Grad(nil, &c.prob, c.loss, m)
		m.Len[i] = old
		msg := fmt.Sprintf("ode: mesh: trajectory %d has Len %d, outside [0, Rows = %d]", i, bad, m.Rows)
		if err == nil || err.Error() != msg {
			t.Errorf("Len %d: error %v, want %q", bad, err, msg)
		}
	}
	// With good lengths again: the same gradient.
	again, err := sv.Grad(nil, &c.prob, c.loss, m)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.P, want.P) || again.Loss != want.Loss {
		t.Error("the gradient on the mesh changed after refused calls")
	}

	// A record with failures (too few steps) is never replayed.
	few := set
	few.MaxSteps = 10
	svf, err := ode.NewSolver(c.prob.Field, &few)
	if err != nil {
		t.Fatal(err)
	}
	mf, _, err := svf.Record(&c.prob)
	if err == nil {
		t.Fatal("a record of 10 steps did not fail")
	}
	if _, err := svf.Grad(nil, &c.prob, c.loss, mf); err == nil || !strings.Contains(err.Error(), "failed trajectory") {
		t.Errorf("a recorded mesh with failures: %v, want it refused", err)
	}

	// A Gradient passed back to a record that fails: its mesh's memory
	// and statuses now hold that record's, and the mesh kept from before
	// is checked again, not trusted.
	g, err := svf.Grad(nil, &c.prob, c.loss, nil)
	if err == nil {
		t.Fatal("a gradient of 10 steps did not fail")
	}
	g, err = sv.Grad(nil, &c.prob, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept := g.Mesh
	if _, err := svf.Grad(g, &c.prob, c.loss, nil); err == nil {
		t.Fatal("a gradient of 10 steps did not fail")
	}
	if kept.Resident == nil || kept.Resident.Released() {
		t.Skip("the failed record did not reuse the mesh's device memory")
	}
	if _, err := sv.Grad(nil, &c.prob, c.loss, kept); err == nil {
		t.Error("a mesh whose memory a failed record reused was replayed")
	}
}

// TestOrderedSum checks that the loss terms added by blocks as the result
// loop's workers finish them, in any order and from several goroutines,
// sum bit for bit as the in-order loop does.
func TestOrderedSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, nb := range []int{1, 2, 7, 64} {
		const per = 100
		terms := make([]float64, nb*per)
		for i := range terms {
			terms[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
		}
		want := 0.0
		for _, x := range terms {
			want += x
		}
		for round := range 20 {
			s := &orderedSum{done: make([]bool, nb), terms: func(b int) []float64 { return terms[b*per : (b+1)*per] }}
			var wg sync.WaitGroup
			for _, b := range rng.Perm(nb) {
				wg.Add(1)
				go func() { defer wg.Done(); s.add(b) }()
			}
			wg.Wait()
			if s.sum != want || s.next != nb {
				t.Fatalf("%d blocks, round %d: sum %v (%d blocks added), want %v", nb, round, s.sum, s.next, want)
			}
		}
	}
}
