package cuda

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	rtrace "runtime/trace"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"

	"github.com/gradsolve-go/gradsolve/internal/buf"
	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// defaultBlock is the threads per block of the engine's kernels (fewer if
// a kernel's registers allow fewer).
const defaultBlock = 128

// executor runs the operations of one plan on one backend.
type executor struct {
	be   backend
	plan *ode.Plan
	prec Precision
	name string
	tun  Tuning
	// tiles makes gradients sum shared contributions per tile of
	// scan.TileSize trajectories (Config.TileSums): set by MultiEngine.
	tiles bool
	// keepMesh keeps recorded meshes in device memory (ode.Mesh.Resident)
	// where a record runs in one launch: set by Engine in float64.
	keepMesh bool

	// set holds the step programs and compiled kernels, shared with the
	// other executors of the plan (kernelSetOf).
	set *kernelSet

	mu sync.Mutex
	// lastCfg and lastEntry are the configuration and kernel of the last
	// call (under mu): a loop's calls find their kernel without
	// formatting its key.
	lastCfg   kernelgen.Config
	lastEntry *kernelEntry
	keep      *kept // memory kept between operations (spare and staging under mu)

	// chunkMu is held by the copy that uses keep.chunks (copyChunked).
	chunkMu   sync.Mutex
	chunkNone bool // the backend gave no host memory for the chunks

	rows atomic.Int64 // most accepted steps of a trajectory seen, to size record buffers

	// terms holds an [N] loss-term buffer between runs (under mu; a
	// sync.Pool would drop it at every other collection, and a call of a
	// million trajectories allocate 8 MB again), and ident the identity
	// 0, 1, … (read-only, grown under mu) that names the trajectories of
	// a launch of consecutive ones: a call of a million trajectories would
	// otherwise allocate and fill 16 MB of them.
	terms []float64
	ident []int
}

// kernelEntry is a compiled kernel of a kernel set.
type kernelEntry struct {
	once  sync.Once
	k     backendKernel
	info  kernelgen.KernelInfo
	block int
	err   error
}

// arena is one device allocation.
type arena struct {
	addr uint64
	size int64
	// held records the inputs the arena holds from the launch that last
	// filled it (reuse); nil: none known.
	held *heldInputs
}

func newExecutor(be backend, pl *ode.Plan, prec Precision, name string, tun Tuning) *executor {
	ex := &executor{be: be, plan: pl, prec: prec, name: name, tun: tun, set: kernelSetOf(be, pl, prec, tun), keep: &kept{be: be}}
	// A Solver holds its executor; once neither is reachable, the memory
	// kept for later operations goes back to the device and the driver.
	runtime.AddCleanup(ex, (*kept).release, ex.keep)
	return ex
}

// kept is the memory an executor keeps between operations: the larger of
// its arenas, host staging buffers, and the two chunk buffers of
// copyChunked (taken on first use).
type kept struct {
	be      backend
	spare   *arena   // a free arena, kept for the next pass
	staging [][]byte // free host staging buffers, kept for the next launches
	// hostMem marks the staging buffers of be.hostAlloc (page-locked on a
	// GPU), by their first byte: a buffer dropped from staging is given
	// back to the backend.
	hostMem map[*byte]bool
	chunks  [2][]byte // buffers of be.hostAlloc of meshChunk() bytes each
	clocks  []clock   // kernel timers, kept for the next launches (under the executor's mu)
}

// release gives the kept memory back to the backend (the executor is
// unreachable: nothing else uses it). A failure to free leaves memory to
// the context's end; there is no one to report it to.
func (k *kept) release() {
	if k.spare != nil {
		_ = k.be.free(k.spare.addr)
	}
	for _, b := range k.staging {
		if k.hostMem[&b[0]] {
			k.be.hostFree(b)
		}
	}
	for _, b := range k.chunks {
		if b != nil {
			k.be.hostFree(b)
		}
	}
	for _, c := range k.clocks {
		c.free()
	}
}

// kernel returns the compiled kernel of configuration v, compiling it on first
// use.
func (ex *executor) kernel(v kernelgen.Config, lp *ode.LossPlan, tr *Trace) (*kernelEntry, error) {
	ex.mu.Lock()
	e := ex.lastEntry
	if e == nil || v != ex.lastCfg {
		key := v.Key()
		set := ex.set
		set.mu.Lock()
		var ok bool
		if e, ok = set.kernels.get(key); !ok {
			e = &kernelEntry{}
			set.kernels.add(key, e)
		}
		set.mu.Unlock()
		ex.lastCfg, ex.lastEntry = v, e
	}
	ex.mu.Unlock()
	e.once.Do(func() {
		start := time.Now()
		defer func() { tr.add(func(t *TraceStats) { t.Compile += time.Since(start) }) }()
		progs, err := ex.set.stepPrograms(ex.plan)
		if err != nil {
			e.err = err
			return
		}
		src, info, err := kernelgen.KernelSource(progs, v, lp, ex.prec)
		if err != nil {
			e.err = err
			return
		}
		// A source too large for NVRTC is refused (SizeError).
		if e.err = ex.checkSourceSize(len(src)); e.err != nil {
			return
		}
		e.info = info
		if e.k, e.err = ex.be.compile(src, kernelgen.KernelName, ex.tun.compileOptions(len(src))); e.err != nil {
			return
		}
		e.block = defaultBlock
		if v.LanesBlockAcc {
			e.block = kernelgen.LanesAccBlock
		}
		if m := e.k.maxBlock(); m > 0 && m < e.block {
			e.block = max(32, m/32*32)
		}
	})
	return e, e.err
}

// takeClock returns a kernel timer, a kept one if there is one.
func (ex *executor) takeClock() (clock, error) {
	ex.mu.Lock()
	if k := len(ex.keep.clocks); k > 0 {
		c := ex.keep.clocks[k-1]
		ex.keep.clocks = ex.keep.clocks[:k-1]
		ex.mu.Unlock()
		return c, nil
	}
	ex.mu.Unlock()
	return ex.be.newClock()
}

// keptClocks is the most clocks an executor keeps between launches: a
// launch of chunk kernels takes one a chunk (launchChunks: 16 at 2^22
// trajectories), and making or freeing one is two calls of the device's
// own.
const keptClocks = 32

// giveClock keeps c for a later launch (at most keptClocks are kept).
func (ex *executor) giveClock(c clock) {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if len(ex.keep.clocks) < keptClocks {
		ex.keep.clocks = append(ex.keep.clocks, c)
		return
	}
	c.free()
}

// takeArena returns an allocation of at least size bytes, reusing the
// spare one if it is large enough.
func (ex *executor) takeArena(size int64) (*arena, error) {
	ex.mu.Lock()
	sp := ex.keep.spare
	if sp != nil && sp.size >= size {
		ex.keep.spare = nil
		ex.mu.Unlock()
		return sp, nil
	}
	ex.mu.Unlock()
	addr, err := ex.be.alloc(size)
	if err != nil {
		return nil, err
	}
	return &arena{addr: addr, size: size}, nil
}

// giveArena keeps a (the larger of it and the spare) for the next pass.
func (ex *executor) giveArena(a *arena) {
	ex.mu.Lock()
	if ex.keep.spare == nil || ex.keep.spare.size < a.size {
		a, ex.keep.spare = ex.keep.spare, a
	}
	ex.mu.Unlock()
	if a != nil {
		ex.be.free(a.addr)
	}
}

// takeStaging returns a host staging buffer of n bytes (its contents are
// left over from an earlier launch), reusing a kept one if large enough:
// launches of a large ensemble stage hundreds of megabytes each. A new
// one is the backend's host memory where it gives some (page-locked on a
// GPU, so the copies through it run at the bus's speed) and n is at most
// maxStaging(), else Go memory.
func (ex *executor) takeStaging(n int64) []byte {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	// The smallest kept buffer that fits: a launch holds its inputs' and
	// its results' buffers at once, and the first that fits could be the
	// larger one, leaving the results a new buffer every call.
	best := -1
	for i, b := range ex.keep.staging {
		if int64(cap(b)) >= n && (best < 0 || cap(b) < cap(ex.keep.staging[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := ex.keep.staging[best]
		ex.keep.staging = append(ex.keep.staging[:best], ex.keep.staging[best+1:]...)
		return b[:n]
	}
	if n > 0 && n <= ex.maxStaging() {
		if b := ex.be.hostAlloc(n); b != nil {
			if ex.keep.hostMem == nil {
				ex.keep.hostMem = make(map[*byte]bool)
			}
			ex.keep.hostMem[&b[0]] = true
			return b
		}
	}
	return make([]byte, n)
}

// defaultMaxStaging is the largest staging buffer taken from the
// backend's host memory (1 GiB; Tuning.maxStaging for the tests):
// page-locked memory is taken from the whole system, so a larger launch
// (tens of millions of trajectories at once) stages in Go memory.
const defaultMaxStaging int64 = 1 << 30

func (ex *executor) maxStaging() int64 {
	if m := ex.tun.maxStaging; m > 0 {
		return m
	}
	return defaultMaxStaging
}

// giveStaging keeps b for later launches (at most two buffers, the
// largest); a buffer of the backend's that is dropped goes back to it.
func (ex *executor) giveStaging(b []byte) {
	if cap(b) == 0 {
		return
	}
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.keep.staging = append(ex.keep.staging, b[:cap(b)])
	if len(ex.keep.staging) > 2 {
		small := 0
		for i, x := range ex.keep.staging {
			if cap(x) < cap(ex.keep.staging[small]) {
				small = i
			}
		}
		drop := ex.keep.staging[small]
		ex.keep.staging = append(ex.keep.staging[:small], ex.keep.staging[small+1:]...)
		if p := &drop[0]; ex.keep.hostMem[p] {
			delete(ex.keep.hostMem, p)
			ex.be.hostFree(drop)
		}
	}
}

// spareSize returns the size of the spare arena.
func (ex *executor) spareSize() int64 {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if ex.keep.spare == nil {
		return 0
	}
	return ex.keep.spare.size
}

// StartTimes reports that the executor runs per-trajectory start times
// (ode.Job.T0s): Method Auto continues a stiff trajectory with Rodas5P
// from where its stiffness test fired (ode.StartTimesExecutor).
func (ex *executor) StartTimes() bool { return true }

// Run performs job j on the device.
func (ex *executor) Run(ctx context.Context, j *ode.Job) (*ode.Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now()
	r, err := ex.runJob(ctx, j)
	if err != nil {
		return nil, err
	}
	defer rtrace.StartRegion(ctx, "cuda.finish").End()
	return r.finish(time.Since(start))
}

// variant returns the kernel configuration of job j on this executor
// (chooseLayout).
func (ex *executor) variant(j *ode.Job) kernelgen.Config {
	sp, err := ex.set.stepPrograms(ex.plan)
	if err != nil {
		sp = nil
	}
	lj := layoutJob{n: j.N, lossVectors: func() bool {
		if j.Loss == nil {
			return false
		}
		set := ex.set
		set.mu.Lock()
		x, ok := set.lossVectors.get(j.Loss.Hash)
		set.mu.Unlock()
		if !ok {
			x = kernelgen.LossHasVectors(j.Loss)
			set.mu.Lock()
			set.lossVectors.add(j.Loss.Hash, x)
			set.mu.Unlock()
		}
		return x
	}, widePer: func(grad, saves bool) (int, error) { return ex.set.widePerWarp(ex.plan, grad, saves) }}
	dev := device{sms: ex.be.sms(), sharedLimit: ex.be.sharedLimit()}
	return chooseLayout(kernelgen.ConfigOf(j), ex.plan, sp, lj, ex.prec, ex.tiles, dev, ex.tun)
}

// prepare compiles the kernel of job j (on first use) and returns it.
func (ex *executor) prepare(j *ode.Job, tr *Trace) (kernelgen.Config, *kernelEntry, error) {
	return ex.prepareConfig(ex.variant(j), j, tr)
}

// prepareConfig is prepare of kernel v.
func (ex *executor) prepareConfig(v kernelgen.Config, j *ode.Job, tr *Trace) (kernelgen.Config, *kernelEntry, error) {
	if (v.Loss || v.Grad) && j.Loss == nil {
		return v, nil, fmt.Errorf("cuda: %v needs a loss", j.Op)
	}
	ke, err := ex.kernel(v, j.Loss, tr)
	if err != nil {
		return v, nil, fmt.Errorf("cuda: engine %s: %w", ex.name, err)
	}
	return v, ke, nil
}

// runJob runs the passes of job j and returns the run, whose
// per-trajectory results are complete and whose sums are not yet formed
// (finish forms them).
func (ex *executor) runJob(ctx context.Context, j *ode.Job) (*run, error) {
	if m := j.Mesh; m != nil && j.Plan != nil && j.Plan.Events != nil && len(m.Events) < m.Rows*m.N {
		return nil, fmt.Errorf("cuda: engine %s: a mesh replayed with events must mark its event steps (Mesh.Events): record it with these events", ex.name)
	}
	tr := traceOf(ctx)
	rg := rtrace.StartRegion(ctx, "cuda.prepare")
	v, ke, err := ex.prepare(j, tr)
	if err != nil {
		rg.End()
		return nil, err
	}
	r := newRun(ex, j, v, ke, tr)
	r.ctx = ctx
	rg.End()
	if j.Mesh != nil && j.Mesh.Resident != nil {
		if r.hin = ex.residentOf(j.Mesh); r.hin == nil {
			if err := j.Mesh.Host(); err != nil {
				return nil, err
			}
		}
	}
	rows := 0
	switch {
	case !v.Adaptive:
		rows = j.Mesh.Rows
	case v.MeshOut || v.Store:
		rows = ex.rowsGuess(j.MaxSteps)
	}
	over, err := r.pass(ctx, nil, rows)
	if err != nil {
		return nil, err
	}
	if len(over) > 0 {
		need := 0
		for _, g := range over {
			need = max(need, r.res.Stats.Accepted[g])
		}
		if err := r.unkeepMesh(rows); err != nil { // reruns go through the host mesh
			return nil, err
		}
		if err := r.unkeepSaves(); err != nil { // and their saves through the host's Ys
			return nil, err
		}
		tr.add(func(t *TraceStats) { t.Reruns += len(over) })
		r.summed = -1 // the reruns' terms replace some: finish adds them all
		if v.TileSums {
			// A tile's shared-gradient sum comes from one launch of all
			// its trajectories.
			over = wholeTiles(over, j.N)
		}
		if over, err = r.pass(ctx, over, need); err != nil {
			return nil, err
		}
		if len(over) > 0 {
			return nil, fmt.Errorf("cuda: engine %s: trajectory %d overflowed its record buffer twice", ex.name, over[0])
		}
	}
	return r, nil
}

// wholeTiles returns the trajectories of the tiles of scan.TileSize
// trajectories (of n) that hold one of idx (ascending), in order.
func wholeTiles(idx []int, n int) []int {
	var out []int
	last := -1
	for _, i := range idx {
		k := i / scan.TileSize
		if k == last {
			continue
		}
		last = k
		for q := k * scan.TileSize; q < min(n, (k+1)*scan.TileSize); q++ {
			out = append(out, q)
		}
	}
	return out
}

// rowsGuess returns the record buffer rows of a first pass: a little more
// than the longest trajectory seen so far, or 128.
func (ex *executor) rowsGuess(maxSteps int) int {
	if t := ex.tun.firstRows; t > 0 {
		return min(t, maxSteps)
	}
	r := 128
	if h := int(ex.rows.Load()); h > 0 {
		r = h + h/8 + 8
	}
	return max(1, min(r, maxSteps))
}

// notice records that a trajectory took rows accepted steps.
func (ex *executor) notice(rows int) {
	for {
		old := ex.rows.Load()
		if int64(rows) <= old || ex.rows.CompareAndSwap(old, int64(rows)) {
			return
		}
	}
}

// run is the state of one Run.
type run struct {
	ex  *executor
	j   *ode.Job
	v   kernelgen.Config
	ke  *kernelEntry
	tr  *Trace
	ctx context.Context // the call's context: its trace regions (runtime/trace) name the phases
	res *ode.Result

	d, np, ns, k, dd int
	sharedBlock      []float64         // the kernels' shared block: Shared, rtol, atol[D], maxsteps
	terms            []float64         // [N] loss terms
	gs, gsLoss       []float64         // [NS] shared gradient of the steps and of the loss itself (unscaled), summed over launches
	tiles            []float64         // with v.tiles instead: [ceil(N/scan.TileSize)][2][NS], the same per tile
	meshH            []float64         // the recorded mesh, step-major [rows][N]
	meshLen          []int             // storage for the mesh's Len (Job.Reuse); with lensOut, the Len scatter writes
	lensOut          bool              // scatter writes the mesh's Len (meshLen, [N]) with the counts
	sum              float64           // the loss terms 0…summed−1 added in order (orderedSum)
	summed           int               // -1 where finish must add the terms itself
	longest          int               // the most accepted steps of a trajectory scatter wrote
	meshE            []int32           // the recorded mesh's event marks, step-major [rows][N] (Mesh.Events), with events
	stored           int64             // bytes of stored states of the largest launch
	gradNonFinite    bool              // a launch copied a gradient that is not finite (scatterCols)
	lazyT            bool              // the times reached and last steps come back only where a trajectory failed (lazyTimes)
	omit             ode.Omit          // the results not copied back (Job.Omit, less what the run reads itself: omitted)
	failedRows       map[int][]float64 // with OmitStates: the final and saved states [Dim + K·Dim] of the trajectories whose loss term is not finite, for lossError

	// With ends (Job.EndTimes), scatter writes every launched
	// trajectory's end time into endT and endM (the Solution's T and the
	// Mesh's T1, [N] each) as it writes its statuses, and ill records
	// that a trajectory scattered did not end OK or is stiff: finish
	// hands the arrays over where none is (Result.EndsWell).
	ends       bool
	ill        bool
	endT, endM []float64

	// inputsBad records that a launch's fill found a Y0 or P value that
	// is not finite (then its arena records no inputs: reuse skips the
	// check along with the staging).
	inputsBad bool

	// hin holds the steps of the mesh to replay in device memory, read in
	// place (instead of argHin in the arena); hout receives the recorded
	// mesh in device memory (instead of argHout), which the result keeps.
	hin, hout *residentMesh

	// keepYs: the run may keep its saved states on the device
	// (keepsSaves); sout then holds them, from the pass that launches all
	// trajectories at once on, and Ys stays nil (saves.go).
	keepYs bool
	sout   *residentSaves

	// q is the queue of the batch a launch's copies and kernel run in
	// (nil outside one: then they go to the backend one by one).
	q queue

	// rb is the trajectories per result block of the launch under way
	// (resultBlockOf), set as it starts.
	rb int
}

func newRun(ex *executor, j *ode.Job, v kernelgen.Config, ke *kernelEntry, tr *Trace) *run {
	pl := ex.plan
	r := &run{ex: ex, j: j, v: v, ke: ke, tr: tr, res: &ode.Result{}, ctx: context.Background(),
		d: pl.Dim, np: pl.Params, ns: pl.Shared, k: v.Saves, dd: v.DataDim}
	n, d, res := j.N, pl.Dim, r.res
	r.sharedBlock = append(append(append(make([]float64, 0, pl.Shared+d+2), j.Shared...), j.RelTol), j.AbsTol...)
	r.sharedBlock = append(r.sharedBlock, float64(j.MaxSteps))
	old := j.Reuse
	if old == nil {
		old = &ode.Result{}
	}
	r.omit = omitted(j, v)
	if v.Adaptive {
		// Every launched trajectory's status is written by scatter
		// (NotRun where its record overflowed, until its rerun), and every
		// trajectory is launched: no pass over them here.
		res.Status = overwrite(old.Status, n)
		if r.lazyT = lazyTimes(j, v); !r.lazyT {
			res.T = overwrite(old.T, n)
		}
		res.Stiff = overwrite(old.Stiff, n)
		// LastH is set for failed trajectories only (scatter): nil when
		// all end well.
		res.Stats = ode.Stats{Accepted: overwrite(old.Stats.Accepted, n)}
		if r.omit&ode.OmitStats == 0 { // else the failures' counts only (scatter)
			res.Stats.Rejected, res.Stats.FieldEvals = overwrite(old.Stats.Rejected, n), overwrite(old.Stats.FieldEvals, n)
		}
		if v.MeshOut && old.Mesh != nil {
			r.meshH, r.meshLen = old.Mesh.H[:0], old.Mesh.Len
		}
		if v.MeshOut {
			// Written with the counts (scatter): finish need not copy them.
			r.meshLen, r.lensOut = overwrite(r.meshLen, n), true
		}
		if j.EndTimes && v.MeshOut && r.lazyT {
			// Res.T is left nil (lazyTimes): its storage and the old
			// mesh's T1 take the end times.
			r.ends = true
			var mt []float64
			if old.Mesh != nil {
				mt = old.Mesh.T1
			}
			r.endT, r.endM = overwrite(old.T, n), overwrite(mt, n)
		}
		if v.Events {
			res.Events = overwrite(old.Events, n)
			if v.MeshOut && old.Mesh != nil {
				r.meshE = old.Mesh.Events[:0]
			}
		}
	} else if v.Events {
		// A given mesh with events: the end times (a terminal event's)
		// and the event counts, as the CPU engine's replay gives them.
		res.T = overwrite(old.T, n)
		res.Events = overwrite(old.Events, n)
	}
	r.keepYs = ex.keepsSaves(j, v)
	if r.omit&ode.OmitStates == 0 {
		res.Y = overwrite(old.Y, n*d)
		if r.k > 0 && !r.keepYs {
			res.Ys = overwrite(old.Ys, n*r.k*d)
		}
	}
	if v.Loss || v.Grad {
		r.terms = ex.takeTerms(n)
	}
	if v.Grad {
		res.GradY0 = overwrite(old.GradY0, n*d)
		res.GradP = overwrite(old.GradP, n*pl.Params)
		r.gs, r.gsLoss = make([]float64, pl.Shared), make([]float64, pl.Shared)
		if v.TileSums {
			r.tiles = make([]float64, numTiles(n)*2*pl.Shared)
		}
	}
	return r
}

// lazyTimes reports whether a record of kind v for job j leaves the times
// reached and the last step sizes on the device unless a trajectory
// failed: a gradient or a loss without events uses them only in a
// failure's message (every trajectory that ends well reaches its T1), so
// at millions of trajectories their 16 bytes a trajectory are not copied
// back and scattered on every call (ode.Result.T is then nil).
func lazyTimes(j *ode.Job, v kernelgen.Config) bool {
	return v.Adaptive && !v.Events && (j.Op == ode.OpGrad || j.Op == ode.OpLoss)
}

// omitted returns the results of a run of kind v for job j that are not
// copied back from the device nor scattered (Job.Omit): the final and
// saved states (argY, argYs) and the rejected-step counts (argRej; the
// field evaluations are computed from them). The saves of a loss or
// gradient with events are copied back all the same: pastTerminal reads
// them (package ode drops them). A failed trajectory's rejected count,
// and the states of a trajectory whose loss term is not finite, are read
// back where that happens (scatter).
func omitted(j *ode.Job, v kernelgen.Config) ode.Omit {
	o := j.Omit
	if j.Op != ode.OpGrad {
		return 0
	}
	if v.Events && v.Saves > 0 {
		o &^= ode.OmitStates
	}
	return o
}

// numTiles returns the number of tiles of scan.TileSize trajectories of n.
func numTiles(n int) int { return (n + scan.TileSize - 1) / scan.TileSize }

// Argument words of the kernel (struct gs_args of kernel.cuh), in order,
// which is also the order of its arrays in the arena.
const (
	argN = iota
	argRows
	argT0
	argScale
	argFirst // the launch's first trajectory of the arrays' n (a chunk's)
	argEnd   // one past its last
	argSh    // first pointer
	argSaveAt
	argT1
	argT0s // per-trajectory start times (Job.T0s), where the job has them
	argY0
	argP
	argData
	argHin
	argLen
	argEvIn // a given mesh's event marks (Mesh.Events), with events
	argGS   // last of the upload region, first of the download region
	argY
	argT
	argLastH
	argStatus
	argAcc
	argRej
	argFlags
	argEvents
	argYs
	argLoss
	argGY0
	argGP // last of the download region
	argTapStep
	argTB
	argHout
	argEvOut // the recorded mesh's event marks, with events
	argStore
	argWork // lanes mode in global memory: the warps' accumulators
	numArgs
)

// layout places the arrays of a launch of n trajectories with record
// buffers of rows rows in one arena, inputs first, then the shared
// gradient and the outputs that are copied back, then the device-only
// arrays.
type layout struct {
	off   [numArgs]int64 // byte offset of each pointer argument; -1 if unused
	bytes [numArgs]int64
	size  int64
}

// layout returns the layout of a launch of n trajectories.
func (r *run) layout(n, rows int) layout {
	v, d, np, ns, k, dd := r.v, r.d, r.np, r.ns, r.k, r.dd
	es := int64(r.ex.prec.Size())
	cnt := func(x int) int64 { return int64(x) * int64(n) }
	var elems [numArgs]int64 // reals, or int32 for the int arrays
	elems[argSh] = int64(ns + d + 2)
	elems[argSaveAt] = int64(k)
	if v.Adaptive {
		elems[argT1] = cnt(1)
		elems[argT], elems[argLastH] = cnt(1), cnt(1)
		elems[argStatus], elems[argAcc], elems[argRej], elems[argFlags] = cnt(1), cnt(1), cnt(1), cnt(1)
		if v.Events {
			elems[argEvents] = cnt(1)
		}
	} else {
		if r.hin == nil {
			elems[argHin] = cnt(rows)
		}
		elems[argLen] = cnt(1)
		if v.Events {
			// The mesh's event marks; the kernel writes the end times and
			// the event counts (and a gradient its tangent flags).
			elems[argEvIn] = cnt(rows)
			elems[argT], elems[argEvents] = cnt(1), cnt(1)
			if v.Grad {
				elems[argFlags] = cnt(1)
			}
		}
	}
	if r.j != nil && r.j.T0s != nil {
		elems[argT0s] = cnt(1)
	}
	elems[argY0], elems[argP], elems[argY] = cnt(d), cnt(np), cnt(d)
	elems[argYs], elems[argTapStep] = cnt(k*d), cnt(k)
	if v.Loss || v.Grad {
		elems[argData], elems[argLoss] = cnt(dd), cnt(1)
	}
	if v.Grad {
		elems[argGS], elems[argGY0], elems[argGP], elems[argTB] = int64(2*ns), cnt(d), cnt(np), cnt(k*d)
		if v.TileSums {
			elems[argGS] *= int64(numTiles(n))
		}
	}
	if v.MeshOut && r.hout == nil {
		elems[argHout] = cnt(rows)
	}
	if v.MeshOut && v.Events {
		// In the arena even where the steps stay on the device: the marks
		// live on the host (Mesh.Events).
		elems[argEvOut] = cnt(rows)
	}
	if v.Store {
		elems[argStore] = cnt(rows * (d + kernelgen.B2i(r.ke.info.StoreT) + kernelgen.B2i(r.ke.info.StoreEvent)))
	}
	if v.LanesGlobal {
		threads, _, _ := r.launchShape(n)
		block, accs := kernelgen.LanesGlobalLayout(d, ns, v.WorkAccs(), threads)
		if v.TileDynamic {
			accs++ // the tile counter, GS_TILE_NEXT
		}
		elems[argSh], elems[argWork] = int64(block), int64(accs)
	}
	var l layout
	off := int64(0)
	for a := argSh; a < numArgs; a++ {
		l.off[a] = -1
	}
	for _, a := range layoutOrder {
		if elems[a] == 0 {
			continue
		}
		size := es
		switch a {
		case argLen, argEvIn, argStatus, argAcc, argRej, argFlags, argEvents, argTapStep, argEvOut:
			size = 4
		}
		l.off[a] = off
		l.bytes[a] = elems[a] * size
		off += (l.bytes[a] + 255) &^ 255
	}
	l.size = max(off, 256)
	return l
}

// layoutOrder is the order of the arrays in the arena: the arguments'
// order, except that the mesh to replay (argHin) comes last of the inputs,
// so that the inputs before it go up from one staging buffer and the mesh
// straight from the caller's rows, and that the download region (argGS
// to argGP in the arguments' order) puts what every call copies back
// first and what it may leave on the device last: the rejected-step
// counts and the states (Job.Omit), then the times reached and the last
// steps (lazyTimes), so that a call that leaves them out copies one
// range back (two where it leaves the states out and not the counts, or
// keeps the times: see spans).
var layoutOrder = func() []int {
	var o []int
	for a := argSh; a < numArgs; a++ {
		switch a {
		case argHin, argT, argLastH, argRej, argY, argYs:
		case argGS:
			o = append(o, argHin, argGS)
		case argGP:
			o = append(o, argGP, argRej, argY, argYs, argT, argLastH)
		default:
			o = append(o, a)
		}
	}
	return o
}()

// rowMajor reports whether argument a of the run's kernel is row-major
// on the device, component c of launch trajectory q at [q*w + c]
// (kernelgen.Config.RowMajor: y0, p, y, gy0, gp of the wide layout), not
// component-major ([c*n + q]) as every other per-trajectory array.
func (r *run) rowMajor(a int) bool {
	switch a {
	case argY0, argP, argY, argGY0, argGP:
		return r.v.RowMajor
	}
	return false
}

// span is a byte range [lo, hi) of the arena.
type span struct{ lo, hi int64 }

// spans returns the byte ranges of the arena holding the used arrays
// for which keep is true, in layoutOrder, arrays next to each other (no
// used array left out between them) in one range; at[a], the offset of
// kept array a in the ranges' bytes laid end to end (their total).
func (l *layout) spans(keep func(a int) bool) (sp []span, at [numArgs]int64, total int64) {
	open, base := false, int64(0) // base: where the open range starts in the total
	for _, a := range layoutOrder {
		if l.off[a] < 0 {
			continue
		}
		if !keep(a) {
			open = false
			continue
		}
		if !open {
			sp = append(sp, span{lo: l.off[a]})
			open, base = true, total
		}
		last := &sp[len(sp)-1]
		at[a] = base + l.off[a] - last.lo
		last.hi = l.off[a] + l.bytes[a]
		total = base + last.hi - last.lo
	}
	return sp, at, total
}

// downloaded reports whether a launch copies array a back from the
// device at once (the download region, less what the run leaves there).
func (r *run) downloaded(a int) bool {
	switch {
	case a < argGS || a > argGP:
		return false
	case r.lazyT && (a == argT || a == argLastH):
		return false
	case r.omit&ode.OmitStates != 0 && (a == argY || a == argYs):
		return false
	case r.sout != nil && a == argYs: // kept on the device (saves.go)
		return false
	case r.omit&ode.OmitStats != 0 && a == argRej:
		return false
	}
	return true
}

// region returns the byte range [lo, hi) of the arena covering the
// arguments first…last that are used.
func (l *layout) region(first, last int) (lo, hi int64) {
	lo, hi = -1, -1
	for a := first; a <= last; a++ {
		if l.off[a] < 0 {
			continue
		}
		if lo < 0 || l.off[a] < lo {
			lo = l.off[a]
		}
		hi = max(hi, l.off[a]+l.bytes[a])
	}
	if lo < 0 {
		return 0, 0
	}
	return lo, hi
}

// chunk returns the trajectories per launch of a pass over m trajectories
// with record buffers of rows rows: all of them if they fit in the
// device's free memory (and Job.MemoryLimit, if set), else a multiple of
// 32 that does.
func (r *run) chunk(m, rows int) (int, error) {
	if size := r.layout(m, rows).size; size <= r.ex.spareSize() && (r.j.MemoryLimit <= 0 || size <= r.j.MemoryLimit) {
		// The kept arena holds the whole pass: no need to ask the device
		// (a call of the driver's of its own, tens of microseconds).
		return m, nil
	}
	free, err := r.ex.be.memFree()
	if err != nil {
		return 0, err
	}
	budget := int64(float64(free)*0.9) + r.ex.spareSize() - 64<<20
	if lim := r.j.MemoryLimit; lim > 0 {
		budget = min(budget, lim)
	}
	fits := func(n int) bool { l := r.layout(n, rows); return l.size <= budget }
	if fits(m) {
		return m, nil
	}
	// Bytes per trajectory and per launch, from two sizes at which the
	// arrays sized by the launch's resident warps (the accumulators of
	// lanes mode in global memory) no longer grow.
	const probe = 1 << 17
	lo := r.layout(probe, rows).size
	per := (r.layout(2*probe, rows).size - lo) / probe
	base := lo - probe*per
	n := int((budget - base) / max(per, 1))
	n = min(n, m) / 32 * 32
	for n >= 32 && !fits(n) {
		n -= 32
	}
	if n < 32 {
		l := r.layout(32, rows)
		return 0, fmt.Errorf("cuda: engine %s: 32 trajectories with %d record rows need %d bytes of device memory, %d are available: %w",
			r.ex.name, rows, l.size, budget, ode.ErrTooLarge)
	}
	return n, nil
}

// pass runs the trajectories idx (nil: all) in launches of as many as fit,
// with record buffers of rows rows. It returns the trajectories whose
// record buffer was too short.
func (r *run) pass(ctx context.Context, idx []int, rows int) (over []int, err error) {
	j := r.j
	m := j.N
	if idx != nil {
		m = len(idx)
	}
	// A record of all trajectories in one launch keeps its mesh on the
	// device (keepMesh): taken first, so that the arena the launch needs
	// is sized without it (and a kept arena of that size needs no call to
	// the device to know it fits).
	keep := r.v.MeshOut && idx == nil && r.ex.keepsMeshes()
	if keep {
		r.keepMesh(rows)
	}
	// So are its saved states where the job asks (keepSaves).
	if r.keepYs && idx == nil && !r.keepSaves(m) {
		r.keepYs = false
		r.hostYs()
	}
	c, err := r.chunk(m, rows)
	if err != nil {
		return nil, err
	}
	if r.sout != nil && c < m {
		// Chunks scatter their saves on the host after all.
		r.keepYs = false
		r.dropSaves()
	}
	if keep && c < m && r.hout != nil {
		// Chunks record into the arena and the host mesh after all.
		if r.hout != residentOfReuse(r.j) {
			r.hout.Release()
		}
		r.hout = nil
		if c, err = r.chunk(m, rows); err != nil {
			return nil, err
		}
	}
	if r.hin != nil && c < m {
		// Chunks read rows of their own width: the mesh goes through the
		// host.
		r.hin = nil
		if err := j.Mesh.Host(); err != nil {
			return nil, err
		}
		if c, err = r.chunk(m, rows); err != nil {
			return nil, err
		}
	}
	full := r.layout(c, rows)
	ar, err := r.ex.takeArena(full.size)
	if err != nil {
		return nil, err
	}
	defer r.ex.giveArena(ar)
	r.stored = max(r.stored, full.bytes[argStore])
	r.tr.add(func(t *TraceStats) { t.Rows = rows })
	for lo := 0; lo < m; lo += c {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		n := min(c, m-lo)
		var g []int // the launch's trajectories
		if idx == nil {
			g = r.ex.identity(lo + n)[lo:]
		} else {
			g = idx[lo : lo+n]
		}
		o, err := r.launch(ar, g, rows)
		if err != nil {
			return nil, err
		}
		over = append(over, o...)
		if j.Progress != nil && idx == nil { // reruns are not progress
			j.Progress(lo+n, m)
		}
	}
	return over, nil
}

// launchShape returns the threads, threads per block and bytes of
// dynamic shared memory of a launch of n trajectories.
func (r *run) launchShape(n int) (threads, block, shmem int) {
	ex, v := r.ex, r.v
	be := ex.be
	if v.Lanes {
		warps := n
		switch {
		case v.TileMode:
			warps = (n + kernelgen.TileWidth - 1) / kernelgen.TileWidth // a warp per tile of tile mode
		case v.TileSums:
			warps = numTiles(n) // a warp runs a tile's trajectories in turn
		}
		threads, block, shmem = kernelgen.LanesLaunch(warps, r.d, r.ns, v.Grad, v.LanesGlobal, v.LanesBlockAcc, ex.prec, r.ke.block, be.sms(), be.sharedLimit())
		if v.TileSharedAcc || v.TileSharedSh {
			shmem = kernelgen.TileShared(block/kernelgen.LaneWidth, r.d, r.ns, v.TileSharedAcc, v.TileSharedSh)
		}
		return threads, block, shmem
	}
	if v.Wide {
		return kernelgen.WideLaunch(n, r.ke.info.WideShared, be.sharedLimit())
	}
	block, shmem = launchShape(n, r.ke.block, be.sms(), v, r.ns, ex.prec)
	return n, block, shmem
}

// launch runs the trajectories g in one launch: their inputs staged and
// copied (stage), the kernel (launchKernel), the results copied back and
// scattered (scatter).
func (r *run) launch(ar *arena, g []int, rows int) (over []int, err error) {
	r.rb = resultBlockOf(len(g))
	ex, v, n := r.ex, r.v, len(g)
	l := r.layout(n, rows)
	inLo, inHi := l.region(argSh, argGS)
	if inLo != 0 {
		return nil, fmt.Errorf("cuda: internal error: upload region starts at %d", inLo)
	}
	// The shared-gradient sums are zeroed on the device and the mesh to
	// replay written from its own rows: neither goes through the staging
	// buffer.
	zeroGS := l.off[argGS] >= 0
	if zeroGS {
		inHi = l.off[argGS]
	}
	hinAt := l.off[argHin]
	if hinAt >= 0 {
		inHi = hinAt
	}
	up := ex.takeStaging(inHi)
	defer ex.giveStaging(up)
	bc := r.broadcasts(n, &l)
	// The inputs the arena holds from the launch before are neither
	// staged nor uploaded; held is what it holds once this one is up.
	r.inputsBad = false
	held := r.reuse(ar, g, &l, &bc)
	// A large launch's results come back in chunks of its trajectories
	// (pipeChunk), each scattered while the next is copied: the copies
	// run on the device's goroutine, the scatter on the others. In the
	// thread layout each chunk is a kernel of its own (chunkLaunches),
	// whose results are copied while the next chunks' kernels run, and
	// whose inputs are staged while the chunk before goes up and runs
	// (stagesByChunk).
	nb := (n + r.rb - 1) / r.rb
	chunk := r.pipeChunk(n) // result blocks a chunk; 0: one copy of all
	nc := 1                 // kernels, one clock each
	if chunk > 0 && r.chunkLaunches() {
		nc = (nb + chunk - 1) / chunk
	}
	staged := r.stagesByChunk(n, chunk, nc, &l, bc)
	if !staged {
		rg := rtrace.StartRegion(r.ctx, "cuda.fill")
		err = r.fillBroadcast(up, g, &l, bc)
		rg.End()
		if err != nil {
			return nil, err
		}
	}
	if hinAt >= 0 {
		// Before the batch: a large mesh goes up through the chunk
		// buffers, from other goroutines.
		if err := r.writeMesh(ar.addr+uint64(hinAt), g, rows); err != nil {
			return nil, err
		}
	}
	// Large saved states come back after the other results (a launch
	// of one chunk), in groups of saveCols columns, each transposed while
	// the next is copied (saveGroups).
	saveCols := r.saveGroups(n, &l, chunk)
	keep := r.downloaded
	if saveCols > 0 {
		keep = func(a int) bool { return a != argYs && r.downloaded(a) }
	}
	// The results copied back: the download region less what the run
	// leaves on the device (downloaded), in one range or a few, then the
	// saved states where they come back apart.
	out, at, outBytes := l.spans(keep)
	savesAt := outBytes
	if saveCols > 0 {
		at[argYs] = savesAt
		outBytes += l.bytes[argYs]
	}
	down := ex.takeStaging(outBytes)
	defer ex.giveStaging(down)
	// The inputs, the kernel and the results in one batch: one hand-over
	// to the device's goroutine.
	// The clock is taken and given back outside the batch: making or
	// freeing one is a call of the device's own.
	var dt time.Duration
	var ready chan [2]int      // the result blocks [lo, hi) copied back
	var savesReady chan [2]int // the saved states' columns [c0, c1) copied back, with saveCols
	if chunk > 0 {
		ready = make(chan [2]int, (nb+chunk-1)/chunk)
	} else if saveCols > 0 {
		ready = make(chan [2]int, 1)
		savesReady = make(chan [2]int, (r.k*r.d+saveCols-1)/saveCols)
	}
	var stagedCh chan struct{} // with staged: a chunk's inputs are staged
	if staged {
		stagedCh = make(chan struct{}, nc)
	}
	// The clocks are taken and given back outside the batch: making or
	// freeing one is a call of the device's own.
	clocks := make([]clock, nc)
	for k := range clocks {
		if clocks[k], err = ex.takeClock(); err != nil {
			for _, c := range clocks[:k] {
				ex.giveClock(c)
			}
			return nil, err
		}
	}
	defer func() {
		for _, c := range clocks {
			ex.giveClock(c)
		}
	}()
	batch := func(q queue) error {
		r.q = q
		defer func() { r.q = nil }()
		if staged {
			// Chunk k's inputs go up, and its kernel is queued, once
			// they are staged; chunk k−1's results are copied back while
			// it runs.
			cr := r.chunkReader(down, &at, ar, n, &l, chunk)
			args := r.kernelArgs(ar, n, rows, &l)
			for k := range nc {
				if _, ok := <-stagedCh; !ok {
					return errStagingStopped
				}
				if k > 0 {
					// Chunk k's copies up wait for the kernel before them
					// (the device's queue runs in order): waited for here,
					// so that the trace's transfers are the copies alone.
					d, err := r.q.elapsed(clocks[k-1])
					if err != nil {
						return err
					}
					dt += d
				}
				lo, hi := k*chunk*r.rb, min(n, (k+1)*chunk*r.rb)
				if err := r.uploadChunk(up, ar, n, rows, &l, zeroGS, bc, lo, hi); err != nil {
					return err
				}
				if err := r.launchChunk(&args, lo, hi, clocks[k]); err != nil {
					return err
				}
				if k > 0 {
					if err := cr.read(k-1, clocks[k-1], ready); err != nil {
						return err
					}
				}
			}
			if err := cr.read(nc-1, clocks[nc-1], ready); err != nil {
				return err
			}
			d, err := r.q.elapsed(clocks[nc-1])
			dt += d
			return err
		}
		if err := r.uploadBroadcast(up, ar, n, rows, &l, zeroGS, bc); err != nil {
			return err
		}
		if nc > 1 {
			if err := r.launchChunks(ar, n, rows, &l, chunk, clocks); err != nil {
				return err
			}
			if err := r.readChunks(down, &at, ar, n, &l, chunk, ready, clocks); err != nil {
				return err
			}
			for _, c := range clocks {
				d, err := r.q.elapsed(c)
				if err != nil {
					return err
				}
				dt += d
			}
			return nil
		}
		c := clocks[0]
		if err := r.launchKernel(ar, n, rows, &l, c); err != nil {
			return err
		}
		// The clock waits for the kernel, so that the read's time (the
		// trace's transfers) is the copy's alone.
		var err error
		if dt, err = r.q.elapsed(c); err != nil {
			return err
		}
		if chunk > 0 {
			return r.readChunks(down, &at, ar, n, &l, chunk, ready, nil)
		}
		at := int64(0)
		for _, s := range out {
			if err := r.read(down[at:at+s.hi-s.lo], ar.addr+uint64(s.lo)); err != nil {
				return err
			}
			at += s.hi - s.lo
		}
		if saveCols > 0 {
			ready <- [2]int{0, nb}
			return r.readSaves(down[savesAt:], ar, n, &l, saveCols, savesReady)
		}
		return nil
	}
	done := func() {
		r.tr.add(func(t *TraceStats) {
			t.Kernel += dt
			t.Launches += nc
			t.Trajectories += n
			t.Layout = v.Layout()
			t.Upload += int64(len(up)) - bc.skipped - bc.reused
			t.Reused += bc.reused
			t.Download += int64(len(down))
		})
		if held != nil && !r.inputsBad {
			ar.held = held
		}
	}
	if r.sout != nil {
		// The saved states stay on the device, row-major (saves.go): the
		// saves kernel runs after the launch's kernels, in its batch.
		launched := batch
		batch = func(q queue) error {
			if err := launched(q); err != nil {
				return err
			}
			return r.rowSaves(q, ar, n, &l)
		}
	}
	if chunk == 0 && saveCols == 0 {
		rg := rtrace.StartRegion(r.ctx, "cuda.batch")
		err = ex.be.batch(batch)
		rg.End()
		if err != nil {
			return nil, err
		}
		done()
		defer rtrace.StartRegion(r.ctx, "cuda.scatter").End()
		return r.scatter(down, &at, ar, g, rows, &l, false, func(blocks func(lo, hi int), _ func(c0, c1 int)) error {
			blocks(0, nb)
			return nil
		})
	}
	errc := make(chan error, 1)
	go func() {
		rg := rtrace.StartRegion(r.ctx, "cuda.batch")
		err := ex.be.batch(batch)
		rg.End()
		close(ready)
		if savesReady != nil {
			close(savesReady)
		}
		errc <- err
	}()
	if staged {
		// The chunks' inputs, each handed to the batch as it is staged.
		rg := rtrace.StartRegion(r.ctx, "cuda.fill")
		var ferr error
		for k := range nc {
			if ferr = r.fillBlocks(up, g, &l, bc, k*chunk, min(nb, (k+1)*chunk)); ferr != nil {
				break
			}
			stagedCh <- struct{}{}
		}
		close(stagedCh)
		rg.End()
		if ferr != nil {
			// The batch stops before the chunk that failed its checks.
			for range ready {
			}
			<-errc
			return nil, ferr
		}
	}
	defer rtrace.StartRegion(r.ctx, "cuda.scatter").End()
	return r.scatter(down, &at, ar, g, rows, &l, saveCols > 0, func(blocks func(lo, hi int), saves func(c0, c1 int)) error {
		for b := range ready {
			blocks(b[0], b[1])
		}
		if savesReady != nil {
			for c := range savesReady {
				saves(c[0], c[1])
			}
		}
		if err := <-errc; err != nil {
			return err
		}
		done()
		return nil
	})
}

// errStagingStopped stops a batch whose next chunk's inputs failed their
// checks (stagesByChunk): the launch returns the checks' error.
var errStagingStopped = errors.New("cuda: internal error: the staging of a launch's inputs stopped")

// defaultPipeChunk is the trajectories of a chunk of a launch's results
// copied back while the host scatters the chunk before it: a launch of
// at least two chunks' worth copies its results back in chunks (a copy per
// column of each array a chunk, tens a chunk). At 2^20 trajectories the
// results are 4 chunks of about 25 MB, whose copies (a millisecond each
// over PCIe) overlap the scatter of the chunk before. Tuning.pipeChunk
// shrinks it for the tests.
const defaultPipeChunk = 1 << 18

// defaultPipeMin is the smallest launch below two chunks' worth
// (defaultPipeChunk) whose results come back in two halves, the first
// scattered while the second half's kernel (in the thread layout) and
// copies run: at 2^18 trajectories on the H200 the whole launch's kernel,
// its copy back and its scatter took about 0.7, 0.5 and 1 ms one after
// the other. Smaller launches are copied back at once: a kernel of half
// of them takes more than half as long as one of all (the device is
// not full), a half's copies are a copy per column of each array (tens,
// each with the driver's fixed cost), and their scatter is short.
// Tuning.pipeMin lowers it for the tests.
const defaultPipeMin = 1 << 18

// pipeChunk returns the result blocks (r.rb trajectories each) of
// a chunk of the results of a launch of n trajectories copied back and
// scattered in turn, or 0 where the launch copies them back at once.
func (r *run) pipeChunk(n int) int {
	c := defaultPipeChunk
	if t := r.ex.tun.pipeChunk; t > 0 {
		c = t
	}
	blocks := max(1, c/r.rb)
	if n >= 2*blocks*r.rb {
		return blocks
	}
	low := defaultPipeMin
	if t := r.ex.tun.pipeMin; t > 0 {
		low = t
	}
	if nb := (n + r.rb - 1) / r.rb; n >= low && nb >= 2 {
		return (nb + 1) / 2 // two halves
	}
	return 0
}

// chunkLaunches reports whether a launch whose results come back in
// chunks runs a kernel per chunk (launchChunks): in the thread layout
// whose kernel runs any range of a launch's trajectories (gs_args.first,
// end), unless Tuning.NoChunkLaunch.
func (r *run) chunkLaunches() bool { return !r.v.Lanes && !r.v.Wide && !r.ex.tun.NoChunkLaunch }

// launchChunks queues the kernel of a launch of n trajectories (rows
// record rows each) in layout l as one kernel per chunk of chunk result
// blocks, chunk k's between the marks of clocks[k]: the trajectories'
// arrays are the launch's (stride n), each kernel runs its chunk's
// trajectories (the chunks start on multiples of r.rb: whole warps and
// tiles). The shared gradient's sums add up over the kernels as over a
// launch's blocks.
func (r *run) launchChunks(ar *arena, n, rows int, l *layout, chunk int, clocks []clock) error {
	args := r.kernelArgs(ar, n, rows, l)
	for k := range clocks {
		lo, hi := k*chunk*r.rb, min(n, (k+1)*chunk*r.rb)
		if err := r.launchChunk(&args, lo, hi, clocks[k]); err != nil {
			return err
		}
	}
	return nil
}

// launchChunk queues the kernel of a chunk of a launch, its trajectories
// lo…hi−1, with the launch's argument words args (kernelArgs), between
// the marks of clock c.
func (r *run) launchChunk(args *[numArgs]uint64, lo, hi int, c clock) error {
	q := r.q
	args[argFirst], args[argEnd] = uint64(lo), uint64(hi)
	_, bt, shmem := r.launchShape(hi - lo)
	if err := q.mark(c, false); err != nil {
		return err
	}
	if err := q.enqueue(r.ke.k, hi-lo, bt, shmem, args[:]); err != nil {
		return fmt.Errorf("cuda: engine %s: %w", r.ex.name, err)
	}
	return q.mark(c, true)
}

// readChunks copies the results of a launch of n trajectories in layout
// l back from the arena into down (array a at at[a], as the spans of
// downloaded arrays laid end to end put it), in chunks of chunk result
// blocks: for each chunk the columns of every downloaded array over its
// trajectories, and with the last the arrays that are not per trajectory
// (the shared gradient's sums), sending the chunk's blocks [lo, hi) on
// ready once they are in down. With after (a kernel per chunk,
// launchChunks), chunk k's copies wait for after[k]'s kernel only.
func (r *run) readChunks(down []byte, at *[numArgs]int64, ar *arena, n int, l *layout, chunk int, ready chan<- [2]int, after []clock) error {
	cr := r.chunkReader(down, at, ar, n, l, chunk)
	for k := 0; k*chunk < cr.nb; k++ {
		var c clock
		if after != nil {
			c = after[k]
		}
		if err := cr.read(k, c, ready); err != nil {
			return err
		}
	}
	return nil
}

// chunkReader copies the results of a launch back chunk by chunk
// (readChunks).
type chunkReader struct {
	r        *run
	down     []byte
	at       *[numArgs]int64
	ar       *arena
	n, chunk int
	nb       int            // result blocks of the launch
	off      [numArgs]int64 // the arrays' offsets in the arena (layout.off)
	cols     [numArgs]int64 // per downloaded array: its columns of n values (0: read whole)
	size     [numArgs]int64 // the bytes of a value
	wholeDst [][]byte       // the arrays read whole, with the last chunk
	wholeSrc []uint64       //
	dst      [][]byte       // a chunk's copies (scratch)
	src      []uint64       //
}

// chunkReader returns the reader of the results of a launch of n
// trajectories in layout l into down (array a at at[a]) in chunks of
// chunk result blocks.
func (r *run) chunkReader(down []byte, at *[numArgs]int64, ar *arena, n int, l *layout, chunk int) *chunkReader {
	cr := &chunkReader{r: r, down: down, at: at, ar: ar, n: n, chunk: chunk, nb: (n + r.rb - 1) / r.rb, off: l.off}
	for a := argGS; a <= argGP; a++ {
		if l.off[a] < 0 || !r.downloaded(a) {
			continue
		}
		cr.size[a] = int64(r.ex.prec.Size())
		switch a {
		case argStatus, argAcc, argRej, argFlags, argEvents:
			cr.size[a] = 4
		}
		if a == argGS || l.bytes[a]%(int64(n)*cr.size[a]) != 0 {
			cr.wholeDst = append(cr.wholeDst, down[at[a]:at[a]+l.bytes[a]])
			cr.wholeSrc = append(cr.wholeSrc, ar.addr+uint64(l.off[a]))
			continue
		}
		cr.cols[a] = l.bytes[a] / (int64(n) * cr.size[a])
	}
	return cr
}

// read copies chunk k back (the columns of every downloaded array over
// its trajectories, and with the last the arrays that are not per
// trajectory: the shared gradient's sums) and sends its blocks [lo, hi)
// on ready. With after (a kernel per chunk, launchChunks), its copies
// wait for after's kernel only; else for all the work queued.
func (cr *chunkReader) read(k int, after clock, ready chan<- [2]int) error {
	r, n, at := cr.r, int64(cr.n), cr.at
	b0 := k * cr.chunk
	b1 := min(cr.nb, b0+cr.chunk)
	lo, hi := int64(b0*r.rb), min(n, int64(b1*r.rb))
	dst, src := cr.dst[:0], cr.src[:0]
	for a := argGS; a <= argGP; a++ {
		for c := range cr.cols[a] {
			from, to := (c*n+lo)*cr.size[a], (c*n+hi)*cr.size[a]
			dst = append(dst, cr.down[at[a]+from:at[a]+to])
			src = append(src, cr.ar.addr+uint64(cr.off[a]+from))
		}
	}
	if b1 == cr.nb {
		dst, src = append(dst, cr.wholeDst...), append(src, cr.wholeSrc...)
	}
	cr.dst, cr.src = dst, src
	if after == nil {
		for j := range dst {
			if err := r.read(dst[j], src[j]); err != nil {
				return err
			}
		}
	} else {
		d, err := r.q.readAfter(after, dst, src)
		r.tr.add(func(t *TraceStats) { t.Transfer += d })
		if err != nil {
			return err
		}
	}
	ready <- [2]int{b0, b1}
	return nil
}

// stage fills the staging buffer up with the inputs of a launch over the
// trajectories g (rows record rows each) in layout l and uploads them
// (fill, then upload), without the mesh to replay (writeMesh).
func (r *run) stage(up []byte, ar *arena, g []int, rows int, l *layout, zeroGS bool) error {
	if err := r.fill(up, g, l); err != nil {
		return err
	}
	return r.upload(up, ar, len(g), rows, l, zeroGS)
}

// fill fills the staging buffer up with the inputs of a launch over the
// trajectories g in layout l, step-major. As it copies them it checks
// what the job leaves to it (Checks) and a given mesh's lengths: an
// error wraps ode.ErrInput.
func (r *run) fill(up []byte, g []int, l *layout) error { return r.fillBroadcast(up, g, l, bcast{}) }

// Checks returns the checks of a job's inputs that the executor makes as
// it stages them for the device (ode.CheckingExecutor): that Y0 and P are
// finite (the copy's read of each value also tests its exponent bits) and
// that a given mesh's lengths are within its rows (read as they are
// converted to the device's int32). A job's failed check is an error
// wrapping ode.ErrInput, before the launch that would read the value.
func (ex *executor) Checks() ode.Checks { return ode.CheckFinite | ode.CheckMeshLen }

var _ ode.CheckingExecutor = (*executor)(nil)

// fillBroadcast is fill, but of an input that bc broadcasts it writes
// only the first bc.seed trajectories' values (uploadBroadcast copies
// them over the rest on the device).
func (r *run) fillBroadcast(up []byte, g []int, l *layout, bc bcast) error {
	fb := resultBlockOf(len(g))
	if err := r.fillBlocks(up, g, l, bc, 0, (len(g)+fb-1)/fb); err != nil {
		return err
	}
	if l.off[argEvIn] >= 0 && !bc.holds(argEvIn) {
		// The mesh's event marks, step-major as its steps, row by row.
		ev, mh, n := int32s(up, l.off[argEvIn], l.bytes[argEvIn]), r.j.Mesh, len(g)
		rows := len(ev) / n
		par.Run(rows, 0, func(_, s int) {
			row := mh.Events[s*mh.N : (s+1)*mh.N]
			for q, i := range g {
				ev[s*n+q] = row[i]
			}
		})
	}
	return nil
}

// fillBlocks is fillBroadcast's part for the blocks b0…b1−1 of
// resultBlockOf(len(g)) launch trajectories each (with the first block,
// the inputs that are not per trajectory), less a given mesh's event
// marks: a launch whose inputs go up chunk by chunk (stagesByChunk) fills
// each chunk's blocks as the chunk before goes up and runs.
func (r *run) fillBlocks(up []byte, g []int, l *layout, bc bcast, b0, b1 int) error {
	fb := resultBlockOf(len(g))
	j, v := r.j, r.v
	n, d, np, k, dd := len(g), r.d, r.np, r.k, r.dd
	rv := func(buf []byte, base int64, a int) reals { return r.reals(buf, l.off[a]-base, l.bytes[a]) }
	iv := func(buf []byte, base int64, a int) []int32 { return int32s(buf, l.off[a]-base, l.bytes[a]) }

	// Inputs, step-major. Fill writes every input array whole but the
	// shared block in lanes mode, padded: its gaps are cleared (a staging
	// buffer holds what an earlier launch left).
	if b0 == 0 {
		sh := rv(up, 0, argSh)
		clear(up[l.off[argSh] : l.off[argSh]+l.bytes[argSh]])
		if v.LanesGlobal {
			kernelgen.LanesSharedBlock(sh.set, r.sharedBlock, r.ns)
		} else {
			for c, x := range r.sharedBlock {
				sh.set(c, x)
			}
		}
		if k > 0 {
			sa := rv(up, 0, argSaveAt)
			for q, x := range j.SaveAt {
				sa.set(q, x)
			}
		}
	}
	// The per-trajectory inputs, component-major (y0 and p of a row-major
	// kernel row-major: rowMajor), in blocks of resultBlockOf(n)
	// trajectories on all cores.
	y0, pin, data := rv(up, 0, argY0), reals{}, reals{}
	if np > 0 {
		pin = rv(up, 0, argP)
	}
	if dd > 0 {
		data = rv(up, 0, argData)
	}
	var t1, t0s reals
	var ln []int32
	if j.T0s != nil {
		t0s = rv(up, 0, argT0s)
	}
	if v.Adaptive {
		t1 = rv(up, 0, argT1)
	} else {
		ln = iv(up, 0, argLen)
	}
	// A launch of consecutive trajectories (every first pass) reads their
	// rows as runs of the inputs (gatherRows); an input given as one row
	// (Job.Y0Row, PRow, T1Same) is written from the row, its N copies
	// unread (package ode checks the row itself).
	generic := r.ex.tun.generic
	consec := n > 0 && g[n-1]-g[0] == n-1 && !generic
	gather := func(dst reals, src, row []float64, w, q0, q1 int) (finite bool) {
		switch {
		case q0 >= q1:
			return true
		case row != nil && !generic:
			fillRow(dst, n, row, q0, q1)
			return true
		case consec && dst.f64 != nil && w <= 4:
			return gatherRows(dst.f64, n, src, w, g[0], q0, q1)
		}
		return gatherCols(dst, n, src, w, g, q0, q1)
	}
	// y0 and p: rows on the device as in the job where the kernel reads
	// them row-major (Config.RowMajor): runs of whole rows copied.
	gatherYP := gather
	if r.rowMajor(argY0) {
		gatherYP = func(dst reals, src, row []float64, w, q0, q1 int) (finite bool) {
			switch {
			case q0 >= q1:
				return true
			case row != nil && !generic:
				for q := q0; q < q1; q++ {
					copyFinite(dst, q*w, row)
				}
				return true
			case consec:
				return copyFinite(dst, q0*w, src[(g[0]+q0)*w:(g[0]+q1)*w])
			}
			finite = true
			for q := q0; q < q1; q++ {
				finite = copyFinite(dst, q*w, src[g[q]*w:(g[q]+1)*w]) && finite
			}
			return finite
		}
	}
	// Per block: an input that is not finite, a length out of range.
	var badBlocks [2]atomic.Bool
	par.Run(b1-b0, 0, func(_, t int) {
		b := b0 + t
		q0, q1 := b*fb, min(n, (b+1)*fb)
		seed := min(q1, max(q0, bc.seed)) // the end of the block's part of a broadcast's seed
		finite := true
		switch {
		case bc.holds(argY0):
		case bc.y0:
			gatherYP(y0, j.Y0, j.Y0Row, d, q0, seed)
		default:
			finite = gatherYP(y0, j.Y0, j.Y0Row, d, q0, q1)
		}
		switch {
		case np == 0 || bc.holds(argP):
		case bc.p:
			gatherYP(pin, j.P, j.PRow, np, q0, seed)
		default:
			finite = gatherYP(pin, j.P, j.PRow, np, q0, q1) && finite
		}
		if dd > 0 && !bc.holds(argData) {
			gather(data, j.Loss.Data, nil, dd, q0, q1)
		}
		if j.T0s != nil && !bc.holds(argT0s) {
			for q := q0; q < q1; q++ {
				t0s.set(q, j.T0s[g[q]])
			}
		}
		switch {
		case bc.holds(argT1) || bc.holds(argLen):
		case bc.t1:
			for q := q0; q < seed; q++ {
				t1.set(q, j.T1[g[q]])
			}
		case v.Adaptive && j.T1Same && !generic:
			fillRow(t1, n, j.T1[:1], q0, q1)
		case v.Adaptive:
			for q := q0; q < q1; q++ {
				t1.set(q, j.T1[g[q]])
			}
		default:
			// A length outside [0, Rows] would read past the mesh's rows
			// on the device: checked here whoever else did.
			rows, lens, out := j.Mesh.Rows, j.Mesh.Len, false
			for q := q0; q < q1; q++ {
				l := lens[g[q]]
				out = out || uint(l) > uint(rows)
				ln[q] = int32(l)
			}
			if out {
				badBlocks[1].Store(true)
			}
		}
		if !finite {
			badBlocks[0].Store(true)
		}
		for k := range bc.copies {
			bc.copies[k].rows(q0, q1)
		}
	})
	if badBlocks[0].Load() {
		r.inputsBad = true
	}
	if badBlocks[0].Load() && j.Checks&ode.CheckFinite != 0 || badBlocks[1].Load() {
		return fmt.Errorf("cuda: engine %s: %w", r.ex.name, ode.ErrInput)
	}
	return nil
}

// gatherCols copies the rows g[q0:q1] of src (row-major, w values a row)
// to the columns q0…q1−1 of dst (component-major over a launch of n:
// component c of launch trajectory q at dst[c*n+q]), scatterCols'
// inverse. It reports whether every value copied is finite, a check that
// rides on the copy's read as scatterCols' does.
func gatherCols(dst reals, n int, src []float64, w int, g []int, q0, q1 int) (finite bool) {
	var bad uint64
	if f := dst.f64; f != nil && w == 3 {
		// The common width unrolled: three column streams written in
		// step (scatterCols does the same the other way).
		c0, c1, c2 := f[q0:q1], f[n+q0:n+q1], f[2*n+q0:2*n+q1]
		for j, i := range g[q0:q1] {
			row := src[3*i : 3*i+3]
			x, y, z := row[0], row[1], row[2]
			bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne) | (math.Float64bits(z)&expBits + expOne)
			c0[j], c1[j], c2[j] = x, y, z
		}
		return bad>>63 == 0
	}
	if f := dst.f64; f != nil {
		return gatherTiles(f, n, src, w, g, q0, q1)
	}
	return gatherTiles(dst.f32, n, src, w, g, q0, q1)
}

// gatherRows is gatherCols for the consecutive rows g0+q0, g0+q0+1, …
// of src (a launch of consecutive trajectories from g0) in float64, w
// from 1 to 4: read as one run, without an index per trajectory.
func gatherRows(f []float64, n int, src []float64, w, g0, q0, q1 int) (finite bool) {
	var bad uint64
	c0 := f[q0:q1]
	s := src[(g0+q0)*w : (g0+q0+len(c0))*w]
	col := func(c int) []float64 { return f[c*n+q0 : c*n+q0+len(c0)] }
	switch w {
	case 1:
		s = s[:len(c0)]
		for j, x := range s {
			bad |= math.Float64bits(x)&expBits + expOne
			c0[j] = x
		}
	case 2:
		c1 := col(1)
		for j := range c0 {
			r := s[2*j : 2*j+2 : 2*j+2]
			x, y := r[0], r[1]
			bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne)
			c0[j], c1[j] = x, y
		}
	case 3:
		c1, c2 := col(1), col(2)
		for j := range c0 {
			r := s[3*j : 3*j+3 : 3*j+3]
			x, y, z := r[0], r[1], r[2]
			bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne) | (math.Float64bits(z)&expBits + expOne)
			c0[j], c1[j], c2[j] = x, y, z
		}
	case 4:
		c1, c2, c3 := col(1), col(2), col(3)
		for j := range c0 {
			r := s[4*j : 4*j+4 : 4*j+4]
			x, y, z, u := r[0], r[1], r[2], r[3]
			bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne) |
				(math.Float64bits(z)&expBits + expOne) | (math.Float64bits(u)&expBits + expOne)
			c0[j], c1[j], c2[j], c3[j] = x, y, z, u
		}
	default:
		panic("cuda: gatherRows of a row of more than 4 values")
	}
	return bad>>63 == 0
}

// fillRow writes the one row row over launch positions q0…q1−1 of dst
// (component-major over a launch of n): what gatherCols copies from an
// input that repeats row for every trajectory, without reading it.
func fillRow(dst reals, n int, row []float64, q0, q1 int) {
	for c, x := range row {
		if f := dst.f64; f != nil {
			col := f[c*n+q0 : c*n+q1]
			for q := range col {
				col[q] = x
			}
			continue
		}
		col, v := dst.f32[c*n+q0:c*n+q1], float32(x)
		for q := range col {
			col[q] = v
		}
	}
}

// copyRun is the values copyFinite copies at a time before it checks
// them: 4 KiB, in the first-level cache when they are read again.
const copyRun = 512

// copyFinite copies src to dst from value at on (a row-major array of the
// device, Config.RowMajor) and reports whether every value copied is
// finite: runs of copyRun values moved whole (memmove), each checked
// after its copy, where it is still in the first-level cache.
func copyFinite(dst reals, at int, src []float64) (finite bool) {
	if dst.f64 == nil {
		var bad uint64
		for j, x := range src {
			bad |= math.Float64bits(x)&expBits + expOne
			dst.set(at+j, x)
		}
		return bad>>63 == 0
	}
	return copyFinite64(dst.f64[at:at+len(src)], src)
}

// expBits and expOne are the exponent field of a float64 and its lowest
// bit: x&expBits + expOne sets the sign bit just where x is not finite.
const expBits, expOne = 0x7ff0000000000000, 0x0010000000000000

// copyFinite64 copies src to dst (as long) in runs of copyRun values and
// reports whether every value is finite (copyFinite).
func copyFinite64(dst, src []float64) (finite bool) {
	var b0, b1, b2, b3 uint64
	for lo := 0; lo < len(src); lo += copyRun {
		d := dst[lo:min(lo+copyRun, len(src))]
		copy(d, src[lo:])
		j := 0
		for ; j+4 <= len(d); j += 4 {
			r := d[j : j+4 : j+4]
			b0 |= math.Float64bits(r[0])&expBits + expOne
			b1 |= math.Float64bits(r[1])&expBits + expOne
			b2 |= math.Float64bits(r[2])&expBits + expOne
			b3 |= math.Float64bits(r[3])&expBits + expOne
		}
		for ; j < len(d); j++ {
			b0 |= math.Float64bits(d[j])&expBits + expOne
		}
	}
	return (b0|b1|b2|b3)>>63 == 0
}

// gatherTiles is gatherCols for rows of any width w, in scatterTiles'
// strips: a row at a time wrote each value into another column, n values
// from the last, a new cache line (and past 512 trajectories a new page)
// per value when rows are wide (a loss's data at many save times).
func gatherTiles[T float32 | float64](f []T, n int, src []float64, w int, g []int, q0, q1 int) (finite bool) {
	var bad uint64
	for c0 := 0; c0 < w; c0 += scatterTile {
		c1 := min(c0+scatterTile, w)
		for q := q0; q < q1; q++ {
			row := src[g[q]*w+c0 : g[q]*w+c1]
			at := c0*n + q
			for c, x := range row {
				bad |= math.Float64bits(x)&expBits + expOne
				f[at+c*n] = T(x)
			}
		}
	}
	return bad>>63 == 0
}

// upload copies the staged inputs of a launch of n trajectories up to the
// arena and zeroes the regions the kernel adds to or leaves unwritten.
func (r *run) upload(up []byte, ar *arena, n, rows int, l *layout, zeroGS bool) error {
	return r.uploadBroadcast(up, ar, n, rows, l, zeroGS, bcast{})
}

// defaultBcastSeed is the seed of an input given as one row (ode.Job's
// Y0Row, PRow and T1Same) that a launch of at least 16 seeds' worth of
// trajectories broadcasts on the device: the seed's copies of the row are
// staged and uploaded, and device-to-device copies double them over the
// rest of each column (log₂(n/seed) copies a column), where staging and
// uploading n copies costs tens of megabytes of host memory traffic at
// millions of trajectories. Smaller launches stage every copy: the
// copies' calls would cost about what they save. Tuning.bcastSeed
// shrinks it for the tests.
const defaultBcastSeed = 1 << 13

func (ex *executor) bcastSeed() int {
	if s := ex.tun.bcastSeed; s > 0 {
		return s
	}
	return defaultBcastSeed
}

// bcast names the inputs of a launch that are broadcast (bcastMin), and
// the bytes of staging their broadcast leaves out of the upload.
//
// It also names the inputs the arena holds already (reuse), neither
// staged nor uploaded, and their bytes.
type bcast struct {
	y0, p, t1 bool
	seed      int    // the values of each broadcast column staged and uploaded
	skipped   int64  // bytes of staging not uploaded
	held      uint64 // the inputs the arena holds, a bit per argument (hold)
	reused    int64  // their bytes
	// copies are the record's copies the fill brings up to date (reuse).
	copies []inputCopy
}

// broadcasts returns the inputs of a launch of n trajectories in layout l
// that are broadcast on the device (defaultBcastSeed).
func (r *run) broadcasts(n int, l *layout) bcast {
	j, seed := r.j, r.ex.bcastSeed()
	if n < 16*seed {
		return bcast{}
	}
	bc := bcast{y0: j.Y0Row != nil && l.off[argY0] >= 0, p: j.PRow != nil && l.off[argP] >= 0,
		t1: j.T1Same && r.v.Adaptive && l.off[argT1] >= 0, seed: seed}
	for _, a := range bc.args() {
		bc.skipped += l.bytes[a] / int64(n) * int64(n-seed)
	}
	return bc
}

// args returns the arguments bc broadcasts.
func (bc bcast) args() []int {
	var a []int // in the arena's order (layoutOrder)
	if bc.t1 {
		a = append(a, argT1)
	}
	if bc.y0 {
		a = append(a, argY0)
	}
	if bc.p {
		a = append(a, argP)
	}
	return a
}

// uploadBroadcast is upload, but the inputs bc broadcasts go up as their
// columns' first bc.seed values (written by fillBroadcast), copied on
// the device over the rest of each column.
func (r *run) uploadBroadcast(up []byte, ar *arena, n, rows int, l *layout, zeroGS bool, bc bcast) error {
	es := int64(r.ex.prec.Size())
	// A broadcast array's columns: cols of length values, of which the
	// first seed are staged; a row-major one (rowMajor) is one column of
	// its n rows, the first bc.seed rows staged.
	shape := func(a int) (cols, length, seed int64) {
		w := l.bytes[a] / (int64(n) * es)
		if r.rowMajor(a) {
			return 1, w * int64(n), w * int64(bc.seed)
		}
		return w, int64(n), int64(bc.seed)
	}
	// The staged bytes, less the broadcast columns' tails and the inputs
	// the arena holds (reuse), in order.
	gaps := bc.heldSpans(l, int64(len(up)))
	for _, a := range bc.args() {
		cols, length, seed := shape(a)
		for c := range cols {
			col := l.off[a] + c*length*es
			gaps = append(gaps, span{col + seed*es, col + length*es})
		}
	}
	slices.SortFunc(gaps, func(x, y span) int { return cmp.Compare(x.lo, y.lo) })
	at := int64(0)
	for _, gp := range gaps {
		if gp.lo > at {
			if err := r.write(ar.addr+uint64(at), up[at:gp.lo]); err != nil {
				return err
			}
		}
		at = max(at, gp.hi)
	}
	if at < int64(len(up)) {
		if err := r.write(ar.addr+uint64(at), up[at:]); err != nil {
			return err
		}
	}
	return r.deviceFills(ar, n, rows, l, zeroGS, bc)
}

// uploadChunk copies the staged inputs of the trajectories lo…hi−1 of a
// launch of n up to the arena (stagesByChunk): each per-trajectory input
// column's part, and with the first chunk (lo 0) the inputs that are not
// per trajectory and the seeds of the inputs bc broadcasts (within the
// first chunk: stagesByChunk), then the work on the device before a
// kernel (deviceFills). Later chunks leave the broadcast inputs alone.
func (r *run) uploadChunk(up []byte, ar *arena, n, rows int, l *layout, zeroGS bool, bc bcast, lo, hi int) error {
	es := int64(r.ex.prec.Size())
	first := lo == 0
	if first {
		// The shared block and the save times.
		end := l.off[argSh] + l.bytes[argSh]
		if l.off[argSaveAt] >= 0 {
			end = l.off[argSaveAt] + l.bytes[argSaveAt]
		}
		if err := r.write(ar.addr, up[:end]); err != nil {
			return err
		}
	}
	for _, a := range stagedColumns {
		if l.off[a] < 0 || bc.holds(a) {
			continue
		}
		size := es
		if a == argLen {
			size = 4
		}
		from, to := int64(lo), int64(hi)
		if bc.broadcasts(a) {
			if !first {
				continue
			}
			to = int64(bc.seed)
		}
		for c := range l.bytes[a] / (int64(n) * size) {
			at, end := l.off[a]+(c*int64(n)+from)*size, l.off[a]+(c*int64(n)+to)*size
			if err := r.write(ar.addr+uint64(at), up[at:end]); err != nil {
				return err
			}
		}
	}
	if !first {
		return nil
	}
	return r.deviceFills(ar, n, rows, l, zeroGS, bc)
}

// stagedColumns are the inputs of one column or more of n values a launch
// of n trajectories that uploadChunk copies by parts.
var stagedColumns = []int{argT1, argT0s, argY0, argP, argData, argLen}

// broadcasts reports whether bc broadcasts argument a.
func (bc bcast) broadcasts(a int) bool {
	return a == argT1 && bc.t1 || a == argY0 && bc.y0 || a == argP && bc.p
}

// stagesByChunk reports whether a launch of n trajectories in layout l
// that runs a kernel per chunk of chunk result blocks (nc kernels:
// launchChunks) stages its inputs chunk by chunk, each chunk's uploaded
// and its kernel queued while the host stages the next (fillBlocks,
// uploadChunk): where its inputs are the shared block, the save times and
// columns of n values (stagedColumns: no mesh to replay from the staging
// buffer, no event marks, no lanes-mode shared block, no row-major
// inputs) and the seeds of the broadcast inputs lie in the first chunk.
func (r *run) stagesByChunk(n, chunk, nc int, l *layout, bc bcast) bool {
	if nc < 2 || r.ex.tun.NoChunkStage || r.v.LanesGlobal || r.v.RowMajor || l.off[argHin] >= 0 || l.off[argEvIn] >= 0 {
		return false
	}
	return len(bc.args()) == 0 || bc.seed <= min(n, chunk*r.rb)
}

// deviceFills does the work on the device that a launch's kernel needs
// after its inputs are up (uploadBroadcast, uploadChunk): the broadcast
// inputs copied over their columns from their seeds, and the regions
// the kernel adds to or may leave unwritten zeroed.
func (r *run) deviceFills(ar *arena, n, rows int, l *layout, zeroGS bool, bc bcast) error {
	ex, v := r.ex, r.v
	es := int64(ex.prec.Size())
	shape := func(a int) (cols, length, seed int64) {
		w := l.bytes[a] / (int64(n) * es)
		if r.rowMajor(a) {
			return 1, w * int64(n), w * int64(bc.seed)
		}
		return w, int64(n), int64(bc.seed)
	}
	for _, a := range bc.args() {
		cols, length, seed := shape(a)
		for c := range cols {
			col := ar.addr + uint64(l.off[a]+c*length*es)
			for have := seed; have < length; {
				k := min(have, length-have)
				if err := r.q.copyDevice(col+uint64(have*es), col, k*es); err != nil {
					return err
				}
				have += k
			}
		}
	}
	if zeroGS {
		if err := r.zero(ar.addr+uint64(l.off[argGS]), l.bytes[argGS]); err != nil {
			return err
		}
	}
	if v.TileDynamic {
		// The tile counter, the work array's last real.
		if err := r.zero(ar.addr+uint64(l.off[argWork]+l.bytes[argWork]-int64(ex.prec.Size())), int64(ex.prec.Size())); err != nil {
			return err
		}
	}
	if v.MeshOut {
		// Rows past a trajectory's last step read 0, as the CPU's.
		addr, bytes := ar.addr+uint64(l.off[argHout]), l.bytes[argHout]
		if r.hout != nil {
			addr, bytes = r.hout.mem.addr, int64(rows)*int64(n)*8
		}
		if err := r.zero(addr, bytes); err != nil {
			return err
		}
	}
	if l.off[argEvOut] >= 0 {
		// The marks of rows past a trajectory's last step read 0 too.
		if err := r.zero(ar.addr+uint64(l.off[argEvOut]), l.bytes[argEvOut]); err != nil {
			return err
		}
	}
	return nil
}

// launchKernel queues the kernel over n trajectories (rows record rows
// each) on the arena ar in layout l, in the run's batch (r.q), between the
// two marks of clock c (its device time is c's elapsed time).
func (r *run) launchKernel(ar *arena, n, rows int, l *layout, c clock) error {
	args := r.kernelArgs(ar, n, rows, l)
	threads, bt, shmem := r.launchShape(n)
	q := r.q
	if err := q.mark(c, false); err != nil {
		return err
	}
	if err := q.enqueue(r.ke.k, threads, bt, shmem, args[:]); err != nil {
		return fmt.Errorf("cuda: engine %s: %w", r.ex.name, err)
	}
	return q.mark(c, true)
}

// kernelArgs returns the argument words of a launch over n trajectories
// (rows record rows each) on the arena ar in layout l.
func (r *run) kernelArgs(ar *arena, n, rows int, l *layout) [numArgs]uint64 {
	j := r.j
	var args [numArgs]uint64
	args[argN], args[argRows] = uint64(n), uint64(rows)
	args[argFirst], args[argEnd] = 0, uint64(n)
	args[argT0] = math.Float64bits(j.T0)
	if j.Loss != nil {
		args[argScale] = math.Float64bits(j.Loss.Scale)
	}
	for a := argSh; a < numArgs; a++ {
		if l.off[a] >= 0 {
			args[a] = ar.addr + uint64(l.off[a])
		}
	}
	if r.hin != nil {
		args[argHin] = r.hin.mem.addr
	}
	if r.v.MeshOut && r.hout != nil {
		args[argHout] = r.hout.mem.addr
	}
	return args
}

// scatter copies the results of a launch over the trajectories g (rows
// record rows each) from the staging buffer down (the arrays of layout l
// that the launch copied back, array a at at[a]: see spans) into the
// run's results, reads back the recorded mesh, and returns the
// trajectories whose record overflowed. feed calls blocks(lo, hi) for
// the result blocks (r.rb trajectories each) [lo, hi) as they are
// in down, all of them in order, and returns once the copies are done
// (their error, if any): scatter then reads the arrays that are not per
// trajectory and reads back from the device what it still needs. With
// savesApart (saveGroups) blocks leaves the saved states out, and feed
// then calls saves(c0, c1) for their columns [c0, c1) of every
// trajectory as they are in down, all of them.
func (r *run) scatter(down []byte, at *[numArgs]int64, ar *arena, g []int, rows int, l *layout, savesApart bool, feed func(blocks func(lo, hi int), saves func(c0, c1 int)) error) (over []int, err error) {
	ex, v := r.ex, r.v
	n, d, np, k := len(g), r.d, r.np, r.k
	const outLo = 0 // (rv and iv read array a at at[a])
	rv := func(buf []byte, _ int64, a int) reals { return r.reals(buf, at[a], l.bytes[a]) }
	iv := func(buf []byte, _ int64, a int) []int32 { return int32s(buf, at[a], l.bytes[a]) }
	res := r.res
	states := r.omit&ode.OmitStates == 0
	var y, ys, loss, gy0, gp reals
	savesBack := states && k > 0 && r.sout == nil // (else kept on the device: saves.go)
	if states {
		y = rv(down, outLo, argY)
		if savesBack {
			ys = rv(down, outLo, argYs)
		}
	}
	if v.Loss || v.Grad {
		loss = rv(down, outLo, argLoss)
	}
	if v.Grad {
		gy0, gp = rv(down, outLo, argGY0), rv(down, outLo, argGP)
	}
	var status, acc, rej, flags, events []int32
	var tt, lasth reals
	if v.Adaptive {
		status, acc, flags = iv(down, outLo, argStatus), iv(down, outLo, argAcc), iv(down, outLo, argFlags)
		if r.omit&ode.OmitStats == 0 {
			rej = iv(down, outLo, argRej)
		}
		if !r.lazyT {
			tt, lasth = rv(down, outLo, argT), rv(down, outLo, argLastH)
		}
		if v.Events {
			events = iv(down, outLo, argEvents)
		}
	} else if v.Events {
		tt, events = rv(down, outLo, argT), iv(down, outLo, argEvents)
		if v.Grad {
			flags = iv(down, outLo, argFlags)
		}
	}
	// Per trajectory, in blocks of r.rb on all cores (a launch of
	// millions of trajectories writes tens of arrays per trajectory); each
	// block keeps its own overflows and longest record, merged in order.
	pl := ex.plan
	nb := (n + r.rb - 1) / r.rb
	blocks := make([]scatterBlock, nb)
	// The loss terms of a launch that continues the run's trajectories in
	// order are added up as their blocks are done (orderedSum).
	var sum *orderedSum
	if (v.Loss || v.Grad) && r.summed >= 0 && n > 0 && g[0] == r.summed && g[n-1] == g[0]+n-1 {
		sum = &orderedSum{sum: r.sum, done: make([]bool, nb), terms: func(b int) []float64 {
			return r.terms[g[0]+b*r.rb : g[0]+min(n, (b+1)*r.rb)]
		}}
	} else {
		r.summed = -1
	}
	// A launch of consecutive trajectories g[0], g[0]+1, … (every first
	// pass) writes their rows as runs of the result arrays, without an
	// index per trajectory (scatterStatus, scatterRows).
	consec := n > 0 && g[n-1]-g[0] == n-1 && !ex.tun.generic
	block := func(_, b int) {
		q0, q1 := b*r.rb, min(n, (b+1)*r.rb)
		var over []int
		longest, fail, stiffAny := 0, false, false // kept in registers: the blocks' slots share cache lines
		if v.Adaptive && consec && !overflowed(flags[q0:q1]) {
			longest, fail, stiffAny = r.scatterStatus(g[0]+q0, q0, q1, status, acc, rej, flags, events, tt)
		} else if v.Adaptive {
			// The result arrays in locals: the loop's stores would
			// otherwise make the compiler load each header again.
			sts, stiff, accepted, rejected, evals := res.Status, res.Stiff, res.Stats.Accepted, res.Stats.Rejected, res.Stats.FieldEvals
			var lens []int // the mesh's Len, written with the counts
			if r.lensOut {
				lens = r.meshLen
			}
			times, e0, e1 := !r.lazyT, pl.InitEvals, pl.TrialEvals
			for q := q0; q < q1; q++ {
				i, a, f := g[q], int(acc[q]), flags[q]
				accepted[i] = a
				if lens != nil {
					lens[i] = a
				}
				if f&flagOverflow != 0 {
					// Run again: the rerun writes all its results.
					sts[i] = ode.NotRun
					over = append(over, i)
					continue
				}
				st := ode.Status(status[q])
				fail = fail || st != ode.OK
				sts[i] = st
				if times {
					res.T[i] = tt.get(q)
				}
				stiff[i] = f&flagStiff != 0
				stiffAny = stiffAny || stiff[i]
				if rej != nil {
					rj := int(rej[q])
					rejected[i] = rj
					evals[i] = e0 + e1*(a+rj)
				}
				if events != nil {
					res.Events[i] = int(events[q])
				}
				longest = max(longest, a)
			}
		} else if events != nil {
			for q := q0; q < q1; q++ {
				res.T[g[q]], res.Events[g[q]] = tt.get(q), int(events[q])
			}
		}
		if r.ends {
			r.writeEnds(g[q0:q1], consec)
		}
		// The arrays one at a time (component-major on the device, but
		// those of rowMajor; row-major here), then the failures' rows
		// overwritten.
		gb := g[q0:q1]
		cols := func(dst []float64, w int, src reals) bool {
			if consec {
				return scatterRows(dst, w, src, n, q0, gb)
			}
			return scatterCols(dst, w, src, n, q0, gb)
		}
		// y, gy0 and gp row-major on the device (Config.RowMajor): runs
		// of whole rows copied.
		rows := cols
		if v.RowMajor {
			rows = func(dst []float64, w int, src reals) bool {
				if consec {
					return copyOut(dst[g[0]*w+q0*w:g[0]*w+q1*w], src, q0*w)
				}
				finite := true
				for j, i := range gb {
					finite = copyOut(dst[i*w:(i+1)*w], src, (q0+j)*w) && finite
				}
				return finite
			}
		}
		if states {
			rows(res.Y, d, y) // the saved states after the blocks (savesTask)
		}
		if v.Loss || v.Grad {
			blocks[b].badTerm = !cols(r.terms, 1, loss)
		}
		if v.Grad {
			f0 := rows(res.GradY0, d, gy0)
			fp := rows(res.GradP, np, gp)
			blocks[b].nonFinite = !f0 || !fp
		}
		if fail {
			for q := q0; q < q1; q++ {
				if flags[q]&flagOverflow != 0 || ode.Status(status[q]) == ode.OK {
					continue
				}
				i := g[q]
				// (Job.StopOnStiff keeps a stiff trajectory's state.)
				for c := i * d; c < (i+1)*d && states && ode.Status(status[q]) != ode.Stiff; c++ {
					res.Y[c] = math.NaN()
				}
				if v.Loss || v.Grad {
					r.terms[i] = 0
				}
			}
		}
		blocks[b].over, blocks[b].longest, blocks[b].failed, blocks[b].stiff = over, longest, fail, stiffAny
		if sum != nil {
			sum.add(b)
		}
	}
	// The saved states (k·d values a trajectory, 4,000 for 1,000 save
	// times of four components) in tasks of their own (scatterSaves): a
	// result block (up to resultBlock trajectories) would leave a launch
	// of a few thousand to one core. A failed trajectory's rows are NaN.
	if err := feed(func(lo, hi int) {
		par.Run(hi-lo, 0, func(w, t int) { block(w, lo+t) })
		if savesBack && !savesApart {
			r.scatterSaves(ys, g, lo*r.rb, min(n, hi*r.rb), 0, k*d, status, flags)
		}
	}, func(c0, c1 int) {
		r.scatterSaves(ys, g, 0, n, c0, c1, status, flags)
	}); err != nil {
		return nil, err
	}
	if v.Grad {
		// The steps' contributions, then the loss's own, to be scaled.
		gs := rv(down, outLo, argGS)
		if v.TileSums {
			// Launches start on tile boundaries (chunks are multiples of
			// 32, reruns whole tiles): launch tile q is the tile of
			// trajectory g[q*TileSize], computed whole in this launch.
			w := 2 * r.ns
			for q := 0; q*scan.TileSize < n; q++ {
				k := g[q*scan.TileSize] / scan.TileSize
				if gs.f64 != nil {
					copy(r.tiles[k*w:(k+1)*w], gs.f64[q*w:(q+1)*w])
					continue
				}
				for c := 0; c < w; c++ {
					r.tiles[k*w+c] = gs.get(q*w + c)
				}
			}
		} else {
			for c := range r.gs {
				r.gs[c] += gs.get(c)
				r.gsLoss[c] += gs.get(r.ns + c)
			}
		}
	}
	if v.Grad && v.Events {
		for q := range n {
			if flags[q]&flagTangent != 0 && flags[q]&flagOverflow == 0 {
				return nil, fmt.Errorf("cuda: engine %s: trajectory %d: an event's condition has derivative 0 (or not finite) along the solution at the event: its time has no derivative (a tangential crossing)", ex.name, g[q])
			}
		}
	}
	anyFailed := slices.ContainsFunc(blocks, func(b scatterBlock) bool { return b.failed })
	if rej == nil && v.Adaptive && anyFailed {
		// The failures' rejected steps, for their messages (Job.Omit).
		if err := r.readRejected(ar, l, g, status, flags); err != nil {
			return nil, err
		}
	}
	if !states && slices.ContainsFunc(blocks, func(b scatterBlock) bool { return b.badTerm }) {
		if err := r.readFailedRows(ar, l, g); err != nil {
			return nil, err
		}
	}
	if r.lazyT && anyFailed {
		// The failures' times and last steps, for their messages.
		if tt, lasth, err = r.readTimes(ar, l); err != nil {
			return nil, err
		}
		if res.T == nil {
			res.T = append([]float64(nil), r.j.T1...) // where each trajectory that ends well ends
		}
		for q := range n {
			if flags[q]&flagOverflow == 0 && ode.Status(status[q]) != ode.OK {
				res.T[g[q]] = tt.get(q)
			}
		}
	}
	longest := 0
	for b, bo := range blocks {
		r.gradNonFinite = r.gradNonFinite || bo.nonFinite
		r.ill = r.ill || bo.failed || bo.stiff
		over = append(over, bo.over...)
		longest = max(longest, bo.longest)
		if bo.failed {
			// The last step tried, for the failures' messages.
			if res.LastH == nil {
				res.LastH = make([]float64, r.j.N)
			}
			for q := b * r.rb; q < min(n, (b+1)*r.rb); q++ {
				if flags[q]&flagOverflow == 0 && ode.Status(status[q]) != ode.OK {
					res.LastH[g[q]] = lasth.get(q)
				}
			}
		}
	}
	if sum != nil {
		r.sum, r.summed = sum.sum, g[n-1]+1
	}
	r.longest = max(r.longest, longest)
	if v.Adaptive && (v.MeshOut || v.Store) {
		ex.notice(longest)
	}
	if v.MeshOut && longest > 0 && r.hout == nil {
		if err := r.readMesh(ar.addr+uint64(l.off[argHout]), g, min(longest, rows)); err != nil {
			return nil, err
		}
	}
	if l.off[argEvOut] >= 0 {
		if err := r.readEvents(ar.addr+uint64(l.off[argEvOut]), g, min(longest, rows)); err != nil {
			return nil, err
		}
	}
	return over, nil
}

// overflowed reports whether a flag of fl marks a record that
// overflowed its buffer.
func overflowed(fl []int32) bool {
	var or int32
	for _, f := range fl {
		or |= f
	}
	return or&flagOverflow != 0
}

// scatterStatus is scatter's loop over the statuses and counts of the
// launch trajectories q0…q1−1, none of whose records overflowed, for the
// run's consecutive trajectories i0, i0+1, …: one array at a time, each
// a run of the result array (the loop's stores to seven arrays through
// an index per trajectory took longer than all the block's copies). It
// returns the most accepted steps and whether a trajectory failed.
func (r *run) scatterStatus(i0, q0, q1 int, status, acc, rej, flags, events []int32, tt reals) (longest int, fail, stiff bool) {
	// In strips whose arrays (about 40 bytes a trajectory) stay in the
	// core's cache from one loop to the next: a block of 16,384 at once
	// read its arrays from memory again in each loop.
	for s0 := q0; s0 < q1; s0 += statusStrip {
		s1 := min(q1, s0+statusStrip)
		l, f, st := r.scatterStatusStrip(i0+s0-q0, s0, s1, status, acc, rej, flags, events, tt)
		longest, fail, stiff = max(longest, l), fail || f, stiff || st
	}
	return longest, fail, stiff
}

// statusStrip is the trajectories of a strip of scatterStatus.
const statusStrip = 2048

// scatterStatusStrip is scatterStatus over one strip.
func (r *run) scatterStatusStrip(i0, q0, q1 int, status, acc, rej, flags, events []int32, tt reals) (longest int, fail, stiffAny bool) {
	res, pl := r.res, r.ex.plan
	m := q1 - q0
	accepted := res.Stats.Accepted[i0 : i0+m]
	ac := acc[q0 : q0+len(accepted)]
	for j := range accepted {
		a := int(ac[j])
		accepted[j] = a
		longest = max(longest, a)
	}
	if r.lensOut {
		copy(r.meshLen[i0:i0+m], accepted)
	}
	sts := res.Status[i0 : i0+m]
	st := status[q0 : q0+len(sts)]
	var bad ode.Status // OK is 0: any other status sets a bit
	for j := range sts {
		s := ode.Status(st[j])
		sts[j] = s
		bad |= s
	}
	stiff := res.Stiff[i0 : i0+m]
	fl := flags[q0 : q0+len(stiff)]
	var anyFlag int32
	for j := range stiff {
		f := fl[j] & flagStiff
		stiff[j] = f != 0
		anyFlag |= f
	}
	if !r.lazyT {
		t := res.T[i0 : i0+m]
		for j := range t {
			t[j] = tt.get(q0 + j)
		}
	}
	if rej != nil {
		e0, e1 := pl.InitEvals, pl.TrialEvals
		rejected := res.Stats.Rejected[i0 : i0+m]
		evals := res.Stats.FieldEvals[i0 : i0+len(rejected)]
		rj := rej[q0 : q0+len(rejected)]
		for j := range rejected {
			x := int(rj[j])
			rejected[j] = x
			evals[j] = e0 + e1*(accepted[j]+x)
		}
	}
	if events != nil {
		ev := res.Events[i0 : i0+m]
		e := events[q0 : q0+len(ev)]
		for j := range ev {
			ev[j] = int(e[j])
		}
	}
	return longest, bad != ode.OK, anyFlag != 0
}

// writeEnds writes the end times (Job.T1) of the run's trajectories g,
// consecutive if consec, into both arrays of Job.EndTimes (r.endT and
// r.endM): as runs of the arrays, one value repeated where every
// trajectory ends at T1[0] (Job.T1Same).
func (r *run) writeEnds(g []int, consec bool) {
	t1 := r.j.T1
	if !consec {
		for _, i := range g {
			r.endT[i], r.endM[i] = t1[i], t1[i]
		}
		return
	}
	if len(g) == 0 {
		return
	}
	i0, i1 := g[0], g[0]+len(g)
	a, b := r.endT[i0:i1], r.endM[i0:i1]
	if r.j.T1Same {
		x := t1[0]
		for k := range a {
			a[k] = x
		}
		for k := range b {
			b[k] = x
		}
		return
	}
	copy(a, t1[i0:i1])
	copy(b, t1[i0:i1])
}

// scatterBlock is what scatter's worker found in one block of
// r.rb trajectories, merged in block order after the loop.
type scatterBlock struct {
	over      []int // the block's trajectories whose record overflowed
	longest   int   // the most accepted steps of one of them
	failed    bool  // a trajectory that did not end OK
	stiff     bool  // a trajectory whose stiffness test fired
	nonFinite bool  // a gradient that is not finite
	badTerm   bool  // a loss term that is not finite (with OmitStates: lossError needs its states)
}

// orderedSum adds the loss terms of a launch's blocks in index order as
// the result loop's workers finish them: the worker that finishes the
// next block in order adds it, and the blocks after it that are done,
// while the others go on with their blocks. The sum is the in-order sum
// finish would form (the same additions in the same order), formed while
// the loop runs instead of after it, where its chain of dependent
// additions (a million at 2^20 trajectories, latency-bound) would take one
// core a millisecond and more.
type orderedSum struct {
	mu    sync.Mutex
	done  []bool // per block: written
	next  int    // the next block to add
	busy  bool   // a worker is adding
	sum   float64
	terms func(b int) []float64 // block b's terms
}

// add marks block b written and, unless another worker is adding, adds
// the blocks that are next in order and written.
func (s *orderedSum) add(b int) {
	s.mu.Lock()
	s.done[b] = true
	if s.busy {
		s.mu.Unlock()
		return
	}
	s.busy = true
	for s.next < len(s.done) && s.done[s.next] {
		k := s.next
		s.mu.Unlock()
		sum := s.sum // only the busy worker touches it
		for _, x := range s.terms(k) {
			sum += x
		}
		s.sum = sum
		s.mu.Lock()
		s.next++
	}
	s.busy = false
	s.mu.Unlock()
}

// readEvents copies the event marks of the first used rows of the
// launch's mesh (int32 [used][len(g)] at addr on the device) to the run's
// marks (r.meshE, step-major [rows][N] as the mesh's steps, on the host
// wherever the steps are: Mesh.Events), extended to used rows if need be
// (new rows read 0), and zeroes the rest of the launch's columns. The
// marks hold only the rows some launch used (finish extends them to the
// mesh's rows), not the launch's record buffer, whose rows are many times
// the steps taken: a launch of all N trajectories copies its marks
// straight into them.
func (r *run) readEvents(addr uint64, g []int, used int) error {
	N, n := r.j.N, len(g)
	all := n == N && g[0] == 0 && g[n-1] == N-1 // g is 0, 1, …, N−1 (g is increasing)
	if had := len(r.meshE) / N; had < used {
		var fresh bool
		r.meshE, fresh = buf.Extend(r.meshE, used*N)
		if !fresh && !all { // all: the copy below writes them
			clear(r.meshE[had*N:])
		}
	}
	if all {
		clear(r.meshE[used*N:])
	} else {
		for s := used; s < len(r.meshE)/N; s++ {
			for _, i := range g {
				r.meshE[s*N+i] = 0
			}
		}
	}
	if used == 0 {
		return nil
	}
	r.tr.add(func(t *TraceStats) { t.Download += int64(used) * int64(n) * 4 })
	if all {
		return r.copyMesh(int32bytes(r.meshE[:used*N]), addr, false)
	}
	b := make([]byte, used*n*4)
	if err := r.read(b, addr); err != nil {
		return err
	}
	ev := int32s(b, 0, int64(len(b)))
	par.Run(used, 0, func(_, s int) {
		row := r.meshE[s*N : (s+1)*N]
		for q, i := range g {
			row[i] = ev[s*n+q]
		}
	})
	return nil
}

// readTimes reads the times reached and the last step sizes of a launch
// in layout l on the arena ar (the region lazyTimes leaves out).
func (r *run) readTimes(ar *arena, l *layout) (tt, lasth reals, err error) {
	buf, at, err := r.readArgs(ar, l, argT, argLastH)
	if err != nil {
		return reals{}, reals{}, err
	}
	return r.reals(buf, at[argT], l.bytes[argT]), r.reals(buf, at[argLastH], l.bytes[argLastH]), nil
}

// readArgs copies the arrays args of a launch in layout l on the arena
// ar back from the device (in one range or a few, as spans gives them):
// array a's bytes are at at[a] in buf.
func (r *run) readArgs(ar *arena, l *layout, args ...int) (buf []byte, at [numArgs]int64, err error) {
	sp, at, total := l.spans(func(a int) bool { return slices.Contains(args, a) })
	buf = make([]byte, total)
	if err := r.ex.be.batch(func(q queue) error {
		r.q = q
		defer func() { r.q = nil }()
		o := int64(0)
		for _, s := range sp {
			if err := r.read(buf[o:o+s.hi-s.lo], ar.addr+uint64(s.lo)); err != nil {
				return err
			}
			o += s.hi - s.lo
		}
		return nil
	}); err != nil {
		return nil, at, err
	}
	r.tr.add(func(t *TraceStats) { t.Download += total })
	return buf, at, nil
}

// readRejected reads back the rejected-step counts of a launch over the
// trajectories g whose counts Job.Omit leaves on the device, and sets
// those of its failed trajectories in Result.Stats.Rejected (made, [N],
// at the run's first failure), which a failure's message reads.
func (r *run) readRejected(ar *arena, l *layout, g []int, status, flags []int32) error {
	buf, at, err := r.readArgs(ar, l, argRej)
	if err != nil {
		return err
	}
	rej := int32s(buf, at[argRej], l.bytes[argRej])
	res := r.res
	if res.Stats.Rejected == nil {
		res.Stats.Rejected = make([]int, r.j.N)
	}
	for q := range g {
		if flags[q]&flagOverflow == 0 && ode.Status(status[q]) != ode.OK {
			res.Stats.Rejected[g[q]] = int(rej[q])
		}
	}
	return nil
}

// readFailedRows reads back the final and saved states of a launch over
// the trajectories g whose states Job.Omit leaves on the device, and
// keeps those of the trajectories whose loss term is not finite
// (failedRows), which lossError evaluates the loss at.
func (r *run) readFailedRows(ar *arena, l *layout, g []int) error {
	var bad []int // launch positions
	for q, i := range g {
		if x := r.terms[i]; math.IsNaN(x) || math.IsInf(x, 0) {
			bad = append(bad, q)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	buf, at, err := r.readArgs(ar, l, argY, argYs)
	if err != nil {
		return err
	}
	n, d, k := len(g), r.d, r.k
	y := r.reals(buf, at[argY], l.bytes[argY])
	var ys reals
	if k > 0 {
		ys = r.reals(buf, at[argYs], l.bytes[argYs])
	}
	if r.failedRows == nil {
		r.failedRows = map[int][]float64{}
	}
	for _, q := range bad {
		row := make([]float64, d+k*d)
		for c := range d { // component-major on the device, or row-major
			if r.rowMajor(argY) {
				row[c] = y.get(q*d + c)
			} else {
				row[c] = y.get(c*n + q)
			}
		}
		for c := range k * d {
			row[d+c] = ys.get(c*n + q)
		}
		r.failedRows[g[q]] = row
	}
	return nil
}

// resultBlock is the most trajectories per task of a launch's staging
// and result loops (resultBlockOf).
const resultBlock = 1 << 14

// resultBlockOf returns the trajectories per task of the staging and
// result loops of a launch of n: about four tasks per core, a multiple of
// scatterTile, from 1,024 to resultBlock. (Blocks of resultBlock alone left
// a launch of 65,536 trajectories to four cores, of 32,768 to two.) The
// results do not depend on it: the loss terms are summed in trajectory
// order (orderedSum), the blocks' reruns and counts merged in order.
func resultBlockOf(n int) int {
	tasks := 4 * runtime.GOMAXPROCS(0)
	b := (n + tasks - 1) / tasks
	b = (b + scatterTile - 1) / scatterTile * scatterTile
	return min(resultBlock, max(1024, b))
}

// savesTask returns the trajectories per task of the scatter of saved
// states of w values a trajectory: a multiple of scatterTile, about 256 kB
// of them a task.
func savesTask(w int) int {
	t := (1 << 15) / max(w, 1)
	return max(scatterTile, (t+scatterTile-1)/scatterTile*scatterTile)
}

// maxShared is the dynamic shared memory a block may use without opting
// in to more (48 KiB on every architecture the engine compiles for).
const maxShared = 48 << 10

// launchShape returns the threads per block and the bytes of dynamic
// shared memory of a launch of n threads of kernel v (ns shared
// parameters), with kernel block size block on sms multiprocessors (0 if
// unknown): the block shrinks for small grids (spreadBlock) and until the warps' transposition scratch
// (GS_XPOSE) and the block's shared accumulator (GS_SACC) fit in
// maxShared.
func launchShape(n, block, sms int, v kernelgen.Config, ns int, prec Precision) (int, int) {
	block = spreadBlock(n, block, sms)
	acc := 0
	if v.SharedAcc(ns, prec) {
		acc = 2 * ns * prec.Size()
	}
	if !v.Xpose(ns) {
		return block, acc
	}
	perWarp := 32 * kernelgen.XposeRow * prec.Size()
	for block > 32 && acc+block/32*perWarp > maxShared {
		block = max(32, block/2/32*32)
	}
	return block, acc + block/32*perWarp
}

// writeMesh copies rows rows of the job's mesh for the trajectories g to
// the device at addr, step-major ([rows][len(g)]), row by row: straight
// from the mesh's rows where g is consecutive and the precision float64,
// else through a staging buffer filled row by row (the mesh's steps of
// one trajectory lie N apart: reading them trajectory by trajectory
// misses the cache and the TLB on every step). Entries past a trajectory's
// length are the mesh's own (0); the kernel does not read them.
func (r *run) writeMesh(addr uint64, g []int, rows int) error {
	mh, n := r.j.Mesh, len(g)
	N := mh.N
	es := r.ex.prec.Size()
	lo := g[0]
	if g[n-1]-lo == n-1 && r.ex.prec == Float64 {
		if n == N {
			return r.copyMesh(f64bytes(mh.H[:rows*N]), addr, true)
		}
		for s := 0; s < rows; s++ {
			if err := r.write(addr+uint64(s*n*es), f64bytes(mh.H[s*N+lo:s*N+lo+n])); err != nil {
				return err
			}
		}
		return nil
	}
	b := r.ex.takeStaging(int64(rows * n * es))
	defer r.ex.giveStaging(b)
	hv := r.reals(b, 0, int64(len(b)))
	for s := 0; s < rows; s++ {
		row := mh.H[s*N : (s+1)*N]
		for q, i := range g {
			hv.set(s*n+q, row[i])
		}
	}
	return r.write(addr, b)
}

// readMesh copies the first used rows of the launch's mesh (rows
// [used][len(g)] at addr on the device) to the run's mesh, which it extends
// to used rows if need be (not to the launch's record buffer: finish
// extends it to the mesh's rows, the most any launch used), and zeroes the
// rest of the launch's columns (the
// device wrote zeros past each trajectory's last step; the run's mesh may
// hold a mesh passed back, or an earlier launch's rows of a trajectory run
// again). Rows new to the run's mesh read 0 in the other columns, so that
// columns no launch has read yet read 0 throughout. Nothing else is
// cleared: a launch of all N trajectories clears only its rows past the
// longest. Rows of consecutive trajectories in float64 are copied straight
// into place.
func (r *run) readMesh(addr uint64, g []int, used int) error {
	N, n := r.j.N, len(g)
	lo := g[0]
	contiguous := g[n-1]-lo == n-1
	if had := len(r.meshH) / N; had < used {
		var fresh bool
		r.meshH, fresh = buf.Extend(r.meshH, used*N)
		if !fresh {
			if contiguous {
				clearRows(r.meshH, N, had, used, 0, lo)
				clearRows(r.meshH, N, had, used, lo+n, N)
			} else {
				clearRows(r.meshH, N, had, used, 0, N)
			}
		}
	}
	if contiguous {
		clearRows(r.meshH, N, used, len(r.meshH)/N, lo, lo+n)
	} else {
		for s := used; s < len(r.meshH)/N; s++ {
			for _, i := range g {
				r.meshH[s*N+i] = 0
			}
		}
	}
	es := r.ex.prec.Size()
	r.tr.add(func(t *TraceStats) { t.Download += int64(used) * int64(n) * int64(es) })
	if contiguous && r.ex.prec == Float64 {
		if n == N {
			return r.copyMesh(f64bytes(r.meshH[:used*N]), addr, false)
		}
		for s := 0; s < used; s++ {
			if err := r.read(f64bytes(r.meshH[s*N+lo:s*N+lo+n]), addr+uint64(s*n*es)); err != nil {
				return err
			}
		}
		return nil
	}
	buf := make([]byte, used*n*es)
	if err := r.read(buf, addr); err != nil {
		return err
	}
	hv := r.reals(buf, 0, int64(len(buf)))
	for s := 0; s < used; s++ {
		for q, i := range g {
			r.meshH[s*N+i] = hv.get(s*n + q)
		}
	}
	return nil
}

// clearRows zeroes columns [lo, hi) of rows [s0, s1) of the step-major
// array h of rows of N, on all cores when that is more than a few
// megabytes.
func clearRows(h []float64, N, s0, s1, lo, hi int) {
	if s0 >= s1 || lo >= hi {
		return
	}
	if lo == 0 && hi == N {
		h = h[s0*N : s1*N]
		if len(h) < clearBlock {
			clear(h)
			return
		}
		par.Run((len(h)+clearBlock-1)/clearBlock, 0, func(_, b int) {
			clear(h[b*clearBlock : min(len(h), (b+1)*clearBlock)])
		})
		return
	}
	if (s1-s0)*(hi-lo) < clearBlock {
		for s := s0; s < s1; s++ {
			clear(h[s*N+lo : s*N+hi])
		}
		return
	}
	par.Run(s1-s0, 0, func(_, s int) { clear(h[(s0+s)*N+lo : (s0+s)*N+hi]) })
}

// clearBlock is the elements per task of clearRows on all cores (4 MiB of
// float64).
const clearBlock = 1 << 19

// read copies device memory at addr to dst, adding the time to the trace.
func (r *run) read(dst []byte, addr uint64) error {
	start := time.Now()
	var err error
	if r.q != nil {
		err = r.q.read(dst, addr)
	} else {
		err = r.ex.be.read(dst, addr)
	}
	d := time.Since(start)
	r.tr.add(func(t *TraceStats) { t.Transfer += d })
	return err
}

// write copies src to device memory at addr, adding the time to the trace.
func (r *run) write(addr uint64, src []byte) error {
	start := time.Now()
	var err error
	if r.q != nil {
		err = r.q.write(addr, src)
	} else {
		err = r.ex.be.write(addr, src)
	}
	d := time.Since(start)
	r.tr.add(func(t *TraceStats) { t.Transfer += d })
	return err
}

// zero sets n bytes of device memory at addr to zero (in the batch, if
// one runs).
func (r *run) zero(addr uint64, n int64) error {
	if r.q != nil {
		return r.q.zero(addr, n)
	}
	return r.ex.be.zero(addr, n)
}

// defaultMeshChunk is the size of each of an executor's two buffers
// through which copyChunked moves meshes (32 MiB; Tuning.meshChunk for
// the tests).
const defaultMeshChunk = 32 << 20

func (ex *executor) meshChunk() int {
	if c := ex.tun.meshChunk; c > 0 {
		return c
	}
	return defaultMeshChunk
}

// copyChunked copies between the Go memory host and the device at addr
// (to the device if toDevice) through the executor's two page-locked
// chunk buffers: while the device copies one chunk, all cores move the
// next (or the last) between the other and host. A mesh of a million
// trajectories is hundreds of megabytes; copied straight from Go memory it
// goes through the driver's own staging at a fraction of the bus's speed.
// It reports false, having copied nothing, where the backend gives no
// host memory or another copy holds the buffers: the caller then copies
// directly. The time goes to the trace's Transfer.
func (r *run) copyChunked(host []byte, addr uint64, toDevice bool) (bool, error) {
	ex := r.ex
	if !ex.chunkMu.TryLock() {
		return false, nil
	}
	defer ex.chunkMu.Unlock()
	if ex.keep.chunks[0] == nil && !ex.chunkNone {
		a, b := ex.be.hostAlloc(int64(ex.meshChunk())), ex.be.hostAlloc(int64(ex.meshChunk()))
		if a != nil && b != nil {
			ex.keep.chunks = [2][]byte{a, b}
		} else {
			if a != nil {
				ex.be.hostFree(a)
			}
			if b != nil {
				ex.be.hostFree(b)
			}
			ex.chunkNone = true
		}
	}
	if ex.chunkNone {
		return false, nil
	}
	size := len(ex.keep.chunks[0])
	start := time.Now()
	defer func() {
		d := time.Since(start)
		r.tr.add(func(t *TraceStats) { t.Transfer += d })
	}()
	nk := (len(host) + size - 1) / size
	part := func(k int) (lo, hi int) { return k * size, min(len(host), (k+1)*size) }
	// move copies chunk k between host and its buffer, on all cores.
	move := func(k int) error {
		lo, hi := part(k)
		b := ex.keep.chunks[k%2][:hi-lo]
		h := host[lo:hi]
		const block = 1 << 20
		par.Run((len(b)+block-1)/block, 0, func(_, q int) {
			a, z := q*block, min(len(b), (q+1)*block)
			if toDevice {
				copy(b[a:z], h[a:z])
			} else {
				copy(h[a:z], b[a:z])
			}
		})
		return nil
	}
	// dev copies chunk k between its buffer and the device.
	dev := func(k int) error {
		lo, hi := part(k)
		b := ex.keep.chunks[k%2][:hi-lo]
		if toDevice {
			return ex.be.write(addr+uint64(lo), b)
		}
		return ex.be.read(b, addr+uint64(lo))
	}
	// A two-stage pipeline over the chunks: to the device, move then
	// dev; back, dev then move. The second stage of chunk k runs beside
	// the first of chunk k+1, which fills the other buffer.
	first, second := move, dev
	if !toDevice {
		first, second = dev, move
	}
	if err := first(0); err != nil {
		return true, err
	}
	for k := 0; k < nk; k++ {
		next := make(chan error, 1)
		go func() {
			if k+1 < nk {
				next <- first(k + 1)
				return
			}
			next <- nil
		}()
		err := second(k)
		if nerr := <-next; err == nil {
			err = nerr
		}
		if err != nil {
			return true, err
		}
	}
	return true, nil
}

// copyMesh copies a whole mesh (host, all N trajectories) to the device
// at addr if toDevice, else back: through the chunk buffers where it is
// larger than one (copyChunked), else directly.
func (r *run) copyMesh(host []byte, addr uint64, toDevice bool) error {
	if len(host) > r.ex.meshChunk() {
		if ok, err := r.copyChunked(host, addr, toDevice); ok {
			return err
		}
	}
	if toDevice {
		return r.write(addr, host)
	}
	return r.read(host, addr)
}

// f64bytes returns the bytes of x.
func f64bytes(x []float64) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 8*len(x))
}

// int32bytes returns the bytes of x.
func int32bytes(x []int32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// Kernel flags (GS_FLAG_* of kernel.cuh).
const (
	flagStiff    = 1
	flagOverflow = 2
	flagTangent  = 4 // events.cuh's GS_FLAG_TANGENT
)

// finish assembles the result.
func (r *run) finish(wall time.Duration) (*ode.Result, error) {
	j, v, res := r.j, r.v, r.res
	n := j.N
	if v.Adaptive {
		res.Stats.Wall = wall
	}
	if v.MeshOut {
		var m *ode.Mesh
		if r.lensOut {
			m = ode.RecordedMeshLen(j, res, r.meshLen, r.longest)
		} else {
			m = ode.RecordedMesh(j, res, r.meshLen)
		}
		switch {
		case r.hout != nil:
			m.Resident = r.hout // H stays nil: the steps are on the device
		case len(r.meshH) < m.Rows*n: // no launch had steps to copy, or as many as the longest
			had := len(r.meshH)
			var fresh bool
			if r.meshH, fresh = buf.Extend(r.meshH, m.Rows*n); !fresh {
				clear(r.meshH[had:])
			}
			fallthrough
		default:
			m.H = r.meshH[:m.Rows*n]
		}
		if v.Events {
			// The event marks, on the host (readEvents), wherever the
			// steps are.
			if had := len(r.meshE); had < m.Rows*n { // no launch had steps
				var fresh bool
				if r.meshE, fresh = buf.Extend(r.meshE, m.Rows*n); !fresh {
					clear(r.meshE[had:])
				}
			}
			m.Events = r.meshE[: m.Rows*n : m.Rows*n]
		}
		res.Mesh = m
	}
	if v.Loss || v.Grad {
		if r.ex != nil { // nil: a MultiEngine's gathered run
			defer r.ex.giveTerms(r.terms)
		}
		if v.Events && r.k > 0 {
			if err := r.pastTerminal(); err != nil {
				return nil, err
			}
		}
		// Added in order, as the CPU engine adds them, in a local (a
		// field's load and store per term would triple the time), where
		// scatter did not add them all as it wrote them; only a sum that
		// is not finite looks for a term that is not (the error).
		sum := r.sum
		if r.summed != len(r.terms) {
			sum = 0
			for _, x := range r.terms {
				sum += x
			}
		}
		res.Loss = sum
		if math.IsNaN(sum) || math.IsInf(sum, 0) {
			for i, x := range r.terms {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return nil, r.lossError(i)
				}
			}
		}
		res.Loss *= j.Loss.Scale
	}
	if v.Grad {
		if v.TileSums {
			r.gs = sumTiles(r.gs, r.tiles, r.ns, j.Loss.Scale)
		} else {
			for c := range r.gs {
				r.gs[c] += j.Loss.Scale * r.gsLoss[c]
			}
		}
		res.GradS = r.gs
		res.GradFinite = !r.gradNonFinite
		if r.ends && !r.ill {
			res.T, res.MeshT1, res.EndsWell = r.endT, r.endM, true
		}
		res.StoredBytes = r.stored
		res.GradTime = wall
	}
	if r.sout != nil {
		res.Saves = r.sout // Ys stays nil: the saves are on the device
	}
	return res, nil
}

// pastTerminal returns the CPU engine's error for a loss or gradient
// with a save time past a trajectory's terminal event, where the kernel
// saved NaN (the state Solve returns there), or nil.
func (r *run) pastTerminal() error {
	j, res, k, d := r.j, r.res, r.k, r.d
	ts, N := j.SaveAt, j.N
	for i := 0; i < N; i++ {
		if res.Status != nil && res.Status[i] != ode.OK || !(ts[k-1] > res.T[i]) {
			continue
		}
		x := sort.SearchFloat64s(ts, math.Nextafter(res.T[i], math.Inf(1)))
		if !math.IsNaN(res.Ys[(i*k+x)*d]) {
			continue
		}
		// The event: the mark of the trajectory's last step.
		var mark int32
		if m := j.Mesh; m != nil {
			if l := m.Len[i]; l > 0 {
				mark = m.Events[(l-1)*m.N+i]
			}
		} else if l := res.Stats.Accepted[i]; l > 0 && len(r.meshE) >= l*N {
			mark = r.meshE[(l-1)*N+i]
		}
		name := "event"
		if ep := j.Plan.Events; mark > 0 && int(mark) <= len(ep.Names) {
			name = ep.Names[mark-1]
		}
		return fmt.Errorf("ode: trajectory %d: save time SaveAt[%d] = %v is after its terminal event (%s at t = %v), where it has no state (Solve returns NaN there): "+
			"end the save times at the event, or make the event non-terminal", i, x, ts[x], name, res.T[i])
	}
	return nil
}

// sumTiles sets dst ([ns]) to the shared gradient of the tile sums
// tiles ([tiles][2][ns]: the steps', then the loss's own, unscaled): per
// tile steps + scale·loss, the tiles added in index order as
// scan.SumTiles adds them (without the array of combined tiles). It
// returns dst.
func sumTiles(dst, tiles []float64, ns int, scale float64) []float64 {
	dst = append(dst[:0], make([]float64, ns)...)
	for k := 0; k+2*ns <= len(tiles) && ns > 0; k += 2 * ns {
		for c := 0; c < ns; c++ {
			// The conversion keeps the product rounded (no fused multiply-add).
			dst[c] += tiles[k+c] + float64(scale*tiles[k+ns+c])
		}
	}
	return dst
}

// lossError explains the non-finite loss term of trajectory i: the loss
// program evaluated on the host names the op, as the CPU engine does.
func (r *run) lossError(i int) error {
	j, d, k := r.j, r.d, r.k
	lp := j.Loss
	in := make([][]float64, 0, len(lp.Term.Inputs))
	one := func(x float64) { in = append(in, []float64{x}) }
	var y, ys []float64 // trajectory i's final and saved states
	if row, ok := r.failedRows[i]; ok && r.res.Y == nil {
		y, ys = row[:d], row[d:] // Job.Omit: the states scatter kept (readFailedRows)
	} else {
		y, ys = r.res.Y[i*d:(i+1)*d], r.res.Ys[i*k*d:(i+1)*k*d]
	}
	for _, x := range y {
		one(x)
	}
	for _, x := range ys {
		one(x)
	}
	for c := 0; c < lp.DataDim; c++ {
		one(lp.Data[i*lp.DataDim+c])
	}
	for c := 0; c < r.np; c++ {
		one(j.P[i*r.np+c])
	}
	for c := 0; c < r.ns; c++ {
		one(j.Shared[c])
	}
	// A NonFiniteError naming the trajectory even where the host's
	// evaluation is finite, so that callers (ode.Solver.GradPartial) can
	// tell which trajectory failed.
	var err error = &tape.NonFiniteError{Program: lp.Term.Name, Trajectory: i, Output: "loss", Result: r.terms[i],
		Line: "the device's evaluation (the host's is finite)"}
	if e, xerr := tape.NewExec(lp.Term, &tape.ExecSettings{Workers: 1, CheckFinite: true}); xerr == nil {
		if rerr := e.Run([][]float64{{0}}, in, 1); rerr != nil {
			var nf *tape.NonFiniteError
			if errors.As(rerr, &nf) {
				nf.Trajectory = i
			}
			err = rerr
		}
	}
	return fmt.Errorf("ode: loss %s: %w", lp.Term.Name, err)
}

// reals is a view of device-format reals (float64 or float32) in a byte
// buffer.
type reals struct {
	f64 []float64
	f32 []float32
}

// reals returns the view of the bytes [off, off+bytes) of buf.
func (r *run) reals(buf []byte, off, bytes int64) reals {
	if bytes == 0 {
		return reals{}
	}
	p := unsafe.Pointer(&buf[off])
	if r.ex.prec == Float32 {
		return reals{f32: unsafe.Slice((*float32)(p), bytes/4)}
	}
	return reals{f64: unsafe.Slice((*float64)(p), bytes/8)}
}

func (x reals) set(i int, v float64) {
	if x.f32 != nil {
		x.f32[i] = float32(v)
		return
	}
	x.f64[i] = v
}

func (x reals) get(i int) float64 {
	if x.f32 != nil {
		return float64(x.f32[i])
	}
	return x.f64[i]
}

// int32s returns the int32 view of the bytes [off, off+bytes) of buf.
func int32s(buf []byte, off, bytes int64) []int32 {
	if bytes == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&buf[off])), bytes/4)
}

// identity returns 0, 1, …, n−1, shared and read-only.
func (ex *executor) identity(n int) []int {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if len(ex.ident) < n {
		id := make([]int, n)
		for i := range id {
			id[i] = i
		}
		ex.ident = id
	}
	return ex.ident[:n]
}

// takeTerms returns a buffer of n loss terms, the one a run gave back
// where it is large enough. Its contents are not cleared: scatter writes
// every trajectory's term (0 for a failed one).
func (ex *executor) takeTerms(n int) []float64 {
	ex.mu.Lock()
	b := ex.terms
	if cap(b) >= n {
		ex.terms = nil
	}
	ex.mu.Unlock()
	if cap(b) >= n {
		return b[:n]
	}
	return make([]float64, n)
}

// giveTerms keeps b for a later run (the larger buffer, if one is kept).
func (ex *executor) giveTerms(b []float64) {
	ex.mu.Lock()
	if cap(b) > cap(ex.terms) {
		ex.terms = b
	}
	ex.mu.Unlock()
}

// scatterCols copies the columns of trajectories q0, q0+1, … of a launch
// of n (src component-major: component c of launch trajectory q at
// src[c*n+q]) to the rows g of dst (row-major, w components a row:
// trajectory i's at dst[i*w:(i+1)*w]), one component at a time. It
// reports whether every value copied is finite: the check rides on the
// copy's read (one OR a value), where a check of its own would read the
// array again.
func scatterCols(dst []float64, w int, src reals, n, q0 int, g []int) (finite bool) {
	// bad's sign bit is set by a value whose exponent bits are all ones
	// (an infinity or a NaN): adding 1 to the exponent field carries out
	// of it only then.
	var bad uint64
	if f, m := src.f64, len(g); f != nil && w == 1 {
		// One value a trajectory (the loss terms): a copy, straight where
		// the trajectories are consecutive (a launch's block, ascending
		// as all launches' are: see orderedSum's test in scatter).
		col := f[q0 : q0+m]
		if m > 0 && g[m-1]-g[0] == m-1 {
			d := dst[g[0] : g[0]+m]
			for j, x := range col {
				bad |= math.Float64bits(x)&expBits + expOne
				d[j] = x
			}
		} else {
			for j, i := range g {
				x := col[j]
				bad |= math.Float64bits(x)&expBits + expOne
				dst[i] = x
			}
		}
		return bad>>63 == 0
	}
	if f, m := src.f64, len(g); f != nil && w >= 2 && w <= 4 {
		// A row at a time, its components from w columns: the rows are
		// written once, in order, where a column at a time writes each
		// cache line of dst w times (1.7 times as fast at w = 3).
		col := func(c int) []float64 { return f[c*n+q0 : c*n+q0+m] }
		c0, c1 := col(0), col(1)
		switch w {
		case 2:
			for j, i := range g {
				x, y := c0[j], c1[j]
				bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne)
				r := dst[2*i : 2*i+2]
				r[0], r[1] = x, y
			}
		case 3:
			c2 := col(2)
			for j, i := range g {
				x, y, z := c0[j], c1[j], c2[j]
				bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne) | (math.Float64bits(z)&expBits + expOne)
				r := dst[3*i : 3*i+3]
				r[0], r[1], r[2] = x, y, z
			}
		case 4:
			c2, c3 := col(2), col(3)
			for j, i := range g {
				x, y, z, u := c0[j], c1[j], c2[j], c3[j]
				bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne) |
					(math.Float64bits(z)&expBits + expOne) | (math.Float64bits(u)&expBits + expOne)
				r := dst[4*i : 4*i+4]
				r[0], r[1], r[2], r[3] = x, y, z, u
			}
		}
		return bad>>63 == 0
	}
	if f := src.f64; f != nil {
		return scatterTiles(dst, w, f, n, q0, g)
	}
	return scatterTiles(dst, w, src.f32, n, q0, g)
}

// scatterRows is scatterCols for consecutive trajectories g (g[j] =
// g[0]+j): their rows are one run of dst, written in order without
// reading g (in float64, up to 4 components; wider rows and float32 go
// through scatterCols).
func scatterRows(dst []float64, w int, src reals, n, q0 int, g []int) (finite bool) {
	f, m := src.f64, len(g)
	if f == nil || w < 1 || w > 4 || m == 0 {
		return scatterCols(dst, w, src, n, q0, g)
	}
	var bad uint64
	d := dst[g[0]*w : (g[0]+m)*w]
	c0 := f[q0 : q0+m]
	col := func(c int) []float64 { return f[c*n+q0 : c*n+q0+len(c0)] }
	switch w {
	case 1:
		d = d[:len(c0)]
		for j, x := range c0 {
			bad |= math.Float64bits(x)&expBits + expOne
			d[j] = x
		}
	case 2:
		c1 := col(1)
		for j := range c0 {
			x, y := c0[j], c1[j]
			bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne)
			r := d[2*j : 2*j+2 : 2*j+2]
			r[0], r[1] = x, y
		}
	case 3:
		c1, c2 := col(1), col(2)
		for j := range c0 {
			x, y, z := c0[j], c1[j], c2[j]
			bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne) | (math.Float64bits(z)&expBits + expOne)
			r := d[3*j : 3*j+3 : 3*j+3]
			r[0], r[1], r[2] = x, y, z
		}
	case 4:
		c1, c2, c3 := col(1), col(2), col(3)
		for j := range c0 {
			x, y, z, u := c0[j], c1[j], c2[j], c3[j]
			bad |= (math.Float64bits(x)&expBits + expOne) | (math.Float64bits(y)&expBits + expOne) |
				(math.Float64bits(z)&expBits + expOne) | (math.Float64bits(u)&expBits + expOne)
			r := d[4*j : 4*j+4 : 4*j+4]
			r[0], r[1], r[2], r[3] = x, y, z, u
		}
	}
	return bad>>63 == 0
}

// copyOut copies src's values from at on to dst (a row-major array of
// the device, Config.RowMajor, to the rows of a result) and reports
// whether every value is finite (copyFinite64).
func copyOut(dst []float64, src reals, at int) (finite bool) {
	if src.f64 != nil {
		return copyFinite64(dst, src.f64[at:at+len(dst)])
	}
	var bad uint64
	for j := range dst {
		x := src.get(at + j)
		bad |= math.Float64bits(x)&expBits + expOne
		dst[j] = x
	}
	return bad>>63 == 0
}

// scatterTile is the width of scatterTiles' strips: 64 columns, whose
// source lines (64 of them, each read for 8 trajectories in turn) and the
// destination's 512-byte runs stay in the first-level cache.
const scatterTile = 64

// scatterTiles is scatterCols for rows of any width w: a transpose in
// strips of scatterTile columns (scatterSaveCols over all of them). A
// column at a time (the old way) wrote each value into another row, 8·w
// bytes from the last, touching a new cache line, and at w ≳ 512 a new
// page, per value: 1,000 save times of Kepler's four components at n =
// 4096 (131 MB) scattered at 0.6 GB/s.
func scatterTiles[T float32 | float64](dst []float64, w int, f []T, n, q0 int, g []int) (finite bool) {
	return scatterSaveCols(dst, w, f, n, q0, g, 0, w)
}

// overwrite returns s's storage with length n, uncleared, where it is
// large enough (else a new slice): for the result arrays that every run
// writes whole (scatter writes every launched trajectory's row, and every
// trajectory is launched), so clearing them first would only cost a pass
// over tens of megabytes per call.
func overwrite[T any](s []T, n int) []T {
	e, _ := buf.Extend(s[:0], n)
	return e
}
