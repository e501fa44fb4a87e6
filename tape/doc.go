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
// dense linear solves; Call inlines another program and CallFunc calls
// it (see Calls). Misuse while tracing (values of two traces mixed, the
// zero V, wrong lengths) is returned by Trace as a *TraceError naming the
// op and the line of the caller.
//
// A caller that traces the same function on every call, to learn whether
// it changed (package ode traces a loss on every Grad), keeps a Tracer:
// Tracer.Retrace traces into storage it keeps and returns the program
// given where the trace is the same (Program.SameAs), allocating nothing
// of its own, else a new program.
//
// # Inputs and outputs
//
// An input is per trajectory (one number for each) or shared (one number
// for the whole ensemble: a shared parameter, a network weight). An output
// may be marked Sum: the executor then returns its sum over the
// trajectories instead of one number for each. VJP and Grad mark the
// gradient of every shared input Sum: a shared parameter enters every
// trajectory, so its gradient is the sum of the trajectories'
// contributions.
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
// # Calls
//
// CallFunc traces a call of another program without inlining it: the
// callee is added once to the caller's Funcs, and the call is one OpCall
// value whose components, the callee's outputs, are OpExtract values. A
// Runge–Kutta step that calls its field with CallFunc holds one copy of
// the field instead of one per stage, and a code generator can emit the
// field as a function the step calls. Callees may call programs of their
// own; no program may call itself.
//
// Every pass handles calls. Validate checks each call against its callee
// and each callee recursively; Program.Eval evaluates a callee per call;
// String prints the callees after the program. Inline replaces every call
// by the callee's values, recursively, and simplifies (CSE): for a
// program traced with CallFunc it computes, bit for bit, what the same
// program traced with Call computes (but where the simplifier's x·0 = 0
// meets a non-finite x, as in Simplify). NewExec runs a program with calls
// inlined, so the CPU executor only ever runs flat programs. DeadCode
// drops calls whose outputs are unused and callees no call is left to;
// Simplify merges identical calls and leaves callees alone.
//
// The transforms keep call boundaries. In VJP and Grad, a call c =
// f(a) whose outputs get the cotangent c̄ sends ā back through a call of
// f.vjp(a, c̄), a program built once per callee and transform and added to
// the result's Funcs: its inputs are f's inputs followed by one
// cotangent per output of f, and its outputs the cotangents of all f's
// inputs (named "grad_" + the input's name, none summed: a callee's
// shared inputs are ordinary inputs there, and only the outermost
// program's gradients are summed). f.vjp recomputes the values of f it
// needs, so the VJP of a step costs one more field evaluation per stage
// than the inlined VJP, in exchange for a field VJP that is one function.
// In JVP and Jacobian, the tangent of a call is a call of f.jvp(a, ȧ),
// whose inputs are f's inputs followed by one tangent per input (named
// "d_" + the input's name) and whose outputs are the tangents of f's
// outputs only (named "d_" + the output's name; the caller has the
// outputs themselves from the call of f). Since these are programs too,
// the VJP of a program that calls a Jacobian or JVP program (a
// Rosenbrock step) calls the VJP of that program: second derivatives need
// nothing more. Inlined, the transform of a program with calls equals the
// transform of the inlined program to round-off (the order of some sums
// of cotangents differs); the tests measure at most a few units in the
// last place, normwise.
//
// # Execution
//
// Program.Eval is the scalar reference interpreter: one trajectory, slow,
// allocating. Exec runs a program over an ensemble, structure-of-arrays:
// for input k, trajectory i is in[k][i] (a shared input is in[k][0]); the
// program is run a block of trajectories at a time (ExecSettings.BlockSize,
// chosen by default from the program's working set), every value a loop
// over the block, so dispatch costs are amortised; a tuple value's
// component c of trajectory i lives at buf[c*m+i] within a block of m.
// Values that depend only on constants and shared inputs are computed once
// per Run (again only when a shared input changed). NewExec fuses what it
// can run faster as one step with the same rounding: a dense layer (the
// Dots of one input vector with shared weights) becomes a blocked
// matrix–vector product over the block's lanes, chains of sums become one
// pass, a layer's activations one step; on amd64 with AVX2 and FMA some
// of these kernels are assembly (the purego build tag forces the Go ones).
// Blocks are shared by ExecSettings.Workers goroutines on the library's
// one pool (internal/par); summed outputs are added per block and then
// over blocks in a fixed order, so results do not depend on the number of
// workers. Clone gives another goroutine its own buffers for the same
// preparation. After its first Run an Exec allocates nothing. An output
// may alias an input (a state updated in place). With
// ExecSettings.CheckFinite, Run returns a *NonFiniteError naming the
// trajectory, the output and the first op that produced a NaN or an
// infinity from finite arguments (and whether it was a singular matrix).
//
// Exec computes what Program.Eval computes, bit for bit (NaN payloads
// aside), except that a summed output is added in a different order.
//
// # Cost
//
// Exec pays a dispatch per value and block and then a tight loop over the
// block's lanes, so its cost is linear in the program's values and the
// trajectories, and dispatch is amortised once blocks hold some hundreds
// of lanes (the default; blocks of tens of lanes pay it visibly). A
// right-hand side such as Lorenz's runs within a small factor (about 2×)
// of a hand-written fused Go loop over the same arrays
// (BenchmarkExecVsHandLorenz), since every value is stored and loaded
// where the hand-written loop keeps it in registers. A reverse step costs
// a small multiple of its forward step (about 2× for a Tsit5 step of a
// tanh network: BenchmarkNeural). Tracing and transforms cost time in
// proportion to the program's size and are meant to run once, outside
// loops. Measured figures are in bench/RESULTS.md and the benchmarks
// named.
package tape
