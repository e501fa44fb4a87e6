package ode

import (
	"errors"
	"fmt"

	"gonum.org/v1/gonum/floats"

	"github.com/gradsolve-go/gradsolve/internal/finite"
	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// replay runs the chunk lo…hi-1 over its mesh: h holds the mesh rows with
// stride (trajectory i of the chunk, step s at h[s*stride+i-lo]) and lens
// the chunk's step counts. With the run's op it fills the saved states
// (OpSolve), the final and saved states (OpReplay), the loss terms (OpLoss)
// or the loss terms and the gradient (OpGrad). For a gradient after a
// record, the recorder's stored states replace the forward sweep.
//
// sw, if not nil, is the chunk's Mesh.Switch: trajectory i's steps from
// sw[i] on are the stiff plan's (Job.stiff). A chunk with a switched
// trajectory is two scans (replaySwitched).
func (w *cpuWorker) replay(r *cpuRun, lo, hi int, h []float64, stride int, lens, sw []int) error {
	for i, s := range sw {
		if s < lens[i] {
			return w.replaySwitched(r, lo, hi, h, stride, lens, sw)
		}
	}
	ex, pl, j, res := w.ex, w.ex.plan, r.job, r.res
	d := pl.Dim
	width := hi - lo
	if err := w.stepClone(ex); err != nil {
		return err
	}
	q := w.chunkProblem(j, lo, hi, w.chunkMesh(h, stride, width, lens, nil, scrMesh))
	// The saved states go straight into the result, trajectory-major:
	// trajectory lo+i's save time k at (i*K+k)*d in the chunk's rows
	// (already there when the record wrote them).
	K := len(j.SaveAt)
	ys := res.Ys[lo*K*d : hi*K*d]
	w.taps = w.setSaves(r, q, pl, &w.saves, w.taps, ys, nil)
	set := &scan.Settings{Checkpoint: j.Checkpoint, MemoryLimit: max(1, r.stateBudget)}

	var sw1 *scan.Sweep
	var out *scan.Result
	if j.Op == OpGrad {
		if j.Mesh == nil {
			q.Stored = w.storedStates(width)
		}
		var err error
		if sw1, err = scan.ForwardTo(w.sweep, q, set); err != nil {
			return err
		}
		w.sweep = sw1
		out = sw1.Result()
	} else {
		var err error
		if out, err = scan.Replay(nil, q, set); err != nil {
			return err
		}
	}
	if (j.Op == OpReplay || j.Op == OpLoss || j.Op == OpGrad) && res.Y != nil { // nil: Job.Omit
		fromSoA(res.Y[lo*d:hi*d], out.Y, width, d)
	}
	if j.Op != OpLoss && j.Op != OpGrad {
		return nil
	}
	// The saves' cotangents stay where the loss wrote them, [K·d] rows
	// of width values, bs apart, and the backward sweep reads them so,
	// scaled as it reads them.
	major := q.Saves != nil
	bs := width
	if major {
		bs = rowStride(width)
	}
	// A fused loss (lossfuse.go): the sweep reads the record's copy of
	// the saves as their cotangents, and the loss runs the rest.
	var fl *fusedLoss
	if j.Op == OpGrad && major && (w.soa != nil && w.soaS == bs || w.foldOnly) && !w.soaOver && (!w.folding || w.foldedAll(K, width)) {
		fl = r.fused
	}
	lbuf, err := w.lossRun(r, lo, hi, out.Y, ys, q.P, bs, fl)
	if err != nil && fl != nil {
		// The old path's error, naming the gradient program's value.
		fl = nil
		lbuf, err = w.lossRun(r, lo, hi, out.Y, ys, q.P, bs, nil)
	}
	if err != nil || j.Op != OpGrad {
		return err
	}
	var ybar, tapbar, gp0, gs0 []float64
	switch {
	case fl != nil:
		if w.foldOnly {
			// No copy: the saves where the record wrote them, ys.
			q.Saves.BarMajor, q.Saves.BarStride, tapbar = false, 0, ys
		} else {
			q.Saves.BarMajor, q.Saves.BarStride, tapbar = true, bs, w.soa[:K*d*bs]
		}
		q.Saves.BarScale, _ = fl.barScale(j.Loss.Scale)
		ybar, gp0, gs0 = w.restCotangents(r, lbuf, width)
	case major:
		q.Saves.BarMajor, q.Saves.BarScale, q.Saves.BarStride = true, j.Loss.Scale, bs
		fallthrough
	default:
		ybar, tapbar, gp0, gs0 = w.cotangents(r, lbuf, width, bs, major)
	}
	g, err := sw1.BackwardFrom(w.grad, ybar, tapbar, gp0, gs0)
	if err != nil {
		return err
	}
	r.peak(sw1.StoredBytes())
	w.grad = g
	w.writeGrad(r, lo, hi, g)
	return nil
}

// stepClone makes the worker's clone of ex's replay step (ex is the
// worker's executor, or its alt's).
func (w *cpuWorker) stepClone(ex *cpuExec) error {
	if w.step != nil {
		return nil
	}
	master, err := ex.stepMaster()
	if err != nil {
		return err
	}
	w.step, err = master.Clone(nil, w.cap, 1)
	return err
}

// chunkMesh returns the chunk's mesh of width trajectories with lens
// steps from h (stride apart), trajectory i's starting at its step
// from[i] (0 if from is nil): h itself where it is laid out so, else a
// copy in scratch k.
func (w *cpuWorker) chunkMesh(h []float64, stride, width int, lens, from []int, k int) scan.Mesh {
	rows := 0
	for _, l := range lens {
		rows = max(rows, l)
	}
	mesh := scan.Mesh{N: width, Rows: rows, Len: lens}
	switch {
	case from != nil:
		mesh.H = w.scratch(k, rows*width)
		for i, l := range lens {
			for s := 0; s < l; s++ {
				mesh.H[s*width+i] = h[(from[i]+s)*stride+i]
			}
		}
	case stride == width:
		mesh.H = h[:rows*width]
	default:
		mesh.H = w.scratch(k, rows*width)
		for s := 0; s < rows; s++ {
			copy(mesh.H[s*width:(s+1)*width], h[s*stride:s*stride+width])
		}
	}
	return mesh
}

// setSaves gives scan problem q (of plan pl) the job's save times,
// written to ys ([width][K][d]): interpolated (sv) where the plan has a
// dense step, else re-stepped (taps, reused and returned), each
// trajectory from its start time q.T0 (t0s: nil if they are all T0).
func (w *cpuWorker) setSaves(r *cpuRun, q *scan.Problem, pl *Plan, sv *scan.Saves, taps *scan.Taps, ys, t0s []float64) *scan.Taps {
	j := r.job
	switch {
	case len(j.SaveAt) == 0:
	case pl.DenseStep != nil:
		*sv = scan.Saves{Times: j.SaveAt, Out: ys, Given: r.recordSaves}
		q.Saves = sv
	default:
		if t0s == nil && j.T0s != nil {
			t0s = q.T0 // the trajectories' own start times (Job.T0s)
		}
		taps = stepTaps(taps, q.Mesh, j.T0, t0s, j.SaveAt)
		taps.TapMajor, taps.Out = true, ys
		q.Taps = taps
	}
	return taps
}

// lossRun runs the loss's term (OpLoss) or gradient (OpGrad) program on
// the chunk lo…hi-1 from its final states y [d][width], saved states ys
// [width][K·d] and parameters p [np][width], stores the terms and returns
// the outputs, one row of width values each, one after the other, except
// that the gradient's K·d rows of the saves' cotangents are bs apart (bs
// ≥ width; see cotangents). With a fused loss fl (OpGrad only) it runs
// fl's rest, which has no rows of the saves' cotangents.
func (w *cpuWorker) lossRun(r *cpuRun, lo, hi int, y, ys, p []float64, bs int, fl *fusedLoss) ([]float64, error) {
	pl, j := w.ex.plan, r.job
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	width := hi - lo
	K := len(j.SaveAt)
	lp := j.Loss
	prog, key := lp.Term, lp.Hash
	folded := fl != nil && w.folding
	switch {
	case folded:
		prog, key = fl.foldRest, key+".foldrest"
	case fl != nil:
		prog, key = fl.rest, key+".rest"
	case j.Op == OpGrad:
		prog, key = lp.Grad, key+".grad"
	}
	le, err := w.lossExec(key, prog)
	if err != nil {
		return nil, err
	}
	in := w.in[:0]
	for c := 0; c < d; c++ {
		in = append(in, y[c*width:(c+1)*width])
	}
	// The saved states by save time, K·d rows of width values: as the
	// record wrote them (cpuRun.soaSaves, rows rowStride(width) apart),
	// else transposed from ys (and where the record wrote a fused data
	// loss's residuals there, but the loss runs the old path).
	ysoa, stride := w.soa, w.soaS
	switch {
	case folded && w.foldOnly:
		// The fold's rest reads no saved state (fusedLoss.foldOnly):
		// every row a row of zeros.
		ysoa, stride = w.scratch(scrZero, width), 0
		clear(ysoa)
	case ysoa == nil || w.resid != nil && fl == nil:
		ysoa, stride = toSoA(w.scratch(scrTaps, K*d*width), ys, width, K*d), width
	}
	for x := 0; x < K*d; x++ {
		in = append(in, ysoa[x*stride:x*stride+width])
	}
	switch {
	case lp.DataDim > 0 && folded && fl.dataRead != nil:
		// Only the columns the fold's rest and end read (a data loss's
		// residuals were folded by the record); zeros for the others.
		data, zero := w.scratch(scrData, width*lp.DataDim), w.scratch(scrZero, width)
		clear(zero)
		for c, read := range fl.dataRead {
			if !read {
				in = append(in, zero)
				continue
			}
			col := data[c*width : (c+1)*width]
			for i := range col {
				col[i] = lp.Data[(lo+i)*lp.DataDim+c]
			}
			in = append(in, col)
		}
	case lp.DataDim > 0:
		data := toSoA(w.scratch(scrData, width*lp.DataDim), lp.Data[lo*lp.DataDim:hi*lp.DataDim], width, lp.DataDim)
		for c := 0; c < lp.DataDim; c++ {
			in = append(in, data[c*width:(c+1)*width])
		}
	}
	for c := 0; c < np; c++ {
		in = append(in, p[c*width:(c+1)*width])
	}
	for c := 0; c < ns; c++ {
		in = append(in, j.Shared[c:c+1])
	}
	// The loss's outputs in one block: ℓ, then its cotangents, which the
	// gradient scales in place; the saves' rows bs apart.
	nbar := 0
	if j.Op == OpGrad && fl == nil {
		nbar = K * d
	}
	nout := len(prog.Outputs)
	if folded {
		nout++ // ℓ, folded by the record
	}
	lbuf := w.scratch(scrLoss, nout*width+nbar*(bs-width))
	lout := w.out[:0]
	for i, off := 0, 0; i < nout; i++ {
		lout = append(lout, lbuf[off:off+width])
		if i > d && i <= d+nbar {
			off += bs
		} else {
			off += width
		}
	}
	w.in, w.out = in, lout
	run := lout
	if folded {
		if finite.First(w.fold) >= 0 {
			return nil, errFoldNotFinite
		}
		if err := w.foldEnd(lp, fl, lout[0], in, width); err != nil {
			return nil, err
		}
		run = lout[1:]
	}
	if err := le.Run(run, in, width); err != nil {
		var nf *tape.NonFiniteError
		if errors.As(err, &nf) {
			nf.Trajectory += lo // the chunk's lane to the ensemble's trajectory
		}
		return nil, fmt.Errorf("ode: %s: %w", lp.Label(), err)
	}
	copy(r.lossTerms[lo:hi], lout[0])
	return lbuf, nil
}

// errFoldNotFinite is lossRun's error for a loss folded by the record
// (lossfuse.go) that is not finite: replay then runs the old path, which
// reports it.
var errFoldNotFinite = errors.New("ode: internal error: a folded loss is not finite")

// foldEnd writes ℓ of the chunk's width lanes to dst from the sums the
// record folded (cpuWorker.fold) with fl's end, given the inputs in of
// the loss's gradient program (see lossRun): the sums themselves where
// ℓ is the sum (fl.end nil).
func (w *cpuWorker) foldEnd(lp *LossPlan, fl *fusedLoss, dst []float64, in [][]float64, width int) error {
	if fl.end == nil {
		copy(dst, w.fold)
		return nil
	}
	le, err := w.lossExec(lp.Hash+".foldend", fl.end)
	if err != nil {
		return err
	}
	ns := w.ex.plan.Shared
	ein := append(w.endIn[:0], w.fold)
	for _, f := range fl.endFrom {
		ein = append(ein, in[f.In0])
	}
	ein = append(ein, in[len(in)-ns:]...)
	w.endIn = ein
	return le.Run([][]float64{dst}, ein, width)
}

// foldedAll reports whether the record folded the loss of every lane of
// the chunk of width lanes over its K save times (cpuWorker.folding).
func (w *cpuWorker) foldedAll(K, width int) bool {
	if !w.folding || len(w.foldK) != width {
		return false
	}
	for _, k := range w.foldK {
		if k != K {
			return false
		}
	}
	return true
}

// cotangents scales the loss gradient's outputs lbuf (laid out as lossRun
// says, the saves' rows bs apart) in place and returns them as the
// backward sweep takes them: ∂L/∂y(t1) [d][width], ∂L/∂p [np][width] and
// the loss's own shared-gradient terms [ns][width] are ranges of lbuf;
// the saved states' too, K·d rows bs apart, with major (the sweep reads
// them so, and scales them as it reads them: see scan.Saves.BarMajor and
// BarStride), else they go to the saves' layout [width][K·d], scaled as
// they are transposed (a scale of 1 is skipped: x·1 = x; bs must then be
// width).
func (w *cpuWorker) cotangents(r *cpuRun, lbuf []float64, width, bs int, major bool) (ybar, tapbar, gp0, gs0 []float64) {
	pl, lp := w.ex.plan, r.job.Loss
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	K := len(r.job.SaveAt)
	bar := lbuf[(1+d)*width : (1+d)*width+K*d*bs]
	tail := lbuf[(1+d)*width+K*d*bs:]
	at := func(x []float64, first, w int) []float64 { return x[first*width : (first+w)*width] }
	if lp.Scale != 1 {
		floats.Scale(lp.Scale, at(lbuf, 1, d))
		floats.Scale(lp.Scale, tail)
	}
	if major {
		if lp.Scale == 0 { // the sweep's BarScale 0 means 1
			floats.Scale(0, bar)
		}
		return at(lbuf, 1, d), bar, at(tail, 0, np), at(tail, np, ns)
	}
	if bs != width {
		panic("ode: internal error: save cotangents transposed from padded rows")
	}
	tapbar = w.scratch(scrTapBar, d*width*K)
	transposeScaled(tapbar, bar, K*d, width, lp.Scale)
	return at(lbuf, 1, d), tapbar, at(tail, 0, np), at(tail, np, ns)
}

// restCotangents scales the outputs lbuf of a fused loss's rest (laid
// out as lossRun says: ℓ, ∂L/∂y(t1), ∂L/∂p, the loss's own
// shared-gradient terms, a row of width values each) in place, as
// cotangents scales them, and returns them as the backward sweep takes
// them (see cotangents).
func (w *cpuWorker) restCotangents(r *cpuRun, lbuf []float64, width int) (ybar, gp0, gs0 []float64) {
	pl, lp := w.ex.plan, r.job.Loss
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	tail := lbuf[width : (1+d+np+ns)*width]
	if lp.Scale != 1 {
		floats.Scale(lp.Scale, tail)
	}
	return tail[:d*width], tail[d*width : (d+np)*width], tail[(d+np)*width:]
}

// rowStride returns the distance, in values, between save-major rows of
// width values (the loss's saves' cotangents, cpuRun.soaSaves' copy):
// width rounded up to whole cache lines of float64s, plus one line where
// that makes an even number of lines. Rows 2 KiB apart (256 lanes) fall
// in two sets of a 32 KiB 8-way L1 cache, so that a lane's column of a
// few saves' rows evicts itself; an odd number of lines spreads them over
// every set.
func rowStride(width int) int {
	if !padRows {
		return width
	}
	s := (width + 7) &^ 7
	if s/8%2 == 0 {
		s += 8
	}
	return s
}

// padRows lets tests compare padded rows (rowStride) with unpadded ones.
var padRows = true

// peak records b bytes of stored states as the run's peak if larger.
func (r *cpuRun) peak(b int64) {
	for {
		p := r.storedPeak.Load()
		if b <= p || r.storedPeak.CompareAndSwap(p, b) {
			return
		}
	}
}

// writeGrad writes the chunk's gradient g to the run's result.
func (w *cpuWorker) writeGrad(r *cpuRun, lo, hi int, g *scan.Gradient) {
	pl, res := w.ex.plan, r.res
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	width := hi - lo
	fromSoA(res.GradY0[lo*d:hi*d], g.Y0, width, d)
	fromSoA(res.GradP[lo*np:hi*np], g.P, width, np)
	copy(r.tiles[lo/scan.TileSize*ns:], g.SharedTiles)
}

// replaySwitched is replay for a chunk in which Method Auto switched
// trajectories (sw[i] < lens[i]): two scans over the chunk's lanes, the
// explicit plan's over every trajectory's steps before its switch, then
// the stiff plan's (Job.stiff) over the rest, each switched trajectory
// from the time and state where its explicit steps ended (a trajectory
// that did not switch has no steps there). A save time τ of a switched
// trajectory is the first scan's if τ is before its switch time t_s,
// else the second's (τ = t_s is the state there), as the record wrote
// it. The gradient chains the two: the second scan's backward sweep
// starts from the loss's cotangents of the final states and of its saves,
// and its cotangent of the state at t_s (and its parameters' gradient)
// starts the first scan's, with the first's saves' cotangents; the mesh
// fixes t_s. Every trajectory's results, and every tile of the shared
// gradient without a switched trajectory, are those of replay bit for
// bit; a tile with one adds the second scan's sum last.
func (w *cpuWorker) replaySwitched(r *cpuRun, lo, hi int, h []float64, stride int, lens, sw []int) error {
	ex, pl, j, res := w.ex, w.ex.plan, r.job, r.res
	d := pl.Dim
	width := hi - lo
	if j.stiff == nil {
		return errors.New("ode: internal error: a mesh with switched trajectories replayed without the stiff plan")
	}
	if err := w.stepClone(ex); err != nil {
		return err
	}
	a := w.altWorker(j)
	if err := a.stepClone(j.stiff); err != nil {
		return err
	}
	// The two meshes, and each trajectory's switch time, accumulated as
	// the record and the first scan accumulate it.
	lens1, lens2 := w.intScratch(0, width), w.intScratch(1, width)
	ts := w.scratch(scrSwitchT, width)
	for i, l := range lens {
		s := min(sw[i], l)
		lens1[i], lens2[i] = s, l-s
		t := j.T0
		for k := 0; k < s; k++ {
			t += h[k*stride+i]
		}
		ts[i] = t
	}
	mesh1 := w.chunkMesh(h, stride, width, lens1, nil, scrMesh)
	mesh2 := w.chunkMesh(h, stride, width, lens2, lens1, scrMesh2)
	q1 := w.chunkProblem(j, lo, hi, mesh1)
	q2 := &scan.Problem{Step: a.step, Mesh: mesh2, T0: ts, Shared: j.Shared, Y0: w.scratch(scrY0b, width*d), P: q1.P}
	K := len(j.SaveAt)
	ys := res.Ys[lo*K*d : hi*K*d]
	ys2 := ys // the record wrote them (Given)
	if !r.recordSaves {
		ys2 = w.scratch(scrSaves2, len(ys))
	}
	w.taps = w.setSaves(r, q1, pl, &w.saves, w.taps, ys, nil)
	w.altTp = w.setSaves(r, q2, j.stiff.plan, &w.altSv, w.altTp, ys2, ts)
	set := &scan.Settings{Checkpoint: j.Checkpoint, MemoryLimit: max(1, r.stateBudget)}

	var sw1, sw2 *scan.Sweep
	var out1, out2 *scan.Result
	var err error
	if j.Op == OpGrad {
		if j.Mesh == nil {
			q1.Stored, q2.Stored = w.switchedStored(width, lens1, lens2)
		}
		if sw1, err = scan.Forward(q1, set); err != nil {
			return err
		}
		out1 = sw1.Result()
		copy(q2.Y0, out1.Y)
		if sw2, err = scan.Forward(q2, set); err != nil {
			return err
		}
		out2 = sw2.Result()
	} else {
		if out1, err = scan.Replay(nil, q1, set); err != nil {
			return err
		}
		copy(q2.Y0, out1.Y)
		if out2, err = scan.Replay(&w.altRes, q2, set); err != nil {
			return err
		}
	}
	// The final states, and the saves from the switch on, of the
	// switched trajectories are the second scan's.
	y := w.scratch(scrYEnd, d*width)
	copy(y, out1.Y)
	for i, l := range lens2 {
		if l == 0 {
			continue
		}
		for c := 0; c < d; c++ {
			y[c*width+i] = out2.Y[c*width+i]
		}
		if !r.recordSaves {
			for k, tau := range j.SaveAt {
				if tau >= ts[i] {
					copy(ys[(i*K+k)*d:(i*K+k+1)*d], ys2[(i*K+k)*d:(i*K+k+1)*d])
				}
			}
		}
	}
	if (j.Op == OpReplay || j.Op == OpLoss || j.Op == OpGrad) && res.Y != nil { // nil: Job.Omit
		fromSoA(res.Y[lo*d:hi*d], y, width, d)
	}
	if j.Op != OpLoss && j.Op != OpGrad {
		return nil
	}
	lbuf, err := w.lossRun(r, lo, hi, y, ys, q1.P, width, nil)
	if err != nil || j.Op != OpGrad {
		return err
	}
	ybar, tapbar, gp0, gs0 := w.cotangents(r, lbuf, width, width, false)
	// The second scan's save cotangents are those from the switch on;
	// the first scan's those before it.
	tapbar2 := w.scratch(scrTapBar2, len(tapbar))
	copy(tapbar2, tapbar)
	for i, l := range lens2 {
		if l == 0 {
			continue
		}
		for k, tau := range j.SaveAt {
			bar := tapbar2
			if tau >= ts[i] {
				bar = tapbar
			}
			clear(bar[(i*K+k)*d : (i*K+k+1)*d])
		}
	}
	g2, err := sw2.BackwardFrom(w.alt2, ybar, tapbar2, gp0, nil)
	if err != nil {
		return err
	}
	w.alt2 = g2
	ybar1 := w.scratch(scrYBar1, d*width)
	copy(ybar1, ybar)
	for i, l := range lens2 {
		if l > 0 {
			for c := 0; c < d; c++ {
				ybar1[c*width+i] = g2.Y0[c*width+i]
			}
		}
	}
	g, err := sw1.BackwardFrom(w.grad, ybar1, tapbar, g2.P, gs0)
	if err != nil {
		return err
	}
	for k, v := range g2.SharedTiles {
		if v != 0 {
			g.SharedTiles[k] += v
		}
	}
	r.peak(sw1.StoredBytes() + sw2.StoredBytes())
	w.grad = g
	w.writeGrad(r, lo, hi, g)
	return nil
}

// altWorker returns the workspace of the stiff plan's executor (Job.stiff).
func (w *cpuWorker) altWorker(j *Job) *cpuWorker {
	if w.alt == nil || w.alt.ex != j.stiff {
		w.alt = &cpuWorker{ex: j.stiff}
	}
	w.alt.size(w.cap)
	return w.alt
}

// switchedStored returns the record's stored states of the chunk, as the
// two scans of replaySwitched read them: the first's are the record's
// rows (those before each switch), ending at the state where each
// switched trajectory's stiff steps start (the stored row there); the
// second's are a copy of the rows from each switch on, ending at the
// record's final states. Both are nil if the record kept no states.
func (w *cpuWorker) switchedStored(width int, lens1, lens2 []int) (*scan.Stored, *scan.Stored) {
	st := w.storedStates(width)
	if st == nil {
		return nil, nil
	}
	d := w.ex.plan.Dim
	stride := (1 + d) * width
	rows2 := 0
	for _, l := range lens2 {
		rows2 = max(rows2, l)
	}
	endT, endY := w.scratch(scrEndT1, width), w.scratch(scrEndY1, d*width)
	copy(endT, st.EndT)
	copy(endY, st.EndY)
	states2 := w.scratch(scrStored2, rows2*stride)
	for i, l := range lens2 {
		if l == 0 {
			continue
		}
		at := lens1[i] * stride
		endT[i] = w.sbuf[at+i]
		for c := 0; c < d; c++ {
			endY[c*width+i] = w.sbuf[at+(1+c)*width+i]
		}
		for s := 0; s < l; s++ {
			src, dst := w.sbuf[(lens1[i]+s)*stride:], states2[s*stride:]
			for x := 0; x <= d; x++ {
				dst[x*width+i] = src[x*width+i]
			}
		}
	}
	return &scan.Stored{States: st.States, EndT: endT, EndY: endY},
		&scan.Stored{States: states2, EndT: st.EndT, EndY: st.EndY}
}

// lossExec returns the worker's clone of the executor of prog, a loss
// program, by key: its LossPlan.Hash, with ".grad" for the gradient
// program, and ".rest", ".foldrest" and ".foldend" for a fused loss's
// programs (lossfuse.go).
func (w *cpuWorker) lossExec(key string, prog *tape.Program) (*tape.Exec, error) {
	if e, ok := w.loss[key]; ok {
		return e, nil
	}
	master, err := w.ex.lossMaster(key, prog)
	if err != nil {
		return nil, err
	}
	if w.loss == nil {
		w.loss = map[string]*tape.Exec{}
	}
	e := master.Clone(w.cap, 1)
	w.loss[key] = e
	return e, nil
}

// The worker's scratch arrays (see scratch).
const (
	scrMesh = iota
	scrY0
	scrP
	scrTaps
	scrData
	scrLoss
	scrTapBar
	// Method Auto's switched chunks (replaySwitched):
	scrSwitchT
	scrMesh2
	scrY0b
	scrSaves2
	scrYEnd
	scrTapBar2
	scrYBar1
	scrEndT1
	scrEndY1
	scrStored2
	scrZero // a row of zeros: the data columns a fused loss does not read
	numScratch
)

// scratch returns the worker's scratch array k, n values long, reused from
// chunk to chunk (its contents are left over from the last use).
func (w *cpuWorker) scratch(k, n int) []float64 {
	if cap(w.scr[k]) < n {
		w.scr[k] = make([]float64, n)
	}
	return w.scr[k][:n]
}

// intScratch returns the worker's integer scratch array k (0 or 1), n
// long.
func (w *cpuWorker) intScratch(k, n int) []int {
	if cap(w.iscr[k]) < n {
		w.iscr[k] = make([]int, n)
	}
	return w.iscr[k][:n]
}

// chunkProblem returns the scan problem of the chunk lo…hi-1 of job j on
// mesh, with the worker's step: every trajectory from its start time (T0,
// or Job.T0s), its initial states and parameters transposed into the
// worker's scratch.
func (w *cpuWorker) chunkProblem(j *Job, lo, hi int, mesh scan.Mesh) *scan.Problem {
	d, np := w.ex.plan.Dim, w.ex.plan.Params
	width := hi - lo
	q := &scan.Problem{Step: w.step, Mesh: mesh, T0: w.t0s[:width], Shared: j.Shared,
		Y0: toSoA(w.scratch(scrY0, width*d), j.Y0[lo*d:hi*d], width, d),
		P:  toSoA(w.scratch(scrP, width*np), j.P[lo*np:hi*np], width, np)}
	for i := range q.T0 {
		q.T0[i] = j.startTime(lo + i)
	}
	return q
}
