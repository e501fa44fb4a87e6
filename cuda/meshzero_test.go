package cuda

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestHostMeshZero checks a recorded mesh's rows past each trajectory's
// last step zeroed by the record kernel (meshZero: the thread layout's
// kernel zeroes the rows a launch before may have written, no memset;
// session 46) against a new solver's each call (a new buffer: every row
// zeroed) on the host engine (the generated kernels
// compiled by g++): bouncing balls, the pk threshold (events: steps and
// marks) and Lorenz (no events; also in the lanes layout, whose launches
// zero the dirty rows before the kernel), each with and without
// KeepGrads, four
// calls on one solver, each passing the Gradient back, with the record
// buffer's rows fixed (Tuning.firstRows): a long call; one with fewer
// steps (a shorter T1: rows the first wrote must read 0 again); one of
// half the trajectories (the buffer reshaped: every row dirty); the long
// one again. After each call the whole resident buffer (every row of
// steps and marks) is the new solver's bit for bit and reads 0 past
// each trajectory's accepted steps; the gradient (HostGrads) and a
// gradient on the recorded mesh (a replay over its padded rows) are the
// new solver's bit for bit; and the buffer's dirty rows are its
// longest trajectory's steps, fewer than its rows, so that the next
// call's kernel zeroes only those.
func TestHostMeshZero(t *testing.T) {
	needHost(t)
	testMeshZero(t, hostF64.name, 64)
}

// TestGPUMeshZero is TestHostMeshZero on the device ("cuda"), with 4,099
// trajectories (none a multiple of a warp). It skips without a GPU.
func TestGPUMeshZero(t *testing.T) {
	needGPUEngine(t)
	testMeshZero(t, "cuda", 4099)
}

// meshZeroRows is the record buffer's rows of testMeshZero's calls: more
// than any of its trajectories' steps.
const meshZeroRows = 160

func testMeshZero(t *testing.T, eng string, n int) {
	ball, pk, lorenz := ballCase(n, ode.Tsit5), pkCase(n, ode.Tsit5), lorenzCase(n, 1e-6)
	ball.set.RelTol, ball.set.AbsTol = 1e-6, 1e-8
	pk.set.RelTol, pk.set.AbsTol = 1e-6, 1e-8
	lorenz.prob.SaveAt, lorenz.loss = nil, ode.SumSquares()
	for _, x := range []struct {
		c      engineCase
		layout Layout
	}{{ball, LayoutAuto}, {pk, LayoutAuto}, {lorenz, LayoutAuto}, {lorenz, LayoutLanes}} {
		c := x.c
		e := tuned(t, eng, Tuning{Layout: x.layout, firstRows: meshZeroRows})
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/%s/keep=%t", c.name, x.layout, keep), func(t *testing.T) {
				// The calls' problems: long, short, half the trajectories,
				// long.
				short, half := c.prob, c.prob
				short.T1 = c.prob.T1 / 2
				half.N = n / 2
				half.Y0 = c.prob.Y0[:half.N*c.prob.Field.Dim]
				half.P = c.prob.P[:half.N*c.prob.Field.Params]
				probs := []ode.Problem{c.prob, short, half, c.prob}
				// svs[0] runs every call, svs[1] is new each call.
				cs := c
				cs.set.KeepGrads = keep
				var svs [2]*ode.Solver
				var gs [2]ode.Gradient
				svs[0] = cs.solver(t, e)
				for call, p := range probs {
					svs[1], gs[1] = cs.solver(t, e), ode.Gradient{}
					if keep {
						gs[0].Omit, gs[1].Omit = ode.OmitStates|ode.OmitStats, ode.OmitStates|ode.OmitStats
					}
					var bufs [2]meshBuffer
					var onMesh [2]*ode.Gradient
					for k := range svs {
						g := &gs[k]
						if _, err := svs[k].Grad(g, &p, c.loss, nil); err != nil {
							t.Fatal(err)
						}
						if err := g.HostGrads(); err != nil {
							t.Fatal(err)
						}
						bufs[k] = readMeshBuffer(t, g.Mesh)
						m, err := svs[k].Grad(nil, &p, c.loss, g.Mesh)
						if err != nil {
							t.Fatal(err)
						}
						if err := m.HostGrads(); err != nil {
							t.Fatal(err)
						}
						onMesh[k] = m
					}
					what := fmt.Sprintf("call %d (T1 %g, n %d)", call, p.T1, p.N)
					got, want := bufs[0], bufs[1]
					if got.rows != want.rows || got.n != want.n || got.rows != meshZeroRows || got.n != p.N {
						t.Fatalf("%s: buffers of %d×%d and %d×%d (new solver), want %d×%d", what, got.rows, got.n, want.rows, want.n, meshZeroRows, p.N)
					}
					sameBits(t, what+": the buffer's steps", got.steps, want.steps)
					if !slices.Equal(got.marks, want.marks) {
						t.Errorf("%s: the buffer's event marks differ from the new solver's", what)
					}
					acc := gs[0].Mesh.Stats.Accepted
					if gs[0].Mesh.Stats.Accepted == nil {
						acc = gs[0].Mesh.Len
					}
					checkRowsZero(t, what, got, acc)
					longest := slices.Max(acc)
					if got.dirty != longest || longest >= got.rows {
						t.Errorf("%s: %d dirty rows of %d after the call, want the longest trajectory's %d steps, fewer than the rows", what, got.dirty, got.rows, longest)
					}
					sameGrads(t, what, &gs[0], &gs[1])
					sameGrads(t, what+": on the mesh", onMesh[0], onMesh[1])
				}
			})
		}
	}
}

// meshBuffer is a copy of a resident mesh's whole buffer: every row of its
// steps and, with events, of its marks, and its dirty rows.
type meshBuffer struct {
	rows, n, dirty int
	steps          []float64
	marks          []int32
}

// readMeshBuffer copies the whole buffer of the resident mesh of m.
func readMeshBuffer(t *testing.T, m *ode.Mesh) meshBuffer {
	t.Helper()
	rm, ok := m.Resident.(*residentMesh)
	if !ok {
		t.Fatalf("the recorded mesh is not resident (%T)", m.Resident)
	}
	b := meshBuffer{rows: rm.rows, n: rm.n, dirty: rm.dirty, steps: make([]float64, rm.rows*rm.n)}
	if err := rm.CopyTo(b.steps); err != nil {
		t.Fatal(err)
	}
	if rm.events {
		b.marks = make([]int32, rm.rows*rm.n)
		if err := rm.CopyEventsTo(b.marks); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// checkRowsZero checks that the buffer b reads 0 (steps and marks) in
// every row from trajectory i's acc[i] accepted steps on, and that its
// steps before are not.
func checkRowsZero(t *testing.T, what string, b meshBuffer, acc []int) {
	t.Helper()
	bad := 0
	for i := range b.n {
		for s := range b.rows {
			h := b.steps[s*b.n+i]
			mark := int32(0)
			if b.marks != nil {
				mark = b.marks[s*b.n+i]
			}
			past := s >= acc[i]
			if past && (math.Float64bits(h) != 0 || mark != 0) || !past && h == 0 {
				if bad++; bad <= 3 {
					t.Errorf("%s: trajectory %d (%d steps), row %d: step %v, mark %d", what, i, acc[i], s, h, mark)
				}
			}
		}
	}
	if bad > 3 {
		t.Errorf("%s: %d rows in all not as they should be", what, bad)
	}
}
