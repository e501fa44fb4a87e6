package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostWideSparseLU runs the wide layout's Rodas5P kernels with their
// factors of W in the sparse form (the default: kernelgen's
// wideSparseLU, the structural zeros of the traced Jacobian skipped while
// no row interchange is needed) against the dense form (Tuning.denseLU)
// on a simulated warp, each on its default lanes a trajectory: HIRES (d =
// 8, the explicit factor of W, 5 trajectories to t = 0.5) and, without
// -short, Pollution (d = 20, the matrix-free factor, 2 trajectories to t
// = 0.2), the Brusselator (d = 64, its band past WideSparseMaxDim: 2
// trajectories to t = 0.05) and Lorenz-96 (d = 64, a cyclic band: 2 to
// t = 0.2): the solve and the gradient, bit for bit (the two forms'
// values differ at most in the signs of zeros, which these results do
// not show). It fails if the default kernel has no sparse factor or the
// switch does not reach the source.
func TestHostWideSparseLU(t *testing.T) {
	needHost(t)
	t.Parallel()
	cases := []engineCase{wideRosCase(t, "hires", ode.Rodas5P, 5, 0.5, false)}
	if !testing.Short() {
		cases = append(cases, wideRosCase(t, "pollution", ode.Rodas5P, 2, 0.2, false),
			wideRosCase(t, "brusselator", ode.Rodas5P, 2, 0.05, false),
			wideRosCase(t, "lorenz96-64", ode.Rodas5P, 2, 0.2, false))
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s-d=%d", c.name, c.prob.Field.Dim), func(t *testing.T) {
			t.Parallel()
			set := func(dense bool) func(*kernelgen.Config) {
				return func(v *kernelgen.Config) {
					v.Wide, v.RowMajor, v.WideLanes, v.WideDenseLU = true, true, defaultWideLanes(c.prob.Field.Dim, true), dense
				}
			}
			src := kernelSourceWith(t, c, ode.OpGrad, set(false))
			old := kernelSourceWith(t, c, ode.OpGrad, set(true))
			if !strings.Contains(src, "gs_wlus_factor_") || strings.Contains(old, "gs_wlus_factor_") {
				t.Fatalf("sparse factor in the default kernel %v, in the dense one %v", strings.Contains(src, "gs_wlus_factor_"), strings.Contains(old, "gs_wlus_factor_"))
			}
			t.Logf("gradient kernel's source: %d bytes sparse, %d dense", len(src), len(old))
			ref := tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide, denseLU: true})
			eng := tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide})
			for _, op := range []string{"solve", "grad"} {
				sameWideResults(t, op, "the sparse factor", "the dense one", wideResults(t, c, eng, op), wideResults(t, c, ref, op))
			}
		})
	}
}

// TestGPUWideSparseLU is TestHostWideSparseLU on the device: the
// large-state suite's HIRES and Pollution (layoutFillCase, 1,000
// trajectories, the whole interval, Rodas5P, default lanes), the
// Brusselator and Lorenz-96 with d = 64 (their bands' sequential form,
// wideSeqLU: 256 trajectories to t = 0.5, Rodas5P) with the
// sparse factor against the dense one (Tuning.denseLU): the solve, the
// gradient with the record and on the mesh, bit for bit (sameRuns; a
// difference only in a zero's sign would be the sparse form's documented
// one). It skips without a GPU.
func TestGPUWideSparseLU(t *testing.T) {
	needGPUEngine(t)
	for _, name := range []string{"hires", "pollution", "brusselator", "lorenz96-64"} {
		var c engineCase
		switch name {
		case "brusselator", "lorenz96-64":
			c = wideRosCase(t, name, ode.Rodas5P, 256, 0.5, false)
		default:
			c = layoutFillCase(t, name, 1000)
		}
		t.Run(name, func(t *testing.T) {
			sameRuns(t, c, c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide})), c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, denseLU: true})))
		})
	}
}

// TestGPUWidePivots is TestHostWidePivots on the device: the large-state
// suite's Pollution (layoutFillCase, 1,000 trajectories, the whole
// interval, Rodas5P, default lanes) with its pivot sequence predicted
// (Tuning.widePivots) against the default: the solve, the gradient with
// the record and on the mesh, bit for bit (sameRuns). It skips without a
// GPU.
func TestGPUWidePivots(t *testing.T) {
	needGPUEngine(t)
	c := layoutFillCase(t, "pollution", 1000)
	sameRuns(t, c, c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, widePivots: pollutionPivots})), c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide})))
}

// pollutionPivots is the pivot sequence of 90% of Pollution's factors of
// W with Rodas5P (the gpu-large suite's ensemble, the whole interval, on
// the CPU engine: 2,828 of 3,150 factors; the others none): step 5 takes
// row 6 (y7's row beats y6's diagonal after y1…y5 are eliminated), step
// 6 row 7. As Tuning.widePivots, the wide kernels' sparse factors follow
// it besides no interchange.
var pollutionPivots = func() kernelgen.PivotSeq {
	q, err := kernelgen.ParsePivots("5>6 6>7")
	if err != nil {
		panic(err)
	}
	return q
}()

// TestHostWidePivots runs Pollution's wide Rodas5P kernels (d = 20,
// default lanes, 2 trajectories to t = 0.2; with -long only: the switch is off by default) with its pivot
// sequence predicted (Tuning.widePivots: the sparse factor and solves
// follow rows 5↔6, 6↔7 besides no interchange) against the default (the
// dense steps from the first interchange) on a simulated warp: the solve
// and the gradient bit for bit. It fails if the sequence does not reach
// the gradient kernel's source (a second sparse leaf's mark) or reaches
// the default's.
func TestHostWidePivots(t *testing.T) {
	needHost(t)
	if !longTests() {
		t.Skip("Pollution's wide kernels on the simulated warp, a switch off by default: minutes; run with -long")
	}
	t.Parallel()
	c := wideRosCase(t, "pollution", ode.Rodas5P, 2, 0.2, false)
	set := func(pivots kernelgen.PivotSeq) func(*kernelgen.Config) {
		return func(v *kernelgen.Config) {
			v.Wide, v.RowMajor, v.WideLanes, v.WidePivots = true, true, defaultWideLanes(c.prob.Field.Dim, true), pivots
		}
	}
	src := kernelSourceWith(t, c, ode.OpGrad, set(pollutionPivots))
	old := kernelSourceWith(t, c, ode.OpGrad, set(0))
	const leaf = "f[D * LD + D - 1] == (gs_real)19.015625"
	if !strings.Contains(src, leaf) || strings.Contains(old, leaf) {
		t.Fatalf("the predicted sequence's solves in the kernel with it %v, in the default %v", strings.Contains(src, leaf), strings.Contains(old, leaf))
	}
	t.Logf("gradient kernel's source: %d bytes with the sequence, %d without", len(src), len(old))
	ref := tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide})
	eng := tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide, widePivots: pollutionPivots})
	for _, op := range []string{"solve", "grad"} {
		sameWideResults(t, op, "the predicted pivots", "the default", wideResults(t, c, eng, op), wideResults(t, c, ref, op))
	}
}
