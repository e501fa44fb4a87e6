package fit

import (
	"errors"
	"fmt"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
)

// normOverflow bounds the gradient norms an engine's Eval reports that
// the host trusts. The engine forms each norm as √(Σ g²) (as
// optax.global_norm), whose sum of squares overflows to +Inf where the
// norm passes √MaxFloat64 ≈ 1.3e154, though every entry is finite; the
// host's (floats.Norm, scaled) does not, and optim.ClipNorm clips by it.
// At or above 2^511 (Σ g² ≥ 2^1022, within a factor of 4 of overflow,
// so no fit's own sum, a part of the whole, can have overflowed
// unnoticed) the host takes the step over.
const normOverflow = 0x1p511

// device is a run's fit held in the engine's memory.
type device struct {
	tr    ode.Trainer
	rule  optim.Ruled
	names []string // the optimiser's moments, in the rule's order
	t     int      // the optimiser's steps taken, counted here while the engine applies them
	kind  string   // the optimiser's State kind
	// best reports that the engine holds the best values (an Update kept
	// them); pending that the last step's values (x, not updated) improved
	// on them.
	best, pending bool
}

// trainer returns the fit held in the engine's memory, or nil with the
// reason in Result.DeviceNote where the run keeps it on the host.
func (r *runner) trainer() *device {
	f, set, res := r.f, r.set, r.res
	why := func(s string) *device { res.DeviceNote = s; return nil }
	rule, ok := r.opt.(optim.Ruled)
	switch {
	case set.OnHost:
		return why("Settings.OnHost")
	case !ok:
		return why(fmt.Sprintf("the optimiser %T has no optim.Rule", r.opt))
	case set.Remesh != 0 && set.Remesh != 1:
		return why("meshes kept over several steps (Settings.Remesh) are replayed on the host")
	case r.failed > 0:
		return why("the fit resumes with failed fits, which run on the host")
	}
	r0, err := rule.RuleAt(r.opt.Steps())
	if err != nil {
		return why(err.Error()) // Run reports it at the first step
	}
	st := r.opt.State()
	d := &device{rule: rule, names: r0.Moments(), t: r.opt.Steps(), kind: st.Kind}
	// New checked the loss's Data (CheckLoss), which the Fitter keeps as
	// given and the caller does not modify (Problem.Loss): the Trainer
	// does not read it again. Y0 and P are checked as the engine copies
	// them (ode.CheckingExecutor).
	spec := &ode.TrainSpec{Fits: f.b, P: f.vars.P, Y0: f.vars.Y0, Shared: f.vars.Shared, Moments: len(d.names), DataChecked: true}
	tr, err := f.sv.NewTrainer(f.trainProblem(r.x), f.loss, spec)
	if err != nil {
		return why(err.Error())
	}
	moments := make([][]float64, len(d.names))
	for q, name := range d.names {
		moments[q] = st.Moments[name] // nil before the first step: zeros
	}
	if err := tr.Load(r.x, moments); err != nil {
		tr.Release()
		return why(err.Error())
	}
	d.tr = tr
	return d
}

// runDevice runs steps with the fit in the engine's memory: each step
// evaluates the loss and gradient there, keeps the best values there and
// applies the optimiser's rule there; only the loss, the gradient norm and
// a few counts come back (and X, Grad and FitNorms for a Callback). It
// returns done = false where the host must take over at step r.k0 (a
// trajectory failed, a loss term or gradient is not finite, an update
// made values non-finite): the state is then back on the host, as the
// host loop would have left it.
func (r *runner) runDevice(d *device) (res *Result, done bool, err error) {
	f, set := r.f, r.set
	res = r.res
	for k := r.k0; k < set.Steps; k++ {
		if err := r.ctx.Err(); err != nil {
			return r.deviceFinish(d, Cancelled, err)
		}
		rule, err := d.rule.RuleAt(d.t)
		if err != nil {
			return r.deviceFinish(d, Failed, stepError(k, err))
		}
		r.st.Step = k
		ev, err := d.tr.Eval(r.ctx)
		if cerr := r.ctx.Err(); cerr != nil {
			return r.deviceFinish(d, Cancelled, cerr)
		}
		if err != nil {
			return r.deviceFinish(d, Failed, fmt.Errorf("fit: step %d: %w", k, err))
		}
		if huge := !(ev.GradNorm < normOverflow); ev.NonFinite > 0 || ev.Failed > 0 || huge {
			// The host takes over at step k: it checks step k−1's update
			// (guard) and computes step k through the solver, which
			// reports the failures, and the norms without overflow.
			if _, err := r.handBack(d, k); err != nil {
				return r.finishWith(Failed, err)
			}
			res.DeviceNote = fmt.Sprintf("the host took over at step %d: %d trajectories failed or gave non-finite values, %d values were made non-finite", k, ev.Failed, ev.NonFinite)
			if huge && ev.Failed == 0 && ev.NonFinite == 0 {
				res.DeviceNote = fmt.Sprintf("the host took over at step %d: the gradient's norm (%v) is too large for the engine's sums of squares", k, ev.GradNorm)
			}
			if ev.NonFinite > 0 {
				if !r.isolate {
					if err := r.guardOne(k - 1); err != nil {
						return r.finishWith(Failed, err)
					}
				} else {
					r.guard(k - 1)
				}
			}
			r.k0 = k
			return nil, false, nil
		}
		res.Records++
		res.GradTime += ev.Time
		res.DeviceSteps++
		st := &r.st
		st.GradNorm = ev.GradNorm
		improved := ev.Loss < res.BestLoss
		if status, end := r.account(k, ev.Loss, ev.GradNorm); end {
			d.pending = improved
			return r.deviceFinish(d, status, nil)
		}
		if set.ClipNorm > 0 {
			if err := d.tr.Clip(set.ClipNorm); err != nil {
				return r.deviceFinish(d, Failed, fmt.Errorf("fit: step %d: %w", k, err))
			}
		}
		st.Loss, st.Rate, st.Remeshed = ev.Loss, rule.Rate, true
		st.Elapsed, st.X, st.Grad, st.Gradient = time.Since(r.start), r.x, r.grad, nil
		if set.Callback != nil {
			if cap(st.FitNorms) < f.b {
				st.FitNorms = make([]float64, f.b)
			}
			st.FitNorms = st.FitNorms[:f.b]
			if err := d.tr.Read(&ode.TrainState{X: r.x, Grad: r.grad, FitNorms: st.FitNorms}); err != nil {
				return r.deviceFinish(d, Failed, err)
			}
			if cerr := set.Callback(st); cerr != nil {
				d.pending = improved
				if errors.Is(cerr, ErrStop) {
					return r.deviceFinish(d, Stopped, nil)
				}
				return r.deviceFinish(d, Failed, fmt.Errorf("fit: callback at step %d: %w", k, cerr))
			}
		}
		d.best = d.best || improved
		if err := d.tr.Update(&rule, improved); err != nil {
			return r.deviceFinish(d, Failed, fmt.Errorf("fit: step %d: %w", k, err))
		}
		d.t++
		res.Steps++
		r.pre.pending = false
		if set.Progress != nil {
			set.Progress.Report(res.Steps, ev.Loss)
		}
	}
	return r.deviceFinish(d, MaxSteps, nil)
}

// finishWith is finish, in runDevice's results.
func (r *runner) finishWith(status Status, e error) (*Result, bool, error) {
	res, err := r.finish(status, e)
	return res, true, err
}

// handBack copies the fit's state from the engine to the host: x, the
// values before the last update (for guard), the best values and the
// optimiser's state, and releases the engine's memory. It returns the
// entries of x that updates no Eval has checked made non-finite.
func (r *runner) handBack(d *device, k int) (int, error) {
	defer d.tr.Release()
	res := r.res
	st := &ode.TrainState{X: r.x, Moments: make([][]float64, len(d.names))}
	for q := range st.Moments {
		st.Moments[q] = make([]float64, len(r.x))
	}
	st.Prev = r.prev
	var best, cur []float64
	if d.best {
		best = make([]float64, len(r.x))
		st.Best = best
	}
	if err := d.tr.Read(st); err != nil {
		return 0, fmt.Errorf("fit: step %d: reading the fit back from the engine: %w", k, err)
	}
	if d.pending {
		// The last step evaluated improved on the best and was not
		// applied: its values (x) are the best, and the engine's best
		// those before it.
		cur = append([]float64(nil), r.x...)
		r.preBestX, res.BestX = best, cur
	} else if d.best {
		res.BestX = best
	}
	ms := map[string]optim.Floats{}
	for q, name := range d.names {
		ms[name] = st.Moments[q]
	}
	n := 0
	if d.t > 0 && len(d.names) > 0 {
		n = len(r.x)
	} else {
		ms = map[string]optim.Floats{}
	}
	if err := r.opt.SetState(&optim.State{Kind: d.kind, Step: d.t, N: n, Moments: ms}); err != nil {
		return 0, fmt.Errorf("fit: step %d: handing the optimiser's state back: %w", k, err)
	}
	return st.NonFinite, nil
}

// deviceFinish hands the fit back to the host, checks the last update as
// the host loop checks each (guard), and ends the run.
func (r *runner) deviceFinish(d *device, status Status, e error) (*Result, bool, error) {
	nf, err := r.handBack(d, r.st.Step)
	if err != nil {
		if e == nil {
			status, e = Failed, err
		}
		return r.finishWith(status, e)
	}
	if nf > 0 && r.isolate {
		r.guard(r.res.Steps - 1)
		if r.failed == r.f.b {
			return r.finishWith(Failed, r.allFailed())
		}
	} else if nf > 0 {
		if err := r.guardOne(r.res.Steps - 1); err != nil && e == nil {
			status, e = Failed, err
		}
	}
	return r.finishWith(status, e)
}

// trainProblem returns the ensemble a Trainer starts from at x: the
// caller's where the host has not taken its copy (the engine copies it
// into its memory, N rows of Y0 and P whether given as one row or N, and
// Trainer.Load writes x into every fitted entry of that copy), else the
// host's copy with x written in.
func (f *Fitter) trainProblem(x []float64) *ode.Problem {
	if f.owned {
		f.scatter(x)
		return &f.prob
	}
	return &f.in
}
