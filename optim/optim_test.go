package optim

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The three-step trace of Adam and AdamW. lr = 0.1, β1 = 0.9, β2 = 0.999,
// ε = 1e-8, θ0 = (1, −2), and the gradients are given (not computed from
// θ), so every number below follows from the update rule by hand:
//
//	step 1, g = (0.5, −1):
//	  m = 0.1·g = (0.05, −0.1)              m̂ = m/0.1   = (0.5, −1)
//	  v = 0.001·g² = (0.00025, 0.001)       v̂ = v/0.001 = (0.25, 1)
//	  θ = θ0 − 0.1·m̂/(√v̂ + ε) = (1 − 0.05/0.50000001, −2 + 0.1/1.00000001)
//	    = (0.900000002, −1.900000001)  (to 9 digits)
//	step 2, g = (0.25, 2):
//	  m = 0.9·m + 0.1·g = (0.07, 0.11)      m̂ = m/0.19 = (7/19, 11/19)
//	  v = 0.999·v + 0.001·g² = (0.00031225, 0.004999)
//	                                        v̂ = v/0.001999
//	  θ = θ − 0.1·m̂/(√v̂ + ε)
//	step 3, g = (−1, 0.5):
//	  m = (−0.037, 0.149)                   m̂ = m/0.271
//	  v = (0.00131193775, 0.005244001)      v̂ = v/0.002997001
//	  θ = θ − 0.1·m̂/(√v̂ + ε)
//
// AdamW with λ = 0.01 also subtracts lr·λ·θ = 0.001·θ (θ before the step)
// each step: step 1 gives (1 − 0.001 − 0.099999998, −2 + 0.002 +
// 0.099999999) = (0.899000002, −1.898000001). The values were carried to
// 50 digits (Python's decimal module) and rounded to float64.
var (
	traceGrads = [3][2]float64{{0.5, -1}, {0.25, 2}, {-1, 0.5}}
	adamTrace  = [3][2]float64{
		{0.90000000199999996000000079999998400000031999999360, -1.9000000009999999900000000999999990000000099999999},
		{0.80678204047746166895781541002875333024565473173026, -1.9366103534720750882055071489271492983200226938668},
		{0.82741774288541075572451074681639841079924317254086, -1.9781754731467740467929712677579061871058689281268},
	}
	adamWTrace = [3][2]float64{
		{0.89900000199999996000000079999998400000031999999360, -1.8980000009999999900000000999999990000000099999999},
		{0.80488304047546166899781540922875334624565441173026, -1.9327123534710750882155071488271492993200226838668},
		{0.82471385984293529409551293060716967345299719812913, -1.9723447607923029717147557605090790388065488954429},
	}
	// The moments after step 3 (the same for both).
	traceM = [2]float64{-0.037, 0.149}
	traceV = [2]float64{0.00131193775, 0.005244001}
)

func TestAdamTrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opt  Optimizer
		want [3][2]float64
	}{
		{"adam", &Adam{LearnRate: 0.1}, adamTrace},
		{"adam explicit", &Adam{LearnRate: 0.1, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}, adamTrace},
		{"adam schedule", &Adam{LearnRate: 7, Schedule: Constant(0.1)}, adamTrace},
		{"adamw", &AdamW{LearnRate: 0.1, WeightDecay: 0.01}, adamWTrace},
		{"adamw default decay", &AdamW{LearnRate: 0.1}, adamWTrace},
	} {
		theta := []float64{1, -2}
		for k, g := range traceGrads {
			grad := []float64{g[0], g[1]}
			tc.opt.Step(theta, grad)
			if grad[0] != g[0] || grad[1] != g[1] {
				t.Errorf("Case %s: step %d modified grad", tc.name, k+1)
			}
			for i := range theta {
				// float64 rounds the constants (1 − 0.9 is 0.09999999999999998,
				// 0.999ᵗ and the bias corrections lose a few ulps more), and the
				// quotient m̂/√v̂ passes those on: 1e-14 relative is a few
				// dozen ulps, far below any mistake in the rule.
				if d := math.Abs(theta[i] - tc.want[k][i]); d > 1e-14*math.Abs(tc.want[k][i]) {
					t.Errorf("Case %s: step %d θ[%d]: Want: %.17g, Got: %.17g.", tc.name, k+1, i, tc.want[k][i], theta[i])
				}
			}
		}
		if tc.opt.Steps() != 3 {
			t.Errorf("Case %s: Steps() = %d, want 3", tc.name, tc.opt.Steps())
		}
		st := tc.opt.State()
		for i := range 2 {
			if math.Abs(st.Moments["m"][i]-traceM[i]) > 1e-14*math.Abs(traceM[i]) || math.Abs(st.Moments["v"][i]-traceV[i]) > 1e-14*traceV[i] {
				t.Errorf("Case %s: moments %v %v, want m %v v %v", tc.name, st.Moments["m"], st.Moments["v"], traceM, traceV)
			}
		}
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	var a Adam
	if a.Rate() != 1e-3 {
		t.Errorf("Adam zero value rate %v, want 1e-3", a.Rate())
	}
	// The first Adam step moves each coordinate by lr·g/(|g|+ε), about lr.
	x := []float64{0, 0}
	a.Step(x, []float64{3, -0.2})
	want := []float64{-1e-3 * 3 / (3 + 1e-8), 1e-3 * 0.2 / (0.2 + 1e-8)}
	for i := range x {
		if math.Abs(x[i]-want[i]) > 1e-18 {
			t.Errorf("Adam zero value step: x[%d] = %v, want %v", i, x[i], want[i])
		}
	}
	var s SGD
	if s.Rate() != 1e-2 {
		t.Errorf("SGD zero value rate %v, want 1e-2", s.Rate())
	}
}

func TestSGD(t *testing.T) {
	t.Parallel()
	g := [][]float64{{1, -2}, {0.5, 1}, {-1, 0}}
	for _, tc := range []struct {
		name string
		opt  SGD
		want []float64
	}{
		// θ − lr·Σg = (0, 0) − 0.1·(0.5, −1).
		{"plain", SGD{LearnRate: 0.1}, []float64{-0.05, 0.1}},
		// b1 = g1 = (1, −2); b2 = 0.5·b1 + g2 = (1, 0); b3 = 0.5·b2 + g3 = (−0.5, 0);
		// θ = −0.1·(b1 + b2 + b3) = −0.1·(1.5, −2).
		{"momentum", SGD{LearnRate: 0.1, Momentum: 0.5}, []float64{-0.15, 0.2}},
		// Nesterov steps use g + μ·b: (1.5, −3), (1, 1), (−1.25, 0); sum (1.25, −2).
		{"nesterov", SGD{LearnRate: 0.1, Momentum: 0.5, Nesterov: true}, []float64{-0.125, 0.2}},
	} {
		x := []float64{0, 0}
		for _, gk := range g {
			tc.opt.Step(x, gk)
		}
		for i := range x {
			if math.Abs(x[i]-tc.want[i]) > 1e-15 {
				t.Errorf("Case %s: Want: %v, Got: %v.", tc.name, tc.want, x)
				break
			}
		}
	}
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	wc := WarmupCosine{Init: 0, Peak: 1, Final: 0.1, Warmup: 10, Steps: 110}
	for _, tc := range []struct {
		name string
		s    Schedule
		k    int
		want float64
	}{
		{"constant", Constant(0.3), 1000, 0.3},
		{"exp k=0", Exponential{Init: 2, Decay: 0.5}, 0, 2},
		{"exp k=3", Exponential{Init: 2, Decay: 0.5}, 3, 0.25},
		{"exp every 10, k=5", Exponential{Init: 1, Decay: 0.25, Every: 10}, 5, 0.5},
		{"exp staircase k=19", Exponential{Init: 1, Decay: 0.25, Every: 10, Staircase: true}, 19, 0.25},
		{"warmup start", wc, 0, 0},
		{"warmup middle", wc, 5, 0.5},
		{"peak", wc, 10, 1},
		// Half way through the cosine: Final + (Peak−Final)/2.
		{"cosine middle", wc, 60, 0.55},
		{"end", wc, 110, 0.1},
		{"after", wc, 500, 0.1},
	} {
		if got := tc.s.Rate(tc.k); math.Abs(got-tc.want) > 1e-15 {
			t.Errorf("Case %s: Rate(%d): Want: %v, Got: %v.", tc.name, tc.k, tc.want, got)
		}
	}
	// The optimiser asks the schedule with the number of steps taken.
	o := &SGD{Schedule: Exponential{Init: 1, Decay: 0.5}}
	x := []float64{0}
	for k := range 3 {
		if r := o.Rate(); r != math.Pow(0.5, float64(k)) {
			t.Errorf("SGD rate before step %d = %v", k, r)
		}
		o.Step(x, []float64{1})
	}
	if x[0] != -1.75 {
		t.Errorf("SGD with a schedule: x = %v, want −(1 + 0.5 + 0.25)", x[0])
	}
}

func TestClipNorm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		g        []float64
		max      float64
		wantNorm float64
		want     []float64
	}{
		{"clipped", []float64{3, 4}, 1, 5, []float64{0.6, 0.8}},
		{"unchanged", []float64{3, 4}, 5, 5, []float64{3, 4}},
		{"below", []float64{0.3, -0.4}, 1, 0.5, []float64{0.3, -0.4}},
		{"zero", []float64{0, 0}, 1, 0, []float64{0, 0}},
		{"huge", []float64{3e200, 4e200}, 10, 5e200, []float64{6, 8}},
	} {
		g := append([]float64(nil), tc.g...)
		n := ClipNorm(g, tc.max)
		if math.Abs(n-tc.wantNorm) > 1e-15*tc.wantNorm {
			t.Errorf("Case %s: norm: Want: %v, Got: %v.", tc.name, tc.wantNorm, n)
		}
		for i := range g {
			if math.Abs(g[i]-tc.want[i]) > 1e-15 {
				t.Errorf("Case %s: Want: %v, Got: %v.", tc.name, tc.want, g)
				break
			}
		}
	}
	if !panics(func() { ClipNorm([]float64{1}, 0) }) {
		t.Error("ClipNorm with maxNorm 0 did not panic")
	}
}

func TestStateRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 1))
	n := 50
	for _, mk := range []func() Optimizer{
		func() Optimizer { return &Adam{LearnRate: 0.01} },
		func() Optimizer { return &AdamW{LearnRate: 0.01, WeightDecay: 0.1} },
		func() Optimizer { return &SGD{LearnRate: 0.01, Momentum: 0.9, Nesterov: true} },
		func() Optimizer { return &SGD{LearnRate: 0.01} },
	} {
		a, b := mk(), mk()
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20))
		}
		grad := func() []float64 {
			g := make([]float64, n)
			for i := range g {
				g[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10))
			}
			return g
		}
		for range 7 {
			a.Step(x, grad())
		}
		var buf bytes.Buffer
		if err := SaveState(&buf, a); err != nil {
			t.Fatal(err)
		}
		text := buf.String()
		if err := LoadState(strings.NewReader(text), b); err != nil {
			t.Fatalf("%s: %v", a.State().Kind, err)
		}
		sa, sb := a.State(), b.State()
		if sa.Step != sb.Step || sa.N != sb.N || len(sa.Moments) != len(sb.Moments) {
			t.Fatalf("%s: reloaded state %d/%d/%d, want %d/%d/%d", sa.Kind, sb.Step, sb.N, len(sb.Moments), sa.Step, sa.N, len(sa.Moments))
		}
		for name, m := range sa.Moments {
			for i := range m {
				if math.Float64bits(m[i]) != math.Float64bits(sb.Moments[name][i]) {
					t.Fatalf("%s: moment %s[%d] = %v after reload, want %v bit for bit", sa.Kind, name, i, sb.Moments[name][i], m[i])
				}
			}
		}
		// The two continue identically.
		xa, xb := append([]float64(nil), x...), append([]float64(nil), x...)
		g := grad()
		a.Step(xa, g)
		b.Step(xb, g)
		for i := range xa {
			if math.Float64bits(xa[i]) != math.Float64bits(xb[i]) {
				t.Fatalf("%s: after reload, step differs at %d: %v vs %v", sa.Kind, i, xa[i], xb[i])
			}
		}
		// A state of another kind is refused.
		other := Optimizer(&Adam{})
		if sa.Kind == "adam" {
			other = &SGD{}
		}
		if err := LoadState(strings.NewReader(text), other); err == nil {
			t.Errorf("%s state loaded into a %s", sa.Kind, other.State().Kind)
		}
	}
}

func TestPanics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"length", func() { (&Adam{}).Step([]float64{1}, []float64{1, 2}) }},
		{"resize", func() {
			var a Adam
			a.Step([]float64{1}, []float64{1})
			a.Step([]float64{1, 2}, []float64{1, 2})
		}},
	} {
		if !panics(tc.f) {
			t.Errorf("Case %s: did not panic", tc.name)
		}
	}
}

// TestBadScheduleRate checks that a schedule with invalid constants gives
// NaN rates (which the optimisers refuse) and a Validate error.
func TestBadScheduleRate(t *testing.T) {
	t.Parallel()
	for _, s := range []interface {
		Schedule
		Validate() error
	}{WarmupCosine{Warmup: 5, Steps: 2}, WarmupCosine{Warmup: -1, Steps: 2}, Exponential{Init: 1, Decay: -1}, Exponential{Init: math.NaN(), Decay: 0.5}} {
		if r := s.Rate(0); !math.IsNaN(r) && s.Rate(1) >= 0 {
			t.Errorf("%#v: Rate(0) = %v, want NaN or negative", s, r)
		}
		if s.Validate() == nil {
			t.Errorf("%#v: Validate = nil", s)
		}
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}
