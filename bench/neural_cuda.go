package bench

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/ode"
)

// neuralCUDASource is the CUDA C++ source of the hand-written fused kernels
// of the neural protocol, neural_tsit5_forward and
// neural_tsit5_record_adjoint: on the GPU one warp per tile of eight
// trajectories, the network's layers as float64 tensor-core products over
// the tile. The source is also valid host C++ (one trajectory per thread,
// plain loops); TestNeuralCUDAOnHost compiles it with g++ and checks it
// against the library's gradient.
//
//go:embed neural_tsit5.cu
var neuralCUDAFile string

var neuralCUDASource = withTsit5Header(neuralCUDAFile)

// Kernel names in neuralCUDASource.
const (
	neuralForwardKernel = "neural_tsit5_forward"
	neuralAdjointKernel = "neural_tsit5_record_adjoint"
)

// The shared-memory layout of neuralCUDASource, in reals (its SWLEN, XLEN
// and WARPLEN; TestNeuralCUDAOnHost checks them): the weights in fragment
// order, then per warp the scratch tiles (forward) or the accumulator and
// the scratch tiles (record + adjoint).
const (
	neuralSWLen   = 1864
	neuralXLen    = 864
	neuralWarpLen = 2082
	neuralALen    = neuralWarpLen - neuralXLen // a warp's accumulator (ALEN)
)

// neuralWarps is the number of warps of a block of the kernels (their
// GS_WARPS): 4, or 1 to 8 from the environment variable
// GRADSOLVE_NEURAL_WARPS, read once per process. neuralAccGlobal keeps
// the adjoint's accumulators in global memory, with the kernels bounded to
// neuralMinBlocks blocks per multiprocessor (GS_ACC_GLOBAL, GS_MINB; 128
// registers for 4 warps): the default, or GRADSOLVE_NEURAL_ACC=shared for
// accumulators in shared memory and no bound; GRADSOLVE_NEURAL_MINB sets
// the bound. On the H200 at B = 65536 the gradient with the record took
// 3.39 ms with shared accumulators, 2.61 / 2.82 / 3.37 ms with global ones
// and 4 / 3 / 2 blocks (bench/RESULTS.md).
var (
	neuralWarps     = 4
	neuralAccGlobal = true
	neuralMinBlocks = 4
)

// The environment variables of the kernels' variants.
const (
	neuralWarpsEnv = "GRADSOLVE_NEURAL_WARPS"
	neuralAccEnv   = "GRADSOLVE_NEURAL_ACC"
	neuralMinBEnv  = "GRADSOLVE_NEURAL_MINB"
)

// neuralKernelParams mirrors struct gs_neural_params of neuralCUDASource,
// which the kernels take by value: 56 bytes, no padding.
type neuralKernelParams struct {
	T0, T1, RelTol, AbsTol, Scale float64
	MaxSteps, Rows                int32
	N                             int64
}

// newNeuralKernelParams returns the kernel parameters of e with the
// settings s (nil or zero fields mean the neural protocol's tolerances and
// the library's step budget) and a record buffer of rows accepted steps per
// trajectory. The network must be NeuralMLP's.
func newNeuralKernelParams(e *NeuralEnsemble, s *BaselineSettings, rows int) (neuralKernelParams, error) {
	var set BaselineSettings
	if s != nil {
		set = *s
	}
	if set.RelTol == 0 {
		set.RelTol = NeuralRelTol
	}
	if set.AbsTol == 0 {
		set.AbsTol = NeuralAbsTol
	}
	if set.MaxSteps == 0 {
		set.MaxSteps = ode.DefaultMaxSteps
	}
	want := NeuralMLP()
	switch {
	case len(e.MLP) != len(want) || e.MLP.NumParams() != want.NumParams():
		return neuralKernelParams{}, fmt.Errorf("bench: neural CUDA baseline: the kernels are written for the %v network of NeuralMLP, not %d layers of %d weights", NeuralSizes, len(e.MLP), e.MLP.NumParams())
	case len(e.Weights) != want.NumParams() || len(e.Y0) != len(e.Targets) || len(e.Y0)%2 != 0 || len(e.Y0) == 0:
		return neuralKernelParams{}, fmt.Errorf("bench: neural CUDA baseline: %d weights, %d initial values and %d targets (want %d, 2·B and 2·B)", len(e.Weights), len(e.Y0), len(e.Targets), want.NumParams())
	case !(e.T1 > e.T0):
		return neuralKernelParams{}, fmt.Errorf("bench: neural CUDA baseline: T1 = %v must exceed T0 = %v", e.T1, e.T0)
	case set.MaxSteps > math.MaxInt32 || rows < 0 || rows > math.MaxInt32:
		return neuralKernelParams{}, fmt.Errorf("bench: neural CUDA baseline: MaxSteps %d or rows %d out of range", set.MaxSteps, rows)
	}
	for k, l := range e.MLP {
		if l != want[k] {
			return neuralKernelParams{}, fmt.Errorf("bench: neural CUDA baseline: layer %d is %+v, the kernels' is %+v", k, l, want[k])
		}
	}
	b := e.B()
	return neuralKernelParams{
		T0: e.T0, T1: e.T1, RelTol: set.RelTol, AbsTol: set.AbsTol, Scale: 2 / float64(b),
		MaxSteps: int32(set.MaxSteps), Rows: int32(rows), N: int64(b),
	}, nil
}

// neuralGPU holds the device and the compiled kernels, made on first use.
var neuralGPU struct {
	once     sync.Once
	dev      *driver.Device
	fwd, adj *driver.Kernel
	// attrs are the forward and adjoint kernels' resources, for their
	// launches' shapes (neuralGrid).
	attrs [2]driver.KernelAttrs
	err   error
}

// neuralKernels opens GPU 0 and compiles neuralCUDASource (cached on
// disk), once per process, letting each kernel use the shared memory of
// its launches.
func neuralKernels() (*driver.Device, *driver.Kernel, *driver.Kernel, error) {
	g := &neuralGPU
	g.once.Do(func() {
		if neuralWarps, g.err = envInt(neuralWarpsEnv, neuralWarps, 1, 8, "warps per block"); g.err != nil {
			return
		}
		opts := []string{fmt.Sprintf("-DGS_WARPS=%d", neuralWarps)}
		switch v := os.Getenv(neuralAccEnv); v {
		case "shared":
			neuralAccGlobal = false
		case "", "global":
			if neuralMinBlocks, g.err = envInt(neuralMinBEnv, neuralMinBlocks, 1, 32, "blocks per multiprocessor"); g.err != nil {
				return
			}
			opts = append(opts, "-DGS_ACC_GLOBAL=1", fmt.Sprintf("-DGS_MINB=%d", neuralMinBlocks))
		default:
			g.err = fmt.Errorf("bench: %s = %q: want shared or global", neuralAccEnv, v)
			return
		}
		d, err := driver.Open(0)
		if err != nil {
			g.err = err
			return
		}
		m, _, err := d.Build(neuralCUDASource, &driver.CompileSettings{Name: "neural_tsit5.cu", Options: opts})
		if err != nil {
			g.err = err
			return
		}
		if g.fwd, g.err = m.Kernel(neuralForwardKernel); g.err != nil {
			return
		}
		if g.adj, g.err = m.Kernel(neuralAdjointKernel); g.err != nil {
			return
		}
		if g.err = g.fwd.SetMaxDynamicShared(neuralShared(false)); g.err != nil {
			return
		}
		if g.err = g.adj.SetMaxDynamicShared(neuralShared(true)); g.err != nil {
			return
		}
		for i, k := range []*driver.Kernel{g.fwd, g.adj} {
			if g.attrs[i], g.err = k.Attrs(); g.err != nil {
				return
			}
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

// neuralShared returns the bytes of dynamic shared memory of a block of
// the forward kernel or (grad) of the record + adjoint kernel.
func neuralShared(grad bool) int {
	per := neuralXLen
	if grad && !neuralAccGlobal {
		per = neuralWarpLen
	}
	return 8 * (neuralSWLen + neuralWarps*per)
}

// neuralGrid returns the blocks of a launch over n trajectories of the
// kernel with resources a: one warp per tile of eight, at most as many
// blocks as can run at once (by shared memory and registers), each warp
// taking tiles until none is left.
func neuralGrid(d *driver.Device, a driver.KernelAttrs, n int, grad bool) int {
	threads := 32 * neuralWarps
	info := d.Info()
	perSM := 1
	if smem := neuralShared(grad) + a.SharedBytes; smem > 0 {
		// An H100/H200 multiprocessor has 228 KiB, 1 KiB of it reserved
		// per block.
		perSM = max(1, 228*1024/(smem+1024))
	}
	if a.Registers > 0 {
		perSM = min(perSM, max(1, 65536/(a.Registers*threads)))
	}
	tiles := (n + 7) / 8
	blocks := (tiles + neuralWarps - 1) / neuralWarps
	if info.SMs > 0 {
		blocks = min(blocks, info.SMs*perSM)
	}
	return max(blocks, 1)
}

// neuralCUDABuffers are the host-side arrays of one kernel launch: final
// states [B×2], the gradient (record + adjoint only), the steps and
// statuses.
type neuralCUDABuffers struct {
	Y, Grad []float64
	baselineSteps
}

// launchNeuralCUDA runs kernel (neuralForwardKernel or neuralAdjointKernel)
// on GPU 0 for the trajectories of e, copying the weights, initial values
// (and targets) in and the buffers of b out; the record buffer (p.Rows×2×B
// states and p.Rows×B step sizes) lives on the device only. It returns the
// kernel's device time (CUDA events; copies and the gradient's zeroing
// excluded).
func launchNeuralCUDA(kernel string, p neuralKernelParams, e *NeuralEnsemble, b *neuralCUDABuffers) (time.Duration, error) {
	d, fwd, adj, err := neuralKernels()
	if err != nil {
		return 0, err
	}
	n := int(p.N)
	arr := &deviceArrays{d: d}
	defer arr.free()
	w, err := arr.f64(e.Weights, len(e.Weights))
	if err != nil {
		return 0, err
	}
	y0, err := arr.f64(e.Y0, 2*n)
	if err != nil {
		return 0, err
	}
	y, err := arr.f64(nil, 2*n)
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
	grad := kernel == neuralAdjointKernel
	attrs := neuralGPU.attrs[0]
	if grad {
		attrs = neuralGPU.attrs[1]
	}
	blocks := neuralGrid(d, attrs, n, grad)
	l := driver.Launch{Grid: driver.Dim{X: blocks}, Block: driver.Dim{X: 32 * neuralWarps}, SharedMem: neuralShared(grad)}
	var dt time.Duration
	var g *driver.Buffer[float64]
	if grad {
		if g, err = arr.f64(make([]float64, len(e.Weights)), len(e.Weights)); err != nil {
			return 0, err
		}
		tg, err := arr.f64(e.Targets, 2*n)
		if err != nil {
			return 0, err
		}
		work, err := arr.f64(nil, 1)
		if err != nil {
			return 0, err
		}
		if neuralAccGlobal {
			if work, err = arr.f64(nil, blocks*neuralWarps*neuralALen); err != nil {
				return 0, err
			}
		}
		ys, err := arr.f64(nil, max(1, 2*n*int(p.Rows)))
		if err != nil {
			return 0, err
		}
		hs, err := arr.f64(nil, max(1, n*int(p.Rows)))
		if err != nil {
			return 0, err
		}
		if dt, err = timedLaunch(d, adj, l, raw.Bytes(), w, y0, tg, y, g, work, ys, hs, acc, rej, st); err != nil {
			return 0, err
		}
	} else if dt, err = timedLaunch(d, fwd, l, raw.Bytes(), w, y0, y, acc, rej, st); err != nil {
		return 0, err
	}
	if err := y.Read(b.Y); err != nil {
		return 0, err
	}
	if err := b.read(acc, rej, st); err != nil {
		return 0, err
	}
	if g != nil {
		if err := g.Read(b.Grad); err != nil {
			return 0, err
		}
	}
	return dt, nil
}

// NeuralTsit5CUDA integrates every trajectory of e (the network must be
// NeuralMLP's) with the hand-written kernel neural_tsit5_forward and
// stores the final states in dst ([B×2]; nil allocates), which it returns.
// Zero fields of s mean the protocol's tolerances (NeuralRelTol,
// NeuralAbsTol); stats gets the steps and the kernel's device time. Its
// error wraps ErrNoCUDA where there is no GPU.
func NeuralTsit5CUDA(dst []float64, e *NeuralEnsemble, s *BaselineSettings, stats *CUDAStats) ([]float64, error) {
	p, err := newNeuralKernelParams(e, s, 0)
	if err != nil {
		return nil, err
	}
	if dst == nil {
		dst = make([]float64, len(e.Y0))
	}
	if len(dst) != len(e.Y0) {
		panic(badDstLength)
	}
	b := newNeuralCUDABuffers(e, dst, nil)
	dt, err := launchNeuralCUDA(neuralForwardKernel, p, e, b)
	if err != nil {
		return nil, err
	}
	if stats != nil {
		stats.Kernel = dt
	}
	return dst, b.results(stats.base(), "neural")
}

// NeuralGradCUDA runs the hand-written kernel neural_tsit5_record_adjoint:
// in one launch every trajectory of e is integrated as NeuralTsit5CUDA
// does, recording up to rows accepted steps, then the recorded steps are
// swept backward for the gradient of the protocol's loss (the batch mean
// of |y_i(T1) − target_i|²) with respect to the network's weights (the
// frozen-mesh discrete adjoint, as ode.Grad). It stores the final states
// in y ([B×2]) and the gradient in grad ([NumParams]). A trajectory with
// more than rows accepted steps fails. stats gets the steps and the
// kernel's device time. Its error wraps ErrNoCUDA where there is no GPU.
func NeuralGradCUDA(y, grad []float64, e *NeuralEnsemble, s *BaselineSettings, rows int, stats *CUDAStats) error {
	p, err := newNeuralKernelParams(e, s, rows)
	if err != nil {
		return err
	}
	if len(y) != len(e.Y0) || len(grad) != len(e.Weights) {
		panic(badDstLength)
	}
	b := newNeuralCUDABuffers(e, y, grad)
	dt, err := launchNeuralCUDA(neuralAdjointKernel, p, e, b)
	if err != nil {
		return err
	}
	if stats != nil {
		stats.Kernel = dt
	}
	return b.results(stats.base(), "neural")
}

func newNeuralCUDABuffers(e *NeuralEnsemble, y, grad []float64) *neuralCUDABuffers {
	return &neuralCUDABuffers{Y: y, Grad: grad, baselineSteps: newBaselineSteps(e.B())}
}

// neuralHandColumns times the hand-written kernels on e (reps rounds after
// a warm-up, as timeGPU) and fills row's hand-written columns and ratios:
// their device times, and the largest differences of their final states
// and gradient from the engine's g. Where there is no GPU it leaves the
// row as it is.
func neuralHandColumns(row *GPURow, e *NeuralEnsemble, g *ode.Gradient, reps int) error {
	set := &BaselineSettings{RelTol: row.RelTol, AbsTol: row.AbsTol}
	y := make([]float64, len(e.Y0))
	y2 := make([]float64, len(e.Y0))
	grad := make([]float64, len(e.Weights))
	times, err := timeGPU(reps,
		func() (time.Duration, error) {
			var cs CUDAStats
			_, err := NeuralTsit5CUDA(y, e, set, &cs)
			return cs.Kernel, err
		},
		func() (time.Duration, error) {
			var cs CUDAStats
			err := NeuralGradCUDA(y2, grad, e, set, g.Mesh.Rows+1, &cs)
			return cs.Kernel, err
		},
	)
	if errors.Is(err, ErrNoCUDA) {
		return nil
	}
	if err != nil {
		return err
	}
	row.HandForward, row.HandGrad = times[0].kernel, times[1].kernel
	row.HandDiff = maxRelDiff(y, g.Solution.Y, 2)
	row.HandGradDiff = maxDiffOfLargest(grad, g.Shared)
	row.ratios()
	return nil
}
