package cuda

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// wideL96Bits is the FNV-64a hash of the bits of Lorenz-96's (d = 64,
// five trajectories to t = 0.25 with a save time, lorenz96Case's loss)
// gradient with the record
// in the wide layout on the simulated warp (the loss, dL/dy0, dL/dp), as
// the wide kernels gave it before session 47 (main at 451a1d7: a warp per
// trajectory, the neighbours through index tables).
const wideL96Bits = 0x37ca3d3060e60ee1

// TestHostWideTablesSame checks session 47's forms of the wide layout
// against the one before on the simulated warp, bit for bit: Lorenz-96's
// gradient with the record (d = 64, five trajectories) by default (16
// lanes a trajectory, defaultWideLanes; the neighbours' indices computed
// in the loop, GS_WROT), with index tables (Tuning.wideTables), on a warp
// per trajectory, on 8 lanes, with the window loops' repetitions a rolled
// loop (Tuning.wideRolled), and on a warp with tables and rolled loops
// (the kernel before session 47) hash to wideL96Bits, the bits of main
// before those forms; and at d = 70 (not a power of two, a warp) the
// default equals the tables'. The sources: the default's gathers of
// Lorenz-96 are rotations, read with no index table; with wideTables every
// one is a table. It fails if any form changes a bit of the results, or if
// the switch does not reach the source.
func TestHostWideTablesSame(t *testing.T) {
	needHost(t)
	t.Parallel()
	for _, d := range []int{64, 70} {
		c := lorenz96Case(5, d, ode.Tsit5)
		c.prob.T1, c.prob.SaveAt, c.loss = 0.25, nil, ode.SumSquares()
		for _, tables := range []bool{false, true} {
			src := kernelSourceWith(t, c, ode.OpGrad, func(v *kernelgen.Config) { v.Wide, v.RowMajor, v.WideRows, v.WideTables = true, true, true, tables })
			rot, tab := strings.Count(src, "[GS_WROT("), strings.Count(src, "GS_WIDE_TABLE int ")
			if tables != (rot == 0) || tables != (tab > 0) {
				t.Errorf("d = %d, WideTables %v: %d reads of a rotation, %d index tables", d, tables, rot, tab)
			}
		}
	}
	c := lorenz96Case(5, 64, ode.Tsit5)
	c.prob.T1 = 0.25
	c70 := lorenz96Case(5, 70, ode.Tsit5)
	c70.prob.T1 = 0.25
	for _, x := range []struct {
		name string
		c    engineCase
		tun  Tuning
	}{
		{"default", c, Tuning{Layout: LayoutWide}},
		{"tables", c, Tuning{Layout: LayoutWide, wideTables: true}},
		{"warp", c, Tuning{Layout: LayoutWide, wideLanes: -1}},
		{"warp-tables", c, Tuning{Layout: LayoutWide, wideLanes: -1, wideTables: true}},
		{"lanes8", c, Tuning{Layout: LayoutWide, wideLanes: 8}},
		{"rolled", c, Tuning{Layout: LayoutWide, wideRolled: true}},
		{"warp-old", c, Tuning{Layout: LayoutWide, wideLanes: -1, wideTables: true, wideRolled: true}},
		{"d=70", c70, Tuning{Layout: LayoutWide}},
		{"d=70-tables", c70, Tuning{Layout: LayoutWide, wideTables: true}},
	} {
		t.Run(x.name, func(t *testing.T) {
			t.Parallel()
			got := wideResults(t, x.c, tuned(t, "cuda-host-sim-227k", x.tun), "grad")
			if x.c.prob.Field.Dim == 70 {
				if x.tun.wideTables {
					return
				}
				want := wideResults(t, x.c, tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide, wideTables: true}), "grad")
				sameWideResults(t, "grad", "rotations", "index tables", got, want)
				return
			}
			if h := resultBits(got); h != wideL96Bits {
				t.Errorf("%s: %d results hash to %#x, want %#x (main before session 47): a bit changed", x.name, len(got), h, uint64(wideL96Bits))
			}
		})
	}
}

// resultBits is the FNV-64a hash of xs' bits, little-endian.
func resultBits(xs []float64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, x := range xs {
		binary.LittleEndian.PutUint64(b[:], math.Float64bits(x))
		h.Write(b[:])
	}
	return h.Sum64()
}

// TestGPUWideTablesSame is TestHostWideTablesSame on the device:
// Lorenz-96 (d = 64 and 256, 1,000 trajectories, the large-state suite's
// tolerances, wideBenchGradCase) by default (session 47: d = 64 on 16
// lanes a trajectory, the neighbours' indices computed, the window loops
// unrolled) against the kernels before session 47 (a warp per
// trajectory, index tables, rolled window loops): the solve, the gradient
// with the record and the gradient on the mesh bit for bit (sameRuns). It
// skips without a GPU.
func TestGPUWideTablesSame(t *testing.T) {
	needGPUEngine(t)
	for _, d := range []int{64, 256} {
		c := wideBenchGradCase(1000, d)
		t.Run(fmt.Sprintf("d=%d", d), func(t *testing.T) {
			sameRuns(t, c, c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide})), c.solver(t, tuned(t, "cuda", Tuning{Layout: LayoutWide, wideLanes: -1, wideTables: true, wideRolled: true})))
		})
	}
}
