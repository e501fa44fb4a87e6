package cuda

import (
	"fmt"
	"os/exec"
	"regexp"
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
	j := jobOf(t, c, op)
	sp, err := kernelgen.NewStepPrograms(j.Plan)
	if err != nil {
		t.Fatal(err)
	}
	v := kernelgen.ConfigOf(j)
	v.SplitFrom, v.SplitUnits = Tuning{SplitUnits: true}.splitFrom(), true
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
// Vern7. It skips without a GPU.
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
				sameRuns(t, c, c.solver(t, tuned(t, "cuda", v.got)), c.solver(t, tuned(t, "cuda", v.want)))
			})
		}
	}
}

// TestGPUEngineProblemsSplitUnits is TestGPUEngineProblems with the
// kernels compiled in parts (Tuning.SplitUnits): every built-in problem's
// results on the device against the CPU engine's.
func TestGPUEngineProblemsSplitUnits(t *testing.T) {
	needGPUEngine(t)
	testProblems(t, tuned(t, "cuda", Tuning{SplitUnits: true}), 1000)
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
