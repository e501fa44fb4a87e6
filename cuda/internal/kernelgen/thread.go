package kernelgen

// The thread layout: one thread per trajectory (thread.cuh). A gradient
// kernel sums each warp's shared-gradient contributions across its lanes
// (gs_warp_add, gs_acc32) and adds them to the block's accumulator in
// shared memory (SharedAcc) or to the result.

// Xpose reports whether the kernel's warps reduce shared gradients (of ns
// entries) by transposing them through shared memory (GS_XPOSE): every
// gradient kernel that sums with atomics. Each warp then has XposeRow·32
// values of dynamic shared memory before the block's accumulator.
func (v Config) Xpose(ns int) bool { return v.Grad && !v.TileSums && !v.Lanes && ns > 0 }

// SharedAcc reports whether the kernel sums the shared gradient (of ns
// entries) in a block's shared memory before adding it to the result,
// else straight into global memory or per tile.
func (v Config) SharedAcc(ns int, prec Precision) bool {
	return v.Grad && !v.TileSums && !v.Lanes && sharedAccumulator(ns, prec)
}

// ThreadBoundsBlock is the block size of a thread kernel's launch bounds
// (Config.ThreadMinBlocks): package cuda's block of the thread layout,
// which launches only shrink.
const ThreadBoundsBlock = 128

// XposeRow is the row stride of a warp's transposition scratch, in values
// (GS_XPOSE_ROW): 33, so that a lane's row and a column fall in distinct
// banks.
const XposeRow = 33

// sharedAccumulator reports whether a kernel reduces a shared gradient
// of ns entries in shared memory (one block's copy of its two halves, at
// most 32 KiB), else directly in global memory.
func sharedAccumulator(ns int, prec Precision) bool {
	return ns > 0 && 2*ns*prec.Size() <= 32<<10
}
