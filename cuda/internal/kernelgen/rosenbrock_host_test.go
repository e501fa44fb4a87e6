package kernelgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestHostRosenbrockLarge compiles the trial step and the reverse step of
// a large field's Rosenbrock plan (matrix-free: ops.OpLUFactorShift,
// OpAttach, OpNoGrad, J·v by forward mode) as host C++ and compares them
// with the CPU engine's executor (tape.Exec, which runs the inlined value
// form) to 1e-12, on live steps and on a padded one (h = 0). Lorenz-96
// with d = 24 (the matrix-free form starts at d = 16); with -long, d = 64
// with Rodas5P too (a g++ compile of about a minute).
func TestHostRosenbrockLarge(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	type tc struct {
		d int
		m ode.Method
	}
	cases := []tc{{24, ode.Rodas5P}, {24, ode.Rosenbrock23}}
	if longTests() {
		cases = append(cases, tc{64, ode.Rodas5P})
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("lorenz96-%d-%s", c.d, c.m.Name()), func(t *testing.T) {
			t.Parallel()
			pr := problems.Lorenz96(c.d)
			sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: c.m})
			if err != nil {
				t.Fatal(err)
			}
			pl := sv.Plan()
			rev, err := pl.Reverse()
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(5, uint64(c.d)))
			const n = 5
			var tps []kerneltest.Program
			for _, p := range []*tape.Program{pl.Trial, rev} {
				tp := kerneltest.Program{P: p, Tol: kerneltest.Tolerance{Rel: 1e-12}}
				for _, in := range p.Inputs {
					if in.Shared {
						tp.Sh = append(tp.Sh, 1)
						continue
					}
					col := make([]float64, n)
					for i := range col {
						switch {
						case in.Name == "t":
							col[i] = 0.1 * float64(i)
						case in.Name == "h":
							col[i] = 0.02 * float64(i) // trajectory 0: a padded step
						case len(in.Name) > 0 && in.Name[0] == 'y':
							col[i] = 8 + r.NormFloat64()
						case len(in.Name) > 0 && in.Name[0] == 'p':
							col[i] = 8
						default: // cotangents
							col[i] = r.NormFloat64()
						}
					}
					tp.In = append(tp.In, col)
				}
				tps = append(tps, tp)
			}
			got := runHost(t, tps, Float64)
			for j, tp := range tps {
				want := execCPU(t, tp)
				for m := range want {
					for i := range want[m] {
						w, g := want[m][i], got[j][m][i]
						if !(math.Abs(g-w) <= 1e-12*math.Max(math.Abs(w), 1)) {
							t.Errorf("%s output %d (%s) trajectory %d: g++ %v, CPU %v", tp.P.Name, m, tp.P.Outputs[m].Name, i, g, w)
						}
					}
				}
			}
		})
	}
}

// execCPU runs tp on the CPU engine's executor: outputs [m][i].
func execCPU(t *testing.T, tp kerneltest.Program) [][]float64 {
	t.Helper()
	e, err := tape.NewExec(tp.P, nil)
	if err != nil {
		t.Fatal(err)
	}
	n := tp.N()
	in := make([][]float64, len(tp.P.Inputs))
	k, j := 0, 0
	for q, inp := range tp.P.Inputs {
		if inp.Shared {
			in[q] = []float64{tp.Sh[j]}
			j++
		} else {
			in[q] = tp.In[k]
			k++
		}
	}
	out := make([][]float64, len(tp.P.Outputs))
	for m := range out {
		out[m] = make([]float64, n)
	}
	if err := e.Run(out, in, n); err != nil {
		t.Fatal(err)
	}
	return out
}
