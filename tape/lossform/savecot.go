package lossform

import (
	"fmt"
	"math"
	"slices"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// SplitSaveCots finds the form (Session 44 (H4) in docs/more-results.md):
// for each component c, the values that save time k's output ∂ℓ/∂ys[k,c]
// depends on (its cone) must be, value for value in the program's order,
// those of save time 0's (same ops, same aux, arguments at the same
// places), their inputs save time k's saved state where save time 0's
// read save time 0's, data entry j + σ·k where save time 0's read entry
// j (σ fixed per entry, 0 for one read at every k), and the same final
// state, parameters and shared parameters. Save time 0's cone then is
// the function of save time k (SaveCots.Comp[c]), each of its values the
// same op on the same operands as in the gradient program, so the
// cotangents are the program's bit for bit. A component whose cones do
// not match so is compared again with each cone's constants first (a
// weight shared by the save times sits among save time 0's values but
// before save time k's).

// ConeMax is the most values of one function that SplitSaveCots and
// SplitFold return (a cotangent's cone; first, next or end of a fold,
// with the invariants they recompute): a larger one is a loss whose
// terms mix save times (a norm of all of them), or too much work to run
// once a save time.
const ConeMax = 256

// Shape is the shape of a loss gradient program's inputs and outputs
// (see the package doc): state D, save times K, data DD, per-trajectory
// parameters P; the shared ones are the inputs marked Shared.
type Shape struct{ D, K, DD, P int }

// In is an input of a function of save time k (SaveCots.Comp, Fold's
// functions): the gradient program's input In0 + Step·k.
type In struct{ In0, Step int }

// SaveCots is a gradient program split by SplitSaveCots.
type SaveCots struct {
	// Rest is the gradient program without its ∂ℓ/∂ys outputs: outputs
	// ℓ, ∂ℓ/∂y, ∂ℓ/∂p, ∂ℓ/∂s.
	Rest *tape.Program
	// Comp[c] computes ∂ℓ/∂ys[k,c] (one output) from its per-trajectory
	// inputs From[c] (at save time k), then the gradient program's shared
	// inputs in order.
	Comp []*tape.Program
	From [][]In
}

// SplitSaveCots returns g's split form (see above), or false where g's
// ∂ℓ/∂ys is not of it.
func SplitSaveCots(g *tape.Program, sh Shape) (*SaveCots, bool) {
	d, K, dd, np := sh.D, sh.K, sh.DD, sh.P
	ns := 0
	for _, in := range g.Inputs {
		if in.Shared {
			ns++
		}
	}
	if K == 0 || d == 0 || len(g.Inputs) != d+K*d+dd+np+ns || len(g.Outputs) != 1+d+K*d+np+ns || len(g.Funcs) > 0 {
		return nil, false
	}
	ysIn, dataIn := d, d+K*d // the first ys and data inputs
	nv := len(g.Values)
	// mark[id] is 1 + the position of id in the cone it was last found
	// in, for that cone's stamp (stamp[id]).
	mark, stamp := make([]int32, nv), make([]int32, nv)
	ref := make([]int32, nv) // 1 + the position in save time 0's cone
	var stack []tape.ID
	// constsFirst: cone puts its constants before its other values (a
	// constant shared by the save times, a weight, sits before save time
	// k's values but among save time 0's; tried where value order fails).
	constsFirst := false
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
			if len(into) > ConeMax {
				return nil, false
			}
			v := &g.Values[id]
			switch {
			case v.Op == ops.OpInput:
				if in := int(v.Aux); in >= ysIn && in < dataIn && (in-ysIn)/d != k {
					return nil, false
				}
			case !scalar(v.Op):
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
		if constsFirst {
			// The constants first, then the rest, each in value order.
			slices.SortStableFunc(into, func(a, b tape.ID) int {
				return btoi(g.Values[b].Op == ops.OpConst) - btoi(g.Values[a].Op == ops.OpConst)
			})
		}
		for j, id := range into {
			mark[id] = int32(j + 1)
		}
		return into, true
	}
	sc := &SaveCots{Comp: make([]*tape.Program, d), From: make([][]In, d)}
	var r0, rk []tape.ID
	s := int32(0)
	// comp splits component c's cotangents (see above).
	comp := func(c int) bool {
		s++
		var ok bool
		if r0, ok = cone(g.Outputs[1+d+c].ID, s, 0, r0); !ok {
			return false
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
				return false
			}
			for j, x := range rk {
				v0, v := &g.Values[r0[j]], &g.Values[x]
				if v.Op != v0.Op || len(v.Args) != len(v0.Args) || math.Float64bits(v.Aux) != math.Float64bits(v0.Aux) && v.Op != ops.OpInput {
					return false
				}
				for m, a := range v.Args {
					if stamp[a] != s || mark[a] != ref[v0.Args[m]] {
						return false
					}
				}
				if v.Op != ops.OpInput {
					continue
				}
				in0, in := int(v0.Aux), int(v.Aux)
				switch {
				case in0 >= ysIn && in0 < dataIn:
					if in != in0+k*d {
						return false
					}
				case in0 >= dataIn && in0 < dataIn+dd:
					if k == 1 {
						sigma[j] = in - in0
					}
					if in != in0+sigma[j]*k || in < dataIn || in >= dataIn+dd {
						return false
					}
				default:
					if in != in0 {
						return false
					}
				}
			}
		}
		sc.Comp[c], sc.From[c] = saveCotProgram(g, r0, sigma, sh)
		return true
	}
	for c := 0; c < d; c++ {
		if constsFirst = false; comp(c) {
			continue
		}
		if constsFirst = true; !comp(c) {
			return nil, false
		}
	}
	keep := make([]tape.Output, 0, 1+d+np+ns)
	keep = append(keep, g.Outputs[:1+d]...)
	keep = append(keep, g.Outputs[1+d+K*d:]...)
	sc.Rest = tape.DeadCode(&tape.Program{Name: g.Name, Inputs: g.Inputs, Values: g.Values, Outputs: keep})
	return sc, true
}

// scalar reports whether op is one a function of this package may hold:
// a scalar op with a C form (what a GPU thread's code runs), no tuple.
func scalar(op ops.Op) bool {
	return op == ops.OpInput || op != ops.OpExtract && op != ops.OpAttach && !ops.IsTuple(op) && ops.Lookup(op).C != nil
}

// saveCotProgram returns the program of save time k's cotangent whose
// cone at save time 0 is cone (sorted) in g, its inputs' data strides
// sigma (by cone position): inputs x0, x1, … (the cone's per-trajectory
// inputs, in order: at save time k, g's inputs from returns) and g's
// shared inputs (in order, read from sh as in g), one output.
func saveCotProgram(g *tape.Program, cone []tape.ID, sigma []int, sh Shape) (*tape.Program, []In) {
	d, K := sh.D, sh.K
	ysIn, dataIn := d, d+K*d
	p := &tape.Program{Name: "savecot"}
	at := make(map[tape.ID]tape.ID, len(cone))
	var from []In
	for j, id := range cone {
		v := &g.Values[id]
		if v.Op != ops.OpInput || g.Inputs[int(v.Aux)].Shared {
			continue
		}
		in := In{In0: int(v.Aux)}
		switch {
		case in.In0 >= ysIn && in.In0 < dataIn:
			in.Step = d
		case in.In0 >= dataIn && in.In0 < dataIn+sh.DD:
			in.Step = sigma[j]
		}
		at[id] = tape.ID(len(p.Inputs))
		p.Inputs = append(p.Inputs, tape.Input{Name: fmt.Sprintf("x%d", len(p.Inputs))})
		from = append(from, in)
	}
	appendSharedInputs(p, g, at)
	appendValues(p, g, cone, at) // (a cone: every argument is in it)
	p.Outputs = []tape.Output{{Name: "ybar", ID: at[cone[len(cone)-1]]}}
	return p, from
}

// appendValues appends to the program p being built from g the values
// vals of g that are not inputs, in order, each the same op on its
// arguments' values in p (at maps g's values to p's, and gets each
// appended one); it reports false, having stopped, at an argument that at
// does not hold.
func appendValues(p, g *tape.Program, vals []tape.ID, at map[tape.ID]tape.ID) bool {
	for _, id := range vals {
		v := &g.Values[id]
		if v.Op == ops.OpInput {
			continue
		}
		args := make([]tape.ID, len(v.Args))
		for m, a := range v.Args {
			y, ok := at[a]
			if !ok {
				return false
			}
			args[m] = y
		}
		at[id] = tape.ID(len(p.Values))
		p.Values = append(p.Values, tape.Value{Op: v.Op, Aux: v.Aux, Args: args})
	}
	return true
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

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
