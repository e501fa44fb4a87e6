package ode

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"

	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/internal/sysmem"
	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// DenseSolution is a solve that kept what it needs to evaluate any
// trajectory at any time of its span afterwards, as Diffrax's
// sol.evaluate(t): for every accepted step of every trajectory its start
// time, its size, the state there and the coefficients of the method's
// continuous extension on it (Plan.DenseStep). Evaluate reads a state
// from them with DenseTerms·Dim multiply-adds, and gives the values a
// Solve with the same time in SaveAt gives, bit for bit.
//
// Memory: 8·(2 + Dim·(1 + DenseTerms)) bytes a step (Tsit5, Dim 4: 176;
// Vern7, Dim 4: 272), Bytes in all, at most Settings.MemoryLimit.
// A DenseSolution is safe for concurrent use by Evaluate. Evaluate reads
// copies of its own of the ends, statuses and final states: the embedded
// Solution may be changed, or passed to SolveTo as dst, without changing
// what Evaluate returns.
//
// Evaluate's values have no derivative: for the gradient of a loss of
// states at given times, give the times as Problem.SaveAt to Grad, which
// reads them from the same extension and differentiates it exactly (with
// respect to the event times too).
type DenseSolution struct {
	*Solution
	// T0 is the start of every trajectory's span; Solution.T holds their
	// ends.
	T0 float64
	// Terms is the number of terms of the extension (Plan.DenseTerms;
	// with Method Auto's switch, Mesh.Switch, the larger of Tsit5's and
	// Rodas5P's, the other method's steps padded with zero terms, which
	// leave Evaluate's values unchanged).
	Terms int
	// Bytes is the memory held for the steps.
	Bytes int64

	off  []int     // trajectory i's steps are off[i] … off[i+1]-1
	th   []float64 // [steps][2]: start time and size of each step
	yw   []float64 // [steps][Dim·(1+Terms)]: the state before the step, then w_1 … w_m
	last []float64 // [N×Dim] final states

	// n, d, ends, status and method are Evaluate's copies of the
	// Solution's N, Dim, T, Status and Method.
	n, d   int
	ends   []float64
	status []Status
	method string
}

// denseStepBytes returns the bytes a DenseSolution holds for one step.
func denseStepBytes(d, terms int) int64 { return 8 * int64(2+d*(1+terms)) }

// ErrNoDense is returned (wrapped) by SolveDense when the settings keep
// no continuous extension (Settings.Saves = SaveStep).
var ErrNoDense = errors.New("no dense output")

// SolveDense solves p like Solve and keeps the dense output of every
// trajectory for DenseSolution.Evaluate. Its cost is a record and one
// replay of the mesh with the dense step; its memory is stated by
// DenseSolution.Bytes and must fit in Settings.MemoryLimit (default 4 GiB):
// otherwise it returns an error wrapping ErrTooLarge that gives the size
// and the fixes (fewer trajectories per call, a looser tolerance, or
// SaveAt for the times needed). With Settings.Saves = SaveStep it returns
// an error wrapping ErrNoDense. Failed trajectories are reported as by
// Solve (an error, or with AllowFailures their Status, which Evaluate
// reports). With events (Settings.Events) the steps are the record's,
// event steps included, each followed by its event's jump (Apply): at a
// non-terminal event time Evaluate gives the state after the jump, as a
// save time there does, and a terminal event ends the span (Solution.T).
func (sv *Solver) SolveDense(p *Problem) (*DenseSolution, error) {
	pl := sv.plan
	if pl.DenseStep == nil {
		return nil, badInput(fmt.Errorf("ode: %s: SolveDense: Settings.Saves is %v: %w; use the default SaveInterpolate", sv.field.name(), sv.set.Saves, ErrNoDense))
	}
	// With AllowFailures, Record reports failed trajectories in their
	// statuses and returns an error only for what made it record nothing
	// (bad inputs, a cancelled context, an engine's failure).
	m, sol, err := sv.Record(p)
	if err != nil {
		return nil, err
	}
	var stiff *Plan // the plan of the steps from Mesh.Switch on
	if sol.Method != pl.Method {
		// Method Auto switched to the stiff solver: every trajectory
		// (no Switch: all were stiff on an engine that restarts them) or
		// those of Mesh.Switch (from the switch, or from T0 on an engine
		// that restarts them: Switch 0).
		alt, aerr := sv.stiffSolver()
		if aerr != nil {
			return nil, aerr
		}
		if m.Switch == nil {
			pl = alt.plan
		} else {
			stiff = alt.plan
		}
	}
	if err := m.Host(); err != nil {
		return nil, err
	}
	q, err := sv.checkProblem(p)
	if err != nil {
		return nil, err
	}
	d, terms := pl.Dim, pl.DenseTerms
	if stiff != nil {
		terms = max(terms, stiff.DenseTerms) // the fewer terms padded with zeros
	}
	ds := &DenseSolution{Solution: sol, T0: q.T0, Terms: terms, off: make([]int, m.N+1), last: slices.Clone(sol.Y),
		n: sol.N, d: sol.Dim, ends: slices.Clone(sol.T), status: slices.Clone(sol.Status), method: sol.Method}
	for i, l := range m.Len {
		if m.Status[i] != OK {
			l = 0
		}
		ds.off[i+1] = ds.off[i] + l
	}
	steps := ds.off[m.N]
	ds.Bytes = int64(steps) * denseStepBytes(d, terms)
	limit := sv.set.MemoryLimit
	if limit <= 0 {
		limit = scan.DefaultMemoryLimit
	}
	if ds.Bytes > limit {
		return nil, badInput(fmt.Errorf("ode: %s: SolveDense: the dense output of %d trajectories (%d steps, %d bytes each) needs %s, more than MemoryLimit = %s: %w; "+
			"solve fewer trajectories per call, loosen RelTol (fewer steps), raise Settings.MemoryLimit, or give the times needed as Problem.SaveAt",
			sv.field.name(), m.N, steps, denseStepBytes(d, terms), sysmem.Format(float64(ds.Bytes)), sysmem.Format(float64(limit)), ErrTooLarge))
	}
	ds.th = make([]float64, 2*steps)
	ds.yw = make([]float64, steps*d*(1+terms))
	// Each trajectory's steps from T0 and y0: all of them, or with a
	// switch those before it, then the stiff plan's from where they end.
	n := m.N
	from, to := make([]int, n), make([]int, n)
	t, y := make([]float64, n), append([]float64(nil), q.y0...)
	for i := range t {
		t[i] = q.T0
		to[i] = ds.off[i+1] - ds.off[i]
		if stiff != nil {
			to[i] = min(to[i], m.Switch[i])
		}
	}
	if err := ds.fill(pl, q, m, &sv.set, from, to, t, y); err != nil {
		return nil, err
	}
	if stiff != nil {
		for i := range to {
			from[i], to[i] = to[i], ds.off[i+1]-ds.off[i]
		}
		if err := ds.fill(stiff, q, m, &sv.set, from, to, t, y); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// denseChunk is the number of trajectories fill runs as one block.
const denseChunk = 256

// fill replays mesh m with the dense step of pl, chunk by chunk on all
// cores, keeping every step's start, size, state and coefficients (those
// past pl's terms zero): trajectory i's steps from[i] … to[i]-1, from
// time t[i] and state y[i*Dim:], which it leaves at their ends.
func (ds *DenseSolution) fill(pl *Plan, q *problem, m *Mesh, set *Settings, from, to []int, t0, y0 []float64) error {
	d, np, terms, pterms := pl.Dim, pl.Params, ds.Terms, pl.DenseTerms
	n := m.N
	master, err := tape.NewExec(pl.DenseStep, &tape.ExecSettings{Workers: 1})
	if err != nil {
		return err
	}
	// The events' jumps: a step that the record ended at an event with
	// Apply (Mesh.Events) is followed by the jump, as Replay runs it.
	var jumps []*tape.Exec
	if ep := pl.Events; ep != nil {
		jumps = make([]*tape.Exec, len(ep.Jump))
		for e, jp := range ep.Jump {
			if jp != nil {
				if jumps[e], err = tape.NewExec(jp, &tape.ExecSettings{Workers: 1}); err != nil {
					return err
				}
			}
		}
	}
	nchunks := (n + denseChunk - 1) / denseChunk
	workers := set.Exec.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = par.Workers(workers, nchunks)
	execs := make([]*tape.Exec, workers)
	wjumps := make([][]*tape.Exec, workers)
	for w := range execs {
		execs[w] = master.Clone(denseChunk, 1)
		for _, jx := range jumps {
			if jx != nil {
				jx = jx.Clone(1, 1)
			}
			wjumps[w] = append(wjumps[w], jx)
		}
	}
	errs := make([]error, nchunks)
	width := d * (1 + terms)
	par.Run(nchunks, workers, func(w, c int) {
		lo, hi := c*denseChunk, min(n, (c+1)*denseChunk)
		// Lanes by decreasing length: those still running are a prefix.
		idx := make([]int, hi-lo)
		for i := range idx {
			idx[i] = lo + i
		}
		steps := func(i int) int { return to[i] - from[i] }
		sort.SliceStable(idx, func(a, b int) bool { return steps(idx[a]) > steps(idx[b]) })
		k := len(idx)
		t, h := make([]float64, k), make([]float64, k)
		y, p, out := cols(d, k), cols(np, k), cols(d+pterms*d, k)
		defer func() {
			for l, i := range idx {
				t0[i] = t[l]
				for x := 0; x < d; x++ {
					y0[i*d+x] = y[x][l]
				}
			}
		}()
		for l, i := range idx {
			t[l] = t0[i]
			for x := 0; x < d; x++ {
				y[x][l] = y0[i*d+x]
			}
			for x := 0; x < np; x++ {
				p[x][l] = q.p[i*np+x]
			}
		}
		var in, jin [][]float64
		jout := cols(d, 1)
		for s := 0; ; s++ {
			act := 0
			for act < k && steps(idx[act]) > s {
				act++
			}
			if act == 0 {
				return
			}
			for l, i := range idx[:act] {
				h[l] = m.H[(from[i]+s)*n+i]
			}
			in = append(append(in[:0], t[:act], h[:act]), appendPrefix(nil, y, act)...)
			in = appendPrefix(in, p, act)
			for x := range q.Shared {
				in = append(in, q.Shared[x:x+1])
			}
			if err := execs[w].Run(appendPrefix(nil, out, act), in, act); err != nil {
				errs[c] = err
				return
			}
			for l, i := range idx[:act] {
				at := ds.off[i] + from[i] + s
				ds.th[2*at], ds.th[2*at+1] = t[l], h[l]
				row := ds.yw[at*width : (at+1)*width]
				for x := 0; x < d; x++ {
					row[x] = y[x][l]
				}
				for x := 0; x < pterms*d; x++ {
					row[d+x] = out[d+x][l]
				}
				clear(row[d+pterms*d:])
				for x := 0; x < d && h[l] != 0; x++ { // (a step of size 0, of coinciding events, is the identity)
					y[x][l] = out[x][l]
				}
				t[l] += h[l]
				if m.Events == nil {
					continue
				}
				e := m.Events[(from[i]+s)*n+i] - 1
				if e < 0 || wjumps[w][e] == nil {
					continue
				}
				// The event's jump, at the event time.
				jin = append(jin[:0], t[l:l+1])
				for x := 0; x < d; x++ {
					jin = append(jin, y[x][l:l+1])
				}
				for x := 0; x < np; x++ {
					jin = append(jin, q.p[i*np+x:i*np+x+1])
				}
				for x := range q.Shared {
					jin = append(jin, q.Shared[x:x+1])
				}
				if err := wjumps[w][e].Run(jout, jin, 1); err != nil {
					errs[c] = err
					return
				}
				for x := 0; x < d; x++ {
					y[x][l] = jout[x][0]
				}
			}
		}
	})
	return errors.Join(errs...)
}

// Evaluate sets dst [Dim] to trajectory i's state at time t, read from
// the continuous extension of the step with t_k ≤ t < t_k + h_k (the
// mesh point's state itself at θ = 0; y0 at T0; the final state at the
// trajectory's end), and returns it (allocated if dst is nil). It is the
// value a Solve with t in SaveAt gives, bit for bit. It returns an error
// if t is not finite or outside [T0, T[i]], or if trajectory i failed; it
// panics if i is out of range or len(dst) is not Dim.
func (ds *DenseSolution) Evaluate(dst []float64, i int, t float64) ([]float64, error) {
	d := ds.d
	if i < 0 || i >= ds.n {
		panic(fmt.Sprintf("ode: DenseSolution.Evaluate: trajectory %d out of range [0, %d)", i, ds.n))
	}
	if dst == nil {
		dst = make([]float64, d)
	}
	if len(dst) != d {
		panic(fmt.Sprintf("ode: DenseSolution.Evaluate: len(dst) = %d, want Dim = %d", len(dst), d))
	}
	if st := ds.status[i]; st != OK {
		return nil, &TrajectoryError{Index: i, T: ds.ends[i], Status: st, Method: ds.method, Failed: 1}
	}
	end := ds.ends[i]
	if math.IsNaN(t) || t < ds.T0 || t > end {
		return nil, badInput(fmt.Errorf("ode: DenseSolution.Evaluate: t = %v is outside trajectory %d's span [%v, %v]", t, i, ds.T0, end))
	}
	lo, hi := ds.off[i], ds.off[i+1]
	// The first step that starts after t; the one before brackets it.
	k := lo + sort.Search(hi-lo, func(s int) bool { return ds.th[2*(lo+s)] > t }) - 1
	if k < lo || k == hi-1 && t >= ds.th[2*k]+ds.th[2*k+1] {
		// At the end (every OK trajectory has a step starting at T0).
		copy(dst, ds.last[i*d:(i+1)*d])
		return dst, nil
	}
	terms := ds.Terms
	row := ds.yw[k*d*(1+terms) : (k+1)*d*(1+terms)]
	th := (t - ds.th[2*k]) / ds.th[2*k+1]
	if th == 0 {
		copy(dst, row[:d])
		return dst, nil
	}
	// y + θ·(w_1 + θ·(w_2 + … + θ·w_m)), as Plan.Interp and every
	// engine compute it.
	scan.Interp(dst, row[:d], row[d:], th)
	return dst, nil
}
