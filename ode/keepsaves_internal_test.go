package ode

import (
	"context"
	"errors"
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
