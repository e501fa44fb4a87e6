package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestScatterSaveCols checks the saved states' transpose against a loop
// over every value: column ranges of rows of many widths, for launches
// of consecutive and of scattered trajectories (blocks of saveMicro and
// the rest), float64 and float32, the values outside the columns left as
// they were, and the finite check (an infinity or a NaN copied).
func TestScatterSaveCols(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 1))
	for _, tc := range []struct {
		n, w, q0, m, c0, c1 int
		consec              bool
	}{
		{n: 1, w: 1, q0: 0, m: 1, c0: 0, c1: 1, consec: true},
		{n: 13, w: 5, q0: 0, m: 13, c0: 0, c1: 5, consec: true},
		{n: 40, w: 70, q0: 8, m: 17, c0: 0, c1: 70, consec: true},
		{n: 40, w: 70, q0: 3, m: 20, c0: 5, c1: 66, consec: false},
		{n: 64, w: 130, q0: 0, m: 64, c0: 64, c1: 130, consec: true},
		{n: 100, w: 200, q0: 36, m: 64, c0: 17, c1: 151, consec: false},
		{n: 512, w: 12, q0: 256, m: 9, c0: 2, c1: 3, consec: false},
	} {
		for _, f32 := range []bool{false, true} {
			for _, bad := range []float64{0, math.Inf(-1), math.NaN()} {
				name := fmt.Sprintf("n=%d/w=%d/q0=%d/m=%d/c=%d-%d/consec=%v/f32=%v/bad=%v", tc.n, tc.w, tc.q0, tc.m, tc.c0, tc.c1, tc.consec, f32, bad)
				// The launch's trajectories: rows of a result of N.
				N := tc.q0 + tc.m + 7
				g := make([]int, tc.m)
				if tc.consec {
					for j := range g {
						g[j] = 3 + j
					}
				} else {
					perm := rng.Perm(N)[:tc.m]
					slices.Sort(perm)
					copy(g, perm)
				}
				src := make([]float64, tc.w*tc.n)
				for i := range src {
					src[i] = rng.NormFloat64()
				}
				if bad != 0 {
					// In the copied range, or (where the range is
					// narrower than the rows) outside it, unseen.
					src[(tc.c0+rng.IntN(tc.c1-tc.c0))*tc.n+tc.q0+rng.IntN(tc.m)] = bad
				}
				var f32s []float32
				if f32 {
					f32s = make([]float32, len(src))
					for i, x := range src {
						f32s[i] = float32(x)
					}
				}
				const sentinel = -12345.5
				dst := make([]float64, N*tc.w)
				want := make([]float64, N*tc.w)
				for i := range dst {
					dst[i], want[i] = sentinel, sentinel
				}
				wantFinite := true
				for j, i := range g {
					for c := tc.c0; c < tc.c1; c++ {
						x := src[c*tc.n+tc.q0+j]
						if f32 {
							x = float64(f32s[c*tc.n+tc.q0+j])
						}
						want[i*tc.w+c] = x
						wantFinite = wantFinite && !math.IsNaN(x) && !math.IsInf(x, 0)
					}
				}
				var finite bool
				if f32 {
					finite = scatterSaveCols(dst, tc.w, f32s, tc.n, tc.q0, g, tc.c0, tc.c1)
				} else {
					finite = scatterSaveCols(dst, tc.w, src, tc.n, tc.q0, g, tc.c0, tc.c1)
				}
				if ok, i := bitsEqual(dst, want); !ok {
					t.Errorf("%s: value %d = %v, want %v", name, i, dst[i], want[i])
				}
				if finite != wantFinite {
					t.Errorf("%s: finite = %v, want %v", name, finite, wantFinite)
				}
			}
		}
	}
}

// TestSaveGroups checks saveGroups' split of the saved states: groups of
// whole columns of at least the group size, at most saveGroupsMax, none
// where they would be less than two groups, where the results come back
// in chunks of trajectories or where the states stay on the device.
func TestSaveGroups(t *testing.T) {
	for _, tc := range []struct {
		n, k, d, group, chunk int
		omit                  ode.Omit
		want                  int
	}{
		{n: 4096, k: 1000, d: 4, want: 500}, // 131 MB: 8 groups of 500 columns
		{n: 4096, k: 1, d: 4, want: 0},
		{n: 4096, k: 100, d: 4, want: 134}, // 13 MB: 3 groups of 400 columns
		{n: 4096, k: 1000, d: 4, chunk: 2, want: 0},
		{n: 4096, k: 1000, d: 4, omit: ode.OmitStates, want: 0},
		{n: 10, k: 7, d: 3, group: 8 * 10, want: 3}, // 21 columns of one group's bytes: 8 groups
		{n: 10, k: 7, d: 3, group: 8 * 10 * 8, want: 11},
	} {
		name := fmt.Sprintf("n=%d/k=%d/d=%d/group=%d/chunk=%d/omit=%d", tc.n, tc.k, tc.d, tc.group, tc.chunk, tc.omit)
		r := &run{ex: &executor{tun: Tuning{saveGroup: tc.group}}, k: tc.k, d: tc.d, omit: tc.omit}
		var l layout
		for a := range l.off {
			l.off[a] = -1
		}
		l.off[argYs], l.bytes[argYs] = 0, int64(tc.n*tc.k*tc.d*8)
		if got := r.saveGroups(tc.n, &l, tc.chunk); got != tc.want {
			t.Errorf("%s: %d columns a group, want %d", name, got, tc.want)
		}
	}
}

// TestHostEngineSaveGroups checks that saved states copied back apart from
// the other results, in groups of columns each transposed while the next
// is copied (Tuning.saveGroup: here groups of a few kB, eight of them),
// are those of one copy bit for bit: solves, gradients with the record
// and on its mesh, gradients with the states omitted (the saves of a
// loss stay on the device), in float64 and float32, and with failed
// trajectories (their rows NaN).
func TestHostEngineSaveGroups(t *testing.T) {
	needHost(t)
	testSaveGroups(t, "cuda-host", "cuda-host-f32")
}

// TestGPUSaveGroups is TestHostEngineSaveGroups on the device ("cuda",
// "cuda-f32"): the saved states' copies in groups (readSaves) beside the
// transposes, bit for bit those of one copy.
//
//	cuda.test -test.run 'TestGPUSaveGroups' -test.v
func TestGPUSaveGroups(t *testing.T) {
	needGPUEngine(t)
	testSaveGroups(t, "cuda", "cuda-f32")
}

// testSaveGroups is TestHostEngineSaveGroups on the engines f64 and f32.
func testSaveGroups(t *testing.T, f64, f32 string) {
	const n = 300
	c := saveTimesCase(t, lorenzCase(n, 1e-4), 60) // rtol: the float32 engine's
	for _, eng := range []string{f64, f32} {
		t.Run(eng, func(t *testing.T) {
			groups := c.solver(t, tuned(t, eng, Tuning{saveGroup: 1024}))
			plain := c.solver(t, tuned(t, eng, Tuning{}))
			sameRuns(t, c, groups, plain)
			sameOmitted(t, c, groups, plain)
		})
	}
	// Failures: a step budget that about half the trajectories exhaust
	// (ρ spread over [0, 28]: the larger ones take more steps).
	t.Run("failures", func(t *testing.T) {
		f := c
		f.set.MaxSteps = medianSteps(t, f, f64)
		f.set.AllowFailures = true
		p := f.prob
		gs, err := f.solver(t, tuned(t, f64, Tuning{saveGroup: 1024})).Solve(&p)
		if err != nil {
			t.Fatal(err)
		}
		ws, err := f.solver(t, f64).Solve(&p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ws.Status, ode.MaxStepsReached) || !slices.Contains(ws.Status, ode.OK) {
			t.Fatalf("want some trajectories OK and some out of steps")
		}
		sameSolution(t, "failures solve", gs, ws)
		w := len(p.SaveAt) * p.Field.Dim
		for i, st := range gs.Status {
			if st != ode.OK && slices.ContainsFunc(gs.Ys[i*w:(i+1)*w], func(x float64) bool { return !math.IsNaN(x) }) {
				t.Fatalf("trajectory %d (%v): a saved state is not NaN", i, st)
			}
		}
	})
}

// BenchmarkSaveTranspose times the transpose of the saved states (the
// largest host work of BenchmarkSaveHostWork) at n = 4096 Kepler-sized
// states (d = 4) with 1 and 1,000 save times: their transpose from the device's component-major
// layout into a Solution's rows on all cores, as a launch does it
// ("new-ms": scatterSaves over saveGroups' groups, one after another; on
// a GPU the copy of each group overlaps the transpose of the one before)
// and as it did before ("old-ms": a trajectory at a time, oldScatterSaves),
// alternated within each iteration, medians; and "copy-ms", a straight
// copy of as many bytes on all cores (par.Copy), what a layout of the
// device's that matched the result's would leave.
//
//	go test ./cuda -run '^$' -bench SaveTranspose -benchtime 20x
func BenchmarkSaveTranspose(b *testing.B) {
	const n, d = 4096, 4
	for _, k := range []int{1, 1000} {
		b.Run(fmt.Sprintf("saves=%d", k), func(b *testing.B) {
			w := k * d
			ys := make([]float64, n*w)
			for i := range ys {
				ys[i] = float64(i%1000) * 0.5
			}
			g := make([]int, n)
			for i := range g {
				g[i] = i
			}
			r := &run{ex: &executor{}, k: k, d: d, res: &ode.Result{Ys: make([]float64, n*w)}}
			var l layout
			for a := range l.off {
				l.off[a] = -1
			}
			l.off[argYs], l.bytes[argYs] = 0, int64(len(ys)*8)
			cols := r.saveGroups(n, &l, 0)
			if cols == 0 {
				cols = w
			}
			flat := make([]float64, n*w)
			copy(r.res.Ys, ys) // the pages touched
			copy(flat, ys)
			var olds, news, copies []float64
			b.ResetTimer()
			for range b.N {
				t := time.Now()
				oldScatterSaves(r.res.Ys, w, ys, n, g)
				olds = append(olds, float64(time.Since(t))/1e6)
				t = time.Now()
				for c0 := 0; c0 < w; c0 += cols {
					r.scatterSaves(reals{f64: ys}, g, 0, n, c0, min(w, c0+cols), nil, nil)
				}
				news = append(news, float64(time.Since(t))/1e6)
				t = time.Now()
				par.Copy(flat, ys)
				copies = append(copies, float64(time.Since(t))/1e6)
			}
			b.ReportMetric(odetest.Median(olds), "old-ms")
			b.ReportMetric(odetest.Median(news), "new-ms")
			b.ReportMetric(odetest.Median(copies), "copy-ms")
		})
	}
}

// oldScatterSaves is the saved states' transpose as the engine ran it
// before scatterSaveCols, kept for BenchmarkSaveTranspose's comparison:
// tasks of savesTask trajectories on all cores, each trajectory's part of
// a strip of scatterTile columns at a time (rows of up to four values
// through scatterCols).
func oldScatterSaves(dst []float64, w int, f []float64, n int, g []int) {
	task := savesTask(w)
	par.Run((n+task-1)/task, 0, func(_, t int) {
		a, b := t*task, min(n, (t+1)*task)
		if w <= 4 {
			scatterCols(dst, w, reals{f64: f}, n, a, g[a:b])
			return
		}
		for c0 := 0; c0 < w; c0 += scatterTile {
			c1 := min(c0+scatterTile, w)
			for j, i := range g[a:b] {
				row := dst[i*w+c0 : i*w+c1]
				at := c0*n + a + j
				for c := range row {
					row[c] = f[at+c*n]
				}
			}
		}
	})
}
