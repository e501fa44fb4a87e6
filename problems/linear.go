package problems

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// defaultLinearA is the matrix of ByName("linear"): a damped rotation in
// (y0, y1) (eigenvalues −0.5 ± 2i) that drives a decaying y2 (eigenvalue
// −1).
func defaultLinearA() []float64 {
	return []float64{
		-0.5, 2, 0,
		-2, -0.5, 0,
		0.5, 0, -1,
	}
}

// Linear returns the linear system y' = λ·A·y for the constant d×d matrix
// A, given row-major in a (A[i][j] = a[i*d+j]; copied), with the scale λ
// per trajectory (one parameter). Zero entries of A emit no ops. The
// exact solution is y(t) = exp(λ(t−t0)A)·y0 (LinearExact; also the
// problem's Exact), and its derivative with respect to λ is
// (t−t0)·A·y(t) (LinearExactDLambda), so the problem checks both
// solutions and parameter gradients. With A = 1.01·I it is the "linear
// ladder" of the GRADSOLVE benchmarks.
//
// Defaults: λ = 1, y0 = (1, …, 1), t ∈ [0, 1]. It panics if d < 1 or
// len(a) != d*d.
func Linear(a []float64, d int) Problem {
	checkLinear("Linear", a, d)
	a = append([]float64(nil), a...)
	y0 := make([]float64, d)
	for i := range y0 {
		y0[i] = 1
	}
	return Problem{
		Name: "linear",
		Field: ode.Field{Name: "linear", Dim: d, Params: 1,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				dy := make([]tape.V, d)
				for i := range dy {
					var s tape.V
					first := true
					for j, aij := range a[i*d : (i+1)*d] {
						if aij == 0 {
							continue
						}
						t := y[j].MulC(aij)
						if first {
							s, first = t, false
						} else {
							s = s.Add(t)
						}
					}
					if first {
						s = y[0].Const(0)
					}
					dy[i] = p[0].Mul(s)
				}
				return dy
			}},
		Y0: y0,
		P:  []float64{1},
		T1: 1,
		Exact: func(dst, y0, p []float64, dt float64) []float64 {
			return LinearExact(dst, a, d, p[0], y0, dt)
		},
		Doc: fmt.Sprintf("linear: y' = λ·A·y with a constant %d×%d matrix A; p = (λ) = (1); exact solution exp(λtA)·y0", d, d),
	}
}

func checkLinear(fn string, a []float64, d int) {
	if d < 1 || len(a) != d*d {
		panic(fmt.Sprintf("problems: %s: len(a) = %d, d = %d; want d ≥ 1 and len(a) = d*d", fn, len(a), d))
	}
}

// LinearExact returns in dst (len d; nil allocates) the exact solution of
// y' = λ·A·y after a time dt from y0 (len d): exp(λ·dt·A)·y0, with A
// row-major d×d in a. The matrix exponential is gonum's mat.Exp (scaling
// and squaring with a Padé approximant), accurate to a few ulps times the
// conditioning of the problem. It panics if d < 1, len(a) != d*d or
// len(y0) or len(dst) is not d.
func LinearExact(dst, a []float64, d int, lambda float64, y0 []float64, dt float64) []float64 {
	checkLinear("LinearExact", a, d)
	dst = checkVec("LinearExact", dst, y0, d)
	am := mat.NewDense(d, d, append([]float64(nil), a...))
	am.Scale(lambda*dt, am)
	var e mat.Dense
	e.Exp(am)
	x := append([]float64(nil), y0...)
	mat.NewVecDense(d, dst).MulVec(&e, mat.NewVecDense(d, x))
	return dst
}

// LinearExactDLambda returns in dst (len d; nil allocates) the derivative
// with respect to λ of LinearExact(nil, a, d, lambda, y0, dt), that is
// dt·A·exp(λ·dt·A)·y0. It panics as LinearExact does.
func LinearExactDLambda(dst, a []float64, d int, lambda float64, y0 []float64, dt float64) []float64 {
	checkLinear("LinearExactDLambda", a, d)
	dst = checkVec("LinearExactDLambda", dst, y0, d)
	y := LinearExact(nil, a, d, lambda, y0, dt)
	mat.NewVecDense(d, dst).MulVec(mat.NewDense(d, d, append([]float64(nil), a...)), mat.NewVecDense(d, y))
	for i := range dst {
		dst[i] *= dt
	}
	return dst
}

// checkVec checks len(y0) == d and returns dst, allocated if nil, after
// checking its length.
func checkVec(fn string, dst, y0 []float64, d int) []float64 {
	if len(y0) != d {
		panic(fmt.Sprintf("problems: %s: len(y0) = %d, want %d", fn, len(y0), d))
	}
	if dst == nil {
		return make([]float64, d)
	}
	if len(dst) != d {
		panic(fmt.Sprintf("problems: %s: len(dst) = %d, want %d", fn, len(dst), d))
	}
	return dst
}
