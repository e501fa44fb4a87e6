package tape_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// randomNet traces a random program shaped like a neural field: layers
// of Dots over one vector of per-trajectory values (the rows of W·h + b)
// whose weights are shared inputs, constants or, now and then,
// per-trajectory values; a term's factors swapped at times; biases shared,
// constant or per trajectory; activations; and sums of products added and
// subtracted, some of them used twice or scaled. Activations follow their layer's
// rows, or (now and then) each row. Inputs: x (per trajectory), q (per
// trajectory), w (shared).
func randomNet(t testing.TB, r *rand.Rand, name string) *tape.Program {
	nx, nq, nw := 1+r.IntN(3), r.IntN(3), 4+r.IntN(30)
	in := names("x", nx)
	in = append(in, names("q", nq)...)
	for i := 0; i < nw; i++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("w%d", i), Shared: true})
	}
	return mustTrace(t, name, in, func(v []tape.V) []tape.V {
		x, q, w := v[:nx], v[nx:nx+nq], v[nx+nq:]
		pool := append(append([]tape.V(nil), x...), q...)
		pick := func() tape.V { return pool[r.IntN(len(pool))] }
		h := x
		var outs []tape.V
		interleave := r.IntN(4) == 0
		act := func(y tape.V) tape.V {
			switch r.IntN(3) {
			case 0:
				return y.Tanh()
			case 1:
				return y.Sin()
			}
			return y
		}
		for layer := 1 + r.IntN(3); layer > 0; layer-- {
			next := make([]tape.V, 1+r.IntN(7))
			for i := range next {
				ws, xs := make([]tape.V, len(h)), append([]tape.V(nil), h...)
				for j := range ws {
					switch r.IntN(12) {
					case 0:
						ws[j] = pick()
					case 1:
						ws[j] = v[0].Const(float64(r.IntN(5)) - 2)
					default:
						ws[j] = w[r.IntN(nw)]
					}
					if r.IntN(8) == 0 {
						ws[j], xs[j] = xs[j], ws[j]
					}
				}
				var bias tape.V
				switch r.IntN(4) {
				case 0:
					bias = v[0].Const(0)
				case 1:
					bias = pick()
				default:
					bias = w[r.IntN(nw)]
				}
				next[i] = tape.Dot(ws, xs, bias)
				if interleave {
					next[i] = act(next[i])
				}
			}
			if !interleave { // as nn.Dense: the rows, then the activations
				for i := range next {
					next[i] = act(next[i])
				}
			}
			h = next
			pool = append(pool, h...)
		}
		outs = append(outs, h...)
		for c := r.IntN(4); c > 0; c-- {
			s := pick()
			if r.IntN(4) == 0 {
				s = s.Square() // a chain that starts with a square
			}
			for k := 1 + r.IntN(6); k > 0; k-- {
				switch r.IntN(8) {
				case 6:
					s = s.Add(pick().Square()) // a square term: x·x
				case 7:
					s = pick().Square().Sub(s)
				case 0:
					s = s.Add(pick().Mul(pick()))
				case 1:
					s = s.Sub(pick().Mul(w[r.IntN(nw)]))
				case 2:
					s = pick().Mul(pick()).Sub(s)
				case 3:
					s = s.Add(pick())
				case 4:
					s = s.Sub(pick())
				default:
					s = w[r.IntN(nw)].Mul(pick()).Add(s)
				}
				if r.IntN(5) == 0 {
					outs = append(outs, s) // used twice: the chain ends here
				}
				if r.IntN(4) == 0 {
					s = pick().Mul(s) // a chain scaled
				}
			}
			outs = append(outs, s)
		}
		return outs
	})
}

// accumulatingVJP is the VJP of p with respect to all its inputs in the
// form of a reverse step of package ode: inputs p's, one cotangent per
// output, then one accumulator per input; outputs the accumulators plus
// the input's cotangents, none summed (a shared input's gradient stays per
// trajectory).
func accumulatingVJP(t testing.TB, p *tape.Program) *tape.Program {
	vjp, err := tape.VJP(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := tape.NewBuilder(p.Name+".rev", true)
	in := make([]tape.V, 0, len(vjp.Inputs))
	for _, x := range vjp.Inputs {
		in = append(in, b.Input(x.Name, x.Shared))
	}
	acc := b.Inputs("acc", len(p.Inputs), false)
	var outs []tape.V
	err = tape.Catch(p.Name, func() {
		for k, g := range tape.Call(vjp, in) {
			outs = append(outs, acc[k].Add(g))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	q, err := b.Build(outs...)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// fuseInputs draws inputs of p for n trajectories in [-2, 2], now and
// then a special value (signed zeros, infinities, NaN, huge and
// subnormal numbers) where special is set.
func fuseInputs(r *rand.Rand, p *tape.Program, n int, special bool) [][]float64 {
	sp := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1e300, -1e300, 5e-324}
	in := make([][]float64, len(p.Inputs))
	for k, s := range p.Inputs {
		m := n
		if s.Shared {
			m = 1
		}
		in[k] = make([]float64, m)
		for i := range in[k] {
			in[k][i] = uniform(r, -2, 2)
			if special && r.IntN(30) == 0 {
				in[k][i] = sp[r.IntN(len(sp))]
			}
		}
	}
	return in
}

// checkFused runs p fused (with the assembly kernels where they run, and
// with the Go ones) and unfused, with the given settings, and compares
// every output bit for bit with Program.Eval (any NaN equal to any NaN).
func checkFused(t *testing.T, name string, p *tape.Program, in [][]float64, n int, s tape.ExecSettings) {
	t.Helper()
	want := evalAll(p, in, n)
	run := func(kind string, newExec func(*tape.Program, *tape.ExecSettings) (*tape.Exec, error)) {
		e, err := newExec(p, &s)
		if err != nil {
			t.Fatalf("Case %v: %s: %v", name, kind, err)
		}
		out := newOuts(p, n)
		if err := e.Run(out, in, n); err != nil {
			t.Fatalf("Case %v: %s: Run: %v", name, kind, err)
		}
		checkSentinels(t, name+"/"+kind, p, out, n)
		for k := range p.Outputs {
			for i := 0; i < n; i++ {
				if !sameFloat(out[k][i], want[k][i]) || math.Signbit(out[k][i]) != math.Signbit(want[k][i]) && out[k][i] == out[k][i] {
					t.Fatalf("Case %v: %s: output %s trajectory %d = %v, want %v (Eval)\n%s", name, kind, p.Outputs[k].Name, i, out[k][i], want[k][i], tape.ExecSteps(e))
				}
			}
		}
	}
	run("unfused", tape.NewExecUnfused)
	run("fused", tape.NewExec)
	if tape.HaveAVX2() {
		defer tape.SetAVX2(tape.SetAVX2(false))
		run("fused-go", tape.NewExec)
	}
}

// TestExecFused checks the fused steps (runs of Dots over a shared vector
// with uniform weights as matrix steps, sum chains; see Exec) against
// Program.Eval and the unfused executor, bit for bit: random network
// programs, their accumulating reverse programs (transposed products and
// weight-gradient chains) and their JVPs (Dots of per-trajectory
// factors), with special values among the inputs, on odd block sizes
// and ensemble sizes. It toggles the assembly kernels, so it does not run
// in parallel.
func TestExecFused(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for c := 0; c < 24; c++ {
		name := fmt.Sprintf("net%d", c)
		p := randomNet(t, r, name)
		jvp, err := tape.JVP(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []*tape.Program{p, accumulatingVJP(t, p), jvp} {
			for _, bs := range []int{1, 3, 8, 17} {
				n := 1 + r.IntN(40)
				s := tape.ExecSettings{BlockSize: bs, Workers: 1 + r.IntN(2)}
				in := fuseInputs(r, q, n, c%2 == 1)
				checkFused(t, fmt.Sprintf("%s/bs=%d/n=%d", q.Name, bs, n), q, in, n, s)
			}
		}
	}
}

// TestExecFusedNeural checks the programs of the neural protocol (a Tsit5
// step of an MLP 2→32→32→2 field and its reverse step) fused against
// Program.Eval and the unfused executor, on blocks of 16 and 13
// trajectories; that their runs allocate nothing; and, as an integrator
// runs them, one clone over fewer and more active trajectories with the
// state and the accumulators updated in place.
func TestExecFusedNeural(t *testing.T) {
	np := newNeuralProblem(t)
	for _, p := range []*tape.Program{np.trial, np.rev} {
		const n = 29
		in := np.inputs(p, n, 3)
		for _, bs := range []int{16, 13} {
			checkFused(t, fmt.Sprintf("%s/bs=%d", p.Name, bs), p, in, n, tape.ExecSettings{BlockSize: bs, Workers: 2})
		}
		e, err := tape.NewExec(p, &tape.ExecSettings{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		c := e.Clone(16, 1)
		out := newOuts(p, 16)
		in16 := np.inputs(p, 16, 4)
		if err := c.Run(out, in16, 16); err != nil {
			t.Fatal(err)
		}
		if a := testing.AllocsPerRun(5, func() { c.Run(out, in16, 16) }); a != 0 {
			t.Errorf("Case %s: Run allocates %v times per call, want 0", p.Name, a)
		}
		// In place: the state and k1, or the cotangents, are updated in
		// their input arrays.
		st := np.inputs(p, 16, 5)
		index := make(map[string]int)
		for j, x := range p.Inputs {
			index[x.Name] = j
		}
		input := func(name string) []float64 {
			j, ok := index[name]
			if !ok {
				t.Fatalf("Case %s: no input %s", p.Name, name)
			}
			return st[j]
		}
		io := make([][]float64, len(p.Outputs))
		for k := range io {
			io[k] = make([]float64, 16)
		}
		aliased := 0
		for c := 0; c < np.d; c++ {
			if p == np.trial {
				io[c], io[2*np.d+c] = input(fmt.Sprintf("y%d", c)), input(fmt.Sprintf("k1_%d", c))
				aliased += 2
				continue
			}
			io[c] = input(fmt.Sprintf("adj_out%d", c))
			aliased++
		}
		if want := map[bool]int{true: 4, false: 2}[p == np.trial]; aliased != want {
			t.Fatalf("Case %s: %d outputs in place, want %d", p.Name, aliased, want)
		}
		for _, avx := range []bool{true, false} {
			old := tape.SetAVX2(avx)
			for _, m := range []int{16, 13, 16, 7, 1, 9} {
				want := evalAll(p, prefix(p, st, m), m)
				if err := c.Run(io, st, m); err != nil {
					t.Fatal(err)
				}
				for k := range p.Outputs {
					for i := 0; i < m; i++ {
						if !sameFloat(io[k][i], want[k][i]) {
							t.Fatalf("Case %s/in-place/avx=%v/m=%d: output %d trajectory %d = %v, want %v", p.Name, avx, m, k, i, io[k][i], want[k][i])
						}
					}
				}
				// The reverse step's cotangents are read before the steps
				// that update them: in place.
				if p == np.rev && !tape.ExecDirect(c) {
					t.Errorf("Case %s/in-place/m=%d: outputs copied, want them written in place", p.Name, m)
				}
			}
			tape.SetAVX2(old)
		}
	}
}

// TestExecInPlaceReads updates inputs in place with outputs that may or
// may not be written straight over them: an output computed by a chain
// may overwrite an input that only that chain, or steps before it, read;
// not one that a later step or another chain of the same step reads.
// Every case must give Eval's results, with the assembly and the Go
// kernels.
func TestExecInPlaceReads(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, tc := range []struct {
		name   string
		f      func(in []tape.V) []tape.V
		direct bool // output 0 over input 0 written in place
	}{
		// a is read only by the chain of output 0.
		{"own", func(in []tape.V) []tape.V {
			return []tape.V{in[1].Mul(in[2]).Add(in[0]), in[1].Sin()}
		}, true},
		// a is read by steps before the chain of output 0 only.
		{"before", func(in []tape.V) []tape.V {
			u := in[0].Sin().Mul(in[1])
			return []tape.V{u.Mul(in[2]).Add(in[1]), u}
		}, true},
		// a is read by another chain of the same step.
		{"sibling", func(in []tape.V) []tape.V {
			return []tape.V{in[1].Mul(in[2]).Add(in[0]), in[2].Mul(in[1]).Sub(in[0])}
		}, false},
		// a is read after output 0 is written.
		{"after", func(in []tape.V) []tape.V {
			u := in[1].Mul(in[2]).Add(in[0])
			return []tape.V{u, u.Sin().Mul(in[0])}
		}, false},
	} {
		p := mustTrace(t, tc.name, withNames("a", "b", "c"), tc.f)
		for _, avx := range []bool{true, false} {
			old := tape.SetAVX2(avx)
			for _, bs := range []int{4, 64} {
				const n = 37
				e, err := tape.NewExec(p, &tape.ExecSettings{BlockSize: bs, Workers: 1})
				if err != nil {
					t.Fatal(err)
				}
				in := [][]float64{randVec(r, n), randVec(r, n), randVec(r, n)}
				want := evalAll(p, in, n)
				out := [][]float64{in[0], make([]float64, n)}
				if err := e.Run(out, in, n); err != nil {
					t.Fatal(err)
				}
				name := fmt.Sprintf("%s/avx=%v/bs=%d", tc.name, avx, bs)
				for k := range want {
					for i := 0; i < n; i++ {
						if out[k][i] != want[k][i] {
							t.Fatalf("Case %s: output %d trajectory %d = %v, want %v\n%v", name, k, i, out[k][i], want[k][i], p)
						}
					}
				}
				if got := tape.ExecDirect(e); got != tc.direct {
					t.Errorf("Case %s: written in place %v, want %v", name, got, tc.direct)
				}
			}
			tape.SetAVX2(old)
		}
	}
}

// TestExecSharedChange runs one executor (and a clone) again and again
// while its shared inputs change, one at a time, to NaN and back, or not
// at all, and checks every Run against Program.Eval: uniform values, the
// packed coefficients of the matrix steps and the broadcast buffers must
// follow the shared inputs, although they are computed again only when
// one changed.
func TestExecSharedChange(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(9, 10))
	for c := 0; c < 6; c++ {
		p := randomNet(t, r, fmt.Sprintf("net%d", c))
		for _, q := range []*tape.Program{p, accumulatingVJP(t, p)} {
			const n = 21
			in := fuseInputs(r, q, n, false)
			e, err := tape.NewExec(q, &tape.ExecSettings{BlockSize: 8, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			execs := []*tape.Exec{e, e.Clone(5, 1)}
			var shared []int
			for k, s := range q.Inputs {
				if s.Shared {
					shared = append(shared, k)
				}
			}
			for rep := 0; rep < 12; rep++ {
				switch k := shared[r.IntN(len(shared))]; rep % 4 {
				case 1:
					in[k][0] = uniform(r, -2, 2)
				case 2:
					in[k][0] = math.NaN()
				case 3:
					in[k][0] = uniform(r, -2, 2)
					for _, j := range shared {
						in[j][0] += 0.25
					}
				}
				want := evalAll(q, in, n)
				for x, ex := range execs {
					out := newOuts(q, n)
					if err := ex.Run(out, in, n); err != nil {
						t.Fatal(err)
					}
					for k := range q.Outputs {
						for i := 0; i < n; i++ {
							if !sameFloat(out[k][i], want[k][i]) {
								t.Fatalf("Case %s/rep=%d/exec=%d: output %d trajectory %d = %v, want %v", q.Name, rep, x, k, i, out[k][i], want[k][i])
							}
						}
					}
				}
			}
		}
	}
}

// TestExecAliasShift runs one executor on the same slices with a varying
// number of trajectories, its outputs starting a few values after its
// inputs in the same arrays: they overlap for n above that distance, and
// then the outputs must not be written in place (the executor remembers
// the distance between the slices, not an answer for one n). Within one
// block every input is read before any output is written, so the results
// are those of Eval on the inputs as they were.
func TestExecAliasShift(t *testing.T) {
	t.Parallel()
	p := mustTrace(t, "shift", withNames("a", "b"), func(in []tape.V) []tape.V {
		u := in[0].Mul(in[1])
		return []tape.V{u, u.Mul(in[0])} // reads a after writing output 0
	})
	r := rand.New(rand.NewPCG(11, 12))
	const shift = 5
	e, err := tape.NewExec(p, &tape.ExecSettings{BlockSize: 64, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 9, 5, 6, 2, 20, 1} {
		a, b := randVec(r, 64), randVec(r, 64)
		in := [][]float64{a[shift:], b[shift:]}
		want := evalAll(p, [][]float64{append([]float64(nil), in[0]...), append([]float64(nil), in[1]...)}, n)
		out := [][]float64{a, b} // output k starts shift values before input k
		if err := e.Run(out, in, n); err != nil {
			t.Fatal(err)
		}
		for k := range want {
			for i := 0; i < n; i++ {
				if out[k][i] != want[k][i] {
					t.Fatalf("Case n=%d: output %d trajectory %d = %v, want %v", n, k, i, out[k][i], want[k][i])
				}
			}
		}
	}
}

// TestExecBuffers runs one executor again and again over two sets of
// input and output arrays in turn and different numbers of trajectories
// (one block or several, shared by two workers): a worker binds its
// slots to the Run's arrays again only when they or its block changed,
// and every Run must give Eval's results in its own arrays.
func TestExecBuffers(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(15, 16))
	p := randomNet(t, r, "net")
	q := accumulatingVJP(t, p)
	e, err := tape.NewExec(q, &tape.ExecSettings{BlockSize: 8, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	const nmax = 29
	sets := [2]struct{ in, out [][]float64 }{}
	for i := range sets {
		sets[i].in = fuseInputs(r, q, nmax, false)
		sets[i].out = newOuts(q, nmax)
	}
	for rep, n := range []int{8, 8, 29, 29, 8, 3, 3, 17, 8, 29} {
		set := sets[rep%2]
		if rep%3 == 0 { // new values in the same arrays
			set.in = fuseInputs(r, q, nmax, false)
			sets[rep%2].in = set.in
		}
		in := prefix(q, set.in, n)
		want := evalAll(q, in, n)
		if err := e.Run(set.out, in, n); err != nil {
			t.Fatal(err)
		}
		for k := range want {
			for i := 0; i < n; i++ {
				if !sameFloat(set.out[k][i], want[k][i]) {
					t.Fatalf("Case rep=%d/n=%d: output %d trajectory %d = %v, want %v", rep, n, k, i, set.out[k][i], want[k][i])
				}
			}
		}
	}
}
