package cuda

import (
	"sync"
	"testing"

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
