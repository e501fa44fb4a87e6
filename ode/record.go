package ode

import (
	"math"
	"runtime"
	"sync"
)

// recorder runs the adaptive integration of every trajectory at once. The
// trajectories still running are kept compacted at the front of its
// arrays (structure of arrays), so each trial step runs the executor over
// exactly the active ones.
type recorder struct {
	sv   *Solver
	q    *problem
	set  *Settings
	keep bool
	d    int

	// Compacted state of the active trajectories.
	m             int
	idx           []int
	t, h, t1, ep  []float64
	last          []bool
	nonfinite     []int // non-finite trial steps so far
	y, k1, p      [][]float64
	yNew, e, kOut [][]float64

	shared      [][]float64
	in, out     [][]float64
	hmin        []float64
	mesh        *Mesh
	sol         *Solution
	lastH       []float64
	rowsCap     int
	fevalsTrial int
	fin         []Status
	hrho        []float64
}

func newRecorder(sv *Solver, q *problem, keep bool) *recorder {
	n, d, np := q.n, q.Field.Dim, q.Field.Params
	r := &recorder{sv: sv, q: q, set: &sv.set, keep: keep, d: d, m: n, fevalsTrial: sv.sp.fevals}
	r.idx = make([]int, n)
	r.t, r.h, r.t1, r.ep = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	r.hmin = make([]float64, n)
	r.last = make([]bool, n)
	r.nonfinite = make([]int, n)
	mk := func(w int) [][]float64 {
		x := make([][]float64, w)
		for c := range x {
			x[c] = make([]float64, n)
		}
		return x
	}
	r.y, r.k1, r.p = mk(d), mk(d), mk(np)
	r.yNew, r.e, r.kOut = mk(d), mk(d), mk(d)
	for i := 0; i < n; i++ {
		r.idx[i] = i
		r.t[i] = q.T0
		r.t1[i] = q.t1[i]
		r.ep[i] = 1
		r.hmin[i] = 4 * 0x1p-52 * math.Max(math.Abs(q.T0), math.Abs(q.t1[i]-q.T0))
		for c := 0; c < d; c++ {
			r.y[c][i] = q.y0[i*d+c]
		}
		for c := 0; c < np; c++ {
			r.p[c][i] = q.p[i*np+c]
		}
	}
	r.shared = make([][]float64, len(q.Shared))
	for c := range r.shared {
		r.shared[c] = q.Shared[c : c+1]
	}
	r.mesh = &Mesh{N: n, Len: make([]int, n), T0: q.T0, T1: q.t1, Method: sv.set.Method,
		RelTol: sv.set.RelTol, AbsTol: sv.set.AbsTol, Status: make([]Status, n)}
	r.mesh.Stats = Stats{Accepted: make([]int, n), Rejected: make([]int, n), FieldEvals: make([]int, n)}
	r.sol = &Solution{N: n, Dim: d, T: make([]float64, n), Y: make([]float64, n*d), SaveAt: q.SaveAt, Status: r.mesh.Status,
		Method: sv.set.Method.Name()}
	r.lastH = make([]float64, n)
	return r
}

// fieldInputs returns the field program's inputs for the active
// trajectories at times t and states y.
func (r *recorder) fieldInputs(t []float64, y [][]float64) [][]float64 {
	in := r.in[:0]
	in = append(in, t[:r.m])
	for _, c := range y {
		in = append(in, c[:r.m])
	}
	for _, c := range r.p {
		in = append(in, c[:r.m])
	}
	in = append(in, r.shared...)
	r.in = in
	return in
}

// appendPrefix appends the first m entries of each column of x to dst.
func appendPrefix(dst, x [][]float64, m int) [][]float64 {
	for _, c := range x {
		dst = append(dst, c[:m])
	}
	return dst
}

// initialStep sets h for every trajectory: Settings.Dt0, or Hairer's
// algorithm (Solving ODEs I, §II.4), and computes k1 = f(t0, y0).
func (r *recorder) initialStep() error {
	d, n := r.d, r.m
	if n == 0 {
		return nil
	}
	fe := r.sv.fexec
	if err := fe.Run(appendPrefix(nil, r.k1, n), r.fieldInputs(r.t, r.y), n); err != nil {
		return err
	}
	st := &r.mesh.Stats
	for i := 0; i < n; i++ {
		st.FieldEvals[i]++
	}
	if dt0 := r.set.Dt0; dt0 > 0 {
		for i := range r.h {
			r.h[i] = dt0
		}
	} else {
		rtol := r.set.RelTol
		h0 := make([]float64, n)
		d1s := make([]float64, n)
		t1 := make([]float64, n)
		y1 := make([][]float64, d)
		for c := range y1 {
			y1[c] = make([]float64, n)
		}
		for i := 0; i < n; i++ {
			d0, d1 := 0.0, 0.0
			for c := 0; c < d; c++ {
				sc := r.set.absTol(c) + rtol*math.Abs(r.y[c][i])
				d0 += sq(r.y[c][i] / sc)
				d1 += sq(r.k1[c][i] / sc)
			}
			d0, d1 = math.Sqrt(d0/float64(d)), math.Sqrt(d1/float64(d))
			h := 1e-6
			if d0 >= 1e-5 && d1 >= 1e-5 {
				h = 0.01 * d0 / d1
			}
			if !(h > 0) || math.IsInf(h, 0) {
				h = 1e-6
			}
			h = math.Min(h, r.t1[i]-r.t[i])
			h0[i], d1s[i] = h, d1
			t1[i] = r.t[i] + h
			for c := 0; c < d; c++ {
				y1[c][i] = r.y[c][i] + h*r.k1[c][i]
			}
		}
		f1 := make([][]float64, d)
		for c := range f1 {
			f1[c] = make([]float64, n)
		}
		if err := fe.Run(f1, r.fieldInputs(t1, y1), n); err != nil {
			return err
		}
		p := float64(r.set.Method.Order())
		for i := 0; i < n; i++ {
			st.FieldEvals[i]++
			d2 := 0.0
			for c := 0; c < d; c++ {
				sc := r.set.absTol(c) + rtol*math.Abs(r.y[c][i])
				d2 += sq((f1[c][i] - r.k1[c][i]) / sc)
			}
			d2 = math.Sqrt(d2/float64(d)) / h0[i]
			dm := math.Max(d1s[i], d2)
			var h1 float64
			if dm <= 1e-15 || math.IsNaN(dm) {
				h1 = math.Max(1e-6, h0[i]*1e-3)
			} else {
				h1 = math.Pow(0.01/dm, 1/(p+1))
			}
			r.h[i] = math.Min(100*h0[i], h1)
		}
	}
	for i := 0; i < n; i++ {
		if span := r.t1[i] - r.t[i]; r.h[i] >= span {
			r.h[i], r.last[i] = span, true
		}
	}
	return nil
}

func sq(x float64) float64 { return x * x }

// run integrates until every trajectory has finished or failed.
func (r *recorder) run() error {
	if err := r.initialStep(); err != nil {
		return err
	}
	d := r.d
	set := r.set
	ctl := set.Controller
	rtol := set.RelTol
	st := &r.mesh.Stats
	for r.m > 0 {
		m := r.m
		// Trial-step inputs: t, h, y, p, s (, k1); outputs y⁺, err (, k_s).
		in := append(r.in[:0], r.t[:m], r.h[:m])
		in = appendPrefix(in, r.y, m)
		in = appendPrefix(in, r.p, m)
		in = append(in, r.shared...)
		out := appendPrefix(r.out[:0], r.yNew, m)
		out = appendPrefix(out, r.e, m)
		if r.sv.sp.fsal {
			in = appendPrefix(in, r.k1, m)
			out = appendPrefix(out, r.kOut, m)
		}
		if len(r.hrho) < m {
			r.hrho = make([]float64, m)
		}
		out = append(out, r.hrho[:m])
		r.in, r.out = in, out
		if err := r.sv.texec.Run(out, in, m); err != nil {
			return err
		}
		// The controller decides every trajectory independently: in
		// parallel over chunks for large ensembles; then the finished ones
		// leave the active set, serially.
		if cap(r.fin) < m {
			r.fin = make([]Status, m)
		}
		fin := r.fin[:m]
		if r.keep {
			r.growMesh()
		}
		r.parallel(m, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				fin[i] = r.control(i, d, ctl, rtol, st)
			}
		})
		for i := m - 1; i >= 0; i-- {
			if fin[i] != running {
				r.finish(i, fin[i])
			}
		}
	}
	return nil
}

// running marks a trajectory the controller keeps going.
const running Status = 255

// parallel runs f over [0, m) in chunks on up to GOMAXPROCS goroutines.
func (r *recorder) parallel(m int, f func(lo, hi int)) {
	const chunk = 1024
	nw := min(runtime.GOMAXPROCS(0), (m+chunk-1)/chunk)
	if r.set.Exec.Workers > 0 {
		nw = min(nw, r.set.Exec.Workers)
	}
	if nw <= 1 {
		f(0, m)
		return
	}
	var wg sync.WaitGroup
	per := (m + nw - 1) / nw
	for lo := 0; lo < m; lo += per {
		hi := min(lo+per, m)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// pow returns x**y for x > 0 as exp(y·log x): faster than math.Pow and
// accurate enough for a step-size factor.
func pow(x, y float64) float64 { return math.Exp(y * math.Log(x)) }

// control applies the error norm and the step-size controller to active
// trajectory i after a trial step: it accepts or rejects the step, picks
// the next step size, and returns the trajectory's final status, or
// running. It touches only trajectory i's state (and its own mesh column),
// so trajectories can be controlled concurrently.
func (r *recorder) control(i, d int, ctl Controller, rtol float64, st *Stats) Status {
	j := r.idx[i]
	st.FieldEvals[j] += r.fevalsTrial
	h := r.h[i]
	errn := 0.0
	bad := false
	for c := 0; c < d; c++ {
		yn := r.yNew[c][i]
		if math.IsNaN(yn) || math.IsInf(yn, 0) {
			bad = true
		}
		sc := r.set.absTol(c) + rtol*math.Max(math.Abs(r.y[c][i]), math.Abs(yn))
		errn += sq(r.e[c][i] / sc)
	}
	errn = math.Sqrt(errn / float64(d))
	if math.IsNaN(errn) || math.IsInf(errn, 0) {
		bad = true
	}
	var factor float64
	accepted := false
	switch {
	case bad:
		st.Rejected[j]++
		r.nonfinite[i]++
		factor = ctl.FactorMin
	case errn <= 1:
		accepted = true
		st.Accepted[j]++
		if r.keep {
			r.store(j, st.Accepted[j]-1, h)
		}
		r.t[i] += h
		for c := 0; c < d; c++ {
			r.y[c][i] = r.yNew[c][i]
			r.k1[c][i] = r.kOut[c][i]
		}
		factor = ctl.Safety * pow(math.Max(errn, 1e-10), -ctl.Beta1)
		if ctl.Beta2 != 0 {
			factor *= pow(r.ep[i], ctl.Beta2)
		}
		r.ep[i] = math.Max(errn, 1e-4)
	default:
		st.Rejected[j]++
		factor = ctl.Safety * pow(errn, -ctl.Beta1)
	}
	r.lastH[j] = h
	switch {
	case accepted && r.last[i]:
		return OK
	case st.Accepted[j]+st.Rejected[j] >= r.set.MaxSteps:
		if 2*r.nonfinite[i] > st.Rejected[j] {
			return NonFinite // mostly non-finite trial steps
		}
		return MaxStepsReached
	}
	factor = math.Min(ctl.FactorMax, math.Max(ctl.FactorMin, factor))
	h *= factor
	span := r.t1[i] - r.t[i]
	if h < r.hmin[i] || r.t[i]+h == r.t[i] {
		if bad || 2*r.nonfinite[i] > st.Rejected[j] {
			return NonFinite
		}
		return StepSizeUnderflow
	}
	r.last[i] = h >= span
	if r.last[i] {
		h = span
	}
	r.h[i] = h
	return running
}

// growMesh makes room for one more accepted step of every active
// trajectory, before the controller runs concurrently.
func (r *recorder) growMesh() {
	most := 0
	for _, j := range r.idx[:r.m] {
		most = max(most, r.mesh.Stats.Accepted[j])
	}
	for most >= r.rowsCap {
		grow := max(64, r.rowsCap)
		r.mesh.H = append(r.mesh.H, make([]float64, grow*r.mesh.N)...)
		r.rowsCap += grow
	}
}

// store records step s of trajectory j.
// The mesh has room (growMesh); Rows is set when recording ends.
func (r *recorder) store(j, s int, h float64) {
	r.mesh.H[s*r.mesh.N+j] = h
	r.mesh.Len[j] = s + 1
}

// finish ends active trajectory i with status s, moving the last active
// trajectory into its place.
func (r *recorder) finish(i int, s Status) {
	j := r.idx[i]
	d := r.d
	r.mesh.Status[j] = s
	r.sol.T[j] = r.t[i]
	for c := 0; c < d; c++ {
		r.sol.Y[j*d+c] = r.y[c][i]
	}
	if s != OK {
		for c := 0; c < d; c++ {
			r.sol.Y[j*d+c] = math.NaN()
		}
	}
	last := r.m - 1
	if i != last {
		r.idx[i] = r.idx[last]
		r.t[i], r.h[i], r.t1[i], r.ep[i] = r.t[last], r.h[last], r.t1[last], r.ep[last]
		r.hmin[i], r.last[i], r.nonfinite[i] = r.hmin[last], r.last[last], r.nonfinite[last]
		for _, x := range [][][]float64{r.y, r.k1, r.p} {
			for _, c := range x {
				c[i] = c[last]
			}
		}
	}
	r.m--
}
