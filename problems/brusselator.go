package problems

import (
	"fmt"
	"math"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Constants of the Brusselator: the reaction u' = A + u²v − (B+1)u,
// v' = Bu − u²v with A = 1 and B = 3, whose boundary values are its
// homogeneous equilibrium (u, v) = (A, B/A) = (1, 3).
const (
	brussA = 1.0
	brussB = 3.0
)

// BrusselatorAlpha is the Brusselator's default diffusion coefficient α,
// 1/50 as in Hairer & Wanner II.
const BrusselatorAlpha = 1.0 / 50

// Brusselator returns the Brusselator with diffusion in one space
// dimension (Prigogine & Lefever 1968), discretised by the method of lines
// on cells interior grid points x_i = i/(cells+1), i = 1, …, cells, with
// the diffusion coefficient α per trajectory: problem BRUSS of Hairer &
// Wanner, Solving Ordinary Differential Equations II, §IV.1 (p. 6), with
// A = 1, B = 3. With c = α·(cells+1)²,
//
//	u_i' = 1 + u_i²·v_i − 4·u_i + c·(u_{i−1} − 2·u_i + u_{i+1})
//	v_i' = 3·u_i − u_i²·v_i + c·(v_{i−1} − 2·v_i + v_{i+1})
//
// with the boundary values u_0 = u_{cells+1} = 1, v_0 = v_{cells+1} = 3 and
// the initial values u_i(0) = 1 + sin(2π·x_i), v_i(0) = 3. The state is
// interleaved, y = (u_1, v_1, u_2, v_2, …): y[2(i−1)] = u_i, y[2i−1] = v_i,
// so d = 2·cells and the Jacobian is banded (two diagonals each side).
// SciMLBenchmarks' and ODEProblemLibrary's prob_ode_brusselator_1d is the
// same problem (citing the same page) on 40 grid points that include the
// two boundaries, with α = 1/41; the two-dimensional Brusselator of Hairer
// & Wanner II §IV.10 is the one with A = 3.4, B = 1 (the terms 4.4·u and
// 3.4·u).
//
// Defaults: p = (α) = (1/50), t ∈ [0, 10]. The problem is mildly stiff
// and its stiffness grows as α·(cells+1)²: at the defaults with 32 cells
// (ByName("brusselator"), d = 64) the diffusion's eigenvalues reach
// −4c ≈ −87, so an explicit method's steps are bounded by its stability
// region while the solution varies on a time scale of 1: Tsit5's
// stiffness test fires (at t ≈ 3.6 with rtol 1e-6), so Grad refuses its
// mesh. The field is marked Stiff, so the router picks Rodas5P. Its name is "brusselator" for 32 cells and
// "brusselator-<cells>" otherwise. It panics if cells < 1.
func Brusselator(cells int) Problem {
	if cells < 1 {
		panic(fmt.Sprintf("problems: Brusselator: %d cells; want at least 1", cells))
	}
	d := 2 * cells
	h1 := float64(cells + 1) // 1/Δx
	y0 := make([]float64, d)
	for i := 1; i <= cells; i++ {
		y0[2*(i-1)] = 1 + math.Sin(2*math.Pi*float64(i)/h1)
		y0[2*(i-1)+1] = brussB / brussA
	}
	name := "brusselator"
	if cells != 32 {
		name = fmt.Sprintf("brusselator-%d", cells)
	}
	return Problem{
		Name: name,
		Field: ode.Field{Name: name, Dim: d, Params: 1, Stiff: true,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				c := p[0].MulC(h1 * h1)
				ub, vb := y[0].Const(brussA), y[0].Const(brussB/brussA) // boundary values
				// u(i) and v(i) are u_i and v_i for i = 0, …, cells+1.
				u := func(i int) tape.V {
					if i == 0 || i == cells+1 {
						return ub
					}
					return y[2*(i-1)]
				}
				v := func(i int) tape.V {
					if i == 0 || i == cells+1 {
						return vb
					}
					return y[2*(i-1)+1]
				}
				dy := make([]tape.V, d)
				for i := 1; i <= cells; i++ {
					ui, vi := u(i), v(i)
					r := ui.Square().Mul(vi) // u_i²·v_i
					lu := u(i - 1).Sub(ui.MulC(2)).Add(u(i + 1))
					lv := v(i - 1).Sub(vi.MulC(2)).Add(v(i + 1))
					dy[2*(i-1)] = r.Sub(ui.MulC(brussB + 1)).AddC(brussA).Add(c.Mul(lu))
					dy[2*(i-1)+1] = ui.MulC(brussB).Sub(r).Add(c.Mul(lv))
				}
				return dy
			}},
		Y0:    y0,
		P:     []float64{BrusselatorAlpha},
		T1:    10,
		Stiff: true,
		Doc: fmt.Sprintf("Brusselator with diffusion, %d cells, d = %d: u_i' = 1 + u_i²v_i − 4u_i + α(N+1)²Δu_i, "+
			"v_i' = 3u_i − u_i²v_i + α(N+1)²Δv_i, boundaries u = 1, v = 3; p = (α) = (0.02); "+
			"Hairer & Wanner II §IV.1, BRUSS", cells, d),
	}
}
