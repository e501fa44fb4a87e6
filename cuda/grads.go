package cuda

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"runtime"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// A gradient's per-trajectory results kept on the device
// (ode.Settings.KeepGrads, issue 25: copied to the host only when the
// caller reads them). A gradient run whose job asks for it, on an engine
// that keeps meshes (float64, one device), with its recorded mesh kept
// there too, launches all its trajectories at once into an arena as any
// run, but the kernel writes the results that a call without KeepGrads
// copies back (the download region: dL/dy0, dL/dp, statuses, counts,
// flags, times, event counts, and the states unless Job.Omit leaves them
// out) straight into a device allocation of their own (residentGrads:
// argAddr gives the kernel their addresses there, keptSpans lays them
// out, in the ranges a copy back would take, each 256-byte aligned);
// then, in the same batch, the gradients' check kernel (grads.cuh) reduces
// the statuses, flags and gradients to two words: whether any trajectory
// is ill (a status other than OK, a stiffness, overflow or tangential
// crossing flag) or any gradient value or loss term is not finite, and
// the most accepted steps (the recorded mesh's rows), and sums the loss
// terms exactly into limbs (grads.cuh; gradsSum rounds them once: the
// loss is the terms' exact sum correctly rounded, within the in-order
// sum's rounding of the loss without KeepGrads). Only the words, the
// limbs and the shared gradient's sums come back.
// Where the words say all is well the run's Result holds the kept
// results in Grads, its per-trajectory arrays unwritten; the Fill of
// ode.ResidentGrads copies the kept bytes back and runs the same scatter
// over them (scatter, with the loss terms and shared sums left out), so
// the arrays are those of a call without KeepGrads bit for bit. Where
// they do not, the run copies the results back from the arena at once
// and scatters them as without KeepGrads: a failure's error is the same.
// A run split into several launches, a loss with events and save times
// (pastTerminal reads the saves) and a mesh whose steps come back to the
// host return everything as before.

// gradsCuh is the gradients' check kernel's template (after the prelude).
//
//go:embed grads.cuh
var gradsCuh string

// gradsKernelName is the gradients' check kernel's name (grads.cuh).
const gradsKernelName = "gs_g_check"

// Words of struct gs_gargs (grads.cuh), in order.
const (
	gwN = iota
	gwNY
	gwNP
	gwMask
	gwStatus // the first pointer
	gwFlags
	gwAcc
	gwGY0
	gwGP
	gwLoss
	gwOut
	gwSums // the check's accumulators (gs_gargs.sums)
	numGradsWords
)

// gradsLimbs is the check's limbs of the loss terms' exact sum
// (GS_G_LIMBS of grads.cuh; gradsSum), gradsTail the bytes of the check's
// words and limbs after the kept results.
const (
	gradsLimbs = 66
	gradsTail  = 8 + 8*gradsLimbs
)

// gradsAccBytes is the bytes of the check's accumulators (GS_G_SUMS of
// grads.cuh: the words and limbs, and the count of its blocks done), at
// the end of a kept gradient's memory (gradsAccAt), 0 between launches of
// the check: the last block to finish moves the sums to the words after
// the kept results and zeroes them, so that a launch need not zero the
// words first (Tuning.checkMemset, the way before session 48, does).
const gradsAccBytes = gradsTail + 8

// gradsAccAt returns the offset of the check's accumulators in a kept
// gradient's memory of bytes bytes: at its end, the same for every launch
// into it whatever the size of its results.
func gradsAccAt(bytes int64) int64 { return (bytes - gradsAccBytes) &^ 7 }

// gradsThreads is the check kernel's threads per block, gradsBlocks the
// most blocks of a launch (each thread loops over the trajectories).
const (
	gradsThreads = 256
	gradsBlocks  = 1024
)

// gradsIll is the check's bit of an ill trajectory, gradsNonFinite that
// of a gradient value that is not finite, gradsLossNonFinite that of a
// loss term that is not finite (grads.cuh).
const (
	gradsIll           = 1
	gradsNonFinite     = 2
	gradsLossNonFinite = 4
)

// gradsKernel returns the gradients' check kernel of ex's backend,
// compiling it on first use.
func (ex *executor) gradsKernel() (backendKernel, error) {
	return ex.auxKernel(gradsKernelName, "gradients' check kernel", func() string {
		defs := fmt.Sprintf("#define GS_G_OK %d\n", ode.OK)
		if ex.tun.checkLaneAtomics {
			defs += "#define GS_G_LANE_ATOMICS 1\n"
		}
		return defs + kernelgen.Prelude() + gradsCuh
	})
}

// keepsGrads reports whether a run of kind v for job j may keep its
// per-trajectory results on the device (Job.KeepGrads; the whole run then
// needs one launch, which pass decides, and a recorded mesh kept on the
// device).
func (ex *executor) keepsGrads(j *ode.Job, v kernelgen.Config) bool {
	return j.KeepGrads && j.Op == ode.OpGrad && v.Grad && ex.keepsMeshes() && !(v.Events && v.Saves > 0)
}

// residentGrads holds a gradient run's per-trajectory results in device
// memory (ode.ResidentGrads, ode.Settings.KeepGrads): the bytes of the
// launch's download region at the offsets at of the staging buffer
// (size bytes), then the check's two int32 words and its limbs
// (gradsTail bytes). Fill copies them back and scatters them into the
// run's Result. The memory goes back with
// Release or once the handle is unreachable.
type residentGrads struct {
	residentBlock
	r    *run  // the run whose Result Fill writes (nil once filled)
	size int64 // bytes of the kept results
	l    layout
	at   [numArgs]int64
	g    []int // the launch's trajectories
	rows int
	// accZero: the check's accumulators (gradsAccAt) are 0, as the
	// check leaves them; false for new memory and after a batch that
	// failed (the launch then zeroes them first).
	accZero bool
}

var _ ode.ResidentGrads = (*residentGrads)(nil)

// gradsWordsAt returns the offset of the check's words (then its limbs)
// in a block that keeps size bytes of results.
func gradsWordsAt(size int64) int64 { return (size + 7) &^ 7 }

// keepGrads gives the run device memory for the results of a launch of
// all its trajectories (size bytes): the kept results of the Result
// passed back (Job.Reuse) where they are the device's and large enough,
// else a new allocation. It reports whether it has them.
func (r *run) keepGrads(size int64) bool {
	need := gradsWordsAt(size) + gradsTail + gradsAccBytes + 8
	if old := r.j.Reuse; old != nil {
		if k, ok := old.Grads.(*residentGrads); ok && !k.Released() && k.ex.be == r.ex.be && k.mem.bytes >= need {
			if o := k.r; o != nil && o != r {
				// The run of the results written over is done with: its
				// scratch serves a later call (giveRun), so that repeated
				// kept calls make no new run each.
				o.ex.giveRun(o)
			}
			k.r, k.ex = nil, r.ex // its old Result is written over
			r.gout = k
			return true
		}
	}
	if _, err := r.ex.gradsKernel(); err != nil {
		return false
	}
	b, err := newResidentBlock(r.ex, need)
	if err != nil {
		return false
	}
	k := &residentGrads{residentBlock: b}
	runtime.AddCleanup(k, (*deviceBlock).free, k.mem)
	r.gout = k
	return true
}

// dropGrads gives up keeping the results on the device (the memory goes
// back unless it is the Result's passed back, which package ode
// releases).
func (r *run) dropGrads() {
	if r.gout == nil {
		return
	}
	if old := r.j.Reuse; old == nil || old.Grads != ode.ResidentGrads(r.gout) {
		r.gout.Release()
	}
	r.gout = nil
}

// keptGrads reports whether the launch in layout l keeps its results: a
// run with kept results (gout) whose mesh, if it records one, stays on
// the device with its event marks.
func (r *run) keptGrads(l *layout) bool {
	return r.gout != nil && (!r.v.MeshOut || r.hout != nil) && l.off[argEvOut] < 0 && l.off[argHout] < 0
}

// keptAlign is the alignment of each range of a kept gradient's results
// in their device memory: the arena's arrays' (layout).
const keptAlign = 256

// keptSpans returns the ranges of the download region of a launch in
// layout l that a run keeps on the device (downloaded), appended to sp,
// where each array lies in the kept results' memory (each range at a
// multiple of keptAlign: spansAligned) and the bytes they take. The
// kernel writes them there itself (argAddr), Fill copies them back in
// one copy.
func (r *run) keptSpans(sp []span, l *layout) ([]span, [numArgs]int64, int64) {
	return l.spansAligned(sp, r.downloaded, keptAlign)
}

// argAddr returns the device address of array a of the launch in layout
// l on arena ar (0 if it has none): the kept saves' memory for the saved
// states kept component-major (r.sout.cols, saves.go); in the kept
// results (r.gout, at the scratch's keptAt) where the launch writes its
// results there (keptLaunch) and a is one the run keeps (downloaded),
// else in the arena.
func (r *run) argAddr(ar *arena, l *layout, a int) uint64 {
	switch {
	case a == argYs && r.sout != nil && r.sout.cols:
		return r.sout.mem.addr // kept on the device, written in place (saves.go)
	case l.off[a] < 0:
		return 0
	case r.keptLaunch && r.downloaded(a):
		return r.gout.mem.addr + uint64(r.sc.keptAt[a])
	}
	return ar.addr + uint64(l.off[a])
}

// readKept copies the kept results (size bytes) back from the device in
// one copy, into a new buffer, at the offsets of the scratch's keptAt.
func (r *run) readKept(size int64) ([]byte, error) {
	buf := make([]byte, size)
	if err := r.ex.be.batch(func(q queue) error {
		r.q = q
		defer func() { r.q = nil }()
		return r.read(buf, r.gout.mem.addr)
	}); err != nil {
		return nil, err
	}
	r.tr.add(func(t *TraceStats) { t.Download += size })
	return buf, nil
}

// zeroCheck queues, in the batch of a launch whose kept results take
// size bytes, before its kernel, the zeroing the check needs: none where
// its accumulators are 0 (residentGrads.accZero), else theirs; with
// Tuning.checkMemset the words after the results (gradsWordsAt), which
// the check then adds into.
func (r *run) zeroCheck(q queue, size int64) error {
	k := r.gout
	if r.ex.tun.checkMemset {
		return q.zero(k.mem.addr+uint64(gradsWordsAt(size)), gradsTail)
	}
	if k.accZero {
		return nil
	}
	return q.zero(k.mem.addr+uint64(gradsAccAt(k.mem.bytes)), gradsAccBytes)
}

// checkGrads queues, after the launch's kernel of its n trajectories in
// arena ar (layout l), which wrote its results into the kept results
// (size bytes; argAddr), the check kernel, whose words come after the
// results (gradsWordsAt), from its accumulators or, with
// Tuning.checkMemset, zeroed by the launch before its kernel
// (zeroCheck).
func (r *run) checkGrads(q queue, ar *arena, n int, l *layout, size int64) error {
	k, err := r.ex.gradsKernel()
	if err != nil {
		return err
	}
	words := r.gout.mem.addr + uint64(gradsWordsAt(size))
	at := func(a int) uint64 { return r.argAddr(ar, l, a) }
	w := &r.sc.gwords // (the queue copies the words: see backend.enqueue)
	*w = [numGradsWords]uint64{}
	w[gwN], w[gwNY], w[gwNP] = uint64(n), uint64(n*r.d), uint64(n*r.np)
	w[gwMask] = flagStiff | flagOverflow | flagTangent
	w[gwStatus], w[gwFlags], w[gwAcc] = at(argStatus), at(argFlags), at(argAcc)
	w[gwGY0], w[gwGP], w[gwLoss], w[gwOut] = at(argGY0), at(argGP), at(argLoss), words
	if !r.ex.tun.checkMemset {
		w[gwSums] = r.gout.mem.addr + uint64(gradsAccAt(r.gout.mem.bytes))
	}
	if r.np == 0 {
		w[gwGP] = 0
	}
	blocks := min(gradsBlocks, max(1, (max(n*max(r.d, r.np), 1)+gradsThreads-1)/gradsThreads))
	return q.enqueue(k, blocks*gradsThreads, gradsThreads, 0, w[:])
}

// gradsWell decodes the check's words and limbs (gradsTail bytes):
// whether every trajectory ended well with finite gradients and loss
// terms, the most accepted steps, and the loss terms' sum (gradsSum).
func gradsWell(tail []byte) (well bool, most int, sum float64) {
	bits := binary.LittleEndian.Uint32(tail)
	most = int(int32(binary.LittleEndian.Uint32(tail[4:])))
	if bits != 0 {
		return false, most, math.NaN()
	}
	return true, most, gradsSum(tail[8:gradsTail])
}

// gradsSum returns the sum of the loss terms whose limbs (gradsLimbs
// little-endian int64s, grads.cuh's GS_G_LIMBS) the check left: the
// integer Σ limb[k]·2^(32k), times 2^−1074, rounded once to the nearest
// float64 (ties to even). It is the terms' exact sum correctly rounded,
// whatever the order the device added them in; ±Inf past the float64
// range. A sum in index order (a call without KeepGrads, the CPU engine)
// rounds at every addition: the two differ by at most that sum's own
// error, (n−1)·u·Σ|terms| to first order (u = 2^−53), plus half an ulp
// (TestHostKeepGradsLossSum).
func gradsSum(limbs []byte) float64 {
	if x, ok := gradsSumWords(limbs); ok {
		return x
	}
	return gradsSumBig(limbs)
}

// gradsSumWords is gradsSum in machine words, bit for bit (no big.Int:
// about 7 µs a call on the 2-core VM, on a kept call's path after its
// read; session 48): the limbs carried into 32-bit digits of the sum's
// two's complement, its magnitude's leading 53 bits rounded to nearest,
// ties to even, by the bits below (a guard bit and a sticky one), scaled
// by 2^−1074 (exact: a sum of 53 bits or fewer is a multiple of 2^−1074
// that float64 holds, subnormals included, and a longer one is at least
// 2^−1021, a normal number; ±Inf past the range, as big.Float's). It
// reports false where a limb and the carry into it overflow int64
// (gradsSumBig then adds them).
func gradsSumWords(limbs []byte) (float64, bool) {
	const nd = gradsLimbs + 4 // the digits, the carry's two, and two of 0 for the windows' reads
	var d [nd]uint32
	var carry int64
	for k := range gradsLimbs {
		l := int64(binary.LittleEndian.Uint64(limbs[8*k:]))
		v := l + carry
		if (l >= 0) == (carry >= 0) && (v >= 0) != (l >= 0) {
			return 0, false
		}
		d[k] = uint32(v)
		carry = v >> 32
	}
	d[gradsLimbs], d[gradsLimbs+1] = uint32(carry), uint32(carry>>32)
	neg := carry < 0
	if neg {
		// The magnitude: the two's complement negated, digit by digit.
		c := uint64(1)
		for k := range gradsLimbs + 2 {
			v := uint64(^d[k]) + c
			d[k], c = uint32(v), v>>32
		}
	}
	top := gradsLimbs + 1
	for top >= 0 && d[top] == 0 {
		top--
	}
	if top < 0 {
		return 0, true
	}
	// window returns bits [i, i+64) of the magnitude (i ≥ 0).
	window := func(i int) uint64 {
		j, o := i>>5, uint(i&31)
		return (uint64(d[j])|uint64(d[j+1])<<32)>>o | uint64(d[j+2])<<(64-o)
	}
	nb := 32*top + bits.Len32(d[top])
	var x float64
	if nb <= 53 {
		x = math.Ldexp(float64(window(0)&(1<<53-1)), -1074)
	} else {
		sh := nb - 53
		m := window(sh) & (1<<53 - 1)
		guard := window(sh-1)&1 != 0
		sticky := false
		for k := 0; k < (sh-1)>>5 && !sticky; k++ {
			sticky = d[k] != 0
		}
		if o := uint((sh - 1) & 31); o > 0 && d[(sh-1)>>5]&(1<<o-1) != 0 {
			sticky = true
		}
		if guard && (sticky || m&1 != 0) {
			m++ // (2^53 at most: exact)
		}
		x = math.Ldexp(float64(m), sh-1074)
	}
	if neg {
		x = -x
	}
	return x, true
}

// gradsSumBig is gradsSum through big.Int and big.Float.
func gradsSumBig(limbs []byte) float64 {
	var acc, limb big.Int
	for k := gradsLimbs - 1; k >= 0; k-- {
		acc.Lsh(&acc, 32)
		acc.Add(&acc, limb.SetInt64(int64(binary.LittleEndian.Uint64(limbs[8*k:]))))
	}
	var f big.Float
	f.SetInt(&acc) // exact: SetInt's precision is the integer's bits
	x, _ := f.SetMantExp(&f, -1074).Float64()
	return x
}

// scatterKept is scatter for a launch whose results stay on the device
// (keptGrads) and which ended well: the loss terms' sum the check formed
// on the device (gradsSum), as the run's sum of all its trajectories g,
// the shared gradient's sums (in down, at at[argGS]), and most, the most
// accepted steps; the terms themselves stay on the device. It reports
// false, having changed nothing, where the sum is not finite or the
// launch is not the run's only one (the caller then copies everything
// back: lossError reads the trajectories' states).
func (r *run) scatterKept(down []byte, at *[numArgs]int64, l *layout, g []int, most int, sum float64) bool {
	n := len(g)
	if math.IsNaN(sum) || math.IsInf(sum, 0) || r.summed != 0 || n != len(r.terms) || g[0] != 0 {
		return false
	}
	r.sum, r.summed = sum, n
	r.addShared(down, at, l, g)
	r.longest = max(r.longest, most)
	if r.v.Adaptive && (r.v.MeshOut || r.v.Store) {
		r.ex.notice(most)
	}
	return true
}

// Fill copies the kept results back (one copy from the device into a
// staging buffer) and scatters them into the run's Result, res, as
// scatter does without KeepGrads. The device memory stays the handle's
// for a later call's results (keepGrads) until Release.
func (k *residentGrads) Fill(res *ode.Result) error {
	if k.Released() {
		return fmt.Errorf("cuda: engine %s: the gradient's per-trajectory results' device memory was released (Gradient.Release); call Grad again to read them", k.ex.name)
	}
	r := k.r
	if r == nil || r.res != res {
		return fmt.Errorf("cuda: engine %s: the gradient's per-trajectory results were written over by a later call that reused their memory: %w", k.ex.name, ode.ErrReleased)
	}
	down := k.ex.takeStaging(k.size)
	defer k.ex.giveStaging(down)
	if err := r.read(down, k.mem.addr); err != nil {
		return err
	}
	r.tr.add(func(t *TraceStats) { t.Download += k.size })
	r.filling = true
	r.terms = nil
	r.endsDone = false // (a kept launch's batch writes no end times: endsInBatch)
	nb := (len(k.g) + r.rb - 1) / r.rb
	over, err := r.scatter(down, &k.at, nil, k.g, k.rows, &k.l, false, false, func(_ func(), blocks func(lo, hi int), _ func(c0, c1 int)) error {
		blocks(0, nb)
		return nil
	})
	r.filling = false
	if err != nil {
		return err
	}
	if len(over) > 0 || r.ill || r.gradNonFinite {
		return fmt.Errorf("cuda: engine %s: internal error: kept results of a launch that did not end well", k.ex.name)
	}
	k.r = nil // the memory stays for the next call's results (keepGrads)
	r.ex.giveRun(r)
	return nil
}
