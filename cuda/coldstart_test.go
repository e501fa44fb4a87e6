package cuda

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda/driver"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// coldOptionSets are the NVRTC option sets TestGPUColdStart compares
// (Tuning.FastCompile): the engine's own, then candidates that trade the
// kernel's speed for NVRTC's time. An option the NVRTC does not know is
// reported and its set skipped.
var coldOptionSets = []string{
	"none",
	"-Ofast-compile=max",
	"-Ofast-compile=mid",
	"-Ofast-compile=min",
	"--ptxas-options=-O1",
	"--ptxas-options=-O0",
	"-dopt=off",
	"-Ofast-compile=mid --ptxas-options=-O1",
	"-minimal",
	"-minimal --ptxas-options=-O1",
}

// coldRow is one measurement of TestGPUColdStart.
type coldRow struct {
	Phase   string  `json:"phase"` // "options" or "problems"
	Problem string  `json:"problem"`
	Method  string  `json:"method"`
	Options string  `json:"options"`
	Split   int     `json:"split_from"`        // Tuning.SplitFrom (phase "split"; phase "units": 1 in parts, 0 not; 0 elsewhere: the default)
	Source  int     `json:"source_bytes"`      // the gradient kernel's source in the thread layout (-1: Method Auto)
	Cold    float64 `json:"cold_s"`            // NewSolver and the first Grad: tracing, generation, NVRTC, load, run (phase "tiered": to its result, from the CPU engine where its kernels compile long)
	Compile float64 `json:"compile_s"`         // of which generating and compiling kernels (TraceStats.Compile; phase "tiered": the background compiles' too, once ended)
	Ready   float64 `json:"ready_s"`           // phase "tiered": from NewSolver until the first Grad's kernels have compiled (WaitForCompiles)
	OnCPU   int     `json:"first_on_cpu"`      // phase "tiered": the first Grad's operations run on the CPU engine (TraceStats.OnCPU)
	Stopped int     `json:"first_cpu_stopped"` // phase "tiered": the first Grad's CPU runs stopped for the device (TraceStats.CPUStopped: the compile ended first)
	Engine  string  `json:"first_engine"`      // the first Grad's Solution.Engine
	WarmCPU int     `json:"warm_on_cpu"`       // the second Grad's operations run on the CPU engine (kernels first asked for then)
	Warm    float64 `json:"warm_s"`            // a second Grad (the kernel compiled)
	Kernel  float64 `json:"kernel_s"`          // its kernels' device time
	Parts   int     `json:"parts_failed"`      // the first Grad's kernels whose parts failed, compiled as one unit (TraceStats.PartsFailed; Err holds why)
	Err     string  `json:"error,omitempty"`
}

// TestGPUColdStart measures the first Grad call with an empty kernel
// cache (issue 26: at most 3 s up to d = 64, 5 s at d = 256 and for
// networks up to 2-128-128-2) and what NVRTC options that compile faster
// cost the kernel (Tuning.FastCompile). n = 4096 trajectories of each
// problem at its defaults (problemCase: one save time, a loss of the
// final and saved states).
//
// Phase "options": each option set of coldOptionSets (those NVRTC
// accepts) on Pollution with Rodas5P, Lorenz-96 (d = 64) with Rodas5P and
// Lorenz with Tsit5: cold and warm Grad. Phase "problems": every built-in
// problem (problems.Names) with the default method (Auto), Rodas5P, and
// Tsit5 where it is not stiff, then MLP fields 2-w-w-2 (w = 32, 64, 128:
// mlpCase, Tsit5, named mlp-2-w-w-2), with the engine's own options. The disk
// cache is off (GRADSOLVE_CUDA_CACHE=off).
//
// Phase "tiered" (only when named): with the engine's own options and
// tiered first calls (tier.go, the default; the other phases set
// Tuning.WaitForCompile), the time to the first Grad's result and the
// engine that served it (the CPU engine where its kernels compile long,
// the device where they compiled before the CPU engine's run ended, which
// was then stopped: "CPU runs stopped"), the time until its kernels
// have compiled (Ready) and a second Grad, on the device: first issue
// 26's cases (bench's gpu-large suite: Pollution, HIRES, the neural
// Robertson problem and the Brusselator, n = 1024, with Rodas5P,
// Lorenz-96 at d = 64 and 256 with Tsit5; the MLP fields), then every built-in problem
// with Rodas5P up to d = 64, and with Tsit5 where it is not stiff, n =
// 4096. Each case waits for its compiles (tens of seconds for the first
// six): the whole phase may take more than ten minutes, so name a
// budget (see below).
//
// Phase "split" (only when named): the Rodas5P gradients of Pollution,
// HIRES, the Brusselator, Lorenz-96 (d = 64) and the neural Robertson
// problem with the engine's own options, their large step programs split
// (SplitFrom 256 KiB, proposedSplitFrom) and not (-1): what compiling
// them apart saves cold and costs warm.
//
// Phase "units" (only when named): the first Grad of Pollution, HIRES,
// the Brusselator (n = 1024) and Lorenz-96 (d = 64) with Rodas5P and
// Lorenz-96 (d = 256) with Tsit5, in the engine's own layouts and
// options, with the kernels compiled in parts (Tuning.SplitUnits,
// concurrently, then linked) and not, each on an empty disk cache of its
// own (GRADSOLVE_CUDA_CACHE a fresh folder, not "off"); NVRTC has
// compiled the option probes first, so neither pays its loading.
//
// Environment: GS_COLDSTART_PHASES ("options,problems", the default; or
// any of tiered, options, problems, split, units),
// GS_COLDSTART_ONLY (run the cases whose problem-method name contains
// it), GS_COLDSTART_BUDGET (seconds, default 230: cases that would start
// past it are skipped and listed), GS_COLDSTART_JSON (a file for the
// rows as JSON). It skips without a GPU.
func TestGPUColdStart(t *testing.T) {
	needGPUEngine(t)
	t.Setenv("GRADSOLVE_CUDA_CACHE", "off")
	start := time.Now()
	budget := 230 * time.Second
	if s := os.Getenv("GS_COLDSTART_BUDGET"); s != "" {
		sec, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("GS_COLDSTART_BUDGET=%q: %v", s, err)
		}
		budget = time.Duration(sec * float64(time.Second))
	}
	phases := os.Getenv("GS_COLDSTART_PHASES")
	if phases == "" {
		phases = "options,problems"
	}
	only := os.Getenv("GS_COLDSTART_ONLY")
	major, minor, path, _ := driver.NVRTCVersion()
	be, err := registered[0].backend() // "cuda"
	if err != nil {
		t.Fatal(err)
	}
	arch := be.(*gpuBackend).dev.Info().Arch
	t.Logf("NVRTC %d.%d (%s), %s, budget %v", major, minor, path, arch, budget)

	// The option sets this NVRTC accepts, on a small kernel.
	const tiny = "extern \"C\" __global__ void gs_probe(double* x) { x[threadIdx.x] += 1.0; }\n"
	var sets []string
	for _, o := range coldOptionSets {
		opts := (Tuning{FastCompile: o, FastCompileFrom: 1}).compileOptions(1)
		if _, err := driver.Compile(tiny, arch, &driver.CompileSettings{Options: opts, NoCache: true}); err != nil {
			t.Logf("options %q: rejected by NVRTC %d.%d, skipped: %v", o, major, minor, firstLines(err.Error(), 3))
			continue
		}
		sets = append(sets, o)
	}

	var rows []coldRow
	var skipped []string
	// Each phase's engines are their own (FastCompileFrom 1 or 2), so that
	// no case finds another's kernel in an engine's memory.
	// n trajectories (run: 4096).
	// runCase runs c (named name, its method m) in phase; c is nil for
	// the built-in problem name at n trajectories (problemCase).
	runCase := func(phase, name string, c *engineCase, m ode.Method, opts string, split, n int) {
		// (Phases other than "tiered" wait for their compiles: tuned sets
		// WaitForCompile on the device's engines.)
		cname := name + "-" + m.Name()
		if only != "" && !strings.Contains(cname, only) {
			return
		}
		if c == nil {
			pc := problemCase(t, name, m, n)
			c = &pc
		}
		if time.Since(start) > budget {
			skipped = append(skipped, fmt.Sprintf("%s %s %q", phase, cname, opts))
			return
		}
		from := 1
		if phase == "problems" {
			from = 2
		}
		tun := Tuning{FastCompile: opts, FastCompileFrom: from}
		if phase == "split" {
			// The engine's own options, on an engine of its own (split
			// -1 or 1: a name apart from the other phases').
			tun = Tuning{FastCompileFrom: defaultFastCompileFrom, SplitFrom: split}
			opts = fmt.Sprintf("split %d", split)
		}
		if phase == "units" {
			// The engine's own options and layouts, the kernels compiled
			// in parts (split 1) or not (0), each case on an empty cache
			// of its own (the units' and the link's entries are written
			// as a user's first call writes them).
			tun = Tuning{FastCompileFrom: defaultFastCompileFrom, SplitUnits: split > 0}
			opts = fmt.Sprintf("units %t", split > 0)
			t.Setenv("GRADSOLVE_CUDA_CACHE", t.TempDir())
		}
		if phase == "tiered" {
			// The engine's own options and threshold, tiered (tierMin),
			// on an engine of its own.
			tun = Tuning{FastCompileFrom: defaultFastCompileFrom, tierMin: defaultTierFrom}
			opts = "tiered"
		}
		row := coldRun(t, tuned(t, "cuda", tun), name, *c, phase == "tiered")
		row.Phase, row.Options, row.Split = phase, opts, split
		rows = append(rows, row)
		if phase == "tiered" {
			t.Logf("%-8s %-28s %8d B  first result %7.2f s on %-6s (%d operations on the CPU, %d CPU runs stopped)  kernels ready %7.2f s (compile %7.2f s)  warm %7.3f s (kernels %7.3f s, %d on the CPU) %s",
				phase, cname, row.Source, row.Cold, servedBy(row.Engine), row.OnCPU, row.Stopped, row.Ready, row.Compile, row.Warm, row.Kernel, row.WarmCPU, row.Err)
			return
		}
		t.Logf("%-8s %-28s %-40q %8d B  cold %7.2f s (compile %7.2f s)  warm %7.3f s (kernels %7.3f s) %s",
			phase, cname, opts, row.Source, row.Cold, row.Compile, row.Warm, row.Kernel, row.Err)
	}
	runN := func(phase, name string, m ode.Method, opts string, split, n int) {
		runCase(phase, name, nil, m, opts, split, n)
	}
	run := func(phase, name string, m ode.Method, opts string, split int) {
		runN(phase, name, m, opts, split, 4096)
	}
	// mlps are the MLP fields of issue 26's cold-start target (networks up
	// to 2-128-128-2: mlpCase, Tsit5), n = 4096.
	mlps := func(phase, opts string) {
		for _, w := range []int{32, 64, 128} {
			c := mlpCase(4096, []int{2, w, w, 2})
			runCase(phase, fmt.Sprintf("mlp-2-%d-%d-2", w, w), &c, c.set.Method, opts, 0, c.prob.N)
		}
	}
	if strings.Contains(phases, "tiered") {
		issue := []struct {
			name string
			m    ode.Method
			n    int
		}{{"pollution", ode.Rodas5P, 4096}, {"hires", ode.Rodas5P, 4096}, {"neural-robertson", ode.Rodas5P, 4096},
			{"lorenz96-64", ode.Tsit5, 4096}, {"brusselator", ode.Rodas5P, 1024}, {"lorenz96-256", ode.Tsit5, 4096}}
		done := map[string]bool{}
		for _, c := range issue {
			runN("tiered", c.name, c.m, "", 0, c.n)
			done[c.name+"-"+c.m.Name()] = true
		}
		mlps("tiered", "")
		for _, name := range problems.Names() {
			pr, err := problems.ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			// (Rodas5P beyond d = 64: minutes on the CPU engine and in
			// NVRTC alike.)
			var methods []ode.Method
			if pr.Field.Dim <= 64 {
				methods = append(methods, ode.Rodas5P)
			}
			if !pr.Stiff {
				methods = append(methods, ode.Tsit5)
			}
			for _, m := range methods {
				if !done[name+"-"+m.Name()] {
					run("tiered", name, m, "", 0)
				}
			}
		}
	}
	if strings.Contains(phases, "options") {
		for _, c := range []struct {
			name string
			m    ode.Method
		}{{"pollution", ode.Rodas5P}, {"lorenz", ode.Tsit5}, {"lorenz96-64", ode.Rodas5P}} {
			for _, o := range sets {
				run("options", c.name, c.m, o, 0)
			}
		}
	}
	if strings.Contains(phases, "problems") {
		for _, name := range problems.Names() {
			pr, err := problems.ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			methods := []ode.Method{ode.Auto, ode.Rodas5P}
			if !pr.Stiff {
				methods = append(methods, ode.Tsit5)
			}
			for _, m := range methods {
				run("problems", name, m, "none", 0)
			}
		}
		mlps("problems", "none")
	}
	if strings.Contains(phases, "split") {
		for _, name := range []string{"pollution", "hires", "brusselator", "lorenz96-64", "neural-robertson"} {
			for _, split := range []int{proposedSplitFrom, -1} {
				run("split", name, ode.Rodas5P, "", split)
			}
		}
	}
	if strings.Contains(phases, "units") {
		for _, c := range []struct {
			name string
			m    ode.Method
			n    int
		}{{"pollution", ode.Rodas5P, 4096}, {"hires", ode.Rodas5P, 4096}, {"brusselator", ode.Rodas5P, 1024},
			{"lorenz96-64", ode.Rodas5P, 4096}, {"lorenz96-256", ode.Tsit5, 4096}} {
			for _, units := range []int{1, 0} {
				runN("units", c.name, c.m, "", units, c.n)
			}
		}
	}
	for _, s := range skipped {
		t.Logf("skipped (past the budget): %s", s)
	}
	if f := os.Getenv("GS_COLDSTART_JSON"); f != "" {
		b, err := json.MarshalIndent(map[string]any{
			"nvrtc": fmt.Sprintf("%d.%d", major, minor), "arch": arch.String(), "rows": rows, "skipped": skipped,
		}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// coldRun runs a first and a second Grad of n trajectories of problem
// name with method m (problemCase) on engine and returns their row
// (without its phase and options). With tiered (an engine whose first
// calls run on the CPU engine while their kernels compile) it waits for
// the compiles between the two (WaitForCompiles) and notes when they
// ended (Ready).
func coldRun(t *testing.T, engine, name string, c engineCase, tiered bool) coldRow {
	t.Helper()
	m := c.set.Method
	row := coldRow{Problem: name, Method: m.Name(), Source: -1}
	if m != ode.Auto {
		row.Source = gradSource(t, c)
	}
	var tr Trace
	t0 := time.Now()
	set := c.set
	set.Engine = engine
	sv, err := ode.NewSolver(c.prob.Field, &set)
	var g *ode.Gradient
	if err == nil {
		g, err = sv.GradContext(WithTrace(t.Context(), &tr), nil, &c.prob, c.loss, nil)
	}
	row.Cold = time.Since(t0).Seconds()
	if g != nil {
		row.Engine = g.Solution.Engine
	}
	if tiered {
		row.OnCPU, row.Stopped = tr.Stats().OnCPU, tr.Stats().CPUStopped
		if werr := WaitForCompiles(t.Context()); werr != nil && err == nil {
			err = werr
		}
		row.Ready = time.Since(t0).Seconds()
	}
	row.Compile = tr.Stats().Compile.Seconds()
	if s := tr.Stats(); s.PartsFailed > 0 {
		row.Parts = s.PartsFailed
		row.Err = "compiled as one unit, its parts failed: " + firstLines(s.PartsError, 2)
	}
	if err == nil {
		tr.Reset()
		t1 := time.Now()
		_, err = sv.GradContext(WithTrace(t.Context(), &tr), nil, &c.prob, c.loss, nil)
		row.Warm = time.Since(t1).Seconds()
		row.Kernel = tr.Stats().Kernel.Seconds()
		row.WarmCPU = tr.Stats().OnCPU
	}
	if err != nil {
		row.Err = firstLines(err.Error(), 2)
	}
	return row
}

// servedBy names the engine of a first result in TestGPUColdStart's
// report: "cpu", "device" (a GPU engine's), or "-" (none: an error).
func servedBy(engine string) string {
	switch engine {
	case "":
		return "-"
	case "cpu":
		return "cpu"
	}
	return "device"
}

// TestHostColdRun runs TestGPUColdStart's measurement on the host
// backend: a first call compiles (g++), a second does not.
func TestHostColdRun(t *testing.T) {
	needHost(t)
	t.Parallel()
	row := coldRun(t, tuned(t, "cuda-host", Tuning{FastCompile: "none", FastCompileFrom: 3}), "lorenz", problemCase(t, "lorenz", ode.Tsit5, 16), false)
	t.Logf("%+v", row)
	if row.Err != "" || row.Source <= 0 || row.Compile <= 0 || row.Cold < row.Compile || row.Warm <= 0 {
		t.Errorf("row %+v: want no error, the source's size, a compile within the cold call and a warm call", row)
	}
}

// TestHostColdRunTiered runs TestGPUColdStart's phase "tiered" on a host
// backend with a cold cache: a first result (on the CPU engine, or on the
// kernel where its compile, of an executable the process already has,
// ended first, the CPU run stopped), kernels ready after it, a second
// call on the kernel.
func TestHostColdRunTiered(t *testing.T) {
	needHost(t)
	name := tierEngine(newTierBackend(nil, nil, true), Tuning{tierMin: 1})
	row := coldRun(t, name, "lorenz", problemCase(t, "lorenz", ode.Tsit5, 16), true)
	t.Logf("first result on %s: %+v", servedBy(row.Engine), row)
	onCPU := row.Engine == "cpu" && row.OnCPU == 1 && row.Stopped == 0
	onDevice := row.Engine == name && row.OnCPU == 0 && row.Stopped <= 1
	if row.Err != "" || row.Ready < row.Cold || row.Compile <= 0 || row.Warm <= 0 || row.WarmCPU != 0 || !onCPU && !onDevice {
		t.Errorf("row %+v: want no error, kernels ready after the first result, named by the engine that ran it, a warm call on the kernel", row)
	}
}
