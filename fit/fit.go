package fit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/floats"

	"github.com/gradsolve-go/gradsolve/internal/finite"
	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
)

// Vars selects the parameters a fit adjusts; the others keep the values
// they have in Problem.ODE.
type Vars struct {
	// P lists the per-trajectory parameter columns fitted (indices in
	// [0, Field.Params)). Each fit has one value per listed column, shared
	// by its trajectories.
	P []int
	// Y0 lists the state components whose initial values are fitted, one
	// value per trajectory and listed component.
	Y0 []int
	// Shared fits all the shared parameters (Field.Shared of them). It
	// needs Fits = 1: shared parameters belong to the whole ensemble.
	Shared bool
}

// Problem is a fitting problem: an ensemble, a loss and what to fit.
type Problem struct {
	// ODE is the ensemble. Its Y0, P and Shared are the starting values of
	// the fitted parameters and the fixed values of the others; they are
	// not modified. The Fitter keeps Y0 and P as given (New copies
	// nothing of size N): do not modify them while it is in use. Its
	// evaluations on the host work on a copy that it takes at the first of
	// them; a fit held in the engine's memory (see Settings.OnHost)
	// needs none.
	ODE ode.Problem
	// Loss is minimised; its Data (observations) and Mean are used as
	// given. New checks Data (ode.Solver.CheckLoss) and the Fitter keeps
	// it without a copy: do not modify it while the Fitter is in use. A
	// fit held in the engine's memory does not check it again (each
	// evaluation on the host does); a non-finite entry the loss reads,
	// put there since New, shows as a failed trajectory at its first
	// step, which the host then computes and reports.
	Loss ode.Loss
	// Vars selects the fitted parameters; at least one must be selected.
	Vars Vars
	// Fits is the number of independent fits B the N trajectories are
	// split into (N/B consecutive trajectories each); 0 means 1. N must be
	// a multiple of B.
	Fits int
}

// Fitter evaluates the loss and its gradient as functions of the fitted
// values x, and runs fits. It owns one ode.Solver, built by New, and is
// not safe for concurrent use.
type Fitter struct {
	sv *ode.Solver
	// in is the caller's ensemble (N set, Shared copied; Y0 and P as
	// given, one row or N, read only); prob is the host's copy, with Y0
	// and P expanded to N rows, that scatter writes x into: taken from in
	// by own, at the first host evaluation (the zero Problem before).
	in, prob ode.Problem
	owned    bool // prob is taken
	loss     ode.Loss
	vars     Vars
	n, b     int // trajectories, fits
	per      int // trajectories per fit
	lay      layout
	set      *nn.Set   // built by Set on first use
	x0       []float64 // built by Init on first use
	g        *ode.Gradient
	id       string // ID, built on first use
}

// layout is the arithmetic of x: fit b's block starts at b·stride and
// holds its np P values, then its ny fitted initial states; the shared
// parameters follow the B blocks.
type layout struct {
	fits, np, ny, stride, length int
}

// pView returns fit b's P values in x (nil if no column is fitted).
func (l layout) pView(x []float64, b int) []float64 {
	if l.np == 0 {
		return nil
	}
	o := b * l.stride
	return x[o : o+l.np : o+l.np]
}

// y0View returns fit b's fitted initial states in x (nil if none).
func (l layout) y0View(x []float64, b int) []float64 {
	if l.ny == 0 {
		return nil
	}
	o := b*l.stride + l.np
	return x[o : o+l.ny : o+l.ny]
}

// New checks the fitting problem and builds its solver with the solver
// settings s (nil means defaults); it traces the field once. It returns
// an error if nothing is selected, an index is out of range, N is not a
// multiple of Fits, Shared is selected with several fits, a starting
// value of a fitted parameter is not finite, the problem or the loss fails
// ode.Solver.CheckLoss (a non-finite input, Data of the wrong length or
// with a non-finite entry the loss reads), or the solver cannot be built.
// Besides building the solver, it costs one read of Y0, P and Data on all
// cores (CheckLoss) and allocates nothing of size N or Fits: the host's
// copy of the ensemble and the starting values are built at their first
// use (see Problem.ODE and Init).
func New(p Problem, s *ode.Settings) (*Fitter, error) {
	sv, err := ode.NewSolver(p.ODE.Field, s)
	if err != nil {
		return nil, err
	}
	return NewWithSolver(sv, p)
}

// NewWithSolver is New with a solver built by the caller (for the same
// field shape), so several fits can share one solver's programs. Its
// errors are all about p: they wrap ode.ErrInput.
func NewWithSolver(sv *ode.Solver, p Problem) (*Fitter, error) {
	fr, err := newWithSolver(sv, p)
	return fr, badInput(err)
}

// badInput returns err wrapping ode.ErrInput too, with its message (nil
// for nil): the errors about the caller's problem, settings, checkpoint
// and optimiser's hyperparameters.
func badInput(err error) error { return ode.InputError(err) }

func newWithSolver(sv *ode.Solver, p Problem) (*Fitter, error) {
	f := p.ODE.Field
	d, np := f.Dim, f.Params
	n := p.ODE.N
	if n == 0 && d > 0 {
		n = len(p.ODE.Y0) / d
	}
	if n < 1 {
		return nil, fmt.Errorf("fit: the ensemble has no trajectories (N = %d, len(Y0) = %d)", p.ODE.N, len(p.ODE.Y0))
	}
	b := p.Fits
	if b == 0 {
		b = 1
	}
	switch {
	case b < 0 || n%b != 0:
		return nil, fmt.Errorf("fit: N = %d trajectories cannot be split into Fits = %d equal fits", n, p.Fits)
	case len(p.Vars.P) == 0 && len(p.Vars.Y0) == 0 && !p.Vars.Shared:
		return nil, errors.New("fit: Vars selects nothing to fit")
	case p.Vars.Shared && b > 1:
		return nil, fmt.Errorf("fit: shared parameters belong to the whole ensemble; with Fits = %d fit only P and Y0", b)
	case p.Vars.Shared && f.Shared == 0:
		return nil, fmt.Errorf("fit: Vars.Shared is set but field %s has no shared parameters", f.Name)
	}
	if err := checkIndices("P", p.Vars.P, np); err != nil {
		return nil, err
	}
	if err := checkIndices("Y0", p.Vars.Y0, d); err != nil {
		return nil, err
	}
	q := p.ODE
	q.N = n
	if err := checkRows("Y0", q.Y0, d, n); err != nil {
		return nil, err
	}
	if err := checkRows("P", q.P, np, n); err != nil {
		return nil, err
	}
	q.Shared = slices.Clone(p.ODE.Shared)
	if p.Vars.Shared && len(q.Shared) != f.Shared {
		return nil, fmt.Errorf("fit: len(Shared) = %d, want the field's %d", len(q.Shared), f.Shared)
	}
	fr := &Fitter{sv: sv, in: q, loss: p.Loss, vars: Vars{P: slices.Clone(p.Vars.P), Y0: slices.Clone(p.Vars.Y0), Shared: p.Vars.Shared},
		n: n, b: b, per: n / b}
	fr.lay = layout{fits: b, np: len(fr.vars.P), ny: fr.per * len(fr.vars.Y0)}
	fr.lay.stride = fr.lay.np + fr.lay.ny
	fr.lay.length = b * fr.lay.stride
	if fr.vars.Shared {
		fr.lay.length += f.Shared
	}
	if err := sv.CheckLoss(&fr.in, fr.loss); err != nil {
		// The starting values are entries of Y0, P and Shared, which
		// CheckLoss finds finite when it passes: only now can one be
		// non-finite, and that error comes first.
		x0 := fr.gather(make([]float64, fr.lay.length))
		if i := finite.First(x0); i >= 0 {
			return nil, fmt.Errorf("fit: the starting value x[%d] (%s) is %v; start from finite values", i, fr.blockOf(i), x0[i])
		}
		return nil, err
	}
	return fr, nil
}

// blockOf names the block of x[i], as "fit3.p".
func (f *Fitter) blockOf(i int) string {
	l := f.lay
	if i >= l.fits*l.stride {
		return "shared"
	}
	b, o := i/l.stride, i%l.stride
	if o < l.np {
		return fmt.Sprintf("fit%d.p", b)
	}
	return fmt.Sprintf("fit%d.y0", b)
}

// checkIndices reports an index outside [0, n) or listed twice; it costs
// O(len(idx) + n).
func checkIndices(what string, idx []int, n int) error {
	seen := make([]bool, n)
	for _, i := range idx {
		if i < 0 || i >= n {
			return fmt.Errorf("fit: Vars.%s has index %d, outside [0, %d)", what, i, n)
		}
		if seen[i] {
			return fmt.Errorf("fit: Vars.%s lists index %d twice", what, i)
		}
		seen[i] = true
	}
	return nil
}

// checkRows reports an x that is neither one row of width w nor n rows.
func checkRows(what string, x []float64, w, n int) error {
	if len(x) != n*w && len(x) != w {
		return fmt.Errorf("fit: len(%s) = %d, want %d or %d·%d", what, len(x), w, n, w)
	}
	return nil
}

// rows returns x (one row of width w, or n rows) expanded to n rows (a
// copy).
func rows(x []float64, w, n int) []float64 {
	if len(x) == n*w {
		return slices.Clone(x)
	}
	out := make([]float64, 0, n*w)
	for range n {
		out = append(out, x...)
	}
	return out
}

// own takes the host's copy of the ensemble (Fitter.prob) from the
// caller's, for scatter to write into.
func (f *Fitter) own() {
	if f.owned {
		return
	}
	d, np := f.in.Field.Dim, f.in.Field.Params
	f.prob = f.in
	f.prob.Y0, f.prob.P = rows(f.in.Y0, d, f.n), rows(f.in.P, np, f.n)
	f.prob.Shared = slices.Clone(f.in.Shared)
	f.owned = true
}

// ID returns the identity of the fit that Checkpoint.Fit records: a
// SHA-256, in hex, of the field's traced program (tape.Program.Hash: its
// operations and constants), the numbers of trajectories and fits and the
// fitted variables. Two Fitters of the same field, ensemble layout and
// Vars have the same ID whatever their starting values, data, loss,
// method or tolerances. It hashes the program once (microseconds for a
// small field).
func (f *Fitter) ID() string {
	if f.id == "" {
		h := sha256.New()
		fmt.Fprintf(h, "field %s\nN %d\nfits %d\nP %v\nY0 %v\nshared %v\n",
			f.sv.FieldProgram().Hash(), f.n, f.b, f.vars.P, f.vars.Y0, f.vars.Shared)
		f.id = hex.EncodeToString(h.Sum(nil))
	}
	return f.id
}

// Solver returns the fitter's solver.
func (f *Fitter) Solver() *ode.Solver { return f.sv }

// Set returns the names and shapes of the blocks of x (see the package
// doc). It is built on the first call: New does not need it, and building
// B named blocks costs nn.Set's name checks (at large B, prefer the views
// of Result.FitP and FitY0, which cost O(1)).
func (f *Fitter) Set() *nn.Set {
	if f.set == nil {
		s := &nn.Set{}
		for k := 0; k < f.b; k++ {
			if f.lay.np > 0 {
				s.Add(fmt.Sprintf("fit%d.p", k), f.lay.np)
			}
			if f.lay.ny > 0 {
				s.Add(fmt.Sprintf("fit%d.y0", k), f.per, len(f.vars.Y0))
			}
		}
		if f.vars.Shared {
			s.Add("shared", f.in.Field.Shared)
		}
		f.set = s
	}
	return f.set
}

// Len returns the length of x.
func (f *Fitter) Len() int { return f.lay.length }

// Fits returns the number of independent fits.
func (f *Fitter) Fits() int { return f.b }

// Init returns the starting values x0 from Problem.ODE in dst (len Len();
// nil allocates). Fit b's value of a P column is taken from its first
// trajectory. The first call gathers them (O(Len()), on all cores).
func (f *Fitter) Init(dst []float64) []float64 {
	if f.x0 == nil {
		f.x0 = f.gather(make([]float64, f.Len()))
	}
	if dst == nil {
		dst = make([]float64, f.Len())
	}
	copy(dst, f.x0)
	return dst
}

// fitBlocks calls fn(lo, hi) on blocks of consecutive fits [lo, hi) that
// cover [0, Fits), on all cores where the fits' values are more than
// par.Block (and on the calling goroutine alone otherwise). Each fit is
// the work of one call: fn's results do not depend on the blocks.
func (f *Fitter) fitBlocks(fn func(lo, hi int)) {
	per := max(1, par.Block/max(1, f.lay.stride+len(f.vars.P)*f.per))
	nt := (f.b + per - 1) / per
	if nt <= 1 {
		fn(0, f.b)
		return
	}
	par.Run(nt, 0, func(_, t int) { fn(t*per, min(f.b, (t+1)*per)) })
}

// gather reads the fitted values from the caller's ensemble into x.
func (f *Fitter) gather(x []float64) []float64 {
	d, np := f.in.Field.Dim, f.in.Field.Params
	// Row strides: 0 for one row shared by all trajectories.
	dy, dp := d, np
	if len(f.in.Y0) != f.n*d {
		dy = 0
	}
	if len(f.in.P) != f.n*np {
		dp = 0
	}
	f.fitBlocks(func(lo, hi int) {
		for k := lo; k < hi; k++ {
			first, o := k*f.per, k*f.lay.stride
			for _, c := range f.vars.P {
				x[o] = f.in.P[first*dp+c]
				o++
			}
			if len(f.vars.Y0) > 0 {
				for i := first; i < first+f.per; i++ {
					for _, c := range f.vars.Y0 {
						x[o] = f.in.Y0[i*dy+c]
						o++
					}
				}
			}
		}
	})
	if f.vars.Shared {
		copy(x[f.b*f.lay.stride:], f.in.Shared)
	}
	return x
}

// scatter writes x into the host's copy of the ensemble, taking it first
// (own) if it has not been taken.
func (f *Fitter) scatter(x []float64) {
	f.own()
	f.scatterInto(&f.prob, x)
}

// scatterInto writes x into q, a copy of the ensemble with N rows.
func (f *Fitter) scatterInto(q *ode.Problem, x []float64) {
	if len(x) != f.Len() {
		panic(fmt.Sprintf("fit: len(x) = %d, want Len() = %d", len(x), f.Len()))
	}
	d, np := q.Field.Dim, q.Field.Params
	f.fitBlocks(func(lo, hi int) {
		for k := lo; k < hi; k++ {
			first, o := k*f.per, k*f.lay.stride
			for j, c := range f.vars.P {
				for i := first; i < first+f.per; i++ {
					q.P[i*np+c] = x[o+j]
				}
			}
			o += len(f.vars.P)
			if len(f.vars.Y0) > 0 {
				for i := first; i < first+f.per; i++ {
					for _, c := range f.vars.Y0 {
						q.Y0[i*d+c] = x[o]
						o++
					}
				}
			}
		}
	})
	if f.vars.Shared {
		copy(q.Shared, x[f.b*f.lay.stride:])
	}
}

// reduce sums the solver's gradient into the layout of x: dst[fit b's P
// column j] = Σ over b's trajectories of ∂L/∂P[i, c_j].
func (f *Fitter) reduce(dst []float64, g *ode.Gradient) {
	d, np := f.in.Field.Dim, f.in.Field.Params
	f.fitBlocks(func(lo, hi int) {
		for k := lo; k < hi; k++ {
			first, o := k*f.per, k*f.lay.stride
			for _, c := range f.vars.P {
				s := 0.0
				for i := first; i < first+f.per; i++ {
					s += g.P[i*np+c]
				}
				dst[o] = s
				o++
			}
			if len(f.vars.Y0) > 0 {
				for i := first; i < first+f.per; i++ {
					for _, c := range f.vars.Y0 {
						dst[o] = g.Y0[i*d+c]
						o++
					}
				}
			}
		}
	})
	if f.vars.Shared {
		copy(dst[f.b*f.lay.stride:], g.Shared)
	}
}

// Problem returns a copy of the ensemble with x written into it: the
// fitted columns of P, components of Y0 and the shared parameters. Y0 and
// P have N rows; every array is the copy's own (T1s and SaveAt too). It
// panics if len(x) != Len().
func (f *Fitter) Problem(x []float64) ode.Problem {
	var p ode.Problem
	if f.owned {
		f.scatter(x)
		p = f.prob
		p.Y0, p.P, p.Shared = slices.Clone(p.Y0), slices.Clone(p.P), slices.Clone(p.Shared)
	} else {
		// One copy, from the caller's ensemble, without taking the host's.
		d, np := f.in.Field.Dim, f.in.Field.Params
		p = f.in
		p.Y0, p.P, p.Shared = rows(f.in.Y0, d, f.n), rows(f.in.P, np, f.n), slices.Clone(f.in.Shared)
		f.scatterInto(&p, x)
	}
	p.T1s, p.SaveAt = slices.Clone(p.T1s), slices.Clone(p.SaveAt)
	return p
}

// Grad returns the loss at x and its gradient with respect to x in dst
// (len Len(); nil allocates), replaying mesh m, or recording one first if
// m is nil. It also returns the solver's gradient, whose Mesh field is the
// mesh replayed and whose Solution holds the states; it is reused by the
// next call. It panics if len(x) != Len().
func (f *Fitter) Grad(dst, x []float64, m *ode.Mesh) (float64, *ode.Gradient, []float64, error) {
	return f.GradContext(context.Background(), dst, x, m)
}

// GradContext is Grad with a context: cancelling it stops the solver's
// work and returns ctx.Err().
func (f *Fitter) GradContext(ctx context.Context, dst, x []float64, m *ode.Mesh) (float64, *ode.Gradient, []float64, error) {
	f.scatter(x)
	g, err := f.sv.GradContext(ctx, f.g, &f.prob, f.loss, m)
	if err != nil {
		return math.NaN(), g, dst, err
	}
	f.g = g
	if dst == nil {
		dst = make([]float64, f.Len())
	}
	f.reduce(dst, g)
	return g.Loss, g, dst, nil
}

// Loss returns the loss at x on mesh m (recorded first if m is nil),
// without its gradient, and the solution. It panics if len(x) != Len().
func (f *Fitter) Loss(x []float64, m *ode.Mesh) (float64, *ode.Solution, error) {
	f.scatter(x)
	return f.sv.Loss(&f.prob, f.loss, m)
}

// Fit builds a Fitter for p with solver settings s and runs it with set.
// See Fitter.Run.
func Fit(ctx context.Context, p Problem, s *ode.Settings, set *Settings) (*Result, error) {
	f, err := New(p, s)
	if err != nil {
		return nil, err
	}
	return f.Run(ctx, set)
}

// blockNorms returns the Euclidean norm of each fit's part of g and of g
// as a whole.
func (f *Fitter) blockNorms(dst, g []float64) ([]float64, float64) {
	dst = dst[:0]
	if f.b == 1 {
		n := floats.Norm(g, 2)
		return append(dst, n), n
	}
	per := f.lay.stride
	for k := 0; k < f.b; k++ {
		dst = append(dst, floats.Norm(g[k*per:(k+1)*per], 2))
	}
	return dst, floats.Norm(g, 2)
}

// clip clips each fit's part of g to norm at most c.
func (f *Fitter) clip(g []float64, c float64) {
	if f.b == 1 {
		optim.ClipNorm(g, c)
		return
	}
	per := f.lay.stride
	for k := 0; k < f.b; k++ {
		optim.ClipNorm(g[k*per:(k+1)*per], c)
	}
}
