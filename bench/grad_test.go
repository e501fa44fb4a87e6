package bench

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestLorenzGradient checks the gradient the suites time against refode's
// forward sensitivities: ∂/∂ρ_i Σ‖y_i(1)‖² = 2·y_i·∂y_i/∂ρ_i.
func TestLorenzGradient(t *testing.T) {
	e := ProtocolLorenz(7)
	p := e.Problem()
	g, err := ode.Grad(nil, p, ode.SumSquares(), nil, &ode.Settings{Method: ode.Tsit5, RelTol: 1e-10, AbsTol: 1e-13})
	if err != nil {
		t.Fatal(err)
	}
	for i, rho := range e.Rho {
		y, dydp, _ := refode.LorenzRef([3]float64{e.Sigma, rho, e.Beta}, e.Y0, e.T1)
		var want, scale float64
		for c := range 3 {
			want += 2 * y[c] * dydp[c][1]
			scale += 2 * math.Abs(y[c]*dydp[c][1])
		}
		if got := g.P[3*i+1]; math.Abs(got-want) > 1e-7*scale {
			t.Errorf("ρ = %g: dL/dρ = %.12g, want %.12g", rho, got, want)
		}
	}
}
