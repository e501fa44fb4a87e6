package cuda

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestLRU: the cache keeps the most recently used entries up to its
// limit, a lookup counts as a use, and a lower limit applies at the next
// insertion.
func TestLRU(t *testing.T) {
	t.Parallel()
	var limit atomic.Int64
	limit.Store(2)
	c := newLRU[string, int](&limit)
	c.add("a", 1)
	c.add("b", 2)
	if v, ok := c.get("a"); !ok || v != 1 {
		t.Fatalf("get a = %v, %v", v, ok)
	}
	c.add("c", 3) // forgets b, the least recently used
	if _, ok := c.get("b"); ok {
		t.Errorf("b kept beyond the limit")
	}
	for k, want := range map[string]int{"a": 1, "c": 3} {
		if v, ok := c.get(k); !ok || v != want {
			t.Errorf("get %s = %v, %v; want %v", k, v, ok, want)
		}
	}
	c.add("c", 4)
	if v, _ := c.get("c"); v != 4 || c.len() != 2 {
		t.Errorf("replaced c = %v with %d entries", v, c.len())
	}
	limit.Store(1)
	c.add("d", 5)
	if c.len() != 1 {
		t.Errorf("%d entries under a limit of 1", c.len())
	}
}

// TestSetMaxCache: with a bound of one kernel, a plan's forward-solve
// kernel is forgotten after a gradient and compiled again (with the same
// results); with the default bound it is kept. (Not parallel: the bound
// is the package's.)
func TestSetMaxCache(t *testing.T) {
	needHost(t)
	c := lorenzCase(8, 1e-6)
	// A plan of its own (the field's name enters ode's plan cache), so
	// that no other test's Solver shares its kernels.
	c.prob.Field.Name = "lorenz-maxcache"
	sv := c.solver(t, "cuda-host")
	solve := func() (*ode.Solution, time.Duration) {
		var tr Trace
		sol, err := sv.SolveContext(WithTrace(t.Context(), &tr), &c.prob)
		if err != nil {
			t.Fatal(err)
		}
		return sol, tr.Stats().Compile
	}
	prev := SetMaxCache(1)
	defer SetMaxCache(prev)
	if prev != defaultMaxCache {
		t.Errorf("SetMaxCache returned %d, want the default %d", prev, defaultMaxCache)
	}
	first, _ := solve()
	if _, err := sv.Grad(nil, &c.prob, c.loss, nil); err != nil {
		t.Fatal(err)
	}
	again, compile := solve()
	if compile == 0 {
		t.Errorf("bound 1: the forward kernel was kept beside the gradient's")
	}
	for k := range first.Y {
		if first.Y[k] != again.Y[k] {
			t.Fatalf("y[%d] = %v after the kernel was forgotten, %v before", k, again.Y[k], first.Y[k])
		}
	}
	SetMaxCache(0)
	if _, err := sv.Grad(nil, &c.prob, c.loss, nil); err != nil {
		t.Fatal(err)
	}
	if _, compile := solve(); compile != 0 {
		t.Errorf("default bound: the forward kernel was compiled again (%v)", compile)
	}
}

// TestKernelsShared: a second Solver of the same field and settings (the
// same plan, from ode's plan cache) runs the kernels the first compiled,
// with the same results bit for bit, also side by side with others; a
// Solver of another tuning compiles its own.
func TestKernelsShared(t *testing.T) {
	needHost(t)
	c := lorenzCase(8, 1e-7)
	grad := func(sv *ode.Solver) (*ode.Gradient, time.Duration) {
		g, st := c.tracedGrad(t, sv)
		return g, st.Compile
	}
	first, _ := grad(c.solver(t, "cuda-host"))
	second, compile := grad(c.solver(t, "cuda-host"))
	if compile != 0 {
		t.Errorf("the second Solver of the plan compiled its kernel again (%v)", compile)
	}
	for _, a := range []struct {
		what      string
		got, want []float64
	}{{"P", second.P, first.P}, {"Y0", second.Y0, first.Y0}, {"Y", second.Solution.Y, first.Solution.Y}} {
		for k := range a.want {
			if math.Float64bits(a.got[k]) != math.Float64bits(a.want[k]) {
				t.Fatalf("%s[%d] = %v on the second Solver, %v on the first", a.what, k, a.got[k], a.want[k])
			}
		}
	}
	// Solvers of the plan side by side: the set's kernels and facts are
	// shared under its lock, each executor's memory its own.
	done := make(chan *ode.Gradient)
	for range 3 {
		sv := c.solver(t, "cuda-host")
		go func() {
			g, err := sv.Grad(nil, &c.prob, c.loss, nil)
			if err != nil {
				t.Error(err)
			}
			done <- g
		}()
	}
	for range 3 {
		if g := <-done; g != nil && math.Float64bits(g.Loss) != math.Float64bits(first.Loss) {
			t.Errorf("a Solver run beside others: loss %v, want %v", g.Loss, first.Loss)
		}
	}
	if _, compile := grad(c.solver(t, tuned(t, "cuda-host", Tuning{unrolled: true}))); compile == 0 {
		t.Error("a Solver of another tuning found the first tuning's kernel")
	}
}
