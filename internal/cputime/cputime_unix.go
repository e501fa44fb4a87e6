//go:build unix

// Package cputime reads the CPU time the process has used: the host's
// work of a benchmark on a machine whose cores other processes share,
// where its wall time is not.
package cputime

import (
	"syscall"
	"time"
)

// Process returns the CPU time the process has used (user + system), or
// 0 if it is unavailable. It costs one getrusage system call.
func Process() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
