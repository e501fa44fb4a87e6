package refode

import "math/cmplx"

// scalar is the element type of an LU factorisation: real for Radau IIA's
// real eigenvalue, complex for its complex pair.
type scalar interface{ float64 | complex128 }

// lu is an LU factorisation with partial pivoting of a dense n×n
// row-major matrix.
type lu[T scalar] struct {
	n   int
	a   []T
	piv []int
}

// luReal and luComplex are the factorisations Radau5 keeps.
type (
	luReal    = lu[float64]
	luComplex = lu[complex128]
)

// magnitude returns |x|, the modulus for a complex x: the pivot's size.
func magnitude[T scalar](x T) float64 {
	switch v := any(x).(type) {
	case float64:
		return abs(v)
	case complex128:
		return cmplx.Abs(v)
	}
	panic("refode: unreachable")
}

// factor factorises a (copied) and reports whether it is nonsingular.
func (l *lu[T]) factor(a []T, n int) bool {
	if len(l.a) != n*n {
		l.a = make([]T, n*n)
		l.piv = make([]int, n)
	}
	l.n = n
	copy(l.a, a)
	m := l.a
	for k := 0; k < n; k++ {
		p, best := k, magnitude(m[k*n+k])
		for i := k + 1; i < n; i++ {
			if v := magnitude(m[i*n+k]); v > best {
				p, best = i, v
			}
		}
		l.piv[k] = p
		if best == 0 {
			return false
		}
		if p != k {
			for j := 0; j < n; j++ {
				m[k*n+j], m[p*n+j] = m[p*n+j], m[k*n+j]
			}
		}
		inv := 1 / m[k*n+k]
		for i := k + 1; i < n; i++ {
			f := m[i*n+k] * inv
			if f == 0 {
				continue
			}
			m[i*n+k] = f
			for j := k + 1; j < n; j++ {
				m[i*n+j] -= f * m[k*n+j]
			}
		}
	}
	return true
}

// solve overwrites b with the solution of A x = b.
func (l *lu[T]) solve(b []T) {
	n, m := l.n, l.a
	for k := 0; k < n; k++ {
		if p := l.piv[k]; p != k {
			b[k], b[p] = b[p], b[k]
		}
	}
	for i := 1; i < n; i++ {
		s := b[i]
		for j := 0; j < i; j++ {
			s -= m[i*n+j] * b[j]
		}
		b[i] = s
	}
	for i := n - 1; i >= 0; i-- {
		s := b[i]
		for j := i + 1; j < n; j++ {
			s -= m[i*n+j] * b[j]
		}
		b[i] = s / m[i*n+i]
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
