// Package odetest holds helpers of the tests of several packages (ode,
// cuda) that compare ensembles row by row.
package odetest

import (
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// Rows returns the problem and the loss of rows idx of p and l, in that
// order: a problem of two state components, one parameter and one loss
// data value a trajectory, all given per trajectory.
func Rows(p ode.Problem, l ode.Loss, idx []int) (ode.Problem, ode.Loss) {
	q, m := p, l
	q.N = len(idx)
	q.Y0, q.P, m.Data = nil, nil, nil
	for _, i := range idx {
		q.Y0 = append(q.Y0, p.Y0[2*i:2*i+2]...)
		q.P = append(q.P, p.P[i])
		m.Data = append(m.Data, l.Data[i])
	}
	return q, m
}

// SameRows fails t unless rows idx of got (w values a row) are the rows
// of want, in order, bit for bit.
func SameRows(t testing.TB, what string, got, want []float64, w int, idx []int) {
	t.Helper()
	for j, i := range idx {
		for c := 0; c < w; c++ {
			if g, x := got[i*w+c], want[j*w+c]; math.Float64bits(g) != math.Float64bits(x) {
				t.Fatalf("%s: trajectory %d, value %d: %v, want %v bit for bit", what, i, c, g, x)
			}
		}
	}
}
