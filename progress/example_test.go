package progress_test

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/progress"
)

// ExampleNew shows a fit's progress: a bar on a terminal, nothing when the
// output is a file or a pipe (here a buffer), so piped output stays clean.
func ExampleNew() {
	var out bytes.Buffer
	bar := progress.New(100, &progress.Settings{Writer: &out, Description: "fit"})
	for step := 1; step <= 100; step++ {
		bar.Report(step, 1/float64(step)) // a NaN loss would not be shown
	}
	bar.Finish()
	_, isNop := bar.(progress.Nop)
	fmt.Printf("not a terminal: nothing shown (%t), %d bytes written\n", isNop, out.Len())
	fmt.Println(progress.Describe("fit", 1.234e-5))
	// Output:
	// not a terminal: nothing shown (true), 0 bytes written
	// fit  loss 1.234e-05
}

// counter is a Reporter that keeps the last amount of work reported.
type counter struct {
	mu   sync.Mutex
	done int
}

func (c *counter) Report(done int, _ float64) { c.mu.Lock(); c.done = done; c.mu.Unlock() }
func (c *counter) Finish()                    {}

// ExampleSolveFunc reports an ensemble solve's progress, in trajectories,
// through ode.Settings.Progress (called from the executor's goroutines).
func ExampleSolveFunc() {
	pr, err := problems.ByName("lorenz")
	if err != nil {
		fmt.Println(err)
		return
	}
	y0, p := pr.Ensemble(1000)
	r := &counter{} // progress.New(1000, nil) shows a bar on a terminal
	sol, err := ode.Solve(ode.Problem{Field: pr.Field, N: 1000, Y0: y0, P: p, T1: pr.T1},
		&ode.Settings{Progress: progress.SolveFunc(r)})
	if err != nil {
		fmt.Println(err)
		return
	}
	r.Finish()
	fmt.Printf("%d of %d trajectories reported done\n", r.done, sol.N)
	// Output:
	// 1000 of 1000 trajectories reported done
}
