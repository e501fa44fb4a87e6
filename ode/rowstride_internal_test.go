package ode

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// TestRowStride checks the padded distance between save-major rows: whole
// cache lines of float64s, an odd number of them.
func TestRowStride(t *testing.T) {
	for _, c := range []struct{ width, want int }{{1, 8}, {8, 8}, {9, 24}, {16, 24}, {24, 24}, {250, 264}, {256, 264}, {264, 264}, {512, 520}} {
		if got := rowStride(c.width); got != c.want {
			t.Errorf("rowStride(%d) = %d, want %d", c.width, got, c.want)
		}
	}
}

// TestPaddedRowsSameBits checks that a gradient with interpolated saves
// is the same bit for bit whether the record's save-major copy and the
// loss's saves' cotangents are laid out in padded rows (rowStride) or in
// rows of the chunk's width: Tsit5 and Vern7, several saves in most
// steps, a scaled loss (Mean) of saved and final states and parameters,
// chunks whose width is padded (16, 256) and one that is not (24).
func TestPaddedRowsSameBits(t *testing.T) {
	const n, k = 300, 90
	p := oscillatorSaves(rand.New(rand.NewPCG(35, 2)), n, k)
	loss := Loss{Name: "mixed", Mean: true, FP: func(y, ys, _, p, _ []tape.V) tape.V {
		s := y[0].Mul(p[0])
		for i, x := range ys {
			if i%3 == 0 {
				s = s.Add(x.Square())
			} else {
				s = s.Add(x.Mul(ys[(i+5)%len(ys)]))
			}
		}
		return s
	}}
	defer func() { padRows = true }()
	for _, m := range []Method{Tsit5, Vern7} {
		for _, chunk := range []int{16, 24, 0} {
			var gs [2]*Gradient
			for x, pad := range []bool{true, false} {
				padRows = pad
				sv, err := NewSolver(p.Field, &Settings{Method: m, RelTol: 1e-6, Exec: tape.ExecSettings{BlockSize: chunk}})
				if err != nil {
					t.Fatal(err)
				}
				if gs[x], err = sv.Grad(nil, &p, loss, nil); err != nil {
					t.Fatal(err)
				}
			}
			what := fmt.Sprintf("%s, chunk %d", m.Name(), chunk)
			if s := gs[0].Solution.Stats.Accepted[0]; k/int(s) < 2 {
				t.Fatalf("%s: %d steps for %d save times: too few saves a step", what, s, k)
			}
			for _, c := range []struct {
				name      string
				got, want []float64
			}{{"loss", []float64{gs[0].Loss}, []float64{gs[1].Loss}}, {"∂L/∂y0", gs[0].Y0, gs[1].Y0}, {"∂L/∂p", gs[0].P, gs[1].P}, {"saves", gs[0].Solution.Ys, gs[1].Solution.Ys}} {
				for i := range c.want {
					if math.Float64bits(c.got[i]) != math.Float64bits(c.want[i]) {
						t.Fatalf("%s: %s[%d] = %v in padded rows, %v unpadded", what, c.name, i, c.got[i], c.want[i])
					}
				}
			}
		}
	}
}

// oscillatorSaves is a problem of n coupled oscillators (Dim 4, one
// parameter each) from random states and parameters drawn from rng, on
// [0, 3] with k save times from T0 to T1: the fused and padded rows'
// same-bits tests' problem.
func oscillatorSaves(rng *rand.Rand, n, k int) Problem {
	osc := Field{Name: "oscillator", Dim: 4, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[1], y[0].Mul(p[0]).Neg(), y[3], y[2].Mul(y[0]).Neg()}
	}}
	p := Problem{Field: osc, N: n, Y0: make([]float64, 4*n), P: make([]float64, n), T1: 3, SaveAt: make([]float64, k)}
	for i := range p.Y0 {
		p.Y0[i] = rng.NormFloat64()
	}
	for i := range p.P {
		p.P[i] = 1 + rng.Float64()
	}
	for j := range p.SaveAt {
		p.SaveAt[j] = 3 * float64(j) / float64(k-1) // from T0 to T1
	}
	return p
}
