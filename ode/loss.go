package ode

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/gradsolve-go/gradsolve/internal/finite"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Loss is a scalar loss of the solutions: the sum (or mean) over the
// trajectories of a per-trajectory term, plus an optional term of the
// shared parameters alone:
//
//	L = Σ_i ℓ_i (or (1/N)·Σ_i ℓ_i with Mean) + Reg(s),
//	ℓ_i = F(y_i(t1), ys_i, data_i), or FP(y_i(t1), ys_i, data_i, p_i, s).
type Loss struct {
	// Name names the loss in programs and errors ("loss" if empty).
	Name string

	// F computes one trajectory's term from its final state y (len Dim),
	// its saved states ys (len(SaveAt)·Dim, save time k at
	// ys[k*Dim:(k+1)*Dim]) and its data row (len DataDim).
	F func(y, ys, data []tape.V) tape.V

	// FP, if not nil, is used instead of F: the term may also read the
	// trajectory's per-trajectory parameters p (len Params) and the shared
	// parameters s (len Shared), for penalties on them. Its gradient with
	// respect to p and s is added to the gradient of the solution.
	FP func(y, ys, data, p, s []tape.V) tape.V

	// Reg, if not nil, is a term of the shared parameters alone (len
	// Shared), added once to the loss and not averaged by Mean: weight
	// decay, a prior.
	Reg func(s []tape.V) tape.V

	// Data holds per-trajectory data (observations, targets), [N×DataDim]
	// row-major, or a single row used for every trajectory. DataDim is its
	// width; both may be zero.
	Data    []float64
	DataDim int

	// Mean averages the per-trajectory terms over the trajectories instead
	// of summing them.
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

// what names the loss in messages: "ode: loss NAME", or "ode: the loss"
// where it has no Name.
func (l *Loss) what() string { return "ode: " + lossLabel(l.name()) }

// lossLabel names a loss whose trace is called name in messages: "loss
// NAME", or "the loss" for a loss without a Name (traced as "loss").
func lossLabel(name string) string {
	if name == "loss" {
		return "the loss"
	}
	return "loss " + name
}

func (l *Loss) name() string {
	if l.Name == "" {
		return "loss"
	}
	return l.Name
}

// lossShape is the shape of a loss term's inputs.
type lossShape struct {
	d, k, data, p, s int // state, save times, data width, parameters, shared
}

// term traces the per-trajectory term: inputs y[d], ys[K·d], data[m],
// p[P] and s[S] (shared; read only by FP); one output ℓ. It traces into
// lt's storage and returns last where the trace is that program
// (tape.Tracer.Retrace: a loss passed again allocates nothing), else a
// program of its own.
func (l *Loss) term(sh lossShape, last *tape.Program, lt *lossTracer) (*tape.Program, error) {
	if l.F == nil && l.FP == nil {
		return nil, fmt.Errorf("%s has no F (or FP): set its per-trajectory term", l.what())
	}
	d, K := sh.d, sh.k
	p, err := lt.t.Retrace(l.name(), termInputs(sh), func(v []tape.V) []tape.V {
		y, ys, rest := v[:d], v[d:d+K*d], v[d+K*d:]
		data := rest[:sh.data]
		if l.FP != nil {
			lt.out[0] = l.FP(y, ys, data, rest[sh.data:sh.data+sh.p], rest[sh.data+sh.p:])
		} else {
			lt.out[0] = l.F(y, ys, data)
		}
		return lt.out[:]
	}, last)
	if err != nil {
		var re runtime.Error
		if errors.As(err, &re) {
			// An index out of range, most often: say how long each
			// argument is.
			ys := fmt.Sprintf("ys %d (len(SaveAt)·Dim)", K*d)
			if K == 0 {
				ys = "ys 0 (Problem.SaveAt is empty, so ys has no values)"
			}
			ps := ""
			if l.FP != nil {
				ps = fmt.Sprintf(", p %d (Params), s %d (Shared)", sh.p, sh.s)
			}
			return nil, fmt.Errorf("%s: %w (the term's arguments have lengths y %d (Dim), %s, data %d (DataDim)%s)", l.what(), err, d, ys, sh.data, ps)
		}
		return nil, fmt.Errorf("%s: %w", l.what(), err)
	}
	return p, nil
}

// lossTracer is a Solver's storage for the traces of its losses (term),
// taken by one call at a time (Solver.tracer).
type lossTracer struct {
	t   tape.Tracer
	out [1]tape.V // the term's output
}

// takeTracer returns the solver's lossTracer, or a new one where another
// call holds it; giveTracer gives it back.
func (sv *Solver) takeTracer() *lossTracer {
	if lt := sv.tracer.Swap(nil); lt != nil {
		return lt
	}
	return new(lossTracer)
}

func (sv *Solver) giveTracer(lt *lossTracer) { sv.tracer.Store(lt) }

// termInputs returns the inputs of a loss term of shape sh (see term):
// y[d], ys[K·d], data[m], p[P] and s[S]. They are the same for every
// trace of that shape: built once (their names are formatted strings, a
// trace's largest cost at small N), shared and read-only (tape.Trace
// copies them).
func termInputs(sh lossShape) []tape.Input {
	if in, ok := termInputsOf.Load(sh); ok {
		return in.([]tape.Input)
	}
	var in []tape.Input
	for c := 0; c < sh.d; c++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("y[%d]", c)})
	}
	for k := 0; k < sh.k; k++ {
		for c := 0; c < sh.d; c++ {
			in = append(in, tape.Input{Name: fmt.Sprintf("ys[%d,%d]", k, c)})
		}
	}
	for c := 0; c < sh.data; c++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("data[%d]", c)})
	}
	for c := 0; c < sh.p; c++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("p[%d]", c)})
	}
	for c := 0; c < sh.s; c++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("s[%d]", c), Shared: true})
	}
	termInputsOf.Store(sh, in)
	return in
}

// termInputsOf holds termInputs' lists: lossShape → []tape.Input.
var termInputsOf sync.Map

// termGrad returns the gradient program of the term p (see term):
// outputs ℓ and its derivatives with respect to y, ys, p and s, all per
// trajectory (engines sum the shared ones).
func (l *Loss) termGrad(p *tape.Program, sh lossShape) (*tape.Program, error) {
	wrt := make([]int, 0, len(p.Inputs))
	for i := range p.Inputs {
		if i < sh.d+sh.k*sh.d || i >= sh.d+sh.k*sh.d+sh.data {
			wrt = append(wrt, i)
		}
	}
	g, err := tape.Grad(p, wrt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.what(), err)
	}
	for k := range g.Outputs {
		g.Outputs[k].Sum = false
	}
	return g, nil
}

// reg returns the gradient program of Reg (inputs s[S]; outputs Reg(s)
// and ∂Reg/∂s), or nil if Reg is nil; its errors wrap ErrInput. Reg is traced on every call; its
// gradient program is cached in the solver by the trace's hash, as the
// per-trajectory term's is (see lossPlan).
func (sv *Solver) reg(l *Loss, ns int) (*tape.Program, error) {
	if l.Reg == nil {
		return nil, nil
	}
	in := make([]tape.Input, ns)
	for c := range in {
		in[c] = tape.Input{Name: fmt.Sprintf("s[%d]", c)}
	}
	p, err := tape.Trace(l.name()+".reg", in, func(v []tape.V) []tape.V { return []tape.V{l.Reg(v)} })
	if err != nil {
		return nil, badInput(fmt.Errorf("%s: Reg: %w", l.what(), err))
	}
	if ns == 0 {
		return p, nil
	}
	key := "reg." + p.Hash()
	if g, ok := sv.losses.Load(key); ok {
		return g.(*tape.Program), nil
	}
	g, err := tape.Grad(p, nil)
	if err != nil {
		return nil, badInput(err)
	}
	sv.losses.Store(key, g)
	return g, nil
}

// evalReg returns Reg(s), rp being l's Reg program (Solver.reg, traced
// where the call starts, so that a Reg that does not trace is refused
// before the work; nil: no Reg), and adds ∂Reg/∂s to gs (if gs is not
// nil); a Reg that is not finite at s, or (gs not nil) whose derivative
// is not, is an error naming it (a run-time failure, as a loss term's).
func evalReg(l *Loss, rp *tape.Program, s, gs []float64) (float64, error) {
	if rp == nil {
		return 0, nil
	}
	out := rp.Eval(nil, s)
	const hint = "check Reg near these shared parameters: log or square root of a negative number, division by zero, overflow"
	if r := out[0]; math.IsNaN(r) || math.IsInf(r, 0) {
		return 0, fmt.Errorf("%s: its Reg term is %v; %s", l.what(), r, hint)
	}
	if i := finite.First(out[1:]); gs != nil && i >= 0 {
		return 0, fmt.Errorf("%s: the derivative of its Reg term with respect to Shared[%d] is %v; %s", l.what(), i, out[1+i], hint)
	}
	if gs != nil {
		for c := range gs {
			gs[c] += out[1+c]
		}
	}
	return out[0], nil
}

// lossPlan returns the traced loss l for problem q, from the solver's
// cache when its term traces to a program seen before (the cache key is
// the program's hash and the data), so the gradient program and the
// engines' executors are built once per loss. A trace built as the last
// call's (tape.Program.SameAs) is matched without hashing it.
func (sv *Solver) lossPlan(l *Loss, q *problem) (*LossPlan, error) {
	return sv.planLoss(l, q, true, true)
}

// checkLossPlan is lossPlan without the Data expanded to N rows (its
// Data is nil): the checks, and the trace into the solver's cache.
func (sv *Solver) checkLossPlan(l *Loss, q *problem) (*LossPlan, error) {
	return sv.planLoss(l, q, true, false)
}

// lossPlanChecked is lossPlan for a Data that has passed checkData (see
// TrainSpec.DataChecked): its length is checked, its values not read.
func (sv *Solver) lossPlanChecked(l *Loss, q *problem) (*LossPlan, error) {
	return sv.planLoss(l, q, false, true)
}

// checkDataLen reports a DataDim that is negative or a Data whose length
// is neither DataDim (one row) nor n·DataDim (an error wrapping
// ErrInput).
func (l *Loss) checkDataLen(n int) error {
	switch {
	case l.DataDim < 0:
		return badInput(fmt.Errorf("%s: DataDim = %d is negative; it is the width of a row of Data (0 for a loss without data)", l.what(), l.DataDim))
	case len(l.Data) != l.DataDim && len(l.Data) != n*l.DataDim:
		return badInput(fmt.Errorf("%s: len(Data) = %d, want DataDim = %d or N*DataDim = %d", l.what(), len(l.Data), l.DataDim, n*l.DataDim))
	}
	return nil
}

// planLoss is lossPlan, reading Data for non-finite entries (checkData)
// if scanData and expanding it to N rows (LossPlan.Data) if expandData.
// Its errors, the loss's (its Data, its trace), wrap ErrInput.
func (sv *Solver) planLoss(l *Loss, q *problem, scanData, expandData bool) (*LossPlan, error) {
	n, d, K := q.n, q.Field.Dim, len(q.SaveAt)
	if err := l.checkDataLen(n); err != nil {
		return nil, err
	}
	sh := lossShape{d: d, k: K, data: l.DataDim, p: q.Field.Params, s: q.Field.Shared}
	// A loop passes the same loss call after call: a trace that is the
	// last call's program is that program (term), known without hashing
	// it.
	cached := sv.lastLoss.Load()
	var last *tape.Program
	if cached != nil && cached.DataDim == l.DataDim {
		last = cached.Term
	}
	lt := sv.takeTracer()
	term, err := l.term(sh, last, lt)
	sv.giveTracer(lt)
	if err != nil {
		return nil, badInput(err)
	}
	if scanData {
		if err := l.checkData(term, sh, n); err != nil {
			return nil, badInput(err)
		}
	}
	scale := 1.0
	if l.Mean {
		scale = 1 / float64(n)
	}
	if term != last {
		cached, err = sv.cachedLoss(l, term, sh)
		if err != nil {
			return nil, badInput(err)
		}
		sv.lastLoss.Store(cached)
	}
	var data []float64
	if expandData {
		data = sv.expanded.expand(l.Data, l.DataDim, n)
	}
	// The plan handed out last, where it is this one: plans are not
	// changed once handed out (runPlan copies one to scale it).
	if lp := sv.lastPlan.Load(); lp != nil && lp.Term == cached.Term && lp.Grad == cached.Grad &&
		lp.DataDim == cached.DataDim && lp.Hash == cached.Hash && lp.Scale == scale &&
		len(lp.Data) == len(data) && (len(data) == 0 || &lp.Data[0] == &data[0]) && (lp.Data == nil) == (data == nil) {
		return lp, nil
	}
	lp := *cached
	lp.Scale, lp.Data = scale, data
	sv.lastPlan.Store(&lp)
	return &lp, nil
}

// cachedLoss returns the loss plan of term (of l, shape sh) from the
// solver's cache by its hash, building its gradient program on first
// sight.
func (sv *Solver) cachedLoss(l *Loss, term *tape.Program, sh lossShape) (*LossPlan, error) {
	hash := term.Hash()
	if v, ok := sv.losses.Load(hash); ok {
		return v.(*LossPlan), nil
	}
	g, err := l.termGrad(term, sh)
	if err != nil {
		return nil, err
	}
	lp := &LossPlan{Term: term, Grad: g, DataDim: l.DataDim, Hash: hash}
	if v, loaded := sv.losses.LoadOrStore(hash, lp); loaded {
		return v.(*LossPlan), nil
	}
	return lp, nil
}

// checkData reports a Data entry that is not finite in a column the term
// (see term) reads: that trajectory's loss, and its gradient, would be
// NaN, reported after the solve as a failed trajectory.
func (l *Loss) checkData(term *tape.Program, sh lossShape, n int) error {
	if sh.data == 0 {
		return nil
	}
	i := finiteAll(l.Data)
	if i < 0 {
		return nil
	}
	read := inputsRead(term)[sh.d+sh.k*sh.d:][:sh.data]
	for ; i < len(l.Data); i++ {
		c := i % sh.data
		if !read[c] || !math.IsNaN(l.Data[i]) && !math.IsInf(l.Data[i], 0) {
			continue
		}
		row := fmt.Sprintf("trajectory %d", i/sh.data)
		if len(l.Data) == sh.data && n != 1 {
			row = "the row of every trajectory"
		}
		return fmt.Errorf("%s: Data[%d] = %v is not finite (%s, column %d of DataDim = %d), and the loss reads it, so the loss and its gradient would be NaN; "+
			"give missing observations a finite value and leave them out of the loss (say, a 0/1 mask column in Data multiplying their residuals)",
			l.what(), i, l.Data[i], row, c, sh.data)
	}
	return nil
}

// CheckLoss reports, without solving, the errors a Grad or Loss of p with
// loss would report before its first step: the problem's inputs (as
// Grad checks them) and the loss's shape and Data (len(Data), a
// non-finite entry the loss reads) and a Reg that does not trace. It traces the loss into the solver's
// cache, so the first Grad does not trace it again. It costs one read of
// Y0, P, T1s and Data, on all cores, plus the trace of a loss not seen
// before, and allocates nothing of size N: a single row of Y0, P or Data
// and the end time T1 are expanded to N rows by the first call that
// solves (and kept by the solver, as a Grad keeps them).
func (sv *Solver) CheckLoss(p *Problem, loss Loss) error {
	q, err := sv.validateProblem(p)
	if err != nil {
		return err
	}
	if _, err := sv.reg(&loss, q.Field.Shared); err != nil {
		return err
	}
	_, err = sv.checkLossPlan(&loss, q)
	return err
}

// Loss returns the value of the loss on the replay of mesh m (recording
// one first if m is nil), without its gradient, and the solution it was
// computed on. The mesh rules are those of Grad.
func (sv *Solver) Loss(p *Problem, loss Loss, m *Mesh) (float64, *Solution, error) {
	q, err := sv.checkProblem(p)
	if err != nil {
		return 0, nil, err
	}
	rp, err := sv.reg(&loss, q.Field.Shared)
	if err != nil {
		return 0, nil, err
	}
	if m != nil {
		if err := sv.checkMesh(q, m); err != nil {
			return 0, nil, err
		}
	}
	res, used, err := sv.run(context.Background(), OpLoss, q, &loss, m, nil)
	if err != nil {
		return 0, nil, err
	}
	if m == nil {
		m = used.mesh(q, res, nil)
	}
	if err := used.failure(q, res, m.Status, used.plan.Method); err != nil {
		return 0, nil, err
	}
	v := res.Loss
	r, err := evalReg(&loss, rp, q.Shared, nil)
	if err != nil {
		return 0, nil, err
	}
	sol := used.solution(q, res, m.Status, nil)
	sol.T = used.solutionTimes(nil, q, res)
	sol.Stats = m.Stats
	sol.meshArrays = true
	return v + r, sol, nil
}
