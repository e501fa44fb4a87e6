package ode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gradsolve-go/gradsolve/tape"
)

// GradPartial is GradContext for an ensemble of independent parts, as the
// independent fits of package fit: a trajectory that fails does not fail
// the call. The gradient is that of the trajectories that finished; the
// others are left out of it.
//
// A trajectory is left out if skip[i] is set (skip is nil or [N]), if m is
// not nil and its Status there is not OK (or the stiffness test fired on
// it, Mesh.Stiff), or if it fails in this call: its record stops with a
// failure status (MaxStepsReached, StepSizeUnderflow, NonFinite), an
// explicit method's stiffness test fires on it (Stiff), or its loss term
// or its rows of the gradient are not finite (NonFinite). A left-out
// trajectory contributes nothing: its loss term is not in Loss, its rows
// of Y0 and P are zero and it adds nothing to Shared. Loss sums the other
// terms in index order, as Grad does (with Loss.Mean, the sum is divided
// by N, the left-out trajectories counting as zero terms). On the CPU
// engine each trajectory's results are those of an ensemble without the
// left-out trajectories, bit for bit.
//
// Solution.Status says what happened to each trajectory: OK, its failure
// status, NotRun for a skipped one, or m's status. Y and Ys are NaN for
// the left-out trajectories. The returned failures are the trajectories
// that failed in this call (not those skipped or already failed in m),
// one *TrajectoryError each, in index order, with the fields that
// TrajectoryError's message reads. When m is nil the returned Mesh has
// all N trajectories; a left-out trajectory has Len 0 and its status, so
// passing the mesh back leaves it out again. When m is not nil the
// returned Mesh is m.
//
// The error is non-nil, and the gradient nil, for what is not one
// trajectory's failure: invalid input, a mesh that does not fit the
// problem, a cancelled context, an engine's error, a non-finite Shared
// gradient or Reg term. Every trajectory's inputs must be valid, skipped
// ones included.
//
// GradPartial needs nothing of the engine beyond what Grad does: each
// trajectory's status in Result.Status (an engine may stop early when one
// fails, leaving others NotRun, as the CPU engine does) and a non-finite
// loss term reported as a *tape.NonFiniteError whose Trajectory is the
// ensemble's index. A call in which trajectories fail is run again on the
// others, so a failure costs at most one more call; a call without
// failures or skips costs what GradContext does. dst is reused as by
// GradContext.
func (sv *Solver) GradPartial(ctx context.Context, dst *Gradient, p *Problem, loss Loss, m *Mesh, skip []bool) (*Gradient, []*TrajectoryError, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	q, err := sv.checkProblem(p)
	if err != nil {
		return nil, nil, err
	}
	q.omit = dst.omit()
	q.recordAll = true // every failure in one run (Job.RecordAll)
	dst.unalias(q.inputs(&loss, m))
	n := q.n
	if skip != nil && len(skip) != n {
		return nil, nil, badInput(fmt.Errorf("ode: GradPartial: len(skip) = %d, want N = %d", len(skip), n))
	}
	if m != nil && (m.N != n || len(m.Status) != n || (m.Stiff != nil && len(m.Stiff) != n)) {
		return nil, nil, badInput(fmt.Errorf("ode: mesh has %d trajectories (%d statuses), problem %d", m.N, len(m.Status), n))
	}
	if err := loss.checkDataLen(n); err != nil {
		return nil, nil, err
	}
	rp, err := sv.reg(&loss, q.Field.Shared)
	if err != nil {
		return nil, nil, err
	}
	scale := 1.0
	if loss.Mean {
		scale = 1 / float64(n)
	}
	// A call that leaves nothing out costs what GradContext does.
	leftOut := func(i int) bool {
		return skip != nil && skip[i] || m != nil && (m.Status[i] != OK || m.Stiff != nil && m.Stiff[i])
	}
	none := true
	for i := 0; i < n && none; i++ {
		none = !leftOut(i)
	}
	var first []*TrajectoryError
	if none {
		g, tf, err := sv.gradOnce(ctx, dst, q, &loss, rp, m, scale)
		if err != nil || tf == nil {
			return g, nil, err
		}
		first = tf
	}
	// status holds the outcome of the left-out trajectories (OK: in).
	status := make([]Status, n)
	out := 0
	for i := range status {
		switch {
		case skip != nil && skip[i]:
			status[i] = NotRun
		case m != nil && m.Status[i] != OK:
			status[i] = m.Status[i]
		case m != nil && m.Stiff != nil && m.Stiff[i]:
			status[i] = Stiff
		default:
			continue
		}
		out++
	}
	fails := first
	for _, e := range first {
		status[e.Index] = e.Status
		out++
	}
	for {
		// Each failure counts all of the call's: which call of the loop
		// found it depends on where the engine stopped.
		for _, e := range fails {
			e.Failed = len(fails)
		}
		if out == n {
			g, err := sv.partialNone(dst, q, &loss, rp, m, status)
			if err != nil {
				return nil, nil, err
			}
			return g, fails, nil
		}
		if out == 0 {
			g, tf, err := sv.gradOnce(ctx, dst, q, &loss, rp, m, scale)
			if err != nil {
				return nil, nil, err
			}
			if tf == nil {
				return g, fails, nil
			}
			for _, e := range tf {
				status[e.Index] = e.Status
				out++
			}
			fails = append(fails, tf...)
			continue
		}
		idx := make([]int, 0, n-out)
		for i, s := range status {
			if s == OK {
				idx = append(idx, i)
			}
		}
		sp, sl := subProblem(q, &loss, idx)
		sq, err := sv.checkProblem(sp)
		if err != nil {
			return nil, nil, err
		}
		sq.omit, sq.recordAll = q.omit, true
		var sm *Mesh
		if m != nil {
			if sm, err = m.subset(idx, false, nil); err != nil {
				return nil, nil, err
			}
		}
		g, tf, err := sv.gradOnce(ctx, nil, sq, sl, rp, sm, scale)
		if err != nil {
			return nil, nil, err
		}
		if tf == nil {
			if m == nil {
				if err := toHost(g.Mesh); err != nil {
					return nil, nil, err
				}
				if gm := g.Mesh; len(gm.H) < gm.Rows*gm.N {
					return nil, nil, fmt.Errorf("ode: GradPartial: the mesh recorded (N %d, Rows %d) has %d steps on the host", gm.N, gm.Rows, len(gm.H))
				}
			}
			// The subset's saves are spread over the rows of all N on the
			// host (Settings.KeepSaves keeps none here).
			if err := g.Solution.HostSaves(); err != nil {
				return nil, nil, err
			}
			return sv.partialExpand(dst, q, g, m, idx, status), fails, nil
		}
		for _, e := range tf {
			e.reindex(idx)
			status[e.Index] = e.Status
			out++
		}
		fails = append(fails, tf...)
		slices.SortFunc(fails, func(a, b *TrajectoryError) int { return a.Index - b.Index })
	}
}

// gradOnce is GradContext on a checked problem, with the loss scaled by
// scale in place of Loss.Mean's 1/N. If trajectories fail it returns a
// nil gradient and their errors (in q's indices), with a nil error.
func (sv *Solver) gradOnce(ctx context.Context, dst *Gradient, q *problem, loss *Loss, rp *tape.Program, m *Mesh, scale float64) (*Gradient, []*TrajectoryError, error) {
	if m != nil {
		if err := sv.checkMesh(q, m); err != nil {
			return nil, nil, err
		}
	}
	reuse := dst.reusable(m == nil)
	res, used, err := sv.runScaled(ctx, OpGrad, q, loss, m, reuse, scale)
	if err != nil {
		var nf *tape.NonFiniteError
		if errors.As(err, &nf) && nf.Trajectory >= 0 && nf.Trajectory < q.n && !errors.Is(err, context.Canceled) {
			what := "its loss term"
			if strings.HasPrefix(nf.Output, "grad") {
				what = "the derivative of its loss term"
			}
			e := &TrajectoryError{Index: nf.Trajectory, T: q.t1[nf.Trajectory], Status: NonFinite, Method: used.plan.Method, Failed: 1,
				Cause: &nonFiniteCause{what: what, nf: nf}}
			return nil, []*TrajectoryError{e}, nil
		}
		return nil, nil, err
	}
	recorded := m == nil
	if recorded {
		m = used.mesh(q, res, reuse.Mesh)
	}
	if tf := used.failures(q, res, m); tf != nil {
		return nil, tf, nil
	}
	if dst == nil {
		dst = &Gradient{}
	}
	dst.Loss = res.Loss
	dst.Y0 = reuseCopy(dst.Y0, res.GradY0)
	dst.P = reuseCopy(dst.P, res.GradP)
	dst.Shared = append(dst.Shared[:0], res.GradS...)
	r, err := evalReg(loss, rp, q.Shared, dst.Shared)
	if err != nil {
		return nil, nil, err
	}
	dst.Loss += r
	sol := used.solution(q, res, m.Status, dst.oldSaveAt())
	sol.T = used.solutionTimes(reuse.T, q, res)
	sol.Stats = m.Stats
	q.omit.drop(sol, m, recorded, &dst.spare)
	sol.meshArrays = true
	dst.Solution, dst.Mesh, dst.meshGiven = sol, m, !recorded
	dst.RecordTime, dst.GradTime = res.RecordTime, res.GradTime
	dst.StoredBytes = res.StoredBytes
	if tf := nonFiniteRows(dst, q, used.plan.Method); tf != nil {
		return nil, tf, nil
	}
	if err := checkGradient(dst, q.Field.Dim, q.Field.Params, false); err != nil {
		return nil, nil, err
	}
	return dst, nil, nil
}

// failures returns a *TrajectoryError for each trajectory of the mesh
// that failed or is stiff, or nil if none did.
func (sv *Solver) failures(q *problem, res *Result, m *Mesh) []*TrajectoryError {
	var tf []*TrajectoryError
	notRun := 0
	for i, s := range m.Status {
		stiff := s == OK && m.Stiff != nil && m.Stiff[i]
		if s == NotRun {
			notRun++
		}
		if (s == OK || s == NotRun) && !stiff {
			continue
		}
		e := &TrajectoryError{Index: i, Status: s, Method: sv.methodAt(res, i, sv.plan.Method)}
		if stiff {
			e.Status = Stiff
		}
		if res.T != nil {
			e.T = res.T[i]
			e.describe(q, &sv.set, res, sv.engine)
			e.Y = res.LastY[i]
		} else {
			e.T = q.t1[i]
		}
		if res.LastH != nil {
			e.H = res.LastH[i]
		}
		tf = append(tf, e)
	}
	for _, e := range tf {
		e.Failed = len(tf)
	}
	if tf == nil && notRun > 0 {
		// An engine left trajectories unrun without a failure: report the
		// first as failed, so that the caller retries without it.
		i := slices.Index(m.Status, NotRun)
		return []*TrajectoryError{{Index: i, T: q.T0, Status: NotRun, Method: sv.plan.Method, Failed: notRun}}
	}
	return tf
}

// nonFiniteCause is the Cause of a trajectory whose loss term, or its
// derivative, is not finite. Its message is formed when read, so that
// reindex's change of the trajectory shows in it.
type nonFiniteCause struct {
	what string // "its loss term" or "the derivative of its loss term"
	nf   *tape.NonFiniteError
}

func (c *nonFiniteCause) Error() string { return c.what + " is not finite: " + c.nf.Error() }
func (c *nonFiniteCause) Unwrap() error { return c.nf }

// reindex maps e, a failure of the subset idx of an ensemble, to the
// ensemble's index: its Index, and the Trajectory of a *tape.NonFiniteError
// its Cause wraps (its message names the trajectory).
func (e *TrajectoryError) reindex(idx []int) {
	e.Index = idx[e.Index]
	var nf *tape.NonFiniteError
	if errors.As(e.Cause, &nf) && nf.Trajectory >= 0 && nf.Trajectory < len(idx) {
		nf.Trajectory = idx[nf.Trajectory]
	}
}

// nonFiniteRows returns a NonFinite *TrajectoryError for each trajectory
// whose rows of the gradient are not finite, or nil.
func nonFiniteRows(g *Gradient, q *problem, method string) []*TrajectoryError {
	d, np := q.Field.Dim, q.Field.Params
	var tf []*TrajectoryError
	for i := 0; i < q.n; i++ {
		var cause error
		if c := finiteAll(g.Y0[i*d : (i+1)*d]); c >= 0 {
			cause = fmt.Errorf("its gradient with respect to Y0 (component %d) is %v", c, g.Y0[i*d+c])
		} else if c := finiteAll(g.P[i*np : (i+1)*np]); c >= 0 {
			cause = fmt.Errorf("its gradient with respect to P (parameter %d) is %v", c, g.P[i*np+c])
		}
		if cause != nil {
			tf = append(tf, &TrajectoryError{Index: i, T: q.t1[i], Status: NonFinite, Method: method, Cause: cause})
		}
	}
	for _, e := range tf {
		e.Failed = len(tf)
	}
	return tf
}

// subProblem returns the problem and loss of trajectories idx of q.
func subProblem(q *problem, loss *Loss, idx []int) (*Problem, *Loss) {
	d, np := q.Field.Dim, q.Field.Params
	p := &Problem{Field: q.Field, N: len(idx), Shared: q.Shared, T0: q.T0, SaveAt: q.SaveAt,
		Y0: rowsOf(q.y0, d, idx), T1s: rowsOf(q.t1, 1, idx)}
	if np > 0 {
		p.P = rowsOf(q.p, np, idx)
	}
	return p, lossRows(loss, idx)
}

// lossRows returns a copy of loss for rows idx of its problem: its Data
// rows idx where it has a row per trajectory.
func lossRows(loss *Loss, idx []int) *Loss {
	l := *loss
	if loss.DataDim > 0 && len(loss.Data) != loss.DataDim {
		l.Data = rowsOf(loss.Data, loss.DataDim, idx)
	}
	return &l
}

// rowsOf returns rows idx of the row-major x of width w: element by
// element for widths of 1 and 2 (Method Auto's sub-problems: a row's own
// copy costs more than its elements), else row by row.
func rowsOf(x []float64, w int, idx []int) []float64 {
	out := make([]float64, len(idx)*w)
	switch w {
	case 1:
		for k, i := range idx {
			out[k] = x[i]
		}
	case 2:
		for k, i := range idx {
			out[2*k], out[2*k+1] = x[2*i], x[2*i+1]
		}
	default:
		for k, i := range idx {
			copy(out[k*w:(k+1)*w], x[i*w:(i+1)*w])
		}
	}
	return out
}

// toHost brings m's steps into H if an engine holds them elsewhere (the
// Mesh.Host of resident meshes, where the package has it).
func toHost(m *Mesh) error {
	if h, ok := any(m).(interface{ Host() error }); ok {
		return h.Host()
	}
	return nil
}

// subset returns the mesh of trajectories idx (increasing) of m. If keep
// and m's steps are resident on an engine that gathers columns
// (ColumnSteps), the subset's steps are gathered there (its Resident,
// which the caller releases), and m's stay, written into reuse's memory
// where the engine can (ColumnSteps.Columns); else m's steps come to the
// host (Mesh.Host) and the subset's are copied there. reuse, if not nil,
// is resident steps the caller gives up: the subset's, or released.
func (m *Mesh) subset(idx []int, keep bool, reuse ResidentSteps) (*Mesh, error) {
	var cs ColumnSteps
	if r, ok := m.Resident.(ColumnSteps); ok && keep && !r.Released() && len(m.Len) == m.N {
		cs = r
	} else {
		if reuse != nil {
			reuse.Release()
		}
		if err := toHost(m); err != nil {
			return nil, err
		}
	}
	if cs == nil && len(m.H) < m.Rows*m.N || len(m.Len) != m.N {
		return nil, fmt.Errorf("ode: mesh arrays are inconsistent (N %d, Rows %d, len(H) %d, len(Len) %d): its steps must be on the host",
			m.N, m.Rows, len(m.H), len(m.Len))
	}
	s := *m
	k := len(idx)
	s.N, s.Rows = k, 0
	s.Len, s.Status = make([]int, k), make([]Status, k)
	for j, i := range idx {
		s.Len[j], s.Status[j] = m.Len[i], m.Status[i]
		s.Rows = max(s.Rows, m.Len[i])
	}
	if cs != nil {
		// Gathered on the engine: each column's steps, zeros past them.
		r, err := gatherColumns(cs, idx, s.Len, s.Rows, reuse)
		if err != nil {
			return nil, fmt.Errorf("ode: mesh: gathering trajectories' steps on engine %s: %w", cs.Engine(), err)
		}
		s.H, s.Resident = nil, r
	} else {
		// Columns idx on all cores (stepCopy): the steps and what lies
		// past them (a column's whole rows).
		s.H = make([]float64, s.Rows*k)
		rows := make([]int, k)
		for j := range rows {
			rows[j] = s.Rows
		}
		(&stepCopy{dst: s.H, dn: k, src: m.H, sn: m.N, scol: idx, lens: rows}).run()
	}
	s.Stats = Stats{Accepted: intsOf(m.Stats.Accepted, idx), Rejected: intsOf(m.Stats.Rejected, idx),
		FieldEvals: intsOf(m.Stats.FieldEvals, idx), Wall: m.Stats.Wall}
	if m.T1 != nil {
		s.T1 = rowsOf(m.T1, 1, idx)
	}
	if m.Stiff != nil {
		s.Stiff = make([]bool, k)
		for j, i := range idx {
			s.Stiff[j] = m.Stiff[i]
		}
	}
	if m.Switch != nil {
		s.Switch = intsOf(m.Switch, idx)
	}
	if m.Events != nil {
		s.Events = make([]int32, s.Rows*k)
		for r := 0; r < s.Rows; r++ {
			for j, i := range idx {
				if r < m.Len[i] {
					s.Events[r*k+j] = m.Events[r*m.N+i]
				}
			}
		}
	}
	return &s, nil
}

// intsOf returns x[idx] (nil for a nil or short x).
func intsOf(x []int, idx []int) []int {
	if len(x) == 0 {
		return nil
	}
	out := make([]int, len(idx))
	for j, i := range idx {
		out[j] = x[i]
	}
	return out
}

// partialExpand returns in dst the gradient g of trajectories idx of q
// as one of all N: zero rows and NaN states for the others, whose
// statuses are in status.
func (sv *Solver) partialExpand(dst *Gradient, q *problem, g *Gradient, m *Mesh, idx []int, status []Status) *Gradient {
	n, d, np := q.n, q.Field.Dim, q.Field.Params
	if dst == nil {
		dst = &Gradient{}
	}
	dst.Loss = g.Loss
	dst.Y0 = zeros(dst.Y0, n*d)
	dst.P = zeros(dst.P, n*np)
	for j, i := range idx {
		copy(dst.Y0[i*d:(i+1)*d], g.Y0[j*d:(j+1)*d])
		copy(dst.P[i*np:(i+1)*np], g.P[j*np:(j+1)*np])
	}
	dst.Shared = append(dst.Shared[:0], g.Shared...)
	gs := g.Solution
	states, stats := q.omit&OmitStates == 0, q.omit&OmitStats == 0
	sol := &Solution{N: n, Dim: d, SaveAt: q.saveTimes(dst.oldSaveAt()), Method: gs.Method, Engine: gs.Engine,
		T: make([]float64, n), Status: slices.Clone(status)}
	K := len(q.SaveAt)
	if states {
		sol.Y = nans(n * d)
		if K > 0 {
			sol.Ys = nans(n * K * d)
		}
	}
	for i := range sol.T {
		sol.T[i] = q.T0
	}
	for j, i := range idx {
		sol.T[i] = gs.T[j]
		if states {
			copy(sol.Y[i*d:(i+1)*d], gs.Y[j*d:(j+1)*d])
			if K > 0 {
				copy(sol.Ys[i*K*d:(i+1)*K*d], gs.Ys[j*K*d:(j+1)*K*d])
			}
		}
		sol.Status[i] = gs.Status[j]
	}
	gm := g.Mesh
	sol.Stats = Stats{Accepted: expandInts(gs.Stats.Accepted, idx, n), Wall: gs.Stats.Wall}
	if stats {
		sol.Stats.Rejected, sol.Stats.FieldEvals = expandInts(gs.Stats.Rejected, idx, n), expandInts(gs.Stats.FieldEvals, idx, n)
	}
	if gs.Stiff != nil {
		sol.Stiff = make([]bool, n)
		for j, i := range idx {
			sol.Stiff[i] = gs.Stiff[j]
		}
	}
	if gs.Switch != nil {
		sol.Switch = expandInts(gs.Switch, idx, n) // a left-out trajectory: Len 0, Switch 0
	}
	if sv.plan.Events != nil {
		sol.Events = expandInts(gs.Events, idx, n) // a left-out trajectory: no events
	}
	sol.meshArrays = true
	dst.Solution, dst.meshGiven = sol, m != nil
	if m == nil {
		em := *gm
		em.N = n
		em.H = make([]float64, gm.Rows*n)
		for r := 0; r < gm.Rows; r++ {
			row, src := em.H[r*n:(r+1)*n], gm.H[r*gm.N:(r+1)*gm.N]
			for j, i := range idx {
				row[i] = src[j]
			}
		}
		em.Len = expandInts(gm.Len, idx, n)
		em.Status = sol.Status
		em.Stats = sol.Stats
		em.T1 = slices.Clone(q.t1)
		em.Stiff = sol.Stiff
		em.Switch = nil
		if gm.Switch != nil {
			em.Switch = expandInts(gm.Switch, idx, n)
		}
		if gm.Events != nil {
			em.Events = make([]int32, gm.Rows*n)
			for r := 0; r < gm.Rows; r++ {
				for j, i := range idx {
					em.Events[r*n+i] = gm.Events[r*gm.N+j]
				}
			}
		}
		m = &em
	}
	dst.Mesh = m
	dst.RecordTime, dst.GradTime, dst.StoredBytes = g.RecordTime, g.GradTime, g.StoredBytes
	return dst
}

// partialNone returns the gradient of a call that left every trajectory
// out: zero, with the Reg term alone as the loss; or the error of a loss
// that does not trace (its Data's, its Reg's) or a Reg that is not
// finite, as a call with trajectories in returns it.
func (sv *Solver) partialNone(dst *Gradient, q *problem, loss *Loss, rp *tape.Program, m *Mesh, status []Status) (*Gradient, error) {
	if _, err := sv.checkLossPlan(loss, q); err != nil {
		return nil, err
	}
	n, d, np := q.n, q.Field.Dim, q.Field.Params
	if dst == nil {
		dst = &Gradient{}
	}
	dst.Y0, dst.P = zeros(dst.Y0, n*d), zeros(dst.P, n*np)
	dst.Shared = zeros(dst.Shared, q.Field.Shared)
	r, err := evalReg(loss, rp, q.Shared, dst.Shared)
	if err != nil {
		return nil, err
	}
	dst.Loss = r
	if err := checkGradient(dst, d, np, true); err != nil {
		return nil, err
	}
	sol := &Solution{N: n, Dim: d, SaveAt: q.saveTimes(dst.oldSaveAt()), Method: sv.plan.Method, Engine: sv.engine.Name(),
		T: make([]float64, n), Status: slices.Clone(status)}
	for i := range sol.T {
		sol.T[i] = q.T0
	}
	if sv.plan.Events != nil {
		sol.Events = make([]int, n)
	}
	// Every trajectory left out: zero counts, as partialExpand gives the
	// left-out ones.
	sol.Stats = Stats{Accepted: make([]int, n)}
	if q.omit&OmitStats == 0 {
		sol.Stats.Rejected, sol.Stats.FieldEvals = make([]int, n), make([]int, n)
	}
	if q.omit&OmitStates == 0 {
		sol.Y = nans(n * d)
		if len(q.SaveAt) > 0 {
			sol.Ys = nans(n * len(q.SaveAt) * d)
		}
	}
	sol.meshArrays = true
	dst.meshGiven = m != nil
	if m == nil {
		m = &Mesh{N: n, Len: make([]int, n), Status: sol.Status, T0: q.T0, T1: slices.Clone(q.t1), SaveAt: q.saveTimes(nil),
			Method: methodByName(sv.plan.Method), RelTol: sv.set.RelTol, AbsTol: sv.set.AbsTol, AbsTols: slices.Clone(sv.set.AbsTols),
			Fingerprint: sv.plan.Fingerprint, Engine: sv.engine.Name(), Stats: sol.Stats}
	}
	dst.Solution, dst.Mesh = sol, m
	dst.RecordTime, dst.GradTime, dst.StoredBytes = 0, 0, 0
	return dst, nil
}

// expandInts returns x (over idx) as n entries, 0 elsewhere.
func expandInts(x []int, idx []int, n int) []int {
	out := make([]int, n)
	if len(x) == 0 {
		return out
	}
	for j, i := range idx {
		out[i] = x[j]
	}
	return out
}

func zeros(dst []float64, n int) []float64 {
	if cap(dst) < n {
		return make([]float64, n)
	}
	dst = dst[:n]
	clear(dst)
	return dst
}

func nans(n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = math.NaN()
	}
	return x
}

// longest returns the largest of lens, at least 0 (a mesh's Rows for its
// trajectories' lens), in a loop on a local (a field written each step
// costs a store an element: 10–20 µs at 16,384 trajectories).
func longest(lens []int) int {
	m := 0
	for _, l := range lens {
		m = max(m, l)
	}
	return m
}
