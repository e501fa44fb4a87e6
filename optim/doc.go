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
// # Invalid hyperparameters
//
// A learning rate (or a schedule's rate) that is negative, NaN or
// infinite, a β outside [0, 1), a negative or NaN ε, weight decay or
// momentum is invalid. Step has no error return, so it never panics on
// them and never moves the parameters with them: it refuses the step,
// leaving params and the state unchanged (the step is not counted), and
// records a *HyperparameterError that Err returns. Validate returns the
// same error before a step is tried; callers check it before each step
// (fit.Run does, and fails the fit with it):
//
//	opt := &optim.Adam{LearnRate: lr}
//	if err := opt.Validate(); err != nil {
//		return err // "optim: adam: LearnRate = NaN; want a finite value ≥ 0 (0 means the default)"
//	}
//
// Only a length mismatch (len(grad) != len(params), or a length that
// changes between steps) is a programming error and panics. A zero rate
// from a schedule is valid (a warm-up from 0); a constant LearnRate of 0
// means the default. Schedules with invalid constants give NaN rates,
// and their Validate methods say why.
//
// # Rules: steps taken where the parameters live
//
// Adam, AdamW and SGD implement Ruled: RuleAt(k) returns step k as a Rule
// (the formula's kind, the resolved hyperparameters, the learning rate
// and the bias corrections of that step), and Rule.Apply is the formula
// their Step runs. An engine that keeps the parameters in its own memory
// (package fit on a GPU engine) applies the rule there with the same
// arithmetic, so its parameters and moments are Step's bit for bit on the
// same gradient; SetState then hands the optimiser the state it reached.
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
//
// LoadState refuses, with an error naming the problem and the fix, and
// leaving the optimiser unchanged: a file with anything after the first
// state (two saves concatenated), an unknown field, another format,
// version or optimiser kind, a negative step count, moments of the wrong
// length, a non-finite moment or a negative second moment. The length of
// the parameter vector is not known until the first Step; CheckLen(o, n)
// reports a state saved for another length before Step would panic on it
// (fit.Run checks it).
package optim
