package kernelgen

import (
	"fmt"
	"strings"
	"testing"
)

// rowGroups returns the lines of a layer's reverse as lanes mode emits
// it, rows n of them: ȳ_i staged, the weights' cotangent ȳ_i·x and its
// accumulator add, the product W_i·ȳ_i and the running sum s += W_i·ȳ_i
// (s's first value u9, defined before). tail is appended after.
func rowGroups(n int, tail string) string {
	var sb strings.Builder
	sb.WriteString("GS_DEVICE void f(const gs_real* gs_sh, gs_real* gs_acc, bool gs_on, gs_real a1) {\n")
	sb.WriteString("  GS_VEC(u1); GS_LANES(32) GS_EL(u1) = a1; GS_END\n")
	sb.WriteString("  GS_VEC(u9); GS_LANES(32) GS_EL(u9) = a1; GS_END\n")
	sb.WriteString("  GS_STAGE(0, u1);\n")
	s := "u9"
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "  const gs_real v%d = GS_STAGED(0, u1, %d);\n", 100+i, 31-i)
		fmt.Fprintf(&sb, "  GS_VEC(u%d); GS_LANES(32) GS_EL(u%d) = (GS_EL(u1) * v%d); GS_END  // e.g. v%d = Mul\n", 200+i, 200+i, 100+i, 900+i)
		fmt.Fprintf(&sb, "  GS_ACC_LANES(32, 0xffffffffu) GS_ACC_ADD(&gs_acc[%d + 1 * gs_l], GS_EL(u%d)); GS_ACC_END\n", 1000-33*i, 200+i)
		fmt.Fprintf(&sb, "  GS_VEC(u%d); GS_LANES(32) GS_EL(u%d) = (gs_sh[%d + 1 * gs_l] * v%d); GS_END\n", 300+i, 300+i, 1000-33*i, 100+i)
		fmt.Fprintf(&sb, "  GS_VEC(u%d); GS_LANES(32) GS_EL(u%d) = (GS_EL(%s) + GS_EL(u%d)); GS_END\n", 400+i, 400+i, s, 300+i)
		s = fmt.Sprintf("u%d", 400+i)
	}
	sb.WriteString(strings.ReplaceAll(tail, "LAST", s))
	sb.WriteString("}\n")
	return sb.String()
}

// TestRollLanes: rollLanes makes a layer's rows one loop whose literals
// run in progressions over gs_c and whose running sum is a variable kept
// across repetitions and read after the loop; runs whose values are
// read after the loop otherwise, or too short, stay as they were.
func TestRollLanes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		code string
		want []string // in the rolled code
		none bool     // no loop
	}{
		{"rows", rowGroups(8, "  GS_VEC(u500); GS_LANES(32) GS_EL(u500) = tanh(GS_EL(LAST)); GS_END\n"), []string{
			"// rolled: 8 repetitions of 5 statements",
			"GS_VEC(gs_k0_4); GS_LANES(32) GS_EL(gs_k0_4) = GS_EL(u9); GS_END",
			"for (int gs_c = 0; gs_c < 8; gs_c++) {",
			"const gs_real v100 = GS_STAGED(0, u1, (31 - gs_c));",
			"GS_ACC_ADD(&gs_acc[(1000 - 33 * gs_c) + 1 * gs_l], GS_EL(u200))",
			"(gs_sh[(1000 - 33 * gs_c) + 1 * gs_l] * v100)",
			"    GS_LANES(32) GS_EL(gs_k0_4) = (GS_EL(gs_k0_4) + GS_EL(u300)); GS_END",
			"GS_EL(u500) = tanh(GS_EL(gs_k0_4))",
		}, false},
		// A product of row 2 read after the rows: the rows after it are
		// the loop, the product before it as it was.
		{"read after", rowGroups(8, "  GS_VEC(u500); GS_LANES(32) GS_EL(u500) = tanh(GS_EL(u302)); GS_END\n"), []string{
			"  GS_VEC(u302); GS_LANES(32) GS_EL(u302) = (gs_sh[934 + 1 * gs_l] * v102); GS_END\n  // rolled: 5 repetitions of 5 statements",
			"GS_VEC(gs_k0_0); GS_LANES(32) GS_EL(gs_k0_0) = GS_EL(u401); GS_END",
			"GS_VEC(gs_k0_4); GS_LANES(32) GS_EL(gs_k0_4) = GS_EL(u302); GS_END",
			"GS_EL(u407) = (GS_EL(gs_k0_0) + GS_EL(gs_k0_4))",
			"GS_EL(u500) = tanh(GS_EL(u302))",
		}, false},
		{"short", rowGroups(3, ""), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rollLanes(tc.code)
			if tc.none {
				if got != tc.code {
					t.Errorf("rolled:\n%s", got)
				}
				return
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("no %q in\n%s", w, got)
				}
			}
			if strings.Count(got, "\n") >= strings.Count(tc.code, "\n") {
				t.Errorf("%d lines rolled, %d before", strings.Count(got, "\n"), strings.Count(tc.code, "\n"))
			}
		})
	}
}

// TestRollTokens: names and decimal literals are tokens of their own;
// hexadecimal, float and exponent literals are text.
func TestRollTokens(t *testing.T) {
	t.Parallel()
	l := splitRollLine("  const gs_real v12 = fma(gs_sh[GS_PAD(3 + 2 * gs_l)], a7, (gs_real)1e-06 * 0x1fu + t4.v[10] + 2.5);  // v12 = Dot v3")
	var names, nums []string
	for _, tk := range l.toks {
		switch {
		case tk.name:
			names = append(names, tk.s)
		case tk.num:
			nums = append(nums, tk.s)
		}
	}
	if got, want := strings.Join(names, " "), "v12 a7 t4"; got != want {
		t.Errorf("names %q, want %q", got, want)
	}
	if got, want := strings.Join(nums, " "), "3 2 10"; got != want {
		t.Errorf("literals %q, want %q", got, want)
	}
	if !l.ok || l.def != 1 || l.vec || !strings.HasPrefix(l.comment, "// v12") {
		t.Errorf("line: ok %v, def %d, vec %v, comment %q", l.ok, l.def, l.vec, l.comment)
	}
}
