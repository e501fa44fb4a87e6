package ode

import (
	"fmt"
	"math"
	"time"

	"github.com/gradsolve-go/gradsolve/scan"
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
	RecordTime, GradTime time.Duration
	// StoredBytes is the memory the backward sweep's checkpoints took.
	StoredBytes int64
}

// Grad returns the loss and its gradient with respect to Y0, P and Shared.
// If m is nil it records a mesh first; otherwise it replays m, which must
// come from Record on a problem of the same shape (the step sizes are held
// fixed: the result is the exact derivative of the replay, the frozen-mesh
// discrete adjoint). A mesh with a failed trajectory is never replayed: Grad
// returns a *TrajectoryError. dst may be nil.
func Grad(dst *Gradient, p Problem, loss Loss, m *Mesh, s *Settings) (*Gradient, error) {
	sv, err := NewSolver(p.Field, s)
	if err != nil {
		return nil, err
	}
	return sv.Grad(dst, &p, loss, m)
}

// Grad is the Solver form of the package function Grad.
func (sv *Solver) Grad(dst *Gradient, p *Problem, loss Loss, m *Mesh) (*Gradient, error) {
	q, err := sv.checkProblem(p)
	if err != nil {
		return nil, err
	}
	var recordTime time.Duration
	if m == nil {
		start := time.Now()
		var rerr error
		m, _, rerr = sv.record(q, true)
		if rerr != nil {
			return nil, rerr
		}
		recordTime = time.Since(start)
	} else if err := sv.checkMesh(q, m); err != nil {
		return nil, err
	}
	if err := m.failed(nil, nil); err != nil {
		return nil, fmt.Errorf("ode: not replaying a mesh with a failed trajectory: %w", err)
	}
	start := time.Now()
	n, d := q.n, q.Field.Dim
	sp := sv.scanProblem(q, m)
	sw, err := scan.Forward(sp, sv.scanSettings())
	if err != nil {
		return nil, err
	}
	res := sw.Result()

	lv, err := sv.evalLoss(q, &loss, res, true)
	if err != nil {
		return nil, err
	}
	g, err := sw.Backward(nil, lv.ybar, lv.tapbar)
	if err != nil {
		return nil, err
	}
	if dst == nil {
		dst = &Gradient{}
	}
	dst.Loss = lv.value
	dst.Y0 = fromSoA(dst.Y0, g.Y0, n, d)
	for c, col := range lv.pbar {
		for i, v := range col {
			g.P[c*n+i] += v
		}
	}
	dst.P = fromSoA(dst.P, g.P, n, q.Field.Params)
	dst.Shared = append(dst.Shared[:0], g.Shared...)
	for c, v := range lv.sbar {
		dst.Shared[c] += v
	}
	dst.Solution, dst.Mesh = sv.replaySolution(q, m, res), m
	dst.RecordTime, dst.GradTime = recordTime, time.Since(start)
	dst.StoredBytes = sw.StoredBytes()
	if err := checkGradient(dst, d, q.Field.Params); err != nil {
		return dst, err
	}
	return dst, nil
}

// checkGradient reports the first non-finite gradient entry, so that a NaN
// from the reverse sweep never passes silently.
func checkGradient(g *Gradient, d, np int) error {
	if i := finiteAll(g.Y0); i >= 0 {
		return fmt.Errorf("ode: the gradient with respect to Y0 of trajectory %d (component %d) is %v; check the field's derivatives near its solution", i/d, i%d, g.Y0[i])
	}
	if i := finiteAll(g.P); i >= 0 {
		return fmt.Errorf("ode: the gradient with respect to P of trajectory %d (parameter %d) is %v; check the field's derivatives near its solution", i/np, i%np, g.P[i])
	}
	if i := finiteAll(g.Shared); i >= 0 {
		return fmt.Errorf("ode: the gradient with respect to Shared[%d] is %v; check the field's derivatives near the solutions", i, g.Shared[i])
	}
	if math.IsNaN(g.Loss) || math.IsInf(g.Loss, 0) {
		return fmt.Errorf("ode: the loss is %v", g.Loss)
	}
	return nil
}

// checkMesh verifies that m can be replayed for q.
func (sv *Solver) checkMesh(q *problem, m *Mesh) error {
	switch {
	case m.N != q.n:
		return fmt.Errorf("ode: mesh has %d trajectories, problem %d", m.N, q.n)
	case m.T0 != q.T0:
		return fmt.Errorf("ode: mesh starts at T0 = %v, problem at %v", m.T0, q.T0)
	case m.Method != nil && m.Method.Name() != sv.set.Method.Name():
		return fmt.Errorf("ode: mesh was recorded with %s but the settings use %s; replay it with the method that recorded it", m.Method.Name(), sv.set.Method.Name())
	case len(m.Len) != m.N || len(m.H) < m.Rows*m.N || len(m.Status) != m.N:
		return fmt.Errorf("ode: mesh arrays are inconsistent (N %d, Rows %d, len(H) %d, len(Len) %d, len(Status) %d)",
			m.N, m.Rows, len(m.H), len(m.Len), len(m.Status))
	}
	for i, l := range m.Len {
		if l < 0 || l > m.Rows {
			return fmt.Errorf("ode: mesh: trajectory %d has Len %d, outside [0, Rows = %d]", i, l, m.Rows)
		}
		for s := 0; s < l; s++ {
			if h := m.H[s*m.N+i]; !(h >= 0) || math.IsInf(h, 0) {
				return fmt.Errorf("ode: mesh: step %d of trajectory %d is %v; step sizes must be finite and non-negative", s, i, h)
			}
		}
	}
	return nil
}

// Replay runs the mesh m forward (no gradient) and returns the solution:
// the map whose exact derivative Grad computes. Finite differences of
// Replay with m fixed check Grad.
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
	if err := m.failed(nil, nil); err != nil {
		return nil, fmt.Errorf("ode: not replaying a mesh with a failed trajectory: %w", err)
	}
	res, err := scan.Replay(nil, sv.scanProblem(q, m), sv.scanSettings())
	if err != nil {
		return nil, err
	}
	return sv.replaySolution(q, m, res), nil
}

// replaySolution returns the solution held by a replay's result.
func (sv *Solver) replaySolution(q *problem, m *Mesh, res *scan.Result) *Solution {
	n, d, K := q.n, q.Field.Dim, len(q.SaveAt)
	sol := &Solution{N: n, Dim: d, T: append([]float64(nil), q.t1...), Y: fromSoA(nil, res.Y, n, d), SaveAt: q.SaveAt,
		Status: m.Status, Stats: m.Stats, Method: sv.set.Method.Name()}
	if K > 0 {
		sol.Ys = unpackTaps(nil, res.Taps, n, K, d)
	}
	return sol
}
