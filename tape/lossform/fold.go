package lossform

import (
	"fmt"
	"math"
	"slices"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// SplitFold finds the form (Session 46 (H1) in docs/more-results.md) in
// the gradient program g (output 0, ℓ): ℓ = end(acc_{K-1}), acc_k =
// next(acc_{k-1}, save time k), acc_0 = first(save time 0), with next the
// same function at every k. Reading the values of ℓ's cone, acc_k (k <
// K-1) is the last value that reads save times 0 ... k and no later one;
// save time k's block is what acc_k depends on besides acc_{k-1}: values
// that read save time k's state (no other save time's, not the final
// state), data entries, and values that read no saved state (invariants,
// the same values at every k, recomputed by each function). Blocks 2 ...
// K-1 must be block 1 value for value (same ops, same aux, arguments at
// the same places, acc_{k-1} where block 1 reads acc_0, the same
// invariants), save time k's state where block 1 reads save time 1's,
// data entry j + σ·(k-1) where block 1 reads j (σ fixed by block 2, per
// entry). acc_{K-1} is the last value of save time K-1's that so
// matches; what ℓ depends on besides it (end) reads no saved state. Each
// function's values are the gradient program's, the same ops on the same
// operands in the same order, so the folded value is the program's bit
// for bit: the fold starts from save time 0's term, not from zero (0 +
// -0 is +0).

// Fold is a loss's value split by SplitFold.
type Fold struct {
	// Rest is the gradient program without its output ℓ.
	Rest *tape.Program
	// First computes acc_0 from save time 0 (inputs: its per-trajectory
	// inputs FirstFrom, then g's shared ones); Next acc_k from acc_{k-1}
	// (its first input) and save time k (NextFrom); End ℓ from acc_{K-1}
	// (its first input) and EndFrom, which read no saved state (Steps 0).
	First, Next, End             *tape.Program
	FirstFrom, NextFrom, EndFrom []In
}

// folder holds what splitLossFold derives from g.
type folder struct {
	g                 *tape.Program
	sh                Shape
	ysIn, dataIn, pIn int
	lo, hi            []int32 // the first and last save time a value reads (-1: none)
	finalY            []bool  // the value reads the final state
	stamp             []int32 // gather's marks
	s                 int32
	stack             []tape.ID
}

// SplitFold returns g's value split as a fold over the save times
// (see above), or false where it is not of that form.
func SplitFold(g *tape.Program, sh Shape) (*Fold, bool) {
	d, K := sh.D, sh.K
	if K < 2 || d == 0 || len(g.Outputs) == 0 || len(g.Funcs) > 0 {
		return nil, false
	}
	nv := len(g.Values)
	f := &folder{g: g, sh: sh, ysIn: d, dataIn: d + K*d, pIn: d + K*d + sh.DD,
		lo: make([]int32, nv), hi: make([]int32, nv), finalY: make([]bool, nv), stamp: make([]int32, nv)}
	for id := range g.Values {
		v := &g.Values[id]
		lo, hi := int32(-1), int32(-1)
		if v.Op == ops.OpInput {
			switch in := int(v.Aux); {
			case in < d:
				f.finalY[id] = true
			case in < f.dataIn:
				lo = int32((in - d) / d)
				hi = lo
			}
		}
		for _, a := range v.Args {
			if int(a) >= id {
				return nil, false
			}
			f.finalY[id] = f.finalY[id] || f.finalY[a]
			if f.hi[a] < 0 {
				continue
			}
			if lo < 0 || f.lo[a] < lo {
				lo = f.lo[a]
			}
			hi = max(hi, f.hi[a])
		}
		f.lo[id], f.hi[id] = lo, hi
	}
	out := g.Outputs[0].ID
	cone, ok := f.gather(out, func(tape.ID) bool { return false }, nv)
	if !ok {
		return nil, false
	}
	// cands[k]: ℓ's cone's values that read save times 0 ... k, in order.
	cands := make([][]tape.ID, K)
	for _, id := range cone {
		if f.lo[id] == 0 {
			cands[f.hi[id]] = append(cands[f.hi[id]], id)
		}
	}
	acc := make([]tape.ID, K)
	for k, c := range cands {
		if len(c) == 0 {
			return nil, false
		}
		acc[k] = c[len(c)-1]
	}
	// Block 0, then block 1 (the reference) with its data strides.
	_, b0, ok := f.block(acc[0], -1, 0)
	if !ok {
		return nil, false
	}
	lf := &Fold{}
	lf.First, lf.FirstFrom, ok = f.program("fold_first", b0, -1, acc[0], func(tape.ID) int { return 0 })
	if !ok {
		return nil, false
	}
	// Save time K-1's accumulator: the last candidate whose block
	// matches block 1's (or block 1 itself where K is 2).
	var b1 []tape.ID
	sigma := map[tape.ID]int{} // block 1's data inputs: their strides
	for j := len(cands[K-1]) - 1; j >= 0; j-- {
		acc[K-1] = cands[K-1][j]
		if b1, ok = f.blocks(acc, sigma); ok {
			break
		}
	}
	if !ok {
		return nil, false
	}
	// next's inputs at save time k: save time k's state, data entries
	// that move with k.
	lf.Next, lf.NextFrom, ok = f.program("fold_next", b1, acc[0], acc[1], func(id tape.ID) int {
		if in := int(g.Values[id].Aux); in >= f.ysIn && in < f.dataIn {
			return d
		}
		return sigma[id]
	})
	if !ok {
		return nil, false
	}
	tail, ok := f.gather(out, func(id tape.ID) bool { return id == acc[K-1] }, ConeMax)
	if !ok {
		return nil, false
	}
	for _, id := range tail {
		if v := &g.Values[id]; v.Op == ops.OpInput && f.hi[id] >= 0 {
			return nil, false
		}
	}
	lf.End, lf.EndFrom, ok = f.program("fold_end", tail, acc[K-1], out, func(tape.ID) int { return 0 })
	if !ok {
		return nil, false
	}
	lf.Rest = tape.DeadCode(&tape.Program{Name: g.Name, Inputs: g.Inputs, Values: g.Values, Outputs: g.Outputs[1:]})
	return lf, true
}

// gather returns the values out depends on (out among them), sorted, not
// going past those stop reports (left out), or false where there are more
// than most or one is an op a thread's scalar code does not run.
func (f *folder) gather(out tape.ID, stop func(tape.ID) bool, most int) ([]tape.ID, bool) {
	if stop(out) {
		return nil, true
	}
	f.s++
	var into []tape.ID
	f.stack = append(f.stack[:0], out)
	f.stamp[out] = f.s
	for len(f.stack) > 0 {
		id := f.stack[len(f.stack)-1]
		f.stack = f.stack[:len(f.stack)-1]
		into = append(into, id)
		if len(into) > most {
			return nil, false
		}
		v := &f.g.Values[id]
		if !scalar(v.Op) {
			return nil, false
		}
		for _, a := range v.Args {
			if f.stamp[a] != f.s && !stop(a) {
				f.stamp[a] = f.s
				f.stack = append(f.stack, a)
			}
		}
	}
	slices.Sort(into)
	return into, true
}

// block returns save time k's block ending at acc (see above), given
// save time k-1's accumulator prev (-1 for none): its values that read a
// saved state or are data entries (blk, sorted), and those with the
// invariants they read and their cones (all, sorted), or false where it
// reads another save time's state or the final state.
func (f *folder) block(acc, prev tape.ID, k int) (blk, all []tape.ID, ok bool) {
	g := f.g
	var inv []tape.ID
	stop := func(id tape.ID) bool {
		if id == prev {
			return true
		}
		if f.hi[id] >= 0 || g.Values[id].Op == ops.OpInput && int(g.Values[id].Aux) >= f.dataIn && int(g.Values[id].Aux) < f.pIn {
			return false
		}
		inv = append(inv, id)
		return true
	}
	blk, ok = f.gather(acc, stop, ConeMax)
	if !ok {
		return nil, nil, false
	}
	for _, id := range blk {
		v := &g.Values[id]
		if v.Op == ops.OpInput && f.hi[id] >= 0 && f.hi[id] != int32(k) {
			return nil, nil, false
		}
	}
	all = slices.Clone(blk)
	for _, id := range inv {
		if f.finalY[id] {
			return nil, nil, false
		}
		c, ok := f.gather(id, func(tape.ID) bool { return false }, ConeMax)
		if !ok {
			return nil, nil, false
		}
		all = append(all, c...)
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if len(all) > ConeMax {
		return nil, nil, false
	}
	return blk, all, true
}

// blocks checks blocks 2 ... K-1 (accumulators acc) against block 1 and
// returns block 1's values with its invariants' (block's all), with in
// sigma the strides of its data inputs (which must not be invariants'
// where they move).
func (f *folder) blocks(acc []tape.ID, sigma map[tape.ID]int) ([]tape.ID, bool) {
	g, d, K := f.g, f.sh.D, len(acc)
	clear(sigma)
	b1, all1, ok := f.block(acc[1], acc[0], 1)
	if !ok {
		return nil, false
	}
	pos1 := make(map[tape.ID]int, len(b1))
	for j, id := range b1 {
		pos1[id] = j
	}
	for k := 2; k < K; k++ {
		bk, _, ok := f.block(acc[k], acc[k-1], k)
		if !ok || len(bk) != len(b1) {
			return nil, false
		}
		posk := make(map[tape.ID]int, len(bk))
		for j, id := range bk {
			posk[id] = j
		}
		for j, x := range bk {
			x1 := b1[j]
			v, v1 := &g.Values[x], &g.Values[x1]
			if v.Op != v1.Op || len(v.Args) != len(v1.Args) || math.Float64bits(v.Aux) != math.Float64bits(v1.Aux) && v.Op != ops.OpInput {
				return nil, false
			}
			for m, a := range v.Args {
				a1 := v1.Args[m]
				pa, in := posk[a]
				pa1, in1 := pos1[a1]
				switch {
				case in || in1:
					if !in || !in1 || pa != pa1 {
						return nil, false
					}
				case a == acc[k-1]:
					if a1 != acc[0] {
						return nil, false
					}
				case a1 == acc[0] || a != a1:
					return nil, false
				}
			}
			if v.Op != ops.OpInput {
				continue
			}
			in0, in := int(v1.Aux), int(v.Aux)
			switch {
			case in0 >= f.ysIn && in0 < f.dataIn:
				if in != in0+(k-1)*d {
					return nil, false
				}
			case in0 >= f.dataIn && in0 < f.pIn:
				if k == 2 {
					sigma[x1] = in - in0
				}
				if s := sigma[x1]; in != in0+s*(k-1) || in < f.dataIn || in >= f.pIn {
					return nil, false
				}
			default:
				if in != in0 {
					return nil, false
				}
			}
		}
	}
	// A data input of block 1 that moves must not be an invariant's too:
	// it is read once in the function.
	for id, s := range sigma {
		if s == 0 {
			continue
		}
		for _, x := range all1 {
			if slices.Contains(g.Values[x].Args, id) && !slices.Contains(b1, x) {
				return nil, false
			}
		}
	}
	return all1, true
}

// program returns the function of values vals (sorted) of g with output
// out, with acc (unless -1) as its first input, then vals' per-trajectory
// inputs in order, then g's shared inputs; and where those
// per-trajectory inputs are read at save time k: g's input in0 +
// step(its value)·k, where block 1 reads in0 + step.
func (f *folder) program(name string, vals []tape.ID, acc, out tape.ID, step func(tape.ID) int) (*tape.Program, []In, bool) {
	g := f.g
	p := &tape.Program{Name: name}
	at := make(map[tape.ID]tape.ID, len(vals)+1)
	var from []In
	if acc >= 0 {
		at[acc] = 0
		p.Inputs = append(p.Inputs, tape.Input{Name: "acc"})
	}
	for _, id := range vals {
		v := &g.Values[id]
		if v.Op != ops.OpInput || g.Inputs[int(v.Aux)].Shared {
			continue
		}
		at[id] = tape.ID(len(p.Inputs))
		p.Inputs = append(p.Inputs, tape.Input{Name: fmt.Sprintf("x%d", len(p.Inputs))})
		st := step(id)
		from = append(from, In{In0: int(v.Aux) - st, Step: st})
	}
	appendSharedInputs(p, g, at)
	if !appendValues(p, g, vals, at) {
		return nil, nil, false
	}
	o, ok := at[out]
	if !ok {
		return nil, nil, false
	}
	p.Outputs = []tape.Output{{Name: "acc", ID: o}}
	return p, from, true
}
