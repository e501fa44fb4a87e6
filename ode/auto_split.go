package ode

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/gradsolve-go/gradsolve/internal/par"
)

// Method Auto on an engine that cannot switch a trajectory's method in
// place (every engine but the CPU's, which runs the Rodas5P plan beside
// the Tsit5 one in each worker: Job.stiff) switches per trajectory in
// parts: the Tsit5 pass stops each trajectory where its stiffness test
// fires (Job.StopOnStiff) and finishes the others; the stiff ones go on
// with Rodas5P from where they stopped on an engine that runs
// per-trajectory start times (auto_continue.go), else are run again,
// from T0, with Rodas5P, as a sub-problem of their rows; the parts'
// results are merged into one of all N rows, whose Switch is Len for a
// Tsit5 trajectory, and the Tsit5 steps' count for a continued one or 0
// for a restarted one (all its steps are Rodas5P's). A mesh of that form
// is replayed the same way: its Tsit5 rows and its Rodas5P rows as two
// sub-meshes, each by its own solver, and its switched rows as their two
// segments chained. No engine needs to know of Auto: the parts are
// ordinary jobs.
//
// A loss or a gradient needs sums without the stopped trajectories: the
// Tsit5 part is the first pass's rows of the others where the engine
// completed them beside the stopped ones (StopGradsExecutor: the GPU
// engines) and no shared parameter's gradient is asked (keptPart), else
// replayed on the first pass's mesh (see runAutoSplit), its columns
// gathered where the engine keeps that mesh (ColumnSteps: a GPU engine's
// device), else on the host.
//
// Sums over the trajectories (the loss, the shared gradient) are the
// parts' own, each summed by its engine in its rows' index order, then
// added: L = L_Tsit5 + L_Rodas5P and ∂L/∂s = G_Tsit5 + G_Rodas5P,
// component by component, in that order. They are the same bit for bit
// from run to run (the parts depend on the stiffness tests alone), but not
// the index-order sum of the N terms that a single pass would give (the
// engines report sums, not terms): they differ from it by rounding.

// autoPart is one part of a split operation: rows idx of the problem
// (increasing), whose results are rows rows of res (nil: rows 0, 1, …),
// run by the Rodas5P solver if stiff.
type autoPart struct {
	idx, rows []int
	res       *Result
	stiff     bool
	// switchAt, if not nil, are the part's trajectories' Mesh.Switch (a
	// stiff part that continued them: the Tsit5 steps' counts).
	switchAt []int
}

// row returns the row of res that holds trajectory k of the part.
func (p *autoPart) row(k int) int {
	if p.rows == nil {
		return k
	}
	return p.rows[k]
}

// identity reports whether the part holds the n trajectories of the
// problem in order, in rows 0, 1, … of its result.
func (p *autoPart) identity(n int) bool {
	if len(p.idx) != n {
		return false
	}
	for k, i := range p.idx {
		if i != k {
			return false
		}
	}
	for k, j := range p.rows { // (nil: rows 0, 1, …)
		if k < n && j != k {
			return false
		}
	}
	return true
}

// switchesInPlace reports whether the solver's engine switches Method
// Auto's trajectories in place (the CPU engine).
func (sv *Solver) switchesInPlace() bool {
	_, ok := sv.exec.(*cpuExec)
	return ok
}

// lossScale returns the scale of the loss's terms for the whole problem:
// scale if not 0, else 1, or 1/N for a mean. A part's job is run with it,
// so that a mean over a part is still one over the N trajectories.
func lossScale(loss *Loss, n int, scale float64) float64 {
	if loss == nil || scale != 0 {
		return scale
	}
	if loss.Mean {
		return 1 / float64(n)
	}
	return 1
}

// subOf returns the checked sub-problem of rows idx (increasing) of q,
// with its loss (nil if loss is nil). Its rows are those of the checked
// q: they are not checked again. Where idx is every row (a stiff
// ensemble's continuation) it shares q's arrays, its single rows (Y0,
// P, T1) left single; else its arrays are copies of the rows.
func (sv *Solver) subOf(q *problem, loss *Loss, idx []int) (*problem, *Loss, error) {
	var sl *Loss
	if len(idx) == q.n && q.n > 0 {
		pr := *q.Problem
		pr.N = q.n
		sq := &problem{Problem: &pr, n: q.n, y0: q.y0, p: q.p, t1: q.t1, tmin: q.tmin, omit: q.omit}
		if loss != nil {
			l := *loss
			sl = &l
		}
		return sq, sl, nil
	}
	l := loss
	if l == nil {
		l = &Loss{}
	}
	sp, sl := subProblem(q, l, idx)
	if loss == nil {
		sl = nil
	}
	if len(idx) == 0 {
		sq, err := sv.checkProblem(sp) // (its error: an empty ensemble)
		if err != nil {
			return nil, nil, err
		}
		sq.omit = q.omit
		return sq, sl, nil
	}
	sq := &problem{Problem: sp, n: len(idx), y0: sp.Y0, p: sp.P, t1: sp.T1s, omit: q.omit}
	sq.tmin = slices.Min(sp.T1s)
	return sq, sl, nil
}

// runAutoSplit runs op (without a mesh) with Method Auto on an engine
// that does not switch in place: the Tsit5 pass, then, if the stiffness
// test fired on some trajectories, Rodas5P on those alone, merged (see
// the comment at the top of this file). reuse goes to the first pass.
//
// Solve and Record keep the first pass's rows that finished (OK or
// failed). A loss or a gradient keeps a Tsit5 pass only if every one of
// its trajectories finished OK, its sums being whole only then: the rows
// that did are the first pass's where its engine completed them beside
// the stiff ones (keptPart: no job), else run again without the stiff
// ones, on the first pass's mesh where it holds all of them (a replay:
// no trial steps, the same map), else recorded again (Tsit5 takes the
// same steps on them) until a pass is clean; an engine that stops the
// others when one trajectory stops (NotRun) costs a pass per stop. A
// trajectory that fails (neither OK nor stiff) ends the operation: the
// result then has the failures' statuses and NotRun elsewhere, and its
// caller reports them.
func (sv *Solver) runAutoSplit(ctx context.Context, op Op, q *problem, loss *Loss, reuse *Result, scale float64) (*Result, *Solver, error) {
	var mem autoMem
	passedBack := reuse != nil && reuse.Mesh != nil && lazyAuto(reuse.Mesh)
	if passedBack {
		// The mesh of the result passed back is replaced. Its steps left
		// on the engine are given to the same jobs and gathers again
		// (autoMem), which may write into their memory (a GPU engine's:
		// no allocation a call); the others' go back now, not when the
		// collector finds them.
		if mem = takeAutoMem(reuse.Mesh); mem.pass != nil {
			r := *reuse
			r.Mesh = mem.pass
			reuse = &r
		} else if !mem.any() {
			reuse.Mesh.Release()
		}
	}
	res, err := sv.runPlan(ctx, op, q, loss, nil, reuse, scale, nil)
	if mem.pass != nil && (err != nil || res.Mesh == nil || res.Mesh.Resident != mem.pass.Resident) {
		mem.pass.Release() // not refilled
	}
	mem.pass = nil
	defer mem.release() // what no part took
	if err != nil || !anyTrue(res.Stiff) {
		return res, sv, err
	}
	alt, err := sv.stiffSolver()
	if err != nil {
		return nil, sv, err
	}
	scale = lossScale(loss, q.n, scale)
	first := res
	whole := op == OpGrad || op == OpLoss
	recorded := op != OpSolve // the callers read the mesh of a record
	var parts []autoPart
	var stiff []int
	var stops []autoStop
	kept := false     // a part is the first pass's rows (keptPart), its mesh that pass's
	cur := []int(nil) // the rows of q that res holds (nil: all)
	at := func(j int) int {
		if cur == nil {
			return j
		}
		return cur[j]
	}
	for {
		if stops == nil && mem.host != nil && anyTrue(res.Stiff) {
			// (The last call's room, where it was passed back.)
			stops, mem.host.stops = mem.host.stops, nil
		}
		var pr passRows
		stiff, stops = pr.sort(res, cur, stiff, stops)
		done, doneRows, next, failed, found := pr.done, pr.doneRows, pr.next, pr.failed, pr.found
		if whole {
			switch {
			case len(failed) > 0:
				// The operation fails: its failures, nothing else run.
				idx := make([]int, len(failed))
				for k, j := range failed {
					idx[k] = at(j)
				}
				out := mergeAuto(q, op, []autoPart{{idx: idx, rows: failed, res: res}}, false, recorded)
				return out, sv, nil
			case !found && len(next) > 0:
				// Trajectories left unrun with nothing stopped: report them.
				return mergeAuto(q, op, nil, false, recorded), sv, nil
			case !found:
				parts = append(parts, autoPart{idx: cur, res: res})
				next = nil
			default:
				next = append(next, done...)
				slices.Sort(next)
			}
		} else {
			if len(done) > 0 {
				parts = append(parts, autoPart{idx: done, rows: doneRows, res: res})
			}
			if !found {
				next = nil // unrun with nothing stopped: left NotRun
			}
		}
		if len(next) == 0 {
			break
		}
		if whole && cur == nil && len(next) == len(done) {
			// The first pass finished every other trajectory: where the
			// engine completed their loss and gradient as it stopped the
			// stiff ones (StopGradsExecutor), that pass's rows of them
			// are the part, as a replay of their steps would give them.
			if kp := sv.keptPart(op, q, res, done); kp != nil {
				parts = append(parts, *kp)
				kept = true
				break
			}
		}
		sq, sl, err := sv.subOf(q, loss, next)
		if err != nil {
			return nil, sv, err
		}
		if whole && cur == nil && res.Mesh != nil && len(next) == len(done) {
			// The first pass finished every other trajectory and recorded
			// its steps: replay them (the record's map, bit for bit)
			// instead of recording them again.
			tsit := mem.tsit
			mem.tsit = nil
			if r, err := sv.replayPart(ctx, op, sq, sl, res, next, scale, tsit); err != nil {
				return nil, sv, err
			} else if r != nil {
				parts = append(parts, autoPart{idx: next, res: r})
				break
			}
		}
		res, err = sv.runPlan(ctx, op, sq, sl, nil, nil, scale, nil)
		if err != nil {
			return nil, sv, err
		}
		cur = next
	}
	if sv.continues() {
		// The stiff trajectories go on with Rodas5P from where they
		// stopped (auto_continue.go).
		stopCols := mem.stops
		mem.stops = nil
		sg, err := stopSegs(q, stops, true, recorded, stopCols)
		if err != nil {
			return nil, sv, err
		}
		sg.keep2, mem.rodas = mem.rodas, nil
		sg.spare, mem.host = mem.host, nil
		if whole && len(stops) == q.n && allRowsOf(stops) {
			// Every trajectory stopped: the first pass's gradient arrays
			// (the Gradient's passed back) take the Tsit5 segments', and
			// its states (the Rodas5P segments' initial ones), statuses,
			// flags and counts, read by no one after the continuation,
			// are spare (the caller writes its results into the
			// Gradient's others: its times, saves, gradient).
			sg.grads = first
			sg.jobs = append(sg.jobs, &Result{Y: first.Y, Status: first.Status, Stiff: first.Stiff, Stats: Stats{
				Accepted: first.Stats.Accepted, Rejected: first.Stats.Rejected, FieldEvals: first.Stats.FieldEvals}})
		}
		rs, err := sv.continueAuto(ctx, op, q, loss, scale, sg)
		sg.release()
		sg.done2(nil) // where no record took it
		var spare *Mesh
		if whole && first.Mesh != nil && first.Mesh.Resident != sg.r1 && !kept {
			// The first pass's mesh, whose rows the parts took (gathered
			// where the engine keeps it, or on the host), is no part's:
			// its steps left on the engine go back now, or, in a loop
			// that passes its results back, with the merged mesh, whose
			// next call's first pass records into them (autoMem).
			spare = first.Mesh
		}
		if err != nil {
			spare.Release()
			return nil, alt, err
		}
		parts = append(parts, autoPart{idx: sg.idx, res: rs, stiff: true, switchAt: sg.acc1})
		out := mergeAuto(q, op, parts, whole && allOK(rs.Status), recorded)
		var ms *mergedSteps
		if out.Mesh != nil {
			ms, _ = out.Mesh.Resident.(*mergedSteps)
		}
		if ms != nil && passedBack && spare != nil && spare.Resident != nil {
			ms.spare = spare
		} else {
			spare.Release()
		}
		if a := contSteps(out.Mesh); a != nil {
			// The jobs' host arrays that out does not hold, for the next
			// call given it back.
			if sg.spare == nil {
				sg.spare = &autoSpare{}
			}
			sg.spare.keep(out, sg.jobs...)
			clear(stops) // (no result kept alive by them)
			sg.spare.stops = stops[:0]
			a.spare = sg.spare
		}
		return out, sv, nil
	}
	slices.Sort(stiff) // (the continuation sorts its stops: stopSegs)
	if len(stiff) == q.n {
		// Every trajectory is stiff: the result is Rodas5P's on the whole
		// problem (its mesh stays where the engine keeps it).
		res, err := alt.runPlan(ctx, op, q, loss, nil, reuse, scale, nil)
		return res, alt, err
	}
	sq, sl, err := sv.subOf(q, loss, stiff)
	if err != nil {
		return nil, sv, err
	}
	rs, err := alt.runPlan(ctx, op, sq, sl, nil, nil, scale, nil)
	if err != nil {
		return nil, alt, err
	}
	parts = append(parts, autoPart{idx: stiff, res: rs, stiff: true})
	clean := whole && allOK(rs.Status)
	out := mergeAuto(q, op, parts, clean, recorded)
	return out, sv, nil
}

// passRows are a pass's rows sorted by what runAutoSplit does next with
// them (passRows.sort): done (OK or failed: the problem's rows, and the
// pass's), next (NotRun: to run again), failed (the pass's rows, also in
// done); found: some stopped stiff.
type passRows struct {
	done, doneRows, next, failed []int
	found                        bool
}

// sort sorts the rows of the pass res, which holds rows cur of the
// problem (nil: all), into pr, and returns stiff and stops with those
// that stopped stiff appended (the problem's rows; autoStops of res), in
// row order, in one loop on the calling goroutine (counted, then
// written in tasks on all cores, Robertson's 16384 rows took 91 µs
// instead of 35 on one core: BenchmarkAutoHostParts).
func (pr *passRows) sort(res *Result, cur, stiff []int, stops []autoStop) ([]int, []autoStop) {
	if ns := countTrue(res.Stiff); ns > 0 {
		// (Their exact room: a stiff ensemble's every row.)
		stiff, stops = slices.Grow(stiff, ns), slices.Grow(stops, ns)
	}
	for j, s := range res.Status {
		i := j
		if cur != nil {
			i = cur[j]
		}
		switch {
		case res.Stiff != nil && res.Stiff[j]:
			stiff = append(stiff, i)
			stops = append(stops, autoStop{i: i, j: j, res: res})
			pr.found = true
		case s == NotRun:
			pr.next = append(pr.next, i)
		case s != OK:
			pr.failed = append(pr.failed, j)
			pr.done, pr.doneRows = append(pr.done, i), append(pr.doneRows, j)
		default:
			pr.done, pr.doneRows = append(pr.done, i), append(pr.doneRows, j)
		}
	}
	return stiff, stops
}

// rowTask is the trajectories of a task of Method Auto's loops over them
// on all cores (par.Ranges: stopSegs's, mergeRows): a few tens of
// microseconds of work a task.
const rowTask = 2048

// keptPart returns the part of the trajectories done (increasing: every
// one of the first pass res, of all q.n trajectories, that is not stiff,
// all OK) as res holds them, where the solver's executor completes them
// (StopGradsExecutor), res was not served by another engine and holds
// its mesh and, for a gradient, the rows of GradY0 and GradP and no
// shared parameter's (whose sum over them is the engine's reduction, not
// the one of a replay of them alone: the parts' sums stay as they were,
// bit for bit); else nil (runAutoSplit replays them: replayPart). Its
// result is a copy of res without the failures' last steps and states,
// as a replay has none. No engine work: the part's loss is res's, whose
// stopped trajectories' terms are 0, so the same sum (x + 0 = x, and a
// sum from +0 is never −0).
func (sv *Solver) keptPart(op Op, q *problem, res *Result, done []int) *autoPart {
	e, ok := sv.exec.(StopGradsExecutor)
	if !ok || !e.StopGrads() || res.Engine != "" || res.Mesh == nil || len(res.Status) != q.n {
		return nil
	}
	n, d, np := q.n, q.Field.Dim, q.Field.Params
	if op == OpGrad && (q.Field.Shared > 0 || len(res.GradY0) < n*d || len(res.GradP) < n*np) {
		return nil
	}
	r := *res
	r.LastH, r.LastY = nil, nil
	return &autoPart{idx: done, rows: done, res: &r}
}

// replayPart runs op (a loss or a gradient) for the sub-problem sq of
// rows idx of q on the steps that the first pass res recorded for them,
// all OK, and returns its result with what the record knew of those rows
// (statuses, counts, times, the sub-mesh), or nil if the mesh holds no
// steps for them on the host (a record is then run instead).
func (sv *Solver) replayPart(ctx context.Context, op Op, sq *problem, sl *Loss, res *Result, idx []int, scale float64, reuse ResidentSteps) (*Result, error) {
	for _, i := range idx {
		if res.Status[i] != OK {
			if reuse != nil {
				reuse.Release()
			}
			return nil, nil
		}
	}
	// Their steps gathered where the engine keeps the pass's mesh
	// (ColumnSteps), into reuse's memory where it can, else on the host.
	sm, err := res.Mesh.subset(idx, true, reuse)
	if err != nil {
		return nil, nil
	}
	sm.Switch, sm.Stiff, sm.Method, sm.Fingerprint = nil, nil, methodByName(sv.plan.Method), sv.plan.Fingerprint
	sm.T0, sm.T1 = sq.T0, sq.t1
	r, err := sv.runPlan(ctx, op, sq, sl, sm, nil, scale, nil)
	if err != nil {
		return nil, err
	}
	r.Status, r.Stats, r.Mesh = sm.Status, sm.Stats, sm
	if res.T != nil {
		r.T = rowsOf(res.T, 1, idx)
	}
	return r, nil
}

// runSwitchedMesh runs op on mesh m of Method Auto on an engine that does
// not switch in place: a trajectory's Switch is 0 (Rodas5P's steps from
// T0), Len (Tsit5's), or, on an engine that continues (checkMesh refuses
// it elsewhere), within its steps. The Tsit5 rows and the Rodas5P rows
// are replayed as two sub-meshes, each by its own solver, the switched
// rows as their two segments chained (continueAuto), and merged; a mesh
// of one method is replayed whole, where it is.
func (sv *Solver) runSwitchedMesh(ctx context.Context, op Op, q *problem, loss *Loss, m *Mesh, reuse *Result, scale float64) (*Result, *Solver, error) {
	alt, err := sv.stiffSolver()
	if err != nil {
		return nil, sv, err
	}
	var tsit, rodas, cont []int
	for i, s := range m.Switch {
		switch {
		case s >= m.Len[i]:
			tsit = append(tsit, i)
		case s > 0:
			cont = append(cont, i) // (checkMesh: only where the engine continues)
		default:
			rodas = append(rodas, i)
		}
	}
	of := func(used *Solver, mm *Mesh) *Mesh {
		c := *mm
		c.Switch, c.Method, c.Fingerprint = nil, methodByName(used.plan.Method), used.plan.Fingerprint
		return &c
	}
	if len(cont) == 0 && (len(rodas) == 0 || len(tsit) == 0) {
		used := sv
		if len(tsit) == 0 {
			used = alt
		}
		res, err := used.runPlan(ctx, op, q, loss, of(used, m), reuse, scale, nil)
		if err != nil {
			return nil, used, err
		}
		res.Switch = m.Switch
		if len(tsit) == 0 {
			res.switched = make([]bool, q.n)
			for i := range res.switched {
				res.switched[i] = true
			}
		}
		return res, sv, nil
	}
	scale = lossScale(loss, q.n, scale)
	var parts []autoPart
	for _, part := range []struct {
		idx  []int
		used *Solver
	}{{tsit, sv}, {rodas, alt}} {
		if len(part.idx) == 0 {
			continue
		}
		sq, sl, err := sv.subOf(q, loss, part.idx)
		if err != nil {
			return nil, sv, err
		}
		sm, err := m.subset(part.idx, false, nil)
		if err != nil {
			return nil, sv, err
		}
		res, err := part.used.runPlan(ctx, op, sq, sl, of(part.used, sm), nil, scale, nil)
		if err != nil {
			return nil, part.used, err
		}
		parts = append(parts, autoPart{idx: part.idx, res: res, stiff: part.used == alt})
	}
	if len(cont) > 0 {
		// Trajectories switched within their steps: the two segments
		// chained (auto_continue.go).
		sg, err := meshSegs(q, m, cont)
		if err != nil {
			return nil, sv, err
		}
		res, err := sv.continueAuto(ctx, op, q, loss, scale, sg)
		if err != nil {
			return nil, alt, err
		}
		parts = append(parts, autoPart{idx: cont, res: res, stiff: true})
	}
	out := mergeAuto(q, op, parts, true, false)
	out.Switch = m.Switch
	return out, sv, nil
}

// countTrue returns how many of b are true.
func countTrue(b []bool) int {
	c := 0
	for _, v := range b {
		if v {
			c++
		}
	}
	return c
}

func allOK(s []Status) bool {
	for _, v := range s {
		if v != OK {
			return false
		}
	}
	return true
}

// mergeAuto returns the result of all q.n trajectories of op from the
// parts: each part's rows scattered to its trajectories, the others
// NotRun (NaN states, no steps). whole asks for the sums (Loss, GradS)
// and the gradient rows: the parts' sums added in part order. Switch is
// Len (the accepted steps) for a Tsit5 trajectory and 0 for a Rodas5P one
// (switched), Stiff is false everywhere, and the parts' meshes (brought to
// the host) are merged into one.
func mergeAuto(q *problem, op Op, parts []autoPart, whole, meshes bool) *Result {
	n, d, K, np, ns := q.n, q.Field.Dim, len(q.SaveAt), q.Field.Params, q.Field.Shared
	has := func(f func(r *Result) bool) bool {
		for k := range parts {
			if f(parts[k].res) {
				return true
			}
		}
		return false
	}
	// Which parts hold every trajectory in order (identity: a pass over
	// each part's rows, once).
	ids := make([]bool, len(parts))
	for k := range parts {
		ids[k] = parts[k].identity(n)
	}
	// One part of every trajectory in order (the stiff ensemble that
	// Method Auto continued): its mesh, a result of this call's, is the
	// merged one as it is, on the host or not (mergeMeshes).
	asIs := meshes && len(parts) == 1 && ids[0] && parts[0].res.Mesh != nil && parts[0].res.Mesh.N == n
	// own is that part's result, where its steps need not come to the
	// host (else a failure to bring them leaves its rows NotRun): its
	// arrays, this call's own, are the merged result's as they are
	// (mergeWhole then copies nothing onto them), not copies.
	var own *Result
	if len(parts) == 1 && ids[0] && (!meshes || asIs || parts[0].res.Mesh == nil) {
		own = parts[0].res
	}
	out := &Result{Status: ownOr(own, func(r *Result) []Status { return r.Status }, n), Stiff: make([]bool, n), Switch: make([]int, n), switched: make([]bool, n)}
	for k := range parts {
		out.Engine = servedBy(out, parts[k].res)
	}
	if out.Status == nil {
		out.Status = make([]Status, n)
		for i := range out.Status {
			out.Status[i] = NotRun
		}
	}
	if has(func(r *Result) bool { return r.Y != nil }) { // (nil where Job.Omit left them out)
		if out.Y = ownOr(own, func(r *Result) []float64 { return r.Y }, n*d); out.Y == nil {
			out.Y = nanFill(make([]float64, n*d))
		}
	}
	if K > 0 && has(func(r *Result) bool { return len(r.Ys) > 0 }) {
		if out.Ys = ownOr(own, func(r *Result) []float64 { return r.Ys }, n*K*d); out.Ys == nil {
			out.Ys = nanFill(make([]float64, n*K*d)) // (an engine's record may return none)
		}
	}
	if has(func(r *Result) bool { return r.T != nil }) {
		if out.T = ownOr(own, func(r *Result) []float64 { return r.T }, n); out.T == nil {
			out.T = make([]float64, n)
			for i := range out.T {
				out.T[i] = q.T0
			}
		}
	}
	records := has(func(r *Result) bool { return r.Stats.Accepted != nil })
	if records {
		out.Stats = Stats{Accepted: ownOr(own, func(r *Result) []int { return r.Stats.Accepted }, n)}
		if out.Stats.Accepted == nil {
			out.Stats.Accepted = make([]int, n)
		}
		if has(func(r *Result) bool { return r.Stats.Rejected != nil }) {
			if out.Stats.Rejected = ownOr(own, func(r *Result) []int { return r.Stats.Rejected }, n); out.Stats.Rejected == nil {
				out.Stats.Rejected = make([]int, n)
			}
		}
		if has(func(r *Result) bool { return r.Stats.FieldEvals != nil }) {
			if out.Stats.FieldEvals = ownOr(own, func(r *Result) []int { return r.Stats.FieldEvals }, n); out.Stats.FieldEvals == nil {
				out.Stats.FieldEvals = make([]int, n)
			}
		}
	}
	if has(func(r *Result) bool { return r.LastH != nil }) {
		if out.LastH = ownOr(own, func(r *Result) []float64 { return r.LastH }, n); out.LastH == nil {
			out.LastH = make([]float64, n)
		}
	}
	if whole && op == OpGrad {
		out.GradY0, out.GradP = ownOr(own, func(r *Result) []float64 { return r.GradY0 }, n*d), ownOr(own, func(r *Result) []float64 { return r.GradP }, n*np)
		if out.GradY0 == nil {
			out.GradY0 = make([]float64, n*d)
		}
		if out.GradP == nil {
			out.GradP = make([]float64, n*np)
		}
		out.GradFinite = true
	}
	var lens []int
	if meshes {
		lens = make([]int, n)
	}
	for k := range parts {
		p := &parts[k]
		r := p.res
		if meshes && r.Mesh != nil && !asIs && (r.Mesh.Resident == nil || r.Mesh.Resident.Released()) {
			if err := toHost(r.Mesh); err != nil {
				// A part's steps that cannot be read: its trajectories
				// fail (the caller reports them).
				for _, i := range p.idx {
					out.Status[i] = NotRun
				}
				continue
			}
		}
		if ids[k] {
			// Every trajectory in order (a stiff ensemble that Method
			// Auto continued): the rows as blocks.
			mergeWhole(out, p, n, d, K, np, records, meshes, lens)
		} else {
			mergeRows(out, p, d, K, np, records, meshes, lens)
		}
		out.Stats.Wall += r.Stats.Wall
		out.RecordTime += r.RecordTime
		out.GradTime += r.GradTime
		out.StoredBytes = max(out.StoredBytes, r.StoredBytes)
		if whole {
			// The parts' sums, in part order; the first as it is (bit for
			// bit the part's, −0 included).
			if k == 0 {
				out.Loss = r.Loss
			} else {
				out.Loss += r.Loss
			}
			if op == OpGrad {
				if k == 0 {
					out.GradS = append(make([]float64, 0, ns), r.GradS...)
				} else {
					for c := range out.GradS {
						out.GradS[c] += r.GradS[c]
					}
				}
				out.GradFinite = out.GradFinite && r.GradFinite
			}
		}
	}
	if whole && op == OpGrad && out.GradS == nil {
		out.GradS = make([]float64, ns)
	}
	if meshes {
		out.Mesh = mergeMeshes(q, parts, lens, out, asIs)
	}
	return out
}

// mergeRows is mergeAuto's scatter of part p's rows to out, row by row,
// in tasks of rowTask rows on all cores (mergeWhole writes the same where
// they are every trajectory in order).
func mergeRows(out *Result, p *autoPart, d, K, np int, records, meshes bool, lens []int) {
	r := p.res
	par.Ranges(len(p.idx), rowTask, func(lo, hi int) {
		for kk := lo; kk < hi; kk++ {
			i, j := p.idx[kk], p.row(kk)
			if r.Status != nil {
				out.Status[i] = r.Status[j]
			} else {
				out.Status[i] = OK
			}
			if out.Y != nil && r.Y != nil {
				copy(out.Y[i*d:(i+1)*d], r.Y[j*d:(j+1)*d])
			}
			if out.Ys != nil && len(r.Ys) > 0 {
				copy(out.Ys[i*K*d:(i+1)*K*d], r.Ys[j*K*d:(j+1)*K*d])
			}
			if out.T != nil && r.T != nil {
				out.T[i] = r.T[j]
			}
			if records && r.Stats.Accepted != nil {
				out.Stats.Accepted[i] = r.Stats.Accepted[j]
				if out.Stats.Rejected != nil && r.Stats.Rejected != nil {
					out.Stats.Rejected[i] = r.Stats.Rejected[j]
				}
				if out.Stats.FieldEvals != nil && r.Stats.FieldEvals != nil {
					out.Stats.FieldEvals[i] = r.Stats.FieldEvals[j]
				}
			}
			if out.LastH != nil && r.LastH != nil {
				out.LastH[i] = r.LastH[j]
			}
			if meshes && r.Mesh != nil {
				lens[i] = r.Mesh.Len[j]
			}
			if p.stiff {
				out.switched[i] = true
				if p.switchAt != nil {
					out.Switch[i] = p.switchAt[kk]
				}
			} else if records {
				out.Switch[i] = r.Stats.Accepted[j]
			}
			if out.GradY0 != nil {
				copy(out.GradY0[i*d:(i+1)*d], r.GradY0[j*d:(j+1)*d])
				copy(out.GradP[i*np:(i+1)*np], r.GradP[j*np:(j+1)*np])
			}
		}
	})
	if len(r.LastY) == 0 {
		return
	}
	for kk, i := range p.idx {
		if y, ok := r.LastY[p.row(kk)]; ok {
			if out.LastY == nil {
				out.LastY = map[int][]float64{}
			}
			out.LastY[i] = y
		}
	}
}

// mergeWhole is mergeAuto's scatter of part p's rows to out where they
// are every trajectory in order (p.identity(n)): each array copied whole,
// as mergeRows writes them row by row.
func mergeWhole(out *Result, p *autoPart, n, d, K, np int, records, meshes bool, lens []int) {
	r := p.res
	if r.Status != nil {
		copyOver(out.Status, r.Status[:n])
	} else {
		for i := range out.Status {
			out.Status[i] = OK
		}
	}
	if out.Y != nil && r.Y != nil {
		copyOver(out.Y, r.Y[:n*d])
	}
	if out.Ys != nil && len(r.Ys) > 0 {
		copyOver(out.Ys, r.Ys[:n*K*d])
	}
	if out.T != nil && r.T != nil {
		copyOver(out.T, r.T[:n])
	}
	if records && r.Stats.Accepted != nil {
		copyOver(out.Stats.Accepted, r.Stats.Accepted[:n])
		if out.Stats.Rejected != nil && r.Stats.Rejected != nil {
			copyOver(out.Stats.Rejected, r.Stats.Rejected[:n])
		}
		if out.Stats.FieldEvals != nil && r.Stats.FieldEvals != nil {
			copyOver(out.Stats.FieldEvals, r.Stats.FieldEvals[:n])
		}
	}
	if out.LastH != nil && r.LastH != nil {
		copyOver(out.LastH, r.LastH[:n])
	}
	for i, y := range r.LastY {
		if i < n {
			if out.LastY == nil {
				out.LastY = map[int][]float64{}
			}
			out.LastY[i] = y
		}
	}
	if meshes && r.Mesh != nil {
		copy(lens, r.Mesh.Len[:n])
	}
	switch {
	case p.stiff:
		for i := range out.switched {
			out.switched[i] = true
		}
		if p.switchAt != nil {
			copy(out.Switch, p.switchAt[:n])
		}
	case records:
		copy(out.Switch, r.Stats.Accepted[:n])
	}
	if out.GradY0 != nil {
		copyOver(out.GradY0, r.GradY0[:n*d])
		copyOver(out.GradP, r.GradP[:n*np])
	}
}

// ownOr returns of(own)[:size] where own is not nil and that array holds
// size values, else nil: an array of a result that mergeAuto's output
// takes as it is.
func ownOr[T any](own *Result, of func(r *Result) []T, size int) []T {
	if own == nil {
		return nil
	}
	if x := of(own); len(x) >= size && x != nil {
		return x[:size]
	}
	return nil
}

// copyOver copies src to dst, unless they are the same array (mergeAuto's
// own part's).
func copyOver[T any](dst, src []T) {
	if len(dst) > 0 && len(src) > 0 && &dst[0] == &src[0] {
		return
	}
	copy(dst, src)
}

// mergeMeshes returns the mesh of all q.n trajectories from the parts'
// (on the host), trajectory i with lens[i] steps; asIs: the one part's
// mesh holds all q.n in order, its steps (on the host or resident) are
// the merged mesh's.
func mergeMeshes(q *problem, parts []autoPart, lens []int, out *Result, asIs bool) *Mesh {
	n := q.n
	m := &Mesh{N: n, Len: lens, Status: out.Status, Stats: out.Stats, T0: q.T0, T1: q.t1}
	m.Rows = longest(lens)
	if asIs {
		pm := parts[0].res.Mesh
		if pm.Resident != nil {
			m.Rows, m.Resident = pm.Rows, pm.Resident
			return m
		}
		if len(pm.H) >= m.Rows*n {
			m.H = pm.H[:m.Rows*n]
			return m
		}
	}
	// The parts' meshes, on the host but for the continued trajectories'
	// (autoSteps, resident): merged now if all are on the host, else
	// when the merged mesh is needed there (mergedSteps).
	ms := &mergedSteps{n: n, rows: m.Rows}
	for k := range parts {
		p := &parts[k]
		if pm := p.res.Mesh; pm != nil {
			ms.parts = append(ms.parts, autoPart{idx: p.idx, rows: p.rows, res: &Result{Mesh: pm}})
			if pm.Resident != nil {
				ms.resident = append(ms.resident, pm)
			}
		}
	}
	if len(ms.resident) > 0 {
		m.Resident = ms
		return m
	}
	m.H = make([]float64, m.Rows*n)
	ms.copyParts(m.H) // (no error on the host)
	return m
}

// autoMem is the engine memory of a Method Auto result passed back
// (Job.Reuse) that the next call's jobs and gathers write into instead
// of allocating their own (takeAutoMem): a GPU engine's device memory,
// none allocated a call in a loop that passes its Gradient back. Each
// field is nil where the result held none. A part that takes a field
// sets it to nil; release releases what none took.
type autoMem struct {
	pass  *Mesh         // the Tsit5 pass's mesh, of every trajectory (Job.Reuse of the pass)
	tsit  ResidentSteps // the finished trajectories' columns of it (replayPart)
	stops ResidentSteps // the continued trajectories' columns of it (stopSegs)
	rodas *Mesh         // the continued trajectories' Rodas5P steps (autoSegs.keep2)
	// host is the host arrays of the continuation's jobs (autoSpare,
	// autoSegs.spare): nothing to release.
	host *autoSpare
}

// any reports whether m holds some memory.
func (m *autoMem) any() bool {
	return m.pass != nil || m.tsit != nil || m.stops != nil || m.rodas != nil
}

// release releases the memory that no part took.
func (m *autoMem) release() {
	m.pass.Release()
	m.rodas.Release()
	for _, r := range []ResidentSteps{m.tsit, m.stops} {
		if r != nil {
			r.Release()
		}
	}
	*m = autoMem{}
}

// takeAutoMem returns the engine memory of m's steps where they are a
// continued gradient's, resident on the engine that recorded them: of a
// stiff ensemble's (autoSteps) the Tsit5 pass's mesh and the Rodas5P
// record's; of a mixed one's (mergedSteps: a part replayed with Tsit5,
// a part continued) the columns gathered for both parts, the Rodas5P
// record's mesh, and the pass's mesh where the merged mesh kept it
// (mergedSteps.spare) or where its Tsit5 part is the pass's rows
// (keptPart: the pass's mesh is that part's). m's steps are then marked
// released without releasing that memory, which is the caller's now.
// Else it returns no memory and m is as it was.
func takeAutoMem(m *Mesh) autoMem {
	switch s := m.Resident.(type) {
	case *autoSteps:
		if m1, m2, host := s.take(); m1 != nil {
			return autoMem{pass: m1, rodas: m2, host: host}
		}
	case *mergedSteps:
		return s.take()
	}
	return autoMem{}
}

// take returns the Tsit5 steps' and the Rodas5P steps' meshes, both
// resident, and the spare host arrays, and marks a released without
// releasing them; else nils.
func (a *autoSteps) take() (m1, m2 *Mesh, host *autoSpare) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.released || a.m1.Resident == nil || a.m1.Resident.Released() || a.m2.Resident == nil || a.m2.Resident.Released() {
		return nil, nil, nil
	}
	a.released = true
	host, a.spare = a.spare, nil
	return a.m1, a.m2, host
}

// take is takeAutoMem of merged steps of two parts, one with its steps
// resident (the Tsit5 part's gathered columns) and one continued
// (autoSteps), none released: their memory and the spare's, s then
// marked released without releasing it. Of another form it returns none.
func (s *mergedSteps) take() autoMem {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released || len(s.resident) != 2 {
		return autoMem{}
	}
	var tsit *Mesh
	var cont *autoSteps
	for _, pm := range s.resident {
		if a, ok := pm.Resident.(*autoSteps); ok && cont == nil {
			cont = a
		} else {
			tsit = pm
		}
	}
	if cont == nil || tsit == nil || tsit.Resident.Released() || s.spare != nil && s.spare.Resident.Released() {
		return autoMem{}
	}
	m1, m2, host := cont.take()
	if m1 == nil {
		return autoMem{}
	}
	s.released = true
	mem := autoMem{pass: s.spare, tsit: tsit.Resident, stops: m1.Resident, rodas: m2, host: host}
	if tsit.N == s.n && s.spare == nil {
		// The Tsit5 part is the pass's rows (keptPart): its mesh, of
		// every trajectory, is the next pass's to record into.
		mem.pass, mem.tsit = tsit, nil
	}
	s.resident, s.spare = nil, nil
	return mem
}

// contSteps returns the continued trajectories' steps that mesh m (nil:
// none) of a Method Auto result holds (autoSteps: m's own, or a part's of
// mergedSteps), or nil.
func contSteps(m *Mesh) *autoSteps {
	if m == nil {
		return nil
	}
	switch s := m.Resident.(type) {
	case *autoSteps:
		return s
	case *mergedSteps:
		for _, pm := range s.resident {
			if a, ok := pm.Resident.(*autoSteps); ok {
				return a
			}
		}
	}
	return nil
}

// lazyAuto reports whether m is a Method Auto mesh of this package whose
// steps are partly resident (autoSteps, mergedSteps).
func lazyAuto(m *Mesh) bool {
	switch m.Resident.(type) {
	case *autoSteps, *mergedSteps:
		return true
	}
	return false
}

// mergedSteps are the steps of Method Auto's mesh of all trajectories,
// merged from its parts' (mergeMeshes), while some of them are resident
// on the engine that recorded them (the continued trajectories' Rodas5P
// steps: autoSteps): CopyTo merges them, brought to the host, with the
// others. As autoSteps, no engine reads them in place.
type mergedSteps struct {
	n, rows  int
	parts    []autoPart // each part's trajectories (idx), its mesh's rows of them (rows) and its mesh (res.Mesh)
	resident []*Mesh    // the parts' meshes with resident steps
	// spare, if not nil, is the Tsit5 pass's mesh, resident, kept for the
	// first pass of a call given this mesh back (takeAutoMem).
	spare    *Mesh
	mu       sync.Mutex
	released bool
}

var _ ResidentSteps = (*mergedSteps)(nil)

// Engine returns the name of the engine that holds the resident steps.
func (s *mergedSteps) Engine() string { return s.resident[0].Resident.Engine() }

// Owner returns s itself: no engine's memory.
func (s *mergedSteps) Owner() any { return s }

// CopyTo writes the [Rows×N] steps to dst.
func (s *mergedSteps) CopyTo(dst []float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return fmt.Errorf("ode: mesh: Method Auto's steps were released")
	}
	return s.copyParts(dst)
}

// copyParts writes the parts' steps to dst [rows×n], zeros past them.
func (s *mergedSteps) copyParts(dst []float64) error {
	clear(dst[:s.rows*s.n])
	for k := range s.parts {
		p := &s.parts[k]
		pm := p.res.Mesh
		h := pm.H
		if pm.Resident != nil {
			h = make([]float64, pm.Rows*pm.N)
			if err := pm.Resident.CopyTo(h); err != nil {
				return err
			}
		} else if len(h) < pm.Rows*pm.N {
			continue
		}
		ln := make([]int, len(p.idx))
		for kk := range p.idx {
			ln[kk] = pm.Len[p.row(kk)]
		}
		(&stepCopy{dst: dst, dn: s.n, dcol: p.idx, src: h, sn: pm.N, scol: p.rows, lens: ln}).run()
	}
	return nil
}

// Release releases the parts' resident steps.
func (s *mergedSteps) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = true
	for _, m := range s.resident {
		m.Release()
	}
	s.spare.Release()
}

// Released reports whether Release was called, here or on some part's
// resident steps.
func (s *mergedSteps) Released() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return true
	}
	for _, m := range s.resident {
		if m.Resident.Released() {
			return true
		}
	}
	return false
}

func nanFill(x []float64) []float64 {
	for i := range x {
		x[i] = math.NaN()
	}
	return x
}

// errSwitchWithin is checkMesh's error for a mesh with a trajectory that
// switched methods partway on an engine that replays only whole
// trajectories of one method (one without per-trajectory start times:
// StartTimesExecutor).
func errSwitchWithin(engine string, i, s, l int) error {
	return fmt.Errorf("ode: mesh: trajectory %d switched from Tsit5 to Rodas5P at step %d of %d (Method Auto); "+
		"engine %s runs no per-trajectory start times, so it replays a Method Auto mesh only by whole trajectories of one method (Switch 0 or Len): "+
		"replay this mesh on the \"cpu\" engine or a GPU engine", i, s, l, engine)
}
