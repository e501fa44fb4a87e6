package cuda

import "syscall"

// threadCPU returns the CPU time the calling OS thread has used (user +
// system), in nanoseconds, or 0 if it is unavailable: the host backend
// takes its launches' own work (hashing and copying their memory) out of
// BenchmarkHostAutoTrace's host CPU time with it.
func threadCPU() int64 {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if syscall.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
