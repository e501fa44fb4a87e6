package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// reuseState is what a sequence of calls runs on (TestHostEngineInputReuse):
// its steps change the problem, the loss or the mesh in place between
// the calls, as a caller's loop does.
type reuseState struct {
	c    engineCase
	p    ode.Problem
	loss ode.Loss
	mesh *ode.Mesh // a host mesh, for op "gradmesh"
	rng  *rand.Rand
}

// reuseStep changes the state (change, if not nil; sv are the two
// solvers, the reusing one first), then runs op on both solvers:
// "grad" (with the record, the solver's Gradient passed back), "solve",
// "gradmesh" (on s.mesh) or "setmesh" (a grad with the record whose mesh,
// the reference's copied to the host, becomes s.mesh). held are the
// inputs the reusing engine must find in its arena, unsent.
type reuseStep struct {
	what   string
	change func(t *testing.T, s *reuseState, sv [2]*ode.Solver)
	op     string
	held   []int
}

// heldBytes returns the bytes of the uploads of the inputs held in a
// call of state s on an engine of precision es (bytes a real) whose
// launches of 16 seeds or more broadcast an input given as one row from
// its first seed rows (seed 0: none).
func heldBytes(s *reuseState, held []int, es int64, seed int) int64 {
	n, f := int64(s.p.N), s.p.Field
	rows := func(row bool) int64 {
		if row && seed > 0 && s.p.N >= 16*seed {
			return int64(seed)
		}
		return n
	}
	var b int64
	for _, a := range held {
		switch a {
		case argY0:
			b += rows(len(s.p.Y0) == f.Dim) * int64(f.Dim) * es
		case argP:
			b += rows(len(s.p.P) == f.Params) * int64(f.Params) * es
		case argT1:
			b += rows(s.p.T1s == nil) * es
		case argData:
			b += n * int64(s.loss.DataDim) * es
		case argLen:
			b += n * 4
		case argEvIn:
			b += int64(s.mesh.Rows) * n * 4
		}
	}
	return b
}

// nudge changes x[i] in place by one ulp.
func nudge(x []float64, i int) { x[i] = math.Nextafter(x[i], math.Inf(1)) }

// TestHostEngineInputReuse runs sequences of calls on one solver that
// reuses the inputs its arena holds (the default) and on one that uploads
// them all (Tuning.NoInputReuse), changing the inputs in place between
// calls, and checks that every result is the same bit for bit and that
// the trace shows the inputs unsent exactly where they did not change
// (TraceStats.Reused; Upload less them): nothing changed; one element of
// Y0 changed in place; P changed (a sweep); per-trajectory end times set
// and changed; the save times' values changed (always sent); fewer
// trajectories (every offset moves: all sent) and back; a Solve between
// Grads (its layout's inputs where the gradient's are: kept); a fit held
// on the device run in between (its own arena); the loss's data changed;
// Y0 given as one row and broadcast on the device, that row changed;
// inputs staged chunk by chunk (stagesByChunk); record-buffer reruns
// (every launch after one sends all); events with save times, on a given
// host mesh (its lengths and event marks kept); float32; cuda-multi on
// three fake devices (results only, against cuda-host: its balancer
// resizes the shards between calls); P changed on two calls in a row,
// which then rests (sent, not kept) for reuseRestMin calls, and changed
// in its last element on every other call, and back.
func TestHostEngineInputReuse(t *testing.T) {
	needHost(t)
	testInputReuse(t, func(e string) string { return e })
}

// TestGPUInputReuse is TestHostEngineInputReuse on the device: cuda,
// cuda-f32 and cuda-multi.
func TestGPUInputReuse(t *testing.T) {
	needGPUEngine(t)
	gpu := map[string]string{"cuda-host": "cuda", "cuda-host-sim": "cuda", "cuda-host-f32": "cuda-f32", "cuda-multi-host3": "cuda-multi"}
	testInputReuse(t, func(e string) string { return gpu[e] })
}

// testInputReuse runs TestHostEngineInputReuse's sequences on the engines
// that on names for its host engines.
func testInputReuse(t *testing.T, on func(string) string) {
	all := []int{argT1, argY0, argP}
	twice := append(slices.Clone(all), all...)
	grad := func(held ...int) reuseStep { return reuseStep{op: "grad", held: held} }
	changeY0 := func(t *testing.T, s *reuseState, _ [2]*ode.Solver) { nudge(s.p.Y0, s.rng.IntN(len(s.p.Y0))) }
	sweepP := func(t *testing.T, s *reuseState, _ [2]*ode.Solver) {
		for i := 1; i < len(s.p.P); i += s.p.Field.Params {
			s.p.P[i] *= 1.01
		}
	}
	lorenzSteps := []reuseStep{
		grad(), grad(all...), grad(all...),
		{what: "y0-element", change: changeY0, op: "grad", held: []int{argT1, argP}},
		grad(all...),
		{what: "p-sweep", change: sweepP, op: "grad", held: []int{argT1, argY0}},
		{what: "solve", op: "solve", held: all},
		grad(all...),
		{what: "t1s", change: func(t *testing.T, s *reuseState, _ [2]*ode.Solver) {
			s.p.T1s = make([]float64, s.p.N)
			for i := range s.p.T1s {
				s.p.T1s[i] = 0.5 + 0.5*s.rng.Float64()
			}
		}, op: "grad", held: []int{argY0, argP}},
		grad(all...),
		{what: "t1s-element", change: func(t *testing.T, s *reuseState, _ [2]*ode.Solver) {
			nudge(s.p.T1s, s.rng.IntN(s.p.N))
		}, op: "grad", held: []int{argY0, argP}},
		{what: "saveat-values", change: func(t *testing.T, s *reuseState, _ [2]*ode.Solver) {
			s.p.SaveAt = []float64{0, 0.2, 0.3}
		}, op: "grad", held: all},
		{what: "fewer", change: func(t *testing.T, s *reuseState, _ [2]*ode.Solver) {
			m := s.p.N - 37
			s.p.N, s.p.Y0, s.p.P, s.p.T1s = m, s.p.Y0[:3*m], s.p.P[:3*m], s.p.T1s[:m]
		}, op: "grad"},
		grad(all...),
		{what: "trainer", change: func(t *testing.T, s *reuseState, sv [2]*ode.Solver) {
			for _, v := range sv {
				runTrainer(t, v, &s.p, s.loss, s.rng)
			}
		}, op: "grad", held: all},
	}
	// P changed on two calls in a row rests (reuse's miss): sent,
	// neither compared nor kept, for reuseRestMin calls, then kept again
	// and held from the call after; changed on every other call (its
	// last element), or flipped back to an earlier call's values, it is
	// held between.
	noP := []int{argT1, argY0}
	var earlier []float64
	adaptive := []reuseStep{
		grad(), grad(all...),
		{what: "p-sweep", change: sweepP, op: "grad", held: noP},
		{what: "p-sweep-again", change: sweepP, op: "grad", held: noP},
	}
	for range reuseRestMin {
		adaptive = append(adaptive, reuseStep{what: "p-rests", op: "grad", held: noP})
	}
	lastP := func(t *testing.T, s *reuseState, _ [2]*ode.Solver) { nudge(s.p.P, len(s.p.P)-1) }
	adaptive = append(adaptive,
		reuseStep{what: "p-kept", op: "grad", held: noP},
		grad(all...),
		reuseStep{what: "p-last", change: lastP, op: "grad", held: noP},
		grad(all...),
		reuseStep{what: "p-last-again", change: func(t *testing.T, s *reuseState, sv [2]*ode.Solver) {
			earlier = slices.Clone(s.p.P)
			lastP(t, s, sv)
		}, op: "grad", held: noP},
		grad(all...),
		reuseStep{what: "p-back", change: func(t *testing.T, s *reuseState, _ [2]*ode.Solver) { copy(s.p.P, earlier) }, op: "grad", held: noP},
		grad(all...),
	)
	lor := lorenzCase(300, 1e-4)
	rows := lorenzCase(300, 1e-4)
	rows.name = "lorenz-row"
	rows.prob.Y0 = rows.prob.Y0[:3]
	data := lorenzCase(300, 1e-4)
	data.name = "lorenz-data"
	obs := make([]float64, 3*300)
	for i := range obs {
		obs[i] = float64(i%5) - 2
	}
	data.loss = fitMSE(obs)
	staged := lorenzCase(4*1024+100, 1e-4)
	ball := withSaves(ballCase(64, ode.Tsit5), 5, 1.5)
	for _, c := range []struct {
		ec     engineCase
		engine string
		tun    Tuning
		steps  []reuseStep
		ref    string // the engine of the solver with NoInputReuse ("": engine)
	}{
		{lor, "cuda-host", Tuning{}, lorenzSteps, ""},
		{lor, "cuda-host-f32", Tuning{}, lorenzSteps[:7], ""},
		{lor, "cuda-host", Tuning{}, adaptive, ""},
		// Three fake devices, each shard's executor with arenas of its
		// own; the balancer resizes the shards from call to call (then
		// their inputs go up again), so only the results are compared,
		// with the one-device engine's (no shared parameters: the same
		// bits).
		{lor, "cuda-multi-host3", Tuning{}, lorenzSteps[:10], "cuda-host"},
		{rows, "cuda-host", Tuning{bcastSeed: 16}, []reuseStep{ // 300 ≥ 16 seeds: Y0 broadcast
			grad(), grad(all...),
			{what: "row", change: changeY0, op: "grad", held: []int{argT1, argP}},
			grad(all...),
		}, ""},
		{data, "cuda-host", Tuning{}, []reuseStep{
			grad(), grad(argT1, argY0, argP, argData),
			{what: "data-element", change: func(t *testing.T, s *reuseState, _ [2]*ode.Solver) {
				nudge(s.loss.Data, s.rng.IntN(len(s.loss.Data)))
			}, op: "grad", held: all},
			{what: "p-sweep", change: sweepP, op: "grad", held: []int{argT1, argY0, argData}},
		}, ""},
		{staged, "cuda-host", Tuning{pipeChunk: 1024}, []reuseStep{
			grad(), grad(all...),
			{what: "y0-element", change: changeY0, op: "grad", held: []int{argT1, argP}},
			{what: "p-sweep", change: sweepP, op: "grad", held: []int{argT1, argY0}},
		}, ""},
		// Every trajectory's record buffer too short: the rerun is a
		// launch of all of them, which keeps what it sent.
		// Each call's two launches (in the arena the rerun took) keep them.
		{lor, "cuda-host", Tuning{firstRows: 4}, []reuseStep{grad(), grad(twice...), grad(twice...)}, ""},
		// Some too short (172 of 300): the reruns' launch, in an arena
		// of its own (its inputs lie elsewhere: keptArenas), leaves it
		// without a record; the next call's first launch finds the
		// record of the arena it left.
		{lor, "cuda-host", Tuning{firstRows: 16}, []reuseStep{grad(), grad(all...), grad(all...)}, ""},
		// The wide layout's Y0 and P, row-major on the device
		// (Config.RowMajor), on a simulated warp.
		{wideSharedCase(17, 64), "cuda-host-sim", Tuning{}, []reuseStep{
			grad(), grad(all...),
			{what: "y0-element", change: changeY0, op: "grad", held: []int{argT1, argP}},
			{what: "p-sweep", change: sweepP, op: "grad", held: []int{argT1, argY0}},
		}, ""},
		{ball, "cuda-host", Tuning{}, []reuseStep{
			grad(), grad(all...),
			{what: "mesh", op: "setmesh", held: all},
			{what: "on-mesh", op: "gradmesh"}, // the replay's layout, without T1: every offset moves
			{what: "on-mesh-again", op: "gradmesh", held: []int{argY0, argP, argLen, argEvIn}},
			{what: "y0-element", change: changeY0, op: "gradmesh", held: []int{argP, argLen, argEvIn}},
			// The solve's layout (T1, no data) is neither the grad's nor
			// the replay's: it takes the arena least recently given
			// back (keptArenas), the grad's, whose record holds T1 and
			// P (Y0 changed since).
			{what: "solve", op: "solve", held: []int{argT1, argP}},
			grad(all...),
			// The replay's arena, kept beside the grad's, still holds
			// its inputs.
			{what: "on-mesh-back", op: "gradmesh", held: []int{argY0, argP, argLen, argEvIn}},
			grad(all...),
		}, ""},
	} {
		c.engine = on(c.engine)
		if c.ref != "" {
			c.ref = on(c.ref)
		}
		name := fmt.Sprintf("%s/%s/rows=%d,seed=%d,chunk=%d", c.ec.name, c.engine, c.tun.firstRows, c.tun.bcastSeed, c.tun.pipeChunk)
		t.Run(name, func(t *testing.T) {
			if testing.Short() && c.ec.prob.Field.Dim >= 64 {
				t.Skip("the wide layout's kernels on a simulated warp: minutes on two cores")
			}
			off := c.tun
			off.NoInputReuse = true
			ref := c.ref
			if ref == "" {
				ref = c.engine
			}
			engine := c.engine
			if c.ref == "" {
				engine = tuned(t, engine, c.tun)
			}
			sv := [2]*ode.Solver{c.ec.solver(t, engine), c.ec.solver(t, tuned(t, ref, off))}
			// Each case its own copies: steps change them in place.
			s := &reuseState{c: c.ec, p: c.ec.prob, loss: c.ec.loss, rng: rand.New(rand.NewPCG(uint64(len(name)), 37))}
			s.p.Y0, s.p.P = slices.Clone(s.p.Y0), slices.Clone(s.p.P)
			s.loss.Data = slices.Clone(s.loss.Data)
			es := int64(8)
			if strings.HasSuffix(c.engine, "f32") {
				es = 4
			}
			var gs [2]ode.Gradient
			for k, st := range c.steps {
				what := fmt.Sprintf("step %d %s(%s)", k, st.what, st.op)
				if st.change != nil {
					st.change(t, s, sv)
				}
				var tr [2]Trace
				var res [2]*ode.Gradient
				var sol [2]*ode.Solution
				for e := range sv {
					ctx := WithTrace(context.Background(), &tr[e])
					var err error
					switch st.op {
					case "grad", "setmesh":
						res[e], err = sv[e].GradContext(ctx, &gs[e], &s.p, s.loss, nil)
					case "gradmesh":
						res[e], err = sv[e].GradContext(ctx, nil, &s.p, s.loss, s.mesh)
					case "solve":
						sol[e], err = sv[e].SolveContext(ctx, &s.p)
					}
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
				}
				if res[0] != nil {
					sameSolution(t, what, res[0].Solution, res[1].Solution)
					sameBits(t, what+": loss", []float64{res[0].Loss}, []float64{res[1].Loss})
					sameBits(t, what+": dL/dY0", res[0].Y0, res[1].Y0)
					sameBits(t, what+": dL/dP", res[0].P, res[1].P)
				} else {
					sameSolution(t, what, sol[0], sol[1])
				}
				if st.op == "setmesh" {
					hostMesh(t, res[1].Mesh)
					s.mesh = res[1].Mesh
					gs[1] = ode.Gradient{} // the mesh is the state's now
				}
				on, off := tr[0].Stats(), tr[1].Stats()
				if c.ref != "" {
					continue
				}
				if c.ec.prob.Field.Dim >= 64 && on.Layout != "wide" {
					t.Errorf("%s: layout %q, want wide", what, on.Layout)
				}
				if c.tun.firstRows > 0 && (on.Reruns == 0 || on.Reruns != off.Reruns) {
					t.Errorf("%s: %d and %d trajectories rerun, want as many, some", what, on.Reruns, off.Reruns)
				}
				if want := heldBytes(s, st.held, es, c.tun.bcastSeed); on.Reused != want {
					t.Errorf("%s: %d bytes of inputs held, want %d (%v)", what, on.Reused, want, st.held)
				}
				// A launch run ahead of its compare that found an input
				// changed (AheadMissed) ran again: the dropped launch's
				// mesh to replay (writeMesh) went up too.
				dropped := int64(0)
				if on.AheadMissed > 0 && st.op == "gradmesh" {
					dropped = int64(on.AheadMissed) * int64(s.mesh.Rows) * int64(s.p.N) * 8
				}
				if on.Upload+on.Reused != off.Upload+dropped || off.Reused != 0 {
					t.Errorf("%s: %d bytes uploaded and %d held, with NoInputReuse %d and %d", what, on.Upload, on.Reused, off.Upload, off.Reused)
				}
			}
		})
	}
}

// runTrainer runs a fit of ρ per trajectory held on the device on solver
// sv's engine (a Load and an evaluation), which fills its own arena's
// inputs and updates them in place.
func runTrainer(t *testing.T, sv *ode.Solver, p *ode.Problem, loss ode.Loss, rng *rand.Rand) {
	t.Helper()
	spec := &ode.TrainSpec{Fits: p.N, P: []int{1}}
	tri, err := sv.NewTrainer(p, loss, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer tri.Release()
	x := make([]float64, spec.Len(p.N, 0))
	for i := range x {
		x[i] = 20 + rng.Float64()
	}
	if err := tri.Load(x, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := tri.Eval(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkStageReuse measures the host's staging of a launch's inputs
// alone (Grad with the record of n Lorenz trajectories, Y0 and P per
// trajectory, T1 one value): "fill" stages them all, as every launch did
// before the reuse and does with Tuning.NoInputReuse (fillBroadcast, the
// transpose into the step-major staging buffer); "same" compares them
// with the arena's record and stages nothing (reuse, then fill of the
// shared block); "p" is "same" with P changed every call (two arrays in
// turn): P staged, and compared and copied into the record on the first
// two calls and then, as it rests (heldInput.miss), copied on one call
// and compared on the next in 6, 10, 18, … up to 258.
//
//	go test ./cuda -run '^$' -bench StageReuse -benchtime 200x
func BenchmarkStageReuse(b *testing.B) {
	for _, n := range []int{1 << 15, 1 << 16, 1 << 18} {
		c := lorenzCallCase(n)
		y0 := make([]float64, 3*n)
		for i := range n {
			y0[3*i], y0[3*i+1], y0[3*i+2] = 1, 0.01*float64(i%7), 0
		}
		c.prob.Y0 = y0
		j := jobOf(b, c, ode.OpGrad)
		x, err := hostWork.Prepare(j.Plan)
		if err != nil {
			b.Fatal(err)
		}
		ex := x.(*executor)
		v, ke, err := ex.prepare(context.Background(), j, nil)
		if err != nil {
			b.Fatal(err)
		}
		ps := [2][]float64{j.P, slices.Clone(j.P)}
		for i := 1; i < n*3; i += 3 {
			ps[1][i] *= 1.01
		}
		for _, mode := range []string{"fill", "same", "p"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
				r := newRun(ex, j, v, ke, nil)
				l := r.layout(n, 128)
				_, inHi := l.region(argSh, argGS)
				up := make([]byte, inHi)
				g := ex.identity(n)
				ar := &arena{}
				stage := func(k int) {
					bc := r.broadcasts(n, &l)
					if mode != "fill" {
						if mode == "p" {
							j.P = ps[k%2]
						}
						held := r.reuse(ar, g, &l, &bc, compareFirst)
						defer func() { ar.held = held }()
					}
					if err := r.fillBroadcast(up, g, &l, bc); err != nil {
						b.Fatal(err)
					}
				}
				stage(1)
				b.SetBytes(inHi)
				b.ResetTimer()
				for k := range b.N {
					stage(k)
				}
				j.P = ps[0]
			})
		}
	}
}

// TestHostEngineInputReuseChecks checks that a launch whose P holds a
// value that is not finite, staged without the check (Job.Checks 0),
// leaves its arena without a record: the next launch of the same values
// with the check (ode.CheckFinite) stages P and fails it, as a fresh
// engine does; and that once the values are finite again they are kept.
func TestHostEngineInputReuseChecks(t *testing.T) {
	needHost(t)
	c := lorenzCase(64, 1e-4)
	c.prob.SaveAt = nil
	j := jobOf(t, c, ode.OpSolve)
	x, err := hostF64.Prepare(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	p := slices.Clone(j.P)
	j.P = slices.Clone(p)
	j.P[7] = math.NaN()
	j.Checks = 0
	if _, err := x.Run(t.Context(), j); err != nil {
		t.Fatalf("unchecked: %v", err)
	}
	j.Checks = ode.CheckFinite
	if _, err := x.Run(t.Context(), j); !errors.Is(err, ode.ErrInput) {
		t.Fatalf("checked, after an unchecked launch of the same values: %v, want ode.ErrInput", err)
	}
	copy(j.P, p)
	var tr Trace
	for k := range 2 {
		tr.Reset()
		if _, err := x.Run(WithTrace(t.Context(), &tr), j); err != nil {
			t.Fatal(err)
		}
		if got := tr.Stats().Reused > 0; got != (k == 1) {
			t.Errorf("finite again, launch %d: %d bytes kept", k, tr.Stats().Reused)
		}
	}
}

// TestReuseAdaptive runs sequences of launches' staging (reuse, then
// the fill, as launch runs them, on one arena) of n Lorenz trajectories
// whose inputs change between launches in place, and checks after each
// launch that the arena's input regions (an upload of what was staged,
// what was held left as it was) hold what a launch that stages
// everything stages, byte for byte, so that a changed input is never
// left unsent; and the record's policy (miss): an input changed on every
// launch is kept (compared, copied) on few of them; once it stops
// changing it is held again within reuseRestMax + 2 launches and from
// then on; one changed every other launch is held on every launch
// between. The changes: a sweep of every value, the last element alone,
// the first, a NaN in the loss data and then its payload, values flipped
// back to an earlier launch's, a NaN in P (the launch records nothing:
// the next sends everything). n = 25,000: Y0, P and the data are
// compared in blocks on all cores after the probes, T1 in one compare.
func TestReuseAdaptive(t *testing.T) {
	const n = 25000
	c := lorenzCase(n, 1e-4)
	c.prob.SaveAt = nil
	rng := rand.New(rand.NewPCG(23, 38))
	c.prob.T1s = make([]float64, n)
	for i := range c.prob.T1s {
		c.prob.T1s[i] = 0.5 + 0.5*rng.Float64()
	}
	obs := make([]float64, 3*n)
	for i := range obs {
		obs[i] = rng.NormFloat64()
	}
	c.loss = fitMSE(obs)
	j := jobOf(t, c, ode.OpGrad)
	j.Checks = 0 // a NaN in P is staged; the launch then records nothing
	x, err := hostWork.Prepare(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	ex := x.(*executor)
	v, ke, err := ex.prepare(context.Background(), j, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRun(ex, j, v, ke, nil)
	l := r.layout(n, 128)
	_, inHi := l.region(argSh, argGS)
	up, fresh, dev := make([]byte, inHi), make([]byte, inHi), make([]byte, inHi)
	g := ex.identity(n)
	ar := &arena{}
	inputs := map[int][]float64{argT1: j.T1, argY0: j.Y0, argP: j.P, argData: j.Loss.Data}
	for a, x := range inputs {
		if l.off[a] < 0 || len(x) == 0 || r.broadcasts(n, &l).broadcasts(a) {
			t.Fatalf("input %d: offset %d, %d values: want a region of its own, not broadcast", a, l.off[a], len(x))
		}
	}
	// launch stages the inputs as run.launch does and uploads the
	// staged regions to dev; it returns what the launch held.
	launch := func(what string) bcast {
		t.Helper()
		bc := r.broadcasts(n, &l)
		r.inputsBad = false
		held := r.reuse(ar, g, &l, &bc, compareFirst)
		if err := r.fillBroadcast(up, g, &l, bc); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if held != nil && !r.inputsBad {
			ar.held = held
		}
		if err := r.fillBroadcast(fresh, g, &l, r.broadcasts(n, &l)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for _, a := range reusedArgs {
			if l.off[a] < 0 {
				continue
			}
			lo, hi := l.off[a], l.off[a]+l.bytes[a]
			if !bc.holds(a) {
				copy(dev[lo:hi], up[lo:hi])
			}
			if !slices.Equal(dev[lo:hi], fresh[lo:hi]) {
				t.Fatalf("%s: input %d (held %t) in the arena differs from its staging", what, a, bc.holds(a))
			}
		}
		return bc
	}
	kept := func(a int) bool { return ar.held != nil && ar.held.in[a].key != (heldKey{}) }
	sweep := func(x []float64) {
		for i := range x {
			x[i] *= 1.0001
		}
	}
	for k := range 3 {
		if bc := launch(fmt.Sprintf("same %d", k)); k > 0 && bc.held != 1<<argT1|1<<argY0|1<<argP|1<<argData {
			t.Errorf("same %d: held %b, want T1, Y0, P and the data", k, bc.held)
		}
	}
	// P changed on every launch (a sweep; every tenth only its last
	// element, every seventh only its first): kept on few launches.
	keptP := 0
	const changes = 40
	for k := range changes {
		switch {
		case k%10 == 9:
			nudge(j.P, len(j.P)-1)
		case k%7 == 6:
			nudge(j.P, 0)
		default:
			sweep(j.P)
		}
		bc := launch(fmt.Sprintf("p changed %d", k))
		if bc.holds(argP) || !bc.holds(argY0) || !bc.holds(argT1) || !bc.holds(argData) {
			t.Errorf("p changed %d: held %b, want all but P", k, bc.held)
		}
		if kept(argP) {
			keptP++
		}
	}
	if most := reuseMisses + bits.Len(changes); keptP > most {
		t.Errorf("P changed on %d launches in a row: kept after %d of them, want at most %d", changes, keptP, most)
	}
	// Unchanged from now on: held again after its rest, and from then on.
	first := -1
	for k := range reuseRestMax + 4 {
		bc := launch(fmt.Sprintf("p again %d", k))
		switch {
		case bc.holds(argP) && first < 0:
			first = k
		case !bc.holds(argP) && first >= 0:
			t.Errorf("p again %d: not held, held from launch %d", k, first)
		}
	}
	if first < 0 || first > reuseRestMax+2 {
		t.Errorf("P unchanged: held from launch %d, want by %d", first, reuseRestMax+2)
	}
	// Y0 changed on every other launch, in its last element: held on
	// every launch between.
	for k := range 20 {
		if k%2 == 0 {
			nudge(j.Y0, len(j.Y0)-1)
		}
		if bc := launch(fmt.Sprintf("y0 every other %d", k)); bc.holds(argY0) == (k%2 == 0) {
			t.Errorf("y0 every other %d: held %t", k, bc.holds(argY0))
		}
	}
	// A NaN in the data, the same again, its payload changed, T1 flipped
	// back to an earlier launch's values and forth, P's NaN.
	t1 := slices.Clone(j.T1)
	steps := []struct {
		what   string
		change func()
		held   bool // whether the changed input is held
		a      int
	}{
		{"data nan", func() { j.Loss.Data[n] = math.NaN() }, false, argData},
		{"data nan again", func() {}, true, argData},
		{"data nan same", func() {}, true, argData},
		{"data nan payload", func() { j.Loss.Data[n] = math.Float64frombits(math.Float64bits(j.Loss.Data[n]) + 2) }, false, argData},
		{"data nan payload again", func() {}, true, argData},
		{"t1 changed", func() { sweep(j.T1) }, false, argT1},
		{"t1 same", func() {}, true, argT1},
		{"t1 back", func() { copy(j.T1, t1) }, false, argT1},
		{"t1 back again", func() {}, true, argT1},
		{"p nan", func() { j.P[4] = math.NaN() }, false, argP},
		{"p nan again", func() {}, false, argP}, // no record: everything sent
		{"p finite", func() { j.P[4] = 28 }, false, argP},
		{"p finite again", func() {}, true, argP},
	}
	for _, st := range steps {
		st.change()
		bc := launch(st.what)
		if bc.holds(st.a) != st.held {
			t.Errorf("%s: input %d held %t, want %t", st.what, st.a, bc.holds(st.a), st.held)
		}
		if st.what == "p nan again" && bc.held != 0 {
			t.Errorf("%s: held %b after a launch with a NaN in P, want none", st.what, bc.held)
		}
	}
}
