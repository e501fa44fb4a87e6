// Package ops is the op set of gradsolve: every operation a traced
// program (package tape) may contain, each described once, in one Def,
// with everything the rest of the library needs to know about it:
//
//   - Eval (or EvalTuple): its arithmetic on float64, the reference every
//     other form is tested against;
//   - VJP and JVP: its reverse- and forward-mode derivative rules, written
//     against a Builder with ops of the set, so a derivative is itself a
//     program that can be differentiated again (second derivatives, such
//     as the VJP of a Rosenbrock step's Jacobian, need nothing more);
//   - Block: its CPU kernel over a block of trajectories;
//   - C: its CUDA C expression (scalar ops; package cuda emits the tuple
//     ops).
//
// The registry is an array indexed by Op (Lookup); TestRegistry walks it
// and fails on any op without the fields it needs.
//
// # Layout
//
// Kernels are structure-of-arrays, dst first: for a block of m
// trajectories, component c of trajectory i of a value is at buf[c*m+i]
// (a scalar value has one component, so trajectory i is at buf[i]).
// args[k] holds argument k the same way. If Def.Mixed is set, an argument
// of length 1 is uniform, the same for every trajectory (a shared
// parameter or a constant), and is not broadcast by the caller.
//
// # Conventions
//
// Where an op is not differentiable its rules pick a value, as other AD
// systems do, and the tests pin them:
//
//   - Relu'(0) = 0 and Abs'(0) = 0;
//   - Min and Max at a tie return the first argument, and the derivative
//     goes to it;
//   - Sign and the comparisons (Lt … Ne) have derivative 0; their VJP and
//     JVP are nil, as are those of Input and Const;
//   - Select has no derivative with respect to its condition; both
//     branches are computed, so guard a branch that is not finite where it
//     is not taken with a second Select on its input (the double-where
//     idiom);
//   - Sqrt'(0) = +Inf; Pow's derivative with respect to the exponent is
//     taken as 0 where the base is not positive.
//
// LUFactor has no VJP: the solves that use the factors (LUSolve,
// LUSolveT) carry the derivatives with respect to the matrix entries
// (b̄ = W⁻ᵀx̄, W̄ = −b̄xᵀ). A matrix singular to working precision gives a
// factor, and solutions, of NaNs. LUFactorShift factors I + s·M (M a
// call's tuple, read in a loop) and its solves treat the matrix as a
// constant; with NoGrad (a stop-gradient) and Attach (a derivative
// attached to a value) the Rosenbrock steps of large fields add W's
// derivative matrix-free, without the d² terms of W̄.
//
// Call is the one op not described by its Def alone: a call of a
// sub-program of the enclosing program (tape's Program.Funcs), whose
// value is the tuple of the callee's outputs. Package tape evaluates,
// executes and differentiates it through the callee program, and
// package cuda emits the callee as a device function; the Def holds only
// its name.
//
// Rounding is part of an op's definition, the same on every engine: FMA
// and Dot round once per multiply-add (Dot is the chain
// s = fma(w_j, x_j, s) from the bias), Powi multiplies by repeated
// squaring. The CPU kernels agree with Eval bit for bit (NaN payloads
// aside); where they call gonum's vectorised floats kernels they use only
// exact rewritings (x−y as x+(−y), c·x), so this holds there too.
//
// # Adding an op
//
// Add a constant to the Op list, with a comment giving its meaning and its
// special cases, and its Def to the registry. A unary op with a smooth
// derivative needs only its function, its derivative as ops of the set
// and its C name:
//
//	OpTanh: unaryDef("Tanh", math.Tanh,
//		func(b Builder, x, y Ref) Ref { return sub(b, b.Const(1), mul(b, y, y)) }, // 1 − tanh²
//		cfn("tanh")),
//
// Then add a case for it to the derivative sweep (rules_test.go), which
// checks its VJP and JVP against central differences and against each
// other, and its second derivatives.
//
// # Cost
//
// A Block call costs a few nanoseconds of dispatch plus its loop, so the
// executor amortises dispatch over blocks of hundreds of trajectories.
// Add, Sub and Div of two per-trajectory values, and Add, Sub and Mul with
// a uniform one, use gonum's vectorised kernels on amd64 (a few tenths of
// a nanosecond a trajectory); a product of two per-trajectory values is
// an unrolled Go loop; the transcendental ops (Exp, Log, Tanh, Sin, …)
// cost 5–20 ns a trajectory and dominate any program that uses many.
package ops
