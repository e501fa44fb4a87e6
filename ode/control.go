package ode

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/tape"
)

// The adaptive step-size control as traced programs: the error norm, the
// accept/reject decision, the controller with its limits, the last-step
// clamp, the failure tests and the stiffness test (Plan.Control), and
// Hairer's initial step (Plan.Init). Every engine runs these programs, so
// every engine takes the same steps.

// The controller state of one trajectory: the inputs of Plan.Control that
// it updates, and its first outputs, in this order. Counts are exact
// integers held as float64.
const (
	StateT         = iota // time reached
	StateH                // step size to try next (on input: the step just tried)
	StateErrPrev          // error norm of the last accepted step (floored at 1e-4), 1 before the first
	StateLast             // 1 if the step tried ends at the end time
	StateAccepted         // accepted steps so far
	StateRejected         // rejected steps so far
	StateNonFinite        // rejected trial steps whose state or error estimate was not finite
	StateStiffRun         // consecutive-ish steps at the stability boundary (DOPRI5's iasti)
	StateCalmRun          // steps since the last one at the stability boundary (DOPRI5's nonsti)
	StateStiff            // 1 once the stiffness test has fired (sticky)
	NumState              // number of state entries
)

// StatusRunning is the status Plan.Control returns for a trajectory that
// goes on; any other value is a Status and ends the trajectory.
const StatusRunning = -1

// Stiffness test (Hairer & Wanner, Solving ODEs I, §IV.2; the DOPRI5 code):
// an accepted step whose h·ρ exceeds stiffBoundary times the method's
// real-axis stability size counts towards stiffRuns; stiffRuns such steps
// without calmRuns calm steps in between mark the trajectory stiff.
const (
	stiffBoundary = 3.25 / 3.3 // DOPRI5's margin below its stability size
	stiffRuns     = 15
	calmRuns      = 6
)

// Method Auto's stiffness test (its Tsit5 plan's control, Plan.Variant
// "auto"; see Auto): a step counts where h·ρ exceeds autoBoundary times
// the stability size, DifferentialEquations.jl's AutoSwitch margin
// (stifftol 9/10), and its error norm is at least autoMinErr.
//
// At the stability limit the controller settles where h·ρ sits a few per
// cent below the stability size (Tsit5 on ROBER at rtol 1e-8: h·ρ = 3.35
// to 3.45 for 1,900 steps, with the error norm 0.59 at every step), under
// DOPRI5's margin 3.45. The error floor keeps out the steps whose size the
// controller's growth limit chose, not their error (the first steps from
// Hairer's initial estimate, 1e-21 on POLL, each 5× the last with error
// norms below 1e-4): their h·ρ measures how fast components grow from 0
// relative to themselves (about 4 on POLL, at every step of the ramp),
// not the step's stability, and the estimates' differences there are at
// the rounding of the stages.
const (
	autoBoundary = 0.9
	autoMinErr   = 0.01
)

// stiffTest is a control program's stiffness test: a step counts where
// h·ρ > boundary·stab and its error norm is at least minErr.
type stiffTest struct {
	boundary, minErr float64
}

// plainStiffTest is the test of Tsit5's and Vern7's own plans.
var plainStiffTest = stiffTest{boundary: stiffBoundary}

// stiffTestOf returns the stiffness test of a plan of variant v.
func stiffTestOf(v string) stiffTest {
	if v == variantAuto {
		return stiffTest{boundary: autoBoundary, minErr: autoMinErr}
	}
	return plainStiffTest
}

// controlInputs lists the inputs of the control program for dimension d.
func controlInputs(d int) []tape.Input {
	names := [NumState]string{"t", "h", "errprev", "last", "accepted", "rejected", "nonfinite", "stiffrun", "calmrun", "stiff"}
	in := make([]tape.Input, 0, NumState+1+3*d+1+2+d)
	for _, n := range names {
		in = append(in, tape.Input{Name: n})
	}
	in = append(in, tape.Input{Name: "t1"})
	for _, w := range []string{"y", "y⁺", "err"} {
		for c := 0; c < d; c++ {
			in = append(in, tape.Input{Name: fmt.Sprintf("%s[%d]", w, c)})
		}
	}
	in = append(in, tape.Input{Name: "hrho"})
	in = append(in, tape.Input{Name: "rtol", Shared: true})
	for c := 0; c < d; c++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("atol[%d]", c), Shared: true})
	}
	return append(in, tape.Input{Name: "maxsteps", Shared: true})
}

// buildControl traces the control program of a method with controller ctl
// for dimension d. stab is the method's real-axis stability size (0: no
// stiffness test), and test the stiffness test's boundary and error floor.
//
// Inputs (per trajectory unless noted): state[NumState] (see StateT), t1,
// y[d] (the state before the step), y⁺[d] and err[d] (the trial step's
// outputs), hρ (its stiffness estimate), then shared: rtol, atol[d],
// maxsteps. Outputs: state'[NumState], accept (1 or 0) and status
// (StatusRunning, or the final Status).
//
// The arithmetic is that of the step-by-step recorder it replaces, so
// meshes are unchanged bit for bit: err = sqrt(mean((e_c/sc_c)²)) with
// sc_c = atol_c + rtol·max(|y_c|, |y⁺_c|) summed in component order; a
// non-finite y⁺ or err rejects the step with the smallest factor; an
// accepted step takes h·clip(safety·max(err, 1e-10)^(−β1)·errprev^(β2)),
// a rejected one h·clip(safety·err^(−β1)), powers as exp(y·log x); the
// trajectory ends with OK after an accepted last step, with
// MaxStepsReached (or NonFinite if most rejections were non-finite) when
// accepted + rejected reaches maxsteps, and with StepSizeUnderflow (or
// NonFinite) when the step after a rejected one would fall below the
// step-size floor 4·ε·max(|t|, |t + h|), or a step would not advance t.
// After an accepted step the next step is at least 4·ε·|t| (the error
// test of that step decides), so a first step below the floor (a tiny
// Dt0, or Hairer's estimate far from the time origin) grows instead of
// failing. The next step is clamped to end exactly at t1 (it is the last
// step when h ≥ t1 − t or t + h ≥ t1 in float64).
//
// Every step tried is an exact advance (exactAdvance): h is replaced by
// (t + h) − t, so that t + h is exact and the state integrates exactly
// the time that t advances. Far from the time origin (|t| = 1e12, where
// float64 resolves 1.2e-4) the steps then sum exactly to T1 − T0 and a
// replay's t += h reproduces the record's times; near the origin h
// changes by at most half an ulp of t.
func buildControl(ctl Controller, d int, stab float64, test stiffTest) (*tape.Program, error) {
	in := controlInputs(d)
	return tape.Trace("control", in, func(v []tape.V) []tape.V {
		st := v[:NumState]
		t1 := v[NumState]
		y := v[NumState+1 : NumState+1+d]
		yn := v[NumState+1+d : NumState+1+2*d]
		e := v[NumState+1+2*d : NumState+1+3*d]
		hrho := v[NumState+1+3*d]
		rtol := v[NumState+2+3*d]
		atol := v[NumState+3+3*d : NumState+3+4*d]
		maxSteps := v[NumState+3+4*d]
		c := func(x float64) tape.V { return rtol.Const(x) }
		one, zero := c(1), c(0)
		not := func(x tape.V) tape.V { return one.Sub(x) }
		or := func(a, b tape.V) tape.V { return tape.Max(a, b) }
		and := func(a, b tape.V) tape.V { return tape.Min(a, b) }

		t, h, ep, last := st[StateT], st[StateH], st[StateErrPrev], st[StateLast]
		acc, rej, nf := st[StateAccepted], st[StateRejected], st[StateNonFinite]

		// The error norm; x − x is 0 exactly when x is finite.
		var sum, fin tape.V
		for i := 0; i < d; i++ {
			sc := atol[i].Add(rtol.Mul(tape.Max(y[i].Abs(), yn[i].Abs())))
			q := e[i].Div(sc).Square()
			fi := yn[i].Sub(yn[i])
			if i == 0 {
				sum, fin = q, fi
			} else {
				sum, fin = sum.Add(q), fin.Add(fi)
			}
		}
		errn := sum.Div(c(float64(d))).Sqrt()
		fin = fin.Add(errn.Sub(errn))
		bad := not(tape.Eq(fin, zero))
		accept := tape.Select(bad, zero, tape.Le(errn, one))
		rejected := not(accept)

		// One power serves both branches: a rejected step has err > 1, so
		// max(err, 1e-10) is err itself there.
		pow := func(x tape.V, y float64) tape.V { return c(y).Mul(x.Log()).Exp() }
		base := c(ctl.Safety).Mul(pow(tape.Max(errn, c(1e-10)), -ctl.Beta1))
		facc := base
		if ctl.Beta2 != 0 {
			facc = facc.Mul(pow(ep, ctl.Beta2))
		}
		factor := tape.Select(bad, c(ctl.FactorMin), tape.Select(accept, facc, base))
		factor = tape.Min(c(ctl.FactorMax), tape.Max(c(ctl.FactorMin), factor))

		acc1 := acc.Add(accept)
		rej1 := rej.Add(rejected)
		nf1 := nf.Add(bad)
		t1n := tape.Select(accept, t.Add(h), t)
		ep1 := tape.Select(accept, tape.Max(errn, c(1e-4)), ep)

		// The stiffness test on accepted steps.
		sr, cr, stiff := st[StateStiffRun], st[StateCalmRun], st[StateStiff]
		if stab > 0 {
			hot := and(accept, tape.Gt(hrho, c(test.boundary*stab)))
			if test.minErr > 0 {
				hot = and(hot, tape.Ge(errn, c(test.minErr)))
			}
			calm := and(accept, not(hot))
			sr = tape.Select(hot, sr.Add(one), sr)
			cr = tape.Select(hot, zero, tape.Select(calm, cr.Add(one), cr))
			reset := tape.Ge(cr, c(calmRuns))
			sr = tape.Select(reset, zero, sr)
			cr = tape.Select(reset, zero, cr)
			stiff = or(stiff, tape.Ge(sr, c(stiffRuns)))
		}

		hn := h.Mul(factor)
		span := t1.Sub(t1n)
		// After an accepted step the next one is at least the floor at the
		// new time (the error test of that step decides); a rejected step
		// that would fall below the floor, or a step that does not advance
		// t, ends the trajectory.
		hn = tape.Select(accept, tape.Max(hn, c(stepFloor).Mul(t1n.Abs())), hn)
		floor := c(stepFloor).Mul(tape.Max(t1n.Abs(), t1n.Add(hn).Abs()))
		under := or(and(rejected, tape.Lt(hn, floor)), tape.Eq(t1n.Add(hn), t1n))
		lastn := or(tape.Ge(hn, span), tape.Ge(t1n.Add(hn), t1))
		hn = tape.Select(lastn, span, hn)
		// The step tried is the advance t + h − t that float64 represents
		// exactly (see exactAdvance).
		hn = exactAdvance(t1n, hn)

		mostlyNF := tape.Gt(nf1.MulC(2), rej1)
		status := c(StatusRunning)
		status = tape.Select(under, tape.Select(or(bad, mostlyNF), c(float64(NonFinite)), c(float64(StepSizeUnderflow))), status)
		status = tape.Select(tape.Ge(acc1.Add(rej1), maxSteps), tape.Select(mostlyNF, c(float64(NonFinite)), c(float64(MaxStepsReached))), status)
		status = tape.Select(and(accept, last), c(float64(OK)), status)

		out := make([]tape.V, NumState, NumState+2)
		out[StateT], out[StateH], out[StateErrPrev], out[StateLast] = t1n, hn, ep1, lastn
		out[StateAccepted], out[StateRejected], out[StateNonFinite] = acc1, rej1, nf1
		out[StateStiffRun], out[StateCalmRun], out[StateStiff] = sr, cr, stiff
		return append(out, accept, status)
	})
}

// exactAdvance returns (t + h) − t: the advance of t by h that float64
// represents, so that t + exactAdvance(t, h) == t + h exactly (the
// subtraction is exact by Sterbenz's lemma when |h| ≤ |t|; for |h| > |t|
// it differs from h by at most half an ulp of t + h). A step of that
// size moves the state by exactly the time it moves t.
func exactAdvance(t, h tape.V) tape.V { return t.Add(h).Sub(t) }

// buildInit traces the initial-step program of a method of order p for
// field program fp (dimension d, np = Params + Shared parameters). With
// dt0 > 0 the first step is dt0; otherwise Hairer's algorithm (Solving
// ODEs I, §II.4), with the arithmetic of the recorder it replaces.
//
// The step is at least the step floor 4ε·|t0| and an exact advance of t0
// (see exactAdvance); on any span (1e-300 or 1e300 long, at t0 = 0 or far
// from it) it is positive and at most the span, whatever Hairer's
// estimates underflow or overflow to.
//
// Inputs: t0, t1, y[d], p[Params], s[Shared] (shared), then shared rtol,
// atol[d]. Outputs: h, last (1 if h reaches t1; h is then t1 − t0, the
// exact advance to t1) and f0[d] = f(t0, y0). It evaluates the field twice
// (once with dt0).
func buildInit(f *Field, fp *tape.Program, order int, dt0 float64) (*tape.Program, error) {
	d := f.Dim
	in := []tape.Input{{Name: "t0"}, {Name: "t1"}}
	in = append(in, fp.Inputs[1:]...)
	in = append(in, tape.Input{Name: "rtol", Shared: true})
	for c := 0; c < d; c++ {
		in = append(in, tape.Input{Name: fmt.Sprintf("atol[%d]", c), Shared: true})
	}
	np := f.Params + f.Shared
	var nout int
	prog, err := tape.Trace(fp.Name+".init", in, func(v []tape.V) []tape.V {
		t0, t1 := v[0], v[1]
		y, p := v[2:2+d], v[2+d:2+d+np]
		rtol, atol := v[2+d+np], v[3+d+np:3+2*d+np]
		c := func(x float64) tape.V { return t0.Const(x) }
		call := func(t tape.V, y []tape.V) []tape.V {
			return tape.CallFunc(fp, append(append([]tape.V{t}, y...), p...))
		}
		f0 := call(t0, y)
		span := t1.Sub(t0)
		var h tape.V
		if dt0 > 0 {
			h = c(dt0)
		} else {
			// rms returns sqrt(mean((x_i/sc_i)²)), sc_i = atol_i + rtol·|y_i|.
			rms := func(x func(i int) tape.V) tape.V {
				var s tape.V
				for i := 0; i < d; i++ {
					sc := atol[i].Add(rtol.Mul(y[i].Abs()))
					q := x(i).Div(sc).Square()
					if i == 0 {
						s = q
					} else {
						s = s.Add(q)
					}
				}
				return s.Div(c(float64(d))).Sqrt()
			}
			d0 := rms(func(i int) tape.V { return y[i] })
			d1 := rms(func(i int) tape.V { return f0[i] })
			// Hairer's fallback guesses 1e-6 and 1e-6 (below) assume spans of
			// order 1: on a longer span they are 1e-6·span, so that a span
			// of 1e300 is not crossed by growing from 1e-6 five-fold per
			// step (430 steps). On spans up to 1 they are Hairer's.
			guess := c(1e-6).Mul(tape.Max(c(1), span))
			big := tape.Min(tape.Ge(d0, c(1e-5)), tape.Ge(d1, c(1e-5)))
			h0 := tape.Select(big, c(0.01).Mul(d0).Div(d1), guess)
			ok := tape.Min(tape.Gt(h0, c(0)), tape.Eq(h0.Sub(h0), c(0)))
			h0 = tape.Select(ok, h0, guess)
			h0 = tape.Min(h0, span)
			y1 := make([]tape.V, d)
			for i := range y1 {
				y1[i] = y[i].Add(h0.Mul(f0[i]))
			}
			f1 := call(t0.Add(h0), y1)
			r := rms(func(i int) tape.V { return f1[i].Sub(f0[i]) })
			d2 := r.Div(h0)
			dm := tape.Max(d1, d2)
			nan := tape.Max(tape.Ne(d1, d1), tape.Ne(d2, d2))
			tiny := tape.Max(tape.Le(dm, c(1e-15)), nan)
			q := c(1 / float64(order+1))
			h1 := c(0.01).Div(dm).Pow(q)
			// On a tiny span h0 is tiny too, and d2 = r/h0 may overflow
			// where (0.01·h0/r)^q, the same quantity, does not.
			over := tape.Ne(dm.Sub(dm), c(0))
			h1 = tape.Select(over, c(0.01).Mul(h0).Div(r).Pow(q), h1)
			h1 = tape.Select(tiny, tape.Max(guess, h0.Mul(c(1e-3))), h1)
			h = tape.Min(c(100).Mul(h0), h1)
			// Whatever underflowed or overflowed, the first step is
			// positive: h0 (at most the span) if nothing better.
			good := tape.Min(tape.Gt(h, c(0)), tape.Eq(h.Sub(h), c(0)))
			h = tape.Select(good, h, h0)
		}
		// At least the step floor 4ε·|t0| (a smaller step would not move t
		// as it moves the state; the error test of the first step
		// decides), at most the span, and an exact advance of t0.
		h = tape.Max(h, c(stepFloor).Mul(t0.Abs()))
		last := tape.Max(tape.Ge(h, span), tape.Ge(t0.Add(h), t1))
		h = tape.Select(last, span, h)
		h = exactAdvance(t0, h)
		out := append([]tape.V{h, last}, f0...)
		nout = len(out)
		return out
	})
	if err != nil {
		return nil, fmt.Errorf("ode: field %s: initial step: %w", f.name(), err)
	}
	if nout != 2+d {
		return nil, fmt.Errorf("ode: field %s: initial step has %d outputs, want %d", f.name(), nout, 2+d)
	}
	return prog, nil
}

// stabilitySize returns the real-axis stability size of an explicit method
// (OrdinaryDiffEq's alg_stability_size), or 0 if unknown.
func stabilitySize(name string) float64 {
	switch name {
	case "Tsit5":
		return 3.5068
	case "Vern7":
		return 4.64
	}
	return 0
}
