package cuda

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Problems of problems/more_test.go (session 51) on the host-compiled
// engine against the CPU engine, on the CPU's mesh (replay, loss and
// gradient to 1e-11 relative): a non-autonomous field on a span far
// below the time origin with its own end time per trajectory and save
// times, SIR with populations from 1e3 to 1e12, y' = A·y with A per
// trajectory (one row stiff), and a field of every traced nonlinearity
// through Rodas5P (whose gradient takes their second derivatives). The
// engines' own meshes are not compared: at t ≈ −1e6 the rounding of the
// stage times dominates the error estimate, so one ulp of y0 moves the
// CPU's own third step by 1e-4, and the device's cos, an ulp from Go's,
// does the same.

// moreEngineCases returns the cases of TestHostEngineMoreProblems.
func moreEngineCases() []engineCase {
	const n, d = 5, 3
	phase := ode.Field{Name: "phase", Dim: 1, Params: 1, F: func(tt tape.V, y, p []tape.V) []tape.V {
		return []tape.V{p[0].Mul(p[0].Mul(tt).Cos()).Mul(y[0])}
	}}
	sir := ode.Field{Name: "sir", Dim: 3, Params: 3, F: func(_ tape.V, y, p []tape.V) []tape.V {
		inf := p[0].Mul(y[0]).Mul(y[1]).Div(p[2])
		rec := p[1].Mul(y[1])
		return []tape.V{inf.Neg(), inf.Sub(rec), rec}
	}}
	lin := ode.Field{Name: "linear-a", Dim: d, Params: d * d, F: func(_ tape.V, y, p []tape.V) []tape.V {
		out := make([]tape.V, d)
		for i := range out {
			out[i] = tape.Dot(p[i*d:(i+1)*d], y, y[0].Const(0))
		}
		return out
	}}
	nonlinear := ode.Field{Name: "nonlinear", Dim: 3, Params: 4, F: func(_ tape.V, y, p []tape.V) []tape.V {
		a, b, c := y[0], y[1], y[2]
		return []tape.V{
			p[0].Mul(b.Tanh()).Sub(a.Mul(a.Square().Neg().Exp())).Add(tape.Min(a, b).MulC(0.1)),
			p[1].Mul(c.Log1p()).Mul(b).Neg().Add(a.Abs().MulC(0.05)).Add(tape.Max(b, c.Neg()).MulC(0.2)),
			p[2].Mul(c.Pow(p[3])).Neg().Add(a.Square().Add(b.Square()).AddC(1e-3).Sqrt().MulC(0.3)),
		}
	}}
	y0p, pp, t1s := make([]float64, n), make([]float64, n), make([]float64, n)
	ys, ps := make([]float64, 3*n), make([]float64, 3*n)
	yl, pl := make([]float64, d*n), make([]float64, d*d*n)
	yn, pn := make([]float64, 3*n), make([]float64, 4*n)
	for i, pop := range []float64{1e3, 1e6, 8e9, 1e12, 1e5} {
		y0p[i], pp[i], t1s[i] = 0.5+0.1*float64(i), 1+0.1*float64(i), -1e6+1+float64(i)
		ys[3*i], ys[3*i+1] = pop-10, 10
		ps[3*i], ps[3*i+1], ps[3*i+2] = 0.3+0.05*float64(i), 0.1, pop
		yn[3*i], yn[3*i+1], yn[3*i+2] = 0.8-0.35*float64(i), 0.3*float64(i)-0.5, 0.2+0.2*float64(i)
		pn[4*i], pn[4*i+1], pn[4*i+2], pn[4*i+3] = 1.2-0.1*float64(i), 0.7, 0.9, 0.5+0.25*float64(i)
	}
	for i := range yl {
		yl[i] = float64(i%5) - 2
	}
	for i := range pl {
		pl[i] = float64((i*7)%11)/5 - 1
	}
	pl[4*d*d] -= 1e3 // the last row stiff
	far := ode.Problem{Field: phase, N: n, Y0: y0p, P: pp, T0: -1e6 - 5, T1s: t1s, SaveAt: []float64{-1e6 - 4, -1e6}}
	return []engineCase{
		{name: "phase-far-Tsit5", prob: far, set: ode.Settings{Method: ode.Tsit5, RelTol: 1e-8, AbsTol: 1e-8}, loss: ode.SumSquares(), tol: 1e-11},
		{name: "phase-far-Rodas5P", prob: far, set: ode.Settings{Method: ode.Rodas5P, RelTol: 1e-8, AbsTol: 1e-8}, loss: ode.SumSquares(), tol: 1e-11},
		{name: "sir-Vern7", prob: ode.Problem{Field: sir, N: n, Y0: ys, P: ps, T1: 160},
			set: ode.Settings{Method: ode.Vern7, RelTol: 1e-10, AbsTol: 1e-6}, loss: ode.Component(1), tol: 1e-11},
		{name: "linear-a-Rosenbrock23", prob: ode.Problem{Field: lin, N: n, Y0: yl, P: pl, T1: 1},
			set: ode.Settings{Method: ode.Rosenbrock23, RelTol: 1e-6, AbsTol: 1e-6}, loss: ode.SumSquares(), tol: 1e-11},
		{name: "linear-a-Auto", prob: ode.Problem{Field: lin, N: n, Y0: yl, P: pl, T1: 1},
			set: ode.Settings{Method: ode.Auto, RelTol: 1e-8, AbsTol: 1e-8}, loss: ode.SumSquares(), tol: 1e-11},
		{name: "nonlinear-Rodas5P", prob: ode.Problem{Field: nonlinear, N: n, Y0: yn, P: pn, T1: 5},
			set: ode.Settings{Method: ode.Rodas5P, RelTol: 1e-8, AbsTol: 1e-10}, loss: ode.SumSquares(), tol: 1e-11},
	}
}

func TestHostEngineMoreProblems(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles a kernel per case; skipped with -short")
	}
	for _, c := range moreEngineCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			compareEngines(t, "cuda-host", c, caseOpts{ops: []string{"replay", "lossmesh", "gradmesh"}})
		})
	}
}

func TestGPUEngineMoreProblems(t *testing.T) {
	needGPUEngine(t)
	for _, c := range moreEngineCases() {
		t.Run(c.name, func(t *testing.T) {
			c.tol = 1e-10 // the device's transcendental functions are not glibc's
			compareEngines(t, "cuda", c, caseOpts{ops: []string{"replay", "lossmesh", "gradmesh"}})
		})
	}
}
