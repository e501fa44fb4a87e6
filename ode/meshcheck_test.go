package ode_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestGradMeshSteps checks that Grad refuses a mesh with a negative,
// infinite or NaN step size within a trajectory's length, naming the step
// and the trajectory, and ignores what lies past a trajectory's length.
func TestGradMeshSteps(t *testing.T) {
	t.Parallel()
	f := lorenzField()
	p := lorenzEnsemble(f, []float64{20, 22, 24, 26, 28, 30})
	sv, err := ode.NewSolver(f, &ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := sv.Record(&p)
	if err != nil {
		t.Fatal(err)
	}
	short := 0 // the shortest trajectory, which has rows past its end
	for i, l := range m.Len {
		if l < m.Len[short] {
			short = i
		}
	}
	if m.Len[short] == m.Rows {
		t.Fatal("every trajectory has the same length; the test needs a shorter one")
	}
	loss := ode.SumSquares()
	for _, c := range []struct {
		name string
		s, i int
		h    float64
		want string // "" for no error
	}{
		{"negative", 2, 3, -1e-3, "step 2 of trajectory 3 is -0.001"},
		{"NaN", 0, 1, math.NaN(), "step 0 of trajectory 1 is NaN"},
		{"infinite", m.Len[4] - 1, 4, math.Inf(1), "is +Inf; step sizes must be finite and non-negative"},
		{"past the end", m.Len[short], short, math.NaN(), ""},
	} {
		bad := *m
		bad.H = slices.Clone(m.H)
		bad.H[c.s*m.N+c.i] = c.h
		_, err := sv.Grad(nil, &p, loss, &bad)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}
