package ode

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDenseCoefficients pins the transcribed continuous extensions:
// against the float64 literals of the second source (OrdinaryDiffEq.jl's
// CompiledFloats methods, Tsit5Interp and Vern7InterpolationCoefficients,
// Vern7ExtraStages) to 2 ulps, b_i(0) = 0, b_i(1) = b_i and Σ_i b_i(θ) = θ
// at several θ (validate, and here evaluated), Vern7's extra stage 11
// equal to the weights B bit for bit (so that its input is y⁺ itself),
// Rosenbrock23's power form against θ(1−θ)/(1−2d) and θ(θ−2d)/(1−2d), and
// Rodas5P's power form against the factored (1−θ)·y + θ·(y⁺ + (1−θ)·(D_0 +
// θ·(D_1 + θ·D_2))) on random stages.
func TestDenseCoefficients(t *testing.T) {
	t.Parallel()
	ulps := func(a, b float64) float64 {
		return math.Abs(a-b) / (math.Nextafter(math.Abs(b), math.Inf(1)) - math.Abs(b))
	}
	for _, c := range []struct {
		name string
		got  float64
		want float64
	}{
		{"Tsit5 r12", tsit5Interp.R[0][1], -2.763706197274826},
		{"Tsit5 r13", tsit5Interp.R[0][2], 2.9132554618219126},
		{"Tsit5 r22", tsit5Interp.R[1][1], 0.13169999999999998},
		{"Tsit5 r34", tsit5Interp.R[2][3], 2.490627285651253},
		{"Tsit5 r42", tsit5Interp.R[3][1], -12.411077166933676},
		{"Tsit5 r53", tsit5Interp.R[4][2], -88.1789048947664},
		{"Tsit5 r64", tsit5Interp.R[5][3], -34.87065786149661},
		{"Vern7 r012", vern7Interp.R[0][1], -8.413387198332767},
		{"Vern7 r047", vern7Interp.R[3][6], -167.35886986514018},
		{"Vern7 r075", vern7Interp.R[6][4], -1207.1638892336007},
		{"Vern7 r117", vern7Interp.R[10][6], 43.792401183280006},
		{"Vern7 r135", vern7Interp.R[12][4], 6.213326521632409},
		{"Vern7 r167", vern7Interp.R[15][6], 188.0495196316683},
		{"Vern7 a1211", vern7Interp.ExtraA[1][10], -0.0160443457},
		{"Vern7 a1413", vern7Interp.ExtraA[3][12], 0.1814893063199928},
		{"Vern7 a1613", vern7Interp.ExtraA[5][12], -0.18228156777622026},
	} {
		if u := ulps(c.got, c.want); u > 2 {
			t.Errorf("%s = %v, published %v (%.3g ulps)", c.name, c.got, c.want, u)
		}
	}
	for j, b := range vern7Tableau.B {
		if vern7Interp.ExtraA[0][j] != b {
			t.Errorf("Vern7 extra stage 11 weight %d = %v, want B = %v", j, vern7Interp.ExtraA[0][j], b)
		}
	}
	for _, tab := range []*ERKTableau{tsit5Tableau, vern7Tableau} {
		r := tab.Interp.R
		for _, th := range []float64{0, 0.25, 0.5, 0.9, 1} {
			sum := 0.0
			for i, row := range r {
				bi, p := 0.0, 1.0
				for _, x := range row {
					p *= th
					bi += x * p
				}
				sum += bi
				switch {
				case th == 0 && bi != 0:
					t.Errorf("%s: b_%d(0) = %v", tab.Name, i, bi)
				case th == 1 && i < tab.Stages() && math.Abs(bi-tab.B[i]) > 1e-12:
					t.Errorf("%s: b_%d(1) = %v, want b_%d = %v", tab.Name, i, bi, i, tab.B[i])
				}
			}
			if math.Abs(sum-th) > 1e-12 {
				t.Errorf("%s: Σ_i b_i(%v) = %v, want θ", tab.Name, th, sum)
			}
		}
	}
	d := rosenbrock23D
	for _, th := range []float64{0.1, 0.5, 0.8} {
		b1 := rosenbrock23Interp[0][0]*th + rosenbrock23Interp[0][1]*th*th
		b2 := rosenbrock23Interp[1][0]*th + rosenbrock23Interp[1][1]*th*th
		if w1, w2 := th*(1-th)/(1-2*d), th*(th-2*d)/(1-2*d); math.Abs(b1-w1) > 1e-15 || math.Abs(b2-w2) > 1e-15 {
			t.Errorf("Rosenbrock23 at θ = %v: weights %v, %v, want %v, %v", th, b1, b2, w1, w2)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	tab := rodas5PTableau
	p := (&rosenbrock{tab: tab}).denseWeights()
	k := make([]float64, tab.Stages())
	for trial := 0; trial < 10; trial++ {
		y := rng.NormFloat64()
		for i := range k {
			k[i] = rng.NormFloat64()
		}
		dot := func(w []float64) float64 {
			s := 0.0
			for i, v := range w {
				s += v * k[i]
			}
			return s
		}
		yn := y + dot(tab.M)
		d0, d1, d2 := dot(tab.H[0]), dot(tab.H[1]), dot(tab.H[2])
		for _, th := range []float64{0.2, 0.6, 1} {
			want := (1-th)*y + th*(yn+(1-th)*(d0+th*(d1+th*d2)))
			got, pw := y, 1.0
			for j := range p[0] {
				pw *= th
				col := make([]float64, len(p))
				for i := range p {
					col[i] = p[i][j]
				}
				got += pw * dot(col)
			}
			if math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
				t.Errorf("Rodas5P at θ = %v: power form %v, factored %v", th, got, want)
			}
		}
	}
}
