package ode

import (
	"fmt"
)

// ErrTooLarge is returned (wrapped) when a job's arrays or estimated
// memory would not fit: the error gives the estimate and the fix.
var ErrTooLarge = fmt.Errorf("too large")

// maxElems bounds the length of any one array a job allocates.
const maxElems = 1 << 40

// checkSize refuses a job whose arrays overflow or whose estimated memory
// passes the memory limit by far (its states of one step and its outputs:
// the part no checkpointing can save).
func checkSize(j *Job) error {
	pl := j.Plan
	d, np, ns, K := pl.Dim, pl.Params, pl.Shared, len(j.SaveAt)
	per := float64(4*d + 2*np + 16 + K*d)
	if j.Op == OpGrad {
		per += float64(3*d + 2*np + ns)
	}
	if j.Loss != nil {
		per += float64(j.Loss.DataDim)
	}
	bytes := 8 * per * float64(j.N)
	if j.Mesh != nil {
		bytes += 8 * float64(j.Mesh.Rows) * float64(j.Mesh.N)
	}
	if float64(j.N)*per > maxElems {
		return fmt.Errorf("ode: %d trajectories need about %.3g bytes of arrays: %w; use fewer trajectories", j.N, bytes, ErrTooLarge)
	}
	if j.MemoryLimit > 0 && bytes > 4*float64(j.MemoryLimit) && bytes > 1<<30 {
		return fmt.Errorf("ode: %d trajectories need about %.3g bytes for their states and results, over the memory limit of %d: %w; use fewer trajectories (or raise Settings.MemoryLimit)", j.N, bytes, j.MemoryLimit, ErrTooLarge)
	}
	return nil
}
