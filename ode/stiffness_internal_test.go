package ode

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// TestStiffnessEstimateVariant checks the stiffness estimate hρ that the
// trial programs return, on affine fields y' = M·y + b whose components differ
// in scale, against the stages computed here in plain Go from the
// tableau: Tsit5's and Vern7's plans return Hairer's Euclidean h·ρ_2
// (ρ_2 = ‖k_s − k_{s−1}‖/‖g_s − g_{s−1}‖), Method Auto's Tsit5 plan (Variant
// "auto") h·max(ρ_2, ρ_r, ρ_e), ρ_r the same ratio with each component divided
// by s_c = max(|g_{s−1}[c]|, |g_s[c]|, 2^-1000) and ρ_e = ‖Σ e_j k_j/s‖ /
// ‖Σ e_j g_j/s‖ (e the error weights), its TrialDense the same hρ bit for
// bit; and Auto's plan has Tsit5's name, fingerprint, replay and dense
// step, and its own control program. On an affine field Σ e_j k_j = M·Σ
// e_j g_j, so ρ_e is a Rayleigh quotient of M: for a diagonal M it lies
// within M's eigenvalues' moduli. The cases include ones where each is
// the largest: ρ_2 (a fast mode in a large component), ρ_r (the rotation)
// and ρ_e (a fast mode near its quasi-steady state).
func TestStiffnessEstimateVariant(t *testing.T) {
	for _, c := range []struct {
		name string
		m    [][]float64
		b    []float64
		y    []float64
		h    float64
	}{
		// A fast mode in a tiny component, a moderate one in a large one:
		// the Euclidean norms see the moderate one, ρ_r ≫ ρ_2.
		{"small-fast", [][]float64{{-1e3, 0, 1}, {0, -2e4, 0}, {0, 0.5, -3}}, []float64{0, 0, 0}, []float64{1, 1e-12, 0.5}, 1e-4},
		// The fast mode in a component near its large equilibrium (1e3),
		// whose relative change is small: ρ_2 is the larger.
		{"large-fast", [][]float64{{-3e3, 0, 0}, {0, -1e3, 0}, {0, 0.1, -0.5}}, []float64{3e6, 0, 0}, []float64{1e3 + 1, 1e-3, 1e-2}, 1e-3},
		// A fast mode (hλ = −3) whose component sits 1e-3 off its
		// quasi-steady state, beside a slower one (hλ = −0.5) of a larger
		// amplitude, as POLL's fast species: in g_s − g_{s−1} the slower
		// mode enters at a low power of hλ, in Σ e_j g_j at (hλ)⁴ (the order
		// conditions), so ρ_e sees the fast one (hρ_e = 2.6) where ρ_r and
		// ρ_2 see a mixture (0.76, 1.04).
		{"qss", [][]float64{{-3e4, 0}, {0, -5e3}}, []float64{3e4, 0}, []float64{1 + 1e-3, 1}, 1e-4},
		// The damped rotation (a = 1e3, ω = 1e4).
		{"rotation", [][]float64{{-1e3, 1e4}, {-1e4, -1e3}}, []float64{0, 0}, []float64{0.3, -0.8}, 2e-4},
	} {
		d := len(c.y)
		m, b := c.m, c.b
		f := Field{Name: "affine-" + c.name, Dim: d, F: func(_ tape.V, y, _ []tape.V) []tape.V {
			out := make([]tape.V, d)
			for i := range out {
				out[i] = y[0].MulC(m[i][0])
				for j := 1; j < d; j++ {
					out[i] = out[i].Add(y[j].MulC(m[i][j]))
				}
				if b[i] != 0 {
					out[i] = out[i].AddC(b[i])
				}
			}
			return out
		}}
		mul := func(x []float64) []float64 {
			out := make([]float64, d)
			for i := range out {
				out[i] = b[i]
				for j := range x {
					out[i] += m[i][j] * x[j]
				}
			}
			return out
		}
		// estimates returns ρ_2, ρ_r and ρ_e of tab's step from y of size h.
		estimates := func(tab *ERKTableau) (rho2, rhor, rhoe float64) {
			s := tab.Stages()
			k := make([][]float64, s)
			g := make([][]float64, s)
			for i := range s {
				g[i] = append([]float64(nil), c.y...)
				for j := range i {
					for q := range d {
						g[i][q] += c.h * tab.A[i][j] * k[j][q]
					}
				}
				k[i] = mul(g[i])
			}
			var n2, d2, nr, dr, ne, de float64
			for q := range d {
				dk, dg := k[s-1][q]-k[s-2][q], g[s-1][q]-g[s-2][q]
				sc := math.Max(math.Max(math.Abs(g[s-1][q]), math.Abs(g[s-2][q])), 0x1p-1000)
				n2, d2 = n2+dk*dk, d2+dg*dg
				nr, dr = nr+(dk/sc)*(dk/sc), dr+(dg/sc)*(dg/sc)
				var ek, eg float64
				for j := range s {
					ek += tab.E[j] * k[j][q]
					eg += tab.E[j] * g[j][q]
				}
				ne, de = ne+(ek/sc)*(ek/sc), de+(eg/sc)*(eg/sc)
			}
			return math.Sqrt(n2 / d2), math.Sqrt(nr / dr), math.Sqrt(ne / de)
		}
		plans := map[string]*Plan{}
		for _, meth := range []Method{Tsit5, Vern7, Auto} {
			sv, err := NewSolver(f, &Settings{Method: meth})
			if err != nil {
				t.Fatal(err)
			}
			plans[meth.Name()] = sv.Plan()
		}
		// hrho runs pl's trial step (trial, or TrialDense) and returns its hρ.
		hrho := func(pl *Plan, dense bool) float64 {
			in := append([]float64{0, c.h}, c.y...)
			if pl.FSAL {
				in = append(in, mul(c.y)...)
			}
			p := pl.Trial
			if dense {
				p = pl.TrialDense
			}
			out := p.Eval(nil, in)
			return out[(2+boolInt(pl.FSAL))*d]
		}
		close := func(what string, got, want float64) {
			t.Helper()
			if !(math.Abs(got-want) <= 1e-8*want) { // (the stage differences cancel: rounding of the order of 1e-11)
				t.Errorf("%s: %s: hρ = %.17g, want %.17g", c.name, what, got, want)
			}
		}
		for _, name := range []string{"Tsit5", "Vern7"} {
			pl := plans[name]
			tab := tsit5Tableau
			if name == "Vern7" {
				tab = vern7Tableau
			}
			rho2, _, _ := estimates(tab)
			close(name, hrho(pl, false), c.h*rho2)
			if pl.Variant != "" {
				t.Errorf("%s: plan variant %q, want \"\"", name, pl.Variant)
			}
		}
		rho2, rhor, rhoe := estimates(tsit5Tableau)
		t.Logf("%s: Tsit5 stages: hρ_2 = %.4g, hρ_r = %.4g, hρ_e = %.4g", c.name, c.h*rho2, c.h*rhor, c.h*rhoe)
		switch c.name {
		case "small-fast":
			if !(rhor > 10*rho2) {
				t.Errorf("%s: ρ_r = %.4g, ρ_2 = %.4g: want ρ_r the larger (the case's purpose)", c.name, rhor, rho2)
			}
		case "large-fast":
			if !(rho2 > rhor) {
				t.Errorf("%s: ρ_r = %.4g, ρ_2 = %.4g: want ρ_2 the larger (the case's purpose)", c.name, rhor, rho2)
			}
		case "qss":
			if !(rhoe > 2*rhor && rhoe > 2*rho2 && c.h*rhoe > 2.5) {
				t.Errorf("%s: hρ_e = %.4g, hρ_r = %.4g, hρ_2 = %.4g: want ρ_e near the fast mode's 3 and twice the others (the case's purpose)", c.name, c.h*rhoe, c.h*rhor, c.h*rho2)
			}
		case "rotation":
			if !(rhor > rhoe) {
				t.Errorf("%s: ρ_r = %.4g, ρ_e = %.4g: want ρ_r the larger (the case's purpose)", c.name, rhor, rhoe)
			}
		}
		auto, ts := plans["Auto"], plans["Tsit5"]
		got := hrho(auto, false)
		close("Auto", got, c.h*math.Max(rho2, math.Max(rhor, rhoe)))
		if gd := hrho(auto, true); gd != got {
			t.Errorf("%s: Auto's TrialDense hρ = %v, its Trial's %v; want them bit for bit", c.name, gd, got)
		}
		if auto.Variant != "auto" || auto.Method != "Tsit5" || auto.Fingerprint != ts.Fingerprint ||
			auto.Replay.Hash() != ts.Replay.Hash() || auto.DenseStep.Hash() != ts.DenseStep.Hash() {
			t.Errorf("%s: Auto's plan: variant %q, method %s, fingerprint %s (Tsit5's %s), same replay %v, same dense step %v; want \"auto\", Tsit5's name, fingerprint and programs",
				c.name, auto.Variant, auto.Method, auto.Fingerprint, ts.Fingerprint, auto.Replay.Hash() == ts.Replay.Hash(), auto.DenseStep.Hash() == ts.DenseStep.Hash())
		}
		if auto.Trial.Hash() == ts.Trial.Hash() {
			t.Errorf("%s: Auto's trial program is Tsit5's", c.name)
		}
	}
}

// TestAutoStiffTestControl checks the stiffness test of the control
// programs, one accepted step at a time: Tsit5's own plan counts a step
// whose hρ exceeds DOPRI5's boundary (3.25/3.3 of the stability size
// 3.5068) whatever its error norm; Method Auto's plan counts one whose hρ
// exceeds 0.9 of it and whose error norm is at least 0.01, and neither
// counts a step below its boundary. Fifteen counted steps in a row set
// the stiff flag; six uncounted ones in a row reset the count.
func TestAutoStiffTestControl(t *testing.T) {
	f := Field{Name: "two", Dim: 2, F: func(_ tape.V, y, _ []tape.V) []tape.V {
		return []tape.V{y[1], y[0].Neg()}
	}}
	plans := map[string]*Plan{}
	for _, m := range []Method{Tsit5, Auto} {
		sv, err := NewSolver(f, &Settings{Method: m})
		if err != nil {
			t.Fatal(err)
		}
		plans[m.Name()] = sv.Plan()
	}
	const stab = 3.5068
	// step runs pl's control on an accepted step of error norm errn and
	// stiffness estimate hrho from controller state st and returns the
	// state after it.
	step := func(pl *Plan, st []float64, errn, hrho float64) []float64 {
		in := append([]float64(nil), st...)
		in = append(in, 100)                  // t1
		in = append(in, 1, 1, 1, 1)           // y, y⁺
		in = append(in, errn*1e-6, errn*1e-6) // err: sc = rtol·1 = 1e-6
		in = append(in, hrho, 1e-6, 0, 0, 1e6)
		out := pl.Control.Eval(nil, in)
		if out[NumState] != 1 {
			t.Fatalf("%s: the step (err %g) was not accepted", pl.Variant, errn)
		}
		return out[:NumState]
	}
	fresh := func() []float64 {
		st := make([]float64, NumState)
		st[StateH], st[StateErrPrev] = 0.01, 1
		return st
	}
	for _, c := range []struct {
		errn, hrho  float64
		tsit5, auto bool // counted
	}{
		{0.5, 0.99 * stab, true, true},
		{0.5, 0.95 * stab, false, true},
		{0.5, 0.91 * stab, false, true},
		{0.5, 0.89 * stab, false, false},
		{0.02, 0.95 * stab, false, true},
		{0.005, 0.99 * stab, true, false},
		{1e-6, 4.05, true, false}, // a step of Hairer's initial ramp on POLL
	} {
		for name, want := range map[string]bool{"Tsit5": c.tsit5, "Auto": c.auto} {
			pl := plans[name]
			st := fresh()
			for i := 1; i <= stiffRuns; i++ {
				st = step(pl, st, c.errn, c.hrho)
				got := st[StateStiffRun] == float64(i)
				if got != want {
					t.Fatalf("%s: err %g, hρ %.4g: step %d: stiff run %g, want counted %v", name, c.errn, c.hrho, i, st[StateStiffRun], want)
				}
			}
			if flag := st[StateStiff] == 1; flag != want {
				t.Errorf("%s: err %g, hρ %.4g: after %d steps stiff flag %v, want %v", name, c.errn, c.hrho, stiffRuns, flag, want)
			}
		}
	}
	// Auto: 14 counted steps, 6 uncounted ones (error below the floor),
	// then 14 counted: no flag; a 15th sets it.
	pl := plans["Auto"]
	st := fresh()
	for range stiffRuns - 1 {
		st = step(pl, st, 0.5, 3.3)
	}
	for range calmRuns {
		st = step(pl, st, 0.001, 3.3)
	}
	if st[StateStiffRun] != 0 {
		t.Errorf("Auto: stiff run %g after %d calm steps, want 0", st[StateStiffRun], calmRuns)
	}
	for range stiffRuns - 1 {
		st = step(pl, st, 0.5, 3.3)
	}
	if st[StateStiff] != 0 {
		t.Errorf("Auto: stiff after %d counted steps", stiffRuns-1)
	}
	if st = step(pl, st, 0.5, 3.3); st[StateStiff] != 1 {
		t.Errorf("Auto: not stiff after %d counted steps", stiffRuns)
	}
}
