package cuda

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// callCounter is the null backend counting its calls that go to the
// device: on a GPU each is one hand-over to the device's goroutine, tens
// of microseconds on an idle host, as much as a small call's kernel.
type callCounter struct {
	nullBackend
	mu    sync.Mutex
	calls map[string]int
}

func (b *callCounter) count(name string) {
	b.mu.Lock()
	b.calls[name]++
	b.mu.Unlock()
}

func (b *callCounter) take() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.calls
	b.calls = map[string]int{}
	return c
}

func (b *callCounter) alloc(n int64) (uint64, error) { b.count("alloc"); return b.nullBackend.alloc(n) }
func (b *callCounter) free(a uint64) error           { b.count("free"); return b.nullBackend.free(a) }
func (b *callCounter) write(a uint64, s []byte) error {
	b.count("write")
	return b.nullBackend.write(a, s)
}
func (b *callCounter) read(d []byte, a uint64) error {
	b.count("read")
	return b.nullBackend.read(d, a)
}
func (b *callCounter) zero(a uint64, n int64) error { b.count("zero"); return b.nullBackend.zero(a, n) }
func (b *callCounter) hostAlloc(n int64) []byte {
	b.count("hostAlloc")
	return b.nullBackend.hostAlloc(n)
}
func (b *callCounter) hostFree(x []byte)        { b.count("hostFree"); b.nullBackend.hostFree(x) }
func (b *callCounter) memFree() (int64, error)  { b.count("memFree"); return b.nullBackend.memFree() }
func (b *callCounter) newClock() (clock, error) { b.count("newClock"); return b.nullBackend.newClock() }
func (b *callCounter) batch(f func(q queue) error) error {
	b.count("batch")
	return b.nullBackend.batch(f)
}

var counted = &callCounter{nullBackend: nullBackend{newHostBackend(16 << 30)}, calls: map[string]int{}}

func init() { ode.Register(&Engine{name: "cuda-null-counted", prec: Float64, be: counted}) }

// TestCallHandOvers checks that a repeated Solver.Grad call, with the
// record or on a given mesh, a Gradient passed back, goes to the device
// once: one batch, no allocation, no memory query, no staging buffer
// made or freed. The calls alternate, as a training loop's record and
// replays do, so that buffers sized for one must serve the other.
func TestCallHandOvers(t *testing.T) {
	for _, n := range []int{128, 1 << 15} {
		pr := problems.Lorenz()
		prob := ode.Problem{Field: pr.Field, N: n, Y0: []float64{1, 0, 0}, P: []float64{10, 28, 8.0 / 3}, T0: 0, T1: 1}
		sv, err := ode.NewSolver(prob.Field, &ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9, Engine: "cuda-null-counted"})
		if err != nil {
			t.Fatal(err)
		}
		loss := ode.SumSquares()
		ctx := context.Background()
		mesh, _, err := sv.RecordContext(ctx, &prob)
		if err != nil {
			t.Fatal(err)
		}
		var gr, gm ode.Gradient
		for round := range 4 {
			for _, c := range []struct {
				name string
				g    *ode.Gradient
				m    *ode.Mesh
			}{{"record", &gr, nil}, {"mesh", &gm, mesh}} {
				counted.take()
				if _, err := sv.GradContext(ctx, c.g, &prob, loss, c.m); err != nil {
					t.Fatal(err)
				}
				calls := counted.take()
				if round < 2 {
					continue // warming up: buffers found their sizes
				}
				if calls["batch"] != 1 || len(calls) != 1 {
					t.Errorf("n=%d, %s, round %d: device calls %v, want one batch", n, c.name, round, calls)
				}
			}
		}
	}
}

// TestScatterColsFinite checks scatterCols' copy (a launch's columns to
// rows, a gather g) and its report of values that are not finite, and
// gatherCols' copy the other way and its report, in float64 and float32,
// for the widths with a loop of their own and others, for the extreme
// finite values and every kind of non-finite one at any position.
func TestScatterColsFinite(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 150
	// A gather of trajectories in any order, and one of consecutive
	// trajectories (a launch's, which the width-1 copy takes straight),
	// more than a tile of them (scatterTile).
	perm, consecutive := rng.Perm(n)[:129], make([]int, 129)
	for j := range consecutive {
		consecutive[j] = 5 + j
	}
	specials := []struct {
		x      float64
		finite bool
	}{
		{math.MaxFloat64, true}, {-math.MaxFloat64, true}, {math.SmallestNonzeroFloat64, true}, {0, true},
		{math.Copysign(0, -1), true}, {math.Inf(1), false}, {math.Inf(-1), false}, {math.NaN(), false},
	}
	same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
	for _, c := range []struct {
		w int
		g []int
	}{{1, perm}, {1, consecutive}, {2, perm}, {3, perm}, {3, consecutive}, {4, perm}, {5, perm}, {130, perm}, {130, consecutive}} {
		w, g := c.w, c.g
		for _, f32 := range []bool{false, true} {
			for _, s := range specials {
				x32 := float64(float32(s.x))
				if f32 && s.finite && math.IsInf(x32, 0) {
					continue // MaxFloat64 is not a float32
				}
				at := rng.IntN(w * n)
				src := reals{}
				want := make([]float64, n*w)
				if f32 {
					src.f32 = make([]float32, w*n)
					for k := range src.f32 {
						src.f32[k] = float32(rng.NormFloat64())
					}
					src.f32[at] = float32(s.x)
				} else {
					src.f64 = make([]float64, w*n)
					for k := range src.f64 {
						src.f64[k] = rng.NormFloat64()
					}
					src.f64[at] = s.x
				}
				// Only the launch's trajectories q0.. q0+len(g)-1 are copied.
				q0 := 3
				gb := g[:min(len(g), n-q0)]
				inLaunch := at%n >= q0 && at%n < q0+len(gb)
				for c := range w {
					for j, i := range gb {
						want[i*w+c] = src.get(c*n + q0 + j)
					}
				}
				dst := make([]float64, n*w)
				got := scatterCols(dst, w, src, n, q0, gb)
				if wantFinite := s.finite || !inLaunch; got != wantFinite {
					t.Errorf("w %d, g[0] %d, f32 %t, %v at %d (in the launch %t): finite %t, want %t", w, g[0], f32, s.x, at, inLaunch, got, wantFinite)
				}
				for k := range dst {
					if !same(dst[k], want[k]) {
						t.Fatalf("w %d, g[0] %d, f32 %t: dst[%d] = %v, want %v", w, g[0], f32, k, dst[k], want[k])
					}
				}
				// Back: the rows of the launch's trajectories q0… to
				// their columns (g indexed by launch trajectory).
				rows := make([]float64, n*w)
				for k := range rows {
					rows[k] = rng.NormFloat64()
				}
				bad := rng.IntN(n * w)
				rows[bad] = s.x
				gl := rng.Perm(n) // launch trajectory q is trajectory gl[q]
				q1 := n - 2
				back := reals{}
				if f32 {
					back.f32 = make([]float32, w*n)
				} else {
					back.f64 = make([]float64, w*n)
				}
				fin := gatherCols(back, n, rows, w, gl, q0, q1)
				badIn := false
				for q := q0; q < q1; q++ {
					badIn = badIn || gl[q] == bad/w
					for c := range w {
						x := rows[gl[q]*w+c]
						if f32 {
							x = float64(float32(x))
						}
						if !same(back.get(c*n+q), x) {
							t.Fatalf("w %d, f32 %t: gathered column %d of %d = %v, want %v", w, f32, c, q, back.get(c*n+q), x)
						}
					}
				}
				if wantFinite := s.finite || !badIn; fin != wantFinite {
					t.Errorf("w %d, f32 %t, gather of %v (in the launch %t): finite %t, want %t", w, f32, s.x, badIn, fin, wantFinite)
				}
			}
		}
	}
}

// TestHostEngineGradNonFinite checks that a gradient that is not finite
// on the GPU engine is still an error naming its trajectory now that the
// engine's copy checks it (Result.GradFinite): y' = −p√y from y0 = 0
// stays at 0, where √y's derivative is infinite; trajectory 5 of 9
// starts there, the others above it.
func TestHostEngineGradNonFinite(t *testing.T) {
	needHost(t)
	f := ode.Field{Name: "sqrt", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[0].Sqrt().Mul(p[0]).Neg()}
	}}
	const n, bad = 9, 5
	y0 := make([]float64, n)
	p := make([]float64, n)
	for i := range y0 {
		y0[i], p[i] = 1+float64(i), 0.5
	}
	y0[bad] = 0
	prob := ode.Problem{Field: f, Y0: y0, P: p, T1: 1}
	_, err := ode.Grad(nil, prob, ode.SumSquares(), nil, &ode.Settings{Engine: hostF64.name, Method: ode.Tsit5})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("trajectory %d", bad)) {
		t.Fatalf("want an error naming the non-finite gradient of trajectory %d, got %v", bad, err)
	}
	y0[bad] = 1 // all finite: no error
	if _, err := ode.Grad(nil, prob, ode.SumSquares(), nil, &ode.Settings{Engine: hostF64.name, Method: ode.Tsit5}); err != nil {
		t.Fatal(err)
	}
}

// TestHostEngineBroadcast checks that inputs given as one row (Y0, P, T1),
// broadcast on the device past Tuning.bcastSeed's threshold, give the
// results of the same rows given per trajectory, bit for bit, in Solve,
// Grad with its record and Grad on a mesh, in float64 and float32, for
// launches that are not a multiple of the seed; and that they upload less.
func TestHostEngineBroadcast(t *testing.T) {
	needHost(t)
	pr := problems.Lorenz()
	const seed, n = 16, 16*16 + 37
	for _, base := range []*Engine{hostF64, hostF32} {
		eng := tuned(t, base.name, Tuning{bcastSeed: seed})
		for _, c := range []struct {
			name        string
			y0, p, perP bool // one row of Y0, of P; P per trajectory otherwise
		}{{"y0-p-t1", true, true, false}, {"y0-t1", true, false, true}, {"p", false, true, false}} {
			row := []float64{1, 0.5, -0.25}
			prow := []float64{10, 28, 8.0 / 3}
			full := func() ode.Problem {
				y0 := make([]float64, 3*n)
				p := make([]float64, 3*n)
				for i := range n {
					copy(y0[3*i:], row)
					copy(p[3*i:], prow)
					if c.perP {
						p[3*i+1] += float64(i % 5)
					}
				}
				return ode.Problem{Field: pr.Field, N: n, Y0: y0, P: p, T1s: slices.Repeat([]float64{1}, n)}
			}
			want := full()
			got := full()
			got.T1s, got.T1 = nil, 1
			if c.y0 {
				got.Y0 = row
			}
			if c.p {
				got.P = prow
			}
			set := &ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9}
			if base.prec == Float32 {
				set.RelTol, set.AbsTol = 1e-4, 1e-7
			}
			set.Engine = base.name
			ref, err := ode.NewSolver(pr.Field, set)
			if err != nil {
				t.Fatal(err)
			}
			set.Engine = eng
			sv, err := ode.NewSolver(pr.Field, set)
			if err != nil {
				t.Fatal(err)
			}
			sw, err := ref.Solve(&want)
			if err != nil {
				t.Fatal(err)
			}
			var tr Trace
			ctx := WithTrace(context.Background(), &tr)
			sg, err := sv.SolveContext(ctx, &got)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sg.Y, sw.Y) {
				t.Errorf("%s %s: Solve differs", base.name, c.name)
			}
			gw, err := ref.Grad(nil, &want, ode.SumSquares(), nil)
			if err != nil {
				t.Fatal(err)
			}
			gg, err := sv.Grad(nil, &got, ode.SumSquares(), nil)
			if err != nil {
				t.Fatal(err)
			}
			gm, err := sv.Grad(nil, &got, ode.SumSquares(), gg.Mesh)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range []*ode.Gradient{gg, gm} {
				if g.Loss != gw.Loss || !slices.Equal(g.Y0, gw.Y0) || !slices.Equal(g.P, gw.P) || !slices.Equal(g.Solution.Y, gw.Solution.Y) {
					t.Errorf("%s %s: Grad differs: loss %v, want %v", base.name, c.name, g.Loss, gw.Loss)
				}
			}
			// Solve's upload: the broadcast columns send seed values, not n.
			es := int64(base.prec.Size())
			cols := int64(1) // T1
			if c.y0 {
				cols += 3
			}
			if c.p {
				cols += 3
			}
			var tw Trace
			if _, err := ref.SolveContext(WithTrace(context.Background(), &tw), &want); err != nil {
				t.Fatal(err)
			}
			// (ref's arena holds its inputs from its calls before: what it
			// did not send again counts as sent.)
			if d, want := tw.Stats().Upload+tw.Stats().Reused-tr.Stats().Upload, cols*(n-seed)*es; d != want {
				t.Errorf("%s %s: uploads %d bytes fewer, want %d", base.name, c.name, d, want)
			}
		}
	}
}

// TestHostEngineBroadcastReruns checks broadcast inputs in the reruns of
// trajectories whose record buffer overflowed (Tuning.firstRows: 2 rows
// at first), launches of a list of trajectories rather than a range: the
// gradient equals the one of the same rows given per trajectory on an
// engine without either, bit for bit.
func TestHostEngineBroadcastReruns(t *testing.T) {
	needHost(t)
	pr := problems.Lorenz()
	const seed, n = 16, 2*16*16 + 5
	eng := tuned(t, hostF64.name, Tuning{bcastSeed: seed, firstRows: 2})
	row, prow := []float64{1, 0.5, -0.25}, []float64{10, 28, 8.0 / 3}
	full := ode.Problem{Field: pr.Field, N: n, Y0: slices.Repeat(row, n), P: slices.Repeat(prow, n), T1s: slices.Repeat([]float64{1}, n)}
	one := ode.Problem{Field: pr.Field, N: n, Y0: row, P: prow, T1: 1}
	set := ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9, Engine: hostF64.name}
	want, err := ode.Grad(nil, full, ode.SumSquares(), nil, &set)
	if err != nil {
		t.Fatal(err)
	}
	set.Engine = eng
	sv, err := ode.NewSolver(pr.Field, &set)
	if err != nil {
		t.Fatal(err)
	}
	var tr Trace
	got, err := sv.GradContext(WithTrace(context.Background(), &tr), nil, &one, ode.SumSquares(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := tr.Stats(); st.Reruns < 16*seed {
		t.Fatalf("%d trajectories rerun, want at least %d (a broadcast rerun launch)", st.Reruns, 16*seed)
	}
	if got.Loss != want.Loss || !slices.Equal(got.Y0, want.Y0) || !slices.Equal(got.P, want.P) || !slices.Equal(got.Solution.Y, want.Solution.Y) {
		t.Errorf("gradient with reruns differs: loss %v, want %v", got.Loss, want.Loss)
	}
}

// TestHostEngineLazyTimes checks a gradient whose record fails on some
// trajectories only (MaxSteps), on one device and on two: the times
// reached and the last steps,
// which a gradient brings back only where a trajectory failed
// (lazyTimes), give the failures the CPU engine's times and steps, and
// the others' gradients are the CPU's.
func TestHostEngineLazyTimes(t *testing.T) {
	needHost(t)
	pr := problems.Lorenz()
	const n = 40
	p := lorenzRhoSweep(n)
	// The second half runs ten times longer than MaxSteps allows.
	t1 := make([]float64, n)
	for i := range t1 {
		t1[i] = 2
		if i >= n/2 {
			t1[i] = 20
		}
	}
	prob := ode.Problem{Field: pr.Field, N: n, Y0: []float64{1, 0, 0}, P: p, T1s: t1}
	run := func(engine string) (*ode.Gradient, []*ode.TrajectoryError) {
		sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-11, MaxSteps: 300, Engine: engine})
		if err != nil {
			t.Fatal(err)
		}
		g, fails, err := sv.GradPartial(t.Context(), nil, &prob, ode.SumSquares(), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", engine, err)
		}
		return g, fails
	}
	wg, want := run("cpu")
	if len(want) == 0 || len(want) == n {
		t.Fatalf("%d of %d trajectories fail on the CPU; want some (the test checks nothing otherwise)", len(want), n)
	}
	// On two devices the failures are all in the second shard: the first
	// brings back no times at all.
	for _, engine := range []string{hostF64.name, "cuda-multi-host2"} {
		gg, got := run(engine)
		if len(got) != len(want) {
			t.Fatalf("%s: %d failures, %d on the CPU", engine, len(got), len(want))
		}
		for k, w := range want {
			g := got[k]
			if g.Index != w.Index || g.Status != w.Status || !(math.Abs(g.T-w.T) <= 1e-9*math.Abs(w.T)) || !(math.Abs(g.H-w.H) <= 1e-6*math.Abs(w.H)) || w.H == 0 {
				t.Errorf("%s failure %d: trajectory %d %v at t = %v (last step %v); CPU %d %v at %v (%v)", engine, k, g.Index, g.Status, g.T, g.H, w.Index, w.Status, w.T, w.H)
			}
		}
		closeRows(t, engine+": gradient of the others", gg.P, wg.P, 3, 1e-10, nil)
	}
}

// lorenzRhoSweep returns n Lorenz parameter rows (σ, ρ, β) = (10, ρ_i,
// 8/3), ρ evenly from 0 to 28, so the trajectories range from decaying
// to chaotic.
func lorenzRhoSweep(n int) []float64 {
	p := make([]float64, 3*n)
	for i := range n {
		p[3*i], p[3*i+1], p[3*i+2] = 10, 28*float64(i)/float64(n-1), 8.0/3
	}
	return p
}

// TestSavesFailedRows checks the saved states of a launch of more
// trajectories than one scatter task (savesTask) where some fail
// (MaxSteps): every row as the CPU engine's (within 1e-10), the failed
// trajectories' NaN.
func TestSavesFailedRows(t *testing.T) {
	c := lorenzCase(700, 1e-7)
	ts := make([]float64, 100)
	for j := range ts {
		ts[j] = float64(j+1) / 100
	}
	c.prob.SaveAt = ts
	c.set.MaxSteps, c.set.AllowFailures = 60, true
	want, err := c.solver(t, "cpu").Solve(&c.prob)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.solver(t, "cuda-host").Solve(&c.prob)
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i, st := range want.Status {
		if st != ode.OK {
			failed++
		}
		if got.Status[i] != st {
			t.Fatalf("trajectory %d: status %v, want %v", i, got.Status[i], st)
		}
	}
	if failed == 0 || failed == len(want.Status) {
		t.Fatalf("%d of %d trajectories failed: the case tests nothing", failed, len(want.Status))
	}
	if w := 100 * 3; savesTask(w) >= c.prob.N {
		t.Fatalf("one scatter task of %d trajectories holds the launch", savesTask(w))
	}
	for k, w := range want.Ys {
		x := got.Ys[k]
		if math.IsNaN(x) != math.IsNaN(w) || !math.IsNaN(w) && math.Abs(x-w) > 1e-10*max(1, math.Abs(w)) {
			t.Fatalf("Ys[%d] (trajectory %d, %v) = %v, want %v", k, k/300, want.Status[k/300], x, w)
		}
	}
}

// TestResultBlocksSameResults: a launch's staging and result loops run in
// blocks sized by the cores (resultBlockOf), and the results do not depend
// on them: one core against eight, bit for bit (the loss summed in
// trajectory order, gradients, states, step counts).
func TestResultBlocksSameResults(t *testing.T) {
	c := lorenzCase(20000, 1e-6)
	sv := c.solver(t, "cuda-host")
	grad := func(procs int) *ode.Gradient {
		old := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(old)
		if b := resultBlockOf(c.prob.N); procs == 1 && b*2 > c.prob.N || procs == 8 && b != 1024 {
			t.Fatalf("%d cores: blocks of %d trajectories", procs, b)
		}
		g, err := sv.Grad(nil, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	one, eight := grad(1), grad(8)
	if math.Float64bits(one.Loss) != math.Float64bits(eight.Loss) {
		t.Errorf("loss %v on eight cores, %v on one", eight.Loss, one.Loss)
	}
	for _, a := range []struct {
		what      string
		got, want []float64
	}{{"P", eight.P, one.P}, {"Y0", eight.Y0, one.Y0}, {"Y", eight.Solution.Y, one.Solution.Y}, {"Ys", eight.Solution.Ys, one.Solution.Ys}} {
		for k := range a.want {
			if math.Float64bits(a.got[k]) != math.Float64bits(a.want[k]) {
				t.Fatalf("%s[%d] = %v on eight cores, %v on one", a.what, k, a.got[k], a.want[k])
			}
		}
	}
	if !slices.Equal(eight.Mesh.Len, one.Mesh.Len) {
		t.Error("the step counts differ")
	}
}
