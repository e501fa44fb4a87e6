package cuda

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestWideRecordYLayout checks Tuning.wideRecY's kernel on an H100
// (chooseLayout, the large-state suite's Lorenz-96 gradient,
// wideBenchGradCase, n = 4,096): at d = 256 the reverse steps read y
// from the record (kernelgen.Config.WideRecordY), a warp's shared
// memory falls from 20,464 to 18,712 B and the launch bounds rise from 5
// to 6 blocks of two warps (12 warps a multiprocessor, not 10; either
// caps a thread at 168 registers); at d = 64 (16 lanes a trajectory, two
// a warp) a warp's 10,208 B fall to 9,776 and the bounds stay at
// wideMaxMinBlocks; by default none of it. The kernel's source
// then passes the record's row to the reverse step and copies no y into
// its inputs. It fails if the switch does not reach the kernel, its
// layout or its launch.
func TestWideRecordYLayout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d                   int
		per, recPer         int // bytes a warp
		blocks, recBlocks   int // launch bounds
		warps, recWarps     int // a multiprocessor's
		lanes               int
		srcDefault, srcRecY bool
	}{
		{d: 256, per: 20464, recPer: 18712, blocks: 5, recBlocks: 6, warps: 10, recWarps: 12, lanes: 32},
		{d: 64, per: 10208, recPer: 9776, blocks: wideMaxMinBlocks, recBlocks: wideMaxMinBlocks, lanes: 16},
	} {
		t.Run(fmt.Sprintf("d=%d", tc.d), func(t *testing.T) {
			t.Parallel()
			c := wideBenchGradCase(4096, tc.d)
			j := jobOf(t, c, ode.OpGrad)
			sp, err := kernelgen.NewStepPrograms(j.Plan)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range []bool{false, true} {
				v := chooseLayout(kernelgen.ConfigOf(j), j.Plan, sp, layoutJob{n: c.prob.N}, Float64, false, h100, Tuning{wideRecY: rec})
				per, blocks := tc.per, tc.blocks
				if rec {
					per, blocks = tc.recPer, tc.recBlocks
				}
				if !v.Wide || v.WideRecordY != rec || v.WideLanesOf() != tc.lanes || v.WideMinBlocks != blocks {
					t.Errorf("wideRecY %v: wide %v, WideRecordY %v, %d lanes, bounds %d blocks; want true, %v, %d, %d", rec, v.Wide, v.WideRecordY, v.WideLanesOf(), v.WideMinBlocks, rec, tc.lanes, blocks)
				}
				src, info, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
				if err != nil {
					t.Fatal(err)
				}
				if info.WideShared != per {
					t.Errorf("wideRecY %v: %d B of shared memory a warp, want %d", rec, info.WideShared, per)
				}
				passes := strings.Contains(src, "lamo, row + GS_STORE_T);")
				copies := strings.Contains(src, "y[c] = row[GS_STORE_T + c];")
				if passes != rec || copies == rec {
					t.Errorf("wideRecY %v: the driver passes the record's row %v, copies y %v", rec, passes, copies)
				}
				if tc.lanes == kernelgen.LaneWidth {
					warps, on := kernelgen.WideOccupancy(per, h100.sharedLimit)
					want := tc.warps
					if rec {
						want = tc.recWarps
					}
					if on != want || warps != kernelgen.WideWarps {
						t.Errorf("wideRecY %v: %d warps a multiprocessor in blocks of %d, want %d in blocks of %d", rec, on, warps, want, kernelgen.WideWarps)
					}
				}
				t.Logf("d = %d, wideRecY %v: %d B a warp, %d lanes, bounds %d blocks (a cap of %d registers), %d B of source",
					tc.d, rec, info.WideShared, v.WideLanesOf(), v.WideMinBlocks, kernelgen.BoundsRegs(kernelgen.WideWarps*kernelgen.LaneWidth, v.WideMinBlocks), len(src))
			}
		})
	}
}

// TestHostWideRecordY checks Tuning.wideRecY on the simulated warp, bit
// for bit: Lorenz-96's gradient with the record (d = 64, five
// trajectories to t = 0.25 with a save time: the dense step's reverse
// too) with the reverse steps' y read from the record hashes to
// wideL96Bits (the results of main before session 47, which every form
// since gives) on the default 16 lanes and on a warp, and with shared
// parameters at d = 256 (two trajectories, wideSharedCase) equals the
// default's every result. It fails if a bit of a result differs.
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
		got := wideResults(t, s, tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide, wideRecY: true}), "grad")
		sameWideResults(t, "grad", "y from the record", "default", got, want)
	})
}
