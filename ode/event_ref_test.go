package ode_test

import (
	"math"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// An independent reference for events: a problem whose flow between
// events has a closed form, its events located by a fine scan and
// bisection to the last bit (refSolve), and the gradients of the result
// by central differences of it.

// refEvent is an event of a reference problem, on plain float64s.
type refEvent struct {
	g        func(t float64, y, p []float64) float64
	dir      int
	terminal bool
	apply    func(t float64, y, p []float64) []float64
}

// refProblem is a problem whose flow has a closed form: flow(y, p, τ) is
// the state τ after state y (an autonomous field).
type refProblem struct {
	flow   func(y, p []float64, tau float64) []float64
	events []refEvent
	scan   float64 // the scan's step: shorter than any two crossings' distance
}

// refCrossed is ode's crossing rule: from < 0 to ≥ 0 rising, from > 0 to
// ≤ 0 falling.
func refCrossed(dir int, g0, g1 float64) bool {
	return dir >= 0 && g0 < 0 && g1 >= 0 || dir <= 0 && g0 > 0 && g1 <= 0
}

// refResult is a reference solution: the final state, the end time, the
// events' times and indices, and the states at the save times.
type refResult struct {
	y     []float64
	t     float64
	times []float64
	which []int
	saves [][]float64
}

// solve solves from T0 to T1, saving at the increasing times saveAt (the
// state after a jump at an event time, NaN past a terminal event).
func (r refProblem) solve(y0, p []float64, T0, T1 float64, saveAt []float64) refResult {
	t, y := T0, append([]float64(nil), y0...)
	var o refResult
	o.saves = make([][]float64, len(saveAt))
	k := 0
	save := func(upTo float64, at func(tau float64) []float64) {
		for ; k < len(saveAt) && saveAt[k] < upTo; k++ {
			o.saves[k] = at(saveAt[k])
		}
	}
	save(math.Nextafter(T0, math.Inf(1)), func(float64) []float64 { return append([]float64(nil), y...) })
	fired := -1
	for {
		span := T1 - t
		best, bestE := math.Inf(1), -1
		for e, ev := range r.events {
			g := func(tau float64) float64 { return ev.g(t+tau, r.flow(y, p, tau), p) }
			g0, prev := g(0), 0.0
			if e == fired {
				g0 = 0 // not a crossing at the start
			}
			for s := 1; prev < span && prev < best; s++ {
				tau := math.Min(float64(s)*r.scan, span)
				g1 := g(tau)
				if refCrossed(ev.dir, g0, g1) {
					lo, hi, a := prev, tau, g0
					for lo < hi {
						mid := lo + (hi-lo)/2
						if mid <= lo || mid >= hi {
							break
						}
						if gm := g(mid); refCrossed(ev.dir, a, gm) {
							hi = mid
						} else {
							lo, a = mid, gm
						}
					}
					if hi < best {
						best, bestE = hi, e
					}
					break
				}
				g0, prev = g1, tau
			}
		}
		from, yf := t, y
		at := func(tau float64) []float64 { return r.flow(yf, p, tau-from) }
		if bestE < 0 {
			save(T1, at)
			y = r.flow(y, p, span)
			save(math.Inf(1), func(float64) []float64 { return append([]float64(nil), y...) })
			o.y, o.t = y, T1
			return o
		}
		te := t + best
		save(te, at)
		y = r.flow(y, p, best)
		o.times, o.which = append(o.times, te), append(o.which, bestE)
		ev := r.events[bestE]
		if ev.terminal {
			save(math.Nextafter(te, math.Inf(1)), func(float64) []float64 { return append([]float64(nil), y...) })
			save(math.Inf(1), func(float64) []float64 { return []float64{math.NaN(), math.NaN()} })
			o.y, o.t = y, te
			return o
		}
		if ev.apply != nil {
			y = ev.apply(te, y, p)
		}
		t, fired = te, bestE
		if len(o.times) > 1000 {
			panic("refProblem: more than 1000 events")
		}
	}
}

// dragBallFlow is the flight of a ball under gravity and linear drag k
// from (x, v): v(τ) = (v + g/k)·e^{−kτ} − g/k, x(τ) = x + (v + g/k)·(1 −
// e^{−kτ})/k − gτ/k; complex, for complex-step derivatives.
func dragBallFlow(x, v, k, tau complex128) (complex128, complex128) {
	a := v + gravity/k
	e := cmplx.Exp(-k * tau)
	return x + a*(1-e)/k - gravity*tau/k, a*e - gravity/k
}

// dragBall is a ball with linear drag bouncing on the floor x = 0: x' =
// v, v' = −g − k·v, p = (e, k) per trajectory (restitution, drag); the
// event "floor" (x falls to 0) sets v to −e·v.
func dragBall() (ode.Field, ode.Event, refProblem) {
	f := ode.Field{Name: "drag-ball", Dim: 2, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{y[1], y[1].Mul(p[1]).Neg().Sub(y[1].Const(gravity))}
	}}
	ev := ode.Event{Name: "floor", Direction: -1,
		G:     func(_ tape.V, y, _ []tape.V) tape.V { return y[0] },
		Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0], p[0].Neg().Mul(y[1])} }}
	ref := refProblem{scan: 1e-3,
		flow: func(y, p []float64, tau float64) []float64 {
			k := p[1]
			a := y[1] + gravity/k
			em := -math.Expm1(-k * tau) // 1 − e^{−kτ}, to the last bit
			return []float64{y[0] + a*em/k - gravity*tau/k, a*(1-em) - gravity/k}
		},
		events: []refEvent{{g: func(_ float64, y, _ []float64) float64 { return y[0] }, dir: -1,
			apply: func(_ float64, y, p []float64) []float64 { return []float64{y[0], -p[0] * y[1]} }}},
	}
	return f, ev, ref
}

// pkDose is a two-compartment pharmacokinetic model, gut a and central
// c: a' = −ka·a, c' = ka·a − ke·c, p = (ka, ke, D, Tend) per trajectory.
// Event "dose" (c falls to 0.3) puts D into the gut, a jump of the
// component the condition does not read; event "stop" (t reaches Tend)
// is terminal.
func pkDose() (ode.Field, []ode.Event, refProblem) {
	const low = 0.3
	f := ode.Field{Name: "pk2", Dim: 2, Params: 4, F: func(_ tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Neg().Mul(y[0]), p[0].Mul(y[0]).Sub(p[1].Mul(y[1]))}
	}}
	evs := []ode.Event{
		{Name: "dose", Direction: -1, G: func(_ tape.V, y, _ []tape.V) tape.V { return y[1].AddC(-low) },
			Apply: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{y[0].Add(p[2]), y[1]} }},
		{Name: "stop", Direction: 1, Terminal: true, G: func(t tape.V, _, p []tape.V) tape.V { return t.Sub(p[3]) }},
	}
	ref := refProblem{scan: 1e-3,
		flow: func(y, p []float64, tau float64) []float64 {
			ka, ke := p[0], p[1]
			ea, ee := math.Exp(-ka*tau), math.Exp(-ke*tau)
			return []float64{y[0] * ea, y[1]*ee + y[0]*ka/(ke-ka)*(ea-ee)}
		},
		events: []refEvent{
			{g: func(_ float64, y, _ []float64) float64 { return y[1] - low }, dir: -1,
				apply: func(_ float64, y, p []float64) []float64 { return []float64{y[0] + p[2], y[1]} }},
			{g: func(t float64, _, p []float64) float64 { return t - p[3] }, dir: 1, terminal: true},
		},
	}
	return f, evs, ref
}

// refCase is an ensemble of a reference problem: random initial states
// and parameters per trajectory.
type refCase struct {
	name  string
	f     ode.Field
	evs   []ode.Event
	ref   refProblem
	y0, p func(rng *rand.Rand) []float64
	T     float64
}

func refCases() []refCase {
	bf, bev, bref := dragBall()
	pf, pevs, pref := pkDose()
	return []refCase{
		// Two to four bounces each, before any ball comes to rest.
		{"drag-ball", bf, []ode.Event{bev}, bref,
			func(r *rand.Rand) []float64 { return []float64{0.8 + 0.4*r.Float64(), 0.5 * r.Float64()} },
			func(r *rand.Rand) []float64 { return []float64{0.75 + 0.15*r.Float64(), 0.1 + 0.4*r.Float64()} }, 1.5},
		// One to three doses, then the stop.
		{"pk-dose", pf, pevs, pref,
			func(r *rand.Rand) []float64 { return []float64{0, 1 + r.Float64()} },
			func(r *rand.Rand) []float64 {
				return []float64{1 + r.Float64(), 0.2 + 0.3*r.Float64(), 0.5 + r.Float64(), 8 + 4*r.Float64()}
			}, 15},
	}
}

// draw returns n trajectories' initial states and parameters.
func (c refCase) draw(n int, seed uint64) (y0, p []float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < n; i++ {
		y0 = append(y0, c.y0(rng)...)
		p = append(p, c.p(rng)...)
	}
	return y0, p
}

// eventTimes returns trajectory i's event times and events from its
// mesh.
func eventTimes(m *ode.Mesh, i int) (times []float64, which []int) {
	ts := meshTimes(m, i)
	for s := 0; s < m.Len[i]; s++ {
		if e := m.Events[s*m.N+i]; e > 0 {
			times, which = append(times, ts[s+1]), append(which, int(e)-1)
		}
	}
	return times, which
}

// TestEventReference checks, for every method, ensembles of 1, 3, 37 and
// (Tsit5) 1001 trajectories with parameters of their own (a ball with
// drag and restitution bouncing several times; a two-compartment dose
// model with two events, one terminal, whose jump changes the component
// the condition does not read) against the reference: the events, their
// order and times, the final states. The event times' error is that of
// the states (the locator adds none): at RelTol 1e-10 within 1e-10
// relative (the target; measured 1e-11 with Tsit5, 2e-12 with
// Vern7, 4e-13 with Rodas5P), at 1e-8 within 1e-8; Rosenbrock23's
// global error is ~1e3 of its tolerance (an order-2 method over
// thousands of steps), so its bounds are 1e-6 and 1e-5.
func TestEventReference(t *testing.T) {
	t.Parallel()
	for _, c := range refCases() {
		for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
			for _, n := range []int{1, 3, 37, 1001} {
				for _, rtol := range []float64{1e-8, 1e-10} {
					if n == 1001 && (m != ode.Tsit5 || rtol < 1e-8) || m == ode.Rosenbrock23 && n > 3 {
						continue
					}
					tolT, tolY := rtol, 30*rtol
					if m == ode.Rosenbrock23 {
						tolT, tolY = 3e-6, 1e-5
						if rtol < 1e-8 {
							tolT, tolY = 1e-7, 1e-6
						}
					}
					y0, p := c.draw(n, uint64(n))
					d, np := c.f.Dim, c.f.Params
					sv := solverT(t, c.f, &ode.Settings{Method: m, RelTol: rtol, AbsTol: rtol * 1e-2, Events: c.evs})
					mesh, sol, err := sv.Record(&ode.Problem{Field: c.f, N: n, Y0: y0, P: p, T1: c.T})
					if err != nil {
						t.Fatalf("%s %s n=%d rtol %g: %v", c.name, m.Name(), n, rtol, err)
					}
					worstT, worstY := 0.0, 0.0
					for i := 0; i < n; i++ {
						want := c.ref.solve(y0[i*d:(i+1)*d], p[i*np:(i+1)*np], 0, c.T, nil)
						got, which := eventTimes(mesh, i)
						if len(got) != len(want.times) || sol.Events[i] != len(want.times) {
							t.Errorf("%s %s n=%d rtol %g: trajectory %d: %d events (%d marked), reference %d at %v",
								c.name, m.Name(), n, rtol, i, sol.Events[i], len(got), len(want.times), want.times)
							continue
						}
						for k := range got {
							worstT = max(worstT, math.Abs(got[k]-want.times[k])/want.times[k])
							if which[k] != want.which[k] {
								t.Errorf("%s %s: trajectory %d: event %d is %s, reference %s", c.name, m.Name(), i, k, c.evs[which[k]].Name, c.evs[want.which[k]].Name)
							}
						}
						worstT = max(worstT, math.Abs(sol.T[i]-want.t)/want.t)
						for x := 0; x < d; x++ {
							worstY = max(worstY, math.Abs(sol.Y[i*d+x]-want.y[x])/math.Max(1, math.Abs(want.y[x])))
						}
					}
					if worstT > tolT || worstY > tolY {
						t.Errorf("%s %s n=%d rtol %g: event times within %.2g relative (want %.2g), final states within %.2g (want %.2g)",
							c.name, m.Name(), n, rtol, worstT, tolT, worstY, tolY)
					}
				}
			}
		}
	}
}

// TestEventReferenceGrad checks the gradient of Σ y(T)² through several
// events (bounces; doses and the stop) with respect to the initial state
// and every parameter against central differences of the reference, for
// every method.
func TestEventReferenceGrad(t *testing.T) {
	t.Parallel()
	for _, c := range refCases() {
		for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
			const n = 5
			y0, p := c.draw(n, 3)
			d, np := c.f.Dim, c.f.Params
			sv := solverT(t, c.f, &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: c.evs})
			g, err := sv.Grad(nil, &ode.Problem{Field: c.f, N: n, Y0: y0, P: p, T1: c.T}, ode.SumSquares(), nil)
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, m.Name(), err)
			}
			tol := 1e-7 // the central differences' error (h = 1e-6) and the solves' (1e-10)
			if m == ode.Rosenbrock23 {
				tol = 5e-5
			}
			loss := func(o refResult) float64 { return o.y[0]*o.y[0] + o.y[1]*o.y[1] }
			for i := 0; i < n; i++ {
				xs := [][]float64{y0[i*d : (i+1)*d], p[i*np : (i+1)*np]}
				gs := [][]float64{g.Y0[i*d : (i+1)*d], g.P[i*np : (i+1)*np]}
				for w, x := range xs {
					for k := range x {
						h := 1e-6 * math.Max(1, math.Abs(x[k]))
						at := func(dx float64) float64 {
							xx := [][]float64{append([]float64(nil), xs[0]...), append([]float64(nil), xs[1]...)}
							xx[w][k] += dx
							return loss(c.ref.solve(xx[0], xx[1], 0, c.T, nil))
						}
						fd := (at(h) - at(-h)) / (2 * h)
						if got := gs[w][k]; math.Abs(got-fd) > tol*math.Max(1, math.Abs(fd)) {
							t.Errorf("%s %s: trajectory %d (%d events): ∂L/∂%s[%d] = %.10g, reference %.10g",
								c.name, m.Name(), i, g.Solution.Events[i], []string{"y0", "p"}[w], k, got, fd)
						}
					}
				}
			}
		}
	}
}

// TestEventTimeGradIFT checks the gradient through an event time against
// the implicit function theorem's closed form: a ball with drag dropped
// from (x0, v0) stops at the floor (a terminal event, x(t*) = 0), and its
// impact velocity v(t*) has
//
//	dv*/dθ = ∂v/∂θ + v'(t*)·dt*/dθ,  dt*/dθ = −(∂x/∂θ)/(∂x/∂t) = −(∂x/∂θ)/v*,
//
// for θ = x0, v0, k, the partial derivatives of the closed-form flight by
// complex steps (exact to rounding) and t* by Newton's method on it.
func TestEventTimeGradIFT(t *testing.T) {
	t.Parallel()
	f, ev, _ := dragBall()
	ev.Apply, ev.Terminal = nil, true
	const n = 7
	rng := rand.New(rand.NewPCG(13, 13))
	y0, p := make([]float64, 2*n), make([]float64, 2*n)
	for i := 0; i < n; i++ {
		y0[2*i], y0[2*i+1] = 0.5+rng.Float64(), rng.Float64()-0.5
		p[2*i], p[2*i+1] = 0.8, 0.05+0.5*rng.Float64()
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7, ode.Rodas5P, ode.Rosenbrock23} {
		sv := solverT(t, f, &ode.Settings{Method: m, RelTol: 1e-10, AbsTol: 1e-12, Events: []ode.Event{ev}})
		g, err := sv.Grad(nil, &ode.Problem{Field: f, N: n, Y0: y0, P: p, T1: 5}, ode.Component(1), nil)
		if err != nil {
			t.Fatal(err)
		}
		tol := 1e-8
		if m == ode.Rosenbrock23 {
			tol = 1e-5
		}
		for i := 0; i < n; i++ {
			x0, v0, k := y0[2*i], y0[2*i+1], p[2*i+1]
			ts := 0.5 // Newton on x(t) = 0 from past the apex
			for it := 0; it < 100; it++ {
				x, v := dragBallFlow(complex(x0, 0), complex(v0, 0), complex(k, 0), complex(ts, 0))
				ts -= real(x) / real(v)
			}
			const h = 1e-30
			_, vs := dragBallFlow(complex(x0, 0), complex(v0, 0), complex(k, 0), complex(ts, 0))
			acc := -gravity - k*real(vs) // v'(t*)
			for x, name := range []string{"x0", "v0", "k"} {
				in := [3]complex128{complex(x0, 0), complex(v0, 0), complex(k, 0)}
				in[x] += complex(0, h)
				xt, vt := dragBallFlow(in[0], in[1], in[2], complex(ts, 0))
				dts := -imag(xt) / h / real(vs)
				want := imag(vt)/h + acc*dts
				got := [3]float64{g.Y0[2*i], g.Y0[2*i+1], g.P[2*i+1]}[x]
				if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
					t.Errorf("%s: trajectory %d: dv*/d%s = %.12g, closed form %.12g", m.Name(), i, name, got, want)
				}
			}
			if got := g.Solution.T[i]; math.Abs(got-ts) > 1e-10*ts && m != ode.Rosenbrock23 {
				t.Errorf("%s: trajectory %d: t* = %.15g, closed form %.15g", m.Name(), i, got, ts)
			}
		}
	}
}
