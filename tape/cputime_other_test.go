//go:build !linux

package tape_test

// threadCPU returns 0: thread CPU time is read on Linux only.
func threadCPU() int64 { return 0 }
