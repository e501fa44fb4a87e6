package ops

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkLUBlock times the block kernels of the batched dense solves on
// a block of m = 128 lanes: OpLUFactorShift (W = I + s·M, factored) and
// one OpLUSolve and OpLUSolveT, for d = 8, 64 and 256.
//
//	go test ./ops -run '^$' -bench LUBlock
func BenchmarkLUBlock(b *testing.B) {
	const m = 128
	for _, d := range []int{8, 64, 256} {
		rnd := rand.New(rand.NewPCG(1, uint64(d)))
		args := make([][]float64, d*d+2)
		for c := range args {
			args[c] = make([]float64, m)
			for i := range args[c] {
				args[c][i] = 2*rnd.Float64() - 1
			}
		}
		for i := 0; i < m; i++ {
			args[d*d][i] = -0.05 // s
			args[d*d+1][i] = 1   // live
		}
		f := make([]float64, (d*d+d)*m)
		b.Run(fmt.Sprintf("d=%d/shift", d), func(b *testing.B) {
			for b.Loop() {
				luShiftBlock(f, args, float64(d))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/m, "ns/lane")
		})
		rhs := make([][]float64, d+1)
		rhs[0] = f
		for c := 1; c <= d; c++ {
			rhs[c] = args[c]
		}
		x := make([]float64, d*m)
		for _, trans := range []bool{false, true} {
			solve := luSolveBlock(trans)
			b.Run(fmt.Sprintf("d=%d/solve/trans=%v", d, trans), func(b *testing.B) {
				for b.Loop() {
					solve(x, rhs, 0)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/m, "ns/lane")
			})
		}
	}
}
