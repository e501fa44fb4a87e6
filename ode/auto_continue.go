package ode

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Method Auto's continuation, on an engine that does not switch in place
// but runs trajectories from their own start times (StartTimesExecutor,
// Job.T0s: the GPU engines): a trajectory whose stiffness test fires in
// the Tsit5 pass (Job.StopOnStiff) stops there, at t_s with state y_s,
// and goes on with Rodas5P from (t_s, y_s) to its end, in a job of the
// stopped trajectories alone. Its mesh is the Tsit5 steps up to t_s, then
// the Rodas5P ones (Mesh.Switch: the Tsit5 steps' count), as the CPU
// engine's switch in place writes it: the same steps, the same switch
// points, the same states. What the continuation reads of the Tsit5 pass
// is each stopped trajectory's time and state there, its counts, and its
// steps: those stay where the pass recorded them (its resident mesh
// where every trajectory stopped, else their columns gathered there,
// ColumnSteps) and come to the host only when the merged mesh is read
// (autoSteps) or an engine cannot gather them.
//
// A replay, a loss or a gradient of such trajectories runs the two
// segments as two jobs of ordinary plans and chains them (see
// continueAuto): the Tsit5 segment's replay gives y_s and the saves before
// t_s, the Rodas5P segment's (from the T0s) the final state and the saves
// at or after t_s (the one at t_s is y_s); the loss's term and its
// cotangents are computed here, on the host, from the states of both
// (tape programs of a few values a trajectory); the Rodas5P segment's
// gradient, with the loss's cotangents of its states as a linear loss
// (cotangentLoss), gives the cotangent λ of y_s and its parameters'
// gradient, and the Tsit5 segment's, with λ and the loss's cotangents of
// the saves before t_s, gives ∂L/∂y0 and the rest of ∂L/∂p and ∂L/∂s.
// Without save times the loss reads the final state alone: the Rodas5P
// segment's record and gradient are then one job with the loss itself
// (a GPU engine's fused kernel), whose ∂L/∂y0 is λ.
// The sums are the parts' own (see auto_split.go): they differ from the
// CPU engine's in-place sums by rounding only.

// continues reports whether Method Auto continues a trajectory whose
// stiffness test fired with Rodas5P from where it fired on the solver's
// engine (see the comment above), rather than running it again from T0.
// Plans with events are run again from T0.
func (sv *Solver) continues() bool {
	if sv.plan.Events != nil {
		return false
	}
	e, ok := sv.exec.(StartTimesExecutor)
	return ok && e.StartTimes()
}

// autoStop is a trajectory whose stiffness test fired in a Tsit5 pass:
// trajectory i of the problem, row j of that pass's result res.
type autoStop struct {
	i, j int
	res  *Result
}

// autoSegs are the two segments of the switched trajectories idx (rows
// of the problem, increasing), k of them: the Tsit5 steps up to the
// switch times ts, then the Rodas5P steps from there.
type autoSegs struct {
	idx []int
	ts  []float64 // [k] the switch times
	// y1 and ys1 are the states at ts [k×Dim] and the saves before ts
	// [k×K×Dim] (others anything): nil where the Tsit5 segment is to be
	// replayed for them.
	y1, ys1 []float64
	m1, m2  *Mesh // the Tsit5 steps (nil for a solve), the Rodas5P steps (nil: to be recorded)
	// acc1, rej1 and fe1 are the Tsit5 segment's accepted and rejected
	// steps and field evaluations (rej1 and fe1 nil: unknown, Job.Omit).
	acc1, rej1, fe1 []int
	// r1, if not nil, is m1's steps held by the engine of the Tsit5 pass
	// (m1.Resident; m1.H nil): the pass's resident mesh where every
	// trajectory of it stopped, else their columns gathered there
	// (ColumnSteps). The Tsit5 segment's jobs read them in place, and the
	// merged mesh (joinSegs) copies them to the host when it is read.
	r1 ResidentSteps
	// joined: the merged mesh holds r1 (autoSteps), and releases it.
	joined bool
	// sq is the sub-problem of rows idx (subProblem), made once for
	// the segments' jobs (sub).
	sq *problem
	// keep2, if not nil, is the Rodas5P steps of the result passed back
	// (takeAutoMem), resident: the record of the Rodas5P segments is
	// given it (Job.Reuse) to record into its memory, and it is released
	// where the record did not.
	keep2 *Mesh
	// spare, if not nil, is the host arrays of the continuation's jobs of
	// the result passed back (autoSpare), which this call's jobs write
	// into (reuse); jobs are the results of this call's jobs and the
	// Reuse they were given, whose arrays the result does not hold
	// become the next call's spare (autoSpare.keep).
	spare *autoSpare
	jobs  []*Result
	// grads, if not nil, holds the arrays the Tsit5 segments' gradient
	// writes its ∂L/∂y0 and ∂L/∂p into (Job.Reuse): the first pass's, of
	// every trajectory, all stopped, whose own gradient no one reads (its
	// storage the caller's Gradient's, which then need no copy).
	grads *Result
}

// reuse2 returns the result the Rodas5P segments' record is given
// (Job.Reuse): keep2 and the spare arrays (reuse), or nil where there
// are neither.
func (sg *autoSegs) reuse2(q *problem) *Result {
	if sg.keep2 == nil && sg.spare == nil {
		return nil
	}
	return sg.reuse(q, OpGrad, sg.keep2, true)
}

// reuse returns the result a job of op of the continuation on sg's k
// trajectories (records: one that records) is given (Job.Reuse): mesh m
// and arrays of sg.spare (autoSpare.reuse), or nil where sg has no
// spare and m is nil. It is kept in sg.jobs.
func (sg *autoSegs) reuse(q *problem, op Op, m *Mesh, records bool) *Result {
	if sg.spare == nil && m == nil {
		return nil
	}
	r := sg.spare.reuse(op, len(sg.idx), q.Field.Dim, q.Field.Params, len(q.SaveAt), m, records)
	sg.jobs = append(sg.jobs, r)
	return r
}

// ran records a result of one of the continuation's jobs (see jobs).
func (sg *autoSegs) ran(r *Result) *Result {
	if r != nil {
		sg.jobs = append(sg.jobs, r)
	}
	return r
}

// done2 releases keep2 unless the record r (nil: none ran) took its
// memory.
func (sg *autoSegs) done2(r *Result) {
	if sg.keep2 != nil && (r == nil || r.Mesh == nil || r.Mesh.Resident != sg.keep2.Resident) {
		sg.keep2.Release()
	}
	sg.keep2 = nil
}

// sub returns the sub-problem of the rows sg.idx of q, made at the first
// call (subOf) and copied (its Problem too) for each caller to change.
func (sg *autoSegs) sub(sv *Solver, q *problem) (*problem, error) {
	if sg.sq == nil {
		sq, _, err := sv.subOf(q, nil, sg.idx)
		if err != nil {
			return nil, err
		}
		sg.sq = sq
	}
	c, pr := *sg.sq, *sg.sq.Problem
	c.Problem = &pr
	return &c, nil
}

// loss returns the loss of the rows sg.idx of q's loss (lossRows; a copy
// of it where they are every row).
func (sg *autoSegs) loss(q *problem, loss *Loss) *Loss {
	if len(sg.idx) == q.n {
		l := *loss
		return &l
	}
	return lossRows(loss, sg.idx)
}

// seg1 returns the mesh of the Tsit5 segments for a job of sv on
// sub-problem sq: m1, with its steps on the engine where they are.
func (sv *Solver) seg1(sg *autoSegs, sq *problem) *Mesh {
	return sv.segMesh(sg.m1, sq)
}

// release releases the Tsit5 segments' resident steps (r1) unless the
// merged mesh holds them: nothing else reads them.
func (sg *autoSegs) release() {
	if sg.r1 != nil && !sg.joined {
		sg.r1.Release()
	}
}

// hostSteps returns m's steps on the host: H, or a copy of its resident
// steps (which stay).
func hostSteps(m *Mesh) ([]float64, error) {
	if m.Resident == nil {
		return m.H, nil
	}
	h := make([]float64, m.Rows*m.N)
	if err := m.Resident.CopyTo(h); err != nil {
		return nil, fmt.Errorf("ode: mesh: copying its steps from engine %s: %w", m.Resident.Engine(), err)
	}
	return h, nil
}

// stopSegs returns the Tsit5 segments of the stopped trajectories
// stops: their switch times and counts, the states there and the saves
// before them if states and the passes returned them (Job.StopOnStiff
// keeps them; a Grad with Gradient.Omit, or a GPU engine's record of
// saves, does not return them), and their steps if steps (the passes'
// meshes, brought to the host, or their columns gathered where the
// engine keeps them). reuse, if not nil, is resident steps the caller
// gives up, which that gather writes into where it can
// (ColumnSteps.Columns), else released.
func stopSegs(q *problem, stops []autoStop, states, steps bool, reuse ResidentSteps) (*autoSegs, error) {
	gathered := false // (else reuse is released on return)
	defer func() {
		if reuse != nil && !gathered {
			reuse.Release()
		}
	}()
	if byRow := func(a, b autoStop) int { return a.i - b.i }; !slices.IsSortedFunc(stops, byRow) {
		slices.SortFunc(stops, byRow) // (a first pass's are)
	}
	k, d, K := len(stops), q.Field.Dim, len(q.SaveAt)
	for _, s := range stops {
		if states && (s.res.Y == nil || K > 0 && len(s.res.Ys) < (s.j+1)*K*d) {
			// (A GPU engine's record returns no saves.)
			states = false
		}
	}
	var lens []int
	if steps {
		lens = make([]int, k)
	}
	timed := true // every pass gave its times reached (Result.T)
	all := allRowsOf(stops)
	sg := stopsAsIs(stops, d, K, states, all)
	if sg != nil && steps {
		pm := stops[0].res.Mesh
		if pm == nil || len(pm.Len) < k {
			return nil, fmt.Errorf("ode: internal error: Method Auto's Tsit5 pass returned no mesh for trajectory %d, stopped stiff", stops[0].i)
		}
		copy(lens, pm.Len[:k])
	}
	if sg == nil {
		sg = &autoSegs{idx: make([]int, k), ts: make([]float64, k), acc1: make([]int, k), rej1: make([]int, k), fe1: make([]int, k)}
		if states {
			sg.y1, sg.ys1 = make([]float64, k*d), make([]float64, k*K*d)
		}
		// What the passes hold (one pass in the common case: a stiffness
		// test fired in the first), then the stops' rows of it, on all
		// cores.
		for x, s := range stops {
			r := s.res
			if x > 0 && r == stops[x-1].res {
				continue
			}
			if r.T == nil {
				timed = false // (summed from the steps below)
			}
			if r.Stats.Rejected == nil {
				sg.rej1 = nil // (Job.Omit)
			}
			if r.Stats.FieldEvals == nil {
				sg.fe1 = nil
			}
			if steps && r.Mesh == nil {
				return nil, fmt.Errorf("ode: internal error: Method Auto's Tsit5 pass returned no mesh for trajectory %d, stopped stiff", s.i)
			}
		}
		par.Ranges(k, rowTask, func(lo, hi int) {
			for x := lo; x < hi; x++ {
				s := &stops[x]
				r, j := s.res, s.j
				sg.idx[x] = s.i
				if r.T != nil {
					sg.ts[x] = r.T[j]
				}
				if states {
					copy(sg.y1[x*d:(x+1)*d], r.Y[j*d:(j+1)*d])
					if K > 0 {
						copy(sg.ys1[x*K*d:(x+1)*K*d], r.Ys[j*K*d:(j+1)*K*d])
					}
				}
				st := &r.Stats
				if st.Accepted != nil {
					sg.acc1[x] = st.Accepted[j]
				}
				if sg.rej1 != nil {
					sg.rej1[x] = st.Rejected[j]
				}
				if sg.fe1 != nil {
					sg.fe1[x] = st.FieldEvals[j]
				}
				if steps {
					lens[x] = r.Mesh.Len[j]
				}
			}
		})
	}
	if steps {
		m := &Mesh{N: k, Len: lens}
		m.Rows = longest(lens)
		pm := stops[0].res.Mesh
		cs, gathers := pm.Resident.(ColumnSteps)
		gathers = gathers && !cs.Released() && (all || onePass(stops))
		switch {
		case pm.N == k && all && pm.Resident != nil && !pm.Resident.Released():
			// Every trajectory of one pass stopped (a stiff ensemble),
			// whose mesh the engine keeps: its steps stay there, for the
			// Tsit5 segments' jobs and the merged mesh.
			m.Resident, sg.r1 = pm.Resident, pm.Resident
		case pm.N == k && all && len(pm.H) >= m.Rows*k:
			// The same on the host: its mesh is the segments' as it is.
			m.H = pm.H[:m.Rows*k]
		case gathers:
			// Some of one pass's trajectories stopped, whose mesh the
			// engine keeps and gathers columns of: their columns are
			// gathered there.
			cols := make([]int, k)
			for x, s := range stops {
				cols[x] = s.j
			}
			r, err := gatherColumns(cs, cols, lens, m.Rows, reuse)
			gathered = true
			if err != nil {
				return nil, fmt.Errorf("ode: mesh: gathering the stopped trajectories' steps on engine %s: %w", cs.Engine(), err)
			}
			m.Resident, sg.r1 = r, r
		default:
			for _, s := range stops {
				if err := toHost(s.res.Mesh); err != nil {
					return nil, err
				}
			}
			m.H = make([]float64, m.Rows*k)
			copyStops(m, stops, lens)
		}
		sg.m1 = m
		if !timed {
			// The switch times as the record reached them (t + h, step
			// by step), as a replay of the merged mesh finds them.
			h, err := hostSteps(m)
			if err != nil {
				sg.release()
				return nil, err
			}
			sg.ts = switchTimes(sg.ts, &Mesh{N: k, Len: lens, H: h}, q.T0, lens)
		}
	}
	return sg, nil
}

// stopsAsIs returns stopSegs's segments (but their steps) where stops are
// every row of one pass's result in order (all: allRowsOf; a stiff
// ensemble's first pass) and that result holds their times and counts:
// its arrays, this call's own and read only from now on, as they are,
// not copied; else nil.
func stopsAsIs(stops []autoStop, d, K int, states, all bool) *autoSegs {
	k := len(stops)
	if k == 0 || !all {
		return nil
	}
	r := stops[0].res
	st := &r.Stats
	if len(r.Status) != k || len(r.T) < k || len(st.Accepted) < k {
		return nil
	}
	sg := &autoSegs{idx: make([]int, k), ts: r.T[:k], acc1: st.Accepted[:k]}
	for x, s := range stops {
		sg.idx[x] = s.i
	}
	if len(st.Rejected) >= k { // (else nil: Job.Omit)
		sg.rej1 = st.Rejected[:k]
	}
	if len(st.FieldEvals) >= k {
		sg.fe1 = st.FieldEvals[:k]
	}
	if states {
		sg.y1, sg.ys1 = r.Y[:k*d], make([]float64, 0)
		if K > 0 {
			sg.ys1 = r.Ys[:k*K*d]
		}
	}
	return sg
}

// onePass reports whether stops are rows of one pass's result.
func onePass(stops []autoStop) bool {
	for _, s := range stops {
		if s.res != stops[0].res {
			return false
		}
	}
	return true
}

// allRowsOf reports whether stops are every row of one pass's result,
// in order (given that there are as many as its rows).
func allRowsOf(stops []autoStop) bool {
	for x, s := range stops {
		if s.res != stops[0].res || s.j != x {
			return false
		}
	}
	return true
}

// copyStops copies the steps of the stopped trajectories stops (lens[x]
// steps of stop x) from their passes' meshes, on the host, to column x
// of m.
func copyStops(m *Mesh, stops []autoStop, lens []int) {
	k := len(stops)
	// The stops' columns of each pass's mesh (one pass in the common
	// case: a stiffness test fired in the first), row by row.
	for lo := 0; lo < k; {
		res := stops[lo].res
		hi := lo + 1
		for hi < k && stops[hi].res == res {
			hi++
		}
		dcol, scol := make([]int, hi-lo), make([]int, hi-lo)
		for x := lo; x < hi; x++ {
			dcol[x-lo], scol[x-lo] = x, stops[x].j
		}
		pm := res.Mesh
		(&stepCopy{dst: m.H, dn: k, dcol: dcol, src: pm.H, sn: pm.N, scol: scol, lens: lens[lo:hi]}).run()
		lo = hi
	}
}

// switchTimes returns in dst the times that trajectories of mesh m reach
// after their first sw[i] steps from t0, summed step by step as a record
// advances its time (the time where Method Auto's switched trajectories
// start their Rodas5P steps).
func switchTimes(dst []float64, m *Mesh, t0 float64, sw []int) []float64 {
	n := m.N
	dst = slices.Grow(dst[:0], n)[:n]
	// Row by row, in tiles of columns: each trajectory's sum in its
	// steps' order, as a record adds them.
	par.Run((n+stepTile-1)/stepTile, 0, func(_, b int) {
		lo, hi := b*stepTile, min(n, (b+1)*stepTile)
		rows := 0
		for i := lo; i < hi; i++ {
			dst[i] = t0
			rows = max(rows, min(sw[i], m.Len[i]))
		}
		for s := 0; s < rows; s++ {
			h := m.H[s*n : (s+1)*n]
			for i := lo; i < hi; i++ {
				if s < min(sw[i], m.Len[i]) {
					dst[i] += h[i]
				}
			}
		}
	})
	return dst
}

// meshSegs returns the segments of trajectories idx of mesh m (brought
// to the host), each switched within its steps (0 < Switch < Len).
func meshSegs(q *problem, m *Mesh, idx []int) (*autoSegs, error) {
	if err := toHost(m); err != nil {
		return nil, err
	}
	if len(m.H) < m.Rows*m.N || len(m.Len) != m.N || len(m.Switch) != m.N {
		return nil, fmt.Errorf("ode: mesh arrays are inconsistent (N %d, Rows %d, len(H) %d, len(Len) %d, len(Switch) %d): its steps must be on the host",
			m.N, m.Rows, len(m.H), len(m.Len), len(m.Switch))
	}
	k := len(idx)
	sg := &autoSegs{idx: idx}
	l1, l2 := make([]int, k), make([]int, k)
	for x, i := range idx {
		l1[x] = m.Switch[i]
		l2[x] = m.Len[i] - m.Switch[i]
	}
	sg.m1, sg.m2 = meshRows(m, idx, l1, nil), meshRows(m, idx, l2, l1)
	sg.ts = switchTimes(nil, sg.m1, q.T0, l1)
	return sg, nil
}

// meshRows returns the mesh of lens[x] steps of each trajectory cols[x]
// of m from its step from[x] on (from nil: 0).
func meshRows(m *Mesh, cols, lens, from []int) *Mesh {
	k := len(cols)
	s := &Mesh{N: k, Len: lens}
	s.Rows = longest(lens)
	s.H = make([]float64, s.Rows*k)
	(&stepCopy{dst: s.H, dn: k, src: m.H, sn: m.N, scol: cols, from: from, lens: lens}).run()
	s.Status = make([]Status, k)
	return s
}

// segMesh gives mesh m (of the solver's method) what a job of the solver
// on sub-problem sq reads of a mesh.
func (sv *Solver) segMesh(m *Mesh, sq *problem) *Mesh {
	c := *m
	c.Switch, c.Stiff, c.Method, c.Fingerprint = nil, nil, methodByName(sv.plan.Method), sv.plan.Fingerprint
	c.T0, c.T1 = sq.T0, sq.t1
	if c.Status == nil {
		c.Status = make([]Status, c.N)
	}
	return &c
}

// continueAuto runs op for the switched trajectories of sg (see the
// comment at the top of this file) and returns their result, k rows in
// the order of sg.idx: statuses, states, counts of both segments, the
// merged mesh (records), the loss (its terms' sum times scale, the
// whole problem's: see lossScale) and the gradient. A failure of the
// Rodas5P segment leaves the sums out (mergeAuto's caller reports it).
func (sv *Solver) continueAuto(ctx context.Context, op Op, q *problem, loss *Loss, scale float64, sg *autoSegs) (*Result, error) {
	alt, err := sv.stiffSolver()
	if err != nil {
		return nil, err
	}
	k, d, K := len(sg.idx), q.Field.Dim, len(q.SaveAt)
	served := "" // the engine a job was served on (Result.Engine)
	if sg.y1 == nil {
		// The Tsit5 segment's replay: the states at ts and the saves
		// before them.
		q1, err := sg.sub(sv, q)
		if err != nil {
			return nil, err
		}
		r1, err := sv.runPlan(ctx, OpReplay, q1, nil, sv.seg1(sg, q1), sg.reuse(q, OpReplay, nil, false), 0, nil)
		if err != nil {
			return nil, err
		}
		sg.ran(r1)
		sg.y1, sg.ys1 = r1.Y, r1.Ys
		served = r1.Engine
	}
	q2, err := sg.sub(sv, q)
	if err != nil {
		return nil, err
	}
	q2.y0, q2.Y0, q2.t0s = sg.y1, sg.y1, sg.ts
	// Without save times the loss reads the Rodas5P segment's final
	// state alone: that segment's record and gradient with the loss
	// itself, in one job (a GPU engine's fused kernel), give the loss
	// and the cotangent of the states at ts.
	fused := K == 0 && sg.m2 == nil && (op == OpLoss || op == OpGrad)
	var r2 *Result
	switch {
	case fused:
		r2, err = alt.runPlan(ctx, op, q2, sg.loss(q, loss), nil, sg.reuse2(q), scale, nil)
	case sg.m2 != nil:
		r2, err = alt.runPlan(ctx, OpReplay, q2, nil, alt.segMesh(sg.m2, q2), nil, 0, nil)
	case op == OpSolve:
		r2, err = alt.runPlan(ctx, OpSolve, q2, nil, nil, nil, 0, nil)
	default:
		r2, err = alt.runPlan(ctx, OpRecord, q2, nil, nil, sg.reuse2(q), 0, nil)
	}
	sg.done2(r2)
	sg.ran(r2)
	if err != nil {
		return nil, err
	}
	m2 := sg.m2
	if m2 == nil && r2.Mesh != nil {
		// Its steps stay where the engine recorded them (Mesh.Resident):
		// the replays and the gradient below run on them there.
		m2 = r2.Mesh
	}
	ys2 := r2.Ys
	if (op == OpLoss || op == OpGrad) && K > 0 && len(ys2) < k*K*d && m2 != nil && allOK(r2.Status) {
		// A record that returned no saves (a GPU engine's): the saves
		// from the replay of its steps.
		rr, err := alt.runPlan(ctx, OpReplay, q2, nil, alt.segMesh(m2, q2), sg.reuse(q, OpReplay, nil, false), 0, nil)
		if err != nil {
			return nil, err
		}
		sg.ran(rr)
		ys2 = rr.Ys
		served = servedBy(&Result{Engine: served}, rr)
	}
	out := &Result{Status: r2.Status, Y: r2.Y, T: r2.T, LastH: r2.LastH, LastY: r2.LastY,
		RecordTime: r2.RecordTime, Stats: Stats{Wall: r2.Stats.Wall}}
	out.Engine = servedBy(&Result{Engine: served}, r2)
	if out.Status == nil {
		out.Status = make([]Status, k) // a replay: every one OK
	}
	if K > 0 && (len(ys2) > 0 || op != OpRecord) {
		// The saves before ts the Tsit5 segment's, the others Rodas5P's
		// (an engine's record may return none).
		out.Ys = make([]float64, k*K*d)
		for x, t := range sg.ts {
			for c, tau := range q.SaveAt {
				src := ys2
				if tau < t {
					src = sg.ys1
				}
				o := (x*K + c) * d
				if len(src) >= o+d {
					copy(out.Ys[o:o+d], src[o:o+d])
				} else {
					nanFill(out.Ys[o : o+d])
				}
			}
		}
	}
	if sg.m2 == nil && r2.Stats.Accepted != nil {
		st := &out.Stats
		st.Accepted = sg.spare.ints(k)
		if sg.rej1 != nil && r2.Stats.Rejected != nil {
			st.Rejected = sg.spare.ints(k)
		}
		if sg.fe1 != nil && r2.Stats.FieldEvals != nil {
			st.FieldEvals = sg.spare.ints(k)
		}
		for x := range st.Accepted {
			st.Accepted[x] = sg.acc1[x] + r2.Stats.Accepted[x]
			if st.Rejected != nil {
				st.Rejected[x] = sg.rej1[x] + r2.Stats.Rejected[x]
			}
			if st.FieldEvals != nil {
				st.FieldEvals[x] = sg.fe1[x] + r2.Stats.FieldEvals[x]
			}
		}
	}
	if op != OpSolve && sg.m2 == nil && sg.m1 != nil && m2 != nil {
		// The merged mesh of a record (a replay's caller has its own):
		// the Tsit5 steps, then the Rodas5P ones.
		m, err := joinSegs(sg.m1, m2)
		if err != nil {
			return nil, err
		}
		m.Status, m.Stats = out.Status, out.Stats
		out.Mesh = m
		_, lazy := m.Resident.(*autoSteps)
		sg.joined = lazy && sg.m1.Resident != nil
	}
	switch {
	case (op != OpLoss && op != OpGrad) || !allOK(out.Status):
		return out, nil
	case fused:
		out.Loss = r2.Loss
		if op == OpLoss {
			return out, nil
		}
		return out, sv.chainTsit5(ctx, q, sg, out, r2, nil, nil, nil)
	}
	return out, sv.chainLoss(ctx, op, q, loss, scale, sg, out, m2)
}

// chainLoss computes the loss of the switched trajectories of sg from
// their states (out's) and, for a gradient, the gradient through both
// segments (m2: the Rodas5P steps), into out.
func (sv *Solver) chainLoss(ctx context.Context, op Op, q *problem, loss *Loss, scale float64, sg *autoSegs, out *Result, m2 *Mesh) error {
	alt, err := sv.stiffSolver()
	if err != nil {
		return err
	}
	k, d, K, np, ns := len(sg.idx), q.Field.Dim, len(q.SaveAt), q.Field.Params, q.Field.Shared
	sq, err := sg.sub(sv, q)
	if err != nil {
		return err
	}
	lp, err := sv.lossPlan(sg.loss(q, loss), sq)
	if err != nil {
		return err
	}
	terms, bar, err := hostLoss(lp, op == OpGrad, sq, out.Y, out.Ys)
	if err != nil {
		return err
	}
	for x, l := range terms {
		if x == 0 {
			out.Loss = l
		} else {
			out.Loss += l
		}
	}
	out.Loss *= scale
	if op != OpGrad {
		return nil
	}
	// The loss's cotangents, scaled: of y(T1) at bar[1+c], of save x at
	// bar[1+d+x], of p at bar[1+d+K·d+c], of s after them; bar[o][x] is
	// trajectory x's.
	cy, cs, cp, cg := 1, 1+d, 1+d+K*d, 1+d+K*d+np
	// The Rodas5P segment: its final state's and its saves' cotangents.
	data2 := make([]float64, k*cotangentWidth(d, K))
	for x, t := range sg.ts {
		row := data2[x*cotangentWidth(d, K):]
		for c := 0; c < d; c++ {
			row[c] = scale * bar[cy+c][x]
		}
		for s, tau := range q.SaveAt {
			if tau >= t {
				row[d+K*d+s] = 1
				for c := 0; c < d; c++ {
					row[d+s*d+c] = scale * bar[cs+s*d+c][x]
				}
			}
		}
	}
	q2, err := sg.sub(sv, q)
	if err != nil {
		return err
	}
	q2.y0, q2.Y0, q2.t0s = sg.y1, sg.y1, sg.ts
	q2.omit |= OmitStates | OmitStats // (its gradient alone is read: the replay's states are out's)
	g2, err := alt.runPlan(ctx, OpGrad, q2, cotangentLoss(d, K, data2), alt.segMesh(m2, q2), sg.reuse(q, OpGrad, nil, false), 1, nil)
	if err != nil {
		return err
	}
	sg.ran(g2)
	out.Engine = servedBy(out, g2)
	// The loss's own terms of the gradient, scaled: ∂ℓ/∂p [k×np], ∂ℓ/∂s
	// summed [ns], the saves' cotangents [k×K×d].
	ownP, ownS, barYs := make([]float64, k*np), make([]float64, ns), make([]float64, k*K*d)
	for x := 0; x < k; x++ {
		for c := 0; c < np; c++ {
			ownP[x*np+c] = scale * bar[cp+c][x]
		}
		for c := 0; c < K*d; c++ {
			barYs[x*K*d+c] = scale * bar[cs+c][x]
		}
	}
	for c := 0; c < ns; c++ {
		v := 0.0
		for x := 0; x < k; x++ {
			v += bar[cg+c][x]
		}
		ownS[c] = scale * v
	}
	return sv.chainTsit5(ctx, q, sg, out, g2, barYs, ownP, ownS)
}

// chainTsit5 runs the Tsit5 segments' gradient of sg from the cotangents
// of the states at the switch times, the Rodas5P segments' gradient g2's
// GradY0, and of the saves before them (barYs [k×K×Dim], nil: none), and
// sets out's gradient: ∂L/∂y0 that one's, ∂L/∂p and ∂L/∂s the sums of
// both segments' and of the loss's own terms ownP [k×Params] and ownS
// [Shared] (nil: 0).
func (sv *Solver) chainTsit5(ctx context.Context, q *problem, sg *autoSegs, out, g2 *Result, barYs, ownP, ownS []float64) error {
	k, d, K, np, ns := len(sg.idx), q.Field.Dim, len(q.SaveAt), q.Field.Params, q.Field.Shared
	w := cotangentWidth(d, K)
	var data1 []float64
	if K == 0 && len(g2.GradY0) >= k*d {
		// Without saves a row is the cotangent of y_s alone (w = d):
		// g2's ∂L/∂y0, read nowhere else, as it is.
		data1 = g2.GradY0[:k*d]
	} else {
		data1 = make([]float64, k*w)
		for x, t := range sg.ts {
			row := data1[x*w:]
			copy(row[:d], g2.GradY0[x*d:(x+1)*d])
			for s, tau := range q.SaveAt {
				if tau < t && barYs != nil {
					row[d+K*d+s] = 1
					copy(row[d+s*d:d+(s+1)*d], barYs[(x*K+s)*d:(x*K+s+1)*d])
				}
			}
		}
	}
	q1, err := sg.sub(sv, q)
	if err != nil {
		return err
	}
	// Of its result only the gradient is read: its final states (y_s,
	// known) and counts (a replay's) stay on the engine (Job.Omit).
	q1.omit |= OmitStates | OmitStats
	reuse := sg.reuse(q, OpGrad, nil, false)
	if g := sg.grads; g != nil && len(g.GradY0) >= k*d && len(g.GradP) >= k*np {
		// The first pass's gradient arrays, which no one reads (the spare
		// ones taken for them stay in sg.jobs's copy: back to the spare).
		var r Result
		if reuse != nil {
			r = *reuse
		}
		r.GradY0, r.GradP = g.GradY0[:k*d], g.GradP[:k*np]
		reuse = &r
	}
	g1, err := sv.runPlan(ctx, OpGrad, q1, cotangentLoss(d, K, data1), sv.seg1(sg, q1), reuse, 1, nil)
	if err != nil {
		return err
	}
	sg.ran(g1)
	out.Engine = servedBy(out, g1)
	out.GradY0 = g1.GradY0
	// The sums in g1's array, this call's own (the same additions, in
	// the same order, as into an array of their own).
	out.GradP = g1.GradP[:k*np]
	// (On all cores, in tasks of rowTask trajectories; their finiteness
	// checked after, as finiteAll checks ∂L/∂y0.)
	gp, gp2 := out.GradP, g2.GradP[:k*np]
	par.Ranges(len(gp), rowTask*max(np, 1), func(lo, hi int) {
		for x := lo; x < hi; x++ {
			v := gp[x] + gp2[x]
			if ownP != nil {
				v += ownP[x]
			}
			gp[x] = v
		}
	})
	finite := finiteAll(gp) < 0
	out.GradS = make([]float64, ns)
	for c := range out.GradS {
		v := g1.GradS[c] + g2.GradS[c]
		if ownS != nil {
			v += ownS[c]
		}
		out.GradS[c] = v
	}
	out.GradFinite = finite && g1.GradFinite && finiteAll(out.GradY0) < 0
	out.GradTime = g1.GradTime + g2.GradTime
	out.StoredBytes = max(g1.StoredBytes, g2.StoredBytes)
	return nil
}

// cotangentWidth is the data width of cotangentLoss: the final state's
// cotangent [d], the saves' [K·d] and their mask [K].
func cotangentWidth(d, K int) int { return d + K*d + K }

// cotangentLoss returns the linear loss Σ_c ȳ_c·y_c + Σ_k m_k·Σ_c
// ȳs_k,c·ys_k,c of a trajectory's final state y and saves ys, with the
// cotangents ȳ, ȳs and the 0/1 masks m of its data row (width
// cotangentWidth): its gradient is the backward sweep of the steps from
// those cotangents. A save whose mask is 0 does not count, whatever its
// value (NaN included: a Select, not a product).
func cotangentLoss(d, K int, data []float64) *Loss {
	return &Loss{Name: "auto_chain", DataDim: cotangentWidth(d, K), Data: data,
		F: func(y, ys, c []tape.V) tape.V {
			s := c[0].Mul(y[0])
			for i := 1; i < d; i++ {
				s = s.Add(c[i].Mul(y[i]))
			}
			zero := c[0].Const(0)
			for k := 0; k < K; k++ {
				var v tape.V
				for i := 0; i < d; i++ {
					t := c[d+k*d+i].Mul(ys[k*d+i])
					if i == 0 {
						v = t
					} else {
						v = v.Add(t)
					}
				}
				s = s.Add(tape.Select(c[d+K*d+k], v, zero))
			}
			return s
		}}
}

// hostLoss runs the loss's term (grad false) or its gradient program on
// the host for the k trajectories of sq from their final states y
// [k×Dim] and saves ys [k×K×Dim]: the terms [k] and, for the gradient,
// the program's outputs by output (ℓ first), each [k].
func hostLoss(lp *LossPlan, grad bool, sq *problem, y, ys []float64) ([]float64, [][]float64, error) {
	k, d, K, np, ns := sq.n, sq.Field.Dim, len(sq.SaveAt), sq.Field.Params, sq.Field.Shared
	prog := lp.Term
	if grad {
		prog = lp.Grad
	}
	ex, err := tape.NewExec(prog, nil)
	if err != nil {
		return nil, nil, err
	}
	var in [][]float64
	in = append(in, colsOf(y, k, d)...)
	in = append(in, colsOf(ys, k, K*d)...)
	in = append(in, colsOf(lp.Data, k, lp.DataDim)...)
	in = append(in, colsOf(sq.p, k, np)...)
	for c := 0; c < ns; c++ {
		in = append(in, sq.Shared[c:c+1])
	}
	out := make([][]float64, len(prog.Outputs))
	for o := range out {
		out[o] = make([]float64, k)
	}
	if err := ex.Run(out, in, k); err != nil {
		return nil, nil, fmt.Errorf("ode: %s: %w", lp.Label(), err)
	}
	return out[0], out, nil
}

// colsOf returns the w columns [n] of the row-major x [n×w].
func colsOf(x []float64, n, w int) [][]float64 {
	soa := toSoA(make([]float64, n*w), x, n, w)
	cols := make([][]float64, w)
	for c := range cols {
		cols[c] = soa[c*n : (c+1)*n]
	}
	return cols
}

// stepCopy copies steps between step-major meshes: for each column x <
// len(lens), lens[x] steps of column scol[x] of src (sn columns) from its
// step from[x] on go to column dcol[x] of dst (dn columns) from its step
// at[x] on (a nil scol or dcol: x; a nil from or at: 0). The columns'
// sets of steps must not overlap in dst.
type stepCopy struct {
	dst, src   []float64
	dn, sn     int
	dcol, scol []int
	at, from   []int
	lens       []int
}

// stepTile is the columns of a task of switchTimes: its rows of the mesh
// stay in cache while it walks them step by step (a column-by-column
// walk strides a whole row between steps: a cache miss each, at tens of
// thousands of trajectories).
const stepTile = 256

// stepBand is about the steps a task of stepCopy.run copies: whole rows
// of the columns, at least one.
const stepBand = 1 << 16

// run makes the copy in bands of rows on all cores, each row walked
// across its columns (both meshes read and written along their rows: a
// walk by tiles of columns jumps a whole row of each between steps, and
// is several times slower a core than the row's walk).
func (c *stepCopy) run() {
	k := len(c.lens)
	if k == 0 {
		return
	}
	// Each column's offsets of its first step in dst and src, where they
	// are not x (dst: dcol and at nil) or scol[x] (src: from nil).
	var dOff, sOff []int
	if c.dcol != nil || c.at != nil {
		dOff = make([]int, k)
		for x := range dOff {
			dc, a := x, 0
			if c.dcol != nil {
				dc = c.dcol[x]
			}
			if c.at != nil {
				a = c.at[x]
			}
			dOff[x] = a*c.dn + dc
		}
	}
	if c.from != nil {
		sOff = make([]int, k)
		for x := range sOff {
			sc := x
			if c.scol != nil {
				sc = c.scol[x]
			}
			sOff[x] = c.from[x]*c.sn + sc
		}
	}
	rows, short := 0, c.lens[0] // the longest column, the shortest
	for _, l := range c.lens {
		rows, short = max(rows, l), min(short, l)
	}
	band := max(1, stepBand/k)
	par.Run((rows+band-1)/band, 0, func(_, b int) {
		for r := b * band; r < min(rows, (b+1)*band); r++ {
			c.row(r, r < short, dOff, sOff)
		}
	})
}

// row copies step r of each column that has it (every one if full).
func (c *stepCopy) row(r int, full bool, dOff, sOff []int) {
	k, lens := len(c.lens), c.lens
	dr, sr := r*c.dn, r*c.sn
	if dOff == nil && sOff == nil {
		// Columns 0, 1, … of dst's row r from columns scol of src's.
		d, s := c.dst[dr:dr+k], c.src[sr:]
		switch {
		case c.scol == nil && full:
			copy(d, s[:k])
		case c.scol == nil:
			for x, l := range lens {
				if r < l {
					d[x] = s[x]
				}
			}
		case full:
			for x, i := range c.scol[:k] {
				d[x] = s[i]
			}
		default:
			for x, i := range c.scol[:k] {
				if r < lens[x] {
					d[x] = s[i]
				}
			}
		}
		return
	}
	for x, l := range lens {
		if r >= l {
			continue
		}
		di, si := dr+x, sr+x
		if dOff != nil {
			di = dr + dOff[x]
		}
		switch {
		case sOff != nil:
			si = sr + sOff[x]
		case c.scol != nil:
			si = sr + c.scol[x]
		}
		c.dst[di] = c.src[si]
	}
}

// joinSegs returns the mesh of the trajectories whose Tsit5 steps are m1's
// (on the host) and whose Rodas5P steps are m2's: on the host if m2's
// are, else with the join's steps resident (autoSteps), copied and merged
// only when they are needed on the host (Mesh.Host).
func joinSegs(m1, m2 *Mesh) (*Mesh, error) {
	k := m1.N
	lens := make([]int, k)
	for x := range lens {
		lens[x] = m1.Len[x] + m2.Len[x]
	}
	m := &Mesh{N: k, Len: lens}
	m.Rows = longest(lens)
	if m2.Resident != nil {
		if m2.Resident.Released() {
			return nil, fmt.Errorf("ode: internal error: the Rodas5P steps of Method Auto's continued trajectories were released on engine %s", m2.Resident.Engine())
		}
		m.Resident = &autoSteps{m1: m1, m2: m2, rows: m.Rows}
		return m, nil
	}
	h1, err := hostSteps(m1)
	if err != nil {
		return nil, err
	}
	m.H = make([]float64, m.Rows*k)
	joinSteps(m.H, m1, h1, m2, m2.H)
	return m, nil
}

// joinSteps writes to dst [Rows×N] the steps of m1, whose steps are h1,
// then in each column those of m2, whose steps are h2.
func joinSteps(dst []float64, m1 *Mesh, h1 []float64, m2 *Mesh, h2 []float64) {
	k := m1.N
	(&stepCopy{dst: dst, dn: k, src: h1, sn: k, lens: m1.Len}).run()
	(&stepCopy{dst: dst, dn: k, at: m1.Len, src: h2, sn: m2.N, lens: m2.Len}).run()
}

// autoSteps are the steps of Method Auto's mesh of continued trajectories
// (joinSegs) while their Rodas5P steps are resident on the engine that
// recorded them (and their Tsit5 steps on the host or there too): a Grad
// or Record that returns the mesh unread copies nothing to the host.
// CopyTo copies the resident steps over and merges them. No engine reads
// them in place (Owner is the value itself): an engine given the mesh
// brings it to the host first (Mesh.Host), as one of another engine's.
type autoSteps struct {
	m1, m2 *Mesh // the Tsit5 steps (on the host or resident), the Rodas5P ones (resident)
	rows   int   // the join's rows
	// spare, if not nil, is the host arrays of the continuation's jobs
	// that the call's result does not hold, for the next call given it
	// back (autoSpare; takeAutoMem).
	spare    *autoSpare
	mu       sync.Mutex
	released bool
}

var _ ResidentSteps = (*autoSteps)(nil)

// Engine returns the name of the engine that holds the Rodas5P steps.
func (a *autoSteps) Engine() string { return a.m2.Resident.Engine() }

// Owner returns a itself: no engine's memory.
func (a *autoSteps) Owner() any { return a }

// CopyTo writes the [Rows×N] steps to dst: the Tsit5 steps, then in each
// column the Rodas5P ones (brought from the engine), zeros past them.
func (a *autoSteps) CopyTo(dst []float64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.released {
		return fmt.Errorf("ode: mesh: Method Auto's steps were released")
	}
	m2, k := a.m2, a.m1.N
	h1, err := hostSteps(a.m1)
	if err != nil {
		return err
	}
	h2, err := hostSteps(m2)
	if err != nil {
		return err
	}
	clear(dst[:a.rows*k])
	joinSteps(dst, a.m1, h1, m2, h2)
	return nil
}

// Release releases the resident steps on their engine.
func (a *autoSteps) Release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.released = true
	a.m1.Release()
	a.m2.Release()
}

// Released reports whether Release was called, here or on the resident
// steps.
func (a *autoSteps) Released() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.released || a.m2.Resident.Released() || a.m1.Resident != nil && a.m1.Resident.Released()
}
