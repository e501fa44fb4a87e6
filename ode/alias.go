package ode

import "github.com/gradsolve-go/gradsolve/internal/buf"

// A dst passed back to SolveTo, Grad or GradPartial lends its arrays to
// the engine, which writes the results into them while it reads the
// inputs. An array of dst that shares storage with an input (a chained
// solve's p.Y0 = sol.Y passed with sol as dst, a Gradient whose Y0 is
// p.Y0) would be written over before it is read: the results would be
// silently wrong, and the input changed. Such an array is not lent: the
// results go to new storage, the input is left as it was, and the call
// returns what it returns for a dst without that array (bit for bit).

// inputs returns the arrays a call on q reads while the engine writes
// its results: the problem's (as given and as expanded), the loss's data
// and a given mesh's (loss and m may be nil).
func (q *problem) inputs(loss *Loss, m *Mesh) [][]float64 {
	// Room for all thirteen: the list stays on the caller's stack (a
	// kept call allocates nothing for it).
	in := append(make([][]float64, 0, 13), q.Y0, q.y0, q.P, q.p, q.Shared, q.T1s, q.t1, q.SaveAt, q.t0s)
	if loss != nil {
		in = append(in, loss.Data)
	}
	if m != nil {
		in = append(in, m.H, m.T1, m.SaveAt)
	}
	return in
}

// unaliased returns s, or nil where its storage overlaps one of the
// inputs in (buf.Overlap: up to the capacities, which an engine may
// fill).
func unaliased(s []float64, in [][]float64) []float64 {
	for _, x := range in {
		if buf.Overlap(s, x) {
			return nil
		}
	}
	return s
}

// overlaps reports whether s's storage overlaps one of the inputs in.
func overlaps(s []float64, in [][]float64) bool { return s != nil && unaliased(s, in) == nil }

// unalias sets dst's arrays that overlap an input to nil before dst is
// lent to a call (see SolveTo), and reports whether it set any.
func (dst *Solution) unalias(in [][]float64) bool {
	if !overlaps(dst.Y, in) && !overlaps(dst.Ys, in) && !overlaps(dst.T, in) && !overlaps(dst.ysSpare, in) {
		return false
	}
	dst.Y, dst.Ys, dst.T = unaliased(dst.Y, in), unaliased(dst.Ys, in), unaliased(dst.T, in)
	dst.ysSpare = unaliased(dst.ysSpare, in)
	return true
}

// unalias leaves out of g's arrays, before g is lent to a call as dst,
// those that overlap an input (see Solution.unalias): its gradients and
// spare storage are set to nil, its Solution is replaced by a copy
// without them (the caller may still hold the old one) and its Mesh is
// not reused if its steps or end times overlap one.
func (g *Gradient) unalias(in [][]float64) {
	if g == nil {
		return
	}
	g.Y0, g.P, g.Shared = unaliased(g.Y0, in), unaliased(g.P, in), unaliased(g.Shared, in)
	g.spare.y, g.spare.ys = unaliased(g.spare.y, in), unaliased(g.spare.ys, in)
	if s := g.Solution; s != nil {
		if c := *s; c.unalias(in) {
			g.Solution = &c
		}
	}
	if m := g.Mesh; m != nil && (overlaps(m.H, in) || overlaps(m.T1, in)) {
		g.Mesh = nil
	}
}
