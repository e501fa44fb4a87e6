package nn

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

func TestNumParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		m    MLP
		want int
	}{
		{"dense 3→4", MLP{{In: 3, Out: 4}}, 3*4 + 4},
		{"dense 1→1", MLP{{In: 1, Out: 1, Act: Tanh}}, 2},
		// 2·16+16 + 16·16+16 + 16·1+1 = 48 + 272 + 17.
		{"2-16-16-1", NewMLP([]int{2, 16, 16, 1}, Tanh, Softplus), 337},
		{"3-8-3", NewMLP([]int{3, 8, 3}, Relu, Identity), 3*8 + 8 + 8*3 + 3},
	} {
		if got := tc.m.NumParams(); got != tc.want {
			t.Errorf("Case %s: NumParams: Want: %d, Got: %d.", tc.name, tc.want, got)
		}
	}
}

func TestNewMLP(t *testing.T) {
	t.Parallel()
	m := NewMLP([]int{2, 5, 7, 3}, Sigmoid, Identity)
	want := MLP{{2, 5, Sigmoid}, {5, 7, Sigmoid}, {7, 3, Identity}}
	if len(m) != len(want) {
		t.Fatalf("len = %d, want %d", len(m), len(want))
	}
	for k := range m {
		if m[k] != want[k] {
			t.Errorf("layer %d = %+v, want %+v", k, m[k], want[k])
		}
	}
	if m.In() != 2 || m.Out() != 3 {
		t.Errorf("In, Out = %d, %d; want 2, 3", m.In(), m.Out())
	}
	for _, sizes := range [][]int{nil, {3}, {2, 0, 1}} {
		if !panics(func() { NewMLP(sizes, Tanh, Identity) }) {
			t.Errorf("NewMLP(%v) did not panic", sizes)
		}
	}
}

func TestActivationString(t *testing.T) {
	t.Parallel()
	for a, want := range map[Activation]string{
		Identity: "identity", Tanh: "tanh", Relu: "relu", Sigmoid: "sigmoid", Softplus: "softplus",
		Activation(200): "Activation(200)",
	} {
		if got := a.String(); got != want {
			t.Errorf("Activation %d: Want: %q, Got: %q.", a, want, got)
		}
	}
}

// act is the plain-Go activation, written independently of package ops.
func act(a Activation, x float64) float64 {
	switch a {
	case Identity:
		return x
	case Tanh:
		return math.Tanh(x)
	case Relu:
		return math.Max(x, 0)
	case Sigmoid:
		return 1 / (1 + math.Exp(-x))
	case Softplus:
		return math.Log1p(math.Exp(x))
	}
	panic("bad activation")
}

// forward is a plain float64 forward pass of m with parameters w.
func forward(m MLP, w, x []float64) []float64 {
	off := 0
	for _, l := range m {
		y := make([]float64, l.Out)
		for i := range y {
			s := w[off+l.Out*l.In+i] // bias
			for j := 0; j < l.In; j++ {
				s += w[off+i*l.In+j] * x[j]
			}
			y[i] = act(l.Act, s)
		}
		off += l.NumParams()
		x = y
	}
	return x
}

// trace traces m with inputs x (per trajectory) then w (shared).
func trace(t *testing.T, m MLP) *tape.Program {
	t.Helper()
	var in []tape.Input
	for i := 0; i < m.In(); i++ {
		in = append(in, tape.Input{Name: "x"})
	}
	for i := 0; i < m.NumParams(); i++ {
		in = append(in, tape.Input{Name: "w", Shared: true})
	}
	p, err := tape.Trace("mlp", in, func(v []tape.V) []tape.V {
		return m.Apply(v[m.In():], v[:m.In()])
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApply(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct {
		name string
		m    MLP
	}{
		{"identity", MLP{{In: 3, Out: 2}}},
		{"tanh", MLP{{In: 3, Out: 4, Act: Tanh}}},
		{"relu", MLP{{In: 4, Out: 6, Act: Relu}}},
		{"sigmoid", MLP{{In: 2, Out: 3, Act: Sigmoid}}},
		{"softplus", MLP{{In: 2, Out: 3, Act: Softplus}}},
		{"2-16-16-1 tanh softplus", NewMLP([]int{2, 16, 16, 1}, Tanh, Softplus)},
		{"3-8-8-3 relu identity", NewMLP([]int{3, 8, 8, 3}, Relu, Identity)},
		{"1-4-2 sigmoid tanh", NewMLP([]int{1, 4, 2}, Sigmoid, Tanh)},
	} {
		p := trace(t, tc.m)
		for trial := 0; trial < 5; trial++ {
			// Random weights of scale 1 (not Init's), so activations see
			// arguments of both signs and several magnitudes.
			w := make([]float64, tc.m.NumParams())
			for i := range w {
				w[i] = 2*rng.Float64() - 1
			}
			x := make([]float64, tc.m.In())
			for i := range x {
				x[i] = 4*rng.Float64() - 2
			}
			got := p.Eval(nil, append(append([]float64(nil), x...), w...))
			want := forward(tc.m, w, x)
			if len(got) != len(want) {
				t.Fatalf("Case %s: %d outputs, want %d", tc.name, len(got), len(want))
			}
			for i := range want {
				// The traced Dot may sum in another order than forward;
				// allow a few ulps of the largest output.
				if d := math.Abs(got[i] - want[i]); d > 1e-14*math.Max(1, math.Abs(want[i])) {
					t.Errorf("Case %s trial %d: output %d: Want: %v, Got: %v.", tc.name, trial, i, want[i], got[i])
				}
			}
		}
	}
}

func TestApplyPanics(t *testing.T) {
	t.Parallel()
	m := NewMLP([]int{2, 3, 1}, Tanh, Identity)
	for _, tc := range []struct {
		name   string
		nx, nw int
		m      MLP
		substr string
	}{
		{"short w", 2, m.NumParams() - 1, m, "len(w)"},
		{"long x", 3, m.NumParams(), m, "len(x)"},
		{"no layers", 2, 0, MLP{}, "no layers"},
		{"unchained", 2, 9 + 5, MLP{{In: 2, Out: 3}, {In: 4, Out: 1}}, "layer 1 has 4 inputs"},
	} {
		in := make([]tape.Input, tc.nx+tc.nw)
		_, err := tape.Trace("bad", in, func(v []tape.V) []tape.V {
			return tc.m.Apply(v[tc.nx:], v[:tc.nx])
		})
		if err == nil || !strings.Contains(err.Error(), "nn: ") || !strings.Contains(err.Error(), tc.substr) {
			t.Errorf("Case %s: error %v, want one containing %q", tc.name, err, tc.substr)
		}
	}
	_, err := tape.Trace("bad", make([]tape.Input, 3), func(v []tape.V) []tape.V {
		return Dense{In: 2, Out: 1}.Apply(v[:2], v[2:])
	})
	if err == nil || !strings.Contains(err.Error(), "Dense{In: 2, Out: 1}.Apply: len(x) = 1") {
		t.Errorf("Dense.Apply with a short x: error %v", err)
	}
}

func TestInit(t *testing.T) {
	t.Parallel()
	m := NewMLP([]int{2, 16, 16, 1}, Tanh, Softplus)
	a := m.Init(nil, rand.New(rand.NewPCG(7, 7)))
	b := make([]float64, m.NumParams())
	if got := m.Init(b, rand.New(rand.NewPCG(7, 7))); &got[0] != &b[0] {
		t.Errorf("Init did not return dst")
	}
	c := m.Init(nil, rand.New(rand.NewPCG(8, 8)))
	same, differ := true, false
	for i := range a {
		same = same && a[i] == b[i]
		differ = differ || a[i] != c[i]
	}
	if !same {
		t.Errorf("Init with the same seed gave different parameters")
	}
	if !differ {
		t.Errorf("Init with different seeds gave the same parameters")
	}
	off := 0
	for k, l := range m {
		lim := math.Sqrt(6 / float64(l.In+l.Out))
		for i, w := range a[off : off+l.In*l.Out] {
			if math.Abs(w) > lim {
				t.Errorf("layer %d weight %d = %v outside ±%v", k, i, w, lim)
			}
		}
		for i, bias := range a[off+l.In*l.Out : off+l.NumParams()] {
			if bias != 0 {
				t.Errorf("layer %d bias %d = %v, want 0", k, i, bias)
			}
		}
		off += l.NumParams()
	}
	if !panics(func() { m.Init(make([]float64, 3), rand.New(rand.NewPCG(1, 1))) }) {
		t.Errorf("Init with a short dst did not panic")
	}
	if !panics(func() { m.Init(nil, nil) }) {
		t.Errorf("Init with a nil rng did not panic")
	}
	// Layers of size less than 1: a panic naming the layer (not an empty
	// or negative-length vector).
	for _, bad := range []MLP{{{In: 0, Out: 0}}, {{In: -2, Out: 3}}, {{In: 2, Out: 3}, {In: 3, Out: 0}}} {
		msg := func() (msg any) {
			defer func() { msg = recover() }()
			bad.Init(nil, rand.New(rand.NewPCG(1, 1)))
			return nil
		}()
		if s, ok := msg.(string); !ok || !strings.Contains(s, "nn: MLP.Init: layer") || !strings.Contains(s, "at least 1") {
			t.Errorf("Init of %v: panic %v, want one naming the layer whose size is less than 1", bad, msg)
		}
	}
}

// TestInitScale checks the Glorot variance: U(−a, a) with a² = 6/(In+Out)
// has variance a²/3 = 2/(In+Out). With 200·300 = 60 000 draws the sample
// variance has relative standard error √(0.8/60000) ≈ 0.0037 (the excess
// kurtosis of a uniform is −1.2), so 3% is over 8 standard errors.
func TestInitScale(t *testing.T) {
	t.Parallel()
	m := MLP{{In: 200, Out: 300, Act: Tanh}}
	w := m.Init(nil, rand.New(rand.NewPCG(1, 1)))[:200*300]
	var mean, sq float64
	for _, x := range w {
		mean += x
		sq += x * x
	}
	mean /= float64(len(w))
	v := sq/float64(len(w)) - mean*mean
	want := 2.0 / (200 + 300)
	if math.Abs(v-want) > 0.03*want {
		t.Errorf("weight variance: Want: %v, Got: %v.", want, v)
	}
	// The mean's standard error is √(want/60000) ≈ 2.6e-4.
	if math.Abs(mean) > 2e-3 {
		t.Errorf("weight mean = %v, want about 0", mean)
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}
