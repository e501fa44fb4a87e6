package kernelgen

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
	"github.com/gradsolve-go/gradsolve/tape/lossform"
)

// adapters writes the adapter functions of a kernel: each calls the
// function of one program with scalar arguments taken from the kernel's
// arrays, and stores its outputs.
type adapters struct {
	src *Source
	sb  strings.Builder
	err error
	// noAcc writes no accumulating functions (the wide layout's loss,
	// which one lane calls).
	noAcc bool
}

// adapter emits
//
//	GS_DEVICE ret name(params) { const F_out r = F(sh, args...); outs[m] = r.v[m]; ... }
//
// for program p. args are the C expressions of p's non-shared inputs, in
// order; outs those receiving its outputs (nil: the function returns r,
// and ret names the typedef of F_out it declares; {"return"}: it returns
// r.v[0]).
func (g *adapters) adapter(name string, p *tape.Program, ret, params string, args, outs []string) {
	if g.err != nil {
		return
	}
	f, err := g.src.Func(p)
	if err != nil {
		g.err = fmt.Errorf("cuda: program %s: %w", p.Name, err)
		return
	}
	g.adapterOf(name, f, "sh", p, ret, params, args, outs)
}

// accAdapter is adapter for the accumulating function f of p (AccFunc),
// whose adapter takes the accumulator and the lane's flag after sh.
func (g *adapters) accAdapter(name, f string, p *tape.Program, ret, params string, args []string) {
	if g.err != nil {
		return
	}
	g.adapterOf(name, f, "sh, acc, on", p, ret, params, args, nil)
}

// adapterOf writes the adapter of function f of p, called with the
// leading arguments lead.
func (g *adapters) adapterOf(name, f, lead string, p *tape.Program, ret, params string, args, outs []string) {
	nin := 0
	for _, in := range p.Inputs {
		if !in.Shared {
			nin++
		}
	}
	if nin != len(args) {
		g.err = fmt.Errorf("cuda: program %s has %d per-trajectory inputs, the kernel passes %d", p.Name, nin, len(args))
		return
	}
	switch {
	case outs == nil:
		fmt.Fprintf(&g.sb, "typedef %s %s;\n", outType(f), ret)
	case len(outs) == 1 && outs[0] == "return":
		if len(p.Outputs) != 1 {
			g.err = fmt.Errorf("cuda: program %s has %d outputs, want 1", p.Name, len(p.Outputs))
			return
		}
	case len(outs) != len(p.Outputs):
		g.err = fmt.Errorf("cuda: program %s has %d outputs, the kernel takes %d", p.Name, len(p.Outputs), len(outs))
		return
	}
	fmt.Fprintf(&g.sb, "GS_DEVICE %s %s(%s) {\n", ret, name, params)
	call := fmt.Sprintf("%s(%s)", f, strings.Join(append([]string{lead}, args...), ", "))
	switch {
	case outs == nil:
		fmt.Fprintf(&g.sb, "  return %s;\n", call)
	case outs[0] == "return":
		fmt.Fprintf(&g.sb, "  return %s.v[0];\n", call)
	default:
		fmt.Fprintf(&g.sb, "  const %s r = %s;\n", outType(f), call)
		for m := 0; m < len(outs); m++ {
			if n, name, k0 := g.storeRun(outs[m:]); n > 0 {
				fmt.Fprintf(&g.sb, "%s %s[%s] = r.v[%s];\n", loopHead(n), name, affine(k0, 1), affine(m, 1))
				m += n - 1
				continue
			}
			fmt.Fprintf(&g.sb, "  %s = r.v[%d];\n", outs[m], m)
		}
	}
	g.sb.WriteString("}\n")
}

// accFunc emits p as an accumulating function (AccFunc) of its outputs
// first…first+n-1, if it has their form and n > 0.
func (g *adapters) accFunc(p *tape.Program, first, n int) (string, bool) {
	if g.err != nil || n == 0 || noAccumulate || g.noAcc {
		return "", false
	}
	f, ok, err := g.src.AccFunc(p, first, n)
	if err != nil {
		g.err = err
	}
	return f, ok && err == nil
}

// noAccumulate disables accumulating functions (tests compare both forms).
var noAccumulate bool

// kernelAdapters writes the adapters kernel v calls (kernel.cuh lists
// them) for the programs of sp's plan and loss lp, and records in k which
// of them accumulate their shared gradients.
func (g *adapters) kernelAdapters(sp *StepPrograms, v Config, lp *ode.LossPlan, k *kernelPlan) error {
	pl := sp.plan
	d := pl.Dim
	y, p := idx("y", d), idx("p", pl.Params)
	// Only the adapters the kernel calls are written (kernel.cuh lists
	// who calls which): NVRTC's time grows with the source, called or not.
	if v.Adaptive {
		// Init: t0, t1, y, p → h, last, f0.
		g.adapter("gs_a_init", pl.Init, "void",
			"const gs_real* sh, gs_real t0, gs_real t1, const gs_real* y, const gs_real* p, gs_real* h, gs_real* last, gs_real* f0",
			cat([]string{"t0", "t1"}, y, p), cat([]string{"*h", "*last"}, idx("f0", d)))
		// Trial: t, h, y, p[, k1] → y⁺, err[, k_s], hρ.
		tin, tout := cat([]string{"t", "h"}, y, p), cat(idx("yn", d), idx("e", d))
		if pl.FSAL {
			tin, tout = append(tin, idx("k1", d)...), append(tout, idx("ks", d)...)
		}
		if k.ShareFwd {
			// TrialDense: the same, then w (the coefficients of the step's
			// continuous extension).
			g.adapter("gs_a_trial", pl.TrialDense, "void",
				"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* k1, gs_real* yn, gs_real* e, gs_real* ks, gs_real* hrho, gs_real* w",
				tin, cat(tout, []string{"*hrho"}, idx("w", pl.DenseTerms*d)))
		} else {
			g.adapter("gs_a_trial", pl.Trial, "void",
				"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* k1, gs_real* yn, gs_real* e, gs_real* ks, gs_real* hrho",
				tin, append(tout, "*hrho"))
		}
		if k.SwitchTrial {
			// TrialDense, on the trials with a save time inside the step.
			g.adapter("gs_a_trial_dense", pl.TrialDense, "void",
				"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* k1, gs_real* yn, gs_real* e, gs_real* ks, gs_real* hrho, gs_real* w",
				tin, cat(tout, []string{"*hrho"}, idx("w", pl.DenseTerms*d)))
		}
		if k.ProbeOn {
			// Probe: t, h, y, p, v, rprev, u, accept → v', rprev', u', stiff.
			g.adapter("gs_a_probe", pl.Probe, "void",
				"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* v, gs_real rprev, gs_real u, gs_real accept, gs_real* v2, gs_real* rprev2, gs_real* u2, gs_real* pst",
				cat([]string{"t", "h"}, y, p, idx("v", d), []string{"rprev", "u", "accept"}),
				cat(idx("v2", d), []string{"*rprev2", "*u2", "*pst"}))
		}
		// Control: state, t1, y, y⁺, err, hρ → state', accept, status.
		g.adapter("gs_a_control", pl.Control, "void",
			"const gs_real* sh, const gs_real* st, gs_real t1, const gs_real* y, const gs_real* yn, const gs_real* e, gs_real hrho, gs_real* st2, gs_real* accept, gs_real* status",
			cat(idx("st", ode.NumState), []string{"t1"}, y, idx("yn", d), idx("e", d), []string{"hrho"}),
			cat(idx("st2", ode.NumState), []string{"*accept", "*status"}))
	}
	if !v.Adaptive && !k.ShareFwd || v.Saves > 0 && !k.Dense || v.Events {
		// Replay: t, h, y, p → y⁺ (a replay's steps; an adaptive kernel's
		// save times without the continuous extension, ode.SaveStep; the
		// event step's polish, events.cuh).
		g.adapter("gs_a_replay", pl.Replay, "void",
			"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, gs_real* yn",
			cat([]string{"t", "h"}, y, p), idx("yn", d))
	}
	if k.Dense && !(v.Adaptive && (k.ShareFwd || k.SwitchTrial)) {
		// DenseStep: t, h, y, p → y⁺, w (the coefficients of the step's
		// continuous extension).
		g.adapter("gs_a_dense_step", pl.DenseStep, "void",
			"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, gs_real* yn, gs_real* w",
			cat([]string{"t", "h"}, y, p), cat(idx("yn", d), idx("w", pl.DenseTerms*d)))
	}
	if v.Events {
		if err := g.eventAdapters(pl, v); err != nil {
			return err
		}
	} else if v.Grad {
		if err := g.reverseAdapters(sp, v, k); err != nil {
			return err
		}
	}
	if v.Loss || v.Grad {
		if lp == nil {
			return fmt.Errorf("cuda: a loss kernel needs a loss")
		}
		g.lossAdapter(pl, v, lp, k)
	}
	return g.err
}

// reverseAdapters writes the adapters of the reverse steps of a gradient
// kernel v: gs_a_rev (Plan.Reverse, returning gs_rev_out) and, where save
// times read the steps' extension (k.Dense), gs_a_drev
// (Plan.DenseStepReverse: t, h, y, p, λ, w̄, gp; returning gs_drev_out,
// whose entries are gs_rev_out's). The structs' last ns entries, the
// shared-gradient contributions, are reduced in place; or, where both
// steps' forms allow, the field's VJP adds them to the accumulator as it
// computes them (AccFunc; k.RevAcc), and the structs hold λ' and gp' only.
func (g *adapters) reverseAdapters(sp *StepPrograms, v Config, k *kernelPlan) error {
	pl := sp.plan
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	var drev *tape.Program
	if k.Dense {
		var err error
		if drev, err = pl.DenseStepReverse(); err != nil {
			return err
		}
	}
	y, p, lam, gp := idx("y", d), idx("p", np), idx("lam", d), idx("gp", np)
	revArgs := cat([]string{"t", "h"}, y, p, lam, gp)
	denseArgs := cat([]string{"t", "h"}, y, p, lam, idx("wb", pl.DenseTerms*d), gp)
	const (
		revParams   = "gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* lam, const gs_real* gp"
		denseParams = "gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* lam, const gs_real* wb, const gs_real* gp"
	)
	k.ShareRev = !v.SeparateSteps && shareReverse(pl, sp.Rev, drev)
	// The two steps take turns in one loop: both accumulate, or neither.
	k.RevAcc = (k.ShareRev || accumulates(sp.Rev, d+np, ns)) && (drev == nil || accumulates(drev, d+np, ns))
	if !k.RevAcc && v.TileMode {
		// gs_backward calls a step that returns its shared gradient
		// only for the trajectories on: not in lockstep.
		return fmt.Errorf("cuda: tile mode: the reverse step of %s does not accumulate its shared gradient", pl.Method)
	}
	rev := func(name, ret string, prog *tape.Program, params string, args []string) {
		if !k.RevAcc {
			g.adapter(name, prog, ret, "const gs_real* sh, "+params, args, nil)
			return
		}
		if f, ok := g.accFunc(prog, d+np, ns); ok {
			g.accAdapter(name, f, prog, ret, "const gs_real* sh, gs_real* acc, bool on, "+params, args)
		} else if g.err == nil {
			g.err = fmt.Errorf("cuda: program %s: no accumulating function", prog.Name)
		}
	}
	if !k.ShareRev {
		rev("gs_a_rev", "gs_rev_out", sp.Rev, revParams, revArgs)
	}
	if drev != nil {
		rev("gs_a_drev", "gs_drev_out", drev, denseParams, denseArgs)
	}
	return g.err
}

// eventAdapters writes the adapters of the event programs of plan pl that
// kernel v calls (events.cuh): gs_a_trial_dense (TrialDense, in place of
// Trial), gs_a_cond (every condition), gs_a_field, and per event e
// gs_a_jump<e> (its Apply, where it has one) and gs_a_condgrad<e> (the
// condition with its gradient: g, g_t, g_y, g_p, g_s); for a gradient
// gs_a_steprev (Replay's reverse with time: t̄, h̄, ȳ, p̄, s̄),
// gs_a_jumprev<e> (t̄, λ⁻, p̄, s̄) and, with save times, gs_a_saverev
// (Dense's reverse: t̄, h̄, ȳ, p̄, s̄, θ̄). The reverse programs return their
// shared-gradient entries per trajectory (the sweep sums them).
func (g *adapters) eventAdapters(pl *ode.Plan, v Config) error {
	ep := pl.Events
	d, np, ns, ne := pl.Dim, pl.Params, pl.Shared, len(ep.Names)
	y, p := idx("y", d), idx("p", np)
	ty := cat([]string{"t"}, y, p)
	const typ = "const gs_real* sh, gs_real t, const gs_real* y, const gs_real* p"
	// TrialDense: Trial's inputs; Trial's outputs, then w.
	tin, tout := cat([]string{"t", "h"}, y, p), cat(idx("yn", d), idx("e", d))
	if pl.FSAL {
		tin, tout = append(tin, idx("k1", d)...), append(tout, idx("ks", d)...)
	}
	tout = append(append(tout, "*hrho"), idx("w", pl.DenseTerms*d)...)
	g.adapter("gs_a_trial_dense", pl.TrialDense, "void",
		"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* k1, gs_real* yn, gs_real* e, gs_real* ks, gs_real* hrho, gs_real* w",
		tin, tout)
	g.adapter("gs_a_cond", ep.Cond, "void", typ+", gs_real* g", ty, idx("g", ne))
	g.adapter("gs_a_field", pl.Field, "void", typ+", gs_real* f", ty, idx("f", d))
	rv, err := ep.Reverse(pl)
	if err != nil {
		return err
	}
	for e := 0; e < ne; e++ {
		if ep.Jump[e] != nil {
			g.adapter(fmt.Sprintf("gs_a_jump%d", e), ep.Jump[e], "void", typ+", gs_real* yo", ty, idx("yo", d))
		}
		g.adapter(fmt.Sprintf("gs_a_condgrad%d", e), rv.CondGrad[e], "void", typ+", gs_real* o", ty, idx("o", 2+d+np+ns))
	}
	if !v.Grad {
		return g.err
	}
	lam := idx("lam", d)
	g.adapter("gs_a_steprev", rv.StepRev, "void",
		"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* lam, gs_real* o",
		cat([]string{"t", "h"}, y, p, lam), idx("o", 2+d+np+ns))
	if v.Saves > 0 {
		// The save times' reverse with time: t, h, y, p, θ, λ → t̄, h̄,
		// ȳ, p̄, s̄, θ̄.
		g.adapter("gs_a_saverev", rv.SaveRev, "void",
			"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, gs_real theta, const gs_real* lam, gs_real* o",
			cat([]string{"t", "h"}, y, p, []string{"theta"}, lam), idx("o", 3+d+np+ns))
	}
	for e := 0; e < ne; e++ {
		if j := rv.JumpRev[e]; j != nil {
			g.adapter(fmt.Sprintf("gs_a_jumprev%d", e), j, "void", typ+", const gs_real* lam, gs_real* o",
				cat(ty, lam), idx("o", 1+d+np+ns))
		}
	}
	return g.err
}

// shareDim is the state dimension from which a kernel with save times on
// the continuous extension has one forward step program and, for a
// gradient, one reverse step, not two each (kernelPlan.ShareFwd and
// ShareRev; shareForward, shareReverse). Below it the kernels keep both,
// byte for byte as before (and Config.SeparateSteps keeps both above it).
//
// The reverse: Plan.DenseStepReverse on every step, with zero
// coefficient cotangents on the steps no save time lies inside, in place
// of Plan.Reverse there. The two programs are nearly the same code
// (Reverse is DenseStepReverse without the coefficients' terms), 40% of a
// Rosenbrock gradient kernel's source at d = 64, and DenseStepReverse
// with w̄ = 0 gives Reverse's results bit for bit (on the built-in
// problems with Tsit5, Rodas5P and Rosenbrock23: TestSharedReverse),
// at the price of the coefficients' terms on every step (Rodas5P 20%
// more values per reverse step, Rosenbrock23 30%).
//
// The forward step: an adaptive kernel's trial computes the coefficients
// on every trial (Plan.TrialDense: Trial's outputs bit for bit, Rodas5P
// 2% more values at d = 64) where a dense step recomputed the accepted
// steps with save times inside; a replay runs DenseStep (Replay's y⁺ bit
// for bit, Rodas5P 3.5% more values) on every step.
const shareDim = 16

// The largest sizes (values) of the shared program against the one it
// replaces on the steps without save times: methods whose extension
// takes stages of its own (Vern7's six: 3.4 times Reverse; Tsit5's
// seventh: 1.7 times Reverse, 1.2 times Trial) keep two.
const (
	shareRevRatio   = 1.5  // DenseStepReverse / Reverse
	shareTrialRatio = 1.1  // TrialDense / Trial
	shareStepRatio  = 1.25 // DenseStep / Replay
)

// shareReverse reports whether the gradient kernels of pl run drev (the
// reverse of its dense step, or nil) on every step in place of rev
// (shareDim).
func shareReverse(pl *ode.Plan, rev, drev *tape.Program) bool {
	return drev != nil && pl.Dim >= shareDim && float64(len(drev.Values)) <= shareRevRatio*float64(len(rev.Values))
}

// shareForward reports whether a kernel of kind v (with save times on the
// continuous extension) of pl runs one forward step program (shareDim):
// TrialDense in place of Trial and DenseStep (adaptive), DenseStep in
// place of Replay and DenseStep (a replay).
func shareForward(pl *ode.Plan, v Config) bool {
	if v.SeparateSteps || pl.DenseStep == nil || v.Saves == 0 || pl.Dim < shareDim {
		return false
	}
	if v.Adaptive {
		return pl.TrialDense != nil && float64(len(pl.TrialDense.Values)) <= shareTrialRatio*float64(len(pl.Trial.Values))
	}
	return float64(len(pl.DenseStep.Values)) <= shareStepRatio*float64(len(pl.Replay.Values))
}

// accumulates reports whether p's outputs first…first+n-1 can be
// accumulated (AccFunc), without emitting anything.
func accumulates(p *tape.Program, first, n int) bool {
	if noAccumulate || n == 0 {
		return false
	}
	_, ok := planAcc(p, first, n)
	return ok
}

// lossAdapter writes the adapter of loss lp for kernel v: gs_a_loss_grad
// for a gradient (accumulating where it can, k.LossAcc), else gs_a_loss.
// A loss whose functions reroll for its many saved values (rerollLoss)
// is bound instead (directLoss).
func (g *adapters) lossAdapter(pl *ode.Plan, v Config, lp *ode.LossPlan, k *kernelPlan) {
	d, np := pl.Dim, pl.Params
	if rerollLoss(v, d) {
		g.directLoss(pl, v, lp, k)
		return
	}
	in := cat(idx("y", d), glob("ys", v.Saves*d), glob("data", v.DataDim), idx("p", np))
	sig := "const gs_real* sh, const gs_real* y, const gs_real* ys, long long n, long long i, const gs_real* data, const gs_real* p"
	if !v.Grad {
		g.adapter("gs_a_loss", lp.Term, "gs_real", sig, in, []string{"return"})
		return
	}
	// In lanes mode the loss's own dL/ds goes straight to the result,
	// atomically (warp.cuh, GS_LOSS_ACC_AT).
	g.src.accShared = v.Lanes
	f, ok := g.accFunc(lp.Grad, 1+d+v.Saves*d+np, pl.Shared)
	g.src.accShared = false
	if !ok {
		g.adapter("gs_a_loss_grad", lp.Grad, "gs_lgrad_out", sig, in, nil)
		return
	}
	k.LossAcc = true
	g.accAdapter("gs_a_loss_grad", f, lp.Grad, "gs_lgrad_out",
		"const gs_real* sh, gs_real* acc, bool on, const gs_real* y, const gs_real* ys, long long n, long long i, const gs_real* data, const gs_real* p", in)
}

// wideLoss writes the loss adapter of a loss or gradient kernel v in the
// wide layout (wide.cuh), which lane 0 calls with the final state and the
// parameters in the warp's shared memory: bound functions (directLoss),
// which read y and p there, in place, and the gradient's also store dL/dy
// and dL/dp (times sc) there, into lam and gp, returning dL/ds only (not
// accumulating: the other lanes do not call it). The thread layout's
// adapters took y and p by value, copied them into a local array and
// returned every output in a local struct (Lorenz-96 with d = 256: 6,256
// bytes of local memory a thread, 30.8% of the gradient kernel's warp
// samples on lane 0's loads and stores of them; issue 26). The same ops
// in the same order: the results bit for bit (TestHostWideLossSame).
// Other kernels have none.
func (g *adapters) wideLoss(pl *ode.Plan, v Config, lp *ode.LossPlan, k *kernelPlan) error {
	if !v.Loss && !v.Grad {
		return nil
	}
	if lp == nil {
		return fmt.Errorf("cuda: a loss kernel needs a loss")
	}
	g.noAcc = true
	g.directLoss(pl, v, lp, k)
	if g.err == nil && k.LossAcc {
		g.err = fmt.Errorf("cuda: the wide layout's loss must return its shared gradient")
	}
	return g.err
}

// directLoss writes the adapters of loss lp of kernel v as bound
// functions (bind.go; k.LossDirect): they read y, the saved states ys and
// the data from the kernel's arrays, in place, and the gradient's stores
// the loss term to loss[i] and dL/dys, scaled by sc, to tb[q * n + i]
// (adjoint.cuh), returning dL/dy, dL/dp and dL/ds (or with k.LossAcc
// adding dL/ds to the accumulator and storing where on is set); in the
// wide layout (wideLoss) it also stores dL/dy and dL/dp, scaled by sc, to
// lam[c] and gp[c], and returns dL/ds only:
//
//	gs_real gs_a_loss(sh, y, ys, n, i, data, p);
//	gs_lgrad_out gs_a_loss_grad(sh, [acc, on,] y, ys, n, i, data, p, sc, loss, tb);
//	gs_lgrad_out gs_a_loss_grad(sh, y, ys, n, i, data, p, sc, loss, tb, lam, gp);  // wide
//
// A loss of 1,000 save times of four components so passes no parameter
// per saved value and returns no struct of them (4,005 and 4,006 in the
// scalar form).
func (g *adapters) directLoss(pl *ode.Plan, v Config, lp *ode.LossPlan, k *kernelPlan) {
	if g.err != nil {
		return
	}
	if !g.src.reroll {
		g.src.reroll = true
		defer func() { g.src.reroll = false }()
	}
	d, np, w := pl.Dim, pl.Params, v.Saves*pl.Dim
	const (
		sig  = "const gs_real* sh, const gs_real* y, const gs_real* ys, long long n, long long i, const gs_real* data, const gs_real* p"
		args = "y, ys, n, i, data, p"
		in   = "const gs_real* GS_RESTRICT gs_y, const gs_real* GS_RESTRICT gs_ys, long long gs_n, long long gs_i, const gs_real* GS_RESTRICT gs_data, const gs_real* GS_RESTRICT gs_p"
	)
	b := &binding{params: in, in: []span{{name: "gs_y", w: d}, {name: "gs_ys", w: w, strided: true},
		{name: "gs_data", w: v.DataDim, strided: true}, {name: "gs_p", w: np}}}
	if !v.Grad {
		b.out = []span{{w: 1}}
		f, err := g.src.boundFunction(lp.Term, nil, b)
		if err != nil {
			g.err = err
			return
		}
		fmt.Fprintf(&g.sb, "GS_DEVICE gs_real gs_a_loss(%s) {\n  return %s(sh, %s).v[0];\n}\n", sig, f, args)
		return
	}
	k.LossDirect = true
	b.params += ", gs_real gs_sc, gs_real* GS_RESTRICT gs_loss, gs_real* GS_RESTRICT gs_tb"
	b.out = []span{{name: "gs_loss", w: 1, strided: true}, {w: d}, {name: "gs_tb", w: w, strided: true, scale: "gs_sc"}, {w: np + pl.Shared}}
	if v.Wide {
		b.params += ", gs_real* GS_RESTRICT gs_lam, gs_real* GS_RESTRICT gs_gp"
		b.out = []span{b.out[0], {name: "gs_lam", w: d, scale: "gs_sc"}, b.out[2], {name: "gs_gp", w: np, scale: "gs_sc"}, {w: pl.Shared}}
	}
	grad, shared := lp.Grad, 1+d+w+np // the program and its first shared gradient
	var lf *lossFold
	if k.Dense && !v.Events && !v.Wide && !v.StoreSaveCots {
		// Save times' cotangents in the sweep (savecot.go): the VJP
		// without dL/dys (its tb parameter unused).
		sh := lossform.Shape{D: d, K: v.Saves, DD: v.DataDim, P: np}
		if sc, ok := splitSaveCots(lp.Grad, sh); ok {
			g.emitSaveCots(sc)
			k.SaveCots = true
			grad, shared = sc.Rest, 1+d+np
			b.out = []span{b.out[0], b.out[1], b.out[3]}
			// (The thread layout's: every thread writes its own
			// trajectory's saves, GS_WRITER.)
			if v.layoutFile() == "thread.cuh" {
				lf, _ = splitLossFold(sc.Rest, sh)
			}
		}
	}
	accumulate := !noAccumulate && !g.noAcc && pl.Shared > 0
	var spec *accSpec
	if accumulate {
		spec, k.LossAcc = planAcc(grad, shared, pl.Shared)
	}
	if lf != nil {
		// The loss's value folded in the forward pass (lossfold.go): the
		// VJP without ℓ (its loss parameter unused), adding its dL/ds
		// as the VJP with ℓ would (foldAcc).
		if fspec, ok := foldAcc(lf.Rest, d+np, pl.Shared, grad, spec, k.LossAcc); ok {
			g.emitLossFold(lf)
			k.LossFold = true
			grad, spec = lf.Rest, fspec
			b.out = b.out[1:]
		}
	}
	f, err := g.src.boundFunction(grad, spec, b)
	if err != nil {
		g.err = err
		return
	}
	lead, params := "sh", sig
	if k.LossAcc {
		lead, params = "sh, acc, on", "const gs_real* sh, gs_real* acc, bool on"+strings.TrimPrefix(sig, "const gs_real* sh")
	}
	tail, targs := "gs_real sc, gs_real* loss, gs_real* tb", "sc, loss, tb"
	if v.Wide {
		tail, targs = tail+", gs_real* lam, gs_real* gp", targs+", lam, gp"
	}
	fmt.Fprintf(&g.sb, "typedef %s gs_lgrad_out;\n", outType(f))
	fmt.Fprintf(&g.sb, "GS_DEVICE gs_lgrad_out gs_a_loss_grad(%s, %s) {\n  return %s(%s, %s, %s);\n}\n",
		params, tail, f, lead, args, targs)
}

// idx returns the C expressions name[0], ..., name[w-1].
func idx(name string, w int) []string {
	x := make([]string, w)
	for c := range x {
		x[c] = fmt.Sprintf("%s[%d]", name, c)
	}
	return x
}

// glob returns the C expressions of entries 0, ..., w-1 of trajectory i
// of the step-major ensemble array name: name[c * n + i].
func glob(name string, w int) []string {
	x := make([]string, w)
	for c := range x {
		x[c] = fmt.Sprintf("%s[%dLL * n + i]", name, c)
	}
	return x
}

// cat returns the concatenation of xs.
func cat(xs ...[]string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x...)
	}
	return out
}

// storeRe matches an adapter's output name[k].
var storeRe = regexp.MustCompile(`^([A-Za-z_]\w*)\[(\d+)\]$`)

// storeRun returns the number n of outputs at the head of outs that are
// consecutive entries k0, k0+1, ... of one array name, where the unit
// rerolls (reroll.go) and n ≥ rerollMinRun; else 0.
func (g *adapters) storeRun(outs []string) (n int, name string, k0 int) {
	if !g.src.reroll || len(outs) < rerollMinRun {
		return 0, "", 0
	}
	m := storeRe.FindStringSubmatch(outs[0])
	if m == nil {
		return 0, "", 0
	}
	k, err := strconv.Atoi(m[2])
	if err != nil {
		return 0, "", 0
	}
	name, k0 = m[1], k
	for n = 1; n < len(outs) && outs[n] == fmt.Sprintf("%s[%d]", name, k0+n); n++ {
	}
	if n < rerollMinRun {
		return 0, "", 0
	}
	return n, name, k0
}
