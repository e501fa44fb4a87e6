package cuda

import (
	"context"
	"errors"
	"fmt"
	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/scan"
)

// devicesEnv names the environment variable that lists the GPUs of the
// engine "cuda-multi" (and of every MultiEngine made without ordinals):
// comma-separated ordinals, as "0,2".
const devicesEnv = "GRADSOLVE_CUDA_DEVICES"

// The engine "cuda-multi" runs in float64 on every visible GPU, or on
// those $GRADSOLVE_CUDA_DEVICES names. It is registered after "cuda", so
// "auto" keeps choosing the one-GPU engine; name "cuda-multi" in
// ode.Settings.Engine to use several.
func init() {
	ode.Register(NewMultiEngine("cuda-multi", nil, Float64))
}

// MultiEngine is an ode.Engine that runs every operation over several
// GPUs of one host: it splits the ensemble into contiguous shards, one per
// GPU, runs each shard as the one-GPU engine would (one goroutine per GPU,
// each Device with its own OS thread and context; shards that do not fit
// in a GPU's memory run in chunks), and gathers the per-trajectory results
// in order into one ode.Result.
//
// Shard boundaries fall on multiples of scan.TileSize, and the shards are
// sized in proportion to each GPU's speed: evenly on the first operation
// of a plan, then by the time per trajectory each GPU took in the
// previous operation.
//
// Results do not depend on the number of GPUs or on the split: every
// trajectory's results (states, mesh, statuses, counts, dL/dy0, dL/dp) are
// computed by one thread (one warp in lanes mode, for fields made of
// network layers), whatever GPU it is on; the loss is the sum of the terms
// in index order; the gradient kernels sum shared-parameter contributions
// per tile of scan.TileSize trajectories in a fixed order (a butterfly
// over the tile's threads; in lanes mode one warp runs the tile's
// trajectories in turn) and the host adds the tiles in index order, as
// scan.SumTiles does. The layout depends on the plan only, never on a
// shard's size. By construction the bits are the same on one GPU as
// on eight, as long as the GPUs are of one architecture (each compiles its
// own kernels); the tests check it on fake devices (host backends running
// the same kernels) and, where there are GPUs, against GPU 0 alone. They
// are not the bits of the one-GPU engine "cuda", whose
// shared-gradient sums are reduced with atomics in no fixed order, nor
// the CPU engine's (a tile is summed in another order, and the device's
// libm differs in the last bits).
//
// The tile sums cost device memory and transfers: ceil(n/8)·2·Shared
// values per launch of n trajectories (2.4 KB per trajectory for the
// 1,218 weights of a 2-32-32-2 MLP in float64), where the one-GPU engine
// reduces to one copy per block in shared memory.
type MultiEngine struct {
	name     string
	ordinals []int
	prec     Precision
	tuningSlot

	mu   sync.Mutex
	devs []multiDevice // opened on first use
	err  error
}

// multiDevice is one device of a MultiEngine.
type multiDevice struct {
	label string // "GPU 2", for errors
	be    backend
}

// NewMultiEngine returns an engine called name that runs in precision
// prec on the GPUs ordinals (in that order: the first gets the first
// shard). With ordinals nil it uses those $GRADSOLVE_CUDA_DEVICES lists,
// else every visible GPU, read when the engine is first used. Register it
// with ode.Register to make it available to ode.Settings.Engine. It opens
// nothing until it is used.
func NewMultiEngine(name string, ordinals []int, prec Precision) *MultiEngine {
	return &MultiEngine{name: name, ordinals: append([]int(nil), ordinals...), prec: prec}
}

// newMultiEngineOn returns a MultiEngine on the given backends (tests:
// host backends as devices).
func newMultiEngineOn(name string, prec Precision, bes []backend) *MultiEngine {
	e := &MultiEngine{name: name, prec: prec}
	for k, be := range bes {
		e.devs = append(e.devs, multiDevice{label: fmt.Sprintf("device %d", k), be: be})
	}
	return e
}

// Name returns the engine's name.
func (e *MultiEngine) Name() string { return e.name }

// SupportsEvents reports that the engine runs problems with events
// (ode.Settings.Events), in either precision, as Engine.SupportsEvents:
// each shard's trajectories in the thread layout; the per-trajectory
// results (event counts, end times, statuses, the mesh's event marks) are
// gathered in order, and the results are the same bits for any number of
// GPUs and any split, as every operation's.
func (e *MultiEngine) SupportsEvents() bool { return true }

// Devices returns the ordinals of the GPUs the engine runs on: those given
// to NewMultiEngine, else those $GRADSOLVE_CUDA_DEVICES lists, else 0 to
// DeviceCount()−1. It returns an error if the list is malformed, or
// (wrapping ErrNoGPU) if there is no driver or no GPU.
func (e *MultiEngine) Devices() ([]int, error) {
	if len(e.ordinals) > 0 {
		return e.ordinals, nil
	}
	if s := os.Getenv(devicesEnv); s != "" {
		return parseDevices(s)
	}
	n, err := driver.DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: %w: no device", driver.ErrNoGPU)
	}
	all := make([]int, n)
	for k := range all {
		all[k] = k
	}
	return all, nil
}

// parseDevices parses a list of GPU ordinals, as "0,2" (spaces allowed).
// It returns an error for an empty list, an entry that is not a
// non-negative integer, or an ordinal listed twice.
func parseDevices(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 0 {
			return nil, fmt.Errorf("cuda: %s=%q: %q is not a GPU ordinal", devicesEnv, s, strings.TrimSpace(f))
		}
		if seen[k] {
			return nil, fmt.Errorf("cuda: %s=%q lists GPU %d twice", devicesEnv, s, k)
		}
		seen[k] = true
		out = append(out, k)
	}
	return out, nil
}

// Available returns nil if the engine's GPUs and NVRTC are present, else
// an error (wrapping ErrNoGPU or ErrNoNVRTC where they are missing). It
// loads the driver and NVRTC but opens no device.
func (e *MultiEngine) Available() error {
	e.mu.Lock()
	opened := e.devs != nil
	e.mu.Unlock()
	if opened {
		return nil
	}
	ords, err := e.Devices()
	if err != nil {
		return err
	}
	n, err := driver.DeviceCount()
	if err != nil {
		return err
	}
	for _, k := range ords {
		if k >= n {
			return fmt.Errorf("cuda: %w: device %d requested, %d present", driver.ErrNoGPU, k, n)
		}
	}
	err = driver.LoadNVRTC()
	return err
}

// devices opens the engine's GPUs on first use.
func (e *MultiEngine) devices() ([]multiDevice, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.devs != nil || e.err != nil {
		return e.devs, e.err
	}
	if e.err = e.availableLocked(); e.err != nil {
		return nil, e.err
	}
	ords, err := e.Devices()
	if err != nil {
		e.err = err
		return nil, err
	}
	devs := make([]multiDevice, len(ords))
	for k, o := range ords {
		d, err := driver.Open(o)
		if err != nil {
			for _, opened := range devs[:k] {
				opened.be.(*gpuBackend).dev.Close()
			}
			e.err = err
			return nil, err
		}
		devs[k] = multiDevice{label: fmt.Sprintf("GPU %d", o), be: newGPUBackend(d)}
	}
	e.devs = devs
	return devs, nil
}

func (e *MultiEngine) availableLocked() error {
	if err := driver.LoadNVRTC(); err != nil {
		return err
	}
	_, err := driver.DeviceCount()
	return err
}

// Prepare opens the GPUs (on first use) and returns the executor of the
// plan: one one-GPU executor per device, whose kernels are compiled on
// first use of each kind of operation (on the first device first; the
// others then find the image in the disk cache).
func (e *MultiEngine) Prepare(pl *ode.Plan) (ode.Executor, error) {
	tun := e.tuningOf()
	if err := tun.check(); err != nil {
		return nil, err
	}
	devs, err := e.devices()
	if err != nil {
		return nil, err
	}
	m := &multiExecutor{bal: newBalancer(len(devs))}
	for _, d := range devs {
		ex := newExecutor(d.be, pl, e.prec, fmt.Sprintf("%s (%s)", e.name, d.label), tun)
		ex.tiles = true
		m.exs = append(m.exs, ex)
	}
	return m, nil
}

// multiExecutor runs the operations of one plan over several devices.
type multiExecutor struct {
	exs []*executor // one per device, in shard order
	bal *balancer
}

// shard is one device's part of a Run: trajectories [lo, hi) and, once
// run, its results and the time it took.
type shard struct {
	dev    int
	lo, hi int
	r      *run
	dt     time.Duration
	err    error
}

// StartTimes reports that the shards' executors run per-trajectory start
// times (ode.StartTimesExecutor).
func (m *multiExecutor) StartTimes() bool { return true }

// StopGrads reports that the shards' records of a loss or a gradient
// with ode.Job.StopOnStiff complete the trajectories that end OK, whose
// terms the gathered run adds in index order (ode.StopGradsExecutor).
func (m *multiExecutor) StopGrads() bool { return true }

// Run splits job j over the devices, runs the shards concurrently and
// gathers their results. The first error (in device order) of a device
// cancels the others and is returned.
func (m *multiExecutor) Run(ctx context.Context, j *ode.Job) (*ode.Result, error) {
	if err := j.Mesh.Host(); err != nil { // shards take rows of a host mesh
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	start := time.Now()
	tr := traceOf(ctx)
	bounds := m.bal.split(j.N)
	var shards []*shard
	for k := range m.exs {
		if lo, hi := bounds[k], bounds[k+1]; hi > lo || (j.N == 0 && k == 0) {
			shards = append(shards, &shard{dev: k, lo: lo, hi: hi})
		}
	}
	// Compile on the first device before the others start.
	if _, _, err := m.exs[shards[0].dev].prepare(ctx, j, tr); err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prog := newProgressSum(j.Progress, j.N, len(m.exs))
	var wg sync.WaitGroup
	for _, s := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ex := m.exs[s.dev]
			sj := subJob(j, s.lo, s.hi, prog.of(s.dev))
			if _, _, s.err = ex.prepare(rctx, sj, tr); s.err != nil {
				cancel()
				return
			}
			t0 := time.Now()
			if s.r, s.err = ex.runJob(rctx, sj); s.err != nil {
				cancel()
				return
			}
			s.dt = time.Since(t0)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := firstError(shards); err != nil {
		return nil, err
	}
	for _, s := range shards {
		m.bal.observe(s.dev, s.hi-s.lo, s.dt)
	}
	return gather(j, shards).finish(time.Since(start))
}

// firstError returns the first error of the shards in device order,
// preferring one that is not the cancellation another device's error
// caused.
func firstError(shards []*shard) error {
	var first error
	for _, s := range shards {
		switch {
		case s.err == nil:
		case !errors.Is(s.err, context.Canceled):
			return s.err
		case first == nil:
			first = s.err
		}
	}
	return first
}

// subJob returns the job of trajectories [lo, hi) of j: its arrays are
// views of j's (the mesh to replay is copied, step-major), its progress
// reported through progress.
func subJob(j *ode.Job, lo, hi int, progress func(done, total int)) *ode.Job {
	d, np := j.Plan.Dim, j.Plan.Params
	s := *j
	s.N = hi - lo
	rows := func(x []float64, w int) []float64 {
		if len(x) < hi*w {
			return x
		}
		return x[lo*w : hi*w]
	}
	s.T1 = rows(j.T1, 1)
	if j.T0s != nil {
		s.T0s = rows(j.T0s, 1)
	}
	s.Y0 = rows(j.Y0, d)
	s.P = rows(j.P, np)
	if j.Loss != nil {
		l := *j.Loss
		l.Data = rows(l.Data, l.DataDim)
		s.Loss = &l
	}
	if j.Mesh != nil {
		s.Mesh = subMesh(j.Mesh, lo, hi)
	}
	s.Progress = progress
	s.Reuse = nil       // the shards' results are gathered into new arrays
	s.EndTimes = false  // the gathered result is checked by package ode
	s.KeepGrads = false // the shards' results are gathered on the host
	return &s
}

// subMesh returns the mesh of trajectories [lo, hi) of m: the step sizes
// copied into a step-major [Rows][hi−lo] array of as many rows as the
// longest of them has, the per-trajectory arrays as views.
func subMesh(m *ode.Mesh, lo, hi int) *ode.Mesh {
	n := hi - lo
	s := *m
	s.N = n
	s.Len = m.Len[lo:hi]
	s.Rows = 0
	for _, l := range s.Len {
		s.Rows = max(s.Rows, l)
	}
	s.H = make([]float64, s.Rows*n)
	for q := 0; q < s.Rows; q++ {
		copy(s.H[q*n:(q+1)*n], m.H[q*m.N+lo:q*m.N+hi])
	}
	view := func(x []int) []int {
		if len(x) < hi {
			return x
		}
		return x[lo:hi]
	}
	if m.Events != nil && len(m.Events) >= m.Rows*m.N { // step-major, as H
		s.Events = make([]int32, s.Rows*n)
		for q := 0; q < s.Rows; q++ {
			copy(s.Events[q*n:(q+1)*n], m.Events[q*m.N+lo:q*m.N+hi])
		}
	}
	if len(m.Status) >= hi {
		s.Status = m.Status[lo:hi]
	}
	if len(m.T1) >= hi {
		s.T1 = m.T1[lo:hi]
	}
	if len(m.Stiff) >= hi {
		s.Stiff = m.Stiff[lo:hi]
	}
	s.Stats.Accepted, s.Stats.Rejected, s.Stats.FieldEvals = view(m.Stats.Accepted), view(m.Stats.Rejected), view(m.Stats.FieldEvals)
	return &s
}

// gather assembles the runs of the shards (contiguous, in order, starting
// on multiples of scan.TileSize) into one run of job j, whose finish then
// forms the sums as one device's would: per-trajectory arrays copied into
// place, the recorded meshes merged step-major, the loss terms and the
// shared-gradient tiles concatenated in index order. Stored bytes add up
// (the devices hold them at once).
func gather(j *ode.Job, shards []*shard) *run {
	r0 := shards[0].r
	n := j.N
	g := &run{j: j, v: r0.v, tr: r0.tr, d: r0.d, np: r0.np, ns: r0.ns, k: r0.k, dd: r0.dd, res: &ode.Result{}}
	res := g.res
	res.T = catTimes(j, shards)
	res.Y = catRows(shards, n, g.d, func(r *run) []float64 { return r.res.Y })
	res.Ys = catRows(shards, n, g.k*g.d, func(r *run) []float64 { return r.res.Ys })
	res.Status = catRows(shards, n, 1, func(r *run) []ode.Status { return r.res.Status })
	res.Stiff = catRows(shards, n, 1, func(r *run) []bool { return r.res.Stiff })
	res.Events = catRows(shards, n, 1, func(r *run) []int { return r.res.Events })
	for _, s := range shards { // set where a shard had failures (see scatter)
		if h := s.r.res.LastH; h != nil {
			if res.LastH == nil {
				res.LastH = make([]float64, n)
			}
			copy(res.LastH[s.lo:s.hi], h)
		}
	}
	res.GradY0 = catRows(shards, n, g.d, func(r *run) []float64 { return r.res.GradY0 })
	res.GradP = catRows(shards, n, g.np, func(r *run) []float64 { return r.res.GradP })
	res.Stats.Accepted = catRows(shards, n, 1, func(r *run) []int { return r.res.Stats.Accepted })
	res.Stats.Rejected = catRows(shards, n, 1, func(r *run) []int { return r.res.Stats.Rejected })
	res.Stats.FieldEvals = catRows(shards, n, 1, func(r *run) []int { return r.res.Stats.FieldEvals })
	for _, s := range shards {
		for i, y := range s.r.res.LastY {
			if res.LastY == nil {
				res.LastY = map[int][]float64{}
			}
			res.LastY[s.lo+i] = y
		}
		g.stored += s.r.stored
		for i, row := range s.r.failedRows {
			if g.failedRows == nil {
				g.failedRows = map[int][]float64{}
			}
			g.failedRows[s.lo+i] = row
		}
	}
	g.terms = catRows(shards, n, 1, func(r *run) []float64 { return r.terms })
	if r0.tiles != nil && len(shards) == 1 {
		g.tiles = r0.tiles // as catRows: one shard's arrays are the job's
	} else if r0.tiles != nil {
		w := 2 * g.ns
		g.tiles = make([]float64, numTiles(n)*w)
		for _, s := range shards {
			copy(g.tiles[s.lo/scan.TileSize*w:], s.r.tiles)
		}
	}
	if g.v.MeshOut {
		rows := 0
		for _, a := range res.Stats.Accepted {
			rows = max(rows, a)
		}
		g.meshH = make([]float64, rows*n)
		if g.v.Events {
			g.meshE = make([]int32, rows*n)
		}
		for _, s := range shards {
			m := s.hi - s.lo
			if m == 0 {
				continue
			}
			for q := 0; q < min(rows, len(s.r.meshH)/m); q++ {
				copy(g.meshH[q*n+s.lo:q*n+s.hi], s.r.meshH[q*m:(q+1)*m])
			}
			// The event marks, step-major as the steps (rows past a
			// shard's own read 0, as readEvents leaves them).
			for q := 0; q < min(rows, len(s.r.meshE)/m); q++ {
				copy(g.meshE[q*n+s.lo:q*n+s.hi], s.r.meshE[q*m:(q+1)*m])
			}
		}
	}
	return g
}

// catTimes returns the shards' times reached, [N]: nil where no shard
// has them (a gradient or loss whose trajectories all ended well:
// lazyTimes), else each shard's where it has them and T1 where a shard
// left them out (its trajectories reached their T1).
func catTimes(j *ode.Job, shards []*shard) []float64 {
	if len(shards) == 1 {
		return shards[0].r.res.T
	}
	var out []float64
	for _, s := range shards {
		if t := s.r.res.T; t != nil {
			if out == nil {
				out = make([]float64, j.N)
				copy(out, j.T1) // [N] in a job of package ode's
			}
			copy(out[s.lo:s.hi], t)
		}
	}
	return out
}

// catRows concatenates the per-trajectory arrays (w values per
// trajectory) that get returns of the shards' runs, in order (a shard's
// nil array, as a failure's Stats.Rejected where Job.Omit leaves the
// counts out and another shard had failures, reads zeros); nil if every
// shard's is nil. One shard's array (the shards' results are fresh
// arrays of their own) is the job's, not copied.
func catRows[T any](shards []*shard, n, w int, get func(*run) []T) []T {
	if len(shards) == 1 {
		return get(shards[0].r)
	}
	if !slices.ContainsFunc(shards, func(s *shard) bool { return get(s.r) != nil }) {
		return nil
	}
	out := make([]T, n*w)
	for _, s := range shards {
		copy(out[s.lo*w:s.hi*w], get(s.r))
	}
	return out
}

// balancer sizes the shards of a MultiEngine's executor in proportion to
// the speed of each device: the time per trajectory of its shard in the
// last operation it ran (all devices alike before any is measured; a
// device not yet measured counts as the mean of those that are).
type balancer struct {
	mu  sync.Mutex
	per []float64 // seconds per trajectory; 0 if not measured
}

func newBalancer(devices int) *balancer { return &balancer{per: make([]float64, devices)} }

// observe records that device k ran n trajectories in dt.
func (b *balancer) observe(k, n int, dt time.Duration) {
	if n <= 0 || dt <= 0 {
		return
	}
	b.mu.Lock()
	b.per[k] = dt.Seconds() / float64(n)
	b.mu.Unlock()
}

// weights returns the relative speed of each device.
func (b *balancer) weights() []float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := make([]float64, len(b.per))
	sum, known := 0.0, 0
	for k, p := range b.per {
		if p > 0 {
			w[k] = 1 / p
			sum += w[k]
			known++
		}
	}
	mean := 1.0
	if known > 0 {
		mean = sum / float64(known)
	}
	for k := range w {
		if w[k] == 0 {
			w[k] = mean
		}
	}
	return w
}

// split returns the shard boundaries of n trajectories (see splitShards).
func (b *balancer) split(n int) []int { return splitShards(n, b.weights()) }

// splitShards returns the boundaries of contiguous shards of n
// trajectories in proportion to the weights w (positive): device k takes
// [b[k], b[k+1]), b[0] = 0 and b[len(w)] = n, every boundary but the last
// a multiple of scan.TileSize or n: the multiple nearest to the exact
// proportion.
func splitShards(n int, w []float64) []int {
	b := make([]int, len(w)+1)
	total := 0.0
	for _, x := range w {
		total += x
	}
	acc := 0.0
	for k, x := range w {
		acc += x
		t := int(math.Round(float64(n)*acc/total/scan.TileSize)) * scan.TileSize
		b[k+1] = max(b[k], min(n, t))
	}
	b[len(w)] = n
	return b
}

// progressSum adds up the progress of the devices' shards for a job's
// Progress, serially.
type progressSum struct {
	mu    sync.Mutex
	f     func(done, total int)
	n     int
	total int
	done  []int
}

func newProgressSum(f func(done, total int), n, devices int) *progressSum {
	return &progressSum{f: f, n: n, done: make([]int, devices)}
}

// of returns the Progress of device k's shard (nil if the job has none).
func (p *progressSum) of(k int) func(done, total int) {
	if p.f == nil {
		return nil
	}
	return func(done, _ int) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.total += done - p.done[k]
		p.done[k] = done
		p.f(p.total, p.n)
	}
}
