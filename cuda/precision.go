package cuda

import "github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"

// Precision is the floating-point type of an engine's kernels.
type Precision = kernelgen.Precision

// The precisions of NewEngine and NewMultiEngine.
const (
	Float64 = kernelgen.Float64 // double (the default)
	Float32 = kernelgen.Float32 // float
)
