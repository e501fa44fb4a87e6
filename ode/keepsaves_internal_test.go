package ode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
)

// keepEngine is the CPU engine that keeps saved states "resident" where a
// job asks (Job.KeepSaves), as a GPU engine keeps them in device memory:
// its results' saves are heldSaves, and the Ys of a result are nil. It
// writes into the held saves of a result passed back (Job.Reuse) that are
// its own and large enough. Package ode's handling of resident saves is
// tested on it (keepsaves_test.go) without a GPU.
type keepEngine struct{}

func (keepEngine) Name() string         { return "test-keepsaves" }
func (keepEngine) Available() error     { return nil }
func (keepEngine) SupportsEvents() bool { return true }
func (keepEngine) Prepare(pl *Plan) (Executor, error) {
	ex, err := cpuEngine{}.Prepare(pl)
	if err != nil {
		return nil, err
	}
	return keepExec{ex}, nil
}

func init() { Register(keepEngine{}) }

type keepExec struct{ cpu Executor }

// keptJobs counts the jobs keepExec ran with KeepSaves set.
var keptJobs atomic.Int64

func (k keepExec) Run(ctx context.Context, j *Job) (*Result, error) {
	res, err := k.cpu.Run(ctx, j)
	if err == nil && j.KeepGrads {
		keepGrads(res, j.Reuse)
	}
	if err != nil || !j.KeepSaves {
		return res, err
	}
	keptJobs.Add(1)
	if res.Ys == nil {
		return nil, errors.New("test-keepsaves: a job with KeepSaves and no saves")
	}
	if j.Reuse != nil {
		if h, ok := j.Reuse.Saves.(*heldSaves); ok && !h.Released() && cap(h.ys) >= len(res.Ys) {
			h.ys = append(h.ys[:0], res.Ys...)
			res.Saves, res.Ys = h, nil
			return res, nil
		}
	}
	res.Saves, res.Ys = &heldSaves{ys: res.Ys}, nil
	return res, nil
}

// heldSaves is keepEngine's ResidentSaves.
type heldSaves struct {
	ys       []float64
	released atomic.Bool
	copies   atomic.Int64
}

func (h *heldSaves) Engine() string { return keepEngine{}.Name() }
func (h *heldSaves) Owner() any     { return keepEngine{} }
func (h *heldSaves) Released() bool { return h.released.Load() }
func (h *heldSaves) Release()       { h.released.Store(true) }
func (h *heldSaves) CopyTo(dst []float64) error {
	if h.Released() {
		return errors.New("test-keepsaves: released")
	}
	if len(dst) < len(h.ys) {
		return errors.New("test-keepsaves: dst too short")
	}
	h.copies.Add(1)
	copy(dst, h.ys)
	return nil
}

// KeptJobs returns the jobs the test engine test-keepsaves ran with
// Job.KeepSaves set (for the external tests).
func KeptJobs() int64 { return keptJobs.Load() }

// keptGradJobs counts the Grads whose per-trajectory results keepExec
// kept (Job.KeepGrads).
var keptGradJobs atomic.Int64

// keepGrads holds the per-trajectory results of a gradient apart (a
// heldGrads in res.Grads), as a GPU engine keeps them in device memory
// (Job.KeepGrads), where every trajectory ended well and every gradient
// value is finite; it writes NaN, -1 and NotRun over the result's arrays,
// which package ode must not read before Fill writes them back. It
// reuses the held results of old (Job.Reuse) where they are its own, as a
// GPU engine reuses their memory: they are then no longer old's.
func keepGrads(res *Result, old *Result) {
	for _, s := range res.Status {
		if s != OK {
			return
		}
	}
	if slices.Contains(res.Stiff, true) || finiteAll(res.GradY0) >= 0 || finiteAll(res.GradP) >= 0 {
		return
	}
	keptGradJobs.Add(1)
	h := &heldGrads{}
	if old != nil {
		if o, ok := old.Grads.(*heldGrads); ok && !o.Released() {
			h = o
			h.f, h.i = h.f[:0], h.i[:0]
		}
	}
	h.res = res
	for _, a := range h.floats() {
		h.f = append(h.f, slices.Clone(*a))
		for i := range *a {
			(*a)[i] = math.NaN()
		}
	}
	for _, a := range h.ints() {
		h.i = append(h.i, slices.Clone(*a))
		for i := range *a {
			(*a)[i] = -1
		}
	}
	h.status, h.stiff = slices.Clone(res.Status), slices.Clone(res.Stiff)
	for i := range res.Status {
		res.Status[i] = NotRun
	}
	clear(res.Stiff)
	res.Grads = h
}

// heldGrads is keepEngine's ResidentGrads: copies of the arrays of res.
type heldGrads struct {
	res      *Result
	f        [][]float64
	i        [][]int
	status   []Status
	stiff    []bool
	released atomic.Bool
	fills    atomic.Int64
}

// floats and ints return the result's per-trajectory arrays that
// Job.KeepGrads names.
func (h *heldGrads) floats() []*[]float64 {
	r := h.res
	a := []*[]float64{&r.GradY0, &r.GradP, &r.Y, &r.Ys, &r.T, &r.MeshT1}
	return a
}

func (h *heldGrads) ints() []*[]int {
	r := h.res
	a := []*[]int{&r.Stats.Accepted, &r.Stats.Rejected, &r.Stats.FieldEvals, &r.Events}
	if r.Mesh != nil {
		a = append(a, &r.Mesh.Len)
	}
	return a
}

func (h *heldGrads) Engine() string { return keepEngine{}.Name() }
func (h *heldGrads) Owner() any     { return keepEngine{} }
func (h *heldGrads) Released() bool { return h.released.Load() }
func (h *heldGrads) Release()       { h.released.Store(true) }
func (h *heldGrads) Fill(res *Result) error {
	if h.Released() {
		return errors.New("test-keepsaves: released")
	}
	if res != h.res {
		return fmt.Errorf("test-keepsaves: another result's: %w", ErrReleased)
	}
	h.fills.Add(1)
	for k, a := range h.floats() {
		copy(*a, h.f[k])
	}
	for k, a := range h.ints() {
		copy(*a, h.i[k])
	}
	copy(h.res.Status, h.status)
	copy(h.res.Stiff, h.stiff)
	return nil // held for the next call's results, until Release
}

// KeptGradJobs returns the Grads whose per-trajectory results the test
// engine test-keepsaves kept (Job.KeepGrads), for the external tests.
func KeptGradJobs() int64 { return keptGradJobs.Load() }

// GradFills returns the times the results of g (held by the test engine
// test-keepsaves) were written back (ResidentGrads.Fill), or -1.
func GradFills(g *Gradient) int64 {
	h, ok := g.Resident.(*heldGrads)
	if !ok {
		return -1
	}
	return h.fills.Load()
}
