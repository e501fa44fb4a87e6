package ode

import (
	"math"

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
// the old path.
// Every other loss, and fuseLoss false, run the old path.

// fuseLoss turns the fused loss on; tests and benchmarks turn it off to
// compare with the old path.
var fuseLoss = true

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
	end      *tape.Program
	endFrom  []lossform.In // end's per-trajectory inputs after the sum (Steps 0)
}

// fusedForm returns the fused form of the gradient program g of shape
// sh, or nil where it has none.
func fusedForm(g *tape.Program, sh lossform.Shape) *fusedLoss {
	sc, ok := lossform.SplitSaveCots(g, sh)
	if !ok {
		return nil
	}
	a := 0.0
	for c, p := range sc.Comp {
		x, ok := scaledInput(p)
		if !ok || len(sc.From[c]) != 1 || sc.From[c][0] != (lossform.In{In0: sh.D + c, Step: sh.D}) || c > 0 && math.Float64bits(x) != math.Float64bits(a) {
			return nil
		}
		a = x
	}
	if frac, _ := math.Frexp(math.Abs(a)); frac != 0.5 || math.Abs(a) < 1 || math.IsInf(a, 0) {
		return nil
	}
	fl := &fusedLoss{rest: sc.Rest, a: a}
	if f, ok := lossform.SplitFold(sc.Rest, sh); ok && squaresFold(f, sh.D) {
		fl.squares, fl.foldRest = true, f.Rest
		if !sumEnd(f) {
			fl.end, fl.endFrom = f.End, f.EndFrom
		}
	}
	return fl
}

// squaresFold reports whether the fold f of saves of d components folds
// the sum of the squares of the saved values in their order, from save
// time 0's first component's square: first ((x_0² + x_1²) + …) +
// x_{d-1}², next (((acc + x_0²) + x_1²) + …) + x_{d-1}² (x save time k's
// state: each Add rounded in that order, as squaresFrom computes it).
// Its end may be any function of the sum (and of the final state, the
// parameters and the data: SplitFold's end reads no saved state).
func squaresFold(f *lossform.Fold, d int) bool {
	return squaresChain(f.First, f.FirstFrom, d, false, 0) && squaresChain(f.Next, f.NextFrom, d, true, d)
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
// time k's component c at In0 d + c, Step step.
func squaresChain(p *tape.Program, from []lossform.In, d int, acc bool, step int) bool {
	if len(p.Outputs) != 1 || len(p.Inputs) != len(from)+btoi(acc) {
		return false
	}
	// comp returns the component of p's value id, Square(input), or -1.
	comp := func(id tape.ID) int {
		v := &p.Values[id]
		if v.Op != ops.OpSquare {
			return -1
		}
		x := &p.Values[v.Args[0]]
		j := int(x.Aux) - btoi(acc)
		if x.Op != ops.OpInput || j < 0 || j >= len(from) || from[j].Step != step || from[j].In0 < d || from[j].In0 >= 2*d {
			return -1
		}
		return from[j].In0 - d
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

// scaledInput reports whether p's one output is its first input times a
// constant, and returns the constant.
func scaledInput(p *tape.Program) (float64, bool) {
	if len(p.Outputs) != 1 {
		return 0, false
	}
	v := &p.Values[p.Outputs[0].ID]
	if v.Op != ops.OpMul || len(v.Args) != 2 {
		return 0, false
	}
	x, c := &p.Values[v.Args[0]], &p.Values[v.Args[1]]
	if x.Op == ops.OpConst {
		x, c = c, x
	}
	if x.Op != ops.OpInput || int(x.Aux) != 0 || c.Op != ops.OpConst {
		return 0, false
	}
	return c.Aux, true
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
