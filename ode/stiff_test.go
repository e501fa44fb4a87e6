package ode_test

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// long runs the long cases too: every variable of the frozen-mesh finite
// differences. By default a representative subset runs.
var long = flag.Bool("long", false, "run the long cases too (every variable of TestStiffFrozenMeshFD)")

// ---- Frozen-mesh finite differences ----

// stiffVarKind says which array a differentiated variable lives in.
type stiffVarKind int

const (
	stiffY0 stiffVarKind = iota
	stiffP
	stiffShared
)

func (k stiffVarKind) String() string {
	return [...]string{"Y0", "P", "Shared"}[k]
}

// stiffVar is one scalar the finite differences perturb: element Idx of
// Problem.Y0, Problem.P or Problem.Shared. The central difference uses the
// step h = 1e-6·max(|x|, Scale). Scale = 1 is REFERENCE.md §9's
// 1e-6·max(|x|, 1), used for everything of order one. Tiny quantities use
// a smaller Scale, so that the step stays small against them: Scale = 0
// gives the relative step 1e-6·|x| (the rate k1 = 0.04); HIRES's states
// (≈ 1e-3) use Scale = 1e-3 and Robertson's y2 (≈ 3e-5, see
// stiffFDCases) Scale = 1e-2.
type stiffVar struct {
	Kind  stiffVarKind
	Idx   int
	Scale float64
}

// step returns the finite-difference step for the value x.
func (v stiffVar) step(x float64) float64 { return 1e-6 * math.Max(math.Abs(x), v.Scale) }

func (v stiffVar) String() string { return fmt.Sprintf("%v[%d]", v.Kind, v.Idx) }

func (v stiffVar) ptr(p *ode.Problem) *float64 {
	switch v.Kind {
	case stiffY0:
		return &p.Y0[v.Idx]
	case stiffP:
		return &p.P[v.Idx]
	}
	return &p.Shared[v.Idx]
}

func (v stiffVar) grad(g *ode.Gradient) float64 {
	switch v.Kind {
	case stiffY0:
		return g.Y0[v.Idx]
	case stiffP:
		return g.P[v.Idx]
	}
	return g.Shared[v.Idx]
}

// stiffLoss is the loss the gradient tests use: per trajectory
// ℓ = w·y(t1) + v·ys + ½(w·y(t1))², with weights w, v from the data row
// (width Dim·(1+K)), so every final and saved component enters with its own
// weight and the loss is not linear in the state.
func stiffLoss(d, k int) ode.Loss {
	return ode.Loss{
		Name:    "stiff-weighted",
		DataDim: d * (1 + k),
		F: func(y, ys, data []tape.V) tape.V {
			lin := tape.Dot(data[:d], y, y[0].Const(0))
			l := lin.Add(lin.Square().MulC(0.5))
			if len(ys) > 0 {
				l = tape.Dot(data[d:], ys, l)
			}
			return l
		},
	}
}

// stiffLossTerms evaluates stiffLoss on a solution, in plain float64: the
// term ℓ_i of every trajectory.
func stiffLossTerms(sol *ode.Solution, data []float64) []float64 {
	d, n, k := sol.Dim, sol.N, len(sol.SaveAt)
	w := d * (1 + k)
	terms := make([]float64, n)
	for i := range terms {
		row := data[i*w : (i+1)*w]
		lin := 0.0
		for c := 0; c < d; c++ {
			lin += row[c] * sol.Y[i*d+c]
		}
		l := lin + 0.5*lin*lin
		for j := 0; j < k*d; j++ {
			l += row[d+j] * sol.Ys[i*k*d+j]
		}
		terms[i] = l
	}
	return terms
}

// stiffWeights returns random loss weights, scaled per component by
// 1/scale[c] so that small components (Robertson's y2 ≈ 1e-5) count.
func stiffWeights(rng *rand.Rand, n, k int, scale []float64) []float64 {
	d := len(scale)
	w := make([]float64, 0, n*d*(1+k))
	for i := 0; i < n*(1+k); i++ {
		for c := 0; c < d; c++ {
			w = append(w, (0.5+rng.Float64())/scale[c])
		}
	}
	return w
}

// stiffFDCase is one frozen-mesh finite-difference check.
type stiffFDCase struct {
	name   string
	prob   ode.Problem // full-size arrays (N rows), so they can be perturbed
	saveAt []float64
	scale  []float64 // typical size of each state component
	vars   []stiffVar
	rtol   float64 // recording tolerance
}

func stiffFDCases(rng *rand.Rand) []stiffFDCase {
	var cases []stiffFDCase
	// Typical sizes of Robertson's states (loss weights 1/size) and the
	// scales of their finite-difference steps. y2 ≈ 3e-5 relaxes to its
	// quasi-steady value within the first steps, so the loss barely
	// depends on its initial value: the step 1e-6 (up to 10% of y2) has a
	// truncation error above 1e-5 (measured 6e-5 with SaveAt), and
	// 1e-6·3e-5 drowns in round-off (2e-5); 1e-6·1e-2 resolves it.
	robSize := []float64{1, 3e-5, 1}
	robScale := []float64{1, 1e-2, 1}

	// Robertson: three trajectories with rates spread by ±30%, all rates
	// and initial states.
	{
		pr := problems.Robertson()
		n := 3
		y0, p := pr.Ensemble(n)
		for i := range p {
			p[i] *= 0.7 + 0.6*rng.Float64()
		}
		y0[3*1+0], y0[3*1+1], y0[3*1+2] = 0.9, 1e-5, 0.1 // one trajectory off the initial layer
		var vars []stiffVar
		for i := 0; i < n; i++ {
			for c := 0; c < 3; c++ {
				kScale := 1.0
				if c == 0 {
					kScale = 0 // k1 = 0.04: relative step
				}
				vars = append(vars, stiffVar{stiffP, 3*i + c, kScale}, stiffVar{stiffY0, 3*i + c, robScale[c]})
			}
		}
		cases = append(cases, stiffFDCase{name: "robertson", prob: ode.Problem{Field: pr.Field, Y0: y0, P: p, T1: pr.T1},
			saveAt: []float64{0.3, 7, 40, pr.T1}, scale: robSize, vars: vars, rtol: 1e-6})
	}
	// HIRES: two trajectories, every initial state. The second is
	// perturbed by at most 1e-5: the standard y0 sits where y(t1) is
	// sensitive to y8(0) (an increase of 5e-4 changes y6(t1) fivefold and
	// shrinks ∂y(t1)/∂y0 a hundredfold).
	{
		pr := problems.HIRES()
		n := 2
		y0, _ := pr.Ensemble(n)
		for c := 0; c < 8; c++ {
			y0[8+c] += 1e-5 * rng.Float64()
		}
		var vars []stiffVar
		for j := 0; j < n*8; j++ {
			vars = append(vars, stiffVar{stiffY0, j, 1e-3})
		}
		cases = append(cases, stiffFDCase{name: "hires", prob: ode.Problem{Field: pr.Field, Y0: y0, T1: pr.T1},
			saveAt: []float64{1, 5, 100, 300}, scale: []float64{1e-3, 1e-4, 1e-4, 1e-3, 1e-3, 1e-2, 1e-3, 1e-3}, vars: vars, rtol: 1e-6})
	}
	// Stiff Van der Pol, μ from 1 to 1e3 (one μ per trajectory).
	{
		pr := problems.StiffVanDerPol(1e3)
		mus := []float64{1, 30, 1e3}
		n := len(mus)
		y0, _ := pr.Ensemble(n)
		var vars []stiffVar
		for i := 0; i < n; i++ {
			vars = append(vars, stiffVar{stiffP, i, 1}, stiffVar{stiffY0, 2 * i, 1}, stiffVar{stiffY0, 2*i + 1, 1})
		}
		cases = append(cases, stiffFDCase{name: "vdp-stiff", prob: ode.Problem{Field: pr.Field, Y0: y0, P: mus, T1: pr.T1},
			saveAt: []float64{0.1, 0.8, 1.5}, scale: []float64{1, 1}, vars: vars, rtol: 1e-6})
	}
	// Neural Robertson: three trajectories sharing the network; a random
	// subset of the 337 shared weights (gradient summed over
	// trajectories) and the per-trajectory rates.
	{
		pr := problems.NeuralRobertson(7)
		n := 3
		y0, p := pr.Ensemble(n)
		for i := range p {
			p[i] *= 0.8 + 0.4*rng.Float64()
		}
		var vars []stiffVar
		for _, j := range rng.Perm(len(pr.Shared))[:8] {
			vars = append(vars, stiffVar{stiffShared, j, 1})
		}
		vars = append(vars, stiffVar{stiffP, 0, 0}, stiffVar{stiffP, 3, 1}, stiffVar{stiffY0, 7, robScale[1]})
		cases = append(cases, stiffFDCase{name: "neural-robertson",
			prob:   ode.Problem{Field: pr.Field, Y0: y0, P: p, Shared: append([]float64(nil), pr.Shared...), T1: 20},
			saveAt: []float64{0.5, 10}, scale: robSize, vars: vars, rtol: 1e-6})
	}
	return cases
}

// TestStiffFrozenMeshFD checks Grad against central finite differences of
// Replay on the same (frozen) mesh, step 1e-6·max(|x|, 1) or the relative
// steps of stiffVar for tiny quantities: relative error ≤ 1e-5 for every
// variable the central difference resolves (see the allowance below), for
// Robertson (k and y0), HIRES (y0), stiff Van der Pol (μ = 1, 30, 1000;
// y0 and μ) and neural Robertson (8 random shared weights, gradient summed
// over 3 trajectories, and some per-trajectory rates and states), with both
// Rosenbrock methods, with and without SaveAt (Rodas5P's save times use its
// dense output, Rosenbrock23's a re-step). The loss weights every final and
// saved component.
//
// By default (and with -short) every third variable of each case is
// checked; -long checks them all.
func TestStiffFrozenMeshFD(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	const tol = 1e-5
	worst := map[string]float64{}
	worstLimited := 0.0 // over the entries the central difference cannot resolve to 1e-5
	for _, tc := range stiffFDCases(rng) {
		if testing.Short() || !*long {
			var some []stiffVar
			for j := 0; j < len(tc.vars); j += 3 {
				some = append(some, tc.vars[j])
			}
			tc.vars = some
		}
		for _, meth := range []ode.Method{ode.Rodas5P, ode.Rosenbrock23} {
			for _, withSave := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/saveat=%v", tc.name, meth.Name(), withSave)
				p := tc.prob
				p.Y0 = append([]float64(nil), tc.prob.Y0...)
				p.P = append([]float64(nil), tc.prob.P...)
				p.Shared = append([]float64(nil), tc.prob.Shared...)
				k := 0
				if withSave {
					p.SaveAt = tc.saveAt
					k = len(tc.saveAt)
				}
				n := len(p.Y0) / p.Field.Dim
				loss := stiffLoss(p.Field.Dim, k)
				loss.Data = stiffWeights(rng, n, k, tc.scale)
				set := &ode.Settings{Method: meth, RelTol: tc.rtol, AbsTol: tc.rtol * 1e-6}
				sv, err := ode.NewSolver(p.Field, set)
				if err != nil {
					t.Fatalf("Case %v: NewSolver: %v", name, err)
				}
				m, _, err := sv.Record(&p)
				if err != nil {
					t.Fatalf("Case %v: Record: %v", name, err)
				}
				g, err := sv.Grad(nil, &p, loss, m)
				if err != nil {
					t.Fatalf("Case %v: Grad: %v", name, err)
				}
				lossAt := func() []float64 {
					sol, err := sv.Replay(&p, m)
					if err != nil {
						t.Fatalf("Case %v: Replay: %v", name, err)
					}
					return stiffLossTerms(sol, loss.Data)
				}
				l0, labs := 0.0, 0.0 // Σ_i ℓ_i and Σ_i |ℓ_i|
				for _, l := range lossAt() {
					l0 += l
					labs += math.Abs(l)
				}
				if math.Abs(l0-g.Loss) > 1e-13*math.Abs(l0) {
					t.Errorf("Case %v: loss of Replay want %v, got Grad's %v", name, l0, g.Loss)
				}
				// fd(h) is the central difference with the step of the
				// variable, fd(2h) the same with twice the step; u, the
				// larger of |fd(h) − fd(2h)| and the round-off of a loss
				// difference over h, ε·Σ|ℓ_i|/h, estimates the error of
				// fd(h) (truncation 3·O(h²) plus round-off amplified by the
				// replay). Where u < 1e-5·|fd(h)|/2 the check is the plain
				// |g − fd(h)| ≤ 1e-5·|fd(h)|; elsewhere the central
				// difference cannot resolve the derivative to 1e-5 (μ =
				// 1e3's ∂L/∂v0 after 4000 Rosenbrock23 steps, for example)
				// and the check is |g − fd(h)| ≤ 1e-5·|fd(h)| + u. Such
				// entries are counted and their worst error logged.
				fd := func(x *float64, x0, h float64) float64 {
					*x = x0 + h
					lp := lossAt()
					*x = x0 - h
					lm := lossAt()
					*x = x0
					// Difference the terms trajectory by trajectory: the
					// terms x does not touch cancel exactly instead of
					// adding the round-off of the total to the difference.
					dl := 0.0
					for i := range lp {
						dl += lp[i] - lm[i]
					}
					return dl / (2 * h)
				}
				roundoff := 0x1p-52 * labs // of a loss difference
				limited := 0
				for _, v := range tc.vars {
					x := v.ptr(&p)
					x0 := *x
					h := v.step(x0)
					f1, f2 := fd(x, x0, h), fd(x, x0, 2*h)
					u := math.Max(math.Abs(f1-f2), roundoff/h)
					got := v.grad(g)
					rel := math.Abs(got-f1) / math.Abs(f1)
					if u > 0.5*tol*math.Abs(f1) {
						limited++
						if !(math.Abs(got-f1) <= tol*math.Abs(f1)+u) {
							t.Errorf("Case %v %v: gradient within 1e-5·|fd| + |fd(h) − fd(2h)| = %.3g of FD: want %v, got %v (rel err %.3g)",
								name, v, tol*math.Abs(f1)+u, f1, got, rel)
						}
						worstLimited = math.Max(worstLimited, rel)
						continue
					}
					worst[name] = math.Max(worst[name], rel)
					if !(rel <= tol) {
						t.Errorf("Case %v %v: gradient within %v relative of FD: want %v, got %v (rel err %.3g)", name, v, tol, f1, got, rel)
					}
				}
				t.Logf("%s: %d steps (%d rejected), %d variables: worst rel err %.3g (%d limited by the FD's own error)",
					name, m.Stats.TotalAccepted(), m.Stats.TotalRejected(), len(tc.vars), worst[name], limited)
			}
		}
	}
	overall := 0.0
	for _, w := range worst {
		overall = math.Max(overall, w)
	}
	t.Logf("worst relative error over all cases %.3g (entries limited by the FD's error: %.3g)", overall, worstLimited)
}

// ---- Accuracy against references ----

// stiffRowLoss is Σ_c data_c·y_c(t1): with the one-hot data rows e_0, e_1,
// e_2 on three copies of a trajectory, Grad returns the rows ∂y_i/∂(y0, p)
// of the sensitivity matrix, one per copy.
func stiffRowLoss(d int) ode.Loss {
	data := make([]float64, d*d)
	for i := 0; i < d; i++ {
		data[i*d+i] = 1
	}
	return ode.Loss{Name: "row", DataDim: d, Data: data,
		F: func(y, _, w []tape.V) tape.V { return tape.Dot(w, y, y[0].Const(0)) }}
}

// TestStiffRobertsonSensitivity compares the recorded-and-replayed
// Robertson solution and its sensitivities at tight tolerance with
// refode.RobertsonRef (Radau5 on the variational system, rtol 1e-12): the
// final state and every ∂y_i/∂k_j within 1e-6 relative (componentwise),
// ∂y_i/∂y0_j within 1e-6 of the largest entry of its row. The frozen-mesh
// gradient is the derivative of the discrete map, so this also bounds how
// far the discrete sensitivities are from the true ones.
func TestStiffRobertsonSensitivity(t *testing.T) {
	t.Parallel()
	const tol = 1e-6
	pr := problems.Robertson()
	k := [3]float64{pr.P[0], pr.P[1], pr.P[2]}
	for _, tc := range []struct {
		meth       ode.Method
		rtol, atol float64
		t1         float64
	}{
		{ode.Rodas5P, 1e-10, 1e-14, 100},
		{ode.Rodas5P, 1e-10, 1e-14, 1e4},
		{ode.Rosenbrock23, 1e-8, 1e-14, 100},
	} {
		name := fmt.Sprintf("%s rtol=%g t1=%g", tc.meth.Name(), tc.rtol, tc.t1)
		ref, dk, dy0 := refode.RobertsonRef(k, [3]float64{1, 0, 0}, tc.t1)
		y0, p := pr.Ensemble(3)
		prob := ode.Problem{Field: pr.Field, Y0: y0, P: p, T1: tc.t1}
		g, err := ode.Grad(nil, prob, stiffRowLoss(3), nil, &ode.Settings{Method: tc.meth, RelTol: tc.rtol, AbsTol: tc.atol})
		if err != nil {
			t.Fatalf("Case %v: Grad: %v", name, err)
		}
		var ey, ek, ey0 float64
		for i := 0; i < 3; i++ {
			e := math.Abs(g.Solution.Y[i]-ref[i]) / math.Abs(ref[i])
			ey = math.Max(ey, e)
			if !(e <= tol) {
				t.Errorf("Case %v: y[%d](t1) within %v relative: want %v, got %v", name, i, tol, ref[i], g.Solution.Y[i])
			}
			row := 0.0
			for j := 0; j < 3; j++ {
				row = math.Max(row, math.Abs(dy0[i][j]))
			}
			for j := 0; j < 3; j++ {
				gk, gy := g.P[3*i+j], g.Y0[3*i+j]
				e := math.Abs(gk-dk[i][j]) / math.Abs(dk[i][j])
				ek = math.Max(ek, e)
				if !(e <= tol) {
					t.Errorf("Case %v: ∂y%d/∂k%d within %v relative: want %v, got %v", name, i, j, tol, dk[i][j], gk)
				}
				e = math.Abs(gy-dy0[i][j]) / row
				ey0 = math.Max(ey0, e)
				if !(e <= tol) {
					t.Errorf("Case %v: ∂y%d/∂y0_%d within %v of its row: want %v, got %v", name, i, j, tol, dy0[i][j], gy)
				}
			}
		}
		t.Logf("%s: %d steps; rel err y %.2g, ∂y/∂k %.2g, ∂y/∂y0 (row) %.2g", name, g.Mesh.Stats.Accepted[0], ey, ek, ey0)
	}
}

// TestStiffPublishedReferences checks Robertson at t = 1, 10, …, 1e4 (saved
// states of one solve to t1 = 1e4) against Hairer's published values
// refode.RobertsonRefDecades, and HIRES at t = 321.8122 against the Bari
// test set's problems.HIRESRef, componentwise relative.
func TestStiffPublishedReferences(t *testing.T) {
	t.Parallel()
	rob, hires := problems.Robertson(), problems.HIRES()
	for _, tc := range []struct {
		name       string
		meth       ode.Method
		rtol, atol float64
		tol        float64
	}{
		{"robertson", ode.Rodas5P, 1e-10, 1e-14, 1e-8},
		{"robertson", ode.Rosenbrock23, 1e-8, 1e-14, 1e-6},
		{"hires", ode.Rodas5P, 1e-10, 1e-14, 1e-8},
		{"hires", ode.Rosenbrock23, 1e-8, 1e-14, 1e-6},
	} {
		name := fmt.Sprintf("%s %s rtol=%g", tc.name, tc.meth.Name(), tc.rtol)
		var prob ode.Problem
		var want [][]float64
		switch tc.name {
		case "robertson":
			prob = ode.Problem{Field: rob.Field, Y0: rob.Y0, P: rob.P, T1: 1e4, SaveAt: []float64{1, 10, 100, 1e3, 1e4}}
			for k := range prob.SaveAt {
				want = append(want, refode.RobertsonRefDecades[k][:])
			}
		case "hires":
			prob = ode.Problem{Field: hires.Field, Y0: hires.Y0, T1: hires.T1, SaveAt: []float64{hires.T1}}
			want = append(want, problems.HIRESRef[:])
		}
		sol, err := ode.Solve(prob, &ode.Settings{Method: tc.meth, RelTol: tc.rtol, AbsTol: tc.atol})
		if err != nil {
			t.Fatalf("Case %v: Solve: %v", name, err)
		}
		d := prob.Field.Dim
		worst := 0.0
		perTime := make([]string, len(want))
		for k, w := range want {
			wk := 0.0
			for c := 0; c < d; c++ {
				got := sol.Ys[k*d+c]
				e := math.Abs(got-w[c]) / math.Abs(w[c])
				worst = math.Max(worst, e)
				wk = math.Max(wk, e)
				if !(e <= tc.tol) {
					t.Errorf("Case %v: y[%d](%v) within %v relative: want %v, got %v", name, c, prob.SaveAt[k], tc.tol, w[c], got)
				}
			}
			perTime[k] = fmt.Sprintf("t=%g: %.2g", prob.SaveAt[k], wk)
		}
		for c := 0; c < d; c++ {
			if got, w := sol.Y[c], sol.Ys[(len(want)-1)*d+c]; got != w {
				t.Errorf("Case %v: saved state at t1 equals the final state bitwise: want %v, got %v", name, got, w)
			}
		}
		t.Logf("%s: %d steps, worst componentwise rel err %.2g (%s)", name, sol.Stats.Accepted[0], worst, strings.Join(perTime, ", "))
	}
}

// ---- Order on a non-autonomous field, t0 ≠ 0 ----

// stiffForcedP0 and stiffForcedP1 are the parameters of stiffForced:
// p0 = 50 makes it mildly stiff (eigenvalue ≈ −50 against O(1) dynamics).
const stiffForcedP0, stiffForcedP1 = 50.0, 1.0

// stiffForced is REFERENCE.md §5.5's stiff test field with t-dependent
// forcing that multiplies the state (so f_t depends on y):
//
//	y1' = −p0·(y1 − y2²) + sin 2t
//	y2' = y1·(1 + cos(t)/2) − y2 − p1·y2³
func stiffForced() ode.Field {
	return ode.Field{Name: "stiff-forced", Dim: 2, Params: 2, F: func(t tape.V, y, p []tape.V) []tape.V {
		return []tape.V{
			p[0].Mul(y[1].Square().Sub(y[0])).Add(t.MulC(2).Sin()),
			y[0].Mul(t.Cos().MulC(0.5).AddC(1)).Sub(y[1]).Sub(p[1].Mul(y[1].Powi(3))),
		}
	}}
}

// stiffForcedRef is stiffForced in plain Go, for refode.
func stiffForcedRef(t float64, y, dy []float64) {
	dy[0] = -stiffForcedP0*(y[0]-y[1]*y[1]) + math.Sin(2*t)
	dy[1] = y[0]*(1+0.5*math.Cos(t)) - y[1] - stiffForcedP1*y[1]*y[1]*y[1]
}

// stiffUniformMesh returns a hand-built ragged mesh: trajectory j takes
// ns[j] equal steps of (t1 − t0)/ns[j], all statuses OK.
func stiffUniformMesh(meth ode.Method, t0, t1 float64, ns []int) *ode.Mesh {
	n := len(ns)
	rows := 0
	for _, k := range ns {
		rows = max(rows, k)
	}
	m := &ode.Mesh{N: n, Rows: rows, H: make([]float64, rows*n), Len: append([]int(nil), ns...),
		T0: t0, T1: make([]float64, n), Method: meth, Status: make([]ode.Status, n)}
	for j, k := range ns {
		m.T1[j] = t1
		for s := 0; s < k; s++ {
			m.H[s*n+j] = (t1 - t0) / float64(k)
		}
	}
	return m
}

// stiffSlope returns the least-squares slope of log2(err) against
// log2(1/n).
func stiffSlope(ns []int, errs []float64) float64 {
	var sx, sy, sxx, sxy float64
	for i, n := range ns {
		x, y := -math.Log2(float64(n)), math.Log2(errs[i])
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	k := float64(len(ns))
	return (k*sxy - sx*sy) / (k*sxx - sx*sx)
}

// TestStiffOrderNonAutonomous measures the global order of Replay on
// uniform hand-built meshes over [0.5, 1.5] (t0 ≠ 0) for the forced,
// mildly stiff field, against DOP853 at rtol 1e-14: Rodas5P's slope (least
// squares and every pairwise rate) in [4.6, 5.6], Rosenbrock23's in
// [1.8, 2.3]. Both rely on the f_t term and the stage times t + c_i·h:
// without them a Rosenbrock method is of order 1 on such a field. The step
// counts keep the errors inside the asymptotic regime and above round-off
// (Rodas5P 1.3e-7 … 1.5e-13, Rosenbrock23 5.6e-7 … 9.5e-9).
func TestStiffOrderNonAutonomous(t *testing.T) {
	const t0, t1 = 0.5, 1.5
	y0 := []float64{1, 0.5}
	ys, err := refode.DOP853(stiffForcedRef, t0, y0, []float64{t1}, 1e-14, 1e-14)
	if err != nil {
		t.Fatalf("Case reference: DOP853: %v", err)
	}
	ref := ys[0]
	for _, tc := range []struct {
		meth   ode.Method
		ns     []int
		lo, hi float64
	}{
		{ode.Rodas5P, []int{32, 64, 128, 256, 512}, 4.6, 5.6},
		{ode.Rosenbrock23, []int{128, 256, 512, 1024}, 1.8, 2.3},
	} {
		// One ensemble, one trajectory per step count: a ragged mesh.
		m := stiffUniformMesh(tc.meth, t0, t1, tc.ns)
		prob := ode.Problem{Field: stiffForced(), N: len(tc.ns), Y0: y0, P: []float64{stiffForcedP0, stiffForcedP1}, T0: t0, T1: t1}
		sol, err := ode.Replay(prob, m, &ode.Settings{Method: tc.meth})
		if err != nil {
			t.Fatalf("Case %v: Replay: %v", tc.meth.Name(), err)
		}
		errs := make([]float64, len(tc.ns))
		for j := range tc.ns {
			errs[j] = math.Max(math.Abs(sol.Y[2*j]-ref[0]), math.Abs(sol.Y[2*j+1]-ref[1]))
		}
		slope := stiffSlope(tc.ns, errs)
		if !(slope >= tc.lo && slope <= tc.hi) {
			t.Errorf("Case %v: global order slope in [%v, %v]: want ≈ %v, got %.3f (errors %.2e)", tc.meth.Name(), tc.lo, tc.hi, tc.meth.Order(), slope, errs)
		}
		rates := make([]string, 0, len(tc.ns)-1)
		for j := 1; j < len(tc.ns); j++ {
			r := math.Log2(errs[j-1]/errs[j]) / math.Log2(float64(tc.ns[j])/float64(tc.ns[j-1]))
			rates = append(rates, fmt.Sprintf("%.2f", r))
			if !(r >= tc.lo && r <= tc.hi) {
				t.Errorf("Case %v: pairwise rate %d→%d steps in [%v, %v]: want ≈ %v, got %.3f", tc.meth.Name(), tc.ns[j-1], tc.ns[j], tc.lo, tc.hi, tc.meth.Order(), r)
			}
		}
		t.Logf("%s: errors %.2e, slope %.3f, pairwise %s", tc.meth.Name(), errs, slope, strings.Join(rates, " "))
	}
}

// TestStiffAutonomized checks the f_t term and the stage times directly: a
// Rosenbrock step on the non-autonomous field must equal, up to round-off,
// the same step on the autonomous system (y, τ) with τ' = 1 (whose
// Jacobian carries f_t in its last column and whose stage times come from
// τ's stages). Replay of one recorded mesh and Grad (with respect to y0
// and p) on both formulations agree to 1e-12 relative; dropping f_t or
// evaluating the stages at t would make them differ at O(h²) per step.
func TestStiffAutonomized(t *testing.T) {
	const tol = 1e-12
	auto := ode.Field{Name: "stiff-forced-autonomized", Dim: 3, Params: 2, F: func(t tape.V, y, p []tape.V) []tape.V {
		tau := y[2]
		return []tape.V{
			p[0].Mul(y[1].Square().Sub(y[0])).Add(tau.MulC(2).Sin()),
			y[0].Mul(tau.Cos().MulC(0.5).AddC(1)).Sub(y[1]).Sub(p[1].Mul(y[1].Powi(3))),
			tau.Const(1),
		}
	}}
	const t0, t1 = 0.5, 1.5
	for _, meth := range []ode.Method{ode.Rodas5P, ode.Rosenbrock23} {
		prob := ode.Problem{Field: stiffForced(), N: 2, Y0: []float64{1, 0.5, 0.3, -0.2}, P: []float64{stiffForcedP0, stiffForcedP1, 20, 2},
			T0: t0, T1: t1, SaveAt: []float64{0.9, 1.2}}
		set := &ode.Settings{Method: meth, RelTol: 1e-5, AbsTol: 1e-8}
		m, err := ode.Record(prob, set)
		if err != nil {
			t.Fatalf("Case %v: Record: %v", meth.Name(), err)
		}
		probA := prob
		probA.Field = auto
		probA.Y0 = []float64{1, 0.5, t0, 0.3, -0.2, t0}
		loss := ode.Loss{Name: "y-ys", F: func(y, ys, _ []tape.V) tape.V {
			return y[0].Mul(y[1]).Add(ys[0]).Add(ys[len(ys)/2+1].Square())
		}}
		lossA := ode.Loss{Name: "y-ys", F: func(y, ys, _ []tape.V) tape.V {
			return y[0].Mul(y[1]).Add(ys[0]).Add(ys[len(ys)/2+1].Square())
		}}
		g, err := ode.Grad(nil, prob, loss, m, set)
		if err != nil {
			t.Fatalf("Case %v: Grad: %v", meth.Name(), err)
		}
		// The mesh is replayed on an equivalent field on purpose: clear its
		// fingerprint, which would refuse another field.
		mA := *m
		mA.Fingerprint = ""
		gA, err := ode.Grad(nil, probA, lossA, &mA, set)
		if err != nil {
			t.Fatalf("Case %v: Grad (autonomized): %v", meth.Name(), err)
		}
		worst := 0.0
		check := func(what string, want, got float64) {
			e := math.Abs(got-want) / math.Max(math.Abs(want), 1e-300)
			worst = math.Max(worst, e)
			if !(e <= tol) {
				t.Errorf("Case %v %v: autonomized within %v: want %v, got %v", meth.Name(), what, tol, want, got)
			}
		}
		for i := 0; i < 2; i++ {
			for c := 0; c < 2; c++ {
				check(fmt.Sprintf("y[%d][%d]", i, c), g.Solution.Y[2*i+c], gA.Solution.Y[3*i+c])
				check(fmt.Sprintf("∂L/∂y0[%d][%d]", i, c), g.Y0[2*i+c], gA.Y0[3*i+c])
				check(fmt.Sprintf("∂L/∂p[%d][%d]", i, c), g.P[2*i+c], gA.P[2*i+c])
				for k := range prob.SaveAt {
					check(fmt.Sprintf("ys[%d][%d][%d]", i, k, c), g.Solution.Ys[(2*i+k)*2+c], gA.Solution.Ys[(2*i+k)*3+c])
				}
			}
		}
		check("loss", g.Loss, gA.Loss)
		t.Logf("%s: %d steps, worst rel difference %.2g", meth.Name(), m.Stats.TotalAccepted(), worst)
	}
}

// ---- Padding ----

// stiffPadMesh returns the uniform mesh of k steps of size 1/k over
// [0, 1] (exact in binary, so the steps end exactly at t1 = 1), followed
// by pad rows with h = 0 inside Len; a second trajectory has 2k steps and
// no padding, so the mesh is ragged as well.
func stiffPadMesh(meth ode.Method, k, pad int) *ode.Mesh {
	rows := max(k+pad, 2*k)
	m := &ode.Mesh{N: 2, Rows: rows, H: make([]float64, 2*rows), Len: []int{k + pad, 2 * k},
		T0: 0, T1: []float64{1, 1}, Method: meth, Status: []ode.Status{ode.OK, ode.OK}}
	for s := 0; s < k; s++ {
		m.H[2*s] = 1 / float64(k)
	}
	for s := 0; s < 2*k; s++ {
		m.H[2*s+1] = 1 / float64(2*k)
	}
	return m
}

// TestStiffPaddedSingularFt checks the padding contract on a field whose
// ∂f/∂t is infinite at t1 = 1, where the padded rows sit: y' = −p0·y +
// c·sqrt(1 − t), f_t = −c/(2·sqrt(1 − t)). Replay on a mesh ending
// exactly at t1 followed by h = 0 rows must equal the unpadded replay
// bitwise, and Grad must be finite and equal the unpadded gradient (to
// 1e-14 relative), for c = 1 (REFERENCE.md's field) and for c = p1, a
// parameter, where ∂f_t/∂p1 is infinite too.
func TestStiffPaddedSingularFt(t *testing.T) {
	fields := []struct {
		name string
		f    func(t, y tape.V, p []tape.V) tape.V
	}{
		{"y' = −p0·y + sqrt(1−t)", func(t, y tape.V, p []tape.V) tape.V {
			return p[0].Mul(y).Neg().Add(t.Neg().AddC(1).Sqrt())
		}},
		{"y' = −p0·y + p1·sqrt(1−t)", func(t, y tape.V, p []tape.V) tape.V {
			return p[0].Mul(y).Neg().Add(p[1].Mul(t.Neg().AddC(1).Sqrt()))
		}},
	}
	loss := ode.Loss{Name: "mix", F: func(y, ys, _ []tape.V) tape.V { return y[0].Square().Add(ys[0]) }}
	for _, fc := range fields {
		f := fc.f
		fld := ode.Field{Name: "sqrt-forcing", Dim: 1, Params: 2, F: func(t tape.V, y, p []tape.V) []tape.V {
			return []tape.V{f(t, y[0], p)}
		}}
		for _, meth := range []ode.Method{ode.Rodas5P, ode.Rosenbrock23} {
			name := fmt.Sprintf("%s/%s", fc.name, meth.Name())
			prob := ode.Problem{Field: fld, N: 2, Y0: []float64{0.7, 0.4}, P: []float64{1.3, 0.8, 2, 0.5}, T1: 1, SaveAt: []float64{0.5, 1}}
			sv, err := ode.NewSolver(fld, &ode.Settings{Method: meth})
			if err != nil {
				t.Fatalf("Case %v: NewSolver: %v", name, err)
			}
			plain, padded := stiffPadMesh(meth, 8, 0), stiffPadMesh(meth, 8, 3)
			s0, err := sv.Replay(&prob, plain)
			if err != nil {
				t.Fatalf("Case %v: Replay: %v", name, err)
			}
			s1, err := sv.Replay(&prob, padded)
			if err != nil {
				t.Fatalf("Case %v: Replay (padded): %v", name, err)
			}
			for i := range s0.Y {
				if s0.Y[i] != s1.Y[i] {
					t.Errorf("Case %v: padded replay y[%d] bitwise: want %v, got %v", name, i, s0.Y[i], s1.Y[i])
				}
			}
			for i := range s0.Ys {
				if s0.Ys[i] != s1.Ys[i] {
					t.Errorf("Case %v: padded replay ys[%d] bitwise: want %v, got %v", name, i, s0.Ys[i], s1.Ys[i])
				}
			}
			g0, err := sv.Grad(nil, &prob, loss, plain)
			if err != nil {
				t.Fatalf("Case %v: Grad: %v", name, err)
			}
			g1, err := sv.Grad(nil, &prob, loss, padded)
			if err != nil {
				t.Fatalf("Case %v: Grad (padded): %v", name, err)
			}
			cmp := func(what string, want, got []float64) {
				for i := range want {
					if math.IsNaN(want[i]) || math.IsInf(want[i], 0) {
						t.Errorf("Case %v: unpadded %s[%d] finite: got %v", name, what, i, want[i])
						continue
					}
					if !(math.Abs(got[i]-want[i]) <= 1e-14*math.Abs(want[i])) {
						t.Errorf("Case %v: padded %s[%d] finite and equal to the unpadded one: want %v, got %v", name, what, i, want[i], got[i])
					}
				}
			}
			cmp("∂L/∂y0", g0.Y0, g1.Y0)
			cmp("∂L/∂p", g0.P, g1.P)
		}
	}
}

// ---- Singular W ----

// stiffTrialRun runs the solver's trial step program once, through an
// executor with CheckFinite, at t = 0, step h, state y and parameters p.
func stiffTrialRun(sv *ode.Solver, h float64, y, p []float64) ([]float64, error) {
	trial, _ := sv.StepPrograms()
	ex, err := tape.NewExec(trial, &tape.ExecSettings{CheckFinite: true})
	if err != nil {
		return nil, err
	}
	in := [][]float64{{0}, {h}}
	for _, v := range append(append([]float64(nil), y...), p...) {
		in = append(in, []float64{v})
	}
	out := make([][]float64, len(trial.Outputs))
	for i := range out {
		out[i] = make([]float64, 1)
	}
	err = ex.Run(out, in, 1)
	res := make([]float64, len(out))
	for i, o := range out {
		res[i] = o[0]
	}
	return res, err
}

// TestStiffSingularW covers W = I − h·γ·J singular to working precision.
//
// Rank one: y' = (λ/2)·(y1 + y2)·(1, 1) has eigenvalues λ and 0, so W is
// exactly singular at h·γ·λ = 1; λ = fl(1/γ) and h = 1 make it singular
// to working precision (a pivot ≤ d·ε·max|W|). A direct Exec of the trial
// step with CheckFinite must report the singular LUFactor; the recorder,
// started at Dt0 = 1, must reject that trial step as non-finite and go on
// with smaller steps to the right answer y(2) = e^{2λ}·(1, 1).
//
// Nilpotent: y' = −y + p·N·y with N = [[1, −1], [1, −1]] (N² = 0) has
// det W = (1 + h·γ)², but for p = 1e20 W's entries are ~1e19 and it is
// singular to working precision for every step the recorder can take.
// Exec must report it; the recorder must end the trajectory with a
// failure status (its state NaN by convention), and Record and Grad must
// return an error, never a silent NaN.
func TestStiffSingularW(t *testing.T) {
	rank1 := ode.Field{Name: "rank-one", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		s := p[0].Mul(y[0].Add(y[1])).MulC(0.5)
		return []tape.V{s, s}
	}}
	nilp := ode.Field{Name: "nilpotent", Dim: 2, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		d := p[0].Mul(y[0].Sub(y[1]))
		return []tape.V{d.Sub(y[0]), d.Sub(y[1])}
	}}
	for _, tc := range []struct {
		meth  ode.Method
		gamma float64 // W = I − h·gamma·J
	}{
		{ode.Rodas5P, 0.21193756319429014},
		{ode.Rosenbrock23, 1 / (2 + math.Sqrt2)},
	} {
		name := tc.meth.Name() + "/rank-one"
		lam := 1 / tc.gamma
		sv, err := ode.NewSolver(rank1, &ode.Settings{Method: tc.meth, Dt0: 1})
		if err != nil {
			t.Fatalf("Case %v: NewSolver: %v", name, err)
		}
		out, execErr := stiffTrialRun(sv, 1, []float64{1, 1}, []float64{lam})
		var nf *tape.NonFiniteError
		if !errors.As(execErr, &nf) || !nf.Singular || !strings.Contains(execErr.Error(), "singular") {
			t.Errorf("Case %v: Exec with CheckFinite at h = 1: want a *tape.NonFiniteError naming the singular LUFactor, got %v (outputs %v)", name, execErr, out)
		}
		prob := ode.Problem{Field: rank1, Y0: []float64{1, 1}, P: []float64{lam}, T1: 2}
		m, sol, err := sv.Record(&prob)
		if err != nil {
			t.Fatalf("Case %v: Record: want success after rejecting the singular trial step, got %v", name, err)
		}
		if m.Stats.Rejected[0] < 1 || !(m.H[0] < 1) {
			t.Errorf("Case %v: singular first trial (h = 1) rejected: want ≥ 1 rejection and a first step < 1, got %d rejections, first step %v",
				name, m.Stats.Rejected[0], m.H[0])
		}
		exact := math.Exp(2 * lam)
		for c := 0; c < 2; c++ {
			if e := math.Abs(sol.Y[c]-exact) / exact; !(e <= 1e-3) {
				t.Errorf("Case %v: y[%d](2) within 1e-3 relative: want %v, got %v", name, c, exact, sol.Y[c])
			}
		}
		g, err := sv.Grad(nil, &prob, ode.SumSquares(), m)
		if err != nil || !stiffFinite(g.Y0) || !stiffFinite(g.P) {
			t.Errorf("Case %v: Grad on the recorded mesh: want finite, got %v, %v (err %v)", name, g.Y0, g.P, err)
		}
		t.Logf("%s: Exec: %v; recorder: %d accepted, %d rejected, first step %.3g, y(2) rel err %.2g",
			name, execErr, m.Stats.Accepted[0], m.Stats.Rejected[0], m.H[0], math.Abs(sol.Y[0]-exact)/exact)

		name = tc.meth.Name() + "/nilpotent"
		const p = 1e20
		sv, err = ode.NewSolver(nilp, &ode.Settings{Method: tc.meth, MaxSteps: 2000, AllowFailures: true})
		if err != nil {
			t.Fatalf("Case %v: NewSolver: %v", name, err)
		}
		_, execErr = stiffTrialRun(sv, 0.1, []float64{1, 1}, []float64{p})
		if !errors.As(execErr, &nf) || !nf.Singular {
			t.Errorf("Case %v: Exec with CheckFinite: want a *tape.NonFiniteError naming the singular LUFactor, got %v", name, execErr)
		}
		// Two trajectories: p = 1 is harmless and must still succeed.
		prob = ode.Problem{Field: nilp, N: 2, Y0: []float64{1, 1}, P: []float64{p, 1}, T1: 1}
		m, sol, err = sv.Record(&prob)
		if err != nil {
			t.Fatalf("Case %v: Record with AllowFailures: %v", name, err)
		}
		if st := m.Status[0]; st == ode.OK {
			t.Errorf("Case %v: status of the singular trajectory: want a failure, got %v (y %v)", name, st, sol.Y[:2])
		} else if !math.IsNaN(sol.Y[0]) {
			t.Errorf("Case %v: state of a failed trajectory: want NaN, got %v", name, sol.Y[0])
		}
		if st := m.Status[1]; st != ode.OK || !stiffFinite(sol.Y[2:]) {
			t.Errorf("Case %v: status of the regular trajectory: want %v with a finite state, got %v, %v", name, ode.OK, st, sol.Y[2:])
		}
		for i, st := range m.Status {
			if st == ode.OK && !stiffFinite(sol.Y[2*i:2*i+2]) {
				t.Errorf("Case %v: trajectory %d: status OK with a non-finite state %v", name, i, sol.Y[2*i:2*i+2])
			}
		}
		_, err = ode.Record(prob, &ode.Settings{Method: tc.meth, MaxSteps: 2000})
		var te *ode.TrajectoryError
		if !errors.As(err, &te) || te.Index != 0 {
			t.Errorf("Case %v: Record without AllowFailures: want a *ode.TrajectoryError for trajectory 0, got %v", name, err)
		}
		if _, err := sv.Grad(nil, &prob, ode.SumSquares(), m); err == nil {
			t.Errorf("Case %v: Grad on a mesh with a failed trajectory: want an error, got nil", name)
		}
		t.Logf("%s: Exec: %v; recorder: status %v after %d accepted, %d rejected steps, reached t = %.3g; error: %v",
			name, execErr, m.Status[0], m.Stats.Accepted[0], m.Stats.Rejected[0], sol.T[0], err)
	}
}

func stiffFinite(x []float64) bool {
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// ---- Failures, routing ----

// stiffFailCase is an ensemble of three in which only the middle
// trajectory fails.
type stiffFailCase struct {
	name   string
	field  ode.Field
	y0     float64
	p      []float64
	status ode.Status
	err    error
	exact  func(p float64) float64 // y(2) of the trajectories that succeed, or nil
}

// stiffFailCases returns the failing ensembles:
//
//   - blow-up: y' = p·y², y(0) = 1 explodes at t = 1/p; p = 1 inside
//     [0, 2] ends in step-size underflow near t = 1.
//   - non-finite: y' = sqrt(p − t) − y is NaN for t > p; p = 1 makes every
//     trial step across t = 1 non-finite, so h shrinks until it underflows
//     with non-finite trial steps pending: status NonFinite.
func stiffFailCases() []stiffFailCase {
	blow := ode.Field{Name: "blow-up", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(y[0].Square())}
	}}
	root := ode.Field{Name: "root", Dim: 1, Params: 1, F: func(t tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Sub(t).Sqrt().Sub(y[0])}
	}}
	return []stiffFailCase{
		{"blow-up", blow, 1, []float64{0.1, 1, 0.3}, ode.StepSizeUnderflow, ode.ErrStepSizeUnderflow,
			func(p float64) float64 { return 1 / (1 - 2*p) }},
		{"non-finite", root, 0, []float64{5, 1, 3}, ode.NonFinite, ode.ErrNonFinite, nil},
	}
}

func (c stiffFailCase) problem() ode.Problem {
	return ode.Problem{Field: c.field, N: 3, Y0: []float64{c.y0}, P: c.p, T1: 2, SaveAt: []float64{0.5, 2}}
}

// TestStiffStatuses checks that step-size underflow and persistently
// non-finite trial steps are detected per trajectory: the recorder (with
// AllowFailures) gives the middle trajectory the status of its cause, a
// NaN state and the time it stopped (≈ 1), while the others finish with
// the right answer; without AllowFailures the error is a
// *TrajectoryError naming trajectory 1 and wrapping the status's sentinel.
func TestStiffStatuses(t *testing.T) {
	for _, tc := range stiffFailCases() {
		for _, meth := range []ode.Method{ode.Rodas5P, ode.Rosenbrock23} {
			name := tc.name + "/" + meth.Name()
			prob := tc.problem()
			set := &ode.Settings{Method: meth, AllowFailures: true, RelTol: 1e-8, AbsTol: 1e-10}
			sv, err := ode.NewSolver(prob.Field, set)
			if err != nil {
				t.Fatalf("Case %v: NewSolver: %v", name, err)
			}
			m, sol, err := sv.Record(&prob)
			if err != nil {
				t.Fatalf("Case %v: Record with AllowFailures: %v", name, err)
			}
			want := []ode.Status{ode.OK, tc.status, ode.OK}
			for i, st := range m.Status {
				if st != want[i] {
					t.Errorf("Case %v: status of trajectory %d: want %v, got %v", name, i, want[i], st)
				}
			}
			if !math.IsNaN(sol.Y[1]) || !(math.Abs(sol.T[1]-1) < 1e-3) {
				t.Errorf("Case %v: failed trajectory: want NaN state and stop near t = 1, got y %v at t %v", name, sol.Y[1], sol.T[1])
			}
			for _, i := range []int{0, 2} {
				if tc.exact != nil {
					if w := tc.exact(tc.p[i]); !(math.Abs(sol.Y[i]-w) <= 1e-4*w) {
						t.Errorf("Case %v: y(2) of trajectory %d: want %v, got %v", name, i, w, sol.Y[i])
					}
				} else if !stiffFinite(sol.Y[i:i+1]) || sol.T[i] != 2 {
					t.Errorf("Case %v: trajectory %d: want a finite y(2), got %v at t %v", name, i, sol.Y[i], sol.T[i])
				}
			}
			if _, err := sv.Grad(nil, &prob, ode.SumSquares(), m); err == nil {
				t.Errorf("Case %v: Grad on a mesh with a failed trajectory: want an error, got nil", name)
			}
			_, err = ode.Record(prob, &ode.Settings{Method: meth, RelTol: 1e-8, AbsTol: 1e-10})
			var te *ode.TrajectoryError
			if !errors.As(err, &te) || te.Index != 1 || te.Status != tc.status || te.Failed != 1 || !errors.Is(err, tc.err) {
				t.Errorf("Case %v: error without AllowFailures: want *ode.TrajectoryError{Index: 1, Status: %v, Failed: 1} wrapping %v, got %#v", name, tc.status, tc.err, err)
			}
			t.Logf("%s: statuses %v, rejected %v, stopped at t = %v; %v", name, m.Status, m.Stats.Rejected, sol.T[1], err)
		}
	}
}

// TestStiffSolveAllowFailures checks Solve with Settings.AllowFailures on
// the failing ensembles: per its documentation it returns per-trajectory
// statuses instead of an error, and the saved states of the trajectories
// that succeeded are computed (the last save time is t1, so their last
// saved state is their final state).
func TestStiffSolveAllowFailures(t *testing.T) {
	for _, tc := range stiffFailCases() {
		for _, meth := range []ode.Method{ode.Rodas5P, ode.Rosenbrock23} {
			name := tc.name + "/" + meth.Name()
			sol, err := ode.Solve(tc.problem(), &ode.Settings{Method: meth, AllowFailures: true, RelTol: 1e-8, AbsTol: 1e-10})
			if sol == nil {
				t.Fatalf("Case %v: Solve with AllowFailures: no solution (error %v)", name, err)
			}
			if err != nil {
				t.Errorf("Case %v: Solve with AllowFailures: want a nil error and per-trajectory statuses, got %v", name, err)
			}
			if sol.Status[1] != tc.status {
				t.Errorf("Case %v: status of trajectory 1: want %v, got %v", name, tc.status, sol.Status[1])
			}
			for _, i := range []int{0, 2} {
				if ys := sol.Ys[2*i : 2*i+2]; !stiffFinite(ys) || ys[1] != sol.Y[i] {
					t.Errorf("Case %v: saved states of the successful trajectory %d: want finite, ys(2) = y(2) = %v, got %v", name, i, sol.Y[i], ys)
				}
			}
		}
	}
}

// TestStiffFailureHint checks the advice of a failure of a stiff method:
// it must not tell a user of Rodas5P or Rosenbrock23 to "try Rodas5P" (the
// MaxStepsReached hint already avoids that for the Rosenbrock methods).
func TestStiffFailureHint(t *testing.T) {
	for _, tc := range stiffFailCases() {
		for _, meth := range []ode.Method{ode.Rodas5P, ode.Rosenbrock23} {
			name := tc.name + "/" + meth.Name()
			_, err := ode.Record(tc.problem(), &ode.Settings{Method: meth, RelTol: 1e-8, AbsTol: 1e-10})
			if err == nil {
				t.Fatalf("Case %v: want an error, got nil", name)
			}
			if strings.Contains(err.Error(), "try Rodas5P") || strings.Contains(err.Error(), "use Rodas5P") {
				t.Errorf("Case %v: hint for a failure of the stiff method %s: want no advice to switch to Rodas5P, got %q", name, meth.Name(), err)
			}
		}
	}
}

// TestStiffTsit5Robertson checks the advice for an explicit method on a
// stiff problem: Tsit5 on Robertson with MaxSteps 2000 fails with a
// *TrajectoryError (status MaxStepsReached) whose message suggests
// Rodas5P.
func TestStiffTsit5Robertson(t *testing.T) {
	rob := problems.Robertson()
	prob := ode.Problem{Field: rob.Field, Y0: rob.Y0, P: rob.P, T1: rob.T1}
	_, err := ode.Solve(prob, &ode.Settings{Method: ode.Tsit5, MaxSteps: 2000})
	var te *ode.TrajectoryError
	switch {
	case !errors.As(err, &te):
		t.Fatalf("Case tsit5-robertson: want a *ode.TrajectoryError, got %v", err)
	case te.Status != ode.MaxStepsReached || !errors.Is(err, ode.ErrMaxSteps):
		t.Errorf("Case tsit5-robertson: status: want %v, got %v", ode.MaxStepsReached, te.Status)
	case !strings.Contains(err.Error(), "Rodas5P"):
		t.Errorf("Case tsit5-robertson: message: want a suggestion of Rodas5P, got %q", err)
	}
	t.Logf("Tsit5 on Robertson: %v", err)
}

// TestStiffRoute checks the router: Rodas5P for fields marked Stiff, Tsit5
// otherwise, and a stiff problem with Settings.Method nil solves (to the
// published y(100) within 1e-5).
func TestStiffRoute(t *testing.T) {
	for _, tc := range []struct {
		name string
		pr   problems.Problem
		want ode.Method
	}{
		{"robertson", problems.Robertson(), ode.Rodas5P},
		{"hires", problems.HIRES(), ode.Rodas5P},
		{"vdp-stiff", problems.StiffVanDerPol(1e3), ode.Rodas5P},
		{"neural-robertson", problems.NeuralRobertson(1), ode.Rodas5P},
		{"lorenz", problems.Lorenz(), ode.Tsit5},
		{"vdp", problems.VanDerPol(), ode.Tsit5},
	} {
		if got := ode.Route(&tc.pr.Field); got != tc.want {
			t.Errorf("Case %v: Route: want %v, got %v", tc.name, tc.want.Name(), got.Name())
		}
	}
	rob := problems.Robertson()
	prob := ode.Problem{Field: rob.Field, Y0: rob.Y0, P: rob.P, T1: rob.T1}
	sv, err := ode.NewSolver(prob.Field, nil)
	if err != nil {
		t.Fatalf("Case robertson: NewSolver(nil settings): %v", err)
	}
	if got := sv.Method(); got != ode.Rodas5P {
		t.Errorf("Case robertson: method with Settings.Method nil: want Rodas5P, got %v", got.Name())
	}
	sol, err := ode.Solve(prob, &ode.Settings{})
	if err != nil {
		t.Fatalf("Case robertson: Solve with Settings.Method nil: %v", err)
	}
	want := refode.RobertsonRefDecades[2]
	for c := 0; c < 3; c++ {
		if e := math.Abs(sol.Y[c]-want[c]) / want[c]; !(e <= 1e-5) {
			t.Errorf("Case robertson: y[%d](100) with the routed method within 1e-5: want %v, got %v", c, want[c], sol.Y[c])
		}
	}
	t.Logf("routed Robertson: %d steps, y(100) = %v", sol.Stats.Accepted[0], sol.Y)
}

// ---- Analytic Jacobian ----

// TestStiffAnalyticJacobian checks that a user-supplied Field.Jac gives the
// results of the forward-mode Jacobian for Robertson: on one recorded
// mesh, the replayed final and saved states and the gradients with
// respect to y0 and k agree to 1e-12 relative, and recording with the
// analytic Jacobian gives the same mesh.
func TestStiffAnalyticJacobian(t *testing.T) {
	const tol = 1e-12
	rob := problems.Robertson()
	jac := rob.Field
	jac.Name = "robertson-jac"
	jac.Jac = func(_ tape.V, y, p []tape.V) []tape.V {
		k1, k2, k3 := p[0], p[1], p[2]
		z := y[0].Const(0)
		a := k3.Mul(y[2])         // ∂(k3·y1·y2)/∂y1
		b := k3.Mul(y[1])         // ∂(k3·y1·y2)/∂y2
		c := k2.Mul(y[1]).MulC(2) // ∂(k2·y1²)/∂y1
		return []tape.V{
			k1.Neg(), a, b,
			k1, a.Neg().Sub(c), b.Neg(),
			z, c, z,
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	n := 3
	y0, p := rob.Ensemble(n)
	for i := range p {
		p[i] *= 0.7 + 0.6*rng.Float64()
	}
	for _, meth := range []ode.Method{ode.Rodas5P, ode.Rosenbrock23} {
		prob := ode.Problem{Field: rob.Field, Y0: y0, P: p, T1: rob.T1, SaveAt: []float64{1, 30}}
		set := &ode.Settings{Method: meth, RelTol: 1e-7, AbsTol: 1e-13}
		fwd, err := ode.NewSolver(rob.Field, set)
		if err != nil {
			t.Fatalf("Case %v: NewSolver: %v", meth.Name(), err)
		}
		ana, err := ode.NewSolver(jac, set)
		if err != nil {
			t.Fatalf("Case %v: NewSolver (Jac): %v", meth.Name(), err)
		}
		m, _, err := fwd.Record(&prob)
		if err != nil {
			t.Fatalf("Case %v: Record: %v", meth.Name(), err)
		}
		probJ := prob
		probJ.Field = jac
		loss := stiffLoss(3, len(prob.SaveAt))
		loss.Data = stiffWeights(rng, n, len(prob.SaveAt), []float64{1, 3e-5, 1})
		gf, err := fwd.Grad(nil, &prob, loss, m)
		if err != nil {
			t.Fatalf("Case %v: Grad: %v", meth.Name(), err)
		}
		mJ := *m
		mJ.Fingerprint = "" // replayed on the same field with an analytic Jacobian, on purpose
		ga, err := ana.Grad(nil, &probJ, loss, &mJ)
		if err != nil {
			t.Fatalf("Case %v: Grad (Jac): %v", meth.Name(), err)
		}
		worst := 0.0
		cmp := func(what string, want, got []float64) {
			scale := 0.0
			for _, w := range want {
				scale = math.Max(scale, math.Abs(w))
			}
			for i := range want {
				e := math.Abs(got[i]-want[i]) / math.Max(math.Abs(want[i]), 1e-6*scale)
				worst = math.Max(worst, e)
				if !(e <= tol) {
					t.Errorf("Case %v: %s[%d] with Field.Jac within %v: want %v, got %v", meth.Name(), what, i, tol, want[i], got[i])
				}
			}
		}
		cmp("y", gf.Solution.Y, ga.Solution.Y)
		cmp("ys", gf.Solution.Ys, ga.Solution.Ys)
		cmp("∂L/∂y0", gf.Y0, ga.Y0)
		cmp("∂L/∂k", gf.P, ga.P)
		mj, _, err := ana.Record(&probJ)
		if err != nil {
			t.Fatalf("Case %v: Record (Jac): %v", meth.Name(), err)
		}
		for i := 0; i < n; i++ {
			if mj.Len[i] != m.Len[i] || mj.Stats.Rejected[i] != m.Stats.Rejected[i] {
				t.Errorf("Case %v: trajectory %d: mesh with Field.Jac: want %d steps (%d rejected), got %d (%d)",
					meth.Name(), i, m.Len[i], m.Stats.Rejected[i], mj.Len[i], mj.Stats.Rejected[i])
			}
		}
		t.Logf("%s: %d steps, worst rel difference forward-mode vs Field.Jac %.2g", meth.Name(), m.Stats.TotalAccepted(), worst)
	}
}
