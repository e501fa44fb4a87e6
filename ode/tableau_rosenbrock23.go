package ode

// Rosenbrock23 (ode23s) coefficients.
//
// Reference: L. F. Shampine and M. W. Reichelt, "The MATLAB ODE Suite", SIAM
// Journal on Scientific Computing 18(1):1–22, 1997, §3 (the modified
// Rosenbrock formula of order 2 with an order-3 error estimate).
//
// The two constants are those of SciML/OrdinaryDiffEq.jl,
// lib/OrdinaryDiffEqRosenbrock/src/rosenbrock_tableaus.jl (Rosenbrock23Tableau:
// c₃₂ = 6 + √2, d = 1/(2 + √2)), written here to 40 significant digits. The
// non-autonomous step they enter is that of SciML/DiffEqGPU.jl,
// src/ensemblegpukernel/perform_step/gpu_rosenbrock23_perform_step.jl, with
// one correction noted below: with J = ∂f/∂y(t, y), T = ∂f/∂t(t, y) and
// W = I − h·d·J,
//
//	F0 = f(t, y),            k1 = W⁻¹·(F0 + h·d·T),
//	F1 = f(t + h/2, y + (h/2)·k1),
//	k2 = W⁻¹·(F1 − k1) + k1,
//	y⁺ = y + h·k2,
//	F2 = f(t + h, y⁺),
//	k3 = W⁻¹·(F2 − e32·(k2 − F1) − 2·(k1 − F0) + h·d·T),
//	err = (h/6)·(k1 − 2·k2 + k3).
//
// Unlike a RosenbrockTableau's stages, k1, k2 and k3 do not contain h. The
// solution needs only k1 and k2; k3 serves the error estimate, which is
// y₃ − y⁺ for the order-3 companion y₃ = y + (h/6)·(k1 + 4·k2 + k3).
//
// The f_t term of the error stage is h·d·T, the same as k1's. DiffEqGPU.jl's
// kernel (and REFERENCE.md §2) add h·T there instead; then, already for
// y' = g(t), y₃ is Simpson's rule plus (h²/6)·(1 − d)·g′, and the estimate
// is O(h²) rather than O(h³) on any non-autonomous field, though y⁺ is
// unaffected. TestRosenbrockRosenbrock23Order measures both.

const (
	// rosenbrock23D is d = 1/(2 + √2) = 1 − √2/2, the diagonal of W = I − h·d·J.
	rosenbrock23D = 0.2928932188134524755991556378951509607152
	// rosenbrock23E32 is e32 = 6 + √2 of the error stage.
	rosenbrock23E32 = 7.414213562373095048801688724209698078570
)

// rosenbrock23Consts holds the constants of the Rosenbrock23 (ode23s) step
// described above.
type rosenbrock23Consts struct {
	Name string
	// Order is the order of y⁺ (2); ErrOrder that of the companion used by
	// the error estimate (3).
	Order, ErrOrder int
	// D is d = 1/(2 + √2) and E32 is e32 = 6 + √2.
	D, E32 float64
}

// rosenbrock23Tableau is the Rosenbrock23 (ode23s) method.
var rosenbrock23Tableau = rosenbrock23Consts{
	Name:     "Rosenbrock23",
	Order:    2,
	ErrOrder: 3,
	D:        rosenbrock23D,
	E32:      rosenbrock23E32,
}

// rosenbrock23Interp is the power form of ode23s's continuous extension
// (Shampine & Reichelt 1997, §3; OrdinaryDiffEq.jl,
// lib/OrdinaryDiffEqRosenbrock/src/rosenbrock_interpolants.jl:
// y(t + θh) = y + h·(θ(1−θ)·k1 + θ(θ−2d)·k2)/(1−2d)): row i holds the
// coefficients of θ and θ² in stage k_{i+1}'s weight, with 1/(1−2d) = 1 + √2
// and 2d/(1−2d) = √2 for d = 1 − √2/2. The extension is of order 2, as the
// solution, and y(t + h) = y + h·k2 = y⁺.
var rosenbrock23Interp = [][]float64{
	{rosenbrock23OnePlusSqrt2, -rosenbrock23OnePlusSqrt2},
	{-rosenbrock23Sqrt2, rosenbrock23OnePlusSqrt2},
}

const (
	rosenbrock23Sqrt2        = 1.414213562373095048801688724209698078570
	rosenbrock23OnePlusSqrt2 = 2.414213562373095048801688724209698078570
)
