package problems

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
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

// TestVanDerPolSensitivities solves Van der Pol at μ = 1e3 and 1e6 (ε =
// 1/μ in Hairer's scaled form, StiffVanDerPol; μ = 1e6 is the test set's
// VDPOL) over [0, 2] and checks y(2) and the gradient of y1(2) with
// respect to μ, x(0) and v(0) against RADAU5's forward sensitivities
// (refode.VanDerPolRef, rtol 1e-12): the gradient of the discrete
// solution converges to that of the exact one as the tolerance falls, at
// the rate of the method, and slowly through the fast transitions
// (Rosenbrock23's at μ = 1e6 is off by 2e2 at rtol 1e-4 and 3.4 at 1e-8,
// so it is left out there).
func TestVanDerPolSensitivities(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		mu         float64
		m          ode.Method
		rtol       float64
		yTol, gTol float64 // y in units of rtol; the gradient relative, componentwise
		short      bool
	}{
		// μ = 1e3. Measured: y 0.89, 1.1, 1.1 rtol; gradient 2.9e-3, 9.2e-6, 3.1e-7.
		{1e3, ode.Rodas5P, 1e-6, 4, 1e-2, true},
		{1e3, ode.Rodas5P, 1e-8, 4, 4e-5, true},
		{1e3, ode.Rodas5P, 1e-10, 4, 2e-6, false},
		// 6.9, 32 and 150 rtol (order 2); the gradient 7.3e-2, 3.5e-2, 2.3e-3.
		{1e3, ode.Rosenbrock23, 1e-4, 30, 0.3, true},
		{1e3, ode.Rosenbrock23, 1e-6, 150, 0.15, false},
		// 1.7 rtol, 1.4e-5.
		{1e3, ode.Auto, 1e-8, 6, 6e-5, true},
		// μ = 1e6: y 1.3, 1.3, 1.3 rtol; gradient 1.5e-2, 3.5e-4, 1.4e-2.
		{1e6, ode.Rodas5P, 1e-8, 5, 5e-2, false},
		{1e6, ode.Rodas5P, 1e-10, 5, 1.5e-3, false},
		{1e6, ode.Auto, 1e-8, 5, 5e-2, false},
	} {
		name := fmt.Sprintf("mu=%g/%s/%g", c.mu, c.m.Name(), c.rtol)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if testing.Short() && !c.short {
				t.Skip("-short")
			}
			y, dmu, dy0 := refode.VanDerPolRef(c.mu, [2]float64{2, 0}, 2)
			want := []float64{dmu[0], dy0[0][0], dy0[0][1]}
			pr := StiffVanDerPol(c.mu)
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

// spreadField is y' = Q·diag(λ)·Qᵀ·y for the constant orthogonal d×d
// matrix q (row-major) and the eigenvalues λ = p per trajectory.
func spreadField(q []float64, d int) ode.Field {
	return ode.Field{Name: "spread", Dim: d, Params: d, Stiff: true, F: func(_ tape.V, y, p []tape.V) []tape.V {
		zero := y[0].Const(0)
		z := make([]tape.V, d) // Qᵀ·y, scaled by λ
		for k := range z {
			col := make([]tape.V, d)
			for i := range col {
				col[i] = y[0].Const(q[i*d+k])
			}
			z[k] = tape.Dot(col, y, zero).Mul(p[k])
		}
		out := make([]tape.V, d)
		for i := range out {
			row := make([]tape.V, d)
			for k := range row {
				row[k] = y[0].Const(q[i*d+k])
			}
			out[i] = tape.Dot(row, z, zero)
		}
		return out
	}}
}

// TestStiffSpreadEigenvalues solves y' = Q·diag(λ)·Qᵀ·y with λ = (−1,
// −10, −1e3, −1e5, −1e8) and a random orthogonal Q over [0, 1], and
// checks y(1) = Q·diag(e^λ)·Qᵀ·y0 and the gradient of L = ‖y(1)‖² with
// respect to y0 (2·Q·diag(e^λ)·z, z = Qᵀ·y(1)) and to each eigenvalue
// (2·z_k²), on both Rosenbrock methods and Auto. The fast modes are gone
// by t = 1 (their ∂L/∂λ_k underflow to 0); an L-stable method must
// damp them from the first step, which the error of y(1) in the slow
// modes shows.
func TestStiffSpreadEigenvalues(t *testing.T) {
	t.Parallel()
	const d, T = 5, 1.0
	rng := rand.New(rand.NewPCG(51, 2))
	g0 := mat.NewDense(d, d, nil)
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			g0.Set(i, j, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g0)
	var qm mat.Dense
	qr.QTo(&qm)
	q := qm.RawMatrix().Data
	lam := []float64{-1, -10, -1e3, -1e5, -1e8}
	y0 := []float64{1, -0.5, 0.3, 0.2, -0.7}
	// The closed forms.
	z := make([]float64, d) // Qᵀ·y(1)
	for k := range z {
		for i := 0; i < d; i++ {
			z[k] += q[i*d+k] * y0[i]
		}
		z[k] *= math.Exp(lam[k] * T)
	}
	y, gy0, gl := make([]float64, d), make([]float64, d), make([]float64, d)
	for i := 0; i < d; i++ {
		for k := 0; k < d; k++ {
			y[i] += q[i*d+k] * z[k]
			gy0[i] += 2 * q[i*d+k] * math.Exp(lam[k]*T) * z[k]
		}
	}
	for k := range gl {
		gl[k] = 2 * T * z[k] * z[k]
	}
	for _, c := range []struct {
		m          ode.Method
		rtol       float64
		yTol, gTol float64 // y: absolute, in units of rtol; gradients relative to their largest entry
	}{
		// Measured: y within 3e-4 and 4.5e-3 rtol (Rodas5P), 0.52, 2.9
		// and 14 (Rosenbrock23, order 2), 1.1e-3 (Auto); the gradients
		// within 1.7e-10, 6e-12, 4e-4, 2.3e-5, 1.1e-6 and 7.1e-11.
		{ode.Rodas5P, 1e-6, 0.1, 1e-9},
		{ode.Rodas5P, 1e-10, 0.1, 5e-11},
		{ode.Rosenbrock23, 1e-4, 3, 2e-3},
		{ode.Rosenbrock23, 1e-6, 15, 1e-4},
		{ode.Rosenbrock23, 1e-8, 70, 5e-6},
		{ode.Auto, 1e-8, 0.1, 5e-10},
	} {
		name := fmt.Sprintf("%s/%g", c.m.Name(), c.rtol)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g, err := ode.Grad(nil, ode.Problem{Field: spreadField(q, d), Y0: y0, P: lam, T1: T}, ode.SumSquares(), nil,
				&ode.Settings{Method: c.m, RelTol: c.rtol, AbsTol: 1e-3 * c.rtol})
			if err != nil {
				t.Fatal(err)
			}
			e := 0.0
			for i := range y {
				e = math.Max(e, math.Abs(g.Solution.Y[i]-y[i]))
			}
			ge := math.Max(maxRel(g.Y0, gy0), maxRel(g.P, gl))
			t.Logf("%s: %d steps (%d rejected), y(1) within %.2g = %.2g·rtol, the gradients within %.2g",
				name, g.Mesh.Stats.Accepted[0], g.Mesh.Stats.Rejected[0], e, e/c.rtol, ge)
			if !(e <= c.yTol*c.rtol) || !(ge <= c.gTol) {
				t.Errorf("%s: y(1) errs by %.3g·rtol (want ≤ %g), the gradients by %.3g (want ≤ %g)\n y %v\n want %v\n ∂L/∂λ %v, want %v\n ∂L/∂y0 %v, want %v",
					name, e/c.rtol, c.yTol, ge, c.gTol, g.Solution.Y, y, g.P, gl, g.Y0, gy0)
			}
		})
	}
}

// rowLossFD returns the fourth-order central difference, with step h, of
// row i's share of a loss (rowLoss of its final state) with respect to
// *x, from replays of sv on the mesh m: the derivative Grad computes
// exactly. Each row's loss is taken alone, so the other rows' rounding
// does not swamp it.
func rowLossFD(t *testing.T, sv *ode.Solver, prob *ode.Problem, m *ode.Mesh, i int, rowLoss func(y []float64) float64, x *float64, h float64) float64 {
	t.Helper()
	d := prob.Field.Dim
	x0 := *x
	l := func(s float64) float64 {
		*x = x0 + s*h
		sol, err := sv.Replay(prob, m)
		if err != nil {
			t.Fatal(err)
		}
		return rowLoss(sol.Y[i*d : (i+1)*d])
	}
	fd := (-l(2) + 8*l(1) - 8*l(-1) + l(-2)) / (12 * h)
	*x = x0
	return fd
}

// fitzHughNagumo is v' = (v − v³/3 − w + I)/ε, w' = v + a − b·w with p =
// (a, b, ε, I) per trajectory (FitzHugh 1961; Nagumo et al. 1962, in the
// relaxation form whose stiffness grows as 1/ε), with its plain-Go field
// and Jacobian.
func fitzHughNagumo() (ode.Field, func(y, p, _ []float64) []float64, func(y, p, J []float64)) {
	f := ode.Field{Name: "fitzhugh-nagumo", Dim: 2, Params: 4, F: func(_ tape.V, y, p []tape.V) []tape.V {
		v, w := y[0], y[1]
		return []tape.V{v.Sub(v.Powi(3).MulC(1.0 / 3)).Sub(w).Add(p[3]).Div(p[2]), v.Add(p[0]).Sub(p[1].Mul(w))}
	}}
	ref := func(y, p, _ []float64) []float64 {
		v, w := y[0], y[1]
		return []float64{(v - v*v*v/3 - w + p[3]) / p[2], v + p[0] - p[1]*w}
	}
	jac := func(y, p, J []float64) {
		v := y[0]
		J[0], J[1], J[2], J[3] = (1-v*v)/p[2], -1/p[2], 1, -p[1]
	}
	return f, ref, jac
}

// TestFitzHughNagumoEnsemble solves one ensemble of FitzHugh–Nagumo
// oscillators whose ε runs from 1 (non-stiff) to 1e-4 (stiff relaxation
// oscillations), with their own I and initial states, over [0, 10]: each
// row's y(10) against RADAU5 (rtol 1e-12), and ∂L/∂ε and ∂L/∂v0 of L =
// Σ‖y(10)‖² against central differences on the recorded mesh.
func TestFitzHughNagumoEnsemble(t *testing.T) {
	t.Parallel()
	f, ref, jac := fitzHughNagumo()
	eps := []float64{1, 0.1, 1e-2, 1e-3, 1e-4, 1e-4}
	n := len(eps)
	y0, p := make([]float64, 2*n), make([]float64, 4*n)
	for i, e := range eps {
		y0[2*i], y0[2*i+1] = -1+0.3*float64(i), 0.5-0.1*float64(i)
		p[4*i], p[4*i+1], p[4*i+2], p[4*i+3] = 0.7, 0.8, e, 0.5+0.07*float64(i)
	}
	const T = 10.0
	want := make([][]float64, n)
	for i := range want {
		want[i] = refSolve(t, ref, jac, y0[2*i:2*i+2], p[4*i:4*i+4], 0, T, 1e-12, 1e-12)
	}
	for _, c := range []struct {
		m          ode.Method
		rtol       float64
		yTol, gTol float64 // y in units of rtol (‖·‖₂ relative); gradients relative
		short      bool
	}{
		// Measured: y within 33 rtol (Rodas5P), 100 (Rosenbrock23), 39
		// (Auto); gradients within 1.4e-7, 9.4e-7, 2.3e-7 of the
		// differences (whose own error, at steps 1e-3·|x|, is about 1e-7).
		{ode.Rodas5P, 1e-8, 100, 1e-6, true},
		{ode.Rosenbrock23, 1e-6, 300, 5e-6, false},
		{ode.Auto, 1e-8, 120, 1e-6, false},
	} {
		t.Run(c.m.Name(), func(t *testing.T) {
			t.Parallel()
			if testing.Short() && !c.short {
				t.Skip("-short")
			}
			prob := ode.Problem{Field: f, N: n, Y0: append([]float64(nil), y0...), P: append([]float64(nil), p...), T1: T}
			sv, err := ode.NewSolver(f, &ode.Settings{Method: c.m, RelTol: c.rtol, AbsTol: c.rtol})
			if err != nil {
				t.Fatal(err)
			}
			g, err := sv.Grad(nil, &prob, ode.SumSquares(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range eps {
				e := relErr2(g.Solution.Y[2*i:2*i+2], want[i]) / c.rtol
				fdEps := rowLossFD(t, sv, &prob, g.Mesh, i, sumSquares, &prob.P[4*i+2], 1e-3*eps[i])
				fdV0 := rowLossFD(t, sv, &prob, g.Mesh, i, sumSquares, &prob.Y0[2*i], 1e-3)
				ge := math.Max(math.Abs(g.P[4*i+2]-fdEps)/math.Abs(fdEps), math.Abs(g.Y0[2*i]-fdV0)/math.Abs(fdV0))
				t.Logf("ε = %g: %d steps, y(10) within %.3g·rtol; ∂L/∂ε = %.8g (differences %.8g), ∂L/∂v0 = %.8g (%.8g): within %.2g",
					eps[i], g.Mesh.Len[i], e, g.P[4*i+2], fdEps, g.Y0[2*i], fdV0, ge)
				if !(e <= c.yTol) || !(ge <= c.gTol) {
					t.Errorf("row %d (ε = %g): y(10) = %v, RADAU5 %v: %.3g·rtol (want ≤ %g); ∂L/∂ε = %v, ∂L/∂v0 = %v against central differences %v, %v: %.2g (want ≤ %g)",
						i, eps[i], g.Solution.Y[2*i:2*i+2], want[i], e, c.yTol, g.P[4*i+2], g.Y0[2*i], fdEps, fdV0, ge, c.gTol)
				}
			}
		})
	}
}

// sirField is the SIR epidemic S' = −β·S·I/N, I' = β·S·I/N − γ·I, R' =
// γ·I (Kermack & McKendrick 1927) with p = (β, γ, N) per trajectory.
func sirField() (ode.Field, func(y, p, _ []float64) []float64) {
	f := ode.Field{Name: "sir", Dim: 3, Params: 3, F: func(_ tape.V, y, p []tape.V) []tape.V {
		inf := p[0].Mul(y[0]).Mul(y[1]).Div(p[2])
		rec := p[1].Mul(y[1])
		return []tape.V{inf.Neg(), inf.Sub(rec), rec}
	}}
	ref := func(y, p, _ []float64) []float64 {
		inf := p[0] * y[0] * y[1] / p[2]
		rec := p[1] * y[1]
		return []float64{-inf, inf - rec, rec}
	}
	return f, ref
}

// TestSIRPopulations solves SIR ensembles whose populations N run from
// 1e3 to 1e12 (ten infected at t = 0, R0 = β/γ from 3 to 4.5) over the
// 160 days of the epidemic with one AbsTol (1e-6) for all: the states of
// the largest rows are 1e18 times their absolute tolerance. Each row's
// y(160) against DOP853 (rtol 1e-13), S + I + R = N to rounding, and
// ∂I(160)/∂β against central differences on the recorded mesh.
func TestSIRPopulations(t *testing.T) {
	t.Parallel()
	f, ref := sirField()
	pops := []float64{1e3, 1e6, 8e9, 1e12}
	n := len(pops)
	y0, p := make([]float64, 3*n), make([]float64, 3*n)
	for i, pop := range pops {
		y0[3*i], y0[3*i+1] = pop-10, 10
		p[3*i], p[3*i+1], p[3*i+2] = 0.3+0.05*float64(i), 0.1, pop
	}
	const T = 160.0
	for _, c := range []struct {
		m          ode.Method
		rtol       float64
		yTol, gTol float64
	}{
		// Measured: y within 0.03 rtol (Tsit5), 2.5 (Vern7), 0.13 (Rodas5P),
		// 4.4 (Rosenbrock23); gradients within 4e-12 of the differences.
		{ode.Tsit5, 1e-8, 1, 1e-7},
		{ode.Vern7, 1e-10, 10, 1e-7},
		{ode.Rodas5P, 1e-8, 1, 1e-7},
		{ode.Rosenbrock23, 1e-6, 20, 1e-7},
	} {
		t.Run(c.m.Name(), func(t *testing.T) {
			t.Parallel()
			prob := ode.Problem{Field: f, N: n, Y0: y0, P: append([]float64(nil), p...), T1: T}
			sv, err := ode.NewSolver(f, &ode.Settings{Method: c.m, RelTol: c.rtol, AbsTol: 1e-6})
			if err != nil {
				t.Fatal(err)
			}
			g, err := sv.Grad(nil, &prob, ode.Component(1), nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, pop := range pops {
				y := g.Solution.Y[3*i : 3*i+3]
				want := refSolve(t, ref, nil, y0[3*i:3*i+3], p[3*i:3*i+3], 0, T, 1e-13, 1e-10)
				e := relErr2(y, want) / c.rtol
				cons := math.Abs(y[0]+y[1]+y[2]-pop) / pop
				fd := rowLossFD(t, sv, &prob, g.Mesh, i, func(y []float64) float64 { return y[1] }, &prob.P[3*i], 1e-4*p[3*i])
				ge := math.Abs(g.P[3*i]-fd) / math.Abs(fd)
				t.Logf("N = %g: %d steps, y(160) within %.3g·rtol (I(160) = %.6g), S+I+R−N = %.2g·N; ∂I/∂β = %.10g, differences %.10g: within %.2g",
					pop, g.Mesh.Len[i], e, y[1], cons, g.P[3*i], fd, ge)
				if !(e <= c.yTol) || !(cons <= 1e-14) || !(ge <= c.gTol) {
					t.Errorf("N = %g: y(160) = %v, DOP853 %v: %.3g·rtol (want ≤ %g); S+I+R−N = %.2g·N (want ≤ 1e-14); ∂I/∂β = %v, central differences %v: %.2g (want ≤ %g)",
						pop, y, want, e, c.yTol, cons, g.P[3*i], fd, ge, c.gTol)
				}
			}
		})
	}
}

// TestNonAutonomousSpans solves y' = ω·cos(ω·t)·y, whose solution is
// y0·exp(sin ωt − sin ωt0) and whose ∂y(T)/∂ω is (T·cos ωT − t0·cos ωt0)·
// y(T), on spans near 0, at negative times, across 0 and far from the
// origin (t0 = ±1e6, where ∂y/∂ω reaches 5e4), and checks y(T), ∂y/∂y0
// and ∂y/∂ω against those closed forms on every method. (At t0 = 1e9
// the rounding of the stage times, ulp(1e9) = 1.2e-7, moves the phase
// ωt by 1.5e-7 and the solution by some 200 tolerances of 1e-10 on every
// method: a limit of float64 time, as TestTimeFarFromOrigin states.)
func TestNonAutonomousSpans(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "phase", Dim: 1, Params: 1, F: func(tt tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(p[0].Mul(tt).Cos()).Mul(y[0])}
	}}
	const w, y0 = 1.3, 0.7
	for _, c := range []struct {
		m          ode.Method
		rtol       float64
		yTol, gTol float64 // y in units of rtol; gradients relative
	}{
		// Measured over the spans: y within 2.8 rtol (Tsit5), 1.8 (Vern7), 68
		// (Rodas5P, whose error estimate is of order 4) and 144 (Rosenbrock23,
		// order 2); gradients within 5.2e-9, 1.2e-9, 1.3e-8 and 1.3e-3.
		{ode.Tsit5, 1e-10, 10, 3e-8},
		{ode.Vern7, 1e-10, 10, 3e-9},
		{ode.Rodas5P, 1e-10, 200, 6e-8},
		{ode.Rosenbrock23, 1e-7, 500, 5e-3},
	} {
		for _, span := range [][2]float64{{0, 10}, {-10, -2}, {-5, 5}, {1e6, 1e6 + 10}, {-1e6 - 10, -1e6}} {
			name := fmt.Sprintf("%s/[%g,%g]", c.m.Name(), span[0], span[1])
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				t0, t1 := span[0], span[1]
				g, err := ode.Grad(nil, ode.Problem{Field: f, Y0: []float64{y0}, P: []float64{w}, T0: t0, T1: t1}, ode.Component(0), nil,
					&ode.Settings{Method: c.m, RelTol: c.rtol, AbsTol: c.rtol})
				if err != nil {
					t.Fatal(err)
				}
				y := y0 * math.Exp(math.Sin(w*t1)-math.Sin(w*t0))
				dw := (t1*math.Cos(w*t1) - t0*math.Cos(w*t0)) * y
				e := math.Abs(g.Solution.Y[0]-y) / y / c.rtol
				ge := math.Max(math.Abs(g.Y0[0]-y/y0)/(y/y0), math.Abs(g.P[0]-dw)/math.Abs(dw))
				t.Logf("%s: %d steps, y(T) within %.3g·rtol, ∂y/∂y0 and ∂y/∂ω (%.10g, closed form %.10g) within %.2g", name, g.Mesh.Len[0], e, g.P[0], dw, ge)
				if !(e <= c.yTol) || !(ge <= c.gTol) {
					t.Errorf("%s: y(T) = %.12g, want %.12g: %.3g·rtol (want ≤ %g); ∂y/∂y0 = %.12g, want %.12g; ∂y/∂ω = %.12g, want %.12g: within %.2g (want ≤ %g)",
						name, g.Solution.Y[0], y, e, c.yTol, g.Y0[0], y/y0, g.P[0], dw, ge, c.gTol)
				}
			})
		}
	}
}

// lotkaVolterraScaled is lotkaVolterra with its states scaled by s: y' =
// s·f(y/s).
func lotkaVolterraScaled(s float64) ode.Field {
	base := lotkaVolterra().Field
	return ode.Field{Name: "lotka-volterra-scaled", Dim: 2, Params: 4, F: func(tt tape.V, y, p []tape.V) []tape.V {
		f := base.F(tt, []tape.V{y[0].MulC(1 / s), y[1].MulC(1 / s)}, p)
		return []tape.V{f[0].MulC(s), f[1].MulC(s)}
	}}
}

// TestStateBelowAbsTol solves Lotka–Volterra with populations of 1e-12
// at the default tolerances (AbsTol 1e-9), which ask no relative
// accuracy of such states: Tsit5 wanders off until its step size
// underflows at t ≈ 7.6, and the error must name the absolute tolerance
// as the cause (it said the problem might be stiff and to try Rodas5P,
// which ends "successfully" with populations of −1.5e-10); with AbsTol
// scaled to the states the solve is right (TestStateScales).
func TestStateBelowAbsTol(t *testing.T) {
	t.Parallel()
	const s = 1e-12
	pr := lotkaVolterra()
	_, err := ode.Solve(ode.Problem{Field: lotkaVolterraScaled(s), Y0: []float64{s, s}, P: pr.P, T1: pr.T1}, &ode.Settings{Method: ode.Tsit5})
	var te *ode.TrajectoryError
	if !errors.As(err, &te) || te.Status != ode.StepSizeUnderflow {
		t.Fatalf("error %v, want a step-size underflow", err)
	}
	for _, want := range []string{"no larger than the absolute tolerance (max|y0| = 1e-12, AbsTol 1e-09)", "well below the states' scale"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q, want one saying %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "stiff") {
		t.Errorf("error %q names stiffness", err)
	}
}

// TestStateScales solves Lotka–Volterra with its states scaled by s,
// y' = s·f(y/s), y0 = s·(1, 1), AbsTol = 1e-10·s, and checks that the
// solve and the gradient of ‖y(10)‖² are s times (∂/∂y0) and s² times
// (∂/∂p) the unscaled ones: bit for bit when s is a power of 2 (2^±40,
// about 1e±12: every scaled operation, the error norm included, is then
// exact), and to 1e-12 for s = 1e±12 (measured: 1.4e-13), on every method.
func TestStateScales(t *testing.T) {
	t.Parallel()
	base := lotkaVolterra()
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23, ode.Auto} {
		t.Run(m.Name(), func(t *testing.T) {
			t.Parallel()
			grad := func(s float64) (*ode.Gradient, []float64) {
				g, err := ode.Grad(nil, ode.Problem{Field: lotkaVolterraScaled(s), Y0: []float64{s, s}, P: base.P, T1: base.T1}, ode.SumSquares(), nil,
					&ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-10 * s})
				if err != nil {
					t.Fatal(err)
				}
				// Back to the unscaled problem's units.
				u := []float64{g.Solution.Y[0] / s, g.Solution.Y[1] / s, g.Y0[0] / s, g.Y0[1] / s}
				for _, v := range g.P {
					u = append(u, v/s/s)
				}
				return g, u
			}
			g1, want := grad(1)
			for _, s := range []float64{0x1p-40, 0x1p40, 1e-12, 1e12} {
				g, got := grad(s)
				exact := math.Log2(s) == math.Round(math.Log2(s))
				e := maxRel(got, want)
				if g.Mesh.Len[0] != g1.Mesh.Len[0] || (exact && e != 0) || !(e <= 1e-12) {
					t.Errorf("s = %g: %d steps (unscaled %d); y(10), ∂L/∂y0, ∂L/∂p in unscaled units %v, unscaled %v: relative difference %.2g, want %s",
						s, g.Mesh.Len[0], g1.Mesh.Len[0], got, want, e, map[bool]string{true: "0", false: "≤ 1e-12"}[exact])
				}
			}
		})
	}
}

// TestTracedNonlinearities differentiates a field built from the traced
// nonlinearities (tanh, exp, log1p, a traced power, sqrt, and the kinks
// of Abs, Min and Max) on every method, against fourth-order central
// differences on the recorded mesh with the step 1e-6: measured within
// 1.5e-7 (Rosenbrock23) and 9e-8 or less (the others). Larger steps can
// straddle a kink that a stage crosses: in a probe with other initial
// states, Vern7's and Rodas5P's differences at the step 1e-4 were off by
// up to 0.14%, and from 1e-5 down agreed to 1e-8. (No complex step:
// traced programs are real.)
func TestTracedNonlinearities(t *testing.T) {
	t.Parallel()
	f := ode.Field{Name: "nonlinear", Dim: 3, Params: 4, F: func(_ tape.V, y, p []tape.V) []tape.V {
		a, b, c := y[0], y[1], y[2]
		return []tape.V{
			p[0].Mul(b.Tanh()).Sub(a.Mul(a.Square().Neg().Exp())).Add(tape.Min(a, b).MulC(0.1)),
			p[1].Mul(c.Log1p()).Mul(b).Neg().Add(a.Abs().MulC(0.05)).Add(tape.Max(b, c.Neg()).MulC(0.2)),
			p[2].Mul(c.Pow(p[3])).Neg().Add(a.Square().Add(b.Square()).AddC(1e-3).Sqrt().MulC(0.3)),
		}
	}}
	rng := rand.New(rand.NewPCG(51, 3))
	const n = 3
	y0, p := make([]float64, 3*n), make([]float64, 4*n)
	for i := 0; i < n; i++ {
		y0[3*i], y0[3*i+1], y0[3*i+2] = 2*rng.Float64()-1, 2*rng.Float64()-1, 0.2+rng.Float64()
		p[4*i], p[4*i+1], p[4*i+2], p[4*i+3] = 0.5+rng.Float64(), 0.5+rng.Float64(), 0.3+rng.Float64(), 0.5+rng.Float64()
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23, ode.Auto} {
		t.Run(m.Name(), func(t *testing.T) {
			t.Parallel()
			prob := ode.Problem{Field: f, N: n, Y0: append([]float64(nil), y0...), P: append([]float64(nil), p...), T1: 5}
			sv, err := ode.NewSolver(f, &ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-10})
			if err != nil {
				t.Fatal(err)
			}
			g, err := sv.Grad(nil, &prob, ode.SumSquares(), nil)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i := 0; i < n; i++ {
				for k := 0; k < 7; k++ {
					x, ad, what := &prob.P[4*i+k%4], g.P[4*i+k%4], fmt.Sprintf("∂L/∂p%d", k)
					if k >= 4 {
						x, ad, what = &prob.Y0[3*i+k-4], g.Y0[3*i+k-4], fmt.Sprintf("∂L/∂y%d(0)", k-4)
					}
					fd := rowLossFD(t, sv, &prob, g.Mesh, i, sumSquares, x, 1e-6)
					e := math.Abs(ad-fd) / math.Max(1e-3, math.Abs(fd))
					worst = math.Max(worst, e)
					if !(e <= 1e-6) {
						t.Errorf("row %d: %s = %.10g, central differences on the mesh %.10g: relative difference %.2g, want ≤ 1e-6", i, what, ad, fd, e)
					}
				}
			}
			t.Logf("%s: %v steps, gradients within %.2g of the central differences", m.Name(), g.Mesh.Len, worst)
		})
	}
}

// TestKeplerInvariantGradients differentiates the Kepler problem's
// invariants at the end of a long span: since E(y(T); GM) = E(y0; GM)
// and L(y(T)) = L(y0) for every y0 and GM, the gradient of E(y(T)) with
// respect to y0 is ∇E(y0) = (GM·x/r³, GM·y/r³, vx, vy), with respect to
// GM it is −1/r0, and that of L(y(T)) = x·vy − y·vx is (vy, −vx, −y,
// x) at y0 and 0 for GM. Three orbits of eccentricity 0, 0.5 and 0.9 (GM
// 1, 1.5, 0.7) over t ∈ [0, 60], some ten periods.
func TestKeplerInvariantGradients(t *testing.T) {
	t.Parallel()
	pr := Kepler()
	gms := []float64{1, 1.5, 0.7}
	var y0 []float64
	for i, e := range []float64{0, 0.5, 0.9} { // from periapsis, semi-major axis 1
		y0 = append(y0, 1-e, 0, 0, math.Sqrt(gms[i]*(1+e)/(1-e)))
	}
	energy := ode.Loss{Name: "energy", FP: func(y, _, _, p, _ []tape.V) tape.V {
		r := y[0].Square().Add(y[1].Square()).Sqrt()
		return y[2].Square().Add(y[3].Square()).MulC(0.5).Sub(p[0].Div(r))
	}}
	angular := ode.Loss{Name: "angular", F: func(y, _, _ []tape.V) tape.V { return y[0].Mul(y[3]).Sub(y[1].Mul(y[2])) }}
	for _, c := range []struct {
		m    ode.Method
		rtol float64
		tol  float64 // relative to the largest entry of each row's gradient
	}{
		// Measured (the orbit of eccentricity 0.9 the worst): 2.8e-5
		// (Tsit5), 2.2e-6 and 2e-8 (Vern7).
		{ode.Tsit5, 1e-10, 1e-4},
		{ode.Vern7, 1e-10, 1e-5},
		{ode.Vern7, 1e-12, 1e-7},
	} {
		name := fmt.Sprintf("%s/%g", c.m.Name(), c.rtol)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			prob := ode.Problem{Field: pr.Field, N: 3, Y0: y0, P: gms, T1: 60}
			set := &ode.Settings{Method: c.m, RelTol: c.rtol, AbsTol: c.rtol}
			ge, err := ode.Grad(nil, prob, energy, nil, set)
			if err != nil {
				t.Fatal(err)
			}
			gl, err := ode.Grad(nil, prob, angular, nil, set)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for i, gm := range gms {
				x, y, vx, vy := y0[4*i], y0[4*i+1], y0[4*i+2], y0[4*i+3]
				r := math.Hypot(x, y)
				wantE := []float64{gm * x / (r * r * r), gm * y / (r * r * r), vx, vy, -1 / r}
				wantL := []float64{vy, -vx, -y, x, 0}
				gotE := append(append([]float64(nil), ge.Y0[4*i:4*i+4]...), ge.P[i])
				gotL := append(append([]float64(nil), gl.Y0[4*i:4*i+4]...), gl.P[i])
				e := math.Max(maxRel(gotE, wantE), maxRel(gotL, wantL))
				worst = math.Max(worst, e)
				if !(e <= c.tol) {
					t.Errorf("orbit %d: ∂E(y(T))/∂(y0, GM) = %v, want %v; ∂L(y(T))/∂(y0, GM) = %v, want %v: relative error %.2g, want ≤ %g",
						i, gotE, wantE, gotL, wantL, e, c.tol)
				}
			}
			t.Logf("%s: %v steps, the invariants' gradients within %.2g", name, ge.Mesh.Len, worst)
		})
	}
}
