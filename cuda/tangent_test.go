package cuda

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
)

// tangentBackend is countsBackend whose gradient kernels also set the
// flag of a tangential event crossing (flagTangent, events.cuh) for the
// launch trajectories in mark: scatter's search for the first one (in
// the strips of consecutive launches, or trajectory by trajectory) is
// tested without a crossing whose condition has derivative exactly 0.
type tangentBackend struct {
	countsBackend
	mu   *sync.Mutex
	mark *[]int
}

func (b tangentBackend) batch(f func(q queue) error) error {
	return f(tangentQueue{countsQueue{hostQueue{b.hostBackend}}, b})
}

type tangentQueue struct {
	countsQueue
	b tangentBackend
}

func (q tangentQueue) enqueue(k backendKernel, threads, block, shmem int, args []uint64) error {
	if err := q.countsQueue.enqueue(k, threads, block, shmem, args); err != nil || len(args) == numSavesWords || args[argFlags] == 0 || args[argGY0] == 0 {
		return err
	}
	m, _, off := q.b.at(args[argFlags])
	q.b.mu.Lock()
	defer q.b.mu.Unlock()
	for _, i := range *q.b.mark {
		if uint64(i) >= args[argFirst] && uint64(i) < args[argEnd] {
			m[off+4*uint64(i)] |= flagTangent
		}
	}
	return nil
}

var (
	tangentOnce    sync.Once
	tangentMu      sync.Mutex
	tangentMarks   []int
	tangentEngines = []string{"cuda-tangent", "cuda-tangent-generic"}
)

// tangentEngine registers the engines of TestHostTangentFlags (the
// default loops and Tuning.generic's) on one tangentBackend.
func tangentEngine() {
	tangentOnce.Do(func() {
		be := tangentBackend{countsBackend{newHostBackend(4 << 30)}, &tangentMu, &tangentMarks}
		for k, name := range tangentEngines {
			e := &Engine{name: name, prec: Float64, be: be}
			e.SetTuning(Tuning{generic: k == 1})
			ode.Register(e)
		}
	})
}

// TestHostTangentFlags checks that a gradient with events whose kernel
// flags a tangential crossing (flagTangent) fails with the error that
// names the first flagged trajectory, wherever it lies in the result
// blocks and strips (scatterStatus) and with the general loops
// (Tuning.generic), and that a call without a flag, before and after on
// the same Gradient, succeeds.
func TestHostTangentFlags(t *testing.T) {
	tangentEngine()
	const n = 3*statusStrip + 100 // strips and blocks, the last ones short
	for _, eng := range tangentEngines {
		for _, marks := range [][]int{nil, {0}, {n - 1}, {statusStrip + 7, 2}, {n - 50, statusStrip * 2}, nil} {
			t.Run(fmt.Sprintf("%s/%v", eng, marks), func(t *testing.T) {
				c := ballCase(n, ode.Tsit5)
				c.set.RelTol, c.set.AbsTol, c.set.Engine = 1e-6, 1e-8, eng
				sv, err := ode.NewSolver(c.prob.Field, &c.set)
				if err != nil {
					t.Fatal(err)
				}
				tangentMu.Lock()
				tangentMarks = marks
				tangentMu.Unlock()
				defer func() {
					tangentMu.Lock()
					tangentMarks = nil
					tangentMu.Unlock()
				}()
				var g ode.Gradient
				_, err = sv.GradContext(context.Background(), &g, &c.prob, c.loss, nil)
				if len(marks) == 0 {
					if err != nil {
						t.Fatalf("no flag set: %v", err)
					}
					return
				}
				first := n
				for _, i := range marks {
					first = min(first, i)
				}
				want := fmt.Sprintf("trajectory %d: an event's condition has derivative 0", first)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("flags at %v: error %v, want one containing %q", marks, err, want)
				}
			})
		}
	}
}

// TestHostTraceHostTimes checks the host times a trace splits a call
// into (TraceStats.Stage and Scatter): both are counted and fit in the
// call's wall time, for a launch copied back at once (with the kernels'
// and copies' times) and for one whose results come back in chunks
// (Tuning.pipeChunk: a kernel per chunk, the scatter beside them).
func TestHostTraceHostTimes(t *testing.T) {
	needHost(t)
	for _, tun := range []Tuning{{}, {pipeChunk: 1024}} {
		c := lorenzCallCase(4096)
		c.set.Engine = tuned(t, hostF64.name, tun)
		sv := c.solver(t, c.set.Engine)
		var g ode.Gradient
		if _, err := sv.Grad(&g, &c.prob, c.loss, nil); err != nil { // compiled, storage taken
			t.Fatal(err)
		}
		var tr Trace
		start := time.Now()
		if _, err := sv.GradContext(WithTrace(context.Background(), &tr), &g, &c.prob, c.loss, nil); err != nil {
			t.Fatal(err)
		}
		wall := time.Since(start)
		s := tr.Stats()
		// In chunks the scatter overlaps the kernels and copies.
		chunks := tun.pipeChunk > 0
		device := s.Kernel + s.Transfer
		if chunks {
			device = 0
		}
		if s.Stage <= 0 || s.Scatter <= 0 || s.Stage+s.Scatter+device > wall || chunks != (s.Launches > 1) {
			t.Errorf("pipeChunk %d: %d launches, stage %v, scatter %v, kernels %v, copies %v: want stage and scatter > 0, within the call's %v (with the kernels and copies, in one launch)",
				tun.pipeChunk, s.Launches, s.Stage, s.Scatter, s.Kernel, s.Transfer, wall)
		}
	}
}
