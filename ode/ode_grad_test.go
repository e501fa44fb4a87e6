package ode_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// This file holds the test fields shared by the package's tests and the
// gradient tests: Grad against central finite differences of Replay on the
// same frozen mesh, against adaptive re-solving, and the invariance of
// value and gradient under padded (h == 0) steps.
//
// Every field is defined here, in the tests, with a plain-Go twin where the
// tests need one (closed forms, or internal/refode's definitions).

// lorenzField is the Lorenz system with per-trajectory p = (σ, ρ, β).
func lorenzField() ode.Field {
	return ode.Field{Name: "lorenz", Dim: 3, Params: 3, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{
			p[0].Mul(y[1].Sub(y[0])),
			y[0].Mul(p[1].Sub(y[2])).Sub(y[1]),
			y[0].Mul(y[1]).Sub(p[2].Mul(y[2])),
		}
	}}
}

// lorenzSharedField is the Lorenz system with ρ per trajectory and σ, β
// shared by the ensemble: p = (ρ | σ, β).
func lorenzSharedField() ode.Field {
	return ode.Field{Name: "lorenz-shared", Dim: 3, Params: 1, Shared: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		rho, sigma, beta := p[0], p[1], p[2]
		return []tape.V{
			sigma.Mul(y[1].Sub(y[0])),
			y[0].Mul(rho.Sub(y[2])).Sub(y[1]),
			y[0].Mul(y[1]).Sub(beta.Mul(y[2])),
		}
	}}
}

// vdpField is the Van der Pol oscillator x' = v, v' = μ((1 − x²)v − x)
// with μ per trajectory.
func vdpField() ode.Field {
	return ode.Field{Name: "vanderpol", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		x, v, mu := y[0], y[1], p[0]
		one := x.Const(1)
		return []tape.V{v, mu.Mul(one.Sub(x.Square()).Mul(v).Sub(x))}
	}}
}

// lorenz96Field is the cyclic Lorenz-96 system of dimension d,
// y_i' = (y_{i+1} − y_{i−2})·y_{i−1} − y_i + F, with the forcing F per
// trajectory, or shared by the ensemble if shared is set.
func lorenz96Field(d int, shared bool) ode.Field {
	f := ode.Field{Name: "lorenz96", Dim: d, Params: 1}
	if shared {
		f.Name, f.Params, f.Shared = "lorenz96-shared", 0, 1
	}
	f.F = func(_ tape.V, y, p []tape.V) []tape.V {
		idx := func(i int) int { return ((i % d) + d) % d }
		out := make([]tape.V, d)
		for i := range out {
			out[i] = y[idx(i+1)].Sub(y[idx(i-2)]).Mul(y[idx(i-1)]).Sub(y[i]).Add(p[0])
		}
		return out
	}
	return f
}

// linearField is y' = A(θ)·y with
//
//	A = [[−a, w, 0], [−w, −a, 0], [k, 0, −c]],
//
// a, w per trajectory and c, k shared: p = (a, w | c, k). linearA builds
// the same matrix in float64 and linearExact its closed-form flow.
func linearField() ode.Field {
	return ode.Field{Name: "linear", Dim: 3, Params: 2, Shared: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		a, w, c, k := p[0], p[1], p[2], p[3]
		zero := a.Const(0)
		A := []tape.V{
			a.Neg(), w, zero,
			w.Neg(), a.Neg(), zero,
			k, zero, c.Neg(),
		}
		out := make([]tape.V, 3)
		for i := range out {
			out[i] = tape.Dot(A[3*i:3*i+3], y, zero)
		}
		return out
	}}
}

// linearA returns A(θ) for θ = (a, w, c, k), row-major, and ∂A/∂θ_j.
func linearA(th [4]float64) (A []float64, dA [4][]float64) {
	a, w, c, k := th[0], th[1], th[2], th[3]
	A = []float64{-a, w, 0, -w, -a, 0, k, 0, -c}
	dA[0] = []float64{-1, 0, 0, 0, -1, 0, 0, 0, 0}
	dA[1] = []float64{0, 1, 0, -1, 0, 0, 0, 0, 0}
	dA[2] = []float64{0, 0, 0, 0, 0, 0, 0, 0, -1}
	dA[3] = []float64{0, 0, 0, 0, 0, 0, 1, 0, 0}
	return A, dA
}

// linearExact returns y(t0+tau) = exp(A·tau)·y0 with ∂y/∂y0 = exp(A·tau)
// (row-major 3×3) and ∂y/∂θ_j, the latter from the block exponential
// exp([[A, ∂A/∂θ_j], [0, A]]·tau), whose top-right block applied to y0 is
// the sensitivity (Van Loan 1978).
func linearExact(th [4]float64, y0 [3]float64, tau float64) (y [3]float64, dy0 [9]float64, dth [4][3]float64) {
	A, dA := linearA(th)
	var e mat.Dense
	e.Exp(mat.NewDense(3, 3, scaled(A, tau)))
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			dy0[i*3+j] = e.At(i, j)
			y[i] += e.At(i, j) * y0[j]
		}
	}
	for q := range dA {
		big := mat.NewDense(6, 6, nil)
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				big.Set(i, j, A[i*3+j]*tau)
				big.Set(3+i, 3+j, A[i*3+j]*tau)
				big.Set(i, 3+j, dA[q][i*3+j]*tau)
			}
		}
		var eb mat.Dense
		eb.Exp(big)
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				dth[q][i] += eb.At(i, 3+j) * y0[j]
			}
		}
	}
	return y, dy0, dth
}

func scaled(x []float64, s float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s
	}
	return out
}

// forcedField is the non-autonomous scalar field y' = −p·y + a·sin(t), p
// per trajectory and the amplitude a shared; forcedExact is its closed
// form.
func forcedField() ode.Field {
	return ode.Field{Name: "forced", Dim: 1, Params: 1, Shared: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0]).Neg().Add(p[1].Mul(t.Sin()))}
	}}
}

// forcedExact returns y(t) of y' = −p·y + a·sin(t), y(t0) = y0, and its
// derivatives with respect to y0, p and a:
//
//	y(t) = C·e^{−p(t−t0)} + a·s(t),  s(t) = (p·sin t − cos t)/(p² + 1),
//	C = y0 − a·s(t0).
func forcedExact(p, a, t0, y0, t float64) (y, dy0, dp, da float64) {
	q := p*p + 1
	s := func(t float64) float64 { return (p*math.Sin(t) - math.Cos(t)) / q }
	ds := func(t float64) float64 { // ∂s/∂p
		return (math.Sin(t)*q - (p*math.Sin(t)-math.Cos(t))*2*p) / (q * q)
	}
	e := math.Exp(-p * (t - t0))
	C := y0 - a*s(t0)
	y = C*e + a*s(t)
	dy0 = e
	dp = -a*ds(t0)*e - (t-t0)*C*e + a*ds(t)
	da = -s(t0)*e + s(t)
	return y, dy0, dp, da
}

// ---- Losses ----

// obsLoss is the loss Σ_i ℓ_i with
//
//	ℓ_i = ½·Σ_c w_c·y_ic(t1)² + Σ_k Σ_c (ys_ikc − data_ikc)²,
//
// w_c = 1 + c/d: weighted squares of the final state plus the squared
// distance of the saved states to synthetic observations (Loss.Data, one
// row of K·d values per trajectory). eval computes ℓ_i from a solution in
// plain Go, so finite differences do not go through the loss program.
type obsLoss struct {
	d, K int
	data []float64 // [N×K·d]
}

func (l obsLoss) loss() ode.Loss {
	d := l.d
	return ode.Loss{Name: "obs", Data: l.data, DataDim: l.K * l.d, F: func(y, ys, data []tape.V) tape.V {
		acc := y[0].Const(0)
		for c, v := range y {
			acc = acc.Add(v.Square().MulC(0.5 * (1 + float64(c)/float64(d))))
		}
		for j := range ys {
			acc = acc.Add(ys[j].Sub(data[j]).Square())
		}
		return acc
	}}
}

// term returns ℓ_i of trajectory i of sol.
func (l obsLoss) term(sol *ode.Solution, i int) float64 {
	d, K := l.d, l.K
	acc := 0.0
	for c := 0; c < d; c++ {
		v := sol.Y[i*d+c]
		acc += 0.5 * (1 + float64(c)/float64(d)) * v * v
	}
	for j := 0; j < K*d; j++ {
		r := sol.Ys[i*K*d+j] - l.data[i*K*d+j]
		acc += r * r
	}
	return acc
}

func (l obsLoss) total(sol *ode.Solution) float64 {
	s := 0.0
	for i := 0; i < sol.N; i++ {
		s += l.term(sol, i)
	}
	return s
}

// ---- Finite differences on a frozen mesh ----

// fdCoord is one input coordinate: kind "y0", "p" or "shared", its index
// in the problem's array, and the trajectory it belongs to (-1: shared).
type fdCoord struct {
	kind string
	idx  int
	traj int
}

// pickCoords returns up to ny0 random Y0 coordinates, np P coordinates and
// every shared one.
func pickCoords(rng *rand.Rand, pr *ode.Problem, ny0, np int) []fdCoord {
	f := pr.Field
	var cs []fdCoord
	for _, k := range rng.Perm(len(pr.Y0))[:min(ny0, len(pr.Y0))] {
		cs = append(cs, fdCoord{"y0", k, k / f.Dim})
	}
	if f.Params > 0 {
		for _, k := range rng.Perm(len(pr.P))[:min(np, len(pr.P))] {
			cs = append(cs, fdCoord{"p", k, k / f.Params})
		}
	}
	for k := range pr.Shared {
		cs = append(cs, fdCoord{"shared", k, -1})
	}
	return cs
}

func (c fdCoord) slot(pr *ode.Problem) *float64 {
	switch c.kind {
	case "y0":
		return &pr.Y0[c.idx]
	case "p":
		return &pr.P[c.idx]
	}
	return &pr.Shared[c.idx]
}

func (c fdCoord) grad(g *ode.Gradient) float64 {
	switch c.kind {
	case "y0":
		return g.Y0[c.idx]
	case "p":
		return g.P[c.idx]
	}
	return g.Shared[c.idx]
}

// gradScale is the magnitude a coordinate's error is measured against:
// the largest |gradient| in the same trajectory's Y0 and P rows, or in
// the shared gradient. It is the floor of the relative test, because a
// central difference carries an absolute error (round-off ε·|ℓ|/h_fd and
// truncation) that does not shrink with one small component.
func gradScale(g *ode.Gradient, f ode.Field, c fdCoord) float64 {
	m := 0.0
	if c.traj < 0 {
		for _, v := range g.Shared {
			m = math.Max(m, math.Abs(v))
		}
		return m
	}
	for _, v := range g.Y0[c.traj*f.Dim : (c.traj+1)*f.Dim] {
		m = math.Max(m, math.Abs(v))
	}
	if f.Params > 0 {
		for _, v := range g.P[c.traj*f.Params : (c.traj+1)*f.Params] {
			m = math.Max(m, math.Abs(v))
		}
	}
	return m
}

// cloneProblem copies the arrays a test perturbs.
func cloneProblem(pr ode.Problem) ode.Problem {
	pr.Y0 = append([]float64(nil), pr.Y0...)
	pr.P = append([]float64(nil), pr.P...)
	pr.Shared = append([]float64(nil), pr.Shared...)
	return pr
}

// fdFrozen returns the central difference (ℓ(x+h) − ℓ(x−h))/2h of the
// loss with the mesh held fixed, h = 1e-6·max(|x|, 1). For a coordinate of
// one trajectory only that trajectory's term ℓ_i changes, so only ℓ_i is
// differenced (the others are bitwise equal and would add round-off).
func fdFrozen(t *testing.T, sv *ode.Solver, pr ode.Problem, m *ode.Mesh, l obsLoss, c fdCoord) float64 {
	t.Helper()
	q := cloneProblem(pr)
	x := c.slot(&q)
	x0 := *x
	h := 1e-6 * math.Max(math.Abs(x0), 1)
	eval := func(v float64) float64 {
		*x = v
		sol, err := sv.Replay(&q, m)
		if err != nil {
			t.Fatalf("Replay: %v", err)
		}
		if c.traj >= 0 {
			return l.term(sol, c.traj)
		}
		return l.total(sol)
	}
	fp := eval(x0 + h)
	fm := eval(x0 - h)
	// Use the step actually represented in floating point.
	return (fp - fm) / ((x0 + h) - (x0 - h))
}

// gradCase is a problem for the finite-difference tests.
type gradCase struct {
	name  string
	prob  func(rng *rand.Rand) ode.Problem
	save  []float64 // save times of the "saveat" variant
	rtol  float64
	ny0   int // Y0 coordinates to check
	np    int // P coordinates to check
	short bool
}

// fullRows fills n rows of width w from gen.
func fullRows(n, w int, gen func(i, c int) float64) []float64 {
	x := make([]float64, n*w)
	for i := 0; i < n; i++ {
		for c := 0; c < w; c++ {
			x[i*w+c] = gen(i, c)
		}
	}
	return x
}

// gradCases are ensembles with ragged meshes: per-trajectory end times
// spanning 10× or parameters that make some trajectories much harder, so
// the recorded meshes have very different lengths.
func gradCases() []gradCase {
	return []gradCase{
		{
			name: "lorenz/ragged T1s", rtol: 1e-7, ny0: 5, np: 5, short: true,
			save: []float64{0.1, 0.3, 0.3, 0.45},
			prob: func(rng *rand.Rand) ode.Problem {
				n := 4
				return ode.Problem{Field: lorenzField(), N: n,
					Y0:  fullRows(n, 3, func(i, c int) float64 { return []float64{1, 0, 20}[c] + rng.Float64() }),
					P:   fullRows(n, 3, func(i, c int) float64 { return []float64{10, 28, 8.0 / 3}[c] * (1 + 0.1*rng.Float64()) }),
					T1s: []float64{0.5, 1, 2.5, 5},
				}
			},
		},
		{
			name: "lorenz/shared σ β", rtol: 1e-7, ny0: 4, np: 3, short: true,
			save: []float64{0.1, 0.3, 0.5},
			prob: func(rng *rand.Rand) ode.Problem {
				n := 3
				return ode.Problem{Field: lorenzSharedField(), N: n,
					Y0:     fullRows(n, 3, func(i, c int) float64 { return []float64{-1, 2, 15}[c] + rng.Float64() }),
					P:      []float64{5, 18, 28},
					Shared: []float64{10, 8.0 / 3},
					T1s:    []float64{0.5, 1.5, 5},
				}
			},
		},
		{
			name: "vanderpol/μ from 0.3 to 8", rtol: 1e-7, ny0: 4, np: 3, short: true,
			save: []float64{0.5, 1.5, 2.5},
			prob: func(rng *rand.Rand) ode.Problem {
				n := 3
				return ode.Problem{Field: vdpField(), N: n,
					Y0: fullRows(n, 2, func(i, c int) float64 { return []float64{2, 0}[c] + 0.1*rng.Float64() }),
					P:  []float64{0.3, 2, 8},
					T0: 0, T1: 6,
				}
			},
		},
		{
			name: "lorenz96/d=40 F per trajectory", rtol: 1e-6, ny0: 6, np: 2, short: true,
			save: []float64{0.1, 0.2},
			prob: func(rng *rand.Rand) ode.Problem {
				n, d := 2, 40
				return ode.Problem{Field: lorenz96Field(d, false), N: n,
					Y0:  fullRows(n, d, func(i, c int) float64 { return 8 + 0.5*math.Sin(float64(c+i)) + 0.01*rng.Float64() }),
					P:   []float64{8, 4},
					T1s: []float64{0.2, 2},
				}
			},
		},
		{
			name: "lorenz96/d=40 F shared", rtol: 1e-6, ny0: 4, np: 0,
			save: []float64{0.3},
			prob: func(rng *rand.Rand) ode.Problem {
				n, d := 2, 40
				return ode.Problem{Field: lorenz96Field(d, true), N: n,
					Y0:     fullRows(n, d, func(i, c int) float64 { return 3 + math.Cos(float64(2*c+i)) + 0.01*rng.Float64() }),
					Shared: []float64{6},
					T1s:    []float64{0.3, 3},
				}
			},
		},
		{
			name: "linear/per-trajectory and shared A", rtol: 1e-8, ny0: 5, np: 4, short: true,
			save: []float64{0.5, 1.5, 2},
			prob: func(rng *rand.Rand) ode.Problem {
				n := 3
				return ode.Problem{Field: linearField(), N: n, T0: 0.5,
					Y0:     fullRows(n, 3, func(i, c int) float64 { return rng.Float64()*2 - 1 }),
					P:      []float64{0.1, 1, 0.3, 4, 0.05, 8},
					Shared: []float64{0.4, 0.7},
					T1s:    []float64{2, 6, 20},
				}
			},
		},
		{
			name: "forced/non-autonomous, t0 = 1", rtol: 1e-8, ny0: 3, np: 3,
			save: []float64{1, 1.5, 2},
			prob: func(rng *rand.Rand) ode.Problem {
				n := 3
				return ode.Problem{Field: forcedField(), N: n, T0: 1,
					Y0:     []float64{1, -0.5, 2},
					P:      []float64{0.5, 3, 30},
					Shared: []float64{1.5},
					T1s:    []float64{2, 6, 20},
				}
			},
		},
	}
}

// synthObs returns observations near the true saved states: the saved
// states of sol perturbed by noise, so the data term has a non-zero
// gradient.
func synthObs(rng *rand.Rand, sol *ode.Solution) []float64 {
	obs := make([]float64, len(sol.Ys))
	for j, v := range sol.Ys {
		obs[j] = v + 0.1*(1+math.Abs(v))*rng.NormFloat64()
	}
	return obs
}

// TestGradFiniteDifferences checks Grad against central differences of
// Replay on the same frozen mesh, h = 1e-6·max(|x|, 1), for y0,
// per-trajectory and shared parameters, with and without SaveAt, Tsit5
// and Vern7: |g − fd| ≤ 1e-6·max(|fd|, scale), scale from gradScale.
func TestGradFiniteDifferences(t *testing.T) {
	t.Parallel()
	const tol = 1e-6
	for ci, tc := range gradCases() {
		for _, meth := range []ode.Method{ode.Tsit5, ode.Vern7} {
			for _, withSave := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/saveat=%v", tc.name, meth.Name(), withSave)
				t.Run(name, func(t *testing.T) {
					if testing.Short() && !tc.short {
						t.Skip("short")
					}
					t.Parallel()
					rng := rand.New(rand.NewPCG(uint64(ci), 1))
					pr := tc.prob(rng)
					if withSave {
						pr.SaveAt = tc.save
					}
					sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: meth, RelTol: tc.rtol, AbsTol: tc.rtol * 1e-3})
					if err != nil {
						t.Fatal(err)
					}
					m, _, err := sv.Record(&pr)
					if err != nil {
						t.Fatal(err)
					}
					l := obsLoss{d: pr.Field.Dim, K: len(pr.SaveAt)}
					if withSave {
						ys, err := sv.Replay(&pr, m)
						if err != nil {
							t.Fatal(err)
						}
						l.data = synthObs(rng, ys)
					}
					g, err := sv.Grad(nil, &pr, l.loss(), m)
					if err != nil {
						t.Fatal(err)
					}
					// The loss value is the loss of the replay.
					rs, err := sv.Replay(&pr, m)
					if err != nil {
						t.Fatal(err)
					}
					if want := l.total(rs); math.Abs(g.Loss-want) > 1e-12*math.Abs(want) {
						t.Errorf("Case %v: loss want %v, got %v", name, want, g.Loss)
					}
					lo, hi := m.Len[0], m.Len[0]
					for _, n := range m.Len {
						lo, hi = min(lo, n), max(hi, n)
					}
					if hi < 4*lo {
						t.Errorf("Case %v: mesh is not ragged enough: lengths %v", name, m.Len)
					}
					worst := 0.0
					for _, c := range pickCoords(rng, &pr, tc.ny0, tc.np) {
						fd := fdFrozen(t, sv, pr, m, l, c)
						got := c.grad(g)
						scale := gradScale(g, pr.Field, c)
						err := math.Abs(got-fd) / math.Max(math.Abs(fd), scale)
						worst = math.Max(worst, err)
						if !(err <= tol) {
							t.Errorf("Case %v: ∂L/∂%s[%d] (trajectory %d): want %v (FD), got %v (rel err %.2g, scale %.3g)",
								name, c.kind, c.idx, c.traj, fd, got, err, scale)
						}
					}
					t.Logf("%s: mesh lengths %v, worst rel err %.2g", name, m.Len, worst)
				})
			}
		}
	}
}

// TestGradReRecord checks the frozen-mesh gradient against the
// adaptive solution map (REFERENCE §9, weaknesses): central differences
// (L(p+δ) − L(p−δ))/2δ, δ = 1e-3·p, where every L is a fresh adaptive
// Solve, and the gradient of a mesh re-recorded at p·(1 + 1e-3) against the
// gradient replayed on the mesh recorded at p. Both agree to 1e-3 relative.
func TestGradReRecord(t *testing.T) {
	t.Parallel()
	const tol = 1e-3
	for _, tc := range []struct {
		name string
		prob ode.Problem
		rtol float64
	}{
		// Chaotic Lorenz needs a tighter tolerance: the re-solved
		// difference carries the change of discretisation error between
		// the two meshes, about RelTol·|L|/δ, which at RelTol 1e-6 reaches
		// 8e-4 relative here.
		{"lorenz ρ=28, rtol 1e-8", ode.Problem{Field: lorenzField(), Y0: []float64{1, 0, 20}, P: []float64{10, 28, 8.0 / 3}, T1: 1}, 1e-8},
		{"vanderpol μ=3", ode.Problem{Field: vdpField(), Y0: []float64{2, 0}, P: []float64{3}, T1: 4}, 1e-6},
		{"forced p=2, t0=1", ode.Problem{Field: forcedField(), T0: 1, Y0: []float64{1}, P: []float64{2}, Shared: []float64{1.5}, T1: 5}, 1e-6},
		{"lorenz96 d=40", ode.Problem{Field: lorenz96Field(40, false), Y0: fullRows(1, 40, func(_, c int) float64 { return 8 + math.Sin(float64(c)) }), P: []float64{8}, T1: 0.5}, 1e-6},
	} {
		for _, meth := range []ode.Method{ode.Tsit5, ode.Vern7} {
			name := tc.name + "/" + meth.Name()
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				set := &ode.Settings{Method: meth, RelTol: tc.rtol, AbsTol: tc.rtol * 1e-3}
				sv, err := ode.NewSolver(tc.prob.Field, set)
				if err != nil {
					t.Fatal(err)
				}
				l := obsLoss{d: tc.prob.Field.Dim}
				pr := cloneProblem(tc.prob)
				g, err := sv.Grad(nil, &pr, l.loss(), nil)
				if err != nil {
					t.Fatal(err)
				}
				solveLoss := func(q ode.Problem) float64 {
					sol, err := sv.Solve(&q)
					if err != nil {
						t.Fatal(err)
					}
					return l.total(sol)
				}
				coords := []fdCoord{{"p", 0, 0}}
				for k := range pr.Shared {
					coords = append(coords, fdCoord{"shared", k, -1})
				}
				worstFD, worstRe := 0.0, 0.0
				for _, c := range coords {
					x0 := *c.slot(&pr)
					delta := 1e-3 * x0
					qp, qm := cloneProblem(pr), cloneProblem(pr)
					*c.slot(&qp) = x0 + delta
					*c.slot(&qm) = x0 - delta
					fd := (solveLoss(qp) - solveLoss(qm)) / (2 * delta)
					got := c.grad(g)
					e := math.Abs(got-fd) / math.Abs(fd)
					worstFD = math.Max(worstFD, e)
					if !(e <= tol) {
						t.Errorf("Case %v: ∂L/∂%s[%d]: want %v (re-solved FD, δ = %v), got %v (rel err %.2g)", name, c.kind, c.idx, fd, delta, got, e)
					}
					// Re-recorded at x0+δ vs replayed on the mesh of x0.
					gFrozen, err := sv.Grad(nil, &qp, l.loss(), g.Mesh)
					if err != nil {
						t.Fatal(err)
					}
					gRe, err := sv.Grad(nil, &qp, l.loss(), nil)
					if err != nil {
						t.Fatal(err)
					}
					for _, pair := range [][2][]float64{{gRe.Y0, gFrozen.Y0}, {gRe.P, gFrozen.P}, {gRe.Shared, gFrozen.Shared}} {
						want, got := pair[0], pair[1]
						scale := maxAbs(want)
						for j := range want {
							e := math.Abs(got[j]-want[j]) / scale
							worstRe = math.Max(worstRe, e)
							if !(e <= tol) {
								t.Errorf("Case %v, %s+δ: gradient entry %d: want %v (re-recorded), got %v (frozen mesh; rel err %.2g)", name, c.kind, j, want[j], got[j], e)
							}
						}
					}
				}
				t.Logf("%s: re-solved FD worst rel err %.2g; frozen vs re-recorded worst %.2g", name, worstFD, worstRe)
			})
		}
	}
}

func maxAbs(x []float64) float64 {
	m := 0.0
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

// padMesh returns a copy of m with zero steps inserted before step k of
// trajectory i for each k in zeros[i] (k may equal Len[i]: trailing
// zeros), and the entries past each new length set to NaN, which the
// replay must ignore.
func padMesh(m *ode.Mesh, zeros [][]int) *ode.Mesh {
	n := m.N
	rows := make([][]float64, n)
	for i := 0; i < n; i++ {
		at := map[int]int{}
		for _, k := range zeros[i] {
			at[k]++
		}
		for s := 0; s <= m.Len[i]; s++ {
			for z := 0; z < at[s]; z++ {
				rows[i] = append(rows[i], 0)
			}
			if s < m.Len[i] {
				rows[i] = append(rows[i], m.H[s*n+i])
			}
		}
	}
	out := *m
	out.Len = make([]int, n)
	out.Rows = 0
	for i := range rows {
		out.Len[i] = len(rows[i])
		out.Rows = max(out.Rows, len(rows[i]))
	}
	out.Rows++ // one row of NaN past every length
	out.H = make([]float64, out.Rows*n)
	for i := range out.H {
		out.H[i] = math.NaN()
	}
	for i, r := range rows {
		for s, h := range r {
			out.H[s*n+i] = h
		}
	}
	return &out
}

// TestPaddedStepIsIdentity checks that steps of size exactly 0 inside a
// trajectory's length (at the start, in the middle, at the end, repeated)
// leave the final and saved states and the gradient unchanged, and that
// entries past a trajectory's length are ignored (NaN there must not
// leak). Values and per-trajectory gradients must be bitwise equal;
// shared gradients, which sum over the trajectories active at each step,
// may round differently and must agree to 1e-14 relative.
func TestPaddedStepIsIdentity(t *testing.T) {
	t.Parallel()
	for _, meth := range []ode.Method{ode.Tsit5, ode.Vern7} {
		t.Run(meth.Name(), func(t *testing.T) {
			t.Parallel()
			pr := ode.Problem{Field: lorenzSharedField(), N: 3,
				Y0:     []float64{1, 0, 20, -2, 1, 25, 3, 3, 10},
				P:      []float64{28, 15, 21},
				Shared: []float64{10, 8.0 / 3},
				T1s:    []float64{1, 0.5, 2},
				SaveAt: []float64{0, 0.2, 0.5},
			}
			sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: meth})
			if err != nil {
				t.Fatal(err)
			}
			m, _, err := sv.Record(&pr)
			if err != nil {
				t.Fatal(err)
			}
			l := obsLoss{d: 3, K: 3, data: fullRows(3, 9, func(i, c int) float64 { return float64(c - i) })}
			want, err := sv.Grad(nil, &pr, l.loss(), m)
			if err != nil {
				t.Fatal(err)
			}
			L := m.Len
			for _, zc := range []struct {
				name  string
				zeros [][]int
			}{
				{"none (NaN past Len only)", [][]int{nil, nil, nil}},
				{"first step", [][]int{{0}, {0}, {0}}},
				{"middle, one trajectory", [][]int{nil, {L[1] / 2}, nil}},
				{"trailing", [][]int{{L[0]}, {L[1], L[1]}, nil}},
				{"many", [][]int{{0, 0, 3, L[0] / 2, L[0]}, {1, 2, L[1] - 1}, {L[2] / 3, L[2] / 3, L[2]}}},
			} {
				pm := padMesh(m, zc.zeros)
				got, err := sv.Grad(nil, &pr, l.loss(), pm)
				if err != nil {
					t.Fatalf("Case %v: %v", zc.name, err)
				}
				rs, err := sv.Replay(&pr, pm)
				if err != nil {
					t.Fatalf("Case %v: %v", zc.name, err)
				}
				for _, arr := range []struct {
					what      string
					want, got []float64
				}{
					{"Y", want.Solution.Y, got.Solution.Y},
					{"Replay Y", want.Solution.Y, rs.Y},
					{"Ys", want.Solution.Ys, got.Solution.Ys},
					{"Replay Ys", want.Solution.Ys, rs.Ys},
					{"∂L/∂Y0", want.Y0, got.Y0},
					{"∂L/∂P", want.P, got.P},
				} {
					for j := range arr.want {
						if arr.got[j] != arr.want[j] {
							t.Errorf("Case %v: %s[%d]: want %v, got %v", zc.name, arr.what, j, arr.want[j], arr.got[j])
						}
					}
				}
				for j := range want.Shared {
					if e := math.Abs(got.Shared[j] - want.Shared[j]); !(e <= 1e-14*math.Abs(want.Shared[j])) {
						t.Errorf("Case %v: ∂L/∂Shared[%d]: want %v, got %v", zc.name, j, want.Shared[j], got.Shared[j])
					}
				}
				if got.Loss != want.Loss {
					t.Errorf("Case %v: loss want %v, got %v", zc.name, want.Loss, got.Loss)
				}
			}
		})
	}
}

// TestGradAPI checks the conventions of Grad: single rows of Y0 and P are
// used for every trajectory and the gradient has full [N×Dim] and
// [N×Params] shapes; Loss.Mean divides value and gradient by N; a dst is
// reused; checkpointing (Settings.Checkpoint, MemoryLimit) recomputes the
// same arithmetic, so gradients are bitwise equal; and no call modifies
// its inputs.
func TestGradAPI(t *testing.T) {
	t.Parallel()
	const n = 4
	pr := ode.Problem{Field: lorenzSharedField(), N: n, T0: 0.1,
		Y0:     []float64{1, 0, 20},
		P:      []float64{28},
		Shared: []float64{10, 8.0 / 3},
		T1s:    []float64{0.6, 0.9, 1.1, 2.1},
		SaveAt: []float64{0.3, 0.5},
	}
	l := obsLoss{d: 3, K: 2, data: []float64{1, 2, 3, 4, 5, 6}}
	loss := l.loss() // one data row for every trajectory
	full := pr
	full.Y0 = fullRows(n, 3, func(_, c int) float64 { return pr.Y0[c] })
	full.P = fullRows(n, 1, func(_, _ int) float64 { return pr.P[0] })
	lossFull := obsLoss{d: 3, K: 2, data: fullRows(n, 6, func(_, c int) float64 { return l.data[c] })}.loss()

	orig := cloneProblem(pr)
	origSave := append([]float64(nil), pr.SaveAt...)
	origT1s := append([]float64(nil), pr.T1s...)
	origData := append([]float64(nil), l.data...)

	sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: ode.Vern7})
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := sv.Record(&pr)
	if err != nil {
		t.Fatal(err)
	}
	g, err := sv.Grad(nil, &pr, loss, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Y0) != n*3 || len(g.P) != n || len(g.Shared) != 2 {
		t.Fatalf("Case single rows: gradient shapes want (%d, %d, %d), got (%d, %d, %d)", n*3, n, 2, len(g.Y0), len(g.P), len(g.Shared))
	}
	gFull, err := sv.Grad(nil, &full, lossFull, m)
	if err != nil {
		t.Fatal(err)
	}
	sameFloats(t, "single rows vs full arrays: ∂L/∂Y0", gFull.Y0, g.Y0)
	sameFloats(t, "single rows vs full arrays: ∂L/∂P", gFull.P, g.P)
	sameFloats(t, "single rows vs full arrays: ∂L/∂Shared", gFull.Shared, g.Shared)
	if g.Loss != gFull.Loss {
		t.Errorf("Case single rows vs full arrays: loss want %v, got %v", gFull.Loss, g.Loss)
	}

	// Mean.
	mean := loss
	mean.Mean = true
	gm, err := sv.Grad(nil, &pr, mean, m)
	if err != nil {
		t.Fatal(err)
	}
	if want := g.Loss / n; math.Abs(gm.Loss-want) > 1e-15*math.Abs(want) {
		t.Errorf("Case Mean: loss want %v, got %v", want, gm.Loss)
	}
	for _, pair := range [][2][]float64{{g.Y0, gm.Y0}, {g.P, gm.P}, {g.Shared, gm.Shared}} {
		for j := range pair[0] {
			if want := pair[0][j] / n; math.Abs(pair[1][j]-want) > 1e-14*math.Abs(want) {
				t.Errorf("Case Mean: gradient entry %d want %v, got %v", j, want, pair[1][j])
			}
		}
	}

	// dst reuse.
	dst := &ode.Gradient{}
	g2, err := sv.Grad(dst, &pr, loss, m)
	if err != nil {
		t.Fatal(err)
	}
	if g2 != dst {
		t.Errorf("Case dst: want the result in dst")
	}
	g3, err := sv.Grad(dst, &pr, mean, m)
	if err != nil {
		t.Fatal(err)
	}
	sameFloats(t, "dst reused: ∂L/∂Y0", gm.Y0, g3.Y0)
	sameFloats(t, "dst reused: ∂L/∂P", gm.P, g3.P)
	sameFloats(t, "dst reused: ∂L/∂Shared", gm.Shared, g3.Shared)

	// Checkpointing recomputes the same steps.
	for _, set := range []ode.Settings{
		{Method: ode.Vern7, Checkpoint: 1},
		{Method: ode.Vern7, Checkpoint: 3},
		{Method: ode.Vern7, Checkpoint: 1000},
		{Method: ode.Vern7, MemoryLimit: 512},
	} {
		svc, err := ode.NewSolver(pr.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		gc, err := svc.Grad(nil, &pr, loss, m)
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("Checkpoint %d, MemoryLimit %d", set.Checkpoint, set.MemoryLimit)
		sameFloats(t, what+": ∂L/∂Y0", g.Y0, gc.Y0)
		sameFloats(t, what+": ∂L/∂P", g.P, gc.P)
		sameFloats(t, what+": ∂L/∂Shared", g.Shared, gc.Shared)
		// Stored bytes are the peak: checkpoints plus the segment of states
		// recomputed from one (every state when Checkpoint exceeds the
		// steps), and within the memory limit when one is set.
		switch {
		case set.Checkpoint == 3 && !(gc.StoredBytes < g.StoredBytes):
			t.Errorf("Case %v: stored bytes want < %d (every state), got %d", what, g.StoredBytes, gc.StoredBytes)
		case set.Checkpoint == 1000 && gc.StoredBytes < g.StoredBytes:
			t.Errorf("Case %v: stored bytes want ≥ %d (a segment of every state and a checkpoint), got %d", what, g.StoredBytes, gc.StoredBytes)
		case set.MemoryLimit > 0 && gc.StoredBytes > set.MemoryLimit:
			t.Errorf("Case %v: stored bytes %d over the memory limit", what, gc.StoredBytes)
		}
	}

	// A field without parameters.
	osc := ode.Field{Name: "oscillator", Dim: 2, F: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[1], y[0].Neg()} }}
	go0, err := ode.Grad(nil, ode.Problem{Field: osc, N: 2, Y0: []float64{1, 0, 0, 2}, T1: 1}, ode.SumSquares(), nil, &ode.Settings{RelTol: 1e-10, AbsTol: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	if len(go0.P) != 0 || len(go0.Shared) != 0 {
		t.Errorf("Case no parameters: want empty P and Shared gradients, got %v and %v", go0.P, go0.Shared)
	}
	// ‖y(t)‖² = ‖y0‖² for a rotation: ∂L/∂y0 = 2·y0.
	for j, want := range []float64{2, 0, 0, 4} {
		if math.Abs(go0.Y0[j]-want) > 1e-8 {
			t.Errorf("Case no parameters: ∂L/∂Y0[%d] want %v, got %v", j, want, go0.Y0[j])
		}
	}

	// Inputs are not modified.
	if _, err := sv.Solve(&pr); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Replay(&pr, m); err != nil {
		t.Fatal(err)
	}
	if _, err := sv.Grad(nil, &pr, loss, nil); err != nil {
		t.Fatal(err)
	}
	sameFloats(t, "input Y0", orig.Y0, pr.Y0)
	sameFloats(t, "input P", orig.P, pr.P)
	sameFloats(t, "input Shared", orig.Shared, pr.Shared)
	sameFloats(t, "input SaveAt", origSave, pr.SaveAt)
	sameFloats(t, "input T1s", origT1s, pr.T1s)
	sameFloats(t, "input Loss.Data", origData, l.data)
}

// sameFloats fails unless got equals want bit for bit.
func sameFloats(t *testing.T, what string, want, got []float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("Case %v: want %d values, got %d", what, len(want), len(got))
		return
	}
	for j := range want {
		if math.Float64bits(got[j]) != math.Float64bits(want[j]) {
			t.Errorf("Case %v: entry %d want %v, got %v", what, j, want[j], got[j])
			return
		}
	}
}
