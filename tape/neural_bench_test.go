package tape_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/cputime"
	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The neural-ODE protocol's programs, built here with tape alone as
// package ode builds them (the reverse step as scan.Reverse does): the
// field y' = MLP(y) with the MLP 2→32→32→2 (tanh hidden, identity output,
// 1,218 shared weights), one Tsit5 trial step with its error estimate,
// FSAL stage and stiffness estimate, and the reverse of the replay step
// (λ' and the step's own per-lane contribution to the weights' gradient,
// which the sweep sums over lanes; no summed outputs). The benchmarks run
// one block of m lanes on one goroutine, as a worker of a whole-solve
// engine does:
//
//	go test -run XXX -bench Neural -count 5 ./tape
//
// Metrics: ns/lane, the time of one Run per lane (one step of one
// trajectory), and cpu-ns/lane, the same in the thread's CPU time (Linux),
// steadier on a loaded machine.

var neuralSizes = []int{2, 32, 32, 2}

// Tsit5 coefficients (Tsitouras 2011), rounded to float64.
var (
	tsit5C = []float64{0, 0.161, 0.327, 0.9, 0.9800255409045097, 1, 1}
	tsit5A = [][]float64{
		{},
		{0.161},
		{-0.008480655492356989, 0.335480655492357},
		{2.8971530571054935, -6.359448489975075, 4.3622954328695815},
		{5.325864828439257, -11.748883564062828, 7.4955393428898365, -0.09249506636175525},
		{5.86145544294642, -12.92096931784711, 8.159367898576159, -0.071584973281401, -0.028269050394068383},
		{0.09646076681806523, 0.01, 0.4798896504144996, 1.379008574103742, -3.290069515436081, 2.324710524099774},
	}
	tsit5B = []float64{0.09646076681806523, 0.01, 0.4798896504144996, 1.379008574103742, -3.290069515436081, 2.324710524099774, 0}
	tsit5E = []float64{0.0017800110522257714, 0.0008164344596567469, -0.007880878010261995, 0.1447110071732629,
		-0.5823571654525552, 0.45808210592918697, -1.0 / 66}
)

// neuralProblem holds the programs of the protocol.
type neuralProblem struct {
	mlp          nn.MLP
	field        *tape.Program // t, y[2], s[1218] → f[2]
	trial        *tape.Program // t, h, y, s, k1 → y⁺, err, k7, hρ
	replay       *tape.Program // t, h, y, s → y⁺
	rev          *tape.Program // t, h, y, s, λ → λ', gs
	weights      []float64
	d, nw        int
	trialIn      []tape.Input
	replayInputs []tape.Input
}

func newNeuralProblem(t testing.TB) *neuralProblem {
	mlp := nn.NewMLP(neuralSizes, nn.Tanh, nn.Identity)
	d, nw := mlp.In(), mlp.NumParams()
	np := &neuralProblem{mlp: mlp, d: d, nw: nw}
	fin := []tape.Input{{Name: "t"}}
	fin = append(fin, names("y", d)...)
	for i := 0; i < nw; i++ {
		fin = append(fin, tape.Input{Name: fmt.Sprintf("s[%d]", i), Shared: true})
	}
	np.field = mustTrace(t, "neural", fin, func(in []tape.V) []tape.V {
		return mlp.Apply(in[1+d:], in[1:1+d])
	})
	stepIn := append([]tape.Input{fin[0], {Name: "h"}}, fin[1:]...)
	np.replayInputs = stepIn
	np.trialIn = append(append([]tape.Input(nil), stepIn...), names("k1_", d)...)
	np.trial = np.buildTrial(t)
	np.replay = np.buildReplay(t)
	np.rev = np.buildReverse(t)
	np.weights = mlp.Init(nil, rand.New(rand.NewPCG(1, 2)))
	return np
}

// buildTrial is one FSAL Tsit5 step, as ode's erk.steps builds it: the
// field called (tape.CallFunc), the executor inlines it.
func (np *neuralProblem) buildTrial(t testing.TB) *tape.Program {
	d := np.d
	b := tape.NewBuilder("neural.Tsit5", true)
	vs := make([]tape.V, len(np.trialIn))
	for i, x := range np.trialIn {
		vs[i] = b.Input(x.Name, x.Shared)
	}
	tt, h, y, s := vs[0], vs[1], vs[2:2+d], vs[2+d:2+d+np.nw]
	call := func(ti tape.V, yi []tape.V) []tape.V {
		return tape.CallFunc(np.field, append(append([]tape.V{ti}, yi...), s...))
	}
	// wsum is Σ_j w_j k_j[c] as one Dot from 0, zero weights dropped.
	wsum := func(w []float64, k [][]tape.V, c int) tape.V {
		var ws, xs []tape.V
		for j, wj := range w {
			if wj != 0 && k[j] != nil {
				ws, xs = append(ws, h.Const(wj)), append(xs, k[j][c])
			}
		}
		return tape.Dot(ws, xs, h.Const(0))
	}
	ns := len(tsit5C)
	k := make([][]tape.V, ns)
	g := make([][]tape.V, ns)
	k[0], g[0] = vs[2+d+np.nw:], y
	for i := 1; i < ns; i++ {
		yi := make([]tape.V, d)
		for c := range yi {
			yi[c] = y[c].Add(h.Mul(wsum(tsit5A[i], k, c)))
		}
		k[i] = call(tt.Add(h.MulC(tsit5C[i])), yi)
		g[i] = yi
	}
	var outs []tape.V
	for c := 0; c < d; c++ {
		outs = append(outs, y[c].Add(h.Mul(wsum(tsit5B, k, c))))
	}
	for c := 0; c < d; c++ {
		outs = append(outs, h.Mul(wsum(tsit5E, k, c)))
	}
	outs = append(outs, k[ns-1]...)
	// Hairer's stiffness estimate from the last two stages.
	var num, den tape.V
	for c := 0; c < d; c++ {
		dk := k[ns-1][c].Sub(k[ns-2][c]).Square()
		dg := g[ns-1][c].Sub(g[ns-2][c]).Square()
		if c == 0 {
			num, den = dk, dg
		} else {
			num, den = num.Add(dk), den.Add(dg)
		}
	}
	zero := h.Const(0)
	live := tape.Gt(den, zero)
	safe := tape.Select(live, den, h.Const(1))
	outs = append(outs, tape.Select(live, h.Abs().Mul(num.Div(safe).Sqrt()), zero))
	p, err := b.Build(outs...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// buildReplay is the replay step: k1 computed, then the trial step's y⁺.
func (np *neuralProblem) buildReplay(t testing.TB) *tape.Program {
	d := np.d
	b := tape.NewBuilder("neural.Tsit5.replay", true)
	rv := make([]tape.V, len(np.replayInputs))
	for i, x := range np.replayInputs {
		rv[i] = b.Input(x.Name, x.Shared)
	}
	k1 := tape.Call(np.field, append(append([]tape.V{rv[0]}, rv[2:2+d]...), rv[2+d:]...))
	out := tape.Call(np.trial, append(rv, k1...))[:d]
	p, err := b.Build(out...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// buildReverse is the reverse step of the replay step, as scan.Reverse
// builds it: inputs t, h, y, s, λ; outputs λ' = (∂y⁺/∂y)ᵀλ and this
// step's contribution gs = (∂y⁺/∂s)ᵀλ, per lane.
func (np *neuralProblem) buildReverse(t testing.TB) *tape.Program {
	d, nw := np.d, np.nw
	wrt := make([]int, 0, d+nw)
	for k := 2; k < 2+d+nw; k++ {
		wrt = append(wrt, k)
	}
	vjp, err := tape.VJP(np.replay, wrt)
	if err != nil {
		t.Fatal(err)
	}
	b := tape.NewBuilder("neural.Tsit5.replay.rev", true)
	in := make([]tape.V, 0, len(vjp.Inputs))
	for _, x := range vjp.Inputs {
		in = append(in, b.Input(x.Name, x.Shared))
	}
	p, err := b.Build(tape.Call(vjp, in)...)
	if err != nil {
		t.Fatal(err)
	}
	for k := range p.Outputs {
		p.Outputs[k].Sum = false
	}
	return p
}

// inputs returns random inputs of p for m lanes: per-lane values in
// [-1, 1] (h in [0.01, 0.1]), the weights for the shared inputs.
func (np *neuralProblem) inputs(p *tape.Program, m int, seed uint64) [][]float64 {
	r := rand.New(rand.NewPCG(seed, 7))
	in := make([][]float64, len(p.Inputs))
	for k, s := range p.Inputs {
		if s.Shared {
			in[k] = []float64{np.weights[k-2-np.d]} // s[i] follows t, h, y
			continue
		}
		in[k] = make([]float64, m)
		for i := range in[k] {
			in[k][i] = uniform(r, -1, 1)
			if s.Name == "h" {
				in[k][i] = uniform(r, 0.01, 0.1)
			}
		}
	}
	return in
}

func newOutsN(p *tape.Program, m int) [][]float64 {
	out := make([][]float64, len(p.Outputs))
	for k := range out {
		out[k] = make([]float64, m)
	}
	return out
}

var neuralLanes = []int{16, 64, 256}

// BenchmarkNeural runs the trial step and the reverse replay step of the
// neural protocol on one block of m lanes, one goroutine; rev-inplace is
// the reverse step as an integrator runs it, the cotangents λ updated in
// place.
func BenchmarkNeural(b *testing.B) {
	np := newNeuralProblem(b)
	for _, pc := range []struct {
		name    string
		p       *tape.Program
		inPlace bool
	}{{"trial", np.trial, false}, {"rev", np.rev, false}, {"rev-inplace", np.rev, true}} {
		e0, err := tape.NewExec(pc.p, &tape.ExecSettings{Workers: 1})
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range neuralLanes {
			b.Run(fmt.Sprintf("%s/m=%d", pc.name, m), func(b *testing.B) {
				e := e0.Clone(m, 1)
				in, out := np.inputs(pc.p, m, 1), newOutsN(pc.p, m)
				if pc.inPlace { // λ: the inputs after t, h, y, s
					for k := 0; k < np.d; k++ {
						out[k] = in[2+np.d+np.nw+k]
					}
				}
				e.Run(out, in, m)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.ReportAllocs()
				b.ResetTimer()
				c0 := cputime.Thread()
				for i := 0; i < b.N; i++ {
					e.Run(out, in, m)
				}
				per := float64(b.N) * float64(m)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/lane")
				b.ReportMetric(float64(cputime.Thread()-c0)/per, "cpu-ns/lane")
			})
		}
	}
}
