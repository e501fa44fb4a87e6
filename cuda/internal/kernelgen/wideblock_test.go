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
	got := shadowShared(cacheInputs(blockLoops(code, blk)))
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
