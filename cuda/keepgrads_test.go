package cuda

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// sameGrads checks that two gradients hold the same bits: the loss, the
// gradients, the solutions (sameSolution) and the recorded meshes'
// lengths, statuses, counts and end times.
func sameGrads(t *testing.T, what string, got, want *ode.Gradient) {
	t.Helper()
	if math.Float64bits(got.Loss) != math.Float64bits(want.Loss) {
		t.Errorf("%s: Loss %v, want %v bit for bit", what, got.Loss, want.Loss)
	}
	sameBits(t, what+": Y0", got.Y0, want.Y0)
	sameBits(t, what+": P", got.P, want.P)
	sameBits(t, what+": Shared", got.Shared, want.Shared)
	if got.Solution == nil || got.Mesh == nil {
		t.Fatalf("%s: Solution nil %v, Mesh nil %v", what, got.Solution == nil, got.Mesh == nil)
	}
	sameSolution(t, what, got.Solution, want.Solution)
	gm, wm := got.Mesh, want.Mesh
	if gm.N != wm.N || gm.Rows != wm.Rows || !slices.Equal(gm.Len, wm.Len) || !slices.Equal(gm.Status, wm.Status) ||
		!slices.Equal(gm.Stats.Accepted, wm.Stats.Accepted) || !slices.Equal(gm.Stats.Rejected, wm.Stats.Rejected) {
		t.Errorf("%s: meshes differ: N %d/%d, Rows %d/%d, Len or Status or Stats", what, gm.N, wm.N, gm.Rows, wm.Rows)
	}
	sameBits(t, what+": Mesh.T1", gm.T1, wm.T1)
}

// TestHostEngineKeepGrads checks a gradient's per-trajectory results
// kept in device memory (ode.Settings.KeepGrads) on the host engine
// (the generated kernels and the gradients' check kernel compiled as
// host C++): for Lorenz (Tsit5; the record, the record with
// Gradient.Omit, with save times, a shared-parameter gradient, the
// gradient on a resident mesh) and the events suite's bouncing balls and pharmacokinetic
// threshold (the record, with and without Omit; the gradient on the
// recorded mesh), each call passing its Gradient back three times
// unread, the call copies back only the check's words and the shared
// sums (Trace.Download: at most gradsTail bytes and 16 a shared
// parameter, against the tens a trajectory of a call without
// KeepGrads), returns the shared gradient of a call without KeepGrads
// bit for bit and its loss to the in-order sum's rounding bound (the
// exact sum of the terms rounded once: bit for bit where the terms are a
// component of the final states), and HostGrads fills
// Y0, P, Solution and Mesh equal bit for bit to that call's (random
// initial states, seeded). A call where some trajectories fail (MaxSteps
// that about half exhaust; MaxEvents 1 for balls that bounce twice) or
// returns the error of the
// call without KeepGrads, and the next call keeps again.
func TestHostEngineKeepGrads(t *testing.T) {
	needHost(t)
	testKeepGrads(t, "cuda-host", 1)
}

// TestGPUKeepGrads is TestHostEngineKeepGrads on the device ("cuda"),
// with ensembles 100 times as large (thousands of trajectories, none a
// multiple of a warp): the gradients' check kernel's warp shuffles and
// atomics run there only. The device adds the blocks' shared-gradient
// sums with atomics in no fixed order (see the package doc), so the
// shared gradient of two calls agrees to the reordering's rounding, not
// bit for bit. It skips without a GPU.
func TestGPUKeepGrads(t *testing.T) {
	needGPUEngine(t)
	testKeepGrads(t, "cuda", 100)
}

// testKeepGrads runs TestHostEngineKeepGrads on engine eng with
// ensembles scale times as large; on a GPU engine (scale > 1) the shared
// gradient within (n+1)·u of the plain call's per entry, relative to
// its size (closeShared).
func testKeepGrads(t *testing.T, eng string, scale int) {
	lorenz := lorenzCase(70*scale+3, 1e-6)
	lorenz.loss = ode.SumSquares()
	lorenzMesh := lorenz
	lorenzMesh.name = "lorenz-mesh"
	ball, pk := ballCase(24*scale+5, ode.Tsit5), pkCase(24*scale+7, ode.Tsit5)
	ball.set.RelTol, ball.set.AbsTol = 1e-6, 1e-8
	ballMesh := ball
	ballMesh.name = "ball-mesh"
	saves := saveTimesCase(t, lorenzCase(40*scale+1, 1e-6), 12)
	saves.name, saves.loss = "lorenz-saves", ode.SumSquares()
	shared := lorenzSharedCase(40 * scale)
	omit := ode.OmitStates | ode.OmitStats
	cases := []struct {
		c    engineCase
		omit ode.Omit
		mesh bool // the gradient on the mesh of a record without KeepGrads
		comp int  // ≥ 0: the loss is this component of the final state (ode.Component)
	}{
		{c: lorenz, comp: -1},
		{c: lorenz, omit: omit, comp: -1},
		{c: lorenzMesh, mesh: true, comp: -1},
		{c: saves, comp: -1},
		{c: shared, omit: omit, comp: -1},
		{c: ball},
		{c: ball, omit: omit},
		{c: ballMesh, mesh: true},
		{c: pk, omit: omit, comp: 1},
	}
	rng := rand.New(rand.NewPCG(25, 3))
	for _, tc := range cases {
		name := tc.c.name
		if tc.omit != 0 {
			name += "-omit"
		}
		t.Run(name, func(t *testing.T) {
			c := tc.c
			c.prob.Y0 = slices.Clone(c.prob.Y0)
			for i := range c.prob.Y0 {
				c.prob.Y0[i] *= 1 + 1e-3*rng.Float64()
			}
			plain := c.solver(t, eng)
			kc := c
			kc.set.KeepGrads = true
			keep := kc.solver(t, eng)
			var m *ode.Mesh
			if tc.mesh {
				g, err := plain.Grad(nil, &c.prob, c.loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				m = g.Mesh
			}
			var trw Trace
			want, err := plain.GradContext(WithTrace(context.Background(), &trw), &ode.Gradient{Omit: tc.omit}, &c.prob, c.loss, m)
			if err != nil {
				t.Fatal(err)
			}
			var terms []float64 // with comp: the loss terms, component comp of the final states
			if tc.comp >= 0 {
				full, err := plain.Grad(nil, &c.prob, c.loss, m)
				if err != nil {
					t.Fatal(err)
				}
				d := c.prob.Field.Dim
				for i := range c.prob.N {
					terms = append(terms, full.Solution.Y[i*d+tc.comp])
				}
			}
			dst := &ode.Gradient{Omit: tc.omit}
			for it := range 3 {
				var tr Trace
				got, err := keep.GradContext(WithTrace(context.Background(), &tr), dst, &c.prob, c.loss, m)
				if err != nil {
					t.Fatal(err)
				}
				r := got.Resident
				if r == nil || got.Y0 != nil || got.Solution != nil || got.Mesh != nil {
					t.Fatalf("call %d: Resident %v, Y0 nil %v, Solution nil %v, Mesh nil %v: want the results on the device",
						it, r != nil, got.Y0 == nil, got.Solution == nil, got.Mesh == nil)
				}
				if r.Engine() != eng {
					t.Errorf("results held by engine %q", r.Engine())
				}
				n := int64(c.prob.N)
				if down, all := tr.Stats().Download, trw.Stats().Download; down > gradsTail+16*int64(len(c.prob.Shared)) || down >= all {
					t.Errorf("call %d: %d bytes copied back (%d without KeepGrads): want the check's words and shared sums alone", it, down, all)
				}
				// The loss: the terms' exact sum rounded once (gradsSum),
				// where the call without KeepGrads adds them in order.
				// Every case's terms are positive (or zero), so Σ|terms|
				// is the loss: within (n+1)·u of it; and where the terms
				// are a component of the final states, the exact sum of
				// that component of the plain call's, bit for bit.
				if d, bound := math.Abs(got.Loss-want.Loss), float64(n+1)*0x1p-53*math.Abs(want.Loss); d > bound {
					t.Fatalf("call %d: Loss %v, want %v to %.3g (the in-order sum's bound), off by %.3g", it, got.Loss, want.Loss, bound, d)
				}
				if tc.comp >= 0 {
					if exact := exactSum(terms); math.Float64bits(got.Loss) != math.Float64bits(exact) {
						t.Fatalf("call %d: Loss %v, want the exact sum of the terms rounded, %v, bit for bit (in order: %v)", it, got.Loss, exact, want.Loss)
					}
				}
				if scale == 1 {
					sameBits(t, "Shared", got.Shared, want.Shared)
				} else {
					closeShared(t, "Shared", got.Shared, want.Shared, n)
				}
				if it < 2 {
					continue // unread: the next call writes over it
				}
				if err := got.HostGrads(); err != nil {
					t.Fatal(err)
				}
				if got.Resident != nil || r.Released() {
					t.Errorf("HostGrads: Resident %v, released %v: want the device memory kept for the next call", got.Resident != nil, r.Released())
				}
				w := *want
				w.Loss = got.Loss // (checked above)
				if scale > 1 {
					w.Shared = got.Shared // (checked above)
				}
				sameGrads(t, "HostGrads", got, &w)
				if all := trw.Stats().Download; tr.Stats().Download < all {
					t.Errorf("HostGrads copied back %d bytes of the call's %d: want all", tr.Stats().Download, all)
				}
			}
		})
	}

	// Released unread (Release, or a call that reused their memory): an
	// error wrapping ode.ErrReleased, no panic.
	t.Run("released", func(t *testing.T) {
		kc := lorenz
		kc.set.KeepGrads = true
		keep := kc.solver(t, eng)
		g, err := keep.Grad(nil, &lorenz.prob, lorenz.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		old := *g
		if _, err := keep.Grad(g, &lorenz.prob, lorenz.loss, nil); err != nil {
			t.Fatal(err)
		}
		if g.Resident != old.Resident {
			t.Error("a Gradient passed back: its device memory was not reused")
		}
		if err := old.HostGrads(); !errors.Is(err, ode.ErrReleased) || old.Y0 != nil {
			t.Errorf("HostGrads of results written over: %v (Y0 nil %v), want an error wrapping ErrReleased", err, old.Y0 == nil)
		}
		if err := g.HostGrads(); err != nil {
			t.Fatal(err)
		}
		r := old.Resident
		if _, err := keep.Grad(g, &lorenz.prob, lorenz.loss, nil); err != nil {
			t.Fatal(err)
		}
		if g.Resident != r {
			t.Error("a Gradient passed back after HostGrads: its device memory was not reused")
		}
		g.Release()
		if err := g.HostGrads(); !errors.Is(err, ode.ErrReleased) || g.Y0 != nil || !r.Released() {
			t.Errorf("HostGrads after Release: %v (Y0 nil %v, released %v), want an error wrapping ErrReleased", err, g.Y0 == nil, r.Released())
		}
	})

	// Failures: the errors of the calls without KeepGrads.
	failing := lorenzCase(48*scale, 1e-4)
	failing.loss = ode.SumSquares()
	failing.set.MaxSteps = medianSteps(t, failing, eng)
	bounces := ballCase(24*scale, ode.Tsit5)
	bounces.set.MaxEvents = 1 // the balls bounce twice or more
	// √y(T) of a trajectory that stays at 0: its dL/dy0 is +Inf.
	decay := ode.Field{Name: "decay", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0])}
	}}
	nonFinite := engineCase{name: "sqrt-at-zero", prob: ode.Problem{Field: decay, N: 5, Y0: []float64{1, 2, 0, 3, 4}, P: []float64{0.5}, T1: 1},
		set: ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-10}, loss: ode.Loss{Name: "sqrt", F: func(y, _, _ []tape.V) tape.V { return y[0].Sqrt() }}}
	for _, c := range []engineCase{failing, bounces, nonFinite} {
		t.Run(c.name+"-fails", func(t *testing.T) {
			plain := c.solver(t, eng)
			kc := c
			kc.set.KeepGrads = true
			keep := kc.solver(t, eng)
			_, want := plain.Grad(nil, &c.prob, c.loss, nil)
			if want == nil {
				t.Fatal("without KeepGrads: no error, want a trajectory's failure or a gradient that is not finite")
			}
			for range 2 {
				g, err := keep.Grad(&ode.Gradient{}, &c.prob, c.loss, nil)
				if err == nil || err.Error() != want.Error() {
					t.Fatalf("KeepGrads: %v (Gradient %v), want %v", err, g != nil, want)
				}
			}
		})
	}
}

// exactSum returns the sum of xs rounded once to the nearest float64
// (ties to even), from an exact sum in big.Float (4,400 bits hold any
// sum of fewer than 2^2000 finite float64s exactly).
func exactSum(xs []float64) float64 {
	acc := new(big.Float).SetPrec(4400)
	var x big.Float
	for _, v := range xs {
		acc.Add(acc, x.SetFloat64(v))
	}
	f, _ := acc.Float64()
	return f
}

// checkLossSum runs the gradients' check kernel (grads.cuh) on ex's
// backend over the loss terms alone and returns its verdict and sum:
// into its words zeroed before (gs_gargs.acc null, Tuning.checkMemset's
// way), and, bit for bit the same, through its accumulators (the
// default): twice, the words made garbage before each launch, the
// accumulators zeroed before the first only and 0 after each.
func checkLossSum(t *testing.T, ex *executor, terms []float64) (well bool, sum float64) {
	t.Helper()
	k, err := ex.gradsKernel()
	if err != nil {
		t.Fatal(err)
	}
	n := len(terms)
	mem, err := ex.be.alloc(int64(8*n + gradsTail + gradsAccBytes))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.be.free(mem)
	buf := make([]byte, 8*n)
	for i, x := range terms {
		binary.LittleEndian.PutUint64(buf[8*i:], math.Float64bits(x))
	}
	var w [numGradsWords]uint64
	w[gwN], w[gwLoss], w[gwOut] = uint64(n), mem, mem+uint64(8*n)
	sums := w[gwOut] + gradsTail
	garbage := bytes.Repeat([]byte{0xa5}, gradsTail)
	launch := func(withSums, first bool) (tail [gradsTail]byte, left [gradsAccBytes]byte) {
		t.Helper()
		w[gwSums] = 0
		if withSums {
			w[gwSums] = sums
		}
		err := ex.be.batch(func(q queue) error {
			if err := q.write(mem, buf); err != nil {
				return err
			}
			switch {
			case !withSums:
				if err := q.zero(w[gwOut], gradsTail); err != nil {
					return err
				}
			case first:
				if err := q.zero(sums, gradsAccBytes); err != nil {
					return err
				}
				fallthrough
			default:
				if err := q.write(w[gwOut], garbage); err != nil {
					return err
				}
			}
			blocks := min(gradsBlocks, max(1, (n+gradsThreads-1)/gradsThreads))
			if err := q.enqueue(k, blocks*gradsThreads, gradsThreads, 0, w[:]); err != nil {
				return err
			}
			if err := q.read(tail[:], w[gwOut]); err != nil {
				return err
			}
			return q.read(left[:], sums)
		})
		if err != nil {
			t.Fatal(err)
		}
		return tail, left
	}
	tail, _ := launch(false, false)
	for i, first := range []bool{true, false} {
		got, left := launch(true, first)
		if got != tail {
			t.Errorf("launch %d through the accumulators: the words and limbs differ from the zeroed words'", i)
		}
		if left != [gradsAccBytes]byte{} {
			t.Errorf("launch %d through the accumulators left them nonzero", i)
		}
	}
	well, _, sum = gradsWell(tail[:])
	return well, sum
}

// TestHostKeepGradsLossSum checks the loss terms' sum of a gradient kept
// on the device (ode.Settings.KeepGrads; grads.cuh's limbs, gradsSum) on
// the host engine's check kernel: it is the terms' exact sum rounded
// once (exactSum, bit for bit), for terms of one size, of mixed signs and
// sizes over the whole float64 range (subnormals, cancellation of
// 1e300s, exact ties, a sum past the largest float64: +Inf); it differs
// from the terms added in index order (a call without KeepGrads) by at
// most that sum's error bound, (n−1)·u·Σ|x|/(1−(n−1)·u), plus half an
// ulp; and a term that is not finite makes the check fail (the call then
// copies everything back). TestGPUKeepGradsLossSum runs the same on the
// device, where the warps' shuffles and atomics add them.
func TestHostKeepGradsLossSum(t *testing.T) {
	needHost(t)
	testKeepGradsLossSum(t, newExecutor(newHostBackend(1<<30), nil, Float64, "grads-sum", Tuning{}))
}

// TestGPUKeepGradsLossSum is TestHostKeepGradsLossSum on the device: the
// CUDA branch of the check (warp shuffles where a warp's terms share a
// limb, atomics in shared and global memory). It skips without a GPU.
func TestGPUKeepGradsLossSum(t *testing.T) {
	needGPUEngine(t)
	be, err := registered[0].backend() // "cuda"
	if err != nil {
		t.Fatal(err)
	}
	testKeepGradsLossSum(t, newExecutor(be, nil, Float64, "grads-sum", Tuning{}))
}

func testKeepGradsLossSum(t *testing.T, ex *executor) {
	rng := rand.New(rand.NewPCG(25, 41))
	gen := func(n int, f func(i int) float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = f(i)
		}
		return xs
	}
	wide := func(int) float64 { // any sign, 2^−1074 … 2^1000
		x := math.Ldexp(1+rng.Float64(), rng.IntN(2075)-1075)
		if rng.IntN(2) == 0 {
			x = -x
		}
		return x
	}
	cases := []struct {
		name  string
		terms []float64
		well  bool
	}{
		{"one", []float64{0.75}, true},
		{"zeros", []float64{0, math.Copysign(0, -1), 0}, true},
		{"one-size", gen(65536, func(int) float64 { return 0.5 + rng.Float64() }), true},
		{"one-size-odd", gen(70*41+3, func(int) float64 { return 1e-3 * rng.NormFloat64() }), true},
		{"mixed", gen(10007, func(int) float64 { return rng.NormFloat64() * math.Exp(20*rng.NormFloat64()) }), true},
		{"wide", gen(4099, wide), true},
		{"subnormal", gen(1000, func(i int) float64 { return math.Float64frombits(uint64(1 + 7*i)) }), true},
		{"cancel", []float64{1e300, 1, -1e300, 0x1p-1074}, true},
		{"tie-even", []float64{1, 0x1p-53}, true},
		{"tie-odd", []float64{1 + 0x1p-52, 0x1p-53}, true},
		{"overflow", []float64{math.MaxFloat64, math.MaxFloat64 / 2}, true},
		{"largest", []float64{math.MaxFloat64, -math.MaxFloat64, math.MaxFloat64}, true},
		{"nan", []float64{1, math.NaN(), 2}, false},
		{"inf", gen(300, func(i int) float64 { return math.Inf(1 - 2*(i&1)) }), false},
	}
	const u = 0x1p-53
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			well, got := checkLossSum(t, ex, tc.terms)
			if well != tc.well {
				t.Fatalf("well %v, want %v", well, tc.well)
			}
			if !well {
				return
			}
			want := exactSum(tc.terms)
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Errorf("sum %v (%#x), want the exact sum rounded %v (%#x)", got, math.Float64bits(got), want, math.Float64bits(want))
			}
			seq, abs := 0.0, 0.0
			for _, x := range tc.terms {
				seq += x
				abs += math.Abs(x)
			}
			if math.IsInf(abs, 0) {
				return // the bound has no meaning past the range
			}
			nu := float64(len(tc.terms)-1) * u
			if d, bound := math.Abs(got-seq), nu/(1-nu)*abs+u*math.Abs(got); d > bound {
				t.Errorf("sum %v, in index order %v: differ by %.3g, over the bound %.3g", got, seq, d, bound)
			}
		})
	}
}

// TestHostEngineKeepGradsAhead checks a kept gradient's repeated call
// that runs ahead of its inputs' compare (reuse.go, aheadCheck) on the
// host engine, with the bouncing balls: a call on the same inputs runs
// ahead (TraceStats.Ahead) and returns the results of a call without
// KeepGrads on them (HostGrads, bit for bit; the loss to the in-order
// sum's bound); P or Y0 changed in place between calls is found by the
// compare (AheadMissed), the launch runs again on the new values, and
// the results are those of a call without KeepGrads on them; the call
// after a miss compares first, the one after it runs ahead again; a
// value made NaN in place gives the error of the call without KeepGrads
// (ode.ErrInput), and the call after it, on the values put back, the
// results on them. "goroutine" runs the compare on a goroutine of its
// own (the default), "each" its inputs one after the other
// (Tuning.compareEach), where by default they are compared together
// (par.EqualSet), "nohelp" without the batch's help
// (Tuning.compareNoHelp).
func TestHostEngineKeepGradsAhead(t *testing.T) {
	needHost(t)
	t.Run("goroutine", func(t *testing.T) { testKeepGradsAhead(t, "cuda-host", 1) })
	t.Run("each", func(t *testing.T) {
		testKeepGradsAhead(t, tuned(t, "cuda-host", Tuning{compareEach: true}), 1)
	})
	t.Run("nohelp", func(t *testing.T) {
		testKeepGradsAhead(t, tuned(t, "cuda-host", Tuning{compareNoHelp: true}), 1)
	})
}

// TestGPUKeepGradsAhead is TestHostEngineKeepGradsAhead on the device,
// with 100 times as many trajectories: the compare runs as the device
// runs the kernels. It skips without a GPU.
func TestGPUKeepGradsAhead(t *testing.T) {
	needGPUEngine(t)
	t.Run("goroutine", func(t *testing.T) { testKeepGradsAhead(t, "cuda", 100) })
	t.Run("each", func(t *testing.T) {
		testKeepGradsAhead(t, tuned(t, "cuda", Tuning{compareEach: true}), 100)
	})
	// Inputs past par.EqualSet's one-goroutine limit (24,005 balls: Y0
	// and P 576 kB): the compare's tasks, which the batch helps with
	// (aheadCheck.inBatch), and without the help (Tuning.compareNoHelp).
	// (Too slow for the host engine's kernels: par's TestEqualSetHelp
	// checks the help.)
	t.Run("large", func(t *testing.T) { testKeepGradsAhead(t, "cuda", 1000) })
	t.Run("large-nohelp", func(t *testing.T) {
		testKeepGradsAhead(t, tuned(t, "cuda", Tuning{compareNoHelp: true}), 1000)
	})
}

// testKeepGradsAhead runs TestHostEngineKeepGradsAhead on engine eng
// with scale times as many trajectories.
func testKeepGradsAhead(t *testing.T, eng string, scale int) {
	c := ballCase(24*scale+5, ode.Tsit5)
	c.set.RelTol, c.set.AbsTol = 1e-6, 1e-8
	c.prob.Y0, c.prob.P = slices.Clone(c.prob.Y0), slices.Clone(c.prob.P)
	plain := c.solver(t, eng)
	kc := c
	kc.set.KeepGrads = true
	keep := kc.solver(t, eng)
	dst := &ode.Gradient{}
	// call makes a kept call and checks that it ran ahead (or not) and
	// that its compare found its inputs changed (or not), and its
	// results against a call without KeepGrads on the same inputs.
	call := func(what string, ahead, missed int) {
		t.Helper()
		want, werr := plain.Grad(nil, &c.prob, c.loss, nil)
		var tr Trace
		got, err := keep.GradContext(WithTrace(context.Background(), &tr), dst, &c.prob, c.loss, nil)
		if st := tr.Stats(); st.Ahead != ahead || st.AheadMissed != missed {
			t.Errorf("%s: %d launches ahead, %d missed, want %d and %d", what, st.Ahead, st.AheadMissed, ahead, missed)
		}
		if werr != nil {
			if err == nil || err.Error() != werr.Error() {
				t.Fatalf("%s: %v, want %v", what, err, werr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if d, bound := math.Abs(got.Loss-want.Loss), float64(c.prob.N+1)*0x1p-53*math.Abs(want.Loss); d > bound {
			t.Fatalf("%s: Loss %v, want %v to %.3g", what, got.Loss, want.Loss, bound)
		}
		if err := got.HostGrads(); err != nil {
			t.Fatal(err)
		}
		w := *want
		w.Loss = got.Loss
		sameGrads(t, what, got, &w)
	}
	call("first call", 0, 0)
	call("same inputs", 1, 0)
	call("same inputs again", 1, 0)
	for i := 0; i < len(c.prob.P); i += 3 {
		c.prob.P[i] *= 1.01
	}
	call("P changed in place", 1, 1)
	call("after a miss", 0, 0)
	call("same inputs after a miss", 1, 0)
	y := c.prob.Y0[2*(c.prob.N/2)]
	c.prob.Y0[2*(c.prob.N/2)] = y * 0.9
	call("Y0 changed in place", 1, 1)
	call("after a miss", 0, 0)
	c.prob.Y0[2*(c.prob.N/2)] = math.NaN()
	call("Y0 made NaN in place", 1, 1)
	c.prob.Y0[2*(c.prob.N/2)] = y
	call("Y0 put back", 0, 0)
	call("same inputs after a failure", 1, 0)
}

// TestHostEngineGradAhead checks that a repeated Grad call whose results
// come back to the host (not kept on the device) runs ahead of its
// inputs' compare (aheadInBatch: in the launch's batch where its results
// come back in one copy, else on the launch's goroutine before the
// scatter) and returns the results of an engine without the reuse
// (Tuning.NoInputReuse) bit for bit, with the calls of
// TestHostEngineKeepGradsAhead: the same inputs run ahead; P or Y0
// changed in place is found (AheadMissed) and the launch runs again on
// the new values; a value made NaN in place gives that engine's error
// (a row of Y0's, package ode's before any launch). "lorenz" is a launch
// of 3,000 Lorenz trajectories (Y0 one row: its copy is compared) whose
// results come back in one copy, "ball" the bouncing balls (with
// events); "split" copies them back in two parts (Tuning.splitMin 64),
// "chunks" in chunks of 1,024 trajectories, a kernel each, its inputs
// staged chunk by chunk (Tuning.pipeChunk), "chunks-whole" staged at
// once (Tuning.NoChunkStage), "saves" with 40 save times copied back in
// groups (Tuning.saveGroup).
func TestHostEngineGradAhead(t *testing.T) {
	needHost(t)
	lor := lorenzCallCase(3000)
	lor.prob.P = slices.Clone(lor.prob.P)
	saves := lor
	saves.prob.SaveAt = make([]float64, 40)
	for k := range saves.prob.SaveAt {
		saves.prob.SaveAt[k] = float64(k) / 39
	}
	for _, c := range []struct {
		name string
		ec   engineCase
		tun  Tuning
	}{
		{"lorenz", lor, Tuning{}},
		{"ball", ballCase(64, ode.Tsit5), Tuning{}},
		{"lorenz-split", lor, Tuning{splitMin: 64}},
		{"lorenz-chunks", lor, Tuning{pipeChunk: 1024}},
		{"lorenz-chunks-whole", lor, Tuning{pipeChunk: 1024, NoChunkStage: true}},
		{"lorenz-saves", saves, Tuning{saveGroup: 4096}},
	} {
		t.Run(c.name, func(t *testing.T) {
			testGradAhead(t, c.ec, tuned(t, "cuda-host", c.tun), tuned(t, "cuda-host", Tuning{NoInputReuse: true}))
		})
	}
}

// TestGPUGradAhead is TestHostEngineGradAhead on the device: Lorenz at
// 32,768 trajectories (one copy back), 200,000 (two parts) and 300,000
// (two halves, a kernel each), the bouncing balls at 6,400, against the
// device's engine without the reuse. It skips without a GPU.
func TestGPUGradAhead(t *testing.T) {
	needGPUEngine(t)
	ref := tuned(t, "cuda", Tuning{NoInputReuse: true})
	for _, c := range []struct {
		name string
		ec   engineCase
	}{
		{"lorenz-32768", lorenzCallCase(1 << 15)},
		{"lorenz-200000", lorenzCallCase(200000)},
		{"lorenz-300000", lorenzCallCase(300000)},
		{"ball", ballCase(6400, ode.Tsit5)},
	} {
		t.Run(c.name, func(t *testing.T) { testGradAhead(t, c.ec, "cuda", ref) })
	}
}

// testGradAhead runs TestHostEngineGradAhead's calls of case c on engine
// eng against engine ref.
func testGradAhead(t *testing.T, c engineCase, eng, ref string) {
	c.set.RelTol, c.set.AbsTol = 1e-6, 1e-8
	c.prob.Y0, c.prob.P = slices.Clone(c.prob.Y0), slices.Clone(c.prob.P)
	plain := c.solver(t, ref)
	sv := c.solver(t, eng)
	var dst, wdst ode.Gradient
	call := func(what string, ran, missed int) {
		t.Helper()
		want, werr := plain.Grad(&wdst, &c.prob, c.loss, nil)
		var tr Trace
		got, err := sv.GradContext(WithTrace(context.Background(), &tr), &dst, &c.prob, c.loss, nil)
		if st := tr.Stats(); st.Ahead != ran || st.AheadMissed != missed {
			t.Errorf("%s: %d launches ahead, %d missed, want %d and %d", what, st.Ahead, st.AheadMissed, ran, missed)
		}
		if werr != nil {
			if err == nil || err.Error() != werr.Error() {
				t.Fatalf("%s: %v, want %v", what, err, werr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		sameGrads(t, what, got, want)
	}
	call("first call", 0, 0)
	call("same inputs", 1, 0)
	call("same inputs again", 1, 0)
	for i := 0; i < len(c.prob.P); i += 3 {
		c.prob.P[i] *= 1.01
	}
	call("P changed in place", 1, 1)
	call("after a miss", 0, 0)
	call("same inputs after a miss", 1, 0)
	k := len(c.prob.Y0) / 2
	y := c.prob.Y0[k]
	c.prob.Y0[k] = y*0.9 + 0.01
	call("Y0 changed in place", 1, 1)
	call("after a miss", 0, 0)
	c.prob.Y0[k] = math.NaN()
	if len(c.prob.Y0) == c.prob.Field.Dim {
		// Y0 given as one row: package ode finds the NaN before any
		// launch, and the row put back differs from the one sent last.
		call("Y0 made NaN in place", 0, 0)
		c.prob.Y0[k] = y
		call("Y0 put back", 1, 1)
		call("after a miss", 0, 0)
	} else {
		call("Y0 made NaN in place", 1, 1)
		c.prob.Y0[k] = y
		call("Y0 put back", 0, 0)
	}
	call("same inputs after a failure", 1, 0)
}

// closeShared checks a GPU engine's shared gradient against another
// call's: each entry within (n+1)·u of the wanted one's magnitude. Two
// orders of n terms' sum differ by at most about 2n·u·Σ|terms|; the bound
// takes Σ|terms| as the sum's magnitude (terms of one sign), so a sum
// with heavy cancellation could exceed it by rounding alone: it is meant
// to catch a difference of more than rounding (the device measured 1 ulp
// on lorenz-shared's n = 4000).
func closeShared(t *testing.T, what string, got, want []float64, n int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	for i, w := range want {
		if d, bound := math.Abs(got[i]-w), float64(n+1)*0x1p-53*math.Abs(w); !(d <= bound) {
			t.Errorf("%s[%d] = %v, want %v to %.3g (the blocks' sums in another order), off by %.3g", what, i, got[i], w, bound, d)
			return
		}
	}
}

// TestHostEngineCheckSums checks the gradients' check through its
// accumulators (grads.cuh's gs_gargs.sums, the default) on the host
// engine against the words zeroed before every launch
// (Tuning.checkMemset): kept calls of the balls and of pk, the Gradient
// passed back, give the same loss bit for bit and, read (HostGrads), the
// same gradients; accumulators made garbage and marked so
// (residentGrads.accZero false, as after a batch that failed) are zeroed
// by the next call, whose results are again the same. (Garbage left
// marked 0 gives another loss: the mark is what the launch trusts.)
func TestHostEngineCheckSums(t *testing.T) {
	needHost(t)
	old := tuned(t, "cuda-host", Tuning{checkMemset: true})
	for _, c := range []engineCase{ballCase(37, ode.Tsit5), pkCase(29, ode.Tsit5)} {
		c.set.RelTol, c.set.AbsTol, c.set.KeepGrads = 1e-6, 1e-8, true
		sums, memset := c.solver(t, "cuda-host"), c.solver(t, old)
		var g, w ode.Gradient
		var k *residentGrads // the last call's kept results (HostGrads keeps them for the next)
		for call := range 4 {
			if call == 2 || call == 3 {
				// The accumulators made garbage; at call 2 marked so.
				at := k.mem.addr + uint64(gradsAccAt(k.mem.bytes))
				if err := k.mem.be.write(at, bytes.Repeat([]byte{0x5a}, gradsAccBytes)); err != nil {
					t.Fatal(err)
				}
				k.accZero = call == 3
			}
			got, err := sums.Grad(&g, &c.prob, c.loss, nil)
			if err != nil {
				t.Fatalf("%s: call %d: %v", c.name, call, err)
			}
			want, err := memset.Grad(&w, &c.prob, c.loss, nil)
			if err != nil {
				t.Fatalf("%s: call %d (checkMemset): %v", c.name, call, err)
			}
			if call == 3 {
				if got.Resident != nil && math.Float64bits(got.Loss) == math.Float64bits(want.Loss) {
					t.Errorf("%s: garbage accumulators marked 0 gave the memset's loss: the test does not see them", c.name)
				}
				continue
			}
			if got.Resident == nil || want.Resident == nil {
				t.Fatalf("%s: call %d kept no results", c.name, call)
			}
			k = got.Resident.(*residentGrads)
			if math.Float64bits(got.Loss) != math.Float64bits(want.Loss) {
				t.Errorf("%s: call %d: Loss %v, with the memset %v", c.name, call, got.Loss, want.Loss)
			}
			if err := got.HostGrads(); err != nil {
				t.Fatal(err)
			}
			if err := want.HostGrads(); err != nil {
				t.Fatal(err)
			}
			sameGrads(t, fmt.Sprintf("%s, call %d", c.name, call), got, want)
		}
	}
}

// TestHostEngineKeepGradsShared checks repeated kept gradient calls
// (ode.Settings.KeepGrads, the Gradient passed back) of the driven balls
// (drivenBallCase: events, a shared restitution) whose shared parameter
// changes between some calls and not others, on the host engine: the
// calls whose shared block is the one their arena holds leave it there
// (holdStaged), the others upload it, and each call's gradients
// (HostGrads) and loss are those of a call without KeepGrads at the same
// restitution, bit for bit (the loss to the exact sum's rounding). It
// fails where a changed block is left unsent (the balls then bounce with
// the restitution before).
func TestHostEngineKeepGradsShared(t *testing.T) {
	needHost(t)
	testKeepGradsShared(t, "cuda-host", 37)
}

// TestGPUKeepGradsShared is TestHostEngineKeepGradsShared on the device
// with 4,103 balls. It skips without a GPU.
func TestGPUKeepGradsShared(t *testing.T) {
	needGPUEngine(t)
	testKeepGradsShared(t, "cuda", 4103)
}

// testKeepGradsShared runs TestHostEngineKeepGradsShared on engine eng
// with n balls.
func testKeepGradsShared(t *testing.T, eng string, n int) {
	c := drivenBallCase(n, ode.Tsit5)
	c.set.RelTol, c.set.AbsTol = 1e-6, 1e-8
	plain := c.solver(t, eng)
	kc := c
	kc.set.KeepGrads = true
	keep := kc.solver(t, eng)
	g := ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}
	for k, sh := range []float64{0.8, 0.8, 0.8, 0.7, 0.7, 0.8, 0.8} {
		c.prob.Shared = []float64{sh}
		want, err := plain.Grad(&ode.Gradient{Omit: g.Omit}, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keep.Grad(&g, &c.prob, c.loss, nil); err != nil {
			t.Fatal(err)
		}
		if g.Resident == nil && k > 0 {
			t.Errorf("call %d (restitution %g): kept nothing", k, sh)
		}
		if math.Abs(g.Loss-want.Loss) > 1e-12*math.Abs(want.Loss) {
			t.Errorf("call %d (restitution %g): loss %v, want %v", k, sh, g.Loss, want.Loss)
		}
		if err := g.HostGrads(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(g.Y0, want.Y0) || !slices.Equal(g.P, want.P) {
			t.Errorf("call %d (restitution %g): the kept gradients differ from the call's without KeepGrads", k, sh)
		}
	}
}
