package ode_test

import (
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
)

// BenchmarkAuto times Method Auto against Tsit5 and Rodas5P alone
// (odetest.Auto: Solve and Grad on four ensembles of 256 trajectories,
// non-stiff, stiff from the start, stiff after a layer, mixed).
// Auto-auto-split-test is Auto on "auto-split-test", the CPU engine's
// executor behind a wrapper (export_split_test.go), where Auto cannot
// switch in place and restarts the stiff trajectories from T0 with
// Rodas5P, as on an engine without per-trajectory start times;
// Auto-auto-continue-test is Auto on "auto-continue-test", the same with
// Job.T0s, where Auto continues the stiff trajectories from their switch,
// as on the GPU engines: the cost of the restart and of the
// continuation against the switch in place, on the same arithmetic:
//
//	go test ./ode -run '^$' -bench 'Auto' -count 5
func BenchmarkAuto(b *testing.B) {
	odetest.Auto(b, 256, "cpu", "auto-split-test", "auto-continue-test")
}

// BenchmarkAutoHost times Method Auto's Grad and Solve on
// "auto-continue-test" (the continuation of the GPU engines, on the CPU
// executor) at 4096 trajectories of odetest.AutoCases' stiff ensembles,
// and reports the time spent outside the executor's jobs (host-ms/op:
// the split, the segments' meshes, the merges, the loss on the host) and
// inside them (exec-ms/op): the host work that a GPU engine, whose jobs
// are short, pays in full:
//
//	go test ./ode -run '^$' -bench 'AutoHost' -benchtime 2x -count 3
func BenchmarkAutoHost(b *testing.B) {
	for _, c := range odetest.AutoCases(4096) {
		if c.Name != "vdp-stiff" && c.Name != "robertson" {
			continue
		}
		for _, op := range []string{"grad", "solve"} {
			b.Run(c.Name+"/"+op, func(b *testing.B) {
				p := c.P
				sv, err := ode.NewSolver(p.Field, &ode.Settings{Method: ode.Auto, RelTol: 1e-6, AbsTol: 1e-9, Engine: "auto-continue-test"})
				if err != nil {
					b.Fatal(err)
				}
				run := odetest.AutoOp(sv, &p, op)
				if err := run(); err != nil {
					b.Fatal(err)
				}
				ode.SpyExecTime()
				ode.SplitSpyJobs()
				b.ResetTimer()
				t0 := time.Now()
				for range b.N {
					if err := run(); err != nil {
						b.Fatal(err)
					}
				}
				all, ex := time.Since(t0), ode.SpyExecTime()
				ode.SplitSpyJobs()
				b.ReportMetric(float64(ex)/1e6/float64(b.N), "exec-ms/op")
				b.ReportMetric(float64(all-ex)/1e6/float64(b.N), "host-ms/op")
			})
		}
	}
}
