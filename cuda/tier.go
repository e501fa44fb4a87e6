package cuda

import (
	"context"
	"fmt"
	"sync"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/internal/finite"
	"github.com/gradsolve-go/gradsolve/ode"
)

// Tiered first calls (issue 26), as JIT runtimes run code in an
// interpreter while they compile it. NVRTC takes seconds to minutes on
// the largest kernels (bench/RESULTS.md, "First GPU call"). Where a call
// of the "cuda" engine needs a kernel that is neither in memory (the
// kernel set) nor in the disk cache, and whose source is at least
// Tuning.tierFrom() bytes long, the call starts the compile in a
// goroutine of its own and runs on the CPU engine's executor of the same
// plan, at the same settings: its results are the CPU engine's, and say
// so (ode.Result.Engine "cpu", TraceStats.OnCPU). The calls that arrive
// while the compile runs do the same; the first that arrives after it
// has ended runs on the device. A compile is started once (the kernel
// set's entry holds it); a call that must wait for it (a training
// step's, cuda-multi's, Tuning.WaitForCompile's) waits, or returns
// ctx.Err() where its context ends first. A compile that fails is
// remembered as failed, as it was before: the first call after its end
// returns its error, as a call that compiled it itself would have.
//
// Not tiered: the float32 engine (the CPU engine computes in float64, a
// different results contract), cuda-multi (runJob), the device trainer
// (ode.TrainExecutor: its kernels are the engine's, compiled in place).
// A compile cannot be stopped once NVRTC has it: its goroutine ends when
// the compile does, whatever the calls' contexts.

// defaultTierFrom is the source size, in bytes, from which a kernel's
// compile is long enough for its first calls to run on the CPU engine
// (Tuning.WaitForCompile). Measured on the H200 (NVRTC 13.0, session 31,
// TestGPUColdStart): Lorenz's Tsit5 gradient kernel (155 kB) compiled in
// 0.76 s, below it; the Rodas5P gradient kernels of Lorenz and Robertson
// (272-274 kB) took 2.9 s for a first call, the larger ones of Pollution,
// HIRES, Lorenz-96 and the Brusselator 11-95 s (session 33, H100), above.
const defaultTierFrom = 200_000

// tierFrom returns the source size from which compiles are tiered.
func (t Tuning) tierFrom() int {
	if t.tierMin > 0 {
		return t.tierMin
	}
	return defaultTierFrom
}

// compiling counts the compiles running in the background
// (WaitForCompiles).
var compiling backgroundCount

// backgroundCount counts work running in the background: Add before it
// starts, Done when it ends, Wait for none.
type backgroundCount struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n falls to 0
}

// Add counts a start.
func (c *backgroundCount) Add(k int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == 0 {
		c.idle = make(chan struct{})
	}
	c.n += k
}

// Done counts an end.
func (c *backgroundCount) Done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n == 0 {
		close(c.idle)
	}
}

// WaitContext returns once none runs, or ctx.Err() once ctx ends first.
func (c *backgroundCount) WaitContext(ctx context.Context) error {
	for {
		c.mu.Lock()
		n, idle := c.n, c.idle
		c.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Wait returns once none runs.
func (c *backgroundCount) Wait() { _ = c.WaitContext(context.Background()) }

// WaitForCompiles returns once no kernel compiles in the background (see
// the package doc's "First calls"), or ctx.Err() if ctx ends first: the
// calls made after it run on the device the kernels that the calls
// before it asked for. A benchmark calls it after its warm-up, so that
// its timed calls are the device's; a program that prefers its next
// calls' timings steady to its first results early may too. The
// compiles' times are in the traces of the calls that started them
// (TraceStats.Compile) once it returns.
func WaitForCompiles(ctx context.Context) error { return compiling.WaitContext(ctx) }

// runTiered runs job j on the CPU engine if its kernel's compile is long
// and has not ended, starting that compile in the background if no call
// has. It returns served false, with the job's kernel configuration,
// where the job is to run on the device: its kernel is compiled or
// failed, or its compile is short (runJob compiles it, or reports the
// failure).
func (ex *executor) runTiered(ctx context.Context, j *ode.Job) (res *ode.Result, v kernelgen.Config, served bool, err error) {
	v = ex.variant(j)
	if (v.Loss || v.Grad) && j.Loss == nil {
		return nil, v, false, nil // (prepare's error)
	}
	e := ex.entry(v)
	if e.ready() {
		return nil, v, false, nil
	}
	tr := traceOf(ctx)
	if ex.source(e, v, j.Loss, tr) != nil || !e.long {
		return nil, v, false, nil
	}
	ex.compile(e, true, tr)
	if e.ready() {
		return nil, v, false, nil
	}
	res, err = ex.runOnCPU(ctx, j)
	return res, v, true, err
}

// runOnCPU runs job j on the CPU engine's executor of the plan.
func (ex *executor) runOnCPU(ctx context.Context, j *ode.Job) (*ode.Result, error) {
	cpu := ode.CPU()
	ex.cpuOnce.Do(func() { ex.cpu, ex.cpuErr = cpu.Prepare(ex.plan) })
	if ex.cpuErr != nil {
		return nil, ex.cpuErr
	}
	if err := checkLeft(j); err != nil {
		return nil, err
	}
	res, err := ex.cpu.Run(ctx, j)
	if err != nil {
		return nil, err
	}
	res.Engine = cpu.Name()
	traceOf(ctx).add(func(t *TraceStats) { t.OnCPU++ })
	return res, nil
}

// checkLeft makes the checks of j's inputs that package ode left to the
// executor (Job.Checks, ode.CheckingExecutor), which the CPU executor
// does not make: it returns an error wrapping ode.ErrInput if one fails
// (package ode then finds the input and reports it).
func checkLeft(j *ode.Job) error {
	bad := false
	if j.Checks&ode.CheckFinite != 0 {
		// A single row (Y0Row, PRow) package ode checked itself.
		bad = j.Y0Row == nil && finite.First(j.Y0) >= 0 || j.PRow == nil && finite.First(j.P) >= 0
	}
	if m := j.Mesh; j.Checks&ode.CheckMeshLen != 0 && m != nil {
		for _, l := range m.Len {
			bad = bad || l < 0 || l > m.Rows
		}
	}
	if bad {
		return fmt.Errorf("cuda: %w", ode.ErrInput)
	}
	return nil
}
