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
	shared, rtol, atol, maxSteps := r.shared, r.rtol, r.atol, r.maxSteps
	for i := 0; i < m; i++ {
		g := lo + i
		w.idx[i] = g
		w.t0s[i] = j.T0
		w.t1[i] = j.T1[g]
		for c := 0; c < d; c++ {
			w.y[c][i] = j.Y0[g*d+c]
		}
		for c := 0; c < np; c++ {
			w.p[c][i] = j.P[g*np+c]
		}
	}

	// The initial step: h, last and k1 = f(t0, y0).
	in := append(w.in[:0], w.t0s[:m], w.t1[:m])
	in = appendPrefix(in, w.y, m)
	in = appendPrefix(in, w.p, m)
	in = append(append(append(in, shared...), rtol...), atol...)
	out := append(w.out[:0], w.st[StateH][:m], w.st[StateLast][:m])
	out = appendPrefix(out, w.k1, m)
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
			v = j.T0
		case StateErrPrev:
			v = 1
		}
		for i := range w.st[k][:m] {
			w.st[k][i] = v
		}
	}

	w.rows = 0
	w.hbuf = w.hbuf[:0]
	keepMesh := r.keepMesh
	w.storing = r.keepStates
	stride := (1 + d) * width // one row of stored states
	ok := true
	for iter := 0; m > 0; iter++ {
		if iter&63 == 63 {
			if err := r.ctx.Err(); err != nil {
				return false, err
			}
		}
		// Trial step: y⁺, err (, k_s), hρ.
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
		if err := w.tri.Run(out, in, m); err != nil {
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
		// where its stiffness test fires.
		for i := m - 1; i >= 0; i-- {
			if w.stat[i] == StatusRunning {
				if !j.StopOnStiff || w.st[StateStiff][i] == 0 {
					continue
				}
				w.stat[i] = float64(Stiff)
			}
			g := w.idx[i]
			st := Status(w.stat[i])
			ok = ok && st == OK && (!j.StopOnStiff || w.st[StateStiff][i] == 0)
			w.finish(r, i, g, lo, width, st)
			m--
			w.move(m, i)
		}
	}
	if keepMesh {
		r.storeMesh(lo, width, w.hbuf, r.res.Stats.Accepted[lo:hi])
	}
	return ok, nil
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
	res.Stats.Rejected[g] = int(w.st[StateRejected][i])
	pl := w.ex.plan
	res.Stats.FieldEvals[g] = pl.InitEvals + pl.TrialEvals*(res.Stats.Accepted[g]+res.Stats.Rejected[g])
	res.Stiff[g] = w.st[StateStiff][i] != 0
	r.lastH[g] = w.hTried[i] // the step last tried
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
		r.lastYMu.Unlock()
	}
	for c := 0; c < d; c++ {
		v := w.y[c][i]
		if st != OK {
			v = math.NaN()
		}
		res.Y[g*d+c] = v
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
	for k := range w.st {
		w.st[k][to] = w.st[k][from]
	}
	w.t1[to] = w.t1[from]
	for _, x := range [][][]float64{w.y, w.k1, w.p} {
		for _, c := range x {
			c[to] = c[from]
		}
	}
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
