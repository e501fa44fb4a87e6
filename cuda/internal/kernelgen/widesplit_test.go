package kernelgen

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// wideRun matches the comment that heads a loop of a wide function and
// the code up to its first loop over the components (its gathers, arrays
// and carried operands' declarations).
var wideRun = regexp.MustCompile(`(?s)  // v\d+ … v\d+: (\d+) components of (\d+) values, ([^\n]*)\n(.*?)\n#pragma unroll 1\n  for \(int gs_c`)

// wideRuns counts the loops of the wide functions in src: all of them,
// those of fewer than below components, and of those the ones without a
// carried operand (no gs_r variable declared before the loop).
func wideRuns(src string, below int) (all, short, shortFree int) {
	for _, m := range wideRun.FindAllStringSubmatch(src, -1) {
		all++
		if n, _ := strconv.Atoi(m[1]); n < below {
			short++
			if !strings.Contains(m[4], "gs_real gs_r") {
				shortFree++
			}
		}
	}
	return all, short, shortFree
}

// TestWideMinSplit checks Config.WideMinSplit on the wide functions of
// Rodas5P's gradient kernels (with a save time: the dense step and its
// reverse too) of Pollution (d = 20, its 25 reactions' irregular code)
// and, without -short, HIRES (d = 8): by default the reroll plan's runs
// of fewer than minSplit components without a carried operand are loops
// (so the case checks something), with minSplit none is, while runs with
// a carried operand stay loops; the functions keep every value (the same
// number of statements that define one, loops' bodies once each, is not
// checked: the host engines compare the results bit for bit, cuda's
// TestHostWideMinSplitSame). It logs the loops and the shared memory per
// warp (WideSharedPerWarpFor) of each form.
func TestWideMinSplit(t *testing.T) {
	t.Parallel()
	cases := []planCase{{"pollution", problems.Pollution().Field, ode.Rodas5P}}
	if !testing.Short() {
		cases = append(cases, planCase{"hires", problems.HIRES().Field, ode.Rodas5P})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sp := c.stepPrograms(t)
			base := sp.wide(wideVariantOf(Config{Grad: true, Saves: 1, WideMinSplit: -1}, sp.plan))
			if base.err != nil {
				t.Fatal(base.err)
			}
			for _, minSplit := range []int{8, 16, 33} {
				all0, short0, free0 := wideRuns(base.src.String(), minSplit)
				if free0 == 0 {
					t.Fatalf("minSplit %d: no loop of fewer components by default: the case checks nothing", minSplit)
				}
				v := Config{Grad: true, Saves: 1, WideMinSplit: minSplit}
				r := sp.wide(wideVariantOf(v, sp.plan))
				if r.err != nil {
					t.Fatal(r.err)
				}
				all, short, free := wideRuns(r.src.String(), minSplit)
				if free != 0 {
					t.Errorf("minSplit %d: %d loops of fewer components without a carried operand", minSplit, free)
				}
				if carried := short0 - free0; short != carried {
					t.Errorf("minSplit %d: %d short loops, want the %d with a carried operand", minSplit, short, carried)
				}
				per0, err := sp.WideSharedPerWarpFor(Config{Grad: true, Saves: 1})
				if err != nil {
					t.Fatal(err)
				}
				per, err := sp.WideSharedPerWarpFor(v)
				if err != nil {
					t.Fatal(err)
				}
				if per != 8*r.w.Len {
					t.Errorf("minSplit %d: WideSharedPerWarpFor %d B, the functions' layout %d B", minSplit, per, 8*r.w.Len)
				}
				t.Logf("minSplit %d: loops %d → %d (of fewer components %d → %d), shared memory per warp %d → %d B, source %d → %d B",
					minSplit, all0, all, short0, short, per0, per, len(base.src.String()), len(r.src.String()))
			}
		})
	}
}

// TestWideMinSplitKey checks that Config.WideMinSplit names itself in a
// wide kernel's key, and only there.
func TestWideMinSplitKey(t *testing.T) {
	for _, c := range []struct {
		v    Config
		want bool
	}{
		{Config{Wide: true, WideMinSplit: 16}, true},
		{Config{Wide: true}, false},
		{Config{WideMinSplit: 16}, false},
	} {
		if got := strings.Contains(c.v.Key(), "widesplit16 "); got != c.want {
			t.Errorf("%+v: key %q: widesplit named %v, want %v", c.v, c.v.Key(), got, c.want)
		}
	}
	if a, b := (Config{Wide: true, WideMinSplit: 8}).Key(), (Config{Wide: true, WideMinSplit: 16}).Key(); a == b {
		t.Errorf("minSplit 8 and 16: the same key %q", a)
	}
}

// TestWideMinSplitOf checks Config.WideMinSplit's resolution: a positive
// value as it is, a negative one none, and zero DefaultWideMinSplit in a
// Rosenbrock method's kernels from WideSplitMinDim components
// (Pollution's d = 20 with Rodas5P), none in smaller systems (HIRES's
// d = 8) and in an explicit method's (Lorenz-96 d = 64 with Tsit5).
func TestWideMinSplitOf(t *testing.T) {
	poll := planCase{"pollution", problems.Pollution().Field, ode.Rodas5P}.plan(t)
	hires := planCase{"hires", problems.HIRES().Field, ode.Rodas5P}.plan(t)
	l96 := planCase{"lorenz96", problems.Lorenz96(64).Field, ode.Tsit5}.plan(t)
	for _, c := range []struct {
		name string
		w    int
		pl   *ode.Plan
		want int
	}{
		{"pollution", 0, poll, DefaultWideMinSplit}, {"pollution", -1, poll, 0}, {"pollution", 8, poll, 8},
		{"hires", 0, hires, 0}, {"hires", 16, hires, 16}, {"lorenz96", 0, l96, 0}, {"lorenz96", 33, l96, 33},
	} {
		if got := wideMinSplitOf(c.w, c.pl); got != c.want {
			t.Errorf("%s: wideMinSplitOf(%d) = %d, want %d", c.name, c.w, got, c.want)
		}
	}
}
