package tape

import (
	"cmp"
	"fmt"
	"math"
	"runtime"
	"slices"
	"unsafe"

	"gonum.org/v1/gonum/floats"

	"github.com/gradsolve-go/gradsolve/internal/finite"
	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/ops"
)

// Block sizes chosen when ExecSettings.BlockSize is 0: the largest power
// of two between MinBlockSize and MaxBlockSize whose block buffers fit in
// BlockBudget bytes, so that a block's working set stays in the core's L2
// cache. Small programs (a field) get long blocks, which amortise the
// per-value dispatch; large ones (a Rosenbrock step's reverse sweep) get
// short blocks.
const (
	MinBlockSize = 64
	MaxBlockSize = 1024
	BlockBudget  = 512 << 10
)

// DefaultBlockSize is kept for reference: the block size that was the
// default before sizes were chosen per program.
const DefaultBlockSize = 256

// autoBlockSize returns the block size for a program whose block buffers
// take units float64s per trajectory.
func autoBlockSize(units int) int {
	bs := MaxBlockSize
	for bs > MinBlockSize && bs*max(units, 1)*8 > BlockBudget {
		bs /= 2
	}
	return bs
}

// ExecSettings configures an Exec. The zero value means the defaults.
type ExecSettings struct {
	// BlockSize is the number of trajectories per block: every value of
	// the program is a loop over one block, so a block's working set
	// should stay in the core's cache. 0 chooses it from the program's
	// working set (see MinBlockSize).
	BlockSize int

	// Workers is the largest number of goroutines a Run uses. 0 means
	// runtime.GOMAXPROCS(0). Blocks are shared among them dynamically.
	Workers int

	// CheckFinite makes Run return a *NonFiniteError naming the first
	// trajectory, output and op that produced a NaN or an infinity.
	// Without it non-finite numbers are returned as they are.
	CheckFinite bool
}

type argKind uint8

const (
	argUnit  argKind = iota // a block buffer (unit, component)
	argInput                // a per-trajectory input
	argUni                  // a uniform value passed as a length-1 slice
)

type arg struct {
	kind  argKind
	unit  int // argUnit: first unit of the buffer
	comp  int // argUnit: component within a tuple buffer
	width int // argUnit: width of the buffer
	idx   int // argInput: input index; argUni: offset in Exec.uni
	out   int // argUnit: the output written in place in direct mode, or -1
}

// step computes one value with its op's Block, or several values with a
// fused kernel (see plan). Its slices are worker.slots[slot : slot+nslot]:
// the destinations, then the arguments.
type step struct {
	block func(dst []float64, args [][]float64, aux float64) // the op's Block; nil for a fused step
	kern  kernel                                             // the fused kernel, or nil
	aux   float64
	dst   []arg // the values computed, block buffers of width 1 (or the tuple's width)
	args  []arg
	slot  int
	nslot int // len(dst) + len(args)
}

// kernel is a fused step: it computes several values of a block of m
// trajectories from s, the step's destination and argument slices (see
// step), and uni, the Exec's uniform values.
type kernel interface {
	run(s [][]float64, uni []float64, m int)
}

// rebind is a slot whose slice depends on the block's first trajectory:
// a per-trajectory input read in place, or (in direct mode) an output
// written in place.
type rebind struct {
	slot, idx int
}

type bcast struct {
	off, width, unit int
}

type outSpec struct {
	src    arg
	sum    bool
	sumIdx int
	direct bool // in direct mode, the step computing it writes it in place
	// step is the index of that step in Exec.steps, and entry its index
	// among the step's values if it is a chain step (else -1).
	step, entry int32
}

// inRead is where the steps read a per-trajectory input last: the index
// of the last step reading it (math.MaxInt32 if an output copies it after
// the steps), and, if that step is a chain step whose entry of that index
// alone reads it, the entry (else -1).
type inRead struct {
	step, entry int32
}

type worker struct {
	arena []float64
	// slots holds every step's dst and argument slices for blocks of
	// lastM trajectories in direct mode lastDirect, built once, then
	// again when the mode changes; when m changes only the slots of
	// Exec.mdep change, and from block to block the rebind slots.
	slots      [][]float64
	lastM      int
	lastDirect bool
	// filled reports that the broadcast buffers hold this Run's uniform
	// values.
	filled bool
	// The rebind slots hold the inputs and outputs of generation ioGen
	// (Exec.ioGen) from trajectory lastLo on.
	ioGen, lastLo int
}

// Exec runs a program over ensembles of trajectories on the CPU, a block
// of trajectories at a time (structure of arrays: each value is a loop
// over the block), on several goroutines. Values that depend only on
// constants and shared inputs are computed on the first Run and again
// only when a shared input changes. Dense layers with shared weights run
// as blocked matrix products over the block, forward and reverse, and
// sums of products as fused chains, bit for bit as the ops one at a time
// (see plan; AVX2 kernels on amd64). Buffers are reused: after the first
// Run with a given number of trajectories, Run allocates nothing. An
// Exec is not safe for concurrent use; create one per goroutine (they
// are cheap next to a Run).
type Exec struct {
	p        *Program
	bs       int
	nworkers int
	check    bool

	uniVals []ID  // uniform values in program order
	uniOff  []int // offset of each uniform value in uni, by ID (-1 if varying)
	uni     []float64
	// pack lists the uniform values copied, after them, into uni[nuni:]:
	// the coefficient matrices (and biases) of the fused matrix steps, in
	// the order their kernels read them.
	pack []packed
	nuni int
	// sharedIn lists the shared inputs: input idx at uni[off].
	sharedIn []struct{ idx, off int }
	uniDone  bool // uni holds the values of the last Run's shared inputs

	steps  []step
	nslots int
	// slotArg is the place of every slot's slice; mdep lists the slots
	// whose slice depends on the number of trajectories in the block: the
	// destinations of the ops' Block kernels (which take it from their
	// length) and tuples (laid out component-major). The others hold
	// whole buffers, built once per worker.
	slotArg []arg
	mdep    []int32
	rebind  []rebind // per-trajectory inputs
	reads   []inRead // by input
	rebOut  []rebind // values written to the outputs in direct mode
	direct  bool     // this Run writes outputs in place (no aliasing)
	units   int
	bcast   []bcast
	outs    []outSpec
	copied  []int // the outputs that the steps do not write in place
	nsum    int

	workers []*worker

	// State of the Run in progress.
	in, out  [][]float64
	n        int
	nblocks  int
	group    par.Group
	runBlock func(worker, block int)
	sums     []float64
	scal     []float64
	tup      [][]float64
	// The last Run's input and output addresses, their generation, and
	// the smallest distance between two of them that matters (see
	// trackIO).
	spans               []span
	aliasKey, aliasLast []uintptr
	aliasGap            uintptr
	aliasValid          bool
	ioGen               int
}

// NewExec prepares p for execution: it classifies values as uniform or per
// trajectory and assigns block buffers by liveness so the working set stays
// small. A program with calls (Funcs) is run inlined: NewExec runs
// Inline(p) and executes its result, which Program then returns; an
// OpAttach is run as its first argument (the attached derivative's value
// is not needed), so Program then returns a program without them. It
// returns an error if p is not a valid program.
func NewExec(p *Program, s *ExecSettings) (*Exec, error) { return newExec(p, s, true) }

// hasAttach reports whether p has an OpAttach value.
func hasAttach(p *Program) bool {
	for _, v := range p.Values {
		if v.Op == ops.OpAttach {
			return true
		}
	}
	return false
}

// newExec is NewExec; fuse turns the fusion of dense layers and sum chains
// on (see plan), which tests turn off to compare.
func newExec(p *Program, s *ExecSettings, fuse bool) (*Exec, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(p.Funcs) > 0 || hasAttach(p) {
		q, err := valueForm(p)
		if err != nil {
			return nil, err
		}
		p = q
	}
	var set ExecSettings
	if s != nil {
		set = *s
	}
	if set.Workers <= 0 {
		set.Workers = runtime.GOMAXPROCS(0)
	}
	e := &Exec{p: p, bs: set.BlockSize, nworkers: set.Workers, check: set.CheckFinite}
	e.plan(fuse)
	if e.bs <= 0 {
		e.bs = autoBlockSize(e.units)
	}
	return e, nil
}

// Clone returns an executor of the same program that shares e's
// preparation (its immutable plan of buffers and steps) but has buffers of
// its own, so the two may run concurrently. blockSize, if positive,
// replaces the block size and workers, if positive, the number of
// goroutines. Cloning costs O(len(program)) small allocations, far less
// than NewExec.
func (e *Exec) Clone(blockSize, workers int) *Exec {
	c := &Exec{
		p: e.p, bs: e.bs, nworkers: e.nworkers, check: e.check,
		uniVals: e.uniVals, uniOff: e.uniOff, uni: make([]float64, len(e.uni)),
		pack: e.pack, nuni: e.nuni, sharedIn: e.sharedIn,
		steps: e.steps, nslots: e.nslots, slotArg: e.slotArg, mdep: e.mdep, rebind: e.rebind, reads: e.reads, rebOut: e.rebOut,
		units: e.units, bcast: e.bcast, outs: e.outs, copied: e.copied, nsum: e.nsum,
	}
	if blockSize > 0 {
		c.bs = blockSize
	}
	if workers > 0 {
		c.nworkers = workers
	}
	return c
}

// BlockSize returns the number of trajectories per block.
func (e *Exec) BlockSize() int { return e.bs }

// Program returns the program e runs: the one given to NewExec, or its
// inlined form if it has calls.
func (e *Exec) Program() *Program { return e.p }

// Run evaluates the program for trajectories 0…n-1. in[k] holds input k:
// n values (trajectory i at in[k][i]) for a per-trajectory input, one for a
// shared input. out[k] receives output k: n values, or one for an output
// marked Sum (the sum over the n trajectories, added in a fixed order, so
// results do not depend on scheduling). An output may share memory with
// an input, to update a state in place (out[k] = in[k]): every block of
// trajectories reads its inputs before it writes its outputs. It panics if
// the slices are too short. With CheckFinite set it returns a
// *NonFiniteError for the first non-finite output.
func (e *Exec) Run(out, in [][]float64, n int) error {
	p := e.p
	if len(in) != len(p.Inputs) || len(out) != len(p.Outputs) {
		panic(fmt.Sprintf("tape: Exec.Run: program %s has %d inputs and %d outputs, got %d and %d",
			p.Name, len(p.Inputs), len(p.Outputs), len(in), len(out)))
	}
	for k, s := range p.Inputs {
		if want := e.need(s.Shared, n); len(in[k]) < want {
			panic(fmt.Sprintf("tape: Exec.Run: input %d (%s) has %d values, want %d", k, s.Name, len(in[k]), want))
		}
	}
	for k, o := range p.Outputs {
		if want := e.need(o.Sum, n); len(out[k]) < want {
			panic(fmt.Sprintf("tape: Exec.Run: output %d (%s) has room for %d values, want %d", k, o.Name, len(out[k]), want))
		}
	}
	e.in, e.out, e.n = in, out, n
	if n > 0 {
		e.trackIO()
	}
	// Outputs are written in place by the steps unless one overlaps
	// another output or an input (an update y = f(y)) in a way that
	// forbids it (see minGap).
	e.direct = len(e.rebOut) > 0 && n > 0 && e.aliasGap >= uintptr(n)*8
	if e.uniformStale() {
		e.evalUniform()
		for _, w := range e.workers {
			w.filled = false
		}
	}
	if n == 0 {
		for k, o := range e.outs {
			if o.sum {
				out[k][0] = 0
			}
		}
		return nil
	}
	e.nblocks = (n + e.bs - 1) / e.bs
	if need := e.nblocks * e.nsum; cap(e.sums) < need {
		e.sums = make([]float64, need)
	}
	e.sums = e.sums[:e.nblocks*e.nsum]
	nw := min(e.nworkers, e.nblocks)
	for len(e.workers) < nw {
		e.workers = append(e.workers, &worker{
			arena: make([]float64, e.units*e.bs),
			slots: make([][]float64, e.nslots),
			lastM: -1,
		})
	}
	if e.runBlock == nil {
		e.runBlock = func(w, b int) {
			lo := b * e.bs
			e.block(e.workers[w], b, lo, min(lo+e.bs, e.n))
		}
	}
	e.group.Run(e.nblocks, nw, e.runBlock)
	for k, o := range e.outs {
		if o.sum {
			s := 0.0
			for b := 0; b < e.nblocks; b++ {
				s += e.sums[b*e.nsum+o.sumIdx]
			}
			out[k][0] = s
		}
	}
	e.in, e.out = nil, nil
	if e.check {
		return e.checkFinite(out, in, n)
	}
	return nil
}

// trackIO notes the addresses of the Run's per-trajectory inputs and
// outputs. When they differ from the last Run's, it bumps ioGen (the
// workers bind their slots to them again) and measures aliasGap again:
// the smallest distance between an output that the steps would write in
// place and another input or output, in bytes (see minGap). Outputs are
// written in place only if no other slice starts within n values of
// theirs: the slices of n values overlap iff their starts are less than n
// values apart. An integrator calls Run again and again with the same
// slices (whatever its number of active trajectories): that costs O(s)
// for s slices; new slices cost O(s log s).
func (e *Exec) trackIO() {
	key := e.aliasKey[:0]
	for j, s := range e.p.Inputs {
		if !s.Shared {
			key = append(key, uintptr(unsafe.Pointer(&e.in[j][0])))
		}
	}
	for k, o := range e.outs {
		if !o.sum {
			key = append(key, uintptr(unsafe.Pointer(&e.out[k][0])))
		}
	}
	e.aliasKey = key
	if e.aliasValid && slices.Equal(key, e.aliasLast) {
		return
	}
	e.ioGen++
	e.aliasGap = ^uintptr(0)
	if len(e.rebOut) > 0 {
		e.aliasGap = e.minGap(key)
	}
	e.aliasLast = append(e.aliasLast[:0], key...)
	e.aliasValid = true
}

// minGap returns the smallest distance in bytes between the start of a
// slice written in place and the start of another slice (the inputs' and
// outputs' starts, in the order of key), or the largest uintptr; an
// output written in place over exactly the inputs that allow it does not
// count.
func (e *Exec) minGap(key []uintptr) uintptr {
	iv := e.spans[:0]
	i := 0
	for j, s := range e.p.Inputs {
		if !s.Shared {
			iv = append(iv, span{lo: key[i], in: int32(j), out: -1})
			i++
		}
	}
	for k, o := range e.outs {
		if !o.sum {
			iv = append(iv, span{lo: key[i], in: -1, out: int32(k), direct: o.direct})
			i++
		}
	}
	e.spans = iv
	slices.SortFunc(iv, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	// Slices that start together are one group. Between groups, the
	// closest pair with a slice written in place is, for some group, that
	// group and the last group written in place before it, or (if it is
	// written in place) the group just before it.
	gap := ^uintptr(0)
	var prev, prevDirect uintptr
	havePrev, haveDirect := false, false
	for lo := 0; lo < len(iv); {
		hi := lo + 1
		for hi < len(iv) && iv[hi].lo == iv[lo].lo {
			hi++
		}
		g := iv[lo:hi]
		direct, ok := e.groupInPlace(g)
		if !ok {
			return 0
		}
		at := g[0].lo
		if haveDirect {
			gap = min(gap, at-prevDirect)
		}
		if direct && havePrev {
			gap = min(gap, at-prev)
		}
		prev, havePrev = at, true
		if direct {
			prevDirect, haveDirect = at, true
		}
		lo = hi
	}
	return gap
}

// groupInPlace reports whether the slices g, which start at the same
// address, include an output written in place (direct), and whether they
// may share their memory: yes unless one written in place shares it with
// another output or with an input that does not allow it (inPlaceOK).
func (e *Exec) groupInPlace(g []span) (direct, ok bool) {
	outs, k := 0, -1
	for _, s := range g {
		if s.out >= 0 {
			outs++
			if s.direct {
				direct, k = true, int(s.out)
			}
		}
	}
	if !direct || len(g) == 1 {
		return direct, true
	}
	if outs > 1 {
		return true, false
	}
	for _, s := range g {
		if s.in >= 0 && !e.inPlaceOK(k, int(s.in)) {
			return true, false
		}
	}
	return true, true
}

// inPlaceOK reports whether output k may be written in place over input
// j: the steps read input j for the last time before the step writing
// output k, or in that step only in the chain that computes output k
// (the chain kernels read a block's terms before they write its sum).
func (e *Exec) inPlaceOK(k, j int) bool {
	o, r := &e.outs[k], e.reads[j]
	return r.step < o.step || r.step == o.step && r.entry >= 0 && r.entry == o.entry
}

// span is the start of input in or output out (the other -1), for
// minGap.
type span struct {
	lo      uintptr
	in, out int32
	direct  bool
}

func (e *Exec) need(single bool, n int) int {
	if single {
		return 1
	}
	return n
}

// uniformStale reports whether the uniform values must be computed: on
// the first Run, and when a shared input differs (bit for bit) from the
// value it had then. Integrators run a program many times with the same
// shared parameters (a network's weights), so this saves O(uniform
// values) a Run.
func (e *Exec) uniformStale() bool {
	if !e.uniDone {
		e.uniDone = true
		return true
	}
	for _, s := range e.sharedIn {
		if math.Float64bits(e.uni[s.off]) != math.Float64bits(e.in[s.idx][0]) {
			return true
		}
	}
	return false
}

// evalUniform computes the values that are the same for every trajectory.
func (e *Exec) evalUniform() {
	p := e.p
	for _, id := range e.uniVals {
		v := &p.Values[id]
		off := e.uniOff[id]
		switch v.Op {
		case ops.OpConst:
			e.uni[off] = v.Aux
			continue
		case ops.OpInput:
			e.uni[off] = e.in[int(v.Aux)][0]
			continue
		case ops.OpExtract:
			e.uni[off] = e.uni[e.uniOff[v.Args[0]]+int(v.Aux)]
			continue
		}
		def := ops.Lookup(v.Op)
		if def.EvalTuple != nil {
			e.tup = e.tup[:0]
			for _, a := range v.Args {
				o := e.uniOff[a]
				e.tup = append(e.tup, e.uni[o:o+p.Width(a)])
			}
			def.EvalTuple(e.uni[off:off+p.Width(id)], e.tup, v.Aux)
			continue
		}
		e.scal = e.scal[:0]
		for _, a := range v.Args {
			e.scal = append(e.scal, e.uni[e.uniOff[a]])
		}
		e.uni[off] = def.Eval(e.scal, v.Aux)
	}
	for i, q := range e.pack {
		x := e.uni[q.src]
		if q.neg {
			x = -x
		}
		e.uni[e.nuni+i] = x
	}
}

// sliceFull is slice, except that a scalar in the arena gets its whole
// buffer (BlockSize values): the kernels read the first m, so the slot
// need not change with m.
func (e *Exec) sliceFull(w *worker, a arg, lo, m int) []float64 {
	if a.kind == argUnit && a.width == 1 && (a.out < 0 || !e.direct) {
		start := a.unit * e.bs
		return w.arena[start : start+e.bs]
	}
	return e.slice(w, a, lo, m)
}

// slice returns the block view of an argument for trajectories lo…lo+m-1.
func (e *Exec) slice(w *worker, a arg, lo, m int) []float64 {
	switch a.kind {
	case argInput:
		return e.in[a.idx][lo : lo+m]
	case argUni:
		return e.uni[a.idx : a.idx+1]
	}
	if a.out >= 0 && e.direct {
		return e.out[a.out][lo : lo+m]
	}
	start := a.unit*e.bs + a.comp*m
	if a.comp == 0 && a.width > 1 {
		return w.arena[start : start+a.width*m]
	}
	return w.arena[start : start+m]
}

func (e *Exec) block(w *worker, b, lo, hi int) {
	m := hi - lo
	slots := w.slots
	bind := lo != w.lastLo || e.ioGen != w.ioGen
	switch {
	case w.lastM < 0 || e.direct != w.lastDirect:
		for i, a := range e.slotArg {
			slots[i] = e.sliceFull(w, a, lo, m)
		}
		for _, i := range e.mdep {
			slots[i] = e.slice(w, e.slotArg[i], lo, m)
		}
		w.lastM, w.lastDirect, w.filled = m, e.direct, false
		bind = true
	case m != w.lastM:
		for _, i := range e.mdep {
			slots[i] = e.slice(w, e.slotArg[i], lo, m)
		}
		w.lastM, w.filled = m, false
		bind = true
	}
	if bind {
		for _, r := range e.rebind {
			slots[r.slot] = e.in[r.idx][lo : lo+m]
		}
		if e.direct {
			for _, r := range e.rebOut {
				slots[r.slot] = e.out[r.idx][lo : lo+m]
			}
		}
		w.lastLo, w.ioGen = lo, e.ioGen
	}
	if !w.filled {
		for _, bc := range e.bcast {
			buf := w.arena[bc.unit*e.bs : bc.unit*e.bs+bc.width*m]
			for c := 0; c < bc.width; c++ {
				x := e.uni[bc.off+c]
				seg := buf[c*m : (c+1)*m]
				for i := range seg {
					seg[i] = x
				}
			}
		}
		w.filled = true
	}
	for si := range e.steps {
		st := &e.steps[si]
		s := slots[st.slot : st.slot+st.nslot]
		if st.kern != nil {
			st.kern.run(s, e.uni, m)
		} else {
			st.block(s[0], s[1:], st.aux)
		}
	}
	if e.direct {
		for _, k := range e.copied {
			e.copyOut(w, b, k, lo, hi)
		}
		return
	}
	for k := range e.outs {
		e.copyOut(w, b, k, lo, hi)
	}
}

// copyOut copies output k of the block from where it was computed, or adds
// it up for a summed output.
func (e *Exec) copyOut(w *worker, b, k, lo, hi int) {
	o, m := &e.outs[k], hi-lo
	src := e.slice(w, o.src, lo, m)
	if o.sum {
		// A block's sum has a fixed order (floats.Sum's, with several
		// accumulators), so the result does not depend on Workers.
		var s float64
		if len(src) == 1 && m > 1 {
			s = src[0] * float64(m)
		} else {
			s = floats.Sum(src[:m])
		}
		e.sums[b*e.nsum+o.sumIdx] = s
		return
	}
	dst := e.out[k][lo:hi]
	if len(src) == 1 && m > 1 {
		for i := range dst {
			dst[i] = src[0]
		}
	} else {
		copy(dst, src[:m])
	}
}

// checkFinite looks for a non-finite output and explains it.
func (e *Exec) checkFinite(out, in [][]float64, n int) error {
	p := e.p
	traj := -1
	name := ""
	for k, o := range p.Outputs {
		if o.Sum {
			if x := out[k][0]; math.IsNaN(x) || math.IsInf(x, 0) {
				// Find a trajectory whose contribution is not finite.
				for i := 0; i < n && traj < 0; i++ {
					v := p.Eval(nil, e.gather(in, i))
					if x := v[k]; math.IsNaN(x) || math.IsInf(x, 0) {
						traj, name = i, o.Name
					}
				}
				if traj < 0 {
					return fmt.Errorf("tape: program %s: output %s summed over %d trajectories overflows to %v", p.Name, o.Name, n, x)
				}
				break
			}
			continue
		}
		if i := finite.First(out[k][:n]); i >= 0 && (traj < 0 || i < traj) {
			traj, name = i, o.Name
		}
	}
	if traj < 0 {
		return nil
	}
	return p.locateNonFinite(e.gather(in, traj), traj, name)
}

// gather returns the inputs of trajectory i.
func (e *Exec) gather(in [][]float64, i int) []float64 {
	x := make([]float64, len(in))
	for k, s := range e.p.Inputs {
		if s.Shared {
			x[k] = in[k][0]
		} else {
			x[k] = in[k][i]
		}
	}
	return x
}
