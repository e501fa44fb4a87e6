package bench

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
)

// hostNeuralResult is one trajectory's output of the host harness.
type hostNeuralResult struct {
	fwdStatus, fwdAcc, fwdRej int
	fwdY                      [2]float64
	adjStatus, adjAcc, adjRej int
	adjY                      [2]float64
	h                         []float64
}

// buildNeuralHost compiles the embedded kernels with the host harness
// testdata/neural_tsit5_host.cpp, their GPU form on a simulated warp if
// sim, with the preprocessor definitions defs, and returns the
// executable's path. It skips the test when g++ is not installed.
func buildNeuralHost(t *testing.T, sim bool, defs ...string) string {
	t.Helper()
	args := []string{"-std=c++20", "-O2", "-ffp-contract=off", "-fno-strict-aliasing", "-Wall", "-Wextra", "-Werror"}
	if sim {
		args = append(args, "-DGS_WARP_SIM", "-pthread")
	}
	for _, d := range defs {
		args = append(args, "-D"+d)
	}
	return buildHost(t, "neural_host", "neural_tsit5.cu", neuralCUDASource, "neural_tsit5_host.cpp", args...)
}

// runNeuralHost runs the harness on the kernel parameters p and the batch
// e, checks the layout sizes it prints against the Go constants, and
// returns the gradient and the trajectories' results.
func runNeuralHost(t *testing.T, exe string, p neuralKernelParams, e *NeuralEnsemble) ([]float64, []hostNeuralResult) {
	t.Helper()
	var in bytes.Buffer
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	fmt.Fprintf(&in, "%d %d %d\n", p.N, p.Rows, p.MaxSteps)
	fmt.Fprintln(&in, g(p.T0), g(p.T1), g(p.RelTol), g(p.AbsTol), g(p.Scale))
	for _, xs := range [][]float64{e.Weights, e.Y0, e.Targets} {
		for _, x := range xs {
			fmt.Fprintln(&in, g(x))
		}
	}
	cmd := exec.Command(exe)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	n := int(p.N)
	if len(lines) != n+2 {
		t.Fatalf("harness printed %d lines for %d trajectories", len(lines), n)
	}
	nums := func(l string, line int) []float64 {
		var v []float64
		for k, f := range strings.Fields(l) {
			x, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatalf("harness line %d field %d: %v", line, k, err)
			}
			v = append(v, x)
		}
		return v
	}
	if sz := nums(lines[0], 0); len(sz) != 3 || sz[0] != neuralSWLen || sz[1] != neuralXLen || sz[2] != neuralWarpLen {
		t.Fatalf("kernel layout SWLEN, XLEN, WARPLEN = %v; bench's constants %d, %d, %d", sz, neuralSWLen, neuralXLen, neuralWarpLen)
	}
	grad := nums(lines[1], 1)
	if len(grad) != len(e.Weights) {
		t.Fatalf("harness printed %d gradient entries, want %d", len(grad), len(e.Weights))
	}
	res := make([]hostNeuralResult, n)
	for i, l := range lines[2:] {
		f := nums(l, i+2)
		if len(f) < 11 {
			t.Fatalf("harness line %d: %q", i+2, l)
		}
		r := &res[i]
		r.fwdStatus, r.fwdAcc, r.fwdRej = int(f[1]), int(f[2]), int(f[3])
		r.fwdY = [2]float64{f[4], f[5]}
		r.adjStatus, r.adjAcc, r.adjRej = int(f[6]), int(f[7]), int(f[8])
		r.adjY = [2]float64{f[9], f[10]}
		r.h = f[11:]
	}
	return grad, res
}

// libraryNeuralGrad returns ode.Grad's gradient of e's protocol loss on the
// CPU engine (which records its own mesh).
func libraryNeuralGrad(t *testing.T, e *NeuralEnsemble, set *BaselineSettings) *ode.Gradient {
	t.Helper()
	prob := e.Problem()
	g, err := ode.Grad(nil, prob, e.Loss(), nil, &ode.Settings{Method: ode.Tsit5, RelTol: set.RelTol, AbsTol: set.AbsTol})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestNeuralCUDAOnHost compiles the hand-written neural kernels as host C++
// with g++ (one trajectory per thread, the network by plain loops), runs
// every thread of both kernels, and checks them against the library on the
// CPU engine: the same accepted and rejected steps on every trajectory, the
// library's final states (within 1e-12) and mesh, the record+adjoint
// kernel's states equal to the forward kernel's, and ode.Grad's gradient
// with respect to the 1,218 weights within 1e-10 (of its largest entry).
func TestNeuralCUDAOnHost(t *testing.T) {
	t.Parallel()
	if unsafe.Sizeof(neuralKernelParams{}) != 56 || unsafe.Offsetof(neuralKernelParams{}.N) != 48 {
		t.Fatalf("neuralKernelParams: %d bytes, N at %d; the kernels' struct has 56 bytes, n at 48",
			unsafe.Sizeof(neuralKernelParams{}), unsafe.Offsetof(neuralKernelParams{}.N))
	}
	exe := buildNeuralHost(t, false)
	for _, tc := range []struct {
		b    int
		rtol float64
	}{
		{5, 1e-4}, {24, 1e-6}, {13, 1e-9},
	} {
		t.Run(fmt.Sprintf("B=%d/rtol=%g", tc.b, tc.rtol), func(t *testing.T) {
			e := ProtocolNeural(tc.b, NeuralSeed)
			set := &BaselineSettings{RelTol: tc.rtol, AbsTol: tc.rtol * 1e-2}
			g := libraryNeuralGrad(t, e, set)
			p, err := newNeuralKernelParams(e, set, g.Mesh.Rows+1)
			if err != nil {
				t.Fatal(err)
			}
			grad, res := runNeuralHost(t, exe, p, e)
			var maxY, maxH float64
			for i, r := range res {
				acc, rej := g.Mesh.Stats.Accepted[i], g.Mesh.Stats.Rejected[i]
				if r.fwdStatus != 0 || r.fwdAcc != acc || r.fwdRej != rej {
					t.Errorf("trajectory %d: kernel status %d, %d accepted, %d rejected; library %d, %d",
						i, r.fwdStatus, r.fwdAcc, r.fwdRej, acc, rej)
					continue
				}
				rel := relErr(r.fwdY[:], g.Solution.Y[2*i:2*i+2])
				maxY = math.Max(maxY, rel)
				if !(rel <= 1e-12) {
					t.Errorf("trajectory %d: kernel y %v, library %v (rel %.2g)", i, r.fwdY, g.Solution.Y[2*i:2*i+2], rel)
				}
				if r.adjStatus != 0 || r.adjAcc != r.fwdAcc || r.adjRej != r.fwdRej || r.adjY != r.fwdY {
					t.Errorf("trajectory %d: record+adjoint status %d, %d/%d steps, y %v; forward %d/%d, y %v",
						i, r.adjStatus, r.adjAcc, r.adjRej, r.adjY, r.fwdAcc, r.fwdRej, r.fwdY)
					continue
				}
				if len(r.h) != g.Mesh.Len[i] {
					t.Errorf("trajectory %d: %d recorded steps, library mesh %d", i, len(r.h), g.Mesh.Len[i])
					continue
				}
				sum := 0.0
				for s, h := range r.h {
					lib := g.Mesh.H[s*g.Mesh.N+i]
					maxH = math.Max(maxH, math.Abs(h-lib)/lib)
					sum += h
				}
				if math.Abs(sum-(e.T1-e.T0)) > 1e-14 {
					t.Errorf("trajectory %d: recorded steps sum to %.17g, want %g", i, sum, e.T1-e.T0)
				}
			}
			// The step sizes follow the error estimate, a sum of nearly
			// cancelling terms whose rounding differs between the kernel
			// (plain arithmetic) and the library (fused multiply-adds).
			if !(maxH <= 1e-5) {
				t.Errorf("recorded step sizes differ from the library's mesh by up to %.2g (relative)", maxH)
			}
			d := maxDiffOfLargest(grad, g.Shared)
			if !(d <= 1e-10) {
				t.Errorf("gradient differs from ode.Grad's by %.2g of its largest entry", d)
			}
			t.Logf("max relative difference: states %.2g, step sizes %.2g; gradient %.2g of its largest entry", maxY, maxH, d)
		})
	}
}

// TestNeuralCUDAWarpSim runs the GPU form of the kernels on a simulated
// warp (testdata/neural_tsit5_host.cpp with GS_WARP_SIM: one warp taking
// every tile of eight trajectories in turn, the tensor-core products as
// fused multiply-add chains in k order, the library's Dot order) and checks
// it against the host form (one trajectory per thread, plain loops): the
// same statuses and steps, the same states and step sizes bit for bit (the
// layers round alike), and the same gradient within 1e-13 of its largest
// entry (its sums run in another order), for batches that fill their last
// tile and that do not, with the warps' accumulators in global memory
// (GS_ACC_GLOBAL, the kernels' default) and in shared memory. By default
// the global-memory form runs on three batches (two tiles, the last
// partly filled; one full tile; one partial tile); -long adds the
// shared-memory form on the batches of 13, 16 (rtol 1e-8) and 3
// trajectories: on two cores its build and runs take half a minute.
func TestNeuralCUDAWarpSim(t *testing.T) {
	t.Parallel()
	host := buildNeuralHost(t, false)
	type simCase struct {
		b    int
		rtol float64
		acc  int // the simulated kernel: 0 shared, 1 global accumulators
	}
	cases := []simCase{{13, 1e-6, 1}, {8, 1e-6, 1}, {3, 1e-5, 1}}
	if *long {
		cases = append(cases, simCase{13, 1e-6, 0}, simCase{16, 1e-8, 0}, simCase{3, 1e-5, 0})
	}
	for _, tc := range cases {
		var sim string
		if tc.acc == 1 {
			sim = buildNeuralHost(t, true, "GS_ACC_GLOBAL=1")
		} else {
			sim = buildNeuralHost(t, true)
		}
		t.Run(fmt.Sprintf("B=%d/rtol=%g/acc=%d", tc.b, tc.rtol, tc.acc), func(t *testing.T) {
			e := ProtocolNeural(tc.b, NeuralSeed)
			set := &BaselineSettings{RelTol: tc.rtol, AbsTol: tc.rtol * 1e-2}
			p, err := newNeuralKernelParams(e, set, 64)
			if err != nil {
				t.Fatal(err)
			}
			wantG, want := runNeuralHost(t, host, p, e)
			gotG, got := runNeuralHost(t, sim, p, e)
			for i := range want {
				w, g := want[i], got[i]
				if g.fwdStatus != w.fwdStatus || g.fwdAcc != w.fwdAcc || g.fwdRej != w.fwdRej || g.fwdY != w.fwdY ||
					g.adjStatus != w.adjStatus || g.adjY != w.adjY || !slices.Equal(g.h, w.h) {
					t.Errorf("trajectory %d: simulated warp %+v, host %+v", i, g, w)
				}
			}
			d := maxDiffOfLargest(gotG, wantG)
			if !(d <= 1e-13) {
				t.Errorf("simulated warp's gradient differs from the host form's by %.2g of its largest entry", d)
			}
			t.Logf("gradient within %.2g of the host form's", d)
		})
	}
}

// TestNeuralCUDAOnHostFailures checks the kernels' statuses: a starved
// step budget gives ode.MaxStepsReached and NaN states, a record buffer
// that is too short its own status, and a failed trajectory adds nothing
// to the gradient.
func TestNeuralCUDAOnHostFailures(t *testing.T) {
	t.Parallel()
	exe := buildNeuralHost(t, false)
	e := ProtocolNeural(3, NeuralSeed)
	p, err := newNeuralKernelParams(e, &BaselineSettings{RelTol: 1e-10, AbsTol: 1e-12, MaxSteps: 3}, 100)
	if err != nil {
		t.Fatal(err)
	}
	grad, res := runNeuralHost(t, exe, p, e)
	for i, r := range res {
		if r.fwdStatus != int(ode.MaxStepsReached) || r.adjStatus != int(ode.MaxStepsReached) ||
			r.fwdAcc+r.fwdRej != 3 || !math.IsNaN(r.fwdY[0]) {
			t.Errorf("trajectory %d, MaxSteps 3: %+v", i, r)
		}
	}
	for k, x := range grad {
		if x != 0 {
			t.Fatalf("gradient entry %d = %v with every trajectory failed, want 0", k, x)
		}
	}
	p, err = newNeuralKernelParams(e, &BaselineSettings{RelTol: 1e-10, AbsTol: 1e-12}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, res = runNeuralHost(t, exe, p, e); res[0].adjStatus != baselineRecordFull || res[0].fwdStatus != int(ode.OK) {
		t.Errorf("one row: forward status %d, record status %d; want %d and %d", res[0].fwdStatus, res[0].adjStatus, ode.OK, baselineRecordFull)
	}
}

// TestNeuralCUDAArgs checks that the entry points reject a network other
// than the protocol's and a bad time span, and, without a GPU, report
// ErrNoCUDA.
func TestNeuralCUDAArgs(t *testing.T) {
	e := ProtocolNeural(4, NeuralSeed)
	other := protocolNeural(4, NeuralSeed, nn.NewMLP([]int{2, 16, 16, 2}, nn.Tanh, nn.Identity))
	if _, err := NeuralTsit5CUDA(nil, other, nil, nil); err == nil || errors.Is(err, ErrNoCUDA) || !strings.Contains(err.Error(), "network") {
		t.Errorf("2-16-16-2 network: err = %v, want an error naming the network", err)
	}
	bad := *e
	bad.T1 = bad.T0
	if err := NeuralGradCUDA(make([]float64, 8), make([]float64, len(e.Weights)), &bad, nil, 10, nil); err == nil || errors.Is(err, ErrNoCUDA) {
		t.Errorf("T1 = T0: err = %v, want an argument error", err)
	}
	if n, err := driver.DeviceCount(); err == nil && n > 0 {
		return
	}
	if _, err := NeuralTsit5CUDA(nil, e, nil, nil); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("NeuralTsit5CUDA without a GPU: err = %v, want ErrNoCUDA", err)
	}
}

// TestCUDABaselinesCompile compiles the hand-written kernels (the neural
// and Lorenz sources, tsit5.cuh in place) with NVRTC for sm_90 (the
// neural kernels' float64 tensor-core products need sm_80 or later) and
// fails on any warning. It needs NVRTC, not a GPU.
func TestCUDABaselinesCompile(t *testing.T) {
	for name, src := range map[string]string{"neural_tsit5.cu": neuralCUDASource, "lorenz_tsit5.cu": lorenzCUDASource} {
		img, err := driver.Compile(src, driver.Arch{Major: 9, Minor: 0}, &driver.CompileSettings{Name: name, NoCache: true})
		if errors.Is(err, driver.ErrNoNVRTC) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.TrimSpace(img.Log) != "" {
			t.Errorf("%s: NVRTC warns:\n%s", name, img.Log)
		}
	}
}

// TestNeuralCUDAGPU runs the hand-written kernels on the GPU with their
// tensor-core layers and checks them against the library on the CPU
// engine: step counts, final states within 1e-10 and the gradient within
// 1e-9 of its largest entry, for a batch that fills whole tiles and one
// that does not. It skips without a GPU.
func TestNeuralCUDAGPU(t *testing.T) {
	if n, err := driver.DeviceCount(); err != nil || n == 0 {
		t.Skip("no GPU")
	}
	for _, b := range []int{4096, 1003} {
		t.Run(fmt.Sprintf("B=%d", b), func(t *testing.T) {
			e := ProtocolNeural(b, NeuralSeed)
			set := &BaselineSettings{RelTol: NeuralRelTol, AbsTol: NeuralAbsTol}
			g := libraryNeuralGrad(t, e, set)
			var cs CUDAStats
			y, err := NeuralTsit5CUDA(nil, e, set, &cs)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			var maxY float64
			for i := range b {
				rel := relErr(y[2*i:2*i+2], g.Solution.Y[2*i:2*i+2])
				maxY = math.Max(maxY, rel)
				if cs.Accepted[i] != g.Mesh.Stats.Accepted[i] || cs.Rejected[i] != g.Mesh.Stats.Rejected[i] || !(rel <= 1e-10) {
					if bad++; bad <= 3 {
						t.Errorf("trajectory %d: kernel %d/%d steps, y %v; library %d/%d, %v", i, cs.Accepted[i], cs.Rejected[i],
							y[2*i:2*i+2], g.Mesh.Stats.Accepted[i], g.Mesh.Stats.Rejected[i], g.Solution.Y[2*i:2*i+2])
					}
				}
			}
			y2 := make([]float64, 2*b)
			grad := make([]float64, len(e.Weights))
			if err := NeuralGradCUDA(y2, grad, e, set, g.Mesh.Rows+1, &cs); err != nil {
				t.Fatal(err)
			}
			d := maxDiffOfLargest(grad, g.Shared)
			if !(d <= 1e-9) {
				t.Errorf("gradient differs from ode.Grad's by %.2g of its largest entry", d)
			}
			t.Logf("B = %d: states within %.2g, gradient within %.2g of the library's; kernels %v", b, maxY, d, cs.Kernel)
		})
	}
}

// TestNeuralCUDAMMARounding runs float64 m8n8k4 tensor-core products on
// random normal matrices and checks that every element equals the chain of
// fused multiply-adds from C in the order k = 0…3, the library's Dot order:
// layers computed this way round as the CPU engine's (on the H200 they do,
// 16,384 of 16,384 elements). It skips without a GPU.
func TestNeuralCUDAMMARounding(t *testing.T) {
	if n, err := driver.DeviceCount(); err != nil || n == 0 {
		t.Skip("no GPU")
	}
	d, _, _, err := neuralKernels()
	if err != nil {
		t.Fatal(err)
	}
	m, _, err := d.Build(neuralCUDASource, &driver.CompileSettings{Name: "neural_tsit5.cu"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := m.Kernel("neural_mma_probe")
	if err != nil {
		t.Fatal(err)
	}
	const warps = 256
	rng := rand.New(rand.NewPCG(7, 7))
	a := make([]float64, warps*32)
	b := make([]float64, warps*32)
	c := make([]float64, warps*64)
	for i := range a {
		a[i] = rng.NormFloat64()
		b[i] = rng.NormFloat64()
	}
	for i := range c {
		c[i] = rng.NormFloat64()
	}
	bufs := make([]*driver.Buffer[float64], 4)
	for i, x := range [][]float64{a, b, c, make([]float64, warps*64)} {
		if bufs[i], err = driver.Alloc[float64](d, len(x)); err != nil {
			t.Fatal(err)
		}
		defer bufs[i].Free()
		if err := bufs[i].Write(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := k.Launch(driver.Linear(32*warps, 128), bufs[0], bufs[1], bufs[2], bufs[3], int32(warps)); err != nil {
		t.Fatal(err)
	}
	got := make([]float64, warps*64)
	if err := bufs[3].Read(got); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for w := range warps {
		for i := range 8 {
			for j := range 8 {
				e := w*64 + i*8 + j
				s := c[e]
				for q := range 4 {
					s = math.FMA(a[w*32+i*4+q], b[w*32+q*8+j], s)
				}
				if got[e] != s {
					if bad++; bad <= 3 {
						t.Errorf("warp %d D[%d][%d] = %.17g, the chain %.17g", w, i, j, got[e], s)
					}
				}
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d elements differ from the fused multiply-add chain k = 0…3", bad, warps*64)
	}
}
