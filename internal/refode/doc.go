// Package refode provides independent, high-accuracy reference solutions
// (test oracles) for ordinary differential equations and their forward
// sensitivities.
//
// Nothing here shares code with the gradsolve library: the integrators are
// separate float64 transcriptions of E. Hairer's DOP853 (explicit
// Dormand–Prince 8(5,3), Hairer, Nørsett & Wanner, Solving ODEs I, §II.10)
// and RADAU5 (3-stage Radau IIA of order 5 with simplified Newton
// iterations, Hairer & Wanner, Solving ODEs II, §IV.8), with Hairer's error
// norms and step-size controllers. They stop exactly on every requested
// output time (segment-by-segment integration; there is no dense output),
// so a reference value is never an interpolant.
//
// Forward sensitivities (SolveSens) integrate the variational equations
// S' = ∂f/∂y·S + [0 | ∂f/∂p] alongside y with full error control on S.
//
// problems.go holds plain definitions (f, ∂f/∂y, ∂f/∂p) of the test
// problems used by the library's tests, and refs.go small helpers that
// return reference endpoints and sensitivities directly. The accuracies
// quoted in the documentation are measured by the tests of this package
// against closed forms, published reference values and mpmath Taylor-series
// solutions (testdata/).
//
// The code favours clarity over speed; it is meant for tests only.
package refode
