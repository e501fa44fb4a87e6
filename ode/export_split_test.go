package ode

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// splitSpyEngine runs the CPU engine's executor behind a wrapper, so that
// Method Auto cannot switch in place on it (it is not the CPU engine, as
// a GPU engine is not), and notes every job it runs: the split of Method
// Auto (auto_split.go) is tested on it without a GPU, its per-trajectory
// results the CPU engine's bit for bit.
type splitSpyEngine struct{}

// SpyJob is a job the "auto-split-test" engine ran: its operation, the
// method of its plan, its trajectories, whether it replayed a mesh, and
// the field evaluations of its record (all trajectories').
type SpyJob struct {
	Op         Op
	Method     string
	N          int
	Mesh       bool
	FieldEvals int
}

var (
	spyMu   sync.Mutex
	spyJobs []SpyJob
	spyTime atomic.Int64 // nanoseconds in the wrapped executor's Run
)

// SpyExecTime returns the time the "auto-split-test" and
// "auto-continue-test" engines spent in the CPU executor's Run since the
// last call, and resets it: a call's time less this is the time package
// ode spent around the jobs (Method Auto's host work).
func SpyExecTime() time.Duration {
	return time.Duration(spyTime.Swap(0))
}

// SplitSpyJobs returns the jobs the "auto-split-test" engine ran since
// the last call, and forgets them.
func SplitSpyJobs() []SpyJob {
	spyMu.Lock()
	defer spyMu.Unlock()
	j := spyJobs
	spyJobs = nil
	return j
}

func (splitSpyEngine) Name() string     { return "auto-split-test" }
func (splitSpyEngine) Available() error { return nil }
func (splitSpyEngine) Prepare(p *Plan) (Executor, error) {
	ex, err := cpuEngine{}.Prepare(p)
	return splitSpyExec{ex}, err
}

type splitSpyExec struct{ Executor }

func (e splitSpyExec) Run(ctx context.Context, j *Job) (*Result, error) {
	t0 := time.Now()
	res, err := e.Executor.Run(ctx, j)
	spyTime.Add(int64(time.Since(t0)))
	sj := SpyJob{Op: j.Op, Method: j.Plan.Method, N: j.N, Mesh: j.Mesh != nil}
	if res != nil {
		sj.FieldEvals = sum(res.Stats.FieldEvals)
	}
	spyMu.Lock()
	spyJobs = append(spyJobs, sj)
	spyMu.Unlock()
	return res, err
}

func init() {
	Register(splitSpyEngine{})
	Register(contSpyEngine{})
}

// contSpyEngine is splitSpyEngine ("auto-continue-test") with an executor
// that runs per-trajectory start times (StartTimesExecutor): Method Auto
// continues a stiff trajectory with Rodas5P from where its stiffness test
// fired on it (auto_continue.go), as on a GPU engine.
type contSpyEngine struct{}

func (contSpyEngine) Name() string     { return "auto-continue-test" }
func (contSpyEngine) Available() error { return nil }
func (contSpyEngine) Prepare(p *Plan) (Executor, error) {
	ex, err := cpuEngine{}.Prepare(p)
	return contSpyExec{splitSpyExec{ex}}, err
}

type contSpyExec struct{ splitSpyExec }

func (contSpyExec) StartTimes() bool { return true }
