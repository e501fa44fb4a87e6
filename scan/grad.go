package scan

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Sweep is a forward scan that kept what its backward sweep needs: the
// states before every step (Stored, or stored by Forward when they fit),
// or checkpoints of them every K steps, from which the backward sweep
// recomputes the steps in between.
type Sweep struct {
	p   *Problem
	set Settings
	l   *layout
	k   int  // checkpoint interval
	seg bool // with k > 1: recompute a segment into a buffer of k states (else step by step)
	fwd *tape.Exec

	cpOff []int     // offset of checkpoint c (at step c*K) in cp
	cp    []float64 // per checkpoint: t[m], y[D][m] with m = active rows
	x     *state    // state after the last step
	tp    *tapper
	res   Result
	bytes int64 // peak bytes of stored states

}

// Forward runs the scan like Replay and keeps what Backward needs. If the
// problem has Stored states it steps nothing and keeps nothing more; else
// the checkpoint interval follows Settings.Checkpoint and MemoryLimit.
func Forward(p *Problem, s *Settings) (*Sweep, error) { return ForwardTo(nil, p, s) }

// ForwardTo is Forward, reusing the storage of the checkpoints and of the
// Result's final states of dst, an earlier Sweep that is not used again,
// nor its Result (nil: none), where it is large enough: a worker that
// sweeps chunk after chunk then allocates them once, and the final
// states it hands on (to a loss program, say) stay at one address.
func ForwardTo(dst *Sweep, p *Problem, s *Settings) (*Sweep, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	var cp, y []float64
	if dst != nil {
		cp, y = dst.cp[:0], dst.res.Y[:0]
	}
	sw := &Sweep{p: p}
	sw.res.Y = y
	if s != nil {
		sw.set = *s
	}
	e, err := p.Step.forward(&sw.set.Exec)
	if err != nil {
		return nil, err
	}
	sw.fwd = e
	sw.l = newLayout(p)
	l, d := sw.l, p.Step.D
	if sw.tp, err = newTapper(p, l, &sw.set.Exec, &sw.res); err != nil {
		return nil, err
	}
	if st := p.Stored; st != nil {
		sw.k = 1
		x := newState(p, l, 0)
		for i, j := range l.perm {
			x.t[i] = st.EndT[j]
			for c := range x.y {
				x.y[c][i] = st.EndY[c*l.n+j]
			}
		}
		if err := sw.tp.collectStored(st, d); err != nil {
			return nil, err
		}
		sw.x = x
		if _, err := finishResult(&sw.res, p, l, x, sw.tp, e); err != nil {
			return nil, err
		}
		return sw, nil
	}
	if err := sw.interval(); err != nil {
		return nil, err
	}
	ncp := (l.rows + sw.k - 1) / sw.k
	sw.cpOff = make([]int, ncp+1)
	for c := 0; c < ncp; c++ {
		sw.cpOff[c+1] = sw.cpOff[c] + l.active[c*sw.k]*(1+d)
	}
	if cap(cp) >= sw.cpOff[ncp] {
		sw.cp = cp[:sw.cpOff[ncp]] // every checkpoint is written (save) before it is read
	} else {
		sw.cp = make([]float64, sw.cpOff[ncp])
	}
	x := newState(p, l, 0)
	in := make([][]float64, 0, len(p.Step.Prog.Inputs))
	for s := 0; s < l.rows; s++ {
		sw.tp.collect(x, s)
		m := l.active[s]
		if s%sw.k == 0 {
			sw.save(x, s/sw.k, m)
		}
		x.loadH(p, l, s, m)
		if err := sw.tp.stepRow(e, x, in, s, m); err != nil {
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

// interval chooses the checkpoint interval K and the backward mode from
// the bytes of the states: every state if they fit in the memory limit;
// else checkpoints every K steps plus a buffer of one segment of K states
// (the forward is recomputed once); else, if even that does not fit,
// checkpoints alone, with each backward step recomputed from its
// checkpoint (the forward is recomputed about K/2 times), down to one
// checkpoint of the initial states if nothing more fits.
func (sw *Sweep) interval() error {
	l := sw.l
	unit := int64(1+sw.p.Step.D) * 8
	if k := sw.set.Checkpoint; k > 0 {
		k = min(k, max(1, l.rows)) // an interval past the last step is one checkpoint
		sw.k, sw.seg = k, k > 1
		return nil
	}
	limit := sw.set.MemoryLimit
	if limit <= 0 {
		limit = DefaultMemoryLimit
	}
	total := int64(0)
	for _, m := range l.active {
		total += int64(m)
	}
	if total*unit <= limit || l.rows <= 1 {
		sw.k = 1
		return nil
	}
	// cps returns the bytes of checkpoints every k steps and of the largest
	// segment of k states.
	cps := func(k int) (cp, seg int64) {
		for s := 0; s < l.rows; s += k {
			cp += int64(l.active[s])
			var sg int64
			for r := s; r < min(s+k, l.rows); r++ {
				sg += int64(l.active[r])
			}
			seg = max(seg, sg)
		}
		return cp * unit, seg * unit
	}
	for k := 2; k <= l.rows; k = max(k+1, k*5/4) {
		if cp, seg := cps(k); cp+seg <= limit {
			sw.k, sw.seg = k, true
			return nil
		}
	}
	for k := max(2, int(total*unit/limit)); k < l.rows; k = max(k+1, k*5/4) {
		if cp, _ := cps(k); cp <= limit {
			sw.k = k
			return nil
		}
	}
	// One checkpoint, the initial states: the working set of O(N·D).
	sw.k = l.rows
	return nil
}

// Interval returns the checkpoint interval the sweep uses (1 if every
// state is stored).
func (sw *Sweep) Interval() int { return sw.k }

// StoredBytes returns the peak memory held for the backward sweep: the
// checkpoints and the segment buffer (after Backward), or the stored
// states of the problem. The working set of O(N·D) values (the carry and
// one step's states) is not included.
func (sw *Sweep) StoredBytes() int64 {
	if st := sw.p.Stored; st != nil {
		return int64(len(st.States)) * 8
	}
	return max(sw.bytes, int64(len(sw.cp))*8)
}

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
	Y0 []float64 // [D][N]
	P  []float64 // [P][N]
	// SharedTiles holds the shared gradient summed over each tile of
	// TileSize consecutive trajectories, [ceil(N/TileSize)][S]; Shared is
	// the sum of the tiles in order (SumTiles).
	SharedTiles []float64
	Shared      []float64 // [S]
}

// TileSize is the number of consecutive trajectories whose contributions
// to a shared gradient are summed together first. The backward sweep adds
// each step's contributions to its tile's sum, trajectory by trajectory in
// index order; tiles are then summed in order (SumTiles). The result
// depends neither on the order of the sweep's work nor on how an engine
// splits an ensemble into chunks, as long as chunk boundaries fall on
// multiples of TileSize.
const TileSize = 8

// SumTiles sets dst[c] to the sum over tiles k = 0, 1, … (in order) of
// tiles[k*s+c], and returns dst (allocated if too short).
func SumTiles(dst, tiles []float64, s int) []float64 {
	if cap(dst) < s {
		dst = make([]float64, s)
	}
	dst = dst[:s]
	for c := range dst {
		dst[c] = 0
	}
	if s == 0 {
		return dst
	}
	for k := 0; k+s <= len(tiles); k += s {
		for c := 0; c < s; c++ {
			dst[c] += tiles[k+c]
		}
	}
	return dst
}

// Backward returns the gradient of a loss L given its cotangents: ybar
// [D][N] = ∂L/∂(final states) and tapbar = ∂L/∂(tap outputs), in the
// taps' layout, or ∂L/∂(saved states), laid out as Saves.BarMajor and
// Saves.BarStride say (nil if there are no taps or saves). It is the exact adjoint of the forward scan
// (the mesh held fixed). dst may be nil.
func (sw *Sweep) Backward(dst *Gradient, ybar, tapbar []float64) (*Gradient, error) {
	return sw.BackwardFrom(dst, ybar, tapbar, nil, nil)
}

// BackwardFrom is Backward with the parameter gradients starting from
// gp0 ([P][N], ∂L/∂p from the loss itself) and gs0 ([S][N], each
// trajectory's ∂ℓ/∂s from the loss, added to the tiles first) instead of
// zero; either may be nil.
func (sw *Sweep) BackwardFrom(dst *Gradient, ybar, tapbar, gp0, gs0 []float64) (*Gradient, error) {
	p, l := sw.p, sw.l
	st := p.Step
	n, d := l.n, st.D
	nt := p.Taps.Len()
	nbar := d * nt
	if sv := p.Saves; sv != nil {
		nbar = len(sv.Out)
		if sv.BarMajor && sv.BarStride != 0 {
			if sv.BarStride < n {
				return nil, fmt.Errorf("scan: Backward: Saves.BarStride %d is less than N = %d", sv.BarStride, n)
			}
			nbar = len(sv.Times) * d * sv.BarStride
		}
	}
	if len(ybar) != d*n || len(tapbar) != nbar || (gp0 != nil && len(gp0) != st.P*n) || (gs0 != nil && len(gs0) != st.S*n) {
		return nil, fmt.Errorf("scan: Backward: len(ybar) %d (want %d), len(tapbar) %d (want %d), len(gp0) %d (want 0 or %d), len(gs0) %d (want 0 or %d)",
			len(ybar), d*n, len(tapbar), nbar, len(gp0), st.P*n, len(gs0), st.S*n)
	}
	rev, err := st.reverse(&sw.set.Exec)
	if err != nil {
		return nil, err
	}
	// The adjoint carry, in the permuted order: λ, gp, gs.
	perm := func(src []float64, w int) [][]float64 {
		x := make([][]float64, w)
		for c := range x {
			x[c] = make([]float64, n)
			if src != nil {
				for i, j := range l.perm {
					x[c][i] = src[c*n+j]
				}
			}
		}
		return x
	}
	lam, gp := perm(ybar, d), perm(gp0, st.P)
	if dst == nil {
		dst = &Gradient{}
	}
	ntiles := (n + TileSize - 1) / TileSize
	tiles := resize(dst.SharedTiles, ntiles*st.S)
	for i := range tiles {
		tiles[i] = 0
	}
	if gs0 != nil {
		for k := 0; k < ntiles; k++ {
			for c := 0; c < st.S; c++ {
				acc := tiles[k*st.S+c]
				for j := k * TileSize; j < min(n, k*TileSize+TileSize); j++ {
					acc += gs0[c*n+j]
				}
				tiles[k*st.S+c] = acc
			}
		}
	}

	// Taps first: their cotangents become contributions to λ at their
	// step. A save's cotangent reaches λ at its step directly
	// (∂y(τ)/∂y_s = I) and, inside a step, through the step's
	// coefficients, whose cotangents the reverse of that step takes.
	var tapY [][]float64
	if nt > 0 {
		soa := tapbar
		if p.Taps.TapMajor {
			soa = make([]float64, d*nt)
			for i := 0; i < nt; i++ {
				for c := 0; c < d; c++ {
					soa[c*nt+i] = tapbar[i*d+c]
				}
			}
		}
		if tapY, err = sw.tapAdjoint(rev, soa, gp, tiles); err != nil {
			return nil, err
		}
		sw.addTaps(lam, tapY, l.rows)
	}

	b := &backward{sw: sw, rev: rev, x: newState(p, l, 1), lam: lam, gp: gp, gs: st.contributions(n), tiles: tiles, tapY: tapY}
	if sv := sw.tp.sv; sv != nil {
		b.sv, b.savebar = sv, tapbar
		sv.backwardStart(lam, sw.x.t, tapbar, p.Mesh.Len)
	}
	if err := b.run(); err != nil {
		return nil, err
	}

	dst.Y0 = resize(dst.Y0, d*n)
	dst.P = resize(dst.P, st.P*n)
	for i, j := range l.perm {
		for c := 0; c < d; c++ {
			dst.Y0[c*n+j] = lam[c][i]
		}
		for c := 0; c < st.P; c++ {
			dst.P[c*n+j] = gp[c][i]
		}
	}
	dst.SharedTiles = tiles
	dst.Shared = SumTiles(dst.Shared, tiles, st.S)
	return dst, nil
}

// backward is the reverse sweep of a Sweep: the adjoint carry (λ, gp, gs
// in the permuted order) and the buffers the steps use.
type backward struct {
	sw          *Sweep
	rev         *tape.Exec
	x           *state
	lam, gp, gs [][]float64 // gs: one step's shared-gradient contributions
	tiles       []float64   // shared gradient per tile, [ntiles][S]
	tapY        [][]float64
	sv          *saveSweep // saves, whose steps' reverse takes their cotangents
	savebar     []float64  // the saves' cotangents, laid out as Saves.BarMajor says
	buf         []float64  // states of the current segment, or of one step
	off         []int
	in, out     [][]float64
}

// run sweeps the steps from the last to the first, segment by segment.
func (b *backward) run() error {
	sw, l := b.sw, b.sw.l
	if sw.p.Stored != nil {
		for s := l.rows - 1; s >= 0; s-- {
			if err := b.step(s, b.gather(s)); err != nil {
				return err
			}
		}
		return nil
	}
	ncp := len(sw.cpOff) - 1
	for c := ncp - 1; c >= 0; c-- {
		s0 := c * sw.k
		s1 := min(s0+sw.k, l.rows)
		switch {
		case sw.k == 1:
			if err := b.step(s0, sw.cp[sw.cpOff[c]:sw.cpOff[c+1]]); err != nil {
				return err
			}
		case sw.seg:
			if err := b.segment(c, s0, s1); err != nil {
				return err
			}
		default:
			for s := s1 - 1; s >= s0; s-- {
				st, err := b.recompute(c, s0, s)
				if err != nil {
					return err
				}
				if err := b.step(s, st); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// segment recomputes the states of steps s0…s1-1 from checkpoint c into
// the segment buffer, then sweeps them backwards.
func (b *backward) segment(c, s0, s1 int) error {
	sw, l, x := b.sw, b.sw.l, b.x
	d := sw.p.Step.D
	b.off = append(b.off[:0], 0)
	for s := s0; s < s1; s++ {
		b.off = append(b.off, b.off[s-s0]+l.active[s]*(1+d))
	}
	b.buf = resize(b.buf, b.off[s1-s0])
	sw.bytes = max(sw.bytes, int64(len(sw.cp)+len(b.buf))*8)
	sw.restore(x, c, l.active[s0])
	for s := s0; s < s1; s++ {
		m := l.active[s]
		st := b.buf[b.off[s-s0]:b.off[s-s0+1]]
		copy(st[:m], x.t[:m])
		for k, y := range x.y {
			copy(st[(1+k)*m:(2+k)*m], y[:m])
		}
		if s+1 < s1 {
			x.loadH(sw.p, l, s, m)
			if err := stepForward(sw.fwd, x, b.in, m); err != nil {
				return err
			}
		}
	}
	for s := s1 - 1; s >= s0; s-- {
		if err := b.step(s, b.buf[b.off[s-s0]:b.off[s-s0+1]]); err != nil {
			return err
		}
	}
	return nil
}

// recompute returns the state before step s, recomputed from checkpoint c
// at step s0, in one step's buffer.
func (b *backward) recompute(c, s0, s int) ([]float64, error) {
	sw, l, x := b.sw, b.sw.l, b.x
	sw.restore(x, c, l.active[s0])
	for r := s0; r < s; r++ {
		m := l.active[r]
		x.loadH(sw.p, l, r, m)
		if err := stepForward(sw.fwd, x, b.in, m); err != nil {
			return nil, err
		}
	}
	m := l.active[s]
	d := sw.p.Step.D
	b.buf = resize(b.buf, m*(1+d)) // one state: working set, not stored
	copy(b.buf[:m], x.t[:m])
	for k, y := range x.y {
		copy(b.buf[(1+k)*m:(2+k)*m], y[:m])
	}
	return b.buf, nil
}

// gather returns the stored state before step s of the active
// trajectories, in the permuted order.
func (b *backward) gather(s int) []float64 {
	b.buf = gatherStored(b.buf, b.sw.p.Stored, b.sw.l, b.sw.p.Step.D, s)
	return b.buf
}

// gatherStored returns in dst the stored state before step s of the
// active trajectories (t[m], then y[D][m]) in the permuted order.
func gatherStored(dst []float64, st *Stored, l *layout, d, s int) []float64 {
	n, m := l.n, l.active[s]
	dst = resize(dst, m*(1+d))
	row := st.States[s*(1+d)*n : (s+1)*(1+d)*n]
	for k := 0; k <= d; k++ {
		src, out := row[k*n:(k+1)*n], dst[k*m:(k+1)*m]
		for i, j := range l.perm[:m] {
			out[i] = src[j]
		}
	}
	return dst
}

// step runs the reverse program of step s, whose starting states (t[m],
// y[D][m] of the active trajectories) are in st, and adds the cotangents
// of the taps at step s.
func (b *backward) step(s int, st []float64) error {
	sw, l, x := b.sw, b.sw.l, b.x
	d := sw.p.Step.D
	m := l.active[s]
	x.loadH(sw.p, l, s, m)
	b.in = append(b.in[:0], st[:m], x.h[:m])
	for k := 0; k < d; k++ {
		b.in = append(b.in, st[(1+k)*m:(2+k)*m])
	}
	for _, pc := range x.p {
		b.in = append(b.in, pc[:m])
	}
	b.in = append(b.in, x.s...)
	b.out = b.out[:0]
	rev := b.rev
	for _, c := range b.lam {
		b.in = append(b.in, c[:m])
		b.out = append(b.out, c[:m])
	}
	if b.sv != nil && b.sv.backwardRanges(st[:m], s, m) {
		// A save inside a step: the coefficients have cotangents, and the
		// row runs the extended reverse.
		rev = b.sv.extRev
		for _, c := range b.sv.coefBar(b.savebar, st[:m], x.h, m) {
			b.in = append(b.in, c[:m])
		}
	}
	for _, c := range b.gp {
		b.in = append(b.in, c[:m])
		b.out = append(b.out, c[:m])
	}
	for _, c := range b.gs {
		b.out = append(b.out, c[:m])
	}
	if err := x.mask.runLive(rev, b.out, b.in, x.h, m); err != nil {
		return err
	}
	b.addShared(m)
	if b.tapY != nil {
		sw.addTaps(b.lam, b.tapY, s)
	}
	if b.sv != nil {
		b.sv.addRow(b.lam, b.savebar, m)
	}
	return nil
}

// addShared adds one step's shared-gradient contributions (gs, of the m
// active trajectories in the permuted order) to the tiles, trajectory by
// trajectory in index order within each tile. Padded steps (h == 0)
// contribute nothing.
func (b *backward) addShared(m int) {
	ns := len(b.gs)
	if ns == 0 {
		return
	}
	l, h := b.sw.l, b.x.h
	n := l.n
	for k := 0; k*TileSize < n; k++ {
		lo, hi := k*TileSize, min(n, k*TileSize+TileSize)
		for c := 0; c < ns; c++ {
			g := b.gs[c]
			acc := b.tiles[k*ns+c]
			for j := lo; j < hi; j++ {
				if i := l.pos[j]; i < m && h[i] != 0 {
					acc += g[i]
				}
			}
			b.tiles[k*ns+c] = acc
		}
	}
}

// tapAdjoint runs the reverse program of every tap: it returns the
// cotangent of each tap's starting state ([D][ntaps]), adds the parameter
// gradients to gp and the shared-gradient contributions to the tiles, tap
// by tap in order.
func (sw *Sweep) tapAdjoint(rev *tape.Exec, tapbar []float64, gp [][]float64, tiles []float64) ([][]float64, error) {
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
	g := make([][]float64, st.P+st.S)
	for c := range g {
		g[c] = make([]float64, nt)
		if c < st.P {
			in = append(in, g[c])
		}
		out = append(out, g[c])
	}
	if err := tp.st.mask.runLive(rev, out, in, tp.st.h, nt); err != nil {
		return nil, err
	}
	for i, j := range sw.p.Taps.Traj {
		k := tp.pos[j]
		for c := 0; c < st.P; c++ {
			gp[c][k] += g[c][i]
		}
		if tp.st.h[i] == 0 {
			continue // a tap of size 0 is the state itself
		}
		for c := 0; c < st.S; c++ {
			tiles[j/TileSize*st.S+c] += g[st.P+c][i]
		}
	}
	return y, nil
}

// addTaps adds the tap cotangents of taps at step s to λ.
func (sw *Sweep) addTaps(lam, tapY [][]float64, s int) {
	tp := sw.p.Taps
	for _, i := range sw.l.tapsAt(s) {
		k := sw.tp.pos[tp.Traj[i]]
		for c := range lam {
			lam[c][k] += tapY[c][i]
		}
	}
}
