package scan

import (
	"github.com/gradsolve-go/gradsolve/internal/buf"
	"github.com/gradsolve-go/gradsolve/tape"
)

// interpTaps evaluates taps from the continuous extension of the steps
// that bracket them (Step.Ext, Taps with Theta). A row (step) s with an
// interpolating tap runs the extended step in place of the plain one, on
// all its active trajectories, and evaluates its taps from the row's
// coefficients at once: a row's coefficients live only while the sweep is
// on it, so the memory is that of the tap outputs. The backward sweep runs
// the extended step's reverse on those rows, with the coefficients'
// cotangents Σ_taps θ^j·ȳ (coefBar); the taps' direct term ∂y(θ)/∂y_k = I
// is added to λ as a state tap's is.
type interpTaps struct {
	p      *Problem
	l      *layout
	pos    []int // position of each trajectory in the permuted order
	d, m   int   // state dimension, terms
	interp []bool
	has    []bool // has[s]: some tap interpolates on row s
	out    []float64

	ext, extRev *tape.Exec
	w           [][]float64 // [m·D][n]: the coefficients of the current row
	ys          [][]float64 // [D][n]: the states before the current row's step
	wbar        [][]float64 // [m·D][n]: the coefficients' cotangents
	row         []float64   // a row of stored states (fromStored)
	lane, acc   []float64   // one trajectory's state and coefficients, its Horner sums (eval)
	mask        masker
}

// newInterpTaps classifies the taps of p, which interpolate from p.Step.Ext,
// and prepares the extended step's executors; out ([D][ntaps]) receives
// the taps' values.
func newInterpTaps(p *Problem, l *layout, pos []int, set *tape.ExecSettings, out []float64) (*interpTaps, error) {
	st, tp := p.Step, p.Taps
	ext, extRev, err := st.extended(set)
	if err != nil {
		return nil, err
	}
	// The buffers of the Step's last scan, if large enough.
	n := l.n
	it := st.interp
	if it == nil || len(it.w) != st.Terms*st.D || cap(it.ys[0]) < n {
		it = &interpTaps{w: cols(st.Terms*st.D, n), wbar: cols(st.Terms*st.D, n), ys: cols(st.D, n),
			lane: make([]float64, (st.Terms+1)*st.D), acc: make([]float64, st.D)}
		st.interp = it
	}
	it.p, it.l, it.pos, it.d, it.m, it.out, it.ext, it.extRev = p, l, pos, st.D, st.Terms, out, ext, extRev
	it.interp = buf.Make(it.interp, tp.Len())
	it.has = buf.Make(it.has, l.rows+1)
	for i, j := range tp.Traj {
		s := tp.Step[i]
		if tp.Theta[i] != 0 && s < p.Mesh.Len[j] && p.Mesh.H[s*n+j] != 0 {
			it.interp[i], it.has[s] = true, true
		}
	}
	return it, nil
}

func cols(w, n int) [][]float64 {
	x := make([][]float64, w)
	for c := range x {
		x[c] = make([]float64, n)
	}
	return x
}

// rowHas reports whether a tap interpolates on row s.
func (it *interpTaps) rowHas(s int) bool { return s < len(it.has) && it.has[s] }

// collect writes the taps at step s that are the state itself (the state
// after s steps, in x).
func (it *interpTaps) collect(x *state, s int) {
	tp, nt := it.p.Taps, len(it.interp)
	for _, i := range it.l.tapsAt(s) {
		if it.interp[i] {
			continue
		}
		k := it.pos[tp.Traj[i]]
		for c := range x.y {
			it.out[tp.index(i, c, nt, it.d)] = x.y[c][k]
		}
	}
}

// stepRow advances the first m trajectories by step s with the extended
// step (x.h loaded), then evaluates the row's interpolating taps.
func (it *interpTaps) stepRow(x *state, in [][]float64, s, m int) error {
	for c := range x.y {
		copy(it.ys[c][:m], x.y[c][:m])
	}
	in = x.inputs(in, m)
	x.outs = x.outs[:0]
	for _, c := range x.y {
		x.outs = append(x.outs, c[:m])
	}
	for _, c := range it.w {
		x.outs = append(x.outs, c[:m])
	}
	if err := x.mask.runLive(it.ext, x.outs, in, x.h, m); err != nil {
		return err
	}
	for i, h := range x.h[:m] {
		x.t[i] += h
	}
	it.eval(it.ys, s)
	return nil
}

// eval writes the interpolating taps of row s from the states before the
// step (ys, permuted) and the row's coefficients: y + θ·(w_1 + θ·(w_2 +
// … + θ·w_m)), Horner's rule in that order (every product rounded before
// its sum, as the ops compute it). The taps of one trajectory are
// consecutive in the row's list: its coefficients are gathered once.
func (it *interpTaps) eval(ys [][]float64, s int) {
	tp, nt, d, m := it.p.Taps, len(it.interp), it.d, it.m
	taps := it.l.tapsAt(s)
	lane := it.lane[:(m+1)*d] // y then w_1 … w_m of one trajectory, component-major
	last := -1
	for _, i := range taps {
		if !it.interp[i] {
			continue
		}
		if j := tp.Traj[i]; j != last {
			last = j
			k := it.pos[j]
			for c := 0; c < d; c++ {
				lane[c] = ys[c][k]
			}
			for x := range it.w {
				lane[d+x] = it.w[x][k]
			}
		}
		// The components' Horner chains side by side, so that their
		// latencies overlap.
		th := tp.Theta[i]
		acc := it.acc[:d]
		copy(acc, lane[d+(m-1)*d:])
		for j := m - 2; j >= 0; j-- {
			wj := lane[d+j*d : d+(j+1)*d]
			for c, v := range wj {
				acc[c] = v + float64(th*acc[c])
			}
		}
		if tp.TapMajor {
			o := it.out[i*d : (i+1)*d]
			for c, v := range lane[:d] {
				o[c] = v + float64(th*acc[c])
			}
			continue
		}
		for c, v := range lane[:d] {
			it.out[c*nt+i] = v + float64(th*acc[c])
		}
	}
}

// fromStored evaluates every tap from stored states: the state taps from
// the states themselves, the interpolating ones by running the extended
// step on their rows.
func (it *interpTaps) fromStored(st *Stored) error {
	p, l, d := it.p, it.l, it.d
	n, nt := l.n, len(it.interp)
	for i, j := range p.Taps.Traj {
		if it.interp[i] {
			continue
		}
		s := p.Taps.Step[i]
		for c := 0; c < d; c++ {
			if s == p.Mesh.Len[j] {
				it.out[p.Taps.index(i, c, nt, d)] = st.EndY[c*n+j]
			} else {
				it.out[p.Taps.index(i, c, nt, d)] = st.States[s*(1+d)*n+(1+c)*n+j]
			}
		}
	}
	// The parameters in the permuted order, the step sizes of a row.
	pc := cols(p.Step.P, n)
	for c := range pc {
		for i, j := range l.perm {
			pc[c][i] = p.P[c*n+j]
		}
	}
	h := make([]float64, n)
	ys := make([][]float64, d)
	var in, outs [][]float64
	yn := cols(d, n)
	for s := 0; s < l.rows; s++ {
		if !it.has[s] {
			continue
		}
		m := l.active[s]
		it.row = gatherStored(it.row, st, l, d, s)
		for i, j := range l.perm[:m] {
			h[i] = p.Mesh.H[s*n+j]
		}
		in = append(in[:0], it.row[:m], h[:m])
		for c := range ys {
			ys[c] = it.row[(1+c)*m : (2+c)*m]
			in = append(in, ys[c])
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
		for _, c := range it.w {
			outs = append(outs, c[:m])
		}
		if err := it.mask.runLive(it.ext, outs, in, h, m); err != nil {
			return err
		}
		it.eval(ys, s)
	}
	return nil
}

// coefBar returns the cotangents of row s's coefficients for its first m
// trajectories: w̄_j = Σ θ^j·ȳ over the row's interpolating taps (tapbar
// [D][ntaps] or tap-major), zero elsewhere. The taps of one trajectory are
// consecutive in the row's list: their sums are kept in lane and written
// once.
func (it *interpTaps) coefBar(tapbar []float64, s, m int) [][]float64 {
	for _, c := range it.wbar {
		clear(c[:m])
	}
	tp, nt, d, terms := it.p.Taps, len(it.interp), it.d, it.m
	lane := it.lane[:terms*d]
	g := it.acc[:d]
	last := -1
	flush := func() {
		if last < 0 {
			return
		}
		k := it.pos[last]
		for x, v := range lane {
			it.wbar[x][k] = v
		}
	}
	for _, i := range it.l.tapsAt(s) {
		if !it.interp[i] {
			continue
		}
		if j := tp.Traj[i]; j != last {
			flush()
			last = j
			clear(lane)
		}
		th := tp.Theta[i]
		if tp.TapMajor {
			copy(g, tapbar[i*d:(i+1)*d])
		} else {
			for c := range g {
				g[c] = tapbar[c*nt+i]
			}
		}
		pw := th
		for j := 0; j < terms; j++ {
			lj := lane[j*d : (j+1)*d]
			for c, v := range g {
				lj[c] += pw * v
			}
			pw *= th
		}
	}
	flush()
	return it.wbar
}
