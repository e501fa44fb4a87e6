package tape_test

import "syscall"

// threadCPU returns the CPU time of the calling OS thread in nanoseconds
// (0 if unavailable). Benchmarks lock their goroutine to its thread and
// report it beside the wall time, which a loaded machine inflates.
func threadCPU() int64 {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if syscall.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
