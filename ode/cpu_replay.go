package ode

import (
	"errors"
	"fmt"

	"gonum.org/v1/gonum/floats"

	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// replay runs the chunk lo…hi-1 over its mesh: h holds the mesh rows with
// stride (trajectory i of the chunk, step s at h[s*stride+i-lo]) and lens
// the chunk's step counts. With the run's op it fills the saved states
// (OpSolve), the final and saved states (OpReplay), the loss terms (OpLoss)
// or the loss terms and the gradient (OpGrad). For a gradient after a
// record, the recorder's stored states replace the forward sweep.
func (w *cpuWorker) replay(r *cpuRun, lo, hi int, h []float64, stride int, lens []int) error {
	ex, pl, j, res := w.ex, w.ex.plan, r.job, r.res
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	width := hi - lo
	rows := 0
	for _, l := range lens {
		rows = max(rows, l)
	}
	if w.step == nil {
		master, err := ex.stepMaster()
		if err != nil {
			return err
		}
		if w.step, err = master.Clone(nil, w.cap, 1); err != nil {
			return err
		}
	}
	mesh := scan.Mesh{N: width, Rows: rows, Len: lens}
	if stride == width {
		mesh.H = h[:rows*width]
	} else {
		mesh.H = w.scratch(scrMesh, rows*width)
		for s := 0; s < rows; s++ {
			copy(mesh.H[s*width:(s+1)*width], h[s*stride:s*stride+width])
		}
	}
	q := &scan.Problem{Step: w.step, Mesh: mesh, T0: w.t0s[:width], Shared: j.Shared,
		Y0: toSoA(w.scratch(scrY0, width*d), j.Y0[lo*d:hi*d], width, d),
		P:  toSoA(w.scratch(scrP, width*np), j.P[lo*np:hi*np], width, np)}
	for i := range q.T0 {
		q.T0[i] = j.T0
	}
	// The saved states go straight into the result, trajectory-major:
	// trajectory lo+i's save time k at (i*K+k)*d in the chunk's rows
	// (already there when the record wrote them).
	K := len(j.SaveAt)
	ys := res.Ys[lo*K*d : hi*K*d]
	switch {
	case K == 0:
	case pl.DenseStep != nil:
		w.saves = scan.Saves{Times: j.SaveAt, Out: ys, Given: r.recordSaves}
		q.Saves = &w.saves
	default:
		w.taps = stepTaps(w.taps, mesh, j.T0, j.SaveAt)
		w.taps.TapMajor, w.taps.Out = true, ys
		q.Taps = w.taps
	}
	set := &scan.Settings{Checkpoint: j.Checkpoint, MemoryLimit: max(1, r.stateBudget)}

	var sw *scan.Sweep
	var out *scan.Result
	if j.Op == OpGrad {
		if j.Mesh == nil {
			q.Stored = w.storedStates(width)
		}
		var err error
		if sw, err = scan.Forward(q, set); err != nil {
			return err
		}
		out = sw.Result()
	} else {
		var err error
		if out, err = scan.Replay(nil, q, set); err != nil {
			return err
		}
	}
	if j.Op == OpReplay || j.Op == OpLoss || j.Op == OpGrad {
		fromSoA(res.Y[lo*d:hi*d], out.Y, width, d)
	}
	if j.Op != OpLoss && j.Op != OpGrad {
		return nil
	}

	// The loss terms and their cotangents.
	lp := j.Loss
	prog := lp.Term
	var le *tape.Exec
	if j.Op == OpGrad {
		prog = lp.Grad
	}
	le, err := w.lossExec(lp, prog)
	if err != nil {
		return err
	}
	in := w.in[:0]
	for c := 0; c < d; c++ {
		in = append(in, out.Y[c*width:(c+1)*width])
	}
	nt := width * K
	ysoa := toSoA(w.scratch(scrTaps, K*d*width), ys, width, K*d) // the saved states by save time, [K·d][width]
	for x := 0; x < K*d; x++ {
		in = append(in, ysoa[x*width:(x+1)*width])
	}
	if lp.DataDim > 0 {
		data := toSoA(w.scratch(scrData, width*lp.DataDim), lp.Data[lo*lp.DataDim:hi*lp.DataDim], width, lp.DataDim)
		for c := 0; c < lp.DataDim; c++ {
			in = append(in, data[c*width:(c+1)*width])
		}
	}
	for c := 0; c < np; c++ {
		in = append(in, q.P[c*width:(c+1)*width])
	}
	for c := 0; c < ns; c++ {
		in = append(in, j.Shared[c:c+1])
	}
	// The loss's outputs in one block, [output][width]: ℓ, then its
	// cotangents, which the gradient scales in place.
	lbuf := w.scratch(scrLoss, len(prog.Outputs)*width)
	lout := w.out[:0]
	for i := range prog.Outputs {
		lout = append(lout, lbuf[i*width:(i+1)*width])
	}
	w.in, w.out = in, lout
	if err := le.Run(lout, in, width); err != nil {
		var nf *tape.NonFiniteError
		if errors.As(err, &nf) {
			nf.Trajectory += lo // the chunk's lane to the ensemble's trajectory
		}
		return fmt.Errorf("ode: loss %s: %w", lp.Term.Name, err)
	}
	copy(r.lossTerms[lo:hi], lout[0])
	if j.Op != OpGrad {
		return nil
	}
	// Scaled cotangents: ∂L/∂y(t1) [d][width], ∂L/∂p [np][width] and the
	// loss's own shared-gradient terms [ns][width] are ranges of lbuf;
	// the saved states' go to the saves' layout [width][K·d], scaled as
	// they are transposed (a scale of 1 is skipped: x·1 = x).
	at := func(first, w int) []float64 { return lbuf[first*width : (first+w)*width] }
	o := 1 + d + K*d
	if lp.Scale != 1 {
		floats.Scale(lp.Scale, at(1, d))
		floats.Scale(lp.Scale, lbuf[o*width:])
	}
	tapbar := w.scratch(scrTapBar, d*nt)
	transposeScaled(tapbar, at(1+d, K*d), K*d, width, lp.Scale)
	g, err := sw.BackwardFrom(w.grad, at(1, d), tapbar, at(o, np), at(o+np, ns))
	if err != nil {
		return err
	}
	for b := sw.StoredBytes(); ; {
		peak := r.storedPeak.Load()
		if b <= peak || r.storedPeak.CompareAndSwap(peak, b) {
			break
		}
	}
	w.grad = g
	fromSoA(res.GradY0[lo*d:hi*d], g.Y0, width, d)
	fromSoA(res.GradP[lo*np:hi*np], g.P, width, np)
	copy(r.tiles[lo/scan.TileSize*ns:], g.SharedTiles)
	return nil
}

// lossExec returns the worker's clone of the executor of prog, one of the
// programs of lp.
func (w *cpuWorker) lossExec(lp *LossPlan, prog *tape.Program) (*tape.Exec, error) {
	key := lp.Hash
	if prog == lp.Grad {
		key += ".grad"
	}
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
