package par

import (
	"sync"
	"sync/atomic"
	"testing"
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

// TestGroupAllocs checks that reusing a Group allocates nothing.
func TestGroupAllocs(t *testing.T) {
	var g Group
	var sum atomic.Int64
	f := func(_, task int) { sum.Add(int64(task)) }
	g.Run(64, 2, f)
	if a := testing.AllocsPerRun(20, func() { g.Run(64, 2, f) }); a != 0 {
		t.Errorf("Group.Run allocates %v times, want 0", a)
	}
}
