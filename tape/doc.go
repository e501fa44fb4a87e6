// Package tape traces Go functions into programs, transforms them and runs
// them on the CPU.
//
// A program is a straight-line SSA list of per-trajectory values (Program,
// Value), in topological order, built from the ops of package ops. It is
// the single source of truth for every engine: the CPU executor here, the
// CUDA code generator elsewhere.
//
// # Tracing
//
// Trace runs a Go function once on symbolic values, tape.V, and records
// what it does. Go control flow runs at trace time; a data-dependent
// branch is a Select. A right-hand side of an ODE is written as ordinary
// Go:
//
//	p, err := tape.Trace("lorenz", []tape.Input{{Name: "y0"}, {Name: "y1"}, {Name: "y2"},
//		{Name: "sigma", Shared: true}, {Name: "rho", Shared: true}, {Name: "beta", Shared: true}},
//		func(in []tape.V) []tape.V {
//			y0, y1, y2, sigma, rho, beta := in[0], in[1], in[2], in[3], in[4], in[5]
//			return []tape.V{
//				sigma.Mul(y1.Sub(y0)),
//				y0.Mul(rho.Sub(y2)).Sub(y1),
//				y0.Mul(y1).Sub(beta.Mul(y2)),
//			}
//		})
//
// Dense and Dot build neural-network layers (one Dot per row, weights
// usually shared inputs); Solve, Factor and LU.Solve/SolveT build small
// dense linear solves; Call inlines another program. Misuse while tracing
// (values of two traces mixed, the zero V, wrong lengths) is returned by
// Trace as a *TraceError naming the op and the line of the caller.
//
// # Inputs and outputs
//
// An input is per trajectory (one number for each) or shared (one number
// for the whole ensemble: a shared parameter, a network weight). An output
// may be marked Sum: the executor then returns its sum over the
// trajectories instead of one number for each. Reverse mode marks the
// gradient of every shared input so, since a shared parameter's gradient
// is the sum of the trajectories' contributions.
//
// # Transforms
//
// VJP (reverse mode), Grad (value and gradient of a one-output program),
// JVP (forward mode), Jacobian, Simplify and DeadCode return new programs
// and never modify their input; each documents its result's inputs and
// outputs. Since they return programs they compose: the VJP of a JVP
// program gives second derivatives.
//
// Derivatives at points where an op is not differentiable follow package
// ops' conventions: Relu'(0) = Abs'(0) = 0, Min and Max send a tie to the
// first argument, Sign and the comparisons have derivative 0, Select none
// with respect to its condition.
//
// Transforms build with simplification: constants are folded, 0 and 1
// absorbed, negations folded into adds, subtracts and constant factors,
// and common subexpressions merged. Every rule keeps values bit for bit
// except one: x·0 becomes 0 (and 0/x, fma(0, y, z) likewise) even where x
// is not finite, as in every AD system, so a zero cotangent stays zero
// through an infinite partial derivative. Trace itself does not simplify:
// a traced program computes exactly what the Go function says.
//
// # Execution
//
// Program.Eval is the scalar reference interpreter: one trajectory, slow,
// allocating. Exec runs a program over an ensemble, structure-of-arrays:
// for input k, trajectory i is in[k][i] (a shared input is in[k][0]); the
// program is run a block of trajectories at a time (ExecSettings.BlockSize,
// default 256), every value a loop over the block, so dispatch costs are
// amortised; a tuple value's component c of trajectory i lives at
// buf[c*m+i] within a block of m. Values that depend only on constants and
// shared inputs are computed once per Run. Blocks are shared by
// ExecSettings.Workers goroutines; summed outputs are added per block and
// then over blocks in a fixed order, so results do not depend on the
// number of workers. After its first Run an Exec allocates nothing. An
// output may alias an input (a state updated in place). With
// ExecSettings.CheckFinite, Run returns a *NonFiniteError naming the
// trajectory, the output and the first op that produced a NaN or an
// infinity from finite arguments (and whether it was a singular matrix).
//
// Exec computes what Program.Eval computes, bit for bit (NaN payloads
// aside), except that a summed output is added in a different order.
//
// # Cost
//
// On the Lorenz right-hand side (8 arithmetic values) over 2^16
// trajectories, one worker runs at about 2 ns a trajectory with blocks of
// 256 to 1024, within about 2× of a hand-written fused Go loop over the
// same arrays (BenchmarkExecVsHandLorenz); blocks of 64 cost about 1.5×
// more in dispatch. Tracing and transforms cost microseconds per value and
// are meant to run once, outside loops.
package tape
