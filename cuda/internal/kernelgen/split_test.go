package kernelgen

import (
	"fmt"
	"testing"
)

// occupancyBlocks returns the blocks of threads threads that a
// multiprocessor of compute capability 7.0-9.0 runs at once by its
// registers, each thread using regs: the CUDA occupancy calculator's
// count, per quarter of the register file (16 Ki registers), a warp's
// registers allocated in units of 256.
func occupancyBlocks(threads, regs int) int {
	warpRegs := (regs*32 + 255) / 256 * 256
	perQuarter := (16 << 10) / warpRegs
	warps := (threads + 31) / 32
	return 4 * perQuarter / warps
}

// TestBoundsRegs: the register cap of launch bounds is the most
// registers (a multiple of 8, at most 255) with which the occupancy
// calculator runs the bounds' blocks, and matches what ptxas gave the wide
// kernels' bounds on an H100 (session 42, BenchmarkGPUWideRegs: 6
// blocks of two warps 168 registers, 7 blocks 128; the link of a kernel
// in parts: "entry function 'gs_engine' with max regcount of 128" at 7).
func TestBoundsRegs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ threads, blocks, want int }{{64, 6, 168}, {64, 7, 128}, {64, 0, 0}} {
		if got := BoundsRegs(tc.threads, tc.blocks); got != tc.want {
			t.Errorf("BoundsRegs(%d, %d) = %d, ptxas gave %d", tc.threads, tc.blocks, got, tc.want)
		}
	}
	for _, threads := range []int{32, 64, 96, 128, 256} {
		for blocks := 1; blocks*threads <= 2048; blocks++ {
			r := BoundsRegs(threads, blocks)
			if r%8 != 0 && r != 255 || r > 255 || r < 8 {
				t.Errorf("BoundsRegs(%d, %d) = %d: not a multiple of 8 up to 255", threads, blocks, r)
				continue
			}
			if got := occupancyBlocks(threads, r); got < blocks {
				t.Errorf("BoundsRegs(%d, %d) = %d runs %d blocks", threads, blocks, r, got)
			}
			if r < 248 && occupancyBlocks(threads, r+8) >= blocks {
				t.Errorf("BoundsRegs(%d, %d) = %d: %d registers run the blocks too", threads, blocks, r, r+8)
			}
		}
	}
}

// TestUnitRegs: a wide kernel's units are capped at its launch bounds'
// registers, a kernel without bounds not at all.
func TestUnitRegs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    Config
		want int
	}{
		{Config{Wide: true, WideMinBlocks: 7}, 128},
		{Config{Wide: true, WideMinBlocks: 5}, 168},
		{Config{Wide: true}, 0},
		{Config{}, 0},
		{Config{ThreadMinBlocks: 4}, 128}, // a thread kernel's bounds: blocks of ThreadBoundsBlock
		{Config{ThreadMinBlocks: 8}, 64},
		{Config{Lanes: true, ThreadMinBlocks: 4}, 0}, // (lanes kernels never split)
	} {
		if got := tc.v.UnitRegs(); got != tc.want {
			t.Errorf("%s: UnitRegs = %d, want %d", fmt.Sprintf("wide %t, lanes %t, %d wide blocks, %d thread blocks", tc.v.Wide, tc.v.Lanes, tc.v.WideMinBlocks, tc.v.ThreadMinBlocks), got, tc.want)
		}
	}
}
