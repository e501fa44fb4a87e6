package problems

import (
	"math"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Gravity is the acceleration of BouncingBall (9.81).
const Gravity = 9.81

// BouncingBall returns a ball falling under gravity and bouncing on the
// floor x = 0: state (x, v), x' = v, v' = −Gravity, with the restitution
// coefficient e = p[0] per trajectory. Its event "floor" fires where x
// crosses 0 downwards (Direction −1) and sets v to −e·v, a jump after
// which the ball goes on (not terminal). Give it to a solve as
// Settings.Events = []ode.Event{ev}. BouncingBallClosedForm gives the
// exact height and its derivative with respect to e.
func BouncingBall() (ode.Field, ode.Event) {
	f := ode.Field{Name: "ball", Dim: 2, Params: 1, F: func(_ tape.V, y, _ []tape.V) []tape.V {
		return []tape.V{y[1], y[1].Const(-Gravity)}
	}}
	ev := ode.Event{Name: "floor", Direction: -1,
		G: func(_ tape.V, y, _ []tape.V) tape.V { return y[0] },
		Apply: func(_ tape.V, y, p []tape.V) []tape.V {
			return []tape.V{y[0], p[0].Neg().Mul(y[1])}
		}}
	return f, ev
}

// BouncingBallClosedForm returns the height x at time T of BouncingBall
// dropped from rest at height h0 > 0 with restitution e ∈ (0, 1), the
// derivative dx/de, and the number of bounces before T: between bounces
// the ball flies a parabola, the k-th bounce sends it up at e^k·√(2·g·h0)
// and lands it 2e^k·√(2·g·h0)/g later. T must come before the ball is at
// rest (after infinitely many bounces, at √(2·h0/g)·(1 + 2e/(1−e))) and
// its 1000th bounce; past that the result is meaningless.
func BouncingBallClosedForm(h0, e, T float64) (x, dxde float64, bounces int) {
	g := Gravity
	U := math.Sqrt(2 * g * h0)
	tn := math.Sqrt(2 * h0 / g) // the first bounce
	if T < tn {
		return h0 - g*T*T/2, 0, 0
	}
	dtn, u, du := 0.0, 0.0, 0.0
	for k := 1; k < 1000; k++ {
		u, du = math.Pow(e, float64(k))*U, float64(k)*math.Pow(e, float64(k-1))*U
		next := tn + 2*u/g
		if next > T {
			bounces = k
			break
		}
		tn, dtn = next, dtn+2*du/g
	}
	tau := T - tn
	return u*tau - g*tau*tau/2, du*tau + (u-g*tau)*(-dtn), bounces
}
