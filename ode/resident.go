package ode

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// ResidentSteps is a mesh's steps held by the engine that recorded them,
// in that engine's memory (a GPU engine's device memory), so that the next
// replay or gradient there does not move them. Engines implement it; users
// meet it through Mesh.Resident, Mesh.Host and Mesh.Release.
type ResidentSteps interface {
	// Engine returns the name of the engine that holds the steps.
	Engine() string

	// Owner returns a value that identifies the memory the steps live in
	// (a device's context, say); an engine uses the steps in place only if
	// it is its own. It is compared with ==.
	Owner() any

	// CopyTo copies the [Rows×N] steps, step-major, to dst (len(dst) ≥
	// Rows×N). It fails if the steps were released.
	CopyTo(dst []float64) error

	// Release frees the engine's memory. Later calls do nothing; CopyTo
	// then fails.
	Release()

	// Released reports whether Release was called.
	Released() bool
}

// ColumnSteps is implemented by resident steps whose engine gathers
// columns of them in its own memory (a GPU engine's device): Method Auto
// takes the columns of the trajectories it replays or continues from the
// first pass's mesh there, so that mesh does not come to the host.
type ColumnSteps interface {
	ResidentSteps

	// Columns returns new steps held by the same engine: rows rows of
	// len(cols) columns, column x the first lens[x] steps of column
	// cols[x] of these (rows ≥ lens[x], lens[x] ≤ the rows held) and
	// zeros past them. The caller releases them. reuse, if not nil, is
	// steps the caller gives up (an earlier call's result, Method Auto's
	// gradient passed back): the engine may write the columns into its
	// memory and return it, allocating nothing; else it leaves reuse as
	// it is, for the caller to release (gatherColumns). It fails if these
	// were released, an argument is out of range, the engine's memory is
	// short, or the engine keeps event marks with them (ResidentEvents:
	// the marks are not gathered).
	Columns(cols, lens []int, rows int, reuse ResidentSteps) (ResidentSteps, error)
}

// gatherColumns returns cs.Columns(cols, lens, rows, reuse) and
// releases reuse, given up by the caller, where the engine did not write
// into it.
func gatherColumns(cs ColumnSteps, cols, lens []int, rows int, reuse ResidentSteps) (ResidentSteps, error) {
	r, err := cs.Columns(cols, lens, rows, reuse)
	if reuse != nil && (err != nil || r != reuse) {
		reuse.Release()
	}
	return r, err
}

// ResidentEvents is the ResidentSteps of an engine that keeps a mesh's
// event marks (Mesh.Events, for a mesh recorded with Settings.Events)
// with its steps, in its own memory: the mesh's Events is then nil until
// Mesh.Host copies both. Engines implement it; a replay on the engine
// that holds the marks reads them there.
type ResidentEvents interface {
	ResidentSteps

	// HoldsEvents reports whether the engine holds the mesh's event
	// marks with its steps (a mesh recorded with events).
	HoldsEvents() bool

	// CopyEventsTo copies the [Rows×N] event marks, step-major as the
	// steps (Mesh.Events), to dst (len(dst) ≥ Rows×N). It fails if the
	// marks were released or the engine holds none.
	CopyEventsTo(dst []int32) error
}

// eventsResident reports whether m's event marks are held with its
// resident steps (ResidentEvents) rather than in Events.
func (m *Mesh) eventsResident() bool {
	if m == nil || m.Events != nil {
		return false
	}
	r, ok := m.Resident.(ResidentEvents)
	return ok && r.HoldsEvents()
}

// Host makes the mesh's steps available in H: if they are resident on an
// engine, it copies them to the host (Rows×N float64s, a device-to-host
// copy; for a mesh recorded with events whose marks the engine keeps with
// them, ResidentEvents, also its Rows×N int32 marks into Events) and
// releases the engine's copy, so that from then on H (and Events) is the
// mesh, as for a mesh recorded on the CPU (changes to H are then what a
// replay uses). A mesh already on the host is left as it is. Host returns
// an error if the resident steps were released or cannot be read; the
// mesh is then unchanged.
func (m *Mesh) Host() error {
	if m == nil || m.Resident == nil {
		return nil
	}
	r := m.Resident
	if r.Released() {
		return fmt.Errorf("ode: mesh: its steps were on engine %s and have been released (Mesh.Release): %w; record the mesh again", r.Engine(), ErrReleased)
	}
	h := make([]float64, m.Rows*m.N)
	if err := r.CopyTo(h); err != nil {
		return fmt.Errorf("ode: mesh: copying its steps from engine %s: %w", r.Engine(), err)
	}
	var ev []int32
	if m.eventsResident() {
		ev = make([]int32, m.Rows*m.N)
		if err := r.(ResidentEvents).CopyEventsTo(ev); err != nil {
			return fmt.Errorf("ode: mesh: copying its event marks from engine %s: %w", r.Engine(), err)
		}
		m.Events = ev
	}
	m.H, m.Resident = h, nil
	r.Release()
	return nil
}

// Release frees the engine memory that holds the mesh's steps, if any,
// without copying them; the mesh can then no longer be replayed. An
// engine also frees it when the Mesh is no longer reachable: Release only
// makes that happen now. A mesh on the host is left as it is.
func (m *Mesh) Release() {
	if m != nil && m.Resident != nil {
		m.Resident.Release()
	}
}

// residentOn reports whether m's steps are resident on an engine and that
// engine is name.
func (m *Mesh) residentOn(name string) bool {
	return m.Resident != nil && m.Resident.Engine() == name
}

// stepsOK vouches for the resident steps of a mesh that a Grad recorded
// with every trajectory OK and none stiff: a replay of them on their
// engine need not read the mesh's statuses again (checkMesh), nor its
// stiffness marks (Grad). The steps are on the engine, out of the
// caller's reach, and stay those of that record until a record writes
// into their memory (a Gradient passed back to Grad with m = nil reuses
// its mesh's: Gradient.reusable withdraws the voucher first). Copies of
// the Mesh share it. What the caller changes in the mesh's host arrays
// does not change the steps: a status set to a failure no longer stops
// such a replay, whose steps all reach T1; one set to OK never made a
// replay of a failed trajectory's steps (the voucher is only given where
// none failed).
type stepsOK struct {
	steps ResidentSteps
	valid atomic.Bool
}

// vouch records that m's resident steps come from a record whose
// trajectories all ended well and none stiff.
func (m *Mesh) vouch() {
	v := &stepsOK{steps: m.Resident}
	v.valid.Store(true)
	m.ok = v
}

// unvouch withdraws the voucher of m's steps (from m and its copies).
func (m *Mesh) unvouch() {
	if m.ok != nil {
		m.ok.valid.Store(false)
	}
}

// vouched reports whether m's resident steps are vouched for (vouch) and
// are still those the voucher was given for.
func (m *Mesh) vouched() bool {
	v := m.ok
	return v != nil && m.Resident != nil && v.steps == m.Resident && v.valid.Load() && !m.Resident.Released()
}

// ResidentSaves is the saved states of a solve, a record or a gradient
// held by the engine that computed them, in that engine's memory (a GPU
// engine's device memory), until the caller reads them
// (Settings.KeepSaves). Engines implement it; users meet it through
// Solution.Resident, Solution.HostSaves and Solution.Release.
type ResidentSaves interface {
	// Engine returns the name of the engine that holds the saves.
	Engine() string

	// Owner returns a value that identifies the memory the saves live in
	// (a device's context, say); an engine reuses the memory of the saves
	// of a Solution passed back (Solver.SolveTo) only if it is its own.
	// It is compared with ==.
	Owner() any

	// CopyTo copies the [N×K×Dim] saved states to dst (len(dst) ≥ N·K·Dim)
	// in Solution.Ys's order: trajectory i, save time k at
	// dst[(i*K+k)*Dim:], NaN rows for failed trajectories, as the host
	// array would have held them. It fails, without a panic, if the saves
	// were released or dst is too short.
	CopyTo(dst []float64) error

	// Release frees the engine's memory. Later calls do nothing; CopyTo
	// then fails.
	Release()

	// Released reports whether Release was called.
	Released() bool
}

// HostSaves makes the saved states available in Ys: if they are
// resident on an engine (Resident, Settings.KeepSaves), it copies them to
// the host (N·K·Dim float64s, one device-to-host copy on a GPU engine,
// into the storage of the Ys of the call's dst, SolveTo's or Grad's,
// where it is large enough), sets Ys, releases the engine's
// copy and sets Resident to nil, so that from then on the Solution is as
// one solved with the saves returned. A Solution whose saves are on the
// host (or that has none) is left as it is, so calling it again does
// nothing. It returns an error, naming the fix, if the resident saves
// were released or cannot be read; Ys is then unchanged.
func (s *Solution) HostSaves() error {
	if s == nil || s.Resident == nil {
		return nil
	}
	ys, err := hostSaves(s.Resident, or(s.Ys, s.ysSpare), s.N*len(s.SaveAt)*s.Dim)
	if err != nil {
		return err
	}
	s.Ys, s.Resident, s.ysSpare = ys, nil, nil
	return nil
}

// hostSaves copies the n saved states r holds into ys's storage (where it
// is large enough) and releases them.
func hostSaves(r ResidentSaves, ys []float64, n int) ([]float64, error) {
	if r.Released() {
		return nil, fmt.Errorf("ode: solution: its saved states were on engine %s and have been released (Solution.Release): %w; solve again, and call HostSaves before Release to read them", r.Engine(), ErrReleased)
	}
	if cap(ys) < n {
		ys = make([]float64, n)
	}
	ys = ys[:n]
	if err := r.CopyTo(ys); err != nil {
		return nil, fmt.Errorf("ode: solution: copying its saved states from engine %s: %w", r.Engine(), err)
	}
	r.Release()
	return ys, nil
}

// Release frees the engine memory that holds the solution's saved states
// (Resident), if any, without copying them: their memory goes back at
// once, where it would otherwise go back when the Solution is no longer
// reachable. HostSaves then fails. A Solution whose saves are on the
// host is left as it is.
func (s *Solution) Release() {
	if s != nil && s.Resident != nil {
		s.Resident.Release()
	}
}

// ResidentGrads is the per-trajectory results of a Grad held by the
// engine that computed them, in that engine's memory (a GPU engine's
// device memory), until the caller reads them (Settings.KeepGrads):
// ∂L/∂Y0, ∂L/∂P, the states, and the statuses, counts, times and event
// counts of the Solution and of the recorded Mesh. Engines implement it
// (see Job.KeepGrads); users meet it through Gradient.Resident,
// Gradient.HostGrads and Gradient.Release.
type ResidentGrads interface {
	// Engine returns the name of the engine that holds the results.
	Engine() string

	// Owner returns a value that identifies the memory the results live
	// in (a device's context, say); an engine reuses the memory of the
	// results of a Gradient passed back to Grad only if it is its own.
	// It is compared with ==.
	Owner() any

	// Fill writes the results into the arrays of res, the Result the
	// engine returned with it, as the engine would have written them
	// without Job.KeepGrads. The engine's memory stays the handle's until
	// Release: a later call given it back (Job.Reuse.Grads) may keep its
	// results there, as it does an unread handle's. It fails,
	// without a panic, if the results were released or cannot be read,
	// or if they are no longer res's (a later call that reused the
	// memory, Job.Reuse.Grads, wrote its own over them).
	Fill(res *Result) error

	// Release frees the engine's memory. Later calls do nothing; Fill
	// then fails.
	Release()

	// Released reports whether Release was called.
	Released() bool
}

// ErrReleased is wrapped by the error of Gradient.HostGrads where the
// results it would copy were released (Gradient.Release, or a Grad that
// wrote over them) before they were read, of Solution.HostSaves where
// the saved states were (Solution.Release), and of a call given a mesh
// whose resident steps were (Mesh.Release: Grad, Loss, Replay, Host).
// An engine's ResidentGrads.Fill wraps it where the results are no
// longer the Result's.
var ErrReleased = errors.New("resident results released")

// keptGrads is what Gradient.HostGrads needs to fill a Gradient whose
// per-trajectory results an engine kept (Settings.KeepGrads): the call's
// result, problem (its end times and save times copied) and meshes.
type keptGrads struct {
	used  *Solver // the solver whose plan ran the call
	q     *problem
	res   *Result // with Grads
	given *Mesh   // the mesh the call replayed, or nil (a record)
	reuse *Result // the arrays of dst the call offered (Gradient.reusable)
}

// HostGrads makes the per-trajectory results of a Grad with
// Settings.KeepGrads available: if an engine kept them (Resident), it
// copies them to the host (on a GPU engine one device-to-host copy of
// the bytes a call without KeepGrads copies, then the same scatter into
// the row-major arrays) and fills Y0, P, Solution and Mesh, bit for bit
// as a Grad without KeepGrads fills them, in the storage of the arrays
// of the dst the call reused; it sets Resident to nil and keeps the
// engine's memory for the results of the next Grad given the Gradient
// (Release frees it now). A Gradient whose results are on the host is left as
// it is, so calling it again does nothing. It returns an error wrapping
// ErrReleased, naming the fix, if the results were released (Release, or
// the Gradient was passed to another Grad first, which writes over
// them), or the engine's error if they cannot be read; the Gradient is
// then unchanged.
func (g *Gradient) HostGrads() error {
	if g == nil || g.kept == nil {
		return nil
	}
	k := g.kept
	r := k.res.Grads
	if r.Released() {
		return fmt.Errorf("ode: gradient: its per-trajectory results were on engine %s and have been released (Gradient.Release, or a Grad that reused the Gradient): %w; call Grad again, and HostGrads before Release or the next Grad to read them", r.Engine(), ErrReleased)
	}
	if err := r.Fill(k.res); err != nil {
		if r.Released() || errors.Is(err, ErrReleased) {
			return fmt.Errorf("ode: gradient: copying its per-trajectory results from engine %s: %w; call Grad again, and HostGrads before Release or the next Grad to read them", r.Engine(), err)
		}
		return fmt.Errorf("ode: gradient: copying its per-trajectory results from engine %s: %w", r.Engine(), err)
	}
	g.kept, g.Resident, g.spareGrads = nil, nil, r
	k.res.Grads = nil
	if err := k.used.gradArrays(g, k.q, k.res, k.given, k.reuse); err != nil {
		return err
	}
	return checkGradient(g, k.q.Field.Dim, k.q.Field.Params, k.res.GradFinite)
}

// Release frees the engine memory that holds the gradient's
// per-trajectory results (Resident, Settings.KeepGrads), if any, without
// copying them, and the steps of the mesh the call recorded with them,
// or the memory HostGrads kept for the next call's: it goes back at
// once, where it would otherwise go back when the Gradient is no longer
// reachable. HostGrads then fails. A Gradient whose results are on the
// host is otherwise left as it is.
func (g *Gradient) Release() {
	if g == nil {
		return
	}
	if g.spareGrads != nil {
		g.spareGrads.Release()
		g.spareGrads = nil
	}
	if g.kept == nil {
		return
	}
	g.Resident.Release()
	if m := g.kept.res.Mesh; m != nil && g.kept.given == nil {
		m.Release()
	}
}
