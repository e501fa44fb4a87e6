package ode

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/gradsolve-go/gradsolve/internal/sysmem"
	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Events on the CPU engine. The record checks every event's condition at
// eventSamples points of each accepted step's continuous extension, its
// end the last; on the lanes where one crosses, it
// locates the root on the step's continuous extension (DenseStep, then
// Illinois iterations of Cond on the interpolated states), polishes it on
// the method's own step (Illinois iterations of Cond after Replay steps of
// trial sizes, from the extension's root) so that the recorded event step
// h* is a root of G(h) = g(t + h, Φ(t, h, y)) to rounding, and replaces the
// accepted step by it: the mesh records h*, the state goes on from
// Φ(t, h*, y) (after the event's jump) or stops there. The gradient's
// reverse sweep (eventGrad) carries the cotangent of time with that of the
// state and differentiates each event step's size by the implicit
// function theorem (see Event).

func (cpuEngine) SupportsEvents() bool { return true }

var _ EventEngine = cpuEngine{}

// eventExecs are the masters of the event programs, built on first use.
type eventExecs struct {
	once                       sync.Once
	err                        error
	cond, dense, replay, field *tape.Exec
	jump, condGrad, jumpRev    []*tape.Exec // per event (nil entries without a jump)
	stepRev, saveRev           *tape.Exec
}

func (ex *cpuExec) eventMasters() (*eventExecs, error) {
	em := &ex.events
	em.once.Do(func() {
		pl, ep := ex.plan, ex.plan.Events
		set := &tape.ExecSettings{Workers: 1}
		mk := func(p *tape.Program) *tape.Exec {
			if p == nil || em.err != nil {
				return nil
			}
			e, err := tape.NewExec(p, set)
			if err != nil {
				em.err = err
			}
			return e
		}
		if em.err = ep.derived(pl); em.err != nil {
			return
		}
		em.cond, em.dense, em.replay, em.field = mk(ep.Cond), mk(pl.DenseStep), mk(pl.Replay), mk(pl.Field)
		em.stepRev, em.saveRev = mk(ep.stepRev), mk(ep.saveRev)
		for e := range ep.Names {
			em.jump = append(em.jump, mk(ep.Jump[e]))
			em.condGrad = append(em.condGrad, mk(ep.condGrad[e]))
			em.jumpRev = append(em.jumpRev, mk(ep.jumpRev[e]))
		}
	})
	return em, em.err
}

// eventWork is a worker's event state: executor clones and per-lane
// condition values.
type eventWork struct {
	cond, dense, replay, field, stepRev *tape.Exec
	saveRev                             *tape.Exec
	jump, condGrad, jumpRev             []*tape.Exec

	g, gn  [][]float64 // [events][cap]: the conditions at each lane's state (g) and at its trial's end (gn)
	ga, gb [][]float64 // [events][cap]: the conditions at the ends of the sample interval where one crosses
	gj     [][]float64 // [events][cap]: the conditions at a sample
	ja     []int       // [cap]: the sample interval (1…eventSamples) where one crosses, 0 if none
	count  []int       // [cap] events so far, per slot of the chunk
	marks  [][]evMark  // [cap] per slot: the chunk's event steps, in order
	rows   []evRow     // the steps of size 0 of the step being committed (coinciding events)
	lanes  []int       // the lanes with a crossing
	buf    [][]float64 // gathered columns for the small programs
	ins    [][]float64
	outs   [][]float64
	scalar []float64
}

// evMark marks step s of a trajectory as event e's step.
type evMark struct{ s, e int }

// evRow is a step of size 0 at time t from state y, row s of chunk slot
// slot, that an event whose root coincides with the one before it takes
// (see fireGroup); the commit writes it to the mesh and the stored
// states.
type evRow struct {
	slot, s int
	t       float64
	y       []float64
}

func (w *cpuWorker) eventWork(r *cpuRun) (*eventWork, error) {
	if w.ev != nil && w.evCap == w.cap {
		return w.ev, nil
	}
	em, err := w.ex.eventMasters()
	if err != nil {
		return nil, err
	}
	c := w.cap
	cl := func(e *tape.Exec) *tape.Exec {
		if e == nil {
			return nil
		}
		return e.Clone(c, 1)
	}
	ne := len(w.ex.plan.Events.Names)
	v := &eventWork{cond: cl(em.cond), dense: cl(em.dense), replay: cl(em.replay), field: cl(em.field), stepRev: cl(em.stepRev), saveRev: cl(em.saveRev),
		g: cols(ne, c), gn: cols(ne, c), count: make([]int, c), marks: make([][]evMark, c)}
	for e := 0; e < ne; e++ {
		v.jump = append(v.jump, cl(em.jump[e]))
		v.condGrad = append(v.condGrad, cl(em.condGrad[e]))
		v.jumpRev = append(v.jumpRev, cl(em.jumpRev[e]))
	}
	w.ev, w.evCap = v, c
	return v, nil
}

// col returns gathered column k of n values (scratch).
func (v *eventWork) col(k, n int) []float64 {
	for len(v.buf) <= k {
		v.buf = append(v.buf, nil)
	}
	if cap(v.buf[k]) < n {
		v.buf[k] = make([]float64, n)
	}
	return v.buf[k][:n]
}

// evalCond runs Cond at times t and states y (columns of n lanes) and
// writes g[e][:n].
func (w *cpuWorker) evalCond(v *eventWork, g [][]float64, t []float64, y [][]float64, p [][]float64, n int) error {
	in := append(v.ins[:0], t[:n])
	in = appendPrefix(in, y, n)
	in = appendPrefix(in, p, n)
	in = append(in, w.sh...)
	out := appendPrefix(v.outs[:0], g, n)
	v.ins, v.outs = in, out
	return v.cond.Run(out, in, n)
}

// startEvents evaluates the conditions at the initial states of the
// first m lanes and reports a status per lane (StatusRunning where all is
// well): EventNonFinite where one is not finite, EventAtStart where one is
// exactly 0.
func (w *cpuWorker) startEvents(r *cpuRun, m int) error {
	v, err := w.eventWork(r)
	if err != nil {
		return err
	}
	if err := w.evalCond(v, v.g, w.st[StateT], w.y, w.p, m); err != nil {
		return err
	}
	for i := 0; i < m; i++ {
		slot := w.idx[i] - w.lo
		v.count[slot], v.marks[slot] = 0, v.marks[slot][:0]
		w.stat[i] = StatusRunning
		for _, ge := range v.g {
			switch {
			case math.IsNaN(ge[i]) || math.IsInf(ge[i], 0):
				w.stat[i] = float64(EventNonFinite)
			case ge[i] == 0 && w.stat[i] == StatusRunning:
				w.stat[i] = float64(EventAtStart)
			}
		}
	}
	return nil
}

// crossed reports whether event e crosses from g0 to g1.
func crossed(dir int, g0, g1 float64) bool {
	rise := g0 < 0 && g1 >= 0
	fall := g0 > 0 && g1 <= 0
	return dir >= 0 && rise || dir <= 0 && fall
}

// eventSamples is the number of points of each accepted step's
// continuous extension (θ = 1/8, 2/8, …, 1) at which the conditions are
// checked: a crossing and its return within an eighth of a step go unseen.
const eventSamples = 8

// stepEvents handles the events of the accepted steps of the first m
// lanes (after Control, before the commit; the trial was TrialDense, its
// coefficients in w.wc): a lane whose step crosses an event has its step
// replaced by the event step (w.st[StateH] = h*, w.yn the state after the
// event, w.st2 the state from there on, w.stat its status) and the step's
// index marked.
func (w *cpuWorker) stepEvents(r *cpuRun, m int) error {
	v, err := w.eventWork(r)
	if err != nil {
		return err
	}
	ep := w.ex.plan.Events
	d, ne := w.ex.plan.Dim, len(ep.Names)
	if err := w.evalCond(v, v.gn, w.st2[StateT], w.yn, w.p, m); err != nil {
		return err
	}
	// The conditions at θ = j/eventSamples on the extension, j = 1, 2, …:
	// the first sample interval where one crosses, per lane.
	if cap(v.ja) < m {
		v.ja = make([]int, w.cap)
		v.ga, v.gb, v.gj = cols(ne, w.cap), cols(ne, w.cap), cols(ne, w.cap)
	}
	ja := v.ja[:m]
	for i := range ja {
		ja[i] = 0
		for e := 0; e < ne; e++ {
			v.ga[e][i] = v.g[e][i]
		}
	}
	tt, yy := v.col(0, m), make([][]float64, d)
	for c := range yy {
		yy[c] = v.col(1+c, m)
	}
	terms := w.ex.plan.DenseTerms
	lane := make([]float64, (1+terms)*d)
	out := make([]float64, d)
	for j := 1; j <= eventSamples; j++ {
		gj := v.gj
		if j == eventSamples {
			gj = v.gn
		} else {
			th := float64(j) / eventSamples
			for i := 0; i < m; i++ {
				tt[i] = w.st[StateT][i] + th*w.st[StateH][i]
				for c := 0; c < d; c++ {
					lane[c] = w.y[c][i]
				}
				for x, col := range w.wc {
					lane[d+x] = col[i]
				}
				scan.Interp(out, lane[:d], lane[d:], th)
				for c := 0; c < d; c++ {
					yy[c][i] = out[c]
				}
			}
			if err := w.evalCond(v, gj, tt, yy, w.p, m); err != nil {
				return err
			}
		}
		for i, a := range w.acc[:m] {
			if a == 0 || ja[i] != 0 || w.stat[i] != StatusRunning && w.stat[i] != float64(OK) {
				continue
			}
			for e := 0; e < ne; e++ {
				x := gj[e][i]
				if math.IsNaN(x) || math.IsInf(x, 0) {
					w.stat[i] = float64(EventNonFinite)
					break
				}
				if crossed(ep.Direction[e], v.ga[e][i], x) {
					ja[i] = j
				}
			}
			if ja[i] != 0 {
				for e := 0; e < ne; e++ {
					v.gb[e][i] = gj[e][i]
				}
				continue
			}
			for e := 0; e < ne; e++ {
				v.ga[e][i] = gj[e][i]
			}
		}
	}
	v.lanes = v.lanes[:0]
	for i, a := range w.acc[:m] {
		if a == 0 {
			continue
		}
		if ja[i] != 0 {
			v.lanes = append(v.lanes, i)
			continue
		}
		for e := range v.g {
			v.g[e][i] = v.gn[e][i]
		}
	}
	if len(v.lanes) == 0 {
		return nil
	}
	return w.locate(r, v, d)
}

// locate finds the event steps of the lanes v.lanes (see stepEvents):
// the root of each crossing condition in its sample interval on the
// extension, the earliest of them polished on the step.
func (w *cpuWorker) locate(r *cpuRun, v *eventWork, d int) error {
	pl, ep := w.ex.plan, w.ex.plan.Events
	np, terms := pl.Params, pl.DenseTerms
	q := len(v.lanes)
	// The lanes' step inputs, gathered: t, h, y, p and the coefficients.
	t, h := v.col(0, q), v.col(1, q)
	y, p, wc := make([][]float64, d), make([][]float64, np), make([][]float64, terms*d)
	for c := range y {
		y[c] = v.col(2+c, q)
	}
	for c := range p {
		p[c] = v.col(2+d+c, q)
	}
	base := 2 + d + np
	for c := range wc {
		wc[c] = v.col(base+c, q)
	}
	base += terms * d
	for k, i := range v.lanes {
		t[k], h[k] = w.st[StateT][i], w.st[StateH][i]
		for c := range y {
			y[c][k] = w.y[c][i]
		}
		for c := range p {
			p[c][k] = w.p[c][i]
		}
		for c := range wc {
			wc[c][k] = w.wc[c][i]
		}
	}
	ne := len(ep.Names)
	g := make([][]float64, ne)
	for e := range g {
		g[e] = v.col(base+e, q)
	}
	base += ne
	tt, yy := v.col(base, q), make([][]float64, d)
	for c := range yy {
		yy[c] = v.col(base+1+c, q)
	}
	base += 1 + d
	best, bestE := v.col(base, q), make([]int, q) // the earliest root: θ, event
	for k := range best {
		best[k], bestE[k] = math.Inf(1), -1
	}
	lane := make([]float64, (1+terms)*d)
	out := make([]float64, d)
	onExt := func(theta []float64, active []bool) error { // g on the extension at θ
		for k := range theta {
			if !active[k] {
				continue
			}
			tt[k] = t[k] + theta[k]*h[k]
			for c := 0; c < d; c++ {
				lane[c] = y[c][k]
			}
			for x := range wc {
				lane[d+x] = wc[x][k]
			}
			scan.Interp(out, lane[:d], lane[d:], theta[k])
			for c := 0; c < d; c++ {
				yy[c][k] = out[c]
			}
		}
		return w.evalCond(v, g, tt, yy, p, q)
	}
	active := make([]bool, q)
	lo, hi := make([]float64, q), make([]float64, q)
	g0, g1 := make([]float64, q), make([]float64, q)
	for e := 0; e < ne; e++ {
		any := false
		for k, i := range v.lanes {
			g0[k], g1[k] = v.ga[e][i], v.gb[e][i]
			active[k] = crossed(ep.Direction[e], g0[k], g1[k])
			any = any || active[k]
			lo[k], hi[k] = float64(v.ja[i]-1)/eventSamples, float64(v.ja[i])/eventSamples
		}
		if !any {
			continue
		}
		theta, err := illinois(lo, hi, g0, g1, active, func(x []float64) ([]float64, error) {
			if err := onExt(x, active); err != nil {
				return nil, err
			}
			return g[e], nil
		}, func(k int, a, b float64) bool { return b-a <= 1e-15 })
		if err != nil {
			return err
		}
		for k := range theta {
			if active[k] && theta[k] < best[k] {
				best[k], bestE[k] = theta[k], e
			}
		}
	}
	// Polish on the step: G(h') = g_e(t + h', Φ(t, h', y)), h' an exact
	// advance of t, from the extension's root, within the sample interval.
	hs := v.col(base+1, q)
	step := func(x []float64, active []bool) error {
		for k := range x {
			hs[k] = (t[k] + x[k]) - t[k]
		}
		in := append([][]float64{t, hs}, y...)
		in = append(append(in, p...), w.sh...)
		if err := v.replay.Run(yy, in, q); err != nil {
			return err
		}
		for k := range tt {
			tt[k] = t[k] + hs[k]
		}
		return w.evalCond(v, g, tt, yy, p, q)
	}
	for e := 0; e < ne; e++ {
		any := false
		for k, i := range v.lanes {
			active[k] = bestE[k] == e
			any = any || active[k]
			lo[k], hi[k] = float64(v.ja[i]-1)/eventSamples*h[k], float64(v.ja[i])/eventSamples*h[k]
			if v.ja[i] == eventSamples {
				hi[k] = h[k]
			}
			g0[k], g1[k] = v.ga[e][i], v.gb[e][i]
		}
		if !any {
			continue
		}
		// A bracket around the extension's root: h'·(1 ± 1e-7).
		guess := make([]float64, q)
		for k := range guess {
			guess[k] = min(max(best[k]*h[k], lo[k]), hi[k])
		}
		for pass := 0; pass < 2; pass++ {
			if err := step(guess, active); err != nil {
				return err
			}
			for k := range guess {
				if !active[k] || !(hs[k] > lo[k] && hs[k] < hi[k]) {
					continue
				}
				if gx := g[e][k]; crossed(ep.Direction[e], g0[k], gx) || gx == 0 {
					hi[k], g1[k] = hs[k], gx
				} else {
					lo[k], g0[k] = hs[k], gx
				}
			}
			for k := range guess {
				guess[k] = hs[k] * (1 + 1e-7)
				if hi[k] == hs[k] {
					guess[k] = hs[k] * (1 - 1e-7)
				}
				guess[k] = min(max(guess[k], lo[k]), hi[k])
			}
		}
		if _, err := illinois(lo, hi, g0, g1, active, func(x []float64) ([]float64, error) {
			if err := step(x, active); err != nil {
				return nil, err
			}
			return g[e], nil
		}, func(k int, a, b float64) bool {
			return (t[k]+b)-(t[k]+a) <= 2*ulp(t[k]+b)
		}); err != nil {
			return err
		}
		// The event step: the end of the bracket where the event has
		// crossed.
		if err := step(hi, active); err != nil {
			return err
		}
		if len(r.job.SaveAt) > 0 {
			// The save times inside the event step read its own
			// extension: the coefficients of the step of size h*.
			if err := w.eventCoefs(v, active, t, hs, y, p); err != nil {
				return err
			}
		}
		if err := w.fire(r, v, e, active, t, hs, tt, yy, g, p); err != nil {
			return err
		}
	}
	return nil
}

// eventCoefs sets the continuous extension's coefficients (w.wc) of the
// active located lanes to those of their event steps: DenseStep at (t,
// h*, y).
func (w *cpuWorker) eventCoefs(v *eventWork, active []bool, t, hs []float64, y, p [][]float64) error {
	pl := w.ex.plan
	q := len(active)
	in := append([][]float64{t, hs}, y...)
	in = append(append(in, p...), w.sh...)
	out := cols(pl.Dim+len(w.wc), q)
	if err := v.dense.Run(out, in, q); err != nil {
		return err
	}
	for k, i := range v.lanes {
		if active[k] {
			for x, c := range w.wc {
				c[i] = out[pl.Dim+x][k]
			}
		}
	}
	return nil
}

// endsAtTerminal reports whether chunk slot's trajectory, whose last
// step is step last, ended at a terminal event.
func (w *cpuWorker) endsAtTerminal(slot, last int) bool {
	if w.ev == nil || w.ex.plan.Events == nil {
		return false
	}
	ms := w.ev.marks[slot]
	return len(ms) > 0 && ms[len(ms)-1].s == last && w.ex.plan.Events.Terminal[ms[len(ms)-1].e]
}

func ulp(x float64) float64 {
	x = math.Abs(x)
	return math.Nextafter(x, math.Inf(1)) - x
}

// illinois narrows the brackets [lo, hi] (values g0 at lo and g1 at hi,
// which the event crosses between) of the active entries by the Illinois
// method until done says an entry is narrow enough (at most 100
// iterations), and returns hi, the end where the event has crossed. f
// evaluates the function at the entries' points (every entry; inactive
// ones are not read).
func illinois(lo, hi, g0, g1 []float64, active []bool, f func([]float64) ([]float64, error), done func(k int, a, b float64) bool) ([]float64, error) {
	q := len(lo)
	x := make([]float64, q)
	side := make([]int, q)
	live := append([]bool(nil), active...)
	for it := 0; it < 100; it++ {
		anyLive := false
		for k := range x {
			if !live[k] {
				x[k] = hi[k]
				continue
			}
			if done(k, lo[k], hi[k]) || g1[k] == 0 {
				live[k] = false
				x[k] = hi[k]
				continue
			}
			anyLive = true
			// Regula falsi within the bracket; bisection if it stalls, or
			// if g0 is no value of the function but the one a fired
			// condition leaves with (±the smallest float64, see leave; or
			// that halved to 0): a secant from it lands within an ulp of
			// lo, where the condition has either sign (the state of an
			// event step lies past its root by rounding), and would take
			// the bracket down to lo, the event to a step of size 0.
			// The secant runs from the end nearer the root (the smaller
			// |g|): from the other, hi − (hi − root) cancels to hi or lo
			// where the root lies within rounding of hi − lo from one
			// end (an event 1e-300 after T0 = 0 in a bracket of 1e-3),
			// and bisection from there stops at 100 halvings, 1e-30 of
			// the bracket short of the root.
			s := hi[k] - g1[k]*(hi[k]-lo[k])/(g1[k]-g0[k])
			if math.Abs(g0[k]) < math.Abs(g1[k]) {
				s = lo[k] - g0[k]*(hi[k]-lo[k])/(g1[k]-g0[k])
			}
			if !(s > lo[k] && s < hi[k]) || math.Abs(g0[k]) <= math.SmallestNonzeroFloat64 {
				s = lo[k] + (hi[k]-lo[k])/2
			}
			x[k] = s
		}
		if !anyLive {
			break
		}
		g, err := f(x)
		if err != nil {
			return nil, err
		}
		for k := range x {
			if !live[k] {
				continue
			}
			gx := g[k]
			if math.IsNaN(gx) {
				live[k] = false
				continue
			}
			if gx == 0 || math.Signbit(gx) == math.Signbit(g1[k]) && gx != 0 {
				hi[k], g1[k] = x[k], gx
				if side[k] == 1 {
					g0[k] /= 2
				}
				side[k] = 1
			} else {
				lo[k], g0[k] = x[k], gx
				if side[k] == -1 {
					g1[k] /= 2
				}
				side[k] = -1
			}
		}
	}
	return hi, nil
}

// fire applies event e on the active located lanes: their step becomes
// the event step hs (ending at tt in state yy, where the conditions are
// gpre), the jump is applied, and the lanes stop (terminal) or go on from
// there. A lane where other events have crossed by tt too (their roots
// coincide with e's) fires them all at tt, one lane at a time (see
// fireGroup).
func (w *cpuWorker) fire(r *cpuRun, v *eventWork, e int, active []bool, t, hs, tt []float64, yy, gpre, p [][]float64) error {
	pl, ep := w.ex.plan, w.ex.plan.Events
	d := pl.Dim
	q := len(active)
	for k, i := range v.lanes {
		if !active[k] {
			continue
		}
		if order := coinciding(ep, v.ga, e, i, k, gpre); order != nil {
			active[k] = false
			if err := w.fireGroup(r, v, order, k, t[k], hs[k], tt[k], yy, gpre, p); err != nil {
				return err
			}
		}
	}
	if jump := v.jump[e]; jump != nil {
		in := append([][]float64{tt}, yy...)
		in = append(append(in, p...), w.sh...)
		out := make([][]float64, d)
		for c := range out {
			out[c] = make([]float64, q)
		}
		if err := jump.Run(out, in, q); err != nil {
			return err
		}
		for k := range active {
			if active[k] {
				for c := range out {
					yy[c][k] = out[c][k]
				}
			}
		}
	}
	// The conditions from the new state; the fired one counts as 0 (it
	// does not fire again at once) unless the jump moved it off its root
	// (offRoot).
	g := make([][]float64, len(ep.Names))
	for x := range g {
		g[x] = make([]float64, q)
	}
	if err := w.evalCond(v, g, tt, yy, p, q); err != nil {
		return err
	}
	// The field at the new state: FSAL's first stage, and the direction
	// the fired condition leaves in, ġ = ∂g/∂t + ∂g/∂y·f: the fired
	// condition's value counts as the smallest number of that sign, so
	// that it does not fire again at once but does when it comes back,
	// however soon.
	k1 := cols(d, q)
	in := append([][]float64{tt}, yy...)
	in = append(append(in, p...), w.sh...)
	if err := v.field.Run(k1, in, q); err != nil {
		return err
	}
	np, ns := pl.Params, pl.Shared
	cg := cols(2+d+np+ns, q)
	if err := v.condGrad[e].Run(cg, in, q); err != nil {
		return err
	}
	leave := make([]float64, q)
	for k := range leave {
		gdot := cg[1][k]
		for c := 0; c < d; c++ {
			gdot += cg[2+c][k] * k1[c][k]
		}
		switch {
		case gdot > 0:
			leave[k] = math.SmallestNonzeroFloat64
		case gdot < 0:
			leave[k] = -math.SmallestNonzeroFloat64
		}
	}
	if !pl.FSAL {
		k1 = nil
	}
	for k, i := range v.lanes {
		if !active[k] {
			continue
		}
		slot := w.idx[i] - w.lo
		v.marks[slot] = append(v.marks[slot], evMark{s: int(w.st[StateAccepted][i]), e: e})
		v.count[slot]++
		hTrial := w.st[StateH][i]
		w.st[StateH][i] = hs[k]
		for c := 0; c < d; c++ {
			w.yn[c][i] = yy[c][k]
			if k1 != nil {
				w.ko[c][i] = k1[c][k]
			}
		}
		for x := range g {
			v.g[x][i] = g[x][k]
		}
		if !offRoot(g[e][k], gpre[e][k]) {
			v.g[e][i] = leave[k]
		}
		w.settle(r, v, i, slot, ep.Terminal[e], refires(v.ga[e][i], t[k], hs[k]), tt[k], hTrial)
	}
	return nil
}

// settle sets the status and the next controller state of lane i (chunk
// slot slot) after its events fired at time tt: OK if the last was
// terminal; TooManyEvents past MaxEvents or if one fired again at the time
// it fired (tooMany, see refires); else running on from tt, with the
// controller's next step (the step hTrial it tried if it had ended the
// trajectory), clamped to the end.
func (w *cpuWorker) settle(r *cpuRun, v *eventWork, i, slot int, terminal, tooMany bool, tt, hTrial float64) {
	ep, t1 := w.ex.plan.Events, r.job.T1
	ended := w.stat[i] != StatusRunning // the controller's verdict on the step the event cut short
	st2 := &w.st2
	st2[StateT][i] = tt
	switch {
	case terminal:
		w.stat[i] = float64(OK)
	case v.count[slot] > ep.MaxEvents || tooMany:
		w.stat[i] = float64(TooManyEvents)
	default:
		w.stat[i] = StatusRunning
		// The next step from the event, clamped to the end as the
		// controller clamps.
		span := t1[w.idx[i]] - tt
		hn := st2[StateH][i]
		if ended || !(hn > 0) {
			// The controller ended the trajectory with the step the
			// event cut short: go on with the size it tried.
			hn = hTrial
		}
		last := 0.0
		if hn >= span || tt+hn >= t1[w.idx[i]] {
			hn, last = span, 1
		}
		st2[StateH][i] = (tt + hn) - tt
		st2[StateLast][i] = last
		if span <= 0 {
			w.stat[i] = float64(OK) // the event is at the end
		}
	}
}

// coinciding returns, for the located lane at position k (lane i of the
// chunk) whose step ends at event e's root, the events that fire there in
// the order they fire, or nil if e fires alone: e and every other event
// whose condition has crossed since the start of the sample interval
// where e's root lies (ga, the conditions there) by the event time (gpre,
// the conditions at the state there, before any jump): its root
// coincides with e's (or lies before it, within what the extension and
// the samples tell apart). The order is that of Settings.Events for the
// non-terminal ones, then the first terminal one, which ends the
// trajectory after their jumps (the others are not fired).
func coinciding(ep *EventPlan, ga [][]float64, e, i, k int, gpre [][]float64) []int {
	var order []int
	for x := range ep.Names {
		if x != e && crossed(ep.Direction[x], ga[x][i], gpre[x][k]) {
			if order == nil {
				order = make([]int, 0, len(ep.Names))
			}
			order = append(order, x)
		}
	}
	if order == nil {
		return nil
	}
	order = append(order, e)
	slices.Sort(order)
	term := -1
	out := order[:0]
	for _, x := range order {
		switch {
		case !ep.Terminal[x]:
			out = append(out, x)
		case term < 0:
			term = x
		}
	}
	if term >= 0 {
		out = append(out, term)
	}
	return out
}

// fireGroup fires the events order (see coinciding) at the end of the
// located lane at position k (lane i of v.lanes) of the chunk: its step
// from t becomes the event step hs, ending at tt in state yy[:][k] before
// any jump, marked as order[0]'s; each further event is a step of size 0
// from tt, marked as its own, from the state after the jumps before it
// (rows the commit writes after the step's, eventWork.rows). Each jump
// applies to the state the one before left; the conditions, the field and
// the fired conditions' leaving values (see fire) are those of the final
// state. Its status is fire's, per event: the trajectory ends OK if the
// last event is terminal, with TooManyEvents past MaxEvents (each event
// counts) or where one of them fires again at the time it fired.
func (w *cpuWorker) fireGroup(r *cpuRun, v *eventWork, order []int, k int, t, hs, tt float64, yy, gpre, p [][]float64) error {
	pl, ep := w.ex.plan, w.ex.plan.Events
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	i := v.lanes[k]
	slot := w.idx[i] - w.lo
	s := int(w.st[StateAccepted][i])
	y := make([]float64, d)
	for c := range y {
		y[c] = yy[c][k]
	}
	in := make([][]float64, 0, 1+d+np+ns)
	args := func() [][]float64 {
		in = append(in[:0], []float64{tt})
		for c := range y {
			in = append(in, y[c:c+1])
		}
		for c := 0; c < np; c++ {
			in = append(in, p[c][k:k+1])
		}
		return append(in, w.sh...)
	}
	out := cols(max(d, 2+d+np+ns, len(ep.Names)), 1)
	tooMany := false
	for x, e := range order {
		if x > 0 {
			// A step of size 0 from the state the jumps before left.
			v.rows = append(v.rows, evRow{slot: slot, s: s + x, t: tt, y: slices.Clone(y)})
		}
		v.marks[slot] = append(v.marks[slot], evMark{s: s + x, e: e})
		v.count[slot]++
		tooMany = tooMany || refires(v.ga[e][i], t, hs)
		if jump := v.jump[e]; jump != nil {
			if err := jump.Run(out[:d], args(), 1); err != nil {
				return err
			}
			for c := range y {
				y[c] = out[c][0]
			}
		}
	}
	// The conditions, the field and the fired conditions' directions at
	// the final state.
	if err := v.cond.Run(out[:len(ep.Names)], args(), 1); err != nil {
		return err
	}
	for x := range ep.Names {
		v.g[x][i] = out[x][0]
	}
	k1 := make([]float64, d)
	if err := v.field.Run(out[:d], args(), 1); err != nil {
		return err
	}
	for c := range k1 {
		k1[c] = out[c][0]
	}
	for _, e := range order {
		if offRoot(v.g[e][i], gpre[e][k]) {
			continue // a jump moved it off its root: it starts from there
		}
		if err := v.condGrad[e].Run(out[:2+d+np+ns], args(), 1); err != nil {
			return err
		}
		gdot := out[1][0]
		for c := 0; c < d; c++ {
			gdot += out[2+c][0] * k1[c]
		}
		switch {
		case gdot > 0:
			v.g[e][i] = math.SmallestNonzeroFloat64
		case gdot < 0:
			v.g[e][i] = -math.SmallestNonzeroFloat64
		default:
			v.g[e][i] = 0
		}
	}
	hTrial := w.st[StateH][i]
	w.st[StateH][i] = hs
	for c := 0; c < d; c++ {
		w.yn[c][i] = y[c]
		if pl.FSAL {
			w.ko[c][i] = k1[c]
		}
	}
	w.st2[StateAccepted][i] += float64(len(order) - 1)
	w.settle(r, v, i, slot, ep.Terminal[order[len(order)-1]], tooMany, tt, hTrial)
	return nil
}

// offRoot reports whether the event's jump (Apply) moved the fired
// condition off its root: its value after the jump, gnew, differs from
// its value at the event, gpre, and is not 0. The next step then starts
// from gnew (a dose that lifts the watched level back above the
// threshold: the condition is positive again, and its next crossing is
// the next dose); otherwise (no jump, a jump that leaves what the
// condition reads, as a bounce leaves the height) from the smallest
// number of the sign the condition leaves with, which does not fire
// again at once but does when it comes back, however soon. Without this,
// an event with Direction 0 whose jump moved its condition across zero
// fired again at its own time, on the jump, and the trajectory ended with
// TooManyEvents. The same program computes both values, so a jump that
// does not change the condition's inputs gives gnew == gpre bit for bit.
// Package cuda's event kernels make the same test.
func offRoot(gnew, gpre float64) bool {
	return gnew != gpre && gnew != 0
}

// refires reports whether an event fires again at the time it fired:
// its condition stood at g0 at the start t of the step, ± the smallest
// number where the event fired there (see fire), and the event step hs
// is below the resolution of t (minStep). Its events accumulate at that
// time, as a ball's bounces do when it comes to rest (once they are
// below the rounding of its height, the state after a bounce is already
// under the floor): the trajectory ends with TooManyEvents, as it does
// past MaxEvents, rather than going on from a jump applied twice (the
// ball falling through the floor).
func refires(g0, t, hs float64) bool {
	return math.Abs(g0) == math.SmallestNonzeroFloat64 && hs <= minStep(math.Abs(t))
}

// eventGrad evaluates the loss of the chunk lo…hi-1 at its final states
// and, for a gradient, runs the reverse sweep of its record through the
// event steps (see Event): the cotangents of the state λ, of the time τ̄
// (of the end of the step being reversed), of the parameters and of the
// shared parameters (per trajectory, summed into the tiles at the end).
func (w *cpuWorker) eventGrad(r *cpuRun, lo, hi int) error {
	j, pl, res := r.job, w.ex.plan, r.res
	ep := pl.Events
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	width := hi - lo
	var lens []int
	if j.Mesh != nil {
		lens = j.Mesh.Len[lo:hi]
	} else {
		lens = res.Stats.Accepted[lo:hi]
	}
	if j.Op == OpGrad && !w.storing {
		// The reverse sweep through events reads every state of the
		// chunk (no checkpoints): say how much that is.
		// (Its buffer grows by doubling, to less than twice the steps.)
		need := int64(slices.Max(lens)) * int64((1+d)*width) * 8
		return badInput(fmt.Errorf("ode: a gradient with events stores every state of a chunk of trajectories: trajectories %d to %d need %s (%d steps of %d values each; up to twice that as their buffer grows), more than Settings.MemoryLimit = %s allows a worker (%s, the limit shared by %d); "+
			"raise MemoryLimit to %s or more, or use fewer trajectories per chunk (Exec.BlockSize) or fewer workers: %w",
			lo, hi-1, sysmem.Format(float64(need)), slices.Max(lens), (1+d)*width, sysmem.Format(float64(r.stateBudget)*float64(r.budgetShare)),
			sysmem.Format(float64(r.stateBudget)), r.budgetShare, sysmem.Format(2*float64(need)*float64(r.budgetShare)), ErrTooLarge))
	}
	if j.Op == OpGrad {
		r.peak(int64(len(w.sbuf)) * 8) // the chunk's stored states (Gradient.StoredBytes)
	}
	v, err := w.eventWork(r)
	if err != nil {
		return err
	}
	ts, K := j.SaveAt, len(j.SaveAt)
	for i, l := range lens {
		if K > 0 && w.endsAtTerminal(i, l-1) && ts[K-1] > w.endT[i] {
			k := sort.SearchFloat64s(ts, math.Nextafter(w.endT[i], math.Inf(1)))
			return badInput(fmt.Errorf("ode: trajectory %d: save time SaveAt[%d] = %v is after its terminal event (%s at t = %v), where it has no state (Solve returns NaN there): "+
				"end the save times at the event, or make the event non-terminal", lo+i, k, ts[k], ep.Names[v.marks[i][len(v.marks[i])-1].e], w.endT[i]))
		}
	}
	// The loss and its cotangents at the final and saved states.
	yF := toSoA(w.scratch(scrY0, width*d), res.Y[lo*d:hi*d], width, d)
	pS := toSoA(w.scratch(scrP, width*np), j.P[lo*np:hi*np], width, np)
	lbuf, err := w.lossRun(r, lo, hi, yF, res.Ys[lo*K*d:hi*K*d], pS, width, nil)
	if err != nil || j.Op != OpGrad {
		return err
	}
	ybar, tapbar, gp0, gs0 := w.cotangents(r, lbuf, width, width, false)
	lam, gp, gs := cols(d, width), cols(np, width), cols(ns, width)
	tau := make([]float64, width)
	for c := range lam {
		copy(lam[c], ybar[c*width:(c+1)*width])
	}
	for c := range gp {
		copy(gp[c], gp0[c*width:(c+1)*width])
	}
	for c := range gs {
		copy(gs[c], gs0[c*width:(c+1)*width])
	}
	// Each save time's step (see saveSteps); the saves at or after the
	// end are the final state's.
	where := w.saveSteps(r, lens, width)
	sc := make([]int, width) // each slot's next save, from the last
	for i := range sc {
		sc[i] = K - 1
		for ; sc[i] >= 0 && where[i*K+sc[i]] == lens[i]; sc[i]-- {
			bar := tapbar[(i*K+sc[i])*d:]
			for c := 0; c < d; c++ {
				lam[c][i] += bar[c]
			}
		}
	}
	if err := w.endAtEvent(r, v, lo, lens, ybar, tapbar, where, tau); err != nil {
		return err
	}
	one := func(c []float64, at int) []float64 { return c[at : at+1] }
	var sv [][]float64 // the save reverse's outputs
	if K > 0 {
		sv = cols(3+d+np+ns, 1)
	}

	rows := 0
	for _, l := range lens {
		rows = max(rows, l)
	}
	cur := make([]int, width) // each slot's next event mark, from the last
	for i := range cur {
		cur[i] = len(v.marks[i]) - 1
	}
	stride := (1 + d) * width
	// Gathered columns of a row's active lanes.
	tc, hc := make([]float64, width), make([]float64, width)
	yc, pc, lc := cols(d, width), cols(np, width), cols(d, width)
	tb, hb, yb, pb, sb := make([]float64, width), make([]float64, width), cols(d, width), cols(np, width), cols(ns, width)
	act := make([]int, 0, width)
	var evLanes []int // positions in act of the row's event lanes
	for s := rows - 1; s >= 0; s-- {
		act, evLanes = act[:0], evLanes[:0]
		for i, l := range lens {
			if l > s {
				act = append(act, i)
			}
		}
		m := len(act)
		row := w.sbuf[s*stride : (s+1)*stride]
		for k, i := range act {
			tc[k], hc[k] = row[i], w.hbuf[s*width+i]
			for c := 0; c < d; c++ {
				yc[c][k] = row[(1+c)*width+i]
				lc[c][k] = lam[c][i]
			}
			for c := 0; c < np; c++ {
				pc[c][k] = pS[c*width+i]
			}
			if cur[i] >= 0 && v.marks[i][cur[i]].s == s {
				evLanes = append(evLanes, k)
			}
		}
		// Event lanes: the jump's reverse turns λ and τ̄ (at the event,
		// after the jump) into those before it.
		var evE []int
		var yMinus [][]float64
		if len(evLanes) > 0 {
			evE = make([]int, len(evLanes))
			yMinus = cols(d, len(evLanes))
			if err := w.eventStates(v, evLanes, tc, hc, yc, pc, yMinus); err != nil {
				return err
			}
			for x, k := range evLanes {
				i := act[k]
				e := v.marks[i][cur[i]].e
				evE[x] = e
				if v.jumpRev[e] == nil {
					continue
				}
				in := [][]float64{{tc[k] + hc[k]}}
				for c := 0; c < d; c++ {
					in = append(in, one(yMinus[c], x))
				}
				for c := 0; c < np; c++ {
					in = append(in, one(pc[c], k))
				}
				in = append(in, r.shared...)
				for c := 0; c < d; c++ {
					in = append(in, one(lc[c], k))
				}
				out := cols(1+d+np+ns, 1)
				if err := v.jumpRev[e].Run(out, in, 1); err != nil {
					return err
				}
				tau[i] += out[0][0]
				for c := 0; c < d; c++ {
					lc[c][k] = out[1+c][0]
				}
				for c := 0; c < np; c++ {
					gp[c][i] += out[1+d+c][0]
				}
				for c := 0; c < ns; c++ {
					gs[c][i] += out[1+d+np+c][0]
				}
			}
		}
		// The step's reverse with time, on every active lane.
		in := append([][]float64{tc[:m], hc[:m]}, prefix(yc, m)...)
		in = append(append(in, prefix(pc, m)...), r.shared...)
		in = append(in, prefix(lc, m)...)
		out := append([][]float64{tb[:m], hb[:m]}, prefix(yb, m)...)
		out = append(append(out, prefix(pb, m)...), prefix(sb, m)...)
		if err := v.stepRev.Run(out, in, m); err != nil {
			return err
		}
		// The save times on the step: the extension at θ = (τ − t)/h,
		// which moves with t and h; at θ = 0 (τ = t, a save time at
		// an event time or at a mesh point after one) its value is y
		// itself, but t still moves with the events before it while τ
		// stays: the reverse there gives ȳ and θ̄ = bar·w_1, so
		// t̄ −= bar·w_1/h (y' at t, on the extension), as for θ > 0.
		for k, i := range act {
			for ; sc[i] >= 0 && where[i*K+sc[i]] == s; sc[i]-- {
				x := sc[i]
				bar := tapbar[(i*K+x)*d : (i*K+x+1)*d]
				theta := 0.0
				if ts[x] > tc[k] {
					theta = (ts[x] - tc[k]) / hc[k]
				}
				in := [][]float64{one(tc, k), one(hc, k)}
				for c := 0; c < d; c++ {
					in = append(in, one(yc[c], k))
				}
				for c := 0; c < np; c++ {
					in = append(in, one(pc[c], k))
				}
				in = append(in, r.shared...)
				in = append(in, []float64{theta})
				for c := 0; c < d; c++ {
					in = append(in, bar[c:c+1])
				}
				if err := v.saveRev.Run(sv, in, 1); err != nil {
					return err
				}
				thb := sv[2+d+np+ns][0]
				tb[k] += sv[0][0] - thb/hc[k]
				hb[k] += sv[1][0] - thb*theta/hc[k]
				for c := 0; c < d; c++ {
					yb[c][k] += sv[2+c][0]
				}
				for c := 0; c < np; c++ {
					pb[c][k] += sv[2+d+c][0]
				}
				for c := 0; c < ns; c++ {
					sb[c][k] += sv[2+d+np+c][0]
				}
			}
		}
		for k, i := range act {
			for c := 0; c < d; c++ {
				lam[c][i] = yb[c][k]
			}
			for c := 0; c < np; c++ {
				gp[c][i] += pb[c][k]
			}
			for c := 0; c < ns; c++ {
				gs[c][i] += sb[c][k]
			}
			switch {
			case cur[i] >= 0 && v.marks[i][cur[i]].s == s:
				// An event step: below.
			case s == lens[i]-1:
				// The last step ends at T1: h = T1 − t.
				tau[i] = tb[k] - hb[k]
			default:
				tau[i] += tb[k]
			}
		}
		// Event lanes: the event step's size moves with the state, the
		// time and the parameters (implicit function theorem).
		for x, k := range evLanes {
			i := act[k]
			e := evE[x]
			cur[i]--
			cin := [][]float64{{tc[k] + hc[k]}}
			for c := 0; c < d; c++ {
				cin = append(cin, one(yMinus[c], x))
			}
			for c := 0; c < np; c++ {
				cin = append(cin, one(pc[c], k))
			}
			cin = append(cin, r.shared...)
			cg := cols(2+d+np+ns, 1) // g, g_t, g_y, g_p, g_s
			if err := v.condGrad[e].Run(cg, cin, 1); err != nil {
				return err
			}
			// R(g_y): the step's reverse with the condition's gradient.
			rin := [][]float64{one(tc, k), one(hc, k)}
			for c := 0; c < d; c++ {
				rin = append(rin, one(yc[c], k))
			}
			for c := 0; c < np; c++ {
				rin = append(rin, one(pc[c], k))
			}
			rin = append(rin, r.shared...)
			for c := 0; c < d; c++ {
				rin = append(rin, cg[2+c])
			}
			rb := cols(2+d+np+ns, 1) // t̄, h̄, ȳ, p̄, s̄
			if err := v.stepRev.Run(rb, rin, 1); err != nil {
				return err
			}
			gh := cg[1][0] + rb[1][0] // ∂G/∂h
			hbar := tau[i] + hb[k]    // the cotangent of h*
			if gh == 0 || math.IsNaN(gh) || math.IsInf(gh, 0) {
				return fmt.Errorf("ode: trajectory %d: %s: the condition's derivative along the solution is %v at the event (t = %v): its time has no derivative (a tangential crossing)",
					lo+i, ep.Names[e], gh, tc[k]+hc[k])
			}
			mu := -hbar / gh
			for c := 0; c < d; c++ {
				lam[c][i] += mu * rb[2+c][0]
			}
			for c := 0; c < np; c++ {
				gp[c][i] += mu * (rb[2+d+c][0] + cg[2+d+c][0])
			}
			for c := 0; c < ns; c++ {
				gs[c][i] += mu * (rb[2+d+np+c][0] + cg[2+d+np+c][0])
			}
			tau[i] += tb[k] + mu*(rb[0][0]+cg[1][0])
		}
	}
	for i := 0; i < width; i++ {
		for ; sc[i] >= 0; sc[i]-- { // τ ≤ T0: the initial state
			bar := tapbar[(i*K+sc[i])*d:]
			for c := 0; c < d; c++ {
				lam[c][i] += bar[c]
			}
		}
		for c := 0; c < d; c++ {
			res.GradY0[(lo+i)*d+c] = lam[c][i]
		}
		for c := 0; c < np; c++ {
			res.GradP[(lo+i)*np+c] = gp[c][i]
		}
	}
	for k := 0; k*scan.TileSize < width; k++ {
		for c := 0; c < ns; c++ {
			acc := 0.0
			for i := k * scan.TileSize; i < min(width, (k+1)*scan.TileSize); i++ {
				acc += gs[c][i]
			}
			r.tiles[(lo/scan.TileSize+k)*ns+c] = acc
		}
	}
	return nil
}

func prefix(x [][]float64, m int) [][]float64 { return appendPrefix(nil, x, m) }

// endAtEvent sets τ̄ (tau), the cotangent of the end time of the chunk's
// trajectories (lens steps each) whose last step is an event step: the
// event time t* moves with the parameters, but what is read there at a
// fixed time does not (y(τ) = y* + f(t*, y*)·(τ − t*) to first order),
// so a cotangent x̄ of such a value enters as τ̄ = −x̄·f(t*, y*): the
// final state at a non-terminal event exactly at T1 (the state after the
// jump, the branch on which the event came first, as a save time at an
// event time reads it) and save times exactly at a terminal event (the
// branch on which the trajectory reaches them). The final state at a
// terminal event is the state at t* itself (no term). ybar and tapbar
// are the loss's cotangents of the final and saved states, where the
// saves' steps (saveSteps).
func (w *cpuWorker) endAtEvent(r *cpuRun, v *eventWork, lo int, lens []int, ybar, tapbar []float64, where []int, tau []float64) error {
	pl, res := w.ex.plan, r.res
	d, np, K, width := pl.Dim, pl.Params, len(r.job.SaveAt), len(lens)
	var xbar, f, in [][]float64 // (made for the first trajectory that needs them)
	for i, l := range lens {
		ms := v.marks[i]
		if l == 0 || len(ms) == 0 || ms[len(ms)-1].s != l-1 {
			continue
		}
		if xbar == nil {
			xbar, f, in = cols(d, 1), cols(d, 1), make([][]float64, 0, 1+d+np+len(r.shared))
		}
		for c := 0; c < d; c++ {
			xbar[c][0] = 0
			if !pl.Events.Terminal[ms[len(ms)-1].e] {
				xbar[c][0] = ybar[c*width+i]
			}
		}
		any := false
		for k := K - 1; k >= 0 && where[i*K+k] == l; k-- {
			for c := 0; c < d; c++ {
				xbar[c][0] += tapbar[(i*K+k)*d+c]
			}
		}
		for c := 0; c < d; c++ {
			any = any || xbar[c][0] != 0
		}
		if !any {
			continue
		}
		g := lo + i
		in = append(in[:0], res.T[g:g+1])
		for c := 0; c < d; c++ {
			in = append(in, res.Y[g*d+c:g*d+c+1])
		}
		for c := 0; c < np; c++ {
			in = append(in, r.job.P[g*np+c:g*np+c+1])
		}
		in = append(in, r.shared...)
		if err := v.field.Run(f, in, 1); err != nil {
			return err
		}
		for c := 0; c < d; c++ {
			tau[i] -= xbar[c][0] * f[c][0]
		}
	}
	return nil
}

// eventStates sets y⁻ (columns of len(lanes)) to the states at the end of
// the event steps of the given positions of a row, before their jumps:
// Φ(t, h, y).
func (w *cpuWorker) eventStates(v *eventWork, lanes []int, tc, hc []float64, yc, pc, yMinus [][]float64) error {
	q := len(lanes)
	d, np := len(yc), len(pc)
	t, h := make([]float64, q), make([]float64, q)
	y, p := cols(d, q), cols(np, q)
	for x, k := range lanes {
		t[x], h[x] = tc[k], hc[k]
		for c := range y {
			y[c][x] = yc[c][k]
		}
		for c := range p {
			p[c][x] = pc[c][k]
		}
	}
	in := append([][]float64{t, h}, y...)
	in = append(append(in, p...), w.sh...)
	return v.replay.Run(yMinus, in, q)
}

// saveSteps returns, for the chunk's trajectories (lens steps each, their
// states and steps stored in w.sbuf and w.hbuf), the step that reads each
// save time, [width][K], by the rule of the record (startSaves,
// writeSaves, finishSaves): −1 for τ ≤ T0 (the initial state), s for the
// step s with τ < t_s + h_s not read by an earlier step (the state y_s
// itself if τ ≤ t_s), lens[i] for τ at or after the end (the final
// state).
func (w *cpuWorker) saveSteps(r *cpuRun, lens []int, width int) []int {
	ts, K := r.job.SaveAt, len(r.job.SaveAt)
	where := make([]int, width*K)
	if K == 0 {
		return where
	}
	stride := (1 + w.ex.plan.Dim) * width
	for i, l := range lens {
		c := 0
		for ; c < K && ts[c] <= r.job.T0; c++ {
			where[i*K+c] = -1
		}
		for s := 0; s < l && c < K; s++ {
			next := w.sbuf[s*stride+i] + w.hbuf[s*width+i]
			for ; c < K && ts[c] < next; c++ {
				where[i*K+c] = s
			}
		}
		for ; c < K; c++ {
			where[i*K+c] = l
		}
	}
	return where
}

// eventReplay runs the chunk lo…hi-1 over the job's mesh with events
// (Mesh.Events), as the record ran it, bit for bit: each step is
// DenseStep's (whose y⁺ is the record's step), a marked step is
// followed by its event's jump, and the save times are read by the
// record's rule (writeSaves, finishSaves; NaN past a terminal event). It
// writes the final states, the end times, the event counts and the
// saved states, and keeps the steps, the event marks and (for a
// gradient) the states as the record does, for eventGrad.
func (w *cpuWorker) eventReplay(r *cpuRun, lo, hi int) error {
	j, pl, res := r.job, w.ex.plan, r.res
	m := j.Mesh
	d, np, terms := pl.Dim, pl.Params, pl.DenseTerms
	width := hi - lo
	w.lo, w.sh = lo, r.shared
	v, err := w.eventWork(r)
	if err != nil {
		return err
	}
	lens := m.Len[lo:hi]
	rows := 0
	for i, l := range lens {
		rows = max(rows, l)
		v.marks[i], v.count[i] = v.marks[i][:0], 0
		for s := 0; s < l; s++ {
			if e := m.Events[s*m.N+lo+i]; e > 0 {
				v.marks[i] = append(v.marks[i], evMark{s: s, e: int(e) - 1})
				v.count[i]++
			}
		}
	}
	// The steps, [rows][width], and for a gradient the states.
	if cap(w.hbuf) < rows*width {
		w.hbuf = make([]float64, rows*width)
	}
	w.hbuf = w.hbuf[:rows*width]
	for s := 0; s < rows; s++ {
		for i, l := range lens {
			if s < l {
				w.hbuf[s*width+i] = m.H[s*m.N+lo+i]
			}
		}
	}
	stride := (1 + d) * width
	w.storing = j.Op == OpGrad && int64(rows*stride)*8 <= r.stateBudget
	if w.storing {
		if cap(w.sbuf) < rows*stride {
			w.sbuf = make([]float64, rows*stride)
		}
		w.sbuf = w.sbuf[:rows*stride]
	}
	w.rows = rows
	// Each slot's time and state (w.endT, w.endY: they end as the end
	// time and final state) and save cursor.
	ts, K := j.SaveAt, len(j.SaveAt)
	t, y := w.endT[:width], w.endY[:d*width]
	for i := range t {
		t[i] = j.T0
		for c := 0; c < d; c++ {
			y[c*width+i] = j.Y0[(lo+i)*d+c]
		}
		k := 0
		for ; k < K && ts[k] <= j.T0; k++ {
			copy(res.Ys[((lo+i)*K+k)*d:((lo+i)*K+k+1)*d], j.Y0[(lo+i)*d:(lo+i+1)*d])
		}
		w.cur[i] = k
	}
	tc, hc := make([]float64, width), make([]float64, width)
	yc, pc := cols(d, width), cols(np, width)
	out := cols(d+terms*d, width)
	lane := make([]float64, (1+terms)*d)
	act := make([]int, 0, width)
	jin := make([][]float64, 0, 1+d+np+len(r.shared))
	jout := cols(d, 1)
	for s := 0; s < rows; s++ {
		act = act[:0]
		for i, l := range lens {
			if s < l {
				act = append(act, i)
			}
		}
		q := len(act)
		for k, i := range act {
			tc[k], hc[k] = t[i], w.hbuf[s*width+i]
			for c := 0; c < d; c++ {
				yc[c][k] = y[c*width+i]
			}
			for c := 0; c < np; c++ {
				pc[c][k] = j.P[(lo+i)*np+c]
			}
			if w.storing {
				row := w.sbuf[s*stride:]
				row[i] = t[i]
				for c := 0; c < d; c++ {
					row[(1+c)*width+i] = y[c*width+i]
				}
			}
		}
		in := append([][]float64{tc[:q], hc[:q]}, prefix(yc, q)...)
		in = append(append(in, prefix(pc, q)...), r.shared...)
		if err := v.dense.Run(prefix(out, q), in, q); err != nil {
			return err
		}
		for k, i := range act {
			// The save times in the step (see writeSaves).
			next := tc[k] + hc[k]
			if c := w.cur[i]; c < K && ts[c] < next {
				for x := 0; x < d; x++ {
					lane[x] = yc[x][k]
				}
				for x := 0; x < terms*d; x++ {
					lane[d+x] = out[d+x][k]
				}
				for ; c < K && ts[c] < next; c++ {
					o := res.Ys[((lo+i)*K+c)*d : ((lo+i)*K+c+1)*d]
					if ts[c] <= tc[k] {
						copy(o, lane[:d])
					} else {
						scan.Interp(o, lane[:d], lane[d:], (ts[c]-tc[k])/hc[k])
					}
				}
				w.cur[i] = c
			}
			t[i] = next
			if hc[k] != 0 { // (a step of size 0, an event's whose root coincides with the one before, is the identity)
				for c := 0; c < d; c++ {
					y[c*width+i] = out[c][k]
				}
			}
			ms := v.marks[i]
			x := sort.Search(len(ms), func(x int) bool { return ms[x].s >= s })
			if x == len(ms) || ms[x].s != s || v.jump[ms[x].e] == nil {
				continue
			}
			// The event's jump, at the event time.
			jin = append(jin[:0], t[i:i+1])
			for c := 0; c < d; c++ {
				jin = append(jin, y[c*width+i:c*width+i+1])
			}
			for c := 0; c < np; c++ {
				jin = append(jin, j.P[(lo+i)*np+c:(lo+i)*np+c+1])
			}
			jin = append(jin, r.shared...)
			if err := v.jump[ms[x].e].Run(jout, jin, 1); err != nil {
				return err
			}
			for c := 0; c < d; c++ {
				y[c*width+i] = jout[c][0]
			}
		}
	}
	for i, l := range lens {
		g := lo + i
		res.T[g], res.Events[g] = t[i], v.count[i]
		for c := 0; c < d; c++ {
			res.Y[g*d+c] = y[c*width+i]
		}
		terminal := w.endsAtTerminal(i, l-1)
		for k := w.cur[i]; k < K; k++ {
			o := res.Ys[(g*K+k)*d : (g*K+k+1)*d]
			for c := range o {
				o[c] = y[c*width+i]
				if terminal && ts[k] > t[i] {
					o[c] = math.NaN()
				}
			}
		}
	}
	return nil
}
