package kernelgen

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestBlockedArrays checks the blocked split's classification
// (privateSets with Config.WideBlocked) and rewriting (blockLoops,
// cacheInputs, shadowShared, dedupSyncs) on code of the wide emitter's
// forms: an array is block-private where every access is in a loop over
// as many components (a multiple of 32) that may run blocked, at the
// loop's own component or at a rotation of it by at most n/32; a loop
// with a sum, a
// value taken out of it, a store at a rotation, a rotation too far, an
// array of another size or an access elsewhere keeps it shared, and a
// loop that touches an array private in the cyclic form stays cyclic.
func TestBlockedArrays(t *testing.T) {
	t.Parallel()
	decl := func(n int, names ...string) string {
		var sb strings.Builder
		for _, x := range names {
			fmt.Fprintf(&sb, "  gs_real* const %s = gs_w + %s;  // [%d]\n", x, offMark(x), n)
		}
		return sb.String()
	}
	canon := func(n int) string {
		return fmt.Sprintf("#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < %d; gs_c += GS_WSTRIDE) {\n", n)
	}
	rot := func(x string, k, n int) string { return fmt.Sprintf("%s[GS_WROT(gs_c, 0, %d, %d)]", x, k, n) }
	write := canon(64) + "    const gs_real gs_u0 = gs_a[2 + gs_c] * 2;\n    gs_qa[gs_c] = gs_u0;\n  }\n  GS_SYNCWARP();\n"
	for _, c := range []struct {
		name, code string
		blk, cyc   []string
	}{
		{"neighbours", decl(64, "gs_qa", "gs_qb") + write + canon(64) + "    const gs_real gs_u0 = " + rot("gs_qa", 1, 64) + " - " + rot("gs_qa", 62, 64) + ";\n    gs_qb[gs_c] = gs_u0 + gs_qa[gs_c];\n  }\n",
			[]string{"gs_qa", "gs_qb"}, nil},
		{"too far", decl(64, "gs_qa") + write + canon(64) + "    gs_o[gs_c] = " + rot("gs_qa", 3, 64) + ";\n  }\n", nil, nil},
		{"store at a rotation", decl(64, "gs_qa", "gs_qb") + write + canon(64) + "    " + rot("gs_qb", 1, 64) + " = gs_qa[gs_c];\n  }\n", []string{"gs_qa"}, nil},
		{"a sum", decl(64, "gs_qa") + write + canon(64) + "    gs_wsum_set(gs_s_p, gs_c, gs_wsum_get(gs_s_p, gs_c) + gs_qa[gs_c]);\n  }\n", nil, []string{"gs_qa"}},
		{"taken out", decl(64, "gs_qa") + write + canon(64) + "    if (gs_c == 63) gs_r = gs_qa[gs_c];\n  }\n", nil, []string{"gs_qa"}},
		{"shifted", decl(64, "gs_qa") + write + canon(62) + "    gs_o[gs_c] = gs_qa[2 + gs_c];\n  }\n", nil, nil},
		{"not a multiple of 32", decl(70, "gs_qa") + canon(70) + "    gs_qa[gs_c] = 1;\n  }\n" + canon(70) + "    gs_o[gs_c] = " + rot("gs_qa", 1, 70) + ";\n  }\n", nil, nil},
		{"a cyclic array", decl(64, "gs_qa", "gs_qc") + write + canon(64) + "    gs_qc[gs_c] = 1;\n  }\n" + canon(64) + "    gs_wsum_set(gs_s_p, gs_c, gs_qc[gs_c]);\n  }\n" +
			canon(64) + "    gs_o[gs_c] = gs_qc[gs_c] + " + rot("gs_qa", 1, 64) + ";\n  }\n", nil, []string{"gs_qc"}},
	} {
		cyc, blk := privateSets(c.code, true)
		if got := slices.Sorted(maps.Keys(blk)); !slices.Equal(got, c.blk) {
			t.Errorf("%s: block-private %v, want %v", c.name, got, c.blk)
		}
		if got := slices.Sorted(maps.Keys(cyc)); !slices.Equal(got, c.cyc) {
			t.Errorf("%s: cyclic private %v, want %v", c.name, got, c.cyc)
		}
		if _, b := privateSets(c.code, false); len(b) != 0 {
			t.Errorf("%s: block-private %v without WideBlocked", c.name, b)
		}
	}
	// The rewriting: the neighbours' case, with its inputs cached and a
	// shared array (read after the loops) shadowed.
	code := decl(64, "gs_qa", "gs_qb", "gs_qs") + write + canon(64) + "    const gs_real gs_u0 = " + rot("gs_qa", 1, 64) + " - " + rot("gs_qa", 62, 64) + ";\n    gs_qs[gs_c] = gs_u0;\n    gs_qb[gs_c] = gs_u0 + gs_qa[gs_c];\n  }\n" +
		canon(64) + "    gs_o[gs_c] = " + rot("gs_qs", 63, 64) + " + gs_qb[gs_c];\n  }\n  gs_r = gs_qs[5];\n"
	_, blk := privateSets(code, true)
	got := shadowShared(cacheInputs(blockLoops(code, blk)), true)
	for _, want := range []string{
		"  gs_real gs_qa[64 / GS_WSTRIDE];",
		"  gs_real gs_in2[64 / GS_WSTRIDE];",
		"gs_in2[gs_row] = gs_a[2 + gs_lane * (64 / GS_WSTRIDE) + gs_row];",
		"    const int gs_c = gs_lane * (64 / GS_WSTRIDE) + gs_row;",
		"const gs_real gs_u0 = gs_in2[gs_row] * 2;",
		"GS_WNB(gs_qa, gs_row, 1, (64 / GS_WSTRIDE)) - GS_WNB(gs_qa, gs_row, -2, (64 / GS_WSTRIDE))",
		"    gs_qs[gs_c] = gs_bgs_qs[gs_row] = gs_u0;",
		"gs_o[gs_c] = GS_WNB(gs_bgs_qs, gs_row, -1, (64 / GS_WSTRIDE)) + gs_qb[gs_row];",
		"  gs_r = gs_qs[5];",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the blocked code lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "#pragma unroll 1") {
		t.Errorf("a loop left cyclic:\n%s", got)
	}
	// A barrier after a barrier goes where only lines that touch no
	// memory lie between; one after a store stays.
	syncs := "  GS_SYNCWARP();\n  // c\n  const gs_real v7 = (gs_real)0.5;\n  gs_real gs_x[8 / GS_WSTRIDE];\n  GS_SYNCWARP();\n  gs_o[0] = 1;\n  GS_SYNCWARP();\n"
	want := "  GS_SYNCWARP();\n  // c\n  const gs_real v7 = (gs_real)0.5;\n  gs_real gs_x[8 / GS_WSTRIDE];\n  gs_o[0] = 1;\n  GS_SYNCWARP();\n"
	if got := dedupSyncs(syncs); got != want {
		t.Errorf("dedupSyncs:\n%s\nwant\n%s", got, want)
	}
}

// TestBlockedWindows checks blockWindows on window loops of the wide
// emitter's form (wide.go's loop, the repetitions unrolled): a window
// loop whose repetition r reads its neighbours at component K − r runs
// blocked backwards (lane l from component l·R + R − 1 down), one that
// reads forwards from l·R; its sum's terms are added after it in the
// cyclic order (through the scratch where the term is a repetition's
// value, read again where it is an array's entry), its carried values
// come from the lane of the last repetition; a loop that touches the
// lanes' own rows, or a sum of another form, stays cyclic.
func TestBlockedWindows(t *testing.T) {
	t.Parallel()
	window := func(n int, read, term, extra string) string {
		return "  gs_real gs_r1_0_1 = (gs_real)-0.0;  // the sum\n" +
			"  gs_real gs_r1_0_1_p[GS_WSUMS];  // the lane's partial sums, by lane of a warp\n" +
			"  gs_wsum_zero(gs_r1_0_1_p);\n" +
			"  gs_real gs_r1_1_0 = v5;\n" +
			"  gs_real* const gs_l1_3 = gs_w + @off:gs_l1_3@;  // [" + fmt.Sprint(n) + "]\n" +
			"  GS_SYNCWARP();\n" +
			"#pragma unroll 1\n" +
			fmt.Sprintf("  for (int gs_c0 = gs_lane; gs_c0 < %d; gs_c0 += GS_WSTRIDE) {\n", n) +
			"    gs_r1_1_0 = v5;\n" +
			"#pragma unroll\n" +
			"  for (int gs_k = 2; gs_k >= 0; gs_k--) {\n" +
			"    const int gs_c = gs_c0 - gs_k;\n" +
			"    if (gs_c < 0) continue;\n" +
			"    const gs_real gs_u1 = (gs_r1_1_0 * " + read + ");  // v7\n" +
			extra +
			"    if (gs_c == gs_c0) {\n" +
			"    const gs_real gs_u0 = (" + term + " + gs_wsum_get(gs_r1_0_1_p, gs_c));  // v6\n" +
			"    const gs_real gs_u2 = (gs_u1 + v4);  // v8\n" +
			"    gs_l1_3[gs_c] = gs_u2;\n" +
			"    gs_wsum_set(gs_r1_0_1_p, gs_c, gs_u0);\n" +
			"    }\n" +
			"    gs_r1_1_0 = gs_u1;\n" +
			"  }\n" +
			"  }\n" +
			"  GS_SYNCWARP();\n" +
			"  gs_r1_0_1 = v3 + gs_wide_sums(gs_r1_0_1_p);\n" +
			fmt.Sprintf("  gs_r1_1_0 = gs_wide_from(gs_r1_1_0, %d %% GS_WSTRIDE);\n", n-1) +
			"  gs_o[0] = gs_r1_1_0 + gs_r1_0_1;\n"
	}
	for _, c := range []struct {
		name, code string
		want, not  []string
	}{
		{"backwards", window(62, "gs_y[GS_WROT((63 - gs_c), 0, 1, 64)]", "gs_x[2 + gs_c]", ""), []string{
			"  for (int gs_k = -2; gs_k < (64 / GS_WSTRIDE); gs_k++) {",
			"    const int gs_c = 63 - gs_lane * (64 / GS_WSTRIDE) - ((64 / GS_WSTRIDE) - 1) + gs_k;",
			"    if (gs_c < 0 || gs_c >= 62) continue;",
			"    if (gs_k >= 0) {",
			"  GS_SYNCWARP();\n#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < 62; gs_c += GS_WSTRIDE) {\n    const gs_real gs_u0 = (gs_x[2 + gs_c] + gs_wsum_get(gs_r1_0_1_p, gs_c));  // v6\n    gs_wsum_set(gs_r1_0_1_p, gs_c, gs_u0);\n  }\n  gs_r1_0_1 = v3 + gs_wide_sums(gs_r1_0_1_p);",
			"  gs_r1_1_0 = gs_wide_from(gs_r1_1_0, (63 - 61) / (64 / GS_WSTRIDE));",
		}, []string{"gs_c0", "% GS_WSTRIDE", "    gs_r1_1_0 = v5;", "gs_tr1"}},
		{"forwards, a value's term", window(64, "gs_y[1 + gs_c]", "gs_u1", ""), []string{
			"  gs_real* const gs_tr1_0_1 = gs_w + @off:gs_tr1_0_1@;  // [64]",
			"  for (int gs_k = -2; gs_k < ((64 + GS_WSTRIDE - 1) / GS_WSTRIDE); gs_k++) {",
			"    const int gs_c = gs_lane * ((64 + GS_WSTRIDE - 1) / GS_WSTRIDE) + gs_k;",
			"    gs_tr1_0_1[gs_c] = gs_u1;  // v6",
			"    const gs_real gs_u0 = (gs_tr1_0_1[gs_c] + gs_wsum_get(gs_r1_0_1_p, gs_c));  // v6",
			"  gs_r1_1_0 = gs_wide_from(gs_r1_1_0, 63 / ((64 + GS_WSTRIDE - 1) / GS_WSTRIDE));",
		}, []string{"gs_c0"}},
		{"backwards, from registers", "  gs_real gs_bgs_y[64 / GS_WSTRIDE];  // shadowShared's\n" + window(62, "gs_y[GS_WROT((63 - gs_c), 0, 1, 64)]", "gs_x[2 + gs_c]", ""), []string{
			"    const int gs_row = (64 / GS_WSTRIDE) - 1 - gs_k;",
			"    const int gs_c = gs_ok ? 63 - gs_lane * (64 / GS_WSTRIDE) - ((64 / GS_WSTRIDE) - 1) + gs_k : 0;",
			"    const gs_real gs_u1 = (gs_r1_1_0 * GS_WNBF(gs_bgs_y, gs_row, 1, (64 / GS_WSTRIDE), gs_y[GS_WROT((63 - gs_c), 0, 1, 64)]));  // v7\n    const gs_real gs_u2 = (gs_u1 + v4);  // v8\n    if (gs_ok && gs_k >= 0) {\n    gs_l1_3[gs_c] = gs_u2;\n    }\n    if (gs_ok) {\n    gs_r1_1_0 = gs_u1;\n    }\n  }",
		}, []string{"continue;"}},
		{"own rows", window(64, "gs_y[1 + gs_c]", "gs_x[gs_c]", "    gs_l2_0[gs_c / GS_WSTRIDE] = gs_u1;\n"), nil, []string{"gs_k = -2"}},
		{"a value used twice", window(64, "gs_y[1 + gs_c]", "gs_x[gs_c]", "    const gs_real gs_u3 = gs_u0;\n"), nil, []string{"gs_k = -2"}},
	} {
		got := blockWindows(c.code)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the blocked code lacks %q:\n%s", c.name, w, got)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: the code holds %q:\n%s", c.name, w, got)
			}
		}
		if len(c.want) == 0 && got != c.code {
			t.Errorf("%s: blocked:\n%s", c.name, got)
		}
	}
}
