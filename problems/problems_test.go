package problems

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The reference fields below are plain-Go transcriptions of the equations
// from the literature, written independently of the traced ones: y is the
// state, p the per-trajectory parameters, s the shared ones.

func lorenzRef(y, p, _ []float64) []float64 {
	sigma, rho, beta := p[0], p[1], p[2]
	return []float64{sigma * (y[1] - y[0]), y[0]*(rho-y[2]) - y[1], y[0]*y[1] - beta*y[2]}
}

func vdpRef(y, p, _ []float64) []float64 {
	x, v, mu := y[0], y[1], p[0]
	return []float64{v, mu * ((1-x*x)*v - x)}
}

func lorenz96Ref(y, p, _ []float64) []float64 {
	d := len(y)
	f := make([]float64, d)
	for i := range f {
		f[i] = (y[(i+1)%d]-y[(i+d-2)%d])*y[(i+d-1)%d] - y[i] + p[0]
	}
	return f
}

func linearRef(a []float64) func(y, p, _ []float64) []float64 {
	return func(y, p, _ []float64) []float64 {
		d := len(y)
		f := make([]float64, d)
		for i := range f {
			s := 0.0
			for j := 0; j < d; j++ {
				s += a[i*d+j] * y[j]
			}
			f[i] = p[0] * s
		}
		return f
	}
}

func keplerRef(y, p, _ []float64) []float64 {
	r := math.Sqrt(y[0]*y[0] + y[1]*y[1])
	return []float64{y[2], y[3], -p[0] * y[0] / (r * r * r), -p[0] * y[1] / (r * r * r)}
}

// robertsonRef uses the 1-based names of Hairer & Wanner II.
func robertsonRef(y, p, _ []float64) []float64 {
	y1, y2, y3 := y[0], y[1], y[2]
	k1, k2, k3 := p[0], p[1], p[2]
	return []float64{
		-k1*y1 + k3*y2*y3,
		k1*y1 - k3*y2*y3 - k2*y2*y2,
		k2 * y2 * y2,
	}
}

// hiresRef follows hires.f of the Bari test set (1-based names).
func hiresRef(y, _, _ []float64) []float64 {
	y1, y2, y3, y4, y5, y6, y7, y8 := y[0], y[1], y[2], y[3], y[4], y[5], y[6], y[7]
	return []float64{
		-1.71*y1 + 0.43*y2 + 8.32*y3 + 0.0007,
		1.71*y1 - 8.75*y2,
		-10.03*y3 + 0.43*y4 + 0.035*y5,
		8.32*y2 + 1.71*y3 - 1.12*y4,
		-1.745*y5 + 0.43*y6 + 0.43*y7,
		-280*y6*y8 + 0.69*y4 + 1.71*y5 - 0.43*y6 + 0.69*y7,
		280*y6*y8 - 1.81*y7,
		-280*y6*y8 + 1.81*y7,
	}
}

// pleiadesRef follows pleiafun of plei.f (Bari test set): for each body i,
// the sum over j ≠ i of m_j·(y_j − y_i)/r_ij^{3/2} in the order j = 1…7,
// with the masses p = (m1, …, m7) (plei.f has m_j = j).
func pleiadesRef(y, p, _ []float64) []float64 {
	f := make([]float64, 28)
	for i := 0; i < 7; i++ {
		sumx, sumy := 0.0, 0.0
		for j := 0; j < 7; j++ {
			if j == i {
				continue
			}
			rij := (y[i]-y[j])*(y[i]-y[j]) + (y[i+7]-y[j+7])*(y[i+7]-y[j+7])
			rij32 := math.Pow(rij, 1.5)
			sumx += p[j] * (y[j] - y[i]) / rij32
			sumy += p[j] * (y[j+7] - y[i+7]) / rij32
		}
		f[i+14] = sumx
		f[i+21] = sumy
	}
	copy(f[:14], y[14:])
	return f
}

// mlpRef is the forward pass of a 2-16-16-1 tanh/tanh/softplus network
// with weights s in nn.MLP's layout (each layer: W row-major, then b).
func mlpRef(s, x []float64) float64 {
	sizes := []int{2, 16, 16, 1}
	off := 0
	for k := 0; k+1 < len(sizes); k++ {
		in, out := sizes[k], sizes[k+1]
		y := make([]float64, out)
		for i := range y {
			z := s[off+out*in+i]
			for j := 0; j < in; j++ {
				z += s[off+i*in+j] * x[j]
			}
			if k+2 < len(sizes) {
				y[i] = math.Tanh(z)
			} else {
				y[i] = math.Log1p(math.Exp(z))
			}
		}
		off += out*in + out
		x = y
	}
	if off != len(s) {
		panic("mlpRef: wrong number of weights")
	}
	return x[0]
}

func neuralRobertsonRef(y, p, s []float64) []float64 {
	y1, y2, y3 := y[0], y[1], y[2]
	k1, k2 := p[0], p[1]
	r := 1e4 * mlpRef(s, []float64{1e4 * y2, y3}) * y2 * y3
	return []float64{-k1*y1 + r, k1*y1 - r - k2*y2*y2, k2 * y2 * y2}
}

// robertsonState draws a state on Robertson's scales (y2 is below 4e-5).
func robertsonState(rng *rand.Rand, _ []float64) []float64 {
	return []float64{rng.Float64(), 4e-5 * rng.Float64(), rng.Float64()}
}

type fieldCase struct {
	name  string
	pr    Problem
	ref   func(y, p, s []float64) []float64
	state func(rng *rand.Rand, y0 []float64) []float64 // nil: y0 perturbed
}

func fieldCases() []fieldCase {
	a5 := []float64{ // with zeros and a zero row
		-1, 0.5, 0, 0, 2,
		0, 0, 0, 0, 0,
		0.3, -0.7, -2, 0, 0,
		0, 0, 1, -0.1, 0.25,
		1e-3, 0, 0, 0, -4,
	}
	return []fieldCase{
		{"lorenz", Lorenz(), lorenzRef, nil},
		{"vdp", VanDerPol(), vdpRef, nil},
		{"vdp-stiff 1e6", StiffVanDerPol(1e6), vdpRef, nil},
		{"lorenz96 d=4", Lorenz96(4), lorenz96Ref, nil},
		{"lorenz96 d=40", Lorenz96(40), lorenz96Ref, nil},
		{"linear 5", Linear(a5, 5), linearRef(a5), nil},
		{"kepler", Kepler(), keplerRef, nil},
		{"robertson", Robertson(), robertsonRef, robertsonState},
		{"hires", HIRES(), hiresRef, nil},
		{"pollution", Pollution(), pollutionRef, nil},
		{"brusselator 2 cells", Brusselator(2), brusselatorRef, nil},
		{"brusselator 5 cells", Brusselator(5), brusselatorRef, nil},
		{"neural-robertson seed 7", NeuralRobertson(7), neuralRobertsonRef, robertsonState},
		{"pleiades", Pleiades(), pleiadesRef, nil},
	}
}

// byNameCases adds every ByName problem, with its reference field.
func byNameCases(t *testing.T) []fieldCase {
	refs := map[string]func(y, p, s []float64) []float64{
		"lorenz": lorenzRef, "vdp": vdpRef, "vdp-stiff": vdpRef, "lorenz96": lorenz96Ref,
		"lorenz96-64": lorenz96Ref, "lorenz96-256": lorenz96Ref, "brusselator": brusselatorRef,
		"linear": linearRef([]float64{-0.5, 2, 0, -2, -0.5, 0, 0.5, 0, -1}),
		"kepler": keplerRef, "robertson": robertsonRef, "hires": hiresRef, "pollution": pollutionRef,
		"neural-robertson": neuralRobertsonRef, "pleiades": pleiadesRef,
	}
	var cs []fieldCase
	for _, name := range Names() {
		pr, err := ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		ref := refs[name]
		if ref == nil {
			t.Fatalf("no reference field for %s", name)
		}
		var st func(*rand.Rand, []float64) []float64
		if strings.Contains(name, "robertson") {
			st = robertsonState
		}
		cs = append(cs, fieldCase{"ByName " + name, pr, ref, st})
	}
	return append(cs, fieldCases()...)
}

// TestFields checks every problem's traced field, evaluated by the
// reference interpreter Program.Eval, against its plain-Go transcription
// at Y0 with the default parameters and at random states and parameters.
// Both compute the same expressions, so only the order of a few
// operations may differ: each component must agree to 1e-14 relative to
// the larger of itself and the largest component.
func TestFields(t *testing.T) {
	t.Parallel()
	for _, tc := range byNameCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pr := tc.pr
			prog, err := pr.Field.Program()
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 1))
			for trial := 0; trial < 6; trial++ {
				y, p := pr.Y0, pr.P
				if trial > 0 {
					if tc.state != nil {
						y = tc.state(rng, pr.Y0)
					} else {
						y = make([]float64, len(pr.Y0))
						for j := range y {
							y[j] = pr.Y0[j] + 0.1*(2*rng.Float64()-1)*(1+math.Abs(pr.Y0[j]))
						}
					}
					p = make([]float64, len(pr.P))
					for k := range p {
						p[k] = pr.P[k] * (1 + 0.2*(2*rng.Float64()-1))
					}
				}
				in := append(append(append([]float64{pr.T0 + rng.Float64()}, y...), p...), pr.Shared...)
				got := prog.Eval(nil, in)
				want := tc.ref(y, p, pr.Shared)
				if len(got) != len(want) {
					t.Fatalf("%d outputs, want %d", len(got), len(want))
				}
				norm := 0.0
				for _, w := range want {
					norm = math.Max(norm, math.Abs(w))
				}
				for i := range want {
					if !(math.Abs(got[i]-want[i]) <= 1e-14*math.Max(math.Abs(want[i]), norm)) {
						t.Errorf("trial %d, y = %v: f[%d]: Want: %v, Got: %v.", trial, y, i, want[i], got[i])
					}
				}
			}
		})
	}
}

// TestDefaults checks the shapes and invariants every problem must meet.
func TestDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range byNameCases(t) {
		pr := tc.pr
		f := pr.Field
		switch {
		case pr.Name == "" || f.Name == "":
			t.Errorf("Case %s: empty name (Name %q, Field.Name %q)", tc.name, pr.Name, f.Name)
		case len(pr.Y0) != f.Dim:
			t.Errorf("Case %s: len(Y0) = %d, Dim = %d", tc.name, len(pr.Y0), f.Dim)
		case len(pr.P) != f.Params:
			t.Errorf("Case %s: len(P) = %d, Params = %d", tc.name, len(pr.P), f.Params)
		case len(pr.Shared) != f.Shared:
			t.Errorf("Case %s: len(Shared) = %d, Field.Shared = %d", tc.name, len(pr.Shared), f.Shared)
		case pr.Stiff != f.Stiff:
			t.Errorf("Case %s: Stiff = %v, Field.Stiff = %v", tc.name, pr.Stiff, f.Stiff)
		case !(pr.T1 > pr.T0):
			t.Errorf("Case %s: T0 = %v, T1 = %v", tc.name, pr.T0, pr.T1)
		case pr.Doc == "" || strings.Contains(pr.Doc, "\n"):
			t.Errorf("Case %s: Doc %q is not one line", tc.name, pr.Doc)
		}
		for _, s := range [][]float64{pr.Y0, pr.P, pr.Shared} {
			for _, x := range s {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Errorf("Case %s: non-finite default %v", tc.name, x)
				}
			}
		}
		prog, err := f.Program()
		if err != nil {
			t.Errorf("Case %s: %v", tc.name, err)
			continue
		}
		if n := 1 + f.Dim + f.Params + f.Shared; len(prog.Inputs) != n || len(prog.Outputs) != f.Dim {
			t.Errorf("Case %s: program has %d inputs and %d outputs, want %d and %d",
				tc.name, len(prog.Inputs), len(prog.Outputs), n, f.Dim)
		}
	}
	want := map[string]bool{"vdp-stiff": true, "robertson": true, "hires": true, "pollution": true, "brusselator": true,
		"neural-robertson": true}
	for _, name := range Names() {
		pr, _ := ByName(name)
		if pr.Stiff != want[name] {
			t.Errorf("%s: Stiff = %v, want %v", name, pr.Stiff, want[name])
		}
	}
}

func TestByName(t *testing.T) {
	t.Parallel()
	names := Names()
	want := []string{"lorenz", "vdp", "vdp-stiff", "lorenz96", "lorenz96-64", "lorenz96-256", "linear", "kepler",
		"robertson", "hires", "pollution", "brusselator", "neural-robertson", "pleiades"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("Names: Want: %v, Got: %v.", want, names)
	}
	for _, name := range names {
		pr, err := ByName(name)
		if err != nil {
			t.Errorf("ByName(%q): %v", name, err)
			continue
		}
		if pr.Name != name {
			t.Errorf("ByName(%q).Name = %q", name, pr.Name)
		}
		// Each call returns fresh slices.
		pr.Y0[0] = 1234
		if len(pr.P) > 0 {
			pr.P[0] = 1234
		}
		again, _ := ByName(name)
		if again.Y0[0] == 1234 || (len(again.P) > 0 && again.P[0] == 1234) {
			t.Errorf("ByName(%q) shares its slices between calls", name)
		}
	}
	names[0] = "changed"
	if Names()[0] != "lorenz" {
		t.Errorf("Names shares its slice between calls")
	}
	_, err := ByName("lorentz")
	if err == nil || !strings.Contains(err.Error(), `"lorentz"`) || !strings.Contains(err.Error(), "lorenz, vdp, vdp-stiff") ||
		!strings.Contains(err.Error(), "neural-robertson") {
		t.Errorf("ByName(unknown): error %v does not list the valid names", err)
	}
}

// TestRobertsonConservation checks f0 + f1 + f2 = 0 (mass conservation)
// for Robertson and its neural variant, up to the rounding of the sum.
func TestRobertsonConservation(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(2, 2))
	for _, pr := range []Problem{Robertson(), NeuralRobertson(1), NeuralRobertson(99)} {
		prog, err := pr.Field.Program()
		if err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 20; trial++ {
			y := robertsonState(rng, nil)
			f := prog.Eval(nil, append(append(append([]float64{0}, y...), pr.P...), pr.Shared...))
			sum, abs := f[0]+f[1]+f[2], math.Abs(f[0])+math.Abs(f[1])+math.Abs(f[2])
			if math.Abs(sum) > 1e-15*abs {
				t.Errorf("%s: y = %v: sum of f = %v (|f| sum %v)", pr.Name, y, sum, abs)
			}
		}
	}
}

// TestHIRES checks f7 = −f6 (0-based; f8 = −f7 in the literature) exactly,
// the field at y0 by hand, and the reference solution's last two states,
// whose sum y6+y7 is conserved and so equals y0[6]+y0[7] = 0.0057.
func TestHIRES(t *testing.T) {
	t.Parallel()
	pr := HIRES()
	prog, err := pr.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	f := prog.Eval(nil, append([]float64{0}, pr.Y0...))
	// At y0 = (1, 0, …, 0, 0.0057) only y1 and y8 are non-zero, and y8
	// enters only through 280·y6·y8 = 0.
	want := []float64{-1.71 + 0.0007, 1.71, 0, 0, 0, 0, 0, 0}
	for i := range want {
		if f[i] != want[i] {
			t.Errorf("f[%d](y0): Want: %v, Got: %v.", i, want[i], f[i])
		}
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for trial := 0; trial < 20; trial++ {
		y := make([]float64, 8)
		for i := range y {
			y[i] = rng.Float64()
		}
		f := prog.Eval(nil, append([]float64{0}, y...))
		if f[7] != -f[6] {
			t.Errorf("y = %v: f[7] = %v, -f[6] = %v", y, f[7], -f[6])
		}
	}
	if s := HIRESRef[6] + HIRESRef[7]; math.Abs(s-0.0057) > 1e-15 {
		t.Errorf("HIRESRef[6]+HIRESRef[7] = %v, want 0.0057", s)
	}
}

func TestKeplerInvariants(t *testing.T) {
	t.Parallel()
	pr := Kepler()
	// The default orbit: a = 1, e = 0.5, GM = 1, so E = −GM/(2a) = −1/2
	// and L = √(GM·a·(1−e²)) = √0.75.
	if e := KeplerEnergy(pr.Y0, pr.P[0]); math.Abs(e+0.5) > 1e-15 {
		t.Errorf("energy at Y0: Want: -0.5, Got: %v.", e)
	}
	if l := KeplerAngularMomentum(pr.Y0); math.Abs(l-math.Sqrt(0.75)) > 1e-15 {
		t.Errorf("angular momentum at Y0: Want: %v, Got: %v.", math.Sqrt(0.75), l)
	}
	// Along the field both invariants are stationary: the central
	// difference of E(y ± h·f) is O(h²) = 1e-8 times third derivatives of
	// order 1, plus rounding eps·|E|/h ≈ 1e-12.
	prog, err := pr.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	const h = 1e-4
	for trial := 0; trial < 10; trial++ {
		gm := 0.5 + rng.Float64()
		y := []float64{0.5 + rng.Float64(), rng.Float64() - 0.5, rng.Float64() - 0.5, rng.Float64() - 0.5}
		f := prog.Eval(nil, []float64{0, y[0], y[1], y[2], y[3], gm})
		yp, ym := make([]float64, 4), make([]float64, 4)
		for i := range y {
			yp[i], ym[i] = y[i]+h*f[i], y[i]-h*f[i]
		}
		if d := (KeplerEnergy(yp, gm) - KeplerEnergy(ym, gm)) / (2 * h); math.Abs(d) > 1e-6 {
			t.Errorf("y = %v: dE/dt ≈ %v, want 0", y, d)
		}
		if d := (KeplerAngularMomentum(yp) - KeplerAngularMomentum(ym)) / (2 * h); math.Abs(d) > 1e-6 {
			t.Errorf("y = %v: dL/dt ≈ %v, want 0", y, d)
		}
		// A control: a step across the field does change the energy.
		yp[0] += 1e-3
		if KeplerEnergy(yp, gm) == KeplerEnergy(y, gm) {
			t.Errorf("KeplerEnergy ignores x")
		}
	}
}

// rk4 integrates the reference Kepler field over [0, t] with n classical
// Runge-Kutta steps, an integrator independent of KeplerExact.
func rk4(y0 []float64, gm, t float64, n int) []float64 {
	h := t / float64(n)
	p := []float64{gm}
	y := append([]float64(nil), y0...)
	tmp := make([]float64, 4)
	axpy := func(a float64, x []float64) []float64 {
		for i := range tmp {
			tmp[i] = y[i] + a*x[i]
		}
		return tmp
	}
	for range n {
		k1 := keplerRef(y, p, nil)
		k2 := keplerRef(axpy(h/2, k1), p, nil)
		k3 := keplerRef(axpy(h/2, k2), p, nil)
		k4 := keplerRef(axpy(h, k3), p, nil)
		for i := range y {
			y[i] += h / 6 * (k1[i] + 2*k2[i] + 2*k3[i] + k4[i])
		}
	}
	return y
}

func TestKeplerExact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		y0     []float64
		gm     float64
		period float64
	}{
		// a = 1, e = 0.5: period 2π.
		{"default", Kepler().Y0, 1, 2 * math.Pi},
		// A general state: 1/a = 2/r0 − v0²/GM; period 2π√(a³/GM).
		{"tilted", []float64{1, 0.2, -0.3, 0.9}, 1.3, 0},
		// e = 0.9 from periapsis: r_p = a(1−e), v_p = √(GM(1+e)/r_p).
		{"e=0.9", []float64{0.1, 0, 0, math.Sqrt(19)}, 1, 2 * math.Pi},
	} {
		y0, gm := tc.y0, tc.gm
		r0 := math.Hypot(y0[0], y0[1])
		a := 1 / (2/r0 - (y0[2]*y0[2]+y0[3]*y0[3])/gm)
		period := 2 * math.Pi * math.Sqrt(a*a*a/gm)
		if tc.period != 0 && math.Abs(period-tc.period) > 1e-12 {
			t.Fatalf("Case %s: period %v, want %v", tc.name, period, tc.period)
		}
		e0, l0 := KeplerEnergy(y0, gm), KeplerAngularMomentum(y0)
		for _, c := range []struct {
			dt   float64
			want []float64
			tol  float64
		}{
			{0, y0, 1e-15},
			{period, y0, 1e-12},
			{-period, y0, 1e-12},
			{10 * period, y0, 1e-11},
		} {
			got := KeplerExact(nil, y0, gm, c.dt)
			for i := range got {
				if math.Abs(got[i]-c.want[i]) > c.tol*math.Max(1, math.Abs(c.want[i])) {
					t.Errorf("Case %s: dt = %v: y[%d]: Want: %v, Got: %v.", tc.name, c.dt, i, c.want[i], got[i])
				}
			}
		}
		kp := Kepler()
		prog, err := kp.Field.Program()
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(5, 5))
		for trial := 0; trial < 10; trial++ {
			dt := (2*rng.Float64() - 1) * 3 * period
			y := KeplerExact(nil, y0, gm, dt)
			if e := KeplerEnergy(y, gm); math.Abs(e-e0) > 1e-13*math.Max(1, math.Abs(e0)) {
				t.Errorf("Case %s: dt = %v: energy %v, want %v", tc.name, dt, e, e0)
			}
			if l := KeplerAngularMomentum(y); math.Abs(l-l0) > 1e-13*math.Max(1, math.Abs(l0)) {
				t.Errorf("Case %s: dt = %v: angular momentum %v, want %v", tc.name, dt, l, l0)
			}
			// Going back by dt returns to y0.
			back := KeplerExact(nil, y, gm, -dt)
			for i := range back {
				if math.Abs(back[i]-y0[i]) > 1e-11*math.Max(1, math.Abs(y0[i])) {
					t.Errorf("Case %s: dt = %v: back to y0[%d]: Want: %v, Got: %v.", tc.name, dt, i, y0[i], back[i])
				}
			}
			// The time derivative of the exact solution is the field (central
			// differences, h = 1e-5: truncation ~1e-10·|y'''|, rounding
			// ~1e-11·|y|; the e = 0.9 periapsis speeds up both by ~100).
			const h = 1e-5
			yp, ym := KeplerExact(nil, y0, gm, dt+h), KeplerExact(nil, y0, gm, dt-h)
			f := prog.Eval(nil, []float64{0, y[0], y[1], y[2], y[3], gm})
			for i := range f {
				if d := (yp[i] - ym[i]) / (2 * h); math.Abs(d-f[i]) > 1e-6*math.Max(1, math.Abs(f[i])) {
					t.Errorf("Case %s: dt = %v: dy[%d]/dt ≈ %v, field %v", tc.name, dt, i, d, f[i])
				}
			}
		}
		// Against an independent integrator: RK4 with 20 000 steps over
		// 1.3 time units has a global error of order h⁴ ≈ 2e-14 times the
		// field's fourth derivatives (large only near a close periapsis).
		want := rk4(y0, gm, 1.3, 20000)
		got := KeplerExact(nil, y0, gm, 1.3)
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-9*math.Max(1, math.Abs(want[i])) {
				t.Errorf("Case %s: vs RK4 at t = 1.3: y[%d]: Want: %v, Got: %v.", tc.name, i, want[i], got[i])
			}
		}
	}
	if !panics(func() { KeplerExact(nil, []float64{1, 0, 0, 2}, 1, 1) }) {
		t.Errorf("KeplerExact on an escape orbit did not panic")
	}
	// Kepler's Exact is KeplerExact with p = (GM).
	pr := Kepler()
	a, b := pr.Exact(nil, pr.Y0, []float64{1.1}, 0.7), KeplerExact(nil, pr.Y0, 1.1, 0.7)
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("Kepler().Exact differs from KeplerExact: %v, %v", a, b)
		}
	}
}

func TestLinearExact(t *testing.T) {
	t.Parallel()
	// Diagonal A: y_i(t) = exp(λ·t·a_ii)·y0_i.
	diag := []float64{-1, 0, 0, 0, 0.5, 0, 0, 0, -3}
	y0 := []float64{1, -2, 0.5}
	got := LinearExact(nil, diag, 3, 0.7, y0, 1.3)
	for i := range got {
		want := math.Exp(0.7*1.3*diag[i*4]) * y0[i]
		if math.Abs(got[i]-want) > 1e-14*math.Abs(want) {
			t.Errorf("diagonal: y[%d]: Want: %v, Got: %v.", i, want, got[i])
		}
	}
	// A rotation generator: exp(θ·[[0, 1], [−1, 0]]) is the rotation by −θ.
	got = LinearExact(make([]float64, 2), []float64{0, 1, -1, 0}, 2, 2, []float64{1, 0}, 0.25)
	if want := []float64{math.Cos(0.5), -math.Sin(0.5)}; math.Abs(got[0]-want[0]) > 1e-15 || math.Abs(got[1]-want[1]) > 1e-15 {
		t.Errorf("rotation: Want: %v, Got: %v.", want, got)
	}

	pr, err := ByName("linear")
	if err != nil {
		t.Fatal(err)
	}
	prog, err := pr.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	lambda := 1.3
	a := []float64{-0.5, 2, 0, -2, -0.5, 0, 0.5, 0, -1}
	if y := pr.Exact(nil, pr.Y0, []float64{lambda}, 0); y[0] != pr.Y0[0] || y[1] != pr.Y0[1] || y[2] != pr.Y0[2] {
		t.Errorf("Exact at dt = 0: Want: %v, Got: %v.", pr.Y0, y)
	}
	for _, dt := range []float64{0.3, 1, 2.5} {
		y := pr.Exact(nil, pr.Y0, []float64{lambda}, dt)
		// d/dt of the exact solution is the field (central differences:
		// truncation h²·|λA|³/6 ≈ 1e-9, rounding ≈ 1e-10).
		const h = 1e-5
		yp := pr.Exact(nil, pr.Y0, []float64{lambda}, dt+h)
		ym := pr.Exact(nil, pr.Y0, []float64{lambda}, dt-h)
		f := prog.Eval(nil, append(append([]float64{0}, y...), lambda))
		for i := range f {
			if d := (yp[i] - ym[i]) / (2 * h); math.Abs(d-f[i]) > 1e-8 {
				t.Errorf("dt = %v: dy[%d]/dt ≈ %v, field %v", dt, i, d, f[i])
			}
		}
		// d/dλ against central differences in λ.
		g := LinearExactDLambda(nil, a, 3, lambda, pr.Y0, dt)
		lp := LinearExact(nil, a, 3, lambda+h, pr.Y0, dt)
		lm := LinearExact(nil, a, 3, lambda-h, pr.Y0, dt)
		for i := range g {
			if d := (lp[i] - lm[i]) / (2 * h); math.Abs(d-g[i]) > 1e-8*math.Max(1, math.Abs(g[i])) {
				t.Errorf("dt = %v: dy[%d]/dλ: Want (FD): %v, Got: %v.", dt, i, d, g[i])
			}
		}
	}
	for _, f := range []func(){
		func() { Linear(make([]float64, 8), 3) },
		func() { Linear(nil, 0) },
		func() { LinearExact(nil, a, 3, 1, []float64{1, 2}, 1) },
		func() { LinearExact(make([]float64, 2), a, 3, 1, pr.Y0, 1) },
	} {
		if !panics(f) {
			t.Errorf("a bad call did not panic")
		}
	}
}

func TestLorenz96(t *testing.T) {
	t.Parallel()
	if !panics(func() { Lorenz96(3) }) {
		t.Errorf("Lorenz96(3) did not panic")
	}
	pr := Lorenz96(6)
	if pr.Y0[0] != 8.01 || pr.Y0[5] != 8 || pr.P[0] != 8 || pr.Field.Dim != 6 {
		t.Errorf("Lorenz96(6) defaults: Y0 = %v, P = %v, Dim = %d", pr.Y0, pr.P, pr.Field.Dim)
	}
	// y = F everywhere is an equilibrium.
	prog, err := pr.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	f := prog.Eval(nil, []float64{0, 3, 3, 3, 3, 3, 3, 3})
	for i, x := range f {
		if x != 0 {
			t.Errorf("f[%d] at the equilibrium = %v", i, x)
		}
	}
}

func TestNeuralRobertson(t *testing.T) {
	t.Parallel()
	a, b, c := NeuralRobertson(3), NeuralRobertson(3), NeuralRobertson(4)
	if len(a.Shared) != 337 || NeuralRobertsonMLP().NumParams() != 337 {
		t.Fatalf("len(Shared) = %d, want 337", len(a.Shared))
	}
	same, differ := true, false
	for i := range a.Shared {
		same = same && a.Shared[i] == b.Shared[i]
		differ = differ || a.Shared[i] != c.Shared[i]
	}
	if !same || !differ {
		t.Errorf("Shared defaults: same seed equal %v, different seeds differ %v", same, differ)
	}
	// At y0 = (1, 0, 0) the learned term vanishes, as k3·y1·y2 does.
	prog, err := a.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	f := prog.Eval(nil, append(append([]float64{0, 1, 0, 0}, a.P...), a.Shared...))
	if f[0] != -0.04 || f[1] != 0.04 || f[2] != 0 {
		t.Errorf("f(y0) = %v, want (-0.04, 0.04, 0)", f)
	}
}

func TestEnsemble(t *testing.T) {
	t.Parallel()
	pr := Lorenz()
	y0, p := pr.Ensemble(3)
	if len(y0) != 9 || len(p) != 9 {
		t.Fatalf("Ensemble(3): len(y0) = %d, len(params) = %d, want 9, 9", len(y0), len(p))
	}
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			if y0[i*3+j] != pr.Y0[j] || p[i*3+j] != pr.P[j] {
				t.Errorf("row %d col %d: y0 %v, params %v", i, j, y0[i*3+j], p[i*3+j])
			}
		}
	}
	y0[0] = 99
	if pr.Y0[0] == 99 {
		t.Errorf("Ensemble aliases Y0")
	}
	y0, p = HIRES().Ensemble(4)
	if len(y0) != 32 || len(p) != 0 {
		t.Errorf("HIRES Ensemble(4): len(y0) = %d, len(params) = %d", len(y0), len(p))
	}
	if y0, p = pr.Ensemble(0); len(y0) != 0 || len(p) != 0 {
		t.Errorf("Ensemble(0) is not empty")
	}
	if !panics(func() { pr.Ensemble(-1) }) {
		t.Errorf("Ensemble(-1) did not panic")
	}
}

func TestLinSpace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n      int
		lo, hi float64
		want   []float64
	}{
		{0, 1, 2, []float64{}},
		{1, 1, 2, []float64{1}},
		{2, 0, 21, []float64{0, 21}},
		{5, 0, 1, []float64{0, 0.25, 0.5, 0.75, 1}},
		{4, 1, -2, []float64{1, 0, -1, -2}},
	} {
		dst := make([]float64, tc.n)
		got := LinSpace(dst, tc.lo, tc.hi)
		if len(got) != tc.n || (tc.n > 0 && &got[0] != &dst[0]) {
			t.Errorf("Case %v: LinSpace did not return dst", tc.want)
		}
		for i := range tc.want {
			if got[i] != tc.want[i] {
				t.Errorf("Case %v: Got: %v.", tc.want, got)
				break
			}
		}
	}
	// The last value is hi exactly even when lo + (n−1)·step rounds.
	got := LinSpace(make([]float64, 7), 0.1, 0.7)
	if got[6] != 0.7 || got[0] != 0.1 {
		t.Errorf("endpoints %v, %v", got[0], got[6])
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}
