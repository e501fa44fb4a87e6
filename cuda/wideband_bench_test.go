package cuda

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// brusselatorLargeCase returns the gpu-large suite's Brusselator at rtol
// (bench's StiffEnsemble: problems.Brusselator(32), d = 64, α =
// linspace(0.01, 0.03, n), t ∈ [0, 10], one initial state, atol =
// rtol·1e-4, Rodas5P, the loss Σ‖y(T)‖²).
func brusselatorLargeCase(n int, rtol float64) engineCase {
	pr := problems.Brusselator(32)
	np := pr.Field.Params
	p := make([]float64, np*n)
	for i, x := range problems.LinSpace(make([]float64, n), 0.01, 0.03) {
		copy(p[np*i:], pr.P)
		p[np*i] = x
	}
	return engineCase{
		name: "brusselator-large",
		prob: ode.Problem{Field: pr.Field, N: n, Y0: pr.Y0, P: p, T0: pr.T0, T1: pr.T1},
		set:  ode.Settings{Method: ode.Rodas5P, RelTol: rtol, AbsTol: rtol * 1e-4},
		loss: ode.SumSquares(),
		tol:  1e-10,
	}
}

// BenchmarkGPUWideBandLU times the gradient with the record of issue 26's
// Brusselator row (the gpu-large suite's ensemble at rtol 1e-9, n =
// 1,024: brusselatorLargeCase) with its band's sparse LU, sequential on
// lane 0 (the default since session 48: kernelgen's wideSeqLU), against
// the dense LU (Tuning.denseLU: the kernel of session 48's call 3, 1,374
// ms whole on an H100), in turn, three rounds (later rounds' names end in
// #01, #02): kernel-ms/op and ms/op (the whole call).
//
//	cuda.test -test.run XXX -test.bench 'GPUWideBandLU' -test.benchtime 3x -test.timeout 580s
func BenchmarkGPUWideBandLU(b *testing.B) {
	needGPUEngine(b)
	c := brusselatorLargeCase(1024, 1e-9)
	for range wideSplitRounds {
		for _, x := range []struct {
			name string
			tun  Tuning
		}{{"default", Tuning{}}, {"dense", Tuning{denseLU: true}}} {
			engine := tuned(b, "cuda", x.tun)
			b.Run("grad/brusselator/"+x.name, func(b *testing.B) {
				benchWide(b, c, "grad", engine, "wide")
			})
		}
	}
}
