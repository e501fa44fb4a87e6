package ode_test

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
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
