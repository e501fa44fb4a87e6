package cuda

import (
	"context"
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// BenchmarkScatter times the scatter of a launch's results (scatter:
// each trajectory's status and counts, the loss terms summed in order,
// Y, dL/dy0 and dL/dp from the device's component-major arrays to the
// Gradient's rows) of n Lorenz trajectories into a Gradient passed back,
// in whole Grad calls (the record, everything returned) on the backend
// whose copies and kernels take no time (hostWork): scatter-ms/op is the
// trace's Scatter (TraceStats), the part of BenchmarkGPUCallBound's
// scatter-ms/op that is the host's, and ns/op the call's host work. It
// runs on as many cores as GOMAXPROCS (-test.cpu); on a device's host it
// needs no device:
//
//	go test ./cuda -run '^$' -bench 'BenchmarkScatter$' -benchtime 400x -count 6
func BenchmarkScatter(b *testing.B) {
	for _, n := range []int{128, 8192, 1 << 15, 1 << 16, 1 << 18} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchScatter(b, n) })
	}
}

func benchScatter(b *testing.B, n int) {
	c := lorenzCallCase(n)
	c.set.Engine = hostWork.name
	sv, err := ode.NewSolver(c.prob.Field, &c.set)
	if err != nil {
		b.Fatal(err)
	}
	var g ode.Gradient
	var tr Trace
	ctx := WithTrace(context.Background(), &tr)
	for range 2 { // the Gradient's storage, the executor's buffers
		if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
			b.Fatal(err)
		}
	}
	tr.Reset()
	b.ResetTimer()
	for range b.N {
		if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	s := tr.Stats()
	b.ReportMetric(float64(s.Scatter)/1e6/float64(b.N), "scatter-ms/op")
	b.ReportMetric(float64(s.Stage)/1e6/float64(b.N), "stage-ms/op")
}
