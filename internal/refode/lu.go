package refode

import "math/cmplx"

// luReal is an LU factorisation with partial pivoting of a dense n×n
// row-major real matrix.
type luReal struct {
	n   int
	a   []float64
	piv []int
}

// factor factorises a (copied) and reports whether it is nonsingular.
func (l *luReal) factor(a []float64, n int) bool {
	if len(l.a) != n*n {
		l.a = make([]float64, n*n)
		l.piv = make([]int, n)
	}
	l.n = n
	copy(l.a, a)
	m := l.a
	for k := 0; k < n; k++ {
		p, best := k, abs(m[k*n+k])
		for i := k + 1; i < n; i++ {
			if v := abs(m[i*n+k]); v > best {
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
func (l *luReal) solve(b []float64) {
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

// luComplex is an LU factorisation with partial pivoting of a dense n×n
// row-major complex matrix.
type luComplex struct {
	n   int
	a   []complex128
	piv []int
}

// factor factorises a (copied) and reports whether it is nonsingular.
func (l *luComplex) factor(a []complex128, n int) bool {
	if len(l.a) != n*n {
		l.a = make([]complex128, n*n)
		l.piv = make([]int, n)
	}
	l.n = n
	copy(l.a, a)
	m := l.a
	for k := 0; k < n; k++ {
		p, best := k, cmplx.Abs(m[k*n+k])
		for i := k + 1; i < n; i++ {
			if v := cmplx.Abs(m[i*n+k]); v > best {
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
func (l *luComplex) solve(b []complex128) {
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
