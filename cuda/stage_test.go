package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostEngineChunkStage checks that a launch whose inputs are staged
// and uploaded chunk by chunk, each chunk's kernel queued once its own
// inputs are up (stagesByChunk; here chunks of one result block of
// 1,024 trajectories, 5 kernels), gives the results of the same chunks
// staged at once (Tuning.NoChunkStage) bit for bit: inputs per
// trajectory, Y0 and T1 given as one row and broadcast on the device
// from a seed in the first chunk, per-trajectory end times with reruns
// (short first record buffers, whose mesh comes to the host), and a
// gradient on the engine's own resident mesh (its lengths staged by
// chunk); and that an input that is
// not finite in a later chunk gets the error the engine staging at once
// returns.
func TestHostEngineChunkStage(t *testing.T) {
	needHost(t)
	const n = 4*1024 + 100
	rng := rand.New(rand.NewPCG(36, 23))
	lor := lorenzCase(n, 1e-4)
	row := lorenzCase(n, 1e-4)
	row.name = "lorenz-rows"
	row.prob.Y0 = row.prob.Y0[:3]
	ends := lorenzCase(n, 1e-4)
	ends.name = "lorenz-T1s"
	ends.prob.T1s = make([]float64, n)
	for i := range ends.prob.T1s {
		ends.prob.T1s[i] = 0.75 + 0.25*rng.Float64()
	}
	for _, c := range []struct {
		ec  engineCase
		tun Tuning
	}{
		{lor, Tuning{pipeChunk: 1024}},
		{row, Tuning{pipeChunk: 1024, bcastSeed: 256}}, // 16 seeds ≤ n: broadcast
		{ends, Tuning{pipeChunk: 1024, firstRows: 4}},
	} {
		t.Run(fmt.Sprintf("%s/rows=%d", c.ec.name, c.tun.firstRows), func(t *testing.T) {
			at := c.tun
			at.NoChunkStage = true
			staged, whole := c.ec.solver(t, tuned(t, "cuda-host", c.tun)), c.ec.solver(t, tuned(t, "cuda-host", at))
			sameRuns(t, c.ec, staged, whole)
			// On each engine's own resident mesh.
			p := c.ec.prob
			var gs, gw ode.Gradient
			if _, err := staged.Grad(&gs, &p, c.ec.loss, nil); err != nil {
				t.Fatal(err)
			}
			if _, err := whole.Grad(&gw, &p, c.ec.loss, nil); err != nil {
				t.Fatal(err)
			}
			switch {
			case gs.Mesh.Resident == nil && c.tun.firstRows == 0:
				t.Fatal("the record's mesh is not resident on the engine")
			case gs.Mesh.Resident == nil:
				return // reruns record through the host
			}
			rs, err := staged.Grad(nil, &p, c.ec.loss, gs.Mesh)
			if err != nil {
				t.Fatal(err)
			}
			rw, err := whole.Grad(nil, &p, c.ec.loss, gw.Mesh)
			if err != nil {
				t.Fatal(err)
			}
			sameBits(t, "resident mesh: loss", []float64{rs.Loss}, []float64{rw.Loss})
			sameBits(t, "resident mesh: dL/dY0", rs.Y0, rw.Y0)
			sameBits(t, "resident mesh: dL/dP", rs.P, rw.P)
			sameBits(t, "resident mesh: Y", rs.Solution.Y, rw.Solution.Y)
		})
	}
	t.Run("not-finite", func(t *testing.T) {
		c := lor
		c.prob.P = append([]float64(nil), c.prob.P...)
		c.prob.P[3*(n-50)+1] = math.Inf(1) // in the last chunk
		tun := Tuning{pipeChunk: 1024}
		at := tun
		at.NoChunkStage = true
		staged, whole := c.solver(t, tuned(t, "cuda-host", tun)), c.solver(t, tuned(t, "cuda-host", at))
		p := c.prob
		_, es := staged.Grad(nil, &p, c.loss, nil)
		_, ew := whole.Grad(nil, &p, c.loss, nil)
		if es == nil || ew == nil || es.Error() != ew.Error() {
			t.Errorf("a P not finite: staged by chunk %v, at once %v", es, ew)
		}
		// The engine runs again after the stopped batch.
		sameRuns(t, lor, staged, whole)
	})
}

// TestHostEngineChunkStageT0s checks that a launch staged chunk by chunk
// (stagesByChunk) uploads per-trajectory start times (ode.Job.T0s, as
// Method Auto's continuations give them) as the launch staged at once
// does: the same results bit for bit, and not those of T0 for all.
func TestHostEngineChunkStageT0s(t *testing.T) {
	needHost(t)
	const n = 4*1024 + 100
	rng := rand.New(rand.NewPCG(5, 8))
	c := lorenzCase(n, 1e-4)
	c.prob.SaveAt = nil
	j := jobOf(t, c, ode.OpSolve)
	j.T0s = make([]float64, n)
	for i := range j.T0s {
		j.T0s[i] = 0.5 * rng.Float64()
	}
	be, err := hostF64.backend()
	if err != nil {
		t.Fatal(err)
	}
	var res [2]*ode.Result
	for k, whole := range []bool{false, true} {
		e := &Engine{name: fmt.Sprintf("cuda-host-t0s-%t", whole), prec: Float64, be: be}
		e.SetTuning(Tuning{pipeChunk: 1024, NoChunkStage: whole})
		x, err := e.Prepare(j.Plan)
		if err != nil {
			t.Fatal(err)
		}
		if res[k], err = x.Run(t.Context(), j); err != nil {
			t.Fatal(err)
		}
	}
	sameBits(t, "T0s staged by chunk: Y", res[0].Y, res[1].Y)
	sameBits(t, "T0s staged by chunk: T", res[0].T, res[1].T)
	// From T0 instead, the results differ (the start times are read).
	j.T0s = nil
	x, err := hostF64.Prepare(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	from0, err := x.Run(t.Context(), j)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(from0.Y, res[0].Y) {
		t.Error("the states from T0s are those from T0")
	}
}
