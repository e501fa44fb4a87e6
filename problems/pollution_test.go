package problems

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// pollutionRef follows feval of pollu.f (Bari test set; 1-based names),
// with the rate constants p = (k1, …, k25).
func pollutionRef(y, p, _ []float64) []float64 {
	Y := func(i int) float64 { return y[i-1] }
	k := func(i int) float64 { return p[i-1] }
	var r [26]float64
	r[1] = k(1) * Y(1)
	r[2] = k(2) * Y(2) * Y(4)
	r[3] = k(3) * Y(5) * Y(2)
	r[4] = k(4) * Y(7)
	r[5] = k(5) * Y(7)
	r[6] = k(6) * Y(7) * Y(6)
	r[7] = k(7) * Y(9)
	r[8] = k(8) * Y(9) * Y(6)
	r[9] = k(9) * Y(11) * Y(2)
	r[10] = k(10) * Y(11) * Y(1)
	r[11] = k(11) * Y(13)
	r[12] = k(12) * Y(10) * Y(2)
	r[13] = k(13) * Y(14)
	r[14] = k(14) * Y(1) * Y(6)
	r[15] = k(15) * Y(3)
	r[16] = k(16) * Y(4)
	r[17] = k(17) * Y(4)
	r[18] = k(18) * Y(16)
	r[19] = k(19) * Y(16)
	r[20] = k(20) * Y(17) * Y(6)
	r[21] = k(21) * Y(19)
	r[22] = k(22) * Y(19)
	r[23] = k(23) * Y(1) * Y(4)
	r[24] = k(24) * Y(19) * Y(1)
	r[25] = k(25) * Y(20)
	return []float64{
		-r[1] - r[10] - r[14] - r[23] - r[24] + r[2] + r[3] + r[9] + r[11] + r[12] + r[22] + r[25],
		-r[2] - r[3] - r[9] - r[12] + r[1] + r[21],
		-r[15] + r[1] + r[17] + r[19] + r[22],
		-r[2] - r[16] - r[17] - r[23] + r[15],
		-r[3] + r[4] + r[4] + r[6] + r[7] + r[13] + r[20],
		-r[6] - r[8] - r[14] - r[20] + r[3] + r[18] + r[18],
		-r[4] - r[5] - r[6] + r[13],
		r[4] + r[5] + r[6] + r[7],
		-r[7] - r[8],
		-r[12] + r[7] + r[9],
		-r[9] - r[10] + r[8] + r[11],
		r[9],
		-r[11] + r[10],
		-r[13] + r[12],
		r[14],
		-r[18] - r[19] + r[16],
		-r[20],
		r[20],
		-r[21] - r[22] - r[24] + r[23] + r[25],
		-r[25] + r[24],
	}
}

// TestPollution checks the transcription of POLL: the rate constants and
// the initial state against pollu.f's values as printed there (k1 = .35d0,
// …), the conservation y17 + y18 = 0.007 of the reference solution, and
// the published y(60) against an independent solve of the plain-Go field
// (pollutionRef, which TestFields checks against the traced one) with
// internal/refode's Radau5 at a pure relative tolerance of 1e-12. Radau5's
// Newton matrix uses the traced field's Jacobian (tape.Jacobian), which
// affects its convergence only, not its solution.
func TestPollution(t *testing.T) {
	t.Parallel()
	pr := Pollution()
	k := []float64{.35e0, .266e2, .123e5, .86e-3, .82e-3, .15e5, .13e-3, .24e5, .165e5, .9e4,
		.22e-1, .12e5, .188e1, .163e5, .48e7, .35e-3, .175e-1, .1e9, .444e12, .124e4,
		.21e1, .578e1, .474e-1, .178e4, .312e1}
	for i := range k {
		if pr.P[i] != k[i] {
			t.Errorf("k%d: Want: %v, Got: %v.", i+1, k[i], pr.P[i])
		}
	}
	y0 := map[int]float64{2: 0.2, 4: 0.04, 7: 0.1, 8: 0.3, 9: 0.01, 17: 0.007}
	for i, v := range pr.Y0 {
		if v != y0[i+1] {
			t.Errorf("y%d(0): Want: %v, Got: %v.", i+1, y0[i+1], v)
		}
	}
	if s := PollutionRef[16] + PollutionRef[17]; math.Abs(s-0.007) > 1e-17 {
		t.Errorf("PollutionRef y17 + y18 = %v, want 0.007 (conserved)", s)
	}

	prog, err := pr.Field.Program()
	if err != nil {
		t.Fatal(err)
	}
	d := pr.Field.Dim
	wrt := make([]int, d)
	for i := range wrt {
		wrt[i] = 1 + i
	}
	jprog, err := tape.Jacobian(prog, wrt)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]float64, 1+d+len(pr.P))
	copy(in[1+d:], pr.P)
	f := func(_ float64, y, dy []float64) { copy(dy, pollutionRef(y, pr.P, nil)) }
	jac := func(tt float64, y, J []float64) {
		in[0] = tt
		copy(in[1:], y)
		copy(J, jprog.Eval(nil, in)[d:])
	}
	ys, err := refode.Radau5(f, jac, 0, pr.Y0, []float64{pr.T1}, 1e-12, 1e-30)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i, want := range PollutionRef {
		worst = math.Max(worst, math.Abs(ys[0][i]-want)/want)
		if got := ys[0][i]; !(math.Abs(got-want) <= 1e-9*math.Abs(want)) {
			t.Errorf("y%d(60): Radau5 %v, published %v (relative difference %.2g)", i+1, got, want, math.Abs(got-want)/want)
		}
	}
	t.Logf("Radau5 at rtol 1e-12 against the published y(60): largest relative difference %.2g", worst)
}
