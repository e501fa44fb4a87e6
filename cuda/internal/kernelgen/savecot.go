package kernelgen

import (
	"fmt"
	"slices"

	"github.com/gradsolve-go/gradsolve/tape"
	"github.com/gradsolve-go/gradsolve/tape/lossform"
)

// Save times' cotangents computed in the reverse sweep (issue 25). A
// gradient kernel's loss VJP (Plan's LossPlan.Grad) returns dL/dys, one
// cotangent per saved value, which the kernel stores (a.tb, K·Dim values
// a trajectory) for the reverse sweep to read, save time by save time,
// from the last one back. Where the loss is a sum over the save times of
// terms of one save time each (the sum of squares of the saved states,
// their squared distances from data rows), save time k's cotangents are
// a function of its own saved state (with the final state, the data, the
// parameters): the same function at every k, its data entries moving
// with k. The kernel then computes them where the sweep reaches save time
// k, from ys and the data (gs_save_cot), and the loss VJP computes the
// rest (the term, dL/dy, dL/dp, dL/ds) without them: no array of K·Dim
// cotangents a trajectory, written in one pass and read back in the
// other.
//
// lossform.SplitSaveCots finds that form in the gradient program (see
// its doc): save time 0's cone of each component's cotangent is the
// function of save time k, each of its values the same op on the same
// operands as in the gradient program, so the cotangents are the stored
// ones bit for bit.

// saveCotMaxDim is the largest state dimension whose gradient kernels
// take the split form: it emits a function a component (gs_a_save_cot<c>
// and a case of gs_save_cot's switch), so a larger system's kernel
// would grow with d, where the stored form's loss VJP is a loop
// (TestRerolledSize: Lorenz-96's gradient kernels at d = 64 and 256 keep
// the same statements).
const saveCotMaxDim = 16

// saveCots is a gradient program split by lossform.SplitSaveCots, with
// the C expressions of its functions' inputs.
type saveCots struct {
	*lossform.SaveCots
	// args[c] are the C expressions of Comp[c]'s per-trajectory inputs
	// (From[c]), in order, in gs_save_cot's parameters (sh, y, ys, n, i,
	// data, p) and k.
	args [][]string
	// strided are the C expressions of the ensemble's arrays that save
	// time k's cotangents read that move with k (ys, data), for
	// gs_save_cot_prefetch.
	strided []string
}

// splitSaveCots returns g's split form with its C expressions, or false
// where g's dL/dys is not of it or d is over saveCotMaxDim.
func splitSaveCots(g *tape.Program, sh lossform.Shape) (*saveCots, bool) {
	if sh.D > saveCotMaxDim {
		return nil, false
	}
	split, ok := lossform.SplitSaveCots(g, sh)
	if !ok {
		return nil, false
	}
	sc := &saveCots{SaveCots: split, args: make([][]string, sh.D)}
	for c, from := range split.From {
		sc.args[c], sc.strided = saveCotArgs(from, sh, sc.strided)
	}
	slices.Sort(sc.strided)
	sc.strided = slices.Compact(sc.strided)
	return sc, true
}

// saveCotArgs returns the C expressions of the inputs from of a save
// time's cotangent program, of k (gs_save_cot's parameters), and appends
// to strided those of the ensemble's arrays that move with k.
func saveCotArgs(from []lossform.In, sh lossform.Shape, strided []string) ([]string, []string) {
	d, K := sh.D, sh.K
	ysIn, dataIn, pIn := d, d+K*d, d+K*d+sh.DD
	args := make([]string, len(from))
	for j, in := range from {
		var x string
		switch {
		case in.In0 < ysIn:
			x = fmt.Sprintf("y[%d]", in.In0)
		case in.In0 < dataIn:
			x = fmt.Sprintf("ys[((long long)k * %d + %d) * n + i]", d, in.In0-ysIn)
		case in.In0 < pIn && in.Step == 0:
			x = fmt.Sprintf("data[%dLL * n + i]", in.In0-dataIn)
		case in.In0 < pIn:
			x = fmt.Sprintf("data[(%dLL + (long long)k * %d) * n + i]", in.In0-dataIn, in.Step)
		default:
			x = fmt.Sprintf("p[%d]", in.In0-pIn)
		}
		if in.Step != 0 {
			strided = append(strided, x)
		}
		args[j] = x
	}
	return args, strided
}

// emitSaveCots writes the kernel's save-time cotangents of sc (a loss's
// split gradient program): per component c an adapter gs_a_save_cot<c>
// of comp[c], and
//
//	gs_real gs_save_cot(sh, y, ys, n, i, data, p, k, c);   // dL/dys[k,c], unscaled
//	void gs_save_cot_prefetch(ys, n, i, data, k);          // asks for what it reads
func (g *adapters) emitSaveCots(sc *saveCots) {
	const (
		params = "const gs_real* sh, const gs_real* y, const gs_real* ys, long long n, long long i, const gs_real* data, const gs_real* p, int k"
		args   = "sh, y, ys, n, i, data, p, k"
	)
	for c, p := range sc.Comp {
		g.adapter(fmt.Sprintf("gs_a_save_cot%d", c), p, "gs_real", params, sc.args[c], []string{"return"})
	}
	if g.err != nil {
		return
	}
	fmt.Fprintf(&g.sb, "GS_DEVICE gs_real gs_save_cot(%s, int c) {\n  switch (c) {\n", params)
	for c := range sc.Comp {
		fmt.Fprintf(&g.sb, "  case %d: return gs_a_save_cot%d(%s);\n", c, c, args)
	}
	g.sb.WriteString("  }\n  return 0;\n}\n")
	g.sb.WriteString("GS_DEVICE void gs_save_cot_prefetch(const gs_real* ys, long long n, long long i, const gs_real* data, int k) {\n")
	for _, x := range sc.strided {
		fmt.Fprintf(&g.sb, "  GS_PREFETCH(&%s);\n", x)
	}
	g.sb.WriteString("}\n")
}
