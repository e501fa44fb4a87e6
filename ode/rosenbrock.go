package ode

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Rosenbrock methods: linearly implicit, for stiff problems. Their step
// needs J = ∂f/∂y and f_t = ∂f/∂t at (t, y); both come from the traced
// field by forward mode (or J from Field.Jac), so the step's reverse mode
// contains second derivatives of f with no extra machinery. W is factored
// once per step and its factors serve every stage and, in reverse mode,
// every transposed solve.

type rosenbrock struct {
	tab *RosenbrockTableau // nil for Rosenbrock23
	r23 *rosenbrock23Consts
}

var (
	// Rodas5P is Steinebach's 5(4) Rosenbrock method (8 stages, stiffly
	// accurate): the default for stiff problems.
	Rodas5P Method = &rosenbrock{tab: rodas5PTableau}

	// Rosenbrock23 is Shampine and Reichelt's 2(3) Rosenbrock method
	// (MATLAB's ode23s): cheap steps for loose tolerances.
	Rosenbrock23 Method = &rosenbrock{r23: &rosenbrock23Tableau}
)

func init() { stiffDefault = Rodas5P }

func (m *rosenbrock) Name() string {
	if m.tab != nil {
		return m.tab.Name
	}
	return m.r23.Name
}

func (m *rosenbrock) Order() int {
	if m.tab != nil {
		return m.tab.Order
	}
	return m.r23.Order
}

// ErrOrder returns the controller's order: 4 for Rodas5P, 2 for
// Rosenbrock23 (whose estimate is of order 3 but whose solution is of
// order 2), giving the exponents 1/5 and 1/3.
func (m *rosenbrock) ErrOrder() int {
	if m.tab != nil {
		return m.tab.ErrOrder
	}
	return m.r23.Order
}

// jacobianProgram returns the program with inputs t, y, p, s and outputs
// f (d), then f_t (d), then J (d×d, row-major).
func jacobianProgram(f *Field, fp *tape.Program) (*tape.Program, error) {
	d := f.Dim
	wrt := make([]int, 1+d)
	for i := range wrt {
		wrt[i] = i
	}
	if f.Jac == nil {
		jp, err := tape.Jacobian(fp, wrt)
		if err != nil {
			return nil, err
		}
		// Reorder: outputs f, J[i, 0] = ∂f_i/∂t, J[i, 1+j] = ∂f_i/∂y_j.
		outs := append([]tape.Output(nil), jp.Outputs[:d]...)
		for i := 0; i < d; i++ {
			outs = append(outs, jp.Outputs[d+i*(1+d)])
		}
		for i := 0; i < d; i++ {
			outs = append(outs, jp.Outputs[d+i*(1+d)+1:d+(i+1)*(1+d)]...)
		}
		q := *jp
		q.Outputs = outs
		return &q, nil
	}
	// An analytic Jacobian: f_t still comes from forward mode.
	ft, err := tape.Jacobian(fp, []int{0})
	if err != nil {
		return nil, err
	}
	b, vs := tape.NewBuilderFor(fp.Name+".jac", fp.Inputs)
	var outs []tape.V
	err = tape.Catch(fp.Name, func() {
		outs = tape.Call(ft, vs)
		j := f.Jac(vs[0], vs[1:1+d], vs[1+d:])
		if len(j) != d*d {
			panic(fmt.Errorf("ode: field %s: Jac returned %d values, want Dim*Dim = %d", f.name(), len(j), d*d))
		}
		outs = append(outs, j...)
	})
	if err != nil {
		return nil, err
	}
	return b.Build(outs...)
}

// matrixFreeDim (a variable for the tests) is the state dimension from which a Rosenbrock step of a
// field without an analytic Jacobian is matrix-free (rosPrograms): its
// programs then grow with d like the field's, not like d², at the price
// of operation order (J·v by forward mode instead of by J's rows: results
// within rounding of the explicit form, 1e-13 relative on the built-in
// problems). Below it the explicit form is kept, and with it the kernels
// of small fields byte for byte. Measured (cuda's TestSizeDiag): at d = 8
// (HIRES) both forms are about as large; at d = 20 (Pollution) the
// matrix-free one is several times smaller.
var matrixFreeDim = 16

// rosPrograms are the programs a Rosenbrock step calls. jp gives f, f_t
// and J (jacobianProgram). A matrix-free step (jvp != nil) calls ft for f
// and f_t, jac for J alone (factored by tape.FactorShift, whose solves
// treat W = I − γh·J as a constant) and jvp for the products J·v (forward
// mode of the field): no d×d derivative is ever formed, since W's
// derivative is attached to each solve as the solve of −dW·x =
// d(γh·J·x)|x fixed, a product J·x again (rosSolver).
type rosPrograms struct {
	jp          *tape.Program
	ft, jac, jv *tape.Program
}

// newRosPrograms derives the programs of f's Rosenbrock steps (fp is f
// traced).
func newRosPrograms(f *Field, fp *tape.Program) (*rosPrograms, error) {
	jp, err := jacobianProgram(f, fp)
	if err != nil {
		return nil, err
	}
	rp := &rosPrograms{jp: jp}
	d := f.Dim
	if f.Jac != nil || d < matrixFreeDim {
		return rp, nil
	}
	q := *jp
	q.Name = fp.Name + ".J"
	q.Outputs = jp.Outputs[2*d:]
	rp.jac = tape.DeadCode(&q)
	if rp.ft, err = tape.Jacobian(fp, []int{0}); err != nil {
		return nil, err
	}
	wrt := make([]int, d)
	for i := range wrt {
		wrt[i] = 1 + i
	}
	jv, err := tape.JVP(fp, wrt)
	if err != nil {
		return nil, err
	}
	q = *jv
	q.Name = fp.Name + ".jv"
	q.Outputs = jv.Outputs[d:]
	rp.jv = tape.DeadCode(&q)
	return rp, nil
}

func (m *rosenbrock) steps(f *Field, fp *tape.Program) (*stepPrograms, error) {
	rp, err := newRosPrograms(f, fp)
	if err != nil {
		return nil, fmt.Errorf("ode: field %s: Jacobian: %w", f.name(), err)
	}
	d := f.Dim
	trial, fevals, err := m.build(f, fp, rp, buildTrial)
	if err != nil {
		return nil, err
	}
	nameTrialOutputs(trial, d, false)
	r := *trial
	r.Name = trial.Name + ".replay"
	r.Outputs = trial.Outputs[:d]
	sp := &stepPrograms{trial: trial, replay: tape.DeadCode(&r), fevals: fevals}
	if sp.denseStep, _, err = m.build(f, fp, rp, buildDenseStep); err != nil {
		return nil, err
	}
	nameDenseStepOutputs(sp.denseStep, d)
	sp.denseStep = tape.DeadCode(sp.denseStep)
	sp.terms = len(m.denseWeights()[0])
	if sp.trialDense, _, err = m.build(f, fp, rp, buildTrialDense); err != nil {
		return nil, err
	}
	nameTrialOutputs(sp.trialDense, d, false)
	nameDenseOutputs(sp.trialDense, 2*d+1, d)
	return sp, nil
}

// denseWeights returns the method's continuous extension in power form,
// y(t + θh) = y + Σ_j θ^j·w_j with w_j = Σ_i P[i][j−1]·k_i (the k_i of
// RosenbrockTableau, which contain h) for Rodas5P, and w_j = h·Σ_i
// P[i][j−1]·k_i (k1, k2 of ros23Step) for Rosenbrock23.
//
// Rodas5P: (1−θ)·y + θ·(y⁺ + (1−θ)·(D_0 + θ·(D_1 + θ·D_2))) with
// y⁺ − y = Σ M_i·k_i is y + θ·(y⁺ − y + D_0) + θ²·(D_1 − D_0) +
// θ³·(D_2 − D_1) − θ⁴·D_2, so P[i] = (M_i + H_0i, H_1i − H_0i,
// H_2i − H_1i, −H_2i).
//
// Rosenbrock23 (Shampine & Reichelt's interpolant, OrdinaryDiffEq.jl's
// rosenbrock_interpolants.jl): y + h·(θ(1−θ)·k1 + θ(θ−2d)·k2)/(1−2d),
// where 1/(1−2d) = 1 + √2 and 2d/(1−2d) = √2.
func (m *rosenbrock) denseWeights() [][]float64 {
	if m.tab == nil {
		return rosenbrock23Interp
	}
	tab := m.tab
	p := make([][]float64, tab.Stages())
	for i := range p {
		h0, h1, h2 := tab.H[0][i], tab.H[1][i], tab.H[2][i]
		p[i] = []float64{tab.M[i] + h0, h1 - h0, h2 - h1, -h2}
	}
	return p
}

// What rosenbrock.build traces.
const (
	buildTrial      = iota // outputs y⁺, err, 0 (no stiffness estimate)
	buildDenseStep         // outputs y⁺ and the coefficients w
	buildTrialDense        // outputs y⁺, err, 0 and w
)

// build traces the step: inputs t, h, y, p, s; outputs as kind says, the
// coefficients w those of the method's continuous extension (see
// denseWeights and Plan.DenseStep).
func (m *rosenbrock) build(f *Field, fp *tape.Program, rp *rosPrograms, kind int) (*tape.Program, int, error) {
	d := f.Dim
	np := f.Params + f.Shared
	in := stepInputs(f)
	name := fmt.Sprintf("%s.%s", fp.Name, m.Name())
	switch kind {
	case buildDenseStep:
		name += ".dense_step"
	case buildTrialDense:
		name += ".trial_dense"
	}
	b, vs := tape.NewBuilderFor(name, in)
	t, h, y, p := vs[0], vs[1], vs[2:2+d], vs[2+d:2+d+np]
	call := func(tt tape.V, yy []tape.V) []tape.V {
		return tape.CallFunc(fp, append(append([]tape.V{tt}, yy...), p...))
	}
	var outs []tape.V
	fevals := 0
	err := tape.Catch(fp.Name, func() {
		args := append(append([]tape.V{t}, y...), p...)
		// Mask J and f_t on padded steps (h == 0): the step is then the
		// identity in value and derivative even where f_t is infinite.
		var live, zero tape.V
		mask := func() { live, zero = tape.Ne(h, h.Const(0)), h.Const(0) }
		var f0, ft []tape.V
		var jv func([]tape.V) []tape.V
		var factor func(c tape.V) func([]tape.V) []tape.V
		if rp.jv == nil {
			fj := tape.CallFunc(rp.jp, args)
			mask()
			var jac []tape.V
			f0, ft, jac = fj[:d], fj[d:2*d], fj[2*d:]
			for i := range ft {
				ft[i] = tape.Select(live, ft[i], zero)
			}
			for i := range jac {
				jac[i] = tape.Select(live, jac[i], zero)
			}
			jv = func(v []tape.V) []tape.V { // J·v
				out := make([]tape.V, d)
				for i := range out {
					out[i] = tape.Dot(jac[i*d:(i+1)*d], v, zero)
				}
				return out
			}
			factor = func(c tape.V) func([]tape.V) []tape.V { return factorW(c, jac, d).Solve }
		} else {
			fj := tape.CallFunc(rp.ft, args)
			mask()
			f0, ft = fj[:d], fj[d:]
			for i := range ft {
				ft[i] = tape.Select(live, ft[i], zero)
			}
			jv = func(v []tape.V) []tape.V { // J·v by forward mode
				out := tape.CallFunc(rp.jv, append(append([]tape.V(nil), args...), v...))
				for i := range out {
					out[i] = tape.Select(live, out[i], zero)
				}
				return out
			}
			jac := tape.CallFunc(rp.jac, args)
			factor = func(c tape.V) func([]tape.V) []tape.V {
				return rosSolver(tape.FactorShift(jac, c.Neg(), live, d), c, jv)
			}
		}
		if m.tab == nil {
			yNew, errEst, k, n := ros23Step(m.r23, t, h, y, f0, ft, factor, call)
			fevals = n
			if kind != buildDenseStep {
				outs = append(append(outs, yNew...), errEst...)
				outs = append(outs, zero)
			} else {
				outs = append(outs, yNew...)
			}
			if kind != buildTrial {
				outs = append(outs, denseCoefficients(h, rosenbrock23Interp, k, d, false)...)
			}
			return
		}
		yNew, errEst, k, n := rodasStep(m.tab, t, h, y, f0, ft, factor, jv, call)
		fevals = n
		if kind != buildDenseStep {
			outs = append(append(outs, yNew...), errEst...)
			outs = append(outs, zero) // no stiffness estimate
		} else {
			outs = append(outs, yNew...)
		}
		if kind != buildTrial {
			p := m.denseWeights()
			col := make([]float64, len(p))
			for j := range p[0] {
				for i := range p {
					col[i] = p[i][j]
				}
				for c := 0; c < d; c++ {
					outs = append(outs, sumK(zero, col, k, c))
				}
			}
		}
	})
	if err != nil {
		return nil, 0, err
	}
	prog, err := b.Build(outs...)
	return prog, fevals, err
}

// factorW factors W = I − c·J for the traced scalar c.
func factorW(c tape.V, jac []tape.V, d int) tape.LU {
	w := make([]tape.V, d*d)
	mc := c.Neg()
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			w[i*d+j] = mc.Mul(jac[i*d+j])
			if i == j {
				w[i*d+j] = w[i*d+j].AddC(1)
			}
		}
	}
	return tape.Factor(w, d)
}

// rosSolver returns the solves of a matrix-free step: x = W⁻¹b with W =
// I − c·J factored by lu (a tape.FactorShift, whose solves carry b's
// derivative only) and W's derivative attached: dx = −W⁻¹·dW·x =
// W⁻¹·d(c·J·x)|x fixed, the derivative of the solve of c·J·x̂ with x̂ =
// NoGrad(x), whose value is not needed (tape.Attach). First derivatives
// only: a step's second derivatives are not those of its value.
func rosSolver(lu tape.LU, c tape.V, jv func([]tape.V) []tape.V) func([]tape.V) []tape.V {
	return func(b []tape.V) []tape.V {
		x := lu.Solve(b)
		xh := make([]tape.V, len(x))
		for i := range xh {
			xh[i] = tape.NoGrad(x[i])
		}
		r := jv(xh)
		for i := range r {
			r[i] = c.Mul(r[i])
		}
		dx := lu.Solve(r)
		for i := range x {
			x[i] = tape.Attach(x[i], dx[i])
		}
		return x
	}
}

// rodasStep is one step of a Rosenbrock method in the α/Γ form (see
// RosenbrockTableau): k_i = W⁻¹[h·f(t + c_i h, y + Σ α_ij k_j) +
// h·J·Σ Γ_ij k_j + h²·d_i·f_t], y⁺ = y + Σ m_i k_i, err = Σ (m_i − m̂_i) k_i.
func rodasStep(tab *RosenbrockTableau, t, h tape.V, y, f0, ft []tape.V, factor func(tape.V) func([]tape.V) []tape.V,
	jv func([]tape.V) []tape.V, call func(tape.V, []tape.V) []tape.V) (yNew, errEst []tape.V, k [][]tape.V, fevals int) {
	d := len(y)
	s := tab.Stages()
	solve := factor(h.MulC(tab.Gamma))
	h2 := h.Square()
	k = make([][]tape.V, s)
	for i := 0; i < s; i++ {
		fi := f0
		if i > 0 {
			yi := make([]tape.V, d)
			for c := range yi {
				yi[c] = sumK(y[c], tab.Alpha[i], k, c)
			}
			fi = call(t.Add(h.MulC(tab.C[i])), yi)
		}
		fevals++
		rhs := make([]tape.V, d)
		var jg []tape.V
		if i > 0 {
			v := make([]tape.V, d)
			any := false
			for c := range v {
				v[c] = sumK(y[c].Const(0), tab.GammaL[i], k, c)
				any = true
			}
			if any {
				jg = jv(v)
			}
		}
		for c := range rhs {
			r := h.Mul(fi[c])
			if jg != nil {
				r = r.Add(h.Mul(jg[c]))
			}
			if tab.D[i] != 0 {
				r = r.Add(h2.MulC(tab.D[i]).Mul(ft[c]))
			}
			rhs[c] = r
		}
		k[i] = solve(rhs)
	}
	yNew = make([]tape.V, d)
	errEst = make([]tape.V, d)
	ew := make([]float64, s)
	for i := range ew {
		ew[i] = tab.M[i] - tab.MHat[i]
	}
	for c := 0; c < d; c++ {
		yNew[c] = sumK(y[c], tab.M, k, c)
		errEst[c] = sumK(y[c].Const(0), ew, k, c)
	}
	return yNew, errEst, k, fevals
}

// sumK returns base + Σ_j w_j k_j[c] over the nonzero weights.
func sumK(base tape.V, w []float64, k [][]tape.V, c int) tape.V {
	ws, xs := make([]tape.V, 0, len(w)), make([]tape.V, 0, len(w))
	for j, wj := range w {
		if wj != 0 && k[j] != nil {
			ws = append(ws, base.Const(wj))
			xs = append(xs, k[j][c])
		}
	}
	if len(ws) == 0 {
		return base
	}
	return tape.Dot(ws, xs, base)
}

// ros23Step is one Rosenbrock23 step (see tableau_rosenbrock23.go):
// W = I − h·d·J, k1 = W⁻¹(F0 + h·d·T), F1 = f(t + h/2, y + (h/2)·k1),
// k2 = W⁻¹(F1 − k1) + k1, y⁺ = y + h·k2, F2 = f(t + h, y⁺),
// k3 = W⁻¹(F2 − e32·(k2 − F1) − 2·(k1 − F0) + h·d·T),
// err = (h/6)·(k1 − 2·k2 + k3).
func ros23Step(r *rosenbrock23Consts, t, h tape.V, y, f0, ft []tape.V, factor func(tape.V) func([]tape.V) []tape.V,
	call func(tape.V, []tape.V) []tape.V) (yNew, errEst []tape.V, k [][]tape.V, fevals int) {
	d := len(y)
	hd := h.MulC(r.D)
	solve := factor(hd)
	rhs := make([]tape.V, d)
	for c := range rhs {
		rhs[c] = f0[c].Add(hd.Mul(ft[c]))
	}
	k1 := solve(rhs)
	half := h.MulC(0.5)
	y1 := make([]tape.V, d)
	for c := range y1 {
		y1[c] = y[c].Add(half.Mul(k1[c]))
	}
	f1 := call(t.Add(half), y1)
	for c := range rhs {
		rhs[c] = f1[c].Sub(k1[c])
	}
	k2 := solve(rhs)
	for c := range k2 {
		k2[c] = k2[c].Add(k1[c])
	}
	yNew = make([]tape.V, d)
	for c := range yNew {
		yNew[c] = y[c].Add(h.Mul(k2[c]))
	}
	f2 := call(t.Add(h), yNew)
	for c := range rhs {
		rhs[c] = f2[c].Sub(k2[c].Sub(f1[c]).MulC(r.E32)).Sub(k1[c].Sub(f0[c]).MulC(2)).Add(hd.Mul(ft[c]))
	}
	k3 := solve(rhs)
	errEst = make([]tape.V, d)
	h6 := h.MulC(1.0 / 6)
	for c := range errEst {
		errEst[c] = h6.Mul(k1[c].Sub(k2[c].MulC(2)).Add(k3[c]))
	}
	return yNew, errEst, [][]tape.V{k1, k2}, 3
}
