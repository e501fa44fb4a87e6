package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestSaveStepsLayout checks which launches hold the step of every save
// time (argTapStep, [K][n] int32): a gradient's, whose reverse sweep reads
// it, adaptive or on a given mesh, with events or not, and with
// Tuning.oldSaves (kernelgen.Config.OldSaves) every kernel with save
// times, as before session 46; not a solve's, a replay's or a loss's,
// nor any kernel without save times. The saved states (argYs) are there
// in every kernel with save times.
func TestSaveStepsLayout(t *testing.T) {
	const n, rows, d, k = 100, 16, 4, 7
	for _, tc := range []struct {
		name string
		v    kernelgen.Config
		want bool // argTapStep allocated
	}{
		{"solve", kernelgen.Config{Adaptive: true, Saves: k}, false},
		{"solve-events", kernelgen.Config{Adaptive: true, Saves: k, Events: true}, false},
		{"replay", kernelgen.Config{Saves: k}, false},
		{"loss", kernelgen.Config{Adaptive: true, Saves: k, Loss: true, MeshOut: true}, false},
		{"solve-old", kernelgen.Config{Adaptive: true, Saves: k, OldSaves: true}, true},
		{"replay-old", kernelgen.Config{Saves: k, OldSaves: true}, true},
		{"loss-old", kernelgen.Config{Adaptive: true, Saves: k, Loss: true, MeshOut: true, OldSaves: true}, true},
		{"grad", kernelgen.Config{Adaptive: true, Saves: k, Grad: true, MeshOut: true}, true},
		{"gradmesh", kernelgen.Config{Saves: k, Grad: true}, true},
		{"grad-events", kernelgen.Config{Adaptive: true, Saves: k, Grad: true, MeshOut: true, Events: true}, true},
		{"solve-nosaves", kernelgen.Config{Adaptive: true}, false},
		{"grad-nosaves", kernelgen.Config{Adaptive: true, Grad: true, MeshOut: true}, false},
	} {
		r := &run{ex: &executor{prec: Float64}, ke: &kernelEntry{}, v: tc.v, d: d, np: 1, ns: 1, k: tc.v.Saves}
		l := r.layout(n, rows)
		if got := l.off[argTapStep] >= 0; got != tc.want {
			t.Errorf("%s: save times' steps allocated %v (%d bytes), want %v", tc.name, got, l.bytes[argTapStep], tc.want)
		}
		if tc.want && l.bytes[argTapStep] != int64(n*k*4) {
			t.Errorf("%s: save times' steps %d bytes, want %d", tc.name, l.bytes[argTapStep], n*k*4)
		}
		if got, want := l.bytes[argYs], int64(n*tc.v.Saves*d*8); got != want {
			t.Errorf("%s: saved states %d bytes, want %d", tc.name, got, want)
		}
	}
}

// TestHostEngineOldSaves checks that the forward pass's saved states of
// session 46 (no save time's step written outside a gradient, a dense
// step's stores in a loop of constant bounds) are those of the form before
// (Tuning.oldSaves) bit for bit, kept on the device (KeepSaves, read with
// HostSaves) or returned: every operation with save times (solve, SolveTo,
// record, replay, loss, gradient with the record and on a given mesh) on
// Lorenz with Tsit5 and with Vern7 at many save times a step (groups of
// four save times full and not), Robertson with Rodas5P, bouncing balls
// with events, and Lorenz-96 (d = 64) in the wide layout, their initial
// states perturbed at random (seeded).
func TestHostEngineOldSaves(t *testing.T) {
	needHost(t)
	vern7 := saveTimesCase(t, lorenzCase(9, 1e-6), 300)
	vern7.name, vern7.set.Method = "lorenz-Vern7-300", ode.Vern7
	rng := rand.New(rand.NewPCG(46, 6))
	for _, tc := range []struct {
		c    engineCase
		base string
		tun  Tuning
	}{
		{saveTimesCase(t, lorenzCase(21, 1e-6), 40), hostF64.name, Tuning{}},
		{vern7, hostF64.name, Tuning{}},
		{robertsonCase(12, ode.Rodas5P, 1e3), hostF64.name, Tuning{}},
		{withSaves(ballCase(12, ode.Tsit5), 9, 1.6), hostF64.name, Tuning{}},
		{wideSavesCase(5, 64), hostSim.name, Tuning{Layout: LayoutWide}},
	} {
		t.Run(tc.c.name, func(t *testing.T) {
			c := tc.c
			c.prob.Y0 = slices.Clone(c.prob.Y0)
			for i := range c.prob.Y0 {
				c.prob.Y0[i] *= 1 + 1e-3*rng.Float64()
			}
			old := tc.tun
			old.oldSaves = true
			newEng, oldEng := tuned(t, tc.base, tc.tun), tuned(t, tc.base, old)
			events := len(c.set.Events) > 0
			for _, keep := range []bool{false, true} {
				kc := c
				kc.set.KeepSaves = keep
				sNew, sOld := kc.solver(t, newEng), kc.solver(t, oldEng)
				m, _, err := sNew.Record(&c.prob)
				if err != nil {
					t.Fatal(err)
				}
				for _, op := range keepSavesOps {
					what := fmt.Sprintf("%s keep=%v", op.name, keep)
					var got [2]*ode.Solution
					for e, sv := range []*ode.Solver{sNew, sOld} {
						sol, err := op.run(sv, &c, nil, m)
						if err != nil {
							t.Fatalf("%s (old %v): %v", what, e == 1, err)
						}
						if keep && op.kept(events) && op.name != "record" && sol.Resident == nil {
							t.Fatalf("%s (old %v): saves not kept on the device", what, e == 1)
						}
						if err := sol.HostSaves(); err != nil {
							t.Fatal(err)
						}
						got[e] = sol
					}
					if len(got[0].Ys) == 0 && op.name != "record" {
						t.Fatalf("%s: no saved states", what)
					}
					sameSolution(t, what, got[0], got[1])
				}
			}
		})
	}
}
