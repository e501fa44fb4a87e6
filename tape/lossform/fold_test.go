package lossform

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// foldValue evaluates lf's fold over K save times at the gradient
// program's inputs in (shared ones last, ns of them): first at save time
// 0, next at 1 ... K-1, then end.
func foldValue(lf *Fold, in []float64, K, ns int) float64 {
	x := func(acc []float64, from []In, k int) []float64 {
		for _, f := range from {
			acc = append(acc, in[f.In0+f.Step*k])
		}
		return append(acc, in[len(in)-ns:]...)
	}
	acc := lf.First.Eval(nil, x(nil, lf.FirstFrom, 0))[0]
	for k := 1; k < K; k++ {
		acc = lf.Next.Eval(nil, x([]float64{acc}, lf.NextFrom, k))[0]
	}
	return lf.End.Eval(nil, x([]float64{acc}, lf.EndFrom, 0))[0]
}

// TestSplitFold checks SplitFold on losses whose value is a left
// fold over the save times and on losses whose value is not (or whose
// fold reads the final state before the last save time): where it
// splits, the fold (first, next at each save time, end) returns the
// gradient program's ℓ bit for bit at random inputs, and rest its other
// outputs; and likewise on the program SplitSaveCots leaves (rest), the
// one the kernel folds.
func TestSplitFold(t *testing.T) {
	sq := func(x tape.V) tape.V { return x.Square() }
	cases := []struct {
		name  string
		d, dd int // dd in save times (dd·K data entries) plus one
		f     func(k int) func(y, ys, data, p, s []tape.V) tape.V
		fold  bool
	}{
		{"squares", 4, 0, func(int) func(y, ys, data, p, s []tape.V) tape.V {
			return func(_, ys, _, _, _ []tape.V) tape.V {
				s := sq(ys[0])
				for _, x := range ys[1:] {
					s = s.Add(sq(x))
				}
				return s
			}
		}, true},
		{"weighted", 3, 0, func(int) func(y, ys, data, p, s []tape.V) tape.V {
			return func(_, ys, _, _, _ []tape.V) tape.V {
				s := sq(ys[0])
				for j, x := range ys[1:] {
					s = s.Add(sq(x).MulC(1 + float64((j+1)%3)))
				}
				return s
			}
		}, true},
		{"params-data", 3, 3, func(int) func(y, ys, data, p, s []tape.V) tape.V {
			// A parameter's weight and a data row a save time; a
			// parameter as the seed; a final state's term after the fold.
			return func(y, ys, data, p, _ []tape.V) tape.V {
				s := p[1].Mul(p[0])
				for j, x := range ys {
					s = s.Add(sq(x.Sub(data[j])).Mul(p[0]))
				}
				return s.Add(y[0].Mul(y[2])).MulC(0.5)
			}
		}, true},
		{"shared-scaled", 2, 0, func(int) func(y, ys, data, p, s []tape.V) tape.V {
			return func(_, ys, _, p, s []tape.V) tape.V {
				w := s[0].Mul(p[1])
				u := ys[0].Mul(w)
				for _, x := range ys[1:] {
					u = u.Add(x.Mul(w))
				}
				return u.Mul(s[1])
			}
		}, true},
		{"data-row", 2, 2, func(k int) func(y, ys, data, p, s []tape.V) tape.V {
			// An entry read at every save time (the last) besides the
			// save time's own.
			return func(_, ys, data, _, _ []tape.V) tape.V {
				s := ys[0].Mul(data[0]).Mul(data[2*k])
				for j, x := range ys[1:] {
					s = s.Add(x.Mul(data[j+1]).Mul(data[2*k]))
				}
				return s
			}
		}, true},
		{"reversed-data", 1, 1, func(k int) func(y, ys, data, p, s []tape.V) tape.V {
			return func(_, ys, data, _, _ []tape.V) tape.V {
				s := ys[0].Mul(data[k-1])
				for j, x := range ys[1:] {
					s = s.Add(x.Mul(data[k-2-j]))
				}
				return s
			}
		}, true},
		{"square-of-sum", 2, 0, func(int) func(y, ys, data, p, s []tape.V) tape.V {
			return func(_, ys, _, _, _ []tape.V) tape.V {
				s := ys[0]
				for _, x := range ys[1:] {
					s = s.Add(x)
				}
				return sq(s)
			}
		}, true},
		{"final-seed", 3, 0, func(int) func(y, ys, data, p, s []tape.V) tape.V {
			// The fold starts from the final state (not known in the
			// forward pass).
			return func(y, ys, _, _, _ []tape.V) tape.V {
				s := y[0].Mul(y[1])
				for _, x := range ys {
					s = s.Add(sq(x))
				}
				return s
			}
		}, false},
		{"final-terms", 2, 0, func(int) func(y, ys, data, p, s []tape.V) tape.V {
			return func(y, ys, _, _, _ []tape.V) tape.V {
				s := sq(ys[0]).Mul(y[0])
				for _, x := range ys[1:] {
					s = s.Add(sq(x).Mul(y[0]))
				}
				return s
			}
		}, false},
		{"uneven", 3, 0, func(int) func(y, ys, data, p, s []tape.V) tape.V {
			return func(_, ys, _, _, _ []tape.V) tape.V {
				s := sq(ys[0])
				for j, x := range ys[1:] {
					s = s.Add(sq(x).MulC(1 + float64((j+1)%5)))
				}
				return s
			}
		}, false},
		{"neighbours", 2, 0, func(int) func(y, ys, data, p, s []tape.V) tape.V {
			return func(_, ys, _, _, _ []tape.V) tape.V {
				s := ys[0].Mul(ys[2])
				for j := 2; j+2 < len(ys); j += 2 {
					s = s.Add(ys[j].Mul(ys[j+2]))
				}
				return s
			}
		}, false},
		{"pairwise", 1, 0, func(int) func(y, ys, data, p, s []tape.V) tape.V {
			// A tree sum: no left fold.
			return func(_, ys, _, _, _ []tape.V) tape.V {
				xs := append([]tape.V(nil), ys...)
				for len(xs) > 1 {
					var next []tape.V
					for j := 0; j+1 < len(xs); j += 2 {
						next = append(next, xs[j].Add(xs[j+1]))
					}
					if len(xs)%2 == 1 {
						next = append(next, xs[len(xs)-1])
					}
					xs = next
				}
				return sq(xs[0])
			}
		}, false},
		{"squared-index-data", 1, -1, func(k int) func(y, ys, data, p, s []tape.V) tape.V {
			return func(_, ys, data, _, _ []tape.V) tape.V {
				s := ys[0].Mul(data[0])
				for j, x := range ys[1:] {
					s = s.Add(x.Mul(data[(j+1)*(j+1)]))
				}
				return s
			}
		}, false},
	}
	r := rand.New(rand.NewPCG(46, 1))
	for _, tc := range cases {
		for _, k := range []int{2, 3, 12} {
			t.Run(tc.name, func(t *testing.T) {
				const np, ns = 2, 2
				dd := tc.dd*k + 1
				if tc.dd < 0 {
					dd = k * k
				}
				sh := Shape{D: tc.d, K: k, DD: dd, P: np}
				g := lossGradOf(t, sh, ns, tc.f(k))
				progs := []*tape.Program{g}
				if sc, ok := SplitSaveCots(g, sh); ok {
					progs = append(progs, sc.Rest)
				}
				for _, p := range progs {
					lf, ok := SplitFold(p, sh)
					// Two save times' terms are a fold of any form but
					// one that reads the final state before the last
					// save time's (next runs once); the squared indices
					// of three save times are a stride. (A pairwise sum
					// of three is a left fold, but its second add's
					// arguments are in the other order: Add's canonical
					// one, by value.)
					want := tc.fold || k == 2 && !strings.HasPrefix(tc.name, "final") || k == 3 && tc.name == "squared-index-data"
					if ok != want {
						t.Fatalf("K = %d, %s: fold %t, want %t", k, p.Name, ok, want)
					}
					if !ok {
						continue
					}
					for range 4 {
						in := make([]float64, len(p.Inputs))
						for j := range in {
							in[j] = 2*r.Float64() - 1
						}
						all := p.Eval(nil, in)
						if got := foldValue(lf, in, k, ns); math.Float64bits(got) != math.Float64bits(all[0]) {
							t.Errorf("K = %d, %s: folded value %v, want %v", k, p.Name, got, all[0])
						}
						rest := lf.Rest.Eval(nil, in)
						if len(rest) != len(all)-1 {
							t.Fatalf("K = %d: rest has %d outputs, want %d", k, len(rest), len(all)-1)
						}
						for j, x := range all[1:] {
							if math.Float64bits(rest[j]) != math.Float64bits(x) {
								t.Errorf("K = %d, %s: rest output %d: %v, want %v", k, p.Name, j, rest[j], x)
							}
						}
					}
				}
			})
		}
	}
}
