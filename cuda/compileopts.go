package cuda

import (
	"strconv"
	"strings"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
)

// defaultFastCompile and defaultFastCompileFrom are Tuning.FastCompile's
// and FastCompileFrom's defaults: the NVRTC options of large kernels, and
// the source size from which they apply. Measured by TestGPUColdStart on
// the H200 (NVRTC 13.0, session 31, docs/bench-history.md): the rerolled
// POLL Rodas5P gradient kernel (321 kB of source) compiles in 49.4 s with
// full ptxas optimisation and 8.5 s at -O1 (17 s at -O0), its kernels run
// 0.145 s against 0.159 s warm; the Lorenz Tsit5 kernel (155 kB) stays
// below the threshold and keeps full optimisation. NVRTC 13.0 rejects
// -Ofast-compile and -dopt. The threshold, 300,000 bytes, keeps the
// Rodas5P gradient kernels of three-state problems (Lorenz 272 kB,
// Robertson 274 kB: mostly the prelude and the step's adjoint, whose
// first call took 2.9 s on the H200, within the 3 s target) at full
// optimisation, and puts Pollution (316 kB), HIRES (376 kB), Lorenz-96
// d = 64 and the Brusselator (433-442 kB) at -O1 (TestFastCompileSplit).
const (
	defaultFastCompile     = "--ptxas-options=-O1"
	defaultFastCompileFrom = 300_000
)

// proposedSplitFrom is the threshold proposed for Tuning.SplitFrom: the bytes of a
// kernel's functions of programs (kernelgen's Source.FuncBytes, its
// generated code without the prelude and the templates) from which its
// large step programs are compiled as functions of their own
// (kernelgen.Config.SplitFrom). Measured on the H100 (bench/ptxas_profile.py,
// variant noinline, docs/bench-history.md): NVRTC's front end 1.7-2.6×
// faster on the Rodas5P gradient kernels of Pollution, HIRES, the
// Brusselator and Lorenz (37.4 → 22.2 s, 4.9 → 2.1 s), the kernels'
// stack frames a third (98 → 30 kB for Pollution). The threshold keeps the kernels of the three-state problems, whose first calls are
// within the cold-start target and whose speed the benchmarks measure,
// as they were (Lorenz's Rodas5P gradient kernel 226 kB of functions,
// Robertson's 228 kB, Lorenz's Vern7 241 kB, Kepler's Rodas5P 251 kB;
// TestSplitKernels), and splits those of Pollution (272 kB), HIRES and
// Lorenz-96 d = 8 (330 kB), the neural Robertson problem (347 kB), the
// Brusselator and Lorenz-96 d = 64 with Rodas5P (397-406 kB). Not split:
// Lorenz-96 d = 64 with Tsit5 (174 kB), though its first call takes 9 s.
const proposedSplitFrom = 256 << 10

// Tuning.SplitUnits stays off by default (session 43). On an H100
// (session 42, TestGPUColdStart phase units) Lorenz-96 d = 256 with
// Tsit5 compiled cold in 1.96 s in units against 7.79 s as one (first
// call 2.54 s against 8.27 s), its kernels warm 0.008 s against 0.006 s
// (one run); Pollution's units compiled in 13.96 s against 30.66 s, then
// failed to link (its wide kernel's register cap: Config.UnitRegs, since
// fixed: session 43's TestGPUSplitUnits ran Pollution's and HIRES's wide
// units bit for bit against one unit). HIRES, the Brusselator and
// Lorenz-96 d = 64 have no cold or warm times in units yet, nor
// Pollution since the fix: a default needs them (bench/gpu_pending.sh
// s42split, s43c) and the rest of TestGPUSplitUnits (s42split-check).

// defaultSplitFrom is Tuning.SplitFrom's default: never, until a device
// has measured what a call costs a split kernel warm (its step programs
// are called, their arrays passed through local memory) against what it
// saves cold (TestGPUColdStart's phase split, bench/gpu_pending.sh
// compile2). On an H100 (NVRTC 13.0) the split Rodas5P gradient kernel
// of Pollution failed where the unsplit one passed: every trajectory
// stopped at t = 0 with a non-finite state (TestGPUColdStart's phase
// split), though split and unsplit agree bit for bit on the host
// engines. Splitting stays a switch for that investigation.
const defaultSplitFrom = -1

// splitFrom returns the kernels' kernelgen.Config.SplitFrom
// (Tuning.SplitFrom; with Tuning.SplitUnits, zero means
// proposedSplitFrom): -1 for never.
func (t Tuning) splitFrom() int {
	switch {
	case t.SplitFrom < 0:
		return -1
	case t.SplitFrom == 0 && t.SplitUnits:
		return proposedSplitFrom
	case t.SplitFrom == 0:
		return defaultSplitFrom
	}
	return t.SplitFrom
}

// compileOptions returns the further NVRTC options of a kernel whose
// source is src bytes long (Tuning.FastCompile, Tuning.Minimal), nil for
// none.
func (t Tuning) compileOptions(src int) []string {
	var always []string
	if t.Minimal {
		always = []string{"-minimal"}
	}
	opts, from := t.FastCompile, t.FastCompileFrom
	if opts == "" {
		opts = defaultFastCompile
	}
	if from <= 0 {
		from = defaultFastCompileFrom
	}
	if opts == "none" || src < from {
		return always
	}
	return append(always, strings.Fields(opts)...)
}

// kernelOptions returns the further NVRTC options of kernel v whose
// translation units are units (kernelgen.KernelUnits): one unit's as
// compileOptions of its size; a kernel in parts gives every unit the
// options of the kernel compiled as one (compileOptions of the units'
// bytes together) and the register cap its launch bounds would give it
// (v.UnitRegs, --maxrregcount, the same for every unit: the linker
// refuses a kernel whose callees may use more registers than it).
func (t Tuning) kernelOptions(v kernelgen.Config, units []kernelgen.Unit) []string {
	size := 0
	for _, u := range units {
		size += len(u.Text)
	}
	opts := t.compileOptions(size)
	if r := v.UnitRegs(); len(units) > 1 && r > 0 {
		opts = append(opts, "--maxrregcount="+strconv.Itoa(r))
	}
	return opts
}

// oneUnit returns kernel v as it compiles without t.SplitUnits: the form
// an engine compiles where a kernel's parts fail to compile or link
// (compileKernel).
func (t Tuning) oneUnit(v kernelgen.Config) kernelgen.Config {
	t.SplitUnits = false
	v.SplitFrom, v.SplitUnits = t.splitFrom(), false
	return v
}
