package problems

import (
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// pleiadesBodies is the number of bodies of the Pleiades problem.
const pleiadesBodies = 7

// PleiadesY0 is the initial state of the Pleiades problem, in the order
// (x1…x7, y1…y7, x1'…x7', y1'…y7') (Hairer, Nørsett & Wanner I, §II.10;
// Bari test set, plei.f).
var PleiadesY0 = [28]float64{
	3, 3, -1, -3, 2, -2, 2, // x
	3, -3, 2, 0, 0, -4, 4, // y
	0, 0, 0, 0, 0, 1.75, -1.5, // x'
	0, 0, 0, -1.25, 1, 0, 0, // y'
}

// PleiadesRef is the solution of the Pleiades problem at t = 3 from
// PleiadesY0 with the masses m_i = i, in PleiadesY0's order: "computed at
// Cray C90 using Cray double precision, solving Pleiades problem using
// PSIDE" with rtol = atol = 1e-16 (Bari test set, plei.f revision 1.2 of
// 2006/10/02, subroutine solut, as pleiasoln in R's deTestSet; the same
// 16 digits are printed in the test set's report plei.pdf).
var PleiadesRef = [28]float64{
	0.3706139143970502e+000, 0.3237284092057233e+001, -0.3222559032418324e+001,
	0.6597091455775310e+000, 0.3425581707156584e+000, 0.1562172101400631e+001,
	-0.7003092922212495e+000, -0.3943437585517392e+001, -0.3271380973972550e+001,
	0.5225081843456543e+001, -0.2590612434977470e+001, 0.1198213693392275e+001,
	-0.2429682344935824e+000, 0.1091449240428980e+001, 0.3417003806314313e+001,
	0.1354584501625501e+001, -0.2590065597810775e+001, 0.2025053734714242e+001,
	-0.1155815100160448e+001, -0.8072988170223021e+000, 0.5952396354208710e+000,
	-0.3741244961234010e+001, 0.3773459685750630e+000, 0.9386858869551073e+000,
	0.3667922227200571e+000, -0.3474046353808490e+000, 0.2344915448180937e+001,
	-0.1947020434263292e+001,
}

// Pleiades returns the Pleiades problem PLEI (Hairer, Nørsett & Wanner I,
// §II.10; Bari test set, plei.f): seven bodies in the plane under
// inverse-square attraction, with the masses as per-trajectory parameters
// p = (m1, …, m7), default m_i = i. The state is (x1…x7, y1…y7, x1'…x7',
// y1'…y7') (d = 28) and, with r_ij = ((x_i − x_j)² + (y_i − y_j)²)^{3/2},
//
//	x_i'' = Σ_{j≠i} m_j·(x_j − x_i)/r_ij
//	y_i'' = Σ_{j≠i} m_j·(y_j − y_i)/r_ij
//
// (the gravitational constant is 1). Defaults: y0 = PleiadesY0, t ∈
// [0, 3]; PleiadesRef is the published y(3). The problem is not stiff;
// close encounters of the bodies make the step sizes vary widely. A field
// evaluation costs 21 pair terms.
func Pleiades() Problem {
	const n = pleiadesBodies
	return Problem{
		Name: "pleiades",
		Field: ode.Field{Name: "pleiades", Dim: 4 * n, Params: n,
			F: func(_ tape.V, y, m []tape.V) []tape.V {
				x, yy := y[:n], y[n:2*n]
				ax, ay := make([]tape.V, n), make([]tape.V, n)
				var set [2][pleiadesBodies]bool
				add := func(acc []tape.V, k, i int, v tape.V) {
					if set[k][i] {
						acc[i] = acc[i].Add(v)
					} else {
						acc[i], set[k][i] = v, true
					}
				}
				for i := 0; i < n; i++ {
					for j := i + 1; j < n; j++ {
						dx, dy := x[j].Sub(x[i]), yy[j].Sub(yy[i])
						r2 := dx.Square().Add(dy.Square())
						inv := r2.Const(1).Div(r2.Mul(r2.Sqrt())) // 1/r_ij³
						fx, fy := dx.Mul(inv), dy.Mul(inv)
						add(ax, 0, i, m[j].Mul(fx))
						add(ay, 1, i, m[j].Mul(fy))
						add(ax, 0, j, m[i].Mul(fx).Neg())
						add(ay, 1, j, m[i].Mul(fy).Neg())
					}
				}
				dy := make([]tape.V, 0, 4*n)
				dy = append(dy, y[2*n:]...)
				dy = append(dy, ax...)
				return append(dy, ay...)
			}},
		Y0: append([]float64(nil), PleiadesY0[:]...),
		P:  []float64{1, 2, 3, 4, 5, 6, 7},
		T1: 3,
		Doc: "Pleiades: 7 bodies in the plane, x_i'' = Σ_{j≠i} m_j(x_j−x_i)/|x_j−x_i|³, " +
			"state (x1…x7, y1…y7, x1'…x7', y1'…y7'); p = (m1, m2, m3, m4, m5, m6, m7) = (1, 2, 3, 4, 5, 6, 7); " +
			"Hairer, Nørsett & Wanner I, II.10, Bari test set plei.f",
	}
}
