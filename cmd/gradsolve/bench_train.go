package main

import (
	"flag"
	"io"
	"strings"

	"github.com/gradsolve-go/gradsolve/bench"
)

// trainFlags are the flags of the train suites (bench.RunTrain).
type trainFlags struct {
	b, fits, calls, cases *string
}

// benchTrainFlags defines the train suites' flags on fs.
func benchTrainFlags(fs *flag.FlagSet) *trainFlags {
	return &trainFlags{
		b:     fs.String("b", "", "train suites: comma-separated batch sizes of the neural fit (default 256,4096; gpu-train 4096,65536)"),
		fits:  fs.String("fits", "", "train suites: comma-separated numbers of independent fits of the Lorenz and PK calibrations (default 2048,32768; gpu-train 65536,262144)"),
		calls: fs.String("calls", "", "train suites: comma-separated ensemble sizes of the whole Lorenz Grad calls (default 128,32768; gpu-train 128,32768,262144,1048576)"),
		cases: fs.String("cases", "", "train suites: comma-separated kinds of case, of "+strings.Join(bench.TrainCases, ", ")+" (default: all)"),
	}
}

// benchTrain runs the train or gpu-train suite. -n and -rtol do not apply
// (the suites have three kinds of size, and fixed tolerances); the dump,
// if named, goes to the file dump, which appears only if the suite
// succeeds (as the other outputs).
func benchTrain(w io.Writer, suite string, tf *trainFlags, ns []int, rtols []float64, reps, workers int,
	engine string, asJSON bool, dump string, lim limits) (err error) {
	if ns != nil || rtols != nil {
		return usagef("-n, -rtol: the %s suite takes -b (neural batch sizes), -fits (Lorenz and PK calibrations) and -calls (Grad calls); its tolerances are fixed", suite)
	}
	cfg := bench.TrainConfig{Reps: reps, Workers: workers, JSON: asJSON, GPU: suite == "gpu-train"}
	if cfg.GPU {
		cfg.Engine = engine
	}
	for _, l := range []struct {
		name string
		s    *string
		dst  *[]int
	}{{"-b", tf.b, &cfg.NeuralB}, {"-fits", tf.fits, &cfg.FitN}, {"-calls", tf.calls, &cfg.CallN}} {
		v, perr := benchParseInts(*l.s)
		if perr != nil {
			return usagef("%s %q: %v", l.name, *l.s, perr)
		}
		*l.dst = v
	}
	if *tf.cases != "" {
		for _, c := range strings.Split(*tf.cases, ",") {
			c = strings.TrimSpace(c)
			known := false
			for _, k := range bench.TrainCases {
				known = known || k == c
			}
			if !known {
				return usagef("-cases: unknown case %q; valid cases are %s", c, strings.Join(bench.TrainCases, ", "))
			}
			cfg.Cases = append(cfg.Cases, c)
		}
	}
	perTraj := trajectoryBytes("grad", 3, 3, 0, false)
	for _, n := range append(append([]int(nil), cfg.FitN...), cfg.CallN...) {
		if err := checkMemory("the "+suite+" suite", n, perTraj, lim); err != nil {
			return err
		}
	}
	return withDump(dump, &cfg.Dump, func() error { _, err := bench.RunTrain(w, cfg); return err })
}
