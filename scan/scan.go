package scan

import (
	"errors"
	"fmt"
	"sort"

	"github.com/gradsolve-go/gradsolve/internal/buf"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Step is a one-step map y⁺ = Φ(t, h, y, p, s) to be scanned over a mesh.
// Prog's inputs are, in order: t, h, y[0..D), p[0..P) (per trajectory),
// s[0..S) (shared); its outputs are y⁺[0..D). With h == 0 the map must be
// the identity in value and derivative (explicit Runge–Kutta steps are, as
// y + 0·Σ b_i k_i; Rosenbrock steps mask their Jacobian terms).
//
// A Step caches the programs and executors derived from Prog, so reuse one
// Step for repeated scans of the same map; a Step must not be used by two
// scans at once (Clone gives each goroutine its own), and a Sweep is a
// scan until its Backward returns.
type Step struct {
	Prog    *tape.Program
	D, P, S int

	// Dense optionally interpolates within a step: inputs t, h, y[D],
	// p[P], s[S], θ; outputs y(t + θh)[D] (θ = 0 must give y exactly).
	// Taps with Theta set use it instead of re-stepping.
	Dense *tape.Program

	// Rev and DenseRev optionally give the accumulating reverse programs
	// of Prog and Dense (see Reverse); nil builds them on first use.
	Rev, DenseRev *tape.Program

	// Ext optionally extends the step with the coefficients of its
	// continuous extension: inputs as Prog's; outputs y⁺[D], bit for bit
	// Prog's, then w[Terms·D] (w_j[c] at (j−1)·D + c), such that
	//
	//	y(t + θh) = y + Σ_{j=1…Terms} θ^j·w_j   (θ ∈ [0, 1]).
	//
	// Saves then interpolate from the step that brackets them, whose own
	// sweep computes the coefficients: no extra step (see Saves). ExtRev
	// optionally gives Ext's accumulating reverse program (Reverse(Ext,
	// D, P, S): inputs Ext's, λ[D], w̄[Terms·D], gp[P]); nil builds it on
	// first use.
	Ext    *tape.Program
	Terms  int
	ExtRev *tape.Program

	fwd, rev           *tape.Exec
	denseFwd, denseRev *tape.Exec
	ext, extRev        *tape.Exec
	states             [2]*state   // carries reused by newState
	contrib            [][]float64 // a reverse step's shared-gradient contributions, reused
	tapIdx, tapOff     []int       // a layout's taps by step, reused (newLayout)
	saves              *saveSweep  // the saves' buffers, reused
}

// contributions returns S columns of n values for one reverse step's
// shared-gradient contributions, the Step's own, reused from one sweep to
// the next (every entry a step reads, the step writes first).
func (s *Step) contributions(n int) [][]float64 {
	if len(s.contrib) != s.S || (s.S > 0 && cap(s.contrib[0]) < n) {
		s.contrib = make([][]float64, s.S)
		for c := range s.contrib {
			s.contrib[c] = make([]float64, n)
		}
	}
	for c := range s.contrib {
		s.contrib[c] = s.contrib[c][:n]
	}
	return s.contrib
}

// Clone returns a Step with the same programs whose executors are clones
// of s's (created first if needed) running blocks of blockSize
// trajectories on workers goroutines (0: s's settings), for use by another
// goroutine. set configures the executors if s has none yet.
func (s *Step) Clone(set *tape.ExecSettings, blockSize, workers int) (*Step, error) {
	if err := s.Prepare(set); err != nil {
		return nil, err
	}
	c := &Step{Prog: s.Prog, D: s.D, P: s.P, S: s.S, Dense: s.Dense, Rev: s.Rev, DenseRev: s.DenseRev,
		Ext: s.Ext, Terms: s.Terms, ExtRev: s.ExtRev}
	c.fwd, c.rev = s.fwd.Clone(blockSize, workers), s.rev.Clone(blockSize, workers)
	if s.denseFwd != nil {
		c.denseFwd, c.denseRev = s.denseFwd.Clone(blockSize, workers), s.denseRev.Clone(blockSize, workers)
	}
	if s.Ext != nil {
		c.ext, c.extRev = s.ext.Clone(blockSize, workers), s.extRev.Clone(blockSize, workers)
	}
	return c, nil
}

// Prepare builds the Step's reverse programs (if not given) and its
// executors with settings set, if it has none yet: the work a first scan
// would do, done ahead (Clone does it to the Step it copies).
func (s *Step) Prepare(set *tape.ExecSettings) error {
	if _, err := s.forward(set); err != nil {
		return err
	}
	if _, err := s.reverse(set); err != nil {
		return err
	}
	if s.Ext != nil {
		if _, _, err := s.extended(set); err != nil {
			return err
		}
	} else if s.Dense != nil {
		if _, _, err := s.dense(set); err != nil {
			return err
		}
	}
	return nil
}

// extended returns the executors of the extended step and its
// accumulating reverse program, creating them on first use.
func (s *Step) extended(set *tape.ExecSettings) (fwd, rev *tape.Exec, err error) {
	if s.ext != nil {
		return s.ext, s.extRev, nil
	}
	d := s.D
	if want := 2 + d + s.P + s.S; s.Terms < 1 || len(s.Ext.Inputs) != want || len(s.Ext.Outputs) != d+s.Terms*d {
		return nil, nil, fmt.Errorf("scan: extended step %s has %d inputs and %d outputs with Terms %d, want %d inputs and D·(1+Terms) = %d outputs, Terms ≥ 1",
			s.Ext.Name, len(s.Ext.Inputs), len(s.Ext.Outputs), s.Terms, want, d+s.Terms*d)
	}
	if fwd, err = tape.NewExec(s.Ext, set); err != nil {
		return nil, nil, err
	}
	if s.ExtRev == nil {
		if s.ExtRev, err = Reverse(s.Ext, d, s.P, s.S); err != nil {
			return nil, nil, err
		}
	}
	if rev, err = tape.NewExec(s.ExtRev, set); err != nil {
		return nil, nil, err
	}
	s.ext, s.extRev = fwd, rev
	return fwd, rev, nil
}

// forward returns the executor of the step, creating it on first use.
func (s *Step) forward(set *tape.ExecSettings) (*tape.Exec, error) {
	if s.fwd == nil {
		e, err := tape.NewExec(s.Prog, set)
		if err != nil {
			return nil, err
		}
		s.fwd = e
	}
	return s.fwd, nil
}

// reverse returns the executor of the step's accumulating reverse program
// (see Reverse), creating it on first use.
func (s *Step) reverse(set *tape.ExecSettings) (*tape.Exec, error) {
	if s.rev != nil {
		return s.rev, nil
	}
	if s.Rev == nil {
		p, err := Reverse(s.Prog, s.D, s.P, s.S)
		if err != nil {
			return nil, err
		}
		s.Rev = p
	}
	e, err := tape.NewExec(s.Rev, set)
	if err != nil {
		return nil, err
	}
	s.rev = e
	return e, nil
}

// Reverse builds the reverse (VJP) program of a step program prog whose
// inputs are t, h, y[d], p[np], s[ns] (shared), possibly followed by more
// inputs that are not differentiated (θ of a dense program). Its inputs
// are prog's followed by λ[d] (the cotangent of y⁺) and gp[np]; its
// outputs are λ' = (∂y⁺/∂y)ᵀλ [d], gp + (∂y⁺/∂p)ᵀλ [np] (accumulated per
// trajectory) and gs = (∂y⁺/∂s)ᵀλ [ns], this step's own contribution to
// the shared gradient, per trajectory: the caller sums the contributions
// over trajectories in a fixed order (see TileSize).
func Reverse(prog *tape.Program, d, np, ns int) (*tape.Program, error) {
	wrt := make([]int, 0, d+np+ns)
	for k := 2; k < 2+d+np+ns; k++ {
		wrt = append(wrt, k)
	}
	vjp, err := tape.VJP(prog, wrt)
	if err != nil {
		return nil, err
	}
	b, in := tape.NewBuilderFor(prog.Name+".rev", vjp.Inputs)
	gp := b.Inputs("gp", np, false)
	var outs []tape.V
	err = tape.Catch(prog.Name, func() {
		r := tape.Call(vjp, in)
		outs = append(outs, r[:d]...)
		for c := 0; c < np; c++ {
			outs = append(outs, gp[c].Add(r[d+c]))
		}
		outs = append(outs, r[d+np:d+np+ns]...)
	})
	if err != nil {
		return nil, err
	}
	p, err := b.Build(outs...)
	if err != nil {
		return nil, err
	}
	for k := range p.Outputs {
		p.Outputs[k].Sum = false
	}
	return p, nil
}

// dense returns the executors of the dense-output program and its
// accumulating reverse program (extra input θ).
func (s *Step) dense(set *tape.ExecSettings) (fwd, rev *tape.Exec, err error) {
	if s.denseFwd != nil {
		return s.denseFwd, s.denseRev, nil
	}
	if want := 3 + s.D + s.P + s.S; len(s.Dense.Inputs) != want || len(s.Dense.Outputs) != s.D {
		return nil, nil, fmt.Errorf("scan: dense program %s has %d inputs and %d outputs, want %d and %d",
			s.Dense.Name, len(s.Dense.Inputs), len(s.Dense.Outputs), want, s.D)
	}
	if fwd, err = tape.NewExec(s.Dense, set); err != nil {
		return nil, nil, err
	}
	if s.DenseRev == nil {
		if s.DenseRev, err = Reverse(s.Dense, s.D, s.P, s.S); err != nil {
			return nil, nil, err
		}
	}
	if rev, err = tape.NewExec(s.DenseRev, set); err != nil {
		return nil, nil, err
	}
	s.denseFwd, s.denseRev = fwd, rev
	return fwd, rev, nil
}

// ReverseProgram returns the accumulating reverse program the backward
// sweep runs (see Reverse), building it on first use.
func (s *Step) ReverseProgram() (*tape.Program, error) {
	if _, err := s.reverse(nil); err != nil {
		return nil, err
	}
	return s.Rev, nil
}

func (s *Step) check() error {
	p := s.Prog
	if p == nil {
		return errors.New("scan: Step has no program")
	}
	if want := 2 + s.D + s.P + s.S; len(p.Inputs) != want {
		return fmt.Errorf("scan: step program %s has %d inputs, want 2+D+P+S = %d", p.Name, len(p.Inputs), want)
	}
	if len(p.Outputs) != s.D {
		return fmt.Errorf("scan: step program %s has %d outputs, want D = %d", p.Name, len(p.Outputs), s.D)
	}
	for k := 0; k < 2+s.D+s.P; k++ {
		if p.Inputs[k].Shared {
			return fmt.Errorf("scan: step program %s: input %d (%s) must be per trajectory", p.Name, k, p.Inputs[k].Name)
		}
	}
	for k := 2 + s.D + s.P; k < len(p.Inputs); k++ {
		if !p.Inputs[k].Shared {
			return fmt.Errorf("scan: step program %s: input %d (%s) must be shared", p.Name, k, p.Inputs[k].Name)
		}
	}
	return nil
}

// Mesh is a step-major mesh of n trajectories: trajectory j takes Len[j]
// steps, step s of size H[s*n+j] (entries past Len[j] are ignored). Rows is
// the number of rows of H, at least max(Len).
type Mesh struct {
	N    int
	Rows int
	H    []float64
	Len  []int
}

func (m *Mesh) check() error {
	if m.N < 0 || len(m.Len) != m.N || m.Rows < 0 || len(m.H) < m.Rows*m.N {
		return fmt.Errorf("scan: mesh shape: N %d, len(Len) %d, Rows %d, len(H) %d", m.N, len(m.Len), m.Rows, len(m.H))
	}
	for j, l := range m.Len {
		if l < 0 || l > m.Rows {
			return fmt.Errorf("scan: mesh: trajectory %d has %d steps, outside [0, %d]", j, l, m.Rows)
		}
	}
	return nil
}

// Taps asks for extra evaluations of the step from mesh states: tap i
// evaluates Φ(t_k, H[i], y_k, p, s) for trajectory Traj[i] at its state
// after Step[i] steps (0 ≤ Step[i] ≤ Len). ODE solvers use taps to save
// states at times between mesh points (bracket and re-step); a tap with
// H[i] == 0 returns y_k exactly.
//
// If Theta is not nil the taps interpolate instead: tap i evaluates
// Step.Dense(t_k, H[i], y_k, p, s, Theta[i]), where H[i] should be the
// mesh step h_k (0 for a tap at the end of the mesh). (Saves interpolate
// from the steps' own extension, Step.Ext, without a list of taps.)
//
// Tap outputs (Result.Taps) and their cotangents (Backward's tapbar) are
// [D][ntaps], or, with TapMajor, [ntaps][D] (tap i, component c at
// i·D + c). Out, if not nil (len D·ntaps), is where the outputs are
// written (Result.Taps then aliases it), so that a caller can have them
// in place in its own array.
type Taps struct {
	Traj, Step []int
	H          []float64
	Theta      []float64
	TapMajor   bool
	Out        []float64
}

// index returns the position of component c of tap i in the taps'
// output layout for nt taps of dimension d.
func (t *Taps) index(i, c, nt, d int) int {
	if t.TapMajor {
		return i*d + c
	}
	return c*nt + i
}

// Len returns the number of taps.
func (t *Taps) Len() int {
	if t == nil {
		return 0
	}
	return len(t.Traj)
}

// Problem is a scan to run. Arrays are structure-of-arrays: component c
// of trajectory j at Y0[c*N+j] (likewise P), and tap outputs at
// [c*ntaps+i].
type Problem struct {
	Step   *Step
	Mesh   Mesh
	T0     []float64 // start time of each trajectory, len N
	Y0     []float64 // [D][N]
	P      []float64 // [P][N]
	Shared []float64 // [S]
	Taps   *Taps

	// Saves, if not nil, asks for the states at shared save times, read
	// from the steps' continuous extension (Step.Ext); a Problem has Taps
	// or Saves, not both.
	Saves *Saves

	// Stored, if not nil, holds the states the forward sweep would compute
	// (a recorder's accepted states, bit for bit those of the replay), so
	// that Forward copies them instead of stepping and the backward sweep
	// reads them in place.
	Stored *Stored
}

// Stored holds the states of every trajectory before each of its steps:
// row s of States, laid out [1+D][N], holds t at States[s*(1+D)*N+j] and
// y_c at States[s*(1+D)*N+(1+c)*N+j], for s < Len[j] (other entries are
// not read). EndT [N] and EndY [D][N] hold the final times and states.
type Stored struct {
	States []float64
	EndT   []float64
	EndY   []float64
}

// Settings configure a scan. The zero value means the defaults.
type Settings struct {
	// Checkpoint is the checkpoint interval K of the gradient: the forward
	// sweep stores the states at every K-th step and the backward sweep
	// recomputes the steps in between. 1 stores every state (fastest);
	// 0 picks 1 if every state fits in MemoryLimit, else the smallest K
	// that fits.
	Checkpoint int

	// MemoryLimit bounds, in bytes, the stored states of a gradient when
	// Checkpoint is 0. 0 means 4 GiB.
	MemoryLimit int64

	// Exec configures the executors; see tape.ExecSettings.
	Exec tape.ExecSettings
}

// DefaultMemoryLimit is Settings.MemoryLimit's default.
const DefaultMemoryLimit = 4 << 30

func (p *Problem) check() error {
	if p.Step == nil {
		return errors.New("scan: Problem has no Step")
	}
	if err := p.Step.check(); err != nil {
		return err
	}
	if err := p.Mesh.check(); err != nil {
		return err
	}
	n, st := p.Mesh.N, p.Step
	if len(p.T0) != n || len(p.Y0) != st.D*n || len(p.P) != st.P*n || len(p.Shared) != st.S {
		return fmt.Errorf("scan: shapes: n %d, len(T0) %d, len(Y0) %d (want %d), len(P) %d (want %d), len(Shared) %d (want %d)",
			n, len(p.T0), len(p.Y0), st.D*n, len(p.P), st.P*n, len(p.Shared), st.S)
	}
	if t := p.Taps; t != nil {
		if len(t.Step) != len(t.Traj) || len(t.H) != len(t.Traj) || (t.Theta != nil && len(t.Theta) != len(t.Traj)) {
			return fmt.Errorf("scan: taps: len(Traj) %d, len(Step) %d, len(H) %d, len(Theta) %d differ", len(t.Traj), len(t.Step), len(t.H), len(t.Theta))
		}
		if t.Out != nil && len(t.Out) != st.D*len(t.Traj) {
			return fmt.Errorf("scan: taps: len(Out) %d, want D·ntaps = %d", len(t.Out), st.D*len(t.Traj))
		}
		if t.Theta != nil && p.Step.Dense == nil {
			return errors.New("scan: taps with Theta need Step.Dense (Saves interpolate from Step.Ext)")
		}
		for i, j := range t.Traj {
			if j < 0 || j >= n || t.Step[i] < 0 || t.Step[i] > p.Mesh.Len[j] {
				return fmt.Errorf("scan: tap %d: trajectory %d step %d out of range", i, j, t.Step[i])
			}
		}
	}
	if p.Saves != nil {
		if err := p.checkSaves(); err != nil {
			return err
		}
	}
	if s := p.Stored; s != nil {
		rows := 0
		for _, l := range p.Mesh.Len {
			rows = max(rows, l)
		}
		if len(s.States) < rows*(1+st.D)*n || len(s.EndT) != n || len(s.EndY) != st.D*n {
			return fmt.Errorf("scan: stored states: len(States) %d (want ≥ %d), len(EndT) %d (want %d), len(EndY) %d (want %d)",
				len(s.States), rows*(1+st.D)*n, len(s.EndT), n, len(s.EndY), st.D*n)
		}
	}
	return nil
}

// layout is the trajectory order of a sweep: perm lists the trajectories by
// decreasing length, so that the trajectories still running at step s are
// a prefix of perm, of length active[s].
type layout struct {
	n, rows int
	perm    []int
	pos     []int // pos[perm[i]] = i
	active  []int // active[s] = #{j : Len[j] > s}
	// The taps at step s are tapIdx[tapOff[s]:tapOff[s+1]], in order.
	tapIdx, tapOff []int
}

// tapsAt returns the taps at step s, in order.
func (l *layout) tapsAt(s int) []int {
	if s+1 >= len(l.tapOff) {
		return nil
	}
	return l.tapIdx[l.tapOff[s]:l.tapOff[s+1]]
}

func newLayout(p *Problem) *layout {
	m := &p.Mesh
	l := &layout{n: m.N, perm: make([]int, m.N)}
	for j := range l.perm {
		l.perm[j] = j
	}
	sort.SliceStable(l.perm, func(a, b int) bool { return m.Len[l.perm[a]] > m.Len[l.perm[b]] })
	l.pos = make([]int, m.N)
	for i, j := range l.perm {
		l.rows = max(l.rows, m.Len[j])
		l.pos[j] = i
	}
	l.active = make([]int, l.rows)
	for s := range l.active {
		l.active[s] = sort.Search(m.N, func(i int) bool { return m.Len[l.perm[i]] <= s })
	}
	if t := p.Taps; t.Len() > 0 {
		// A counting sort of the taps by step.
		st := p.Step
		st.tapOff = buf.Make(st.tapOff, 2*(l.rows+2))
		l.tapOff = st.tapOff[:l.rows+2]
		for _, s := range t.Step {
			l.tapOff[s+1]++
		}
		for s := 1; s < len(l.tapOff); s++ {
			l.tapOff[s] += l.tapOff[s-1]
		}
		st.tapIdx, _ = buf.Extend(st.tapIdx[:0], len(t.Step))
		l.tapIdx = st.tapIdx
		next := st.tapOff[l.rows+2:]
		copy(next, l.tapOff[:l.rows+1])
		for i, s := range t.Step {
			l.tapIdx[next[s]] = i
			next[s]++
		}
	}
	return l
}

// state is the carry of a sweep over the permuted trajectories.
type state struct {
	t []float64   // [n]
	y [][]float64 // [D][n]
	p [][]float64 // [P][n]
	s [][]float64 // [S][1]
	h []float64   // step sizes of the current row, [n]

	outs [][]float64
	mask masker
}

// newState returns the carry of a sweep, initialised from the problem.
// Its arrays are the Step's own (slot 0 for a forward sweep, 1 for a
// backward one), reused from one scan to the next, since a Step serves one
// scan at a time.
func newState(p *Problem, l *layout, slot int) *state {
	n, st := l.n, p.Step
	x := st.states[slot]
	if x == nil || cap(x.t) < n || len(x.y) != st.D || len(x.p) != st.P {
		x = &state{t: make([]float64, n), h: make([]float64, n), y: make([][]float64, st.D), p: make([][]float64, st.P)}
		for c := range x.y {
			x.y[c] = make([]float64, n)
		}
		for c := range x.p {
			x.p[c] = make([]float64, n)
		}
		st.states[slot] = x
	}
	x.t, x.h = x.t[:n], x.h[:n]
	for c := range x.y {
		x.y[c] = x.y[c][:n]
		for i, j := range l.perm {
			x.y[c][i] = p.Y0[c*n+j]
		}
	}
	for c := range x.p {
		x.p[c] = x.p[c][:n]
		for i, j := range l.perm {
			x.p[c][i] = p.P[c*n+j]
		}
	}
	if len(x.s) != st.S {
		x.s = make([][]float64, st.S)
	}
	for c := range x.s {
		x.s[c] = p.Shared[c : c+1]
	}
	for i, j := range l.perm {
		x.t[i] = p.T0[j]
	}
	return x
}

// inputs fills in (len 2+D+P+S) with the step program's inputs for the
// first m trajectories.
func (x *state) inputs(in [][]float64, m int) [][]float64 {
	in = append(in[:0], x.t[:m], x.h[:m])
	for _, c := range x.y {
		in = append(in, c[:m])
	}
	for _, c := range x.p {
		in = append(in, c[:m])
	}
	return append(in, x.s...)
}

// loadH gathers row s of the mesh for the first m trajectories.
func (x *state) loadH(p *Problem, l *layout, s, m int) {
	row := p.Mesh.H[s*l.n : (s+1)*l.n]
	for i, j := range l.perm[:m] {
		x.h[i] = row[j]
	}
}

// Result holds what a forward scan computes: the final states and the tap
// outputs, structure-of-arrays.
type Result struct {
	Y    []float64 // [D][N]: final state of trajectory j at Y[c*N+j]
	Taps []float64 // [D][ntaps]
}

// Replay runs the step over the mesh and returns the final states and the
// taps. It stores nothing for a backward sweep. Each trajectory stops at
// its own length, so a short trajectory costs only its own steps. dst may
// be nil.
func Replay(dst *Result, p *Problem, s *Settings) (*Result, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	var set Settings
	if s != nil {
		set = *s
	}
	e, err := p.Step.forward(&set.Exec)
	if err != nil {
		return nil, err
	}
	l := newLayout(p)
	x := newState(p, l, 0)
	if dst == nil {
		dst = &Result{}
	}
	tp, err := newTapper(p, l, &set.Exec, dst)
	if err != nil {
		return nil, err
	}
	in := make([][]float64, 0, len(p.Step.Prog.Inputs))
	for s := 0; s < l.rows; s++ {
		tp.collect(x, s)
		m := l.active[s]
		x.loadH(p, l, s, m)
		if err := tp.stepRow(e, x, in, s, m); err != nil {
			return nil, err
		}
	}
	tp.collect(x, l.rows)
	return finishResult(dst, p, l, x, tp, e)
}

// stepForward advances the first m trajectories by one step, in place.
func stepForward(e *tape.Exec, x *state, in [][]float64, m int) error {
	in = x.inputs(in, m)
	x.outs = x.outs[:0]
	for _, c := range x.y {
		x.outs = append(x.outs, c[:m])
	}
	if err := x.mask.runLive(e, x.outs, in, x.h, m); err != nil {
		return err
	}
	for i, h := range x.h[:m] {
		x.t[i] += h
	}
	return nil
}

func finishResult(dst *Result, p *Problem, l *layout, x *state, tp *tapper, e *tape.Exec) (*Result, error) {
	if dst == nil {
		dst = &Result{}
	}
	n, d := l.n, p.Step.D
	dst.Y = resize(dst.Y, d*n)
	for c := 0; c < d; c++ {
		for i, j := range l.perm {
			dst.Y[c*n+j] = x.y[c][i]
		}
	}
	if tp.sv != nil {
		return dst, nil // the rows wrote the saves
	}
	nt := p.Taps.Len()
	dst.Taps = tapsOut(dst.Taps, p.Taps, d)
	if nt > 0 {
		soa := dst.Taps
		if p.Taps.TapMajor {
			soa = make([]float64, d*nt)
		}
		if err := tp.eval(e, soa); err != nil {
			return nil, err
		}
		if p.Taps.TapMajor {
			for c := 0; c < d; c++ {
				for i, v := range soa[c*nt : (c+1)*nt] {
					dst.Taps[i*d+c] = v
				}
			}
		}
	}
	return dst, nil
}

// tapsOut returns the storage of the taps' outputs: t.Out, or x resized.
func tapsOut(x []float64, t *Taps, d int) []float64 {
	if t != nil && t.Out != nil {
		return t.Out
	}
	return resize(x, d*t.Len())
}

func resize(x []float64, n int) []float64 {
	if cap(x) < n {
		return make([]float64, n)
	}
	return x[:n]
}

// tapper gathers the states the taps start from, in tap order, or
// writes the saves (sv) as the sweep computes them.
type tapper struct {
	set *tape.ExecSettings
	p   *Problem
	l   *layout
	pos []int // position of each trajectory in the permuted order
	st  *state
	sv  *saveSweep
}

// newTapper returns the tapper of a forward sweep.
func newTapper(p *Problem, l *layout, set *tape.ExecSettings, res *Result) (*tapper, error) {
	if p.Saves != nil {
		sv, err := newSaveSweep(p, l, set)
		return &tapper{p: p, l: l, set: set, sv: sv}, err
	}
	nt := p.Taps.Len()
	if nt == 0 {
		return &tapper{p: p, l: l, set: set}, nil
	}
	t := &tapper{p: p, l: l, set: set, pos: make([]int, l.n)}
	for i, j := range l.perm {
		t.pos[j] = i
	}
	st := p.Step
	t.st = &state{t: make([]float64, nt), h: append([]float64(nil), p.Taps.H...)}
	t.st.y = make([][]float64, st.D)
	for c := range t.st.y {
		t.st.y[c] = make([]float64, nt)
	}
	t.st.p = make([][]float64, st.P)
	for c := range t.st.p {
		t.st.p[c] = make([]float64, nt)
		for i, j := range p.Taps.Traj {
			t.st.p[c][i] = p.P[c*l.n+j]
		}
	}
	t.st.s = make([][]float64, st.S)
	for c := range t.st.s {
		t.st.s[c] = p.Shared[c : c+1]
	}
	return t, nil
}

// stepRow advances the first m trajectories by step s (their step sizes
// loaded in x.h), writing the saves on the row (with the extended step
// where one is inside a step).
func (t *tapper) stepRow(e *tape.Exec, x *state, in [][]float64, s, m int) error {
	if t.sv != nil && !t.p.Saves.Given {
		return t.sv.stepRow(e, x, in, m)
	}
	return stepForward(e, x, in, m)
}

// collect copies the state after s steps of every trajectory with a tap
// at step s (or, after the last step, writes the saves at each
// trajectory's end).
func (t *tapper) collect(x *state, s int) {
	if t.sv != nil {
		if s == t.l.rows && !t.p.Saves.Given {
			t.sv.writeFinal(x.y)
		}
		return
	}
	if t.st == nil {
		return
	}
	for _, i := range t.l.tapsAt(s) {
		k := t.pos[t.p.Taps.Traj[i]]
		t.st.t[i] = x.t[k]
		for c := range x.y {
			t.st.y[c][i] = x.y[c][k]
		}
	}
}

// collectStored copies the tap states from stored states (or writes the
// saves from them).
func (t *tapper) collectStored(st *Stored, d int) error {
	if t.sv != nil {
		if t.p.Saves.Given {
			return nil
		}
		return t.sv.fromStored(t.p, st)
	}
	if t.st == nil {
		return nil
	}
	n := t.l.n
	for i, j := range t.p.Taps.Traj {
		s := t.p.Taps.Step[i]
		if s == t.p.Mesh.Len[j] {
			t.st.t[i] = st.EndT[j]
			for c := 0; c < d; c++ {
				t.st.y[c][i] = st.EndY[c*n+j]
			}
			continue
		}
		row := st.States[s*(1+d)*n:]
		t.st.t[i] = row[j]
		for c := 0; c < d; c++ {
			t.st.y[c][i] = row[(1+c)*n+j]
		}
	}
	return nil
}

// inputs returns the tap program's inputs (with θ for dense taps).
func (t *tapper) inputs() [][]float64 {
	nt := len(t.st.t)
	in := t.st.inputs(nil, nt)
	if t.p.Taps.Theta != nil {
		in = append(in, t.p.Taps.Theta)
	}
	return in
}

// eval runs the tap steps; dst is [D][ntaps].
func (t *tapper) eval(e *tape.Exec, dst []float64) error {
	nt := len(t.st.t)
	in := t.inputs()
	if t.p.Taps.Theta != nil {
		fwd, _, err := t.p.Step.dense(t.set)
		if err != nil {
			return err
		}
		e = fwd
	}
	outs := make([][]float64, t.p.Step.D)
	for c := range outs {
		outs[c] = dst[c*nt : (c+1)*nt]
		copy(outs[c], t.st.y[c]) // taps of size 0 return the state itself
	}
	return t.st.mask.runLive(e, outs, in, t.st.h, nt)
}
