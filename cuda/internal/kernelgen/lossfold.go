package kernelgen

import (
	"fmt"
	"math"

	"github.com/gradsolve-go/gradsolve/tape"
	"github.com/gradsolve-go/gradsolve/tape/lossform"
)

// The loss's value folded into the forward pass (issue 25). A gradient
// kernel whose save times' cotangents are computed in the sweep
// (savecot.go) still ran the loss VJP before the sweep for the loss's
// value: a chain over every saved value, reread from ys (131 MB for
// Kepler's 1,000 save times at n = 4,096), in the serial prologue of the
// adjoint. Where the value is a left fold over the save times, the
// forward pass computes it instead, where it writes save time k's state
// (gs_save_state: the state is in registers), into a per-thread
// accumulator, and the prologue only finishes it (gs_a_fold_end) and
// stores it; the loss VJP keeps dL/dy, dL/dp and dL/ds (rest).
//
// lossform.SplitFold finds the form in the gradient program g (see its
// doc): ℓ = end(acc_{K-1}), acc_k = next(acc_{k-1}, save time k), acc_0
// = first(save time 0), each function's values the gradient program's,
// so the folded value is the stored one bit for bit.

// lossFold is a loss's value split by lossform.SplitFold, with the C
// expressions of its functions' inputs.
type lossFold struct {
	*lossform.Fold
	// The C expressions of First's, Next's and End's per-trajectory
	// inputs (after acc), in the parameters of gs_a_fold_first (sh, x, n,
	// i, data, p), gs_a_fold_next (sh, acc, x, n, i, data, p, k) and
	// gs_a_fold_end (sh, acc, y, n, i, data, p): x is the saved state.
	firstArgs, nextArgs, endArgs []string
}

// splitLossFold returns g's value split as a fold over the save times
// with its C expressions, or false where it is not of that form.
func splitLossFold(g *tape.Program, sh lossform.Shape) (*lossFold, bool) {
	f, ok := lossform.SplitFold(g, sh)
	if !ok {
		return nil, false
	}
	return &lossFold{Fold: f, firstArgs: foldArgs(f.FirstFrom, sh), nextArgs: foldArgs(f.NextFrom, sh), endArgs: foldArgs(f.EndFrom, sh)}, true
}

// foldArgs returns the C expressions of a fold function's per-trajectory
// inputs from (after acc), in the parameters of gs_a_fold_first,
// gs_a_fold_next and gs_a_fold_end: x the saved state, y the final one,
// k the save time.
func foldArgs(from []lossform.In, sh lossform.Shape) []string {
	ysIn, dataIn, pIn := sh.D, sh.D+sh.K*sh.D, sh.D+sh.K*sh.D+sh.DD
	args := make([]string, len(from))
	for j, in := range from {
		switch {
		case in.In0 < ysIn:
			args[j] = fmt.Sprintf("y[%d]", in.In0)
		case in.In0 < dataIn:
			args[j] = fmt.Sprintf("x[%d]", in.In0-ysIn)
		case in.In0 < pIn && in.Step == 0:
			args[j] = fmt.Sprintf("data[%dLL * n + i]", in.In0-dataIn)
		case in.In0 < pIn:
			args[j] = fmt.Sprintf("data[(%dLL + (long long)k * %d) * n + i]", in.In0-dataIn, in.Step)
		default:
			args[j] = fmt.Sprintf("p[%d]", in.In0-pIn)
		}
	}
	return args
}

// emitLossFold writes the kernel's fold of the loss's value lf:
//
//	gs_real gs_a_fold_first(sh, x, n, i, data, p);          // acc_0 from save time 0's state x
//	gs_real gs_a_fold_next(sh, acc, x, n, i, data, p, k);   // acc_k from acc_{k-1} and save time k's
//	gs_real gs_a_fold_end(sh, acc, y, n, i, data, p);       // ℓ from acc_{K-1} and the final state y
//
// Their functions are straight-line code (not rerolled: a loop over a
// save time's components would index its arguments, an array, on every
// save time of the forward pass).
func (g *adapters) emitLossFold(lf *lossFold) {
	was := g.src.reroll
	g.src.reroll = false
	defer func() { g.src.reroll = was }()
	const rest = "long long n, long long i, const gs_real* data, const gs_real* p"
	g.adapter("gs_a_fold_first", lf.First, "gs_real", "const gs_real* sh, const gs_real* x, "+rest, lf.firstArgs, []string{"return"})
	g.adapter("gs_a_fold_next", lf.Next, "gs_real", "const gs_real* sh, gs_real acc, const gs_real* x, "+rest+", int k",
		append([]string{"acc"}, lf.nextArgs...), []string{"return"})
	g.adapter("gs_a_fold_end", lf.End, "gs_real", "const gs_real* sh, gs_real acc, const gs_real* y, "+rest,
		append([]string{"acc"}, lf.endArgs...), []string{"return"})
}

// foldAcc returns the accumulator spec of rest, the loss VJP without ℓ
// whose first shared gradient is output first (of ns), given the VJP's
// with ℓ (g, spec, acc: planAcc's), and whether the fold keeps its dL/ds
// bit for bit: where g's adds none itself, rest adds none (its dL/ds are
// returned and reduced as g's are, the same values); where it does, rest
// must add the same terms in the same order (planAcc on rest can find
// other trees of adds, where removing ℓ's chain leaves values of one use).
func foldAcc(rest *tape.Program, first, ns int, g *tape.Program, spec *accSpec, acc bool) (*accSpec, bool) {
	if !acc {
		return nil, true
	}
	fspec, ok := planAcc(rest, first, ns)
	if !ok || len(fspec.terms) != len(spec.terms) || len(fspec.callees) > 0 || len(spec.callees) > 0 {
		return nil, false
	}
	for j, t := range fspec.terms {
		u := spec.terms[j]
		a, b := &rest.Values[t.id], &g.Values[u.id]
		if t.j != u.j || a.Op != b.Op || math.Float64bits(a.Aux) != math.Float64bits(b.Aux) {
			return nil, false
		}
	}
	return fspec, true
}
