package kernelgen

import (
	"strings"
	"testing"
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
