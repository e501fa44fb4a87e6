package cputime

import (
	"syscall"
	"time"
)

// Thread returns the CPU time the calling OS thread has used (user +
// system), or 0 if it is unavailable; a caller locks its goroutine to the
// thread (runtime.LockOSThread) around the work it measures. It costs one
// getrusage system call. Linux only: 0 elsewhere.
func Thread() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD
	var ru syscall.Rusage
	if syscall.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
