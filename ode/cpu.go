package ode

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/buf"
	"github.com/gradsolve-go/gradsolve/internal/par"
	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The CPU engine runs whole solves per worker: each worker takes a chunk
// of consecutive trajectories and runs the complete adaptive loop on it
// (trial step, controller, commit and compaction of its finished lanes,
// its own part of the mesh), then, for a gradient, that chunk's loss and
// reverse sweep while its states are still in cache. Chunks are handed out
// dynamically, so uneven trajectories balance; there is no barrier across
// the ensemble. Every program runs over a chunk as one block of the CPU
// executor on the worker's goroutine.
//
// Results are bitwise identical for any number of workers and any chunk
// size: every per-trajectory computation is independent of its
// neighbours; the loss is summed over trajectories in index order; a
// shared gradient is summed in tiles of scan.TileSize consecutive
// trajectories, each tile in index order, then over the tiles in order
// (scan.SumTiles), and chunk boundaries fall on multiples of
// scan.TileSize.

func init() { Register(cpuEngine{}) }

type cpuEngine struct{}

func (cpuEngine) Name() string     { return "cpu" }
func (cpuEngine) Available() error { return nil }

// Prepare clones the executors of the plan's programs (built once per
// plan, Plan.cpuMasters, and shared by the Solvers of a cached plan);
// workers clone them in turn.
func (cpuEngine) Prepare(pl *Plan) (Executor, error) {
	m, err := pl.cpuMasters()
	if err != nil {
		return nil, err
	}
	ex := &cpuExec{plan: pl, init: m.init.Clone(0, 0), trial: m.trial.Clone(0, 0), control: m.control.Clone(0, 0)}
	if m.trialDense != nil {
		ex.trialDense = m.trialDense.Clone(0, 0)
	}
	if m.probe != nil {
		ex.probe = m.probe.Clone(0, 0)
	}
	// Save times interpolate from the steps that bracket them (DenseStep,
	// no extra steps), never through Dense.
	ex.step = &scan.Step{Prog: pl.Replay, Ext: pl.DenseStep, Terms: pl.DenseTerms, D: pl.Dim, P: pl.Params, S: pl.Shared}
	return ex, nil
}

// cpuPrepared holds the CPU engine's preparation of a plan's programs
// (tape.NewExec, most of a Prepare's cost), built once per plan: the
// executors of the Solvers that share a cached plan (see planFor) clone
// them.
type cpuPrepared struct {
	once                                    sync.Once
	init, trial, control, trialDense, probe *tape.Exec
	err                                     error
}

// cpuMasters returns the plan's CPU preparation, building it on first use.
func (pl *Plan) cpuMasters() (*cpuPrepared, error) {
	m := &pl.cpu
	m.once.Do(func() {
		set := &tape.ExecSettings{Workers: 1}
		if m.init, m.err = tape.NewExec(pl.Init, set); m.err != nil {
			return
		}
		if m.trial, m.err = tape.NewExec(pl.Trial, set); m.err != nil {
			return
		}
		if m.control, m.err = tape.NewExec(pl.Control, set); m.err != nil {
			return
		}
		if pl.TrialDense != nil {
			if m.trialDense, m.err = tape.NewExec(pl.TrialDense, set); m.err != nil {
				return
			}
		}
		if pl.Probe != nil {
			m.probe, m.err = tape.NewExec(pl.Probe, set)
		}
	})
	return m, m.err
}

// cpuExec is the CPU engine's executor of one plan.
type cpuExec struct {
	plan                 *Plan
	init, trial, control *tape.Exec // masters, cloned by workers
	trialDense           *tape.Exec // master of Plan.TrialDense (nil without)
	probe                *tape.Exec // master of Plan.Probe (nil without)

	stepOnce sync.Once
	step     *scan.Step // master of the replay step and its reverse

	events  eventExecs // masters of the event programs (Plan.Events)
	stepErr error

	losses     sync.Map // LossPlan.Hash (+ ".grad", ".rest", ".foldrest", ".foldend") → *tape.Exec, masters of the loss programs
	fusedForms sync.Map // LossPlan.Hash → *fusedLoss, the loss's fused form (nil: none; see lossfuse.go)

	mu    sync.Mutex
	free  []*cpuWorker
	terms []float64 // an [N] loss-term buffer kept between runs (under mu)
}

// chunkSize returns the chunk size of job: Job.ChunkSize, or else two
// chunks per worker, so that uneven trajectories balance, within limits:
// no more than the trial step's working-set block size (at most
// maxChunk) and, while every worker still
// gets a chunk, no fewer lanes than make a trial step's fixed costs small
// next to its work (chunkWork values of the trial program per chunk). The
// result is a multiple of scan.TileSize.
func (ex *cpuExec) chunkSize(j *Job, workers int) int {
	tile := scan.TileSize
	round := func(c int) int { return max(tile, (c+tile-1)/tile*tile) }
	if j.ChunkSize > 0 {
		return round(min(j.ChunkSize, j.N))
	}
	n := j.N
	perTwo := (n + 2*workers - 1) / (2 * workers)
	perOne := (n + workers - 1) / workers
	floor := chunkWork / max(1, ex.trial.Program().Len())
	c := max(perTwo, min(floor, perOne))
	return round(min(c, ex.trial.BlockSize(), maxChunk))
}

// Chunk sizing of the CPU engine (see chunkSize), measured on the Lorenz
// and neural protocols: below about 128 lanes a Lorenz trial step's fixed
// costs show (1.5× at 64 lanes); chunks of 256 beat 512 (the buffers stay
// in the core's cache, and a chunk's trajectories finish closer together:
// forward 0.88–0.95× the hand-written loop against 0.97–1.23× at n = 2048
// on the 2-core machine).
const (
	chunkWork = 1 << 14
	maxChunk  = 256
)

// stepMaster returns the master replay Step, building its executors.
func (ex *cpuExec) stepMaster() (*scan.Step, error) {
	ex.stepOnce.Do(func() {
		pl := ex.plan
		rev, err := pl.Reverse()
		if err != nil {
			ex.stepErr = err
			return
		}
		ex.step.Rev = rev
		if pl.DenseStep != nil {
			if ex.step.ExtRev, err = pl.DenseStepReverse(); err != nil {
				ex.stepErr = err
				return
			}
		}
		ex.stepErr = ex.step.Prepare(&tape.ExecSettings{Workers: 1})
	})
	return ex.step, ex.stepErr
}

// lossMaster returns the master executor of a loss program, by key.
func (ex *cpuExec) lossMaster(key string, prog *tape.Program) (*tape.Exec, error) {
	if e, ok := ex.losses.Load(key); ok {
		return e.(*tape.Exec), nil
	}
	e, err := tape.NewExec(prog, &tape.ExecSettings{Workers: 1, CheckFinite: true})
	if err != nil {
		return nil, err
	}
	got, _ := ex.losses.LoadOrStore(key, e)
	return got.(*tape.Exec), nil
}

// run is the state of one Run: the job, its chunking, and the outputs the
// workers fill.
type cpuRun struct {
	ex      *cpuExec
	job     *Job
	ctx     context.Context
	chunk   int
	nchunks int
	res     *Result

	keepMesh, keepStates bool
	// probing: the record runs the stability probe (Job.CheckStability,
	// Plan.Probe).
	probing bool
	// recordSaves: the record reads the save times from its accepted
	// steps' continuous extension (TrialDense) and writes them to Ys.
	recordSaves bool
	// soaSaves: the record also writes the saved states of each chunk
	// by save time, [K·d][width], as the loss program reads them (a
	// gradient without events or Method Auto's switch).
	soaSaves bool
	// fused: the loss's fused form (lossfuse.go), nil for the old path.
	fused *fusedLoss
	// The job's shared inputs as length-1 columns, made once per run:
	// Shared, then rtol, atol[d] and maxsteps (see sharedInputs).
	shared, rtol, atol, maxSteps [][]float64
	meshMu                       sync.Mutex
	meshH                        []float64 // the mesh being filled, [meshRows][N]
	meshE                        []int32   // its event marks (Mesh.Events), with events
	meshRows                     int
	meshLen                      []int     // storage for the mesh's Len (Job.Reuse)
	lossTerms                    []float64 // [N] per-trajectory loss terms
	tiles                        []float64 // [ntiles][S] shared-gradient tile sums
	lastH                        []float64 // [N] last step size tried by the failed trajectories (nil: none failed; under lastYMu)
	rejected                     []int     // [N] the failed trajectories' rejected steps where Job.Omit leaves out Stats.Rejected (nil: none failed; under lastYMu)
	stateBudget                  int64     // bytes of stored states a worker may hold
	budgetShare                  int       // the workers Settings.MemoryLimit is shared by (stateBudget = MemoryLimit / budgetShare)

	done   atomic.Int64
	failed atomic.Bool
	// anyFailed is set where a trajectory failed in a run with
	// Job.RecordAll: the chunks go on recording (failed stops them
	// otherwise) but compute no loss or gradient, which is not used.
	anyFailed   atomic.Bool
	recordNanos atomic.Int64
	storedPeak  atomic.Int64
	errMu       sync.Mutex
	err         error
	lastYMu     sync.Mutex // guards res.LastY
}

func (r *cpuRun) fail(err error) {
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
}

// Run performs job.
func (ex *cpuExec) Run(ctx context.Context, j *Job) (*Result, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := j.Mesh.Host(); err != nil { // the CPU engine reads steps on the host
		return nil, err
	}
	pl := ex.plan
	if pl.Events != nil && j.Mesh != nil && len(j.Mesh.Events) < j.Mesh.Rows*j.Mesh.N {
		return nil, badInput(fmt.Errorf("ode: a mesh replayed with events must mark its event steps (Mesh.Events): record it with these events on the \"cpu\" engine"))
	}
	n, d := j.N, pl.Dim
	workers := j.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	r := &cpuRun{ex: ex, job: j, ctx: ctx, res: &Result{}}
	r.shared, r.rtol, r.atol, r.maxSteps = sharedInputs(j)
	r.chunk = ex.chunkSize(j, workers)
	r.nchunks = (n + r.chunk - 1) / r.chunk
	workers = par.Workers(workers, r.nchunks)
	res := r.res
	recording := j.Mesh == nil
	r.recordSaves = recording && len(j.SaveAt) > 0 && ex.trialDense != nil
	r.soaSaves = r.recordSaves && j.Op == OpGrad && pl.Events == nil && j.stiff == nil
	r.fused = ex.fused(r)
	r.keepMesh = recording && (j.Op != OpSolve || len(j.SaveAt) > 0 && !r.recordSaves)
	r.keepStates = recording && j.Op == OpGrad
	r.probing = recording && j.CheckStability && ex.probe != nil && (j.Op == OpGrad || j.Op == OpRecord || j.Op == OpLoss)
	limit := j.MemoryLimit
	if limit <= 0 {
		limit = scan.DefaultMemoryLimit
	}
	r.stateBudget = max(1, limit/int64(workers)) // 0 would mean scan's default
	r.budgetShare = workers
	old := j.Reuse
	if old == nil {
		old = &Result{}
	}
	if recording {
		res.Status = buf.Make(old.Status, n)
		for i := range res.Status {
			res.Status[i] = NotRun
		}
		res.T = buf.Make(old.T, n)
		res.Stiff = buf.Make(old.Stiff, n)
		if j.stiff != nil {
			res.Switch, res.switched = make([]int, n), make([]bool, n)
		}
		res.Stats = Stats{Accepted: buf.Make(old.Stats.Accepted, n)}
		if j.Omit&OmitStats == 0 { // else the failures' counts only (cpuRun.rejected)
			res.Stats.Rejected, res.Stats.FieldEvals = buf.Make(old.Stats.Rejected, n), buf.Make(old.Stats.FieldEvals, n)
		}
		if r.keepMesh && old.Mesh != nil && n > 0 {
			// The mesh grows into the old one's storage first.
			r.meshH = buf.Make(old.Mesh.H, cap(old.Mesh.H)) // rows past a trajectory's end read 0
			r.meshRows = cap(old.Mesh.H) / n
			r.meshLen = old.Mesh.Len
		}
	}
	if j.Omit&OmitStates == 0 || pl.Events != nil { // the events' loss reads the final states from Y
		res.Y = buf.Make(old.Y, n*d)
	}
	// reusedYs: the saved states go into a reused Ys that is not cleared
	// first (see below).
	reusedYs := false
	if len(j.SaveAt) > 0 { // the loss reads them here (computed under Omit too)
		size := n * len(j.SaveAt) * d
		if r.recordSaves && cap(old.Ys) >= size {
			// A record that interpolates its saves writes every saved
			// state of the trajectories it runs (a failed one's as
			// NaN), so a reused Ys is not cleared first, a serial pass
			// over N·K·Dim values less (1,000 Kepler save times: 131
			// MB); the trajectories a failure leaves NotRun are cleared
			// after the run. Other runs clear it, and a new Ys is
			// allocated as before: leaving a new one uncleared was
			// measured to make allocating calls slower (the garbage
			// collection it starts then ran 60–170 ms instead of 1–20).
			res.Ys, _ = buf.Extend(old.Ys[:0], size)
			reusedYs = true
		} else {
			res.Ys = buf.Make(old.Ys, size)
		}
	}
	if j.Op == OpGrad || j.Op == OpLoss {
		r.lossTerms = ex.takeTerms(n)
		defer ex.giveTerms(r.lossTerms)
	}
	if pl.Events != nil {
		res.Events = buf.Make(old.Events, n)
		if !recording {
			res.T = buf.Make(old.T, n) // a terminal event's time, else T1
		}
	}
	if j.Op == OpGrad {
		res.GradY0 = buf.Make(old.GradY0, n*d)
		res.GradP = buf.Make(old.GradP, n*pl.Params)
		r.tiles = make([]float64, (n+scan.TileSize-1)/scan.TileSize*pl.Shared)
	}

	if recording && j.Op == OpGrad && pl.Events == nil && r.nchunks > 0 {
		// The replay step's master (stepMaster: building its programs'
		// executors, a second for the Brusselator's Rodas5P on 2 cores)
		// is built while the workers record, not by the first to finish
		// its record while the others wait for it.
		go ex.stepMaster()
	}
	start := time.Now()
	ws := ex.workers(workers)
	par.Run(r.nchunks, workers, func(w, c int) {
		if r.failed.Load() {
			return
		}
		if err := ctx.Err(); err != nil {
			r.fail(err)
			r.failed.Store(true)
			return
		}
		if err := ws[w].runChunk(r, c); err != nil {
			r.fail(err)
			r.failed.Store(true)
		}
	})
	ex.release(ws)
	if r.err != nil {
		return nil, r.err
	}
	if K := len(j.SaveAt); reusedYs && r.failed.Load() {
		// Trajectories left NotRun (another failed first): their saved
		// states read zero, as in a cleared Ys.
		for i, st := range res.Status {
			if st == NotRun {
				clear(res.Ys[i*K*d : (i+1)*K*d])
			}
		}
	}
	wall := time.Since(start)

	if recording {
		res.Stats.Wall = wall
		res.LastH = r.lastH
		if res.Stats.Rejected == nil {
			res.Stats.Rejected = r.rejected // the failures' (Job.Omit)
		}
		if res.Switch != nil && !anySwitched(res.Switch, res.Stats.Accepted) {
			res.Switch = nil // a mesh of one method
		}
	} else if j.Mesh.Switch != nil {
		res.Switch = j.Mesh.Switch
	}
	if r.keepMesh {
		res.Mesh = r.assembleMesh()
	}
	if r.lossTerms != nil {
		sum := 0.0 // in a local: a field's load and store per term triple the time
		for _, v := range r.lossTerms {
			sum += v
		}
		res.Loss = sum * j.Loss.Scale
	}
	if j.Op == OpGrad {
		res.GradS = scan.SumTiles(nil, r.tiles, pl.Shared)
		res.StoredBytes = r.storedPeak.Load()
		if recording {
			res.RecordTime = time.Duration(r.recordNanos.Load() / int64(workers))
			res.GradTime = max(0, wall-res.RecordTime)
		} else {
			res.GradTime = wall
		}
	}
	return res, nil
}

// takeTerms returns a cleared buffer of n loss terms, the one a run gave
// back where it is large enough (a call of millions of trajectories
// would otherwise allocate tens of megabytes).
func (ex *cpuExec) takeTerms(n int) []float64 {
	ex.mu.Lock()
	b := ex.terms
	if cap(b) >= n {
		ex.terms = nil
	}
	ex.mu.Unlock()
	return buf.Make(b, n)
}

// giveTerms keeps b for a later run (the larger buffer, if one is kept).
func (ex *cpuExec) giveTerms(b []float64) {
	ex.mu.Lock()
	if cap(b) > cap(ex.terms) {
		ex.terms = b
	}
	ex.mu.Unlock()
}

// storeMesh copies the mesh rows of the chunk of trajectories lo…
// lo+width-1 (h: step s of the chunk's trajectory i at h[s*width+i]; lens:
// their step counts) into the run's step-major mesh. The mesh is allocated
// once, with twice the rows of the first chunk to finish (chunks are
// handed out in order and neighbours take similar steps), and grown by
// half when a chunk needs more; it is returned as it is, so the mesh is
// held about once.
func (r *cpuRun) storeMesh(lo, width int, h []float64, lens []int, marks [][]evMark) {
	n := r.job.N
	rows := 0
	for _, l := range lens {
		rows = max(rows, l)
	}
	r.meshMu.Lock()
	defer r.meshMu.Unlock()
	events := r.ex.plan.Events != nil
	if rows > r.meshRows {
		grown := max(rows, 2*rows+8)
		if r.meshRows > 0 {
			grown = max(rows, r.meshRows+r.meshRows/2)
		}
		g := make([]float64, grown*n)
		copy(g, r.meshH[:r.meshRows*n])
		if events && r.meshE != nil {
			e := make([]int32, grown*n)
			copy(e, r.meshE)
			r.meshE = e
		}
		r.meshH, r.meshRows = g, grown
	}
	if events && len(r.meshE) < r.meshRows*n {
		r.meshE = make([]int32, r.meshRows*n) // the first chunk, in reused mesh storage
	}
	for i, l := range lens {
		for s := 0; s < l; s++ {
			r.meshH[s*n+lo+i] = h[s*width+i]
		}
	}
	if events {
		for i, ms := range marks[:width] {
			for _, mk := range ms {
				r.meshE[mk.s*n+lo+i] = int32(mk.e + 1)
			}
		}
	}
}

// assembleMesh returns the run's mesh.
func (r *cpuRun) assembleMesh() *Mesh {
	m := RecordedMesh(r.job, r.res, r.meshLen)
	m.H = r.meshH[: m.Rows*m.N : m.Rows*m.N]
	if r.ex.plan.Events != nil {
		m.Events = r.meshE[: m.Rows*m.N : m.Rows*m.N]
		if m.Events == nil {
			m.Events = []int32{}
		}
	}
	return m
}

// workers takes k workspaces from the pool.
func (ex *cpuExec) workers(k int) []*cpuWorker {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ws := make([]*cpuWorker, k)
	for i := range ws {
		if l := len(ex.free); l > 0 {
			ws[i], ex.free = ex.free[l-1], ex.free[:l-1]
		} else {
			ws[i] = &cpuWorker{ex: ex}
		}
	}
	return ws
}

func (ex *cpuExec) release(ws []*cpuWorker) {
	ex.mu.Lock()
	ex.free = append(ex.free, ws...)
	ex.mu.Unlock()
}

// cpuWorker is one worker's workspace: executor clones for its chunk size
// and the lanes of the chunk it is running, structure of arrays.
type cpuWorker struct {
	ex   *cpuExec
	cap  int // chunk size the clones and lanes are sized for
	init *tape.Exec
	tri  *tape.Exec
	trd  *tape.Exec // TrialDense
	ctl  *tape.Exec
	prb  *tape.Exec // Plan.Probe (nil without)
	step *scan.Step
	loss map[string]*tape.Exec

	// Lanes: the active trajectories of the chunk are lanes 0…m-1.
	idx                 []int
	st, st2             [NumState][]float64 // controller state in and out
	hTried              []float64           // the step each lane last tried
	t1, hrho, acc, stat []float64
	y, yn, e, k1, ko, p [][]float64
	wc                  [][]float64 // TrialDense's coefficients [Terms·Dim][cap]
	cur                 []int       // each lane's next save time (Job.SaveAt)
	lane                []float64   // one lane's state and coefficients
	saveEnd             []int       // writeSaves: each lane's end of its save times on the step
	saveRows            []float64   // writeSaves: the lanes' states and coefficients, a row each
	in, out             [][]float64
	hbuf, sbuf          []float64 // chunk's mesh rows [rows][cap] and states [rows][1+d][cap]
	rows                int
	storing             bool
	t0s                 []float64
	endT, endY          []float64
	scr                 [numScratch][]float64 // see scratch
	lo                  int                   // the chunk's first trajectory
	sh                  [][]float64           // the job's shared inputs (cpuRun.shared)
	ev                  *eventWork            // events (Plan.Events), sized for evCap lanes
	evCap               int
	taps                *scan.Taps     // the chunk's re-stepped save times (SaveStep), reused
	saves               scan.Saves     // the chunk's interpolated save times
	soa                 []float64      // the chunk's saved states by save time (cpuRun.soaSaves), or nil
	soaLo, soaS         int            // its first trajectory and the distance between its rows (rowStride of the chunk's width)
	soaLim              float64        // with a fused loss (cpuRun.fused), the largest |save| whose cotangent is finite; else 0
	soaOver             bool           // a save of the chunk is past soaLim, or NaN, or folded out of order: its loss runs the old path
	foldOnly            bool           // the chunk's loss is folded and its saves not copied (soa nil; fusedLoss.foldOnly)
	folding             bool           // the chunk's loss is folded as its saves are written (fusedLoss.squares)
	fold                []float64      // then each lane's loss so far
	foldK               []int          // and its next save time to fold
	endIn               [][]float64    // the inputs of the fold's end (foldEnd)
	resid               *fusedLoss     // a data loss's fused form (fusedLoss.data): soa holds the saves' residuals, else nil
	residData           []float64      // then the loss's data, [N×DataDim] (LossPlan.Data)
	residDD             int            // and its DataDim
	residBuf            []float64      // and soaPut's residuals
	grad                *scan.Gradient // the last chunk's, reused
	sweep               *scan.Sweep    // the last chunk's forward sweep, whose checkpoints the next reuses

	// Method Auto's switch (Job.stiff): the lanes parked for the stiff
	// plan (see park), and the workspace of the stiff plan's executor.
	parked int
	pk     struct {
		idx, cur    []int
		t, acc, rej []float64
		y           [][]float64
	}
	alt    *cpuWorker
	alt2   *scan.Gradient // the stiff segment's gradient, reused
	altSv  scan.Saves     // the stiff segment's interpolated save times
	altTp  *scan.Taps     // the stiff segment's re-stepped save times
	altRes scan.Result    // the stiff segment's replay, reused
	iscr   [2][]int       // see intScratch

	// The stability probe's lane state (Plan.Probe) and its outputs,
	// swapped after each probe: v and v', rprev and rprev', u and u', and
	// the output stiff.
	pv, pw           [][]float64
	pr, pr2, pu, pu2 []float64
	pst              []float64
}

func cols(w, n int) [][]float64 {
	x := make([][]float64, w)
	for i := range x {
		x[i] = make([]float64, n)
	}
	return x
}

// size prepares the workspace for chunks of c lanes.
func (w *cpuWorker) size(c int) {
	if w.cap == c {
		return
	}
	ex, pl := w.ex, w.ex.plan
	d := pl.Dim
	w.cap = c
	w.init = ex.init.Clone(c, 1)
	w.tri = ex.trial.Clone(c, 1)
	w.ctl = ex.control.Clone(c, 1)
	if ex.probe != nil {
		w.prb = ex.probe.Clone(c, 1)
		w.pv, w.pw = cols(d, c), cols(d, c)
		w.pr, w.pr2, w.pu, w.pu2, w.pst = make([]float64, c), make([]float64, c), make([]float64, c), make([]float64, c), make([]float64, c)
	}
	if ex.trialDense != nil {
		w.trd = ex.trialDense.Clone(c, 1)
		w.wc = cols(pl.DenseTerms*d, c)
		w.lane = make([]float64, (1+pl.DenseTerms)*d)
	}
	w.cur = make([]int, c)
	w.step, w.loss = nil, nil
	w.idx = make([]int, c)
	for k := range w.st {
		w.st[k] = make([]float64, c)
		w.st2[k] = make([]float64, c)
	}
	w.t1, w.hrho, w.acc, w.stat = make([]float64, c), make([]float64, c), make([]float64, c), make([]float64, c)
	w.hTried = make([]float64, c)
	w.y, w.yn, w.e, w.k1, w.ko = cols(d, c), cols(d, c), cols(d, c), cols(d, c), cols(d, c)
	w.p = cols(pl.Params, c)
	w.t0s = make([]float64, c)
	w.endT, w.endY = make([]float64, c), make([]float64, d*c)
	w.pk.idx, w.pk.cur = make([]int, c), make([]int, c)
	w.pk.t, w.pk.acc, w.pk.rej = make([]float64, c), make([]float64, c), make([]float64, c)
	w.pk.y = cols(d, c)
}

// runChunk runs chunk c of the job.
func (w *cpuWorker) runChunk(r *cpuRun, c int) error {
	j := r.job
	w.size(r.chunk)
	lo := c * r.chunk
	hi := min(lo+r.chunk, j.N)
	w.soa, w.resid, w.foldOnly = nil, nil, false
	if j.Mesh == nil {
		t := time.Now()
		ok, err := w.record(r, c, lo, hi)
		if err != nil {
			return err
		}
		if j.Op == OpGrad {
			r.recordNanos.Add(int64(time.Since(t)))
		}
		switch {
		case j.Op == OpRecord, j.Op == OpSolve && (len(j.SaveAt) == 0 || r.recordSaves):
			// The record wrote the saved states (NaN for failed
			// trajectories).
		case j.Op == OpSolve:
			// Saved states: replay the trajectories that finished; failed
			// ones keep NaN saved states.
			lens := append([]int(nil), r.res.Stats.Accepted[lo:hi]...)
			for i := range lens {
				if st := r.res.Status[lo+i]; st != OK && st != Stiff {
					lens[i] = 0
				}
			}
			if err := w.replay(r, lo, hi, w.hbuf, hi-lo, lens, switchOf(r.res.Switch, lo, hi)); err != nil {
				return err
			}
			K, d := len(j.SaveAt), w.ex.plan.Dim
			for i := lo; i < hi; i++ {
				if st := r.res.Status[i]; st != OK && st != Stiff {
					for x := i * K * d; x < (i+1)*K*d; x++ {
						r.res.Ys[x] = math.NaN()
					}
				}
			}
		case !ok && j.RecordAll:
			// A failed trajectory where the caller wants them all
			// (GradPartial): the other chunks record on.
			r.anyFailed.Store(true)
		case !ok:
			// A failed (or, with StopOnStiff, stiff) trajectory: no loss,
			// no gradient (Grad reports it).
			r.failed.Store(j.Op == OpGrad || j.Op == OpLoss)
		case j.RecordAll && r.anyFailed.Load():
			// Another chunk failed: this run's gradient is not used (its
			// caller runs again on the trajectories that did not fail).
		case w.ex.plan.Events != nil:
			if err := w.eventGrad(r, lo, hi); err != nil {
				return err
			}
		default:
			if err := w.replay(r, lo, hi, w.hbuf, hi-lo, r.res.Stats.Accepted[lo:hi], switchOf(r.res.Switch, lo, hi)); err != nil {
				return err
			}
		}
	} else if w.ex.plan.Events != nil {
		if err := w.eventReplay(r, lo, hi); err != nil {
			return err
		}
		if j.Op == OpLoss || j.Op == OpGrad {
			if err := w.eventGrad(r, lo, hi); err != nil {
				return err
			}
		}
	} else {
		m := j.Mesh
		if err := w.replay(r, lo, hi, m.H[lo:], m.N, m.Len[lo:hi], switchOf(m.Switch, lo, hi)); err != nil {
			return err
		}
	}
	if j.Progress != nil {
		j.Progress(int(r.done.Add(int64(hi-lo))), j.N)
	}
	return nil
}

// switchOf returns sw[lo:hi], or nil if sw is nil.
func switchOf(sw []int, lo, hi int) []int {
	if sw == nil {
		return nil
	}
	return sw[lo:hi]
}

// anySwitched reports whether a trajectory switched methods: sw[i] <
// lens[i] (see Mesh.Switch).
func anySwitched(sw, lens []int) bool {
	for i, s := range sw {
		if s < lens[i] {
			return true
		}
	}
	return false
}
