package cuda

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
)

// timedBackend is the hostWork backend (copies and kernels move nothing)
// with a device's timeline: a batch runs on a goroutine of its own locked
// to its OS thread (the GPU backend's device goroutine), a kernel of m
// trajectories takes m·perTraj of device time after the work queued before
// it, a copy back takes its bytes over bw bytes a second on a copy engine
// of its own (readAfter: after the clock's kernel, beside the later
// ones), and a wait for the device blocks its thread in a system call, as
// the driver's synchronisation does. A call on it costs what a call on a
// device costs where the host's work and the device's overlap as they
// would there: the device goroutine, returning from a wait, needs a core
// (a P) to go on queuing work, which a scatter on all cores leaves it none
// of until the scatter's blocks are done.
type timedBackend struct {
	hostWorkBackend
	perTraj time.Duration // device time of a kernel per trajectory
	bw      float64       // bytes a second of the copies back
	jobs    chan func()

	// On the device goroutine only.
	devFree, copyFree time.Time
}

func newTimedBackend(perTraj time.Duration, bw float64) *timedBackend {
	b := &timedBackend{hostWorkBackend: hostWorkBackend{nullBackend: nullBackend{newHostBackend(1 << 50)}}, perTraj: perTraj, bw: bw, jobs: make(chan func())}
	go func() {
		runtime.LockOSThread()
		for f := range b.jobs {
			f()
		}
	}()
	return b
}

// batch hands f to the device goroutine and waits for it.
func (b *timedBackend) batch(f func(q queue) error) error {
	done := make(chan error, 1)
	b.jobs <- func() { done <- f(timedQueue{b}) }
	return <-done
}

type timedClock struct{ start, end time.Time }

func (*timedClock) free() {}

func (b *timedBackend) newClock() (clock, error) { return &timedClock{}, nil }

// waitUntil blocks the calling thread in a system call until t.
func waitUntil(t time.Time) {
	for d := time.Until(t); d > 0; d = time.Until(t) {
		ts := syscall.NsecToTimespec(int64(d))
		_ = syscall.Nanosleep(&ts, nil)
	}
}

type timedQueue struct{ b *timedBackend }

func (q timedQueue) copyTime(n int) time.Duration {
	return time.Duration(float64(n) / q.b.bw * 1e9)
}

// queued returns when work queued now on the device's stream starts.
func (q timedQueue) queued() time.Time {
	if now := time.Now(); now.After(q.b.devFree) {
		return now
	}
	return q.b.devFree
}

func (q timedQueue) write(_ uint64, src []byte) error {
	q.b.devFree = q.queued().Add(q.copyTime(len(src)))
	return nil
}

func (q timedQueue) read(dst []byte, _ uint64) error {
	q.b.devFree = q.queued().Add(q.copyTime(len(dst)))
	waitUntil(q.b.devFree)
	return nil
}

func (timedQueue) zero(uint64, int64) error               { return nil }
func (timedQueue) copyDevice(uint64, uint64, int64) error { return nil }

func (q timedQueue) enqueue(_ backendKernel, threads, _, _ int, _ []uint64) error {
	q.b.devFree = q.queued().Add(time.Duration(threads) * q.b.perTraj)
	return nil
}

func (q timedQueue) mark(c clock, end bool) error {
	if end {
		c.(*timedClock).end = q.b.devFree
	} else {
		c.(*timedClock).start = q.queued()
	}
	return nil
}

func (timedQueue) elapsed(c clock) (time.Duration, error) {
	tc := c.(*timedClock)
	waitUntil(tc.end)
	return tc.end.Sub(tc.start), nil
}

func (q timedQueue) readAfter(c clock, dst [][]byte, _ []uint64) (time.Duration, error) {
	n := 0
	for _, d := range dst {
		n += len(d)
	}
	start := time.Now()
	if end := c.(*timedClock).end; end.After(start) {
		start = end
	}
	if q.b.copyFree.After(start) {
		start = q.b.copyFree
	}
	d := q.copyTime(n)
	q.b.copyFree = start.Add(d)
	waitUntil(q.b.copyFree)
	return d, nil
}

func (q timedQueue) capture(_ stream, f func(queue) error) (graph, error) {
	if err := f(q); err != nil {
		return nil, err
	}
	return &hostGraph{ops: []func() error{}}, nil
}
func (timedQueue) launchGraph(stream, graph, clock) error { return nil }
func (timedQueue) syncStream(stream) error                { return nil }

// timedHost is the engine on timedBackend with a device about a tenth as
// fast as an H100 for the Lorenz gradient with its record (27 ns a
// trajectory, 2.7 on the H100) and copies back at 5 GB/s (50 on its
// bus), so that a scatter on this machine's cores (ten and more times
// slower than the H100 host's 16) weighs against the device's work about
// as on that host.
var timedHost = &Engine{name: "cuda-timed", prec: Float64, be: newTimedBackend(27*time.Nanosecond, 5e9)}

func init() { ode.Register(timedHost) }

// BenchmarkCallOverlap times whole Grad calls (the record, everything
// returned, inputs unchanged) of 2^18 and 2^20 Lorenz trajectories on
// timedHost, whose kernels and copies take a device's time on a goroutine
// of their own while the host stages and scatters: what the overlap of the
// host's work with the device's leaves of a call's time. kernel-ms and
// copy-ms are the trace's; over-ms is the call's time beyond them (the
// host's work not hidden, and the device's waits for the host).
//
//	go test ./cuda -run '^$' -bench CallOverlap -benchtime 10x -count 4 -cpu 1,2
func BenchmarkCallOverlap(b *testing.B) {
	for _, n := range []int{1 << 18, 1 << 20} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			c := lorenzCallCase(n)
			c.set.Engine = timedHost.name
			sv, err := ode.NewSolver(c.prob.Field, &c.set)
			if err != nil {
				b.Fatal(err)
			}
			var g ode.Gradient
			if _, err := sv.Grad(&g, &c.prob, c.loss, nil); err != nil {
				b.Fatal(err)
			}
			var tr Trace
			ctx := WithTrace(context.Background(), &tr)
			b.ResetTimer()
			for range b.N {
				if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			s := tr.Stats()
			call := float64(b.Elapsed()) / 1e6 / float64(b.N)
			kernel := float64(s.Kernel) / 1e6 / float64(b.N)
			copies := float64(s.Transfer) / 1e6 / float64(b.N)
			b.ReportMetric(kernel, "kernel-ms/op")
			b.ReportMetric(copies, "copy-ms/op")
			b.ReportMetric(call-kernel-copies, "over-ms/op")
		})
	}
}
