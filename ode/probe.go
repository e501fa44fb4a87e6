package ode

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/gradsolve-go/gradsolve/tape"
)

// The stability probe of an explicit method's record (Job.CheckStability):
// the check that the recorded steps lie inside the method's stability
// region for every mode of ∂f/∂y, excited by the solution or not.
//
// The stiffness test of the controller (buildControl) estimates ρ(∂f/∂y)
// from the stages' differences along the solution, so it sees only the
// modes the solution excites. A fast mode that the solution does not
// excite (a component exactly 0 that only decays, as an empty gut
// compartment of a pharmacokinetic model, or a chemical system at rest)
// leaves the error estimate alone, and the controller takes steps set by
// the slow modes, far outside the stability region of the fast one: the
// solution is right, but the discrete map amplifies that mode by
// |R(hμ)| ≫ 1 a step, where the problem damps it, and the exact
// derivative of the replay (the discrete adjoint) is that amplification:
// a gradient of 1e116 where the true one is 0.55. The probe finds such
// modes by power iteration on ∂f/∂y with two Jacobian-vector products
// every ProbeEvery trials (Plan.ProbeDue), and bounds the amplification
// the probed steps give the dominant mode.
const (
	// probeEvery is how many trials apart the probe runs
	// (Plan.ProbeEvery; also on the fifth, Plan.ProbeDue).
	probeEvery = 16

	// probeGrowth is the largest amplification of the probed mode, over
	// any run of consecutive probed steps, that a trajectory may reach
	// before it is marked stiff (Plan.ProbeGrowth). The non-stiff
	// problems of the tests reach at most 33 (Kepler and Lorenz-96 at
	// RelTol 1e-2, with ProbeEvery 4), the unexcited stiff modes 1e7 and
	// more at their first probed step.
	probeGrowth = 1e3
)

// probeOff, set by tests, turns the probe off (Job.CheckStability is
// then never set): the benchmarks that measure its cost, and the tests
// that show what it prevents.
var probeOff atomic.Bool

// buildProbe traces the stability probe of field f (traced as fp) for a
// method with stability coefficients gamma (see Plan.Probe): one step of
// power iteration on J = ∂f/∂y at the state a trial starts from, and the
// growth of the probed mode over the trial's step if accepted.
//
// Inputs: t, h, y[d], p[Params], s[Shared] (shared), v[d], rprev, u,
// accept. Outputs: v'[d], rprev', u', stiff. Two steps of power
// iteration from v: w1 = Jv, r1 = ‖w1‖₂/‖v‖₂, w2 = J·w1/‖w1‖₂, r2 =
// ‖w2‖₂; v' = w2/‖w2‖₂, rprev' = r2 and the estimate ρ = √(r1·r2) (the
// geometric mean of two ratios: a single ratio is bounded by ‖J‖₂, which
// a far from normal Jacobian puts far above its modes, and a dominant
// pair ±μ, as of x” = g(x), makes single ratios alternate about |μ|).
// Where a norm is 0 or not finite, v' = v, rprev' = rprev and u' = u.
// Where accept is 1, u' = max(1, u·|R(−|h|·ρ)|), R(z) = Σ_j gamma_j z^j
// by Horner's rule (u' = +Inf where |h|·ρ > 1e30), else u' = u; stiff
// is 1 where u' > growth, else 0. It costs two Jacobian-vector products.
func buildProbe(f *Field, fp *tape.Program, gamma []float64, growth float64) (*tape.Program, error) {
	d := f.Dim
	wrt := make([]int, d)
	for c := range wrt {
		wrt[c] = 1 + c
	}
	jvp, err := tape.JVP(fp, wrt)
	if err != nil {
		return nil, fmt.Errorf("ode: field %s: stability probe: %w", f.name(), err)
	}
	in := []tape.Input{fp.Inputs[0], {Name: "h"}}
	in = append(in, fp.Inputs[1:]...)
	for c := 0; c < d; c++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("v[%d]", c)})
	}
	in = append(in, tape.Input{Name: "rprev"}, tape.Input{Name: "u"}, tape.Input{Name: "accept"})
	nf := len(fp.Inputs)
	prog, err := tape.Trace(fp.Name+".probe", in, func(x []tape.V) []tape.V {
		h := x[1]
		args := append([]tape.V{x[0]}, x[2:1+nf]...)
		v := x[1+nf : 1+nf+d]
		rprev, u, accept := x[1+nf+d], x[2+nf+d], x[3+nf+d]
		c := func(a float64) tape.V { return h.Const(a) }
		zero, one := c(0), c(1)
		norm2 := func(x []tape.V) tape.V {
			n := x[0].Square()
			for _, xi := range x[1:] {
				n = n.Add(xi.Square())
			}
			return n
		}
		// finite: x − x is 0 exactly when x is finite.
		finite := func(x tape.V) tape.V { return tape.Eq(x.Sub(x), zero) }
		// Two steps of the power iteration, w1 = Jv and w2 = J·w1/‖w1‖:
		// ρ = √(r1·r2), the geometric mean of their ratios. A single
		// ratio ‖Jv‖/‖v‖ is bounded by ‖J‖₂, not ρ(J), and a far from
		// normal Jacobian reads far above its modes (a close approach to
		// a point mass, J = [[0, I], [G, B]] with G ~ 2μ/r³ ≈ 1e5 and
		// modes ±√‖G‖ ≈ ±300: Arenstorf's orbit at its start), where the
		// pair's product is ‖G‖ and its root the modes' size; a dominant
		// pair ±μ, whose single ratios alternate about |μ|, also gives |μ|.
		w1 := tape.Call(jvp, append(args, v...))[d:]
		nv, nw1 := norm2(v), norm2(w1)
		live1 := tape.Min(tape.Min(tape.Gt(nw1, zero), tape.Gt(nv, zero)), finite(nw1))
		n1 := tape.Select(live1, nw1, one).Sqrt()
		u1v := make([]tape.V, d)
		for i := 0; i < d; i++ {
			u1v[i] = tape.Select(live1, w1[i].Div(n1), v[i])
		}
		w2 := tape.Call(jvp, append(args, u1v...))[d:]
		nw2 := norm2(w2)
		live := tape.Min(live1, tape.Min(tape.Gt(nw2, zero), finite(nw2)))
		n2 := tape.Select(live, nw2, one).Sqrt()
		out := make([]tape.V, d, d+3)
		for i := 0; i < d; i++ {
			out[i] = tape.Select(live, w2[i].Div(n2), v[i])
		}
		r1 := n1.Div(tape.Select(live, nv, one).Sqrt())
		r := n2 // ‖J·w1/‖w1‖‖: the second ratio
		rho := r1.Mul(r).Sqrt()
		// |R(−x)|, x = |h|·ρ.
		xx := h.Abs().Mul(rho)
		z := xx.Neg()
		pr := c(gamma[len(gamma)-1])
		for j := len(gamma) - 2; j >= 0; j-- {
			pr = pr.Mul(z).Add(c(gamma[j]))
		}
		amp := tape.Select(tape.Gt(xx, c(1e30)), c(math.Inf(1)), pr.Abs())
		grow := tape.Min(live, accept)
		u1 := tape.Select(grow, tape.Max(one, u.Mul(amp)), u)
		out = append(out, tape.Select(live, r, rprev), u1, tape.Gt(u1, c(growth)))
		return out
	})
	if err != nil {
		return nil, fmt.Errorf("ode: field %s: stability probe: %w", f.name(), err)
	}
	for i := 0; i < d; i++ {
		prog.Outputs[i].Name = fmt.Sprintf("v'[%d]", i)
	}
	prog.Outputs[d].Name = "rprev'"
	prog.Outputs[d+1].Name = "u'"
	prog.Outputs[d+2].Name = "stiff"
	return prog, nil
}

// probeStart returns the probe's start vector of dimension d (Plan.Probe):
// v_c = ±(1 + frac(c·√2)), alternating signs, so that no structure of a
// field (equal or opposite components) makes it orthogonal to a mode.
func probeStart(d int) []float64 {
	v := make([]float64, d)
	for c := range v {
		x := float64(c) * math.Sqrt2
		v[c] = 1 + (x - math.Floor(x))
		if c%2 == 1 {
			v[c] = -v[c]
		}
	}
	return v
}

// stabilityPoly returns the coefficients γ_0…γ_s of an explicit
// Runge–Kutta method's stability function R(z) = Σ_j γ_j z^j (the step's
// map on y' = μy, z = hμ): γ_0 = 1, γ_j = bᵀA^(j−1)·1.
func stabilityPoly(tab *ERKTableau) []float64 {
	s := tab.Stages()
	g := []float64{1}
	u := make([]float64, s) // A^(j−1)·1
	for i := range u {
		u[i] = 1
	}
	for j := 1; j <= s; j++ {
		sum := 0.0
		for i, b := range tab.B {
			sum += b * u[i]
		}
		g = append(g, sum)
		next := make([]float64, s)
		for i := 0; i < s; i++ {
			for k, a := range tab.A[i] {
				next[i] += a * u[k]
			}
		}
		u = next
	}
	// Trailing zeros (a method whose last stage has weight 0).
	for len(g) > 1 && g[len(g)-1] == 0 {
		g = g[:len(g)-1]
	}
	return g
}
