//go:build !purego

package tape

// The AVX2 kernels of exec_kernels_amd64.s. Each takes rows as pointers
// to their first lane, the packed coefficients of the first term, the
// terms' vectors as a pointer to the first slice header, nt ≥ 1 terms and
// m lanes; every vector must hold at least m values. The sums start from
// the rows' values (start 0), the first term's products (1) or the rows'
// initial values at b, one a row (2).

//go:noescape
func fma4AVX(d0, d1, d2, d3, c *float64, vec *[]float64, nt, m int, b *float64, start int8)

//go:noescape
func mad4AVX(d0, d1, d2, d3, c *float64, vec *[]float64, nt, m int, b *float64, start int8)

//go:noescape
func fma1AVX(d, c *float64, vec *[]float64, nt, m int, b *float64, start int8)

//go:noescape
func mad1AVX(d, c *float64, vec *[]float64, nt, m int, b *float64, start int8)

func cpuid(eaxIn, ecxIn uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)

// haveAVX2 reports whether the processor and the operating system
// support AVX2 and FMA3.
var haveAVX2 = detectAVX2()

func detectAVX2() bool {
	if maxID, _, _, _ := cpuid(0, 0); maxID < 7 {
		return false
	}
	const fma, osxsave, avx = 1 << 12, 1 << 27, 1 << 28
	if _, _, c, _ := cpuid(1, 0); c&fma == 0 || c&osxsave == 0 || c&avx == 0 {
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&6 != 6 { // the OS saves the XMM and YMM state
		return false
	}
	_, b, _, _ := cpuid(7, 0)
	return b&(1<<5) != 0
}

// chainAVX is the kernel of chainKernel (see exec_kernels_amd64.s): every
// argument must hold at least m values, ne ≥ 1.
//
//go:noescape
func chainAVX(s *[]float64, flags *uint8, nterms *int32, ne, m int)

// tanhAVX sets dst[i] = math.Tanh(x[i]) for i < n, n a multiple of 4
// (see exec_kernels_amd64.s).
//
//go:noescape
func tanhAVX(dst, x *float64, n int)
