package odetest

import (
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// EndPlusSaves returns the loss y(T1) + Σ_s y(t_s) of a one-state
// problem: the event tests' closed forms give its gradient term by term.
func EndPlusSaves() ode.Loss {
	return ode.Loss{Name: "all", F: func(y, ys, _ []tape.V) tape.V {
		s := y[0]
		for _, v := range ys {
			s = s.Add(v)
		}
		return s
	}}
}
