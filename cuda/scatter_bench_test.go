package cuda

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/internal/cputime"
	"github.com/gradsolve-go/gradsolve/ode"
)

// BenchmarkScatter times the scatter of a launch's results (scatter:
// each trajectory's status and counts, the loss terms summed in order,
// Y, dL/dy0 and dL/dp from the device's component-major arrays to the
// Gradient's rows) of n Lorenz trajectories into a Gradient passed back,
// in whole Grad calls (the record, everything returned) on the backend
// whose copies and kernels take no time (hostWork): scatter-ms/op is the
// trace's Scatter (TraceStats), the part of BenchmarkGPUCallBound's
// scatter-ms/op that is the host's, ns/op the call's host work and
// cpu-ms/op the process's CPU time a call (its work on all cores: on a
// machine whose cores other processes share, the figure to compare at
// -test.cpu 1). It runs on as many cores as GOMAXPROCS (-test.cpu); on a
// device's host it needs no device:
//
//	go test ./cuda -run '^$' -bench 'BenchmarkScatter$' -benchtime 400x -count 6
func BenchmarkScatter(b *testing.B) {
	for _, n := range []int{128, 8192, 1 << 15, 1 << 16, 1 << 18} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchScatter(b, n) })
	}
}

// BenchmarkScatterBus times whole Grad calls of n Lorenz trajectories
// (the record, everything returned) on the backend whose kernels take
// no time and whose copies back take the bus's (busWork: busRate bytes a
// second, the copy's thread held), with the results copied back at once
// ("one": Tuning.splitMin -1) and in two parts, the first part's
// statuses, counts and loss terms written while the second is copied
// ("split": splitAt, here from 16,384 trajectories; by default from
// defaultSplitMin). ns/op is the call;
// scatter-ms/op the trace's Scatter (from the first part's arrival where
// split); copy-ms/op the copies' (the trace's Transfer); cpu-ms/op the
// process's CPU time a call. Run with -count to
// alternate them:
//
//	go test ./cuda -run '^$' -bench 'BenchmarkScatterBus' -benchtime 400x -count 6 -cpu 2
func BenchmarkScatterBus(b *testing.B) {
	for _, n := range []int{1 << 14, 1 << 15, 1 << 17} {
		for _, one := range []bool{true, false} {
			name, tun := fmt.Sprintf("n=%d/split", n), Tuning{splitMin: 1 << 14}
			if one {
				name, tun = fmt.Sprintf("n=%d/one", n), Tuning{splitMin: -1}
			}
			b.Run(name, func(b *testing.B) { benchScatterOn(b, tuned(b, busWork.name, tun), n) })
		}
	}
}

// busRate is busWork's bus, in bytes a second: about an H100's copies
// back of 32,768 Lorenz trajectories' results (3.1 MB in 0.19 ms,
// sessions 42 and 43).
const busRate = 16e9

// busWorkBackend is the hostWork backend whose batches' copies back
// take the time of busRate's bus: spinning, as a device's synchronous
// copy holds its thread, but yielding its processor as it spins, as the
// Go scheduler hands the processor of a goroutine in a call of the
// driver to the goroutines that wait for one (a spin that kept it
// would keep the goroutine it readies waiting for the copy's end).
type busWorkBackend struct{ hostWorkBackend }

func (b *busWorkBackend) batch(f func(q queue) error) error { return f(busWorkQueue{}) }

// busWorkQueue is the queue of busWorkBackend's batches.
type busWorkQueue struct{ hostWorkQueue }

func (busWorkQueue) read(dst []byte, _ uint64) error {
	end := time.Now().Add(time.Duration(float64(len(dst)) / busRate * 1e9))
	for time.Now().Before(end) {
		runtime.Gosched()
	}
	return nil
}

var busWork = &Engine{name: "cuda-buswork", prec: Float64, be: &busWorkBackend{hostWorkBackend{nullBackend: nullBackend{newHostBackend(1 << 50)}}}}

func init() { ode.Register(busWork) }

func benchScatter(b *testing.B, n int) { benchScatterOn(b, hostWork.name, n) }

// benchScatterOn is benchScatter on the engine called engine.
func benchScatterOn(b *testing.B, engine string, n int) {
	c := lorenzCallCase(n)
	c.set.Engine = engine
	sv, err := ode.NewSolver(c.prob.Field, &c.set)
	if err != nil {
		b.Fatal(err)
	}
	var g ode.Gradient
	var tr Trace
	ctx := WithTrace(context.Background(), &tr)
	for range 2 { // the Gradient's storage, the executor's buffers
		if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
			b.Fatal(err)
		}
	}
	tr.Reset()
	c0 := cputime.Process()
	b.ResetTimer()
	for range b.N {
		if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := cputime.Process() - c0
	s := tr.Stats()
	b.ReportMetric(float64(s.Scatter)/1e6/float64(b.N), "scatter-ms/op")
	b.ReportMetric(float64(s.Stage)/1e6/float64(b.N), "stage-ms/op")
	b.ReportMetric(float64(s.Transfer)/1e6/float64(b.N), "copy-ms/op")
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
}

// TestStripLoops checks scatterStatusStrip's loops (stripCounts,
// stripStatus, stripStiff, stripRejected) against a loop over the
// trajectories one at a time: the arrays written, the most accepted
// steps, the statuses and the kernel flags OR-ed, with and without the
// mesh's Len, for strips of every status and of OK alone.
func TestStripLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	statuses := []ode.Status{ode.OK, ode.MaxStepsReached, ode.StepSizeUnderflow, ode.Stiff, ode.NonFinite, ode.TooManyEvents}
	for _, c := range []struct {
		m      int
		allOK  bool
		noLens bool
	}{{0, true, false}, {1, false, false}, {2048, true, false}, {2048, false, false}, {1000, false, true}, {777, true, true}} {
		acc, rej, st, fl := make([]int32, c.m), make([]int32, c.m), make([]int32, c.m), make([]int32, c.m)
		for j := range c.m {
			acc[j], rej[j] = int32(rng.IntN(5000)), int32(rng.IntN(300))
			if !c.allOK {
				st[j] = int32(statuses[rng.IntN(len(statuses))])
			}
			fl[j] = int32(rng.IntN(16)) & (flagStiff | flagTangent)
		}
		const e0, e1 = 2, 6
		accepted, rejected, evals := make([]int, c.m), make([]int, c.m), make([]int, c.m)
		sts, stiff := make([]ode.Status, c.m), make([]bool, c.m)
		var lens []int
		if !c.noLens {
			lens = make([]int, c.m)
		}
		longest := stripCounts(accepted, lens, acc)
		bad := stripStatus(sts, st)
		anyFlag := stripStiff(stiff, fl)
		stripRejected(rejected, evals, accepted, rej, e0, e1)
		wantLongest, wantFail, wantFlags := 0, false, int32(0)
		for j := range c.m {
			a, r := int(acc[j]), int(rej[j])
			wantLongest = max(wantLongest, a)
			wantFail = wantFail || ode.Status(st[j]) != ode.OK
			wantFlags |= fl[j]
			if accepted[j] != a || lens != nil && lens[j] != a || rejected[j] != r || evals[j] != e0+e1*(a+r) ||
				sts[j] != ode.Status(st[j]) || stiff[j] != (fl[j]&flagStiff != 0) {
				t.Fatalf("m %d, trajectory %d: accepted %d, rejected %d, evals %d, status %v, stiff %t; want %d, %d, %d, %v, %t",
					c.m, j, accepted[j], rejected[j], evals[j], sts[j], stiff[j], a, r, e0+e1*(a+r), ode.Status(st[j]), fl[j]&flagStiff != 0)
			}
		}
		if longest != wantLongest || (bad != ode.OK) != wantFail || anyFlag != wantFlags || wantFail == c.allOK && c.m > 1 {
			t.Errorf("m %d: longest %d, failed %t, flags %#x; want %d, %t, %#x", c.m, longest, bad != ode.OK, anyFlag, wantLongest, wantFail, wantFlags)
		}
	}
}

// BenchmarkScatterStatus times scatterStatus alone (the statuses, the
// step counts with the mesh's Len, the stiffness flags, the rejected
// steps and field evaluations of a launch's consecutive trajectories) on
// one goroutine, over a block of resultBlock trajectories: the arrays
// (about 100 bytes a trajectory) stay in the core's caches, so that its
// figure (the process's CPU time a trajectory) is the loops' own cost,
// steadier than the wall time where other processes share the machine.
func BenchmarkScatterStatus(b *testing.B) {
	const n = resultBlock
	rng := rand.New(rand.NewPCG(1, 2))
	acc, rej, status, flags := make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
	for q := range n {
		acc[q], rej[q] = int32(50+rng.IntN(100)), int32(rng.IntN(10))
	}
	r := &run{ex: &executor{plan: &ode.Plan{InitEvals: 2, TrialEvals: 6}}, lazyT: true, lensOut: true, meshLen: make([]int, n),
		res: &ode.Result{Status: make([]ode.Status, n), Stiff: make([]bool, n),
			Stats: ode.Stats{Accepted: make([]int, n), Rejected: make([]int, n), FieldEvals: make([]int, n)}}}
	c0 := cputime.Process()
	for b.Loop() {
		r.scatterStatus(0, 0, n, status, acc, rej, flags, nil, reals{})
	}
	b.ReportMetric(float64(cputime.Process()-c0)/float64(b.N)/n, "cpu-ns/trajectory")
}

// deviceWorkBackend is the hostWork backend on a device's timeline: its
// engine kernels run asynchronously for slowKernel (about an H100's
// Lorenz gradient with the record at 32,768 trajectories) from their
// launch, and its copies take busRate's bus once the work queued before
// them is done, the copy's thread held (spinning and yielding its
// processor, as busWork's). The host work a batch does between a launch
// and its wait (a compare run ahead of the launch, the end times:
// endsInBatch) overlaps the kernel as on a device; a call's time less
// the kernels' and the copies' (the trace's) is the host's part that
// does not.
type deviceWorkBackend struct{ hostWorkBackend }

func (b *deviceWorkBackend) batch(f func(q queue) error) error { return f(&deviceWorkQueue{}) }

// deviceWorkQueue is the queue of deviceWorkBackend's batches: busy is
// when the work queued so far ends, kernel the kernels' time.
type deviceWorkQueue struct {
	hostWorkQueue
	busy   time.Time
	kernel time.Duration
}

// spinUntil waits until t, yielding its processor as it spins.
func spinUntil(t time.Time) {
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}

func (q *deviceWorkQueue) queued(d time.Duration) {
	if now := time.Now(); now.After(q.busy) {
		q.busy = now
	}
	q.busy = q.busy.Add(d)
}

func (q *deviceWorkQueue) bus(bytes int) time.Duration {
	return time.Duration(float64(bytes) / busRate * 1e9)
}

func (q *deviceWorkQueue) enqueue(_ backendKernel, _, _, _ int, args []uint64) error {
	if len(args) == numArgs {
		q.queued(slowKernel)
		q.kernel += slowKernel
	}
	return nil
}

func (q *deviceWorkQueue) write(_ uint64, src []byte) error {
	q.queued(q.bus(len(src)))
	spinUntil(q.busy)
	return nil
}

func (q *deviceWorkQueue) writeQueued(_ uint64, src []byte) error {
	q.queued(q.bus(len(src)))
	return nil
}

func (q *deviceWorkQueue) read(dst []byte, _ uint64) error {
	q.queued(q.bus(len(dst)))
	spinUntil(q.busy)
	return nil
}

func (q *deviceWorkQueue) elapsed(clock) (time.Duration, error) {
	spinUntil(q.busy)
	d := q.kernel
	q.kernel = 0
	return d, nil
}

func (q *deviceWorkQueue) readAfter(_ clock, dst [][]byte, _ []uint64) (time.Duration, error) {
	bytes := 0
	for _, d := range dst {
		bytes += len(d)
	}
	spinUntil(q.busy)
	start := time.Now()
	q.queued(q.bus(bytes))
	spinUntil(q.busy)
	return time.Since(start), nil
}

var deviceWork = &Engine{name: "cuda-devicework", prec: Float64, be: &deviceWorkBackend{hostWorkBackend{nullBackend: nullBackend{newHostBackend(1 << 50)}}}}

func init() { ode.Register(deviceWork) }

// BenchmarkGPUCallWorkers times whole Grad calls of 32,768 Lorenz
// trajectories on the device (BenchmarkGPUCallBound's protocol, inputs
// reused or staged every call: "-noreuse") with the host work's
// goroutines capped: w=k runs the staging's and the results' blocks on
// at most k (Tuning.hostWorkers; "all" GOMAXPROCS, the default); "split"
// copies the results back in two parts (splitAt, from 16,384 here; by
// default from defaultSplitMin), the first part's blocks written while
// the second is copied on GOMAXPROCS−1 goroutines or on heads=k
// (Tuning.headsWorkers: heads=1 the calling goroutine alone, no wake-up
// of the pool during the copy); "endsafter" writes the end times in the
// scatter after the copy (Tuning.endsInScatter) instead of in the batch
// as the kernel runs. host-ms is the call less its kernel and copies,
// bound-ms the bound (reportCallBound). Run with -count to
// alternate them:
//
//	cuda.test -test.run '^$' -test.bench 'GPUCallWorkers' -test.benchtime 200x -test.count 3
func BenchmarkGPUCallWorkers(b *testing.B) {
	needGPUEngine(b)
	callWorkersCases(b, func(b *testing.B, tun Tuning) { reportCallBound(b, timeGradCalls(b, 1<<15, tun, 0)) })
}

// BenchmarkCallWorkersDevice is BenchmarkGPUCallWorkers on the backend
// whose kernel and copies take a device's time (deviceWork: slowKernel,
// busRate) on this host's cores:
//
//	go test ./cuda -run '^$' -bench 'CallWorkersDevice' -benchtime 400x -count 4 -cpu 2
func BenchmarkCallWorkersDevice(b *testing.B) {
	callWorkersCases(b, func(b *testing.B, tun Tuning) {
		reportCallBound(b, timeGradCallsOn(b, deviceWork.name, 1<<15, tun, 0))
	})
}

// callWorkersCases runs f as BenchmarkGPUCallWorkers' sub-benchmarks.
func callWorkersCases(b *testing.B, f func(b *testing.B, tun Tuning)) {
	const split = 1 << 14
	for _, c := range []struct {
		name string
		tun  Tuning
	}{
		{"one/all", Tuning{}},
		{"one/all-endsafter", Tuning{endsInScatter: true}},
		{"one/w=1", Tuning{hostWorkers: 1}},
		{"one/w=2", Tuning{hostWorkers: 2}},
		{"one/w=4", Tuning{hostWorkers: 4}},
		{"one/w=8", Tuning{hostWorkers: 8}},
		{"split/all", Tuning{splitMin: split}},
		{"split/heads=1", Tuning{splitMin: split, headsWorkers: 1}},
		{"split/heads=1/w=4", Tuning{splitMin: split, headsWorkers: 1, hostWorkers: 4}},
		{"one/all-noreuse", Tuning{NoInputReuse: true}},
		{"one/w=1-noreuse", Tuning{NoInputReuse: true, hostWorkers: 1}},
		{"one/w=4-noreuse", Tuning{NoInputReuse: true, hostWorkers: 4}},
	} {
		b.Run(c.name, func(b *testing.B) { f(b, c.tun) })
	}
}

// BenchmarkCallBoundDevice is BenchmarkGPUCallBound at 32,768
// trajectories on the backend whose kernel and copies take a device's
// time (deviceWork: slowKernel, busRate), stage and stage-noreuse, the
// end times written in the batch as the kernel runs (the default) and in
// the scatter after the copy ("-endsafter": Tuning.endsInScatter), beside
// the bound (kernel-ms + 1.3·copy-ms + 0.2 ms) and host-ms (the call less
// the kernel and the copies). Run with -count to alternate them:
//
//	go test ./cuda -run '^$' -bench 'CallBoundDevice' -benchtime 400x -count 6 -cpu 2
func BenchmarkCallBoundDevice(b *testing.B) {
	for _, off := range []bool{false, true} {
		for _, after := range []bool{false, true} {
			name := "n=32768/stage"
			if off {
				name += "-noreuse"
			}
			if after {
				name += "-endsafter"
			}
			b.Run(name, func(b *testing.B) {
				reportCallBound(b, timeGradCallsOn(b, deviceWork.name, 1<<15, Tuning{NoInputReuse: off, endsInScatter: after}, 0))
			})
		}
	}
}

// BenchmarkGPUCallChangedP times whole Grad calls of 32,768 Lorenz
// trajectories on the device (BenchmarkGPUCallBound's protocol) whose
// P changes in place before every call (ρ of every trajectory moved by
// one part in 10⁹, in turn up and back), with input reuse on (the
// default: a sweep's P rests from its second change, staged and sent
// alone, Y0's row and T1 kept on the device) and off ("-noreuse": every
// input staged and sent, BenchmarkGPUCallBound's stage-noreuse), beside
// the bound (reportCallBound):
//
//	cuda.test -test.run '^$' -test.bench 'GPUCallChangedP' -test.benchtime 200x -test.count 3
func BenchmarkGPUCallChangedP(b *testing.B) {
	needGPUEngine(b)
	for _, off := range []bool{false, true} {
		name := "n=32768/changed-p"
		if off {
			name += "-noreuse"
		}
		b.Run(name, func(b *testing.B) {
			reportCallBound(b, timeChangedP(b, "cuda", 1<<15, Tuning{NoInputReuse: off}))
		})
	}
}

// BenchmarkCallChangedPHost is BenchmarkGPUCallChangedP on the backend
// whose copies and kernels take no time (hostWork): the host's part,
// with cpu-ms (the process's CPU time a call) and stage-ms:
//
//	go test ./cuda -run '^$' -bench 'CallChangedPHost' -benchtime 400x -cpu 1
func BenchmarkCallChangedPHost(b *testing.B) {
	for _, off := range []bool{false, true} {
		name := "n=32768/changed-p"
		if off {
			name += "-noreuse"
		}
		b.Run(name, func(b *testing.B) {
			s := timeChangedP(b, hostWork.name, 1<<15, Tuning{NoInputReuse: off})
			b.ReportMetric(float64(s.Stage)/1e6/float64(b.N), "stage-ms/op")
			b.ReportMetric(float64(s.Scatter)/1e6/float64(b.N), "scatter-ms/op")
		})
	}
}

// timeChangedP is timeGradCallsOn (Gradient.Omit 0) with P changed in
// place before each call, untimed: ρ of every trajectory times 1 + 1e-9
// on odd calls and back to its value on even ones; missed/op counts the
// launches run ahead of a compare that found P changed (their kernel
// and copies run twice).
func timeChangedP(b *testing.B, engine string, n int, tun Tuning) TraceStats {
	c := lorenzCallCase(n)
	c.set.RelTol, c.set.AbsTol = 1e-6, 1e-9
	c.set.Engine = tuned(b, engine, tun)
	sv, err := ode.NewSolver(c.prob.Field, &c.set)
	if err != nil {
		b.Fatal(err)
	}
	rho := make([]float64, n)
	for i := range rho {
		rho[i] = c.prob.P[3*i+1]
	}
	change := func(k int) {
		for i, r := range rho {
			if k%2 == 1 {
				r *= 1 + 1e-9
			}
			c.prob.P[3*i+1] = r
		}
	}
	var g ode.Gradient
	for k := range 4 { // the storage; P's rest begins
		change(k)
		if _, err := sv.Grad(&g, &c.prob, c.loss, nil); err != nil {
			b.Fatal(err)
		}
	}
	var tr Trace
	ctx := WithTrace(context.Background(), &tr)
	var cpu time.Duration // (the calls', not the changes')
	b.ResetTimer()
	for k := range b.N {
		b.StopTimer()
		change(k)
		b.StartTimer()
		c0 := cputime.Process()
		if _, err := sv.GradContext(ctx, &g, &c.prob, c.loss, nil); err != nil {
			b.Fatal(err)
		}
		cpu += cputime.Process() - c0
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "cpu-ms/op")
	s := tr.Stats()
	b.ReportMetric(float64(s.Kernel)/1e6/float64(b.N), "kernel-ms/op")
	b.ReportMetric(float64(s.Transfer)/1e6/float64(b.N), "copy-ms/op")
	b.ReportMetric(float64(s.Upload)/1e3/float64(b.N), "up-KB/op")
	b.ReportMetric(float64(s.Reused)/1e3/float64(b.N), "reused-KB/op")
	b.ReportMetric(float64(s.AheadMissed)/float64(b.N), "missed/op")
	return s
}

// TestStripLoopsAVX checks stripCounts' and stripRejected's AVX kernels
// (countsAVX, rejectedAVX: four trajectories a round, the rest in Go)
// against their Go loops (useAVX false), value for value, on counts of
// the whole int32 range (negative ones sign-extended; the maximum at
// least 0) and field evaluations whose products wrap around as Go's int
// arithmetic does (e1 up to 2^32−1; larger e1 take the Go loop), for
// strips of every length around the rounds of four, with and without
// the mesh's Len.
func TestStripLoopsAVX(t *testing.T) {
	if !haveAVX {
		t.Skip("no AVX kernels on this machine")
	}
	defer func(u bool) { useAVX = u }(useAVX)
	rng := rand.New(rand.NewPCG(48, 6))
	for _, m := range []int{1, 3, 4, 5, 8, 11, 64, 2047, 2048} {
		for _, c := range []struct {
			wide   bool // counts of the whole int32 range
			noLens bool
			e0, e1 int
		}{{false, false, 2, 6}, {false, true, 1, 7}, {true, false, -5, 1<<32 - 1}, {true, true, 1 << 40, 1 << 31}, {true, false, 3, 1 << 32}} {
			acc, rej := make([]int32, m), make([]int32, m)
			for j := range m {
				acc[j], rej[j] = int32(rng.IntN(5000)), int32(rng.IntN(300))
				if c.wide {
					acc[j], rej[j] = int32(rng.Uint32()), int32(rng.Uint32())
				}
			}
			type out struct {
				accepted, lens, rejected, evals []int
				longest                         int
			}
			var got [2]out
			for k, avx := range []bool{false, true} {
				useAVX = avx
				o := &got[k]
				o.accepted, o.rejected, o.evals = make([]int, m), make([]int, m), make([]int, m)
				if !c.noLens {
					o.lens = make([]int, m)
				}
				o.longest = stripCounts(o.accepted, o.lens, acc)
				stripRejected(o.rejected, o.evals, o.accepted, rej, c.e0, c.e1)
			}
			g, w := got[1], got[0]
			if g.longest != w.longest || !slices.Equal(g.accepted, w.accepted) || !slices.Equal(g.lens, w.lens) ||
				!slices.Equal(g.rejected, w.rejected) || !slices.Equal(g.evals, w.evals) {
				t.Errorf("m %d, %+v: the AVX kernels' strips differ from the Go loops' (longest %d against %d)", m, c, g.longest, w.longest)
			}
		}
	}
}

// TestOrInt32AVX checks orInt32's AVX kernel (orAVX, sixteen values a
// round, the rest in Go) against its Go loop (useAVX false) for arrays of
// every length around the kernel's rounds, with a single bit set at each
// position of the shorter ones (every bit of the int32 in turn) and
// random values.
func TestOrInt32AVX(t *testing.T) {
	if !haveAVX {
		t.Skip("no AVX kernels on this machine")
	}
	defer func(u bool) { useAVX = u }(useAVX)
	rng := rand.New(rand.NewPCG(48, 7))
	or := func(x []int32, avx bool) int32 { useAVX = avx; return orInt32(x) }
	for _, m := range []int{1, 15, 16, 17, 31, 32, 33, 48, 100, 2048} {
		x := make([]int32, m)
		for at := range min(m, 40) {
			clear(x)
			x[at] = int32(uint32(1) << (at % 32))
			if g, w := or(x, true), or(x, false); g != w || w == 0 {
				t.Errorf("m %d, bit %d at %d: %#x, want %#x", m, at%32, at, g, w)
			}
		}
		for k := range x {
			x[k] = int32(rng.Uint32()) & int32(rng.Uint32()) & int32(rng.Uint32())
		}
		if g, w := or(x, true), or(x, false); g != w {
			t.Errorf("m %d, random: %#x, want %#x", m, g, w)
		}
	}
}
