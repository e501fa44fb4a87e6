package problems

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
	"gonum.org/v1/gonum/mat"
)

// More published and closed-form problems (session 51): the Chemical
// Akzo Nobel problem as an ODE (publishedCases), Van der Pol at μ = 1e3
// against RADAU5's forward sensitivities, linear systems with a matrix
// per trajectory against the matrix exponential and its Fréchet
// derivative, a stiff linear system with eigenvalues from −1 to −1e8,
// FitzHugh–Nagumo ensembles mixing easy and stiff rows, SIR ensembles
// with populations from 1e3 to 1e12, a non-autonomous field on spans far
// from t = 0 and at negative times, and states scaled by 2^±40 and
// 10^±12.

// chemAkzo is the Chemical Akzo Nobel problem CHEMAKZO of the Bari test
// set (chemakzo.f; Mazzia & Magherini, Test Set for IVP Solvers, release
// 2.4), an index-1 DAE M·y' = f(y) with the algebraic equation 0 = Ks·y1·y4
// − y6, written here as an ODE on y1…y5 with y6 = Ks·y1·y4 substituted:
//
//	y1' = −2r1 + r2 − r3 − r4
//	y2' = −r1/2 − r4 − r5/2 + Fin
//	y3' = r1 − r2 + r3
//	y4' = −r2 + r3 − 2r4
//	y5' = r2 − r3 + r5
//
// with r1 = k1·y1⁴·√y2, r2 = k2·y3·y4, r3 = (k2/K)·y1·y5, r4 = k3·y1·y4²,
// r5 = k4·y6²·√y2, Fin = klA·(pCO2/H − y2), pCO2 = 0.9, H = 737, and the
// parameters p = (k1, k2, k3, k4, K, klA, Ks) = (18.7, 0.58, 0.09, 0.42,
// 34.4, 3.3, 115.83); y0 = (0.444, 0.00123, 0, 0.007, 0), t ∈ [0, 180].
// chemAkzoRef is y(180) as published (PSIDE at rtol = atol = 1e-19), y6
// last. The substitution is exact: the DAE's y6 is Ks·y1·y4 at all t.
func chemAkzo() Problem {
	return Problem{
		Name: "chemakzo",
		Field: ode.Field{Name: "chemakzo", Dim: 5, Params: 7, Stiff: true, F: func(_ tape.V, y, p []tape.V) []tape.V {
			k1, k2, k3, k4, bigK, kla, ks := p[0], p[1], p[2], p[3], p[4], p[5], p[6]
			y6 := ks.Mul(y[0]).Mul(y[3])
			sq := y[1].Sqrt()
			r1 := k1.Mul(y[0].Powi(4)).Mul(sq)
			r2 := k2.Mul(y[2]).Mul(y[3])
			r3 := k2.Div(bigK).Mul(y[0]).Mul(y[4])
			r4 := k3.Mul(y[0]).Mul(y[3].Square())
			r5 := k4.Mul(y6.Square()).Mul(sq)
			fin := kla.Mul(y[1].Const(akzoPCO2 / akzoH).Sub(y[1]))
			return []tape.V{
				r1.MulC(-2).Add(r2).Sub(r3).Sub(r4),
				r1.MulC(-0.5).Sub(r4).Sub(r5.MulC(0.5)).Add(fin),
				r1.Sub(r2).Add(r3),
				r2.Neg().Add(r3).Sub(r4.MulC(2)),
				r2.Sub(r3).Add(r5),
			}
		}},
		Y0: []float64{0.444, 0.00123, 0, 0.007, 0},
		P:  []float64{18.7, 0.58, 0.09, 0.42, 34.4, 3.3, 115.83},
		T1: 180,
	}
}

const akzoPCO2, akzoH = 0.9, 737.0

var chemAkzoRef = []float64{0.1150794920661702, 0.1203831471567715e-2, 0.1611562887407974,
	0.3656156421249283e-3, 0.1708010885264404e-1, 0.4873531310307455e-2}

// chemAkzoF is chemAkzo's field in plain Go, as chemakzo.f writes it.
func chemAkzoF(y, p, _ []float64) []float64 {
	k1, k2, k3, k4, bigK, kla, ks := p[0], p[1], p[2], p[3], p[4], p[5], p[6]
	y6 := ks * y[0] * y[3]
	r1 := k1 * math.Pow(y[0], 4) * math.Sqrt(y[1])
	r2 := k2 * y[2] * y[3]
	r3 := k2 / bigK * y[0] * y[4]
	r4 := k3 * y[0] * y[3] * y[3]
	r5 := k4 * y6 * y6 * math.Sqrt(y[1])
	fin := kla * (akzoPCO2/akzoH - y[1])
	return []float64{-2*r1 + r2 - r3 - r4, -0.5*r1 - r4 - 0.5*r5 + fin, r1 - r2 + r3, -r2 + r3 - 2*r4, r2 - r3 + r5}
}

// TestChemAkzo checks chemAkzo's traced field against chemAkzoF at random
// states, and y6(180) = Ks·y1·y4 against the published algebraic
// component (the others are publishedCases'), Rodas5P at rtol 1e-8.
func TestChemAkzo(t *testing.T) {
	t.Parallel()
	pr := chemAkzo()
	prog, err := pr.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(51, 4))
	for trial := 0; trial < 5; trial++ {
		y := make([]float64, 5)
		for j := range y {
			y[j] = 0.5 * rng.Float64()
		}
		got := prog.Eval(nil, append(append([]float64{0}, y...), pr.P...))
		for i, w := range chemAkzoF(y, pr.P, nil) {
			if !(math.Abs(got[i]-w) <= 1e-14*math.Max(1, math.Abs(w))) {
				t.Errorf("y = %v: f[%d]: Want: %v, Got: %v.", y, i, w, got[i])
			}
		}
	}
	sol, err := ode.Solve(ode.Problem{Field: pr.Field, Y0: pr.Y0, P: pr.P, T1: pr.T1},
		&ode.Settings{Method: ode.Rodas5P, RelTol: 1e-8, AbsTol: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	y6 := pr.P[6] * sol.Y[0] * sol.Y[3]
	if e := math.Abs(y6-chemAkzoRef[5]) / chemAkzoRef[5]; !(e <= 1e-7) {
		t.Errorf("y6(180) = Ks·y1·y4 = %.16g, published %.16g: relative error %.2g, want ≤ 1e-7", y6, chemAkzoRef[5], e)
	}
}

// TestVanDerPolSensitivities solves Van der Pol at μ = 1e3 (ε = 1e-6 in
// Hairer's scaled form, StiffVanDerPol) over [0, 2] and checks y(2) and
// the gradient of y1(2) with respect to μ, x(0) and v(0) against RADAU5's
// forward sensitivities (refode.VanDerPolRef, rtol 1e-12): the gradient
// of the discrete solution converges to that of the exact one as the
// tolerance falls, at the rate of the method (Rosenbrock23 is second
// order, and slower still through the fast transitions).
func TestVanDerPolSensitivities(t *testing.T) {
	t.Parallel()
	const mu = 1e3
	y, dmu, dy0 := refode.VanDerPolRef(mu, [2]float64{2, 0}, 2)
	want := []float64{dmu[0], dy0[0][0], dy0[0][1]}
	pr := StiffVanDerPol(mu)
	for _, c := range []struct {
		m          ode.Method
		rtol       float64
		yTol, gTol float64 // y in units of rtol; the gradient relative, componentwise
		short      bool
	}{
		// Measured: y 0.89, 1.1, 1.1 rtol; gradient 2.9e-3, 9.2e-6, 3.1e-7.
		{ode.Rodas5P, 1e-6, 4, 1e-2, true},
		{ode.Rodas5P, 1e-8, 4, 4e-5, true},
		{ode.Rodas5P, 1e-10, 4, 2e-6, false},
		// 6.9, 32 and 150 rtol (order 2); the gradient 7.3e-2, 3.5e-2, 2.3e-3.
		{ode.Rosenbrock23, 1e-4, 30, 0.3, true},
		{ode.Rosenbrock23, 1e-6, 150, 0.15, false},
		// 1.7 rtol, 1.4e-5.
		{ode.Auto, 1e-8, 6, 6e-5, true},
	} {
		name := fmt.Sprintf("%s/%g", c.m.Name(), c.rtol)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if testing.Short() && !c.short {
				t.Skip("-short")
			}
			g, err := ode.Grad(nil, ode.Problem{Field: pr.Field, Y0: pr.Y0, P: pr.P, T1: pr.T1}, ode.Component(0), nil,
				&ode.Settings{Method: c.m, RelTol: c.rtol, AbsTol: c.rtol})
			if err != nil {
				t.Fatal(err)
			}
			e := publishedError(g.Solution.Y, y[:], 0)
			got := []float64{g.P[0], g.Y0[0], g.Y0[1]}
			ge := publishedError(got, want, 0)
			t.Logf("%s: %d steps, y(2) errs by %.2g = %.3g·rtol, the gradient (∂/∂μ, ∂/∂x0, ∂/∂v0) by %.2g", name, g.Mesh.Len[0], e, e/c.rtol, ge)
			if !(e <= c.yTol*c.rtol) {
				t.Errorf("%s: y(2) = %v, RADAU5 %v: error %.3g·rtol, want ≤ %g·rtol", name, g.Solution.Y, y, e/c.rtol, c.yTol)
			}
			if !(ge <= c.gTol) {
				t.Errorf("%s: ∂y1(2)/∂(μ, x0, v0) = %v, RADAU5's sensitivities %v: relative error %.3g, want ≤ %g", name, got, want, ge, c.gTol)
			}
		})
	}
}

// expm returns exp(a·T) for the row-major d×d matrix a.
func expm(a []float64, d int, T float64) *mat.Dense {
	m := mat.NewDense(d, d, append([]float64(nil), a...))
	m.Scale(T, m)
	var e mat.Dense
	e.Exp(m)
	return &e
}

// linearAField is y' = A·y with the d×d matrix A per trajectory, its
// parameters row-major (p[i*d+j] = A[i][j]).
func linearAField(d int) ode.Field {
	return ode.Field{Name: "linear-a", Dim: d, Params: d * d, F: func(_ tape.V, y, p []tape.V) []tape.V {
		out := make([]tape.V, d)
		for i := range out {
			out[i] = tape.Dot(p[i*d:(i+1)*d], y, y[0].Const(0))
		}
		return out
	}}
}

// linearALoss returns y(T) = exp(A·T)·y0 and the gradient of L = ‖y(T)‖²
// with respect to y0 (2·exp(A·T)ᵀ·y(T)) and to A: ∂L/∂A_kl = 2·y(T)ᵀ·
// L(A, E_kl)·y0, L(A, E) the Fréchet derivative of exp(A·T) in the
// direction E, the upper right block of exp([[A, E], [0, A]]·T) (Van
// Loan 1978).
func linearALoss(a []float64, d int, y0 []float64, T float64) (y, gy0, ga []float64) {
	e := expm(a, d, T)
	y = make([]float64, d)
	gy0 = make([]float64, d)
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			y[i] += e.At(i, j) * y0[j]
		}
	}
	for j := 0; j < d; j++ {
		for i := 0; i < d; i++ {
			gy0[j] += 2 * e.At(i, j) * y[i]
		}
	}
	ga = make([]float64, d*d)
	big := make([]float64, 4*d*d)
	for k := range ga {
		clear(big)
		for i := 0; i < d; i++ {
			for j := 0; j < d; j++ {
				big[i*2*d+j] = a[i*d+j]
				big[(i+d)*2*d+j+d] = a[i*d+j]
			}
		}
		big[(k/d)*2*d+d+k%d] = 1
		eb := expm(big, 2*d, T)
		for i := 0; i < d; i++ {
			for j := 0; j < d; j++ {
				ga[k] += 2 * y[i] * eb.At(i, d+j) * y0[j]
			}
		}
	}
	return y, gy0, ga
}

// maxRel returns max_i |a_i − b_i| / max_i |b_i|.
func maxRel(a, b []float64) float64 {
	e, s := 0.0, 0.0
	for i := range b {
		e = math.Max(e, math.Abs(a[i]-b[i]))
		s = math.Max(s, math.Abs(b[i]))
	}
	return e / s
}

// TestLinearMatrixPerTrajectory solves y' = A·y, y ∈ R³, with a random
// A (entries N(0, 1)) and y0 in each of six trajectories, two of them
// stiff (A[1][1] −= 300 and A[0][0] −= 1e4), and checks y(1) and the
// gradient of Σ‖y(1)‖² with respect to y0 and to all nine entries of A
// against the matrix exponential and its Fréchet derivative
// (linearALoss). The explicit methods run the four non-stiff rows (on
// the stiff ones a gradient record stops where the stiffness test
// fires).
func TestLinearMatrixPerTrajectory(t *testing.T) {
	t.Parallel()
	const d, n, T = 3, 6, 1.0
	rng := rand.New(rand.NewPCG(51, 1))
	y0 := make([]float64, n*d)
	a := make([]float64, n*d*d)
	for i := range y0 {
		y0[i] = rng.NormFloat64()
	}
	for i := range a {
		a[i] = rng.NormFloat64()
	}
	a[4*d*d+4] -= 300
	a[5*d*d] -= 1e4
	for _, c := range []struct {
		m    ode.Method
		rtol float64
		rows int     // the first rows solved
		tol  float64 // y in units of rtol
		gTol float64 // gradients, relative to their largest entry
	}{
		// Measured: y within 0.48 rtol (Tsit5), 0.12 (Vern7), 0.06 (Rodas5P),
		// 0.59 (Auto) and 640 (Rosenbrock23, order 2); the gradients within
		// 2e-10, 5e-11, 3e-11, 2e-10 and 2.1e-5.
		{ode.Tsit5, 1e-10, 4, 10, 1e-9},
		{ode.Vern7, 1e-10, 4, 10, 1e-9},
		{ode.Rodas5P, 1e-10, n, 10, 1e-9},
		{ode.Rosenbrock23, 1e-8, n, 2000, 1e-4},
		{ode.Auto, 1e-10, n, 10, 1e-9},
	} {
		t.Run(c.m.Name(), func(t *testing.T) {
			t.Parallel()
			g, err := ode.Grad(nil, ode.Problem{Field: linearAField(d), N: c.rows, Y0: y0[:c.rows*d], P: a[:c.rows*d*d], T1: T},
				ode.SumSquares(), nil, &ode.Settings{Method: c.m, RelTol: c.rtol, AbsTol: c.rtol})
			if err != nil {
				t.Fatal(err)
			}
			worst := [3]float64{}
			for i := 0; i < c.rows; i++ {
				y, gy0, ga := linearALoss(a[i*d*d:(i+1)*d*d], d, y0[i*d:(i+1)*d], T)
				errs := [3]float64{publishedError(g.Solution.Y[i*d:(i+1)*d], y, 1) / c.rtol,
					maxRel(g.Y0[i*d:(i+1)*d], gy0), maxRel(g.P[i*d*d:(i+1)*d*d], ga)}
				for k, e := range errs {
					worst[k] = math.Max(worst[k], e)
				}
				if !(errs[0] <= c.tol) || !(errs[1] <= c.gTol) || !(errs[2] <= c.gTol) {
					t.Errorf("row %d: y(1) errs by %.3g·rtol (want ≤ %g), ∂L/∂y0 by %.2g and ∂L/∂A by %.2g (want ≤ %g)\n y %v, want %v\n ∂L/∂A %v\n want %v",
						i, errs[0], c.tol, errs[1], errs[2], c.gTol, g.Solution.Y[i*d:(i+1)*d], y, g.P[i*d*d:(i+1)*d*d], ga)
				}
			}
			t.Logf("%s rtol %g: y(1) within %.3g·rtol, ∂L/∂y0 within %.2g, ∂L/∂A within %.2g", c.m.Name(), c.rtol, worst[0], worst[1], worst[2])
		})
	}
}
