package problems

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestBouncingBall solves BouncingBall at tight tolerances for a few
// heights and restitution coefficients, over several bounces, and checks
// the height, its gradient with respect to e and the bounce count against
// BouncingBallClosedForm, whose derivative is itself checked against its
// central differences.
func TestBouncingBall(t *testing.T) {
	f, ev := BouncingBall()
	h0 := []float64{0.8, 1, 1.2}
	e := []float64{0.9, 0.75, 0.65}
	const T = 1.5
	y0 := make([]float64, 2*len(h0))
	for i := range h0 {
		y0[2*i] = h0[i]
	}
	g, err := ode.Grad(nil, ode.Problem{Field: f, N: len(h0), Y0: y0, P: e, T1: T}, ode.Component(0), nil,
		&ode.Settings{Method: ode.Tsit5, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range h0 {
		x, dx, n := BouncingBallClosedForm(h0[i], e[i], T)
		if n < 2 {
			t.Fatalf("ball %d bounces %d times before T; want several (the test checks little otherwise)", i, n)
		}
		const de = 1e-6
		xp, _, _ := BouncingBallClosedForm(h0[i], e[i]+de, T)
		xm, _, _ := BouncingBallClosedForm(h0[i], e[i]-de, T)
		if fd := (xp - xm) / (2 * de); math.Abs(fd-dx) > 1e-6*math.Max(1, math.Abs(dx)) {
			t.Errorf("ball %d: closed-form dx/de %v, its central difference %v", i, dx, fd)
		}
		if got := g.Solution.Y[2*i]; math.Abs(got-x) > 1e-8 {
			t.Errorf("ball %d: x(T) = %.12g, closed form %.12g", i, got, x)
		}
		if got := g.P[i]; math.Abs(got-dx) > 1e-6*math.Max(1, math.Abs(dx)) {
			t.Errorf("ball %d: dx/de = %.12g, closed form %.12g", i, got, dx)
		}
		if got := g.Solution.Events[i]; got != n {
			t.Errorf("ball %d: %d bounces, closed form %d", i, got, n)
		}
	}
}
