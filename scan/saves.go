package scan

import (
	"fmt"
	"sort"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Saves asks a sweep for every trajectory's states at save times shared
// by the ensemble, read from the continuous extension of the steps that
// bracket them (Step.Ext):
//
//	y(τ) = y_s + Σ_{j=1…Terms} θ^j·w_j,   θ = (τ − t_s)/h_s,
//
// for the step s with t_s ≤ τ < t_s + h_s, where t_0 = T0[j] and
// t_{s+1} = t_s + h_s as the sweep accumulates it; the state y_s itself
// where τ = t_s, y_0 where τ ≤ t_0, and the final state where τ is at or
// after the trajectory's end. No extra step is taken: a row with a save
// inside a step runs the extended step in place of the plain one, and its
// reverse in the backward sweep, with the coefficients' cotangents
// w̄_j = Σ θ^j·ȳ(τ) over the step's save times.
//
// Every trajectory keeps one cursor into Times, so the bookkeeping costs
// O(1) per trajectory and step; each save costs Terms·D multiply-adds
// forward (Interp) and as many backward, plus the D values written and
// read.
type Saves struct {
	// Times are the save times, non-decreasing, the same for every
	// trajectory.
	Times []float64

	// Out holds the saved states, [N][K][D]: trajectory j's state at
	// Times[k], component c, at Out[(j*K+k)*D+c] (K = len(Times)). The
	// forward sweep writes them, unless Given.
	Out []float64

	// Given reports that Out already holds the saved states, as the rule
	// above computes them (a recorder that interpolated as it stepped):
	// the forward sweep then only steps. The backward sweep reads Times
	// alone.
	Given bool

	// BarMajor reports that the saves' cotangents given to the backward
	// sweep (Sweep.BackwardFrom's tapbar) are save-major, [K·D][N]:
	// trajectory j's at Times[k], component c, at bar[(k·D+c)·N+j], as a
	// loss program over the trajectories' columns writes them, instead of
	// in Out's layout.
	BarMajor bool

	// BarStride, with BarMajor, is the distance between the rows of the
	// saves' cotangents: trajectory j's at Times[k], component c, at
	// bar[(k·D+c)·BarStride+j]. 0 means N; a larger stride (rows padded
	// past N) keeps successive rows out of the same cache sets.
	BarStride int

	// BarScale, if not 0 or 1, multiplies every cotangent of a save as
	// the backward sweep reads it (each product rounded once, as if the
	// cotangents had been scaled first).
	BarScale float64
}

// Interp sets dst[c] = y[c] + θ·(w_1[c] + θ·(w_2[c] + … + θ·w_m[c])) for
// c < len(dst), with w_j[c] at w[(j−1)·len(dst) + c] and m =
// len(w)/len(dst): Horner's rule in that order, every product rounded
// before its sum (as the ops compute it), so that every engine and
// DenseSolution.Evaluate read a continuous extension bit for bit alike.
// It costs m·len(dst) multiply-adds. dst must not alias y or w.
func Interp(dst, y, w []float64, theta float64) {
	d := len(dst)
	if d == 0 {
		return
	}
	m := len(w) / d
	y, w = y[:d], w[:m*d]
	// Four components at a time, their chains in registers side by side
	// (their latencies overlap), then the rest one at a time.
	c := 0
	for ; c+4 <= d; c += 4 {
		k := (m - 1) * d
		a0, a1, a2, a3 := w[k+c], w[k+c+1], w[k+c+2], w[k+c+3]
		for k -= d; k >= 0; k -= d {
			wj := w[k+c : k+c+4]
			a0 = wj[0] + float64(theta*a0)
			a1 = wj[1] + float64(theta*a1)
			a2 = wj[2] + float64(theta*a2)
			a3 = wj[3] + float64(theta*a3)
		}
		o, yc := dst[c:c+4], y[c:c+4]
		o[0] = yc[0] + float64(theta*a0)
		o[1] = yc[1] + float64(theta*a1)
		o[2] = yc[2] + float64(theta*a2)
		o[3] = yc[3] + float64(theta*a3)
	}
	for ; c < d; c++ {
		k := (m - 1) * d
		a := w[k+c]
		for k -= d; k >= 0; k -= d {
			a = w[k+c] + float64(theta*a)
		}
		dst[c] = y[c] + float64(theta*a)
	}
}

// InterpTimes sets dst[k·D:(k+1)·D] to Interp's value at θ_k = (ts[k] −
// t)/h for every k < len(ts) (D = len(y)), bit for bit as Interp (and
// θ_k as a save's): with AVX where the processor has it, four components
// at a time, else two save times at a time, their chains side by side
// (the save times of one step share y and w, and their latencies
// overlap). dst must not alias y or w.
func InterpTimes(dst, y, w, ts []float64, t, h float64) {
	d, nt := len(y), len(ts)
	if d == 0 || nt == 0 {
		return
	}
	m := len(w) / d
	dst, w = dst[:nt*d], w[:m*d]
	if haveAVX && useAVX && m > 0 {
		interpTimesAVX(&dst[0], &y[0], &w[0], &ts[0], nt, t, h, d, m)
		return
	}
	top := (m - 1) * d
	k := 0
	for ; k+2 <= nt; k += 2 {
		th0, th1 := (ts[k]-t)/h, (ts[k+1]-t)/h
		o0, o1 := dst[k*d:(k+1)*d], dst[(k+1)*d:(k+2)*d]
		c := 0
		for ; c+4 <= d; c += 4 {
			wt := w[top+c : top+c+4]
			a0, a1, a2, a3 := wt[0], wt[1], wt[2], wt[3]
			b0, b1, b2, b3 := a0, a1, a2, a3
			for j := top - d; j >= 0; j -= d {
				wj := w[j+c : j+c+4]
				a0 = wj[0] + float64(th0*a0)
				b0 = wj[0] + float64(th1*b0)
				a1 = wj[1] + float64(th0*a1)
				b1 = wj[1] + float64(th1*b1)
				a2 = wj[2] + float64(th0*a2)
				b2 = wj[2] + float64(th1*b2)
				a3 = wj[3] + float64(th0*a3)
				b3 = wj[3] + float64(th1*b3)
			}
			yc, p0, p1 := y[c:c+4], o0[c:c+4], o1[c:c+4]
			p0[0] = yc[0] + float64(th0*a0)
			p1[0] = yc[0] + float64(th1*b0)
			p0[1] = yc[1] + float64(th0*a1)
			p1[1] = yc[1] + float64(th1*b1)
			p0[2] = yc[2] + float64(th0*a2)
			p1[2] = yc[2] + float64(th1*b2)
			p0[3] = yc[3] + float64(th0*a3)
			p1[3] = yc[3] + float64(th1*b3)
		}
		for ; c < d; c++ {
			a := w[top+c]
			b := a
			for j := top - d; j >= 0; j -= d {
				a = w[j+c] + float64(th0*a)
				b = w[j+c] + float64(th1*b)
			}
			o0[c] = y[c] + float64(th0*a)
			o1[c] = y[c] + float64(th1*b)
		}
	}
	if k < nt {
		Interp(dst[k*d:], y, w, (ts[k]-t)/h)
	}
}

// useAVX lets tests compare InterpTimes' Go code with its kernel.
var useAVX = true

// checkSaves checks the saves of p.
func (p *Problem) checkSaves() error {
	sv, st := p.Saves, p.Step
	if p.Taps.Len() > 0 {
		return fmt.Errorf("scan: a Problem has Taps or Saves, not both")
	}
	if st.Ext == nil {
		return fmt.Errorf("scan: Saves need Step.Ext, the step with its continuous extension")
	}
	for k := 1; k < len(sv.Times); k++ {
		if !(sv.Times[k] >= sv.Times[k-1]) {
			return fmt.Errorf("scan: Saves.Times[%d] = %v is before Times[%d] = %v (or not a number); save times must be non-decreasing",
				k, sv.Times[k], k-1, sv.Times[k-1])
		}
	}
	if want := p.Mesh.N * len(sv.Times) * st.D; len(sv.Out) != want {
		return fmt.Errorf("scan: len(Saves.Out) = %d, want N·K·D = %d", len(sv.Out), want)
	}
	return nil
}

// saveSweep evaluates Saves during a sweep, and their cotangents during
// the backward one. Lanes are the layout's permuted trajectories.
type saveSweep struct {
	sv      *Saves
	l       *layout
	d, m, k int // state dimension, terms, save times

	cur []int // [n] forward: the next save; backward: the end of the row's range
	end []int // [n] the row's range: forward its end, backward its start

	ext, extRev *tape.Exec
	w, wbar     [][]float64 // [m·D][n]: a row's coefficients and their cotangents
	ys          [][]float64 // [D][n]: the states before the row's step
	t           []float64   // [n]: the times before the row's step
	lane        []float64   // one lane's coefficients [m·D]
	y           []float64   // one lane's state [D]
	g           []float64   // one save's cotangent [D] (see bar)
	mask        masker

	// The backward row's cotangents (gatherRow): lane i's saves
	// end[i]…cur[i]-1 at rowg[base[i]·D:], one after the other.
	base     []int
	rowg     []float64
	gathered bool // rowg holds the current row's cotangents

	rowAcc []float64 // the row kernels' sums of four lanes (coefBarRows, addRowRows)

	// The backward row's cotangents as coefBarRows read them, for
	// addRowRows: lanes i0…i0+3's saves k0…k1-1 (group4) at
	// rowBar[rowOff[i0/4]:], save by save, each d vectors of the four
	// lanes (scaled); rowOff −1 where they were not kept (lanes split,
	// no saves, or past rowBarMax). rowKept reports that they are the
	// current row's. rowScr is the kernel's scratch where they are not
	// kept.
	rowBar, rowScr []float64
	// rowPow is coefRowsAVX's scratch of cotangents and powers of θ
	// (coefRowsScratch).
	rowPow  []float64
	rowOff  []int
	rowKept bool
}

// rowBarMax is the most cotangents coefBarRows keeps for addRowRows (4
// MB): enough for a row of thousands of lanes with tens of saves a step
// at small D, to be read back while still in cache; groups past it are
// read from the save-major rows again. (A variable for tests.)
var rowBarMax = 1 << 19

// newSaveSweep prepares the saves of p for a sweep in layout l; its
// buffers are the Step's, reused from scan to scan.
func newSaveSweep(p *Problem, l *layout, set *tape.ExecSettings) (*saveSweep, error) {
	st := p.Step
	ext, extRev, err := st.extended(set)
	if err != nil {
		return nil, err
	}
	n, d, m := l.n, st.D, st.Terms
	sw := st.saves
	if sw == nil || len(sw.w) != m*d || cap(sw.cur) < n {
		sw = &saveSweep{w: cols(m*d, n), wbar: cols(m*d, n), ys: cols(d, n), t: make([]float64, n),
			cur: make([]int, n), end: make([]int, n), lane: make([]float64, m*d), y: make([]float64, d), g: make([]float64, d)}
		st.saves = sw
	}
	sw.sv, sw.l, sw.d, sw.m, sw.k = p.Saves, l, d, m, len(p.Saves.Times)
	sw.ext, sw.extRev = ext, extRev
	sw.cur, sw.end = sw.cur[:n], sw.end[:n]
	sw.gathered, sw.rowKept = false, false
	clear(sw.cur)
	return sw, nil
}

func cols(w, n int) [][]float64 {
	x := make([][]float64, w)
	for c := range x {
		x[c] = make([]float64, n)
	}
	return x
}

// out returns the saved state of lane i (trajectory perm[i]) at save k.
func (sw *saveSweep) out(i, k int) []float64 {
	o := (sw.l.perm[i]*sw.k + k) * sw.d
	return sw.sv.Out[o : o+sw.d]
}

// forwardRanges sets the end of each of the first m lanes' saves on the
// row whose steps start at t with sizes h (those before t + h), and
// reports whether one of them is inside a step (θ > 0).
func (sw *saveSweep) forwardRanges(t, h []float64, m int) bool {
	ts, K := sw.sv.Times, sw.k
	inside := false
	for i, c := range sw.cur[:m] {
		e, next := c, t[i]+h[i]
		for e < K && ts[e] < next {
			e++
		}
		sw.end[i] = e
		if e > c && ts[e-1] > t[i] {
			inside = true
		}
	}
	return inside
}

// writeStates writes the saves of the row's ranges of the first m lanes,
// all of which are the states y before the step, and advances the
// cursors.
func (sw *saveSweep) writeStates(y [][]float64, m int) {
	for i, e := range sw.end[:m] {
		for k := sw.cur[i]; k < e; k++ {
			o := sw.out(i, k)
			for c := range o {
				o[c] = y[c][i]
			}
		}
		sw.cur[i] = e
	}
}

// writeRow writes the saves of the row's ranges of the first m lanes from
// the states before the step (sw.ys, at times sw.t), the step sizes h and
// the row's coefficients (sw.w), and advances the cursors.
func (sw *saveSweep) writeRow(h []float64, m int) {
	ts, d := sw.sv.Times, sw.d
	for i, e := range sw.end[:m] {
		c0 := sw.cur[i]
		if c0 == e {
			continue
		}
		sw.cur[i] = e
		y := sw.y
		for c := range y {
			y[c] = sw.ys[c][i]
		}
		t := sw.t[i]
		k := c0
		for ; k < e && ts[k] <= t; k++ {
			copy(sw.out(i, k), y)
		}
		if k == e {
			continue
		}
		for x, w := range sw.w {
			sw.lane[x] = w[i]
		}
		o := (sw.l.perm[i]*sw.k + k) * d
		InterpTimes(sw.sv.Out[o:o+(e-k)*d], y, sw.lane[:sw.m*d], ts[k:e], t, h[i])
	}
}

// writeFinal writes the saves at or after each lane's end from the final
// states y ([D][n], permuted).
func (sw *saveSweep) writeFinal(y [][]float64) {
	for i := range sw.cur {
		for k := sw.cur[i]; k < sw.k; k++ {
			o := sw.out(i, k)
			for c := range o {
				o[c] = y[c][i]
			}
		}
		sw.cur[i] = sw.k
	}
}

// stepRow advances the first m lanes of x by step s (x.h loaded) and
// writes the row's saves: with the extended step if a save is inside a
// step.
func (sw *saveSweep) stepRow(e *tape.Exec, x *state, in [][]float64, m int) error {
	if !sw.forwardRanges(x.t, x.h, m) {
		sw.writeStates(x.y, m)
		return stepForward(e, x, in, m)
	}
	copy(sw.t[:m], x.t[:m])
	for c := range x.y {
		copy(sw.ys[c][:m], x.y[c][:m])
	}
	in = x.inputs(in, m)
	x.outs = x.outs[:0]
	for _, c := range x.y {
		x.outs = append(x.outs, c[:m])
	}
	for _, c := range sw.w {
		x.outs = append(x.outs, c[:m])
	}
	if err := x.mask.runLive(sw.ext, x.outs, in, x.h, m); err != nil {
		return err
	}
	for i, h := range x.h[:m] {
		x.t[i] += h
	}
	sw.writeRow(x.h, m)
	return nil
}

// fromStored writes every save from stored states: the rows with a save
// inside a step run the extended step from their stored states.
func (sw *saveSweep) fromStored(p *Problem, st *Stored) error {
	l, d := sw.l, sw.d
	n := l.n
	pc := cols(p.Step.P, n)
	for c := range pc {
		for i, j := range l.perm {
			pc[c][i] = p.P[c*n+j]
		}
	}
	h := make([]float64, n)
	yn := cols(d, n)
	var row []float64
	var in, outs [][]float64
	for s := 0; s < l.rows; s++ {
		m := l.active[s]
		row = gatherStored(row, st, l, d, s)
		copy(sw.t[:m], row[:m])
		for c := range sw.ys {
			copy(sw.ys[c][:m], row[(1+c)*m:(2+c)*m])
		}
		for i, j := range l.perm[:m] {
			h[i] = p.Mesh.H[s*n+j]
		}
		if !sw.forwardRanges(sw.t, h, m) {
			sw.writeStates(sw.ys, m)
			continue
		}
		in = append(in[:0], sw.t[:m], h[:m])
		for _, c := range sw.ys {
			in = append(in, c[:m])
		}
		for _, c := range pc {
			in = append(in, c[:m])
		}
		for c := range p.Shared {
			in = append(in, p.Shared[c:c+1])
		}
		outs = outs[:0]
		for _, c := range yn {
			outs = append(outs, c[:m])
		}
		for _, c := range sw.w {
			outs = append(outs, c[:m])
		}
		if err := sw.mask.runLive(sw.ext, outs, in, h, m); err != nil {
			return err
		}
		sw.writeRow(h, m)
	}
	end := cols(d, n)
	for c := range end {
		for i, j := range l.perm {
			end[c][i] = st.EndY[c*n+j]
		}
	}
	sw.writeFinal(end)
	return nil
}

// backwardStart sets each lane's cursor to the end of its saves inside
// its steps (those before its end time tEnd, permuted; none for a
// trajectory without steps) and adds the cotangents bar
// of the saves at or after it, the final state's, to λ (bar laid out as
// Saves.BarMajor says).
func (sw *saveSweep) backwardStart(lam [][]float64, tEnd, bar []float64, lens []int) {
	ts, K := sw.sv.Times, sw.k
	for i, j := range sw.l.perm {
		hi := 0
		if lens[j] > 0 {
			hi = sort.SearchFloat64s(ts, tEnd[i]) // the first save at or after the end
		}
		sw.cur[i] = hi
		for k := hi; k < K; k++ {
			g := sw.bar(bar, j, k)
			for c := range lam {
				lam[c][i] += g[c]
			}
		}
	}
}

// bar returns the cotangent of trajectory j's save k, from bar in the
// layout Saves.BarMajor says, scaled by Saves.BarScale: a range of bar
// itself where it is laid out so and not scaled, else a copy in sw.g.
func (sw *saveSweep) bar(bar []float64, j, k int) []float64 {
	d, g := sw.d, sw.g
	scale := sw.sv.BarScale
	scaled := scale != 0 && scale != 1
	if !sw.sv.BarMajor {
		o := (j*sw.k + k) * d
		if !scaled {
			return bar[o : o+d]
		}
		for c := range g {
			g[c] = bar[o+c] * scale
		}
		return g
	}
	n := sw.barStride()
	o := k*d*n + j
	if scaled {
		for c := range g {
			g[c] = bar[o+c*n] * scale
		}
	} else {
		for c := range g {
			g[c] = bar[o+c*n]
		}
	}
	return g
}

// barStride returns the distance between the rows of save-major
// cotangents (Saves.BarStride, or N).
func (sw *saveSweep) barStride() int {
	if s := sw.sv.BarStride; s > 0 {
		return s
	}
	return sw.l.n
}

// backwardRanges sets the start of each of the first m lanes' saves on
// row s, whose steps start at t, and reports whether one of them is
// inside a step.
func (sw *saveSweep) backwardRanges(t []float64, s, m int) bool {
	ts := sw.sv.Times
	inside := false
	for i, hi := range sw.cur[:m] {
		lo := 0
		if s > 0 {
			lo = hi
			for lo > 0 && ts[lo-1] >= t[i] {
				lo--
			}
		}
		sw.end[i] = lo
		if hi > lo && ts[hi-1] > t[i] {
			inside = true
		}
	}
	return inside
}

// gatherRow reads the cotangents of the row's saves of the first m lanes
// (their ranges set by backwardRanges) from bar, laid out as
// Saves.BarMajor says and scaled by Saves.BarScale, into rowg, lane by
// lane (see saveSweep.base), once for both coefBar and addRow.
func (sw *saveSweep) gatherRow(bar []float64, m int) {
	d, K, n := sw.d, sw.k, sw.barStride()
	lo, hi := sw.end[:m], sw.cur[:m]
	if cap(sw.base) < m {
		sw.base = make([]int, m)
	}
	base := sw.base[:m]
	total := 0
	for i, h := range hi {
		base[i] = total
		total += h - lo[i]
	}
	if cap(sw.rowg) < total*d {
		sw.rowg = make([]float64, total*d)
	}
	rowg := sw.rowg[:total*d]
	scale := sw.sv.BarScale
	if scale == 0 {
		scale = 1
	}
	perm := sw.l.perm
	sw.gathered = true
	if !sw.sv.BarMajor {
		for i, l := range lo {
			src := bar[(perm[i]*K+l)*d : (perm[i]*K+hi[i])*d]
			dst := rowg[base[i]*d : (base[i]+hi[i]-l)*d]
			if scale == 1 {
				copy(dst, src)
			} else {
				for x, v := range src {
					dst[x] = v * scale
				}
			}
		}
		return
	}
	// Lane i's saves l…hi-1 are bar's rows l·D … hi·D-1, n apart, at
	// column perm[i].
	for i, l := range lo {
		dst := rowg[base[i]*d : (base[i]+hi[i]-l)*d]
		if len(dst) == 0 {
			continue
		}
		src := bar[l*d*n+perm[i] : (hi[i]*d-1)*n+perm[i]+1]
		if scale == 1 {
			for x := range dst {
				dst[x] = src[x*n]
			}
		} else {
			for x := range dst {
				dst[x] = src[x*n] * scale
			}
		}
	}
}

// coefBar returns the cotangents of the row's coefficients for its first
// m lanes, whose steps start at t with sizes h: w̄_j = Σ θ^j·ȳ over each
// lane's saves inside its step (bar laid out as Saves.BarMajor says),
// zero elsewhere, each sum in time order.
func (sw *saveSweep) coefBar(bar, t, h []float64, m int) [][]float64 {
	if sw.byLanes() {
		return sw.coefBarLanes(bar, t, h, m)
	}
	if sw.byRows() {
		return sw.coefBarRows(bar, t, h, m)
	}
	sw.gatherRow(bar, m)
	ts, d, terms := sw.sv.Times, sw.d, sw.m
	lane := sw.lane[:terms*d]
	lo, hi := sw.end[:m], sw.cur[:m]
	for i, l := range lo {
		k, e := l, hi[i]
		for k < e && !(ts[k] > t[i]) { // a save at the step's start has no coefficient cotangent
			k++
		}
		if k == e {
			for _, c := range sw.wbar {
				c[i] = 0
			}
			continue
		}
		clear(lane)
		addPowersTimes(lane, sw.rowg[(sw.base[i]+k-l)*d:(sw.base[i]+e-l)*d], ts[k:e], t[i], h[i], terms)
		for x, v := range lane {
			sw.wbar[x][i] = v
		}
	}
	return sw.wbar
}

// addRow adds the cotangents of the row's saves to λ of the first m
// lanes (∂y(τ)/∂y_s = I), each lane's in time order, and moves the
// cursors to the row's start.
func (sw *saveSweep) addRow(lam [][]float64, bar []float64, m int) {
	if sw.byLanes() {
		sw.addRowLanes(lam, bar, m)
		copy(sw.cur[:m], sw.end[:m])
		return
	}
	if sw.byRows() {
		sw.addRowRows(lam, bar, m)
		copy(sw.cur[:m], sw.end[:m])
		return
	}
	if !sw.gathered {
		sw.gatherRow(bar, m)
	}
	sw.gathered = false
	d := sw.d
	lo, hi := sw.end[:m], sw.cur[:m]
	for i, l := range lo {
		g := sw.rowg[sw.base[i]*d : (sw.base[i]+hi[i]-l)*d]
		if len(g) == 0 {
			continue
		}
		// Each component's sum in a register, over the saves in time
		// order (as λ += ȳ(τ) save by save would add them).
		for c, col := range lam {
			acc := col[i]
			for x := c; x < len(g); x += d {
				acc += g[x]
			}
			col[i] = acc
		}
	}
	copy(sw.cur[:m], sw.end[:m])
}

// addPowersTimes adds θ_k^j·g[k·D:(k+1)·D] to lane[(j−1)·D:] for j =
// 1…terms and every save time ts[k], θ_k = (ts[k] − t)/h, in the order
// of the save times: addPowers at each, bit for bit, with AVX where the
// processor has it (D = len(g)/len(ts)).
func addPowersTimes(lane, g, ts []float64, t, h float64, terms int) {
	ns := len(ts)
	if ns == 0 || terms == 0 {
		return
	}
	d := len(g) / ns
	g, lane = g[:ns*d], lane[:terms*d]
	if haveAVX && useAVX && d > 0 {
		addPowersAVX(&lane[0], &g[0], &ts[0], ns, t, h, d, terms)
		return
	}
	for k, tk := range ts {
		addPowers(lane, g[k*d:(k+1)*d], (tk-t)/h, terms)
	}
}

// addPowers adds θ^j·g to lane[(j−1)·len(g):] for j = 1…terms (θ^j by
// repeated multiplication, every product rounded before its sum), four
// components at a time.
func addPowers(lane, g []float64, th float64, terms int) {
	d := len(g)
	lane = lane[:terms*d]
	c := 0
	for ; c+4 <= d; c += 4 {
		g0, g1, g2, g3 := g[c], g[c+1], g[c+2], g[c+3]
		pw := th
		for x := c; x < len(lane); x += d {
			l := lane[x : x+4]
			l[0] += float64(pw * g0)
			l[1] += float64(pw * g1)
			l[2] += float64(pw * g2)
			l[3] += float64(pw * g3)
			pw *= th
		}
	}
	for ; c < d; c++ {
		v, pw := g[c], th
		for x := c; x < len(lane); x += d {
			lane[x] += float64(pw * v)
			pw *= th
		}
	}
}

// byRows reports whether coefBar and addRow read the cotangents four
// lanes at a time, a save's component across the lanes, with AVX
// (coefBarRows, addRowRows), rather than gathering each lane's saves
// first (gatherRow): in either layout (see barLayout).
func (sw *saveSweep) byRows() bool {
	return haveAVX && useAVX && useRows
}

// barLayout returns the distances, in values, between the saves'
// cotangents of successive components (rs) and trajectories (cs), as
// the row kernels address them: trajectory j's at save k, component c,
// at bar[(k·D+c)·rs + j·cs]. Save-major (Saves.BarMajor): rs the rows'
// stride, cs 1; else Out's layout: rs 1, cs K·D.
func (sw *saveSweep) barLayout() (rs, cs int) {
	if sw.sv.BarMajor {
		return sw.barStride(), 1
	}
	return 1, sw.k * sw.d
}

// useRows lets tests compare coefBarRows and addRowRows with the
// lane-by-lane loops.
var useRows = true

// byLanes reports whether coefBar and addRow run their AVX kernels lane
// by lane on the cotangents in the saves' own layout (coefBarLanes,
// addRowLanes): there a lane's saves of a row are one span, a save's
// components side by side, which the kernels read as vectors of four
// components (D a multiple of 4, at most 8 terms) where the row kernels
// would gather and transpose four lanes' values one by one.
func (sw *saveSweep) byLanes() bool {
	return sw.byRows() && useLanes && !sw.sv.BarMajor && sw.d%4 == 0 && sw.m >= 1 && sw.m <= 8
}

// useLanes lets tests compare coefBarLanes and addRowLanes with the row
// kernels.
var useLanes = true

// coefBarLanes is coefBar lane by lane (coefLanesAVX, coefLaneAVX) on the
// cotangents in the saves' own layout: the same sums, bit for bit. A
// lane's saves at its step's start (the first of its range, θ = 0) have
// no term; a lane with no term gets zeros. Where the row's saves number
// rowBarMax values or fewer it keeps their cotangents, scaled, one lane's
// after the other (rowBar), for addRowLanes to read back from there.
func (sw *saveSweep) coefBarLanes(bar, t, h []float64, m int) [][]float64 {
	d, terms, ts := sw.d, sw.m, sw.sv.Times
	if ns := (sw.k + 3) / 4 * 4 * 8; len(sw.rowPow) < ns {
		sw.rowPow = make([]float64, ns)
	}
	lo, hi := sw.end[:m], sw.cur[:m]
	total := 0
	for i, l := range lo {
		total += hi[i] - l
	}
	total *= d
	keep, gb := 0, sw.rowScr
	if total <= rowBarMax {
		if len(sw.rowBar) < total {
			sw.rowBar = make([]float64, min(rowBarMax, max(total, 2*len(sw.rowBar))))
		}
		keep, gb = 1, sw.rowBar
	} else if len(sw.rowScr) < sw.k*d {
		sw.rowScr = make([]float64, sw.k*d)
		gb = sw.rowScr
	}
	if m > 0 && total > 0 {
		_, cs := sw.barLayout()
		coefLanesAVX(&sw.wbar[0], &gb[0], &bar[0], &ts[0], &sw.rowPow[0], &sw.l.perm[0], &lo[0], &hi[0], &t[0], &h[0], m, cs, d, terms, keep, sw.barScale())
	} else {
		for _, c := range sw.wbar {
			clear(c[:m])
		}
	}
	sw.rowKept = keep == 1
	return sw.wbar
}

// addRowLanes is addRow's sums lane by lane (addLaneAVX) on the
// cotangents in the saves' own layout, or on those coefBarLanes kept: λ
// plus each lane's saves' cotangents in time order, bit for bit.
func (sw *saveSweep) addRowLanes(lam [][]float64, bar []float64, m int) {
	_, cs := sw.barLayout()
	d, scale := sw.d, sw.barScale()
	kept := sw.rowKept
	sw.rowKept = false
	lo, hi, perm := sw.end[:m], sw.cur[:m], sw.l.perm[:m]
	off := 0 // the lane's kept cotangents in rowBar
	for i := range m {
		k, e := lo[i], hi[i]
		switch {
		case k == e:
		case kept:
			// (kept scaled: ×1 leaves every value as it is)
			addLaneAVX(&lam[0], i, &sw.rowBar[off], e-k, d, 1)
			off += (e - k) * d
		default:
			addLaneAVX(&lam[0], i, &bar[perm[i]*cs+k*d], e-k, d, scale)
		}
	}
}

// group4 sets the columns (each trajectory's offset in the cotangents,
// see barLayout), save ranges, start times and step sizes of the lanes
// i0…i0+3 of the first m (a lane past m reads column perm[i0] and has no
// saves) and returns the range of saves they span, k0 ≥ k1 if none.
func (sw *saveSweep) group4(g *rowGroup, t, h []float64, i0, m int) (k0, k1 int) {
	k0, k1 = sw.k, 0
	_, cs := sw.barLayout()
	for q := range 4 {
		i := i0 + q
		if i >= m {
			g.col[q], g.lo[q], g.hi[q], g.t[q], g.h[q] = sw.l.perm[i0]*cs, 0, 0, 0, 1
			continue
		}
		lo, hi := sw.end[i], sw.cur[i]
		g.col[q], g.lo[q], g.hi[q] = sw.l.perm[i]*cs, lo, hi
		if t != nil {
			g.t[q], g.h[q] = t[i], h[i]
		}
		if lo < hi {
			k0, k1 = min(k0, lo), max(k1, hi)
		}
	}
	return k0, k1
}

// rowGroup holds four lanes' columns, save ranges, start times and step
// sizes for the row kernels.
type rowGroup struct {
	col, lo, hi [4]int
	t, h        [4]float64
}

// split reports whether the group's saves k0…k1-1 span more than twice
// their lanes' own, plus eight (lanes at different times: ragged start
// or end times), so that the kernels would pass over many saves of no
// lane: each lane then runs alone (only), its sums the same.
func (g *rowGroup) split(k0, k1 int) bool {
	own := 0
	for q := range 4 {
		own += g.hi[q] - g.lo[q]
	}
	return k1-k0 > 2*own+8
}

// only returns the group with lane q's saves alone.
func (g *rowGroup) only(q int) *rowGroup {
	o := *g
	for x := range 4 {
		if x != q {
			o.lo[x], o.hi[x] = 0, 0
		}
	}
	return &o
}

// barScale returns the factor the sweep multiplies the saves' cotangents
// by (Saves.BarScale, 1 for 0).
func (sw *saveSweep) barScale() float64 {
	if s := sw.sv.BarScale; s != 0 {
		return s
	}
	return 1
}

// coefBarRows is coefBar four lanes at a time (coefRowsAVX): the same
// sums, bit for bit. It keeps the cotangents it reads (rowBar), so that
// addRowRows reads them from there rather than from the save-major rows
// again.
func (sw *saveSweep) coefBarRows(bar, t, h []float64, m int) [][]float64 {
	d, terms := sw.d, sw.m
	na := coefRowsTerms(terms) * d * 4
	if cap(sw.rowAcc) < na {
		sw.rowAcc = make([]float64, na)
	}
	acc := sw.rowAcc[:na]
	if ns := coefRowsScratch(d, terms); len(sw.rowPow) < ns {
		sw.rowPow = make([]float64, ns)
	}
	if cap(sw.rowOff) < (m+3)/4 {
		sw.rowOff = make([]int, (m+3)/4)
	}
	var g rowGroup
	scale, ts := sw.barScale(), sw.sv.Times
	bs, _ := sw.barLayout()
	if len(sw.rowScr) < d*4*16 {
		sw.rowScr = make([]float64, d*4*16)
	}
	// run adds the saves k0…k1-1 of the group's lanes to acc, sixteen at
	// a time through the scratch (the sums go on in the order of k).
	run := func(g *rowGroup, k0, k1 int) {
		for a := k0; a < k1; a += 16 {
			coefRowsAVX(&acc[0], &sw.rowScr[0], &sw.rowPow[0], &bar[0], &ts[0], &g.col[0], &g.lo[0], &g.hi[0], &g.t[0], &g.h[0], a, min(a+16, k1), bs, d, terms, scale)
		}
	}
	used := 0 // rowBar's values kept
	for i0 := 0; i0 < m; i0 += 4 {
		if !sw.sv.BarMajor {
			sw.prefetchGroup(bar, i0+4, m)
		}
		k0, k1 := sw.group4(&g, t, h, i0, m)
		clear(acc)
		sw.rowOff[i0/4] = -1
		need := (k1 - k0) * d * 4
		switch {
		case k0 >= k1:
		case g.split(k0, k1):
			for q := range 4 {
				if g.lo[q] < g.hi[q] {
					run(g.only(q), g.lo[q], g.hi[q])
				}
			}
		case used+need > rowBarMax:
			run(&g, k0, k1)
		default:
			if len(sw.rowBar) < used+need {
				b := make([]float64, min(rowBarMax, max(used+need, 2*len(sw.rowBar))))
				copy(b, sw.rowBar[:used])
				sw.rowBar = b
			}
			coefRowsAVX(&acc[0], &sw.rowBar[used], &sw.rowPow[0], &bar[0], &ts[0], &g.col[0], &g.lo[0], &g.hi[0], &g.t[0], &g.h[0], k0, k1, bs, d, terms, scale)
			sw.rowOff[i0/4] = used
			used += need
		}
		n := min(4, m-i0)
		for x, w := range sw.wbar {
			a := acc[x*4 : x*4+n]
			copy(w[i0:i0+n], a)
		}
	}
	sw.rowKept = true
	return sw.wbar
}

// coefRowsTerms is the number of terms whose sums coefRowsAVX computes
// for terms: terms rounded up to a multiple of 4 (its sums go four or
// eight at a time; those past terms are of no use).
func coefRowsTerms(terms int) int { return (terms + 3) &^ 3 }

// coefRowsScratch is the number of values of coefRowsAVX's scratch for
// d components and terms: sixteen saves' cotangents and powers of θ,
// four lanes each.
func coefRowsScratch(d, terms int) int { return 16 * (d + coefRowsTerms(terms)) * 4 }

// prefetchGroup prefetches the cotangents of the row's saves of lanes
// i0…i0+3 of the first m, in the saves' own layout: each lane's a span
// of its own, which the processor's prefetchers, following a few streams,
// do not fetch ahead (the save-major rows are prefetched by coefRowsAVX).
func (sw *saveSweep) prefetchGroup(bar []float64, i0, m int) {
	var off, lines [4]int
	n := 0
	for i := i0; i < min(i0+4, m); i++ {
		lo, hi := sw.end[i], sw.cur[i]
		if lo >= hi {
			continue
		}
		o := (sw.l.perm[i]*sw.k + lo) * sw.d
		off[n], lines[n] = o, ((o+(hi-lo)*sw.d-1)>>3)-(o>>3)+1 // (64-byte lines, if bar is aligned to one)
		n++
	}
	if n > 0 {
		prefetchSpans(&bar[0], &off[0], &lines[0], n)
	}
}

// addRowRows is addRow's sums four lanes at a time (addRowsAVX, or
// addRowsGBAVX on the cotangents coefBarRows kept for the row): λ plus
// each lane's saves' cotangents in time order, bit for bit.
func (sw *saveSweep) addRowRows(lam [][]float64, bar []float64, m int) {
	d := sw.d
	if cap(sw.rowAcc) < d*4 {
		sw.rowAcc = make([]float64, d*4)
	}
	acc := sw.rowAcc[:d*4]
	kept := sw.rowKept
	sw.rowKept = false
	var g rowGroup
	scale := sw.barScale()
	bs, _ := sw.barLayout()
	for i0 := 0; i0 < m; i0 += 4 {
		k0, k1 := sw.group4(&g, nil, nil, i0, m)
		if k0 >= k1 {
			continue
		}
		n := min(4, m-i0)
		for c, col := range lam {
			copy(acc[c*4:c*4+n], col[i0:i0+n])
		}
		switch {
		case kept && sw.rowOff[i0/4] >= 0:
			addRowsGBAVX(&acc[0], &sw.rowBar[sw.rowOff[i0/4]], &g.lo[0], &g.hi[0], k0, k1, d)
		case g.split(k0, k1):
			for q := range 4 {
				if o := g.only(q); g.lo[q] < g.hi[q] {
					addRowsAVX(&acc[0], &bar[0], &o.col[0], &o.lo[0], &o.hi[0], g.lo[q], g.hi[q], bs, d, scale)
				}
			}
		default:
			addRowsAVX(&acc[0], &bar[0], &g.col[0], &g.lo[0], &g.hi[0], k0, k1, bs, d, scale)
		}
		for c, col := range lam {
			copy(col[i0:i0+n], acc[c*4:c*4+n])
		}
	}
}

// ScatterCol sets dst[x·stride] = src[x] for x < len(src): a column of
// save-major rows stride apart (a trajectory's saves by save time),
// prefetching, where the processor has AVX, the line of the same rows
// eight columns on, which the next trajectories' columns fill. It panics
// if dst is too short.
func ScatterCol(dst []float64, stride int, src []float64) {
	n := len(src)
	if n == 0 {
		return
	}
	_ = dst[(n-1)*stride]
	if haveAVX && useAVX {
		scatterColAVX(&dst[0], &src[0], n, stride)
		return
	}
	for x, v := range src {
		dst[x*stride] = v
	}
}

// GatherRows sets dst[i·stride+x] = cols[x][i] for i < n and x <
// len(cols): n lanes' values of the columns cols, a row of stride values
// each, stride ≥ len(cols) (a transpose), with AVX where the processor
// has it, four columns of four lanes at a time. The values are copied bit
// for bit. It panics if dst or a column is too short.
func GatherRows(dst []float64, stride, n int, cols [][]float64) {
	nc := len(cols)
	if n == 0 || nc == 0 {
		return
	}
	_ = dst[(n-1)*stride+nc-1]
	x := 0
	if n4 := n &^ 3; haveAVX && useAVX && n4 > 0 && stride >= nc {
		for ; x+4 <= nc; x += 4 {
			c0, c1, c2, c3 := cols[x][:n], cols[x+1][:n], cols[x+2][:n], cols[x+3][:n]
			gatherRows4AVX(&dst[x], &c0[0], &c1[0], &c2[0], &c3[0], n4, stride)
			for i := n4; i < n; i++ {
				r := dst[i*stride+x : i*stride+x+4]
				r[0], r[1], r[2], r[3] = c0[i], c1[i], c2[i], c3[i]
			}
		}
	}
	for ; x < nc; x++ {
		for i, v := range cols[x][:n] {
			dst[i*stride+x] = v
		}
	}
}
