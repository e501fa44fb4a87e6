package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// From d = 16 the kernels of an explicit method, in the thread layout,
// emit the runs of per-component values (stage combinations, their
// cotangents, the error norm, the extension's coefficients) as loops over
// the components (kernelgen's reroll.go). Their results are the unrolled
// kernels' bit for bit: the solve, the gradient with its record and the
// gradient on a given mesh of Lorenz-96 (d = 24) with save times, with
// Tsit5 and Vern7; and they agree with the CPU engine.
func TestHostEngineRerolled(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles eight kernels of d = 24; skipped with -short")
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
		c := lorenz96Case(5, 24, m)
		c.prob.SaveAt = []float64{0.1, 0.25, 0.4}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for _, op := range []ode.Op{ode.OpRecord, ode.OpGrad} {
				if src := kernelSource(t, c, op, false); !strings.Contains(src, "GS_LOOP for") {
					t.Fatalf("%v: the kernel has no loops", op)
				}
			}
			sameRuns(t, c, c.solver(t, "cuda-host"), c.solver(t, tuned(t, "cuda-host", Tuning{unrolled: true})))
			compareEngines(t, "cuda-host", c, caseOpts{ops: []string{"solve", "grad"}})
		})
	}
}

// kernelSource returns the source of the kernel that runs c's op in the
// thread layout, rerolled or, with unrolled, not.
func kernelSource(t *testing.T, c engineCase, op ode.Op, unrolled bool) string {
	t.Helper()
	j := jobOf(t, c, op)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	v := kernelgen.ConfigOf(j)
	v.Unrolled = unrolled
	src, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
	if err != nil {
		t.Fatal(fmt.Errorf("%v: %w", op, err))
	}
	return src
}
