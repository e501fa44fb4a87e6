package cuda

import (
	"errors"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
)

// BenchmarkHostTierFirstResult times a tiered first Grad whose kernel's
// compile is long and held (it fails once released, so that no g++ runs):
// the call runs on the CPU engine, from a new engine each time (a kernel
// set of its own, its source not yet written). Reported: ms to the
// result (the solver's construction is not timed).
func BenchmarkHostTierFirstResult(b *testing.B) {
	for _, bc := range []struct {
		name string
		m    ode.Method
		n    int
	}{{"pollution", ode.Rodas5P, 64}, {"brusselator", ode.Rodas5P, 16}, {"lorenz", ode.Tsit5, 256}} {
		b.Run(bc.name+"-"+bc.m.Name(), func(b *testing.B) {
			needHost(b)
			c := problemCase(b, bc.name, bc.m, bc.n)
			injected := errors.New("held compile released")
			var total time.Duration
			for range b.N {
				gate := make(chan struct{})
				set := c.set
				set.Engine = tierEngine(newTierBackend(gate, injected, true), Tuning{tierMin: 1})
				sv, err := ode.NewSolver(c.prob.Field, &set)
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				g, err := sv.Grad(nil, &c.prob, c.loss, nil)
				total += time.Since(start)
				close(gate)
				compiling.Wait()
				if err != nil || g.Solution.Engine != "cpu" {
					b.Fatalf("%v, engine %q: want a result of cpu", err, g.Solution.Engine)
				}
			}
			b.ReportMetric(total.Seconds()*1e3/float64(b.N), "ms/first")
		})
	}
}
