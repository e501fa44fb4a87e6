package bench

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/ode"
)

// What the hand-written CUDA baselines (lorenz_cuda.go, neural_cuda.go)
// share: the device arrays of a launch, the timed launch, and the step
// counts and statuses their kernels return.

// deviceArrays allocates the device arrays of one launch on d and frees
// them together (free).
type deviceArrays struct {
	d    *driver.Device
	held []interface{ Free() error }
}

// f64 returns an array of n float64s, holding src when it is not nil.
func (a *deviceArrays) f64(src []float64, n int) (*driver.Buffer[float64], error) {
	x, err := driver.Alloc[float64](a.d, n)
	if err != nil {
		return nil, err
	}
	a.held = append(a.held, x)
	if src != nil {
		err = x.Write(src)
	}
	return x, err
}

// i32 returns an array of n int32s.
func (a *deviceArrays) i32(n int) (*driver.Buffer[int32], error) {
	x, err := driver.Alloc[int32](a.d, n)
	if err == nil {
		a.held = append(a.held, x)
	}
	return x, err
}

// free frees every array.
func (a *deviceArrays) free() {
	for _, x := range a.held {
		x.Free()
	}
}

// timedLaunch launches k on d's legacy stream with l and args and returns
// its device time (CUDA events around the launch).
func timedLaunch(d *driver.Device, k *driver.Kernel, l driver.Launch, args ...any) (time.Duration, error) {
	e0, err := d.NewEvent()
	if err != nil {
		return 0, err
	}
	defer e0.Destroy()
	e1, err := d.NewEvent()
	if err != nil {
		return 0, err
	}
	defer e1.Destroy()
	if err := e0.Record(nil); err != nil {
		return 0, err
	}
	if err := k.Launch(l, args...); err != nil {
		return 0, err
	}
	if err := e1.Record(nil); err != nil {
		return 0, err
	}
	return driver.Elapsed(e0, e1)
}

// baselineSteps are a kernel's per-trajectory accepted and rejected step
// counts and statuses (ode.Status values, or baselineRecordFull).
type baselineSteps struct {
	Accepted, Rejected, Statuses []int32
}

func newBaselineSteps(n int) baselineSteps {
	return baselineSteps{Accepted: make([]int32, n), Rejected: make([]int32, n), Statuses: make([]int32, n)}
}

// baselineRecordFull is the status of a trajectory whose accepted steps
// overflow the record buffer of a record + adjoint kernel (the kernels'
// GS_RECORD_FULL, tsit5.cuh).
const baselineRecordFull = 5

// read copies the device arrays of the counts and statuses to s.
func (s *baselineSteps) read(acc, rej, st *driver.Buffer[int32]) error {
	for _, err := range []error{acc.Read(s.Accepted), rej.Read(s.Rejected), st.Read(s.Statuses)} {
		if err != nil {
			return err
		}
	}
	return nil
}

// results copies the step counts to stats and returns an error for the
// first failed trajectory: *ode.TrajectoryError, or one naming the record
// buffer's rows. name is the baseline's, as "Lorenz".
func (s *baselineSteps) results(stats *BaselineStats, name string) error {
	n := len(s.Statuses)
	if stats != nil {
		stats.Accepted = resizeInts(stats.Accepted, n)
		stats.Rejected = resizeInts(stats.Rejected, n)
		for i := range n {
			stats.Accepted[i], stats.Rejected[i] = int(s.Accepted[i]), int(s.Rejected[i])
		}
	}
	failed, first := 0, -1
	for i, st := range s.Statuses {
		if st != int32(ode.OK) {
			failed++
			if first < 0 {
				first = i
			}
		}
	}
	if failed == 0 {
		return nil
	}
	if s.Statuses[first] == baselineRecordFull {
		return fmt.Errorf("bench: %s CUDA baseline: trajectory %d has more accepted steps than the record buffer's rows (%d trajectories failed)", name, first, failed)
	}
	return &ode.TrajectoryError{Index: first, T: math.NaN(), Status: ode.Status(s.Statuses[first]), Method: "Tsit5 (CUDA baseline)", Failed: failed}
}

// envInt returns the integer in environment variable name, def where it is
// unset, or an error naming the variable and the range [lo, hi] of what.
func envInt(name string, def, lo, hi int, what string) (int, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	x, err := strconv.Atoi(v)
	if err != nil || x < lo || x > hi {
		return 0, fmt.Errorf("bench: %s = %q: want %d to %d %s", name, v, lo, hi, what)
	}
	return x, nil
}
