// Package problems holds the library's built-in ODE problems: traced
// right-hand sides (ode.Field) together with their standard initial
// states, parameters and time spans, in the style of gonum's
// optimize/functions and integrate/testquad. Tests, examples, benchmarks
// and the gradsolve command all use them, by constructor or by name
// (ByName, Names).
//
//	Name              Dim  Params  Shared  Stiff  Constructor
//	lorenz            3    3       0       no     Lorenz
//	vdp               2    1       0       no     VanDerPol
//	vdp-stiff         2    1       0       yes    StiffVanDerPol(1e3)
//	lorenz96          8    1       0       no     Lorenz96(8)
//	lorenz96-64       64   1       0       no     Lorenz96(64)
//	lorenz96-256      256  1       0       no     Lorenz96(256)
//	linear            3    1       0       no     Linear(default A, 3)
//	kepler            4    1       0       no     Kepler
//	robertson         3    3       0       yes    Robertson
//	hires             8    0       0       yes    HIRES
//	pollution         20   25      0       yes    Pollution
//	brusselator       64   1       0       yes    Brusselator(32)
//	neural-robertson  3    2       337     yes    NeuralRobertson(1)
//	pleiades          28   7       0       no     Pleiades
//
// BouncingBall is a field with its event (ode.Event, Settings.Events)
// and BouncingBallClosedForm its exact height and gradient: the reference
// of the event tests on every engine and of the events benchmark.
//
// # Conventions
//
// States and parameters of one trajectory are plain []float64: Y0 has
// length Field.Dim, P length Field.Params, Shared length Field.Shared.
// Ensemble arrays are row-major: y0[i*Dim+j] is component j of trajectory
// i, params[i*Params+k] parameter k of trajectory i. In the equations,
// states and parameters are numbered from 0 as in the code (y0, y1, …),
// except where a problem's literature numbers them from 1 and the doc
// says so. Slices a function writes are named dst; a nil dst is
// allocated. Invalid arguments (a dimension too small, a matrix of the
// wrong size) are programming errors and panic with a message prefixed
// "problems: ".
//
// Every constructor returns fresh slices, so a caller may modify a
// Problem's Y0, P and Shared without affecting other callers.
package problems
