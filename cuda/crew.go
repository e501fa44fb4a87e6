package cuda

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// crew is a set of goroutines an executor keeps for the result blocks of
// its launches whose results come back in one copy (Tuning.crew, off by
// default: for the device's comparison, BenchmarkGPUCallWorkers' crew
// rows). A par.Run after the copy readies the pool's goroutines at once,
// but the scheduler wakes their threads one after another, each by the
// one before (tens of µs on a many-core host, against a scatter of tens
// of µs a core at 32,768 Lorenz trajectories). The crew is woken as the
// copy starts (wake, from the batch), so that its goroutines are awake
// and spinning when the results are in; they take the blocks' tasks as
// run posts them, and park again once the tasks are taken (or after
// crewSpin without one). What it costs is their spinning: about the
// copy's time on each of them.
type crew struct {
	n     int           // goroutines, besides the caller of run
	start sync.Once     // the goroutines, started on first use
	wakes chan struct{} // one token a goroutine to wake
	busy  atomic.Bool   // a launch holds the crew (from wake to run's end)
	job   atomic.Pointer[crewJob]
}

// crewSpin is how long a woken crew goroutine spins for a job before it
// parks again: past a 32,768-trajectory copy back (0.2 ms) and the
// hand-over to the scatter.
const crewSpin = time.Millisecond

// crewJob is one run's tasks: next hands them out, done counts those
// finished.
type crewJob struct {
	next, done atomic.Int64
	n          int64
	f          func(task int)
	mu         sync.Mutex
	panic      any
}

// newCrew returns a crew of n goroutines (started on first wake).
func newCrew(n int) *crew { return &crew{n: n} }

// wake takes the crew for a launch (false where another launch holds it,
// or it has no goroutines) and wakes its goroutines, which spin for
// crewSpin waiting for run's tasks. A launch that woke the crew calls run
// or release.
func (c *crew) wake() bool {
	if c == nil || c.n <= 0 || !c.busy.CompareAndSwap(false, true) {
		return false
	}
	c.start.Do(func() {
		c.wakes = make(chan struct{}, c.n)
		for range c.n {
			go c.member()
		}
	})
	for range c.n {
		select {
		case c.wakes <- struct{}{}:
		default: // (a goroutine still spinning from the last wake)
		}
	}
	return true
}

// stop ends the crew's goroutines (its executor is unreachable: no
// launch wakes it again).
func (c *crew) stop() {
	c.start.Do(func() {}) // (never started: none to stop, none to start)
	if c.wakes != nil {
		close(c.wakes)
	}
}

// release gives the crew back without a run.
func (c *crew) release() { c.busy.Store(false) }

// member is a crew goroutine: woken, it spins until a job is posted,
// runs its tasks and parks again (at once: the spinning is for the copy
// only), or parks after crewSpin without one.
func (c *crew) member() {
	for range c.wakes {
		for start := time.Now(); time.Since(start) < crewSpin; runtime.Gosched() {
			if j := c.job.Load(); j != nil && j.next.Load() < j.n {
				j.work()
				break
			}
		}
	}
}

// work runs the job's tasks until none is left.
func (j *crewJob) work() {
	for {
		t := j.next.Add(1) - 1
		if t >= j.n {
			return
		}
		j.task(int(t))
	}
}

// task runs task t, a panic kept for run to raise again.
func (j *crewJob) task(t int) {
	defer func() {
		if p := recover(); p != nil {
			j.mu.Lock()
			if j.panic == nil {
				j.panic = p
			}
			j.mu.Unlock()
		}
		j.done.Add(1)
	}()
	j.f(t)
}

// run calls f(task) for every task in [0, n) on the calling goroutine
// and the crew's woken ones, returns when all have returned, and gives
// the crew back (wake took it).
func (c *crew) run(n int, f func(task int)) {
	defer c.release()
	j := &crewJob{n: int64(n), f: f}
	c.job.Store(j)
	j.work()
	for j.done.Load() < j.n {
		runtime.Gosched() // (the crew's last tasks, under way)
	}
	c.job.Store(nil)
	if j.panic != nil {
		panic(j.panic)
	}
}
