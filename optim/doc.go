// Package optim holds first-order optimisers over flat parameter vectors:
// Adam, AdamW and SGD with momentum, learning-rate schedules, gradient
// clipping by global norm, and a documented format to save and reload an
// optimiser's state.
//
// # Conventions
//
// Parameters and gradients are plain []float64 of one length n, fixed for
// the life of an optimiser: Step(params, grad) updates params in place
// (params is the destination) and never modifies grad. The optimiser keeps
// its state (moment vectors, step count) itself, allocated on the first
// Step; a length that changes afterwards is a programming error and
// panics with a message prefixed "optim: ".
//
// Every optimiser is a struct whose zero value is usable and means the
// documented defaults, in the style of gonum's optimize methods:
//
//	var opt optim.Adam                  // lr 1e-3, β = (0.9, 0.999), ε = 1e-8
//	opt := &optim.Adam{LearnRate: 0.05} // the other fields at their defaults
//	opt.Step(params, grad)
//
// A Schedule, if set, replaces the constant LearnRate: step k (0-based,
// the number of steps already taken) uses Schedule.Rate(k). There are no
// package-level variables that change behaviour.
//
// # State files
//
// SaveState and LoadState write and read an optimiser's state as one
// JSON object (see State for the fields):
//
//	{"format": "gradsolve/optim", "version": 1, "kind": "adam",
//	 "step": 3, "n": 2, "moments": {"m": [...], "v": [...]}}
//
// Numbers are written as JSON numbers in Go's shortest round-trip form
// (strconv.FormatFloat(x, 'g', -1, 64)), so a state reloads bit for bit;
// the non-finite values, which JSON lacks, are written as the strings
// "NaN", "+Inf" and "-Inf". The hyperparameters (learning rate, β, ε, ...)
// belong to the optimiser value, not to its state, and are not saved.
package optim
