package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostWideScalarsSame runs wide-layout kernels whose replicated
// scalars live partly in the warp's shared memory (Tuning.WideScalars:
// kernelgen's widespill.go) and with every one in registers
// (WideScalars -1, the source as before), and requires the same results
// bit for bit (only the storage moves): Lorenz-96 (d = 64, Tsit5, save
// times, shared parameters) on the simulated warp (32 threads, so the
// slots' stores by every lane and their reuse across __syncwarp()s run
// concurrently) with a budget of 4 values; Pollution with Rodas5P (d =
// 20, to t = 0.2, a save time: its reverse step keeps up to 183 values
// live) on the host engine at the default budget and at 16; without
// -short also Pollution with Rosenbrock23 on the simulated warp at 8.
// It logs how many results it compared.
func TestHostWideScalarsSame(t *testing.T) {
	needHost(t)
	t.Parallel()
	type tc struct {
		engine  string
		scalars []int // the budgets compared with none
		c       engineCase
		ops     []string
	}
	sim, host := "cuda-host-sim", "cuda-host"
	cases := []tc{
		{sim, []int{4}, wideSavesCase(2, 64), []string{"solve", "grad"}},
		{host, []int{0, 16}, wideRosCase(t, "pollution", ode.Rodas5P, 2, 0.2, true), []string{"solve", "grad"}},
	}
	if !testing.Short() {
		cases = append(cases, tc{sim, []int{8}, wideRosCase(t, "pollution", ode.Rosenbrock23, 1, 0.2, true), []string{"grad"}})
	}
	for _, x := range cases {
		t.Run(fmt.Sprintf("%s-d=%d-%s", x.c.name, x.c.prob.Field.Dim, x.c.set.Method.Name()), func(t *testing.T) {
			t.Parallel()
			engines := []string{tuned(t, x.engine, Tuning{Layout: LayoutWide, WideScalars: -1})}
			for _, b := range x.scalars {
				engines = append(engines, tuned(t, x.engine, Tuning{Layout: LayoutWide, WideScalars: b}))
			}
			for _, op := range x.ops {
				got := make([][]float64, len(engines))
				for k, engine := range engines {
					var tr Trace
					ctx := WithTrace(t.Context(), &tr)
					sv := x.c.solver(t, engine)
					p := x.c.prob
					switch op {
					case "solve":
						sol, err := sv.SolveContext(ctx, &p)
						if err != nil {
							t.Fatal(err)
						}
						got[k] = append(append(append([]float64{}, sol.Y...), sol.Ys...), sol.T...)
					case "grad":
						g, err := sv.GradContext(ctx, nil, &p, x.c.loss, nil)
						if err != nil {
							t.Fatal(err)
						}
						got[k] = append(append(append([]float64{g.Loss}, g.Y0...), g.P...), g.Shared...)
					}
					if l := tr.Stats().Layout; l != "wide" {
						t.Fatalf("%s on %s: the %s layout, not wide", op, engine, l)
					}
				}
				base := got[0]
				if len(base) == 0 {
					t.Fatalf("%s: no results", op)
				}
				for k, b := range x.scalars {
					a := got[k+1]
					if len(a) != len(base) {
						t.Fatalf("%s: %d results with WideScalars %d, %d with no limit", op, len(a), b, len(base))
					}
					diff := 0
					for i := range base {
						if math.Float64bits(a[i]) != math.Float64bits(base[i]) {
							if diff++; diff <= 5 {
								t.Errorf("%s: result %d: %v with WideScalars %d, %v with no limit", op, i, a[i], b, base[i])
							}
						}
					}
					if diff > 5 {
						t.Errorf("%s: %d of %d results differ with WideScalars %d", op, diff, len(base), b)
					}
					t.Logf("%s, WideScalars %d against no limit: %d results, %d differ", op, b, len(base), diff)
				}
			}
		})
	}
}
