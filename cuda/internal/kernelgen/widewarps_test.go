package kernelgen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestWideTrajLaunch checks the launch of a wide kernel whose
// trajectories run on several warps (Config.WideTrajWarps): a block of
// those warps a trajectory, its shared memory the trajectory's with its
// exchange slots; the trajectories a multiprocessor of an H100 (227 + 1
// KiB) runs by shared memory, at most 32 blocks and 64 warps; none
// without a limit or where a trajectory does not fit.
func TestWideTrajLaunch(t *testing.T) {
	t.Parallel()
	if threads, block, shmem := WideTrajLaunch(100, 2, 20480); threads != 6400 || block != 64 || shmem != 20480 {
		t.Errorf("100 trajectories on 2 warps: %d threads, blocks of %d, %d bytes; want 6400, 64, 20480", threads, block, shmem)
	}
	if threads, block, _ := WideTrajLaunch(3, 4, 1000); threads != 384 || block != 128 {
		t.Errorf("3 trajectories on 4 warps: %d threads, blocks of %d; want 384, 128", threads, block)
	}
	const h100 = 227 << 10
	for _, c := range []struct{ warps, per, limit, want int }{
		{2, 20480, h100, 10}, // Lorenz-96 d = 256's gradient: 228 KiB / 21 KiB
		{4, 20496, h100, 10},
		{2, 5120, h100, 32}, // d = 64: 38 by shared memory, 32 blocks at most
		{4, 5136, h100, 16}, // 64 warps at most
		{8, 5168, h100, 8},
		{2, 20480, 0, 0},        // no limit known (the host)
		{2, 300000, h100, 0},    // nothing fits
		{2, 20480, 48 << 10, 2}, // 49 KiB / 21 KiB
	} {
		if got := WideTrajOccupancy(c.warps, c.per, c.limit); got != c.want {
			t.Errorf("%d warps, %d B a trajectory, limit %d: %d trajectories a multiprocessor, want %d", c.warps, c.per, c.limit, got, c.want)
		}
	}
	if WideExchange(1) != 0 || WideExchange(4) != 4 {
		t.Errorf("exchange slots: %d on a warp, %d on 4; want 0, 4", WideExchange(1), WideExchange(4))
	}
}

// TestWideWarpsOf checks Config.WideWarpsOf and its part of the other
// lane and block counts and of Key: powers of two from 2 to
// WideMaxTrajWarps are taken, others give 1; on several warps a
// trajectory takes whole warps (WideLanesOf 32, WideLanes ignored), a
// block is the trajectory's warps, the key names them, and the prelude
// defines GS_WIDE_WARPS, not GS_WIDE_LANES.
func TestWideWarpsOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		w    int8
		want int
	}{{0, 1}, {1, 1}, {2, 2}, {3, 1}, {4, 4}, {8, 8}, {16, 1}, {-2, 1}} {
		v := Config{Wide: true, WideTrajWarps: c.w, WideLanes: 8}
		if got := v.WideWarpsOf(); got != c.want {
			t.Errorf("WideTrajWarps %d: %d warps, want %d", c.w, got, c.want)
		}
		lanes, block, defs := 8, WideWarps, "GS_WIDE_LANES 8"
		if c.want > 1 {
			lanes, block, defs = LaneWidth, c.want, "GS_WIDE_WARPS "
		}
		if v.WideLanesOf() != lanes || v.WideBlockWarps() != block {
			t.Errorf("WideTrajWarps %d: %d lanes, blocks of %d warps; want %d, %d", c.w, v.WideLanesOf(), v.WideBlockWarps(), lanes, block)
		}
		if d := strings.Join(v.preludeDefines(0), "\n"); !strings.Contains(d, defs) {
			t.Errorf("WideTrajWarps %d: defines %q, want %q", c.w, d, defs)
		}
		if k := v.Key(); strings.Contains(k, "widewarps") != (c.want > 1) {
			t.Errorf("WideTrajWarps %d: key %q", c.w, k)
		}
	}
}

// TestWideWarpsSameFunctions checks that a kernel on several warps a
// trajectory (Config.WideTrajWarps) is the one-warp kernel's text but
// for its define of GS_WIDE_WARPS, its helper (wideWarpsHelper for
// wideHelper), its key and its entry: the same wide functions and
// driver, for Lorenz-96 (d = 64 and 256, Tsit5), a solve's and a
// record's kernel (a gradient's needs a loss: package cuda's
// TestHostWideWarps runs those), with and without launch bounds.
func TestWideWarpsSameFunctions(t *testing.T) {
	t.Parallel()
	for _, d := range []int{64, 256} {
		pl := widePlan(t, d, ode.Tsit5)
		sp, err := NewStepPrograms(pl)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range []bool{false, true} {
			for _, bounds := range []int{0, 10} {
				v := Config{Adaptive: true, Wide: true, RowMajor: true, WideRows: true, Store: rec, MeshOut: rec, WideMinBlocks: bounds}
				one, _, err := KernelSource(sp, v, nil, Float64)
				if err != nil {
					t.Fatal(err)
				}
				v.WideTrajWarps = 2
				two, info, err := KernelSource(sp, v, nil, Float64)
				if err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("d = %d, record %v, bounds %d", d, rec, bounds)
				if !strings.Contains(two, wideWarpsHelper) || strings.Contains(two, wideHelper) || !strings.Contains(one, wideHelper) {
					t.Fatalf("%s: the helpers are not wideHelper on a warp and wideWarpsHelper on two", what)
				}
				// The kernels' text up to the entry, the key's line aside.
				cut := func(src string) string {
					src = strings.Replace(src, "#define GS_WIDE_WARPS 2\n", "", 1)
					src = strings.Replace(src, wideWarpsHelper, wideHelper, 1)
					src = strings.Replace(src, "widewarps2 ", "", 1)
					at := strings.Index(src, "\n// A block of 2 warps")
					if at < 0 {
						t.Fatalf("%s: no entry's comment", what)
					}
					return src[:at]
				}
				if a, b := cut(one), cut(two); a != b {
					i := 0
					for i < min(len(a), len(b)) && a[i] == b[i] {
						i++
					}
					t.Errorf("%s: the kernels differ before the entry, at byte %d: %q against %q", what, i, a[i:min(len(a), i+80)], b[i:min(len(b), i+80)])
				}
				if !strings.Contains(two, "gs_real* ws = gs_smem + GS_WIDE_WARPS;") || !strings.Contains(two, "for (long long i = blockIdx.x; i < a.n; i += gridDim.x)") {
					t.Errorf("%s: the entry does not run a trajectory a block after the exchange slots", what)
				}
				if bounds > 0 && !strings.Contains(two, fmt.Sprintf("__launch_bounds__(2 * 32, %d)", bounds)) {
					t.Errorf("%s: no launch bounds of blocks of 2 warps", what)
				}
				per, err := sp.WideSharedPerWarpFor(v)
				if err != nil {
					t.Fatal(err)
				}
				if info.WideShared != per+8*WideExchange(2) {
					t.Errorf("%s: KernelInfo.WideShared %d, want the trajectory's %d and its slots' 16", what, info.WideShared, per)
				}
			}
		}
	}
}
