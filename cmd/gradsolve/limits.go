package main

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/internal/sysmem"
)

// limits bounds the resources of one command.
type limits struct {
	// memory is the memory, in bytes, a run may use: a command line whose
	// estimate (see runBytes) exceeds it is refused before any work.
	memory int64
	// source says where memory comes from, for messages.
	source string
	// maxSteps, if positive, caps -max-steps; the fuzz target sets it so
	// that every command line runs in milliseconds.
	maxSteps int
}

// assumedMemory is the memory limit when the machine's is unknown (no
// /proc/meminfo, no GOMEMLIMIT).
const assumedMemory = 64 << 30

// machineLimits returns the limits of this machine: its physical memory
// (MemTotal in /proc/meminfo), or GOMEMLIMIT if that is smaller, or
// assumedMemory if neither is known (see package sysmem).
func machineLimits() limits {
	if m := sysmem.Machine(); m.Bytes > 0 {
		return limits{memory: m.Bytes, source: m.Source}
	}
	return limits{memory: assumedMemory, source: "memory assumed for a machine whose memory is unknown"}
}

// memTotal returns MemTotal from the meminfo file at path, in bytes.
func memTotal(path string) (int64, bool) { return sysmem.MemTotal(path) }

// trajectoryBytes estimates the memory one trajectory of a run takes, in
// bytes, for a problem with d state components and np per-trajectory
// parameters, nsave save times and, if arrays, the per-trajectory JSON
// arrays printed. The coefficients are a fit to the peak resident memory
// of solve and grad on the built-in problems (the difference between 2^16
// and 2^14 trajectories of a few steps each: 380–710 bytes per trajectory
// for solve, 1390–2130 for grad), rounded down, so the estimate is about
// what a short run takes. A grad stores, besides, about 8·(d+1) bytes per
// step of each trajectory, which is not known before the run.
func trajectoryBytes(cmd string, d, np, nsave int, arrays bool) float64 {
	fd, fp, fs := float64(d), float64(np), float64(nsave)
	words := 6*fd + 4*fp + 16 + fs*fd
	out := fd + fs*fd // numbers printed per trajectory
	if cmd == "grad" {
		words = 20*fd + 12*fp + 80 + 2*fs*fd
		out += fd + fp
	}
	b := 8 * words
	if arrays {
		b += 128 * out // the JSON text, indented, and its copies while it is built
	}
	return b
}

// checkMemory returns a *usageError if n trajectories of perTraj bytes
// each need more than lim allows. The message starts with the flag and n
// ("-n 1000000000000"), names the run (what, as "a grad of lorenz"), the
// estimate and the limit, and the fix: at most as many trajectories as
// fit, or the alternatives in more (as "drop -arrays").
func checkMemory(what string, n int, perTraj float64, lim limits, more ...string) error {
	need := float64(n) * perTraj
	if need <= float64(lim.memory) {
		return nil
	}
	fix := fmt.Sprintf("use -n %d or fewer", int64(float64(lim.memory)/perTraj))
	for _, m := range more {
		fix += ", " + m
	}
	return usagef("-n %d: %s needs at least %s (about %s per trajectory), more than the %s of %s; %s, or split the ensemble over several runs",
		n, what, formatBytes(need), formatBytes(perTraj), formatBytes(float64(lim.memory)), lim.source, fix)
}

// formatBytes formats b bytes with a binary unit, as "1.5 GiB".
func formatBytes(b float64) string { return sysmem.Format(b) }
