package cuda

import (
	"math"

	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/ode"
)

// The saved states' path back to the host (issue 25). On the device a
// launch's saved states are component-major, value c of K·Dim of launch
// trajectory q at ys[c*n+q] (coalesced for the kernel's threads); a
// Solution's Ys are row-major, trajectory i's K·Dim values at
// Ys[i*K*Dim:]. The host transposes them (scatterSaveCols), on all cores
// (scatterSaves). A launch whose saved states are large (saveGroups) copies
// them back apart from its other results, after them, in groups of whole
// columns (each one range of the device's array, one copy): the first
// group is transposed while the next is copied. At 1,000 save times of
// Kepler's four components, n = 4096, they are 131 MB, whose copy over
// PCIe (about 25 GB/s on an H100 host) is the floor, about 5 ms.

// saveMicro is the trajectories of scatterSaveCols' inner block: one
// cache line of a column of float64 saves (8 values), read whole at
// once and written to 8 rows.
const saveMicro = 8

// scatterSaveCols copies the columns [c0, c1) of the trajectories q0,
// q0+1, … of a launch of n (f component-major, w columns: column c of
// launch trajectory q at f[c*n+q]) to the rows g of dst (row-major,
// trajectory i's row at dst[i*w:(i+1)*w]), and reports whether every
// value copied is finite (the check rides on the copy's read, as
// scatterCols').
//
// It is a transpose in strips of scatterTile columns, each strip in
// blocks of saveMicro trajectories: a block reads each column's line
// (saveMicro consecutive values) once, whole, and writes saveMicro runs
// of its rows. A trajectory at a time (scatterTiles before) read every
// source line saveMicro times, each time after 63 other lines of the same
// cache set (columns n·8 bytes apart, a power of two at n = 4096): about
// about twice as slow (BenchmarkSaveTranspose).
func scatterSaveCols[T float32 | float64](dst []float64, w int, f []T, n, q0 int, g []int, c0, c1 int) (finite bool) {
	var bad uint64
	m := len(g)
	for s0 := c0; s0 < c1; s0 += scatterTile {
		s1 := min(s0+scatterTile, c1)
		width := s1 - s0
		j := 0
		for ; j+saveMicro <= m; j += saveMicro {
			r0 := dst[g[j]*w+s0:][:width:width]
			r1 := dst[g[j+1]*w+s0:][:width:width]
			r2 := dst[g[j+2]*w+s0:][:width:width]
			r3 := dst[g[j+3]*w+s0:][:width:width]
			r4 := dst[g[j+4]*w+s0:][:width:width]
			r5 := dst[g[j+5]*w+s0:][:width:width]
			r6 := dst[g[j+6]*w+s0:][:width:width]
			r7 := dst[g[j+7]*w+s0:][:width:width]
			at := s0*n + q0 + j
			for c := range width {
				v := f[at+c*n:][:saveMicro:saveMicro]
				x0, x1, x2, x3 := float64(v[0]), float64(v[1]), float64(v[2]), float64(v[3])
				x4, x5, x6, x7 := float64(v[4]), float64(v[5]), float64(v[6]), float64(v[7])
				bad |= (math.Float64bits(x0)&expBits + expOne) | (math.Float64bits(x1)&expBits + expOne) |
					(math.Float64bits(x2)&expBits + expOne) | (math.Float64bits(x3)&expBits + expOne) |
					(math.Float64bits(x4)&expBits + expOne) | (math.Float64bits(x5)&expBits + expOne) |
					(math.Float64bits(x6)&expBits + expOne) | (math.Float64bits(x7)&expBits + expOne)
				r0[c], r1[c], r2[c], r3[c] = x0, x1, x2, x3
				r4[c], r5[c], r6[c], r7[c] = x4, x5, x6, x7
			}
		}
		for ; j < m; j++ {
			row := dst[g[j]*w+s0:][:width:width]
			at := s0*n + q0 + j
			for c := range row {
				x := float64(f[at+c*n])
				bad |= math.Float64bits(x)&expBits + expOne
				row[c] = x
			}
		}
	}
	return bad>>63 == 0
}

// scatterSaves copies the columns [c0, c1) of the saved states ys of the
// launch trajectories [q0, q1) (of the launch over the trajectories g,
// component-major: scatterSaveCols) into the run's Ys, in tasks of
// savesTask trajectories on all cores, and writes NaN over those columns
// of the failed trajectories' rows (status and flags: the launch's, nil
// for a kernel on a given mesh). A row of at most four values (one save
// time of up to four components) goes through scatterCols' row loops.
func (r *run) scatterSaves(ys reals, g []int, q0, q1, c0, c1 int, status, flags []int32) {
	n, w := len(g), r.k*r.d
	dst := r.res.Ys
	task := savesTask(c1 - c0)
	par.Run((q1-q0+task-1)/task, 0, func(_, t int) {
		a, b := q0+t*task, min(q1, q0+(t+1)*task)
		switch {
		case c0 == 0 && c1 == w && w <= 4:
			scatterCols(dst, w, ys, n, a, g[a:b])
		case ys.f64 != nil:
			scatterSaveCols(dst, w, ys.f64, n, a, g[a:b], c0, c1)
		default:
			scatterSaveCols(dst, w, ys.f32, n, a, g[a:b], c0, c1)
		}
		if status == nil {
			return
		}
		for q := a; q < b; q++ {
			// (Job.StopOnStiff keeps a stiff trajectory's saves before its
			// stop.)
			if st := ode.Status(status[q]); flags[q]&flagOverflow == 0 && st != ode.OK && st != ode.Stiff {
				row := dst[g[q]*w:][:w]
				for c := c0; c < c1; c++ {
					row[c] = math.NaN()
				}
			}
		}
	})
}

// saveGroupMin is the smallest group of columns of saved states that a
// launch copies back on its own (saveGroups): 4 MiB, whose copy (about
// 0.2 ms over PCIe) is far above a copy's fixed cost (about 10 µs).
// Tuning.saveGroup lowers it for the tests.
const saveGroupMin = 4 << 20

// saveGroupsMax is the most groups saveGroups splits the saved states
// into: the last group's transpose is what the copies do not hide.
const saveGroupsMax = 8

// saveGroups returns the columns (of K·Dim) of each group of the saved
// states of a launch of n trajectories in layout l copied back on its own
// after the launch's other results (readSaves), the first transposed
// while the next is copied; 0 where they come back with the others: none
// are copied back, the launch's results come back in chunks of
// trajectories (chunk > 0, pipeChunk), or they are less than two groups
// of saveGroupMin bytes.
func (r *run) saveGroups(n int, l *layout, chunk int) (cols int) {
	w := r.k * r.d
	if chunk > 0 || w == 0 || n == 0 || l.off[argYs] < 0 || !r.downloaded(argYs) {
		return 0
	}
	group := int64(saveGroupMin)
	if t := r.ex.tun.saveGroup; t > 0 {
		group = int64(t)
	}
	groups := min(saveGroupsMax, int(l.bytes[argYs]/group), w)
	if groups < 2 {
		return 0
	}
	return (w + groups - 1) / groups
}

// readSaves copies the saved states of a launch of n trajectories in
// layout l back from the arena into dst (their bytes, component-major as
// on the device) in groups of cols columns (saveGroups), one copy a group,
// sending each group's columns [c0, c1) on ready once they are in dst.
func (r *run) readSaves(dst []byte, ar *arena, n int, l *layout, cols int, ready chan<- [2]int) error {
	w := r.k * r.d
	col := l.bytes[argYs] / int64(w) // the bytes of a column, n values
	for c0 := 0; c0 < w; c0 += cols {
		c1 := min(w, c0+cols)
		lo, hi := int64(c0)*col, int64(c1)*col
		if err := r.read(dst[lo:hi], ar.addr+uint64(l.off[argYs]+lo)); err != nil {
			return err
		}
		ready <- [2]int{c0, c1}
	}
	return nil
}
