package cuda

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
)

// BenchmarkGPUSaveRatio is the dense-output targets' benchmark
// (odetest.SaveRatio: 1 against 1,000 save times, Tsit5 and Vern7, Solve
// and Grad) on the GPU engine. It skips without a GPU.
//
//	cuda.test -test.run '^$' -test.bench GPUSaveRatio -test.benchtime 7x
func BenchmarkGPUSaveRatio(b *testing.B) {
	needGPUEngine(b)
	odetest.SaveRatio(b, "cuda")
}
