package lossform

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// lossGradOf returns the gradient program of the loss term f of shape sh
// with ns shared parameters as package ode builds it (Loss.termGrad):
// inputs y[d], ys[K·d], data[dd], p[np], s[ns] (shared); outputs ℓ and
// its derivatives with respect to all but the data, per trajectory.
func lossGradOf(t *testing.T, sh Shape, ns int, f func(y, ys, data, p, s []tape.V) tape.V) *tape.Program {
	t.Helper()
	var in []tape.Input
	add := func(name string, n int, shared bool) {
		for j := range n {
			in = append(in, tape.Input{Name: fmt.Sprintf("%s[%d]", name, j), Shared: shared})
		}
	}
	add("y", sh.D, false)
	add("ys", sh.K*sh.D, false)
	add("data", sh.DD, false)
	add("p", sh.P, false)
	add("s", ns, true)
	d, w := sh.D, sh.K*sh.D
	term, err := tape.Trace("term", in, func(v []tape.V) []tape.V {
		r := v[d+w+sh.DD:]
		return []tape.V{f(v[:d], v[d:d+w], v[d+w:d+w+sh.DD], r[:sh.P], r[sh.P:])}
	})
	if err != nil {
		t.Fatal(err)
	}
	var wrt []int
	for j := range in {
		if j < d+w || j >= d+w+sh.DD {
			wrt = append(wrt, j)
		}
	}
	g, err := tape.Grad(term, wrt)
	if err != nil {
		t.Fatal(err)
	}
	for k := range g.Outputs {
		g.Outputs[k].Sum = false
	}
	return g
}

// TestSplitSaveCots checks SplitSaveCots on losses of the form (a sum of
// one save time's terms) and not: where it splits, each save time's
// cotangent program, given its inputs at save time k (SaveCots.From),
// returns the gradient program's dL/dys[k,c] bit for bit at random
// inputs, and the rest program its other outputs; the others are not
// split.
func TestSplitSaveCots(t *testing.T) {
	const k = 12
	sq := func(x tape.V) tape.V { return x.Square() }
	cases := []struct {
		name  string
		d, dd int
		f     func(y, ys, data, p, s []tape.V) tape.V
		split bool
	}{
		{"squares", 4, 0, func(_, ys, _, _, _ []tape.V) tape.V {
			s := sq(ys[0])
			for _, x := range ys[1:] {
				s = s.Add(sq(x))
			}
			return s
		}, true},
		{"by-component", 3, 0, func(y, ys, _, _, _ []tape.V) tape.V {
			s := y[0].Mul(y[1])
			for j, x := range ys {
				s = s.Add(sq(x).MulC(1 + float64(j%3)))
			}
			return s
		}, true},
		{"data", 3, 3 * k, func(y, ys, data, p, _ []tape.V) tape.V {
			s := p[1].Mul(y[0])
			for j, x := range ys {
				s = s.Add(sq(x.Sub(data[j])).Mul(p[0]))
			}
			return s
		}, true},
		// Weights by component on residuals: a weight constant comes
		// after save time 0's Sub but before save time k's (the cones
		// compared with their constants first).
		{"data-weighted", 3, 3 * k, func(_, ys, data, _, _ []tape.V) tape.V {
			s := sq(ys[0].Sub(data[0])).MulC(0.5)
			for j, x := range ys[1:] {
				s = s.Add(sq(x.Sub(data[j+1])).MulC(0.5 + float64((j+1)%3)))
			}
			return s
		}, true},
		{"data-row", 2, 2*k + 1, func(_, ys, data, _, _ []tape.V) tape.V {
			// An entry read at every save time (the last) besides the
			// save time's own.
			s := ys[0].Mul(data[0]).Mul(data[2*k])
			for j, x := range ys[1:] {
				s = s.Add(x.Mul(data[j+1]).Mul(data[2*k]))
			}
			return s
		}, true},
		{"shared", 3, 0, func(y, ys, _, _, s []tape.V) tape.V {
			u := s[0].Mul(y[1])
			for _, x := range ys {
				u = u.Add(sq(x).Mul(s[1]).Mul(y[0]))
			}
			return u
		}, true},
		{"linear", 2, 0, func(_, ys, _, _, _ []tape.V) tape.V {
			s := ys[0]
			for _, x := range ys[1:] {
				s = s.Add(x)
			}
			return s
		}, true},
		{"uneven", 3, 0, func(_, ys, _, _, _ []tape.V) tape.V {
			s := sq(ys[0])
			for j, x := range ys[1:] {
				s = s.Add(sq(x).MulC(1 + float64((j+1)%5)))
			}
			return s
		}, false},
		{"square-of-sum", 2, 0, func(_, ys, _, _, _ []tape.V) tape.V {
			s := ys[0]
			for _, x := range ys[1:] {
				s = s.Add(x)
			}
			return sq(s)
		}, false},
		{"neighbours", 2, 0, func(_, ys, _, _, _ []tape.V) tape.V {
			s := ys[0].Mul(ys[2])
			for j := 2; j+2 < len(ys); j += 2 {
				s = s.Add(ys[j].Mul(ys[j+2]))
			}
			return s
		}, false},
		{"reversed-data", 1, k, func(_, ys, data, _, _ []tape.V) tape.V {
			// Save time j's entry k-1-j: a stride of -1.
			s := ys[0].Mul(data[k-1])
			for j, x := range ys[1:] {
				s = s.Add(x.Mul(data[k-2-j]))
			}
			return s
		}, true},
		{"squared-index-data", 1, k * k, func(_, ys, data, _, _ []tape.V) tape.V {
			s := ys[0].Mul(data[0])
			for j, x := range ys[1:] {
				s = s.Add(x.Mul(data[(j+1)*(j+1)]))
			}
			return s
		}, false},
	}
	r := rand.New(rand.NewPCG(44, 4))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const np, ns = 2, 2
			sh := Shape{D: tc.d, K: k, DD: tc.dd, P: np}
			g := lossGradOf(t, sh, ns, tc.f)
			sc, ok := SplitSaveCots(g, sh)
			if ok != tc.split {
				t.Fatalf("split %t, want %t", ok, tc.split)
			}
			if !ok {
				return
			}
			in := make([]float64, len(g.Inputs))
			for j := range in {
				in[j] = 2*r.Float64() - 1
			}
			want := g.Eval(nil, in)
			d, w := tc.d, k*tc.d
			rest := sc.Rest.Eval(nil, in)
			for j, x := range append(want[:1+d:1+d], want[1+d+w:]...) {
				if math.Float64bits(rest[j]) != math.Float64bits(x) {
					t.Errorf("rest output %d: %v, want %v", j, rest[j], x)
				}
			}
			for c, p := range sc.Comp {
				for q := range k {
					var x []float64
					for _, f := range sc.From[c] {
						x = append(x, in[f.In0+f.Step*q])
					}
					x = append(x, in[len(in)-ns:]...)
					got := p.Eval(nil, x)[0]
					if wq := want[1+d+q*d+c]; math.Float64bits(got) != math.Float64bits(wq) {
						t.Errorf("save time %d component %d: %v, want %v", q, c, got, wq)
					}
				}
			}
		})
	}
}
