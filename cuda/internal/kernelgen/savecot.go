package kernelgen

import (
	"fmt"
	"math"
	"slices"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
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
// splitSaveCots finds that form in the gradient program: for each
// component c, the values that save time k's output dL/dys[k,c] depends
// on (its cone) must be, value for value in the program's order, those
// of save time 0's (same ops, same aux, arguments at the same places),
// their inputs save time k's saved state where save time 0's read save
// time 0's, data entry j + σ·k where save time 0's read entry j (σ fixed
// per entry, 0 for one read at every k), and the same final state,
// parameters and shared parameters. Save time 0's cone then is the
// function of save time k (saveCots.comp[c]), each of its values the same
// op on the same operands as in the gradient program, so the cotangents
// are the stored ones bit for bit.

// saveCotMax is the most values of one cotangent's cone (splitSaveCots):
// a larger cone is a loss whose terms mix save times (a norm of all of
// them) or too much work to run twice a save time in the sweep.
const saveCotMax = 256

// saveCotMaxDim is the largest state dimension whose gradient kernels
// take the split form: it emits a function a component (gs_a_save_cot<c>
// and a case of gs_save_cot's switch), so a larger system's kernel
// would grow with d, where the stored form's loss VJP is a loop
// (TestRerolledSize: Lorenz-96's gradient kernels at d = 64 and 256 keep
// the same statements).
const saveCotMaxDim = 16

// saveCots is a gradient program split by splitSaveCots.
type saveCots struct {
	// rest is the gradient program without its dL/dys outputs: outputs ℓ,
	// dL/dy, dL/dp, dL/ds.
	rest *tape.Program
	// comp[c] computes dL/dys[k,c] from its inputs (one output); args[c]
	// are the C expressions of its per-trajectory inputs, in order, in
	// gs_save_cot's parameters (sh, y, ys, n, i, data, p) and k; from[c]
	// are those inputs' inputs of the gradient program.
	comp []*tape.Program
	args [][]string
	from [][]saveCotIn
	// strided are the C expressions of the ensemble's arrays that save
	// time k's cotangents read that move with k (ys, data), for
	// gs_save_cot_prefetch.
	strided []string
}

// saveCotIn is an input of a save time's cotangent program: input in0 +
// step·k of the gradient program at save time k.
type saveCotIn struct{ in0, step int }

// lossShapeOf is the shape of a loss gradient program's inputs and
// outputs (LossPlan.Grad): state d, save times k, data dd, parameters np;
// the shared ones are the inputs marked Shared.
type lossShapeOf struct{ d, k, dd, np int }

// splitSaveCots returns g's split form (see above), or false where g's
// dL/dys is not of it.
func splitSaveCots(g *tape.Program, sh lossShapeOf) (*saveCots, bool) {
	d, K, dd, np := sh.d, sh.k, sh.dd, sh.np
	ns := 0
	for _, in := range g.Inputs {
		if in.Shared {
			ns++
		}
	}
	if K == 0 || d == 0 || d > saveCotMaxDim || len(g.Inputs) != d+K*d+dd+np+ns || len(g.Outputs) != 1+d+K*d+np+ns || len(g.Funcs) > 0 {
		return nil, false
	}
	ysIn, dataIn := d, d+K*d // the first ys and data inputs
	nv := len(g.Values)
	// mark[id] is 1 + the position of id in the cone it was last found
	// in, for that cone's stamp (stamp[id]).
	mark, stamp := make([]int32, nv), make([]int32, nv)
	ref := make([]int32, nv) // 1 + the position in save time 0's cone
	var stack []tape.ID
	// cone returns the cone of output out (sorted), stamped s, or false
	// if it reads another save time than k or an op that is not scalar.
	cone := func(out tape.ID, s int32, k int, into []tape.ID) ([]tape.ID, bool) {
		into = into[:0]
		stack = append(stack[:0], out)
		stamp[out] = s
		for len(stack) > 0 {
			id := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			into = append(into, id)
			if len(into) > saveCotMax {
				return nil, false
			}
			v := &g.Values[id]
			switch {
			case v.Op == ops.OpInput:
				if in := int(v.Aux); in >= ysIn && in < dataIn && (in-ysIn)/d != k {
					return nil, false
				}
			case v.Op == ops.OpExtract || v.Op == ops.OpAttach || ops.IsTuple(v.Op) || ops.Lookup(v.Op).C == nil:
				return nil, false
			}
			for _, a := range v.Args {
				if stamp[a] != s {
					stamp[a] = s
					stack = append(stack, a)
				}
			}
		}
		slices.Sort(into)
		for j, id := range into {
			mark[id] = int32(j + 1)
		}
		return into, true
	}
	sc := &saveCots{comp: make([]*tape.Program, d), args: make([][]string, d), from: make([][]saveCotIn, d)}
	var r0, rk []tape.ID
	s := int32(0)
	for c := 0; c < d; c++ {
		s++
		var ok bool
		if r0, ok = cone(g.Outputs[1+d+c].ID, s, 0, r0); !ok {
			return nil, false
		}
		for j, id := range r0 {
			ref[id] = int32(j + 1)
		}
		// sigma[j]: the data stride of cone position j's data input, set
		// by save time 1 (0 where K is 1).
		sigma := make([]int, len(r0))
		for k := 1; k < K; k++ {
			s++
			if rk, ok = cone(g.Outputs[1+d+k*d+c].ID, s, k, rk); !ok || len(rk) != len(r0) {
				return nil, false
			}
			for j, x := range rk {
				v0, v := &g.Values[r0[j]], &g.Values[x]
				if v.Op != v0.Op || len(v.Args) != len(v0.Args) || math.Float64bits(v.Aux) != math.Float64bits(v0.Aux) && v.Op != ops.OpInput {
					return nil, false
				}
				for m, a := range v.Args {
					if stamp[a] != s || mark[a] != ref[v0.Args[m]] {
						return nil, false
					}
				}
				if v.Op != ops.OpInput {
					continue
				}
				in0, in := int(v0.Aux), int(v.Aux)
				switch {
				case in0 >= ysIn && in0 < dataIn:
					if in != in0+k*d {
						return nil, false
					}
				case in0 >= dataIn && in0 < dataIn+dd:
					if k == 1 {
						sigma[j] = in - in0
					}
					if in != in0+sigma[j]*k || in < dataIn || in >= dataIn+dd {
						return nil, false
					}
				default:
					if in != in0 {
						return nil, false
					}
				}
			}
		}
		sc.comp[c], sc.from[c] = saveCotProgram(g, r0, sigma, sh)
		sc.args[c], sc.strided = saveCotArgs(sc.from[c], sh, sc.strided)
	}
	slices.Sort(sc.strided)
	sc.strided = slices.Compact(sc.strided)
	keep := make([]tape.Output, 0, 1+d+np+ns)
	keep = append(keep, g.Outputs[:1+d]...)
	keep = append(keep, g.Outputs[1+d+K*d:]...)
	sc.rest = tape.DeadCode(&tape.Program{Name: g.Name, Inputs: g.Inputs, Values: g.Values, Outputs: keep})
	return sc, true
}

// saveCotProgram returns the program of save time k's cotangent whose
// cone at save time 0 is cone (sorted) in g, its inputs' data strides
// sigma (by cone position): inputs x0, x1, … (the cone's per-trajectory
// inputs, in order: at save time k, g's inputs from returns) and g's
// shared inputs (in order, read from sh as in g), one output.
func saveCotProgram(g *tape.Program, cone []tape.ID, sigma []int, sh lossShapeOf) (*tape.Program, []saveCotIn) {
	d, K := sh.d, sh.k
	ysIn, dataIn := d, d+K*d
	p := &tape.Program{Name: "savecot"}
	at := make(map[tape.ID]tape.ID, len(cone))
	var from []saveCotIn
	for j, id := range cone {
		v := &g.Values[id]
		if v.Op != ops.OpInput || g.Inputs[int(v.Aux)].Shared {
			continue
		}
		in := saveCotIn{in0: int(v.Aux)}
		switch {
		case in.in0 >= ysIn && in.in0 < dataIn:
			in.step = d
		case in.in0 >= dataIn && in.in0 < dataIn+sh.dd:
			in.step = sigma[j]
		}
		at[id] = tape.ID(len(p.Inputs))
		p.Inputs = append(p.Inputs, tape.Input{Name: fmt.Sprintf("x%d", len(p.Inputs))})
		from = append(from, in)
	}
	appendSharedInputs(p, g, at)
	for _, id := range cone {
		v := &g.Values[id]
		if v.Op == ops.OpInput {
			continue
		}
		args := make([]tape.ID, len(v.Args))
		for m, a := range v.Args {
			args[m] = at[a]
		}
		at[id] = tape.ID(len(p.Values))
		p.Values = append(p.Values, tape.Value{Op: v.Op, Aux: v.Aux, Args: args})
	}
	p.Outputs = []tape.Output{{Name: "ybar", ID: at[cone[len(cone)-1]]}}
	return p, from
}

// saveCotArgs returns the C expressions of the inputs from of a save
// time's cotangent program, of k (gs_save_cot's parameters), and appends
// to strided those of the ensemble's arrays that move with k.
func saveCotArgs(from []saveCotIn, sh lossShapeOf, strided []string) ([]string, []string) {
	d, K := sh.d, sh.k
	ysIn, dataIn, pIn := d, d+K*d, d+K*d+sh.dd
	args := make([]string, len(from))
	for j, in := range from {
		var x string
		switch {
		case in.in0 < ysIn:
			x = fmt.Sprintf("y[%d]", in.in0)
		case in.in0 < dataIn:
			x = fmt.Sprintf("ys[((long long)k * %d + %d) * n + i]", d, in.in0-ysIn)
		case in.in0 < pIn && in.step == 0:
			x = fmt.Sprintf("data[%dLL * n + i]", in.in0-dataIn)
		case in.in0 < pIn:
			x = fmt.Sprintf("data[(%dLL + (long long)k * %d) * n + i]", in.in0-dataIn, in.step)
		default:
			x = fmt.Sprintf("p[%d]", in.in0-pIn)
		}
		if in.step != 0 {
			strided = append(strided, x)
		}
		args[j] = x
	}
	return args, strided
}

// inputValue returns the value of g's input k.
func inputValue(g *tape.Program, k int) (tape.ID, bool) {
	for id := range g.Values {
		if v := &g.Values[id]; v.Op == ops.OpInput && int(v.Aux) == k {
			return tape.ID(id), true
		}
	}
	return 0, false
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
	for c, p := range sc.comp {
		g.adapter(fmt.Sprintf("gs_a_save_cot%d", c), p, "gs_real", params, sc.args[c], []string{"return"})
	}
	if g.err != nil {
		return
	}
	fmt.Fprintf(&g.sb, "GS_DEVICE gs_real gs_save_cot(%s, int c) {\n  switch (c) {\n", params)
	for c := range sc.comp {
		fmt.Fprintf(&g.sb, "  case %d: return gs_a_save_cot%d(%s);\n", c, c, args)
	}
	g.sb.WriteString("  }\n  return 0;\n}\n")
	g.sb.WriteString("GS_DEVICE void gs_save_cot_prefetch(const gs_real* ys, long long n, long long i, const gs_real* data, int k) {\n")
	for _, x := range sc.strided {
		fmt.Fprintf(&g.sb, "  GS_PREFETCH(&%s);\n", x)
	}
	g.sb.WriteString("}\n")
}

// appendSharedInputs appends g's shared inputs to the program p being
// built from g (at maps g's values to p's: the shared inputs' values are
// added to it), then p's input values, one per input of p in order.
func appendSharedInputs(p, g *tape.Program, at map[tape.ID]tape.ID) {
	for k, in := range g.Inputs {
		if in.Shared {
			if id, ok := inputValue(g, k); ok {
				at[id] = tape.ID(len(p.Inputs))
			}
			p.Inputs = append(p.Inputs, in)
		}
	}
	for k := range p.Inputs {
		p.Values = append(p.Values, tape.Value{Op: ops.OpInput, Aux: float64(k)})
	}
}
