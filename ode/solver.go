package ode

import (
	"fmt"
	"math"
	"time"

	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Solver solves, records and differentiates ensembles of one field with
// fixed settings. It traces the field and builds its step programs and
// executors once, so repeated calls (a training loop) pay for them once.
// A Solver is not safe for concurrent use.
type Solver struct {
	field Field
	set   Settings

	fprog *tape.Program
	sp    *stepPrograms
	fexec *tape.Exec // the field: inputs t, y, p, s
	texec *tape.Exec // the trial step
	step  *scan.Step // the replay step
}

// NewSolver traces f and prepares the programs of the method in s (nil
// means default settings). It returns an error if f cannot be traced or
// the settings are invalid.
func NewSolver(f Field, s *Settings) (*Solver, error) {
	set := s.withDefaults(&f)
	if err := checkSettings(&f, &set); err != nil {
		return nil, err
	}
	fp, err := f.Program()
	if err != nil {
		return nil, err
	}
	sp, err := set.Method.steps(&f, fp)
	if err != nil {
		return nil, fmt.Errorf("ode: %s: building the %s step: %w", f.name(), set.Method.Name(), err)
	}
	sv := &Solver{field: f, set: set, fprog: fp, sp: sp}
	if sv.fexec, err = tape.NewExec(fp, &set.Exec); err != nil {
		return nil, err
	}
	if sv.texec, err = tape.NewExec(sp.trial, &set.Exec); err != nil {
		return nil, err
	}
	sv.step = &scan.Step{Prog: sp.replay, Dense: sp.dense, D: f.Dim, P: f.Params, S: f.Shared}
	return sv, nil
}

// Settings returns the solver's settings with defaults filled in.
func (sv *Solver) Settings() Settings { return sv.set }

// Method returns the solver's method.
func (sv *Solver) Method() Method { return sv.set.Method }

// FieldProgram returns the traced field.
func (sv *Solver) FieldProgram() *tape.Program { return sv.fprog }

// StepPrograms returns the recorder's trial step and the replay step.
func (sv *Solver) StepPrograms() (trial, replay *tape.Program) { return sv.sp.trial, sv.sp.replay }

func (sv *Solver) checkProblem(p *Problem) (*problem, error) {
	f, g := &sv.field, &p.Field
	if f.Dim != g.Dim || f.Params != g.Params || f.Shared != g.Shared {
		return nil, fmt.Errorf("ode: problem field %s (Dim %d, Params %d, Shared %d) does not match the solver's %s (Dim %d, Params %d, Shared %d)",
			g.name(), g.Dim, g.Params, g.Shared, f.name(), f.Dim, f.Params, f.Shared)
	}
	if g.F == nil {
		g.F = f.F
	}
	return p.check()
}

// Solution is the result of a solve: final states, saved states, and the
// status and statistics of every trajectory.
type Solution struct {
	N, Dim int
	T      []float64 // time reached by each trajectory [N]
	Y      []float64 // final states [N×Dim]
	SaveAt []float64 // the save times (Problem.SaveAt)
	Ys     []float64 // saved states [N×len(SaveAt)×Dim]: trajectory i, time k at Ys[(i*K+k)*Dim:]
	Status []Status  // [N]
	Stats  Stats
	Method string // the method that produced it
}

// Err returns the first failure as a *TrajectoryError, or nil.
func (s *Solution) Err() error { return firstFailure(s.Status, s.T, nil, s.Method) }

// Solve integrates the ensemble and returns the final (and saved) states.
// Unless Settings.AllowFailures is set, a failed trajectory makes it
// return a *TrajectoryError (with the partial solution).
func Solve(p Problem, s *Settings) (*Solution, error) {
	sv, err := NewSolver(p.Field, s)
	if err != nil {
		return nil, err
	}
	return sv.Solve(&p)
}

// Record integrates the ensemble adaptively and returns its mesh.
// Unless Settings.AllowFailures is set, a failed trajectory makes it
// return a *TrajectoryError (with the mesh, whose Status tells which).
func Record(p Problem, s *Settings) (*Mesh, error) {
	sv, err := NewSolver(p.Field, s)
	if err != nil {
		return nil, err
	}
	m, _, err := sv.Record(&p)
	return m, err
}

// Solve is the Solver form of the package function Solve; p.Field must
// have the solver's shape.
func (sv *Solver) Solve(p *Problem) (*Solution, error) {
	q, err := sv.checkProblem(p)
	if err != nil {
		return nil, err
	}
	keep := len(p.SaveAt) > 0
	m, sol, err := sv.record(q, keep)
	if err != nil {
		if !isTrajectoryError(err) {
			return nil, err
		}
		if !sv.set.AllowFailures {
			return sol, err
		}
		err = nil
	}
	if keep {
		// Replay the trajectories that finished; failed ones keep NaN
		// saved states.
		rm := *m
		rm.Len = append([]int(nil), m.Len...)
		for i, st := range m.Status {
			if st != OK {
				rm.Len[i] = 0
			}
		}
		res, rerr := scan.Replay(nil, sv.scanProblem(q, &rm), sv.scanSettings())
		if rerr != nil {
			return sol, rerr
		}
		K, d := len(p.SaveAt), q.Field.Dim
		sol.Ys = unpackTaps(nil, res.Taps, q.n, K, d)
		for i, st := range m.Status {
			if st != OK {
				for x := range sol.Ys[i*K*d : (i+1)*K*d] {
					sol.Ys[i*K*d+x] = math.NaN()
				}
			}
		}
	}
	return sol, err
}

// Record is the Solver form of the package function Record. It also
// returns the solution the recording computed.
func (sv *Solver) Record(p *Problem) (*Mesh, *Solution, error) {
	q, err := sv.checkProblem(p)
	if err != nil {
		return nil, nil, err
	}
	m, sol, err := sv.record(q, true)
	if err != nil && sv.set.AllowFailures && isTrajectoryError(err) {
		err = nil
	}
	return m, sol, err
}

func isTrajectoryError(err error) bool {
	_, ok := err.(*TrajectoryError)
	return ok
}

func (sv *Solver) scanSettings() *scan.Settings {
	return &scan.Settings{Checkpoint: sv.set.Checkpoint, MemoryLimit: sv.set.MemoryLimit, Exec: sv.set.Exec}
}

// scanProblem lays the problem out for scan over mesh m, with taps for
// the save times.
func (sv *Solver) scanProblem(q *problem, m *Mesh) *scan.Problem {
	n, d, np := q.n, q.Field.Dim, q.Field.Params
	sp := &scan.Problem{
		Step:   sv.step,
		Mesh:   m.scanMesh(),
		T0:     make([]float64, n),
		Y0:     toSoA(nil, q.y0, n, d),
		P:      toSoA(nil, q.p, n, np),
		Shared: q.Shared,
	}
	for i := range sp.T0 {
		sp.T0[i] = q.T0
	}
	if len(q.SaveAt) > 0 {
		sp.Taps = saveTaps(m, q.T0, q.SaveAt, sv.sp.dense != nil)
	}
	return sp
}

// saveTaps brackets every save time on every trajectory's mesh: save time
// τ on trajectory i becomes one step of size τ − t_k from the mesh point
// t_k < τ ≤ t_k + h_k (or, if dense, the method's continuous extension of
// step k at θ = (τ − t_k)/h_k); τ at or before T0 is y0 (a step of size
// 0), and τ at or after the trajectory's final time is its final state.
// The time points accumulate t_{k+1} = t_k + h_k exactly as the recorder
// and the replay do. Tap i*K+k is save time k of trajectory i.
func saveTaps(m *Mesh, t0 float64, ts []float64, dense bool) *scan.Taps {
	n, K := m.N, len(ts)
	tp := &scan.Taps{Traj: make([]int, n*K), Step: make([]int, n*K), H: make([]float64, n*K)}
	if dense {
		tp.Theta = make([]float64, n*K)
	}
	for i := 0; i < n; i++ {
		t, s := t0, 0
		for k, tau := range ts {
			for s < m.Len[i] && t+m.H[s*n+i] < tau {
				t += m.H[s*n+i]
				s++
			}
			idx := i*K + k
			tp.Traj[idx], tp.Step[idx] = i, s
			switch {
			case tau <= t0 || s == m.Len[i]:
				tp.H[idx] = 0
				if tau <= t0 {
					tp.Step[idx] = 0
				}
			case dense:
				h := m.H[s*n+i]
				tp.H[idx], tp.Theta[idx] = h, (tau-t)/h
			default:
				tp.H[idx] = tau - t
			}
		}
	}
	return tp
}

// toSoA transposes row-major [n×w] into structure-of-arrays [w][n].
func toSoA(dst, x []float64, n, w int) []float64 {
	if cap(dst) < n*w {
		dst = make([]float64, n*w)
	}
	dst = dst[:n*w]
	for i := 0; i < n; i++ {
		for c := 0; c < w; c++ {
			dst[c*n+i] = x[i*w+c]
		}
	}
	return dst
}

// fromSoA is the inverse of toSoA.
func fromSoA(dst, x []float64, n, w int) []float64 {
	if cap(dst) < n*w {
		dst = make([]float64, n*w)
	}
	dst = dst[:n*w]
	for i := 0; i < n; i++ {
		for c := 0; c < w; c++ {
			dst[i*w+c] = x[c*n+i]
		}
	}
	return dst
}

// unpackTaps turns tap outputs [d][n*K] into [n×K×d].
func unpackTaps(dst, taps []float64, n, K, d int) []float64 {
	return fromSoA(dst, taps, n*K, d)
}

// record runs the adaptive recorder over all trajectories. If keep is
// false the step sizes are not stored (a plain solve).
func (sv *Solver) record(q *problem, keep bool) (*Mesh, *Solution, error) {
	start := time.Now()
	r := newRecorder(sv, q, keep)
	if err := r.run(); err != nil {
		return nil, nil, err
	}
	m, sol := r.mesh, r.sol
	for _, l := range m.Len {
		m.Rows = max(m.Rows, l)
	}
	m.H = m.H[:m.Rows*m.N]
	m.Stats.Wall = time.Since(start)
	sol.Stats = m.Stats
	if err := m.failed(sol.T, r.lastH); err != nil {
		return m, sol, err
	}
	return m, sol, nil
}
