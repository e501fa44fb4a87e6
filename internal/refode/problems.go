package refode

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// Problem is a parametrised ODE y' = f(t, y, p) with analytic partial
// derivatives, in plain float64 Go.
type Problem struct {
	Name   string
	Dim    int // d, the number of states
	NParam int // P, the number of parameters (may be 0)

	// F evaluates dy = f(t, y, p).
	F func(t float64, y, p, dy []float64)
	// Jac evaluates J = ∂f/∂y, row-major d×d: J[i*d+j] = ∂f_i/∂y_j.
	// J is zeroed by the caller.
	Jac func(t float64, y, p []float64, J []float64)
	// JacP evaluates Jp = ∂f/∂p, row-major d×P: Jp[i*P+k] = ∂f_i/∂p_k.
	// Jp is zeroed by the caller. Nil when NParam is 0.
	JacP func(t float64, y, p []float64, Jp []float64)
}

// Bind fixes the parameters and returns f and ∂f/∂y in the form the
// integrators take. p is copied.
func (pr Problem) Bind(p []float64) (Func, JacFunc) {
	p = append([]float64(nil), p...)
	f := func(t float64, y, dy []float64) { pr.F(t, y, p, dy) }
	jac := func(t float64, y []float64, J []float64) { pr.Jac(t, y, p, J) }
	return f, jac
}

// Lorenz returns the Lorenz system with p = (σ, ρ, β):
//
//	y1' = σ(y2 − y1), y2' = y1(ρ − y3) − y2, y3' = y1·y2 − β·y3.
func Lorenz() Problem {
	return Problem{
		Name: "lorenz", Dim: 3, NParam: 3,
		F: func(_ float64, y, p, dy []float64) {
			s, r, b := p[0], p[1], p[2]
			dy[0] = s * (y[1] - y[0])
			dy[1] = y[0]*(r-y[2]) - y[1]
			dy[2] = y[0]*y[1] - b*y[2]
		},
		Jac: func(_ float64, y, p []float64, J []float64) {
			s, r, b := p[0], p[1], p[2]
			J[0], J[1], J[2] = -s, s, 0
			J[3], J[4], J[5] = r-y[2], -1, -y[0]
			J[6], J[7], J[8] = y[1], y[0], -b
		},
		JacP: func(_ float64, y, _ []float64, Jp []float64) {
			Jp[0], Jp[1], Jp[2] = y[1]-y[0], 0, 0
			Jp[3], Jp[4], Jp[5] = 0, y[0], 0
			Jp[6], Jp[7], Jp[8] = 0, 0, -y[2]
		},
	}
}

// VanDerPol returns the Van der Pol oscillator with p = (μ):
//
//	x' = v, v' = μ((1 − x²)v − x).
func VanDerPol() Problem {
	return Problem{
		Name: "vanderpol", Dim: 2, NParam: 1,
		F: func(_ float64, y, p, dy []float64) {
			x, v := y[0], y[1]
			dy[0] = v
			dy[1] = p[0] * ((1-x*x)*v - x)
		},
		Jac: func(_ float64, y, p []float64, J []float64) {
			x, v, mu := y[0], y[1], p[0]
			J[0], J[1] = 0, 1
			J[2], J[3] = mu*(-2*x*v-1), mu*(1-x*x)
		},
		JacP: func(_ float64, y, _ []float64, Jp []float64) {
			x, v := y[0], y[1]
			Jp[0] = 0
			Jp[1] = (1-x*x)*v - x
		},
	}
}

// Robertson returns Robertson's stiff chemical kinetics with
// p = (k1, k2, k3):
//
//	f1 = −k1·y1 + k3·y2·y3, f2 = k1·y1 − k3·y2·y3 − k2·y2², f3 = k2·y2².
//
// The classical rates are RobertsonK = (0.04, 3e7, 1e4).
func Robertson() Problem {
	return Problem{
		Name: "robertson", Dim: 3, NParam: 3,
		F: func(_ float64, y, p, dy []float64) {
			k1, k2, k3 := p[0], p[1], p[2]
			dy[0] = -k1*y[0] + k3*y[1]*y[2]
			dy[1] = k1*y[0] - k3*y[1]*y[2] - k2*y[1]*y[1]
			dy[2] = k2 * y[1] * y[1]
		},
		Jac: func(_ float64, y, p []float64, J []float64) {
			k1, k2, k3 := p[0], p[1], p[2]
			J[0], J[1], J[2] = -k1, k3*y[2], k3*y[1]
			J[3], J[4], J[5] = k1, -k3*y[2]-2*k2*y[1], -k3*y[1]
			J[6], J[7], J[8] = 0, 2*k2*y[1], 0
		},
		JacP: func(_ float64, y, _ []float64, Jp []float64) {
			Jp[0], Jp[1], Jp[2] = -y[0], 0, y[1]*y[2]
			Jp[3], Jp[4], Jp[5] = y[0], -y[1]*y[1], -y[1]*y[2]
			Jp[6], Jp[7], Jp[8] = 0, y[1]*y[1], 0
		},
	}
}

// RobertsonK holds the classical Robertson rates (k1, k2, k3).
var RobertsonK = [3]float64{0.04, 3e7, 1e4}

// Published Robertson values for RobertsonK and y0 = (1, 0, 0).
var (
	// RobertsonRef40 is y(40) to the 10 digits quoted from Hairer & Wanner,
	// Solving ODEs II, in many public test suites (the digits are
	// truncated). Radau5 at rtol 1e-12 gives
	// (0.715827068719392, 9.18553476455785e-6, 0.284163745745844), within
	// one unit of the last printed digit.
	RobertsonRef40 = [3]float64{0.7158270687, 9.185534764e-6, 0.2841637457}
	// RobertsonRef1e11 is y(1e11) from the Bari "Test Set for IVP Solvers"
	// (problem ROBER, Mazzia & Magherini, https://archimede.uniba.it/~testset/).
	RobertsonRef1e11 = [3]float64{0.2083340149701255e-7, 0.8333360770334713e-13, 0.9999999791665050}
)

// RobertsonRefDecades holds y(10^k), k = 0…11 (RobertsonRefDecades[k]),
// for RobertsonK and y0 = (1, 0, 0), from E. Hairer's stiff test set
// (problem ROBER, https://www.unige.ch/~hairer/testset/testset.html), as
// reproduced in public test suites (e.g. J. Cash's MEBDF ROBER driver and
// NCAR micm's analytical tests, which cite that page). Radau5 at rtol 1e-12
// matches every entry to 4e-13 relative.
var RobertsonRefDecades = [12][3]float64{
	{0.9664597373330035e+00, 0.3074626578578675e-04, 0.3350951640121071e-01},
	{0.8413699238414729e+00, 0.1623390937990473e-04, 0.1586138422491472e+00},
	{0.6172348823960878e+00, 0.6153591274639123e-05, 0.3827589640126376e+00},
	{0.3368745306607069e+00, 0.2013702318261393e-05, 0.6631234556369748e+00},
	{0.1073004285378040e+00, 0.4800166972571660e-06, 0.8926990914454987e+00},
	{0.1786592114209946e-01, 0.7274751468436319e-07, 0.9821340061103859e+00},
	{0.2031483924973415e-02, 0.8142277783356159e-08, 0.9979685079327488e+00},
	{0.2076093439016395e-03, 0.8306077485067610e-09, 0.9997923898254906e+00},
	{0.2082417512179460e-04, 0.8329841429908955e-10, 0.9999791757415798e+00},
	{0.2083229471647004e-05, 0.8332935037760723e-11, 0.9999979167621954e+00},
	{0.2083328471883087e-06, 0.8333315602809495e-12, 0.9999997916663195e+00},
	{0.2083340149701284e-07, 0.8333360770334744e-13, 0.9999999791665152e+00},
}

// HIRES returns the 8-state HIRES problem (Schäfer 1975; Hairer & Wanner
// II; Bari test set), autonomous and without parameters (NParam = 0). Its
// standard data are HIRESY0, HIRESTEnd and HIRESRef.
func HIRES() Problem {
	return Problem{
		Name: "hires", Dim: 8,
		F: func(_ float64, y, _, f []float64) {
			f[0] = -1.71*y[0] + 0.43*y[1] + 8.32*y[2] + 0.0007
			f[1] = 1.71*y[0] - 8.75*y[1]
			f[2] = -10.03*y[2] + 0.43*y[3] + 0.035*y[4]
			f[3] = 8.32*y[1] + 1.71*y[2] - 1.12*y[3]
			f[4] = -1.745*y[4] + 0.43*(y[5]+y[6])
			f[5] = -280*y[5]*y[7] + 0.69*y[3] + 1.71*y[4] - 0.43*y[5] + 0.69*y[6]
			f[6] = 280*y[5]*y[7] - 1.81*y[6]
			f[7] = -f[6]
		},
		Jac: func(_ float64, y, _ []float64, J []float64) {
			const n = 8
			for i := range J[:n*n] {
				J[i] = 0
			}
			set := func(i, j int, v float64) { J[(i-1)*n+(j-1)] = v }
			set(1, 1, -1.71)
			set(1, 2, 0.43)
			set(1, 3, 8.32)
			set(2, 1, 1.71)
			set(2, 2, -8.75)
			set(3, 3, -10.03)
			set(3, 4, 0.43)
			set(3, 5, 0.035)
			set(4, 2, 8.32)
			set(4, 3, 1.71)
			set(4, 4, -1.12)
			set(5, 5, -1.745)
			set(5, 6, 0.43)
			set(5, 7, 0.43)
			set(6, 4, 0.69)
			set(6, 5, 1.71)
			set(6, 6, -280*y[7]-0.43)
			set(6, 7, 0.69)
			set(6, 8, -280*y[5])
			set(7, 6, 280*y[7])
			set(7, 7, -1.81)
			set(7, 8, 280*y[5])
			set(8, 6, -280*y[7])
			set(8, 7, 1.81)
			set(8, 8, -280*y[5])
		},
	}
}

// HIRES standard data (Bari test set, problem HIRES).
var (
	HIRESY0   = [8]float64{1, 0, 0, 0, 0, 0, 0, 0.0057}
	HIRESTEnd = 321.8122
	// HIRESRef is y(321.8122), "computed using true double precision RADAU5
	// on Cray C90, uround = 1.01e-19, rtol = atol = h0 = 1.1e-18" (Bari test
	// set, hires.f, subroutine solut).
	HIRESRef = [8]float64{
		0.7371312573325668e-3, 0.1442485726316185e-3, 0.5888729740967575e-4,
		0.1175651343283149e-2, 0.2386356198831331e-2, 0.6238968252742796e-2,
		0.2849998395185769e-2, 0.2850001604814231e-2,
	}
)

// Lorenz96 returns the cyclic Lorenz-96 system of dimension d ≥ 4 with
// p = (F): y_i' = (y_{i+1} − y_{i−2})·y_{i−1} − y_i + F.
func Lorenz96(d int) Problem {
	if d < 4 {
		panic("refode: Lorenz96 needs d >= 4")
	}
	idx := func(i int) int { return ((i % d) + d) % d }
	return Problem{
		Name: "lorenz96", Dim: d, NParam: 1,
		F: func(_ float64, y, p, dy []float64) {
			for i := 0; i < d; i++ {
				dy[i] = (y[idx(i+1)]-y[idx(i-2)])*y[idx(i-1)] - y[i] + p[0]
			}
		},
		Jac: func(_ float64, y, _ []float64, J []float64) {
			for i := range J[:d*d] {
				J[i] = 0
			}
			for i := 0; i < d; i++ {
				J[i*d+idx(i+1)] += y[idx(i-1)]
				J[i*d+idx(i-2)] -= y[idx(i-1)]
				J[i*d+idx(i-1)] += y[idx(i+1)] - y[idx(i-2)]
				J[i*d+i] -= 1
			}
		},
		JacP: func(_ float64, _, _ []float64, Jp []float64) {
			for i := 0; i < d; i++ {
				Jp[i] = 1
			}
		},
	}
}

// StiffField returns the two-state stiff test field used by the
// library's Rodas5P tests, p = (p0, p1):
//
//	y1' = −p0·(y1 − y2²), y2' = y1 − y2 − p1·y2³.
func StiffField() Problem {
	return Problem{
		Name: "stifffield", Dim: 2, NParam: 2,
		F: func(_ float64, y, p, dy []float64) {
			dy[0] = -p[0] * (y[0] - y[1]*y[1])
			dy[1] = y[0] - y[1] - p[1]*y[1]*y[1]*y[1]
		},
		Jac: func(_ float64, y, p []float64, J []float64) {
			J[0], J[1] = -p[0], 2*p[0]*y[1]
			J[2], J[3] = 1, -1-3*p[1]*y[1]*y[1]
		},
		JacP: func(_ float64, y, _ []float64, Jp []float64) {
			Jp[0], Jp[1] = -(y[0] - y[1]*y[1]), 0
			Jp[2], Jp[3] = 0, -y[1]*y[1]*y[1]
		},
	}
}

// Linear returns y' = A·y for the row-major d×d matrix A (copied), without
// parameters. LinearExact gives its closed-form solution.
func Linear(A []float64, d int) Problem {
	if len(A) != d*d {
		panic("refode: Linear: len(A) != d*d")
	}
	A = append([]float64(nil), A...)
	return Problem{
		Name: "linear", Dim: d,
		F: func(_ float64, y, _, dy []float64) {
			for i := 0; i < d; i++ {
				s := 0.0
				for j := 0; j < d; j++ {
					s += A[i*d+j] * y[j]
				}
				dy[i] = s
			}
		},
		Jac: func(_ float64, _, _ []float64, J []float64) { copy(J, A) },
	}
}

// LinearExact returns exp(A·(t − t0))·y0 computed with gonum's matrix
// exponential (scaling and squaring with a Padé approximant), accurate to a
// few ulps times the condition of the problem.
func LinearExact(A []float64, d int, t0 float64, y0 []float64, t float64) []float64 {
	a := mat.NewDense(d, d, append([]float64(nil), A...))
	a.Scale(t-t0, a)
	var e mat.Dense
	e.Exp(a)
	var y mat.VecDense
	y.MulVec(&e, mat.NewVecDense(d, append([]float64(nil), y0...)))
	return append([]float64(nil), y.RawVector().Data...)
}

// Rotation returns the non-autonomous linear system
//
//	y' = ω(t)·[[0, 1], [−1, 0]]·y, ω(t) = a + b·t, p = (a, b),
//
// whose flow is a rotation by θ = a(t − t0) + b(t² − t0²)/2 (RotationExact).
// It checks that an integrator handles explicit time dependence.
func Rotation() Problem {
	return Problem{
		Name: "rotation", Dim: 2, NParam: 2,
		F: func(t float64, y, p, dy []float64) {
			w := p[0] + p[1]*t
			dy[0] = w * y[1]
			dy[1] = -w * y[0]
		},
		Jac: func(t float64, _, p []float64, J []float64) {
			w := p[0] + p[1]*t
			J[0], J[1] = 0, w
			J[2], J[3] = -w, 0
		},
		JacP: func(t float64, y, _ []float64, Jp []float64) {
			Jp[0], Jp[1] = y[1], t*y[1]
			Jp[2], Jp[3] = -y[0], -t*y[0]
		},
	}
}

// RotationExact returns the exact solution of Rotation at t from y(t0) = y0
// together with dy/dp (2×2, [i][k] = ∂y_i/∂p_k) and dy/dy0.
func RotationExact(p [2]float64, t0 float64, y0 [2]float64, t float64) (y [2]float64, dydp, dydy0 [2][2]float64) {
	th := p[0]*(t-t0) + p[1]*(t*t-t0*t0)/2
	c, s := math.Cos(th), math.Sin(th)
	y = [2]float64{c*y0[0] + s*y0[1], -s*y0[0] + c*y0[1]}
	dydy0 = [2][2]float64{{c, s}, {-s, c}}
	// dy/dθ = [[-s, c], [-c, -s]]·y0.
	dth := [2]float64{-s*y0[0] + c*y0[1], -c*y0[0] - s*y0[1]}
	dthdp := [2]float64{t - t0, (t*t - t0*t0) / 2}
	for i := 0; i < 2; i++ {
		for k := 0; k < 2; k++ {
			dydp[i][k] = dth[i] * dthdp[k]
		}
	}
	return y, dydp, dydy0
}
