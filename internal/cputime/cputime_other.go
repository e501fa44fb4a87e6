//go:build !unix

// Package cputime reads the CPU time the process has used: the host's
// work of a benchmark on a machine whose cores other processes share,
// where its wall time is not.
package cputime

import "time"

// Process returns 0: the process's CPU time is not read on this system.
func Process() time.Duration { return 0 }
