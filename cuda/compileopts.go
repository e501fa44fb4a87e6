package cuda

import "strings"

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

// compileOptions returns the further NVRTC options of a kernel whose
// source is src bytes long (Tuning.FastCompile), nil for none.
func (t Tuning) compileOptions(src int) []string {
	opts, from := t.FastCompile, t.FastCompileFrom
	if opts == "" {
		opts = defaultFastCompile
	}
	if from <= 0 {
		from = defaultFastCompileFrom
	}
	if opts == "none" || src < from {
		return nil
	}
	return strings.Fields(opts)
}
