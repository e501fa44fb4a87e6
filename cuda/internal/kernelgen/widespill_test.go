package kernelgen

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// TestSpillScalars checks spillScalars on a small function of the wide
// emitters' form with a budget of 2 non-constant values: the value read
// farthest ahead leaves the registers first (Belady's rule), its reads
// before that point keep the register and those after read its slot,
// stored once where it is defined; the slot is declared after the last
// top-level __syncwarp() before the definition; constants and a
// nested block's names are not counted; a negative budget, or one that
// holds, changes nothing.
func TestSpillScalars(t *testing.T) {
	t.Parallel()
	code := strings.Join([]string{
		"GS_FUNC void f(const gs_real* GS_RESTRICT gs_sh, const gs_real* gs_a, gs_real* gs_o, gs_real* gs_w) {",
		"  const int gs_lane = GS_WLANE;",
		"  (void)gs_lane;",
		"  const gs_real v1 = (gs_a[0] * gs_a[1]);  // v1 = Mul v0 v0",
		"  GS_SYNCWARP();",
		"  const gs_real v2 = (gs_a[2] + v1);  // v2 = Add",
		"  const gs_real v3 = (gs_real)0.5;  // a constant",
		"  const gs_real v4 = (v2 * v3);  // v4 = Mul v2 v3",
		"  if (gs_lane == 0) {",
		"    const gs_real v9 = (v4 + v1);",
		"    gs_o[0] = v9;",
		"  }",
		"  const gs_real v5 = (v4 - v2);  // v5 = Sub v4 v2",
		"  gs_o[1] = (v5 + v2);",
		"  gs_o[2] = (v4 * v1);  // v1 read last",
		"}",
	}, "\n")
	if got, n := spillScalars(code, -1); got != code || n != 0 {
		t.Errorf("budget -1: %d values moved, code changed", n)
	}
	if got, n := spillScalars(code, 4); got != code || n != 0 {
		t.Errorf("budget 4 (4 values live at most): %d values moved, code changed:\n%s", n, got)
	}
	// At v4's line v1, v2 and v4 are live: v2, read farthest ahead (v5's
	// line; v1 and v4 at v9's), leaves; at v5's line v1, v4 and v5: v1
	// leaves (read at the last line, as v4: the first name of a tie),
	// after its read in lane 0's block, which keeps the register.
	got, n := spillScalars(code, 2)
	if n != 2 {
		t.Fatalf("budget 2: %d values moved, want 2 (v2, then v1):\n%s", n, got)
	}
	want := []string{
		"  (void)gs_lane;",
		"  gs_real* const gs_sv1 = gs_w + @off:gs_sv1@;  // [1]",
		"  const gs_real v1 = (gs_a[0] * gs_a[1]);  // v1 = Mul v0 v0",
		"  gs_sv1[0] = v1;  // v1 out of registers (widespill.go)",
		"  GS_SYNCWARP();",
		"  gs_real* const gs_sv2 = gs_w + @off:gs_sv2@;  // [1]",
		"  const gs_real v2 = (gs_a[2] + v1);  // v2 = Add",
		"  gs_sv2[0] = v2;  // v2 out of registers (widespill.go)",
		"  const gs_real v3 = (gs_real)0.5;  // a constant",
		"  const gs_real v4 = (v2 * v3);  // v4 = Mul v2 v3",
		"  if (gs_lane == 0) {",
		"    const gs_real v9 = (v4 + v1);",
		"    gs_o[0] = v9;",
		"  }",
		"  const gs_real v5 = (v4 - gs_sv2[0]);  // v5 = Sub v4 v2",
		"  gs_o[1] = (v5 + gs_sv2[0]);",
		"  gs_o[2] = (v4 * gs_sv1[0]);  // v1 read last",
	}
	if !strings.Contains(got, strings.Join(want, "\n")) {
		t.Errorf("budget 2: got\n%s\nwant the lines\n%s", got, strings.Join(want, "\n"))
	}
	// v1's slot spans the __syncwarp() (declared before it); v2's starts
	// after it: they may not share space, and v2's may share with what
	// was read before the __syncwarp() only.
	placed, top := allocate(got)
	if top != 2 || !strings.Contains(placed, "gs_sv1 = gs_w + 0;") || !strings.Contains(placed, "gs_sv2 = gs_w + 1;") {
		t.Errorf("allocate: scratch %d, want the slots at 0 and 1:\n%s", top, placed)
	}
}

// TestSpillScalarsPlans checks the wide functions of Rosenbrock and
// explicit plans at the default budget (DefaultWideScalars) and at 24:
// in every function at most the budget of non-constant replicated values
// (plus the one being stored) is live in registers at any line (their
// own liveness, from the code: a value from its definition to its last
// read as a register); every slot is stored before any line reads it;
// without a budget (-1) no slot is emitted; and the shared memory per
// warp grows by at most the slots (a real each). It logs the values
// moved and the shared memory: Pollution's Rodas5P gradient (183 values
// live at most in its reverse steps) moves hundreds, Lorenz-96 with
// Tsit5 none at the default.
func TestSpillScalarsPlans(t *testing.T) {
	t.Parallel()
	cases := []planCase{{"pollution", problems.Pollution().Field, ode.Rodas5P}, {"lorenz96-64", problems.Lorenz96(64).Field, ode.Tsit5}}
	if !testing.Short() {
		cases = append(cases, planCase{"hires", problems.HIRES().Field, ode.Rodas5P}, planCase{"pollution", problems.Pollution().Field, ode.Rosenbrock23})
	}
	def := regexp.MustCompile(`^  const gs_real (v\d+) = (.*);`)
	ref := regexp.MustCompile(`\bv\d+\b`)
	slotStore := regexp.MustCompile(`^  gs_s(v\d+)\[0\] = v\d+;`)
	slotRead := regexp.MustCompile(`gs_s(v\d+)\[0\]`)
	for _, c := range cases {
		t.Run(c.name+"-"+c.m.Name(), func(t *testing.T) {
			t.Parallel()
			sp := c.stepPrograms(t)
			none, err := sp.WideSharedPerWarpScalars(true, true, false, -1)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(sp.wide(wideVariant{grad: true, saves: true, scalars: -1}).src.String(), "gs_sv") {
				t.Errorf("no budget: slots emitted")
			}
			for _, budget := range []int{0, 24} {
				b := wideScalarsOf(budget)
				r := sp.wide(wideVariant{grad: true, saves: true, scalars: budget})
				if r.err != nil {
					t.Fatal(r.err)
				}
				moved, slots := 0, 0
				for _, part := range strings.Split(r.src.String(), "GS_FUNC void ")[1:] {
					name, _, _ := strings.Cut(part, "(")
					if !strings.Contains(part, "gs_lane") {
						continue // not a wide function
					}
					body, _, _ := strings.Cut(part, "\n}\n")
					lines := strings.Split(body, "\n")
					first, last := map[string]int{}, map[string]int{}
					stored := map[string]int{}
					for i, ln := range lines {
						code, _, _ := strings.Cut(ln, "//")
						if m := def.FindStringSubmatch(code); m != nil {
							if !wideConstExpr.MatchString(strings.TrimSpace(m[2])) {
								first[m[1]] = i
							}
							code = m[2]
						}
						if m := slotStore.FindStringSubmatch(code); m != nil {
							stored[m[1]] = i
							moved++
							_, code, _ = strings.Cut(code, "=") // the value stored
						}
						for _, m := range slotRead.FindAllStringSubmatch(code, -1) {
							if at, ok := stored[m[1]]; !ok || at >= i {
								t.Errorf("%s: %s read at line %d before its store", name, m[0], i)
							}
						}
						code = slotRead.ReplaceAllString(code, "")
						for _, v := range ref.FindAllString(code, -1) {
							if f, ok := first[v]; ok && f < i {
								last[v] = i
							}
						}
					}
					delta := make([]int, len(lines)+1)
					for v, f := range first {
						if l, ok := last[v]; ok {
							delta[f]++ // live on lines f ... l-1
							delta[l]--
						}
					}
					most, at, live := 0, 0, 0
					for i := range lines {
						if live += delta[i]; live > most {
							most, at = live, i
						}
					}
					if most > b+1 {
						t.Errorf("budget %d: %s: %d values live in registers at line %d", b, name, most, at)
					}
					t.Logf("budget %d: %s: at most %d values live in registers", b, name, most)
				}
				per, err := sp.WideSharedPerWarpScalars(true, true, false, budget)
				if err != nil {
					t.Fatal(err)
				}
				slots = strings.Count(r.src.String(), "out of registers (widespill.go)")
				t.Logf("budget %d: %d values moved out of registers; shared memory per warp %d B (%d B with none)", b, moved, per, none)
				if per < none || per > none+8*slots {
					t.Errorf("budget %d: %d B per warp, want %d to %d", b, per, none, none+8*slots)
				}
				if c.name == "pollution" && c.m == ode.Rodas5P && moved == 0 {
					t.Errorf("budget %d: no value moved in Pollution's Rodas5P functions", b)
				}
			}
		})
	}
}

// TestWideMinBlocks checks Config.WideMinBlocks's launch bounds in a
// wide kernel's source (Lorenz-96, d = 64, Tsit5, a solve): none by
// default, the kernel's entry as before; with 6, the bounds of blocks of
// WideWarps warps, 6 per multiprocessor, on the device only; and a Key
// of its own, as WideScalars has.
func TestWideMinBlocks(t *testing.T) {
	t.Parallel()
	sp, err := NewStepPrograms(widePlan(t, 64, ode.Tsit5))
	if err != nil {
		t.Fatal(err)
	}
	v := Config{Adaptive: true, Wide: true}
	plain, _, err := KernelSource(sp, v, nil, Float64)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain, "__launch_bounds__") || !strings.Contains(plain, "GS_GLOBAL void GS_KERNEL_NAME(const gs_args a) {") {
		t.Errorf("no WideMinBlocks: launch bounds, or the entry changed")
	}
	b := v
	b.WideMinBlocks = 6
	bounded, _, err := KernelSource(sp, b, nil, Float64)
	if err != nil {
		t.Fatal(err)
	}
	want := "#if defined(GS_CUDA) && !defined(GS_UNITS)\n#define GS_BOUNDS __launch_bounds__(2 * 32, 6)\n#else\n#define GS_BOUNDS\n#endif\nGS_GLOBAL void GS_BOUNDS GS_KERNEL_NAME(const gs_args a) {"
	if WideWarps != 2 || !strings.Contains(bounded, want) {
		t.Errorf("WideMinBlocks 6: no %q in the source", want)
	}
	s := v
	s.WideScalars = 48
	if keys := map[string]bool{v.Key(): true, b.Key(): true, s.Key(): true}; len(keys) != 3 {
		t.Errorf("keys %q, %q, %q: not distinct", v.Key(), b.Key(), s.Key())
	}
}

// TestThreadMinBlocks checks Config.ThreadMinBlocks's launch bounds in a
// thread kernel's source (Lorenz-96, d = 64, Tsit5, a solve, as
// TestWideMinBlocks): none by default, the kernel's entry as before;
// with 4, the bounds of blocks of ThreadBoundsBlock threads, 4 per
// multiprocessor, on the device only; a Key of its own; and a wide
// kernel's key unchanged by it (its bounds are WideMinBlocks').
func TestThreadMinBlocks(t *testing.T) {
	t.Parallel()
	sp, err := NewStepPrograms(widePlan(t, 64, ode.Tsit5))
	if err != nil {
		t.Fatal(err)
	}
	v := Config{Adaptive: true}
	plain, _, err := KernelSource(sp, v, nil, Float64)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain, "__launch_bounds__") || !strings.Contains(plain, "GS_GLOBAL void GS_KERNEL_NAME(const gs_args a) {") {
		t.Errorf("no ThreadMinBlocks: launch bounds, or the entry changed")
	}
	b := v
	b.ThreadMinBlocks = 4
	bounded, _, err := KernelSource(sp, b, nil, Float64)
	if err != nil {
		t.Fatal(err)
	}
	want := "#if defined(GS_CUDA) && !defined(GS_UNITS)\n#define GS_BOUNDS __launch_bounds__(128, 4)\n#else\n#define GS_BOUNDS\n#endif\nGS_GLOBAL void GS_BOUNDS GS_KERNEL_NAME(const gs_args a) {"
	if ThreadBoundsBlock != 128 || !strings.Contains(bounded, want) {
		t.Errorf("ThreadMinBlocks 4: no %q in the source", want)
	}
	// Besides its bounds (and its key, in the header) the source is the
	// same.
	i := strings.Index(bounded, "// Config.ThreadMinBlocks")
	j := strings.Index(bounded, want)
	if i < 0 || j < i {
		t.Fatalf("ThreadMinBlocks 4: no bounds' comment before them")
	}
	rest := strings.Replace(bounded[:i]+"GS_GLOBAL void GS_KERNEL_NAME(const gs_args a) {"+bounded[j+len(want):], b.Key(), v.Key(), 1)
	if rest != plain {
		t.Errorf("ThreadMinBlocks 4: the source differs from the plain one besides its bounds")
	}
	if v.Key() == b.Key() {
		t.Errorf("keys %q and %q: not distinct", v.Key(), b.Key())
	}
	w := Config{Adaptive: true, Wide: true}
	wb := w
	wb.ThreadMinBlocks = 4
	if w.Key() != wb.Key() {
		t.Errorf("a wide kernel's key %q changed with ThreadMinBlocks: %q", w.Key(), wb.Key())
	}
}
