package ode

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
	"github.com/gradsolve-go/gradsolve/tape/lossform"
)

// TestFusedLossSameBits checks the CPU engine's fused loss (lossfuse.go):
// a gradient with interpolated saves is the same bit for bit, loss,
// gradients and saves, with the fused loss as with the old path
// (fuseLoss false), Tsit5 and Vern7, chunks of 16, 24 (rows not padded)
// and the default; the losses of the form take it (fusedForm), the others
// do not, and the sums of squares are folded by the record (with an end
// of the final state, the parameters and the data), of the saves or of
// their residuals against data at the save times (data losses, the
// record writing the residuals); and saves whose cotangents or loss are
// not finite give the old path's error.
func TestFusedLossSameBits(t *testing.T) {
	const n, k = 300, 90
	rng := rand.New(rand.NewPCG(47, 1))
	base := oscillatorSaves(rng, n, k)
	data := make([]float64, n*(k*4+3))
	for i := range data {
		data[i] = rng.NormFloat64()
	}
	squares := func(ys []tape.V) tape.V {
		s := ys[0].Square()
		for _, x := range ys[1:] {
			s = s.Add(x.Square())
		}
		return s
	}
	// residuals returns Σ (ys − d)² (Σ (d − ys)² where reversed), d at
	// the saves' places.
	residuals := func(ys, d []tape.V, reversed bool) tape.V {
		r := func(j int) tape.V {
			if reversed {
				return d[j].Sub(ys[j])
			}
			return ys[j].Sub(d[j])
		}
		s := r(0).Square()
		for j := 1; j < len(ys); j++ {
			s = s.Add(r(j).Square())
		}
		return s
	}
	// weighted returns Σ_j w(j)·(ys_j − d_j)² (Σ_j w(j)·ys_j² for d nil).
	weighted := func(ys, d []tape.V, w func(j int) float64) tape.V {
		r := func(j int) tape.V {
			if d == nil {
				return ys[j].Square().MulC(w(j))
			}
			return ys[j].Sub(d[j]).Square().MulC(w(j))
		}
		s := r(0)
		for j := 1; j < len(ys); j++ {
			s = s.Add(r(j))
		}
		return s
	}
	// big returns the problem with trajectory 7's initial state x (at
	// rest, so its saves are x).
	big := func(x float64) Problem {
		p := base
		p.Y0 = append([]float64(nil), base.Y0...)
		p.P = append([]float64(nil), base.P...)
		copy(p.Y0[7*4:], []float64{x, 0, 0, 0})
		p.P[7] = 0
		return p
	}
	cases := []struct {
		name  string
		p     Problem
		loss  Loss
		fused bool
		folds bool // the record folds ℓ (fusedLoss.squares)
		fails bool
		only  bool // and keeps no copy of the saves (fusedLoss.foldOnly)
	}{
		{"squares", base, Loss{F: func(_, ys, _ []tape.V) tape.V { return squares(ys) }}, true, true, false, true},
		{"squares-mean", base, Loss{Mean: true, F: func(_, ys, _ []tape.V) tape.V { return squares(ys) }}, true, true, false, true},
		{"squares-final-p", base, Loss{Mean: true, FP: func(y, ys, _, p, _ []tape.V) tape.V {
			return y[0].Mul(p[0]).Add(squares(ys)).Add(y[1].Square())
		}}, true, true, false, true},
		{"squares-data-end", base, Loss{Data: data[:n], DataDim: 1, F: func(y, ys, d []tape.V) tape.V {
			return squares(ys).Mul(d[0]).Add(y[2].Mul(d[0]))
		}}, false, false, false, false},
		{"squares-then-data", base, Loss{Data: data[:n], DataDim: 1, F: func(y, ys, d []tape.V) tape.V {
			return squares(ys).Add(y[2].Mul(d[0]).Square())
		}}, true, true, false, true},
		{"weighted-by-component", base, Loss{F: func(_, ys, _ []tape.V) tape.V {
			s := ys[0].Square()
			for j, x := range ys[1:] {
				s = s.Add(x.Square().MulC(1 + float64((j+1)%4)))
			}
			return s
		}}, true, true, false, false},
		// Data losses: Σ (ys − d)² folds over the residuals, which the
		// record writes as the sweep's cotangents.
		{"data", base, Loss{Data: data[:n*k*4], DataDim: k * 4, F: func(_, ys, d []tape.V) tape.V { return residuals(ys, d, false) }}, true, true, false, false},
		{"data-mean", base, Loss{Mean: true, Data: data[:n*k*4], DataDim: k * 4, F: func(_, ys, d []tape.V) tape.V { return residuals(ys, d, false) }}, true, true, false, false},
		{"data-reversed", base, Loss{Data: data[:n*k*4], DataDim: k * 4, F: func(_, ys, d []tape.V) tape.V { return residuals(ys, d, true) }}, true, true, false, false},
		{"data-final-p", base, Loss{Mean: true, Data: data[:n*k*4], DataDim: k * 4, FP: func(y, ys, d, p, _ []tape.V) tape.V {
			return residuals(ys, d, false).Add(y[0].Mul(p[0])).Add(y[1].Sub(d[3]).Square())
		}}, true, true, false, false},
		// One row of data for every save time (σ = 0: a target state),
		// data after the state's (an offset), one row for the ensemble.
		{"data-target", base, Loss{Data: data[:4], DataDim: 4, F: func(_, ys, d []tape.V) tape.V {
			return residuals(ys, slices.Repeat(d, k), false)
		}}, true, true, false, false},
		{"data-offset-final", base, Loss{Data: data[:n*(k*4+3)], DataDim: k*4 + 3, F: func(y, ys, d []tape.V) tape.V {
			return residuals(ys, d[3:], false).Add(y[0].Mul(d[1]))
		}}, true, true, false, false},
		{"data-offset", base, Loss{Data: data[:n*(k*4+3)], DataDim: k*4 + 3, F: func(_, ys, d []tape.V) tape.V { return residuals(ys, d[3:], false) }}, true, true, false, false},
		// Each component against another's column of data.
		{"data-crossed", base, Loss{Data: data[:n*k*4], DataDim: k * 4, F: func(_, ys, d []tape.V) tape.V {
			s := ys[0].Sub(d[1]).Square()
			for j, x := range ys[1:] {
				s = s.Add(x.Sub(d[(j+1)^1]).Square())
			}
			return s
		}}, true, true, false, false},
		// Not of the form: a residual's cube, linear residuals.
		{"data-weighted", base, Loss{Data: data[:n*k*4], DataDim: k * 4, F: func(_, ys, d []tape.V) tape.V {
			return weighted(ys, d, func(j int) float64 { return 0.5 + float64(j%4) })
		}}, true, true, false, false},
		{"data-weighted-mean-final", base, Loss{Mean: true, Data: data[:n*k*4], DataDim: k * 4, FP: func(y, ys, d, p, _ []tape.V) tape.V {
			return weighted(ys, d, func(j int) float64 { return 1 / (1 + float64(j%4)) }).Add(y[0].Mul(p[0]))
		}}, true, true, false, false},
		{"squares-weighted", base, Loss{F: func(_, ys, _ []tape.V) tape.V {
			return weighted(ys, nil, func(j int) float64 { return 3 + float64(j%4) })
		}}, true, true, false, false},
		// Weights by save time (not one function of every save time).
		{"data-weighted-by-time", base, Loss{Data: data[:n*k*4], DataDim: k * 4, F: func(_, ys, d []tape.V) tape.V {
			return weighted(ys, d, func(j int) float64 { return 1 + float64(j/4%3) })
		}}, false, false, false, false},
		{"data-cube", base, Loss{Data: data[:n*k*4], DataDim: k * 4, F: func(_, ys, d []tape.V) tape.V {
			s := ys[0].Sub(d[0]).Square().Mul(ys[0].Sub(d[0]))
			for j, x := range ys[1:] {
				r := x.Sub(d[j+1])
				s = s.Add(r.Square().Mul(r))
			}
			return s
		}}, false, false, false, false},
		{"data-linear", base, Loss{Data: data[:n*k*4], DataDim: k * 4, F: func(_, ys, d []tape.V) tape.V {
			s := ys[0].Sub(d[0])
			for j, x := range ys[1:] {
				s = s.Add(x.Sub(d[j+1]))
			}
			return s
		}}, false, false, false, false},
		{"linear", base, Loss{F: func(_, ys, _ []tape.V) tape.V {
			s := ys[0]
			for _, x := range ys[1:] {
				s = s.Add(x)
			}
			return s
		}}, false, false, false, false},
		// Saves of 1e200: finite cotangents, an infinite loss (the rest's
		// error, then the old path's).
		{"loss-overflows", big(1e200), Loss{F: func(_, ys, _ []tape.V) tape.V { return squares(ys) }}, true, true, true, true},
		// Saves of 1e308: 2·x overflows (past the record's bound).
		{"cotangent-overflows", big(1e308), Loss{F: func(_, ys, _ []tape.V) tape.V { return squares(ys) }}, true, true, true, true},
		{"data-loss-overflows", big(1e200), Loss{Data: data[:n*k*4], DataDim: k * 4, F: func(_, ys, d []tape.V) tape.V { return residuals(ys, d, false) }}, true, true, true, false},
		{"data-cotangent-overflows", big(1e308), Loss{Data: data[:n*k*4], DataDim: k * 4, F: func(_, ys, d []tape.V) tape.V { return residuals(ys, d, true) }}, true, true, true, false},
	}
	defer func() { fuseLoss = true }()
	for _, tc := range cases {
		for _, m := range []Method{Tsit5, Vern7} {
			for _, chunk := range []int{16, 24, 0} {
				what := fmt.Sprintf("%s, %s, chunk %d", tc.name, m.Name(), chunk)
				var gs [2]*Gradient
				var errs [2]error
				for x, fuse := range []bool{true, false} {
					fuseLoss = fuse
					sv, err := NewSolver(base.Field, &Settings{Method: m, RelTol: 1e-6, Exec: tape.ExecSettings{BlockSize: chunk}})
					if err != nil {
						t.Fatal(err)
					}
					if x == 0 && chunk == 0 {
						q, err := sv.validateProblem(&tc.p)
						if err != nil {
							t.Fatal(err)
						}
						lp, err := sv.lossPlan(&tc.loss, q)
						if err != nil {
							t.Fatal(err)
						}
						f := fusedForm(lp.Grad, lossform.Shape{D: 4, K: k, DD: lp.DataDim, P: 1})
						_, scaled := f.barScale(lp.Scale)
						if got := f != nil && scaled; got != tc.fused {
							t.Fatalf("%s: fused %t, want %t", what, got, tc.fused)
						}
						if got := f != nil && f.squares; got != tc.folds {
							t.Fatalf("%s: folded %t, want %t", what, got, tc.folds)
						}
						if got := f != nil && f.foldOnly; got != tc.only {
							t.Fatalf("%s: folded without a copy %t, want %t", what, got, tc.only)
						}
					}
					gs[x], errs[x] = sv.Grad(nil, &tc.p, tc.loss, nil)
				}
				if tc.fails {
					if errs[0] == nil || errs[1] == nil || errs[0].Error() != errs[1].Error() {
						t.Fatalf("%s: errors %v (fused) and %v (old), want the same error", what, errs[0], errs[1])
					}
					continue
				}
				for _, err := range errs {
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
				}
				for _, c := range []struct {
					name      string
					got, want []float64
				}{{"loss", []float64{gs[0].Loss}, []float64{gs[1].Loss}}, {"∂L/∂y0", gs[0].Y0, gs[1].Y0}, {"∂L/∂p", gs[0].P, gs[1].P}, {"saves", gs[0].Solution.Ys, gs[1].Solution.Ys}} {
					for i := range c.want {
						if math.Float64bits(c.got[i]) != math.Float64bits(c.want[i]) {
							t.Fatalf("%s: %s[%d] = %v fused, %v on the old path", what, c.name, i, c.got[i], c.want[i])
						}
					}
				}
			}
		}
	}
}
