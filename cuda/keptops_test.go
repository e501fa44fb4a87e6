package cuda

import (
	"context"
	"sync"
	"testing"

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

func (q opsQueue) enqueue(k backendKernel, threads, block, shmem int, args []uint64) error {
	q.count(func(o *queueOps) { o.kernels++ })
	return q.countsQueue.enqueue(k, threads, block, shmem, args)
}

// TestKeptCallOps checks what a repeated kept gradient call of the events
// suite's problems (ballCase, pkCase, Tsit5 at rtol 1e-6, 4,096
// trajectories, ode.Settings.KeepGrads with Gradient.Omit, the Gradient
// passed back unread, inputs unchanged) queues on the device, on
// cuda-counts' backend counting its operations: one batch; one upload,
// queued without waiting for it (the shared block: the inputs are held;
// writeQueued); two memsets (the recorded
// mesh's steps and event marks, which follow them, in one; the check's
// words); the engine kernel and the check kernel; one read (the check's
// words and limbs); and no device-to-device copy (the kernel writes the
// kept results in place: argAddr). Each call keeps its results.
func TestKeptCallOps(t *testing.T) {
	be := opsBackend{countsBackend{newHostBackend(1 << 30)}, &sync.Mutex{}, &queueOps{}}
	e := &Engine{name: "cuda-counts-ops", prec: Float64, be: be}
	ode.Register(e)
	want := queueOps{queued: 1, reads: 1, zeros: 2, copies: 0, kernels: 2, batches: 1}
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
			if _, err := sv.GradContext(context.Background(), &g, &c.prob, c.loss, nil); err != nil {
				t.Fatal(err)
			}
			if call < 2 { // (the first uploads the inputs; the second finds them the same)
				continue
			}
			if g.Resident == nil {
				t.Errorf("%s: call %d kept no results", c.name, call)
			}
			if got := *be.ops; got != want {
				t.Errorf("%s: call %d queued %+v, want %+v", c.name, call, got, want)
			}
		}
	}
}
