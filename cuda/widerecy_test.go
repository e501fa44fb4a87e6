package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestWideRecordYLayout checks Tuning.wideRecY's and wideOutPlace's
// kernels on an H100 (chooseLayout, the large-state suite's Lorenz-96
// gradient, wideBenchGradCase, n = 4,096). At d = 256 a warp's shared
// memory is 20,464 B by default (the reverse sweep's 2,558 reals the
// larger part), 18,712 with the reverse steps' y read from the record
// (kernelgen.Config.WideRecordY: the forward loop's 2,339 now the
// larger), 20,464 with the returned arrays at their outputs alone
// (Config.WideOutInPlace: the forward loop's 1,827, the reverse sweep
// unchanged) and 18,416 with both (the reverse sweep's 2,302); the
// launch bounds 5, 6, 5 and 6 blocks of two warps (10, 12, 10 and 12
// warps a multiprocessor; each caps a thread at 168 registers). At d =
// 64 (16 lanes a trajectory, two a warp) a warp's 10,208 B fall to
// 9,776, 10,208 and 9,184, the bounds at wideMaxMinBlocks throughout.
// Since session 53 (H5) the gradient's record runs the stability probe
// (kernelgen.Config.Probe), whose vector v[d] the forward loop keeps: its
// part grows by d reals (d = 256: 2,339 → 2,595, the larger part by
// default and with wideRecY: 20,760 B and 5 blocks for both; d = 64:
// 10,800 B for both); with wideOutPlace alone the sizes stay, with both
// the probe's scratch (two Jacobian-vector products) and outputs make
// the forward loop the larger part: 18,672 B (d = 256, still 6 blocks)
// and 9,696 B (d = 64).
// The kernel's source passes the record's row to the reverse steps and
// copies no y into their inputs with wideRecY only. It fails if a switch
// does not reach the kernel, its layout or its launch.
func TestWideRecordYLayout(t *testing.T) {
	t.Parallel()
	type want struct {
		per, blocks, warps int // bytes a warp, launch bounds, warps a multiprocessor (a warp a trajectory)
	}
	for _, tc := range []struct {
		d     int
		lanes int
		by    [4]want // default, wideRecY, wideOutPlace, both
	}{
		{256, 32, [4]want{{20760, 5, 10}, {20760, 5, 10}, {20464, 5, 10}, {18672, 6, 12}}},
		{64, 16, [4]want{{10800, wideMaxMinBlocks, 0}, {10800, wideMaxMinBlocks, 0}, {10208, wideMaxMinBlocks, 0}, {9696, wideMaxMinBlocks, 0}}},
	} {
		t.Run(fmt.Sprintf("d=%d", tc.d), func(t *testing.T) {
			t.Parallel()
			c := wideBenchGradCase(4096, tc.d)
			j := jobOf(t, c, ode.OpGrad)
			sp, err := kernelgen.NewStepPrograms(j.Plan)
			if err != nil {
				t.Fatal(err)
			}
			for k, w := range tc.by {
				rec, out := k&1 != 0, k&2 != 0
				v := chooseLayout(kernelgen.ConfigOf(j), j.Plan, sp, layoutJob{n: c.prob.N}, Float64, false, h100, Tuning{wideRecY: rec, wideOutPlace: out})
				if !v.Wide || v.WideRecordY != rec || v.WideOutInPlace != out || v.WideLanesOf() != tc.lanes || v.WideMinBlocks != w.blocks {
					t.Errorf("wideRecY %v, wideOutPlace %v: wide %v, WideRecordY %v, WideOutInPlace %v, %d lanes, bounds %d blocks; want true, %v, %v, %d, %d",
						rec, out, v.Wide, v.WideRecordY, v.WideOutInPlace, v.WideLanesOf(), v.WideMinBlocks, rec, out, tc.lanes, w.blocks)
				}
				src, info, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
				if err != nil {
					t.Fatal(err)
				}
				if info.WideShared != w.per {
					t.Errorf("wideRecY %v, wideOutPlace %v: %d B of shared memory a warp, want %d", rec, out, info.WideShared, w.per)
				}
				passes := strings.Contains(src, "lamo, row + GS_STORE_T);")
				copies := strings.Contains(src, "y[c] = row[GS_STORE_T + c];")
				inPlace := strings.Count(src, ", outputs in place")
				if passes != rec || copies == rec || (inPlace > 0) != out {
					t.Errorf("wideRecY %v, wideOutPlace %v: the driver passes the record's row %v, copies y %v; %d arrays at their outputs", rec, out, passes, copies, inPlace)
				}
				if tc.lanes == kernelgen.LaneWidth {
					warps, on := kernelgen.WideOccupancy(w.per, h100.sharedLimit)
					if on != w.warps || warps != kernelgen.WideWarps {
						t.Errorf("wideRecY %v, wideOutPlace %v: %d warps a multiprocessor in blocks of %d, want %d in blocks of %d", rec, out, on, warps, w.warps, kernelgen.WideWarps)
					}
				}
				t.Logf("d = %d, wideRecY %v, wideOutPlace %v: %d B a warp, %d lanes, bounds %d blocks (a cap of %d registers), %d arrays at their outputs, %d B of source",
					tc.d, rec, out, info.WideShared, v.WideLanesOf(), v.WideMinBlocks, kernelgen.BoundsRegs(kernelgen.WideWarps*kernelgen.LaneWidth, v.WideMinBlocks), inPlace, len(src))
			}
		})
	}
}

// TestHostWideRecordY checks Tuning.wideRecY and wideOutPlace on the
// simulated warp, bit for bit: Lorenz-96's gradient with the record (d =
// 64, five trajectories to t = 0.25 with a save time: the dense step and
// its reverse too) with the reverse steps' y read from the record hashes
// to wideL96Bits (the results of main before session 47, which every
// form since gives) on the default 16 lanes and on a warp, with the
// returned arrays at their outputs, and with both; with both and shared
// parameters at d = 256 (two trajectories, wideSharedCase) it equals
// the default's every result, and so does the solve of d = 64 with the
// arrays at their outputs. It fails if a bit of a result differs.
func TestHostWideRecordY(t *testing.T) {
	needHost(t)
	t.Parallel()
	c := lorenz96Case(5, 64, ode.Tsit5)
	c.prob.T1 = 0.25
	for _, x := range []struct {
		name string
		tun  Tuning
	}{
		{"recy", Tuning{Layout: LayoutWide, wideRecY: true}},
		{"warp-recy", Tuning{Layout: LayoutWide, wideLanes: -1, wideRecY: true}},
		{"outplace", Tuning{Layout: LayoutWide, wideOutPlace: true}},
		{"recy-outplace", Tuning{Layout: LayoutWide, wideRecY: true, wideOutPlace: true}},
	} {
		t.Run(x.name, func(t *testing.T) {
			t.Parallel()
			got := wideResults(t, c, tuned(t, "cuda-host-sim-227k", x.tun), "grad")
			if h := resultBits(got); h != wideL96Bits {
				t.Errorf("%s: %d results hash to %#x, want %#x (main before session 47): a bit changed", x.name, len(got), h, uint64(wideL96Bits))
			}
		})
	}
	t.Run("shared-256", func(t *testing.T) {
		t.Parallel()
		s := wideSharedCase(2, 256)
		s.prob.T1 = min(s.prob.T1, 0.5)
		want := wideResults(t, s, tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide}), "grad")
		got := wideResults(t, s, tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide, wideRecY: true, wideOutPlace: true}), "grad")
		sameWideResults(t, "grad", "y from the record, outputs in place", "default", got, want)
	})
	t.Run("solve-64", func(t *testing.T) {
		t.Parallel()
		want := wideResults(t, c, tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide}), "solve")
		got := wideResults(t, c, tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide, wideOutPlace: true}), "solve")
		sameWideResults(t, "solve", "outputs in place", "default", got, want)
	})
}

// TestGPUWideRecordY is TestHostWideRecordY on the device: Lorenz-96 (d
// = 64 and 256, 1,000 trajectories, the large-state suite's tolerances,
// wideBenchGradCase) with the reverse steps' y read from the record and
// the returned arrays at their outputs (Tuning.wideRecY, wideOutPlace)
// against the default: the solve, the gradient with the record and the
// gradient on the mesh bit for bit (sameRuns). It skips without a GPU.
func TestGPUWideRecordY(t *testing.T) {
	needGPUEngine(t)
	for _, d := range []int{64, 256} {
		c := wideBenchGradCase(1000, d)
		t.Run(fmt.Sprintf("d=%d", d), func(t *testing.T) {
			sameRuns(t, c, c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, wideRecY: true, wideOutPlace: true})), c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide})))
		})
	}
}
