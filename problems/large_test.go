package problems

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Tests of the larger problems of the benchmark suite (issue 26):
// Lorenz-96 with d = 64 and 256, POLL and the Brusselator. Each is solved
// on the CPU engine with the method the suite uses (Tsit5 for Lorenz-96,
// Rodas5P for the stiff ones) and compared with internal/refode's
// independent integrators on plain-Go transcriptions of the equations, and
// each gradient with respect to a per-trajectory parameter is checked
// against central differences on a small ensemble.

// brusselatorRef is the Brusselator of Hairer & Wanner II, §IV.1, in the
// book's variables: u_i = y[2(i−1)], v_i = y[2i−1] for i = 1…N, with the
// boundary values u = 1, v = 3 and c = α(N+1)².
func brusselatorRef(y, p, _ []float64) []float64 {
	n := len(y) / 2
	c := p[0] * float64((n+1)*(n+1))
	u := func(i int) float64 {
		if i == 0 || i == n+1 {
			return 1
		}
		return y[2*(i-1)]
	}
	v := func(i int) float64 {
		if i == 0 || i == n+1 {
			return 3
		}
		return y[2*i-1]
	}
	f := make([]float64, len(y))
	for i := 1; i <= n; i++ {
		f[2*(i-1)] = 1 + u(i)*u(i)*v(i) - 4*u(i) + c*(u(i-1)-2*u(i)+u(i+1))
		f[2*i-1] = 3*u(i) - u(i)*u(i)*v(i) + c*(v(i-1)-2*v(i)+v(i+1))
	}
	return f
}

// brusselatorJac is ∂f/∂y of brusselatorRef, by hand.
func brusselatorJac(y, p, J []float64) {
	d := len(y)
	n := d / 2
	c := p[0] * float64((n+1)*(n+1))
	for i := range J {
		J[i] = 0
	}
	for i := 0; i < n; i++ {
		ru, rv := 2*i, 2*i+1
		u, v := y[ru], y[rv]
		J[ru*d+ru] = 2*u*v - 4 - 2*c
		J[ru*d+rv] = u * u
		J[rv*d+ru] = 3 - 2*u*v
		J[rv*d+rv] = -u*u - 2*c
		if i > 0 {
			J[ru*d+ru-2], J[rv*d+rv-2] = c, c
		}
		if i < n-1 {
			J[ru*d+ru+2], J[rv*d+rv+2] = c, c
		}
	}
}

// refSolve integrates the plain-Go field ref from y0 with parameters p to
// t1: DOP853 if jac is nil, else Radau5.
func refSolve(t *testing.T, ref func(y, p, s []float64) []float64, jac func(y, p, J []float64),
	y0, p []float64, t0, t1, rtol, atol float64) []float64 {
	t.Helper()
	f := func(_ float64, y, dy []float64) { copy(dy, ref(y, p, nil)) }
	var ys [][]float64
	var err error
	if jac == nil {
		ys, err = refode.DOP853(f, t0, y0, []float64{t1}, rtol, atol)
	} else {
		ys, err = refode.Radau5(f, func(_ float64, y, J []float64) { jac(y, p, J) }, t0, y0, []float64{t1}, rtol, atol)
	}
	if err != nil {
		t.Fatal(err)
	}
	return ys[0]
}

// relErr2 returns ‖a − b‖₂/‖b‖₂.
func relErr2(a, b []float64) float64 {
	num, den := 0.0, 0.0
	for i := range b {
		num += (a[i] - b[i]) * (a[i] - b[i])
		den += b[i] * b[i]
	}
	return math.Sqrt(num / den)
}

// sweep returns n rows of pr's initial state and parameters with
// parameter k set to vals[i] in row i.
func sweep(pr Problem, k int, vals []float64) ode.Problem {
	n := len(vals)
	y0, p := pr.Ensemble(n)
	for i, v := range vals {
		p[i*pr.Field.Params+k] = v
	}
	return ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, T0: pr.T0, T1: pr.T1}
}

// largeCase is one problem of the suite with its method, tolerances, swept
// parameter and reference.
type largeCase struct {
	name       string
	pr         Problem
	method     ode.Method
	rtol, atol float64
	k          int       // the swept per-trajectory parameter
	vals       []float64 // its values, one per trajectory
	ref        func(y, p, s []float64) []float64
	jac        func(y, p, J []float64) // nil: the reference is DOP853
	refRtol    float64
	refAtol    float64
	tol        float64 // on ‖y(T) − y_ref(T)‖₂/‖y_ref(T)‖₂, per trajectory
	fdTol      float64 // on the relative error of a gradient entry
}

func largeCases() []largeCase {
	return []largeCase{
		// Lorenz-96 leaves the unstable equilibrium y = F within t = 1 (the
		// perturbation 0.01 grows to O(1)), which amplifies local errors:
		// the global error is about 200·rtol (Tsit5 at rtol 1e-8: 4e-6;
		// DOP853 at 1e-10: 3e-8), hence rtol 1e-10 and the bound 1e-7.
		{name: "lorenz96-64", pr: Lorenz96(64), method: ode.Tsit5, rtol: 1e-10, atol: 1e-12,
			vals: []float64{7, 8, 9}, ref: lorenz96Ref, refRtol: 1e-13, refAtol: 1e-13, tol: 1e-7, fdTol: 1e-6},
		{name: "lorenz96-256", pr: Lorenz96(256), method: ode.Tsit5, rtol: 1e-10, atol: 1e-12,
			vals: []float64{7.5, 8.5}, ref: lorenz96Ref, refRtol: 1e-13, refAtol: 1e-13, tol: 1e-7, fdTol: 1e-6},
		{name: "brusselator", pr: Brusselator(32), method: ode.Rodas5P, rtol: 1e-8, atol: 1e-10,
			vals: []float64{0.01, 0.02, 0.04}, ref: brusselatorRef, jac: brusselatorJac,
			refRtol: 1e-12, refAtol: 1e-14, tol: 1e-6, fdTol: 1e-5},
		// Lotka–Volterra and the two-state Brusselator (unseen_test.go):
		// a rate of each swept, against DOP853.
		{name: "lotka-volterra", pr: lotkaVolterra(), method: ode.Vern7, rtol: 1e-10, atol: 1e-12,
			k: 1, vals: []float64{0.8, 1, 1.3}, ref: lotkaVolterraRef, refRtol: 1e-13, refAtol: 1e-14, tol: 1e-7, fdTol: 1e-6},
		{name: "brusselator-ode", pr: brusselatorODE(), method: ode.Tsit5, rtol: 1e-10, atol: 1e-12,
			k: 1, vals: []float64{2.5, 3, 3.5}, ref: brusselatorODERef, refRtol: 1e-13, refAtol: 1e-14, tol: 1e-7, fdTol: 1e-6},
		// POLL with k1 (the photolysis of NO2, 0.35 by default) swept by
		// ±20%, at a pure relative tolerance (its species span 4e-18 to
		// 0.3). Radau5 uses pollutionJac, the Jacobian of pollu.f's jeval.
		{name: "pollution", pr: Pollution(), method: ode.Rodas5P, rtol: 1e-8, atol: 1e-25,
			k: 0, vals: []float64{0.28, 0.35, 0.42}, ref: pollutionRef, jac: pollutionJac,
			refRtol: 1e-12, refAtol: 1e-30, tol: 1e-6, fdTol: 1e-5},
	}
}

// TestLargeProblems solves each problem of largeCases on the CPU engine
// with its method and compares y(T) of every trajectory with the
// reference integrator (DOP853 for Lorenz-96, Radau5 with the hand-written
// Jacobian for the stiff ones) at tight tolerances. For POLL the default
// trajectory (k1 = 0.35) is also compared with the published y(60) of the
// test set, component by component.
func TestLargeProblems(t *testing.T) {
	t.Parallel()
	for _, tc := range largeCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prob := sweep(tc.pr, tc.k, tc.vals)
			sol, err := ode.Solve(prob, &ode.Settings{Method: tc.method, RelTol: tc.rtol, AbsTol: tc.atol})
			if err != nil {
				t.Fatal(err)
			}
			d := tc.pr.Field.Dim
			np := tc.pr.Field.Params
			for i := range tc.vals {
				got := sol.Y[i*d : (i+1)*d]
				want := refSolve(t, tc.ref, tc.jac, tc.pr.Y0, prob.P[i*np:(i+1)*np], prob.T0, prob.T1, tc.refRtol, tc.refAtol)
				e := relErr2(got, want)
				t.Logf("p[%d] = %g: %s %d steps, ‖y − y_ref‖/‖y_ref‖ = %.2g", tc.k, tc.vals[i], tc.method.Name(), sol.Stats.Accepted[i], e)
				if !(e <= tc.tol) {
					t.Errorf("p[%d] = %g: relative error %.3g of y(%g) against the reference, want ≤ %g", tc.k, tc.vals[i], e, prob.T1, tc.tol)
				}
				if tc.name == "pollution" && tc.vals[i] == PollutionRates[0] {
					for c, w := range PollutionRef {
						if g := got[c]; !(math.Abs(g-w) <= 100*tc.rtol*w) {
							t.Errorf("y%d(60): Want: %v (published), Got: %v (relative error %.2g).", c+1, w, g, math.Abs(g-w)/w)
						}
					}
				}
			}
		})
	}
}

// TestLargeGradients checks the gradient of the loss Σ_i ‖y_i(T)‖² with
// respect to the swept per-trajectory parameter of each problem of
// largeCases (F of Lorenz-96, α of the Brusselator, k1 of POLL), on the
// mesh Grad records, against central differences of Replay on that
// frozen mesh (the map whose exact derivative Grad is), with the step
// 1e-6·max(|x|, 1) of REFERENCE.md §9 (1e-4·|x| for k1 of POLL, whose
// loss changes by less than its rounding for a smaller step): relative
// error ≤ 1e-6 (Tsit5) or 1e-5 (Rodas5P). Every trajectory's entry is
// checked; the others' entries must not move.
func TestLargeGradients(t *testing.T) {
	t.Parallel()
	for _, tc := range largeCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prob := sweep(tc.pr, tc.k, tc.vals)
			sv, err := ode.NewSolver(tc.pr.Field, &ode.Settings{Method: tc.method, RelTol: tc.rtol * 100, AbsTol: tc.atol * 100})
			if err != nil {
				t.Fatal(err)
			}
			g, err := sv.Grad(nil, &prob, ode.SumSquares(), nil)
			if err != nil {
				t.Fatal(err)
			}
			d, np := tc.pr.Field.Dim, tc.pr.Field.Params
			terms := func() []float64 {
				sol, err := sv.Replay(&prob, g.Mesh)
				if err != nil {
					t.Fatal(err)
				}
				l := make([]float64, len(tc.vals))
				for i := range l {
					for _, y := range sol.Y[i*d : (i+1)*d] {
						l[i] += y * y
					}
				}
				return l
			}
			l0 := terms()
			sum := 0.0
			for _, l := range l0 {
				sum += l
			}
			if math.Abs(sum-g.Loss) > 1e-13*math.Abs(sum) {
				t.Errorf("loss: Grad %v, Replay %v", g.Loss, sum)
			}
			for i := range tc.vals {
				x := &prob.P[i*np+tc.k]
				x0 := *x
				h := 1e-6 * math.Max(math.Abs(x0), 1)
				if tc.name == "pollution" {
					h = 1e-4 * math.Abs(x0)
				}
				*x = x0 + h
				up := terms()
				*x = x0 - h
				down := terms()
				*x = x0
				for j := range up {
					if j != i && (up[j] != l0[j] || down[j] != l0[j]) {
						t.Errorf("trajectory %d's loss moved with trajectory %d's parameter", j, i)
					}
				}
				fd := (up[i] - down[i]) / (2 * h)
				got := g.P[i*np+tc.k]
				e := math.Abs(got-fd) / math.Abs(fd)
				t.Logf("p[%d] = %g: ∂L/∂p = %.10g, central difference %.10g, relative difference %.2g", tc.k, x0, got, fd, e)
				if !(e <= tc.fdTol) {
					t.Errorf("p[%d] = %g: ∂L/∂p: Grad %v, central difference %v (relative difference %.2g, want ≤ %g)",
						tc.k, x0, got, fd, e, tc.fdTol)
				}
			}
		})
	}
}

// TestBrusselator checks the Brusselator's defaults against Hairer &
// Wanner II's BRUSS (x_i = i/(N+1), u_i(0) = 1 + sin(2πx_i), v_i(0) = 3,
// α = 1/50, t ∈ [0, 10]), the hand-written Jacobian against the traced
// field's derivative by central differences, and that the homogeneous
// state (u, v) = (1, 3), the boundary values, is an equilibrium for any α.
func TestBrusselator(t *testing.T) {
	t.Parallel()
	if !panics(func() { Brusselator(0) }) {
		t.Errorf("Brusselator(0) did not panic")
	}
	pr := Brusselator(32)
	if pr.Name != "brusselator" || pr.Field.Dim != 64 || pr.Field.Params != 1 || pr.P[0] != 0.02 ||
		pr.T0 != 0 || pr.T1 != 10 || !pr.Stiff {
		t.Errorf("Brusselator(32): Name %q, Dim %d, Params %d, P %v, span [%v, %v], Stiff %v",
			pr.Name, pr.Field.Dim, pr.Field.Params, pr.P, pr.T0, pr.T1, pr.Stiff)
	}
	if got := Brusselator(5).Name; got != "brusselator-5" {
		t.Errorf("Brusselator(5).Name = %q", got)
	}
	for i := 1; i <= 32; i++ {
		u, v := pr.Y0[2*(i-1)], pr.Y0[2*i-1]
		if want := 1 + math.Sin(2*math.Pi*float64(i)/33); math.Abs(u-want) > 1e-15 || v != 3 {
			t.Errorf("cell %d: (u, v)(0) = (%v, %v), want (%v, 3)", i, u, v, want)
		}
	}
	prog, err := pr.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	eq := make([]float64, 1+64+1)
	for i := 0; i < 32; i++ {
		eq[1+2*i], eq[2+2*i] = 1, 3
	}
	for _, alpha := range []float64{0, 0.02, 1} {
		eq[65] = alpha
		for i, f := range prog.Eval(nil, eq) {
			if f != 0 {
				t.Errorf("α = %v: f[%d] = %v at the equilibrium (1, 3)", alpha, i, f)
			}
		}
	}
	// The hand-written Jacobian against central differences of the
	// traced field at y0 (perturbed) with α = 0.03.
	y := append([]float64(nil), pr.Y0...)
	for i := range y {
		y[i] += 0.1 * math.Cos(float64(i))
	}
	p := []float64{0.03}
	d := len(y)
	J := make([]float64, d*d)
	brusselatorJac(y, p, J)
	in := append(append([]float64{0}, y...), p...)
	for j := 0; j < d; j++ {
		h := 1e-6
		in[1+j] = y[j] + h
		up := prog.Eval(nil, in)
		in[1+j] = y[j] - h
		down := prog.Eval(nil, in)
		in[1+j] = y[j]
		for i := 0; i < d; i++ {
			fd := (up[i] - down[i]) / (2 * h)
			if math.Abs(fd-J[i*d+j]) > 1e-6*math.Max(1, math.Abs(fd)) {
				t.Errorf("∂f%d/∂y%d: hand-written %v, central difference %v", i, j, J[i*d+j], fd)
			}
		}
	}
}

// TestLorenz96Names checks the names and sizes of the suite's Lorenz-96
// problems.
func TestLorenz96Names(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		d    int
	}{{"lorenz96", 8}, {"lorenz96-64", 64}, {"lorenz96-256", 256}} {
		pr, err := ByName(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if pr.Name != tc.name || pr.Field.Name != tc.name || pr.Field.Dim != tc.d || pr.P[0] != 8 || pr.Y0[0] != 8.01 || pr.Y0[tc.d-1] != 8 {
			t.Errorf("%s: Name %q, Field.Name %q, Dim %d, P %v, Y0[0] %v", tc.name, pr.Name, pr.Field.Name, pr.Field.Dim, pr.P, pr.Y0[0])
		}
	}
	if got := Lorenz96(40).Name; got != "lorenz96-40" {
		t.Errorf("Lorenz96(40).Name = %q", got)
	}
}

// pollutionSolut is subroutine solut of the test set's pollu.f (Bari
// test set for IVP solvers, revision pollu.F,v 1.2 2006/10/02), its
// Fortran literals copied as they are printed there.
const pollutionSolut = `
      y( 1) = 0.5646255480022769d-01
      y( 2) = 0.1342484130422339d+00
      y( 3) = 0.4139734331099427d-08
      y( 4) = 0.5523140207484359d-02
      y( 5) = 0.2018977262302196d-06
      y( 6) = 0.1464541863493966d-06
      y( 7) = 0.7784249118997964d-01
      y( 8) = 0.3245075353396018d+00
      y( 9) = 0.7494013383880406d-02
      y(10) = 0.1622293157301561d-07
      y(11) = 0.1135863833257075d-07
      y(12) = 0.2230505975721359d-02
      y(13) = 0.2087162882798630d-03
      y(14) = 0.1396921016840158d-04
      y(15) = 0.8964884856898295d-02
      y(16) = 0.4352846369330103d-17
      y(17) = 0.6899219696263405d-02
      y(18) = 0.1007803037365946d-03
      y(19) = 0.1772146513969984d-05
      y(20) = 0.5682943292316392d-04
`

// TestPollutionSolut checks PollutionRef, bit for bit, against the
// published reference solution as printed in pollu.f's solut.
func TestPollutionSolut(t *testing.T) {
	t.Parallel()
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(pollutionSolut), "\n") {
		var i int
		var lit string
		if _, err := fmt.Sscanf(strings.TrimSpace(strings.ReplaceAll(line, "( ", "(")), "y(%d) = %s", &i, &lit); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		v, err := strconv.ParseFloat(strings.Replace(lit, "d", "e", 1), 64)
		if err != nil {
			t.Fatal(err)
		}
		if PollutionRef[i-1] != v {
			t.Errorf("y(%d): solut %s = %v, PollutionRef %v", i, lit, v, PollutionRef[i-1])
		}
		seen++
	}
	if seen != 20 {
		t.Errorf("%d values in solut, want 20", seen)
	}
}

// pollutionJac is jeval of pollu.f (1-based names), with the rate
// constants p = (k1, …, k25); TestPollutionJac checks it against the
// traced field.
func pollutionJac(y, p, J []float64) {
	const n = 20
	for i := range J {
		J[i] = 0
	}
	Y := func(i int) float64 { return y[i-1] }
	k := func(i int) float64 { return p[i-1] }
	set := func(i, j int, v float64) { J[(i-1)*n+j-1] = v }
	set(1, 1, -k(1)-k(10)*Y(11)-k(14)*Y(6)-k(23)*Y(4)-k(24)*Y(19))
	set(1, 11, -k(10)*Y(1)+k(9)*Y(2))
	set(1, 6, -k(14)*Y(1))
	set(1, 4, -k(23)*Y(1)+k(2)*Y(2))
	set(1, 19, -k(24)*Y(1)+k(22))
	set(1, 2, k(2)*Y(4)+k(9)*Y(11)+k(3)*Y(5)+k(12)*Y(10))
	set(1, 13, k(11))
	set(1, 20, k(25))
	set(1, 5, k(3)*Y(2))
	set(1, 10, k(12)*Y(2))

	set(2, 4, -k(2)*Y(2))
	set(2, 5, -k(3)*Y(2))
	set(2, 11, -k(9)*Y(2))
	set(2, 10, -k(12)*Y(2))
	set(2, 19, k(21))
	set(2, 1, k(1))
	set(2, 2, -k(2)*Y(4)-k(3)*Y(5)-k(9)*Y(11)-k(12)*Y(10))

	set(3, 1, k(1))
	set(3, 4, k(17))
	set(3, 16, k(19))
	set(3, 19, k(22))
	set(3, 3, -k(15))

	set(4, 4, -k(2)*Y(2)-k(16)-k(17)-k(23)*Y(1))
	set(4, 2, -k(2)*Y(4))
	set(4, 1, -k(23)*Y(4))
	set(4, 3, k(15))

	set(5, 5, -k(3)*Y(2))
	set(5, 2, -k(3)*Y(5))
	set(5, 7, 2*k(4)+k(6)*Y(6))
	set(5, 6, k(6)*Y(7)+k(20)*Y(17))
	set(5, 9, k(7))
	set(5, 14, k(13))
	set(5, 17, k(20)*Y(6))

	set(6, 6, -k(6)*Y(7)-k(8)*Y(9)-k(14)*Y(1)-k(20)*Y(17))
	set(6, 7, -k(6)*Y(6))
	set(6, 9, -k(8)*Y(6))
	set(6, 1, -k(14)*Y(6))
	set(6, 17, -k(20)*Y(6))
	set(6, 2, k(3)*Y(5))
	set(6, 5, k(3)*Y(2))
	set(6, 16, 2*k(18))

	set(7, 7, -k(4)-k(5)-k(6)*Y(6))
	set(7, 6, -k(6)*Y(7))
	set(7, 14, k(13))

	set(8, 7, k(4)+k(5)+k(6)*Y(6))
	set(8, 6, k(6)*Y(7))
	set(8, 9, k(7))

	set(9, 9, -k(7)-k(8)*Y(6))
	set(9, 6, -k(8)*Y(9))

	set(10, 10, -k(12)*Y(2))
	set(10, 2, -k(12)*Y(10)+k(9)*Y(11))
	set(10, 9, k(7))
	set(10, 11, k(9)*Y(2))

	set(11, 11, -k(9)*Y(2)-k(10)*Y(1))
	set(11, 2, -k(9)*Y(11))
	set(11, 1, -k(10)*Y(11))
	set(11, 9, k(8)*Y(6))
	set(11, 6, k(8)*Y(9))
	set(11, 13, k(11))

	set(12, 11, k(9)*Y(2))
	set(12, 2, k(9)*Y(11))

	set(13, 13, -k(11))
	set(13, 11, k(10)*Y(1))
	set(13, 1, k(10)*Y(11))

	set(14, 14, -k(13))
	set(14, 10, k(12)*Y(2))
	set(14, 2, k(12)*Y(10))

	set(15, 1, k(14)*Y(6))
	set(15, 6, k(14)*Y(1))

	set(16, 16, -k(18)-k(19))
	set(16, 4, k(16))

	set(17, 17, -k(20)*Y(6))
	set(17, 6, -k(20)*Y(17))

	set(18, 17, k(20)*Y(6))
	set(18, 6, k(20)*Y(17))

	set(19, 19, -k(21)-k(22)-k(24)*Y(1))
	set(19, 1, -k(24)*Y(19)+k(23)*Y(4))
	set(19, 4, k(23)*Y(1))
	set(19, 20, k(25))

	set(20, 20, -k(25))
	set(20, 1, k(24)*Y(19))
	set(20, 19, k(24)*Y(1))
}

// TestPollutionJac checks pollutionJac (jeval) against the exact
// Jacobian of the traced field (forward mode, tape.Jacobian) at a state
// where every species is present: they compute the same sums of products,
// so they agree to rounding.
func TestPollutionJac(t *testing.T) {
	t.Parallel()
	pr := Pollution()
	prog, err := pr.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	const d = 20
	wrt := make([]int, d)
	for i := range wrt {
		wrt[i] = 1 + i
	}
	jprog, err := tape.Jacobian(prog, wrt)
	if err != nil {
		t.Fatal(err)
	}
	y := append([]float64(nil), PollutionRef[:]...)
	for i := range y {
		y[i] += 1e-3 * float64(i%3+1)
	}
	J := make([]float64, d*d)
	pollutionJac(y, pr.P, J)
	want := jprog.Eval(nil, append(append([]float64{0}, y...), pr.P...))[d:]
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			a, b := J[i*d+j], want[i*d+j]
			if math.Abs(a-b) > 1e-13*math.Max(math.Abs(a), math.Abs(b)) {
				t.Errorf("∂f%d/∂y%d: jeval %v, traced %v", i+1, j+1, a, b)
			}
		}
	}
}
