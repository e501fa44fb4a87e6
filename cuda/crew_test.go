package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestCrewRun checks crew.run: every task runs exactly once, on the
// caller and the woken goroutines, over repeated runs (crews of 0, 1 and
// 3 goroutines, runs of 0 to 500 tasks); a second wake while a launch
// holds the crew is refused; a panic in a task is raised in run's caller
// and the crew runs again after it.
func TestCrewRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(47, 1))
	for _, n := range []int{0, 1, 3} {
		c := newCrew(n)
		for round := range 20 {
			tasks := rng.IntN(500)
			if !c.wake() {
				if n > 0 {
					t.Fatalf("crew of %d, round %d: wake refused", n, round)
				}
				continue
			}
			if c.wake() {
				t.Fatalf("crew of %d, round %d: a second wake taken", n, round)
			}
			counts := make([]atomic.Int32, tasks)
			c.run(tasks, func(k int) { counts[k].Add(1) })
			for k := range counts {
				if got := counts[k].Load(); got != 1 {
					t.Fatalf("crew of %d, round %d: task %d ran %d times", n, round, k, got)
				}
			}
		}
		if n > 0 {
			func() {
				defer func() {
					if p := recover(); p != "task 7" {
						t.Errorf("crew of %d: recovered %v, want the task's panic", n, p)
					}
				}()
				c.wake()
				c.run(50, func(k int) {
					if k == 7 {
						panic(fmt.Sprint("task ", k))
					}
				})
			}()
			if !c.wake() {
				t.Fatalf("crew of %d: wake refused after a panic", n)
			}
			c.release()
		}
		c.stop()
	}
}

// TestHostEngineCrew checks that result blocks run on the executor's
// crew (Tuning.crew: woken in the batch as the copy starts) give the
// results of the pool's bit for bit: the solve, the gradient with its
// record and on its mesh (sameRuns), a Gradient passed back twice, and a
// gradient with failures (a third of the trajectories past MaxSteps),
// with record buffers long enough and short (reruns).
func TestHostEngineCrew(t *testing.T) {
	needHost(t)
	c := lorenzCase(4096, 1e-4)
	for _, rows := range []int{0, 4} {
		t.Run(fmt.Sprintf("rows=%d", rows), func(t *testing.T) {
			tuns := []Tuning{{crew: true, firstRows: rows}, {firstRows: rows}}
			crewSv, plain := c.solver(t, tuned(t, "cuda-host", tuns[0])), c.solver(t, tuned(t, "cuda-host", tuns[1]))
			sameRuns(t, c, crewSv, plain)
			var gs [2]ode.Gradient
			for round := range 2 {
				for k, sv := range []*ode.Solver{crewSv, plain} {
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
			sameFailures(t, c, set, &p, "with the crew", [2]string{tuned(t, "cuda-host", tuns[0]), tuned(t, "cuda-host", tuns[1])})
		})
	}
}

// TestGPUCrew checks on the device that a Grad of 32,768 Lorenz
// trajectories (one copy back) whose result blocks run on the crew
// (Tuning.crew) gives the results of the pool's bit for bit, over two
// calls that pass their Gradients back. It skips without a GPU.
func TestGPUCrew(t *testing.T) {
	needGPUEngine(t)
	c := lorenzCallCase(1 << 15)
	crewSv, plain := c.solver(t, tuned(t, "cuda", Tuning{crew: true})), c.solver(t, "cuda")
	var gs [2]ode.Gradient
	for round := range 2 {
		for k, sv := range []*ode.Solver{crewSv, plain} {
			if _, err := sv.Grad(&gs[k], &c.prob, c.loss, nil); err != nil {
				t.Fatal(err)
			}
		}
		sameGrads(t, fmt.Sprintf("round %d", round), &gs[0], &gs[1])
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
