package ode

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// The matrix-free Rosenbrock step (rosPrograms, d >= matrixFreeDim)
// against the explicit one, on Lorenz-96 with d = 20 at random states:
// the trial step's outputs and the reverse step's gradients (which in the
// explicit form differentiate W entry by entry) agree to 1e-12 relative;
// the order of operations differs (J·v by forward mode), not the maths.
func TestRosenbrockMatrixFree(t *testing.T) {
	const d = 20
	f := &Field{Name: "l96", Dim: d, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		out := make([]tape.V, d)
		for i := range out {
			out[i] = y[(i+1)%d].Sub(y[(i+d-2)%d]).Mul(y[(i+d-1)%d]).Sub(y[i]).Add(p[0])
		}
		return out
	}}
	fp, err := f.Program()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Method{Rodas5P, Rosenbrock23} {
		progs := func(explicit bool) (trial, rev *tape.Program) {
			if explicit {
				old := matrixFreeDim
				matrixFreeDim = d + 1
				defer func() { matrixFreeDim = old }()
			}
			sp, err := m.(*rosenbrock).steps(f, fp)
			if err != nil {
				t.Fatal(err)
			}
			wrt := make([]int, len(sp.replay.Inputs))
			for i := range wrt {
				wrt[i] = i
			}
			rev, err = tape.VJP(sp.replay, wrt)
			if err != nil {
				t.Fatal(err)
			}
			return sp.trial, rev
		}
		et, er := progs(true)
		mt, mr := progs(false)
		if len(mr.Values) >= len(er.Values)/2 {
			t.Errorf("%s: the matrix-free reverse step has %d values, the explicit one %d", m.Name(), len(mr.Values), len(er.Values))
		}
		r := rand.New(rand.NewPCG(7, 7))
		for trial := 0; trial < 4; trial++ {
			in := make([]float64, len(er.Inputs))
			for i := range in {
				in[i] = r.NormFloat64()
			}
			in[0], in[1] = 0.3, 0.05*float64(trial) // trial 0: a padded step
			for i := 0; i < d; i++ {
				in[2+i] = 8 + r.NormFloat64()
			}
			in[2+d] = 8
			for _, pair := range [][2]*tape.Program{{et, mt}, {er, mr}} {
				want := pair[0].Eval(nil, in[:len(pair[0].Inputs)])
				got := pair[1].Eval(nil, in[:len(pair[1].Inputs)])
				for k := range want {
					if !(math.Abs(got[k]-want[k]) <= 1e-12*math.Max(math.Abs(want[k]), 1)) {
						t.Errorf("%s %s trial %d output %d (%s): matrix-free %v, explicit %v", m.Name(), pair[0].Name, trial, k, pair[0].Outputs[k].Name, got[k], want[k])
					}
				}
			}
		}
	}
}
