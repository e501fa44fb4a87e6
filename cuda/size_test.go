package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// A kernel past the engine's bound on its source is refused, before its
// source is written where the plan's size predicts it, with an error that
// names the size, the limit and the CPU engine; within the bound the same
// problem runs. A source past the bound that the estimate let through is
// refused too (the check after generation).
func TestHostEngineSourceLimit(t *testing.T) {
	needHost(t)
	t.Parallel()
	c := lorenzCase(8, 1e-6)
	n, err := planValues(c.solver(t, "cpu").Plan(), true)
	if err != nil {
		t.Fatal(err)
	}
	est := sourcePerValue * n
	for _, tc := range []struct {
		name      string
		limit     int
		estimated bool // refused from the estimate
		ok        bool
	}{
		{"below-the-estimate", est / 2, true, false},
		{"above", est + 1<<20, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set := c.set
			set.Engine = tuned(t, "cuda-host", Tuning{maxSource: tc.limit})
			sv, err := ode.NewSolver(c.prob.Field, &set)
			if err != nil {
				t.Fatal(err)
			}
			_, err = sv.Grad(nil, &c.prob, c.loss, nil)
			if tc.ok {
				if err != nil {
					t.Fatalf("limit %d: %v", tc.limit, err)
				}
				return
			}
			var se *SizeError
			if !errors.As(err, &se) || !errors.Is(err, ode.ErrTooLarge) {
				t.Fatalf("limit %d: error %v, want a *SizeError wrapping ode.ErrTooLarge", tc.limit, err)
			}
			if se.Estimated != tc.estimated || se.Limit != tc.limit || se.Bytes <= tc.limit {
				t.Errorf("limit %d: %+v, want estimated %t and the size past the limit", tc.limit, se, tc.estimated)
			}
			for _, want := range []string{"CPU engine", se.Method, set.Engine, "MB"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

func TestSourceSizeAfterGeneration(t *testing.T) {
	t.Parallel()
	c := lorenzCase(8, 1e-6)
	ex := newExecutor(nil, c.solver(t, "cpu").Plan(), Float64, "cuda-size", Tuning{maxSource: 1000})
	if err := ex.checkSourceSize(1000, true); err != nil {
		t.Errorf("a source of exactly the bound: %v", err)
	}
	err := ex.checkSourceSize(1001, true)
	var se *SizeError
	if !errors.As(err, &se) || se.Estimated || se.Bytes != 1001 || se.Limit != 1000 || se.Field != c.prob.Field.Name {
		t.Errorf("a source over the bound: %+v (%v), want a *SizeError of 1001 bytes over 1000, not estimated, naming field %s", se, err, c.prob.Field.Name)
	}
}
