package cuda

import (
	_ "embed"
	"fmt"
	"math"
	"sync"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
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

// Saved states kept on the device (ode.Settings.KeepSaves, issue 23:
// copied to the host only when the caller reads them). A run whose job
// asks for it, on an engine that keeps meshes (float64, one device), with
// its saves' bytes not needed on the host by the run itself (a loss or
// gradient with events reads them: pastTerminal), launches all its
// trajectories at once into an arena as any run, its kernel writing the
// saved states in place into a device allocation of their own (argAddr),
// component-major as in the arena, and then, in the same batch, copies
// the launch's statuses and flags after them (colSaves): the result's
// Saves (residentSaves). They are rearranged row-major, as Solution.Ys,
// only when read (CopyTo: the saves kernel, saves.cuh, into memory of
// the read's own, then one copy). With Tuning.oldSaves, as before
// session 46, the saves kernel rearranged them after every launch from
// the arena into the allocation, row-major (rowSaves), and CopyTo is one
// copy. The saves are neither copied back nor transposed on the host. A run split into several launches (more trajectories than the
// device's free memory holds) returns Ys as before, and a run whose
// record overflowed copies the kept saves to the host (unkeepSaves)
// before the trajectories run again.

// savesCuh is the saves kernel's template; savesKernel compiles it after
// the prelude and the statuses and flag it reads.
//
//go:embed saves.cuh
var savesCuh string

// savesKernelName is the saves kernel's name (saves.cuh).
const savesKernelName = "gs_s_rows"

// Words of struct gs_sargs (saves.cuh), in order.
const (
	swN = iota
	swW
	swPad
	swNaN
	swStatus // the first pointer
	swFlags
	swYs
	swRows
	numSavesWords
)

// savesTile and savesThreads are the saves kernel's tile (GS_S_TILE) and
// threads per block (GS_S_TILE·GS_S_ROWS).
const (
	savesTile    = 32
	savesThreads = 256
)

// auxSets holds the kernels that depend on no plan (the saves kernel,
// the mesh columns' kernel), per backend, tuning and name.
var auxSets = struct {
	sync.Mutex
	m map[auxKey]*auxSet
}{m: map[auxKey]*auxSet{}}

type auxKey struct {
	trainSetKey
	name string
}

type auxSet struct {
	once sync.Once
	k    backendKernel
	err  error
}

// auxKernel returns the kernel called name of source src() (what names
// it in an error) on ex's backend, compiling it on first use.
func (ex *executor) auxKernel(name, what string, src func() string) (backendKernel, error) {
	key := auxKey{trainSetKey{ex.be, ex.tun}, name}
	auxSets.Lock()
	s := auxSets.m[key]
	if s == nil {
		s = &auxSet{}
		auxSets.m[key] = s
	}
	auxSets.Unlock()
	s.once.Do(func() {
		text := src()
		s.k, s.err = ex.be.compile(text, name, ex.tun.compileOptions(len(text)))
	})
	if s.err != nil {
		return nil, fmt.Errorf("cuda: engine %s: compiling the %s: %w", ex.name, what, s.err)
	}
	return s.k, nil
}

// savesKernel returns the saves kernel of ex's backend, compiling it on
// first use.
func (ex *executor) savesKernel() (backendKernel, error) {
	return ex.auxKernel(savesKernelName, "saved states' kernel", func() string {
		return fmt.Sprintf("#define GS_S_OK %d\n#define GS_S_STIFF %d\n#ifndef GS_FLAG_OVERFLOW\n#define GS_FLAG_OVERFLOW %d\n#endif\n",
			ode.OK, ode.Stiff, flagOverflow) + kernelgen.Prelude() + savesCuh
	})
}

// keepsSaves reports whether a run of kind v for job j may keep its
// saved states on the device (Job.KeepSaves; the whole run then needs
// one launch, which pass decides).
func (ex *executor) keepsSaves(j *ode.Job, v kernelgen.Config) bool {
	return j.KeepSaves && ex.keepMesh && !ex.tiles && ex.prec == Float64 && v.Saves > 0 &&
		j.Omit&ode.OmitStates == 0 && !(v.Events && (v.Loss || v.Grad))
}

// keepSaves gives the run device memory for its saved states (n rows of
// K·Dim), before a launch of all its n trajectories: the resident saves
// of the Result passed back (Job.Reuse) where they are the device's and
// large enough, else a new allocation. It reports whether it has them;
// if not, the saves go to the host as without Job.KeepSaves.
func (r *run) keepSaves(n int) bool {
	w := r.k * r.d
	if old := r.j.Reuse; old != nil {
		if s, ok := old.Saves.(*residentSaves); ok && s.reshape(r.ex, n, w, !r.ex.tun.oldSaves) {
			r.sout = s
			return true
		}
	}
	if _, err := r.ex.savesKernel(); err != nil {
		return false
	}
	s, err := newResidentSaves(r.ex, n, w, !r.ex.tun.oldSaves)
	if err != nil {
		return false
	}
	r.sout = s
	return true
}

// dropSaves gives up keeping the saved states on the device before any
// launch wrote them (a pass in chunks): the run's Ys are allocated on the
// host, and memory allocated for the run goes back.
func (r *run) dropSaves() {
	if r.sout == nil {
		return
	}
	if old := r.j.Reuse; old == nil || old.Saves != ode.ResidentSaves(r.sout) {
		r.sout.Release()
	}
	r.sout = nil
	r.hostYs()
}

// hostYs allocates the run's Ys on the host (in Job.Reuse's storage
// where large enough).
func (r *run) hostYs() {
	var old []float64
	if r.j.Reuse != nil {
		old = r.j.Reuse.Ys
	}
	r.res.Ys = overwrite(old, r.j.N*r.k*r.d)
}

// unkeepSaves copies the saved states kept on the device to the run's
// Ys and gives the device memory back (a rerun of some trajectories
// scatters their saves on the host).
func (r *run) unkeepSaves() error {
	s := r.sout
	if s == nil {
		return nil
	}
	r.sout = nil
	r.hostYs()
	defer s.Release()
	return s.CopyTo(r.res.Ys)
}

// rowSaves queues the saves kernel after the launch's kernel: the saved
// states of the launch's n trajectories in arena ar (layout l) into the
// kept saves, row-major, NaN rows for failed trajectories (the form
// before session 46: Tuning.oldSaves).
func (r *run) rowSaves(q queue, ar *arena, n int, l *layout) error {
	k, err := r.ex.savesKernel()
	if err != nil {
		return err
	}
	at := func(a int) uint64 { return r.argAddr(ar, l, a) } // (a kept gradient's in its kept results)
	var status, flags uint64
	if r.v.Adaptive {
		status, flags = at(argStatus), at(argFlags)
	}
	if err := queueRows(q, k, n, r.k*r.d, status, flags, at(argYs), r.sout.mem.addr); err != nil {
		return err
	}
	r.tr.add(func(t *TraceStats) { t.SavesKept += int64(n) * int64(r.k*r.d) * 8 })
	return nil
}

// colSaves queues, after the launch's kernel, which wrote the saved
// states of its n trajectories in place into the kept saves
// (component-major: argAddr), the copy of its statuses and flags (arena
// ar, layout l) after them, for the saves kernel's NaN rows when they are
// read (residentSaves.CopyTo).
func (r *run) colSaves(q queue, ar *arena, n int, l *layout) error {
	s := r.sout
	s.status = r.v.Adaptive
	if s.status {
		if err := q.copyDevice(s.statusAddr(), r.argAddr(ar, l, argStatus), int64(n)*4); err != nil {
			return err
		}
		if err := q.copyDevice(s.flagsAddr(), r.argAddr(ar, l, argFlags), int64(n)*4); err != nil {
			return err
		}
	}
	r.tr.add(func(t *TraceStats) { t.SavesKept += int64(n) * int64(r.k*r.d) * 8 })
	return nil
}

// queueRows queues the saves kernel k: the saved states of n trajectories
// of w values each at ys (component-major) into rows (row-major), NaN
// rows for the trajectories that failed by the statuses and flags at
// status and flags (0: none fails).
func queueRows(q queue, k backendKernel, n, w int, status, flags, ys, rows uint64) error {
	var words [numSavesWords]uint64
	words[swN], words[swW], words[swNaN] = uint64(n), uint64(w), math.Float64bits(math.NaN())
	words[swStatus], words[swFlags] = status, flags
	words[swYs], words[swRows] = ys, rows
	tiles := ((w + savesTile - 1) / savesTile) * ((n + savesTile - 1) / savesTile)
	return q.enqueue(k, tiles*savesThreads, savesThreads, 0, words[:])
}
