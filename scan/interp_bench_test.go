package scan

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkInterpTimes times InterpTimes as the CPU engine's record calls
// it with 1,000 save times (ode's writeSaves): a chunk of 256 lanes, each
// writing a step's nt saves (Dim 4, m terms: Tsit5 4, Vern7 7) to its own
// trajectory's row of a [256][1000][4] block, the rows 32 KB apart, the
// steps one after the other until every row is full:
//
//	go test ./scan -run '^$' -bench InterpTimes
func BenchmarkInterpTimes(b *testing.B) {
	const lanes, k, d = 256, 1000, 4
	rng := rand.New(rand.NewPCG(3, 4))
	out := make([]float64, lanes*k*d)
	for _, m := range []int{4, 7} {
		for _, nt := range []int{4, 8, 10, 11, 16, 22, 23} {
			b.Run(fmt.Sprintf("m=%d/nt=%d", m, nt), func(b *testing.B) {
				y, w := make([]float64, lanes*d), make([]float64, lanes*m*d)
				for i := range y {
					y[i] = rng.NormFloat64()
				}
				for i := range w {
					w[i] = rng.NormFloat64()
				}
				ts := make([]float64, k)
				for j := range ts {
					ts[j] = float64(j+1) / k
				}
				steps := k / nt
				h := float64(nt) / k
				b.SetBytes(int64(lanes * steps * nt * d * 8))
				for range b.N {
					for s := range steps {
						t := float64(s) * h
						for i := range lanes {
							o := (i*k + s*nt) * d
							InterpTimes(out[o:o+nt*d], y[i*d:(i+1)*d], w[i*m*d:(i+1)*m*d], ts[s*nt:(s+1)*nt], t, h)
						}
					}
				}
			})
		}
	}
}

// BenchmarkGatherRows times GatherRows as ode's writeSaves calls it on
// each step with many save times: a chunk of 256 lanes' Dim 4 states and
// Terms·Dim coefficients (Tsit5 16, Vern7 28) into rows of Dim +
// Terms·Dim values, with AVX and in Go:
//
//	go test ./scan -run '^$' -bench GatherRows
func BenchmarkGatherRows(b *testing.B) {
	const lanes, d = 256, 4
	defer func(u bool) { useAVX = u }(useAVX)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, m := range []int{4, 7} {
		nc := d + m*d
		cols := make([][]float64, nc)
		for x := range cols {
			cols[x] = make([]float64, lanes)
			for i := range cols[x] {
				cols[x][i] = rng.NormFloat64()
			}
		}
		rows := make([]float64, lanes*nc)
		for _, avx := range []bool{true, false} {
			b.Run(fmt.Sprintf("m=%d/avx=%v", m, avx), func(b *testing.B) {
				useAVX = avx
				b.SetBytes(int64(lanes * nc * 8))
				for range b.N {
					GatherRows(rows, nc, lanes, cols[:d])
					GatherRows(rows[d:], nc, lanes, cols[d:])
				}
			})
		}
	}
}
