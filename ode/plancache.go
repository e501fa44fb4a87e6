package ode

import (
	"sync"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Plans are cached per process. NewSolver traces the field every time (a
// Go function cannot be compared), but the plan it builds from the trace,
// the method's step programs, their continuous extension, the initial
// step's and the controller's programs (about 1 ms for Lorenz with Tsit5,
// seconds for a large network), depends only on the traced program and a
// few settings: planKey holds them. A Solver made again for a field and
// settings seen before (a fit.New per fitting run, a sweep that makes a
// Solver per call) shares the earlier plan, and the reverse programs it
// built on first use. Plans are never changed once built (their lazily
// built parts are behind sync.Once), so sharing one is safe; engines
// prepare an executor per Solver, and may share their own preparation of
// a plan between them (the CPU engine's programs, Plan.cpuMasters; the
// GPU engine's compiled kernels).
//
// Plans with events are not cached (their conditions and effects are
// traced from Go functions the key does not hold).

// planCacheMax bounds the number of cached plans; the oldest is dropped
// beyond it. 0 turns the cache off.
var planCacheMax = 32

// planKey is what newPlan reads of a field and its settings (defaults
// filled in).
type planKey struct {
	name                string // the field's name, which names the plan's programs
	field, jac          string // Hash of the traced field, and of its Jacobian where the method reads Jac
	dim, params, shared int
	method              Method
	saves               SaveMode
	dt0                 float64
	ctl                 Controller
	matrixFree          int // matrixFreeDim when the plan was built
}

type planEntry struct {
	key  planKey
	plan *Plan // its Field is the traced program the key's hash is of
}

var plans struct {
	sync.Mutex
	list []planEntry // oldest first
}

// planFor returns the plan of field f (traced as fp) for the settings s,
// from the cache where a plan of the same key and an equal traced program
// was built before, else newly built (and cached).
func planFor(f *Field, fp *tape.Program, s *Settings) (*Plan, error) {
	if planCacheMax <= 0 || len(s.Events) > 0 {
		return newPlan(f, fp, s)
	}
	key := planKey{
		name: f.name(), field: fp.Hash(), dim: f.Dim, params: f.Params, shared: f.Shared,
		method: s.Method, saves: s.Saves, dt0: s.Dt0, ctl: s.Controller, matrixFree: matrixFreeDim,
	}
	if f.Jac != nil && rosenbrockMethod(s.Method.Name()) {
		jp, err := jacobianProgram(f, fp)
		if err != nil {
			return newPlan(f, fp, s) // newPlan reports the error
		}
		key.jac = jp.Hash()
	}
	plans.Lock()
	for i := len(plans.list) - 1; i >= 0; i-- {
		if e := plans.list[i]; e.key == key && e.plan.Field.SameAs(fp) {
			plans.Unlock()
			return e.plan, nil
		}
	}
	plans.Unlock()
	pl, err := newPlan(f, fp, s)
	if err != nil {
		return nil, err
	}
	plans.Lock()
	defer plans.Unlock()
	if over := len(plans.list) + 1 - planCacheMax; over > 0 {
		plans.list = append(plans.list[:0], plans.list[over:]...)
	}
	plans.list = append(plans.list, planEntry{key, pl})
	return pl, nil
}
