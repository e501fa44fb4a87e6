// Package par runs work on the library's one pool of goroutines, shared by
// the CPU executor (package tape) and the ODE engine (package ode), so that
// nested and concurrent users never oversubscribe the machine.
//
// A Group hands out task indices through an atomic counter to the calling
// goroutine and to pool goroutines recruited without blocking: a pool
// goroutine that is busy is not waited for, and the caller itself always
// works, so Run never deadlocks, even when called from inside a task.
package par

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gradsolve-go/gradsolve/internal/buf"
)

var (
	once  sync.Once
	queue chan ticket
)

// ticket asks a pool goroutine to help a Group's Run: gen 0 one of Run's
// (the Run waits for it), else one of RunShort's numbered gen, which it
// may join only while that Run is open (Group.join).
type ticket struct {
	g   *Group
	gen uint32
}

func start() {
	once.Do(func() {
		np := runtime.GOMAXPROCS(0)
		queue = make(chan ticket)
		var ready sync.WaitGroup
		ready.Add(np)
		for i := 0; i < np; i++ {
			go func() {
				ready.Done()
				for t := range queue {
					if t.gen != 0 {
						t.g.join(t.gen)
						continue
					}
					t.g.work(int(t.g.ids.Add(1)))
					t.g.wg.Done()
				}
			}()
		}
		ready.Wait()
	})
}

// Workers returns the number of goroutines a Run uses for want (0 or
// less: GOMAXPROCS) and n tasks: at most n, at least 1.
func Workers(want, n int) int {
	if want <= 0 {
		want = runtime.GOMAXPROCS(0)
	}
	return max(1, min(want, n))
}

// Group runs the tasks of one Run at a time. Its zero value is ready to
// use; reusing one Group for repeated Runs allocates nothing.
type Group struct {
	next  atomic.Int64
	ids   atomic.Int32
	n     int64
	f     func(worker, task int)
	wg    sync.WaitGroup
	pmu   sync.Mutex
	panic any
	// RunShort's: its number (gen) in the high 32 bits, shortClosed once
	// its caller has found no task left, and the goroutines that joined
	// it and have not left in the low bits; left takes the last one's
	// word where the caller waits for it.
	short atomic.Uint64
	left  chan struct{}
}

const (
	shortClosed = 1 << 31
	shortActive = shortClosed - 1
)

func (g *Group) work(id int) {
	defer func() {
		if r := recover(); r != nil {
			g.pmu.Lock()
			if g.panic == nil {
				g.panic = r
			}
			g.pmu.Unlock()
			g.next.Store(g.n) // stop handing out tasks
		}
	}()
	for {
		t := g.next.Add(1) - 1
		if t >= g.n {
			return
		}
		g.f(id, int(t))
	}
}

// Run calls f(worker, task) for every task in [0, n), on up to workers
// goroutines (see Workers) including the caller, and returns when all
// calls have returned. Tasks are handed out in increasing order as
// goroutines become free. worker is in [0, workers): calls with the same
// worker never overlap, so f may index per-worker scratch with it. A panic
// in f stops the handing out of tasks and is re-raised in the caller.
// A Group must not be used by two Runs at once.
func (g *Group) Run(n, workers int, f func(worker, task int)) {
	if n <= 0 {
		return
	}
	nw := Workers(workers, n)
	g.next.Store(0)
	g.ids.Store(0)
	g.n, g.f, g.panic = int64(n), f, nil
	if nw > 1 {
		start()
		for id := 1; id < nw; id++ {
			g.wg.Add(1)
			select {
			case queue <- ticket{g: g}:
			default:
				g.wg.Done() // no idle pool goroutine: the others share its tasks
			}
		}
	}
	g.work(0)
	g.wg.Wait()
	g.f = nil
	if p := g.panic; p != nil {
		g.panic = nil
		panic(p)
	}
}

// RunShort is Run, but it returns once every task has returned: a pool
// goroutine asked to help that has not begun by then is not waited for
// (it finds the Run closed and takes nothing). Run waits for every
// goroutine it asked, and where the pool's threads have parked they wake
// one after the other (Go's scheduler starts the next thread once the
// one before runs): a Run of tens of µs of work on a many-core host
// waits for the last wake-up, though the first goroutines have done the
// tasks. Tasks, workers and panics are as Run's; a goroutine's worker is
// in [0, workers). A Group must not be used by two Runs at once.
func (g *Group) RunShort(n, workers int, f func(worker, task int)) {
	if n <= 0 {
		return
	}
	nw := Workers(workers, n)
	if nw == 1 {
		for t := range n {
			f(0, t)
		}
		return
	}
	start()
	if g.left == nil {
		g.left = make(chan struct{}, 1)
	}
	gen := uint32(g.short.Load()>>32) + 1
	if gen == 0 {
		gen = 1 // (0 is Run's)
	}
	g.next.Store(0)
	g.ids.Store(0)
	g.n, g.f, g.panic = int64(n), f, nil
	g.short.Store(uint64(gen) << 32) // open, none joined
	for range nw - 1 {
		select {
		case queue <- ticket{g: g, gen: gen}:
		default: // no idle pool goroutine: the others share its tasks
		}
	}
	g.work(0)
	// No task is left to hand out: close the Run to goroutines yet to
	// join, and wait for those that did (they hold tasks, or are about to
	// find none).
	if g.short.Or(shortClosed)&shortActive != 0 {
		<-g.left
	}
	g.f = nil
	if p := g.panic; p != nil {
		g.panic = nil
		panic(p)
	}
}

// join runs a pool goroutine's part of RunShort number gen, if that Run
// is still open: it has not been closed (nor has the Group gone on to a
// later Run). The last to leave a closed Run tells its caller.
func (g *Group) join(gen uint32) {
	for {
		s := g.short.Load()
		if uint32(s>>32) != gen || s&shortClosed != 0 {
			return
		}
		if g.short.CompareAndSwap(s, s+1) {
			break
		}
	}
	g.work(int(g.ids.Add(1)))
	if s := g.short.Add(^uint64(0)); s&shortClosed != 0 && s&shortActive == 0 {
		g.left <- struct{}{}
	}
}

// RunShort is a Group's RunShort on a Group of its own (Run's pool).
func RunShort(n, workers int, f func(worker, task int)) {
	runPooled(n, workers, f, (*Group).RunShort)
}

// Ranges calls f(lo, hi) for the ranges [0, n) splits into of size
// each (lo a multiple of it, the last range shorter), as Run's tasks on
// all cores: one range runs on the caller's goroutine alone.
func Ranges(n, size int, f func(lo, hi int)) {
	Run((n+size-1)/size, 0, func(_, b int) { f(b*size, min(n, (b+1)*size)) })
}

// Run is a Group's Run on a Group of its own: where one goroutine does
// all the tasks (n is 1, or workers or GOMAXPROCS 1), a loop on the
// caller's; else a Group from a pool (a Run allocates nothing of its
// own).
func Run(n, workers int, f func(worker, task int)) {
	runPooled(n, workers, f, (*Group).Run)
}

// runPooled runs f's n tasks with run on a Group from Run's pool, or in
// a loop on the caller's goroutine where one goroutine does them all.
func runPooled(n, workers int, f func(worker, task int), run func(g *Group, n, workers int, f func(worker, task int))) {
	if Workers(workers, n) == 1 {
		for t := range n {
			f(0, t)
		}
		return
	}
	g := groups.Get().(*Group)
	defer groups.Put(g)
	run(g, n, workers, f)
}

// groups are the Groups of Run: a Group is free again once its Run
// returns (the pool goroutines are done with it: wg).
var groups = sync.Pool{New: func() any { return new(Group) }}

// Block is the elements per task of Copy and Repeat: small arrays (up to
// one block) are handled on the calling goroutine alone.
const Block = 1 << 16

// FirstSerial is the length up to which First examines [0, n) on the
// calling goroutine alone (a scan of that many float64 values for finite
// ones takes about 25 µs on one core from cache); FirstTask is the
// smallest task of a longer one (6–8 µs), far above what handing a task
// out costs. Measured by BenchmarkFirstSplit: on a 2-core VM whose cores
// share about 20 GB/s, splitting gains nothing at any length, so the
// limits are those of a many-core host, to be checked there
// (-test.cpu 1,16).
const (
	FirstSerial = 1 << 16
	FirstTask   = 1 << 14
)

// First returns the smallest index in [0, n) for which f reports one, or
// -1. f(lo, hi) examines [lo, hi) and returns the first index there it
// finds (or -1). Up to FirstSerial elements it runs on the calling
// goroutine alone; above, [0, n) is split into tasks of at least FirstTask
// elements, about four per goroutine (GOMAXPROCS), run on all cores.
// Every task is examined, so f must not depend on their order. It costs
// one pass over the array with the machine's memory bandwidth, where a
// loop on one goroutine is bound by one core's.
func First(n int, f func(lo, hi int) int) int {
	if n <= FirstSerial {
		return f(0, n)
	}
	t := firstTasks.Get().(*firstRun)
	defer firstTasks.Put(t)
	t.per = firstTask(n, Workers(0, n))
	nt := (n + t.per - 1) / t.per
	t.n, t.f = n, f
	if cap(t.first) < nt {
		t.first = make([]int, nt)
	}
	t.first = t.first[:nt]
	Run(nt, 0, t.task)
	t.f = nil
	for _, i := range t.first {
		if i >= 0 {
			return i
		}
	}
	return -1
}

// firstRun is the state of one First on all cores, kept in firstTasks
// with its task (a method value made once), so that a First allocates
// nothing of its own.
type firstRun struct {
	n, per int
	f      func(lo, hi int) int
	first  []int // per task: the first index it found, or -1
	task   func(worker, task int)
}

func (t *firstRun) run(_, b int) { t.first[b] = t.f(b*t.per, min(t.n, (b+1)*t.per)) }

var firstTasks = sync.Pool{New: func() any {
	t := new(firstRun)
	t.task = t.run
	return t
}}

// firstTask returns the elements per task of First over n elements on
// nw goroutines: about four tasks per goroutine (so that goroutines that
// join late, or are slowed by other work, still share the pass), none
// shorter than FirstTask.
func firstTask(n, nw int) int {
	return max(FirstTask, (n+4*nw-1)/(4*nw))
}

// Copy copies src into dst (as the built-in copy, whose count it
// returns), in blocks of Block elements on all cores where src is longer
// than one block. dst and src must not overlap.
func Copy[T any](dst, src []T) int {
	n := min(len(dst), len(src))
	if n <= Block {
		return copy(dst, src)
	}
	Run((n+Block-1)/Block, 0, func(_, b int) {
		lo, hi := b*Block, min(n, (b+1)*Block)
		copy(dst[lo:hi], src[lo:hi])
	})
	return n
}

// Append returns dst[:0] with src appended, copied as by Copy (dst's
// storage reused where it is large enough).
func Append[T any](dst, src []T) []T {
	if cap(dst) < len(src) {
		dst = make([]T, len(src))
	}
	dst = dst[:len(src)]
	Copy(dst, src)
	return dst
}

// Repeat returns dst[:0] with n copies of v appended (dst's storage
// reused where it is large enough), written in blocks of Block elements
// on all cores where n is longer than one block (buf.Fill): a constant
// array written without reading a source from memory, half the memory
// traffic of a Copy.
func Repeat[T any](dst []T, n int, v T) []T {
	if cap(dst) < n {
		dst = make([]T, n)
	}
	dst = dst[:n]
	if n <= Block {
		buf.Fill(dst, v)
		return dst
	}
	Run((n+Block-1)/Block, 0, func(_, b int) { buf.Fill(dst[b*Block:min(n, (b+1)*Block)], v) })
	return dst
}

// Equal reports whether a and b hold the same values bit for bit (a NaN
// equals the same NaN, -0 does not equal +0): a memory compare, on the
// caller's goroutine up to FirstSerial elements, above in tasks on all
// cores as First splits them (at least FirstTask elements, about four a
// goroutine), which stop at the first that differs. Those longer ones
// are first probed at equalProbes elements spread evenly from the first
// to the last, on the caller's core: arrays that differ in many places
// (a parameter sweep) are told apart without waking the other cores.
// A caller keeping a copy of what it last sent somewhere learns in one
// pass over both whether the new values need sending, and in a few
// loads, mostly, that they do.
// equalProbes is the elements Equal compares before it compares the
// arrays whole.
const equalProbes = 64

func Equal[T ~float32 | ~float64 | ~int | ~int32 | ~int64](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	n := len(a)
	if n == 0 {
		return true
	}
	size := int(unsafe.Sizeof(a[0]))
	ab := unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), n*size)
	bb := unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), n*size)
	if n <= FirstSerial {
		return bytes.Equal(ab, bb)
	}
	for k := range equalProbes {
		i := k * (n - 1) / (equalProbes - 1) * size
		if !bytes.Equal(ab[i:i+size], bb[i:i+size]) {
			return false
		}
	}
	t := equalTasks.Get().(*equalRun)
	defer equalTasks.Put(t)
	t.a, t.b, t.size, t.n = ab, bb, size, n
	t.per = firstTask(n, Workers(0, n))
	t.differs.Store(false)
	Run((n+t.per-1)/t.per, 0, t.task)
	t.a, t.b = nil, nil
	return !t.differs.Load()
}

// EqualSet compares several pairs of arrays as Equal compares one, in one
// pass: the pairs are added (AddEqual), then Equal reports whether every
// pair holds the same values bit for bit. The arrays are probed as
// Equal probes one (equalProbes elements each, on the caller's core),
// then compared in tasks of all of them together in one Run on all cores
// (at least FirstTask elements of 8 bytes each, about four a goroutine),
// which stop at the first that differs; on the caller's goroutine alone
// where all of them together hold at most FirstSerial such elements. A
// repeated call's inputs (a state array and a parameter array, say) thus
// share the cores, where Equal on each in turn compares an array of up
// to FirstSerial elements on one core and wakes the pool once per array.
// Get one with NewEqualSet and give it back with Release, or keep one
// (the zero EqualSet is empty and ready) and empty it with Reset: a set
// reused so allocates nothing. While Equal runs on another goroutine,
// Help lends it the calling one; Begin and Finish are Equal in two
// halves, so that the tasks are out (for Help) before the goroutine that
// finishes the compare runs. (A pooled set goes when a collection
// empties the pool; a caller that compares on every call, as a repeated
// solve's inputs, keeps its own.)
type EqualSet struct {
	a, b    [][]byte
	size    []int
	differs atomic.Bool // a pair of unequal lengths, or a task that found a difference
	tasks   []equalTask
	task    func(worker, task int)

	// The tasks of an Equal on all cores (nt of them) are handed out
	// by next to the Run's goroutines and to Help's caller; done counts
	// those finished, running is set while they may be taken (Help).
	// Reset leaves nt and next: a Help that comes as Equal returns
	// finds none left without reading the tasks.
	nt, next, done atomic.Int64
	running        atomic.Bool
	serial         bool // Begin left the compare to Finish's goroutine alone
}

// equalTask is one task of an EqualSet's Run: bytes [lo, hi) of pair k.
type equalTask struct{ k, lo, hi int }

var equalSets = sync.Pool{New: func() any {
	s := new(EqualSet)
	s.task = s.work
	return s
}}

// NewEqualSet returns an empty EqualSet.
func NewEqualSet() *EqualSet { return equalSets.Get().(*EqualSet) }

// Release empties s and gives it back for a later NewEqualSet; s must not
// be used after.
func (s *EqualSet) Release() {
	s.Reset()
	equalSets.Put(s)
}

// Reset empties s (its storage kept) for new pairs.
func (s *EqualSet) Reset() {
	clear(s.a)
	clear(s.b)
	s.a, s.b, s.size, s.tasks = s.a[:0], s.b[:0], s.size[:0], s.tasks[:0]
	s.differs.Store(false)
}

// AddEqual adds the pair (a, b) to s: s.Equal will report false unless
// they have the same length and hold the same values bit for bit.
func AddEqual[T ~float32 | ~float64 | ~int | ~int32 | ~int64](s *EqualSet, a, b []T) {
	if len(a) != len(b) {
		s.differs.Store(true)
		return
	}
	if len(a) == 0 {
		return
	}
	size := int(unsafe.Sizeof(a[0]))
	s.a = append(s.a, unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), len(a)*size))
	s.b = append(s.b, unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b)*size))
	s.size = append(s.size, size)
}

// Equal reports whether every pair added to s holds the same values bit
// for bit (true for none).
func (s *EqualSet) Equal() bool {
	if known, same := s.Begin(); known {
		return same
	}
	return s.Finish()
}

// Begin is Equal's first half, on the calling goroutine: the probes (a
// few loads an array), and, where the pairs hold more than a goroutine
// compares alone, the tasks made available to Help. It reports whether
// the verdict is known already (a pair of unequal lengths, or a probe
// that differs: same false); else Finish, on any one goroutine, gives
// it, and Help may run tasks from Begin's return to Finish's.
func (s *EqualSet) Begin() (known, same bool) {
	s.serial = false
	if s.differs.Load() {
		return true, false
	}
	total := 0
	for k, a := range s.a {
		b, size := s.b[k], s.size[k]
		n := len(a) / size
		total += len(a)
		if n <= equalProbes {
			continue
		}
		for p := range equalProbes {
			i := p * (n - 1) / (equalProbes - 1) * size
			if !bytes.Equal(a[i:i+size], b[i:i+size]) {
				return true, false
			}
		}
	}
	if total <= 8*FirstSerial {
		s.serial = true // (Finish compares them on its goroutine)
		return false, false
	}
	s.begin(total)
	return false, false
}

// Finish is Equal's second half (after a Begin that did not know the
// verdict): the compare, on all cores where Begin made tasks, with the
// tasks Help's callers took, and the verdict.
func (s *EqualSet) Finish() bool {
	if s.serial {
		for k, a := range s.a {
			if !bytes.Equal(a, s.b[k]) {
				return false
			}
		}
		return true
	}
	return s.runTasks()
}

// runTasks runs the tasks begin made available on all cores, waits for
// those Help's caller took, and returns the verdict.
func (s *EqualSet) runTasks() bool {
	Run(Workers(0, len(s.tasks)), 0, s.task)
	s.running.Store(false)
	// The last tasks taken may still run on Help's goroutine.
	for s.done.Load() < s.nt.Load() {
		runtime.Gosched()
	}
	return !s.differs.Load()
}

// begin splits the pairs (total bytes) into Equal's tasks and makes them
// available: to the Run's goroutines, each of which takes tasks until
// none is left (work), and to Help's caller.
func (s *EqualSet) begin(total int) {
	// Tasks of per bytes (a multiple of every element size), none
	// across two pairs.
	per := 8 * firstTask(total/8, Workers(0, total/8))
	s.tasks = s.tasks[:0]
	for k, a := range s.a {
		for lo := 0; lo < len(a); lo += per {
			s.tasks = append(s.tasks, equalTask{k, lo, min(len(a), lo+per)})
		}
	}
	if s.task == nil {
		s.task = s.work // (a zero EqualSet: once)
	}
	s.nt.Store(int64(len(s.tasks)))
	s.next.Store(0)
	s.done.Store(0)
	s.running.Store(true)
}

// Help runs tasks of an Equal of s in progress on another goroutine, on
// the calling goroutine, until none is left to take, and returns how
// many it ran: none where no Equal is in progress (not yet begun its
// tasks, all of them taken, or comparing on one goroutine). The verdict
// is Equal's either way. A goroutine with time to spare while another
// compares (a launch's, while the device runs its kernels) so shortens
// the compare by what the pool's goroutines take to wake. Help must not
// overlap a later Equal of s (new pairs after a Reset): it may come
// after the Equal it helps has returned (it then runs nothing), but not
// once another Equal of s has begun.
func (s *EqualSet) Help() int {
	if !s.running.Load() {
		return 0
	}
	return s.take()
}

// work is a goroutine of Equal's Run: it takes tasks (take).
func (s *EqualSet) work(_, _ int) { s.take() }

// take runs the tasks next hands out until none is left, and returns
// how many it ran.
func (s *EqualSet) take() int {
	nt := s.nt.Load()
	ran := 0
	for {
		k := s.next.Add(1) - 1
		if k >= nt {
			return ran
		}
		s.run(int(k))
		ran++
		s.done.Add(1)
	}
}

func (s *EqualSet) run(k int) {
	if s.differs.Load() {
		return
	}
	t := s.tasks[k]
	if !bytes.Equal(s.a[t.k][t.lo:t.hi], s.b[t.k][t.lo:t.hi]) {
		s.differs.Store(true)
	}
}

// equalRun is the state of one Equal on all cores, kept in equalTasks
// with its task (a method value made once), so that an Equal allocates
// nothing.
type equalRun struct {
	a, b         []byte
	size, n, per int
	differs      atomic.Bool
	task         func(worker, task int)
}

func (t *equalRun) run(_, k int) {
	if t.differs.Load() {
		return
	}
	lo, hi := k*t.per*t.size, min(t.n, (k+1)*t.per)*t.size
	if !bytes.Equal(t.a[lo:hi], t.b[lo:hi]) {
		t.differs.Store(true)
	}
}

var equalTasks = sync.Pool{New: func() any {
	t := new(equalRun)
	t.task = t.run
	return t
}}
