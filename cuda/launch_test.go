package cuda

import (
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"testing"
)

func TestSpreadBlock(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ threads, block, sms, want int }{
		{4096, 128, 132, 32},     // 128 blocks of 32 instead of 32 of 128
		{65536, 128, 132, 128},   // 512 blocks: every multiprocessor has one
		{16896, 128, 132, 128},   // exactly one block of 128 per multiprocessor
		{16000, 128, 132, 128},   // 125 blocks of 128 → 121.2 per SM → 128
		{8000, 128, 132, 64},     // 61 per multiprocessor, rounded up to a warp
		{10, 128, 132, 32},       // a warp at least
		{4096, 256, 0, 256},      // unknown multiprocessor count
		{4096, 64, 132, 32},      // never more than block
		{1 << 20, 128, 132, 128}, // large grids unchanged
	} {
		got := spreadBlock(c.threads, c.block, c.sms)
		if got != c.want {
			t.Errorf("spreadBlock(%d, %d, %d) = %d, want %d", c.threads, c.block, c.sms, got, c.want)
		}
		if c.sms > 0 && got < c.block && (c.threads+got-1)/got > c.sms && got > 32 {
			t.Errorf("spreadBlock(%d, %d, %d) = %d gives more blocks than multiprocessors", c.threads, c.block, c.sms, got)
		}
	}
}

func TestLaunchShape(t *testing.T) {
	t.Parallel()
	grad, tiles := kernelgen.Config{Grad: true, Adaptive: true}, kernelgen.Config{Grad: true, TileSums: true}
	const scratch = 32 * kernelgen.XposeRow * 8 // one warp's, float64
	for _, c := range []struct {
		name             string
		n, block, sms    int
		v                kernelgen.Config
		ns               int
		prec             Precision
		wantBlock, wantB int
	}{
		// 1,218 weights: a 19,488-byte accumulator and 8,448 bytes per
		// warp fit 48 KiB with 3 warps, so a block of 128 halves to 64.
		{"neural 65536", 65536, 128, 132, grad, 1218, Float64, 64, 2*1218*8 + 2*scratch},
		{"neural 4096", 4096, 128, 132, grad, 1218, Float64, 32, 2*1218*8 + scratch},
		{"float32", 65536, 128, 132, grad, 1218, Float32, 128, 2*1218*4 + 4*scratch/2},
		// No shared parameters: no scratch, no accumulator.
		{"lorenz", 1 << 20, 128, 132, grad, 0, Float64, 128, 0},
		// Tiles sum without atomics: no scratch.
		{"tiles", 65536, 128, 132, tiles, 1218, Float64, 128, 0},
		// A large network: the accumulator is global, the scratch alone.
		{"wide", 65536, 256, 132, grad, 5000, Float64, 128, 4 * scratch},
		{"forward", 65536, 128, 132, kernelgen.Config{Adaptive: true}, 1218, Float64, 128, 0},
	} {
		b, sh := launchShape(c.n, c.block, c.sms, c.v, c.ns, c.prec)
		if b != c.wantBlock || sh != c.wantB {
			t.Errorf("%s: launchShape = %d threads, %d bytes; want %d, %d", c.name, b, sh, c.wantBlock, c.wantB)
		}
		if sh > maxShared {
			t.Errorf("%s: %d bytes of shared memory exceed %d", c.name, sh, maxShared)
		}
	}
}
