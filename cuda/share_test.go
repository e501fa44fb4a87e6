package cuda

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// From d = 16 a kernel with save times on the continuous extension runs
// one forward step program and one reverse step where it had two each
// (kernelgen's shareDim): TrialDense for Trial and DenseStep, DenseStep
// for Replay, DenseStepReverse with zero coefficient cotangents for
// Reverse. Its results are the two-program form's bit for bit: the
// solve, the gradient with its record and the gradient on a given mesh,
// on Pollution (d = 20) with Rosenbrock23, and with Rodas5P under -long.
func TestHostEngineSharedSteps(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles six kernels of d = 20; skipped with -short")
	}
	methods := []ode.Method{ode.Rosenbrock23}
	if longTests() {
		methods = append(methods, ode.Rodas5P)
	}
	for _, m := range methods {
		c := problemCase(t, "pollution", m, 5)
		c.prob.SaveAt = []float64{c.prob.T0 + (c.prob.T1-c.prob.T0)/7, c.prob.T0 + (c.prob.T1-c.prob.T0)/3}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sameRuns(t, c, c.solver(t, "cuda-host"), c.solver(t, tuned(t, "cuda-host", Tuning{separateSteps: true})))
		})
	}
}

// sameRuns checks that solvers got and want give c's solve, its gradient
// with the record and its gradient on want's mesh bit for bit alike
// (solutions, loss, gradients, meshes).
func sameRuns(t *testing.T, c engineCase, got, want *ode.Solver) {
	t.Helper()
	sameRunsShared(t, c, got, want, 0)
}

// sameRunsLoss is sameRuns, then Solver.Loss of case c's loss on got
// and want, bit for bit (want named what in the message).
func sameRunsLoss(t *testing.T, c engineCase, got, want *ode.Solver, what string) {
	t.Helper()
	sameRuns(t, c, got, want)
	p := c.prob
	wl, _, err := want.Loss(&p, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	gl, _, err := got.Loss(&p, c.loss, nil)
	if err != nil {
		t.Fatal(err)
	}
	if math.Float64bits(gl) != math.Float64bits(wl) {
		t.Errorf("loss %v, %s %v", gl, what, wl)
	}
}

// sameRunsShared is sameRuns with the shared gradients compared to a
// relative tolerance sharedTol (0: bit for bit): a device kernel adds
// its warps' shared sums with atomics in no fixed order (package doc),
// so two runs' dL/dShared differ by rounding.
func sameRunsShared(t *testing.T, c engineCase, got, want *ode.Solver, sharedTol float64) {
	t.Helper()
	p := c.prob
	sameSolves(t, c, got, want)
	var mesh *ode.Mesh
	for _, what := range []string{"grad", "grad on a mesh"} {
		wg, err := want.Grad(nil, &p, c.loss, mesh)
		if err != nil {
			t.Fatal(err)
		}
		gg, err := got.Grad(nil, &p, c.loss, mesh)
		if err != nil {
			t.Fatal(err)
		}
		what = c.name + " " + what
		sameSolution(t, what, gg.Solution, wg.Solution)
		for _, f := range []struct {
			name      string
			got, want []float64
		}{
			{"loss", []float64{gg.Loss}, []float64{wg.Loss}}, {"dL/dY0", gg.Y0, wg.Y0},
			{"dL/dP", gg.P, wg.P}, {"dL/dShared", gg.Shared, wg.Shared},
		} {
			if f.name == "dL/dShared" && sharedTol > 0 && len(f.got) == len(f.want) {
				for i := range f.got {
					if d := math.Abs(f.got[i] - f.want[i]); !(d <= sharedTol*math.Abs(f.want[i])) {
						t.Errorf("%s: %s[%d] %v, want %v (relative tolerance %g)", what, f.name, i, f.got[i], f.want[i], sharedTol)
					}
				}
				continue
			}
			if ok, i := bitsEqual(f.got, f.want); !ok {
				t.Errorf("%s: %s differs at %d", what, f.name, i)
			}
		}
		if mesh == nil {
			hostMesh(t, gg.Mesh)
			hostMesh(t, wg.Mesh)
			if ok, i := bitsEqual(gg.Mesh.H, wg.Mesh.H); !ok || !slices.Equal(gg.Mesh.Len, wg.Mesh.Len) {
				t.Fatalf("%s: the meshes differ (step %d)", what, i)
			}
			mesh = wg.Mesh
		}
	}
}

// sameSolves checks that got's and want's solves of case c are the
// same bit for bit.
func sameSolves(t *testing.T, c engineCase, got, want *ode.Solver) {
	t.Helper()
	p := c.prob
	ws, err := want.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	gs, err := got.Solve(&p)
	if err != nil {
		t.Fatal(err)
	}
	sameSolution(t, c.name+" solve", gs, ws)
}

// sameSolution checks that two solutions hold the same bits: times,
// final and saved states, statuses and step counts.
func sameSolution(t *testing.T, what string, got, want *ode.Solution) {
	t.Helper()
	for _, f := range []struct {
		name      string
		got, want []float64
	}{{"T", got.T, want.T}, {"Y", got.Y, want.Y}, {"Ys", got.Ys, want.Ys}} {
		if ok, i := bitsEqual(f.got, f.want); !ok {
			t.Errorf("%s: %s differs at %d", what, f.name, i)
		}
	}
	if !slices.Equal(got.Status, want.Status) || !slices.Equal(got.Stats.Accepted, want.Stats.Accepted) ||
		!slices.Equal(got.Stats.Rejected, want.Stats.Rejected) || !slices.Equal(got.Stats.FieldEvals, want.Stats.FieldEvals) {
		t.Errorf("%s: statuses or step counts differ", what)
	}
	if !slices.Equal(got.Stiff, want.Stiff) || !slices.Equal(got.Events, want.Events) {
		t.Errorf("%s: stiffness flags or event counts differ", what)
	}
}

// TestHostEnginePipelined checks that results copied back in chunks,
// each scattered while the next is copied (Tuning.pipeChunk: here one
// result block a chunk, 4 chunks), are those of one copy bit for bit:
// a solve, a gradient with its record and one on the mesh, with
// records long enough and, with short first record buffers (with -long),
// with every trajectory rerun (a launch of the overflowed ones, pipelined too);
// with a kernel per chunk (the thread layout's default: a launch of
// chunks is several kernels, as the trace counts them) and with one
// kernel for the chunks (Tuning.NoChunkLaunch); a shared parameters'
// gradient; on a simulated warp.
func TestHostEnginePipelined(t *testing.T) {
	needHost(t)
	c := lorenzCase(3*resultBlock+1000, 1e-4)
	c.prob.SaveAt = []float64{0.5}
	c.loss = ode.SumSquares()
	// Short first record buffers (every trajectory rerun) only with -long
	// (or GRADSOLVE_LONG_TESTS=1): each case here takes about a minute on
	// two cores.
	rowsOf := []int{0}
	if longTests() {
		rowsOf = append(rowsOf, 4)
	}
	for _, rows := range rowsOf {
		for _, whole := range []bool{false, true} {
			if whole && rows > 0 {
				continue
			}
			t.Run(fmt.Sprintf("rows=%d/whole=%v", rows, whole), func(t *testing.T) {
				piped := c.solver(t, tuned(t, "cuda-host", Tuning{pipeChunk: resultBlock, firstRows: rows, NoChunkLaunch: whole}))
				plain := c.solver(t, tuned(t, "cuda-host", Tuning{firstRows: rows}))
				sameRuns(t, c, piped, plain)
				var trp, tr Trace
				var g ode.Gradient
				if _, err := piped.GradContext(WithTrace(context.Background(), &trp), &g, &c.prob, c.loss, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := plain.GradContext(WithTrace(context.Background(), &tr), &g, &c.prob, c.loss, nil); err != nil {
					t.Fatal(err)
				}
				if p, q := trp.Stats().Launches, tr.Stats().Launches; whole && p != q || !whole && p < q+2 {
					t.Errorf("%d kernels with chunks, %d without: want more with a kernel per chunk, as many with one", p, q)
				}
			})
		}
	}
	// A launch under two chunks' worth from Tuning.pipeMin: its results
	// come back in two halves (a kernel each), with and without reruns.
	// Its size is 3.5 of the largest result block, or more of a
	// smaller one (resultBlockOf): whole blocks split over the halves.
	h := lorenzCase(3*resultBlock+resultBlock/2, 1e-4)
	h.loss = ode.SumSquares()
	for _, rows := range rowsOf {
		t.Run(fmt.Sprintf("halves/rows=%d", rows), func(t *testing.T) {
			halves := h.solver(t, tuned(t, "cuda-host", Tuning{pipeMin: 1024, firstRows: rows}))
			plain := h.solver(t, tuned(t, "cuda-host", Tuning{firstRows: rows}))
			sameRuns(t, h, halves, plain)
			var trh, tr Trace
			if _, err := halves.GradContext(WithTrace(context.Background(), &trh), nil, &h.prob, h.loss, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := plain.GradContext(WithTrace(context.Background(), &tr), nil, &h.prob, h.loss, nil); err != nil {
				t.Fatal(err)
			}
			if p, q := trh.Stats().Launches, tr.Stats().Launches; p != 2*q {
				t.Errorf("%d kernels in halves, %d whole: want twice as many", p, q)
			}
		})
	}
	// A shared parameters' gradient (summed over the kernels of the
	// chunks), also with the kernels on a simulated warp.
	// Chunks of the smallest result block, 1,024 trajectories: 5 kernels.
	s := lorenzSharedCase(4*1024 + 100)
	t.Run("shared", func(t *testing.T) {
		sameRuns(t, s, s.solver(t, tuned(t, "cuda-host", Tuning{pipeChunk: 1024})), s.solver(t, tuned(t, "cuda-host", Tuning{pipeChunk: 1024, NoChunkLaunch: true})))
	})
	t.Run("shared/sim", func(t *testing.T) {
		var gs [2]*ode.Gradient
		for k, whole := range []bool{false, true} {
			g, err := s.solver(t, tuned(t, "cuda-host-sim", Tuning{pipeChunk: 1024, NoChunkLaunch: whole})).Grad(nil, &s.prob, s.loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			gs[k] = g
		}
		for _, f := range []struct {
			name      string
			got, want []float64
		}{{"loss", []float64{gs[0].Loss}, []float64{gs[1].Loss}}, {"dL/dY0", gs[0].Y0, gs[1].Y0}, {"dL/dP", gs[0].P, gs[1].P}, {"dL/dShared", gs[0].Shared, gs[1].Shared}} {
			if ok, i := bitsEqual(f.got, f.want); !ok {
				t.Errorf("%s differs at %d", f.name, i)
			}
		}
	})
}
