package cuda

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
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
				if src := kernelSource(t, c, op, false); !strings.Contains(src, "#pragma unroll 1\n  for (int gs_c") {
					t.Fatalf("%v: the kernel has no loops", op)
				}
			}
			sameRuns(t, c, c.solver(t, "cuda-host"), c.solver(t, tuned(t, "cuda-host", Tuning{unrolled: true})))
			compareEngines(t, "cuda-host", c, caseOpts{ops: []string{"solve", "grad"}})
		})
	}
}

// A Rosenbrock method's kernels emit their runs as loops at every d: the
// results are the unrolled kernels' bit for bit (solve, gradient with
// its record, gradient on a given mesh, with save times) on Robertson (d
// = 3), neural Robertson (shared weights, whose reverse step
// accumulates), HIRES (d = 8, the explicit Jacobian and LU) and Pollution
// (d = 20, matrix-free) with Rosenbrock23, and under -long with Rodas5P
// and on the Brusselator (d = 64).
func TestHostEngineRerolledRosenbrock(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles kernels of d = 20; skipped with -short")
	}
	for _, cs := range []struct {
		name string
		m    ode.Method
		long bool
	}{
		{"robertson", ode.Rosenbrock23, false}, {"hires", ode.Rosenbrock23, false}, {"pollution", ode.Rosenbrock23, false},
		{"neural-robertson", ode.Rosenbrock23, false},
		{"robertson", ode.Rodas5P, true}, {"hires", ode.Rodas5P, true}, {"pollution", ode.Rodas5P, true},
		{"neural-robertson", ode.Rodas5P, true}, {"brusselator", ode.Rosenbrock23, true}, {"brusselator", ode.Rodas5P, true},
	} {
		if cs.long && !longTests() {
			continue
		}
		c := problemCase(t, cs.name, cs.m, 5)
		c.prob.SaveAt = []float64{c.prob.T0 + (c.prob.T1-c.prob.T0)/7, c.prob.T0 + (c.prob.T1-c.prob.T0)/3}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if src := kernelSource(t, c, ode.OpGrad, false); !strings.Contains(src, "#pragma unroll 1\n  for (int gs_c") {
				t.Fatal("the gradient kernel has no loops")
			}
			sameRuns(t, c, c.solver(t, "cuda-host"), c.solver(t, tuned(t, "cuda-host", Tuning{unrolled: true})))
		})
	}
}

// kernelSource returns the source of the kernel that runs c's op in the
// thread layout, rerolled or, with unrolled, not.
func kernelSource(t *testing.T, c engineCase, op ode.Op, unrolled bool) string {
	t.Helper()
	return kernelSourceWith(t, c, op, func(v *kernelgen.Config) { v.Unrolled = unrolled })
}

// kernelSourceWith returns the source of the kernel that runs c's op in
// the thread layout, its configuration changed by set.
func kernelSourceWith(t *testing.T, c engineCase, op ode.Op, set func(*kernelgen.Config)) string {
	t.Helper()
	j := jobOf(t, c, op)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	v := kernelgen.ConfigOf(j)
	set(&v)
	src, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
	if err != nil {
		t.Fatal(fmt.Errorf("%v: %w", op, err))
	}
	return src
}

// TestRerolledSize bounds the kernels of Lorenz-96 with an explicit
// method, whose statements no longer grow with d: the gradient kernel
// (with its record) and the record kernel have as many statements at
// d = 256 as at d = 64 (1,476 and 814 with Tsit5, 2,599 and 1,079 with
// Vern7), and at d = 64 no more than Lorenz's (d = 3, unrolled: 2,021
// and 1,027 with Tsit5, 3,658 and 1,383 with Vern7), the fast path
// whose cold start the engine's compile time is measured against; the
// unrolled gradient kernels of d = 64 had 23,286 and 49,218. The bytes
// still grow with d (a call's argument list, a gathered array's entries:
// about 2 KB a component with Vern7's gradient) but are under a fifth of
// the unrolled source's at d = 64 (an eighth to a sixth).
func TestRerolledSize(t *testing.T) {
	t.Parallel()
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
		for _, op := range []ode.Op{ode.OpGrad, ode.OpRecord} {
			name := fmt.Sprintf("%s %v", m.Name(), op)
			lz := lorenzCase(4, 1e-7)
			lz.set.Method = m
			bound := statements(kernelSource(t, lz, op, false))
			src64 := kernelSource(t, lorenz96Case(4, 64, m), op, false)
			n64, n256 := statements(src64), statements(kernelSource(t, lorenz96Case(4, 256, m), op, false))
			unrolled := kernelSource(t, lorenz96Case(4, 64, m), op, true)
			t.Logf("%s: %d statements at d = 64 (%d bytes; unrolled %d, %d bytes), %d at d = 256, Lorenz %d",
				name, n64, len(src64), statements(unrolled), len(unrolled), n256, bound)
			if n64 > bound || n256 != n64 {
				t.Errorf("%s: %d statements at d = 64, %d at d = 256; want at most Lorenz's %d, the same at both", name, n64, n256, bound)
			}
			if 5*len(src64) > len(unrolled) {
				t.Errorf("%s: %d bytes at d = 64, over a fifth of the unrolled kernel's %d", name, len(src64), len(unrolled))
			}
		}
	}
}

// TestRerolledSizeRosenbrock: a Rosenbrock method's gradient kernel
// (thread layout, rerolled) of the Brusselator (d = 64) has no more
// statements than Pollution's (d = 20): 2,730 against 3,095 with Rodas5P,
// 1,834 against 2,188 with Rosenbrock23 (5,959 and 3,243 before the
// LU solves' components were read in place, the Attaches dropped and the
// Jacobian's returned rows copied by loops).
func TestRerolledSizeRosenbrock(t *testing.T) {
	t.Parallel()
	for _, m := range []ode.Method{ode.Rodas5P, ode.Rosenbrock23} {
		src := kernelSource(t, problemCase(t, "brusselator", m, 5), ode.OpGrad, false)
		bound := statements(kernelSource(t, problemCase(t, "pollution", m, 5), ode.OpGrad, false))
		n := statements(src)
		t.Logf("%s: Brusselator %d statements (%d bytes), Pollution %d", m.Name(), n, len(src), bound)
		if n > bound {
			t.Errorf("%s: the Brusselator's gradient kernel has %d statements, over Pollution's %d", m.Name(), n, bound)
		}
	}
}

// commentRe matches a line's comment.
var commentRe = regexp.MustCompile(`//.*$`)

// statements returns the number of lines of src that end a statement
// (with a semicolon, comments aside).
func statements(src string) int {
	n := 0
	for _, ln := range strings.Split(src, "\n") {
		if strings.HasSuffix(strings.TrimSpace(commentRe.ReplaceAllString(ln, "")), ";") {
			n++
		}
	}
	return n
}

// TestHostEngineRerolledLoss: a loss of many saved states (30 save times
// of Lorenz's three components, every one in the loss) rolls its
// functions into loops whatever the state's size (rerollLossInputs), with
// the unrolled kernels' results bit for bit (solve, gradient with its
// record, gradient on a given mesh).
func TestHostEngineRerolledLoss(t *testing.T) {
	needHost(t)
	c := lorenzCase(6, 1e-7)
	c.prob.Field.Name = "lorenz-saves"
	c.prob.SaveAt = make([]float64, 30)
	for j := range c.prob.SaveAt {
		c.prob.SaveAt[j] = float64(j+1) / 31
	}
	c.loss = ode.Loss{Name: "saves-loss", F: func(y, ys, _ []tape.V) tape.V {
		s := y[0].Mul(y[1])
		for k, x := range ys {
			s = s.Add(x.Square().MulC(1 + float64(k%3)))
		}
		return s
	}}
	src := kernelSource(t, c, ode.OpGrad, false)
	if !strings.Contains(src, "#pragma unroll 1\n  for (int gs_c") {
		t.Fatal("the gradient kernel has no loops")
	}
	if un := kernelSource(t, c, ode.OpGrad, true); len(src) >= len(un) {
		t.Errorf("rerolled source %d bytes, unrolled %d", len(src), len(un))
	}
	sameRuns(t, c, c.solver(t, "cuda-host"), c.solver(t, tuned(t, "cuda-host", Tuning{unrolled: true})))
}
