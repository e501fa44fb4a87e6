package cuda

import (
	"context"
	"fmt"
	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"sync"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
)

// The engines this package registers with package ode: "cuda" runs in
// float64 on GPU 0, "cuda-f32" in float32. Importing the package (a blank
// import is enough) registers them; nothing is loaded until one is asked
// whether it is available or prepares a plan.
func init() {
	for _, e := range registered {
		ode.Register(e)
	}
}

// registered are the engines the package registers.
var registered = []*Engine{NewEngine("cuda", 0, Float64), NewEngine("cuda-f32", 0, Float32)}

var (
	_ ode.Engine      = (*Engine)(nil)
	_ ode.Engine      = (*MultiEngine)(nil)
	_ ode.EventEngine = (*Engine)(nil)
	_ ode.EventEngine = (*MultiEngine)(nil)
	_ ode.Executor    = (*executor)(nil)
	_ ode.Executor    = (*multiExecutor)(nil)

	_ ode.StartTimesExecutor = (*executor)(nil)
	_ ode.StartTimesExecutor = (*multiExecutor)(nil)
)

// Engine is the GPU engine: an ode.Engine that runs whole adaptive solves,
// records, replays, losses and gradients on one GPU, with kernels
// generated from the plan's programs in the layout chosen per job (a
// thread, a warp or a warp per tile of trajectories: see the package doc
// and Tuning). It opens its device on first use and holds it for the
// life of the process; engines of different GPUs are independent.
//
// Results match the CPU engine's: the same accepted and rejected steps on
// every trajectory (the controller is the same program, compiled without
// contraction into fused multiply-adds), states and gradients within
// rounding (the device's libm and the order of the shared-gradient sum
// differ in the last bits; a step-size decision at the edge of rounding
// can then, rarely, go the other way). Ensembles larger than the device
// memory (or than Settings.MemoryLimit, which caps the device memory of
// one launch) are run in chunks of trajectories; a record whose buffer
// proves too short is rerun for the trajectories that need more room. A
// gradient keeps every state before an accepted step on the device
// (Settings.Checkpoint does not apply); it reports its whole time as
// GradTime (the record and the adjoint are one launch).
type Engine struct {
	name    string
	ordinal int
	prec    Precision
	tuningSlot

	mu  sync.Mutex
	be  backend
	err error
}

// NewEngine returns an engine called name that runs on GPU ordinal in
// precision prec. Register it with ode.Register to make it available to
// ode.Settings.Engine. It opens nothing until it is used.
func NewEngine(name string, ordinal int, prec Precision) *Engine {
	return &Engine{name: name, ordinal: ordinal, prec: prec}
}

// Name returns the engine's name.
func (e *Engine) Name() string { return e.name }

// SupportsEvents reports that the engine runs problems with events
// (ode.Settings.Events), in either precision: Solve, Record, Replay, Loss
// and Grad, with save times and on given meshes (Mesh.Events), as the CPU
// engine runs them, in the thread layout (one thread per trajectory,
// whatever the Tuning asks). In float32 ("cuda-f32") the event times are
// located to the float32 rounding of the solution: within a few float32
// ulps of the span where the CPU engine's steps are exact, and within the
// tolerances' error of the CPU's otherwise (see the package doc).
func (e *Engine) SupportsEvents() bool { return true }

// Available returns nil if the engine's GPU and NVRTC are present, else
// an error wrapping ErrNoGPU or ErrNoNVRTC. It loads the driver and NVRTC
// (once per process) but opens no device.
func (e *Engine) Available() error {
	e.mu.Lock()
	be := e.be
	e.mu.Unlock()
	if be != nil {
		return nil
	}
	n, err := driver.DeviceCount()
	if err != nil {
		return err
	}
	if e.ordinal >= n {
		return fmt.Errorf("cuda: %w: device %d requested, %d present", driver.ErrNoGPU, e.ordinal, n)
	}
	err = driver.LoadNVRTC()
	return err
}

// backend opens the engine's device on first use.
func (e *Engine) backend() (backend, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.be != nil || e.err != nil {
		return e.be, e.err
	}
	if err := e.available(); err != nil {
		e.err = err
		return nil, err
	}
	d, err := driver.Open(e.ordinal)
	if err != nil {
		e.err = err
		return nil, err
	}
	e.be = newGPUBackend(d)
	return e.be, nil
}

func (e *Engine) available() error {
	if err := driver.LoadNVRTC(); err != nil {
		return err
	}
	_, err := driver.DeviceCount()
	return err
}

// Prepare opens the device (on first use) and returns the executor of the
// plan. Kernels are generated and compiled on first use of each kind of
// operation (forward solve, record, loss, gradient, with or without a
// mesh, per number of save times and per loss), and cached on disk. In
// float64, unless Tuning.WaitForCompile, the calls that need a kernel
// whose compile is long run on the CPU engine while it compiles in the
// background (the package doc's "First calls").
func (e *Engine) Prepare(pl *ode.Plan) (ode.Executor, error) {
	tun := e.tuningOf()
	if err := tun.check(); err != nil {
		return nil, err
	}
	be, err := e.backend()
	if err != nil {
		return nil, err
	}
	ex := newExecutor(be, pl, e.prec, e.name, tun)
	ex.keepMesh = true
	ex.tier = e.prec == Float64 && !tun.WaitForCompile
	return ex, nil
}

// tuningSlot holds an engine's Tuning: the environment's (envTuning)
// until SetTuning sets one.
type tuningSlot struct {
	mu     sync.Mutex
	tuning *Tuning
}

// SetTuning sets the engine's Tuning for the plans it prepares from now
// on (by default the environment's: see Tuning).
func (t *tuningSlot) SetTuning(tun Tuning) {
	t.mu.Lock()
	t.tuning = &tun
	t.mu.Unlock()
}

// tuningOf returns the Tuning plans are prepared with now.
func (t *tuningSlot) tuningOf() Tuning {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tuning != nil {
		return *t.tuning
	}
	return envTuning()
}

// Trace receives what the GPU engine did in the operations run with a
// context made by WithTrace (see TraceStats). The engine adds to it; it is
// safe for concurrent use.
type Trace struct {
	mu sync.Mutex
	s  TraceStats
}

// TraceStats are the counts of a Trace.
type TraceStats struct {
	// Kernel is the device time of the kernels (CUDA events: no
	// transfers, no host work). A training step's (ode.Trainer.Eval) is
	// its engine kernel's, or with the trainer's graphs (the default;
	// Tuning.NoTrainGraph) its evaluation graph's: the engine kernel, the
	// reductions after it (a few microseconds) and the summary's 48-byte
	// copy.
	Kernel time.Duration
	// Compile is the time of generating and compiling kernels (their
	// first use). A compile in the background (the package doc's "First
	// calls") adds its time when it ends, to the trace of the call that
	// started it.
	Compile time.Duration
	// OnCPU counts the operations run on the CPU engine while their
	// kernel compiled in the background (the package doc's "First
	// calls"); their results are the CPU engine's, and make no launches.
	OnCPU int
	// CPUStopped counts the operations whose run on the CPU engine was
	// stopped, or its result dropped, because their kernel was to run on
	// the device after all: its compile ended well first, or its source,
	// written meanwhile, turned out short or cached (the package doc's
	// "First calls"). Their results are the device's.
	CPUStopped int
	Upload     int64 // bytes copied to the device
	// Reused is the bytes of inputs not copied to the device because the
	// arena held them, the same values, from the launch before (Y0, P,
	// T1s, … each compared with the engine's copy of what it sent:
	// Tuning.NoInputReuse); not in Upload.
	Reused int64
	// Ahead counts the launches that ran ahead of their inputs' compare
	// (a repeated call's launch whose inputs were the same at their last
	// compare: the compare ran on the host as the batch ran on the
	// device; see reuse.go), AheadMissed those of
	// them whose inputs had changed in place: their results were
	// dropped and they ran again, their inputs staged.
	Ahead, AheadMissed int
	Download           int64         // bytes copied back
	Launches           int           // kernel launches (one per chunk of trajectories and pass)
	Trajectories       int           // trajectories launched, summed over the launches (Method Auto's continuations, chunks and reruns count again; a training step's launches do not)
	Reruns             int           // trajectories run again with a longer record buffer
	Rows               int           // record buffer rows of the last pass
	Transfer           time.Duration // copies between host and device (synchronous: part of a call's wall time)
	// Stage is the host's time before each launch's batch: its inputs
	// compared with those the device holds and staged where they
	// changed, its staging buffers and timers taken. Scatter is the
	// host's time writing a launch's results into the caller's arrays
	// after the batch; where the results come back in chunks it runs
	// from the batch's start, overlapping the copies and kernels (and
	// the staging of chunks staged as the batch runs), and where they
	// come back in two parts from the first part's arrival, overlapping
	// the second's copy. A call's
	// wall time less Kernel, Transfer, Stage and Scatter is the rest of
	// its host work (package ode's checks and results, the driver's
	// calls, synchronisation).
	Stage, Scatter time.Duration
	// Batch is the host's wall time in the launches' batches (the
	// queue's driver calls and its waits for the device: Batch less
	// Kernel and Transfer is the driver's calls, the device's memsets,
	// small kernels and gaps), AheadWait the time a launch run ahead of
	// its inputs' compare (Ahead) spent on the compare past its kernel:
	// where the compare runs in the batch (reuse.go's aheadCheck), its
	// time less the kernel's (in Batch), and, on a goroutine of its own
	// (a kept gradient's), the wait for it once the batch had returned
	// (0 where either ended first; a launch whose results come back in
	// chunks or parts compares on its own goroutine as the batch runs,
	// within Scatter, which starts with the batch). A one-batch call's
	// wall time less Stage, Batch and Scatter (and AheadWait, where the
	// compare ran apart) is package ode's and the executor's work outside
	// the launches.
	Batch, AheadWait time.Duration
	SavesKept        int64 // bytes of saved states left in device memory (ode.Settings.KeepSaves), not copied back
	// PartsFailed counts the kernels compiled in parts
	// (Tuning.SplitUnits) whose parts failed to compile or link, and
	// which were compiled as one unit instead (the call went on);
	// PartsError is the last such failure's message.
	PartsFailed int
	PartsError  string
	// Layout is the kernel layout of the last launch: "thread" (one
	// thread per trajectory), "lanes" (one warp per trajectory, the
	// network's weights in shared memory), "lanes-global" (in global
	// memory, each warp's accumulator there too) or "lanes-global-block"
	// (a block's warps share an accumulator); see the package doc.
	Layout string
}

// Stats returns the trace's counts.
func (t *Trace) Stats() TraceStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.s
}

// Reset sets the trace's counts to zero.
func (t *Trace) Reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.s = TraceStats{}
}

func (t *Trace) add(f func(s *TraceStats)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	f(&t.s)
	t.mu.Unlock()
}

type traceKey struct{}

// WithTrace returns a context that makes the GPU engine add what it does
// to t (as net/http/httptrace does for requests). Pass it to the Context
// methods of ode.Solver.
func WithTrace(ctx context.Context, t *Trace) context.Context {
	return context.WithValue(ctx, traceKey{}, t)
}

func traceOf(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}
