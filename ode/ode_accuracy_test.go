package ode_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// This file checks accuracy against independent references (closed forms
// and internal/refode's DOP853 on the variational equations), saved
// states, bit-for-bit agreement of recorder and replay across executor
// settings, and per-trajectory statistics.

// sensRows returns, for each state component c, the gradient of the loss
// Σ_i y_ic(t1) on mesh m: row c of ∂y(t1)/∂(y0, p) for every trajectory,
// and Σ_i ∂y_ic/∂shared.
func sensRows(t *testing.T, sv *ode.Solver, pr *ode.Problem, m *ode.Mesh) []*ode.Gradient {
	t.Helper()
	rows := make([]*ode.Gradient, pr.Field.Dim)
	for c := range rows {
		g, err := sv.Grad(nil, pr, ode.Component(c), m)
		if err != nil {
			t.Fatal(err)
		}
		rows[c] = g
	}
	return rows
}

// rowErr returns max_j |got_j − want_j| / max_j |want_j|: the error of a
// row of a Jacobian relative to its largest entry.
func rowErr(got, want []float64) float64 {
	scale := maxAbs(want)
	if scale == 0 {
		scale = 1
	}
	e := 0.0
	for j := range want {
		e = math.Max(e, math.Abs(got[j]-want[j]))
	}
	return e / scale
}

// sensCase is an ensemble with references for y(t1) and its sensitivities.
type sensCase struct {
	name string
	prob ode.Problem
	// ref returns trajectory i's y(t1), ∂y/∂y0 (row-major d×d), ∂y/∂p
	// (row-major d×Params) and ∂y/∂shared (row-major d×Shared).
	ref func(i int) (y, dy0, dp, ds []float64)
	// tol bounds the error of y and of every sensitivity row, relative
	// to the row's largest entry. The linear system's is the 1e-7.
	// Against refode it is 1e-8 = 100·RelTol: the worst measured errors
	// are 2e-10 (Lorenz, Tsit5) and 6.5e-10 (Van der Pol, Tsit5), Vern7
	// 4e-11 and 4e-10, and refode's own error is below 1e-12.
	tol float64
}

func sensCases() []sensCase {
	lor := ode.Problem{Field: lorenzField(), N: 3,
		Y0:  []float64{1, 0, 0, 1, 1, 1, -3, 2, 20},
		P:   []float64{10, 28, 8.0 / 3, 10, 21, 8.0 / 3, 12, 15, 2},
		T1s: []float64{0.5, 1, 2},
	}
	vdp := ode.Problem{Field: vdpField(), N: 4,
		Y0:  []float64{2, 0, 2, 0, 1, 1, -0.5, 2},
		P:   []float64{0.5, 1, 3, 8},
		T1s: []float64{1, 3, 5, 2},
	}
	lin := ode.Problem{Field: linearField(), N: 3, T0: 0.25,
		Y0:     []float64{1, 0.5, -1, 0, 1, 2, -2, 1, 0.3},
		P:      []float64{0.1, 1, 0.3, 4, 0.05, 8},
		Shared: []float64{0.4, 0.7},
		T1s:    []float64{1, 3, 6},
	}
	return []sensCase{
		{
			name: "lorenz vs refode.LorenzRef", prob: lor, tol: 1e-8,
			ref: func(i int) (y, dy0, dp, ds []float64) {
				var p, y0 [3]float64
				copy(p[:], lor.P[3*i:])
				copy(y0[:], lor.Y0[3*i:])
				yr, dydp, dydy0 := refode.LorenzRef(p, y0, lor.T1s[i])
				for c := 0; c < 3; c++ {
					dy0 = append(dy0, dydy0[c][:]...)
					dp = append(dp, dydp[c][:]...)
				}
				return yr[:], dy0, dp, nil
			},
		},
		{
			name: "vanderpol vs refode.VanDerPolRef", prob: vdp, tol: 1e-8,
			ref: func(i int) (y, dy0, dp, ds []float64) {
				var y0 [2]float64
				copy(y0[:], vdp.Y0[2*i:])
				yr, dydmu, dydy0 := refode.VanDerPolRef(vdp.P[i], y0, vdp.T1s[i])
				return yr[:], append(dydy0[0][:], dydy0[1][:]...), dydmu[:], nil
			},
		},
		{
			name: "linear vs closed form", prob: lin, tol: 1e-7,
			ref: func(i int) (y, dy0, dp, ds []float64) {
				th := [4]float64{lin.P[2*i], lin.P[2*i+1], lin.Shared[0], lin.Shared[1]}
				var y0 [3]float64
				copy(y0[:], lin.Y0[3*i:])
				yr, e, dth := linearExact(th, y0, lin.T1s[i]-lin.T0)
				for c := 0; c < 3; c++ {
					dp = append(dp, dth[0][c], dth[1][c])
					ds = append(ds, dth[2][c], dth[3][c])
				}
				return yr[:], e[:], dp, ds
			},
		},
	}
}

// TestSensitivityAccuracy checks y(t1) and the gradient (rows of
// ∂y(t1)/∂(y0, p, shared)) at RelTol 1e-10, AbsTol 1e-12 against the
// closed form of the linear system and against refode's DOP853 references
// for Lorenz and Van der Pol (themselves accurate to ~1e-13), each
// trajectory with its own end time, for Tsit5 and Vern7. Errors are
// relative to the largest entry of the row.
func TestSensitivityAccuracy(t *testing.T) {
	t.Parallel()
	for _, tc := range sensCases() {
		for _, meth := range []ode.Method{ode.Tsit5, ode.Vern7} {
			name := tc.name + "/" + meth.Name()
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				pr := tc.prob
				d, np, ns := pr.Field.Dim, pr.Field.Params, pr.Field.Shared
				sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: meth, RelTol: 1e-10, AbsTol: 1e-12})
				if err != nil {
					t.Fatal(err)
				}
				m, sol, err := sv.Record(&pr)
				if err != nil {
					t.Fatal(err)
				}
				rows := sensRows(t, sv, &pr, m)
				wantShared := make([][]float64, d) // Σ_i ∂y_ic/∂shared
				for c := range wantShared {
					wantShared[c] = make([]float64, ns)
				}
				worst := map[string]float64{}
				check := func(what string, i, c int, got, want []float64) {
					e := rowErr(got, want)
					worst[what] = math.Max(worst[what], e)
					if !(e <= tc.tol) {
						t.Errorf("Case %v, trajectory %d: %s row %d: want %v, got %v (rel err %.2g)", name, i, what, c, want, got, e)
					}
				}
				for i := 0; i < sol.N; i++ {
					y, dy0, dp, ds := tc.ref(i)
					if sol.T[i] != pr.T1s[i] {
						t.Errorf("Case %v: T[%d] want %v, got %v", name, i, pr.T1s[i], sol.T[i])
					}
					check("y", i, 0, sol.Y[i*d:(i+1)*d], y)
					for c := 0; c < d; c++ {
						g := rows[c]
						check("∂y/∂y0", i, c, g.Y0[i*d:(i+1)*d], dy0[c*d:(c+1)*d])
						if np > 0 {
							check("∂y/∂p", i, c, g.P[i*np:(i+1)*np], dp[c*np:(c+1)*np])
						}
						for k := 0; k < ns; k++ {
							wantShared[c][k] += ds[c*ns+k]
						}
					}
				}
				for c := 0; c < d && ns > 0; c++ {
					check("Σ_i ∂y/∂shared", -1, c, rows[c].Shared, wantShared[c])
				}
				t.Logf("%s: worst errors %v (mesh lengths %v)", name, fmtMap(worst), m.Len)
			})
		}
	}
}

func fmtMap(m map[string]float64) string {
	s := ""
	for _, k := range []string{"y", "∂y/∂y0", "∂y/∂p", "Σ_i ∂y/∂shared", "saved", "saved/endpoint"} {
		if v, ok := m[k]; ok {
			s += fmt.Sprintf("%s %.2g; ", k, v)
		}
	}
	return s
}

// refRHS returns refode's plain-Go field pr bound to the parameters p.
func refRHS(pr refode.Problem, p []float64) refode.Func {
	f, _ := pr.Bind(p)
	return f
}

// refSaved returns the reference states at ts (non-decreasing, from t0)
// from DOP853 at rtol = atol = 1e-13.
func refSaved(t *testing.T, pr refode.Problem, p []float64, t0 float64, y0, ts []float64) [][]float64 {
	t.Helper()
	ys, err := refode.DOP853(refRHS(pr, p), t0, y0, ts, 1e-13, 1e-13)
	if err != nil {
		t.Fatal(err)
	}
	return ys
}

// TestSaveAtAccuracy checks saved states against DOP853 references: each
// saved state must be about as accurate as an endpoint, i.e. its error
// is at most 10× the error at the same time of a solve that ends there
// (or 10·RelTol·|y| if that happens to be smaller). It also checks that
// SaveAt does not change the mesh or the final state.
func TestSaveAtAccuracy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ref  refode.Problem
		prob ode.Problem
	}{
		{"lorenz", refode.Lorenz(), ode.Problem{Field: lorenzField(), N: 2, Y0: []float64{1, 0, 0, -3, 2, 20},
			P: []float64{10, 28, 8.0 / 3, 12, 15, 2}, T1: 2, SaveAt: []float64{0, 0.013, 0.3, 0.3, 0.77, 1.5, 1.999, 2}}},
		{"vanderpol", refode.VanDerPol(), ode.Problem{Field: vdpField(), N: 2, Y0: []float64{2, 0, 1, 1},
			P: []float64{1, 5}, T1: 5, SaveAt: []float64{0.1, 0.1, 0.4, 1, 2.2, 3.14159, 4.5}}},
	} {
		for _, meth := range []ode.Method{ode.Tsit5, ode.Vern7} {
			for _, rtol := range []float64{1e-6, 1e-9} {
				name := fmt.Sprintf("%s/%s/rtol=%g", tc.name, meth.Name(), rtol)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					pr := tc.prob
					d, np := pr.Field.Dim, pr.Field.Params
					set := &ode.Settings{Method: meth, RelTol: rtol, AbsTol: rtol * 1e-3}
					sv, err := ode.NewSolver(pr.Field, set)
					if err != nil {
						t.Fatal(err)
					}
					sol, err := sv.Solve(&pr)
					if err != nil {
						t.Fatal(err)
					}
					plain := pr
					plain.SaveAt = nil
					solPlain, err := sv.Solve(&plain)
					if err != nil {
						t.Fatal(err)
					}
					for j := range sol.Y {
						if sol.Y[j] != solPlain.Y[j] {
							t.Errorf("Case %v: Y[%d] with SaveAt want %v (without), got %v", name, j, solPlain.Y[j], sol.Y[j])
						}
					}
					K := len(pr.SaveAt)
					if len(sol.Ys) != pr.N*K*d {
						t.Fatalf("Case %v: len(Ys) want %v, got %v", name, pr.N*K*d, len(sol.Ys))
					}
					worst := map[string]float64{}
					for i := 0; i < pr.N; i++ {
						p := pr.P[i*np : (i+1)*np]
						y0 := pr.Y0[i*d : (i+1)*d]
						ref := refSaved(t, tc.ref, p, pr.T0, y0, pr.SaveAt)
						for k, tau := range pr.SaveAt {
							got := sol.Ys[(i*K+k)*d : (i*K+k+1)*d]
							eSaved := rowErr(got, ref[k])
							eEnd := 0.0
							if tau > pr.T0 {
								end := ode.Problem{Field: pr.Field, Y0: y0, P: p, T0: pr.T0, T1: tau}
								se, err := sv.Solve(&end)
								if err != nil {
									t.Fatal(err)
								}
								eEnd = rowErr(se.Y, ref[k])
							}
							worst["saved"] = math.Max(worst["saved"], eSaved)
							worst["saved/endpoint"] = math.Max(worst["saved/endpoint"], eSaved/math.Max(eEnd, 1e-3*rtol))
							if limit := 10 * math.Max(eEnd, rtol); !(eSaved <= limit) {
								t.Errorf("Case %v, trajectory %d, τ = %v: saved-state error want ≤ %.2g (10× endpoint error %.2g), got %.2g", name, i, tau, limit, eEnd, eSaved)
							}
						}
					}
					t.Logf("%s: worst errors %v", name, fmtMap(worst))
				})
			}
		}
	}
}

// meshTimes returns the mesh points t_0 = T0, t_{k+1} = t_k + h_k of
// trajectory i, accumulated as the recorder and the replay do.
func meshTimes(m *ode.Mesh, i int) []float64 {
	ts := []float64{m.T0}
	t := m.T0
	for s := 0; s < m.Len[i]; s++ {
		t += m.H[s*m.N+i]
		ts = append(ts, t)
	}
	return ts
}

// truncate returns m with trajectory i stopped after k steps.
func truncate(m *ode.Mesh, i, k int) *ode.Mesh {
	out := *m
	out.Len = append([]int(nil), m.Len...)
	out.T1 = append([]float64(nil), m.T1...)
	out.Len[i] = k
	out.T1[i] = meshTimes(m, i)[k]
	return &out
}

// TestSaveAtExact checks the exact properties of saved states: saving at
// T1 (or at the smallest of per-trajectory end times, for the trajectory
// that ends there) gives the final state bit for bit, saving at T0 gives
// y0, duplicate
// times give identical states, a time exactly on a mesh point gives the
// mesh state (to 1e-12 relative), and Solve, Replay and Grad save the
// same values.
func TestSaveAtExact(t *testing.T) {
	t.Parallel()
	for _, meth := range []ode.Method{ode.Tsit5, ode.Vern7} {
		t.Run(meth.Name(), func(t *testing.T) {
			t.Parallel()
			name := meth.Name()
			pr := ode.Problem{Field: lorenzSharedField(), N: 3, T0: 0.5, T1: 2.5,
				Y0:     []float64{1, 0, 20, -2, 1, 25, 3, 3, 10},
				P:      []float64{28, 15, 21},
				Shared: []float64{10, 8.0 / 3},
			}
			sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: meth, RelTol: 1e-7})
			if err != nil {
				t.Fatal(err)
			}
			m, rec, err := sv.Record(&pr)
			if err != nil {
				t.Fatal(err)
			}
			tm := meshTimes(m, 0)
			k1, k2 := 1, m.Len[0]/2
			pr.SaveAt = []float64{pr.T0, pr.T0, tm[k1], 1.25, tm[k2], tm[k2], 2, pr.T1, pr.T1}
			K, d := len(pr.SaveAt), 3
			sol, err := sv.Solve(&pr)
			if err != nil {
				t.Fatal(err)
			}
			rs, err := sv.Replay(&pr, m)
			if err != nil {
				t.Fatal(err)
			}
			g, err := sv.Grad(nil, &pr, obsLoss{d: d, K: K, data: make([]float64, 3*K*d)}.loss(), m)
			if err != nil {
				t.Fatal(err)
			}
			ys := func(s *ode.Solution, i, k int) []float64 { return s.Ys[(i*K+k)*d : (i*K+k+1)*d] }
			bitwise := func(what string, want, got []float64) {
				t.Helper()
				for c := range want {
					if got[c] != want[c] {
						t.Errorf("Case %v: %s component %d: want %v, got %v", name, what, c, want[c], got[c])
					}
				}
			}
			for j := range sol.Ys {
				if sol.Ys[j] != rs.Ys[j] || sol.Ys[j] != g.Solution.Ys[j] {
					t.Errorf("Case %v: Ys[%d]: Solve %v, Replay %v, Grad %v differ", name, j, sol.Ys[j], rs.Ys[j], g.Solution.Ys[j])
				}
			}
			for i := 0; i < pr.N; i++ {
				y0 := pr.Y0[i*d : (i+1)*d]
				fin := sol.Y[i*d : (i+1)*d]
				bitwise(fmt.Sprintf("final state vs Record, trajectory %d", i), rec.Y[i*d:(i+1)*d], fin)
				bitwise(fmt.Sprintf("save at T0, trajectory %d", i), y0, ys(sol, i, 0))
				bitwise(fmt.Sprintf("duplicate T0, trajectory %d", i), y0, ys(sol, i, 1))
				bitwise(fmt.Sprintf("duplicate mesh time, trajectory %d", i), ys(sol, i, 4), ys(sol, i, 5))
				bitwise(fmt.Sprintf("save at T1, trajectory %d", i), fin, ys(sol, i, 7))
				bitwise(fmt.Sprintf("duplicate T1, trajectory %d", i), fin, ys(sol, i, 8))
			}
			// With per-trajectory end times, saving at the smallest gives
			// that trajectory's final state bit for bit.
			rag := pr
			rag.T1, rag.T1s = 0, []float64{2.5, 1.75, 3}
			rag.SaveAt = []float64{1, 1.75}
			rsol, err := sv.Solve(&rag)
			if err != nil {
				t.Fatal(err)
			}
			bitwise("save at the smallest T1s, trajectory 1", rsol.Y[d:2*d], rsol.Ys[(1*2+1)*d:(1*2+2)*d])
			for _, kk := range []struct{ k, save int }{{k1, 2}, {k2, 4}} {
				// The truncated mesh ends at t_k for trajectory 0: replay it
				// for a problem that ends there.
				trm := truncate(m, 0, kk.k)
				tp := pr
				tp.T1, tp.T1s, tp.SaveAt = 0, trm.T1, nil
				tr, err := sv.Replay(&tp, trm)
				if err != nil {
					t.Fatal(err)
				}
				want, got := tr.Y[:d], ys(sol, 0, kk.save)
				if e := rowErr(got, want); !(e <= 1e-12) {
					t.Errorf("Case %v: save at mesh point t_%d = %v: want %v, got %v (rel err %.2g)", name, kk.k, tm[kk.k], want, got, e)
				} else {
					t.Logf("%s: save at mesh point t_%d: rel err %.2g", name, kk.k, e)
				}
			}
		})
	}
}

// fevalsPerAttempt is the number of field evaluations of one attempted
// step (the recorder's trial step): Tsit5 is FSAL, so its 7 stages cost 6
// evaluations after the first; Vern7 evaluates all 10 stages. Before the
// first step the recorder evaluates f(t0, y0) once, and once more for
// Hairer's initial step size when Settings.Dt0 is 0 (see record.go,
// initialStep).
func fevalsPerAttempt(m ode.Method) int {
	switch m.Name() {
	case "Tsit5":
		return 6
	case "Vern7":
		return 10
	}
	panic("unknown method " + m.Name())
}

// TestStats checks the per-trajectory statistics and statuses of every
// result (Solve, Record, Replay, Grad) and the mesh they describe, with
// per-trajectory end times, with and without Settings.Dt0.
func TestStats(t *testing.T) {
	t.Parallel()
	for _, meth := range []ode.Method{ode.Tsit5, ode.Vern7} {
		for _, dt0 := range []float64{0, 1e-3} {
			name := fmt.Sprintf("%s/Dt0=%v", meth.Name(), dt0)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				pr := ode.Problem{Field: lorenzField(), N: 5, T0: -1,
					Y0:  []float64{1, 0, 20},
					P:   fullRows(5, 3, func(i, c int) float64 { return []float64{10, 5 + 6*float64(i), 8.0 / 3}[c] }),
					T1s: []float64{-0.5, 0, 1, 2, 4},
				}
				set := &ode.Settings{Method: meth, RelTol: 1e-5, AbsTol: 1e-8, Dt0: dt0}
				sv, err := ode.NewSolver(pr.Field, set)
				if err != nil {
					t.Fatal(err)
				}
				m, rec, err := sv.Record(&pr)
				if err != nil {
					t.Fatal(err)
				}
				sol, err := sv.Solve(&pr)
				if err != nil {
					t.Fatal(err)
				}
				rs, err := sv.Replay(&pr, m)
				if err != nil {
					t.Fatal(err)
				}
				g, err := sv.Grad(nil, &pr, ode.SumSquares(), nil)
				if err != nil {
					t.Fatal(err)
				}
				extra := 2
				if dt0 > 0 {
					extra = 1
				}
				per := fevalsPerAttempt(meth)
				if m.Method != meth || m.RelTol != 1e-5 || m.AbsTol != 1e-8 || m.N != 5 || m.T0 != -1 {
					t.Errorf("Case %v: mesh header: want (%v, 1e-05, 1e-08, 5, -1), got (%v, %v, %v, %v, %v)", name, meth.Name(), m.Method, m.RelTol, m.AbsTol, m.N, m.T0)
				}
				rows := 0
				for i := 0; i < pr.N; i++ {
					rows = max(rows, m.Len[i])
					if m.Len[i] != m.Stats.Accepted[i] {
						t.Errorf("Case %v: trajectory %d: Len want %v (accepted), got %v", name, i, m.Stats.Accepted[i], m.Len[i])
					}
					tm := meshTimes(m, i)
					if tend := tm[len(tm)-1]; math.Abs(tend-pr.T1s[i]) > 1e-14*math.Max(1, math.Abs(pr.T1s[i])) {
						t.Errorf("Case %v: trajectory %d: T0 + Σh want %v, got %v", name, i, pr.T1s[i], tend)
					}
					if m.T1[i] != pr.T1s[i] {
						t.Errorf("Case %v: trajectory %d: mesh T1 want %v, got %v", name, i, pr.T1s[i], m.T1[i])
					}
					for s := 0; s < m.Rows; s++ {
						h := m.H[s*m.N+i]
						if s < m.Len[i] && !(h > 0) || s >= m.Len[i] && h != 0 {
							t.Errorf("Case %v: trajectory %d: H[%d] = %v with Len %d", name, i, s, h, m.Len[i])
						}
					}
					if i > 0 && dt0 == 0 && m.Len[i] <= m.Len[0] {
						t.Errorf("Case %v: trajectory %d (T1 = %v) has %d steps, no more than trajectory 0 (T1 = %v): %d", name, i, pr.T1s[i], m.Len[i], pr.T1s[0], m.Len[0])
					}
				}
				if m.Rows != rows {
					t.Errorf("Case %v: Rows want %v, got %v", name, rows, m.Rows)
				}
				if m.Stats.Wall <= 0 {
					t.Errorf("Case %v: Stats.Wall want > 0, got %v", name, m.Stats.Wall)
				}
				if m.Stats.TotalRejected() == 0 {
					t.Errorf("Case %v: want some rejected steps to exercise the count, got none", name)
				}
				for _, r := range []struct {
					what string
					sol  *ode.Solution
				}{{"Record", rec}, {"Solve", sol}, {"Replay", rs}, {"Grad", g.Solution}} {
					st := r.sol.Stats
					if len(r.sol.Status) != pr.N || len(st.Accepted) != pr.N || len(st.Rejected) != pr.N || len(st.FieldEvals) != pr.N {
						t.Fatalf("Case %v, %s: want %d statuses and stats, got %d, %d, %d, %d", name, r.what, pr.N,
							len(r.sol.Status), len(st.Accepted), len(st.Rejected), len(st.FieldEvals))
					}
					if r.sol.Method != meth.Name() {
						t.Errorf("Case %v, %s: Method want %v, got %q", name, r.what, meth.Name(), r.sol.Method)
					}
					sum := 0
					for i := 0; i < pr.N; i++ {
						acc, rej, fe := st.Accepted[i], st.Rejected[i], st.FieldEvals[i]
						sum += acc
						if r.sol.Status[i] != ode.OK {
							t.Errorf("Case %v, %s: Status[%d] want ok, got %v", name, r.what, i, r.sol.Status[i])
						}
						if want := per*(acc+rej) + extra; acc <= 0 || rej < 0 || fe != want {
							t.Errorf("Case %v, %s, trajectory %d: FieldEvals want %d·(%d + %d) + %d = %d, got %d", name, r.what, i, per, acc, rej, extra, want, fe)
						}
						if acc != m.Stats.Accepted[i] || rej != m.Stats.Rejected[i] {
							t.Errorf("Case %v, %s, trajectory %d: (accepted, rejected) want (%d, %d) as the mesh, got (%d, %d)", name, r.what, i,
								m.Stats.Accepted[i], m.Stats.Rejected[i], acc, rej)
						}
						if math.Abs(r.sol.T[i]-pr.T1s[i]) > 1e-14*math.Max(1, math.Abs(pr.T1s[i])) {
							t.Errorf("Case %v, %s: T[%d] want %v, got %v", name, r.what, i, pr.T1s[i], r.sol.T[i])
						}
					}
					if st.TotalAccepted() != sum {
						t.Errorf("Case %v, %s: TotalAccepted want %d, got %d", name, r.what, sum, st.TotalAccepted())
					}
				}
				t.Logf("%s: accepted %v rejected %v field evals %v", name, m.Stats.Accepted, m.Stats.Rejected, m.Stats.FieldEvals)
			})
		}
	}
}

// TestRecordReplayBitwise checks that the recorder and the replay of its
// mesh agree bit for bit on the final states, and that results do not
// depend on the executor settings: for every block size, any number of
// workers gives bitwise identical meshes, states and gradients; across
// block sizes everything per trajectory is bitwise identical too, and the
// shared gradient (a sum over trajectories, grouped by block) agrees to
// 1e-13 relative.
func TestRecordReplayBitwise(t *testing.T) {
	t.Parallel()
	const n = 37
	for _, meth := range []ode.Method{ode.Tsit5, ode.Vern7} {
		t.Run(meth.Name(), func(t *testing.T) {
			t.Parallel()
			pr := ode.Problem{Field: lorenzSharedField(), N: n, T0: 0.25,
				Y0:     fullRows(n, 3, func(i, c int) float64 { return []float64{1, 0, 20}[c] + 0.1*float64(i) }),
				P:      fullRows(n, 1, func(i, _ int) float64 { return 5 + float64(i) }),
				Shared: []float64{10, 8.0 / 3},
				T1s:    fullRows(n, 1, func(i, _ int) float64 { return 0.5 + 0.05*float64(i) }),
				SaveAt: []float64{0.3, 0.5},
			}
			l := obsLoss{d: 3, K: 2, data: fullRows(n, 6, func(i, c int) float64 { return float64(c) })}
			type result struct {
				m    *ode.Mesh
				rec  *ode.Solution
				grad *ode.Gradient
			}
			var ref *result
			refBlock := map[int]*result{}
			for _, bs := range []int{1, 4, 16, 0} {
				for _, workers := range []int{1, 2, 4} {
					name := fmt.Sprintf("%s/BlockSize=%d/Workers=%d", meth.Name(), bs, workers)
					set := &ode.Settings{Method: meth, RelTol: 1e-8, Exec: tape.ExecSettings{BlockSize: bs, Workers: workers}}
					sv, err := ode.NewSolver(pr.Field, set)
					if err != nil {
						t.Fatal(err)
					}
					m, rec, err := sv.Record(&pr)
					if err != nil {
						t.Fatal(err)
					}
					rs, err := sv.Replay(&pr, m)
					if err != nil {
						t.Fatal(err)
					}
					sol, err := sv.Solve(&pr)
					if err != nil {
						t.Fatal(err)
					}
					g, err := sv.Grad(nil, &pr, l.loss(), m)
					if err != nil {
						t.Fatal(err)
					}
					gNil, err := sv.Grad(nil, &pr, l.loss(), nil)
					if err != nil {
						t.Fatal(err)
					}
					same := func(what string, want, got []float64) {
						t.Helper()
						if len(want) != len(got) {
							t.Fatalf("Case %v: %s: want %d values, got %d", name, what, len(want), len(got))
						}
						for j := range want {
							if got[j] != want[j] {
								t.Errorf("Case %v: %s[%d]: want %v, got %v", name, what, j, want[j], got[j])
								return
							}
						}
					}
					same("Replay Y vs Record Y", rec.Y, rs.Y)
					same("Solve Y vs Record Y", rec.Y, sol.Y)
					same("Grad Y vs Record Y", rec.Y, g.Solution.Y)
					same("Solve Ys vs Replay Ys", rs.Ys, sol.Ys)
					for _, pair := range [][2][]float64{{g.Y0, gNil.Y0}, {g.P, gNil.P}, {g.Shared, gNil.Shared}} {
						same("Grad with a recorded mesh vs Grad recording", pair[0], pair[1])
					}
					cur := &result{m, rec, g}
					if r, ok := refBlock[bs]; ok {
						// Same block size, other worker count: everything bitwise.
						same("Shared gradient across Workers", r.grad.Shared, g.Shared)
					} else {
						refBlock[bs] = cur
					}
					if ref == nil {
						ref = cur
						continue
					}
					same("mesh H", ref.m.H[:ref.m.Rows*n], m.H[:m.Rows*n])
					if fmt.Sprint(ref.m.Len, ref.m.Stats.Accepted, ref.m.Stats.Rejected, ref.m.Stats.FieldEvals) !=
						fmt.Sprint(m.Len, m.Stats.Accepted, m.Stats.Rejected, m.Stats.FieldEvals) {
						t.Errorf("Case %v: mesh lengths and stats differ from BlockSize=1/Workers=1", name)
					}
					same("Record Y", ref.rec.Y, rec.Y)
					same("Ys", ref.grad.Solution.Ys, g.Solution.Ys)
					same("∂L/∂Y0", ref.grad.Y0, g.Y0)
					same("∂L/∂P", ref.grad.P, g.P)
					for j := range g.Shared {
						if e := math.Abs(g.Shared[j] - ref.grad.Shared[j]); !(e <= 1e-13*math.Abs(ref.grad.Shared[j])) {
							t.Errorf("Case %v: ∂L/∂Shared[%d]: want %v, got %v", name, j, ref.grad.Shared[j], g.Shared[j])
						}
					}
					if math.Abs(g.Loss-ref.grad.Loss) > 1e-14*math.Abs(ref.grad.Loss) {
						t.Errorf("Case %v: loss want %v, got %v", name, ref.grad.Loss, g.Loss)
					}
				}
			}
		})
	}
}
