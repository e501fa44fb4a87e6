package scan

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// midpointStep is an explicit midpoint step of
// y0' = p·y1 + s·sin(t), y1' = −y0·y1 (D = 2, P = 1, S = 1).
func midpointStep(t *testing.T) *Step {
	t.Helper()
	f := func(tt tape.V, y []tape.V, p, s tape.V) []tape.V {
		return []tape.V{p.Mul(y[1]).Add(s.Mul(tt.Sin())), y[0].Mul(y[1]).Neg()}
	}
	prog, err := tape.Trace("midpoint", []tape.Input{{Name: "t"}, {Name: "h"}, {Name: "y0"}, {Name: "y1"}, {Name: "p"}, {Name: "s", Shared: true}},
		func(in []tape.V) []tape.V {
			tt, h, y, p, s := in[0], in[1], in[2:4], in[4], in[5]
			k1 := f(tt, y, p, s)
			half := h.MulC(0.5)
			ym := []tape.V{y[0].Add(half.Mul(k1[0])), y[1].Add(half.Mul(k1[1]))}
			k2 := f(tt.Add(half), ym, p, s)
			return []tape.V{y[0].Add(h.Mul(k2[0])), y[1].Add(h.Mul(k2[1]))}
		})
	if err != nil {
		t.Fatal(err)
	}
	return &Step{Prog: prog, D: 2, P: 1, S: 1}
}

// raggedProblem builds n trajectories with very different step counts.
func raggedProblem(st *Step, n int, rng *rand.Rand, taps bool) *Problem {
	lens := make([]int, n)
	rows := 0
	for j := range lens {
		lens[j] = 1 + rng.IntN(40)
		if j == 0 {
			lens[j] = 0 // a trajectory with no steps at all
		}
		rows = max(rows, lens[j])
	}
	h := make([]float64, rows*n)
	for s := 0; s < rows; s++ {
		for j := 0; j < n; j++ {
			if s < lens[j] {
				h[s*n+j] = 0.01 + 0.04*rng.Float64()
			} else {
				h[s*n+j] = math.NaN() // past the end: must never be read
			}
		}
	}
	p := &Problem{
		Step:   st,
		Mesh:   Mesh{N: n, Rows: rows, H: h, Len: lens},
		T0:     make([]float64, n),
		Y0:     make([]float64, 2*n),
		P:      make([]float64, n),
		Shared: []float64{0.7},
	}
	for j := 0; j < n; j++ {
		p.T0[j] = 0.3 * float64(j%3)
		p.Y0[j] = 1 + 0.1*rng.Float64()
		p.Y0[n+j] = 0.5 + 0.1*rng.Float64()
		p.P[j] = 0.5 + rng.Float64()
	}
	if taps {
		p.Taps = &Taps{}
		for j := 0; j < n; j++ {
			for k := 0; k < 3; k++ {
				s := rng.IntN(lens[j] + 1)
				hh := 0.0
				if s < lens[j] {
					hh = h[s*n+j] * rng.Float64()
				}
				p.Taps.Traj = append(p.Taps.Traj, j)
				p.Taps.Step = append(p.Taps.Step, s)
				p.Taps.H = append(p.Taps.H, hh)
			}
		}
	}
	return p
}

// plainReplay integrates trajectory j in plain Go, the oracle for Replay.
func plainReplay(p *Problem, j int) (y [2]float64, taps map[int][2]float64) {
	n := p.Mesh.N
	pp, s := p.P[j], p.Shared[0]
	f := func(t float64, y [2]float64) [2]float64 {
		return [2]float64{pp*y[1] + s*math.Sin(t), -(y[0] * y[1])}
	}
	step := func(t, h float64, y [2]float64) [2]float64 {
		k1 := f(t, y)
		half := 0.5 * h
		ym := [2]float64{y[0] + half*k1[0], y[1] + half*k1[1]}
		k2 := f(t+half, ym)
		return [2]float64{y[0] + h*k2[0], y[1] + h*k2[1]}
	}
	y = [2]float64{p.Y0[j], p.Y0[n+j]}
	t := p.T0[j]
	taps = map[int][2]float64{}
	tapAt := func(k int) {
		if p.Taps == nil {
			return
		}
		for i := range p.Taps.Traj {
			if p.Taps.Traj[i] == j && p.Taps.Step[i] == k {
				taps[i] = step(t, p.Taps.H[i], y)
			}
		}
	}
	for k := 0; k < p.Mesh.Len[j]; k++ {
		tapAt(k)
		h := p.Mesh.H[k*n+j]
		y = step(t, h, y)
		t += h
	}
	tapAt(p.Mesh.Len[j])
	return y, taps
}

func TestReplayMatchesPlainGo(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 1))
	st := midpointStep(t)
	for _, n := range []int{1, 7, 300} {
		p := raggedProblem(st, n, rng, true)
		res, err := Replay(nil, p, &Settings{Exec: tape.ExecSettings{BlockSize: 16}})
		if err != nil {
			t.Fatal(err)
		}
		nt := p.Taps.Len()
		for j := 0; j < n; j++ {
			y, taps := plainReplay(p, j)
			for c := 0; c < 2; c++ {
				if got := res.Y[c*n+j]; math.Abs(got-y[c]) > 1e-14*math.Max(1, math.Abs(y[c])) {
					t.Errorf("n=%d traj %d comp %d: want %v, got %v", n, j, c, y[c], got)
				}
			}
			for i, w := range taps {
				for c := 0; c < 2; c++ {
					if got := res.Taps[c*nt+i]; math.Abs(got-w[c]) > 1e-14*math.Max(1, math.Abs(w[c])) {
						t.Errorf("n=%d tap %d comp %d: want %v, got %v", n, i, c, w[c], got)
					}
				}
			}
		}
	}
}

// loss is Σ_j (a_j·y0 + b_j·y1) over final states plus Σ_i c_i·tap_i.
type lossWeights struct{ y, tap []float64 }

func (w lossWeights) eval(r *Result) float64 {
	s := 0.0
	for i, x := range r.Y {
		s += w.y[i] * x
	}
	for i, x := range r.Taps {
		s += w.tap[i] * x
	}
	return s
}

func TestGradMatchesFiniteDifferences(t *testing.T) {
	t.Parallel()
	st := midpointStep(t)
	for _, tc := range []struct {
		name string
		k    int
		taps bool
	}{
		{"store-all", 1, false},
		{"every-2", 2, true},
		{"every-7", 7, true},
		{"auto", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(2, 2))
			n := 9
			p := raggedProblem(st, n, rng, tc.taps)
			set := &Settings{Checkpoint: tc.k, Exec: tape.ExecSettings{BlockSize: 4}}
			sw, err := Forward(p, set)
			if err != nil {
				t.Fatal(err)
			}
			nt := p.Taps.Len()
			w := lossWeights{y: make([]float64, 2*n), tap: make([]float64, 2*nt)}
			for i := range w.y {
				w.y[i] = rng.NormFloat64()
			}
			for i := range w.tap {
				w.tap[i] = rng.NormFloat64()
			}
			g, err := sw.Backward(nil, w.y, w.tap)
			if err != nil {
				t.Fatal(err)
			}
			lossAt := func() float64 {
				r, err := Replay(nil, p, set)
				if err != nil {
					t.Fatal(err)
				}
				return w.eval(r)
			}
			fd := func(x *float64) float64 {
				h := 1e-6 * math.Max(math.Abs(*x), 1)
				old := *x
				*x = old + h
				lp := lossAt()
				*x = old - h
				lm := lossAt()
				*x = old
				return (lp - lm) / (2 * h)
			}
			check := func(what string, i int, got, want float64) {
				if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
					t.Errorf("%s[%d]: want %v (finite differences), got %v", what, i, want, got)
				}
			}
			for i := range p.Y0 {
				check("Y0", i, g.Y0[i], fd(&p.Y0[i]))
			}
			for i := range p.P {
				check("P", i, g.P[i], fd(&p.P[i]))
			}
			check("Shared", 0, g.Shared[0], fd(&p.Shared[0]))
			// A trajectory without steps passes its cotangent straight through.
			if g.Y0[0] != w.y[0] && !tc.taps {
				t.Errorf("empty trajectory: want ∂L/∂y0 = %v, got %v", w.y[0], g.Y0[0])
			}
		})
	}
}

func TestPaddedStepIsIdentity(t *testing.T) {
	t.Parallel()
	st := midpointStep(t)
	n := 3
	p := &Problem{Step: st, Mesh: Mesh{N: n, Rows: 2, H: []float64{0, 0.1, 0, 0, 0.2, 0}, Len: []int{2, 2, 2}},
		T0: make([]float64, n), Y0: []float64{1, 2, 3, 4, 5, 6}, P: []float64{1, 1, 1}, Shared: []float64{0.5}}
	sw, err := Forward(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Trajectory 0 takes two steps of size 0: value and derivative are the identity.
	if got := sw.Result().Y; got[0] != 1 || got[n] != 4 {
		t.Errorf("padded steps changed the state: want (1, 4), got (%v, %v)", got[0], got[n])
	}
	ybar := []float64{1, 0, 0, 0, 0, 0}
	g, err := sw.Backward(nil, ybar, nil)
	if err != nil {
		t.Fatal(err)
	}
	if g.Y0[0] != 1 || g.Y0[n] != 0 || g.P[0] != 0 || g.Shared[0] != 0 {
		t.Errorf("padded steps: want ∂y⁺/∂y = I and zero parameter gradient, got Y0 (%v, %v), P %v, Shared %v", g.Y0[0], g.Y0[n], g.P[0], g.Shared[0])
	}
}

// TestInterpTimes checks that InterpTimes equals Interp at each save time,
// bit for bit, with its kernel and with its Go code, for dimensions and
// term counts on either side of its blocks of four components and pairs
// of save times (and the kernel's quadruples of save times).
func TestInterpTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	defer func(u bool) { useAVX = u }(useAVX)
	for _, avx := range []bool{true, false} {
		useAVX = avx
		for d := 1; d <= 9; d++ {
			for m := 1; m <= 8; m++ {
				for nt := 0; nt <= 21; nt++ {
					y, w := make([]float64, d), make([]float64, m*d)
					for i := range y {
						y[i] = rng.NormFloat64()
					}
					for i := range w {
						w[i] = rng.NormFloat64()
					}
					t0, h := 0.3, 0.7
					ts := make([]float64, nt)
					for k := range ts {
						ts[k] = t0 + h*float64(k+1)/float64(nt+1)
					}
					got := make([]float64, nt*d)
					InterpTimes(got, y, w, ts, t0, h)
					want := make([]float64, d)
					for k := range ts {
						Interp(want, y, w, (ts[k]-t0)/h)
						for c := range want {
							if math.Float64bits(got[k*d+c]) != math.Float64bits(want[c]) {
								t.Fatalf("avx=%v d=%d m=%d nt=%d: save %d component %d = %v, Interp %v", avx, d, m, nt, k, c, got[k*d+c], want[c])
							}
						}
					}
				}
			}
		}
	}
}

// TestAddPowersTimes checks addPowersTimes against addPowers at each save
// time, bit for bit, with its kernel and with its Go code, for dimensions
// and term counts on either side of its blocks of four components (and
// of the eight terms its four-component kernel keeps in registers).
func TestAddPowersTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	defer func(u bool) { useAVX = u }(useAVX)
	for _, avx := range []bool{true, false} {
		useAVX = avx
		for d := 1; d <= 9; d++ {
			for m := 1; m <= 10; m++ {
				for ns := 0; ns <= 4; ns++ {
					g, ts := make([]float64, ns*d), make([]float64, ns)
					for i := range g {
						g[i] = rng.NormFloat64() * math.Exp(3*rng.NormFloat64())
					}
					t0, h := 0.2, 0.9
					for k := range ts {
						ts[k] = t0 + h*float64(k+1)/float64(ns+1)
					}
					got, want := make([]float64, m*d), make([]float64, m*d)
					for i := range got {
						got[i] = rng.NormFloat64()
						want[i] = got[i]
					}
					addPowersTimes(got, g, ts, t0, h, m)
					for k := range ts {
						addPowers(want, g[k*d:(k+1)*d], (ts[k]-t0)/h, m)
					}
					for i := range got {
						if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
							t.Fatalf("avx=%v d=%d m=%d ns=%d: lane[%d] = %v, addPowers %v", avx, d, m, ns, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
