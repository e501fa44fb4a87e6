package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// endsSpy is an engine that runs another's executors and counts the jobs
// that ask for the end times (ode.Job.EndTimes) and the results that
// hand them over (ode.Result.EndsWell).
type endsSpy struct {
	name        string
	e           *Engine
	drop        bool // run the jobs without EndTimes (package ode's own pass)
	asked, well atomic.Int64
}

func (s *endsSpy) Name() string     { return s.name }
func (s *endsSpy) Available() error { return s.e.Available() }

// SupportsEvents reports that the spy runs problems with events, as its
// engine does (ode.EventEngine).
func (s *endsSpy) SupportsEvents() bool { return s.e.SupportsEvents() }

func (s *endsSpy) Prepare(p *ode.Plan) (ode.Executor, error) {
	ex, err := s.e.Prepare(p)
	if err != nil {
		return nil, err
	}
	return &endsSpyExec{ex, s}, nil
}

type endsSpyExec struct {
	ex ode.Executor
	s  *endsSpy
}

func (x *endsSpyExec) Run(ctx context.Context, j *ode.Job) (*ode.Result, error) {
	if j.EndTimes {
		x.s.asked.Add(1)
	}
	if x.s.drop {
		jd := *j
		jd.EndTimes = false
		j = &jd
	}
	res, err := x.ex.Run(ctx, j)
	if err == nil && res.EndsWell {
		x.s.well.Add(1)
	}
	return res, err
}

var (
	endsSpiesMu sync.Mutex
	endsSpies   = map[string]*endsSpy{}
)

// endsSpyOf returns the spy, registered on first use, of the host engine
// (float64) with Tuning tun.
func endsSpyOf(t *testing.T, tun Tuning) *endsSpy { return endsSpyDrop(t, tun, false) }

// endsSpyDrop is endsSpyOf whose spy, with drop, runs the jobs without
// EndTimes.
func endsSpyDrop(t *testing.T, tun Tuning, drop bool) *endsSpy {
	t.Helper()
	name := fmt.Sprintf("cuda-host-endsspy/%d/%t/%t/%t/%d", tun.firstRows, tun.generic, drop, tun.endsInScatter, tun.splitMin)
	endsSpiesMu.Lock()
	defer endsSpiesMu.Unlock()
	if s := endsSpies[name]; s != nil {
		return s
	}
	be, err := hostF64.backend()
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{name: name, prec: Float64, be: be}
	e.SetTuning(tun)
	s := &endsSpy{name: name, e: e, drop: drop}
	ode.Register(s)
	endsSpies[name] = s
	return s
}

// TestHostEngineEndTimes checks the end times that the engine's scatter
// writes for a Grad's record (ode.Job.EndTimes): the Solution's T and
// the Mesh's T1 equal the CPU engine's (which package ode writes) bit for
// bit, in storage of their own, with one end time and with one per
// trajectory, in launches of consecutive trajectories and with reruns
// (short first record buffers) and the general loops (Tuning.generic),
// over repeated calls that pass the Gradient back (its end times made NaN
// before each call: a launch that leaves them unwritten fails), written
// in the batch as the kernel runs (endsInBatch, the default), in the
// scatter after the copy (Tuning.endsInScatter) and where the results
// come back in two parts (Tuning.splitMin: no end times in the batch);
// that the engine hands
// them over (Result.EndsWell) only where every trajectory ended well,
// and that a call with failed trajectories after a good one (and a good
// one after it, the same Gradient passed back) gets the same results and
// errors as on the CPU engine.
func TestHostEngineEndTimes(t *testing.T) {
	needHost(t)
	const n = 2500 // three result blocks or more
	rng := rand.New(rand.NewPCG(23, 36))
	t1s := make([]float64, n)
	for i := range t1s {
		t1s[i] = 0.5 + 0.5*rng.Float64()
	}
	for _, c := range []struct {
		name string
		t1s  bool
		tun  Tuning
	}{
		{"T1", false, Tuning{}},
		{"T1s", true, Tuning{}},
		{"T1/reruns", false, Tuning{firstRows: 4}},
		{"T1s/reruns", true, Tuning{firstRows: 4}},
		{"T1s/generic", true, Tuning{generic: true}},
		{"T1s/after", true, Tuning{endsInScatter: true}},
		{"T1/reruns/after", false, Tuning{firstRows: 4, endsInScatter: true}},
		{"T1s/split", true, Tuning{splitMin: 64}},
		{"T1s/split/reruns", true, Tuning{splitMin: 64, firstRows: 4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			spy := endsSpyOf(t, c.tun)
			lc := lorenzCase(n, 1e-4)
			if c.t1s {
				lc.prob.T1s = t1s
			}
			cpu := lc.solver(t, "cpu")
			gpu := lc.solver(t, spy.name)
			want, err := cpu.Grad(nil, &lc.prob, lc.loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			// A failing call: a step budget that about half of the
			// trajectories exhaust (the larger ρ take more steps).
			steps := make([]int, n)
			for i := range steps {
				steps[i] = want.Solution.Stats.Accepted[i] + want.Solution.Stats.Rejected[i]
			}
			slices.Sort(steps)
			fl := lc
			fl.set.MaxSteps = steps[n/2]
			cpuFail, gpuFail := fl.solver(t, "cpu"), fl.solver(t, spy.name)
			_, wantErr := cpuFail.Grad(nil, &fl.prob, fl.loss, nil)
			var wantTE *ode.TrajectoryError
			if !errors.As(wantErr, &wantTE) {
				t.Fatalf("the CPU engine's Grad with MaxSteps %d: %v, not a *TrajectoryError", fl.set.MaxSteps, wantErr)
			}
			var g ode.Gradient
			for k, fail := range []bool{false, false, true, false} {
				asked, well := spy.asked.Load(), spy.well.Load()
				if fail {
					_, err := gpuFail.Grad(&g, &fl.prob, fl.loss, nil)
					var te *ode.TrajectoryError
					if !errors.As(err, &te) || te.Index != wantTE.Index || te.Status != wantTE.Status {
						t.Fatalf("call %d: the failing Grad's error is %v, the CPU engine's %v", k, err, wantErr)
					}
					if spy.asked.Load() != asked+1 || spy.well.Load() != well {
						t.Errorf("call %d: %d jobs asked for the end times, %d results handed them over: want 1 and 0", k, spy.asked.Load()-asked, spy.well.Load()-well)
					}
					continue
				}
				if g.Solution != nil && g.Mesh != nil {
					// The storage the call writes its end times into.
					for _, a := range [][]float64{g.Solution.T, g.Mesh.T1} {
						for i := range a {
							a[i] = math.NaN()
						}
					}
				}
				if _, err := gpu.Grad(&g, &lc.prob, lc.loss, nil); err != nil {
					t.Fatalf("call %d: %v", k, err)
				}
				if spy.asked.Load() != asked+1 || spy.well.Load() != well+1 {
					t.Errorf("call %d: %d jobs asked for the end times, %d results handed them over: want 1 and 1", k, spy.asked.Load()-asked, spy.well.Load()-well)
				}
				sameBits(t, fmt.Sprintf("call %d: Solution.T", k), g.Solution.T, want.Solution.T)
				sameBits(t, fmt.Sprintf("call %d: Mesh.T1", k), g.Mesh.T1, want.Mesh.T1)
				if len(g.Mesh.T1) > 0 && &g.Mesh.T1[0] == &g.Solution.T[0] {
					t.Errorf("call %d: Mesh.T1 and Solution.T share their storage", k)
				}
				if !slices.Equal(g.Solution.Status, want.Solution.Status) || !slices.Equal(g.Solution.Stiff, want.Solution.Stiff) {
					t.Errorf("call %d: the statuses or stiffness flags differ from the CPU engine's", k)
				}
			}
		})
	}
}

// sameBits reports an element of got whose bits differ from want's, or a
// length that does.
func sameBits(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	for i := range got {
		if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
			t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
			return
		}
	}
}

// TestHostEngineEndTimesEvents checks the end times the engine's scatter
// writes for a Grad's record with events (ode.Job.EndTimes: the Mesh's
// T1, with the Solution's T the times reached): every result of the
// call (loss, gradients, states, times, statuses, event counts, the
// mesh's lengths and end times) equals, bit for bit, that of the same
// engine told nothing of EndTimes (package ode's own pass), for the
// bouncing balls and the terminal threshold, in launches of consecutive
// trajectories, with reruns and with the general loops, over repeated
// calls that pass the Gradient back; that the engine hands the end
// times over (Result.EndsWell) only where every trajectory ended well;
// and that a call where some stop at MaxEvents fails as without
// EndTimes, between good ones on the same Gradient.
func TestHostEngineEndTimesEvents(t *testing.T) {
	needHost(t)
	const n = 2500 // three result blocks or more
	for _, tun := range []Tuning{{}, {firstRows: 4}, {generic: true}} {
		for _, mk := range []func(int, ode.Method) engineCase{ballCase, pkCase} {
			c := mk(n, ode.Tsit5)
			c.set.RelTol, c.set.AbsTol = 1e-6, 1e-8
			t.Run(fmt.Sprintf("%s/rows=%d/generic=%t", c.name, tun.firstRows, tun.generic), func(t *testing.T) {
				spy, plain := endsSpyOf(t, tun), endsSpyDrop(t, tun, true)
				fl := c
				fl.set.MaxEvents = 1 // the balls bounce twice or more: TooManyEvents
				var g, h ode.Gradient
				for k, fail := range []bool{false, false, true, false} {
					cc := c
					if fail {
						cc = fl
					}
					want, wantErr := cc.solver(t, plain.name).Grad(&h, &cc.prob, cc.loss, nil)
					asked, well := spy.asked.Load(), spy.well.Load()
					got, err := cc.solver(t, spy.name).Grad(&g, &cc.prob, cc.loss, nil)
					wantWell := int64(1) // every trajectory ended well
					if wantErr != nil {
						wantWell = 0
					}
					if spy.asked.Load() != asked+1 || spy.well.Load() != well+wantWell {
						t.Errorf("call %d: %d jobs asked for the end times, %d results handed them over: want 1 and %d", k, spy.asked.Load()-asked, spy.well.Load()-well, wantWell)
					}
					if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
						t.Fatalf("call %d: error %v, without EndTimes %v", k, err, wantErr)
					}
					if fail && strings.HasPrefix(c.name, "ball") && err == nil {
						t.Fatalf("call %d: MaxEvents 1 stopped no ball", k)
					}
					if err != nil {
						continue
					}
					sameBits(t, fmt.Sprintf("call %d: Loss", k), []float64{got.Loss}, []float64{want.Loss})
					for _, f := range []struct {
						name      string
						got, want []float64
					}{{"dL/dY0", got.Y0, want.Y0}, {"dL/dP", got.P, want.P}, {"Solution.T", got.Solution.T, want.Solution.T},
						{"Solution.Y", got.Solution.Y, want.Solution.Y}, {"Mesh.T1", got.Mesh.T1, want.Mesh.T1}} {
						sameBits(t, fmt.Sprintf("call %d: %s", k, f.name), f.got, f.want)
					}
					if len(got.Mesh.T1) > 0 && &got.Mesh.T1[0] == &got.Solution.T[0] {
						t.Errorf("call %d: Mesh.T1 and Solution.T share their storage", k)
					}
					if !slices.Equal(got.Solution.Status, want.Solution.Status) || !slices.Equal(got.Solution.Stiff, want.Solution.Stiff) ||
						!slices.Equal(got.Solution.Events, want.Solution.Events) || !slices.Equal(got.Mesh.Len, want.Mesh.Len) {
						t.Errorf("call %d: the statuses, stiffness flags, event counts or mesh lengths differ from those without EndTimes", k)
					}
				}
			})
		}
	}
}

// TestHostEngineEndsInBatch checks on the host engine that a Grad whose
// end times are written in the launch's batch as the kernel runs (the
// default, endsInBatch) gives the results of one that writes them in the
// scatter after the copy (Tuning.endsInScatter) bit for bit, over calls
// that pass their Gradients back with the end times made NaN (testEndsSame).
func TestHostEngineEndsInBatch(t *testing.T) {
	needHost(t)
	testEndsSame(t, lorenzCallCase(3000), "cuda-host")
}

// TestGPUEndsInBatch is TestHostEngineEndsInBatch on the device, at
// 32,768 Lorenz trajectories (one copy back: the end times in the batch).
// It skips without a GPU.
func TestGPUEndsInBatch(t *testing.T) {
	needGPUEngine(t)
	testEndsSame(t, lorenzCallCase(1<<15), "cuda")
}

// testEndsSame runs case c's Grad three times on engine eng and on eng
// with Tuning.endsInScatter, each passing its Gradient back with its end
// times (Solution.T, Mesh.T1) made NaN, the second and third with T1s
// (seeded, then changed in place), and checks the results bit for bit
// (sameGrads) and the end times against the job's.
func testEndsSame(t *testing.T, c engineCase, eng string) {
	c.set.RelTol, c.set.AbsTol = 1e-6, 1e-8
	n := c.prob.N
	in, after := c.solver(t, eng), c.solver(t, tuned(t, eng, Tuning{endsInScatter: true}))
	rng := rand.New(rand.NewPCG(47, 2))
	var g, w ode.Gradient
	for call := range 3 {
		if call > 0 {
			if c.prob.T1s == nil {
				c.prob.T1s = make([]float64, n)
			}
			for i := range c.prob.T1s {
				c.prob.T1s[i] = 0.5 + 0.5*rng.Float64()
			}
		}
		for _, d := range []*ode.Gradient{&g, &w} {
			if d.Solution != nil && d.Mesh != nil {
				for _, a := range [][]float64{d.Solution.T, d.Mesh.T1} {
					for i := range a {
						a[i] = math.NaN()
					}
				}
			}
		}
		got, err := in.Grad(&g, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := after.Grad(&w, &c.prob, c.loss, nil)
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("call %d", call)
		sameGrads(t, what, got, want)
		for i, x := range got.Mesh.T1 {
			t1 := c.prob.T1
			if c.prob.T1s != nil {
				t1 = c.prob.T1s[i]
			}
			if x != t1 || got.Solution.T[i] != t1 {
				t.Fatalf("%s: trajectory %d ends at %v (Mesh.T1) and %v (Solution.T), want %v", what, i, x, got.Solution.T[i], t1)
			}
		}
	}
}
