package cuda

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// kernelUnits returns the translation units of case c's kernel of op
// compiled in parts (Tuning.SplitUnits: split at proposedSplitFrom) and
// the one-unit split kernel's source.
func kernelUnits(t *testing.T, c engineCase, op ode.Op) ([]kernelgen.Unit, string) {
	t.Helper()
	return kernelUnitsAt(t, c, op, Tuning{SplitUnits: true}.splitFrom())
}

// kernelUnitsAt is kernelUnits split from splitFrom bytes of functions.
func kernelUnitsAt(t *testing.T, c engineCase, op ode.Op, splitFrom int) ([]kernelgen.Unit, string) {
	t.Helper()
	j := jobOf(t, c, op)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	v := kernelgen.ConfigOf(j)
	v.SplitFrom, v.SplitUnits = splitFrom, true
	units, _, err := kernelgen.KernelUnits(sp, v, j.Loss, Float64)
	if err != nil {
		t.Fatal(err)
	}
	v.SplitUnits = false
	one, _, err := kernelgen.KernelSource(sp, v, j.Loss, Float64)
	if err != nil {
		t.Fatal(err)
	}
	return units, one
}

// stepDef matches a GS_STEP function's first line (a definition) and
// stepDecl its declaration.
var (
	stepDef  = regexp.MustCompile(`(?m)^GS_STEP (gs_\w+)_out (gs_\w+)\(.*\) \{$`)
	stepDecl = regexp.MustCompile(`(?m)^GS_STEP (gs_\w+)_out (gs_\w+)\(.*\);$`)
)

// TestKernelUnits: a kernel compiled in parts is its kernel's unit, which
// declares the GS_STEP functions and defines none, then one unit per
// GS_STEP function, which defines it and declares no other; each
// function's code is the one-unit split kernel's, character for
// character, and the kernels that do not split are one unit, the
// one-unit source.
func TestKernelUnits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		c     engineCase
		op    ode.Op
		steps int
	}{
		{problemCase(t, "lorenz", ode.Rodas5P, 4), ode.OpGrad, 0},
		{problemCase(t, "pollution", ode.Rodas5P, 4), ode.OpRecord, 0},
		{problemCase(t, "pollution", ode.Rodas5P, 4), ode.OpGrad, 2},
		{problemCase(t, "hires", ode.Rodas5P, 4), ode.OpGrad, 3},
		{problemCase(t, "kepler", ode.Vern7, 4), ode.OpGrad, -1},
	} {
		name := fmt.Sprintf("%s %v", tc.c.name, tc.op)
		units, one := kernelUnits(t, tc.c, tc.op)
		if tc.steps == 0 {
			if len(units) != 1 || units[0].Text != one || units[0].Name != kernelgen.KernelUnitName {
				t.Errorf("%s: %d units, want the one-unit source", name, len(units))
			}
			continue
		}
		if tc.steps > 0 && len(units) != 1+tc.steps || len(units) < 2 {
			t.Errorf("%s: %d units, want the kernel's and %d", name, len(units), tc.steps)
			continue
		}
		if units[0].Name != kernelgen.KernelUnitName || !strings.Contains(units[0].Text, "\nGS_GLOBAL void ") {
			t.Errorf("%s: unit 0 (%s) is not the kernel's", name, units[0].Name)
		}
		if defs := stepDef.FindAllString(units[0].Text, -1); len(defs) != 0 {
			t.Errorf("%s: the kernel's unit defines %d GS_STEP functions", name, len(defs))
		}
		var declared []string
		for _, m := range stepDecl.FindAllStringSubmatch(units[0].Text, -1) {
			declared = append(declared, m[2])
		}
		for k, u := range units[1:] {
			defs := stepDef.FindAllStringSubmatch(u.Text, -1)
			if len(defs) != 1 || defs[0][2] != u.Name {
				t.Errorf("%s: unit %d (%s) defines %d GS_STEP functions, want itself", name, k+1, u.Name, len(defs))
				continue
			}
			if k >= len(declared) || declared[k] != u.Name {
				t.Errorf("%s: the kernel's unit declares %q, not unit %d's %s", name, declared, k+1, u.Name)
			}
			if n := len(stepDecl.FindAllString(u.Text, -1)); n != 0 {
				t.Errorf("%s: unit %d declares %d other GS_STEP functions", name, k+1, n)
			}
			// The function's code, from its comment line to the next
			// part, is the one-unit kernel's.
			// (Its callees precede it: it is its unit's last part.)
			at := strings.LastIndex(u.Text[:strings.Index(u.Text, defs[0][0])], "\n// program ")
			if at < 0 || !strings.Contains(one, u.Text[at:]) {
				t.Errorf("%s: unit %d's function %s differs from the one-unit kernel's", name, k+1, u.Name)
			}
		}
	}
}

// TestHostEngineSplitUnits: kernels compiled in parts (Tuning.SplitUnits;
// on the host each unit but the kernel's compiled alone by g++, then
// linked) give the one-unit kernels' results bit for bit (solve, gradient
// with its record, gradient on a given mesh, one save time): Pollution
// and HIRES with Rodas5P (whose gradient kernels split, in the thread
// layout) and Kepler with Vern7; the gradient kernel was compiled in its
// units.
func TestHostEngineSplitUnits(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles Rodas5P kernels of d = 8 and 20; skipped with -short")
	}
	for _, tc := range []struct {
		name string
		m    ode.Method
	}{{"pollution", ode.Rodas5P}, {"hires", ode.Rodas5P}, {"kepler", ode.Vern7}} {
		c := problemCase(t, tc.name, tc.m, 3)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// Split kernels are of the thread layout: Pollution (d = 20)
			// runs Rodas5P wide unless NoWideStiff.
			sameRuns(t, c, c.solver(t, tuned(t, "cuda-host", Tuning{SplitUnits: true, NoWideStiff: true})), c.solver(t, tuned(t, "cuda-host", Tuning{SplitFrom: -1, NoWideStiff: true})))
			units, _ := kernelUnits(t, c, ode.OpGrad)
			size := 0
			for _, u := range units {
				size += len(u.Text)
			}
			hb := hostF64.be.(*hostBackend)
			hb.mu.Lock()
			found := false
			for _, cp := range hb.opts {
				found = found || cp.units == len(units) && cp.src == size
			}
			hb.mu.Unlock()
			if len(units) < 2 || !found {
				t.Errorf("no compile of the gradient kernel's %d units (%d bytes)", len(units), size)
			}
		})
	}
}

// TestHostUnitsErrors: a kernel compiled in parts whose unit fails to
// compile gives an error naming that unit; the kernel's unit without its
// GS_STEP functions' units fails at the link, naming the functions.
func TestHostUnitsErrors(t *testing.T) {
	needHost(t)
	t.Parallel()
	units, _ := kernelUnits(t, problemCase(t, "pollution", ode.Rodas5P, 4), ode.OpGrad)
	if len(units) < 3 {
		t.Fatalf("%d units, want at least 3", len(units))
	}
	bad := append([]kernelgen.Unit(nil), units...)
	broken := bad[2]
	// A statement of its GS_STEP function made invalid.
	at := stepDef.FindStringIndex(broken.Text)
	if at == nil {
		t.Fatalf("unit %s defines no GS_STEP function", broken.Name)
	}
	broken.Text = broken.Text[:at[1]] + strings.Replace(broken.Text[at[1]:], "  const gs_real ", "  const gs_real = ;", 1)
	bad[2] = broken
	be := newHostBackend(1 << 20)
	_, err := be.compileUnits(bad, kernelgen.KernelName, nil)
	if err == nil || !strings.Contains(err.Error(), "unit 3 of 3 ("+broken.Name+")") {
		t.Errorf("a unit that does not compile gave %v, want an error naming unit 3 (%s)", firstLines(errString(err), 3), broken.Name)
	}
	t.Logf("a unit that does not compile: %s", firstLines(errString(err), 2))
	_, err = be.compileUnits(units[:2], kernelgen.KernelName, nil)
	t.Logf("a unit left out: %s", firstLines(errString(err), 3))
	if err == nil || !strings.Contains(err.Error(), units[2].Name) {
		t.Errorf("the kernel without its unit %s linked: %v", units[2].Name, firstLines(errString(err), 3))
	}
}

// errString is err's message, "<nil>" for none.
func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestHostWideSplitUnits: the wide layout's kernels compiled in parts
// (Tuning.SplitUnits, here from 64 KiB of functions so that d = 64
// splits; each unit with the simulated warp) give the one-unit wide
// kernels' results bit for bit: Lorenz-96 (d = 64, Tsit5) with a save
// time and shared parameters, on a simulated warp; with -long (a wide
// Rodas5P kernel's units took g++ 13 minutes on the shared 2-core
// machine) HIRES with Rodas5P too, split from the default 256 KiB.
func TestHostWideSplitUnits(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles wide kernels on a simulated warp; skipped with -short")
	}
	type wideUnitsCase struct {
		c    engineCase
		from int // Tuning.SplitFrom
	}
	cases := []wideUnitsCase{{wideSavesCase(5, 64), 64 << 10}}
	if longTests() {
		cases = append(cases, wideUnitsCase{problemCase(t, "hires", ode.Rodas5P, 3), 0})
	}
	for _, tc := range cases {
		c := tc.c
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sameRuns(t, c, c.solver(t, tuned(t, "cuda-host-sim", Tuning{Layout: LayoutWide, SplitUnits: true, SplitFrom: tc.from})),
				c.solver(t, tuned(t, "cuda-host-sim", Tuning{Layout: LayoutWide, SplitFrom: -1})))
			hb := hostSim.be.(*hostBackend)
			hb.mu.Lock()
			units := 0
			for _, cp := range hb.opts {
				units = max(units, cp.units)
			}
			hb.mu.Unlock()
			if units < 2 {
				t.Errorf("no kernel compiled in units")
			}
		})
	}
}

// TestGPUSplitUnits is TestHostEngineSplitUnits and TestHostWideSplitUnits
// on the device: kernels compiled in parts (NVRTC -rdc=true per unit,
// linked by the driver) against the one-unit kernels, bit for bit, and
// the one-unit split kernel of the thread layout (Tuning.SplitFrom, the
// form that ran non-finite on an H100 in session 33) against the
// unsplit one: Pollution, HIRES and the Brusselator with Rodas5P in the
// thread layout and in the wide layout (their default), Kepler with
// Vern7; no kernel's parts failed to link and fell back to one unit
// (partsFailed). It skips without a GPU.
func TestGPUSplitUnits(t *testing.T) {
	needGPUEngine(t)
	for _, tc := range []struct {
		name string
		m    ode.Method
		n    int
	}{{"pollution", ode.Rodas5P, 1000}, {"hires", ode.Rodas5P, 1000}, {"brusselator", ode.Rodas5P, 256}, {"kepler", ode.Vern7, 1000}} {
		c := problemCase(t, tc.name, tc.m, tc.n)
		for _, v := range []struct {
			name      string
			got, want Tuning
		}{
			{"thread-units", Tuning{NoWideStiff: true, SplitUnits: true}, Tuning{NoWideStiff: true, SplitFrom: -1}},
			{"thread-one-unit", Tuning{NoWideStiff: true, SplitFrom: proposedSplitFrom}, Tuning{NoWideStiff: true, SplitFrom: -1}},
			{"default-units", Tuning{SplitUnits: true}, Tuning{SplitFrom: -1}},
		} {
			if tc.m == ode.Vern7 && v.name == "default-units" {
				continue // (the same kernels as thread-units)
			}
			t.Run(c.name+"/"+v.name, func(t *testing.T) {
				before := partsFailed.Load()
				sameRuns(t, c, c.solver(t, tuned(t, "cuda", v.got)), c.solver(t, tuned(t, "cuda", v.want)))
				if n := partsFailed.Load() - before; n != 0 {
					t.Errorf("%d kernels' parts failed to build, compiled as one unit", n)
				}
			})
		}
	}
}

// TestGPUEngineProblemsSplitUnits is TestGPUEngineProblems with the
// kernels compiled in parts (Tuning.SplitUnits): every built-in problem's
// results on the device against the CPU engine's, none of its kernels'
// parts fallen back to one unit (partsFailed).
func TestGPUEngineProblemsSplitUnits(t *testing.T) {
	needGPUEngine(t)
	before := partsFailed.Load()
	testProblems(t, tuned(t, "cuda", Tuning{SplitUnits: true}), 1000)
	if n := partsFailed.Load() - before; n != 0 {
		t.Errorf("%d kernels' parts failed to build, compiled as one unit", n)
	}
}

// patternEngine is "cuda-host-pattern": the host engine with every
// automatic variable of the kernels' code that is not initialised filled
// with a pattern (g++ -ftrivial-auto-var-init=pattern: 0xFE bytes,
// -5.5e303 as a double) and every allocation with NaNs (hostBackend's
// poison), its kernels split in parts (Tuning.SplitUnits) in the thread
// layout.
var patternEngine = sync.OnceValue(func() string {
	b := newHostBackend(1 << 30)
	b.flags, b.poison = []string{"-ftrivial-auto-var-init=pattern"}, true
	e := &Engine{name: "cuda-host-pattern", prec: Float64, be: b}
	e.SetTuning(Tuning{SplitUnits: true, NoWideStiff: true})
	ode.Register(e)
	return e.name
})

// TestHostSplitUninitialised looks for reads of uninitialised locals in
// the split kernels and of device memory not written first (session 33:
// a split Pollution kernel ran non-finite on an H100 where the host
// engines passed; on the host, -O0, an uninitialised local is often zero
// and an allocation is zero): with every such local filled with a huge
// pattern and every allocation with NaNs, Pollution's and HIRES's split
// kernels give the unsplit kernels' results bit for bit. It skips where g++ lacks the option.
func TestHostSplitUninitialised(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles Rodas5P kernels of d = 8 and 20; skipped with -short")
	}
	if err := exec.Command("g++", "-ftrivial-auto-var-init=pattern", "-fsyntax-only", "-x", "c++", "/dev/null").Run(); err != nil {
		t.Skipf("g++ has no -ftrivial-auto-var-init=pattern: %v", err)
	}
	for _, name := range []string{"pollution", "hires"} {
		c := problemCase(t, name, ode.Rodas5P, 3)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sameRuns(t, c, c.solver(t, patternEngine()), c.solver(t, tuned(t, "cuda-host", Tuning{SplitFrom: -1, NoWideStiff: true})))
		})
	}
}

// launchBounds matches a __launch_bounds__ attribute as the device
// compiler sees it.
var launchBounds = regexp.MustCompile(`__launch_bounds__\s*\(`)

// deviceText returns unit text src as the device compiler sees it: g++'s
// preprocessor run as NVRTC's (__CUDACC_RTC__ defined), comments and
// line markers dropped.
func deviceText(t *testing.T, src string) string {
	t.Helper()
	cmd := exec.Command("g++", "-E", "-P", "-x", "c++", "-D__CUDACC_RTC__", "-")
	cmd.Stdin = strings.NewReader(src)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("preprocessing a unit: %v", err)
	}
	return string(out)
}

// TestUnitsOptions: what the driver compiles and links for a kernel in
// parts, the kernels of session 42's device runs (Tuning.SplitUnits, the
// engine's layouts on an H100: chooseLayout): Pollution's Rodas5P
// gradient kernel (wide, its launch bounds 7 blocks, whose link failed:
// "entry function 'gs_engine' with max regcount of 128 calls function
// '…_wide_0…' with regcount of 254") and Lorenz-96's (d = 256) Tsit5
// gradient kernel (wide, linked). Every unit gets the same options
// (Tuning.kernelOptions): those of the kernel as one unit (its -O1 from
// defaultFastCompileFrom bytes together) and one register cap, the one
// the one-unit kernel's launch bounds give it (kernelgen.BoundsRegs); no
// unit has launch bounds as the device compiler sees it (a kernel's
// bounds would override the cap for the kernel alone), while the one-unit
// kernel keeps its bounds and no cap. The kernel as one unit (the
// engine's fallback, Tuning.oneUnit) has the parts' KernelInfo.
func TestUnitsOptions(t *testing.T) {
	needHost(t)
	t.Parallel()
	// A warp per trajectory, the neighbours read through index tables
	// and the window loops rolled: the kernels whose registers were
	// measured (Lorenz-96's without its tables is one unit: its functions
	// are smaller than defaultSplitFrom).
	tun := Tuning{SplitUnits: true, wideLanes: -1, wideTables: true, wideRolled: true}
	for _, tc := range []struct {
		name string
		m    ode.Method
		regs int // the cap ptxas gave the one-unit kernel on an H100 (session 42), 0 if not measured
	}{{"pollution", ode.Rodas5P, 128}, {"lorenz96-256", ode.Tsit5, 0}} {
		c := problemCase(t, tc.name, tc.m, 4096)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			j := jobOf(t, c, ode.OpGrad)
			sp, err := kernelgen.NewStepPrograms(j.Plan)
			if err != nil {
				t.Fatal(err)
			}
			v := chooseLayout(kernelgen.ConfigOf(j), j.Plan, sp, layoutJob{n: c.prob.N}, Float64, false, h100, tun)
			if !v.Wide || v.WideMinBlocks <= 0 || !v.SplitUnits {
				t.Fatalf("not a wide kernel with launch bounds in parts: wide %t, bounds %d blocks, units %t", v.Wide, v.WideMinBlocks, v.SplitUnits)
			}
			units, info, err := kernelgen.KernelUnits(sp, v, j.Loss, Float64)
			if err != nil {
				t.Fatal(err)
			}
			if len(units) < 2 {
				t.Fatalf("%d units, want the kernel's and its step functions'", len(units))
			}
			regs := kernelgen.BoundsRegs(kernelgen.WideWarps*kernelgen.LaneWidth, v.WideMinBlocks)
			if tc.regs > 0 && regs != tc.regs {
				t.Errorf("bounds of %d blocks give a cap of %d registers, ptxas gave %d", v.WideMinBlocks, regs, tc.regs)
			}
			size := 0
			for _, u := range units {
				size += len(u.Text)
			}
			opts := tun.kernelOptions(v, units)
			want := append(tun.compileOptions(size), fmt.Sprintf("--maxrregcount=%d", regs))
			if !slices.Equal(opts, want) {
				t.Errorf("units' options %q, want %q", opts, want)
			}
			t.Logf("%d units, %d bytes, bounds of %d blocks: every unit compiled with %q", len(units), size, v.WideMinBlocks, opts)
			for k, u := range units {
				if launchBounds.MatchString(deviceText(t, u.Text)) {
					t.Errorf("unit %d (%s) has launch bounds on the device", k, u.Name)
				}
			}
			one := tun.oneUnit(v)
			src, oneInfo, err := kernelgen.KernelSource(sp, one, j.Loss, Float64)
			if err != nil {
				t.Fatal(err)
			}
			if oneInfo != info {
				t.Errorf("the kernel as one unit has info %+v, its parts %+v", oneInfo, info)
			}
			bounds := fmt.Sprintf("__launch_bounds__(%d * 32, %d)", kernelgen.WideWarps, v.WideMinBlocks)
			if !strings.Contains(deviceText(t, src), bounds) {
				t.Errorf("the kernel as one unit has no %s on the device", bounds)
			}
			oneOpts := tun.kernelOptions(one, []kernelgen.Unit{{Name: kernelgen.KernelUnitName, Text: src}})
			if !slices.Equal(oneOpts, tun.compileOptions(len(src))) {
				t.Errorf("the kernel as one unit has options %q, want %q", oneOpts, tun.compileOptions(len(src)))
			}
		})
	}
}

// partsFailing is a host backend whose kernels in parts fail to link,
// as Pollution's did on an H100 in session 42.
type partsFailing struct {
	*hostBackend
	mu    sync.Mutex
	tries int // compileUnits calls
}

// errPartsLink is partsFailing's error.
var errPartsLink = errors.New("cuda: cuLinkComplete: CUDA_ERROR_INVALID_SOURCE (300): device kernel image is invalid (a test's)")

func (b *partsFailing) compileUnits([]kernelgen.Unit, string, []string) (backendKernel, error) {
	b.mu.Lock()
	b.tries++
	b.mu.Unlock()
	return nil, errPartsLink
}

// TestHostUnitsFallback: where a kernel's parts fail to link, the engine
// compiles it as one unit and the call goes on: Lorenz's Rodas5P
// gradient (split in parts from 64 KiB of functions) on a host backend
// whose links fail gives the results of the kernels never split, bit
// for bit, and its trace counts the failure and holds its message.
func TestHostUnitsFallback(t *testing.T) {
	needHost(t)
	if testing.Short() {
		t.Skip("compiles Lorenz's Rodas5P kernels; skipped with -short")
	}
	t.Parallel()
	c := problemCase(t, "lorenz", ode.Rodas5P, 3)
	tun := Tuning{SplitUnits: true, SplitFrom: 64 << 10}
	units, _ := kernelUnitsAt(t, c, ode.OpGrad, tun.splitFrom())
	if len(units) < 2 {
		t.Fatalf("the gradient kernel is %d units at %d bytes, want parts", len(units), tun.SplitFrom)
	}
	be := &partsFailing{hostBackend: newHostBackend(1 << 30)}
	e := &Engine{name: "cuda-host-parts-failing", prec: Float64, be: be}
	e.SetTuning(tun)
	ode.Register(e)
	sameRuns(t, c, c.solver(t, e.name), c.solver(t, tuned(t, "cuda-host", Tuning{SplitFrom: -1})))
	be.mu.Lock()
	tries := be.tries
	be.mu.Unlock()
	if tries == 0 {
		t.Fatal("no kernel compiled in parts")
	}
	// A new engine: the gradient kernel compiled again, traced.
	be2 := &partsFailing{hostBackend: newHostBackend(1 << 30)}
	e2 := &Engine{name: "cuda-host-parts-failing-2", prec: Float64, be: be2}
	e2.SetTuning(tun)
	ode.Register(e2)
	before := partsFailed.Load()
	_, tr := c.tracedGrad(t, c.solver(t, e2.name))
	if partsFailed.Load() == before {
		t.Error("partsFailed did not count the failure")
	}
	if tr.PartsFailed < 1 || !strings.Contains(tr.PartsError, "CUDA_ERROR_INVALID_SOURCE") {
		t.Errorf("trace: %d parts failed (%q), want the failed link", tr.PartsFailed, tr.PartsError)
	}
}
