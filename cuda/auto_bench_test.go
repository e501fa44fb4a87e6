package cuda

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/cputime"
	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
)

// BenchmarkGPUAuto is Method Auto's benchmark (odetest.Auto: Auto against
// Tsit5 and Rodas5P alone, Solve and Grad, on non-stiff, stiff and mixed
// ensembles) on the GPU engine at n = 16384, where Auto runs the Tsit5
// pass, stops each trajectory whose stiffness test fires and continues
// those with Rodas5P from where it fired (ode/auto_continue.go). Its
// Auto-cuda-restart rows are Auto on the same engine behind a wrapper
// without per-trajectory start times (restartEngine), which runs the
// stiff trajectories again from T0 instead, as before issue 25: the two
// side by side in one run. The target: Auto within 1.5× of the better of
// Tsit5 and Rodas5P alone. It skips without a GPU.
//
//	cuda.test -test.run '^$' -test.bench GPUAuto -test.benchtime 5x -test.count 3
func BenchmarkGPUAuto(b *testing.B) {
	needGPUEngine(b)
	odetest.Auto(b, 16384, "cuda", restartEngine(registered[0]))
}

// restartEngine registers (once) and returns the name of an engine that
// runs e behind an executor without StartTimes
// (ode.StartTimesExecutor), "<e's name>-restart": Method Auto there runs
// the stiff trajectories again from T0 with Rodas5P. It shares e's
// device and kernels.
func restartEngine(e *Engine) string {
	name := e.Name() + "-restart"
	restartMu.Lock()
	defer restartMu.Unlock()
	if !restartDone[name] {
		ode.Register(restartWrap{e, name})
		restartDone[name] = true
	}
	return name
}

var (
	restartMu   sync.Mutex
	restartDone = map[string]bool{}
)

type restartWrap struct {
	*Engine
	name string
}

func (e restartWrap) Name() string { return e.name }

func (e restartWrap) Prepare(p *ode.Plan) (ode.Executor, error) {
	ex, err := e.Engine.Prepare(p)
	if err != nil {
		return nil, err
	}
	return restartExec{ex}, nil
}

// restartExec hides the executor's StartTimes (and its other optional
// methods: package ode then checks the inputs itself).
type restartExec struct{ ode.Executor }

// BenchmarkGPUAutoTrace splits the time of Method Auto's Grad and Solve
// (and of Rodas5P's alone) on the GPU engine at n = 16384, on
// odetest.AutoCases' stiff and mixed ensembles, with a Trace: the
// kernels' device time (kernel-ms/op), the copies between host and
// device (transfer-ms/op, MB-up/op, MB-down/op) and the rest of the call
// (host-ms/op: package ode's work between the launches and the engine's
// staging), which issue 25's gap between Auto and Rodas5P is in; of it,
// stage-ms/op and scatter-ms/op are the engine's staging before its
// launches and its writing of their results (TraceStats.Stage, Scatter),
// the rest package ode's work, the driver's calls and the waits. It
// skips without a GPU.
//
//	cuda.test -test.run '^$' -test.bench GPUAutoTrace -test.benchtime 5x
func BenchmarkGPUAutoTrace(b *testing.B) {
	needGPUEngine(b)
	autoTrace(b, 16384, "cuda", nil)
}

// autoRun returns a call (op "grad": the gradient of ode.SumSquares,
// else a solve) of problem p with method m (rtol 1e-6, atol 1e-9) on
// engine, traced into tr, after one untimed call (tr reset).
func autoRun(b *testing.B, p ode.Problem, op string, m ode.Method, engine string, tr *Trace) func() error {
	b.Helper()
	sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: m, RelTol: 1e-6, AbsTol: 1e-9, Engine: engine})
	if err != nil {
		b.Fatal(err)
	}
	var g ode.Gradient
	ctx := WithTrace(context.Background(), tr)
	run := func() error {
		if op == "solve" {
			_, err := sv.SolveContext(ctx, &p)
			return err
		}
		_, err := sv.GradContext(ctx, &g, &p, ode.SumSquares(), nil)
		return err
	}
	if err := run(); err != nil {
		b.Fatal(err)
	}
	tr.Reset()
	return run
}

// autoTrace runs BenchmarkGPUAutoTrace's cases at n trajectories on
// engine. hb, if not nil, is the engine's host backend: host-ms/op is
// then the wall time less the time hb spent in launches (kernels and
// their staging) and the transfers, not less the kernels' time alone,
// and dev-allocs/op and pinned-allocs/op count the device and staging
// ("page-locked") allocations, which cost far more on a GPU than here.
func autoTrace(b *testing.B, n int, engine string, hb *hostBackend) {
	for _, c := range odetest.AutoCases(n) {
		if c.Name == "vdp" {
			continue
		}
		for _, op := range []string{"grad", "solve"} {
			for _, m := range []ode.Method{ode.Rodas5P, ode.Auto} {
				b.Run(c.Name+"/"+op+"/"+m.Name(), func(b *testing.B) {
					var tr Trace
					run := autoRun(b, c.P, op, m, engine, &tr)
					b.ResetTimer()
					c0 := hb.counts()
					t0, cpu0 := time.Now(), cputime.Process()
					for range b.N {
						if err := run(); err != nil {
							b.Fatal(err)
						}
					}
					wall, cpu, st, per := time.Since(t0), cputime.Process()-cpu0, tr.Stats(), float64(b.N)
					ms := func(d time.Duration) float64 { return float64(d) / 1e6 / per }
					launches := st.Kernel
					if hb != nil {
						c := hb.counts()
						launches = c.spent - c0.spent
						if cpu > 0 {
							// The process's CPU time less its launches'
							// (the kernels' processes are not its own):
							// the host work without the time other
							// processes on the machine's cores take.
							b.ReportMetric(ms(cpu-(c.spentCPU-c0.spentCPU)), "host-cpu-ms/op")
						}
						b.ReportMetric(float64(c.allocs-c0.allocs)/per, "dev-allocs/op")
						b.ReportMetric(float64(c.pinned-c0.pinned)/per, "pinned-allocs/op")
					}
					b.ReportMetric(ms(st.Kernel), "kernel-ms/op")
					b.ReportMetric(ms(st.Transfer), "transfer-ms/op")
					b.ReportMetric(ms(wall-launches-st.Transfer), "host-ms/op")
					// Of the host work, the engine's staging before its
					// launches and its scatter of their results (TraceStats).
					b.ReportMetric(ms(st.Stage), "stage-ms/op")
					b.ReportMetric(ms(st.Scatter), "scatter-ms/op")
					b.ReportMetric(float64(st.Upload)/1e6/per, "MB-up/op")
					b.ReportMetric(float64(st.Download)/1e6/per, "MB-down/op")
					b.ReportMetric(float64(st.Launches)/per, "launches/op")
				})
			}
		}
	}
}

// BenchmarkHostAutoTrace is BenchmarkGPUAutoTrace on the host backend
// (the kernels run as host C++ compiled with -O2, each launch once: a
// launch seen before, the same kernel on the same memory, writes its
// result again from a memo), at n = 4096: its
// host-ms/op is the work of the call outside the launches and the
// host-to-"device" copies (package ode's between the segments, the
// engine's staging), which is the device benchmark's host-ms/op, on this
// machine's cores; the launches' own staging by the host backend (files,
// copies of the arena) is taken out with them. host-cpu-ms/op is the
// same work as the process's CPU time (less the launches' own, read on
// their thread): on a machine whose cores other processes share, whose
// wall time they inflate, it is the figure to compare, with
// -test.benchmem's B/op and allocs/op (the launches' are a few small
// ones). It skips where g++ is missing.
//
//	cuda.test -test.run '^$' -test.bench HostAutoTrace -test.benchtime 20x -test.cpu 1 -test.benchmem
func BenchmarkHostAutoTrace(b *testing.B) {
	needHost(b)
	benchHostOnce.Do(func() {
		benchHost = newBenchHost("cuda-host-o2")
		ode.Register(benchHost)
	})
	autoTrace(b, 4096, benchHost.Name(), benchHost.be.(*hostBackend))
}

// hostCounts are a host backend's running counts (hostBackend.counts).
type hostCounts struct {
	spent, spentCPU time.Duration // hostBackend.spent, spentCPU
	allocs, pinned  int           // device allocations and hostAlloc's
}

// counts returns b's running counts (zero for a nil b).
func (b *hostBackend) counts() hostCounts {
	if b == nil {
		return hostCounts{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return hostCounts{b.spent, b.spentCPU, int(b.next), b.hostGets}
}

// benchHost is BenchmarkHostAutoTrace's engine, registered at its first
// run: cuda-host with kernels compiled with -O2 and memoized launches.
var (
	benchHostOnce sync.Once
	benchHost     *Engine
)

// BenchmarkHostAutoOde splits the host work of Method Auto's Grad and
// Solve (and of Rodas5P's alone) on the host backend
// (BenchmarkHostAutoTrace's engine) at n = 16384 on odetest.AutoCases'
// Robertson and stiff van der Pol ensembles between package ode and the
// engine: ode-ms/op is the wall time outside the executor's jobs
// (Executor.Run: package ode's checks, Method Auto's split, segments and
// merges, the Gradient's copies), ode-cpu-ms/op the process's CPU time
// there (all its goroutines'), eng-host-ms/op the jobs' wall time less
// the host backend's launches and the transfers (the engine's host work:
// staging, scatter, the driver's calls), and jobs/op the jobs run. Its
// ode-ms/op is the figure the device's host work shares with this
// machine, whose cores it runs on (-test.cpu 1,2, …), where no gather
// runs (Robertson: every trajectory stops); where one does (the stiff van
// der Pol ensemble) it includes the host backend's staging of the gather
// around its launch (its memory's copies), which a device does not have:
// 19–23 ms there, against about 3 ms of package ode's own. It skips where g++ is missing.
//
//	cuda.test -test.run '^$' -test.bench HostAutoOde -test.benchtime 5x -test.cpu 1,2 -test.benchmem
func BenchmarkHostAutoOde(b *testing.B) {
	needHost(b)
	timedHostOnce.Do(func() {
		timedHost.e = newBenchHost("cuda-host-o2-timed")
		ode.Register(timedEngine{timedHost.e, &timedHost})
	})
	hb := timedHost.e.be.(*hostBackend)
	for _, c := range odetest.AutoCases(16384) {
		if c.Name != "robertson" && c.Name != "vdp-stiff" {
			continue
		}
		for _, op := range []string{"grad", "solve"} {
			for _, m := range []ode.Method{ode.Rodas5P, ode.Auto} {
				b.Run(c.Name+"/"+op+"/"+m.Name(), func(b *testing.B) {
					var tr Trace
					run := autoRun(b, c.P, op, m, timedHost.e.Name(), &tr)
					timedHost.take()
					c0 := hb.counts()
					b.ResetTimer()
					t0, cpu0 := time.Now(), cputime.Process()
					for range b.N {
						if err := run(); err != nil {
							b.Fatal(err)
						}
					}
					wall, cpu := time.Since(t0), cputime.Process()-cpu0
					b.StopTimer()
					in := timedHost.take()
					c := hb.counts()
					// The launches outside the jobs: the mesh columns'
					// gathers (ColumnSteps), a kernel on a device.
					out, outCPU := c.spent-c0.spent-in.spent, c.spentCPU-c0.spentCPU-in.spentCPU
					per := float64(b.N)
					ms := func(d time.Duration) float64 { return float64(d) / 1e6 / per }
					b.ReportMetric(ms(wall-in.wall-out), "ode-ms/op")
					if cpu > 0 {
						b.ReportMetric(ms(cpu-in.cpu-outCPU), "ode-cpu-ms/op")
					}
					b.ReportMetric(ms(in.wall-in.spent-tr.Stats().Transfer), "eng-host-ms/op")
					b.ReportMetric(float64(in.jobs)/per, "jobs/op")
				})
			}
		}
	}
}

// newBenchHost returns a host engine called name (not registered) as
// BenchmarkHostAutoTrace's: kernels compiled with -O2, launches memoized.
func newBenchHost(name string) *Engine {
	e := &Engine{name: name, prec: Float64, be: newHostBackend(1 << 30)}
	be := e.be.(*hostBackend)
	be.optimize, be.memo = true, map[[32]byte]hostMemo{}
	tun := envTuning()
	tun.WaitForCompile = true
	e.SetTuning(tun)
	return e
}

// jobTimes are the running times and count of the jobs of a
// timedEngine's executors, on a host backend.
type jobTimes struct {
	e  *Engine // the engine timed
	mu sync.Mutex
	jobCounts
}

// jobCounts are jobTimes's counts: the jobs' wall time and process CPU
// time, the host backend's launches' in them (hostBackend.spent,
// spentCPU), and the jobs.
type jobCounts struct {
	wall, cpu, spent, spentCPU time.Duration
	jobs                       int
}

// take returns the counts and sets them to zero.
func (s *jobTimes) take() jobCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.jobCounts
	s.jobCounts = jobCounts{}
	return c
}

var (
	timedHostOnce sync.Once
	timedHost     jobTimes
)

// timedEngine is the engine e (its name too, which its resident meshes
// carry) whose executors are e's, their optional methods too, with Run
// timed into t.
type timedEngine struct {
	*Engine
	t *jobTimes
}

func (e timedEngine) Prepare(p *ode.Plan) (ode.Executor, error) {
	ex, err := e.Engine.Prepare(p)
	if err != nil {
		return nil, err
	}
	return timedExec{ex.(*executor), e.t}, nil
}

// timedExec is an executor with its Run timed (timedEngine).
type timedExec struct {
	*executor
	t *jobTimes
}

func (x timedExec) Run(ctx context.Context, j *ode.Job) (*ode.Result, error) {
	hb, _ := x.be.(*hostBackend)
	h0, t0, c0 := hb.counts(), time.Now(), cputime.Process()
	r, err := x.executor.Run(ctx, j)
	dt, dc, h := time.Since(t0), cputime.Process()-c0, hb.counts()
	x.t.mu.Lock()
	x.t.wall += dt
	x.t.cpu += dc
	x.t.spent += h.spent - h0.spent
	x.t.spentCPU += h.spentCPU - h0.spentCPU
	x.t.jobs++
	x.t.mu.Unlock()
	return r, err
}
