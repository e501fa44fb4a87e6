package refode

import (
	"bufio"
	"flag"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

var slow = flag.Bool("refode.slow", false, "run the slow cross-checks (DOP853 on Robertson to t = 1e4)")

// maxRel returns max_i |got_i − want_i| / max(|want_i|, floor).
func maxRel(got, want []float64, floor float64) float64 {
	e := 0.0
	for i := range want {
		e = math.Max(e, math.Abs(got[i]-want[i])/math.Max(math.Abs(want[i]), floor))
	}
	return e
}

// TestDOP853Tableau checks the transcribed coefficients: row sums equal the
// nodes, the weights satisfy the quadrature conditions Σ b_i c_i^k =
// 1/(k+1) through order 8, and the error weights are consistent.
func TestDOP853Tableau(t *testing.T) {
	c := [13]float64{0, 0, dopC2, dopC3, dopC4, dopC5, dopC6, dopC7, dopC8, dopC9, dopC10, dopC11, 1}
	rows := map[int][]float64{
		2:  {dopA21},
		3:  {dopA31, dopA32},
		4:  {dopA41, 0, dopA43},
		5:  {dopA51, 0, dopA53, dopA54},
		6:  {dopA61, 0, 0, dopA64, dopA65},
		7:  {dopA71, 0, 0, dopA74, dopA75, dopA76},
		8:  {dopA81, 0, 0, dopA84, dopA85, dopA86, dopA87},
		9:  {dopA91, 0, 0, dopA94, dopA95, dopA96, dopA97, dopA98},
		10: {dopA101, 0, 0, dopA104, dopA105, dopA106, dopA107, dopA108, dopA109},
		11: {dopA111, 0, 0, dopA114, dopA115, dopA116, dopA117, dopA118, dopA119, dopA1110},
		12: {dopA121, 0, 0, dopA124, dopA125, dopA126, dopA127, dopA128, dopA129, dopA1210, dopA1211},
	}
	for s, r := range rows {
		sum := 0.0
		for _, a := range r {
			sum += a
		}
		if math.Abs(sum-c[s]) > 1e-14 {
			t.Errorf("row %d: Σa = %.17g, c = %.17g", s, sum, c[s])
		}
	}
	b := [13]float64{0, dopB1, 0, 0, 0, 0, dopB6, dopB7, dopB8, dopB9, dopB10, dopB11, dopB12}
	for k := 0; k <= 7; k++ {
		sum := 0.0
		for i := 1; i <= 12; i++ {
			sum += b[i] * math.Pow(c[i], float64(k))
		}
		if want := 1 / float64(k+1); math.Abs(sum-want) > 2e-14 {
			t.Errorf("Σ b c^%d = %.17g, want %.17g", k, sum, want)
		}
	}
	// The 5th-order error weights annihilate constants (b − b̂ sums to 0),
	// and the 3rd-order weights bhh are a quadrature rule.
	er := dopEr1 + dopEr6 + dopEr7 + dopEr8 + dopEr9 + dopEr10 + dopEr11 + dopEr12
	if math.Abs(er) > 1e-14 {
		t.Errorf("Σ er = %g", er)
	}
	if s := dopBhh1 + dopBhh2 + dopBhh3; math.Abs(s-1) > 1e-14 {
		t.Errorf("Σ bhh = %.17g", s)
	}
}

// TestRadauTransform checks T, TI and the eigenvalue constants of the
// Radau IIA(5) implementation: TI·T = I and TI·A⁻¹·T = diag(γ, [[α, −β],
// [β, α]]) for the exact Butcher matrix A.
func TestRadauTransform(t *testing.T) {
	s6 := math.Sqrt(6)
	A := [3][3]float64{
		{(88 - 7*s6) / 360, (296 - 169*s6) / 1800, (-2 + 3*s6) / 225},
		{(296 + 169*s6) / 1800, (88 + 7*s6) / 360, (-2 - 3*s6) / 225},
		{(16 - s6) / 36, (16 + s6) / 36, 1.0 / 9},
	}
	T := [3][3]float64{{radT11, radT12, radT13}, {radT21, radT22, radT23}, {radT31, 1, 0}}
	TI := [3][3]float64{{radTI11, radTI12, radTI13}, {radTI21, radTI22, radTI23}, {radTI31, radTI32, radTI33}}
	mul := func(X, Y [3][3]float64) (Z [3][3]float64) {
		for i := 0; i < 3; i++ {
			for j := 0; j < 3; j++ {
				for k := 0; k < 3; k++ {
					Z[i][j] += X[i][k] * Y[k][j]
				}
			}
		}
		return Z
	}
	// TI·A⁻¹·T = Λ  ⇔  A·T·Λ = T.
	L := [3][3]float64{{radU1, 0, 0}, {0, radAlph, -radBeta}, {0, radBeta, radAlph}}
	I := mul(TI, T)
	ATL := mul(mul(A, T), L)
	for i := 0; i < 3; i++ {
		for j := 0; j < 3; j++ {
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(I[i][j]-want) > 1e-14 {
				t.Errorf("(TI·T)[%d][%d] = %g", i, j, I[i][j])
			}
			if math.Abs(ATL[i][j]-T[i][j]) > 1e-14 {
				t.Errorf("(A·T·Λ)[%d][%d] = %.17g, T = %.17g", i, j, ATL[i][j], T[i][j])
			}
		}
	}
	if math.Abs(A[2][0]+A[2][1]+A[2][2]-1) > 1e-15 || math.Abs(radC1-(A[0][0]+A[0][1]+A[0][2])) > 1e-15 {
		t.Error("Radau nodes inconsistent with A")
	}
}

func linearTestMatrix() []float64 {
	// Non-normal, complex eigenvalues, mildly stiff (spectral radius ≈ 11).
	return []float64{
		-0.5, 2.0, 0.3, 0.0,
		-2.0, -0.5, 0.0, 0.4,
		0.1, 0.0, -10.0, 1.0,
		0.0, -0.2, 0.5, -3.0,
	}
}

// TestLinearClosedForm compares both integrators with exp(A(t − t0))·y0
// from gonum, starting at t0 ≠ 0 and with several output times, forwards
// and backwards in time.
func TestLinearClosedForm(t *testing.T) {
	A := linearTestMatrix()
	pr := Linear(A, 4)
	f, jac := pr.Bind(nil)
	y0 := []float64{1, -0.5, 0.25, 2}
	cases := []struct {
		name string
		t0   float64
		ts   []float64
		run  func(t0 float64, ts []float64) ([][]float64, error)
		tol  float64
	}{
		{"DOP853/forward", 0.3, []float64{0.3, 0.7, 1.3, 2.3, 4.3}, func(t0 float64, ts []float64) ([][]float64, error) {
			return DOP853(f, t0, y0, ts, 1e-13, 1e-15)
		}, 1e-11},
		{"DOP853/backward", 2.5, []float64{2.0, 1.0, -0.5}, func(t0 float64, ts []float64) ([][]float64, error) {
			return DOP853(f, t0, y0, ts, 1e-13, 1e-15)
		}, 1e-11},
		{"Radau5/forward", 0.3, []float64{0.7, 1.3, 2.3, 4.3}, func(t0 float64, ts []float64) ([][]float64, error) {
			return Radau5(f, jac, t0, y0, ts, 1e-12, 1e-14)
		}, 1e-10},
		{"Radau5/backward", 2.5, []float64{2.0, 1.0}, func(t0 float64, ts []float64) ([][]float64, error) {
			return Radau5(f, jac, t0, y0, ts, 1e-12, 1e-14)
		}, 1e-10},
	}
	for _, c := range cases {
		ys, err := c.run(c.t0, c.ts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		worst := 0.0
		for i, tt := range c.ts {
			want := LinearExact(A, 4, c.t0, y0, tt)
			norm := 0.0
			for _, v := range want {
				norm = math.Max(norm, math.Abs(v))
			}
			worst = math.Max(worst, maxRel(ys[i], want, norm))
		}
		t.Logf("%s: max error / ‖y‖∞ = %.2g", c.name, worst)
		if worst > c.tol {
			t.Errorf("%s: error %.3g > %g", c.name, worst, c.tol)
		}
	}
}

// TestRotationNonAutonomous checks both integrators and SolveSens on an
// explicitly time-dependent field with t0 ≠ 0 against its closed form.
func TestRotationNonAutonomous(t *testing.T) {
	p := [2]float64{1.5, 0.8}
	t0, t1 := 0.7, 3.1
	y0 := [2]float64{0.6, -1.1}
	wy, wdp, wdy0 := RotationExact(p, t0, y0, t1)
	for _, m := range []Method{MethodDOP853, MethodRadau5} {
		rtol := 1e-13
		if m == MethodRadau5 {
			rtol = 1e-12
		}
		out, err := SolveSens(Rotation(), m, t0, y0[:], p[:], []float64{t1}, rtol, rtol)
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		s := out[0]
		e := maxRel(s.Y, wy[:], 1)
		e = math.Max(e, maxRel(s.DP, []float64{wdp[0][0], wdp[0][1], wdp[1][0], wdp[1][1]}, 1))
		e = math.Max(e, maxRel(s.DY0, []float64{wdy0[0][0], wdy0[0][1], wdy0[1][0], wdy0[1][1]}, 1))
		t.Logf("%v: max error (y, dy/dp, dy/dy0) = %.2g", m, e)
		if e > 1e-10 {
			t.Errorf("%v: error %.3g > 1e-10", m, e)
		}
	}
}

// TestNonstiffAgreement runs DOP853 and Radau5 on Lorenz and Van der Pol
// and requires agreement to 1e-9 relative.
func TestNonstiffAgreement(t *testing.T) {
	cases := []struct {
		pr     Problem
		p, y0  []float64
		t1     float64
		tolRel float64
	}{
		{Lorenz(), []float64{10, 28, 8.0 / 3}, []float64{1, 0, 0}, 1, 1e-9},
		{Lorenz(), []float64{10, 21, 8.0 / 3}, []float64{1, 0, 0}, 1, 1e-9},
		{VanDerPol(), []float64{1}, []float64{2, 0}, 1, 1e-9},
		{VanDerPol(), []float64{3}, []float64{2, 0}, 5, 1e-9},
		{Lorenz96(6), []float64{8}, []float64{1, 2, 3, 4, 5, 6.5}, 1, 1e-9},
		{StiffField(), []float64{300, 1}, []float64{1, 0.5}, 0.05, 1e-9},
	}
	for _, c := range cases {
		f, jac := c.pr.Bind(c.p)
		yd, err := DOP853(f, 0, c.y0, []float64{c.t1}, 1e-13, 1e-13)
		if err != nil {
			t.Fatalf("%s DOP853: %v", c.pr.Name, err)
		}
		yr, err := Radau5(f, jac, 0, c.y0, []float64{c.t1}, 1e-12, 1e-12)
		if err != nil {
			t.Fatalf("%s Radau5: %v", c.pr.Name, err)
		}
		e := maxRel(yr[0], yd[0], 1e-3)
		t.Logf("%s %v t1=%g: |Radau5 − DOP853| rel = %.2g", c.pr.Name, c.p, c.t1, e)
		if e > c.tolRel {
			t.Errorf("%s %v: disagreement %.3g > %g", c.pr.Name, c.p, e, c.tolRel)
		}
	}
}

// TestHIRES compares Radau5 (rtol 1e-12) and DOP853 (rtol 1e-13; HIRES is
// only mildly stiff) with the Bari test-set reference at t = 321.8122, and
// checks HIRESRefSolve.
func TestHIRES(t *testing.T) {
	f, jac := HIRES().Bind(nil)
	ts := []float64{HIRESTEnd}
	cases := []struct {
		name string
		run  func() ([][]float64, error)
		tol  float64
	}{
		{"Radau5 rtol 1e-12", func() ([][]float64, error) { return Radau5(f, jac, 0, HIRESY0[:], ts, 1e-12, 1e-16) }, 1e-9},
		{"DOP853 rtol 1e-13", func() ([][]float64, error) { return DOP853(f, 0, HIRESY0[:], ts, 1e-13, 1e-17) }, 1e-11},
		{"HIRESRefSolve", func() ([][]float64, error) {
			y := HIRESRefSolve(ts)[0]
			return [][]float64{y[:]}, nil
		}, 1e-11},
	}
	for _, c := range cases {
		ys, err := c.run()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		e := maxRel(ys[0], HIRESRef[:], 0)
		t.Logf("HIRES %s: max componentwise relative error %.2g", c.name, e)
		if e > c.tol {
			t.Errorf("HIRES %s: relative error %.3g > %g", c.name, e, c.tol)
		}
	}
}

// TestRobertsonPublished checks Radau5 (rtol 1e-12) on Robertson against
// the values published for t = 40 (Hairer & Wanner, 10 digits), t = 10^k
// (Hairer's test set, 16 digits; includes the horizons 1e2 and 1e4) and
// t = 1e11 (Bari test set).
func TestRobertsonPublished(t *testing.T) {
	f, jac := Robertson().Bind(RobertsonK[:])
	ts := []float64{40}
	for k := 0; k < 12; k++ {
		ts = append(ts, math.Pow(10, float64(k)))
	}
	// ts is not monotone (40 then 1): solve 40 separately.
	y40, err := Radau5(f, jac, 0, []float64{1, 0, 0}, ts[:1], RefStiffRtol, RefStiffAtol)
	if err != nil {
		t.Fatal(err)
	}
	ys, err := Radau5(f, jac, 0, []float64{1, 0, 0}, ts[1:], RefStiffRtol, RefStiffAtol)
	if err != nil {
		t.Fatal(err)
	}
	// y(40): the published values carry 10 significant digits (truncated);
	// require agreement to one unit in the last printed digit.
	for i, want := range RobertsonRef40 {
		unit := math.Pow(10, math.Floor(math.Log10(math.Abs(want)))-9)
		if d := math.Abs(y40[0][i] - want); d > unit {
			t.Errorf("y(40)[%d] = %.13g, published %.10g", i, y40[0][i], want)
		}
	}
	t.Logf("y(40) = %.15g (published %.10g)", y40[0], RobertsonRef40)
	worst := 0.0
	for k, want := range RobertsonRefDecades {
		e := maxRel(ys[k], want[:], 0)
		worst = math.Max(worst, e)
		if e > 1e-10 {
			t.Errorf("y(1e%d): relative error %.3g > 1e-10 (got %.16g)", k, e, ys[k])
		}
	}
	e11 := maxRel(ys[11], RobertsonRef1e11[:], 0)
	t.Logf("Hairer test set t = 1…1e11: max relative error %.2g; Bari y(1e11): %.2g", worst, e11)
	if e11 > 1e-10 {
		t.Errorf("y(1e11) vs Bari: relative error %.3g", e11)
	}
}

// TestRobertsonDOP853 cross-checks Radau5 with the explicit DOP853 (no
// Jacobian, no Newton iteration) on Robertson at t = 40 and 100; DOP853 is
// stability-limited to h ≈ 1e-3 here (~1e5 steps, 0.05 s). With
// -refode.slow it also runs to t = 1e4 (~1.3e7 steps, about 5 s) and
// compares with Hairer's test-set value.
func TestRobertsonDOP853(t *testing.T) {
	f, jac := Robertson().Bind(RobertsonK[:])
	ts := []float64{40, 100}
	if *slow {
		ts = append(ts, 1e4)
	}
	o := &Options{Atol: []float64{1e-14, 1e-20, 1e-14}, MaxSteps: 50000000}
	ys, st, err := DOP853Opts(f, 0, []float64{1, 0, 0}, ts, 1e-12, 0, o)
	if err != nil {
		t.Fatal(err)
	}
	yr, err := Radau5(f, jac, 0, []float64{1, 0, 0}, ts[:2], RefStiffRtol, RefStiffAtol)
	if err != nil {
		t.Fatal(err)
	}
	e := math.Max(maxRel(ys[0], yr[0], 0), maxRel(ys[1], yr[1], 0))
	e100 := maxRel(ys[1], RobertsonRefDecades[2][:], 0)
	t.Logf("DOP853 (%d steps): |DOP853 − Radau5| at t = 40, 100: %.2g; DOP853 y(100) vs Hairer: %.2g", st.Steps, e, e100)
	if e > 1e-10 || e100 > 1e-10 {
		t.Errorf("DOP853 vs Radau5: %.3g, vs published y(100): %.3g", e, e100)
	}
	if *slow {
		e := maxRel(ys[2], RobertsonRefDecades[4][:], 0)
		t.Logf("DOP853 y(1e4) vs Hairer test set: %.2g relative", e)
		if e > 1e-10 {
			t.Errorf("DOP853 y(1e4): %.3g", e)
		}
	}
}

// fdDeriv differentiates g at x by finite differences of order 4: central
// (−g(x+2h) + 8g(x+h) − 8g(x−h) + g(x−2h))/(12h), or, when x == 0 (a state
// that must not go negative), forward
// (−25g(x) + 48g(x+h) − 36g(x+2h) + 16g(x+3h) − 3g(x+4h))/(12h).
func fdDeriv(g func(x float64) []float64, x, h float64) []float64 {
	var ws []float64
	var xs []float64
	if x == 0 {
		ws = []float64{-25, 48, -36, 16, -3}
		xs = []float64{0, h, 2 * h, 3 * h, 4 * h}
	} else {
		ws = []float64{1, -8, 8, -1}
		xs = []float64{x - 2*h, x - h, x + h, x + 2*h}
	}
	var out []float64
	for k, w := range ws {
		v := g(xs[k])
		if out == nil {
			out = make([]float64, len(v))
		}
		for i := range v {
			out[i] += w * v[i]
		}
	}
	for i := range out {
		out[i] /= 12 * h
	}
	return out
}

func fdStep(x float64) float64 {
	if x == 0 {
		return 1e-3
	}
	return 1e-3 * math.Abs(x)
}

// fdSens returns fourth-order finite differences of the adaptive solver's
// endpoint with respect to y0 and p, with steps h = 1e-3·|x| (1e-3 for
// x = 0). Each evaluation re-solves the problem adaptively (no frozen mesh).
func fdSens(t *testing.T, pr Problem, m Method, y0, p []float64, t1, rtol, atol float64) (dy0, dp []float64) {
	d, P := pr.Dim, pr.NParam
	solve := func(y0, p []float64) []float64 {
		f, jac := pr.Bind(p)
		var ys [][]float64
		var err error
		if m == MethodDOP853 {
			ys, err = DOP853(f, 0, y0, []float64{t1}, rtol, atol)
		} else {
			ys, err = Radau5(f, jac, 0, y0, []float64{t1}, rtol, atol)
		}
		if err != nil {
			t.Fatal(err)
		}
		return ys[0]
	}
	dy0 = make([]float64, d*d)
	dp = make([]float64, d*P)
	for j := 0; j < d; j++ {
		g := func(x float64) []float64 {
			y := append([]float64(nil), y0...)
			y[j] = x
			return solve(y, p)
		}
		col := fdDeriv(g, y0[j], fdStep(y0[j]))
		for i := 0; i < d; i++ {
			dy0[i*d+j] = col[i]
		}
	}
	for k := 0; k < P; k++ {
		g := func(x float64) []float64 {
			q := append([]float64(nil), p...)
			q[k] = x
			return solve(y0, q)
		}
		col := fdDeriv(g, p[k], fdStep(p[k]))
		for i := 0; i < d; i++ {
			dp[i*P+k] = col[i]
		}
	}
	return dy0, dp
}

// relErrRows compares sensitivity matrices row by row: each entry's error
// is measured relative to the largest entry of its row (rows of
// ∂y_i/∂(·) share the units of y_i).
func relErrRows(got, want []float64, rows, cols int) float64 {
	e := 0.0
	for i := 0; i < rows; i++ {
		s := 0.0
		for c := 0; c < cols; c++ {
			s = math.Max(s, math.Abs(want[i*cols+c]))
		}
		if s == 0 {
			s = 1
		}
		for c := 0; c < cols; c++ {
			e = math.Max(e, math.Abs(got[i*cols+c]-want[i*cols+c])/s)
		}
	}
	return e
}

// TestSensVsFD checks the variational sensitivities against fourth-order
// finite differences of the (adaptive) solver itself at a tolerance ten
// times tighter.
func TestSensVsFD(t *testing.T) {
	cases := []struct {
		pr         Problem
		m          Method
		p, y0      []float64
		t1         float64
		rtol, atol float64
		noY0       bool // skip dy/dy0 (see below)
	}{
		{Lorenz(), MethodDOP853, []float64{10, 28, 8.0 / 3}, []float64{1, 0, 0}, 1, 1e-13, 1e-13, false},
		{Lorenz(), MethodRadau5, []float64{10, 28, 8.0 / 3}, []float64{1, 0, 0}, 1, 1e-12, 1e-12, false},
		{VanDerPol(), MethodDOP853, []float64{1}, []float64{2, 0}, 1, 1e-13, 1e-13, false},
		{VanDerPol(), MethodRadau5, []float64{3}, []float64{2, 0}, 5, 1e-12, 1e-12, false},
		{Robertson(), MethodRadau5, []float64{0.4, 20, 5}, []float64{1, 0, 0}, 0.5, 1e-12, 1e-16, false},
		{StiffField(), MethodRadau5, []float64{1000, 1}, []float64{1, 0.5}, 0.05, 1e-12, 1e-14, false},
		{Rotation(), MethodDOP853, []float64{1.5, 0.8}, []float64{0.6, -1.1}, 3, 1e-13, 1e-13, false},
		// Classical rates: y2 lives at 1e-5, so finite differences in
		// y2(0) or y3(0) = 0 would need steps far below the solver's
		// resolution; dy/dy0 is checked by the conservation law in
		// TestRobertsonSensConservation instead.
		{Robertson(), MethodRadau5, RobertsonK[:], []float64{1, 0, 0}, 40, 1e-12, 1e-20, true},
		{Robertson(), MethodRadau5, RobertsonK[:], []float64{1, 0, 0}, 1e4, 1e-12, 1e-20, true},
	}
	for _, c := range cases {
		out, err := SolveSens(c.pr, c.m, 0, c.y0, c.p, []float64{c.t1}, c.rtol, c.atol)
		if err != nil {
			t.Fatalf("%s/%v: %v", c.pr.Name, c.m, err)
		}
		fdy0, fdp := fdSens(t, c.pr, c.m, c.y0, c.p, c.t1, c.rtol/10, c.atol/10)
		d, P := c.pr.Dim, c.pr.NParam
		e0 := relErrRows(out[0].DY0, fdy0, d, d)
		if c.noY0 {
			e0 = 0
		}
		ep := relErrRows(out[0].DP, fdp, d, P)
		t.Logf("%s/%v p=%v t1=%g: vs FD: dy/dy0 %.2g, dy/dp %.2g", c.pr.Name, c.m, c.p, c.t1, e0, ep)
		if e0 > 1e-6 || ep > 1e-6 {
			t.Errorf("%s/%v: sensitivities vs FD: %.3g, %.3g > 1e-6", c.pr.Name, c.m, e0, ep)
		}
	}
}

// TestRobertsonSensConservation uses y1 + y2 + y3 = const (f1 + f2 + f3 = 0):
// Σ_i ∂y_i/∂y0_j = 1 and Σ_i ∂y_i/∂k = 0 exactly.
func TestRobertsonSensConservation(t *testing.T) {
	for _, t1 := range []float64{40, 1e4} {
		y, dk, dy0 := RobertsonRef(RobertsonK, [3]float64{1, 0, 0}, t1)
		worst := math.Abs(y[0] + y[1] + y[2] - 1)
		for j := 0; j < 3; j++ {
			worst = math.Max(worst, math.Abs(dy0[0][j]+dy0[1][j]+dy0[2][j]-1))
			// dy/dk_j is O(1/k_j); measure it relative to its scale.
			s := math.Max(math.Max(math.Abs(dk[0][j]), math.Abs(dk[1][j])), math.Abs(dk[2][j]))
			worst = math.Max(worst, math.Abs(dk[0][j]+dk[1][j]+dk[2][j])/s)
		}
		t.Logf("t1=%g: conservation defect %.2g", t1, worst)
		if worst > 1e-11 {
			t.Errorf("t1=%g: conservation defect %.3g", t1, worst)
		}
	}
}

type mpCase struct {
	name  string
	d, P  int
	t1    float64
	p, y0 []float64
	y     []float64
	dy0   []float64
	dp    []float64
}

func parseFloats(t *testing.T, s string) []float64 {
	var out []float64
	for _, f := range strings.Fields(s) {
		if a, b, ok := strings.Cut(f, "/"); ok {
			x, err1 := strconv.ParseFloat(a, 64)
			y, err2 := strconv.ParseFloat(b, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("bad number %q", f)
			}
			out = append(out, x/y)
			continue
		}
		x, err := strconv.ParseFloat(f, 64)
		if err != nil {
			t.Fatalf("bad number %q", f)
		}
		out = append(out, x)
	}
	return out
}

// readMpmath parses testdata/mpmath_ref.txt (written by
// testdata/mpmath_lorenz.py).
func readMpmath(t *testing.T) map[string]*mpCase {
	fh, err := os.Open("testdata/mpmath_ref.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	cases := map[string]*mpCase{}
	var cur *mpCase
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		switch f[0] {
		case "case":
			parts := strings.Split(line, ";")
			h := strings.Fields(parts[0])
			d, _ := strconv.Atoi(h[2])
			P, _ := strconv.Atoi(h[3])
			cur = &mpCase{
				name: h[1], d: d, P: P, t1: parseFloats(t, h[4])[0],
				p: parseFloats(t, parts[1]), y0: parseFloats(t, parts[2]),
				y: make([]float64, d), dy0: make([]float64, d*d), dp: make([]float64, d*P),
			}
			cases[cur.name] = cur
		case "y":
			i, _ := strconv.Atoi(f[1])
			cur.y[i] = parseFloats(t, f[2])[0]
		case "dy0":
			i, _ := strconv.Atoi(f[1])
			j, _ := strconv.Atoi(f[2])
			cur.dy0[i*cur.d+j] = parseFloats(t, f[3])[0]
		case "dp":
			i, _ := strconv.Atoi(f[1])
			k, _ := strconv.Atoi(f[2])
			cur.dp[i*cur.P+k] = parseFloats(t, f[3])[0]
		default:
			t.Fatalf("bad line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestMpmath checks DOP853 and Radau5 (states and sensitivities) against
// the arbitrary-precision Taylor-series solutions of testdata/.
func TestMpmath(t *testing.T) {
	cases := readMpmath(t)
	probs := map[string]Problem{
		"lorenz": Lorenz(), "lorenz_rho21": Lorenz(), "vanderpol": VanDerPol(),
		"vanderpol_mu3_t5": VanDerPol(), "robertson_mild": Robertson(),
	}
	if len(cases) != len(probs) {
		t.Fatalf("testdata has %d cases, want %d", len(cases), len(probs))
	}
	for name, c := range cases {
		pr := probs[name]
		for _, m := range []Method{MethodDOP853, MethodRadau5} {
			rtol, atol := 1e-13, 1e-13
			if m == MethodRadau5 {
				rtol, atol = 1e-12, 1e-14
			}
			out, err := SolveSens(pr, m, 0, c.y0, c.p, []float64{c.t1}, rtol, atol)
			if err != nil {
				t.Fatalf("%s/%v: %v", name, m, err)
			}
			ey := maxRel(out[0].Y, c.y, 1e-3)
			e0 := relErrRows(out[0].DY0, c.dy0, c.d, c.d)
			ep := relErrRows(out[0].DP, c.dp, c.d, c.P)
			t.Logf("%s/%v: y %.2g, dy/dy0 %.2g, dy/dp %.2g", name, m, ey, e0, ep)
			if ey > 1e-10 || e0 > 1e-10 || ep > 1e-10 {
				t.Errorf("%s/%v: errors %.3g %.3g %.3g > 1e-10", name, m, ey, e0, ep)
			}
		}
	}
}

// TestRefHelpers checks the exported helpers against mpmath and the
// published Robertson values.
func TestRefHelpers(t *testing.T) {
	cases := readMpmath(t)
	arr3 := func(a [3][3]float64) []float64 {
		return []float64{a[0][0], a[0][1], a[0][2], a[1][0], a[1][1], a[1][2], a[2][0], a[2][1], a[2][2]}
	}
	for _, name := range []string{"lorenz", "lorenz_rho21"} {
		c := cases[name]
		y, dydp, dydy0 := LorenzRef([3]float64(c.p), [3]float64(c.y0), c.t1)
		ey, ep, e0 := maxRel(y[:], c.y, 1e-3), relErrRows(arr3(dydp), c.dp, 3, 3), relErrRows(arr3(dydy0), c.dy0, 3, 3)
		t.Logf("LorenzRef %s: y %.2g, dy/dp %.2g, dy/dy0 %.2g", name, ey, ep, e0)
		if ey > 1e-11 || ep > 1e-11 || e0 > 1e-11 {
			t.Errorf("LorenzRef %s: %.3g %.3g %.3g", name, ey, ep, e0)
		}
	}
	for _, name := range []string{"vanderpol", "vanderpol_mu3_t5"} {
		c := cases[name]
		y, dmu, dy0 := VanDerPolRef(c.p[0], [2]float64(c.y0), c.t1)
		ey := maxRel(y[:], c.y, 1e-3)
		ep := relErrRows(dmu[:], c.dp, 2, 1)
		e0 := relErrRows([]float64{dy0[0][0], dy0[0][1], dy0[1][0], dy0[1][1]}, c.dy0, 2, 2)
		t.Logf("VanDerPolRef %s: y %.2g, dy/dμ %.2g, dy/dy0 %.2g", name, ey, ep, e0)
		if ey > 1e-11 || ep > 1e-11 || e0 > 1e-11 {
			t.Errorf("VanDerPolRef %s: %.3g %.3g %.3g", name, ey, ep, e0)
		}
	}
	{
		// Stiff branch (μ > 10, Radau5) against DOP853 on the variational system.
		y, dmu, dy0 := VanDerPolRef(20, [2]float64{2, 0}, 1)
		out, err := SolveSens(VanDerPol(), MethodDOP853, 0, []float64{2, 0}, []float64{20}, []float64{1}, 1e-13, 1e-13)
		if err != nil {
			t.Fatal(err)
		}
		ey := maxRel(y[:], out[0].Y, 1e-3)
		ep := relErrRows(dmu[:], out[0].DP, 2, 1)
		e0 := relErrRows([]float64{dy0[0][0], dy0[0][1], dy0[1][0], dy0[1][1]}, out[0].DY0, 2, 2)
		t.Logf("VanDerPolRef μ=20 (Radau5) vs DOP853: y %.2g, dy/dμ %.2g, dy/dy0 %.2g", ey, ep, e0)
		if ey > 1e-10 || ep > 1e-10 || e0 > 1e-10 {
			t.Errorf("VanDerPolRef μ=20: %.3g %.3g %.3g", ey, ep, e0)
		}
	}
	{
		c := cases["robertson_mild"]
		y, dk, dy0 := RobertsonRef([3]float64(c.p), [3]float64(c.y0), c.t1)
		ey, ep, e0 := maxRel(y[:], c.y, 1e-3), relErrRows(arr3(dk), c.dp, 3, 3), relErrRows(arr3(dy0), c.dy0, 3, 3)
		t.Logf("RobertsonRef mild: y %.2g, dy/dk %.2g, dy/dy0 %.2g", ey, ep, e0)
		if ey > 1e-10 || ep > 1e-10 || e0 > 1e-10 {
			t.Errorf("RobertsonRef mild: %.3g %.3g %.3g", ey, ep, e0)
		}
	}
	for _, tc := range []struct {
		t1   float64
		want [3]float64
	}{{1e2, RobertsonRefDecades[2]}, {1e4, RobertsonRefDecades[4]}} {
		y, _, _ := RobertsonRef(RobertsonK, [3]float64{1, 0, 0}, tc.t1)
		e := maxRel(y[:], tc.want[:], 0)
		t.Logf("RobertsonRef t=%g: y vs Hairer test set %.2g", tc.t1, e)
		if e > 1e-10 {
			t.Errorf("RobertsonRef t=%g: %.3g", tc.t1, e)
		}
	}
}

// TestSensOptions checks per-component absolute tolerances in
// SolveSensOpts and that both methods agree on a stiff-ish problem.
func TestSensOptions(t *testing.T) {
	p, y0 := []float64{0.4, 20, 5}, []float64{1, 0, 0}
	o := &Options{Atol: []float64{1e-14, 1e-16, 1e-14}}
	a, _, err := SolveSensOpts(Robertson(), MethodRadau5, 0, y0, p, []float64{0.25, 0.5}, 1e-12, 0, o)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := SolveSensOpts(Robertson(), MethodDOP853, 0, y0, p, []float64{0.25, 0.5}, 1e-13, 0, o)
	if err != nil {
		t.Fatal(err)
	}
	for n := range a {
		e := math.Max(maxRel(a[n].Y, b[n].Y, 1e-3), math.Max(relErrRows(a[n].DY0, b[n].DY0, 3, 3), relErrRows(a[n].DP, b[n].DP, 3, 3)))
		t.Logf("t=%g: |Radau5 − DOP853| %.2g", a[n].T, e)
		if e > 1e-10 {
			t.Errorf("t=%g: Radau5 vs DOP853 %.3g", a[n].T, e)
		}
	}
	if _, _, err := SolveSensOpts(Robertson(), MethodRadau5, 0, y0, p, []float64{1}, 1e-8, 0, &Options{Atol: []float64{1}}); err == nil {
		t.Error("wrong len(Atol): no error")
	}
	if _, err := SolveSens(Robertson(), MethodRadau5, 0, y0, p[:2], []float64{1}, 1e-8, 1e-8); err == nil {
		t.Error("wrong len(p): no error")
	}
}

// TestErrors checks argument validation and the step limit.
func TestErrors(t *testing.T) {
	f, jac := Lorenz().Bind([]float64{10, 28, 8.0 / 3})
	y0 := []float64{1, 0, 0}
	if _, err := DOP853(f, 0, y0, []float64{1, 0.5, 2}, 1e-8, 1e-8); err == nil {
		t.Error("non-monotone ts: no error")
	}
	if _, err := Radau5(f, jac, 0, y0, []float64{1}, 0, 1e-8); err == nil {
		t.Error("rtol = 0: no error")
	}
	if _, _, err := DOP853Opts(f, 0, y0, []float64{10}, 1e-10, 1e-10, &Options{MaxSteps: 5}); err == nil {
		t.Error("MaxSteps: no error")
	}
	if _, _, err := Radau5Opts(f, jac, 0, y0, []float64{10}, 1e-10, 1e-10, &Options{MaxSteps: 5}); err == nil {
		t.Error("MaxSteps: no error")
	}
	// Outputs at t0 and repeated times return y0 / the same state.
	ys, err := DOP853(f, 0, y0, []float64{0, 0.5, 0.5}, 1e-10, 1e-10)
	if err != nil || ys[0][0] != 1 || ys[1][0] != ys[2][0] {
		t.Errorf("repeated output times: %v %v", ys, err)
	}
}
