package ode

import (
	"math"

	"github.com/gradsolve-go/gradsolve/scan"
)

// appendPrefix appends the first m entries of each column of x to dst.
func appendPrefix(dst, x [][]float64, m int) [][]float64 {
	for _, c := range x {
		dst = append(dst, c[:m])
	}
	return dst
}

// sharedInputs returns the job's shared inputs as length-1 columns:
// Shared, then rtol, atol[d] and maxsteps.
func sharedInputs(j *Job) (shared, rtol, atol, maxSteps [][]float64) {
	shared = make([][]float64, len(j.Shared))
	for c := range shared {
		shared[c] = j.Shared[c : c+1]
	}
	rtol = [][]float64{{j.RelTol}}
	atol = make([][]float64, len(j.AbsTol))
	for c := range atol {
		atol[c] = j.AbsTol[c : c+1]
	}
	maxSteps = [][]float64{{float64(j.MaxSteps)}}
	return shared, rtol, atol, maxSteps
}

// record runs the adaptive loop of the plan over trajectories lo…hi-1:
// Init, then trial step and controller until every lane has finished,
// committing accepted steps (and storing the chunk's mesh rows and, for a
// gradient, its states) and compacting finished lanes away. It reports
// whether every trajectory ended OK (and, with Job.StopOnStiff, without
// firing the stiffness test: a lane then stops, with status Stiff, at the
// step where the test fires, so the refusal costs the steps up to there,
// not those of a whole solve at the stability limit).
func (w *cpuWorker) record(r *cpuRun, chunk, lo, hi int) (bool, error) {
	pl, j := w.ex.plan, r.job
	d, np := pl.Dim, pl.Params
	m, width := hi-lo, hi-lo
	ok := true
	shared, rtol, atol := r.shared, r.rtol, r.atol
	for i := 0; i < m; i++ {
		g := lo + i
		w.idx[i] = g
		w.cur[i] = 0
		w.t0s[i] = j.startTime(g)
		w.t1[i] = j.T1[g]
		for c := 0; c < d; c++ {
			w.y[c][i] = j.Y0[g*d+c]
		}
		for c := 0; c < np; c++ {
			w.p[c][i] = j.P[g*np+c]
		}
	}
	if r.probing {
		for c, v := range pl.ProbeStart {
			for i := range w.pv[c][:m] {
				w.pv[c][i] = v
			}
		}
		clear(w.pr[:m])
		for i := range w.pu[:m] {
			w.pu[i] = 1
		}
	}

	// The initial step: h, last and k1 = f(t0, y0).
	in := append(w.in[:0], w.t0s[:m], w.t1[:m])
	in = appendPrefix(in, w.y, m)
	in = appendPrefix(in, w.p, m)
	in = append(append(append(in, shared...), rtol...), atol...)
	out := append(w.out[:0], w.st[StateH][:m], w.st[StateLast][:m])
	out = appendPrefix(out, w.k1, m)
	w.in, w.out = in, out
	if err := w.init.Run(out, in, m); err != nil {
		return false, err
	}
	// The rest of the state: t0, no previous error (1), counts 0.
	for k := range w.st {
		var v float64
		switch k {
		case StateH, StateLast:
			continue // from Init
		case StateT:
			if j.T0s != nil {
				copy(w.st[k][:m], w.t0s[:m])
				continue
			}
			v = j.T0
		case StateErrPrev:
			v = 1
		}
		for i := range w.st[k][:m] {
			w.st[k][i] = v
		}
	}

	w.foldOnly = false
	if r.soaSaves {
		w.soaS, w.soaLo = rowStride(width), lo
		w.soaLim, w.soaOver, w.folding, w.resid, w.residData = 0, false, false, nil, nil
		if w.foldOnly = foldInPlace && r.fused != nil && r.fused.foldOnly; w.foldOnly {
			w.soa = nil // the sweep reads the saves from the result
		} else {
			w.soa = w.scratch(scrTaps, len(j.SaveAt)*d*w.soaS)
		}
		if r.fused != nil {
			if r.fused.data || r.fused.cots {
				w.resid, w.residData, w.residDD = r.fused, j.Loss.Data, j.Loss.DataDim
			}
			w.soaLim = r.fused.bound()
			if w.folding = r.fused.squares; w.folding {
				if cap(w.fold) < width {
					w.fold, w.foldK = make([]float64, width), make([]int, width)
				}
				w.fold, w.foldK = w.fold[:width], w.foldK[:width]
				clear(w.foldK)
			}
		}
	}
	if r.recordSaves {
		w.startSaves(r, m)
	}
	w.lo, w.sh = lo, shared
	if pl.Events != nil {
		// The conditions at the start; a lane where one is not finite or
		// exactly 0 ends here.
		if err := w.startEvents(r, m); err != nil {
			return false, err
		}
		for i := m - 1; i >= 0; i-- {
			if w.stat[i] == StatusRunning {
				continue
			}
			ok = false
			w.hTried[i] = w.st[StateH][i]
			w.finish(r, i, w.idx[i], lo, width, Status(w.stat[i]))
			m--
			w.move(m, i)
		}
	}

	w.rows = 0
	w.hbuf = w.hbuf[:0]
	w.storing = r.keepStates
	w.parked = 0
	stepped, err := w.steps(r, lo, width, m)
	if err != nil {
		return false, err
	}
	ok = ok && stepped
	if w.parked > 0 {
		// Method Auto: the lanes whose stiffness test fired go on with
		// the stiff plan from where they stopped.
		switched, err := w.switchParked(r, lo, width)
		if err != nil {
			return false, err
		}
		ok = ok && switched
	}
	if r.keepMesh {
		var marks [][]evMark
		if w.ev != nil && pl.Events != nil {
			marks = w.ev.marks
		}
		r.storeMesh(lo, width, w.hbuf, r.res.Stats.Accepted[lo:hi], marks)
	}
	return ok, nil
}

// steps runs the adaptive loop over the first m lanes of the chunk of
// width trajectories from lo, whose state (st, y, k1, p, t1, idx and the
// save cursors) is set, until every lane has finished; it reports
// whether all ended OK (see record). With Method Auto's switch (cpuRun's
// stiff plan), a lane of the explicit plan whose stiffness test fires is
// parked instead (see park) and does not count as a failure.
func (w *cpuWorker) steps(r *cpuRun, lo, width, m int) (bool, error) {
	pl, j := w.ex.plan, r.job
	d := pl.Dim
	ok := true
	shared, rtol, atol, maxSteps := r.shared, r.rtol, r.atol, r.maxSteps
	var in, out [][]float64
	keepMesh := r.keepMesh
	stride := (1 + d) * width // one row of stored states
	switching := j.stiff != nil && w.ex != j.stiff
	for iter := 0; m > 0; iter++ {
		if iter&63 == 63 {
			if err := r.ctx.Err(); err != nil {
				return false, err
			}
		}
		// Trial step: y⁺, err (, k_s), hρ (and the coefficients, when a
		// save time is inside a step).
		tri := w.tri
		dense := r.recordSaves && w.savesInside(j.SaveAt, m) || pl.Events != nil
		if dense {
			tri = w.trd
		}
		in = append(w.in[:0], w.st[StateT][:m], w.st[StateH][:m])
		in = appendPrefix(in, w.y, m)
		in = appendPrefix(in, w.p, m)
		in = append(in, shared...)
		out = appendPrefix(w.out[:0], w.yn, m)
		out = appendPrefix(out, w.e, m)
		if pl.FSAL {
			in = appendPrefix(in, w.k1, m)
			out = appendPrefix(out, w.ko, m)
		}
		out = append(out, w.hrho[:m])
		if dense {
			out = appendPrefix(out, w.wc, m)
		}
		w.in, w.out = in, out // the lists keep their capacity: 3d+1 outputs at d = 256 would allocate each step
		if err := tri.Run(out, in, m); err != nil {
			return false, err
		}
		// Controller: state', accept, status.
		in = w.in[:0]
		for k := range w.st {
			in = append(in, w.st[k][:m])
		}
		in = append(in, w.t1[:m])
		in = appendPrefix(in, w.y, m)
		in = appendPrefix(in, w.yn, m)
		in = appendPrefix(in, w.e, m)
		in = append(append(append(append(in, w.hrho[:m]), rtol...), atol...), maxSteps...)
		out = w.out[:0]
		for k := range w.st2 {
			out = append(out, w.st2[k][:m])
		}
		out = append(out, w.acc[:m], w.stat[:m])
		w.in, w.out = in, out
		if err := w.ctl.Run(out, in, m); err != nil {
			return false, err
		}
		// The stability probe (Job.CheckStability, Plan.Probe): every
		// lane tried iter steps before this one, so the trials it probes
		// are this iteration's; Method Auto's probe every trial.
		if r.probing && w.prb != nil && (pl.ProbeDue(iter) || switching || j.Continues) {
			if err := w.probe(r, m, j.StopOnStiff || switching); err != nil {
				return false, err
			}
		}
		// Events: an accepted step where a condition crosses becomes the
		// event step.
		if pl.Events != nil {
			if err := w.stepEvents(r, m); err != nil {
				return false, err
			}
		}
		// Commit the accepted steps: the mesh and the stored states first
		// (they need the state before the step), then the states
		// themselves, a component at a time so the loops stream.
		acc := w.acc[:m]
		if keepMesh || w.storing {
			for i, a := range acc {
				if a == 0 {
					continue
				}
				s, slot := int(w.st[StateAccepted][i]), w.idx[i]-lo
				if s >= w.rows {
					w.grow(r, s+1, width, stride)
				}
				if keepMesh {
					w.hbuf[s*width+slot] = w.st[StateH][i]
				}
				if w.storing {
					row := w.sbuf[s*stride:]
					row[slot] = w.st[StateT][i]
					for c := 0; c < d; c++ {
						row[(1+c)*width+slot] = w.y[c][i]
					}
				}
			}
		}
		if pl.Events != nil && len(w.ev.rows) > 0 {
			w.commitEventRows(r, width, stride)
		}
		if r.recordSaves {
			w.writeSaves(r, acc, dense)
		}
		for c := 0; c < d; c++ {
			commit(w.y[c][:m], w.yn[c][:m], acc)
			if pl.FSAL {
				commit(w.k1[c][:m], w.ko[c][:m], acc)
			}
		}
		// The new state into place, in the same arrays on every iteration
		// (the executors then reuse their layout of the slices), keeping
		// the step just tried for the messages of finished lanes.
		copy(w.hTried[:m], w.st[StateH][:m])
		for k := range w.st {
			copy(w.st[k][:m], w.st2[k][:m])
		}
		// Retire finished lanes, moving the last active lane into each.
		// With StopOnStiff a lane stops, with status Stiff, at the step
		// where its stiffness test fires; with Method Auto's switch it is
		// parked there, to go on with the stiff plan.
		for i := m - 1; i >= 0; i-- {
			if w.stat[i] == StatusRunning {
				if w.st[StateStiff][i] == 0 {
					continue
				}
				if switching {
					w.park(r, i)
					m--
					w.move(m, i)
					continue
				}
				if !j.StopOnStiff {
					continue
				}
				w.stat[i] = float64(Stiff)
			}
			g := w.idx[i]
			st := Status(w.stat[i])
			ok = ok && st == OK && (!j.StopOnStiff || switching || w.st[StateStiff][i] == 0)
			w.finish(r, i, g, lo, width, st)
			m--
			w.move(m, i)
		}
	}
	return ok, nil
}

// commitEventRows writes the steps of size 0 of coinciding events
// (eventWork.rows) to the chunk's mesh and stored states, as the commit
// writes an accepted step, and clears them.
func (w *cpuWorker) commitEventRows(r *cpuRun, width, stride int) {
	v := w.ev
	for _, x := range v.rows {
		if x.s >= w.rows {
			w.grow(r, x.s+1, width, stride)
		}
		if r.keepMesh {
			w.hbuf[x.s*width+x.slot] = 0
		}
		if w.storing {
			row := w.sbuf[x.s*stride:]
			row[x.slot] = x.t
			for c, yc := range x.y {
				row[(1+c)*width+x.slot] = yc
			}
		}
	}
	v.rows = v.rows[:0]
}

// grow makes room for rows up to most (exclusive) in the chunk's mesh and
// state buffers; stored states that would pass the worker's budget are
// dropped, and the gradient then replays the chunk instead.
func (w *cpuWorker) grow(r *cpuRun, most, width, stride int) {
	if most <= w.rows {
		return
	}
	rows := max(most, 2*w.rows, 16)
	if r.keepMesh {
		if cap(w.hbuf) < rows*width {
			h := make([]float64, rows*width)
			copy(h, w.hbuf[:w.rows*width])
			w.hbuf = h
		} else {
			w.hbuf = w.hbuf[:rows*width]
		}
	}
	if w.storing {
		if int64(rows*stride)*8 > r.stateBudget {
			w.storing = false
		} else if cap(w.sbuf) < rows*stride {
			s := make([]float64, rows*stride)
			copy(s, w.sbuf[:w.rows*stride])
			w.sbuf = s
		} else {
			w.sbuf = w.sbuf[:rows*stride]
		}
	}
	w.rows = rows
}

// finish writes the outcome of lane i (trajectory g) to the run's result.
func (w *cpuWorker) finish(r *cpuRun, i, g, lo, width int, st Status) {
	res, d := r.res, w.ex.plan.Dim
	res.Status[g] = st
	res.T[g] = w.st[StateT][i]
	res.Stats.Accepted[g] = int(w.st[StateAccepted][i])
	if res.Stats.Rejected != nil { // nil where Job.Omit leaves them out
		res.Stats.Rejected[g] = int(w.st[StateRejected][i])
		pl := w.ex.plan
		res.Stats.FieldEvals[g] = pl.InitEvals + pl.TrialEvals*(res.Stats.Accepted[g]+res.Stats.Rejected[g])
	}
	// With Method Auto's switch the stiffness test switches a lane
	// instead: no trajectory is left stiff.
	res.Stiff[g] = w.st[StateStiff][i] != 0 && r.job.stiff == nil
	if res.Switch != nil && w.ex != r.job.stiff {
		res.Switch[g] = res.Stats.Accepted[g] // did not switch
	}
	if st != OK {
		y := make([]float64, d)
		for c := range y {
			y[c] = w.y[c][i]
		}
		r.lastYMu.Lock()
		if res.LastY == nil {
			res.LastY = map[int][]float64{}
		}
		res.LastY[g] = y
		// The step last tried, for the failure's message (Result.LastH:
		// set for failed trajectories only, as the GPU engine does).
		if r.lastH == nil {
			r.lastH = make([]float64, r.job.N)
		}
		r.lastH[g] = w.hTried[i]
		if res.Stats.Rejected == nil {
			// Its count, for the failure's message (Job.Omit).
			if r.rejected == nil {
				r.rejected = make([]int, r.job.N)
			}
			r.rejected[g] = int(w.st[StateRejected][i])
		}
		r.lastYMu.Unlock()
	}
	for c := 0; c < d && res.Y != nil; c++ {
		v := w.y[c][i]
		if st != OK && st != Stiff { // (Job.StopOnStiff keeps the state)
			v = math.NaN()
		}
		res.Y[g*d+c] = v
	}
	if r.recordSaves {
		w.finishSaves(r, i, g, st)
	}
	if res.Events != nil {
		res.Events[g] = w.ev.count[g-lo]
	}
	slot := g - lo
	w.endT[slot] = w.st[StateT][i]
	for c := 0; c < d; c++ {
		w.endY[c*width+slot] = w.y[c][i]
	}
}

// move copies lane from into lane to (the carried per-lane arrays only).
func (w *cpuWorker) move(from, to int) {
	if from == to {
		return
	}
	w.idx[to] = w.idx[from]
	w.cur[to] = w.cur[from]
	if w.ev != nil && w.ex.plan.Events != nil {
		for _, g := range w.ev.g {
			g[to] = g[from]
		}
	}
	for k := range w.st {
		w.st[k][to] = w.st[k][from]
	}
	w.t1[to] = w.t1[from]
	for _, x := range [][][]float64{w.y, w.k1, w.p} {
		for _, c := range x {
			c[to] = c[from]
		}
	}
	if w.prb != nil {
		for _, c := range w.pv {
			c[to] = c[from]
		}
		w.pr[to], w.pu[to] = w.pr[from], w.pu[from]
	}
}

// probe runs the stability probe (Plan.Probe) on the first m lanes
// after the controller, at the state each trial started from, and marks
// the lanes where it fires stiff (state'[StateStiff] = 1). With veto (the
// lanes that the probe marks stop, Job.StopOnStiff, or switch to Method
// Auto's stiff plan) an accepted step where it fires is rejected instead:
// the lane stops at the state the step started from (see Plan.Probe).
func (w *cpuWorker) probe(r *cpuRun, m int, veto bool) error {
	in := append(w.in[:0], w.st[StateT][:m], w.st[StateH][:m])
	in = appendPrefix(in, w.y, m)
	in = appendPrefix(in, w.p, m)
	in = append(in, r.shared...)
	in = appendPrefix(in, w.pv, m)
	in = append(in, w.pr[:m], w.pu[:m], w.acc[:m])
	out := appendPrefix(w.out[:0], w.pw, m)
	out = append(out, w.pr2[:m], w.pu2[:m], w.pst[:m])
	w.in, w.out = in, out
	if err := w.prb.Run(out, in, m); err != nil {
		return err
	}
	w.pv, w.pw = w.pw, w.pv
	w.pr, w.pr2 = w.pr2, w.pr
	w.pu, w.pu2 = w.pu2, w.pu
	for i, s := range w.pst[:m] {
		if s == 0 {
			continue
		}
		w.st2[StateStiff][i] = 1
		if !veto || w.acc[i] == 0 {
			continue
		}
		// The lane stops (or switches) here: before the step that the
		// probe found outside the stability region, which counts as
		// rejected, so that the mesh holds no such step (Method Auto's
		// stiff plan takes it instead).
		w.acc[i] = 0
		for k := range w.st2 {
			w.st2[k][i] = w.st[k][i]
		}
		w.st2[StateRejected][i] = w.st[StateRejected][i] + 1
		w.st2[StateStiff][i] = 1
		if w.stat[i] == float64(OK) {
			w.stat[i] = StatusRunning
		}
	}
	return nil
}

// storedStates returns the chunk's stored states for scan, or nil if they
// were not kept.
func (w *cpuWorker) storedStates(width int) *scan.Stored {
	if !w.storing {
		return nil
	}
	d := w.ex.plan.Dim
	return &scan.Stored{States: w.sbuf[:w.rows*(1+d)*width], EndT: w.endT[:width], EndY: w.endY[:d*width]}
}

// commit sets dst[i] = src[i] where accept[i] != 0.
func commit(dst, src, accept []float64) {
	src = src[:len(dst)]
	accept = accept[:len(dst)]
	for i := range dst {
		if accept[i] != 0 {
			dst[i] = src[i]
		}
	}
}

// Save times read as the record steps (cpuRun.recordSaves), by the rule
// of scan.Saves: τ ≤ T0 is y0; τ with t ≤ τ < t + h on an accepted step
// from (t, y) of size h is y + Σ_j θ^j·w_j at θ = (τ − t)/h (y itself at
// θ = 0), its coefficients w from TrialDense; τ at or after the end is
// the final state. Each lane keeps a cursor into Job.SaveAt (cur), so a
// step costs O(1) bookkeeping plus its save times' interpolation, and the
// values go straight to the result, trajectory-major.

// startSaves writes the saves from each lane's cursor at or before its
// start time t0s (the initial states; a lane that Method Auto switched
// starts where its explicit steps ended) of the first m lanes and sets
// their cursors past them.
func (w *cpuWorker) startSaves(r *cpuRun, m int) {
	j, d := r.job, w.ex.plan.Dim
	ts, K := j.SaveAt, len(j.SaveAt)
	for i := 0; i < m; i++ {
		c := w.cur[i]
		for c < K && ts[c] <= w.t0s[i] {
			o := r.res.Ys[(w.idx[i]*K+c)*d:]
			for x := 0; x < d; x++ {
				o[x] = w.y[x][i]
			}
			w.soaPut(w.idx[i], c, o[:d])
			c++
		}
		w.cur[i] = c
	}
}

// savesInside reports whether one of the first m lanes has a save time
// inside the step it is about to try (t < τ < t + h).
func (w *cpuWorker) savesInside(ts []float64, m int) bool {
	t, h := w.st[StateT][:m], w.st[StateH][:m]
	for i, c := range w.cur[:m] {
		for c < len(ts) && ts[c] <= t[i] {
			c++
		}
		if c < len(ts) && ts[c] < t[i]+h[i] {
			return true
		}
	}
	return false
}

// writeSaves writes the saves on the accepted steps of the lanes (acc)
// from their states before the step and, with dense, the step's
// coefficients, and advances the cursors.
func (w *cpuWorker) writeSaves(r *cpuRun, acc []float64, dense bool) {
	j, pl := r.job, w.ex.plan
	d := pl.Dim
	ts, K := j.SaveAt, len(j.SaveAt)
	t, h := w.st[StateT], w.st[StateH]
	// Each lane's save times on this step, [cur, end); where most lanes
	// have some (many save times), their states and coefficients are
	// gathered into rows a column at a time first (rows), rather than
	// lane by lane from Dim + Terms·Dim columns at once.
	m := len(acc)
	if cap(w.saveEnd) < m {
		w.saveEnd = make([]int, m)
	}
	end := w.saveEnd[:m]
	with := 0
	for i, a := range acc {
		e := w.cur[i]
		if a != 0 {
			for next := t[i] + h[i]; e < K && ts[e] < next; {
				e++
			}
			if e != w.cur[i] {
				with++
			}
		}
		end[i] = e
	}
	if with == 0 {
		return
	}
	nc := d
	if dense {
		nc += len(w.wc)
	}
	var rows []float64
	if 2*with >= m && m >= saveRowsFrom {
		if cap(w.saveRows) < m*nc {
			w.saveRows = make([]float64, m*nc)
		}
		rows = w.saveRows[:m*nc]
		scan.GatherRows(rows, nc, m, w.y[:d])
		if dense {
			scan.GatherRows(rows[d:], nc, m, w.wc)
		}
	}
	lane := w.lane // y, then the coefficients w
	for i := range acc {
		c, e := w.cur[i], end[i]
		if c == e {
			continue
		}
		w.cur[i] = e
		var y, coef []float64
		if rows != nil {
			y, coef = rows[i*nc:i*nc+d], rows[i*nc+d:(i+1)*nc]
		} else {
			y, coef = lane[:d], lane[d:]
			for x := range y {
				y[x] = w.y[x][i]
			}
			if dense {
				for x, col := range w.wc {
					coef[x] = col[i]
				}
			}
		}
		ti := t[i]
		all := r.res.Ys[(w.idx[i]*K+c)*d : (w.idx[i]*K+e)*d]
		c0, out := c, all
		for ; c < e && ts[c] <= ti; c++ { // at the step's start: its state
			copy(out[:d], y)
			out = out[d:]
		}
		if c < e {
			if !dense {
				panic("ode: internal error: a save time inside a step without its coefficients")
			}
			scan.InterpTimes(out, y, coef, ts[c:e], ti, h[i])
		}
		w.soaPut(w.idx[i], c0, all)
	}
}

// saveRowsFrom is the fewest lanes whose states and coefficients
// writeSaves gathers into rows first.
const saveRowsFrom = 64

// soaPut copies the saves vals ([n][d], from save k on) of trajectory g
// to the chunk's saves by save time (cpuRun.soaSaves), if it keeps them,
// and with a fused loss checks them against its bound (soaLim) or folds
// them (without the copy where foldOnly).
func (w *cpuWorker) soaPut(g, k int, vals []float64) {
	if w.soa == nil && !w.foldOnly {
		return
	}
	fl := w.resid
	if fl != nil && !fl.cots {
		// A data loss (lossfuse.go): the copy holds the residuals, the
		// sweep's cotangents (scaled) and the fold's operands.
		vals = w.residuals(fl, g, k, vals)
	}
	switch lim := w.soaLim; {
	case fl != nil && fl.cots:
		// The copy holds the cotangents, and the loss is folded beside.
		vals = w.cotFold(fl, g, k, vals)
	case w.folding:
		// The loss folded here, where the saves are in cache, save time
		// by save time in order (lossfuse.go). Its sum of squares is
		// finite only where every 2·x is: it stands for the bound.
		x := g - w.soaLo
		if w.foldK[x] != k {
			w.soaOver = true
		}
		w.fold[x] = squaresFrom(w.fold[x], vals, k == 0)
		w.foldK[x] = k + len(vals)/w.ex.plan.Dim
	case lim != 0 && !w.soaOver:
		for _, v := range vals {
			if !(math.Abs(v) <= lim) {
				w.soaOver = true
				break
			}
		}
	}
	if w.foldOnly {
		return // (no copy: see fusedLoss.foldOnly)
	}
	d, stride := w.ex.plan.Dim, w.soaS
	scan.ScatterCol(w.soa[k*d*stride+g-w.soaLo:], stride, vals)
}

// residuals returns the residuals of the saves vals ([n][d], from save
// k on) of trajectory g against the data of the fused data loss fl
// (save − data, or data − save where fl.dataSub), rounded as the loss
// program's Sub, in a buffer of w's.
func (w *cpuWorker) residuals(fl *fusedLoss, g, k int, vals []float64) []float64 {
	d := len(fl.dataOff)
	if cap(w.residBuf) < len(vals) {
		w.residBuf = make([]float64, len(vals))
	}
	res := w.residBuf[:len(vals)]
	row := w.residData[g*w.residDD : (g+1)*w.residDD]
	if fl.dataRow {
		e := row[fl.dataOff[0]+k*d:][:len(vals)]
		if fl.dataSub {
			for i, x := range vals {
				res[i] = e[i] - x
			}
		} else {
			for i, x := range vals {
				res[i] = x - e[i]
			}
		}
		return res
	}
	for s := 0; s < len(vals)/d; s++ {
		x, r := vals[s*d:(s+1)*d], res[s*d:(s+1)*d]
		for c := range x {
			e := row[fl.dataOff[c]+fl.dataStep[c]*(k+s)]
			if fl.dataSub {
				r[c] = e - x[c]
			} else {
				r[c] = x[c] - e
			}
		}
	}
	return res
}

// cotFold returns the cotangents of the saves vals ([n][d], from save k
// on) of trajectory g for the fused loss fl with fl.cots (lossfuse.go),
// each product rounded in the loss program's order, in a buffer of w's,
// and folds the lane's loss over them in save order (fl.foldW's weights
// of the squares, from save time 0's first); a cotangent that is not
// finite, or saves not folded in order, send the chunk to the old path.
func (w *cpuWorker) cotFold(fl *fusedLoss, g, k int, vals []float64) []float64 {
	d := len(fl.foldW)
	if cap(w.residBuf) < len(vals) {
		w.residBuf = make([]float64, len(vals))
	}
	res := w.residBuf[:len(vals)]
	x := g - w.soaLo
	if w.foldK[x] != k {
		w.soaOver = true
	}
	acc := w.fold[x]
	if fl.data {
		vals = w.residuals(fl, g, k, vals) // (into res: the same buffer)
	}
	m1, m2, fw := fl.m1[:d], fl.m2[:d], fl.foldW[:d]
	over := false
	for s := 0; s < len(vals)/d; s++ {
		r, y := vals[s*d:][:d], res[s*d:][:d]
		for c, x := range r {
			if t := float64(float64(x*x) * fw[c]); k+s == 0 && c == 0 {
				acc = t
			} else {
				acc += t
			}
			v := float64(float64(x*m1[c]) * m2[c])
			over = over || !(math.Abs(v) <= math.MaxFloat64)
			y[c] = v
		}
	}
	if over {
		w.soaOver = true
	}
	w.fold[x], w.foldK[x] = acc, k+len(vals)/d
	return res
}

// finishSaves writes the saves of finished lane i (trajectory g) at or
// after its end: its final state if it ended OK, else NaN for every save
// time (Solve's saved states of a failed trajectory); NaN too for save
// times after a terminal event (see Event).
func (w *cpuWorker) finishSaves(r *cpuRun, i, g int, st Status) {
	d, K := w.ex.plan.Dim, len(r.job.SaveAt)
	from := w.cur[i]
	if st != OK && st != Stiff { // (Job.StopOnStiff keeps the saves before the stop)
		from = 0
	}
	// Past a terminal event there is no state (see Event).
	end, terminal := w.st[StateT][i], w.endsAtTerminal(g-w.lo, int(w.st[StateAccepted][i])-1)
	for k := from; k < K; k++ {
		o := r.res.Ys[(g*K+k)*d : (g*K+k+1)*d]
		for x := range o {
			if st == OK && !(terminal && r.job.SaveAt[k] > end) {
				o[x] = w.y[x][i]
			} else {
				o[x] = math.NaN()
			}
		}
	}
	if from < K {
		w.soaPut(g, from, r.res.Ys[(g*K+from)*d:(g*K+K)*d])
	}
}

// Method Auto's switch on the CPU engine (Job.stiff): a lane of the
// explicit plan whose stiffness test fires on an accepted step is parked
// there (park), with its time, state, counts and save cursor; when the
// chunk's explicit lanes have all finished, switchParked runs the parked
// lanes on with the stiff plan's executors (the worker's alt workspace),
// from their own times and states, into the same mesh rows and stored
// states: trajectory g's steps from Result.Switch[g] on are the stiff
// plan's.

// park sets lane i aside for the stiff plan (see switchParked).
func (w *cpuWorker) park(r *cpuRun, i int) {
	k, pk := w.parked, &w.pk
	w.parked++
	g := w.idx[i]
	pk.idx[k], pk.cur[k], pk.t[k] = g, w.cur[i], w.st[StateT][i]
	pk.acc[k], pk.rej[k] = w.st[StateAccepted][i], w.st[StateRejected][i]
	for c := range w.y {
		pk.y[c][k] = w.y[c][i]
	}
	r.res.Switch[g], r.res.switched[g] = int(pk.acc[k]), true
}

// switchParked runs the parked lanes of the chunk of width trajectories
// from lo to their ends with the stiff plan (Job.stiff), each from the
// time and state where it was parked: Init there (a new first step and
// f), the controller's state fresh but for its counts, which go on (so
// MaxSteps counts the attempts of both plans, and the accepted count
// indexes the mesh rows). It reports whether every lane ended OK, and
// sets their field evaluations to those of both plans.
func (w *cpuWorker) switchParked(r *cpuRun, lo, width int) (bool, error) {
	j := r.job
	a := w.alt
	if a == nil || a.ex != j.stiff {
		a = &cpuWorker{ex: j.stiff}
		w.alt = a
	}
	a.size(w.cap)
	// The chunk's mesh rows and stored states go on in the same buffers.
	a.hbuf, a.sbuf, a.rows, a.storing = w.hbuf, w.sbuf, w.rows, w.storing
	a.endT, a.endY = w.endT, w.endY
	a.lo, a.sh = lo, r.shared
	pl := a.ex.plan
	d, np := pl.Dim, pl.Params
	m, pk := w.parked, &w.pk
	for k := 0; k < m; k++ {
		g := pk.idx[k]
		a.idx[k], a.cur[k], a.t0s[k], a.t1[k] = g, pk.cur[k], pk.t[k], j.T1[g]
		for c := 0; c < d; c++ {
			a.y[c][k] = pk.y[c][k]
		}
		for c := 0; c < np; c++ {
			a.p[c][k] = j.P[g*np+c]
		}
	}
	in := append(a.in[:0], a.t0s[:m], a.t1[:m])
	in = appendPrefix(in, a.y, m)
	in = appendPrefix(in, a.p, m)
	in = append(append(append(in, r.shared...), r.rtol...), r.atol...)
	out := append(a.out[:0], a.st[StateH][:m], a.st[StateLast][:m])
	out = appendPrefix(out, a.k1, m)
	a.in, a.out = in, out
	if err := a.init.Run(out, in, m); err != nil {
		return false, err
	}
	for k := range a.st {
		x := a.st[k][:m]
		switch k {
		case StateH, StateLast:
		case StateT:
			copy(x, a.t0s[:m])
		case StateErrPrev:
			for i := range x {
				x[i] = 1
			}
		case StateAccepted:
			copy(x, pk.acc[:m])
		case StateRejected:
			copy(x, pk.rej[:m])
		default:
			clear(x)
		}
	}
	if r.recordSaves {
		a.startSaves(r, m)
	}
	ok, err := a.steps(r, lo, width, m)
	w.hbuf, w.sbuf, w.rows, w.storing = a.hbuf, a.sbuf, a.rows, a.storing
	if err != nil {
		return false, err
	}
	p1, st := w.ex.plan, &r.res.Stats
	for k := 0; k < m && st.FieldEvals != nil; k++ {
		g := pk.idx[k]
		n1 := int(pk.acc[k] + pk.rej[k])
		n2 := st.Accepted[g] + st.Rejected[g] - n1
		st.FieldEvals[g] = p1.InitEvals + p1.TrialEvals*n1 + pl.InitEvals + pl.TrialEvals*n2
	}
	return ok, nil
}
