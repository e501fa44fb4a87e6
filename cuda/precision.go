package cuda

import (
	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// Precision is the floating-point type of an engine's kernels.
type Precision = kernelgen.Precision

// The precisions of NewEngine and NewMultiEngine.
const (
	Float64 = kernelgen.Float64 // double (the default)
	Float32 = kernelgen.Float32 // float
)

// unitRoundoff returns the unit roundoff of arithmetic in p.
func unitRoundoff(p Precision) float64 {
	if p == Float32 {
		return 0x1p-24
	}
	return 0x1p-53
}

// UnitRoundoff returns the unit roundoff of the engine's arithmetic
// (ode.PrecisionEngine): 2^-24 for "cuda-f32", 2^-53 for float64, so that
// ode.NewSolver refuses tolerances the engine cannot meet.
func (e *Engine) UnitRoundoff() float64 { return unitRoundoff(e.prec) }

// UnitRoundoff returns the unit roundoff of the engine's arithmetic
// (ode.PrecisionEngine).
func (e *MultiEngine) UnitRoundoff() float64 { return unitRoundoff(e.prec) }

var (
	_ ode.PrecisionEngine = (*Engine)(nil)
	_ ode.PrecisionEngine = (*MultiEngine)(nil)
	_ ode.Executor        = (*executor)(nil)
	_ ode.Executor        = (*multiExecutor)(nil)
)
