package bench

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/ode"
)

// lorenzCUDASource is the CUDA C++ source of the hand-written fused Lorenz
// kernels, lorenz_tsit5_forward and lorenz_tsit5_record_adjoint: one thread
// per trajectory, the integrator of LorenzTsit5. The source is also valid
// host C++ (qualifiers behind macros); TestLorenzCUDAOnHost compiles it with
// g++ and checks it against LorenzTsit5 and ode.Grad.
//
//go:embed lorenz_tsit5.cu
var lorenzCUDAFile string

var lorenzCUDASource = withTsit5Header(lorenzCUDAFile)

// tsit5Header is what the hand-written Tsit5 kernels share: statuses, the
// tableau, the controller's constants and small helpers.
//
//go:embed tsit5.cuh
var tsit5Header string

// tsit5Include is the line of a kernel file that tsit5Header replaces.
const tsit5Include = `#include "tsit5.cuh"` + "\n"

// withTsit5Header returns the kernel source src with tsit5Header in place
// of its #include line (NVRTC is given one source). It panics if src has
// no such line.
func withTsit5Header(src string) string {
	if !strings.Contains(src, tsit5Include) {
		panic("bench: a CUDA baseline does not include tsit5.cuh")
	}
	return strings.Replace(src, tsit5Include, tsit5Header, 1)
}

// Kernel names in lorenzCUDASource.
const (
	lorenzForwardKernel = "lorenz_tsit5_forward"
	lorenzAdjointKernel = "lorenz_tsit5_record_adjoint"
)

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

// ErrNoCUDA is returned (wrapped, with the reason) by the CUDA baselines
// where there is no GPU or no NVRTC.
var ErrNoCUDA = errors.New("bench: no GPU for the CUDA baselines")

// lorenzCUDABuffers are the host-side arrays of one kernel launch:
// component-major states y[c*n+i], the per-trajectory steps and statuses,
// and dL/dρ (lorenz_tsit5_record_adjoint only).
type lorenzCUDABuffers struct {
	Rho, Y, Drho []float64
	baselineSteps
}

// CUDAStats are the statistics of a run of a CUDA baseline: the steps of
// every trajectory and the kernel's device time (CUDA events; copies
// excluded).
type CUDAStats struct {
	BaselineStats
	Kernel time.Duration
}

func (s *CUDAStats) base() *BaselineStats {
	if s == nil {
		return nil
	}
	return &s.BaselineStats
}

// lorenzGPU holds the device and the compiled kernels of the baselines,
// made on first use.
var lorenzGPU struct {
	once sync.Once
	dev  *driver.Device
	fwd  *driver.Kernel
	adj  *driver.Kernel
	err  error
}

// lorenzKernels opens GPU 0 and compiles lorenzCUDASource (cached on
// disk), once per process.
func lorenzKernels() (*driver.Device, *driver.Kernel, *driver.Kernel, error) {
	g := &lorenzGPU
	g.once.Do(func() {
		d, err := driver.Open(0)
		if err != nil {
			g.err = err
			return
		}
		m, _, err := d.Build(lorenzCUDASource, &driver.CompileSettings{Name: "lorenz_tsit5.cu"})
		if err != nil {
			g.err = err
			return
		}
		if g.fwd, g.err = m.Kernel(lorenzForwardKernel); g.err != nil {
			return
		}
		if g.adj, g.err = m.Kernel(lorenzAdjointKernel); g.err != nil {
			return
		}
		g.dev = d
	})
	if g.err != nil {
		if errors.Is(g.err, driver.ErrNoGPU) || errors.Is(g.err, driver.ErrNoNVRTC) {
			return nil, nil, nil, fmt.Errorf("%w: %w", ErrNoCUDA, g.err)
		}
		return nil, nil, nil, g.err
	}
	return g.dev, g.fwd, g.adj, nil
}

// launchLorenzCUDA runs kernel (lorenzForwardKernel or lorenzAdjointKernel)
// of lorenzCUDASource on GPU 0 for p.N trajectories, copying b.Rho in and
// the other buffers of b out; the record buffer (p.Rows×3×N states and
// p.Rows×N step sizes) lives on the device only. It launches ⌈N/128⌉
// blocks of 128 threads with p passed by value and returns the kernel's
// device time (CUDA events; copies excluded).
func launchLorenzCUDA(kernel string, p lorenzKernelParams, b *lorenzCUDABuffers) (time.Duration, error) {
	d, fwd, adj, err := lorenzKernels()
	if err != nil {
		return 0, err
	}
	n := int(p.N)
	arr := &deviceArrays{d: d}
	defer arr.free()
	rho, err := arr.f64(b.Rho, n)
	if err != nil {
		return 0, err
	}
	y, err := arr.f64(nil, 3*n)
	if err != nil {
		return 0, err
	}
	acc, err := arr.i32(n)
	if err != nil {
		return 0, err
	}
	rej, err := arr.i32(n)
	if err != nil {
		return 0, err
	}
	st, err := arr.i32(n)
	if err != nil {
		return 0, err
	}
	var raw bytes.Buffer
	if err := binary.Write(&raw, binary.LittleEndian, p); err != nil {
		return 0, err
	}
	l := driver.Linear(n, 128)
	var dt time.Duration
	var drho *driver.Buffer[float64]
	if kernel == lorenzAdjointKernel {
		if drho, err = arr.f64(nil, n); err != nil {
			return 0, err
		}
		ys, err := arr.f64(nil, max(1, 3*n*int(p.Rows)))
		if err != nil {
			return 0, err
		}
		hs, err := arr.f64(nil, max(1, n*int(p.Rows)))
		if err != nil {
			return 0, err
		}
		dt, err = timedLaunch(d, adj, l, raw.Bytes(), rho, y, drho, ys, hs, acc, rej, st)
		if err != nil {
			return 0, err
		}
	} else if dt, err = timedLaunch(d, fwd, l, raw.Bytes(), rho, y, acc, rej, st); err != nil {
		return 0, err
	}
	if err := y.Read(b.Y); err != nil {
		return 0, err
	}
	if err := b.read(acc, rej, st); err != nil {
		return 0, err
	}
	if drho != nil {
		if err := drho.Read(b.Drho); err != nil {
			return 0, err
		}
	}
	return dt, nil
}

// LorenzTsit5CUDA is LorenzTsit5 on the GPU: the hand-written kernel
// lorenz_tsit5_forward integrates every trajectory of e in one thread and
// the final states are stored in dst ([n×3]; nil allocates), which it
// returns. Settings and stats are as for LorenzTsit5; the kernel's device time
// goes to stats.Kernel. Its error wraps ErrNoCUDA where there is no GPU.
func LorenzTsit5CUDA(dst []float64, e *LorenzEnsemble, s *BaselineSettings, stats *CUDAStats) ([]float64, error) {
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
	dt, err := launchLorenzCUDA(lorenzForwardKernel, p, b)
	if err != nil {
		return nil, err
	}
	if stats != nil {
		stats.Kernel = dt
	}
	return dst, b.results(dst, nil, stats.base())
}

// LorenzGradCUDA runs the hand-written kernel lorenz_tsit5_record_adjoint:
// in one launch every thread integrates its trajectory of e as LorenzTsit5
// does, recording up to rows accepted steps, then sweeps them backward and
// computes dL/dρ_i of L = Σ_i ‖y_i(T1)‖² on the recorded mesh (the
// frozen-mesh discrete adjoint, as ode.Grad). It stores the final states in
// y ([n×3]) and the gradient in drho ([n]). A trajectory with more than rows
// accepted steps fails. stats.Kernel gets the kernel's device time. Its
// error wraps ErrNoCUDA where there is no GPU.
func LorenzGradCUDA(y, drho []float64, e *LorenzEnsemble, s *BaselineSettings, rows int, stats *CUDAStats) error {
	p, err := newLorenzKernelParams(e, s, rows)
	if err != nil {
		return err
	}
	n := len(e.Rho)
	if len(y) != 3*n || len(drho) != n {
		panic(badDstLength)
	}
	b := newLorenzCUDABuffers(e, true)
	dt, err := launchLorenzCUDA(lorenzAdjointKernel, p, b)
	if err != nil {
		return err
	}
	if stats != nil {
		stats.Kernel = dt
	}
	return b.results(y, drho, stats.base())
}

func newLorenzCUDABuffers(e *LorenzEnsemble, grad bool) *lorenzCUDABuffers {
	n := len(e.Rho)
	b := &lorenzCUDABuffers{Rho: e.Rho, Y: make([]float64, 3*n), baselineSteps: newBaselineSteps(n)}
	if grad {
		b.Drho = make([]float64, n)
	}
	return b
}

// results copies the kernel's outputs to y ([n×3]), drho and stats, and
// returns an error for the first failed trajectory (baselineSteps.results).
func (b *lorenzCUDABuffers) results(y, drho []float64, stats *BaselineStats) error {
	n := len(b.Rho)
	for i := range n {
		for c := range 3 {
			y[3*i+c] = b.Y[c*n+i]
		}
	}
	copy(drho, b.Drho)
	return b.baselineSteps.results(stats, "Lorenz")
}
