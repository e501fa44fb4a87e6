package ode

import (
	"context"
	"fmt"
	"math"
	"runtime/trace"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/buf"
	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Gradient is the value and gradient of a loss, with the solution it was
// computed on.
type Gradient struct {
	Loss   float64
	Y0     []float64 // ∂L/∂Y0 [N×Dim]
	P      []float64 // ∂L/∂P [N×Params]
	Shared []float64 // ∂L/∂Shared [Shared]

	Solution *Solution // final and saved states of the replay, statuses, stats
	Mesh     *Mesh     // the mesh that was replayed

	// RecordTime is the time spent recording the mesh (0 if a mesh was
	// given), GradTime the time of the replay, loss and backward sweep.
	// When the engine records and differentiates in one pass (the CPU
	// engine does, chunk by chunk), the split is its estimate.
	RecordTime, GradTime time.Duration
	// StoredBytes is the peak memory the stored states of the backward
	// sweep took (per worker chunk on the CPU engine, largest chunk).
	StoredBytes int64

	// Resident, if not nil, holds the per-trajectory results on the
	// engine that computed them (Settings.KeepGrads): Y0, P, Solution
	// and Mesh are then nil until HostGrads fills them (Release frees
	// them unread).
	Resident ResidentGrads

	// Omit names results the caller does not want back: the caller sets
	// it on the dst it passes to Grad, GradContext or GradPartial, and it
	// is kept across the calls that reuse dst (the zero value returns
	// everything). The omitted arrays are nil in the returned Solution
	// and, for OmitStats, in the Stats of the Mesh the call records; a
	// given mesh is not changed. Everything else, Loss and the gradients
	// included, is the same as without it, bit for bit, and failures are
	// reported as without it (their messages read what they need
	// internally).
	//
	// A training loop or a sensitivity study that reads only Loss and the
	// gradients sets OmitStates|OmitStats. On a GPU engine an omitted
	// array is neither copied back from the device nor rearranged on the
	// host: for 2^20 Lorenz trajectories without save times that is 28 of
	// the 96 bytes a trajectory a whole call copies back (Y, 24, and the
	// rejected-step counts, 4) and their scatter into row-major arrays,
	// and with K save times another 24·K bytes a trajectory (Ys). The CPU
	// engine does not write the omitted counts and final states (its
	// loss reads the saved states where it wrote them: they are computed
	// and dropped).
	Omit Omit

	// spare holds the storage of arrays an engine filled although Omit
	// left them out, for the next call's reuse (see reusable).
	spare omitted

	// meshGiven is set where Mesh was given to the call, not recorded by
	// it: the caller's, which a later call that records never writes
	// into (see reusable).
	meshGiven bool

	// kept is what HostGrads needs, while Resident holds the results;
	// spareGrads the engine memory of results HostGrads read, for the
	// next call's (Job.Reuse.Grads).
	kept       *keptGrads
	spareGrads ResidentGrads
}

// Omit is a set of the results of a Grad that the caller does not want
// back (Gradient.Omit).
type Omit uint8

const (
	// OmitStates leaves out the final and saved states, Solution.Y
	// ([N×Dim]) and Solution.Ys ([N×K×Dim]).
	OmitStates Omit = 1 << iota
	// OmitStats leaves out the per-trajectory counts of rejected steps
	// and field evaluations, Stats.Rejected and Stats.FieldEvals (of the
	// Solution and of the recorded Mesh). Stats.Accepted, Status, T and
	// the mesh stay: failures and replays need them.
	OmitStats
)

// omitted is the storage of a call's omitted arrays (Gradient.spare).
type omitted struct {
	y, ys      []float64
	rej, evals []int
}

// drop sets the arrays of sol (and, for a recorded mesh, of m's Stats)
// that o leaves out to nil, keeping their storage in spare. sol.Stats
// is m.Stats with OmitStats applied; a given mesh (recorded false) is
// not changed.
func (o Omit) drop(sol *Solution, m *Mesh, recorded bool, spare *omitted) {
	if o&OmitStates != 0 {
		if sol.Y != nil {
			spare.y = sol.Y
		}
		if sol.Ys != nil {
			spare.ys = sol.Ys
		}
		sol.Y, sol.Ys = nil, nil
		if sol.Resident != nil { // (Job.KeepSaves is not set with OmitStates)
			sol.Resident.Release()
			sol.Resident = nil
		}
	}
	if o&OmitStats != 0 {
		if recorded {
			if m.Stats.Rejected != nil {
				spare.rej = m.Stats.Rejected
			}
			if m.Stats.FieldEvals != nil {
				spare.evals = m.Stats.FieldEvals
			}
			m.Stats.Rejected, m.Stats.FieldEvals = nil, nil
		}
		sol.Stats.Rejected, sol.Stats.FieldEvals = nil, nil
	}
}

// Grad returns the loss and its gradient with respect to Y0, P and Shared.
// If m is nil it records a mesh first; otherwise it replays m, which must
// have been recorded for this problem (the same field and method, start
// and end times: a mismatch is an error naming what differs; save times
// may differ from the record's, within the same span). The step sizes are held fixed: the result is the exact
// derivative of the replay, the frozen-mesh discrete adjoint. A mesh with
// a failed trajectory is never replayed, and a mesh on which an explicit
// method ran at its stability limit, or past it for a mode of ∂f/∂y that
// the solution does not excite (Solution.Stiff: the stiffness test and,
// in the record, the stability probe), is not differentiated: Grad
// returns a *TrajectoryError (Status Stiff, unwrapping to ErrStiff).
//
// dst may be nil. A dst from an earlier call is filled in place: its
// gradient arrays, its Solution's arrays and (when m is nil, so that a
// new mesh is recorded, and dst.Mesh was recorded by the call that
// filled dst, not given to it) its Mesh's arrays are reused where large enough,
// which at millions of trajectories saves most of a call's time outside
// the solve (saves an engine kept, Solution.Resident, are written over or
// released, as by SolveTo). Copy what you keep from dst before passing it
// again; dst.Mesh itself may be passed as m (it is then replayed, not
// overwritten). An array of dst that shares storage with an input (p's
// arrays, the loss's Data, m's steps and times: a dst.Y0 that is p.Y0) is
// not reused, so the inputs are read as given and not changed. After an
// error, dst's contents are unspecified.
func Grad(dst *Gradient, p Problem, loss Loss, m *Mesh, s *Settings) (*Gradient, error) {
	sv, err := NewSolver(p.Field, s)
	if err != nil {
		return nil, err
	}
	return sv.Grad(dst, &p, loss, m)
}

// Grad is the Solver form of the package function Grad. An error about
// p, loss or m wraps ErrInput (a mesh with a failed trajectory's also
// unwraps to its *TrajectoryError); a failed or stiff trajectory's, or a
// non-finite loss's, does not.
func (sv *Solver) Grad(dst *Gradient, p *Problem, loss Loss, m *Mesh) (*Gradient, error) {
	return sv.GradContext(context.Background(), dst, p, loss, m)
}

// GradContext is Grad with a context: cancelling it stops the work and
// returns ctx.Err().
func (sv *Solver) GradContext(ctx context.Context, dst *Gradient, p *Problem, loss Loss, m *Mesh) (*Gradient, error) {
	rg := trace.StartRegion(ctx, "ode.Grad.check")
	q, err := sv.checkInputs(p, m, sv.leaveChecks(m))
	rg.End()
	if err != nil {
		return nil, err
	}
	rp, err := sv.reg(&loss, q.Field.Shared)
	if err != nil {
		return nil, err
	}
	given := m
	q.omit = dst.omit()
	// A record: the engine may write the end times and check the
	// statuses in its own pass (Job.EndTimes).
	q.ends = m == nil && sv.set.Method != Auto
	// The engine may keep the per-trajectory results (Job.KeepGrads).
	q.keep = sv.set.KeepGrads && sv.set.Method != Auto
	dst.unalias(q.inputs(&loss, m))
	reuse := dst.reusable(m == nil)
	rg = trace.StartRegion(ctx, "ode.Grad.run")
	res, used, err := sv.run(ctx, OpGrad, q, &loss, m, reuse)
	rg.End()
	if err := sv.inputError(err, p, m); err != nil {
		return nil, err
	}
	releaseOld(reuse.Saves, res.Saves)
	if reuse.Grads != nil && reuse.Grads != res.Grads {
		reuse.Grads.Release()
	}
	defer trace.StartRegion(ctx, "ode.Grad.results").End()
	if dst == nil {
		dst = &Gradient{}
	}
	if res.Grads != nil {
		// The engine kept the per-trajectory results (Settings.KeepGrads)
		// and found every trajectory well: the loss and the shared
		// gradient now, the rest in HostGrads.
		if err := used.gradScalars(dst, q, res, &loss, rp); err != nil {
			return nil, err
		}
		dst.Y0, dst.P, dst.Solution, dst.Mesh = nil, nil, nil, nil
		dst.Resident = res.Grads
		dst.kept = &keptGrads{used: used, q: q.kept(), res: res, given: given, reuse: reuse}
		if err := checkGradient(dst, q.Field.Dim, q.Field.Params, true); err != nil {
			return dst, err
		}
		return dst, nil
	}
	if err := used.gradArrays(dst, q, res, given, reuse); err != nil {
		return nil, err
	}
	if err := used.gradScalars(dst, q, res, &loss, rp); err != nil {
		return nil, err
	}
	if err := checkGradient(dst, q.Field.Dim, q.Field.Params, res.GradFinite); err != nil {
		return dst, err
	}
	return dst, nil
}

// gradScalars sets the loss (with its regularisation), the shared
// gradient and the times of a Grad's result res in dst.
func (sv *Solver) gradScalars(dst *Gradient, q *problem, res *Result, loss *Loss, rp *tape.Program) error {
	dst.Loss = res.Loss
	dst.Shared = append(dst.Shared[:0], res.GradS...)
	r, err := evalReg(loss, rp, q.Shared, dst.Shared)
	if err != nil {
		return err
	}
	dst.Loss += r
	dst.RecordTime, dst.GradTime = res.RecordTime, res.GradTime
	dst.StoredBytes = res.StoredBytes
	return nil
}

// gradArrays, on the solver whose plan ran a Grad (run's used), sets the
// per-trajectory results of its result res in dst: Y0, P, Solution and
// Mesh, the one recorded or given, the arrays in the storage of reuse's
// (Gradient.reusable) where large enough; or it returns the error of a
// failed or stiff trajectory. given is the mesh the call replayed (nil:
// a record).
func (used *Solver) gradArrays(dst *Gradient, q *problem, res *Result, given *Mesh, reuse *Result) error {
	m := given
	var reached []float64 // the times the record reached (nil for a given mesh: T1)
	vouched := given != nil && given.residentOn(used.engine.Name()) && given.vouched()
	// Without events, one pass writes the end times of the recorded mesh
	// and of the solution and checks that none failed or was stiff
	// (endTimesWell), the common case; with events, the solution's
	// times are a terminal event's where one fired (the times reached:
	// res.T, also where the engine wrote the mesh's end times,
	// EndsWell).
	var t []float64                   // the solution's times
	checked, well := vouched, vouched // vouched: checkMesh's: none stiff, none failed
	switch {
	case m == nil && res.EndsWell && res.Mesh != nil:
		// The engine wrote both arrays of end times and found every
		// trajectory well as it wrote the statuses.
		t, well, checked = res.T, true, true
		m = used.meshEnds(q, res, res.MeshT1)
	case m == nil && used.plan.Events == nil && res.Mesh != nil:
		var old []float64
		if reuse.Mesh != nil {
			old = reuse.Mesh.T1
		}
		var t1 []float64
		t1, t, well = q.endTimesWell(old, reuse.T, true, res.Mesh.Status, res.Stiff)
		m, checked = used.meshEnds(q, res, t1), true
	case m == nil:
		m = used.mesh(q, res, reuse.Mesh)
	case used.plan.Events == nil:
		var status []Status
		if !vouched {
			status = m.Status
		}
		t, _, well = q.endTimesWell(reuse.T, nil, false, status, m.Stiff)
		checked = true
	}
	if given == nil {
		reached = res.T
	}
	if !checked {
		well = allWell(m.Status, m.Stiff)
	}
	if !well {
		if err := stiffFailure(m, used.plan.Method, q.T0, reached); err != nil {
			return err
		}
		if err := used.failure(q, res, m.Status, used.plan.Method); err != nil {
			return err
		}
	}
	if given == nil && m.Resident != nil {
		m.vouch() // none stiff, none failed (just checked)
	}
	dst.Y0 = reuseCopy(dst.Y0, res.GradY0)
	dst.P = reuseCopy(dst.P, res.GradP)
	// With events, the solution's times: a terminal event's where it
	// fired, else the end times.
	switch {
	case t != nil: // the end times, written above
	case used.plan.Events != nil && res.T != nil && buf.Same(reuse.T, res.T):
		t = res.T // it already lives in reuse.T's storage
	case used.plan.Events != nil && res.T != nil:
		t = par.Append(reuse.T, res.T)
	default:
		t = q.endTimes(reuse.T)
	}
	sol := used.solutionT(q, res, m.Status, t, dst.oldSaveAt())
	sol.meshArrays = true
	if sol.Resident != nil {
		sol.ysSpare = reuse.Ys // for HostSaves
	}
	sol.Stats = m.Stats
	q.omit.drop(sol, m, given == nil, &dst.spare)
	dst.Solution, dst.Mesh, dst.meshGiven = sol, m, given != nil
	return nil
}

// badStep returns the first step (in row-major order) of m within its
// trajectory's length whose size is negative, infinite or NaN, or -1, -1;
// and, in end[i], the time trajectory i's steps reach from T0,
// accumulated t += h in step order as a replay accumulates it. It walks
// blocks of trajectories on all cores, row by row within a block (H is
// step-major: a trajectory's steps lie N apart, a row's block is
// contiguous): a mesh of 2^20 trajectories and 90 steps is 94 million
// sizes.
func badStep(m *Mesh) (step, traj int, end []float64) {
	const colsPerTask = 1 << 12
	end = make([]float64, m.N)
	tasks := (m.N + colsPerTask - 1) / colsPerTask
	first := make([]int, tasks) // per task: the first bad entry's index in H, or -1
	par.Run(tasks, 0, func(_, k int) {
		first[k] = -1
		lo, hi := k*colsPerTask, min(m.N, (k+1)*colsPerTask)
		t := end[lo:hi]
		for i := range t {
			t[i] = m.T0
		}
		rows := 0
		for _, l := range m.Len[lo:hi] {
			rows = max(rows, l)
		}
		for s := 0; s < rows; s++ {
			row := m.H[s*m.N+lo : s*m.N+hi]
			for i, h := range row {
				if s >= m.Len[lo+i] {
					continue
				}
				if (!(h >= 0) || math.IsInf(h, 0)) && first[k] < 0 {
					first[k] = s*m.N + lo + i
				}
				t[i] += h
			}
		}
	})
	best := -1
	for _, at := range first {
		if at >= 0 && (best < 0 || at < best) {
			best = at
		}
	}
	if best >= 0 {
		return best / m.N, best % m.N, end
	}
	return -1, -1, end
}

// meshEndSlack is the bound, in ulps of max(|T0|, |T1|), by which the time
// a mesh's steps reach may miss T1 beyond Len/2 ulps: the rounding of Len
// additions t += h (each at most half an ulp of the larger time) plus
// that of steps built as (T1 − T0)/k. The ulps are those of the
// arithmetic of the engine that recorded the mesh (Mesh.Engine). A recorded mesh reaches T1 exactly (every step is an
// exact advance, see buildControl); a mesh built by hand with k uniform
// steps misses it by at most about k/2 ulps; a missing step of any size
// that moves the state more than rounding does is a larger gap.
const meshEndSlack = 2

// meshEndTol returns the largest |end − T1| checkMesh accepts for a
// trajectory of l steps on [t0, t1], recorded in arithmetic of machine
// epsilon eps (2^-52 for float64; a float32 engine's mesh sums to T1
// rounded to float32).
func meshEndTol(l int, t0, t1, eps float64) float64 {
	// (Below 2^-1022 an ulp is the smallest subnormal, not ε·|t|.)
	return (float64(l)/2+meshEndSlack)*eps*math.Max(math.Abs(t0), math.Abs(t1)) + float64(l+1)*0x1p-1074
}

// meshEpsilon returns the machine epsilon of the arithmetic of the engine
// called name (see PrecisionEngine): float64's for the CPU engine, an
// engine without UnitRoundoff and an unknown name.
func meshEpsilon(name string) float64 {
	enginesMu.RLock()
	e := engines[name]
	enginesMu.RUnlock()
	if pe, ok := e.(PrecisionEngine); ok {
		return math.Max(0x1p-52, 2*pe.UnitRoundoff())
	}
	return 0x1p-52
}

// reusable returns the arrays of g (of its Solution, and of its Mesh if
// mesh is set: a new mesh is to be recorded) that the next result may
// fill; none if g is nil. A Solution's T is offered as Result.T, which
// the engines fill with the time reached, and is then replaced by the end
// times (see GradContext).
func (g *Gradient) reusable(mesh bool) *Result {
	if g == nil {
		return &Result{}
	}
	if k := g.kept; k != nil {
		// Results an engine kept (Settings.KeepGrads), unread: the call
		// writes over them, in the same storage (the engine's memory too,
		// where it is its own: Job.Reuse.Grads).
		g.kept, g.Resident = nil, nil
		return k.res.reusable(mesh, k.given == nil)
	}
	if g.meshGiven {
		// The mesh, and the Solution's statuses and step counts, are the
		// caller's input: a record writes arrays of its own.
		mesh = false
	}
	r := &Result{GradY0: g.Y0, GradP: g.P, Grads: g.spareGrads}
	g.spareGrads = nil
	// The storage of the arrays the last call dropped (Omit) first; the
	// Solution's own where it has them.
	sp := g.spare
	g.spare = omitted{}
	r.Y, r.Ys = sp.y, sp.ys
	if s := g.Solution; s != nil {
		r.Saves = s.Resident // written over, or released (releaseOld)
		r.Ys = or(r.Ys, s.ysSpare)
	}
	if mesh {
		r.Stats.Rejected, r.Stats.FieldEvals = sp.rej, sp.evals
	}
	if mesh && g.Mesh != nil {
		// The record may write its steps into the mesh's resident
		// memory: what vouched for them no longer does.
		g.Mesh.unvouch()
	}
	if s := g.Solution; s != nil {
		r.Y, r.Ys, r.T, r.Events = or(s.Y, r.Y), or(s.Ys, r.Ys), s.T, s.Events
		if mesh {
			// Status, Stats and Stiff are the mesh's when one was given.
			r.Status, r.Stiff = s.Status, s.Stiff
			r.Stats.Accepted, r.Stats.Wall = s.Stats.Accepted, s.Stats.Wall
			r.Stats.Rejected, r.Stats.FieldEvals = or(s.Stats.Rejected, r.Stats.Rejected), or(s.Stats.FieldEvals, r.Stats.FieldEvals)
		}
	}
	if mesh {
		r.Mesh = g.Mesh
	}
	return r
}

// reusable returns the arrays of a kept Grad's result res (see
// Gradient.reusable) for the next call: its mesh's too if mesh is set and
// the call recorded it (recorded).
func (res *Result) reusable(mesh, recorded bool) *Result {
	r := &Result{GradY0: res.GradY0, GradP: res.GradP, Y: res.Y, Ys: res.Ys, T: res.T, Events: res.Events, Grads: res.Grads, Saves: res.Saves}
	if mesh {
		r.Status, r.Stiff, r.Stats = res.Status, res.Stiff, res.Stats
		r.Stats.Wall = 0
		if recorded {
			r.Mesh = res.Mesh
			if res.Mesh != nil && res.MeshT1 != nil {
				r.Mesh.T1 = res.MeshT1
			}
		}
	}
	return r
}

// omit returns g's Omit (0 for a nil g).
func (g *Gradient) omit() Omit {
	if g == nil {
		return 0
	}
	return g.Omit
}

// or returns a if it is not nil, else b.
func or[T any](a, b []T) []T {
	if a != nil {
		return a
	}
	return b
}

// oldSaveAt returns the storage of the save times of g's Solution (nil
// if g or its Solution is nil), for a call that reuses g.
func (g *Gradient) oldSaveAt() []float64 {
	if g == nil || g.Solution == nil {
		return nil
	}
	return g.Solution.SaveAt
}

// reuseCopy returns src in dst's storage (src itself if it already is,
// or if dst cannot hold it: the engine's result arrays are the caller's
// to keep).
func reuseCopy(dst, src []float64) []float64 {
	if buf.Same(dst, src) {
		return dst[:len(src)]
	}
	if cap(dst) < len(src) {
		return src
	}
	return append(dst[:0], src...)
}

// allWell reports whether every status is OK and no stiffness flag is
// set (stiff may be nil: none), in one read of both arrays (on all cores
// past par.FirstSerial trajectories): the statuses are OR-ed together
// (OK is 0), a byte a trajectory without a branch, where a test of each
// took three times as long.
func allWell(status []Status, stiff []bool) bool {
	if stiff != nil && len(stiff) != len(status) {
		return !slices.Contains(stiff, true) && !slices.ContainsFunc(status, func(s Status) bool { return s != OK })
	}
	return par.First(len(status), func(lo, hi int) int {
		if !wellIn(status, stiff, lo, hi) {
			return lo
		}
		return -1
	}) < 0
}

// wellIn reports whether statuses lo ... hi-1 are OK and none of their
// stiffness flags is set (stiff may be nil): the statuses OR-ed together
// (OK is 0), without a branch a trajectory.
func wellIn(status []Status, stiff []bool, lo, hi int) bool {
	var or Status
	for _, s := range status[lo:hi] {
		or |= s
	}
	return or == OK && (stiff == nil || !slices.Contains(stiff[lo:hi], true))
}

// endTimesWell is endTimes into the storage of a and, if twice, of b
// (tb is nil otherwise), which also reports whether every status of
// status is OK and no flag of stiff is set (allWell; true where status is
// nil): one pass over the trajectories, on all cores past par.Block
// where endTimes is, in place of two or three. A Grad's record writes its
// mesh's end times and its solution's and checks its statuses; three
// passes over 2^20 trajectories woke the cores three times.
func (q *problem) endTimesWell(a, b []float64, twice bool, status []Status, stiff []bool) (ta, tb []float64, well bool) {
	n := q.n
	if status != nil && (len(status) != n || stiff != nil && len(stiff) != n) {
		ta = q.endTimes(a)
		if twice {
			tb = q.endTimes(b)
		}
		return ta, tb, allWell(status, stiff)
	}
	ta, _ = buf.Extend(a[:0], n)
	if twice {
		tb, _ = buf.Extend(b[:0], n)
	}
	var bad atomic.Bool
	block := func(lo, hi int) {
		for _, t := range [2][]float64{ta, tb} {
			if t == nil {
				continue
			}
			if q.T1s != nil {
				copy(t[lo:hi], q.t1[lo:hi])
				continue
			}
			s := t[lo:hi]
			for i := range s {
				s[i] = q.T1
			}
		}
		if status != nil && !wellIn(status, stiff, lo, hi) {
			bad.Store(true)
		}
	}
	if n <= par.Block {
		block(0, n)
	} else {
		par.Ranges(n, par.Block, block)
	}
	return ta, tb, !bad.Load()
}

// stiffFailure returns a *TrajectoryError for the first trajectory of m
// on which the stiffness test fired, or nil. Its time is where the
// trajectory stopped (reached, from the record that stopped at the
// stiffness test: Job.StopOnStiff), or its end time if reached is nil.
func stiffFailure(m *Mesh, method string, t0 float64, reached []float64) error {
	if par.First(len(m.Stiff), func(lo, hi int) int {
		if i := slices.Index(m.Stiff[lo:hi], true); i >= 0 {
			return lo + i
		}
		return -1
	}) < 0 {
		return nil // none: one read on all cores
	}
	first, count := -1, 0
	for i, s := range m.Stiff {
		if s {
			count++
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return nil
	}
	e := &TrajectoryError{Index: first, T: m.T1[first], Status: Stiff, Method: method, Failed: count,
		T0: t0, T1: m.T1[first], Stiff: true}
	if reached != nil {
		e.T = reached[first]
	}
	if st := m.Stats; len(st.Accepted) > first && len(st.Rejected) > first {
		e.Accepted, e.Rejected = st.Accepted[first], st.Rejected[first]
	}
	return e
}

// checkGradient reports the first non-finite gradient entry, so that a NaN
// from the reverse sweep never passes silently.
// known reports that the engine has checked g.Y0 and g.P
// (Result.GradFinite): then only the shared gradient and the loss are.
func checkGradient(g *Gradient, d, np int, known bool) error {
	if !known {
		if i := finiteAll(g.Y0); i >= 0 {
			return fmt.Errorf("ode: the gradient with respect to Y0 of trajectory %d (component %d) is %v; check the derivatives of the field and of the loss near its solution", i/d, i%d, g.Y0[i])
		}
		if i := finiteAll(g.P); i >= 0 {
			return fmt.Errorf("ode: the gradient with respect to P of trajectory %d (parameter %d) is %v; check the derivatives of the field and of the loss near its solution", i/np, i%np, g.P[i])
		}
	}
	if i := finiteAll(g.Shared); i >= 0 {
		return fmt.Errorf("ode: the gradient with respect to Shared[%d] is %v; check the derivatives of the field and of the loss near the solutions", i, g.Shared[i])
	}
	if math.IsNaN(g.Loss) || math.IsInf(g.Loss, 0) {
		return fmt.Errorf("ode: the loss is %v", g.Loss)
	}
	return nil
}

// checkMesh verifies that m can be replayed for q: it must have been
// recorded for the same problem (trajectories, start and end times), with
// the same method and field (fingerprint), and be well formed. The error
// names what differs. Save times may differ from the record's: any time in
// [T0, T1] is one step from a mesh point.
//
// A mesh whose steps are resident on this solver's engine is used where
// it is: its steps, written by the engine's own record, are not checked
// again (they cannot have changed: H is nil). Nor are its statuses where
// a Grad recorded it with every trajectory OK (Mesh.vouched), and its
// lengths are left to an executor that checks them as it stages them
// (q.leaveMesh, CheckMeshLen): then the check reads no array of N. A mesh
// resident on another engine is first copied to the host (Mesh.Host).
// Its errors wrap ErrInput, but for a mesh whose steps were released
// (ErrReleased) or that an engine failed to copy to the host.
func (sv *Solver) checkMesh(q *problem, m *Mesh) error {
	resident := m.residentOn(sv.engine.Name())
	if m.Resident != nil && !resident {
		if err := m.Host(); err != nil {
			return err
		}
	}
	if resident && m.Resident.Released() {
		return fmt.Errorf("ode: mesh: its steps on engine %s have been released (Mesh.Release): %w; record the mesh again", m.Resident.Engine(), ErrReleased)
	}
	return badInput(sv.checkMeshOf(q, m, resident))
}

// checkMeshOf is checkMesh of a mesh on the host or resident on the
// solver's engine (resident), whose steps are not released.
func (sv *Solver) checkMeshOf(q *problem, m *Mesh, resident bool) error {
	method := sv.plan.Method
	if sv.set.Method == Auto && m.Method != nil {
		method = m.Method.Name() // Auto replays the mesh with the method that recorded it
	}
	switch {
	case m.N != q.n:
		return fmt.Errorf("ode: mesh has %d trajectories, problem %d", m.N, q.n)
	case m.T0 != q.T0:
		return fmt.Errorf("ode: mesh starts at T0 = %v, problem at %v; record a mesh for this problem", m.T0, q.T0)
	case m.Method != nil && m.Method.Name() != method:
		return fmt.Errorf("ode: mesh was recorded with %s but the settings use %s; replay it with the method that recorded it", m.Method.Name(), method)
	case len(m.Len) != m.N || !resident && len(m.H) < m.Rows*m.N || len(m.Status) != m.N:
		return fmt.Errorf("ode: mesh arrays are inconsistent (N %d, Rows %d, len(H) %d, len(Len) %d, len(Status) %d)",
			m.N, m.Rows, len(m.H), len(m.Len), len(m.Status))
	case m.T1 != nil && len(m.T1) != m.N:
		return fmt.Errorf("ode: mesh has %d end times for %d trajectories", len(m.T1), m.N)
	}
	if resident && q.leaveMesh&CheckMeshLen != 0 {
		// The executor checks Len as it stages it for the device, where
		// the steps are: nothing here reads the steps.
		q.checks |= CheckMeshLen
	} else if i := par.First(len(m.Len), func(lo, hi int) int {
		for i := lo; i < hi; i++ {
			if l := m.Len[i]; l < 0 || l > m.Rows {
				return i
			}
		}
		return -1
	}); i >= 0 {
		return fmt.Errorf("ode: mesh: trajectory %d has Len %d, outside [0, Rows = %d]", i, m.Len[i], m.Rows)
	}
	if m.Switch != nil {
		if len(m.Switch) != m.N {
			return fmt.Errorf("ode: mesh has %d switch indices for %d trajectories", len(m.Switch), m.N)
		}
		for i, s := range m.Switch {
			if s < 0 || s > m.Len[i] {
				return fmt.Errorf("ode: mesh: trajectory %d switches methods at step %d, outside [0, Len = %d]", i, s, m.Len[i])
			}
		}
		switch {
		case sv.set.Method != Auto:
			return fmt.Errorf("ode: mesh switched methods within trajectories (Method Auto): replay it with Method Auto, not %s", sv.set.Method.Name())
		case !sv.switchesInPlace() && !sv.continues():
			// Whole trajectories of one method only (runSwitchedMesh).
			for i, s := range m.Switch {
				if s > 0 && s < m.Len[i] {
					return errSwitchWithin(sv.engine.Name(), i, s, m.Len[i])
				}
			}
		}
	}
	if err := sv.checkMeshEvents(m); err != nil {
		return err
	}
	var end []float64 // the time each trajectory's steps reach
	if !resident {    // resident steps are the engine's own record's: finite, non-negative, ending at T1
		var s, i int
		if s, i, end = badStep(m); s >= 0 {
			return fmt.Errorf("ode: mesh: step %d of trajectory %d is %v; step sizes must be finite and non-negative", s, i, m.H[s*m.N+i])
		}
	}
	switch {
	case m.t1Set && q.T1s == nil:
		// Both have one end time: the record's, not m.T1 read whole (it
		// may have been changed; the steps reach the recorded time).
		if m.t1 != q.T1 {
			return fmt.Errorf("ode: mesh was recorded to T1 = %v, but the problem ends at %v; record a mesh for this problem", m.t1, q.T1)
		}
	case m.T1 != nil:
		if i := par.First(len(m.T1), func(lo, hi int) int {
			for i := lo; i < hi; i++ {
				if m.T1[i] != q.t1[i] {
					return i
				}
			}
			return -1
		}); i >= 0 {
			return fmt.Errorf("ode: mesh was recorded to T1 = %v for trajectory %d, but the problem ends at %v; record a mesh for this problem", m.T1[i], i, q.t1[i])
		}
	}
	if m.Fingerprint != "" {
		want := sv.plan.Fingerprint
		if sv.set.Method == Auto && method != sv.plan.Method && method != Auto.Name() {
			alt, err := sv.stiffSolver()
			if err != nil {
				return err
			}
			want = alt.plan.Fingerprint
		}
		if m.Fingerprint != want {
			return fmt.Errorf("ode: mesh fingerprint %s differs from the solver's %s: it was recorded for another field (or another version of its F); record a mesh with this solver", m.Fingerprint, want)
		}
	}
	if resident && m.vouched() {
		// Its steps are those of a record whose trajectories all ended
		// well (see stepsOK): the statuses are not read again.
	} else if err := m.failed(end, nil); err != nil { // (end: the times its steps reach, nil if resident)
		return fmt.Errorf("ode: not replaying a mesh with a failed trajectory: %w", err)
	}
	// Every trajectory's steps must reach its end time: a replay of a
	// mesh with a step missing would end short of T1, at a wrong state.
	// (A mesh recorded in float32 reaches T1 to float32's rounding.)
	eps := meshEpsilon(m.Engine)
	for i, t := range end {
		if sv.endsAtTerminal(m, i) {
			continue // it ends at its terminal event, before T1
		}
		t1 := q.t1[i]
		if tol := meshEndTol(m.Len[i], q.T0, t1, eps); !(math.Abs(t-t1) <= tol) {
			return fmt.Errorf("ode: mesh: the %d steps of trajectory %d sum to %v, reaching t = %v, but it ends at T1 = %v (a gap of %.3g, beyond the rounding bound %.3g): "+
				"a step is missing or wrong; record the mesh again, or give it steps that reach T1", m.Len[i], i, t-q.T0, t, t1, t1-t, tol)
		}
	}
	return nil
}

// Replay runs the mesh m forward (no gradient) and returns the solution:
// the map whose exact derivative Grad computes. Finite differences of
// Replay with m fixed check Grad, except with events, whose Grad also
// differentiates the event steps' sizes, as a record moves them (see
// Event).
func Replay(p Problem, m *Mesh, s *Settings) (*Solution, error) {
	sv, err := NewSolver(p.Field, s)
	if err != nil {
		return nil, err
	}
	return sv.Replay(&p, m)
}

// Replay is the Solver form of the package function Replay.
func (sv *Solver) Replay(p *Problem, m *Mesh) (*Solution, error) {
	q, err := sv.checkProblem(p)
	if err != nil {
		return nil, err
	}
	if err := sv.checkMesh(q, m); err != nil {
		return nil, err
	}
	res, used, err := sv.run(context.Background(), OpReplay, q, nil, m, nil)
	if err != nil {
		return nil, err
	}
	sol := used.solution(q, res, m.Status, nil)
	sol.Stats = m.Stats
	sol.meshArrays = true
	return sol, nil
}

// checkMeshEvents refuses a mesh whose events (Mesh.EventHash, Events)
// are not the solver's (Settings.Events). Marks resident on the solver's
// engine with the steps (ResidentEvents; checkMesh has copied those of
// another engine to the host) are its own record's, with the hash's
// events: they are not read. Marks on the host are read on all cores.
func (sv *Solver) checkMeshEvents(m *Mesh) error {
	ep := sv.plan.Events
	switch {
	case ep == nil && m.EventHash != "":
		return fmt.Errorf("ode: mesh was recorded with events (Settings.Events) and the solver has none: its event steps end at event times and jumps follow them; replay it with the events that recorded it")
	case ep == nil:
		return nil
	case m.EventHash == "":
		return fmt.Errorf("ode: mesh was recorded without events, and the solver has Settings.Events: a mesh with events marks its event steps (Mesh.Events); record one with this solver")
	case m.EventHash != ep.Hash:
		return fmt.Errorf("ode: mesh was recorded with other events (event hash %s, the solver's %s): record a mesh with this solver's Settings.Events", m.EventHash, ep.Hash)
	case m.eventsResident() && m.residentOn(sv.engine.Name()):
		return nil
	case len(m.Events) < m.Rows*m.N:
		return fmt.Errorf("ode: mesh has events (EventHash %s) but %d event marks for %d steps (Mesh.Events; recorded on engine %s): record the mesh again with these events, or call Grad with m = nil", m.EventHash, len(m.Events), m.Rows*m.N, m.Engine)
	}
	ne := int32(len(ep.Names))
	if x := par.First(m.Rows*m.N, func(lo, hi int) int {
		for x, e := range m.Events[lo:hi] {
			if e < 0 || e > ne {
				return lo + x
			}
		}
		return -1
	}); x >= 0 {
		return fmt.Errorf("ode: mesh: step %d of trajectory %d marks event %d, and the solver has %d events", x/m.N, x%m.N, m.Events[x]-1, len(ep.Names))
	}
	return nil
}

// endsAtTerminal reports whether trajectory i of mesh m (checked by
// checkMeshEvents) ends at a terminal event.
func (sv *Solver) endsAtTerminal(m *Mesh, i int) bool {
	ep, l := sv.plan.Events, m.Len[i]
	if ep == nil || l == 0 {
		return false
	}
	e := m.Events[(l-1)*m.N+i]
	return e > 0 && ep.Terminal[e-1]
}
