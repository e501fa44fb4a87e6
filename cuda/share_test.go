package cuda

import (
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
			shared, sep := c.solver(t, "cuda-host"), c.solver(t, tuned(t, "cuda-host", Tuning{separateSteps: true}))
			p := c.prob
			want, err := sep.Solve(&p)
			if err != nil {
				t.Fatal(err)
			}
			got, err := shared.Solve(&p)
			if err != nil {
				t.Fatal(err)
			}
			sameSolution(t, c.name+" solve", got, want)
			var mesh *ode.Mesh
			for _, what := range []string{"grad", "grad on a mesh"} {
				want, err := sep.Grad(nil, &p, c.loss, mesh)
				if err != nil {
					t.Fatal(err)
				}
				got, err := shared.Grad(nil, &p, c.loss, mesh)
				if err != nil {
					t.Fatal(err)
				}
				what = c.name + " " + what
				sameSolution(t, what, got.Solution, want.Solution)
				for _, f := range []struct {
					name      string
					got, want []float64
				}{
					{"loss", []float64{got.Loss}, []float64{want.Loss}}, {"dL/dY0", got.Y0, want.Y0},
					{"dL/dP", got.P, want.P}, {"dL/dShared", got.Shared, want.Shared},
				} {
					if ok, i := bitsEqual(f.got, f.want); !ok {
						t.Errorf("%s: %s differs at %d", what, f.name, i)
					}
				}
				if mesh == nil {
					hostMesh(t, got.Mesh)
					hostMesh(t, want.Mesh)
					if ok, i := bitsEqual(got.Mesh.H, want.Mesh.H); !ok || !slices.Equal(got.Mesh.Len, want.Mesh.Len) {
						t.Fatalf("%s: the meshes differ (step %d)", what, i)
					}
					mesh = want.Mesh
				}
			}
		})
	}
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
		!slices.Equal(got.Stats.Rejected, want.Stats.Rejected) {
		t.Errorf("%s: statuses or step counts differ", what)
	}
}
