package cuda

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
)

// BenchmarkGPUAuto is Method Auto's benchmark (odetest.Auto: Auto against
// Tsit5 and Rodas5P alone, Solve and Grad, on non-stiff, stiff and mixed
// ensembles) on the GPU engine at n = 16384, where Auto runs the Tsit5
// pass, stops each trajectory whose stiffness test fires and runs those
// again from T0 with Rodas5P. It skips without a GPU.
//
//	cuda.test -test.run '^$' -test.bench GPUAuto -test.benchtime 5x
func BenchmarkGPUAuto(b *testing.B) {
	needGPUEngine(b)
	odetest.Auto(b, 16384, "cuda")
}
