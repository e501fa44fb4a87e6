package problems

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestProbeCloseApproach checks that the stability probe of gradient
// records (ode.Plan.Probe) does not refuse an orbit that starts close to
// a mass: Arenstorf's, 0.006 from the moon, where ∂f/∂y = [[0, I], [G,
// B]] with ‖G‖ ≈ 1e5 but modes of about ±300, so that a single ratio
// ‖Jv‖/‖v‖ of the power iteration reads ‖G‖ and put the first step far
// outside Tsit5's stability region (session 53: Tsit5 and Vern7 refused
// as Stiff at rtol 1e-3, Method Auto switched at t = 0). The gradients at
// loose tolerances are right (within 3% of Vern7's at rtol 1e-12, relative to the largest), so
// nothing may be marked.
func TestProbeCloseApproach(t *testing.T) {
	t.Parallel()
	pr := arenstorf()
	loss := ode.Loss{F: func(y, _, _ []tape.V) tape.V { return y[0].Add(y[1]) }}
	for _, T := range []float64{0.05, 1} {
		p := ode.Problem{Field: pr.Field, Y0: pr.Y0, P: pr.P, T1: T}
		ref, err := ode.Grad(nil, p, loss, nil, &ode.Settings{Method: ode.Vern7, RelTol: 1e-12, AbsTol: 1e-12})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Auto} {
			for _, rtol := range []float64{1e-3, 1e-4} {
				set := ode.Settings{Method: m, RelTol: rtol, AbsTol: rtol}
				g, err := ode.Grad(nil, p, loss, nil, &set)
				if err != nil {
					t.Errorf("T = %g, %s rtol %g: %v", T, m.Name(), rtol, err)
					continue
				}
				if g.Solution.Switch != nil && g.Solution.Switch[0] < g.Solution.Stats.Accepted[0] {
					t.Errorf("T = %g, %s rtol %g: switched to Rodas5P after %d steps; the orbit is not stiff", T, m.Name(), rtol, g.Solution.Switch[0])
				}
				scale := 0.0
				for _, x := range ref.Y0 {
					scale = math.Max(scale, math.Abs(x))
				}
				for c, want := range ref.Y0 {
					if e := math.Abs(g.Y0[c]-want) / scale; !(e < 0.03) {
						t.Errorf("T = %g, %s rtol %g: ∂L/∂y0[%d] = %v, want %v (%.2g of the largest)", T, m.Name(), rtol, c, g.Y0[c], want, e)
					}
				}
			}
		}
	}
}
