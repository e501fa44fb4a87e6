package cuda

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// readsBackend is the host backend counting the copies back of its
// batches (a read of the batch's queue each).
type readsBackend struct {
	*hostBackend
	reads atomic.Int64
}

func (b *readsBackend) batch(f func(q queue) error) error {
	return b.hostBackend.batch(func(q queue) error { return f(readsQueue{q, &b.reads}) })
}

// readsQueue is a queue of readsBackend's batches.
type readsQueue struct {
	queue
	reads *atomic.Int64
}

func (q readsQueue) read(dst []byte, addr uint64) error {
	q.reads.Add(1)
	return q.queue.read(dst, addr)
}

// hostReads is the host engine whose backend counts its copies back.
var hostReads = &Engine{name: "cuda-host-reads", prec: Float64, be: &readsBackend{hostBackend: newHostBackend(1 << 30)}}

func init() { ode.Register(hostReads) }

// TestHostEngineSplitDownload checks that the results of a launch copied back
// in two parts (splitAt, from Tuning.splitMin: here 1,024 trajectories),
// the first (statuses, counts, loss terms) scattered while the second
// is copied, are those of one copy bit for bit: the solve, the gradient
// with its record and on its mesh (sameRuns), a Gradient passed back
// twice, and a gradient with failures (MaxSteps: some trajectories'
// loss terms 0, states NaN, their errors), with record buffers long
// enough and short (every trajectory's record overflows: the blocks are
// written whole once the second part is in, and the rerun's launch is
// split too), with and without shared parameters, the blocks on the
// pool's goroutines (the default) and on one or two (Tuning.headsWorkers,
// hostWorkers); and that a split
// gradient's launch copies back twice where the other copies once.
func TestHostEngineSplitDownload(t *testing.T) {
	needHost(t)
	for _, c := range []engineCase{lorenzCase(4096, 1e-4), lorenzSharedCase(4096 + 100)} {
		for _, x := range []struct{ rows, workers int }{{0, 0}, {4, 0}, {0, 1}, {4, 2}} {
			rows, workers := x.rows, x.workers
			t.Run(fmt.Sprintf("%s/rows=%d/workers=%d", c.name, rows, workers), func(t *testing.T) {
				splitTun := Tuning{splitMin: 1024, firstRows: rows, headsWorkers: workers, hostWorkers: workers}
				split := c.solver(t, tuned(t, hostReads.name, splitTun))
				one := c.solver(t, tuned(t, hostReads.name, Tuning{splitMin: -1, firstRows: rows}))
				sameRuns(t, c, split, one)
				// Reads of one gradient with the record: one copy back a
				// launch more where split.
				be := hostReads.be.(*readsBackend)
				var reads [2]int64
				var gs [2]ode.Gradient
				for round := range 2 { // a Gradient passed back
					for k, sv := range []*ode.Solver{split, one} {
						r0 := be.reads.Load()
						if _, err := sv.Grad(&gs[k], &c.prob, c.loss, nil); err != nil {
							t.Fatal(err)
						}
						reads[k] = be.reads.Load() - r0
					}
					sameGrads(t, fmt.Sprintf("passed back, round %d", round), &gs[0], &gs[1])
				}
				if rows == 0 && reads[0] != reads[1]+1 {
					t.Errorf("%d copies back split, %d in one: want one more split", reads[0], reads[1])
				}
				// Failures: a third of the trajectories run ten times
				// longer, five times longer than MaxSteps allows.
				p := c.prob
				p.T1s = make([]float64, p.N)
				for i := range p.T1s {
					p.T1s[i] = p.T1
					if i%3 == 1 {
						p.T1s[i] = 10 * p.T1
					}
				}
				set := c.set
				set.MaxSteps = 2 * slices.Max(gs[1].Solution.Stats.Accepted)
				sameFailures(t, c, set, &p, "split", [2]string{tuned(t, hostReads.name, splitTun), tuned(t, hostReads.name, Tuning{splitMin: -1, firstRows: rows})})
			})
		}
	}
}

// sameFailures runs GradPartial of c's field on problem p with settings
// set on two engines (the second the reference) and checks that some but
// not all trajectories fail, with the same failures on both, and that the
// gradients are the same bit for bit (sameGrads); what names the first
// engine's form in the messages.
func sameFailures(t *testing.T, c engineCase, set ode.Settings, p *ode.Problem, what string, engines [2]string) {
	t.Helper()
	var fails [2][]string
	var gf [2]*ode.Gradient
	for k, e := range engines {
		set.Engine = e
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		g, fs, err := sv.GradPartial(t.Context(), nil, p, c.loss, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			fails[k] = append(fails[k], f.Error())
		}
		gf[k] = g
	}
	if len(fails[1]) == 0 || len(fails[1]) == p.N {
		t.Fatalf("%d of %d trajectories fail; want some", len(fails[1]), p.N)
	}
	if !slices.Equal(fails[0], fails[1]) {
		t.Errorf("failures differ: %d %s, %d without", len(fails[0]), what, len(fails[1]))
	}
	sameGrads(t, "with failures", gf[0], gf[1])
}

// TestHostEngineShortRuns checks that a launch's staging and result
// blocks on par.RunShort (Tuning.shortStage, shortScatter) give the
// pool's results (par.Run) bit for bit: solves and gradients with the
// record, results in one copy and in two parts (splitMin), the inputs
// staged every call (NoInputReuse) and reused, a Gradient passed back,
// and failures (MaxSteps).
func TestHostEngineShortRuns(t *testing.T) {
	needHost(t)
	c := lorenzCase(4096, 1e-4)
	for _, x := range []struct {
		split   int
		noReuse bool
	}{{-1, true}, {1024, true}, {-1, false}} {
		t.Run(fmt.Sprintf("split=%d/noreuse=%v", x.split, x.noReuse), func(t *testing.T) {
			shortTun := Tuning{splitMin: x.split, NoInputReuse: x.noReuse, shortStage: true, shortScatter: true}
			poolTun := Tuning{splitMin: x.split, NoInputReuse: x.noReuse}
			short := c.solver(t, tuned(t, hostReads.name, shortTun))
			pool := c.solver(t, tuned(t, hostReads.name, poolTun))
			sameRuns(t, c, short, pool)
			var gs [2]ode.Gradient
			for round := range 2 { // a Gradient passed back
				for k, sv := range []*ode.Solver{short, pool} {
					if _, err := sv.Grad(&gs[k], &c.prob, c.loss, nil); err != nil {
						t.Fatal(err)
					}
				}
				sameGrads(t, fmt.Sprintf("passed back, round %d", round), &gs[0], &gs[1])
			}
			p := c.prob
			p.T1s = make([]float64, p.N)
			for i := range p.T1s {
				p.T1s[i] = p.T1
				if i%3 == 1 {
					p.T1s[i] = 10 * p.T1
				}
			}
			set := c.set
			set.MaxSteps = 2 * slices.Max(gs[1].Solution.Stats.Accepted)
			sameFailures(t, c, set, &p, "short", [2]string{tuned(t, hostReads.name, shortTun), tuned(t, hostReads.name, poolTun)})
		})
	}
}
