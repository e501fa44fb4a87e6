package problems

import (
	"fmt"
	"math"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Kepler returns the planar Kepler problem, a body in the gravity of a
// fixed point mass, state (x, y, vx, vy), with the gravitational
// parameter GM per trajectory:
//
//	x' = vx, y' = vy, vx' = −GM·x/r³, vy' = −GM·y/r³,  r = √(x² + y²).
//
// Energy (KeplerEnergy) and angular momentum (KeplerAngularMomentum) are
// conserved, and the solution is known in closed form for bound orbits
// (KeplerExact, also the problem's Exact).
//
// Defaults: GM = 1 and the orbit of semi-major axis 1 and eccentricity
// 0.5 started at periapsis, y0 = (0.5, 0, 0, √3); t ∈ [0, 2π], exactly
// one period, so y(T1) = y0. Its energy is −1/2 and its angular momentum
// √0.75.
func Kepler() Problem {
	return Problem{
		Name: "kepler",
		Field: ode.Field{Name: "kepler", Dim: 4, Params: 1,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				r2 := y[0].Square().Add(y[1].Square())
				k := p[0].Div(r2.Mul(r2.Sqrt())) // GM/r³
				return []tape.V{
					y[2],
					y[3],
					k.Mul(y[0]).Neg(),
					k.Mul(y[1]).Neg(),
				}
			}},
		Y0: []float64{0.5, 0, 0, math.Sqrt(3)},
		P:  []float64{1},
		T1: 2 * math.Pi,
		Exact: func(dst, y0, p []float64, dt float64) []float64 {
			return KeplerExact(dst, y0, p[0], dt)
		},
		Doc: "Kepler: planar two-body orbit x'' = −GM·x/|x|³, state (x, y, vx, vy); p = (GM) = (1); " +
			"eccentricity 0.5 from periapsis, t ∈ [0, one period]",
	}
}

// KeplerEnergy returns the specific orbital energy (v² / 2 − GM/r) of the
// Kepler state y = (x, y, vx, vy). It panics if len(y) != 4.
func KeplerEnergy(y []float64, gm float64) float64 {
	checkKepler("KeplerEnergy", y)
	r := math.Hypot(y[0], y[1])
	return (y[2]*y[2]+y[3]*y[3])/2 - gm/r
}

// KeplerAngularMomentum returns the specific angular momentum x·vy − y·vx
// of the Kepler state y = (x, y, vx, vy). It panics if len(y) != 4.
func KeplerAngularMomentum(y []float64) float64 {
	checkKepler("KeplerAngularMomentum", y)
	return y[0]*y[3] - y[1]*y[2]
}

func checkKepler(fn string, y []float64) {
	if len(y) != 4 {
		panic(fmt.Sprintf("problems: %s: len(y) = %d, want 4 (x, y, vx, vy)", fn, len(y)))
	}
}

// KeplerExact returns in dst (len 4; nil allocates) the exact state of
// the Kepler problem a time dt (of either sign) after the state y0 =
// (x, y, vx, vy), for the gravitational parameter gm > 0. It uses the
// Lagrange f and g functions of the change ΔE of eccentric anomaly, found
// by safeguarded Newton iteration on Kepler's equation in difference form
//
//	n·dt = ΔE + (σ0/√a)(1 − cos ΔE) − (1 − r0/a) sin ΔE,
//
// with a the semi-major axis, n = √(gm/a³) the mean motion and σ0 =
// r0·v0/√gm (Vallado, Fundamentals of Astrodynamics and Applications,
// §2.3; Battin 1999, §4.5). Whole periods are removed from n·dt first, so
// the result stays accurate over many orbits. It panics if len(y0) or
// len(dst) is not 4, or the orbit is not bound (energy ≥ 0, or gm ≤ 0).
func KeplerExact(dst, y0 []float64, gm, dt float64) []float64 {
	checkKepler("KeplerExact", y0)
	if dst == nil {
		dst = make([]float64, 4)
	}
	if len(dst) != 4 {
		panic(fmt.Sprintf("problems: KeplerExact: len(dst) = %d, want 4", len(dst)))
	}
	x0, y0p, vx0, vy0 := y0[0], y0[1], y0[2], y0[3]
	r0 := math.Hypot(x0, y0p)
	v2 := vx0*vx0 + vy0*vy0
	inva := 2/r0 - v2/gm // 1/a
	if !(gm > 0) || !(inva > 0) || !isFinite(inva) {
		panic(fmt.Sprintf("problems: KeplerExact: state %v with GM = %v is not a bound orbit", y0, gm))
	}
	a := 1 / inva
	n := math.Sqrt(gm * inva * inva * inva)
	es := (x0*vx0 + y0p*vy0) / math.Sqrt(gm*a) // e·sin E0 = σ0/√a
	ec := 1 - r0*inva                          // e·cos E0

	// Reduce the mean anomaly change to m in [−π, π]; ΔE shifts by 2π per
	// period and f, g, ḟ, ġ are 2π-periodic in it.
	m := math.Remainder(n*dt, 2*math.Pi)
	kepler := func(x float64) float64 { return x + es*(1-math.Cos(x)) - ec*math.Sin(x) - m }
	// kepler is increasing (its derivative 1 − e·cos(E0+x) > 0) and
	// differs from x − m by at most 2e < 2, so its root is in [m−2, m+2].
	lo, hi := m-2, m+2
	x := m
	for range 100 {
		fx := kepler(x)
		if fx == 0 {
			break
		}
		if fx < 0 {
			lo = x
		} else {
			hi = x
		}
		dx := fx / (1 + es*math.Sin(x) - ec*math.Cos(x))
		xn := x - dx
		if !(xn > lo && xn < hi) {
			xn = (lo + hi) / 2 // bisect when Newton leaves the bracket
		}
		done := math.Abs(xn-x) <= 1e-16*math.Max(1, math.Abs(x))
		x = xn
		if done {
			break
		}
	}
	s, c := math.Sincos(x)
	r := a + (r0-a)*c + es*a*s // a(1 − e·cos(E0+ΔE))
	f := 1 - a/r0*(1-c)
	g := (m - (x - s)) / n
	fd := -math.Sqrt(gm*a) * s / (r * r0)
	gd := 1 - a/r*(1-c)
	dst[0] = f*x0 + g*vx0
	dst[1] = f*y0p + g*vy0
	dst[2] = fd*x0 + gd*vx0
	dst[3] = fd*y0p + gd*vy0
	return dst
}
