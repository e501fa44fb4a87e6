package bench

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/internal/refode"
	"github.com/gradsolve-go/gradsolve/ode"
)

// hostLorenzResult is one trajectory's output of the host harness.
type hostLorenzResult struct {
	fwdStatus, fwdAcc, fwdRej int
	fwdY                      [3]float64
	adjStatus, adjAcc, adjRej int
	adjY                      [3]float64
	drho                      float64
	h                         []float64
}

// buildLorenzHost compiles the embedded kernels with the host harness
// testdata/lorenz_tsit5_host.cpp and returns the executable's path (built
// once per test process). It skips the test when g++ is not installed.
func buildLorenzHost(t *testing.T) string {
	t.Helper()
	// No contraction into fused multiply-adds: the harness then rounds as
	// the Go baseline does.
	return buildHost(t, "lorenz_host", "lorenz_tsit5.cu", lorenzCUDASource, "lorenz_tsit5_host.cpp",
		"-std=c++17", "-O2", "-ffp-contract=off", "-Wall", "-Wextra", "-Werror")
}

// runLorenzHost runs the harness on the kernel parameters p and ρ values
// rho and parses its output.
func runLorenzHost(t *testing.T, exe string, p lorenzKernelParams, rho []float64) []hostLorenzResult {
	t.Helper()
	var in bytes.Buffer
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	fmt.Fprintf(&in, "%d %d %d\n", p.N, p.Rows, p.MaxSteps)
	fmt.Fprintln(&in, g(p.Sigma), g(p.Beta), g(p.Y0[0]), g(p.Y0[1]), g(p.Y0[2]), g(p.T0), g(p.T1), g(p.RelTol), g(p.AbsTol))
	for _, r := range rho {
		fmt.Fprintln(&in, g(r))
	}
	cmd := exec.Command(exe)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(rho) {
		t.Fatalf("harness printed %d lines for %d trajectories", len(lines), len(rho))
	}
	res := make([]hostLorenzResult, len(rho))
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) < 15 {
			t.Fatalf("harness line %d: %q", i, l)
		}
		num := func(k int) float64 {
			v, err := strconv.ParseFloat(f[k], 64)
			if err != nil {
				t.Fatalf("harness line %d field %d: %v", i, k, err)
			}
			return v
		}
		r := &res[i]
		r.fwdStatus, r.fwdAcc, r.fwdRej = int(num(1)), int(num(2)), int(num(3))
		r.fwdY = [3]float64{num(4), num(5), num(6)}
		r.adjStatus, r.adjAcc, r.adjRej = int(num(7)), int(num(8)), int(num(9))
		r.adjY = [3]float64{num(10), num(11), num(12)}
		r.drho = num(13)
		for k := 14; k < len(f); k++ {
			r.h = append(r.h, num(k))
		}
	}
	return res
}

// TestLorenzCUDAOnHost compiles the hand-written CUDA kernels as host C++
// with g++, runs every thread of both kernels in a loop, and checks them:
// the forward kernel takes the steps of LorenzTsit5 (the same accepted and
// rejected counts, final states within 1e-11); the record+adjoint kernel
// gives the forward kernel's states bitwise, records a mesh that ends on
// T1 and has the library's step counts, and gives the library's dL/dρ
// (ode.Grad on its own mesh) within 1e-8 and, at rtol 1e-10, refode's
// forward sensitivities within 1e-7.
func TestLorenzCUDAOnHost(t *testing.T) {
	t.Parallel()
	if unsafe.Sizeof(lorenzKernelParams{}) != 88 || unsafe.Offsetof(lorenzKernelParams{}.N) != 80 {
		t.Fatalf("lorenzKernelParams: %d bytes, N at %d; the kernels' struct has 88 bytes, n at 80",
			unsafe.Sizeof(lorenzKernelParams{}), unsafe.Offsetof(lorenzKernelParams{}.N))
	}
	exe := buildLorenzHost(t)
	for _, tc := range []struct {
		n    int
		rtol float64
	}{
		{16, 1e-3}, {33, 1e-4}, {64, 1e-6}, {100, 1e-8}, {20, 1e-10},
	} {
		t.Run(fmt.Sprintf("n=%d/rtol=%g", tc.n, tc.rtol), func(t *testing.T) {
			e := ProtocolLorenz(tc.n)
			set := &BaselineSettings{RelTol: tc.rtol, AbsTol: tc.rtol * 1e-3}
			var st BaselineStats
			want, err := LorenzTsit5(nil, e, set, &st)
			if err != nil {
				t.Fatal(err)
			}
			prob := e.Problem()
			g, err := ode.Grad(nil, prob, ode.SumSquares(), nil, &ode.Settings{Method: ode.Tsit5, RelTol: set.RelTol, AbsTol: set.AbsTol})
			if err != nil {
				t.Fatal(err)
			}
			p, err := newLorenzKernelParams(e, set, g.Mesh.Rows+1)
			if err != nil {
				t.Fatal(err)
			}
			res := runLorenzHost(t, exe, p, e.Rho)
			var maxY, maxH, maxG float64
			for i, r := range res {
				if r.fwdStatus != 0 || r.fwdAcc != st.Accepted[i] || r.fwdRej != st.Rejected[i] {
					t.Errorf("trajectory %d: kernel status %d, %d accepted, %d rejected; baseline %d, %d",
						i, r.fwdStatus, r.fwdAcc, r.fwdRej, st.Accepted[i], st.Rejected[i])
					continue
				}
				rel := relErr(r.fwdY[:], want[3*i:3*i+3])
				maxY = math.Max(maxY, rel)
				if !(rel <= 1e-11) {
					t.Errorf("trajectory %d: kernel %v, baseline %v (rel %.2g)", i, r.fwdY, want[3*i:3*i+3], rel)
				}
				if r.adjStatus != 0 || r.adjAcc != r.fwdAcc || r.adjRej != r.fwdRej || r.adjY != r.fwdY {
					t.Errorf("trajectory %d: record+adjoint status %d, %d/%d steps, y %v; forward %d/%d steps, y %v",
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
				if tc.rtol <= 1e-10 {
					// Independently of the library: the forward
					// sensitivities of refode, ∂/∂ρ Σ‖y(1)‖² = 2·y·∂y/∂ρ.
					yr, dydp, _ := refode.LorenzRef([3]float64{e.Sigma, e.Rho[i], e.Beta}, e.Y0, e.T1)
					var sens, scale float64
					for c := range 3 {
						sens += 2 * yr[c] * dydp[c][1]
						scale += 2 * math.Abs(yr[c]*dydp[c][1])
					}
					if math.Abs(r.drho-sens) > 1e-7*scale {
						t.Errorf("trajectory %d (ρ = %g): kernel dL/dρ = %.12g, forward sensitivities %.12g", i, e.Rho[i], r.drho, sens)
					}
				}
				want := g.P[3*i+1]
				d := math.Abs(r.drho-want) / math.Max(math.Abs(want), 1e-300)
				maxG = math.Max(maxG, d)
				if !(d <= 1e-8) {
					t.Errorf("trajectory %d (ρ = %g): kernel dL/dρ = %.15g, ode.Grad %.15g (rel %.2g)", i, e.Rho[i], r.drho, want, d)
				}
			}
			// The step sizes follow the error estimate, a sum of nearly
			// cancelling terms whose rounding differs between the kernel
			// (plain arithmetic) and the library (fused multiply-adds): at
			// rtol 1e-10 they differ by up to 5e-4 relative, the states by
			// 4e-15.
			if !(maxH <= 1e-3) {
				t.Errorf("recorded step sizes differ from the library's mesh by up to %.2g (relative)", maxH)
			}
			t.Logf("max relative difference: states %.2g, step sizes %.2g, dL/dρ %.2g", maxY, maxH, maxG)
		})
	}
}

// TestLorenzCUDAOnHostFailures checks the kernels' statuses: a starved step
// budget gives ode.MaxStepsReached (as LorenzTsit5) and NaN results, and a
// record buffer that is too short gives its own status.
func TestLorenzCUDAOnHostFailures(t *testing.T) {
	t.Parallel()
	exe := buildLorenzHost(t)
	e := ProtocolLorenz(4)
	p, err := newLorenzKernelParams(e, &BaselineSettings{RelTol: 1e-8, AbsTol: 1e-11, MaxSteps: 5}, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runLorenzHost(t, exe, p, e.Rho) {
		if r.fwdStatus != int(ode.MaxStepsReached) || r.adjStatus != int(ode.MaxStepsReached) ||
			r.fwdAcc+r.fwdRej != 5 || !math.IsNaN(r.fwdY[0]) || !math.IsNaN(r.drho) {
			t.Errorf("trajectory %d, MaxSteps 5: %+v", i, r)
		}
	}
	p, err = newLorenzKernelParams(e, &BaselineSettings{RelTol: 1e-6, AbsTol: 1e-9}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runLorenzHost(t, exe, p, e.Rho) {
		if r.fwdStatus != int(ode.OK) || r.adjStatus != baselineRecordFull || r.adjAcc != 10 || !math.IsNaN(r.drho) {
			t.Errorf("trajectory %d, 10 rows: forward status %d, record status %d, %d accepted, dL/dρ %v",
				i, r.fwdStatus, r.adjStatus, r.adjAcc, r.drho)
		}
	}
}

// TestLorenzCUDANoGPU checks that, without a GPU, the GPU entry points
// validate their arguments and then report ErrNoCUDA.
func TestLorenzCUDANoGPU(t *testing.T) {
	if n, err := driver.DeviceCount(); err == nil && n > 0 {
		t.Skip("a GPU is present")
	}
	e := ProtocolLorenz(3)
	if _, err := LorenzTsit5CUDA(nil, e, nil, nil); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("LorenzTsit5CUDA: err = %v, want ErrNoCUDA", err)
	}
	if err := LorenzGradCUDA(make([]float64, 9), make([]float64, 3), e, nil, 64, nil); !errors.Is(err, ErrNoCUDA) {
		t.Errorf("LorenzGradCUDA: err = %v, want ErrNoCUDA", err)
	}
	bad := *e
	bad.T1 = bad.T0
	if _, err := LorenzTsit5CUDA(nil, &bad, nil, nil); err == nil || errors.Is(err, ErrNoCUDA) {
		t.Errorf("LorenzTsit5CUDA with T1 = T0: err = %v, want an argument error", err)
	}
}

// TestLorenzCUDAGPU runs the hand-written kernels on the GPU: the forward
// kernel takes LorenzTsit5's steps (final states within 1e-11), the
// record+adjoint kernel gives ode.Grad's dL/dρ within 1e-8. It skips
// without a GPU.
func TestLorenzCUDAGPU(t *testing.T) {
	if n, err := driver.DeviceCount(); err != nil || n == 0 {
		t.Skip("no GPU")
	}
	e := ProtocolLorenz(4096)
	set := &BaselineSettings{RelTol: 1e-8, AbsTol: 1e-11}
	var st BaselineStats
	want, err := LorenzTsit5(nil, e, set, &st)
	if err != nil {
		t.Fatal(err)
	}
	var cs CUDAStats
	got, err := LorenzTsit5CUDA(nil, e, set, &cs)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := range e.Rho {
		if cs.Accepted[i] != st.Accepted[i] || cs.Rejected[i] != st.Rejected[i] || !(relErr(got[3*i:3*i+3], want[3*i:3*i+3]) <= 1e-11) {
			if bad++; bad <= 3 {
				t.Errorf("trajectory %d: kernel %d/%d steps, y %v; baseline %d/%d, %v", i, cs.Accepted[i], cs.Rejected[i],
					got[3*i:3*i+3], st.Accepted[i], st.Rejected[i], want[3*i:3*i+3])
			}
		}
	}
	prob := e.Problem()
	g, err := ode.Grad(nil, prob, ode.SumSquares(), nil, &ode.Settings{Method: ode.Tsit5, RelTol: set.RelTol, AbsTol: set.AbsTol})
	if err != nil {
		t.Fatal(err)
	}
	y := make([]float64, 3*len(e.Rho))
	drho := make([]float64, len(e.Rho))
	if err := LorenzGradCUDA(y, drho, e, set, g.Mesh.Rows+1, &cs); err != nil {
		t.Fatal(err)
	}
	for i, d := range drho {
		want := g.P[3*i+1]
		if r := math.Abs(d-want) / math.Max(math.Abs(want), 1e-300); !(r <= 1e-8) {
			if bad++; bad <= 6 {
				t.Errorf("trajectory %d: kernel dL/dρ = %v, ode.Grad %v (rel %.2g)", i, d, want, r)
			}
		}
	}
	t.Logf("record+adjoint kernel: %v", cs.Kernel)
}
