package cuda

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
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
	src, _ := kernelSourceInfo(t, c, op, set)
	return src
}

// kernelSourceInfo is kernelSourceWith with the kernel's KernelInfo.
func kernelSourceInfo(t *testing.T, c engineCase, op ode.Op, set func(*kernelgen.Config)) (string, kernelgen.KernelInfo) {
	t.Helper()
	j := jobOf(t, c, op)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	v := kernelgen.ConfigOf(j)
	set(&v)
	src, info, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
	if err != nil {
		t.Fatal(fmt.Errorf("%v: %w", op, err))
	}
	return src, info
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
// functions into loops whatever the state's size (rerollLossInputs), and
// they are bound (kernelgen's bind.go: the saved states, the data and p
// read in place, the loss term and dL/dys stored by the loss VJP, no
// parameter or returned entry per saved value), with the unrolled
// kernels' results (the scalar form) bit for bit: solve, gradient with
// its record, gradient on a given mesh and loss; with Tsit5 and Vern7,
// losses reading y, the data and p (also in float32), and the shared
// parameters (whose gradient the loss VJP accumulates, LossAcc, storing
// only where its lane is on: also on a simulated warp of which most lanes
// are off; or, where it cannot, returns).
func TestHostEngineRerolledLoss(t *testing.T) {
	needHost(t)
	const k = 30 // save times
	saves := func(c engineCase) engineCase {
		c.prob.SaveAt = make([]float64, k)
		for j := range c.prob.SaveAt {
			c.prob.SaveAt[j] = float64(j+1) / (k + 1)
		}
		return c
	}
	lorenz := func(m ode.Method) engineCase {
		c := saves(lorenzCase(6, 1e-7))
		c.prob.Field.Name = "lorenz-saves"
		c.set.Method = m
		c.loss = ode.Loss{Name: "saves-loss", F: func(y, ys, _ []tape.V) tape.V {
			s := y[0].Mul(y[1])
			for k, x := range ys {
				s = s.Add(x.Square().MulC(1 + float64(k%3)))
			}
			return s
		}}
		return c
	}
	data := lorenz(ode.Tsit5)
	data.name += "-data"
	r := rand.New(rand.NewPCG(3, 4))
	data.loss = ode.Loss{Name: "saves-data-loss", Mean: true, DataDim: 3 * k, Data: make([]float64, 6*3*k),
		FP: func(y, ys, d, p, _ []tape.V) tape.V {
			s := p[1].Mul(y[0])
			for k, x := range ys {
				s = s.Add(x.Sub(d[k]).Square())
			}
			return s
		}}
	for j := range data.loss.Data {
		data.loss.Data[j] = 10 * r.Float64()
	}
	shared := saves(lorenzSharedCase(6))
	shared.loss = ode.Loss{Name: "saves-shared-loss", Mean: true, FP: func(y, ys, _, p, s []tape.V) tape.V {
		u := s[0].Mul(y[1]).Add(p[0])
		for _, x := range ys {
			u = u.Add(x.Square().Mul(y[0]))
		}
		return u
	}}
	// dL/ds0 and dL/ds1 are one sum, not a form the loss VJP accumulates
	// (planAcc): it returns them (thread.cuh's "loss-own").
	own := shared
	own.name += "-own"
	own.loss = ode.Loss{Name: "saves-own-loss", Mean: true, FP: func(y, ys, _, p, s []tape.V) tape.V {
		w := y[0].Add(y[1])
		u := s[0].Mul(w).Add(s[1].Mul(w)).Add(p[0])
		for _, x := range ys {
			u = u.Add(x.Square().Mul(y[0]))
		}
		return u
	}}
	for _, c := range []engineCase{lorenz(ode.Tsit5), lorenz(ode.Vern7), data, shared, own} {
		name := c.name + "-" + c.set.Method.Name()
		t.Run(name, func(t *testing.T) {
			src := kernelSource(t, c, ode.OpGrad, false)
			// The loss's loops read the saved values in global memory:
			// unrolled 8-fold on the device (kernelgen's loadLoopHead).
			if !strings.Contains(src, "#pragma unroll 8\n  for (int gs_c") {
				t.Fatal("the gradient kernel's loss has no loops over the saved values")
			}
			if acc := strings.Contains(src, "gs_a_loss_grad(sh, GS_LOSS_ACC_AT"); acc != (c.name == "lorenz-shared") {
				t.Errorf("the loss VJP accumulates: %t", acc)
			}
			un := kernelSource(t, c, ode.OpGrad, true)
			if len(src) >= len(un) {
				t.Errorf("rerolled source %d bytes, unrolled %d", len(src), len(un))
			}
			if n, f := maxParams(src, c.loss.Name); n > boundLossParams {
				t.Errorf("%s has %d parameters, want at most %d", f, n, boundLossParams)
			}
			if n, _ := maxParams(un, c.loss.Name); n <= 3*k {
				t.Errorf("the unrolled kernel's loss VJP has %d parameters, want one per saved value", n)
			}
			want, got := c.solver(t, tuned(t, "cuda-host", Tuning{unrolled: true})), c.solver(t, "cuda-host")
			sameRunsLoss(t, c, got, want, "unrolled")
			if c.loss.DataDim > 0 {
				// In float32 too (gs_real float, the scale sc included).
				c := c
				c.set.RelTol, c.set.AbsTol = 1e-4, 1e-7
				want := c.solver(t, tuned(t, "cuda-host-f32", Tuning{unrolled: true}))
				sameRuns(t, c, c.solver(t, "cuda-host-f32"), want)
			}
			if c.prob.Field.Shared > 0 {
				// On a simulated warp, the lanes past the trajectories
				// call the loss VJP too (it accumulates), with i = 0.
				sim := Tuning{Layout: LayoutThread}
				want := c.solver(t, tuned(t, "cuda-host-sim", Tuning{Layout: LayoutThread, unrolled: true}))
				sameRuns(t, c, c.solver(t, tuned(t, "cuda-host-sim", sim)), want)
			}
		})
	}
}

// boundLossParams bounds the parameters of a bound loss's functions (12
// with the accumulator's).
const boundLossParams = 16

// funcRe matches the head of a function of generated code: its name and
// parameters.
var funcRe = regexp.MustCompile(`(?m)^(?:GS_FUNC|GS_DEVICE|GS_CALLEE|GS_CALLEE_INLINE|GS_STEP|GS_GLOBAL)\s+[^\n(]*?(\w+)\(([^)]*)\)\s*\{`)

// maxParams returns the most parameters of a function of src of the
// programs called prog (the functions of its VJP too), and its name.
func maxParams(src, prog string) (int, string) {
	n, name := 0, ""
	prefix := "gs_" + strings.NewReplacer("-", "_", ".", "_").Replace(prog) + "_"
	for _, m := range funcRe.FindAllStringSubmatch(src, -1) {
		if !strings.HasPrefix(m[1], prefix) {
			continue
		}
		if k := strings.Count(m[2], ",") + 1; k > n {
			n, name = k, m[1]
		}
	}
	return n, name
}

// TestBoundLossSize: the gradient and loss kernels of a loss of the
// Kepler problem's saved states (the sum of their squares) have the same
// functions at 1,000 save times as at 20, bar the loops' counts (a bound
// loss: kernelgen's bind.go): the loss's functions have at most
// boundLossParams parameters (10: the scalar form's loss VJP had 4,006
// at 1,000 save times, returning a struct of 4,006 reals, and the
// gradient kernel's source was 339 kB, 175 kB bound).
func TestBoundLossSize(t *testing.T) {
	t.Parallel()
	for _, op := range []ode.Op{ode.OpGrad, ode.OpLoss} {
		src := func(k int) string {
			return kernelSourceWith(t, keplerSavesCase(k), ode.OpGrad, func(v *kernelgen.Config) {
				if op == ode.OpLoss {
					v.Grad, v.Store, v.Loss = false, false, true
				}
			})
		}
		s20, s1000 := src(20), src(1000)
		n, f := maxParams(s1000, "saved-squares")
		t.Logf("%v: %d bytes at 20 save times, %d at 1,000; %s has %d parameters", op, len(s20), len(s1000), f, n)
		if n > boundLossParams {
			t.Errorf("%v: %s has %d parameters, want at most %d", op, f, n, boundLossParams)
		}
		if len(s1000) > len(s20)+512 {
			t.Errorf("%v: %d bytes at 1,000 save times, %d at 20", op, len(s1000), len(s20))
		}
	}
}

// keplerSavesCase is the Kepler problem (64 orbits, Tsit5, rtol 1e-8)
// with k save times spread over (0, T1] and the loss the sum of the
// squares of the saved states (BenchmarkGPUSaveSplit's).
func keplerSavesCase(k int) engineCase {
	kp := problems.Kepler()
	ts := make([]float64, k)
	for j := range ts {
		ts[j] = kp.T1 * float64(j+1) / float64(k)
	}
	return engineCase{name: "kepler-saves",
		prob: ode.Problem{Field: kp.Field, N: 64, Y0: kp.Y0, P: kp.P, T1: kp.T1, SaveAt: ts},
		set:  ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-11},
		loss: odetest.SavedSquares()}
}

// TestHostManySavesPerStep checks a gradient through save times of which
// many lie on one step (up to tens; the reverse sweep finds a step's save
// times four at a time from the save times and the step's t,
// gs_dense_first_save), a few on others, some repeated and some at T0,
// on the host engine against the CPU engine, Tsit5 and Vern7.
func TestHostManySavesPerStep(t *testing.T) {
	needHost(t)
	t.Parallel()
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
		c := lorenzCase(5, 1e-4)
		c.set.Method = m
		c.prob.Field.Name = "lorenz-many-saves"
		// The host's and Go's last bits of the steps (8.8e-12 relative
		// with Vern7) move saved values near zero by 1.2e-10 relative; a
		// save time the sweep missed or took twice would be off by O(1).
		c.tol = 1e-9
		var ts []float64
		for range 7 {
			ts = append(ts, 0) // at T0
		}
		for j := 1; j <= 300; j++ {
			ts = append(ts, float64(j)/300)
			if j%37 == 0 {
				ts = append(ts, float64(j)/300, float64(j)/300) // repeated
			}
		}
		c.prob.SaveAt = ts
		c.loss = ode.Loss{Name: "many-saves-loss", F: func(y, ys, _ []tape.V) tape.V {
			s := y[0].Mul(y[2])
			for k, x := range ys {
				s = s.Add(x.Square().MulC(1 + float64(k%5)))
			}
			return s
		}}
		t.Run(m.Name(), func(t *testing.T) { compareEngines(t, "cuda-host", c, caseOpts{ops: []string{"grad"}}) })
	}
}
