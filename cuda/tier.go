package cuda

import (
	"context"
	"errors"
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
// so (ode.Result.Engine "cpu", TraceStats.OnCPU).
//
// The CPU engine starts at once: the kernel's source, which takes a
// fraction of a second to write (0.2-0.8 s for Rodas5P gradients of
// 300-460 kB on a 2-core VM), is generated in that goroutine too
// (generate), and only then is its size known and the disk cache asked.
// A call whose kernel turns out short, cached or unwritable stops its
// CPU run and runs on the device, as it would have without tiers (its
// CPU result, if it came first, is dropped), so the threshold means what
// it did: a first call's results are the device's unless its compile is
// long.
//
// The CPU run and the compile race (runTiered): where the compile ends
// well while the CPU engine still works on the call, the CPU run is
// stopped (through its context, which the CPU engine reads between
// chunks of trajectories) and the call runs on the device, its results
// the device's (TraceStats.CPUStopped counts such calls). The CPU run
// writes into arrays of its own, not the caller's (ode.Job.Reuse), so a
// stopped run leaves nothing in the caller's slices; a call whose CPU run
// finishes first returns it. A call's Settings.Progress may count its
// trajectories twice, on the CPU engine and then on the device.
//
// The calls that arrive while the compile runs do the same; the first
// that arrives after it has ended runs on the device. A compile is
// started once (the kernel set's entry holds it); a call that must wait
// for it (a training step's, cuda-multi's, Tuning.WaitForCompile's)
// waits, or returns ctx.Err() where its context ends first. A compile
// that fails is remembered as failed, as it was before: the calls running
// on the CPU engine meanwhile finish there, and the first call after its
// end returns its error, as a call that compiled it itself would have. A
// call whose own context ends returns ctx.Err(), with nothing written.
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

// errOnDevice is the cause with which runTiered stops a call's run on
// the CPU engine where the call is to run on the device after all.
var errOnDevice = errors.New("cuda: the call's kernel is ready: it runs on the device")

// runTiered runs job j on the CPU engine if its kernel's compile is long
// and has not ended, starting the generation of its source, and its
// compile, in the background if no call has. It returns served false,
// with the job's kernel configuration, where the job is to run on the
// device: its kernel is compiled or failed, or its compile is short or
// cached (runJob compiles it, or reports the failure), or its compile
// ended well before the CPU engine's run did (the run is stopped and its
// result dropped). A CPU run's error, as its result, stands only where
// the compile is long; the caller's context's end returns at once.
//
// Where the kernel's configuration waits for the wide layout's measure
// (layout; the first call of a plan with a large state), that is
// computed in the background too, and the CPU engine starts at once.
func (ex *executor) runTiered(ctx context.Context, j *ode.Job) (res *ode.Result, v kernelgen.Config, served bool, err error) {
	tr := traceOf(ctx)
	cfg := kernelgen.ConfigOf(j)
	// A mesh whose steps are in device memory comes to the host for the
	// CPU engine (Mesh.Host, which releases the device's copy): a call
	// that replays one runs on the CPU engine only once its kernel is
	// known to compile long, as before the race.
	resident := j.Mesh != nil && j.Mesh.Resident != nil
	v, known := ex.layout(cfg, j.N, j.Loss, resident)
	var e *kernelEntry
	if known {
		if (v.Loss || v.Grad) && j.Loss == nil {
			return nil, v, false, nil // (prepare's error)
		}
		if e = ex.entry(v); e.ready() {
			return nil, v, false, nil
		}
		if resident {
			_ = ex.source(e, v, j.Loss, tr, true) // (its error: prepare's)
		} else {
			ex.generate(e, v, j.Loss, tr)
		}
		if e.onDevice() {
			return nil, v, false, nil
		}
	}
	cctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	k := &tierKernel{done: make(chan struct{})}
	defer k.finish()
	if known {
		k.v, k.e = v, e
		k.race(stop)
		close(k.done)
	} else {
		lp, n := lossPrograms(j.Loss), j.N
		compiling.Add(1)
		go func() {
			defer compiling.Done()
			defer close(k.done)
			k.v, _ = ex.layout(cfg, n, lp, true)
			if (k.v.Loss || k.v.Grad) && lp == nil {
				stop(errOnDevice) // (prepare's error)
				return
			}
			k.e = ex.entry(k.v)
			ex.generate(k.e, k.v, lp, tr)
			k.race(stop)
		}()
	}
	res, err = ex.runOnCPU(cctx, j)
	if err != nil && ctx.Err() != nil {
		return nil, v, true, err // the caller's context has ended
	}
	stopped := err != nil && errors.Is(err, context.Canceled) && context.Cause(cctx) == errOnDevice
	// The CPU engine's result, or error, stands where the compile is
	// long: a configuration or source still being written may yet say
	// otherwise.
	select {
	case <-k.done:
	case <-ctx.Done():
		return nil, v, true, ctx.Err()
	}
	if !stopped && k.e != nil {
		select {
		case <-k.e.srcDone:
		case <-ctx.Done():
			return nil, v, true, ctx.Err()
		}
		if k.e.srcErr == nil && k.e.long {
			if err != nil {
				return nil, k.v, true, err
			}
			tr.add(func(t *TraceStats) { t.OnCPU++ })
			return res, k.v, true, nil
		}
	}
	tr.add(func(t *TraceStats) { t.CPUStopped++ })
	return nil, k.v, false, nil
}

// tierKernel is the kernel a tiered call races (runTiered): its
// configuration v and entry e, set before done closes (e nil where the
// call is to run on the device), and the call's registration with e
// (kernelEntry.race), undone when the call returns (finish).
type tierKernel struct {
	done chan struct{}
	v    kernelgen.Config
	e    *kernelEntry

	mu   sync.Mutex
	over bool   // the call has returned
	end  func() // undoes the registration
}

// race registers the call's CPU run, stopped by stop, with k.e, unless
// the call has returned.
func (k *tierKernel) race(stop context.CancelCauseFunc) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.over {
		k.end = k.e.race(stop)
	}
}

// finish undoes the registration of the call, which has returned.
func (k *tierKernel) finish() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.over = true
	if k.end != nil {
		k.end()
	}
}

// lossPrograms returns a copy of lp without its data (nil for nil): what
// the background work of a call (kernel generation) reads of it, not
// holding the data the caller may write again once the call has
// returned.
func lossPrograms(lp *ode.LossPlan) *ode.LossPlan {
	if lp == nil {
		return nil
	}
	c := *lp
	c.Data = nil
	return &c
}

// generate starts, once, a goroutine (counted by compiling) that
// generates e's source, of configuration v with loss lp, and where its
// compile is long starts that in the background too (source): a tiered
// call runs on the CPU engine meanwhile, instead of waiting for the
// source.
func (ex *executor) generate(e *kernelEntry, v kernelgen.Config, lp *ode.LossPlan, tr *Trace) {
	e.genOnce.Do(func() {
		lp := lossPrograms(lp)
		compiling.Add(1)
		go func() {
			defer compiling.Done()
			_ = ex.source(e, v, lp, tr, true) // (its error is the entry's: the call that runs on the device reports it)
		}()
	})
}

// onDevice reports whether the calls that need e are to run on the
// device: its source is written and short, cached or failed (such a call
// runs on the device, as without tiers), or its compile has ended well.
func (e *kernelEntry) onDevice() bool {
	select {
	case <-e.srcDone:
	default:
		return false
	}
	if e.srcErr != nil || !e.long {
		return true
	}
	select {
	case <-e.done:
		return e.err == nil
	default:
		return false
	}
}

// cpuRace is a call running on the CPU engine while its kernel is
// written or compiled (runTiered): stop ends that run.
type cpuRace struct{ stop context.CancelCauseFunc }

// race registers stop, to be called with errOnDevice once the calls that
// need e are to run on the device (onDevice; at once if they are
// already), and returns the function that unregisters it.
func (e *kernelEntry) race(stop context.CancelCauseFunc) (end func()) {
	r := &cpuRace{stop: stop}
	e.racesMu.Lock()
	if e.races == nil {
		e.races = make(map[*cpuRace]struct{})
	}
	e.races[r] = struct{}{}
	e.racesMu.Unlock()
	// After the registration: a change that notify missed is seen here.
	if e.onDevice() {
		stop(errOnDevice)
	}
	return func() {
		e.racesMu.Lock()
		delete(e.races, r)
		e.racesMu.Unlock()
	}
}

// notify stops the CPU runs of the calls racing e (race) if they are to
// run on the device. source and build call it once they have set e's
// fields.
func (e *kernelEntry) notify() {
	if !e.onDevice() {
		return
	}
	e.racesMu.Lock()
	defer e.racesMu.Unlock()
	for r := range e.races {
		r.stop(errOnDevice)
	}
}

// runOnCPU runs job j on the CPU engine's executor of the plan, into
// arrays of its own (not j.Reuse's: a run stopped part way leaves
// nothing in the caller's).
func (ex *executor) runOnCPU(ctx context.Context, j *ode.Job) (*ode.Result, error) {
	cpu := ode.CPU()
	ex.cpuOnce.Do(func() { ex.cpu, ex.cpuErr = cpu.Prepare(ex.plan) })
	if ex.cpuErr != nil {
		return nil, ex.cpuErr
	}
	if err := checkLeft(j); err != nil {
		return nil, err
	}
	own := *j
	own.Reuse = nil
	res, err := ex.cpu.Run(ctx, &own)
	if err != nil {
		return nil, err
	}
	res.Engine = cpu.Name()
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
