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
// "auto") h·max(ρ_2, ρ_r), ρ_r the same ratio with each component divided
// by s_c = max(|g_{s−1}[c]|, |g_s[c]|, 2^-1000), its TrialDense the same
// hρ bit for bit; and Auto's plan has Tsit5's name, fingerprint, replay
// and dense step. The cases include one where ρ_r is the larger and one
// where ρ_2 is.
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
		// estimates returns ρ_2 and ρ_r of tab's step from y of size h.
		estimates := func(tab *ERKTableau) (rho2, rhor float64) {
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
			var n2, d2, nr, dr float64
			for q := range d {
				dk, dg := k[s-1][q]-k[s-2][q], g[s-1][q]-g[s-2][q]
				sc := math.Max(math.Max(math.Abs(g[s-1][q]), math.Abs(g[s-2][q])), 0x1p-1000)
				n2, d2 = n2+dk*dk, d2+dg*dg
				nr, dr = nr+(dk/sc)*(dk/sc), dr+(dg/sc)*(dg/sc)
			}
			return math.Sqrt(n2 / d2), math.Sqrt(nr / dr)
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
			rho2, _ := estimates(tab)
			close(name, hrho(pl, false), c.h*rho2)
			if pl.Variant != "" {
				t.Errorf("%s: plan variant %q, want \"\"", name, pl.Variant)
			}
		}
		rho2, rhor := estimates(tsit5Tableau)
		t.Logf("%s: Tsit5 stages: hρ_2 = %.4g, hρ_r = %.4g", c.name, c.h*rho2, c.h*rhor)
		switch c.name {
		case "small-fast":
			if !(rhor > 10*rho2) {
				t.Errorf("%s: ρ_r = %.4g, ρ_2 = %.4g: want ρ_r the larger (the case's purpose)", c.name, rhor, rho2)
			}
		case "large-fast":
			if !(rho2 > rhor) {
				t.Errorf("%s: ρ_r = %.4g, ρ_2 = %.4g: want ρ_2 the larger (the case's purpose)", c.name, rhor, rho2)
			}
		}
		auto, ts := plans["Auto"], plans["Tsit5"]
		got := hrho(auto, false)
		close("Auto", got, c.h*math.Max(rho2, rhor))
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
