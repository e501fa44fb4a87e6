package ode

import "github.com/gradsolve-go/gradsolve/internal/buf"

// autoSpare is the host arrays of a Method Auto call's continuation jobs
// (continueAuto: the Rodas5P segment's record and gradient, the Tsit5
// segment's gradient, their given Reuse) that its result does not hold:
// the Rodas5P segment's gradient, counts and stiffness flags, the Tsit5
// segment's states, and the like. They are kept with the continued
// trajectories' steps (autoSteps.spare) for the next call given that
// result back (takeAutoMem), whose continuation's jobs write into them
// (Job.Reuse) instead of allocating: at n = 16384 a stiff ensemble's
// continuation allocated 4–5 MB a call, each page of it zeroed and
// faulted in. The arrays of the user's result passed back (the first
// pass's Job.Reuse) are never among them: package ode writes the call's
// results into those after the jobs (gradArrays).
type autoSpare struct {
	f  [][]float64
	i  [][]int
	st [][]Status
	b  [][]bool
	// stops is the storage of runAutoSplit's stopped trajectories, 24
	// bytes a trajectory of a stiff ensemble (emptied, cleared).
	stops []autoStop
}

// takeSpare removes from *list the array of the smallest capacity of at
// least n and returns it with length n, or nil where none is as large.
func takeSpare[T any](list *[][]T, n int) []T {
	best := -1
	for x, s := range *list {
		if cap(s) >= n && (best < 0 || cap(s) < cap((*list)[best])) {
			best = x
		}
	}
	if best < 0 || n == 0 {
		return nil
	}
	s := (*list)[best][:n]
	last := len(*list) - 1
	(*list)[best], (*list)[last] = (*list)[last], nil
	*list = (*list)[:last]
	return s
}

// autoSpareMax bounds the arrays of each type an autoSpare keeps: a
// call's continuation takes at most 5 of a type for each of its 5 jobs
// (see reuse); past it, where its result hands some of its arrays to
// the caller in exchange for new ones (mergeAuto's flags), the others
// are dropped.
const autoSpareMax = 25

// reuse returns a Result whose arrays, taken from s, a job of op on k
// trajectories of dimension d, np parameters and K save times may write
// its results into (Job.Reuse; nil where s has none as large), with
// Mesh m (nil: none): a record's (m nil: op records) statuses, flags,
// counts and times, states, saves, and a gradient's ∂L/∂y0 and ∂L/∂p. A
// nil s gives one with Mesh m alone.
func (s *autoSpare) reuse(op Op, k, d, np, K int, m *Mesh, records bool) *Result {
	r := &Result{Mesh: m}
	if s == nil {
		return r
	}
	if records {
		r.Status, r.Stiff, r.T = takeSpare(&s.st, k), takeSpare(&s.b, k), takeSpare(&s.f, k)
		r.Stats.Accepted, r.Stats.Rejected, r.Stats.FieldEvals = takeSpare(&s.i, k), takeSpare(&s.i, k), takeSpare(&s.i, k)
	}
	r.Y = takeSpare(&s.f, k*d)
	if K > 0 {
		r.Ys = takeSpare(&s.f, k*K*d)
	}
	if op == OpGrad {
		r.GradY0, r.GradP = takeSpare(&s.f, k*d), takeSpare(&s.f, k*np)
	}
	return r
}

// ints returns an array of n ints from s (nil s, or none as large: a new
// one).
func (s *autoSpare) ints(n int) []int {
	if s != nil {
		if x := takeSpare(&s.i, n); x != nil {
			return x
		}
	}
	return make([]int, n)
}

// heldArrays are the arrays of a call's result and of the meshes it
// keeps: an array that overlaps one of them is not spare.
type heldArrays struct {
	f  [][]float64
	i  [][]int
	st [][]Status
	b  [][]bool
}

// result adds r's arrays (and its mesh's, see mesh) to h.
func (h *heldArrays) result(r *Result) {
	if r == nil {
		return
	}
	h.f = append(h.f, r.T, r.Y, r.Ys, r.LastH, r.GradY0, r.GradP, r.GradS, r.MeshT1)
	h.i = append(h.i, r.Stats.Accepted, r.Stats.Rejected, r.Stats.FieldEvals, r.Switch, r.Events)
	h.st = append(h.st, r.Status)
	h.b = append(h.b, r.Stiff, r.switched)
	for _, y := range r.LastY {
		h.f = append(h.f, y)
	}
	h.mesh(r.Mesh, false)
}

// mesh adds m's arrays to h (steps: its steps' alone, H, T1, Len and
// Switch), and those of the meshes its steps keep (autoSteps,
// mergedSteps). Of autoSteps' two meshes (a record's, whose Status and
// Stats are its result's) only the steps count: nothing reads the rest
// (CopyTo reads the steps; takeAutoMem gives the meshes to the next
// call's records as Job.Reuse.Mesh, whose steps, lengths and end times
// they write into).
func (h *heldArrays) mesh(m *Mesh, steps bool) {
	if m == nil {
		return
	}
	h.f = append(h.f, m.H, m.T1)
	h.i = append(h.i, m.Len, m.Switch)
	if !steps {
		h.i = append(h.i, m.Stats.Accepted, m.Stats.Rejected, m.Stats.FieldEvals)
		h.st = append(h.st, m.Status)
		h.b = append(h.b, m.Stiff)
	}
	switch s := m.Resident.(type) {
	case *autoSteps:
		h.mesh(s.m1, true)
		h.mesh(s.m2, true)
	case *mergedSteps:
		for k := range s.parts {
			h.mesh(s.parts[k].res.Mesh, false)
		}
		for _, pm := range s.resident {
			h.mesh(pm, false)
		}
		h.mesh(s.spare, false)
	}
}

// addSpare appends to *list each array of cands that has a capacity and
// overlaps none of held nor of *list, up to autoSpareMax arrays.
func addSpare[T any](list *[][]T, held [][]T, cands ...[]T) {
next:
	for _, c := range cands {
		if cap(c) == 0 || len(*list) >= autoSpareMax {
			continue
		}
		for _, h := range held {
			if buf.Overlap(c, h) {
				continue next
			}
		}
		for _, s := range *list {
			if buf.Overlap(c, s) {
				continue next
			}
		}
		*list = append(*list, c)
	}
}

// keep adds to s the arrays of rs (results of the continuation's jobs and
// the Reuse they were given) that out, its mesh and the meshes that mesh
// keeps do not hold; the arrays s held that overlap out's are dropped.
func (s *autoSpare) keep(out *Result, rs ...*Result) {
	var h heldArrays
	h.result(out)
	old := *s
	*s = autoSpare{stops: old.stops}
	addSpare(&s.f, h.f, old.f...)
	addSpare(&s.i, h.i, old.i...)
	addSpare(&s.st, h.st, old.st...)
	addSpare(&s.b, h.b, old.b...)
	for _, r := range rs {
		if r == nil {
			continue
		}
		addSpare(&s.f, h.f, r.T, r.Y, r.Ys, r.LastH, r.GradY0, r.GradP)
		addSpare(&s.i, h.i, r.Stats.Accepted, r.Stats.Rejected, r.Stats.FieldEvals)
		addSpare(&s.st, h.st, r.Status)
		addSpare(&s.b, h.b, r.Stiff)
	}
}
