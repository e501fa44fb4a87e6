package par

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRun checks that every task runs exactly once, that calls with the
// same worker never overlap, and that nested Runs (a task that runs a
// Group of its own) finish.
func TestRun(t *testing.T) {
	for _, c := range []struct{ n, workers int }{{0, 4}, {1, 4}, {7, 1}, {100, 3}, {1000, 0}} {
		counts := make([]atomic.Int32, c.n)
		busy := make([]atomic.Bool, Workers(c.workers, c.n))
		var overlap atomic.Bool
		Run(c.n, c.workers, func(w, task int) {
			if !busy[w].CompareAndSwap(false, true) {
				overlap.Store(true)
			}
			counts[task].Add(1)
			if task%10 == 0 {
				var inner atomic.Int32
				Run(5, 2, func(_, _ int) { inner.Add(1) })
				if inner.Load() != 5 {
					t.Errorf("nested Run ran %d tasks, want 5", inner.Load())
				}
			}
			busy[w].Store(false)
		})
		for i := range counts {
			if got := counts[i].Load(); got != 1 {
				t.Errorf("n %d, workers %d: task %d ran %d times, want once", c.n, c.workers, i, got)
			}
		}
		if overlap.Load() {
			t.Errorf("n %d, workers %d: two calls with the same worker overlapped", c.n, c.workers)
		}
	}
}

// TestRunPanic checks that a panic in a task reaches the caller and that
// the Group can be used again.
func TestRunPanic(t *testing.T) {
	var g Group
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
		}()
		g.Run(50, 4, func(_, task int) {
			if task == 17 {
				panic("boom")
			}
		})
		t.Error("Run returned normally after a panic")
	}()
	var mu sync.Mutex
	seen := 0
	g.Run(10, 4, func(_, _ int) { mu.Lock(); seen++; mu.Unlock() })
	if seen != 10 {
		t.Errorf("after a panic: %d tasks ran, want 10", seen)
	}
}

// TestRunShort checks RunShort: every task runs exactly once and has
// returned when it returns, calls with the same worker never overlap and
// their workers lie in [0, workers), a panic reaches the caller, and a
// Group's Runs and RunShorts in quick succession (tasks of no work, so
// that the pool's goroutines come late and find a later Run open on the
// same Group) keep to all of that. A goroutine that joined a Run after
// it closed, or a later Run than its own, would run a task twice or run
// as a worker past the Run's last.
func TestRunShort(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 49))
	var g Group
	for round := range 2000 {
		n, workers := rng.IntN(40), 1+rng.IntN(6)
		if round%50 == 0 {
			n = 100 // tasks of 20 µs: the pool's goroutines join
		}
		counts := make([]atomic.Int32, n)
		done := make([]atomic.Bool, n)
		busy := make([]atomic.Bool, Workers(workers, n))
		var bad atomic.Value
		f := func(w, task int) {
			if w < 0 || w >= len(busy) {
				bad.Store(fmt.Sprintf("worker %d of %d", w, len(busy)))
				return
			}
			if !busy[w].CompareAndSwap(false, true) {
				bad.Store(fmt.Sprintf("worker %d twice at once", w))
			}
			counts[task].Add(1)
			for s := time.Now(); n == 100 && time.Since(s) < 20*time.Microsecond; {
			}
			done[task].Store(true)
			busy[w].Store(false)
		}
		if round%3 == 2 {
			g.Run(n, workers, f)
		} else {
			g.RunShort(n, workers, f)
		}
		if b := bad.Load(); b != nil {
			t.Fatalf("round %d (n %d, workers %d): %v", round, n, workers, b)
		}
		for i := range counts {
			if got := counts[i].Load(); got != 1 || !done[i].Load() {
				t.Fatalf("round %d (n %d, workers %d): task %d ran %d times (returned: %v), want once, returned", round, n, workers, i, got, done[i].Load())
			}
		}
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want boom", r)
			}
		}()
		RunShort(50, 4, func(_, task int) {
			if task == 17 {
				panic("boom")
			}
		})
		t.Error("RunShort returned normally after a panic")
	}()
	// A pool goroutine's ticket of an earlier Run, taken while a later
	// one runs, and one of a Run that has closed, take nothing.
	var h Group
	h.RunShort(8, 2, func(_, _ int) {})
	stale := uint32(h.short.Load() >> 32)
	h.RunShort(8, 2, func(_, task int) {
		if task == 0 {
			ids := h.ids.Load()
			h.join(stale)
			if h.ids.Load() != ids {
				t.Error("a ticket of an earlier RunShort joined a later one")
			}
		}
	})
	ids := h.ids.Load()
	h.join(uint32(h.short.Load() >> 32))
	if h.ids.Load() != ids || len(h.left) != 0 {
		t.Error("a ticket joined a RunShort that had returned")
	}
	var seen atomic.Int32
	g.RunShort(10, 4, func(_, _ int) { seen.Add(1) })
	if seen.Load() != 10 {
		t.Errorf("after a panic: %d tasks ran, want 10", seen.Load())
	}
}

// TestGroupAllocs checks that reusing a Group allocates nothing, in Run
// and in RunShort.
func TestGroupAllocs(t *testing.T) {
	var g Group
	var sum atomic.Int64
	f := func(_, task int) { sum.Add(int64(task)) }
	g.Run(64, 2, f)
	if a := testing.AllocsPerRun(20, func() { g.Run(64, 2, f) }); a != 0 {
		t.Errorf("Group.Run allocates %v times, want 0", a)
	}
	g.RunShort(64, 2, f)
	if a := testing.AllocsPerRun(20, func() { g.RunShort(64, 2, f) }); a != 0 {
		t.Errorf("Group.RunShort allocates %v times, want 0", a)
	}
}

// TestFirstCopy checks First against a plain loop, Copy/Append against
// the built-in copy and Repeat against slices.Repeat, around the block
// boundaries.
func TestFirstCopy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, Block - 1, Block, Block + 1, 3*Block + 17} {
		src := make([]int, n)
		for i := range src {
			src[i] = rng.IntN(1 << 20)
		}
		for _, mark := range []int{-1, 0, n / 2, n - 1} {
			x := append([]int(nil), src...)
			want := -1
			if mark >= 0 && n > 0 {
				x[mark] = -5
				if mark+1 < n {
					x[n-1] = -5 // a later hit must not win
				}
				want = mark
			}
			got := First(n, func(lo, hi int) int {
				for i := lo; i < hi; i++ {
					if x[i] < 0 {
						return i
					}
				}
				return -1
			})
			if got != want {
				t.Errorf("n=%d mark=%d: First = %d, want %d", n, mark, got, want)
			}
		}
		dst := make([]int, n)
		if c := Copy(dst, src); c != n || !slices.Equal(dst, src) {
			t.Errorf("n=%d: Copy copied %d, equal %v", n, c, slices.Equal(dst, src))
		}
		small := make([]int, 3, 3)
		if a := Append(small, src); !slices.Equal(a, src) {
			t.Errorf("n=%d: Append differs", n)
		}
		big := make([]int, 0, n+5)
		if a := Append(big, src); !slices.Equal(a, src) || (n > 0 && &a[0] != &big[:1][0]) {
			t.Errorf("n=%d: Append did not reuse a large enough dst", n)
		}
		want := slices.Repeat([]int{7}, n)
		if a := Repeat(small, n, 7); !slices.Equal(a, want) {
			t.Errorf("n=%d: Repeat differs", n)
		}
		if a := Repeat(big, n, 7); !slices.Equal(a, want) || (n > 0 && &a[0] != &big[:1][0]) {
			t.Errorf("n=%d: Repeat did not reuse a large enough dst (or differs)", n)
		}
	}
}

// TestFirstTasks checks First against a plain loop at lengths around its
// serial limit and its tasks, with GOMAXPROCS 1, 2 and 16 (more
// goroutines than this machine may have cores: the tasks' split does not
// depend on them).
func TestFirstTasks(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, procs := range []int{1, 2, 16} {
		runtime.GOMAXPROCS(procs)
		for _, n := range []int{FirstSerial, FirstSerial + 1, 4*FirstTask*procs - 1, 4*FirstTask*procs + 1, 786432 + 3} {
			per := firstTask(n, Workers(0, n))
			if n > FirstSerial && (per < FirstTask || (n+per-1)/per > 4*procs && per > FirstTask) {
				t.Errorf("GOMAXPROCS %d, n = %d: tasks of %d", procs, n, per)
			}
			for _, mark := range []int{-1, 0, per - 1, per, n/2 + 1, n - 1} {
				x := make([]bool, n)
				want := -1
				if mark >= 0 {
					x[mark] = true
					for range 3 {
						if i := mark + 1 + rng.IntN(n-mark); i < n {
							x[i] = true // a later hit must not win
						}
					}
					want = mark
				}
				got := First(n, func(lo, hi int) int {
					for i := lo; i < hi; i++ {
						if x[i] {
							return i
						}
					}
					return -1
				})
				if got != want {
					t.Errorf("GOMAXPROCS %d, n = %d, mark %d: First = %d, want %d", procs, n, mark, got, want)
				}
			}
		}
	}
}

// BenchmarkFirstSplit times a scan of n float64 values for finite ones
// (the cost of ode's input checks) on the calling goroutine alone and
// split as First splits it above FirstSerial, to place FirstSerial: run
// it with -test.cpu 1,2 (and on a many-core host).
func BenchmarkFirstSplit(b *testing.B) {
	for _, n := range []int{1 << 12, 1 << 13, 1 << 14, 1 << 15, 1 << 16, 1 << 17, 1 << 18, 786432, 1 << 21} {
		x := make([]float64, n)
		scan := func(lo, hi int) int {
			// finite.First's loop: four chains of v·0.
			var s0, s1, s2, s3 float64
			v := x[lo:hi]
			for ; len(v) >= 4; v = v[4:] {
				s0 += v[0] * 0
				s1 += v[1] * 0
				s2 += v[2] * 0
				s3 += v[3] * 0
			}
			if s0+s1+s2+s3 != 0 {
				return lo
			}
			return -1
		}
		split := func() int {
			per := firstTask(n, Workers(0, n))
			nt := (n + per - 1) / per
			first := make([]int, nt)
			Run(nt, 0, func(_, t int) { first[t] = scan(t*per, min(n, (t+1)*per)) })
			return first[0]
		}
		b.Run(fmt.Sprintf("n=%d/serial", n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for range b.N {
				scan(0, n)
			}
		})
		b.Run(fmt.Sprintf("n=%d/split", n), func(b *testing.B) {
			b.SetBytes(int64(8 * n))
			for range b.N {
				split()
			}
		})
	}
}

// TestEqual checks Equal at lengths around its serial limit and of many
// tasks: a copy is equal;
// one element changed (a bit of a float64, -0 for +0, a NaN's payload)
// is seen anywhere: the first, the last, one of the probes, one beside
// it, at random.
func TestEqual(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, FirstSerial - 1, FirstSerial, FirstSerial + 1, 3*FirstSerial + 17, 20*FirstTask + 5} {
		src := make([]float64, n)
		for i := range src {
			src[i] = rng.NormFloat64()
		}
		if !Equal(slices.Clone(src), src) {
			t.Errorf("n=%d: a copy is not equal", n)
		}
		if Equal(src, append(slices.Clone(src), 1)) {
			t.Errorf("n=%d: a longer slice is equal", n)
		}
		if n == 0 {
			continue
		}
		for _, c := range []struct {
			name     string
			old, new float64
		}{
			{"ulp", 1, math.Nextafter(1, 2)},
			{"-0", 0, math.Copysign(0, -1)},
			{"nan", math.NaN(), math.Float64frombits(0x7ff8000000000002)},
		} {
			probe := (n - 1) / (equalProbes - 1)
			for _, i := range []int{0, n - 1, probe, min(n-1, probe+1), rng.IntN(n)} {
				a, b := slices.Clone(src), slices.Clone(src)
				a[i], b[i] = c.old, c.new
				if Equal(a, b) {
					t.Errorf("n=%d %s at %d: equal", n, c.name, i)
				}
				b[i] = c.old
				if !Equal(a, b) {
					t.Errorf("n=%d %s at %d: the same values are not equal", n, c.name, i)
				}
			}
		}
	}
	if Equal([]int32{1, 2, 3}, []int32{1, 2, 4}) || !Equal([]int{5}, []int{5}) {
		t.Error("integers compared wrong")
	}
}

// TestFirstEqualAllocs checks that First and Equal over arrays long
// enough to run on all cores allocate nothing of their own (their tasks'
// state is pooled): a repeated call's input check and input compare.
func TestFirstEqualAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops pooled items at random")
	}
	n := 4*FirstSerial + 3
	a := make([]float64, n)
	b := slices.Clone(a)
	f := func(lo, hi int) int { return -1 }
	var found int
	var eq bool
	call := func() { found, eq = First(n, f), Equal(a, b) }
	call()
	if allocs := testing.AllocsPerRun(50, call); allocs != 0 {
		t.Errorf("First and Equal of %d elements allocate %v times, want 0", n, allocs)
	}
	if found != -1 || !eq {
		t.Errorf("First = %d, Equal = %t: want -1, true", found, eq)
	}
}

// TestRanges checks that Ranges covers [0, n) once, in ranges of size
// starting at multiples of it.
func TestRanges(t *testing.T) {
	for _, c := range []struct{ n, size int }{{0, 4}, {1, 4}, {4, 4}, {5, 4}, {1000, 7}, {4096, 2048}} {
		hits := make([]atomic.Int32, c.n)
		Ranges(c.n, c.size, func(lo, hi int) {
			if lo%c.size != 0 || hi-lo > c.size || hi <= lo {
				t.Errorf("n %d, size %d: range [%d, %d)", c.n, c.size, lo, hi)
			}
			for i := lo; i < hi; i++ {
				hits[i].Add(1)
			}
		})
		for i := range hits {
			if h := hits[i].Load(); h != 1 {
				t.Fatalf("n %d, size %d: index %d covered %d times", c.n, c.size, i, h)
			}
		}
	}
}

// TestEqualSet checks EqualSet against Equal on each pair: sets of a
// state array (float64), a parameter array (float64) and integer arrays
// (int, int32) of lengths on either side of the one-goroutine limit (all
// pairs together) and of the probes, each copy equal, then one element
// of one pair changed (by an ulp, -0 for +0, another NaN) at its first,
// last, a probed, a probe's neighbour and a random index; pairs of
// unequal length; and the empty set.
func TestEqualSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	equal := func(fs [][2][]float64, is [][2][]int, js [][2][]int32) bool {
		s := NewEqualSet()
		defer s.Release()
		for _, p := range fs {
			AddEqual(s, p[0], p[1])
		}
		for _, p := range is {
			AddEqual(s, p[0], p[1])
		}
		for _, p := range js {
			AddEqual(s, p[0], p[1])
		}
		return s.Equal()
	}
	if !equal(nil, nil, nil) {
		t.Error("the empty set is not equal")
	}
	floats := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		return x
	}
	for _, c := range []struct{ ny, np, ni int }{
		{0, 0, 5}, {3, 1, 0}, {2 * 29, 29, 29}, // small
		{2 * FirstSerial / 4, FirstSerial / 4, 7},   // at most FirstSerial elements together: one goroutine
		{2 * FirstSerial, FirstSerial, 0},           // the events suite's Y0 and P (65,536 trajectories)
		{3*FirstSerial + 17, 5*FirstTask + 3, 1001}, // tasks across pairs of odd lengths
	} {
		y, p := floats(c.ny), floats(c.np)
		iv, jv := make([]int, c.ni), make([]int32, c.ni)
		for i := range iv {
			iv[i], jv[i] = rng.IntN(1000), int32(rng.IntN(1000))
		}
		set := func(y2, p2 []float64, i2 []int, j2 []int32) bool {
			return equal([][2][]float64{{y, y2}, {p, p2}}, [][2][]int{{iv, i2}}, [][2][]int32{{jv, j2}})
		}
		what := fmt.Sprintf("Y0 %d, P %d, int %d", c.ny, c.np, c.ni)
		if !set(slices.Clone(y), slices.Clone(p), slices.Clone(iv), slices.Clone(jv)) {
			t.Errorf("%s: copies are not equal", what)
		}
		if c.np > 0 && set(slices.Clone(y), slices.Clone(p[:c.np-1]), slices.Clone(iv), slices.Clone(jv)) {
			t.Errorf("%s: a shorter P is equal", what)
		}
		for _, ch := range []struct {
			name     string
			old, new float64
		}{
			{"ulp", 1, math.Nextafter(1, 2)},
			{"-0", 0, math.Copysign(0, -1)},
			{"nan", math.NaN(), math.Float64frombits(0x7ff8000000000002)},
		} {
			for which, n := range []int{c.ny, c.np} {
				if n == 0 {
					continue
				}
				probe := (n - 1) / (equalProbes - 1)
				for _, i := range []int{0, n - 1, probe, min(n-1, probe+1), rng.IntN(n)} {
					a, b := [2][]float64{slices.Clone(y), slices.Clone(p)}, [2][]float64{slices.Clone(y), slices.Clone(p)}
					a[which][i], b[which][i] = ch.old, ch.new
					if equal([][2][]float64{{a[0], b[0]}, {a[1], b[1]}}, nil, nil) != Equal(a[which], b[which]) || Equal(a[which], b[which]) {
						t.Errorf("%s: array %d, %s at %d: equal", what, which, ch.name, i)
					}
					b[which][i] = ch.old
					if !equal([][2][]float64{{a[0], b[0]}, {a[1], b[1]}}, nil, nil) {
						t.Errorf("%s: array %d, %s at %d: the same values are not equal", what, which, ch.name, i)
					}
				}
			}
		}
		if c.ni > 0 {
			i2, j2 := slices.Clone(iv), slices.Clone(jv)
			k := rng.IntN(c.ni)
			i2[k]++
			if set(slices.Clone(y), slices.Clone(p), i2, slices.Clone(jv)) {
				t.Errorf("%s: int changed at %d: equal", what, k)
			}
			j2[c.ni-1]--
			if set(slices.Clone(y), slices.Clone(p), slices.Clone(iv), j2) {
				t.Errorf("%s: int32 changed at its last: equal", what)
			}
		}
	}
}

// TestEqualSetAllocs checks that an EqualSet of pairs long enough to run
// on all cores allocates nothing once its storage has grown (it is
// pooled): a repeated call's input compare.
func TestEqualSetAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops pooled items at random")
	}
	a, b := make([]float64, 2*FirstSerial), make([]float64, 2*FirstSerial)
	p, q := make([]float64, FirstSerial), make([]float64, FirstSerial)
	var eq bool
	call := func() {
		s := NewEqualSet()
		AddEqual(s, a, b)
		AddEqual(s, p, q)
		eq = s.Equal()
		s.Release()
	}
	call()
	if allocs := testing.AllocsPerRun(50, call); allocs != 0 {
		t.Errorf("an EqualSet of two pairs allocates %v times, want 0", allocs)
	}
	if !eq {
		t.Error("equal arrays are not equal")
	}
}

// BenchmarkEqualSet times the compare of a kept events call's inputs run
// ahead (package cuda's sameHeld), at the events suite's 65,536
// trajectories: Y0 (2 components) and P (1 parameter) against copies,
// "each" with Equal on one after the other (P, FirstSerial elements, on
// one core), "set" in one pass of an EqualSet on all cores.
//
//	go test ./internal/par -run '^$' -bench EqualSet -cpu 1,2,4,16 -count 5
func BenchmarkEqualSet(b *testing.B) {
	const n = 1 << 16
	y, p := make([]float64, 2*n), make([]float64, n)
	for i := range y {
		y[i] = float64(i)
	}
	y2, p2 := slices.Clone(y), slices.Clone(p)
	b.Run("each", func(b *testing.B) {
		b.SetBytes(int64(8 * (len(y) + len(p))))
		for range b.N {
			if !Equal(y, y2) || !Equal(p, p2) {
				b.Fatal("not equal")
			}
		}
	})
	b.Run("set", func(b *testing.B) {
		b.SetBytes(int64(8 * (len(y) + len(p))))
		for range b.N {
			s := NewEqualSet()
			AddEqual(s, y, y2)
			AddEqual(s, p, p2)
			if !s.Equal() {
				b.Fatal("not equal")
			}
			s.Release()
		}
	})
}

// BenchmarkRunWake measures what a Run costs on a machine whose pool has
// gone to sleep (a call's scatter after a device's kernel and copy: each
// Run waits 300 µs first, so that the pool's threads park): a Run of
// 4·GOMAXPROCS tasks of 5 µs each (the work of one core for
// 20·GOMAXPROCS µs), run-us its wall time (ideal: 20 µs), ramp-us the
// time from its start until the last of its goroutines began its first
// task (the pool's wake-ups one after the other), medians of b.N Runs;
// "short" is RunShort, which does not wait for goroutines that begin
// after the last task (their ramp-us is not counted where they take no
// task). On a many-core host it says how much of a mid-size call's host
// work (tens of µs a core) the wake-ups take:
//
//	par.test -test.run '^$' -test.bench RunWake -test.benchtime 400x -test.cpu 1,2,4,8,16
func BenchmarkRunWake(b *testing.B) {
	for _, short := range []bool{false, true} {
		name := "run"
		if short {
			name = "short"
		}
		b.Run(name, func(b *testing.B) {
			nw := runtime.GOMAXPROCS(0)
			first := make([]atomic.Int64, nw)
			spin := func(d time.Duration) {
				for s := time.Now(); time.Since(s) < d; {
				}
			}
			run := Run
			if short {
				run = RunShort
			}
			var runs, ramps []float64
			for b.Loop() {
				time.Sleep(300 * time.Microsecond)
				for w := range first {
					first[w].Store(0)
				}
				t0 := time.Now()
				run(4*nw, nw, func(w, _ int) {
					first[w].CompareAndSwap(0, int64(time.Since(t0)))
					spin(5 * time.Microsecond)
				})
				runs = append(runs, float64(time.Since(t0))/1e3)
				var ramp int64
				for w := range first {
					ramp = max(ramp, first[w].Load())
				}
				ramps = append(ramps, float64(ramp)/1e3)
			}
			slices.Sort(runs)
			slices.Sort(ramps)
			b.ReportMetric(runs[len(runs)/2], "run-us")
			b.ReportMetric(ramps[len(ramps)/2], "ramp-us")
		})
	}
}

// TestEqualSetZero checks a kept EqualSet: the zero value compares on
// all cores as a pooled one does (equal copies, then one element
// changed), and Reset empties it for the next pairs without an
// allocation.
func TestEqualSetZero(t *testing.T) {
	n := 4*FirstSerial + 3 // past the one-goroutine limit: a Run
	a := make([]float64, n)
	for i := range a {
		a[i] = float64(i)
	}
	b := slices.Clone(a)
	var s EqualSet
	AddEqual(&s, a, b)
	if !s.Equal() {
		t.Fatal("a zero EqualSet: equal copies are not equal")
	}
	s.Reset()
	b[n-2] = math.Nextafter(b[n-2], 0)
	AddEqual(&s, a, b)
	if s.Equal() {
		t.Fatal("after Reset: arrays one ulp apart are equal")
	}
	b[n-2] = a[n-2]
	if allocs := testing.AllocsPerRun(20, func() {
		s.Reset()
		AddEqual(&s, a, b)
		if !s.Equal() {
			t.Fatal("after Reset: equal copies are not equal")
		}
	}); allocs != 0 {
		t.Errorf("a kept EqualSet reset and reused allocates %v times, want 0", allocs)
	}
}

// TestEqualSetHelp checks Help: on a set whose Equal is not running it
// runs nothing; on one whose tasks are out (begin) it runs every task
// left and finds a difference in the last; and beside an Equal on
// another goroutine the verdict is Equal's, for copies that are equal
// and copies one ulp apart at a random index (a difference the helper
// finds must reach the verdict: Equal waits for the tasks it took).
func TestEqualSetHelp(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	n := 8*FirstSerial + 5 // several tasks, past the one-goroutine limit
	a, p := make([]float64, n), make([]float64, n/2)
	for i := range a {
		a[i] = float64(i)
	}
	for i := range p {
		p[i] = -float64(i)
	}
	b, q := slices.Clone(a), slices.Clone(p)
	var s EqualSet
	if got := s.Help(); got != 0 {
		t.Errorf("Help on an empty set ran %d tasks, want 0", got)
	}
	AddEqual(&s, a, b)
	AddEqual(&s, p, q)
	if got := s.Help(); got != 0 {
		t.Errorf("Help before Equal ran %d tasks, want 0", got)
	}
	// The tasks out, no Run: Help runs them all.
	q[len(q)-1] = math.Nextafter(q[len(q)-1], 0)
	s.begin(8 * (len(a) + len(p)))
	if got, want := s.Help(), len(s.tasks); got != want || want < 4 {
		t.Errorf("Help on begun tasks ran %d, want all %d (at least 4)", got, want)
	}
	s.running.Store(false)
	if !s.differs.Load() {
		t.Error("Help on begun tasks missed a difference in the last element")
	}
	if got := s.Help(); got != 0 {
		t.Errorf("Help after the tasks ran %d more", got)
	}
	q[len(q)-1] = p[len(p)-1]
	// A helper's task under way when the Run has taken the rest: the
	// verdict waits for it, and has its difference.
	s.Reset()
	AddEqual(&s, a, b)
	AddEqual(&s, p, q)
	s.begin(8 * (len(a) + len(p)))
	first := s.tasks[0]
	b[first.lo/8] = math.Nextafter(b[first.lo/8], math.Inf(1))
	k := s.next.Add(1) - 1 // (the helper takes task 0)
	verdict := make(chan bool, 1)
	go func() { verdict <- s.runTasks() }()
	time.Sleep(20 * time.Millisecond)
	select {
	case <-verdict:
		t.Fatal("Equal returned before a task Help had taken was done")
	default:
	}
	s.run(int(k))
	s.done.Add(1)
	if <-verdict {
		t.Error("Equal's verdict misses the difference found by Help's task")
	}
	b[first.lo/8] = a[first.lo/8]
	// Begin and Finish: the tasks out after Begin, all of them taken by
	// Help on the same goroutine, Finish's verdict; a probe that differs
	// known at Begin; a set one goroutine compares left to Finish.
	for _, x := range []struct {
		name      string
		at        int // the index of b made to differ (-1: none)
		small     bool
		known     bool
		helps, eq bool
	}{
		{"equal", -1, false, false, true, true},
		{"unprobed", 5, false, false, true, false},
		{"probed", len(b) - 1, false, true, false, false},
		{"small", 3, true, false, false, false},
	} {
		s.Reset()
		if x.at >= 0 {
			b[x.at] = math.Nextafter(b[x.at], math.Inf(1))
		}
		if x.small {
			AddEqual(&s, a[:60], b[:60]) // (no probes: 64 elements or fewer)
		} else {
			AddEqual(&s, a, b)
			AddEqual(&s, p, q)
		}
		known, same := s.Begin()
		helped := s.Help()
		if known {
			same = same && helped == 0
		} else {
			same = s.Finish()
		}
		if known != x.known || same != x.eq || (helped > 0) != x.helps {
			t.Errorf("%s: Begin knew %t, Help ran %d tasks, verdict %t; want %t, some %t, %t", x.name, known, helped, same, x.known, x.helps, x.eq)
		}
		if x.at >= 0 {
			b[x.at] = a[x.at]
		}
	}
	for rep := range 200 {
		s.Reset()
		differ := rep%2 == 1
		at, x, old := -1, b, 0.0
		if differ {
			if rng.IntN(2) == 0 {
				x = q
			}
			at = rng.IntN(len(x))
			old = x[at]
			x[at] = math.Nextafter(old, math.Inf(1))
		}
		AddEqual(&s, a, b)
		AddEqual(&s, p, q)
		verdict := make(chan bool)
		go func() { verdict <- s.Equal() }()
		helped := 0
		var got bool
	wait:
		for {
			select {
			case got = <-verdict:
				break wait
			default:
				helped += s.Help()
				runtime.Gosched()
			}
		}
		if got == differ {
			t.Fatalf("rep %d (a difference at %d, the helper ran %d tasks): Equal %t", rep, at, helped, got)
		}
		if differ {
			x[at] = old
		}
	}
}
