// Command gradsolve solves ensembles of small ODEs and returns exact
// reverse-mode gradients of a loss of the solutions, for the built-in
// problems of package problems, on the CPU engine or another registered
// one (-engine: the CPU engine and the GPU engines of package cuda,
// "cuda", "cuda-f32" and "cuda-multi", which need an NVIDIA GPU). With
// -engine cuda, a run whose kernels are not yet in the disk cache and
// compile long gets its results from the CPU engine while NVRTC compiles
// them (the output's engine says "cpu"; cuda's package doc, "First
// calls"); before it exits it waits for those compiles, saying so, so
// that later runs find them (an interrupt skips the wait).
//
// Usage:
//
//	gradsolve solve    [flags]  solve an ensemble
//	gradsolve grad     [flags]  solve and differentiate a loss
//	gradsolve fit      [flags]  fit parameters to data with Adam
//	gradsolve bench    [flags]  run the benchmark suites
//	gradsolve problems [-json]  list the built-in problems
//	gradsolve help [command]
//
// The flags of solve and grad mirror ode.Settings and ode.Problem in kebab
// case: -problem, -p, -y0, -t0, -t1, -saveat, -rtol, -atol, -max-steps,
// -dt0, -method (tsit5, vern7, rodas5p, rosenbrock23, or auto: ode.Auto;
// default ode.Route), -engine (cpu, auto or a registered engine:
// ode.Settings.Engine), -loss (grad: sumsq or y:K), -n, -vary pK=LO:HI or
// y0K=LO:HI (repeatable), -workers, -block, -format human|csv|json (-json
// is -format json), -out FILE, -arrays, -plot FILE (.png, .svg, .pdf) and
// -quiet. -atol takes one value or one per state component
// (ode.Settings.AbsTols). For example
//
//	gradsolve grad -problem lorenz -p 10,28,2.6666666666666665 -y0 1,0,0 -t0 0 -t1 1 -rtol 1e-10 -atol 1e-12 -loss sumsq -json
//	gradsolve grad -problem robertson -p 0.04,3e7,1e4 -y0 1,0,0 -t1 100 -method rodas5p -loss y:0 -json
//	gradsolve grad -problem lorenz -n 32768 -vary p1=0:21 -rtol 1e-6
//
// Output is a readable report by default, one JSON object with -json, and
// with -format csv a table with one row per trajectory (index, initial
// state, parameters by name, t, final state, status, accepted, rejected
// and, for grad, dL/dy0[c] and dL/d<parameter>); with -saveat the saved
// states are a second, long table (i, t, y[c]) written beside -out FILE.csv
// as FILE.saved.csv.
//
// The JSON keys are command, problem, method (the method that ran), engine
// (the engine that ran), n, dim, params, t0, t1, rtol, atol, vary,
// loss_name (grad), status ("ok", "stiff" for a gradient refused because
// a trajectory is stiff for the explicit method, or the error text),
// error (null or the error text), failed, stiff (trajectories stiff for
// the explicit method), loss (grad), y_final, grad_p, grad_y0, grad_shared (grad),
// saveat and y_saved (with -saveat), accepted, rejected, steps_min,
// steps_median, steps_max, checksum_y, checksum_grad_p and
// checksum_grad_y0 (grad), time_ms, setup_ms, record_ms and grad_ms
// (grad); "gradsolve help grad" describes each. Arrays are row-major
// [n×width] and are left out for n > 1024 unless -arrays is given.
//
// -plot draws the states at the save times of a few trajectories, one
// trajectory solved again at many times, or, for an ensemble without
// -saveat, the final states (grad: the gradient) against the first swept
// quantity. On a terminal, a run that lasts more than a second shows a
// progress bar on stderr (bench: over the cases of each suite), except
// with -quiet or csv or json output to stdout.
//
// The exit status is 0 on success, 1 if the run failed (a trajectory, a
// gradient refused as stiff, a non-finite gradient, writing the output or
// the plot; the JSON object is still printed, with status and error
// saying why) and 2 for a bad command line, with a message naming the
// flag and what its value should be (a mistyped flag's names the close
// ones, as "did you mean -rtol?"; parseFlags), and for an internal
// error: a panic anywhere
// in a command is recovered and reported as a bug. Ensembles too large for
// the machine's memory are refused before any work (limits.go).
//
// # Fit
//
// fit takes the flags of solve and its own: -fit (what to fit), -data (a
// CSV file of observations: an optional header, then traj,t,y0,... rows;
// indices 0 to n − 1 each with an observation; a repeated trajectory and
// time counts as a repeated measurement; a bad row is an error naming its
// line), -start, -noise, -fits, -steps (at least 1), -lr (positive), -clip,
// -remesh, -seed and -plot (the loss curve). Every numeric flag outside its
// domain (NaN, an infinity, a negative or zero value where it means
// nothing) is a command-line error naming the flag and its range. The
// output (human, -json, or -format csv: one row per trajectory with its
// fit's parameters and its own fitted initial state) goes to stdout or to
// -out FILE; the JSON has every fit's values (fitted) and every
// trajectory's fitted initial state (fitted_y0).
//
// # Output files
//
// No file is lost or half-written. Every file a command writes (solve and
// grad -out, FILE.saved.csv and -plot; fit -out and -plot; bench -out,
// -dump, -cpuprofile and -trace) is created only once the whole command line and
// its inputs (fit -data) are valid, written to a temporary file in the
// same directory (".NAME.tmp-*"), synced, and renamed into place when
// complete (package internal/atomicfile); on any error the temporary file
// is removed and an existing file is left as it was. bench replaces -out
// and the profile only if every suite succeeds. A symbolic link is
// followed (the file it names is replaced, the link kept); devices such
// as /dev/stdout are written directly. Two outputs, or an output and
// fit's -data, that name one file (the same path, through a symbolic link
// to the file or a directory, or a hard link) are refused with exit
// status 2, naming both flags. A write error on any output, stdout
// included (gradsolve fit > /dev/full), gives exit status 1. SIGINT and
// SIGTERM remove the temporary files of the outputs being written and
// exit with status 130 and 143.
//
// The command's code is a thin layer over packages ode and problems:
// parse.go parses flag values, options.go checks them against the problem
// and builds the ode.Problem and ode.Settings, limits.go estimates the
// memory of a run, solve.go runs them and builds the JSON result,
// human.go writes the tables, output.go the CSV and the output files,
// figure.go the plots, bar.go the progress bars, engines.go the engines
// and what a run's error tells the user (errorText); fit.go and bench.go are
// the fit and bench commands, data.go reads fit's -data.
package main
