package cuda

import "strings"

// defaultFastCompile and defaultFastCompileFrom are Tuning.FastCompile's
// and FastCompileFrom's defaults: the NVRTC options of large kernels, and
// the source size from which they apply. None yet: the first call's
// NVRTC time (issue 26: at most 3 s up to d = 64, 5 s at d = 256) against
// the kernel's speed with each candidate is measured on the device by
// TestGPUColdStart, and the default follows from it.
const (
	defaultFastCompile     = ""
	defaultFastCompileFrom = 1 << 20
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
