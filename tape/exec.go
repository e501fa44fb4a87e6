package tape

import (
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"gonum.org/v1/gonum/floats"

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

type step struct {
	block func(dst []float64, args [][]float64, aux float64) // the op's Block
	aux   float64
	unit  int
	width int
	args  []arg
	slot  int // worker.slots[slot] is dst, the args follow it
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
}

type worker struct {
	arena []float64
	// slots holds every step's dst and argument slices for blocks of
	// lastM trajectories, built once per Run and block size; only the
	// rebind slots change from block to block.
	slots [][]float64
	lastM int
}

// Exec runs a program over ensembles of trajectories on the CPU, a block
// of trajectories at a time (structure of arrays: each value is a loop
// over the block), on several goroutines. Values that depend only on
// constants and shared inputs are computed once per Run. Buffers are
// reused: after the first Run with a given number of trajectories, Run
// allocates nothing. An Exec is not safe for concurrent use; create one
// per goroutine (they are cheap next to a Run).
type Exec struct {
	p        *Program
	bs       int
	nworkers int
	check    bool

	uniVals []ID  // uniform values in program order
	uniOff  []int // offset of each uniform value in uni, by ID (-1 if varying)
	uni     []float64

	steps  []step
	nslots int
	rebind []rebind // per-trajectory inputs
	rebOut []rebind // values written to the outputs in direct mode
	direct bool     // this Run writes outputs in place (no aliasing)
	units  int
	bcast  []bcast
	outs   []outSpec
	nsum   int

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
}

// NewExec prepares p for execution: it classifies values as uniform or per
// trajectory and assigns block buffers by liveness so the working set stays
// small. A program with calls (Funcs) is run inlined: NewExec runs
// Inline(p) and executes its result, which Program then returns. It
// returns an error if p is not a valid program.
func NewExec(p *Program, s *ExecSettings) (*Exec, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if len(p.Funcs) > 0 {
		q, err := Inline(p)
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
	e.plan()
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
		steps: e.steps, nslots: e.nslots, rebind: e.rebind, rebOut: e.rebOut,
		units: e.units, bcast: e.bcast, outs: e.outs, nsum: e.nsum,
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

// plan assigns every value its place: uniform, input, or block buffer.
func (e *Exec) plan() {
	p := e.p
	nv := len(p.Values)
	e.uniOff = make([]int, nv)
	loc := make([]arg, nv) // where a varying value lives
	uniform := make([]bool, nv)
	nuni := 0
	for i, v := range p.Values {
		e.uniOff[i] = -1
		switch {
		case v.Op == ops.OpConst:
			uniform[i] = true
		case v.Op == ops.OpInput:
			uniform[i] = p.Inputs[int(v.Aux)].Shared
			if !uniform[i] {
				loc[i] = arg{kind: argInput, idx: int(v.Aux)}
			}
		default:
			uniform[i] = true
			for _, a := range v.Args {
				uniform[i] = uniform[i] && uniform[a]
			}
		}
		if uniform[i] {
			e.uniOff[i] = nuni
			nuni += p.Width(ID(i))
			e.uniVals = append(e.uniVals, ID(i))
		}
	}
	e.uni = make([]float64, nuni)

	// Liveness: the last step using each value (extracts count for their
	// tuple); outputs live to the end of the block.
	last := make([]int, nv)
	for i := range last {
		last[i] = -1
	}
	root := func(id ID) ID {
		if v := p.Values[id]; v.Op == ops.OpExtract && !uniform[id] {
			return v.Args[0]
		}
		return id
	}
	for i, v := range p.Values {
		for _, a := range v.Args {
			last[root(a)] = i
		}
	}
	for _, o := range p.Outputs {
		last[root(o.ID)] = math.MaxInt
	}

	free := map[int][]int{}
	alloc := func(w int) int {
		if l := free[w]; len(l) > 0 {
			u := l[len(l)-1]
			free[w] = l[:len(l)-1]
			return u
		}
		u := e.units
		e.units += w
		return u
	}
	bcastUnit := map[ID]int{}
	argOf := func(a ID, mixed bool) arg {
		if !uniform[a] {
			return loc[a]
		}
		w := p.Width(a)
		if mixed && w == 1 {
			return arg{kind: argUni, idx: e.uniOff[a]}
		}
		u, ok := bcastUnit[a]
		if !ok {
			u = e.units
			e.units += w
			bcastUnit[a] = u
			e.bcast = append(e.bcast, bcast{off: e.uniOff[a], width: w, unit: u})
		}
		return arg{kind: argUnit, unit: u, width: w, out: -1}
	}
	// A per-trajectory output computed by a scalar step is written straight
	// into the output slice (direct mode) when the Run's outputs do not
	// overlap its inputs; see Run.
	directOut := make(map[ID]int)
	for k, o := range p.Outputs {
		v := p.Values[o.ID]
		if _, dup := directOut[o.ID]; dup || o.Sum || uniform[o.ID] || v.Op == ops.OpInput || v.Op == ops.OpExtract || p.Width(o.ID) != 1 {
			continue
		}
		directOut[o.ID] = k
	}
	// dying lists the values whose buffers are freed after step i.
	dying := make(map[int][]ID)
	for i, l := range last {
		if l >= 0 && l != math.MaxInt {
			dying[l] = append(dying[l], ID(i))
		}
	}
	for i, v := range p.Values {
		if uniform[i] || v.Op == ops.OpInput {
			continue
		}
		if v.Op == ops.OpExtract {
			t := loc[v.Args[0]]
			loc[i] = arg{kind: argUnit, unit: t.unit, comp: int(v.Aux), width: t.width, out: -1}
			continue
		}
		def := ops.Lookup(v.Op)
		st := step{block: def.Block, aux: v.Aux, width: p.Width(ID(i)), slot: e.nslots}
		for j, a := range v.Args {
			ar := argOf(a, def.Mixed)
			switch {
			case ar.kind == argInput:
				e.rebind = append(e.rebind, rebind{slot: st.slot + 1 + j, idx: ar.idx})
			case ar.kind == argUnit && ar.out >= 0:
				e.rebOut = append(e.rebOut, rebind{slot: st.slot + 1 + j, idx: ar.out})
			}
			st.args = append(st.args, ar)
		}
		e.nslots += 1 + len(st.args)
		st.unit = alloc(st.width)
		out := -1
		if k, ok := directOut[ID(i)]; ok {
			out = k
			e.rebOut = append(e.rebOut, rebind{slot: st.slot, idx: k})
		}
		loc[i] = arg{kind: argUnit, unit: st.unit, width: st.width, out: out}
		if last[i] < 0 { // unused and not an output: still computed, freed at once
			dying[i] = append(dying[i], ID(i))
		}
		e.steps = append(e.steps, st)
		for _, d := range dying[i] {
			if l := loc[d]; l.kind == argUnit && !uniform[d] && p.Values[d].Op != ops.OpExtract {
				free[l.width] = append(free[l.width], l.unit)
			}
		}
	}
	for k, o := range p.Outputs {
		src := loc[root(o.ID)]
		if p.Values[o.ID].Op == ops.OpExtract && !uniform[o.ID] {
			src = loc[o.ID]
		}
		if uniform[o.ID] {
			src = arg{kind: argUni, idx: e.uniOff[o.ID]}
		}
		spec := outSpec{src: src, sum: o.Sum, direct: src.kind == argUnit && src.out == k}
		if o.Sum {
			spec.sumIdx = e.nsum
			e.nsum++
		}
		e.outs = append(e.outs, spec)
	}
}

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
	e.direct = len(e.rebOut) > 0 && !e.aliased(n)
	e.evalUniform()
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
		})
	}
	for _, w := range e.workers[:nw] {
		w.lastM = -1
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

// aliased reports whether an output that the steps would write in place
// overlaps a per-trajectory input or another output. The outputs are then
// copied out after each block is computed instead, so that a Run may
// update its inputs in place (y = f(y)).
func (e *Exec) aliased(n int) bool {
	if n == 0 {
		return false
	}
	for k, o := range e.outs {
		if !o.direct {
			continue
		}
		x := e.out[k][:n]
		for j, s := range e.p.Inputs {
			if !s.Shared && overlap(x, e.in[j][:n]) {
				return true
			}
		}
		for j, q := range e.p.Outputs {
			if j != k && !q.Sum && overlap(x, e.out[j][:n]) {
				return true
			}
		}
	}
	return false
}

// overlap reports whether two non-empty slices share memory.
func overlap(a, b []float64) bool {
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa < pb+uintptr(len(b))*8 && pb < pa+uintptr(len(a))*8
}

func (e *Exec) need(single bool, n int) int {
	if single {
		return 1
	}
	return n
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
	if m != w.lastM {
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
		for si := range e.steps {
			st := &e.steps[si]
			slots[st.slot] = w.arena[st.unit*e.bs : st.unit*e.bs+st.width*m]
			for j, a := range st.args {
				slots[st.slot+1+j] = e.slice(w, a, lo, m)
			}
		}
		w.lastM = m
	} else {
		for _, r := range e.rebind {
			slots[r.slot] = e.in[r.idx][lo : lo+m]
		}
	}
	if e.direct {
		for _, r := range e.rebOut {
			slots[r.slot] = e.out[r.idx][lo : lo+m]
		}
	}
	for si := range e.steps {
		st := &e.steps[si]
		st.block(slots[st.slot], slots[st.slot+1:st.slot+1+len(st.args)], st.aux)
	}
	for k, o := range e.outs {
		if o.direct && e.direct {
			continue
		}
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
			continue
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
		for i, x := range out[k][:n] {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				if traj < 0 || i < traj {
					traj, name = i, o.Name
				}
				break
			}
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
