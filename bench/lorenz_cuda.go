package bench

import (
	_ "embed"
	"errors"
	"fmt"
	"math"

	"github.com/gradsolve-go/gradsolve/ode"
)

// lorenzCUDASource is the CUDA C++ source of the hand-written fused Lorenz
// kernels, lorenz_tsit5_forward and lorenz_tsit5_record_adjoint: one thread
// per trajectory, the integrator of LorenzTsit5. The source is also valid
// host C++ (qualifiers behind macros); TestLorenzCUDAOnHost compiles it with
// g++ and checks it against LorenzTsit5 and ode.Grad.
//
//go:embed lorenz_tsit5.cu
var lorenzCUDASource string

// Kernel names in lorenzCUDASource.
const (
	lorenzForwardKernel = "lorenz_tsit5_forward"
	lorenzAdjointKernel = "lorenz_tsit5_record_adjoint"
)

// Status of a trajectory whose accepted steps overflow the record buffer
// of lorenz_tsit5_record_adjoint (the kernel's GS_RECORD_FULL); the other
// statuses are ode.Status values.
const lorenzRecordFull = 5

// lorenzKernelParams mirrors struct gs_lorenz_params of lorenzCUDASource,
// which the kernels take by value: 88 bytes, no padding.
type lorenzKernelParams struct {
	Sigma, Beta            float64
	Y0                     [3]float64
	T0, T1, RelTol, AbsTol float64
	MaxSteps, Rows         int32
	N                      int64
}

// newLorenzKernelParams returns the kernel parameters of e with the
// settings s (nil or zero fields mean LorenzTsit5's defaults) and a record
// buffer of rows accepted steps per trajectory.
func newLorenzKernelParams(e *LorenzEnsemble, s *BaselineSettings, rows int) (lorenzKernelParams, error) {
	var set BaselineSettings
	if s != nil {
		set = *s
	}
	if set.RelTol == 0 {
		set.RelTol = ode.DefaultRelTol
	}
	if set.AbsTol == 0 {
		set.AbsTol = ode.DefaultAbsTol
	}
	if set.MaxSteps == 0 {
		set.MaxSteps = ode.DefaultMaxSteps
	}
	switch {
	case !(e.T1 > e.T0):
		return lorenzKernelParams{}, fmt.Errorf("bench: Lorenz CUDA baseline: T1 = %v must exceed T0 = %v", e.T1, e.T0)
	case set.MaxSteps > math.MaxInt32 || rows < 0 || rows > math.MaxInt32:
		return lorenzKernelParams{}, fmt.Errorf("bench: Lorenz CUDA baseline: MaxSteps %d or rows %d out of range", set.MaxSteps, rows)
	}
	return lorenzKernelParams{
		Sigma: e.Sigma, Beta: e.Beta, Y0: e.Y0, T0: e.T0, T1: e.T1,
		RelTol: set.RelTol, AbsTol: set.AbsTol,
		MaxSteps: int32(set.MaxSteps), Rows: int32(rows), N: int64(len(e.Rho)),
	}, nil
}

// ErrNoCUDA is returned by the CUDA baselines while they are not wired to
// a GPU loader.
var ErrNoCUDA = errors.New("bench: the CUDA Lorenz baselines are not wired to a GPU loader yet")

// lorenzCUDABuffers are the host-side arrays of one kernel launch:
// component-major states y[c*n+i], and per-trajectory outputs. Drho and
// the record buffer (Rows rows) belong to lorenz_tsit5_record_adjoint only.
type lorenzCUDABuffers struct {
	Rho, Y, Drho                 []float64
	Accepted, Rejected, Statuses []int32
}

// launchLorenzCUDA runs kernel (lorenzForwardKernel or lorenzAdjointKernel)
// of lorenzCUDASource on the GPU for p.N trajectories, copying b.Rho in and
// the other buffers of b out; the record buffer (p.Rows×3×N states and
// p.Rows×N step sizes) lives on the device only.
//
// TODO(cuda): wire this once package cuda is on main: compile
// lorenzCUDASource with NVRTC for the device's architecture (cached), load
// kernel, allocate and copy the buffers, launch ⌈N/128⌉ blocks of 128
// threads with p passed by value, copy back, and time the launch with CUDA
// events. Until then it returns ErrNoCUDA.
func launchLorenzCUDA(kernel string, p lorenzKernelParams, b *lorenzCUDABuffers) error {
	_, _, _ = kernel, p, b
	return ErrNoCUDA
}

// LorenzTsit5CUDA is LorenzTsit5 on the GPU: the hand-written kernel
// lorenz_tsit5_forward integrates every trajectory of e in one thread and
// the final states are stored in dst ([n×3]; nil allocates), which it
// returns. Settings and stats are as for LorenzTsit5. It returns ErrNoCUDA
// until the kernels are wired to a GPU loader.
func LorenzTsit5CUDA(dst []float64, e *LorenzEnsemble, s *BaselineSettings, stats *BaselineStats) ([]float64, error) {
	p, err := newLorenzKernelParams(e, s, 0)
	if err != nil {
		return nil, err
	}
	n := len(e.Rho)
	if dst == nil {
		dst = make([]float64, 3*n)
	}
	if len(dst) != 3*n {
		panic(badDstLength)
	}
	b := newLorenzCUDABuffers(e, false)
	if err := launchLorenzCUDA(lorenzForwardKernel, p, b); err != nil {
		return nil, err
	}
	return dst, b.results(dst, nil, stats)
}

// LorenzGradCUDA runs the hand-written kernel lorenz_tsit5_record_adjoint:
// in one launch every thread integrates its trajectory of e as LorenzTsit5
// does, recording up to rows accepted steps, then sweeps them backward and
// computes dL/dρ_i of L = Σ_i ‖y_i(T1)‖² on the recorded mesh (the
// frozen-mesh discrete adjoint, as ode.Grad). It stores the final states in
// y ([n×3]) and the gradient in drho ([n]). A trajectory with more than rows
// accepted steps fails. It returns ErrNoCUDA until the kernels are wired to
// a GPU loader.
func LorenzGradCUDA(y, drho []float64, e *LorenzEnsemble, s *BaselineSettings, rows int, stats *BaselineStats) error {
	p, err := newLorenzKernelParams(e, s, rows)
	if err != nil {
		return err
	}
	n := len(e.Rho)
	if len(y) != 3*n || len(drho) != n {
		panic(badDstLength)
	}
	b := newLorenzCUDABuffers(e, true)
	if err := launchLorenzCUDA(lorenzAdjointKernel, p, b); err != nil {
		return err
	}
	return b.results(y, drho, stats)
}

func newLorenzCUDABuffers(e *LorenzEnsemble, grad bool) *lorenzCUDABuffers {
	n := len(e.Rho)
	b := &lorenzCUDABuffers{
		Rho: e.Rho, Y: make([]float64, 3*n),
		Accepted: make([]int32, n), Rejected: make([]int32, n), Statuses: make([]int32, n),
	}
	if grad {
		b.Drho = make([]float64, n)
	}
	return b
}

// results copies the kernel's outputs to y ([n×3]), drho and stats, and
// returns an *ode.TrajectoryError for the first failed trajectory.
func (b *lorenzCUDABuffers) results(y, drho []float64, stats *BaselineStats) error {
	n := len(b.Rho)
	for i := range n {
		for c := range 3 {
			y[3*i+c] = b.Y[c*n+i]
		}
	}
	copy(drho, b.Drho)
	if stats != nil {
		stats.Accepted = resizeInts(stats.Accepted, n)
		stats.Rejected = resizeInts(stats.Rejected, n)
		for i := range n {
			stats.Accepted[i], stats.Rejected[i] = int(b.Accepted[i]), int(b.Rejected[i])
		}
	}
	failed, first := 0, -1
	for i, st := range b.Statuses {
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
	st := ode.Status(b.Statuses[first])
	if b.Statuses[first] == lorenzRecordFull {
		return fmt.Errorf("bench: Lorenz CUDA baseline: trajectory %d has more accepted steps than the record buffer's rows (%d trajectories failed)", first, failed)
	}
	return &ode.TrajectoryError{Index: first, T: math.NaN(), Status: st, Method: "Tsit5 (CUDA baseline)", Failed: failed}
}
