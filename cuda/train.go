package cuda

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
)

// trainSource is the training kernels' template (train.cuh).
//
//go:embed train.cuh
var trainSource string

// Words of struct gs_targs (train.cuh), in order: the integers, the
// reals, then the pointers (from trainFirstPtr on).
const (
	twN = iota
	twD
	twNP
	twNSh
	twLen
	twFits
	twPer
	twStride
	twNP1
	twNY1
	twNS1
	twCount
	twSeg
	twNCol
	twOStride
	twMode
	twScale
	twLR
	twB1
	twB2
	twEps
	twWD
	twC1
	twC2
	twMu
	twClip
	twStatus // first pointer
	twFlags
	twAcc
	twTerms
	twGP
	twGY0
	twGS
	twPin
	twY0in
	twSh
	twPCols
	twYCols
	twShPos
	twSrc
	twDst
	twX
	twG
	twM0
	twM1
	twPrev
	twNorms
	twPartial
	twSum
	twHyper
	numTrainWords
)

// trainFirstPtr is the first pointer word of gs_targs.
const trainFirstPtr = twStatus

// Training kernel geometry (GS_TB, GS_TCH, GS_TSEG of train.cuh).
const (
	trainBlock = 256
	trainChunk = 2048
	trainSeg   = 64
)

// Counters of the summary (GS_T_* of train.cuh), after its two sums.
const (
	tcFailed = iota
	tcOver
	tcMaxAcc
	tcNonFinite
	numTrainCounters
)

// Words of the trainer's sum block (gs_targs.sum, GS_T_* of train.cuh):
// the summary an evaluation reads back (the loss, Σg², the counters), the
// counters' accumulators, gs_t_sum's ticket, and the update rule's scalars
// a graph's update reads (gs_targs.hyper).
const (
	swSummary = 2 + numTrainCounters
	swAcc     = swSummary // GS_T_ACC
	swTicket  = swAcc + numTrainCounters
	swHyper   = swTicket + 1
	numHyper  = 9 // lr, b1, b2, eps, wd, c1, c2, mu, clip
	numSumW   = swHyper + numHyper
)

// trainKernels are the compiled training kernels of a backend.
type trainKernels struct {
	sum, seg, gy, clip, update, put backendKernel
}

// trainKernelsOf compiles the training kernels on ex's backend, once per
// backend and tuning (trainSetOf): they depend on no plan.
func (ex *executor) trainKernelsOf() (*trainKernels, error) {
	ts := trainSetOf(ex.be, ex.tun)
	ts.once.Do(func() {
		src := kernelgen.Prelude() + trainSource
		tk := &trainKernels{}
		for _, k := range []struct {
			name string
			dst  *backendKernel
		}{
			{"gs_t_sum", &tk.sum}, {"gs_t_seg", &tk.seg}, {"gs_t_gy", &tk.gy},
			{"gs_t_clip", &tk.clip}, {"gs_t_update", &tk.update}, {"gs_t_put", &tk.put},
		} {
			if *k.dst, ts.err = ex.be.compile(src, k.name, ex.tun.compileOptions(len(src))); ts.err != nil {
				return
			}
		}
		ts.k = tk
	})
	if ts.err != nil {
		return nil, fmt.Errorf("cuda: engine %s: compiling the training kernels: %w", ex.name, ts.err)
	}
	return ts.k, nil
}

// trainer keeps a fit in device memory (ode.Trainer): the engine kernel's
// arena, holding the problem's inputs, which the training kernels update
// in place, and the trainer's own arrays.
type trainer struct {
	ex   *executor
	tk   *trainKernels
	r    *run // the gradient-with-record run of the fit's job
	rows int  // record buffer rows of the arena
	ar   *arena
	l    layout

	n, d, np, nsh      int
	fits, per, stride  int
	np1, ny1, ns1, len int
	moments            int

	mem      uint64 // the trainer's arrays, one allocation
	x, g     uint64
	mom      [2]uint64
	prev     uint64
	best     uint64
	norms    uint64
	partial  uint64
	sum      uint64
	idx      uint64 // pcols, ycols, shpos (int64)
	idxBytes [3]uint64
	down     []byte // the summary's bytes
	clock    clock  // times the engine kernel
	released bool

	gen      int          // the arena's generation: 1 for the first, +1 for each new one
	gr       *trainGraphs // the steps' graphs; nil: the batch path
	graphErr error        // why a capture failed (the trainer then keeps the batch path)
}

var _ ode.TrainExecutor = (*executor)(nil)

// NewTrainer keeps the fit of job j (OpGrad on its starting values) in
// device memory. It returns an error wrapping ode.ErrNoTrainer where the
// engine cannot: not float64 on one GPU, or a job too large for one
// launch. A problem with events is fitted as any other: the engine's
// kernel stops or updates each trajectory at its events, and a
// trajectory whose event has no time derivative (a tangential crossing)
// counts as failed, so the host takes the step over and its Grad names
// it. It makes the checks of j.Checks as
// it stages the inputs (Checks), as Run does: an error wrapping
// ode.ErrInput.
func (ex *executor) NewTrainer(j *ode.Job, spec *ode.TrainSpec) (ode.Trainer, error) {
	switch {
	case ex.prec != Float64 || ex.tiles:
		return nil, fmt.Errorf("cuda: engine %s: fits stay in device memory on the float64 single-GPU engines: %w", ex.name, ode.ErrNoTrainer)
	case spec.Moments > 2:
		return nil, fmt.Errorf("cuda: engine %s: %d optimiser moments, at most 2: %w", ex.name, spec.Moments, ode.ErrNoTrainer)
	}
	tk, err := ex.trainKernelsOf()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ode.ErrNoTrainer, err)
	}
	// The training kernels read the inputs and the gradients
	// component-major (train.cuh).
	v := ex.variant(j)
	v.RowMajor = false
	// The trainer launches the engine kernel alone (evalOps): its save
	// times are not deferred to the module's other kernels.
	v.DeferSaves = false
	v, ke, err := ex.prepareConfig(context.Background(), v, j, nil)
	if err != nil {
		return nil, err
	}
	pl := ex.plan
	fits := max(spec.Fits, 1)
	t := &trainer{ex: ex, tk: tk, n: j.N, d: pl.Dim, np: pl.Params, nsh: pl.Shared,
		fits: fits, per: j.N / fits, np1: len(spec.P), ny1: len(spec.Y0), moments: spec.Moments}
	t.stride = t.np1 + t.per*t.ny1
	if spec.Shared {
		t.ns1 = pl.Shared
	}
	t.len = spec.Len(j.N, pl.Shared)
	if j.KeepSaves {
		// A fit's steps read no saved states: none are kept.
		jk := *j
		jk.KeepSaves = false
		j = &jk
	}
	t.r = newRun(ex, j, v, ke, nil)
	if t.clock, err = ex.be.newClock(); err != nil {
		return nil, err
	}
	if err := t.arena(ex.rowsGuess(j.MaxSteps), true); err != nil {
		t.clock.free()
		return nil, err
	}
	if err := t.alloc(spec); err != nil {
		t.Release()
		return nil, err
	}
	if !ex.tun.NoTrainGraph {
		t.newGraphs()
	}
	return t, nil
}

// arena lays out and allocates the arena of record buffers of rows rows
// and fills its inputs: from the job (stage) or, after a first arena, by
// copying the old one's (whose inputs the fit has updated).
func (t *trainer) arena(rows int, stage bool) error {
	r, ex := t.r, t.ex
	c, err := r.chunk(t.n, rows)
	if err != nil {
		return err
	}
	if c < t.n {
		return fmt.Errorf("cuda: engine %s: %d trajectories with %d record rows take more than one launch: %w", ex.name, t.n, rows, ode.ErrNoTrainer)
	}
	l := r.layout(t.n, rows)
	addr, err := ex.be.alloc(l.size)
	if err != nil {
		return err
	}
	ar := &arena{addr: addr, size: l.size}
	inLo, inHi := l.region(argSh, argGS)
	if l.off[argGS] >= 0 {
		inHi = l.off[argGS]
	}
	if stage {
		up := ex.takeStaging(inHi)
		// The shared gradient starts at zero; gs_t_gy zeroes it after
		// each evaluation reads it.
		err = r.stage(up, ar, ex.identity(t.n), rows, &l, l.off[argGS] >= 0)
		ex.giveStaging(up)
	} else {
		err = ex.be.batch(func(q queue) error {
			if err := t.settle(q); err != nil {
				return err
			}
			if err := q.copyDevice(ar.addr+uint64(inLo), t.ar.addr+uint64(inLo), inHi-inLo); err != nil {
				return err
			}
			if l.off[argGS] >= 0 {
				return q.zero(ar.addr+uint64(l.off[argGS]), l.bytes[argGS])
			}
			return nil
		})
	}
	if err != nil {
		ex.be.free(addr)
		return err
	}
	if t.ar != nil {
		ex.be.free(t.ar.addr)
	}
	t.ar, t.l, t.rows = ar, l, rows
	t.gen++
	return nil
}

// alloc allocates the trainer's arrays and sets the fixed words.
func (t *trainer) alloc(spec *ode.TrainSpec) error {
	be := t.ex.be
	L := int64(t.len)
	chunks := int64(max(chunksOf(t.n), chunksOf(t.len)))
	var off int64
	place := func(bytes int64) uint64 {
		o := off
		off += (bytes + 255) &^ 255
		return uint64(o)
	}
	x, g, prev, best := place(8*L), place(8*L), place(8*L), place(8*L)
	var mom [2]uint64
	for q := range t.moments {
		mom[q] = place(8 * L)
	}
	norms, partial := place(8*int64(t.fits)), place(8*chunks)
	sum := place(8 * numSumW)
	idx := place(8 * int64(t.np1+t.ny1+t.ns1+1))
	mem, err := be.alloc(max(off, 8))
	if err != nil {
		return err
	}
	t.mem = mem
	t.x, t.g, t.prev, t.best = mem+x, mem+g, mem+prev, mem+best
	for q := range t.moments {
		t.mom[q] = mem + mom[q]
	}
	t.norms, t.partial, t.sum, t.idx = mem+norms, mem+partial, mem+sum, mem+idx
	// The index arrays: the P columns, the Y0 components, and where the
	// kernel's shared block holds each shared parameter.
	ints := make([]int64, 0, t.np1+t.ny1+t.ns1)
	for _, c := range spec.P {
		ints = append(ints, int64(c))
	}
	for _, c := range spec.Y0 {
		ints = append(ints, int64(c))
	}
	ints = append(ints, t.sharedPlaces()...)
	buf := make([]byte, 8*len(ints))
	for i, v := range ints {
		binary.LittleEndian.PutUint64(buf[8*i:], uint64(v))
	}
	t.idxBytes = [3]uint64{0, uint64(8 * t.np1), uint64(8 * (t.np1 + t.ny1))}
	t.down = make([]byte, 8*swSummary)
	return be.batch(func(q queue) error {
		if err := q.zero(t.mem, off); err != nil {
			return err
		}
		return q.write(t.idx, buf)
	})
}

// sharedPlaces returns, for each fitted shared parameter, its place in the
// engine kernel's shared block (padded in lanes mode in global memory, as
// stage writes it).
func (t *trainer) sharedPlaces() []int64 {
	if t.ns1 == 0 {
		return nil
	}
	pos := make([]int64, t.ns1)
	if !t.r.v.LanesGlobal {
		for j := range pos {
			pos[j] = int64(j)
		}
		return pos
	}
	// Stage's own writer, given each value's index + 1 in place of the
	// value: the first place of shared parameter j is where j + 1 lands.
	ids := make([]float64, len(t.r.sharedBlock))
	for i := range ids {
		ids[i] = float64(i + 1)
	}
	for j := range pos {
		pos[j] = -1
	}
	kernelgen.LanesSharedBlock(func(at int, v float64) {
		if j := int(v) - 1; j >= 0 && j < t.ns1 && pos[j] < 0 {
			pos[j] = int64(at)
		}
	}, ids, t.nsh)
	return pos
}

// chunksOf returns the chunks of a chunked sum over n elements.
func chunksOf(n int) int { return max(1, (n+trainChunk-1)/trainChunk) }

// fixed returns the words every training launch shares: the shapes and the
// arrays.
func (t *trainer) fixed() [numTrainWords]uint64 {
	var w [numTrainWords]uint64
	l, a := &t.l, t.ar.addr
	at := func(arg int) uint64 {
		if l.off[arg] < 0 {
			return 0
		}
		return a + uint64(l.off[arg])
	}
	w[twN], w[twD], w[twNP], w[twNSh] = uint64(t.n), uint64(t.d), uint64(t.np), uint64(t.nsh)
	w[twLen], w[twFits], w[twPer], w[twStride] = uint64(t.len), uint64(t.fits), uint64(t.per), uint64(t.stride)
	w[twNP1], w[twNY1], w[twNS1] = uint64(t.np1), uint64(t.ny1), uint64(t.ns1)
	w[twScale] = math.Float64bits(t.r.j.Loss.Scale)
	w[twStatus], w[twFlags], w[twAcc], w[twTerms] = at(argStatus), at(argFlags), at(argAcc), at(argLoss)
	w[twGP], w[twGY0], w[twGS] = at(argGP), at(argGY0), at(argGS)
	w[twPin], w[twY0in], w[twSh] = at(argP), at(argY0), at(argSh)
	if t.np1 > 0 {
		w[twPCols] = t.idx + t.idxBytes[0]
	}
	if t.ny1 > 0 {
		w[twYCols] = t.idx + t.idxBytes[1]
	}
	if t.ns1 > 0 {
		w[twShPos] = t.idx + t.idxBytes[2]
	}
	w[twX], w[twG], w[twM0], w[twM1] = t.x, t.g, t.mom[0], t.mom[1]
	w[twPrev], w[twNorms], w[twPartial], w[twSum] = t.prev, t.norms, t.partial, t.sum
	return w
}

// launch enqueues training kernel k over threads threads with words w.
func launch(q queue, k backendKernel, threads int, w *[numTrainWords]uint64) error {
	return q.enqueue(k, max(threads, 1), trainBlock, 0, w[:])
}

// errReleased is the error of a Trainer used after Release.
var errReleased = errors.New("cuda: the trainer was released")

// Load copies x and the moments to the device and writes x into the
// problem.
func (t *trainer) Load(x []float64, moments [][]float64) error {
	if t.released {
		return errReleased
	}
	if len(x) != t.len {
		return fmt.Errorf("cuda: Trainer.Load: len(x) = %d, want %d", len(x), t.len)
	}
	for q := range moments {
		if len(moments[q]) > 0 && len(moments[q]) != t.len {
			return fmt.Errorf("cuda: Trainer.Load: len(moments[%d]) = %d, want %d", q, len(moments[q]), t.len)
		}
	}
	return t.ex.be.batch(func(q queue) error {
		if err := t.settle(q); err != nil {
			return err
		}
		if err := q.write(t.x, f64bytes(x)); err != nil {
			return err
		}
		for k := range t.moments {
			var err error
			if k < len(moments) && len(moments[k]) > 0 {
				err = q.write(t.mom[k], f64bytes(moments[k]))
			} else {
				err = q.zero(t.mom[k], int64(8*t.len))
			}
			if err != nil {
				return err
			}
		}
		if err := q.copyDevice(t.prev, t.x, int64(8*t.len)); err != nil {
			return err
		}
		return t.put(q)
	})
}

// put writes x into the arena's inputs.
func (t *trainer) put(q queue) error {
	w := t.fixed()
	cnt := (t.np1+t.ny1)*t.n + t.ns1
	w[twCount] = uint64(cnt)
	return launch(q, t.tk.put, cnt, &w)
}

// Eval runs the engine's kernel (a record and its gradient) on the current
// inputs and reduces its results on the device.
func (t *trainer) Eval(ctx context.Context) (ode.TrainEval, error) {
	start := time.Now()
	if t.released {
		return ode.TrainEval{}, errReleased
	}
	if err := ctx.Err(); err != nil {
		return ode.TrainEval{}, err
	}
	nonFinite := 0
	for {
		var s summary
		t.fresh()
		err := t.ex.be.batch(func(q queue) error {
			var err error
			if t.gr != nil && t.graphErr == nil {
				s, err = t.evalGraph(q, traceOf(ctx))
				var ce *captureError
				if !errors.As(err, &ce) {
					return err
				}
				t.graphErr = err
			}
			s, err = t.eval(q, traceOf(ctx))
			return err
		})
		if t.graphErr != nil {
			t.releaseGraphs()
		}
		if err != nil {
			return ode.TrainEval{}, err
		}
		// An evaluation reads the last update's count and clears it: a
		// rerun's does not see it again.
		nonFinite += s.ev.NonFinite
		if s.over == 0 {
			s.ev.Time = time.Since(start)
			s.ev.NonFinite = nonFinite
			return s.ev, nil
		}
		// A record buffer was too short: run again with room for the
		// longest trajectory, as a run's rerun would.
		rows := int(s.maxAcc)
		t.ex.notice(rows)
		if rows <= t.rows || rows > t.r.j.MaxSteps {
			return ode.TrainEval{}, fmt.Errorf("cuda: engine %s: a trajectory overflowed its record buffer of %d rows (needs %d)", t.ex.name, t.rows, rows)
		}
		if err := t.arena(max(rows, t.ex.rowsGuess(t.r.j.MaxSteps)), false); err != nil {
			return ode.TrainEval{}, err
		}
	}
}

// summary is what one evaluation reads back.
type summary struct {
	ev     ode.TrainEval
	over   int
	maxAcc int
}

// eval is one evaluation, in a batch: the engine kernel, the reductions,
// and the summary read back.
func (t *trainer) eval(q queue, tr *Trace) (summary, error) {
	if err := t.evalOps(q, t.clock); err != nil {
		return summary{}, err
	}
	dt, err := q.elapsed(t.clock)
	if err != nil {
		return summary{}, err
	}
	return t.summary(tr, dt), nil
}

// evalOps queues an evaluation's work: the engine kernel (timed by c's
// marks, unless c is nil), the reductions, and the summary's copy into
// t.down. A graph (trainer.graphEval) captures them with c nil.
func (t *trainer) evalOps(q queue, c clock) error {
	r, l := t.r, &t.l
	// The counters start at 0: gs_t_sum moves them into the summary and
	// zeroes them; gs_t_gy zeroes the shared gradient after reading it.
	if r.v.TileDynamic {
		if err := q.zero(t.ar.addr+uint64(l.off[argWork]+l.bytes[argWork]-8), 8); err != nil {
			return err
		}
	}
	args := r.kernelArgs(t.ar, t.n, t.rows, l)
	threads, block, shmem := r.launchShape(t.n)
	if c != nil {
		if err := q.mark(c, false); err != nil {
			return err
		}
	}
	if err := q.enqueue(r.ke.k, threads, block, shmem, args[:]); err != nil {
		return fmt.Errorf("cuda: engine %s: %w", t.ex.name, err)
	}
	if c != nil {
		if err := q.mark(c, true); err != nil {
			return err
		}
	}
	// The loss and the checks of every trajectory.
	w := t.fixed()
	w[twCount], w[twMode], w[twDst] = uint64(t.n), 0, t.sum
	if err := launch(q, t.tk.sum, chunksOf(t.n)*trainBlock, &w); err != nil {
		return err
	}
	// The gradient with respect to x: the P part summed over each fit's
	// trajectories, then the Y0 and shared parts.
	if t.np1 > 0 {
		w = t.fixed()
		w[twSrc], w[twDst] = w[twGP], t.g
		if err := t.seg(q, &w, t.fits*t.np1, t.per, t.np1, t.stride, 0); err != nil {
			return err
		}
	}
	cnt := t.ny1*t.n + t.ns1
	if l.off[argGS] >= 0 {
		cnt = t.ny1*t.n + max(t.ns1, t.nsh)
	}
	if cnt > 0 {
		w = t.fixed()
		w[twCount] = uint64(cnt)
		if l.off[argGS] >= 0 {
			w[twMode] = 1 // zero the shared gradient after
		}
		if err := launch(q, t.tk.gy, cnt, &w); err != nil {
			return err
		}
	}
	// Each fit's norm, and the whole gradient's.
	w = t.fixed()
	w[twSrc], w[twDst], w[twPCols] = t.g, t.norms, 0
	seg := t.stride
	if t.fits == 1 {
		seg = t.len
	}
	if err := t.seg(q, &w, t.fits, seg, 1, 1, 1); err != nil {
		return err
	}
	w = t.fixed()
	w[twSrc], w[twCount], w[twMode] = t.g, uint64(t.len), 1
	w[twDst], w[twScale] = t.sum+8, math.Float64bits(1)
	if err := launch(q, t.tk.sum, chunksOf(t.len)*trainBlock, &w); err != nil {
		return err
	}
	return q.read(t.down, t.sum)
}

// summary decodes the summary read back (t.down), with the device time
// dt of the evaluation's clock.
func (t *trainer) summary(tr *Trace, dt time.Duration) summary {
	tr.add(func(s *TraceStats) {
		s.Kernel += dt
		s.Launches++
		s.Layout = t.r.v.Layout()
		s.Download += int64(len(t.down))
	})
	word := func(i int) uint64 { return binary.LittleEndian.Uint64(t.down[8*i:]) }
	s := summary{ev: ode.TrainEval{Loss: math.Float64frombits(word(0)), GradNorm: math.Sqrt(math.Float64frombits(word(1))),
		Failed: int(word(2 + tcFailed)), NonFinite: int(word(2 + tcNonFinite))},
		over: int(word(2 + tcOver)), maxAcc: int(word(2 + tcMaxAcc))}
	if s.over == 0 {
		t.ex.notice(s.maxAcc)
	}
	return s
}

// seg queues a segmented sum (gs_t_seg): count segments of length seg,
// ncol per row, rows ostride apart in the output; mode 1 sums squares and
// takes the root.
func (t *trainer) seg(q queue, w *[numTrainWords]uint64, count, seg, ncol, ostride, mode int) error {
	w[twCount], w[twSeg], w[twNCol], w[twOStride], w[twMode] = uint64(count), uint64(seg), uint64(ncol), uint64(ostride), uint64(mode)
	threads := count
	if seg > trainSeg {
		threads = count * trainBlock // a block per segment
	}
	return launch(q, t.tk.seg, threads, w)
}

// Clip scales each fit's part of the gradient to norm at most c.
func (t *trainer) Clip(c float64) error {
	if t.released {
		return errReleased
	}
	if !(c > 0) {
		return fmt.Errorf("cuda: Trainer.Clip: c = %v, want > 0", c)
	}
	w := t.fixed()
	w[twClip] = math.Float64bits(c)
	return t.ex.be.batch(func(q queue) error {
		if err := t.settle(q); err != nil {
			return err
		}
		return launch(q, t.tk.clip, t.len, &w)
	})
}

// Update keeps x as the best values if best, applies rule ru to x and
// writes x into the problem.
func (t *trainer) Update(ru *optim.Rule, best bool) error {
	if t.released {
		return errReleased
	}
	w := t.fixed()
	w[twMode] = uint64(ruleMode(ru))
	if w[twMode] == 0 {
		return fmt.Errorf("cuda: Trainer.Update: unknown rule kind %d", ru.Kind)
	}
	if need := len(ru.Moments()); need > t.moments {
		return fmt.Errorf("cuda: Trainer.Update: the rule uses %d moments, the trainer holds %d", need, t.moments)
	}
	for q, v := range []float64{ru.Rate, ru.Beta1, ru.Beta2, ru.Eps, ru.Decay, ru.C1, ru.C2, ru.Momentum} {
		w[twLR+q] = math.Float64bits(v)
	}
	t.fresh()
	err := t.ex.be.batch(func(q queue) error {
		if t.gr != nil && t.graphErr == nil {
			err := t.updateGraph(q, &w, best)
			var ce *captureError
			if !errors.As(err, &ce) {
				return err
			}
			t.graphErr = err
		}
		return t.updateOps(q, &w, best)
	})
	if t.graphErr != nil {
		t.releaseGraphs()
	}
	return err
}

// updateOps queues an update's work: x copied to the best values if best,
// the rule (words w), and x into the problem.
func (t *trainer) updateOps(q queue, w *[numTrainWords]uint64, best bool) error {
	if best {
		if err := q.copyDevice(t.best, t.x, int64(8*t.len)); err != nil {
			return err
		}
	}
	if err := launch(q, t.tk.update, t.len, w); err != nil {
		return err
	}
	return t.put(q)
}

// Read copies what dst asks for to the host.
func (t *trainer) Read(dst *ode.TrainState) error {
	if t.released {
		return errReleased
	}
	return t.ex.be.batch(func(q queue) error {
		if err := t.settle(q); err != nil {
			return err
		}
		return t.read(q, dst)
	})
}

func (t *trainer) read(q queue, dst *ode.TrainState) error {
	for _, c := range []struct {
		dst  []float64
		addr uint64
		n    int
		what string
	}{
		{dst.X, t.x, t.len, "X"}, {dst.Grad, t.g, t.len, "Grad"}, {dst.Prev, t.prev, t.len, "Prev"},
		{dst.Best, t.best, t.len, "Best"}, {dst.FitNorms, t.norms, t.fits, "FitNorms"},
	} {
		if c.dst == nil {
			continue
		}
		if len(c.dst) != c.n {
			return fmt.Errorf("cuda: Trainer.Read: len(%s) = %d, want %d", c.what, len(c.dst), c.n)
		}
		if err := q.read(f64bytes(c.dst), c.addr); err != nil {
			return err
		}
	}
	for k, m := range dst.Moments {
		if m == nil {
			continue
		}
		if k >= t.moments || len(m) != t.len {
			return fmt.Errorf("cuda: Trainer.Read: moment %d of length %d; the trainer holds %d of length %d", k, len(m), t.moments, t.len)
		}
		if err := q.read(f64bytes(m), t.mom[k]); err != nil {
			return err
		}
	}
	var c [8]byte
	if err := q.read(c[:], t.sum+8*(swAcc+tcNonFinite)); err != nil {
		return err
	}
	dst.NonFinite = int(binary.LittleEndian.Uint64(c[:]))
	return nil
}

// Release frees the trainer's device memory.
func (t *trainer) Release() {
	if t.released {
		return
	}
	t.released = true
	t.releaseGraphs()
	if t.clock != nil {
		t.clock.free()
	}
	if t.ar != nil {
		_ = t.ex.be.free(t.ar.addr)
	}
	if t.mem != 0 {
		_ = t.ex.be.free(t.mem)
	}
}
