package cputime

import "testing"

// TestProcess checks that busy work on the caller's goroutine advances
// the process's CPU time (where the system reports it).
func TestProcess(t *testing.T) {
	c0 := Process()
	if c0 == 0 {
		t.Skip("the process's CPU time is not read on this system")
	}
	x := 1.0
	for Process()-c0 < 20e6 { // 20 ms of CPU
		for range 100000 {
			x = x*1.0000001 + 1e-9
		}
	}
	if x == 0 {
		t.Fatal("unreachable")
	}
	if c1 := Process(); c1 < c0 {
		t.Fatalf("CPU time went back: %v then %v", c0, c1)
	}
}
