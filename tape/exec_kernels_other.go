//go:build !amd64 || purego

package tape

// haveAVX2 is false: the matrix kernels run in Go.
const haveAVX2 = false

func fma4AVX(d0, d1, d2, d3, c *float64, vec *[]float64, nt, m int, b *float64, start int8) {
	panic("tape: no AVX2")
}
func mad4AVX(d0, d1, d2, d3, c *float64, vec *[]float64, nt, m int, b *float64, start int8) {
	panic("tape: no AVX2")
}
func fma1AVX(d, c *float64, vec *[]float64, nt, m int, b *float64, start int8) {
	panic("tape: no AVX2")
}
func mad1AVX(d, c *float64, vec *[]float64, nt, m int, b *float64, start int8) {
	panic("tape: no AVX2")
}

func chainAVX(s *[]float64, flags *uint8, nterms *int32, ne, m int) { panic("tape: no AVX2") }

func tanhAVX(dst, x *float64, n int) { panic("tape: no AVX2") }
