package cuda

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostEngineKeptWords checks a kept gradient's check words read into
// the page-locked result buffer, after the shared sums (session 45),
// against the words read into the run's scratch (Tuning.wordsApart, as
// before) on the host engine: for the events suite's balls and
// pharmacokinetic threshold (Gradient.Omit), a shared-parameter Lorenz
// gradient (the shared sums come back before the words) and balls that
// fail (MaxEvents 1: the results read back, the error returned), three
// calls each passing the Gradient back, the loss bit for bit, HostGrads'
// results bit for bit, the same errors and the same bytes copied back;
// and the trace's batch time (TraceStats.Batch) of every launching call,
// its wait for a compare only where it ran ahead of one.
func TestHostEngineKeptWords(t *testing.T) {
	needHost(t)
	apart := tuned(t, "cuda-host", Tuning{wordsApart: true})
	ball, pk := ballCase(29, ode.Tsit5), pkCase(31, ode.Tsit5)
	ball.set.RelTol, ball.set.AbsTol = 1e-6, 1e-8
	fails := ball
	fails.name, fails.set.MaxEvents = "ball-fails", 1
	shared := lorenzSharedCase(40)
	omit := ode.OmitStates | ode.OmitStats
	for _, tc := range []struct {
		c    engineCase
		omit ode.Omit
	}{{ball, omit}, {ball, 0}, {pk, omit}, {shared, omit}, {fails, omit}} {
		t.Run(tc.c.name, func(t *testing.T) {
			c := tc.c
			c.set.KeepGrads = true
			sv := [2]*ode.Solver{c.solver(t, "cuda-host"), c.solver(t, apart)}
			dst := [2]*ode.Gradient{{Omit: tc.omit}, {Omit: tc.omit}}
			for call := range 3 {
				var g [2]*ode.Gradient
				var errs [2]error
				var down [2]int64
				for k := range sv {
					var tr Trace
					g[k], errs[k] = sv[k].GradContext(WithTrace(context.Background(), &tr), dst[k], &c.prob, c.loss, nil)
					st := tr.Stats()
					down[k] = st.Download
					if st.Launches > 0 && st.Batch <= 0 || st.Ahead == 0 && st.AheadWait != 0 {
						t.Errorf("call %d: batch %v, ahead %d, waited %v", call, st.Batch, st.Ahead, st.AheadWait)
					}
				}
				if (errs[0] == nil) != (errs[1] == nil) || errs[0] != nil && errs[0].Error() != errs[1].Error() {
					t.Fatalf("call %d: error %v, apart %v", call, errs[0], errs[1])
				}
				if down[0] != down[1] {
					t.Errorf("call %d: %d bytes copied back, apart %d", call, down[0], down[1])
				}
				if errs[0] != nil {
					if tc.c.name != "ball-fails" {
						t.Fatalf("call %d: %v", call, errs[0])
					}
					continue
				}
				if tc.c.name == "ball-fails" {
					t.Fatalf("call %d: no error", call)
				}
				if g[0].Resident == nil || g[1].Resident == nil {
					t.Fatalf("call %d: kept %v, apart %v", call, g[0].Resident != nil, g[1].Resident != nil)
				}
				if math.Float64bits(g[0].Loss) != math.Float64bits(g[1].Loss) {
					t.Errorf("call %d: Loss %v, apart %v", call, g[0].Loss, g[1].Loss)
				}
				sameBits(t, "Shared", g[0].Shared, g[1].Shared)
				if call < 2 {
					continue // (unread: written over by the next call)
				}
				for k := range g {
					if err := g[k].HostGrads(); err != nil {
						t.Fatal(err)
					}
				}
				sameBits(t, "Y0", g[0].Y0, g[1].Y0)
				sameBits(t, "P", g[0].P, g[1].P)
				if tc.omit == 0 {
					sameSolution(t, tc.c.name, g[0].Solution, g[1].Solution)
				}
				if !slices.Equal(g[0].Mesh.Len, g[1].Mesh.Len) {
					t.Errorf("mesh lengths differ")
				}
			}
		})
	}
}
