package ode_test

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/bench"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// BenchmarkProbeCost times, on the Lorenz protocol (n = 2048, RelTol
// 1e-6, Tsit5, one worker), the forward solve and the gradient of
// Σ‖y(1)‖² with its record, with the stability probe (Job.CheckStability)
// on and off, alternated within each iteration so that a loaded machine
// slows all three alike, each timed by the process's CPU time (user and
// system, getrusage: on a loaded machine the time it ran, not the time it
// waited). It reports the medians over the iterations of each time
// (ms-solve, ms-grad-probe, ms-grad-off) and of the ratios of the same
// iteration (probe/off, the probe's cost; grad/solve with the probe):
//
//	go test ./ode -run '^$' -bench 'ProbeCost' -benchtime 40x -count 3
func BenchmarkProbeCost(b *testing.B) {
	e := bench.ProtocolLorenz(2048)
	p := e.Problem()
	set := &ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9, Exec: tape.ExecSettings{Workers: 1}}
	sv, err := ode.NewSolver(p.Field, set)
	if err != nil {
		b.Fatal(err)
	}
	loss := ode.SumSquares()
	var g ode.Gradient
	grad := func(off bool) time.Duration {
		defer ode.SetProbeOff(off)()
		t := cpuTime()
		if _, err := sv.Grad(&g, &p, loss, nil); err != nil {
			b.Fatal(err)
		}
		return cpuTime() - t
	}
	solve := func() time.Duration {
		t := cpuTime()
		if _, err := sv.Solve(&p); err != nil {
			b.Fatal(err)
		}
		return cpuTime() - t
	}
	grad(false)
	grad(true)
	solve()
	var ts, ton, toff, cost, ratio []float64
	b.ResetTimer()
	for i := range b.N {
		var on, off time.Duration
		if i%2 == 0 {
			on, off = grad(false), grad(true)
		} else {
			off, on = grad(true), grad(false)
		}
		s := solve()
		ts, ton, toff = append(ts, ms(s)), append(ton, ms(on)), append(toff, ms(off))
		cost = append(cost, float64(on)/float64(off))
		ratio = append(ratio, float64(on)/float64(s))
	}
	b.ReportMetric(median(ts), "ms-solve")
	b.ReportMetric(median(ton), "ms-grad-probe")
	b.ReportMetric(median(toff), "ms-grad-off")
	b.ReportMetric(median(cost), "probe/off")
	b.ReportMetric(median(ratio), "grad/solve")
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// cpuTime returns the process's CPU time (user and system): on a loaded
// machine the time a call ran, not the time it waited for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
