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
			save: []float64{0.2, 0.7, 1},
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
			save: []float64{0.25, 0.5},
			prob: func(rng *rand.Rand) ode.Problem {
				n, d := 2, 40
				return ode.Problem{Field: lorenz96Field(d, false), N: n,
					Y0:  fullRows(n, d, func(i, c int) float64 { return 8 + 0.5*math.Sin(float64(c+i)) + 0.01*rng.Float64() }),
					P:   []float64{8, 4},
					T1s: []float64{0.3, 3},
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
			save: []float64{1, 2.5, 4},
			prob: func(rng *rand.Rand) ode.Problem {
				n := 3
				return ode.Problem{Field: linearField(), N: n, T0: 0.5,
					Y0:     fullRows(n, 3, func(i, c int) float64 { return rng.Float64()*2 - 1 }),
					P:      []float64{0.1, 1, 0.3, 6, 0.05, 20},
					Shared: []float64{0.4, 0.7},
					T1s:    []float64{5, 15, 50},
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
					m, sol, err := sv.Record(&pr)
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
					_ = sol
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
