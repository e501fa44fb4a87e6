package kernelgen

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestSharedReverse checks what sharing the step programs (shareDim)
// rests on, with tape's executor on random states and step sizes (one
// of them 0): where shareReverse holds, DenseStepReverse with zero
// coefficient cotangents gives Reverse's outputs bit for bit; where
// shareForward holds, TrialDense gives Trial's and DenseStep Replay's
// y⁺. It also pins which built-in problems and methods share.
func TestSharedReverse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		prob  string
		m     ode.Method
		share bool // shareReverse; shareForward agrees on these
	}{
		{"pollution", ode.Rodas5P, true}, {"pollution", ode.Rosenbrock23, true},
		{"pollution", ode.Tsit5, false}, {"pollution", ode.Vern7, false},
		{"lorenz96-64", ode.Rodas5P, true}, {"lorenz96-64", ode.Rosenbrock23, true}, {"lorenz96-64", ode.Tsit5, false},
		{"hires", ode.Rodas5P, false}, {"lorenz", ode.Rodas5P, false},
	} {
		name, pname, m, share := c.prob+"-"+c.m.Name(), c.prob, c.m, c.share
		pr, err := problems.ByName(pname)
		if err != nil {
			t.Fatal(err)
		}
		pl, rev, drev := planReverses(t, pr.Field, m)
		sr := shareReverse(pl, rev, drev)
		sfa := shareForward(pl, Config{Adaptive: true, Saves: 1})
		sfr := shareForward(pl, Config{Saves: 1})
		if sr != share || sfa != share || sfr != share {
			t.Errorf("%s: shares reverse %t, adaptive forward %t, replay forward %t; want %t", name, sr, sfa, sfr, share)
		}
		if !share {
			continue
		}
		const n = 16
		r := rand.New(rand.NewPCG(3, uint64(pl.Dim)))
		in := randomInputs(r, drev, pr.Shared, n)
		d, np, ns := pl.Dim, pl.Params, pl.Shared
		w0, nw := 2+d+np+ns+d, pl.DenseTerms*d // w̄'s inputs
		for k := w0; k < w0+nw; k++ {
			in[k] = make([]float64, n)
		}
		sameOutputs(t, name+" DenseStepReverse(w̄ = 0) against Reverse", execAll(t, drev, in, n), execAll(t, rev, append(in[:w0:w0], in[w0+nw:]...), n), len(rev.Outputs))
		// The forward programs: Trial's inputs (TrialDense has the same).
		in = randomInputs(r, pl.Trial, pr.Shared, n)
		sameOutputs(t, name+" TrialDense against Trial", execAll(t, pl.TrialDense, in, n), execAll(t, pl.Trial, in, n), len(pl.Trial.Outputs))
		in = randomInputs(r, pl.Replay, pr.Shared, n)
		sameOutputs(t, name+" DenseStep against Replay", execAll(t, pl.DenseStep, in, n), execAll(t, pl.Replay, in, n), len(pl.Replay.Outputs))
	}
}

// randomInputs returns inputs of p for n trajectories: t in [0, 0.15),
// h in [1e-3, 2e-3) (trajectory 3: 0), shared inputs from sh, the others
// standard normal.
func randomInputs(r *rand.Rand, p *tape.Program, sh []float64, n int) [][]float64 {
	var in [][]float64
	j := 0
	for _, x := range p.Inputs {
		if x.Shared {
			v := 1.0
			if j < len(sh) {
				v = sh[j]
			}
			j++
			in = append(in, []float64{v})
			continue
		}
		col := make([]float64, n)
		for i := range col {
			switch x.Name {
			case "t":
				col[i] = 0.01 * float64(i)
			case "h":
				if i != 3 {
					col[i] = 1e-3 * (1 + r.Float64())
				}
			default:
				col[i] = r.NormFloat64()
			}
		}
		in = append(in, col)
	}
	return in
}

// execAll runs p on in with tape's executor.
func execAll(t *testing.T, p *tape.Program, in [][]float64, n int) [][]float64 {
	t.Helper()
	ex, err := tape.NewExec(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]float64, len(p.Outputs))
	for k := range out {
		out[k] = make([]float64, n)
	}
	if err := ex.Run(out, in, n); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameOutputs checks that the first m outputs of got and want hold the
// same bits.
func sameOutputs(t *testing.T, what string, got, want [][]float64, m int) {
	t.Helper()
	for k := 0; k < m; k++ {
		for i := range want[k] {
			if math.Float64bits(got[k][i]) != math.Float64bits(want[k][i]) {
				t.Errorf("%s: output %d of trajectory %d is %v, want %v", what, k, i, got[k][i], want[k][i])
				return
			}
		}
	}
}

// planReverses returns the plan of field f with method m and its reverse
// and dense reverse step programs.
func planReverses(t testing.TB, f ode.Field, m ode.Method) (pl *ode.Plan, rev, drev *tape.Program) {
	t.Helper()
	sv, err := ode.NewSolver(f, &ode.Settings{Method: m})
	if err != nil {
		t.Fatal(err)
	}
	pl = sv.Plan()
	if rev, err = pl.Reverse(); err != nil {
		t.Fatal(err)
	}
	if drev, err = pl.DenseStepReverse(); err != nil {
		t.Fatal(err)
	}
	return pl, rev, drev
}
