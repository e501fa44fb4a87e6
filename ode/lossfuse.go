package ode

import (
	"math"
	"slices"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
	"github.com/gradsolve-go/gradsolve/tape/lossform"
)

// The CPU engine's fused loss (issue 25). A gradient with save times
// runs the loss's gradient program (LossPlan.Grad) over the chunk's
// saved states, which the record also writes by save time (soaPut:
// cpuRun.soaSaves), and the program writes every save's cotangent, K·Dim
// rows of the chunk's width (131 MB for Kepler's 1,000 save times at N =
// 4,096), which the backward sweep reads back. Where each save's
// cotangent is its own saved value times one power of two a, the same
// for every component and save time (the sum of squares of the saves:
// ∂ℓ/∂ys[k,c] = 2·ys[k,c]), the sweep reads the record's copy of the
// saves instead, scaled by a·Scale as it reads them (scan.Saves.BarScale),
// and the loss runs only the rest of its gradient program (ℓ, ∂ℓ/∂y,
// ∂ℓ/∂p, ∂ℓ/∂s): the cotangents are neither written nor checked in an
// array of their own.
//
// The form is found on the gradient program by lossform.SplitSaveCots:
// each component's cotangent is Comp[c] = Mul(ys[k,c], Const a) (either
// order). The cotangents are the program's bit for bit: a power of two
// a with |a| ≥ 1 makes x·a exact (short of overflow), and a·Scale exact
// where it is a normal number, so the sweep's one rounding of
// x·(a·Scale) is the old path's rounding of (x·a)·Scale; with Scale 1
// it is x·a itself. The loss program checked every cotangent for a
// non-finite value; the record checks the saves instead (|x| ≤
// MaxFloat64/|a|, soaPut), and a chunk with a save past that bound runs
// the old path, which reports it as before.
//
// Where ℓ is the sum of the squares of the saved values in their order
// (the save benchmarks' loss), or a function of that sum and of the
// final state, the parameters and the data, the record also folds the
// sum as it writes each lane's saves, in save order (soaPut), from save
// time 0's first square (lossform.SplitFold's first and next, matched by
// squaresFold), the loss runs the fold's end on the sums (foldEnd) and
// its gradient program without ℓ and ∂ℓ/∂ys (foldRest: with ∂ℓ/∂ys =
// a·ys, its outputs do not depend on the saves). That sum is finite only
// where every 2·x is, so it stands for the bound; a chunk whose sum is
// not finite, or whose saves were not folded once each in order, runs
// the old path. Where the fold's rest reads no saved state either
// (foldOnly: the loss reads the saves only through the sum), the record
// keeps no copy at all: the sweep reads the saves where the record wrote
// them, the result's rows (Result.Ys, trajectory-major: scan.Saves not
// BarMajor), scaled as above, the same values in another layout.
//
// Data losses (Session 47 (H7)): where each cotangent is a residual of
// the save and a data entry of the trajectory's row times a, Mul(Sub(x,
// e), Const a) (or Sub(e, x), or negated), e entry dataOff[c] +
// dataStep[c]·k, and ℓ folds the squares of those residuals, the record
// writes the residuals to its copy instead of the saves (residuals) and
// folds them; the sweep scales them by a·Scale as above. Where the
// cotangents take other constants (weights by component, w·((x−e)·2),
// or one constant that is not a power of two), the record writes the
// cotangents themselves, each product rounded in the program's order,
// and folds the weighted squares (cotFold); the sweep scales them by
// Scale. Both need the fold, and a fold's rest that reads no saved state:
// the copy then does not hold the saves. A chunk that falls back runs
// the old path on the saves transposed from the record's rows.
// Every other loss, and fuseLoss false, run the old path.

// fuseLoss turns the fused loss on; tests and benchmarks turn it off to
// compare with the old path.
var fuseLoss = true

// foldInPlace lets a loss of fusedLoss.foldOnly keep no save copy (the
// sweep reads the result's rows); tests turn it off to compare with the
// copy.
var foldInPlace = true

// fusedLoss is a loss gradient program's fused form on the CPU engine.
type fusedLoss struct {
	rest *tape.Program // the gradient program without ∂ℓ/∂ys
	a    float64       // every save's cotangent is its value times a
	// squares: ℓ is a function (end) of the sum of the squares of the
	// saved values in their order (lossform.SplitFold on rest, a fold
	// whose first and next are that sum, see squaresFold): the record
	// folds the sum as it writes the saves (soaPut), and the loss runs
	// end (nil for ℓ = the sum) and foldRest, rest without ℓ.
	squares  bool
	foldRest *tape.Program
	// foldOnly: squares, of the saves themselves (not data or cots), and
	// foldRest reads no saved state: the loss needs the saves only as
	// the sweep's cotangents, which it reads from the result's rows.
	foldOnly bool
	end      *tape.Program
	endFrom  []lossform.In // end's per-trajectory inputs after the sum (Steps 0)
	// data: every save's cotangent is a times its residual x − data
	// (or data − x where sub says so), save time k's component c reading
	// the trajectory's data entry dataOff[c] + dataStep[c]·k; the record
	// writes the residuals to its save copy (soaPut) and folds the sum of
	// their squares (squares is then true).
	data              bool
	dataSub           bool // the residual is data − x
	dataOff, dataStep []int
	// dataRow: save time k's data are entries dataOff[0] + k·D … of the
	// row, one after the other (dataOff[c] = dataOff[0] + c, dataStep D).
	dataRow bool
	// dataRead: the data columns that foldRest and end read (the loss
	// binds the others to zeros rather than transpose them).
	dataRead []bool
	// cots: every save's cotangent is its value (or residual) r times
	// the constants mults[c] in turn, negated where neg[c], each product
	// rounded (weights by component: ∂(w·(x−d)²) = w·((x−d)·2)), and ℓ
	// folds r²·foldW[c]; the record writes the cotangents themselves to
	// its save copy (soaPut: cotFold) and folds ℓ, and the sweep scales
	// them by Scale alone (a = 1).
	cots  bool
	mults [][]float64
	neg   []bool
	// m1, m2: mults as two constants a component, m2 negated where neg
	// (1 where there is one: x·1 = x; -((x·a)·w) = (x·a)·(-w)).
	m1, m2 []float64
	// foldW: the fold's weight of each component's square (1: none).
	foldW []float64
}

// fusedForm returns the fused form of the gradient program g of shape
// sh, or nil where it has none.
func fusedForm(g *tape.Program, sh lossform.Shape) *fusedLoss {
	sc, ok := lossform.SplitSaveCots(g, sh)
	if !ok {
		return nil
	}
	fl := &fusedLoss{dataOff: make([]int, sh.D), dataStep: make([]int, sh.D), mults: make([][]float64, sh.D), neg: make([]bool, sh.D)}
	simple := true // one constant a, the same for every component
	for c, p := range sc.Comp {
		m, neg, data, sub, ok := scaledResidual(p, sc.From[c], sh, c)
		if !ok || c > 0 && (data != fl.data || sub != fl.dataSub) {
			return nil
		}
		fl.mults[c], fl.neg[c], fl.data, fl.dataSub = m, neg, data, sub
		a := m[0]
		if neg {
			a = -a
		}
		if len(m) != 1 || c > 0 && math.Float64bits(a) != math.Float64bits(fl.a) {
			simple = false
		}
		fl.a = a
		if data {
			fl.dataOff[c], fl.dataStep[c] = sc.From[c][1].In0-sh.D-sh.K*sh.D, sc.From[c][1].Step
		}
	}
	if !fl.data {
		fl.dataOff, fl.dataStep = nil, nil
	}
	a := fl.a
	if frac, _ := math.Frexp(math.Abs(a)); !simple || frac != 0.5 || math.Abs(a) < 1 || math.IsInf(a, 0) {
		// Not one power of two: the record writes the cotangents.
		fl.cots, fl.a = true, 1
	}
	if !fl.cots {
		fl.mults, fl.neg = nil, nil
	} else {
		fl.m1, fl.m2 = make([]float64, sh.D), make([]float64, sh.D)
		for c, m := range fl.mults {
			if len(m) > 2 {
				return nil
			}
			fl.m1[c], fl.m2[c] = m[0], 1
			if len(m) == 2 {
				fl.m2[c] = m[1]
			}
			if fl.neg[c] {
				fl.m2[c] = -fl.m2[c]
			}
		}
	}
	fl.rest = sc.Rest
	if f, ok := lossform.SplitFold(sc.Rest, sh); ok && squaresFold(f, sh, fl) && (!fl.data && !fl.cots || !readsSaves(f.Rest, sh)) {
		fl.squares, fl.foldRest = true, f.Rest
		if !sumEnd(f) {
			fl.end, fl.endFrom = f.End, f.EndFrom
		}
		fl.foldOnly = !fl.data && !fl.cots && !readsSaves(f.Rest, sh)
	}
	if (fl.data || fl.cots) && !fl.squares {
		// The save copy holds the residuals or the cotangents, which the
		// rest cannot read as the saves: such a loss fuses only where its
		// value folds.
		return nil
	}
	if !fl.cots && slices.ContainsFunc(fl.foldW, func(w float64) bool { return w != 1 }) {
		return nil // (a weighted fold has weighted cotangents)
	}
	if fl.data {
		fl.dataRow = true
		for c := range fl.dataOff {
			fl.dataRow = fl.dataRow && fl.dataOff[c] == fl.dataOff[0]+c && fl.dataStep[c] == sh.D
		}
	}
	if fl.squares && sh.DD > 0 {
		dataIn := sh.D + sh.K*sh.D
		fl.dataRead = make([]bool, sh.DD)
		copy(fl.dataRead, inputsRead(fl.foldRest)[dataIn:dataIn+sh.DD])
		for _, in := range fl.endFrom {
			if in.In0 >= dataIn && in.In0 < dataIn+sh.DD {
				fl.dataRead[in.In0-dataIn] = true
			}
		}
	}
	return fl
}

// readsSaves reports whether p (a program with the gradient program's
// inputs, of shape sh) reads a saved state.
func readsSaves(p *tape.Program, sh lossform.Shape) bool {
	return slices.Contains(inputsRead(p)[sh.D:sh.D+sh.K*sh.D], true)
}

// squaresFold reports whether the fold f of saves of shape sh folds the
// sum of the squares of the saved values (of the residuals of fl's data
// where fl.data) in their order, from save time 0's first component's
// square: first ((x_0² + x_1²) + …) + x_{d-1}², next (((acc + x_0²) +
// x_1²) + …) + x_{d-1}² (x save time k's state, or its residual: each
// Add rounded in that order, as squaresFrom computes it). Its end may be
// any function of the sum (and of the final state, the parameters and
// the data: SplitFold's end reads no saved state).
func squaresFold(f *lossform.Fold, sh lossform.Shape, fl *fusedLoss) bool {
	w0, w1 := make([]float64, sh.D), make([]float64, sh.D)
	if !squaresChain(f.First, f.FirstFrom, sh, fl, false, 0, w0) || !squaresChain(f.Next, f.NextFrom, sh, fl, true, sh.D, w1) {
		return false
	}
	for c := range w0 {
		if math.Float64bits(w0[c]) != math.Float64bits(w1[c]) {
			return false
		}
	}
	fl.foldW = w0
	return true
}

// sumEnd reports whether f's end is ℓ = acc.
func sumEnd(f *lossform.Fold) bool {
	end := f.End
	if len(end.Outputs) != 1 || len(f.EndFrom) != 0 {
		return false
	}
	v := &end.Values[end.Outputs[0].ID]
	return v.Op == ops.OpInput && int(v.Aux) == 0
}

// squaresChain reports whether p's one output is the chain of squares of
// squaresFold, from its input acc (input 0) if acc, else from the first
// component's square; its per-trajectory inputs from (after acc) save
// time k's component c at In0 d + c, Step step, and where fl.data its
// data entry (fl's dataOff[c], with Step dataStep[c] where step is not
// 0), the square's operand then Sub of the two in fl's order. A square
// may be weighted, Mul(Square, Const w) (either order): w[c] is then w,
// else 1 (x·1 = x).
func squaresChain(p *tape.Program, from []lossform.In, sh lossform.Shape, fl *fusedLoss, acc bool, step int, w []float64) bool {
	d := sh.D
	if len(p.Outputs) != 1 || len(p.Inputs) != len(from)+btoi(acc) {
		return false
	}
	// input returns the entry of from that p's value id reads, or -1.
	input := func(id tape.ID) int {
		x := &p.Values[id]
		j := int(x.Aux) - btoi(acc)
		if x.Op != ops.OpInput || j < 0 || j >= len(from) {
			return -1
		}
		return j
	}
	// comp returns the component of p's value id, Square(input) (or
	// Square(Sub) of the input and its data), or -1.
	comp := func(id tape.ID) int {
		v, wt := &p.Values[id], 1.0
		if v.Op == ops.OpMul && len(v.Args) == 2 {
			x, k := &p.Values[v.Args[0]], &p.Values[v.Args[1]]
			if x.Op == ops.OpConst {
				x, k = k, x
			}
			if k.Op != ops.OpConst {
				return -1
			}
			v, wt = x, k.Aux
		}
		if v.Op != ops.OpSquare {
			return -1
		}
		x := v.Args[0]
		var dj int
		if fl.data {
			s := &p.Values[x]
			if s.Op != ops.OpSub || len(s.Args) != 2 {
				return -1
			}
			x, dj = s.Args[0], input(s.Args[1])
			if fl.dataSub {
				x, dj = s.Args[1], input(s.Args[0])
			}
			if dj < 0 {
				return -1
			}
		}
		j := input(x)
		if j < 0 || from[j].Step != step || from[j].In0 < d || from[j].In0 >= 2*d {
			return -1
		}
		c := from[j].In0 - d
		if fl.data {
			want := lossform.In{In0: d + sh.K*d + fl.dataOff[c]}
			if step != 0 {
				want.Step = fl.dataStep[c]
			}
			if from[dj] != want {
				return -1
			}
		}
		w[c] = wt
		return c
	}
	id, c := p.Outputs[0].ID, d-1
	for ; c > 0 || acc && c == 0; c-- {
		v := &p.Values[id]
		if v.Op != ops.OpAdd || len(v.Args) != 2 {
			return false
		}
		a, b := v.Args[0], v.Args[1]
		if comp(b) != c {
			a, b = b, a
		}
		if comp(b) != c {
			return false
		}
		id = a
	}
	if acc {
		v := &p.Values[id]
		return c == -1 && v.Op == ops.OpInput && int(v.Aux) == 0
	}
	return comp(id) == 0
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// squaresFrom returns acc with the squares of vals added in order (each
// product and sum rounded, as the loss program's Square and Add are),
// from vals[0]'s square where first: save time 0's values come first.
func squaresFrom(acc float64, vals []float64, first bool) float64 {
	if first && len(vals) > 0 {
		acc, vals = float64(vals[0]*vals[0]), vals[1:]
	}
	for _, x := range vals {
		acc += float64(x * x)
	}
	return acc
}

// scaledResidual reports whether p, the cotangent of component c of
// saves of shape sh with per-trajectory inputs from, is its save (data
// false) or a residual of its save and a data entry (data true: Sub(x,
// d), or Sub(d, x) where sub) times constants, and returns them in the
// order they are applied (Mul(Mul(r, a), w): a, w; either order of a
// Mul's arguments; at least one), and whether the product is negated
// (Neg at any place: negation is exact).
func scaledResidual(p *tape.Program, from []lossform.In, sh lossform.Shape, c int) (mults []float64, neg, data, sub, ok bool) {
	if len(p.Outputs) != 1 {
		return nil, false, false, false, false
	}
	v := &p.Values[p.Outputs[0].ID]
	for {
		if v.Op == ops.OpNeg {
			v, neg = &p.Values[v.Args[0]], !neg
			continue
		}
		if v.Op != ops.OpMul || len(v.Args) != 2 || len(mults) == 4 {
			break
		}
		x, k := &p.Values[v.Args[0]], &p.Values[v.Args[1]]
		if x.Op == ops.OpConst {
			x, k = k, x
		}
		if k.Op != ops.OpConst {
			return nil, false, false, false, false
		}
		mults, v = append(mults, k.Aux), x
	}
	if len(mults) == 0 {
		return nil, false, false, false, false
	}
	slices.Reverse(mults)
	save := lossform.In{In0: sh.D + c, Step: sh.D}
	switch {
	case v.Op == ops.OpInput && int(v.Aux) == 0 && len(from) == 1 && from[0] == save:
		return mults, neg, false, false, true
	case v.Op == ops.OpSub && len(v.Args) == 2 && len(from) == 2 && from[0] == save:
		l, r := &p.Values[v.Args[0]], &p.Values[v.Args[1]]
		if l.Op != ops.OpInput || r.Op != ops.OpInput || l.Aux == r.Aux {
			return nil, false, false, false, false
		}
		dataIn := sh.D + sh.K*sh.D
		if in := from[1].In0; in < dataIn || in >= dataIn+sh.DD {
			return nil, false, false, false, false
		}
		return mults, neg, true, int(l.Aux) == 1, true
	}
	return nil, false, false, false, false
}

// barScale returns the factor the sweep multiplies the saves by to get
// their cotangents scaled by the loss's scale s, and whether it is the
// old path's bit for bit (see above).
func (f *fusedLoss) barScale(s float64) (float64, bool) {
	if f == nil {
		return 0, false
	}
	if s == 1 {
		return f.a, true
	}
	b := f.a * s
	if s == 0 || math.IsInf(b, 0) || math.IsNaN(b) || math.Abs(b) < 0x1p-1022 {
		return 0, false
	}
	return b, true
}

// bound returns the largest |x| of a save whose cotangent x·a is finite.
func (f *fusedLoss) bound() float64 { return math.MaxFloat64 / math.Abs(f.a) }

// fused returns the fused form of the run's loss (see above), or nil
// where the run has none: a gradient whose record writes the saves by
// save time (cpuRun.soaSaves), with a loss of that form and a scale that
// keeps it bit for bit.
func (ex *cpuExec) fused(r *cpuRun) *fusedLoss {
	j := r.job
	if !fuseLoss || !r.soaSaves || j.Loss == nil || j.Loss.Grad == nil {
		return nil
	}
	lp, pl := j.Loss, ex.plan
	v, ok := ex.fusedForms.Load(lp.Hash)
	if !ok {
		f := fusedForm(lp.Grad, lossform.Shape{D: pl.Dim, K: len(j.SaveAt), DD: lp.DataDim, P: pl.Params})
		v, _ = ex.fusedForms.LoadOrStore(lp.Hash, f)
	}
	f := v.(*fusedLoss)
	if f == nil {
		return nil
	}
	if _, ok := f.barScale(lp.Scale); !ok {
		return nil
	}
	return f
}
