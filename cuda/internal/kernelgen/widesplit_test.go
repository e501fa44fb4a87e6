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
			base := sp.wide(wideVariantOf(Config{Grad: true, Saves: 1, WideMinSplit: -1}, sp.plan.Dim))
			if base.err != nil {
				t.Fatal(base.err)
			}
			for _, minSplit := range []int{8, 16, 33} {
				all0, short0, free0 := wideRuns(base.src.String(), minSplit)
				if free0 == 0 {
					t.Fatalf("minSplit %d: no loop of fewer components by default: the case checks nothing", minSplit)
				}
				v := Config{Grad: true, Saves: 1, WideMinSplit: minSplit}
				r := sp.wide(wideVariantOf(v, sp.plan.Dim))
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
// value as it is, a negative one none, and zero DefaultWideMinSplit from
// WideSplitMinDim components (Pollution's d = 20), none below (HIRES's
// d = 8).
func TestWideMinSplitOf(t *testing.T) {
	for _, c := range []struct{ w, dim, want int }{
		{0, 20, DefaultWideMinSplit}, {0, WideSplitMinDim, DefaultWideMinSplit}, {0, WideSplitMinDim - 1, 0},
		{0, 8, 0}, {-1, 20, 0}, {-1, 8, 0}, {8, 8, 8}, {33, 64, 33},
	} {
		if got := wideMinSplitOf(c.w, c.dim); got != c.want {
			t.Errorf("wideMinSplitOf(%d, %d) = %d, want %d", c.w, c.dim, got, c.want)
		}
	}
}
