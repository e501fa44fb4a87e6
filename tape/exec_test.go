package tape_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

const sentinel = 12345.678

// newOuts allocates output slices for p and n trajectories, with three
// sentinel values past the end to catch writes out of range.
func newOuts(p *tape.Program, n int) [][]float64 {
	out := make([][]float64, len(p.Outputs))
	for k, o := range p.Outputs {
		m := n
		if o.Sum {
			m = 1
		}
		out[k] = make([]float64, m+3)
		for i := range out[k] {
			out[k][i] = sentinel
		}
	}
	return out
}

// checkSentinels reports writes past the outputs' ends.
func checkSentinels(t *testing.T, name string, p *tape.Program, out [][]float64, n int) {
	t.Helper()
	for k, o := range p.Outputs {
		m := n
		if o.Sum {
			m = 1
		}
		for i := m; i < len(out[k]); i++ {
			if out[k][i] != sentinel {
				t.Errorf("Case %v: output %d written past its end at %d", name, k, i)
			}
		}
	}
}

// prefix returns the inputs for the first n trajectories.
func prefix(p *tape.Program, in [][]float64, n int) [][]float64 {
	s := make([][]float64, len(in))
	for k := range in {
		if p.Inputs[k].Shared {
			s[k] = in[k][:1]
		} else {
			s[k] = in[k][:n]
		}
	}
	return s
}

var execGrid = struct {
	blockSizes, workers, ns []int
}{
	blockSizes: []int{1, 3, 64, 256},
	workers:    []int{1, 2, 4},
	ns:         []int{0, 1, 5, 1000, 4099},
}

// TestExecRandom runs random programs (shared inputs, summed outputs,
// uniform outputs, outputs that are inputs or constants) with every block
// size, worker count and ensemble size of the grid, and checks them
// against the op-by-op values; summed outputs must not depend on the
// number of workers.
func TestExecRandom(t *testing.T) {
	t.Parallel()
	const nmax = 4099
	rnd := rand.New(rand.NewPCG(1, 1))
	for c := 0; c < 8; c++ {
		name := fmt.Sprintf("random%d", c)
		rp := newRandomProgram(rnd, name, 2+rnd.IntN(4), 10+rnd.IntN(30), 4, nmax)
		// Mark some outputs Sum, keep the program otherwise.
		p := *rp.p
		p.Outputs = append([]tape.Output(nil), p.Outputs...)
		for k := range p.Outputs {
			p.Outputs[k].Sum = k%2 == 1
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, bs := range execGrid.blockSizes {
				for _, n := range execGrid.ns {
					var sums [][]float64 // by worker setting
					for _, nw := range execGrid.workers {
						cs := fmt.Sprintf("%s/bs=%d/workers=%d/n=%d", name, bs, nw, n)
						e, err := tape.NewExec(&p, &tape.ExecSettings{BlockSize: bs, Workers: nw})
						if err != nil {
							t.Fatalf("Case %v: NewExec: %v", cs, err)
						}
						out := newOuts(&p, n)
						if err := e.Run(out, prefix(&p, rp.in, n), n); err != nil {
							t.Fatalf("Case %v: Run: %v", cs, err)
						}
						checkSentinels(t, cs, &p, out, n)
						var s []float64
						for k, o := range p.Outputs {
							if !o.Sum {
								for i := 0; i < n; i++ {
									if !sameFloat(out[k][i], rp.want[k][i]) {
										t.Fatalf("Case %v: output %d trajectory %d want %v, got %v\n%v", cs, k, i, rp.want[k][i], out[k][i], &p)
									}
								}
								continue
							}
							want, abs := 0.0, 0.0
							for i := 0; i < n; i++ {
								want += rp.want[k][i]
								abs += math.Abs(rp.want[k][i])
							}
							if !within(out[k][0], want, 1e-13*abs, 0) {
								t.Errorf("Case %v: output %d summed want %v, got %v", cs, k, want, out[k][0])
							}
							s = append(s, out[k][0])
						}
						sums = append(sums, s)
					}
					for w := 1; w < len(sums); w++ {
						for k := range sums[0] {
							if sums[w][k] != sums[0][k] {
								t.Errorf("Case %v/bs=%d/n=%d: sum %d with %d workers %v, with %d workers %v; want the same",
									name, bs, n, k, execGrid.workers[w], sums[w][k], execGrid.workers[0], sums[0][k])
							}
						}
					}
				}
			}
		})
	}
}

// evalAll evaluates p for every trajectory with Program.Eval.
func evalAll(p *tape.Program, in [][]float64, n int) [][]float64 {
	want := make([][]float64, len(p.Outputs))
	for k := range want {
		want[k] = make([]float64, n)
	}
	x := make([]float64, len(in))
	y := make([]float64, len(p.Outputs))
	for i := 0; i < n; i++ {
		for k := range x {
			if p.Inputs[k].Shared {
				x[k] = in[k][0]
			} else {
				x[k] = in[k][i]
			}
		}
		p.Eval(y, x)
		for k := range y {
			want[k][i] = y[k]
		}
	}
	return want
}

// checkExec runs p with the settings and compares it with Eval, bit for
// bit for per-trajectory outputs.
func checkExec(t *testing.T, name string, p *tape.Program, in [][]float64, n int, s *tape.ExecSettings) {
	t.Helper()
	want := evalAll(p, in, n)
	e, err := tape.NewExec(p, s)
	if err != nil {
		t.Fatalf("Case %v: NewExec: %v", name, err)
	}
	out := newOuts(p, n)
	if err := e.Run(out, in, n); err != nil {
		t.Fatalf("Case %v: Run: %v", name, err)
	}
	checkSentinels(t, name, p, out, n)
	for k, o := range p.Outputs {
		if o.Sum {
			sum, abs := 0.0, 0.0
			for _, x := range want[k] {
				sum += x
				abs += math.Abs(x)
			}
			if !within(out[k][0], sum, 1e-13*abs, 0) && !(math.IsNaN(sum) && math.IsNaN(out[k][0])) {
				t.Errorf("Case %v: output %s summed want %v, got %v", name, o.Name, sum, out[k][0])
			}
			continue
		}
		for i := 0; i < n; i++ {
			if !sameFloat(out[k][i], want[k][i]) {
				t.Errorf("Case %v: output %s trajectory %d want %v (Eval), got %v", name, o.Name, i, want[k][i], out[k][i])
				break
			}
		}
	}
}

// luProgram solves W x = b and Wᵀ z = x for a d×d W; either may be shared.
func luProgram(t testing.TB, d int, sharedW, sharedB bool) *tape.Program {
	in := make([]tape.Input, 0, d*d+d)
	for i := 0; i < d*d; i++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("w%d", i), Shared: sharedW})
	}
	for i := 0; i < d; i++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("b%d", i), Shared: sharedB})
	}
	return mustTrace(t, fmt.Sprintf("lu%d", d), in, func(v []tape.V) []tape.V {
		lu := tape.Factor(v[:d*d], d)
		x := lu.Solve(v[d*d:])
		z := lu.SolveT(x)
		return append(x, z...)
	})
}

// luInputs returns random well-conditioned matrices; trajectory 5 (if
// any) has a singular one unless W is shared.
func luInputs(r *rand.Rand, p *tape.Program, d, n int) [][]float64 {
	in := make([][]float64, len(p.Inputs))
	for k, s := range p.Inputs {
		m := n
		if s.Shared {
			m = 1
		}
		in[k] = make([]float64, m)
		for i := range in[k] {
			in[k][i] = uniform(r, -1, 1)
			if k < d*d && k%(d+1) == 0 {
				in[k][i] += float64(d) + 1
			}
			if k < d*d && i == 5 {
				in[k][i] = 1 // all ones: singular for d > 1
				if d == 1 {
					in[k][i] = 0
				}
			}
		}
	}
	return in
}

func TestExecLU(t *testing.T) {
	t.Parallel()
	for _, d := range []int{1, 2, 3, 5, 8} {
		for _, v := range []struct {
			name             string
			sharedW, sharedB bool
		}{{"pertraj", false, false}, {"sharedW", true, false}, {"sharedB", false, true}} {
			name := fmt.Sprintf("d=%d/%s", d, v.name)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				rnd := rand.New(rand.NewPCG(1, 1))
				p := luProgram(t, d, v.sharedW, v.sharedB)
				vjp := mustProgram(t, name)(tape.VJP(p, nil))
				jvp := mustProgram(t, name)(tape.JVP(p, nil))
				const n = 37
				in := luInputs(rnd, p, d, n)
				extra := func(q *tape.Program) [][]float64 {
					s := append([][]float64(nil), in...)
					for k := len(p.Inputs); k < len(q.Inputs); k++ {
						m := n
						if q.Inputs[k].Shared {
							m = 1
						}
						s = append(s, randVec(rnd, m))
					}
					return s
				}
				for _, bs := range []int{1, 8, 256} {
					for _, q := range []*tape.Program{p, vjp, jvp} {
						s := &tape.ExecSettings{BlockSize: bs, Workers: 2}
						checkExec(t, fmt.Sprintf("%s/%s/bs=%d", name, q.Name, bs), q, extra(q), n, s)
					}
				}
			})
		}
	}
}

// TestExecSingular checks that a singular matrix gives NaNs, and that
// CheckFinite reports it with Singular set and a message that says so.
func TestExecSingular(t *testing.T) {
	t.Parallel()
	for _, d := range []int{1, 2, 3, 5, 8} {
		rnd := rand.New(rand.NewPCG(1, 1))
		p := luProgram(t, d, false, false)
		const n = 9
		in := luInputs(rnd, p, d, n)
		e, err := tape.NewExec(p, &tape.ExecSettings{CheckFinite: true, BlockSize: 4})
		if err != nil {
			t.Fatal(err)
		}
		out := newOuts(p, n)
		err = e.Run(out, in, n)
		for k := range out {
			for i := 0; i < n; i++ {
				if got := out[k][i]; math.IsNaN(got) != (i == 5) {
					t.Errorf("Case d=%d: output %d trajectory %d: NaN want %v, got %v", d, k, i, i == 5, got)
				}
			}
		}
		var nf *tape.NonFiniteError
		if !errors.As(err, &nf) {
			t.Fatalf("Case d=%d: want a *NonFiniteError, got %v", d, err)
		}
		if !nf.Singular || nf.Trajectory != 5 || nf.Output != "out0" || !strings.Contains(nf.Line, "LUFactor") {
			t.Errorf("Case d=%d: want Singular at trajectory 5, output out0, an LUFactor line; got %+v", d, nf)
		}
		if msg := nf.Error(); !strings.Contains(msg, "singular") || !strings.Contains(msg, "trajectory 5") {
			t.Errorf("Case d=%d: message %q should say the matrix is singular and name trajectory 5", d, msg)
		}
		// The gradient through a singular solve is NaN too, and only there.
		vjp := mustProgram(t, "vjp")(tape.VJP(p, nil))
		vin := append([][]float64(nil), in...)
		for k := len(p.Inputs); k < len(vjp.Inputs); k++ {
			vin = append(vin, randVec(rnd, n))
		}
		g := evalAll(vjp, vin, n)
		for k := range g {
			for i := 0; i < n; i++ {
				if math.IsNaN(g[k][i]) != (i == 5) {
					t.Errorf("Case d=%d: gradient %d trajectory %d: NaN want %v, got %v", d, k, i, i == 5, g[k][i])
				}
			}
		}
	}
}

func TestExecNonFinite(t *testing.T) {
	t.Parallel()
	p := mustTrace(t, "nf", withNames("x", "y"), func(in []tape.V) []tape.V {
		return []tape.V{in[1].Mul(in[1]), in[0].Log().Add(in[1])}
	})
	summed := *p
	summed.Outputs = []tape.Output{{Name: "total", ID: p.Outputs[1].ID, Sum: true}}
	overflow := mustTrace(t, "overflow", withNames("x"), func(in []tape.V) []tape.V { return in })
	overflow.Outputs[0].Sum = true
	const n = 10
	x := []float64{1, 2, 3, -1, 5, -2, 7, 8, 9, 10}
	y := make([]float64, n)
	for _, tc := range []struct {
		name string
		p    *tape.Program
		in   [][]float64
		want string // substrings of the message; none for no error
		traj int    // want NonFiniteError.Trajectory
		line string // want NonFiniteError.Line
	}{
		{"log(-1)", p, [][]float64{x, y}, "Log|trajectory 3|output out1|NaN", 3, "v3 = Log v0"},
		{"log(-1)/summed", &summed, [][]float64{x, y}, "Log|trajectory 3|output total", 3, "v3 = Log v0"},
		{"input", p, [][]float64{x[:3], {0, math.Inf(1), 0}}, "trajectory 1|output out0|an input is not finite", 1, ""},
		{"finite", p, [][]float64{{1, 2}, {3, 4}}, "", 0, ""},
		{"overflow", overflow, [][]float64{{1e308, 1e308}}, "overflows", -1, ""},
	} {
		nn := len(tc.in[0])
		e, err := tape.NewExec(tc.p, &tape.ExecSettings{CheckFinite: true, BlockSize: 4, Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		err = e.Run(newOuts(tc.p, nn), tc.in, nn)
		if tc.want == "" {
			if err != nil {
				t.Errorf("Case %v: want no error, got %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("Case %v: want an error, got nil", tc.name)
			continue
		}
		for _, s := range strings.Split(tc.want, "|") {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Case %v: message %q should contain %q", tc.name, err, s)
			}
		}
		var nf *tape.NonFiniteError
		if tc.traj < 0 {
			if errors.As(err, &nf) {
				t.Errorf("Case %v: want a plain error, got a *NonFiniteError", tc.name)
			}
			continue
		}
		if !errors.As(err, &nf) {
			t.Errorf("Case %v: want a *NonFiniteError, got %T", tc.name, err)
			continue
		}
		if nf.Trajectory != tc.traj || nf.Line != tc.line || nf.Singular {
			t.Errorf("Case %v: want trajectory %d at %q, got %+v", tc.name, tc.traj, tc.line, nf)
		}
	}
	// Without CheckFinite the NaN is returned as it is.
	e, err := tape.NewExec(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := newOuts(p, n)
	if err := e.Run(out, [][]float64{x, y}, n); err != nil || !math.IsNaN(out[1][3]) {
		t.Errorf("Case no check: want NaN and no error, got %v and %v", out[1][3], err)
	}
}

// TestExecOutputs covers outputs that are inputs, constants and uniform
// values, summed or not, and an extracted solve component.
func TestExecOutputs(t *testing.T) {
	t.Parallel()
	p := mustTrace(t, "outs", []tape.Input{{Name: "a"}, {Name: "w", Shared: true}}, func(in []tape.V) []tape.V {
		a, w := in[0], in[1]
		x := tape.Solve([]tape.V{a.AddC(3), w, w, a.AddC(5)}, []tape.V{a, w})
		return []tape.V{a, w, w, a.Const(2.5), a.Const(2.5), w.MulC(3), a.Mul(w), a.Mul(w), x[0], x[1], x[1]}
	})
	sum := []bool{false, false, true, false, true, false, false, true, false, false, true}
	for k := range p.Outputs {
		p.Outputs[k].Sum = sum[k]
	}
	rnd := rand.New(rand.NewPCG(1, 1))
	for _, n := range execGrid.ns {
		in := [][]float64{randVec(rnd, n), {0.75}}
		for _, bs := range execGrid.blockSizes {
			for _, nw := range execGrid.workers {
				checkExec(t, fmt.Sprintf("n=%d/bs=%d/workers=%d", n, bs, nw), p, in, n, &tape.ExecSettings{BlockSize: bs, Workers: nw})
			}
		}
	}
	// The sum of a uniform value over n trajectories is n times it.
	e, err := tape.NewExec(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := newOuts(p, 7)
	if err := e.Run(out, [][]float64{randVec(rnd, 7), {0.75}}, 7); err != nil {
		t.Fatal(err)
	}
	if out[2][0] != 7*0.75 || out[4][0] != 7*2.5 {
		t.Errorf("Case uniform sums: want %v and %v, got %v and %v", 7*0.75, 7*2.5, out[2][0], out[4][0])
	}
	if e.Program() != p {
		t.Errorf("Case Program: want the program given to NewExec")
	}
}

// TestExecReuse runs one Exec several times with new shared inputs and
// sizes: nothing may leak from one run into the next.
func TestExecReuse(t *testing.T) {
	t.Parallel()
	p := mustTrace(t, "lorenz-shared", []tape.Input{{Name: "t"}, {Name: "y0"}, {Name: "y1"}, {Name: "y2"},
		{Name: "sigma", Shared: true}, {Name: "rho", Shared: true}, {Name: "beta", Shared: true}}, lorenzF)
	rnd := rand.New(rand.NewPCG(1, 1))
	e, err := tape.NewExec(p, &tape.ExecSettings{BlockSize: 16, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	for run, n := range []int{100, 100, 7, 1000, 16, 0, 33} {
		in := [][]float64{randVec(rnd, n), randVec(rnd, n), randVec(rnd, n), randVec(rnd, n),
			{uniform(rnd, 5, 15)}, {uniform(rnd, 20, 30)}, {uniform(rnd, 1, 3)}}
		want := evalAll(p, in, n)
		out := newOuts(p, n)
		if err := e.Run(out, in, n); err != nil {
			t.Fatal(err)
		}
		for k := range out {
			for i := 0; i < n; i++ {
				if out[k][i] != want[k][i] {
					t.Fatalf("Case run %d n=%d: output %d trajectory %d want %v, got %v", run, n, k, i, want[k][i], out[k][i])
				}
			}
		}
	}
}

// TestExecConcurrent runs several Execs at once; they share the worker
// pool. Run with -race.
func TestExecConcurrent(t *testing.T) {
	t.Parallel()
	p := lorenzProgram(t)
	rnd := rand.New(rand.NewPCG(1, 1))
	const n = 3000
	in := make([][]float64, len(p.Inputs))
	for k := range in {
		in[k] = randVec(rnd, n)
	}
	want := evalAll(p, in, n)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, err := tape.NewExec(p, &tape.ExecSettings{BlockSize: 64, Workers: 3})
			if err != nil {
				errs <- err.Error()
				return
			}
			out := newOuts(p, n)
			for rep := 0; rep < 5; rep++ {
				if err := e.Run(out, in, n); err != nil {
					errs <- err.Error()
					return
				}
				for k := range want {
					for i := 0; i < n; i++ {
						if out[k][i] != want[k][i] {
							errs <- fmt.Sprintf("goroutine %d rep %d: output %d trajectory %d want %v, got %v", g, rep, k, i, want[k][i], out[k][i])
							return
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("Case concurrent: %s", s)
	}
}

// TestExecAllocs checks that Run allocates nothing once its buffers exist.
func TestExecAllocs(t *testing.T) {
	p := lorenzProgram(t)
	// A version with a summed output and shared parameters.
	q := mustTrace(t, "lorenz-shared", []tape.Input{{Name: "t"}, {Name: "y0"}, {Name: "y1"}, {Name: "y2"},
		{Name: "sigma", Shared: true}, {Name: "rho", Shared: true}, {Name: "beta", Shared: true}}, lorenzF)
	q.Outputs[2].Sum = true
	rnd := rand.New(rand.NewPCG(1, 1))
	for _, tc := range []struct {
		name string
		p    *tape.Program
		n    int
		s    tape.ExecSettings
	}{
		{"large/workers=4", p, 1 << 16, tape.ExecSettings{Workers: 4}},
		{"large/workers=2/shared", q, 1 << 16, tape.ExecSettings{Workers: 2, BlockSize: 128}},
		{"small/workers=1", p, 5, tape.ExecSettings{Workers: 1}},
		{"small/workers=4", q, 5, tape.ExecSettings{Workers: 4, BlockSize: 2}},
		{"checkfinite", q, 1000, tape.ExecSettings{Workers: 2, CheckFinite: true}},
	} {
		in := make([][]float64, len(tc.p.Inputs))
		for k, s := range tc.p.Inputs {
			if s.Shared {
				in[k] = randVec(rnd, 1)
			} else {
				in[k] = randVec(rnd, tc.n)
			}
		}
		out := newOuts(tc.p, tc.n)
		e, err := tape.NewExec(tc.p, &tc.s)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Run(out, in, tc.n); err != nil {
			t.Fatal(err)
		}
		if a := testing.AllocsPerRun(10, func() { e.Run(out, in, tc.n) }); a != 0 {
			t.Errorf("Case %v: Run allocates %v times per call, want 0", tc.name, a)
		}
	}
}

func TestExecPanics(t *testing.T) {
	t.Parallel()
	p := mustTrace(t, "p", []tape.Input{{Name: "x"}, {Name: "s", Shared: true}}, func(in []tape.V) []tape.V {
		return []tape.V{in[0].Mul(in[1])}
	})
	p.Outputs = append(p.Outputs, tape.Output{Name: "total", ID: p.Outputs[0].ID, Sum: true})
	e, err := tape.NewExec(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		out, in [][]float64
		want    string
	}{
		{"inputs", [][]float64{make([]float64, 4), {0}}, [][]float64{make([]float64, 4)}, "has 2 inputs and 2 outputs, got 1 and 2"},
		{"outputs", [][]float64{make([]float64, 4)}, [][]float64{make([]float64, 4), {0}}, "got 2 and 1"},
		{"short input", [][]float64{make([]float64, 4), {0}}, [][]float64{make([]float64, 3), {0}}, "input 0 (x) has 3 values, want 4"},
		{"shared input", [][]float64{make([]float64, 4), {0}}, [][]float64{make([]float64, 4), {}}, "input 1 (s) has 0 values, want 1"},
		{"short output", [][]float64{make([]float64, 2), {0}}, [][]float64{make([]float64, 4), {0}}, "output 0 (out0) has room for 2 values, want 4"},
		{"sum output", [][]float64{make([]float64, 4), {}}, [][]float64{make([]float64, 4), {0}}, "output 1 (total) has room for 0 values, want 1"},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.want) {
					t.Errorf("Case %v: want a panic containing %q, got %v", tc.name, tc.want, r)
				}
			}()
			e.Run(tc.out, tc.in, 4)
		}()
	}
	if _, err := tape.NewExec(invalidProgram(), nil); err == nil || !strings.Contains(err.Error(), "not defined before it") {
		t.Errorf("Case invalid: NewExec want an error, got %v", err)
	}
}

func TestEvalPanics(t *testing.T) {
	t.Parallel()
	p := lorenzProgram(t)
	for _, tc := range []struct {
		name    string
		dst, in []float64
		want    string
	}{
		{"inputs", nil, make([]float64, 3), "has 7 inputs, got 3"},
		{"dst", make([]float64, 2), make([]float64, 7), "len(dst) != number of outputs"},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.Contains(s, tc.want) {
					t.Errorf("Case %v: want a panic containing %q, got %v", tc.name, tc.want, r)
				}
			}()
			p.Eval(tc.dst, tc.in)
		}()
	}
}

// TestExecInPlace updates the state in place, y ← y + h·f(y) with the
// outputs aliasing the inputs (as package scan does), and writes outputs
// that are used again and outputs repeated, with the outputs separate
// from the inputs (written in place by the steps) and aliasing them.
func TestExecInPlace(t *testing.T) {
	t.Parallel()
	p := mustTrace(t, "euler", []tape.Input{{Name: "y0"}, {Name: "y1"}, {Name: "y2"}, {Name: "h", Shared: true}}, func(in []tape.V) []tape.V {
		c := in[0].Const
		f := lorenzF([]tape.V{c(0), in[0], in[1], in[2], c(10), c(28), c(8.0 / 3)})
		y := make([]tape.V, 3)
		for k := range y {
			y[k] = tape.FMA(in[3], f[k], in[k])
		}
		// Reads y0 after its new value is computed.
		y[2] = y[2].Add(in[0].MulC(1e-3))
		u := y[0].Mul(y[1])
		return []tape.V{y[0], y[1], y[2], u, u.Sin(), u}
	})
	rnd := rand.New(rand.NewPCG(1, 1))
	const n = 1001
	for _, bs := range []int{1, 16, 256} {
		for _, nw := range []int{1, 3} {
			name := fmt.Sprintf("bs=%d/workers=%d", bs, nw)
			in := [][]float64{randVec(rnd, n), randVec(rnd, n), randVec(rnd, n), {0.01}}
			want := evalAll(p, in, n)
			e, err := tape.NewExec(p, &tape.ExecSettings{BlockSize: bs, Workers: nw})
			if err != nil {
				t.Fatal(err)
			}
			// Separate outputs first, then the state updated in place.
			out := newOuts(p, n)
			if err := e.Run(out, in, n); err != nil {
				t.Fatal(err)
			}
			checkSentinels(t, name, p, out, n)
			for _, aliased := range []bool{false, true} {
				if aliased {
					out = [][]float64{in[0], in[1], in[2], make([]float64, n), make([]float64, n), make([]float64, n)}
					if err := e.Run(out, in, n); err != nil {
						t.Fatal(err)
					}
				}
				for k := range want {
					for i := 0; i < n; i++ {
						if out[k][i] != want[k][i] {
							t.Fatalf("Case %v aliased=%v: output %d trajectory %d want %v, got %v", name, aliased, k, i, want[k][i], out[k][i])
						}
					}
				}
			}
		}
	}
}
