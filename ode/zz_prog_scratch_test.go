package ode_test

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

func TestAuditProgress(t *testing.T) {
	p := base()
	p.N = 5000
	try(t, "progress panics", func() string {
		_, err := ode.Solve(p, &ode.Settings{Progress: func(d, n int) { panic("boom") }})
		return desc(err)
	})
}
