package ode

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Method is an integration method. The built-in methods are Tsit5, Vern7
// (explicit) and, for stiff problems, Rodas5P and Rosenbrock23.
type Method interface {
	// Name returns the method's conventional name, as "Tsit5".
	Name() string
	// Order returns the order of the solution.
	Order() int
	// ErrOrder returns the order the step-size controller uses: its
	// exponent is 1/(ErrOrder()+1).
	ErrOrder() int

	// steps builds the method's step programs from the traced field: the
	// recorder's trial step and the replay step (see stepPrograms).
	steps(f *Field, fp *tape.Program) (*stepPrograms, error)
}

// stepPrograms are the programs of one method and field.
//
// trial: inputs t, h, y[d], p[P], s[S] and, if fsal, k1[d]; outputs
// y⁺[d], err[d] (the local error estimate, h included), if fsal the last
// stage k_s[d] = f(t+h, y⁺), and last h·ρ, the stiffness estimate (see
// stiffnessEstimate; 0 for methods without one).
//
// replay: inputs t, h, y[d], p[P], s[S]; outputs y⁺[d], computed with the
// same arithmetic as trial's y⁺, so record and replay agree bit for bit.
//
// denseStep: inputs t, h, y[d], p[P], s[S]; outputs y⁺[d] (as replay
// computes it) and the terms·d coefficients of the method's continuous
// extension (see Plan.DenseStep).
//
// trialDense: trial with the coefficients appended (see Plan.TrialDense).
type stepPrograms struct {
	trial, replay *tape.Program
	denseStep     *tape.Program
	trialDense    *tape.Program // trial's outputs, then denseStep's coefficients
	terms         int
	fsal          bool
	fevals        int // field evaluations per trial step

	// variant is Plan.Variant ("" for the method's own trial programs),
	// and own, for a variant, the method's own trial program, whose hash
	// is the plan's Fingerprint.
	variant string
	own     *tape.Program
}

// erk is an explicit Runge–Kutta method.
type erk struct {
	tab *ERKTableau

	// scaled, for Method Auto's Tsit5 (autoTsit5), makes the trial
	// step's stiffness estimate Auto's, with the scale-invariant ratios
	// (see stiffnessEstimate); the method's other programs are its own.
	scaled bool
}

var (
	// Tsit5 is Tsitouras' 5(4) Runge–Kutta pair (7 stages, FSAL): the
	// default method for non-stiff problems.
	Tsit5 Method = &erk{tab: tsit5Tableau}

	// Vern7 is Verner's "most efficient" 7(6) Runge–Kutta pair (10
	// stages): for tight tolerances.
	Vern7 Method = &erk{tab: vern7Tableau}

	// autoTsit5 is Tsit5 as Method Auto runs it: its plan's Trial and
	// TrialDense compute Auto's stiffness estimate and its Control runs
	// Auto's test (Plan.Variant "auto"; see stiffnessEstimate and
	// stiffTestOf), its other programs and its name are
	// Tsit5's, and its plan's Fingerprint is Tsit5's (a mesh of one is a
	// mesh of the other: the same steps, replayed by the same program).
	autoTsit5 Method = &erk{tab: tsit5Tableau, scaled: true}
)

// variantAuto is Plan.Variant of Method Auto's Tsit5 plan.
const variantAuto = "auto"

func (m *erk) Name() string  { return m.tab.Name }
func (m *erk) Order() int    { return m.tab.Order }
func (m *erk) ErrOrder() int { return m.tab.ErrOrder }

// stepInputs lists the inputs t, h, y, p, s of a step program.
func stepInputs(f *Field, extra ...tape.Input) []tape.Input {
	fin := f.inputs()
	in := make([]tape.Input, 0, len(fin)+1+len(extra))
	in = append(in, fin[0], tape.Input{Name: "h"})
	in = append(in, fin[1:]...)
	return append(in, extra...)
}

// combine returns y + h·Σ_j w_j k_j (zero weights dropped), written the
// same way wherever the same weights appear so that CSE shares it.
func combine(y, h tape.V, w []float64, k [][]tape.V, c int) tape.V {
	d, ok := wsum(y, w, k, c)
	if !ok {
		return y
	}
	return y.Add(h.Mul(d))
}

// wsum returns Σ_j w_j k_j[c] as one Dot (see sumK), and false if every
// weight is 0.
func wsum(y tape.V, w []float64, k [][]tape.V, c int) (tape.V, bool) {
	for _, wj := range w {
		if wj != 0 {
			return sumK(y.Const(0), w, k, c), true
		}
	}
	return tape.V{}, false
}

func (m *erk) steps(f *Field, fp *tape.Program) (*stepPrograms, error) {
	if m.scaled {
		// The method's own programs, then the variant's trial programs in
		// place of its own: the replay, the dense step and the fingerprint
		// stay the method's.
		sp, err := (&erk{tab: m.tab}).steps(f, fp)
		if err != nil {
			return nil, err
		}
		sp.own = sp.trial
		if sp.trial, err = m.trialProgram(f, fp, false); err != nil {
			return nil, err
		}
		if sp.trialDense, err = m.trialProgram(f, fp, true); err != nil {
			return nil, err
		}
		sp.variant = variantAuto
		return sp, nil
	}
	tab, d := m.tab, f.Dim
	fsal := tab.FSAL()
	trial, err := m.trialProgram(f, fp, false)
	if err != nil {
		return nil, err
	}
	sp := &stepPrograms{trial: trial, fsal: fsal, fevals: tab.Stages()}
	if fsal {
		sp.fevals--
	}
	// The replay step: the same values, only y⁺, and k1 computed (by a
	// call, as the other stages: the field's code, and its VJP's in the
	// reverse step, stays one function that every stage calls).
	if fsal {
		rb, rv := tape.NewBuilderFor(fmt.Sprintf("%s.%s.replay", fp.Name, tab.Name), stepInputs(f))
		var out []tape.V
		err := tape.Catch(fp.Name, func() {
			k1 := tape.CallFunc(fp, append(append([]tape.V{rv[0]}, rv[2:2+d]...), rv[2+d:]...))
			out = tape.Call(trial, append(rv, k1...))[:d]
		})
		if err != nil {
			return nil, err
		}
		replay, err := rb.Build(out...)
		if err != nil {
			return nil, err
		}
		// Without the stages y⁺ does not use (Tsit5's seventh).
		sp.replay = tape.DeadCode(replay)
	} else {
		r := *trial
		r.Name = trial.Name + ".replay"
		r.Outputs = trial.Outputs[:d]
		sp.replay = tape.DeadCode(&r)
	}
	if sp.denseStep, sp.terms, err = m.denseStep(f, fp); err != nil {
		return nil, err
	}
	if sp.trialDense, err = m.trialProgram(f, fp, true); err != nil {
		return nil, err
	}
	return sp, nil
}

// trialProgram builds the trial step (see stepPrograms) or, with dense,
// the trial step followed by the coefficients of the method's
// continuous extension (its extra stages computed too), as denseStep
// computes them.
func (m *erk) trialProgram(f *Field, fp *tape.Program, dense bool) (*tape.Program, error) {
	tab, d := m.tab, f.Dim
	np := f.Params + f.Shared
	fsal := tab.FSAL()
	var extra []tape.Input
	if fsal {
		for i := 0; i < d; i++ {
			extra = append(extra, tape.Input{Name: fmt.Sprintf("k1[%d]", i)})
		}
	}
	in := stepInputs(f, extra...)
	name := fmt.Sprintf("%s.%s", fp.Name, tab.Name)
	if m.scaled {
		name += "." + variantAuto
	}
	if dense {
		name += ".trial_dense"
	}
	b, vs := tape.NewBuilderFor(name, in)
	t, h, y, p := vs[0], vs[1], vs[2:2+d], vs[2+d:2+d+np]
	call := func(tt tape.V, yy []tape.V) []tape.V {
		args := append(append([]tape.V{tt}, yy...), p...)
		return tape.CallFunc(fp, args)
	}
	var yNew, errEst, kLast, w []tape.V
	var hrho tape.V
	err := tape.Catch(fp.Name, func() {
		s := tab.Stages()
		var k1 []tape.V
		if fsal {
			k1 = vs[2+d+np:]
		}
		c, a := tab.C, tab.A
		if dense {
			c = append(append([]float64(nil), tab.C...), tab.Interp.ExtraC...)
			a = append(append([][]float64(nil), tab.A...), tab.Interp.ExtraA...)
		}
		k, g := erkStages(c, a, t, h, y, k1, call)
		hrho = stiffnessEstimate(tab, h, k, g, m.scaled)
		yNew = make([]tape.V, d)
		errEst = make([]tape.V, d)
		for c := 0; c < d; c++ {
			yNew[c] = combine(y[c], h, tab.B, k, c)
			if e, ok := wsum(y[c], tab.E, k, c); ok {
				errEst[c] = h.Mul(e)
			} else {
				errEst[c] = y[c].Const(0)
			}
		}
		kLast = k[s-1]
		if dense {
			w = denseCoefficients(h, tab.Interp.R, k, d, true) // not differentiated
		}
	})
	if err != nil {
		return nil, err
	}
	outs := append(append([]tape.V(nil), yNew...), errEst...)
	if fsal {
		outs = append(outs, kLast...)
	}
	outs = append(append(outs, hrho), w...)
	trial, err := b.Build(outs...)
	if err != nil {
		return nil, err
	}
	nameTrialOutputs(trial, d, fsal)
	if dense {
		nameDenseOutputs(trial, len(trial.Outputs)-len(w), d)
	}
	return trial, nil
}

// erkStages traces the stages k_i = f(t + c_i·h, y + h·Σ_j a_ij·k_j) of
// an explicit Runge–Kutta step and returns them with their inputs g_i
// (the stage states); k1, if not nil, is the first stage (FSAL). A stage
// whose node and weights are those of another is the same traced value
// (the builder's CSE), so stages computed in several programs are
// computed by the same operations.
func erkStages(c []float64, a [][]float64, t, h tape.V, y, k1 []tape.V, call func(tape.V, []tape.V) []tape.V) (k, g [][]tape.V) {
	s, d := len(c), len(y)
	k = make([][]tape.V, s)
	g = make([][]tape.V, s)
	g[0] = y
	if k1 != nil {
		k[0] = k1
	} else {
		k[0] = call(t, y)
	}
	for i := 1; i < s; i++ {
		yi := make([]tape.V, d)
		for j := range yi {
			yi[j] = combine(y[j], h, a[i], k, j)
		}
		k[i] = call(t.Add(h.MulC(c[i])), yi)
		g[i] = yi
	}
	return k, g
}

// nameTrialOutputs names the outputs of a trial-step program.
func nameTrialOutputs(trial *tape.Program, d int, fsal bool) {
	for c := 0; c < d; c++ {
		trial.Outputs[c].Name = fmt.Sprintf("y⁺[%d]", c)
		trial.Outputs[d+c].Name = fmt.Sprintf("err[%d]", c)
		if fsal {
			trial.Outputs[2*d+c].Name = fmt.Sprintf("k_s[%d]", c)
		}
	}
	trial.Outputs[2*d+boolInt(fsal)*d].Name = "hrho"
}

// nameDenseOutputs names the outputs w_j[c] of a program from output
// first on.
func nameDenseOutputs(p *tape.Program, first, d int) {
	for i := first; i < len(p.Outputs); i++ {
		p.Outputs[i].Name = fmt.Sprintf("w%d[%d]", (i-first)/d+1, (i-first)%d)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// stiffnessEstimate returns h·ρ, where ρ = ‖k_j − k_i‖/‖g_j − g_i‖ estimates
// the dominant eigenvalue of ∂f/∂y along the step from the last two stages
// i < j that share the abscissa c = 1 (g are the stage inputs): Hairer's
// stiffness test (Solving ODEs I, §IV.2). It is 0 if the method has no
// such pair or the stage inputs coincide.
//
// With scaled (Method Auto's Tsit5, autoTsit5), ρ = max(ρ_2, ρ_r, ρ_e):
// ρ_2 the Euclidean ratio above and two ratios in relative norms, each
// component divided by s_c = max(|g_i[c]|, |g_j[c]|, 2^-1000) (the
// weighting of a relative tolerance's error norm, without reading the
// tolerance: one program serves every tolerance):
//
//   - ρ_r is the ratio above, ‖(k_j − k_i)/s‖/‖(g_j − g_i)/s‖. The
//     Euclidean ratio is ruled by the large, slow components and fires
//     late where the stiff modes live in small ones (POLL and ROBER at
//     tight tolerances).
//   - ρ_e is the ratio along the error estimate's own direction: with e =
//     b − b̂ (Σ e = 0), Σ_j e_j·k_j = J·u, u = Σ_j e_j·g_j, exactly for an
//     affine field y' = J·y + c, so ρ_e = ‖Σ e_j k_j/s‖/‖Σ e_j g_j/s‖ is a
//     Rayleigh quotient of J along u. Where the steps are at the stability
//     limit the error estimate, and u, are the stiff modes' (they are what
//     the controller rejects), though these modes stay too small in g_j −
//     g_i for ρ_r to see them (POLL at 1e-8: ρ_r reaches the boundary 560
//     steps after the steps did). Σ e_j k_j is the error estimate's own
//     sum; u is summed from the stage states themselves, so that where
//     the step is below the rounding of y (the first steps of Hairer's
//     initial estimate) u is rounding of y's size and h·ρ_e is small.
//
// The relative norms weigh a component that decays towards 0 by its own
// rate however small it is, so they can miss a fast mode in a large
// component near its equilibrium beside one decaying to 0, which ρ_2
// sees (y1' = −3e3·(y1 − 1e3), y2' = −1e3·y2: ρ_2 fires after 27–96
// Tsit5 steps, the relative ratios after 600); the largest of the three
// keeps every step that any of them calls stiff. They cost about eighteen
// traced values a component in every trial step, which is why the plain
// methods keep the Euclidean ratio alone.
func stiffnessEstimate(tab *ERKTableau, h tape.V, k, g [][]tape.V, scaled bool) tape.V {
	s := tab.Stages()
	zero := h.Const(0)
	if s < 2 || tab.C[s-1] != 1 || tab.C[s-2] != 1 {
		return zero
	}
	if scaled {
		return scaledStiffnessEstimate(tab, h, k, g)
	}
	var num, den tape.V
	for c := range k[s-1] {
		// (Traced in this order, the plain estimate's program is the
		// one it always was.)
		dk := k[s-1][c].Sub(k[s-2][c])
		dk2 := dk.Square()
		dg := g[s-1][c].Sub(g[s-2][c])
		dg2 := dg.Square()
		if c == 0 {
			num, den = dk2, dg2
		} else {
			num, den = num.Add(dk2), den.Add(dg2)
		}
	}
	live := tape.Gt(den, zero)
	safe := tape.Select(live, den, h.Const(1))
	return tape.Select(live, h.Abs().Mul(num.Div(safe).Sqrt()), zero)
}

// scaledStiffnessEstimate is stiffnessEstimate's h·max(ρ_r, ρ_e).
func scaledStiffnessEstimate(tab *ERKTableau, h tape.V, k, g [][]tape.V) tape.V {
	s := tab.Stages()
	zero := h.Const(0)
	floor := h.Const(0x1p-1000)
	// ratio returns num/den, 0 where den is 0.
	ratio := func(num, den tape.V) tape.V {
		live := tape.Gt(den, zero)
		return tape.Select(live, num.Div(tape.Select(live, den, h.Const(1))), zero)
	}
	var n2, d2, nr, dr, ne, de tape.V
	for c := range k[s-1] {
		inv := h.Const(1).Div(tape.Max(tape.Max(g[s-1][c].Abs(), g[s-2][c].Abs()), floor))
		dk := k[s-1][c].Sub(k[s-2][c])
		dg := g[s-1][c].Sub(g[s-2][c])
		dk2, dg2 := dk.Square(), dg.Square()
		dkr, dgr := dk.Mul(inv).Square(), dg.Mul(inv).Square()
		// Σ e_j k_j as the error estimate sums it (wsum: the same traced
		// value), and Σ e_j g_j.
		ek := sumK(zero, tab.E, k, c).Mul(inv).Square()
		eg := sumK(zero, tab.E, g, c).Mul(inv).Square()
		if c == 0 {
			n2, d2, nr, dr, ne, de = dk2, dg2, dkr, dgr, ek, eg
		} else {
			n2, d2 = n2.Add(dk2), d2.Add(dg2)
			nr, dr, ne, de = nr.Add(dkr), dr.Add(dgr), ne.Add(ek), de.Add(eg)
		}
	}
	return h.Abs().Mul(tape.Max(tape.Max(ratio(n2, d2), ratio(nr, dr)), ratio(ne, de)).Sqrt())
}
