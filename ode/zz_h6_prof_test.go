package ode_test

import (
	"fmt"
	"os"
	"runtime/pprof"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// throwaway (H6 s49): profile of one arm after warm-up.
func BenchmarkH6Arm(b *testing.B) {
	const n = 4096
	kp := problems.Kepler()
	gm := make([]float64, n)
	for i := range gm {
		gm[i] = 0.95 + 0.1*float64(i)/float64(n-1)
	}
	for _, m := range []ode.Method{ode.Tsit5, ode.Vern7} {
		for _, k := range []int{1, 1000} {
			b.Run(fmt.Sprintf("%s/%d", m.Name(), k), func(b *testing.B) {
				sv, _ := ode.NewSolver(kp.Field, &ode.Settings{Method: m, RelTol: 1e-8, AbsTol: 1e-11})
				ts := make([]float64, k)
				for j := range ts {
					ts[j] = kp.T1 * float64(j+1) / float64(k)
				}
				p := ode.Problem{Field: kp.Field, N: n, Y0: kp.Y0, P: gm, T1: kp.T1, SaveAt: ts}
				var g ode.Gradient
				for range 2 {
					if _, err := sv.Grad(&g, &p, odetest.SavedSquares(), nil); err != nil {
						b.Fatal(err)
					}
				}
				if f := os.Getenv("H6PROF"); f != "" {
					fh, _ := os.Create(f)
					pprof.StartCPUProfile(fh)
					defer func() { pprof.StopCPUProfile(); fh.Close() }()
				}
				b.ResetTimer()
				for range b.N {
					if _, err := sv.Grad(&g, &p, odetest.SavedSquares(), nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
