package cuda

import (
	"fmt"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestThreadRoundBlocks checks the launch bounds of Tuning.threadRound:
// as many blocks of kernelgen.ThreadBoundsBlock threads a multiprocessor
// as one round of a job's blocks needs; none where one block each does,
// the device is unknown, or more than threadRoundMaxBlocks would be
// needed.
func TestThreadRoundBlocks(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		n, sms, want int
	}{
		{65536, 132, 4},  // the events suite on an H100 or H200: 512 blocks
		{65536, 0, 0},    // unknown device (a host backend)
		{4096, 132, 0},   // 32 blocks: one each
		{16896, 132, 0},  // 132 blocks: one each
		{16897, 132, 2},  // 133 blocks
		{135168, 132, 8}, // 1,056 blocks: 8 each, 64 registers
		{135169, 132, 0}, // 9 each would be needed: rounds anyway
		{65536, 108, 5},  // an A100's 108 multiprocessors
		{0, 132, 0},
	} {
		if got := threadRoundBlocks(c.n, c.sms); got != c.want {
			t.Errorf("threadRoundBlocks(%d, %d) = %d, want %d", c.n, c.sms, got, c.want)
		}
	}
	if defaultBlock != kernelgen.ThreadBoundsBlock {
		t.Errorf("defaultBlock %d, bounds' block %d", defaultBlock, kernelgen.ThreadBoundsBlock)
	}
}

// TestThreadRoundLayout checks that the events suite's gradient kernels
// (65,536 balls or pk trajectories, thread layout) get threadRound's
// bounds on an H100 (132 multiprocessors) only under the tuning, and
// keep the thread layout.
func TestThreadRoundLayout(t *testing.T) {
	const n = 1 << 16
	dev := device{sms: 132, sharedLimit: 227 << 10}
	for _, c := range []engineCase{eventsSuiteCase(ballCase(n, ode.Tsit5), 1e-6), eventsSuiteCase(pkCase(n, ode.Tsit5), 1e-6)} {
		j := jobOf(t, c, ode.OpGrad)
		sp, err := kernelgen.NewStepPrograms(j.Plan)
		if err != nil {
			t.Fatal(err)
		}
		for _, round := range []bool{false, true} {
			v := chooseLayout(kernelgen.ConfigOf(j), j.Plan, sp, layoutJob{n: n}, Float64, false, dev, Tuning{threadRound: round})
			want := int8(0)
			if round {
				want = 4
			}
			if v.Lanes || v.Wide || !v.Events || v.ThreadMinBlocks != want {
				t.Errorf("%s, threadRound %t: lanes %t, wide %t, events %t, ThreadMinBlocks %d, want the thread layout with %d",
					c.name, round, v.Lanes, v.Wide, v.Events, v.ThreadMinBlocks, want)
			}
		}
	}
}

// TestGPUThreadRound checks on the device that Tuning.threadRound's
// launch bounds change no result: the events suite's balls and pk
// (65,536 trajectories, rtol 1e-6, one round of blocks on an H100 or
// H200), a gradient with its record and a kept one (HostGrads), bit for
// bit against the engine without the bounds. It skips without a GPU.
func TestGPUThreadRound(t *testing.T) {
	needGPUEngine(t)
	const n = 1 << 16
	testSameTuned(t, Tuning{threadRound: true}, eventsSuiteCase(ballCase(n, ode.Tsit5), 1e-6), eventsSuiteCase(pkCase(n, ode.Tsit5), 1e-6))
}

// TestGPUCheckLaneAtomics checks on the device that the gradients' check
// kernel sums a warp's loss terms of several first limbs to the same
// limbs by shuffles as by Tuning.checkLaneAtomics' lane-by-lane
// atomics: pk's crossing times in random order (pkCase, on both sides of
// 2) and the balls' heights, 65,536 trajectories at rtol 1e-6, a kept
// gradient (its loss from the check's limbs) and one with its record,
// bit for bit. It skips without a GPU.
func TestGPUCheckLaneAtomics(t *testing.T) {
	needGPUEngine(t)
	const n = 1 << 16
	pk, ball := pkCase(n, ode.Tsit5), ballCase(n, ode.Tsit5)
	pk.set.RelTol, pk.set.AbsTol = 1e-6, 1e-8
	ball.set.RelTol, ball.set.AbsTol = 1e-6, 1e-8
	testSameTuned(t, Tuning{checkLaneAtomics: true}, pk, ball)
}

// testSameTuned checks that the engine "cuda" tuned by tun gives the
// results of "cuda" bit for bit on the cases, a gradient with its record
// and a kept one (ode.Settings.KeepGrads, read by HostGrads).
func testSameTuned(t *testing.T, tun Tuning, cases ...engineCase) {
	engines := [2]string{"cuda", tuned(t, "cuda", tun)}
	for _, c := range cases {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keep=%t", c.name, keep), func(t *testing.T) {
				var gs [2]*ode.Gradient
				for k, e := range engines {
					cs := c
					cs.set.KeepGrads = keep
					g, err := cs.solver(t, e).Grad(nil, &cs.prob, cs.loss, nil)
					if err != nil {
						t.Fatal(err)
					}
					if err := g.HostGrads(); err != nil {
						t.Fatal(err)
					}
					gs[k] = g
				}
				sameGrads(t, fmt.Sprintf("%+v", tun), gs[1], gs[0])
			})
		}
	}
}
