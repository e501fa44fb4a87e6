package ode

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/tape"
)

// Dense output. Every built-in method has a continuous extension, written
// here in one form for all of them: on a step from (t, y) of size h,
//
//	y(t + θh) = y + Σ_{j=1…m} θ^j·w_j,   θ ∈ [0, 1],
//
// whose coefficients w_j [Dim] the step computes from its stages (the
// dense step, Plan.DenseStep): for an explicit method w_j = h·Σ_i
// R[i][j−1]·k_i (ERKInterp, with Vern7's six extra stages), for Rodas5P
// the power form of its order-4 extension, for Rosenbrock23 that of
// ode23s's order-2 one. Evaluating a save time then costs m·Dim
// multiply-adds (Plan.Interp, Horner's rule) on top of the step that
// brackets it, which a replay runs anyway; its gradient is the
// interpolant's VJP (θ^j·ȳ for w_j, ȳ for y), added to the reverse of that
// step through the dense step's VJP.

// SaveMode says how saved states (Problem.SaveAt) are computed.
type SaveMode uint8

const (
	// SaveInterpolate, the default, reads each save time from the
	// method's continuous extension of the step that brackets it: no
	// extra steps, but each bracketing step computes its extension's
	// coefficients (Vern7: six more stages) and each save time a Horner
	// sum: on the CPU engine 1,000 save times of a Kepler ensemble cost
	// about 1.4× one in Solve and 1.6× in Grad with Tsit5, 1.6× and 2.4×
	// with Vern7 (bench/RESULTS.md, docs/more-results.md). The
	// accuracy is the extension's (see Problem.SaveAt): within a small
	// multiple of the mesh states' error for Tsit5, Vern7 and
	// Rosenbrock23, up to 40× (59× at RelTol 1e-10) for Rodas5P's order-4
	// extension on smooth problems at tight tolerances.
	SaveInterpolate SaveMode = iota

	// SaveStep computes each save time as a genuine step of the method
	// from the mesh point before it (bracket and re-step): as accurate
	// as the mesh states, at the cost of one step (and, in a gradient,
	// one step's VJP) per save time and trajectory.
	SaveStep
)

func (m SaveMode) String() string {
	switch m {
	case SaveInterpolate:
		return "SaveInterpolate"
	case SaveStep:
		return "SaveStep"
	}
	return fmt.Sprintf("SaveMode(%d)", int(m))
}

// denseCoefficients returns the coefficients w_j[c] (j = 1…len(r[0]))
// = h·Σ_i r[i][j−1]·k_i[c] of an explicit method's extension, component
// by component: w[(j−1)·d + c]. With sumsFirst it emits every sum before
// the products with h: the same values and operations in another order,
// in which the executor computes the sums of a component together, as
// rows sharing their vectors (four rows a tile, each stage's values
// loaded once for them), rather than one row at a time between the
// products. Only a program that is not differentiated may take it: a
// reverse sweep adds its cotangents in the order of the values, so the
// dense step (whose reverse the gradient runs) keeps the first order.
func denseCoefficients(h tape.V, r [][]float64, k [][]tape.V, d int, sumsFirst bool) []tape.V {
	m := len(r[0])
	w := make([]tape.V, m*d)
	sums := make([]tape.V, m*d)
	has := make([]bool, m*d)
	col := make([]float64, len(r))
	for j := 0; j < m; j++ {
		for i := range r {
			col[i] = r[i][j]
		}
		for c := 0; c < d; c++ {
			x := j*d + c
			sums[x], has[x] = wsum(h, col, k, c)
			if !sumsFirst {
				w[x] = scaleSum(h, sums[x], has[x])
			}
		}
	}
	if sumsFirst {
		for x := range w {
			w[x] = scaleSum(h, sums[x], has[x])
		}
	}
	return w
}

// scaleSum returns h·v, or 0 where the sum has no term (!ok).
func scaleSum(h, v tape.V, ok bool) tape.V {
	if !ok {
		return h.Const(0)
	}
	return h.Mul(v)
}

// denseStep builds the dense step of an explicit method: inputs t, h, y,
// p, s; outputs y⁺ [d] (computed as Replay computes it) and the
// coefficients w [m·d] of its extension.
func (m *erk) denseStep(f *Field, fp *tape.Program) (*tape.Program, int, error) {
	tab, d := m.tab, f.Dim
	ip := tab.Interp
	if ip == nil {
		return nil, 0, fmt.Errorf("ode: %s has no continuous extension", tab.Name)
	}
	np := f.Params + f.Shared
	b, vs := tape.NewBuilderFor(fmt.Sprintf("%s.%s.dense_step", fp.Name, tab.Name), stepInputs(f))
	t, h, y, p := vs[0], vs[1], vs[2:2+d], vs[2+d:2+d+np]
	call := func(tt tape.V, yy []tape.V) []tape.V {
		return tape.CallFunc(fp, append(append([]tape.V{tt}, yy...), p...))
	}
	var outs []tape.V
	err := tape.Catch(fp.Name, func() {
		c := append(append([]float64(nil), tab.C...), ip.ExtraC...)
		a := append(append([][]float64(nil), tab.A...), ip.ExtraA...)
		k, _ := erkStages(c, a, t, h, y, nil, call)
		for j := 0; j < d; j++ {
			outs = append(outs, combine(y[j], h, tab.B, k, j))
		}
		outs = append(outs, denseCoefficients(h, ip.R, k, d, false)...)
	})
	if err != nil {
		return nil, 0, err
	}
	prog, err := b.Build(outs...)
	if err != nil {
		return nil, 0, err
	}
	nameDenseStepOutputs(prog, d)
	return tape.DeadCode(prog), ip.Terms(), nil
}

// nameDenseStepOutputs names the outputs y⁺[c] and w_j[c] of a dense step.
func nameDenseStepOutputs(p *tape.Program, d int) {
	for i := range p.Outputs {
		if i < d {
			p.Outputs[i].Name = fmt.Sprintf("y⁺[%d]", i)
		} else {
			p.Outputs[i].Name = fmt.Sprintf("w%d[%d]", (i-d)/d+1, (i-d)%d)
		}
	}
}

// buildInterp builds the interpolation program of an extension with m
// terms: inputs y [d], w [m·d] (w_j[c] at (j−1)·d + c) and θ, all per
// trajectory; outputs y + θ·(w_1 + θ·(w_2 + … + θ·w_m)) [d], Horner's
// rule in that order (scan.Step evaluates the same expression).
func buildInterp(name string, d, m int) (*tape.Program, error) {
	b := tape.NewBuilder(name+".interp", false)
	y := b.Inputs("y", d, false)
	w := b.Inputs("w", m*d, false)
	theta := b.Input("theta", false)
	outs := make([]tape.V, d)
	for c := range outs {
		acc := w[(m-1)*d+c]
		for j := m - 2; j >= 0; j-- {
			acc = w[j*d+c].Add(theta.Mul(acc))
		}
		outs[c] = y[c].Add(theta.Mul(acc))
	}
	return b.Build(outs...)
}

// buildDense composes a dense step and its interpolation into one
// program (Plan.Dense): inputs t, h, y, p, s, θ; outputs y(t + θh) [d].
func buildDense(f *Field, step, interp *tape.Program) (*tape.Program, error) {
	d := f.Dim
	b, vs := tape.NewBuilderFor(step.Name+".dense", stepInputs(f, tape.Input{Name: "theta"}))
	var outs []tape.V
	err := tape.Catch(step.Name, func() {
		r := tape.Call(step, vs[:len(vs)-1])
		in := append(append(append([]tape.V(nil), vs[2:2+d]...), r[d:]...), vs[len(vs)-1])
		outs = tape.Call(interp, in)
	})
	if err != nil {
		return nil, err
	}
	return b.Build(outs...)
}
