package scan

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Sweep is a forward scan that kept what its backward sweep needs:
// checkpoints of the states every K steps (every state if K = 1).
type Sweep struct {
	p   *Problem
	set Settings
	l   *layout
	k   int
	fwd *tape.Exec

	cpOff []int     // offset of checkpoint c (at step c*K) in cp
	cp    []float64 // per checkpoint: t[m], y[D][m] with m = active rows
	x     *state    // state after the last step
	tp    *tapper
	res   Result
}

// Forward runs the scan like Replay and keeps checkpoints for Backward.
// The checkpoint interval follows Settings.Checkpoint.
func Forward(p *Problem, s *Settings) (*Sweep, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	sw := &Sweep{p: p}
	if s != nil {
		sw.set = *s
	}
	e, err := p.Step.forward(&sw.set.Exec)
	if err != nil {
		return nil, err
	}
	sw.fwd = e
	sw.l = newLayout(p)
	sw.k = sw.interval()
	l, d := sw.l, p.Step.D
	ncp := (l.rows + sw.k - 1) / sw.k
	sw.cpOff = make([]int, ncp+1)
	for c := 0; c < ncp; c++ {
		sw.cpOff[c+1] = sw.cpOff[c] + l.active[c*sw.k]*(1+d)
	}
	sw.cp = make([]float64, sw.cpOff[ncp])
	x := newState(p, l)
	sw.tp = newTapper(p, l)
	sw.tp.set = &sw.set.Exec
	in := make([][]float64, 0, len(p.Step.Prog.Inputs))
	for s := 0; s < l.rows; s++ {
		sw.tp.collect(x, s)
		m := l.active[s]
		if s%sw.k == 0 {
			sw.save(x, s/sw.k, m)
		}
		x.loadH(p, l, s, m)
		if err := stepForward(e, x, in, m); err != nil {
			return nil, err
		}
	}
	sw.tp.collect(x, l.rows)
	sw.x = x
	if _, err := finishResult(&sw.res, p, l, x, sw.tp, e); err != nil {
		return nil, err
	}
	return sw, nil
}

// interval chooses the checkpoint interval.
func (sw *Sweep) interval() int {
	if sw.set.Checkpoint > 0 {
		return sw.set.Checkpoint
	}
	limit := sw.set.MemoryLimit
	if limit <= 0 {
		limit = DefaultMemoryLimit
	}
	total := int64(0)
	for _, m := range sw.l.active {
		total += int64(m)
	}
	bytes := total * int64(1+sw.p.Step.D) * 8
	if bytes <= limit {
		return 1
	}
	return int((bytes + limit - 1) / limit)
}

// Interval returns the checkpoint interval the sweep uses.
func (sw *Sweep) Interval() int { return sw.k }

// StoredBytes returns the memory held by the checkpoints.
func (sw *Sweep) StoredBytes() int64 { return int64(len(sw.cp)) * 8 }

// Result returns the final states and taps of the forward scan. The
// slices belong to the sweep.
func (sw *Sweep) Result() *Result { return &sw.res }

func (sw *Sweep) save(x *state, c, m int) {
	buf := sw.cp[sw.cpOff[c]:sw.cpOff[c+1]]
	copy(buf[:m], x.t[:m])
	for k, y := range x.y {
		copy(buf[(1+k)*m:(2+k)*m], y[:m])
	}
}

func (sw *Sweep) restore(x *state, c, m int) {
	buf := sw.cp[sw.cpOff[c]:sw.cpOff[c+1]]
	copy(x.t[:m], buf[:m])
	for k, y := range x.y {
		copy(y[:m], buf[(1+k)*m:(2+k)*m])
	}
}

// Gradient holds the gradient of a scalar loss with respect to the inputs
// of a scan, in the layout of Problem.
type Gradient struct {
	Y0     []float64 // [D][N]
	P      []float64 // [P][N]
	Shared []float64 // [S]
}

// Backward returns the gradient of a loss L given its cotangents: ybar
// [D][N] = ∂L/∂(final states) and tapbar [D][ntaps] = ∂L/∂(tap outputs)
// (nil if there are no taps). It is the exact adjoint of the forward scan
// (the mesh held fixed). dst may be nil.
func (sw *Sweep) Backward(dst *Gradient, ybar, tapbar []float64) (*Gradient, error) {
	p, l := sw.p, sw.l
	st := p.Step
	n, d := l.n, st.D
	nt := p.Taps.Len()
	if len(ybar) != d*n || len(tapbar) != d*nt {
		return nil, fmt.Errorf("scan: Backward: len(ybar) %d (want %d), len(tapbar) %d (want %d)", len(ybar), d*n, len(tapbar), d*nt)
	}
	rev, err := st.reverse(&sw.set.Exec)
	if err != nil {
		return nil, err
	}
	lam := make([][]float64, d)
	for c := range lam {
		lam[c] = make([]float64, n)
		for i, j := range l.perm {
			lam[c][i] = ybar[c*n+j]
		}
	}
	gp := make([][]float64, st.P)
	for c := range gp {
		gp[c] = make([]float64, n)
	}
	gs := make([]float64, st.S)
	gsStep := make([][]float64, st.S)
	for c := range gsStep {
		gsStep[c] = make([]float64, 1)
	}

	// Taps first: their cotangents become contributions to λ at their step.
	var tapY [][]float64
	if nt > 0 {
		tapY, err = sw.tapAdjoint(rev, tapbar, gp, gs)
		if err != nil {
			return nil, err
		}
		sw.addTaps(lam, tapY, l.rows)
	}

	// Segments from last to first; within each, recompute the states, then
	// sweep backwards.
	x := newState(p, l)
	var seg []float64
	off := make([]int, 0, sw.k+1)
	in := make([][]float64, 0, len(rev.Program().Inputs))
	out := make([][]float64, 0, len(rev.Program().Outputs))
	ncp := len(sw.cpOff) - 1
	for c := ncp - 1; c >= 0; c-- {
		s0 := c * sw.k
		s1 := min(s0+sw.k, l.rows)
		// seg holds the states at steps s0…s1-1: t[m_s], y[D][m_s]. With
		// K = 1 that is the checkpoint itself.
		off = append(off[:0], 0)
		for s := s0; s < s1; s++ {
			off = append(off, off[s-s0]+l.active[s]*(1+d))
		}
		if sw.k == 1 {
			seg = sw.cp[sw.cpOff[c]:sw.cpOff[c+1]]
		} else {
			if cap(seg) < off[s1-s0] {
				seg = make([]float64, off[s1-s0])
			}
			seg = seg[:off[s1-s0]]
			sw.restore(x, c, l.active[s0])
			for s := s0; s < s1; s++ {
				m := l.active[s]
				b := seg[off[s-s0]:off[s-s0+1]]
				copy(b[:m], x.t[:m])
				for k, y := range x.y {
					copy(b[(1+k)*m:(2+k)*m], y[:m])
				}
				if s+1 < s1 {
					x.loadH(p, l, s, m)
					if err := stepForward(sw.fwd, x, in, m); err != nil {
						return nil, err
					}
				}
			}
		}
		for s := s1 - 1; s >= s0; s-- {
			m := l.active[s]
			b := seg[off[s-s0]:off[s-s0+1]]
			x.loadH(p, l, s, m)
			in = append(in[:0], b[:m], x.h[:m])
			for k := 0; k < d; k++ {
				in = append(in, b[(1+k)*m:(2+k)*m])
			}
			for _, pc := range x.p {
				in = append(in, pc[:m])
			}
			in = append(in, x.s...)
			out = out[:0]
			for k := 0; k < d; k++ {
				in = append(in, lam[k][:m])
				out = append(out, lam[k][:m])
			}
			for k := range gp {
				in = append(in, gp[k][:m])
				out = append(out, gp[k][:m])
			}
			out = append(out, gsStep...)
			if err := x.mask.runLive(rev, out, in, x.h, m); err != nil {
				return nil, err
			}
			for k := range gs {
				gs[k] += gsStep[k][0]
			}
			if tapY != nil {
				sw.addTaps(lam, tapY, s)
			}
		}
	}

	if dst == nil {
		dst = &Gradient{}
	}
	dst.Y0 = resize(dst.Y0, d*n)
	dst.P = resize(dst.P, st.P*n)
	dst.Shared = resize(dst.Shared, st.S)
	for i, j := range l.perm {
		for c := 0; c < d; c++ {
			dst.Y0[c*n+j] = lam[c][i]
		}
		for c := 0; c < st.P; c++ {
			dst.P[c*n+j] = gp[c][i]
		}
	}
	copy(dst.Shared, gs)
	return dst, nil
}

// tapAdjoint runs the VJP of every tap: it returns the cotangent of each
// tap's starting state ([D][ntaps]) and adds the parameter gradients.
func (sw *Sweep) tapAdjoint(rev *tape.Exec, tapbar []float64, gp [][]float64, gs []float64) ([][]float64, error) {
	st, tp := sw.p.Step, sw.tp
	nt := sw.p.Taps.Len()
	in := tp.inputs()
	if sw.p.Taps.Theta != nil {
		_, drev, err := st.dense(&sw.set.Exec)
		if err != nil {
			return nil, err
		}
		rev = drev
	}
	y := make([][]float64, st.D)
	out := make([][]float64, 0, st.D+st.P+st.S)
	for c := range y {
		y[c] = append([]float64(nil), tapbar[c*nt:(c+1)*nt]...)
		in = append(in, y[c])
		out = append(out, y[c])
	}
	g := make([][]float64, st.P)
	for c := range g {
		g[c] = make([]float64, nt)
		in = append(in, g[c])
		out = append(out, g[c])
	}
	sums := make([][]float64, st.S)
	for c := range sums {
		sums[c] = make([]float64, 1)
		out = append(out, sums[c])
	}
	if err := tp.st.mask.runLive(rev, out, in, tp.st.h, nt); err != nil {
		return nil, err
	}
	for i, j := range sw.p.Taps.Traj {
		k := tp.pos[j]
		for c := range g {
			gp[c][k] += g[c][i]
		}
	}
	for c := range sums {
		gs[c] += sums[c][0]
	}
	return y, nil
}

// addTaps adds the tap cotangents of taps at step s to λ.
func (sw *Sweep) addTaps(lam, tapY [][]float64, s int) {
	if s >= len(sw.l.tapsAt) {
		return
	}
	for _, i := range sw.l.tapsAt[s] {
		k := sw.tp.pos[sw.p.Taps.Traj[i]]
		for c := range lam {
			lam[c][k] += tapY[c][i]
		}
	}
}
