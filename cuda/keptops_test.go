package cuda

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/odetest"
	"github.com/gradsolve-go/gradsolve/ode"
)

// opsBackend is countsBackend counting the operations its batches queue
// (opsQueue), per kind.
type opsBackend struct {
	countsBackend
	mu  *sync.Mutex
	ops *queueOps
}

// queueOps counts a batch's operations by kind.
type queueOps struct {
	writes, queued, reads, zeros, copies, kernels, batches int
	marks, waits                                           int // a clock's marks and elapsed's waits
}

func (b opsBackend) batch(f func(q queue) error) error {
	b.mu.Lock()
	b.ops.batches++
	b.mu.Unlock()
	return f(opsQueue{countsQueue{hostQueue{b.hostBackend}}, b})
}

type opsQueue struct {
	countsQueue
	b opsBackend
}

func (q opsQueue) count(f func(o *queueOps)) {
	q.b.mu.Lock()
	defer q.b.mu.Unlock()
	f(q.b.ops)
}

func (q opsQueue) write(addr uint64, src []byte) error {
	q.count(func(o *queueOps) { o.writes++ })
	return q.countsQueue.write(addr, src)
}

func (q opsQueue) writeQueued(addr uint64, src []byte) error {
	q.count(func(o *queueOps) { o.queued++ })
	return q.countsQueue.writeQueued(addr, src)
}

func (q opsQueue) read(dst []byte, addr uint64) error {
	q.count(func(o *queueOps) { o.reads++ })
	return q.countsQueue.read(dst, addr)
}

func (q opsQueue) zero(addr uint64, n int64) error {
	q.count(func(o *queueOps) { o.zeros++ })
	return q.countsQueue.zero(addr, n)
}

func (q opsQueue) copyDevice(dst, src uint64, n int64) error {
	q.count(func(o *queueOps) { o.copies++ })
	return q.countsQueue.copyDevice(dst, src, n)
}

func (q opsQueue) mark(c clock, end bool) error {
	q.count(func(o *queueOps) { o.marks++ })
	return q.countsQueue.mark(c, end)
}

func (q opsQueue) elapsed(c clock) (time.Duration, error) {
	q.count(func(o *queueOps) { o.waits++ })
	return q.countsQueue.elapsed(c)
}

func (q opsQueue) enqueue(k backendKernel, threads, block, shmem int, args []uint64) error {
	q.count(func(o *queueOps) { o.kernels++ })
	return q.countsQueue.enqueue(k, threads, block, shmem, args)
}

// TestKeptCallOps checks what a repeated kept gradient call of the events
// suite's problems (ballCase, pkCase, Tsit5 at rtol 1e-6, 4,096
// trajectories, ode.Settings.KeepGrads with Gradient.Omit, the Gradient
// passed back unread, inputs unchanged) queues on the device, on
// cuda-counts' backend counting its operations: one batch; no upload (the
// inputs and the shared block are held: holdStaged; one, queued without
// waiting for it, writeQueued, of the shared block with
// Tuning.uploadShared); no memset (the kernel zeroes the recorded mesh's rows
// past each trajectory's end that the call before wrote, meshZero; the
// check's accumulators are 0 as its call before left them: one memset
// of its words with Tuning.checkMemset); the engine kernel and the
// check kernel; one read (the check's words and limbs); and no
// device-to-device copy (the kernel writes the kept results in place:
// argAddr); no clock's marks nor wait for it in a call without a Trace
// (keptTimed), two marks and a wait under one.
// Each call keeps its results.
func TestKeptCallOps(t *testing.T) {
	for _, x := range []struct {
		name   string
		tun    Tuning
		traced bool
		want   queueOps
	}{
		{"kernel-zeroes", Tuning{}, false, queueOps{reads: 1, kernels: 2, batches: 1}},
		{"traced", Tuning{}, true, queueOps{reads: 1, kernels: 2, batches: 1, marks: 2, waits: 1}},
		{"check-memset", Tuning{checkMemset: true}, false, queueOps{reads: 1, zeros: 1, kernels: 2, batches: 1}},
		{"upload-shared", Tuning{uploadShared: true}, false, queueOps{queued: 1, reads: 1, kernels: 2, batches: 1}},
	} {
		be := opsBackend{countsBackend{newHostBackend(1 << 30)}, &sync.Mutex{}, &queueOps{}}
		e := &Engine{name: "cuda-counts-ops-" + x.name, prec: Float64, be: be}
		e.SetTuning(x.tun)
		ode.Register(e)
		for _, mk := range []func(int, ode.Method) engineCase{ballCase, pkCase} {
			c := mk(1<<12, ode.Tsit5)
			c.set.RelTol, c.set.AbsTol, c.set.Engine, c.set.KeepGrads = 1e-6, 1e-8, e.name, true
			sv, err := ode.NewSolver(c.prob.Field, &c.set)
			if err != nil {
				t.Fatal(err)
			}
			g := ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}
			for call := range 4 {
				*be.ops = queueOps{}
				ctx := context.Background()
				if x.traced {
					ctx = WithTrace(ctx, &Trace{})
				}
				if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
					t.Fatal(err)
				}
				if call < 2 { // (the first uploads the inputs; the second finds them the same)
					continue
				}
				if g.Resident == nil {
					t.Errorf("%s, %s: call %d kept no results", x.name, c.name, call)
				}
				if got := *be.ops; got != x.want {
					t.Errorf("%s, %s: call %d queued %+v, want %+v", x.name, c.name, call, got, x.want)
				}
			}
		}
	}
}

// sizesBackend is countsBackend counting the bytes its batches' copies
// and memsets move (sizesQueue) and its allocations, in sizes.
type sizesBackend struct {
	countsBackend
	mu    *sync.Mutex
	sizes *callSizes
}

// callSizes is what a call asked of the device: allocations, bytes
// written, read and zeroed, and the threads of each kernel launched.
type callSizes struct {
	allocs                int
	written, read, zeroed int64
	threads               []int
}

func (b sizesBackend) add(f func(s *callSizes)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b.sizes)
}

func (b sizesBackend) alloc(n int64) (uint64, error) {
	b.add(func(s *callSizes) { s.allocs++ })
	return b.countsBackend.alloc(n)
}

func (b sizesBackend) batch(f func(q queue) error) error {
	return f(sizesQueue{countsQueue{hostQueue{b.hostBackend}}, b})
}

type sizesQueue struct {
	countsQueue
	b sizesBackend
}

func (q sizesQueue) write(addr uint64, src []byte) error {
	q.b.add(func(s *callSizes) { s.written += int64(len(src)) })
	return q.countsQueue.write(addr, src)
}

func (q sizesQueue) writeQueued(addr uint64, src []byte) error {
	q.b.add(func(s *callSizes) { s.written += int64(len(src)) })
	return q.countsQueue.writeQueued(addr, src)
}

func (q sizesQueue) read(dst []byte, addr uint64) error {
	q.b.add(func(s *callSizes) { s.read += int64(len(dst)) })
	return q.countsQueue.read(dst, addr)
}

func (q sizesQueue) zero(addr uint64, n int64) error {
	q.b.add(func(s *callSizes) { s.zeroed += n })
	return q.countsQueue.zero(addr, n)
}

func (q sizesQueue) enqueue(k backendKernel, threads, block, shmem int, args []uint64) error {
	q.b.add(func(s *callSizes) { s.threads = append(s.threads, threads) })
	return q.countsQueue.enqueue(k, threads, block, shmem, args)
}

// TestSaveKeptCallSizes checks what a repeated Grad call with the saved
// states kept on the device (Settings.KeepSaves, the saved states' sum of
// squares, the Gradient passed back: BenchmarkGPUSaveSplit's grad-kept)
// asks of the device beyond its engine kernel, with 1 and with 1,000 save
// times (256 Kepler orbits, on cuda-counts' backend): no allocation after
// the first call; the same bytes read and zeroed; the bytes written
// differing by the save times' (padded) only; and one kernel, the engine
// kernel, which writes the kept saves in place (component-major: nothing
// outside it grows with the save times, issue 25). With Tuning.oldSaves
// (the form before session 46) two kernels, the second the saves kernel
// (one thread a saved value: their rearrangement into rows, saves.cuh).
// Either way the saves read back are the same, bit for bit.
func TestSaveKeptCallSizes(t *testing.T) {
	const n = 256
	var ys [2][2][]float64 // [form][save times]
	for form, old := range []bool{false, true} {
		be := sizesBackend{countsBackend{newHostBackend(1 << 30)}, &sync.Mutex{}, &callSizes{}}
		e := &Engine{name: fmt.Sprintf("cuda-counts-sizes-old=%v", old), prec: Float64, be: be}
		e.SetTuning(Tuning{oldSaves: old})
		ode.Register(e)
		kernels := 1
		if old {
			kernels = 2
		}
		var got [2]callSizes
		for a, k := range []int{1, 1000} {
			p, set := keplerSaves(n, k)
			set.Engine, set.KeepSaves = e.name, true
			sv, err := ode.NewSolver(p.Field, &set)
			if err != nil {
				t.Fatal(err)
			}
			var g ode.Gradient
			for call := range 3 {
				*be.sizes = callSizes{}
				if _, err := sv.Grad(&g, &p, odetest.SavedSquares(), nil); err != nil {
					t.Fatal(err)
				}
				if g.Solution.Resident == nil {
					t.Fatalf("old=%v saves=%d: call %d kept no saved states", old, k, call)
				}
			}
			got[a] = *be.sizes
			// (The saves kernel: a block of savesThreads a tile of savesTile².)
			if s := got[a]; s.allocs != 0 || len(s.threads) != kernels || old && s.threads[1] < n*k*p.Field.Dim*savesThreads/(savesTile*savesTile) {
				t.Errorf("old=%v saves=%d: a warm call: %d allocations, kernels of %v threads; want none and %d kernels",
					old, k, s.allocs, s.threads, kernels)
			}
			if err := g.Solution.HostSaves(); err != nil {
				t.Fatal(err)
			}
			ys[form][a] = g.Solution.Ys
		}
		one, many := got[0], got[1]
		// (The arena's arrays are 256-byte aligned: layout.)
		pad := func(b int64) int64 { return (b + 255) &^ 255 }
		if one.read != many.read || one.zeroed != many.zeroed || many.written-one.written != pad(1000*8)-pad(8) || one.threads[0] != many.threads[0] {
			t.Errorf("old=%v: 1 save time: %+v; 1,000: %+v; want the same reads, memsets and engine kernel, the writes the save times' bytes more", old, one, many)
		}
	}
	for a := range ys[0] {
		if ok, i := bitsEqual(ys[0][a], ys[1][a]); !ok || len(ys[0][a]) == 0 {
			t.Errorf("save times %d: the saves read back differ from the old form's at %d (%d values)", []int{1, 1000}[a], i, len(ys[0][a]))
		}
	}
}

// sharedBackend is opsBackend recording the shared block each engine
// kernel reads (in the arena at its argSh word, as the launch left it:
// the host backend's copies are done when queued), in blocks.
type sharedBackend struct {
	opsBackend
	words  int // the shared block's reals
	blocks *[][]float64
}

func (b sharedBackend) batch(f func(q queue) error) error {
	return b.opsBackend.batch(func(q queue) error { return f(sharedQueue{q.(opsQueue), b}) })
}

type sharedQueue struct {
	opsQueue
	b sharedBackend
}

func (q sharedQueue) enqueue(k backendKernel, threads, block, shmem int, args []uint64) error {
	if len(args) == numArgs {
		m, _, off := q.b.at(args[argSh])
		sh := make([]float64, q.b.words)
		for c := range sh {
			sh[c] = math.Float64frombits(binary.LittleEndian.Uint64(m[off+8*uint64(c):]))
		}
		q.b.mu.Lock()
		*q.b.blocks = append(*q.b.blocks, sh)
		q.b.mu.Unlock()
	}
	return q.opsQueue.enqueue(k, threads, block, shmem, args)
}

// TestKeptCallHoldsShared checks that the kernel of every kept gradient
// call reads the shared block its call stages (the shared parameter, the
// tolerances: drivenBallCase, 1,024 trajectories on cuda-counts' backend,
// the shared restitution changed between some calls, a loss call on the
// same solver between them with another), where a call whose block is
// the one its arena holds uploads nothing (holdStaged) and one whose
// block changed, or whose arena a call that keeps nothing used last,
// uploads it: with Tuning.uploadShared every kept call uploads it. It
// fails where a changed block is left unsent (which was tried: the
// compare of the bytes left out).
func TestKeptCallHoldsShared(t *testing.T) {
	for _, tun := range []Tuning{{}, {uploadShared: true}} {
		c := drivenBallCase(1<<10, ode.Tsit5)
		var blocks [][]float64
		words := c.prob.Field.Shared + c.prob.Field.Dim + 2
		be := sharedBackend{opsBackend{countsBackend{newHostBackend(1 << 30)}, &sync.Mutex{}, &queueOps{}}, words, &blocks}
		e := &Engine{name: fmt.Sprintf("cuda-counts-shared-%t", tun.uploadShared), prec: Float64, be: be}
		e.SetTuning(tun)
		ode.Register(e)
		c.set.RelTol, c.set.AbsTol, c.set.Engine, c.set.KeepGrads = 1e-6, 1e-8, e.name, true
		sv, err := ode.NewSolver(c.prob.Field, &c.set)
		if err != nil {
			t.Fatal(err)
		}
		g := ode.Gradient{Omit: ode.OmitStates | ode.OmitStats}
		for k, st := range []struct {
			shared float64
			loss   bool // a loss call (kept nothing), not a kept gradient
			upload int  // the kept call's uploads of its shared block (-1: either, where the loss call may have used another arena)
		}{
			{0.8, false, 1}, {0.8, false, 1}, {0.8, false, 0}, {0.7, false, 1}, {0.7, false, 0},
			{0.8, false, 1}, {0.6, true, 0}, {0.8, false, -1}, {0.8, false, 0}, {0.6, true, 0}, {0.6, false, 1},
			{0.6, false, 0}, {0.8, false, 1},
		} {
			c.prob.Shared = []float64{st.shared}
			blocks = blocks[:0]
			*be.ops = queueOps{}
			if st.loss {
				if _, _, err := sv.Loss(&c.prob, c.loss, nil); err != nil {
					t.Fatal(err)
				}
			} else if _, err := sv.GradContext(context.Background(), &g, &c.prob, c.loss, nil); err != nil {
				t.Fatal(err)
			}
			if len(blocks) == 0 {
				t.Fatalf("uploadShared %t, call %d: no engine kernel launched", tun.uploadShared, k)
			}
			for _, sh := range blocks {
				if want := []float64{st.shared, 1e-6, 1e-8, 1e-8}; !slices.Equal(sh[:words-1], want) {
					t.Errorf("uploadShared %t, call %d: the kernel read the shared block %v, want %v and MaxSteps", tun.uploadShared, k, sh, want)
				}
			}
			if st.loss || k < 2 { // (the first two calls compare their inputs first: no run ahead yet)
				continue
			}
			want := st.upload
			if tun.uploadShared {
				want = 1
			}
			if g.Resident == nil || len(blocks) != 1 || want >= 0 && be.ops.queued != want {
				t.Errorf("uploadShared %t, call %d: kept %t, %d kernels, %d uploads queued, want kept, 1 and %d", tun.uploadShared, k, g.Resident != nil, len(blocks), be.ops.queued, want)
			}
		}
	}
}
