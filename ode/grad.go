package ode

import (
	"fmt"
	"math"
	"time"

	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Loss is a scalar loss of the solutions: the sum (or mean) over the
// trajectories of a per-trajectory term ℓ_i = F(y_i(t1), ys_i, data_i).
type Loss struct {
	// Name names the loss in programs and errors.
	Name string

	// F computes one trajectory's term from its final state y (len Dim),
	// its saved states ys (len(SaveAt)·Dim, save time k at
	// ys[k*Dim:(k+1)*Dim]) and its data row (len DataDim).
	F func(y, ys, data []tape.V) tape.V

	// Data holds per-trajectory data (observations, targets), [N×DataDim]
	// row-major, or a single row used for every trajectory. DataDim is its
	// width; both may be zero.
	Data    []float64
	DataDim int

	// Mean averages the terms over the trajectories instead of summing.
	Mean bool
}

// SumSquares is the loss Σ_i Σ_c y_i,c(t1)², the sum of squares of the
// final states.
func SumSquares() Loss {
	return Loss{Name: "sumsq", F: func(y, _, _ []tape.V) tape.V {
		s := y[0].Square()
		for _, x := range y[1:] {
			s = s.Add(x.Square())
		}
		return s
	}}
}

// Component is the loss Σ_i y_i,k(t1), component k of the final states.
func Component(k int) Loss {
	return Loss{Name: fmt.Sprintf("y:%d", k), F: func(y, _, _ []tape.V) tape.V {
		if k < 0 || k >= len(y) {
			panic(fmt.Errorf("ode: loss y:%d: the state has %d components", k, len(y)))
		}
		return y[k]
	}}
}

// program traces the gradient program of the loss term: inputs y[d],
// ys[K·d], data[m]; outputs ℓ and its gradient with respect to y and ys.
func (l *Loss) program(d, K int) (*tape.Program, error) {
	if l.F == nil {
		return nil, fmt.Errorf("ode: loss %s has no F", l.Name)
	}
	var in []tape.Input
	for c := 0; c < d; c++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("y[%d]", c)})
	}
	for k := 0; k < K; k++ {
		for c := 0; c < d; c++ {
			in = append(in, tape.Input{Name: fmt.Sprintf("ys[%d,%d]", k, c)})
		}
	}
	for c := 0; c < l.DataDim; c++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("data[%d]", c)})
	}
	name := l.Name
	if name == "" {
		name = "loss"
	}
	p, err := tape.Trace(name, in, func(v []tape.V) []tape.V {
		return []tape.V{l.F(v[:d], v[d:d+K*d], v[d+K*d:])}
	})
	if err != nil {
		return nil, fmt.Errorf("ode: loss: %w", err)
	}
	wrt := make([]int, d+K*d)
	for i := range wrt {
		wrt[i] = i
	}
	return tape.Grad(p, wrt)
}

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
	n, d, K := q.n, q.Field.Dim, len(q.SaveAt)
	sp := sv.scanProblem(q, m)
	sw, err := scan.Forward(sp, sv.scanSettings())
	if err != nil {
		return nil, err
	}
	res := sw.Result()

	// The loss and its cotangents, per trajectory.
	lp, err := loss.program(d, K)
	if err != nil {
		return nil, err
	}
	if loss.DataDim < 0 || (len(loss.Data) != loss.DataDim && len(loss.Data) != n*loss.DataDim) {
		return nil, fmt.Errorf("ode: loss %s: len(Data) = %d, want DataDim = %d or N*DataDim = %d", loss.Name, len(loss.Data), loss.DataDim, n*loss.DataDim)
	}
	le, err := tape.NewExec(lp, &tape.ExecSettings{BlockSize: sv.set.Exec.BlockSize, Workers: sv.set.Exec.Workers, CheckFinite: true})
	if err != nil {
		return nil, err
	}
	in := make([][]float64, 0, d+K*d+loss.DataDim)
	for c := 0; c < d; c++ {
		in = append(in, res.Y[c*n:(c+1)*n])
	}
	nt := n * K
	for k := 0; k < K; k++ {
		for c := 0; c < d; c++ {
			col := make([]float64, n)
			for i := 0; i < n; i++ {
				col[i] = res.Taps[c*nt+i*K+k]
			}
			in = append(in, col)
		}
	}
	if loss.DataDim > 0 {
		data := toSoA(nil, expand(loss.Data, loss.DataDim, n), n, loss.DataDim)
		for c := 0; c < loss.DataDim; c++ {
			in = append(in, data[c*n:(c+1)*n])
		}
	}
	out := make([][]float64, 1+d+K*d)
	for i := range out {
		out[i] = make([]float64, n)
	}
	if err := le.Run(out, in, n); err != nil {
		return nil, fmt.Errorf("ode: loss %s: %w", loss.Name, err)
	}
	scale := 1.0
	if loss.Mean {
		scale = 1 / float64(n)
	}
	total := 0.0
	for _, v := range out[0] {
		total += v
	}
	ybar := make([]float64, d*n)
	for c := 0; c < d; c++ {
		for i, v := range out[1+c] {
			ybar[c*n+i] = scale * v
		}
	}
	tapbar := make([]float64, d*nt)
	for k := 0; k < K; k++ {
		for c := 0; c < d; c++ {
			for i, v := range out[1+d+k*d+c] {
				tapbar[c*nt+i*K+k] = scale * v
			}
		}
	}
	g, err := sw.Backward(nil, ybar, tapbar)
	if err != nil {
		return nil, err
	}
	if dst == nil {
		dst = &Gradient{}
	}
	dst.Loss = scale * total
	dst.Y0 = fromSoA(dst.Y0, g.Y0, n, d)
	dst.P = fromSoA(dst.P, g.P, n, q.Field.Params)
	dst.Shared = append(dst.Shared[:0], g.Shared...)
	sol := &Solution{N: n, Dim: d, T: make([]float64, n), Y: fromSoA(nil, res.Y, n, d), SaveAt: q.SaveAt,
		Status: m.Status, Stats: m.Stats, Method: sv.set.Method.Name()}
	for i := range sol.T {
		sol.T[i] = q.t1[i]
	}
	if K > 0 {
		sol.Ys = unpackTaps(nil, res.Taps, n, K, d)
	}
	dst.Solution, dst.Mesh = sol, m
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
	n, d, K := q.n, q.Field.Dim, len(q.SaveAt)
	sol := &Solution{N: n, Dim: d, T: append([]float64(nil), q.t1...), Y: fromSoA(nil, res.Y, n, d), SaveAt: q.SaveAt,
		Status: m.Status, Stats: m.Stats, Method: sv.set.Method.Name()}
	if K > 0 {
		sol.Ys = unpackTaps(nil, res.Taps, n, K, d)
	}
	return sol, nil
}
