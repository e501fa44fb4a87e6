package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// A kernel past the engine's bound on its source is refused, with an
// error that names its size, the limit and the CPU engine; within the
// bound the same problem runs.
func TestHostEngineSourceLimit(t *testing.T) {
	needHost(t)
	t.Parallel()
	c := lorenzCase(8, 1e-6)
	size := gradSource(t, c)
	for _, tc := range []struct {
		name  string
		limit int
		ok    bool
	}{
		{"below", size / 2, false},
		{"above", size + 1<<20, true},
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
			if se.Limit != tc.limit || se.Bytes != size {
				t.Errorf("limit %d: %+v, want the source's %d bytes", tc.limit, se, size)
			}
			for _, want := range []string{"CPU engine", se.Method, set.Engine, "MB"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

func TestSourceSizeError(t *testing.T) {
	t.Parallel()
	c := lorenzCase(8, 1e-6)
	ex := newExecutor(nil, c.solver(t, "cpu").Plan(), Float64, "cuda-size", Tuning{maxSource: 1000})
	if err := ex.checkSourceSize(1000); err != nil {
		t.Errorf("a source of exactly the bound: %v", err)
	}
	err := ex.checkSourceSize(1001)
	var se *SizeError
	if !errors.As(err, &se) || se.Bytes != 1001 || se.Limit != 1000 || se.Field != c.prob.Field.Name {
		t.Errorf("a source over the bound: %+v (%v), want a *SizeError of 1001 bytes over 1000, naming field %s", se, err, c.prob.Field.Name)
	}
}

// gradSource returns the bytes of the source of the kernel of c's
// gradient with its record, in the thread layout.
func gradSource(t *testing.T, c engineCase) int {
	t.Helper()
	return len(kernelSource(t, c, ode.OpGrad, false))
}
