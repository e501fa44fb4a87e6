package cuda

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// readsBackend is the host backend counting the copies back of its
// batches (a read of the batch's queue each) and the copies up (writes).
type readsBackend struct {
	*hostBackend
	reads, writes atomic.Int64
}

func (b *readsBackend) batch(f func(q queue) error) error {
	return b.hostBackend.batch(func(q queue) error { return f(readsQueue{q, &b.reads, &b.writes}) })
}

// readsQueue is a queue of readsBackend's batches.
type readsQueue struct {
	queue
	reads, writes *atomic.Int64
}

func (q readsQueue) read(dst []byte, addr uint64) error {
	q.reads.Add(1)
	return q.queue.read(dst, addr)
}

func (q readsQueue) write(addr uint64, src []byte) error {
	q.writes.Add(1)
	return q.queue.write(addr, src)
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

// TestHostEngineStageParts checks that a launch that stages P beside the
// upload of its other inputs (Tuning.stageParts, every input staged:
// NoInputReuse) gives the results of one that stages them all first bit
// for bit: solves and gradients with the record, a Gradient passed back,
// failures (MaxSteps), results in one copy (P staged on a goroutine of
// its own as the batch copies the others up: one copy up more a launch)
// and in two parts (the batch on a goroutine of its own: P staged before
// it, the copies up as many), and a P that is not finite (the error of
// ode.ErrInput from P's goroutine, as from the fill: package ode's error).
func TestHostEngineStageParts(t *testing.T) {
	needHost(t)
	c := lorenzCase(4096, 1e-4)
	be := hostReads.be.(*readsBackend)
	for _, split := range []int{-1, 1024} {
		t.Run(fmt.Sprintf("split=%d", split), func(t *testing.T) {
			partsTun := Tuning{splitMin: split, NoInputReuse: true, stageParts: true}
			wholeTun := Tuning{splitMin: split, NoInputReuse: true}
			parts := c.solver(t, tuned(t, hostReads.name, partsTun))
			whole := c.solver(t, tuned(t, hostReads.name, wholeTun))
			sameRuns(t, c, parts, whole)
			var gs [2]ode.Gradient
			var writes [2]int64
			for round := range 2 { // a Gradient passed back
				for k, sv := range []*ode.Solver{parts, whole} {
					w0 := be.writes.Load()
					if _, err := sv.Grad(&gs[k], &c.prob, c.loss, nil); err != nil {
						t.Fatal(err)
					}
					writes[k] = be.writes.Load() - w0
				}
				sameGrads(t, fmt.Sprintf("passed back, round %d", round), &gs[0], &gs[1])
			}
			if want := writes[1] + int64(max(0, -split)); writes[0] != want {
				t.Errorf("%d copies up with P staged apart, %d at once (split %d)", writes[0], writes[1], split)
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
			sameFailures(t, c, set, &p, "parts", [2]string{tuned(t, hostReads.name, partsTun), tuned(t, hostReads.name, wholeTun)})
			// A NaN in P, past the first block.
			p = c.prob
			p.P = slices.Clone(p.P)
			p.P[3*3000+1] = math.NaN()
			var errs [2]error
			for k, sv := range []*ode.Solver{parts, whole} {
				_, errs[k] = sv.Grad(nil, &p, c.loss, nil)
			}
			if errs[0] == nil || errs[1] == nil || errs[0].Error() != errs[1].Error() {
				t.Errorf("P with a NaN: error %v, want %v", errs[0], errs[1])
			}
			// And the calls after it.
			if _, err := parts.Grad(&gs[0], &c.prob, c.loss, nil); err != nil {
				t.Fatal(err)
			}
			sameGrads(t, "after the error", &gs[0], &gs[1])
		})
	}
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

// TestGPUStageParts checks on the device that the changed-input call's
// staging variants (Tuning.stageParts: P staged beside the upload of the
// other inputs; shortStage and shortScatter: the blocks on
// par.RunShort) give the results of the default staging bit for bit, at
// 32,768 Lorenz trajectories with every input staged every call
// (NoInputReuse), three calls each, a Gradient passed back.
func TestGPUStageParts(t *testing.T) {
	needGPUEngine(t)
	c := lorenzCallCase(1 << 15)
	var gs [2]ode.Gradient
	for _, x := range []struct {
		name string
		tun  Tuning
	}{{"parts", Tuning{stageParts: true}}, {"short", Tuning{shortStage: true, shortScatter: true}}, {"parts-short", Tuning{stageParts: true, shortStage: true, shortScatter: true}}} {
		tun := x.tun
		tun.NoInputReuse = true
		for k, tk := range []Tuning{tun, {NoInputReuse: true}} {
			set := c.set
			set.Engine = tuned(t, "cuda", tk)
			sv, err := ode.NewSolver(c.prob.Field, &set)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := sv.Grad(&gs[k], &c.prob, c.loss, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		sameGrads(t, x.name+" against the default staging", &gs[0], &gs[1])
	}
}
