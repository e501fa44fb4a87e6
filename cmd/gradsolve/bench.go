package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/gradsolve-go/gradsolve/bench"
	"github.com/gradsolve-go/gradsolve/ode"
)

// benchUsage is the synopsis of the bench command.
const benchUsage = `Usage: gradsolve bench [flags]

Runs the benchmark suites of package bench and prints their tables (or JSON
lines with -json). Suites: lorenz (gradsolve's Lorenz protocol, library vs
the hand-written Tsit5 baseline), stiff (Robertson and HIRES with Rodas5P
and Rosenbrock23), neural (y' = MLP(y) with a 2-32-32-2 tanh network of 1218
shared weights; -n sets the batch sizes), memory (one gradient over 2^20
Lorenz trajectories with its peak memory), all (the four in turn); on a GPU
(package cuda, -engine): gpu-lorenz (the Lorenz protocol beside hand-written
fused kernels), gpu-robertson (Rodas5P), gpu-neural, gpu (the three in
turn), gpu-events (bouncing balls and a terminal threshold with events,
Tsit5, against closed forms; -engine cpu runs it on the CPU), gpu-large
(Lorenz-96 with d = 64 and 256, POLL, the Brusselator, HIRES and neural
Robertson: kernels and whole calls beside the CPU engine's gradient;
-problems picks them, -n sets one size for all); train (training steps of
fits and whole Grad calls, on the CPU: -b, -fits, -calls, -cases) and
gpu-train (the same on -engine).

Flags:

`

// benchCommand runs "gradsolve bench": it parses args, runs the chosen
// suites and writes their output to stdout, or to the file named by -out.
// Usage errors and progress (a bar over the cases of each suite, see
// benchBar) go to stderr. Ensemble sizes are checked against lim before
// any work.
func benchCommand(args []string, stdout, stderr io.Writer, lim limits, bars barConfig) (err error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by the caller, once; -h prints the help below
	fs.Usage = func() {}
	suite := fs.String("suite", "lorenz", "suite to run: lorenz, stiff, neural, memory, all, gpu-lorenz, gpu-robertson, gpu-neural, gpu, gpu-events, gpu-large, train or gpu-train")
	engine := fs.String("engine", "cuda", "engine of the gpu suites: cuda, cuda-f32 or cuda-multi (gpu-events: these or cpu; cuda-f32 with -rtol 1e-4 or more)")
	trainOpts := benchTrainFlags(fs)
	nList := fs.String("n", "", "comma-separated ensemble sizes (default: the suite's; -suite memory takes one size, default 1048576)")
	rtolList := fs.String("rtol", "", "comma-separated relative tolerances (default: the suite's; -suite memory takes one, default 1e-6)")
	reps := fs.Int("reps", bench.DefaultReps, "timed repetitions per case (the median is reported, after one warm-up)")
	workers := fs.Int("workers", 0, "goroutines of the parallel runs (0: GOMAXPROCS)")
	refSample := fs.Int("ref-sample", 0, "most trajectories per reference solution (0: the suite's default)")
	problemList := fs.String("problems", "", "stiff suite: comma-separated problems: robertson, hires, pollution, brusselator (default: robertson,hires); gpu-large suite: of lorenz96-64, lorenz96-256, pollution, brusselator, hires, neural-robertson (default: all)")
	memLimit := fs.Int64("memory-limit", 0, "memory suite: Settings.MemoryLimit in bytes (0: the library's default)")
	checkpoint := fs.Int("checkpoint", 0, "memory suite: Settings.Checkpoint interval (0: automatic)")
	dump := fs.String("dump", "", "neural, gpu-neural and train suites: write the problem of the largest batch and gradsolve's loss and gradient for every batch as JSON to `FILE` (input of bench/anchors/diffrax_neural.py)")
	hiddenList := fs.String("hidden", "", "gpu-neural suite: comma-separated widths of the network's tanh hidden layers (default: 32,32, the protocol's)")
	jsonOut := fs.Bool("json", false, "write JSON lines instead of tables")
	out := fs.String("out", "", "write the results to `FILE` instead of stdout, through a temporary file renamed into place only if every suite succeeds")
	quiet := fs.Bool("quiet", false, "no progress bar (there is none off a terminal, for suites under a second, or with -json to stdout)")
	traceFile := fs.String("trace", "", "write an execution trace of the run (go tool trace format) to `FILE`: its regions name the phases of each call (ode.Grad.check, cuda.fill, cuda.batch, cuda.scatter, ...); written only if every suite succeeds")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run (go tool pprof format) to `FILE`: where a call's host time goes (started once the command line is valid, written only if every suite succeeds)")
	if err = parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, benchUsage)
			fs.SetOutput(stderr)
			fs.PrintDefaults()
		}
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q; bench takes only flags", fs.Args())
	}
	ns, err := benchParseInts(*nList)
	if err != nil {
		return usagef("-n %q: %v", *nList, err)
	}
	rtols, err := benchParseFloats(*rtolList)
	if err != nil {
		return usagef("-rtol %q: %v", *rtolList, err)
	}
	hidden, err := benchParseInts(*hiddenList)
	if err != nil {
		return usagef("-hidden %q: %v", *hiddenList, err)
	}
	switch {
	case *reps < 1:
		return usagef("-reps %d: need at least 1", *reps)
	case *workers < 0:
		return usagef("-workers %d: want 0 (all cores) or more", *workers)
	case *refSample < 0:
		return usagef("-ref-sample %d: want 0 (the suite's default) or more", *refSample)
	case *memLimit < 0:
		return usagef("-memory-limit %d: want 0 (the library's default) or more bytes", *memLimit)
	case *checkpoint < 0 || *checkpoint > ode.DefaultMaxSteps:
		return usagef("-checkpoint %d: want 0 (automatic) to %d (the step budget of a trajectory: a longer interval is the same as storing only the initial state)", *checkpoint, ode.DefaultMaxSteps)
	}
	var suites []string
	switch *suite {
	case "lorenz", "stiff", "neural", "memory":
		suites = []string{*suite}
	case "all":
		suites = []string{"lorenz", "stiff", "neural", "memory"}
	case "gpu-lorenz", "gpu-robertson", "gpu-neural", "gpu-events", "gpu-large":
		suites = []string{*suite}
	case "gpu":
		suites = []string{"gpu-lorenz", "gpu-robertson", "gpu-neural"}
	case "train", "gpu-train":
		suites = []string{*suite}
	default:
		return usagef("-suite %q: unknown suite; valid suites are lorenz, stiff, neural, memory, all, gpu-lorenz, gpu-robertson, gpu-neural, gpu, gpu-events, gpu-large, train, gpu-train", *suite)
	}
	// -engine names the engine of the gpu suites: refused elsewhere (the
	// CPU suites run on the cpu engine) and checked before any suite runs.
	engineSet := false
	fs.Visit(func(f *flag.Flag) { engineSet = engineSet || f.Name == "engine" })
	usesEngine := slices.ContainsFunc(suites, func(s string) bool { return strings.HasPrefix(s, "gpu") })
	switch {
	case engineSet && !usesEngine:
		return usagef("-engine applies to the gpu suites (gpu-lorenz, gpu-robertson, gpu-neural, gpu-events, gpu-large, gpu-train), not -suite %s, which runs on the cpu engine", *suite)
	case usesEngine:
		e, err := parseEngine(*engine)
		if err != nil {
			return usagef("-engine: %v", err)
		}
		*engine = e
	}
	if *problemList != "" && *suite != "stiff" && *suite != "all" && *suite != "gpu-large" {
		return usagef("-problems applies to the stiff and gpu-large suites, not -suite %s", *suite)
	}
	if *problemList != "" {
		// Checked here, not by the suite once it runs: a bad command
		// line prints nothing and exits 2.
		valid := bench.StiffCases()
		if *suite == "gpu-large" {
			valid = bench.LargeCases()
		}
		for i, name := range strings.Split(*problemList, ",") {
			if !slices.Contains(valid, name) {
				return usagef("-problems %q: element %d %q is not a problem of -suite %s; valid names are %s", *problemList, i+1, name, *suite, strings.Join(valid, ", "))
			}
		}
	}
	if *suite == "gpu-large" && len(ns) > 1 {
		return usagef("-n: the gpu-large suite takes one size, for every problem (default: each problem's, 4096 or 1024)")
	}
	if hidden != nil && !slices.Contains(suites, "gpu-neural") {
		return usagef("-hidden applies to the gpu-neural suite, not -suite %s", *suite)
	}
	if *dump != "" && *suite != "neural" && *suite != "all" && *suite != "gpu-neural" && *suite != "gpu" && *suite != "train" && *suite != "gpu-train" {
		return usagef("-dump: only the neural and train suites write a dump")
	}
	// The suites' gradients: Lorenz (d = 3, 3 parameters) and, for the
	// stiff suite, HIRES and Robertson (d ≤ 8, ≤ 3 parameters).
	for _, s := range suites {
		perTraj := trajectoryBytes("grad", 3, 3, 0, false)
		switch s {
		case "stiff":
			perTraj = trajectoryBytes("grad", 8, 3, 0, false)
		case "gpu-large":
			perTraj = trajectoryBytes("grad", 256, 25, 0, false)
		}
		sizes := ns
		if s == "memory" && len(ns) == 0 {
			sizes = []int{bench.DefaultMemoryN}
		}
		for _, n := range sizes {
			if err := checkMemory("the "+s+" suite", n, perTraj, lim); err != nil {
				return err
			}
		}
	}
	memCfg := bench.MemoryConfig{MemoryLimit: *memLimit, Checkpoint: *checkpoint, Workers: *workers, JSON: *jsonOut}
	if *suite == "memory" {
		// The memory suite runs one case; with -suite all it keeps its
		// defaults and -n and -rtol apply to the other suites.
		if len(ns) > 1 || len(rtols) > 1 {
			return usagef("-n, -rtol: the memory suite takes a single size and tolerance")
		}
		if len(ns) == 1 {
			memCfg.N = ns[0]
		}
		if len(rtols) == 1 {
			memCfg.RelTol = rtols[0]
		}
	}

	// The command line is valid: start the outputs (replaced only if every
	// suite succeeds) and the profile.
	if err := checkFiles(fileArg{flag: "-out", path: *out}, fileArg{flag: "-cpuprofile", path: *cpuProfile}, fileArg{flag: "-trace", path: *traceFile}, fileArg{flag: "-dump", path: *dump}); err != nil {
		return err
	}
	outs, err := startBenchOutputs(*out, *cpuProfile, *traceFile)
	if err != nil {
		return err
	}
	defer func() { err = outs.finish(err) }()
	w := outs.writer(stdout)
	for k, s := range suites {
		if k > 0 && !*jsonOut {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(stderr, "gradsolve bench: running suite %s\n", s)
		w, bar := benchBar(w, stderr, s, ns, rtols, *jsonOut, *quiet || (*jsonOut && *out == ""), bars) // this suite's w counts its cases
		switch s {
		case "lorenz":
			_, err = bench.RunLorenz(w, bench.LorenzConfig{N: ns, RelTol: rtols, Reps: *reps,
				RefSample: *refSample, Workers: *workers, JSON: *jsonOut})
		case "stiff":
			var names []string
			if *problemList != "" {
				names = strings.Split(*problemList, ",")
			}
			_, err = bench.RunStiff(w, bench.StiffConfig{N: ns, RelTol: rtols, Reps: *reps, Problems: names,
				RefSample: *refSample, Workers: *workers, JSON: *jsonOut})
		case "neural":
			err = benchNeural(w, bench.NeuralConfig{B: ns, Reps: *reps, RefSample: *refSample,
				Workers: *workers, JSON: *jsonOut}, *dump)
		case "memory":
			_, err = bench.RunMemory(w, memCfg)
		case "train", "gpu-train":
			err = benchTrain(w, s, trainOpts, ns, rtols, *reps, *workers, *engine, *jsonOut, *dump, lim)
		case "gpu-large":
			var names []string
			if *problemList != "" {
				names = strings.Split(*problemList, ",")
			}
			_, err = bench.RunGPULarge(w, bench.LargeConfig{GPUConfig: bench.GPUConfig{N: ns, RelTol: rtols, Reps: *reps,
				RefSample: *refSample, Engine: *engine, JSON: *jsonOut}, Problems: names})
		case "gpu-lorenz", "gpu-robertson", "gpu-neural", "gpu-events":
			err = benchGPU(w, s, bench.GPUConfig{N: ns, RelTol: rtols, Reps: *reps, RefSample: *refSample,
				Engine: *engine, JSON: *jsonOut, Hidden: hidden}, *dump)
		}
		bar.Finish()
		if err != nil {
			return err
		}
	}
	return nil
}

// benchNeural runs the neural suite with cfg, writing its dump to the file
// named dump unless dump is "".
func benchNeural(w io.Writer, cfg bench.NeuralConfig, dump string) error {
	return withDump(dump, &cfg.Dump, func() error { _, err := bench.RunNeural(w, cfg); return err })
}

// withDump runs run with *to set to the file named dump (to left alone
// if dump is ""), written through a temporary file that is put in place
// only if run succeeds.
func withDump(dump string, to *io.Writer, run func() error) (err error) {
	if dump != "" {
		f, ferr := createAtomic(dump)
		if ferr != nil {
			return fmt.Errorf("-dump: %v", ferr)
		}
		defer func() { err = commitIf(f, err) }()
		*to = f
	}
	return run()
}

// benchGPU runs one of the GPU suites with cfg, writing the neural dump to
// the file named dump unless dump is "".
func benchGPU(w io.Writer, suite string, cfg bench.GPUConfig, dump string) (err error) {
	switch suite {
	case "gpu-lorenz":
		_, err = bench.RunGPU(w, cfg)
	case "gpu-robertson":
		_, err = bench.RunGPURobertson(w, cfg)
	case "gpu-neural":
		err = withDump(dump, &cfg.Dump, func() error { _, err := bench.RunGPUNeural(w, cfg); return err })
	case "gpu-events":
		_, err = bench.RunEvents(w, cfg)
	}
	return err
}

// benchParseInts parses a comma-separated list of positive integers; "" gives
// nil.
func benchParseInts(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for i, f := range strings.Split(s, ",") {
		t := strings.TrimSpace(f)
		v, err := strconv.Atoi(t)
		switch {
		case t == "":
			return nil, fmt.Errorf("element %d is empty", i+1)
		case err != nil:
			return nil, fmt.Errorf("element %d %q is not an integer", i+1, t)
		case v <= 0:
			return nil, fmt.Errorf("%d is not positive", v)
		}
		out = append(out, v)
	}
	return out, nil
}

// benchParseFloats parses a comma-separated list of tolerances, finite
// numbers in (0, 1); "" gives nil.
func benchParseFloats(s string) ([]float64, error) {
	if s == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := parseNumber(f)
		if err != nil {
			return nil, errors.New(strings.TrimPrefix(err.Error(), " "))
		}
		if !(v > 0) || v >= 1 {
			return nil, fmt.Errorf("%v is not a tolerance; want numbers in (0, 1)", v)
		}
		out = append(out, v)
	}
	return out, nil
}
