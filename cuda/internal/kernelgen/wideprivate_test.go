package kernelgen

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// TestPrivateArrays checks privateArrays's classification on code of the
// wide emitters' forms: an array is the lane's own only where every
// access is at the loop's own component, in a loop split over the lanes
// in the canonical stride (a block or one line) or in a window loop's own
// repetition; a shifted, gathered, reversed or constant index, a
// sequential loop, a window's earlier repetitions, lane 0's code, a
// carried operand's first value or a call that takes the array keep it
// shared.
func TestPrivateArrays(t *testing.T) {
	t.Parallel()
	decl := func(names ...string) string {
		var sb strings.Builder
		for _, n := range names {
			fmt.Fprintf(&sb, "  gs_real* const %s = gs_w + %s;  // [64]\n", n, offMark(n))
		}
		return sb.String()
	}
	const canon = "#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < 64; gs_c += GS_WSTRIDE) {\n"
	const window = "#pragma unroll 1\n  for (int gs_c0 = gs_lane; gs_c0 < 60; gs_c0 += GS_WSTRIDE) {\n    gs_r = x0;\n" +
		"#pragma unroll 1\n  for (int gs_c = gs_c0 > 3 ? gs_c0 - 3 : 0; gs_c <= gs_c0; gs_c++) {\n"
	names := map[string]string{"a": "gs_q0", "b": "gs_q1", "c": "gs_q2"}
	for _, c := range []struct {
		name, code string
		want       []string
	}{
		{"block", decl("a", "b") + canon + "    const gs_real gs_u0 = a[gs_c] * 2;\n    b[gs_c] = gs_u0;\n  }\n  GS_SYNCWARP();\n" +
			canon + "    const gs_real gs_u0 = b[(gs_c)] + a[gs_c];\n  }\n", []string{"a", "b"}},
		{"one line", decl("a", "b") + canon + "    a[gs_c] = 1;\n  }\n" +
			"#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < 64; gs_c += GS_WSTRIDE) b[gs_c] = a[(gs_c)];\n", []string{"a", "b"}},
		{"shifted", decl("a", "b") + canon + "    a[gs_c] = 1;\n    b[gs_c] = 2;\n  }\n" +
			canon + "    const gs_real gs_u0 = a[2 + gs_c] + b[gs_c];\n  }\n", []string{"b"}},
		{"gathered", decl("a", "b") + canon + "    a[gs_c] = b[gs_c];\n  }\n" +
			canon + "    const gs_real gs_u0 = a[tab[gs_c]];\n  }\n", []string{"b"}},
		{"reversed", decl("a") + canon + "    a[gs_c] = 1;\n  }\n" +
			"#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < 64; gs_c += GS_WSTRIDE) gs_o[gs_c] = a[(63 - gs_c)];\n", nil},
		{"after the loop", decl("a", "b") + canon + "    a[gs_c] = 1;\n    b[gs_c] = 1;\n  }\n  GS_SYNCWARP();\n  gs_r = a[63];\n", []string{"b"}},
		{"lane 0", decl("a") + "  if (gs_lane == 0) {\n    a[gs_c] = 1;\n  }\n", nil},
		{"sequential", decl("a") + "#pragma unroll 1\n  for (int gs_c = 0; gs_c < 64; gs_c++) {\n    a[gs_c] = 1;\n  }\n", nil},
		{"call", decl("a", "b") + canon + "    a[gs_c] = 1;\n    b[gs_c] = 1;\n  }\n  gs_wide_lu(a, 8);\n", []string{"b"}},
		{"window", decl("a", "b", "c") + canon + "    a[gs_c] = 1;\n    b[gs_c] = 1;\n  }\n" + window +
			"    const gs_real gs_u0 = a[gs_c];\n    if (gs_c == gs_c0) {\n    const gs_real gs_u1 = b[gs_c];\n    c[gs_c] = gs_u1;\n    }\n    gs_r = gs_u0;\n  }\n  }\n" +
			canon + "    gs_o[gs_c] = c[gs_c];\n  }\n", []string{"b", "c"}},
		{"window's first value", decl("a", "b") + canon + "    a[gs_c] = 1;\n    b[gs_c] = 1;\n  }\n" +
			strings.Replace(window, "x0", "a[gs_c]", 1) + "    if (gs_c == gs_c0) {\n    b[gs_c] = 2;\n    }\n  }\n  }\n", []string{"b"}},
		{"after a window", decl("a") + window + "    if (gs_c == gs_c0) {\n    }\n  }\n  }\n  a[gs_c] = 1;\n", nil},
	} {
		// The emitters' names: gs_q0, gs_q1, gs_q2 for a, b, c.
		code := regexp.MustCompile(`\b([abc])\b`).ReplaceAllStringFunc(c.code, func(x string) string { return names[x] })
		var want []string
		for _, w := range c.want {
			want = append(want, names[w])
		}
		got := slices.Sorted(maps.Keys(privateArrays(code)))
		if !slices.Equal(got, want) && len(got)+len(want) > 0 {
			t.Errorf("%s: private %v, want %v", c.name, got, want)
		}
	}
}

// TestWidePrivate checks the lane-private arrays of Lorenz-96's wide
// functions (Tsit5, d = 64): the trial's stage derivatives, written by
// the field's loop and read by the stage combinations only, are the
// lanes' own, the stages' inputs, which the field reads at neighbouring
// components through index tables, stay in shared memory, as do the
// reverse step's arrays read by a window loop; every access to a private
// array is its row of the lane's component (gs_c / GS_WSTRIDE); and a
// warp's shared memory (WideSharedPerWarp) is smaller than with every
// array shared (WideSharedPerWarpAll); by rows (Config.WideRows) the
// trial's private arrays are arrays of their own, indexed by static rows,
// the shared memory the same. It logs the shared memory per warp of the gradient's kernel
// and the solve's, with save times and without, old (every array shared)
// and new, for Lorenz-96 (d = 64, 256), Pollution (Rodas5P), HIRES
// (Rodas5P) and the Brusselator (32 cells, Rodas5P); with -short
// Lorenz-96 without save times only.
func TestWidePrivate(t *testing.T) {
	t.Parallel()
	pl := widePlan(t, 64, ode.Tsit5)
	sp, err := NewStepPrograms(pl)
	if err != nil {
		t.Fatal(err)
	}
	r := sp.wide(wideVariant{grad: true})
	if r.err != nil {
		t.Fatal(r.err)
	}
	funcs := map[string]string{}
	for _, part := range strings.Split(r.src.String(), "GS_FUNC void ")[1:] {
		name, _, _ := strings.Cut(part, "(")
		funcs[name] = part
	}
	privDecl := regexp.MustCompile(`gs_real\* const (\w+) = gs_p \+ \d+ \* GS_WPRIV;`)
	sharedDecl := regexp.MustCompile(`gs_real\* const (\w+) = gs_w \+ \d+;`)
	declared := func(code string, re *regexp.Regexp) []string {
		var out []string
		for _, m := range re.FindAllStringSubmatch(code, -1) {
			out = append(out, m[1])
		}
		return out
	}
	// A read at another component: through an index table, or a
	// rotation's index computed (GS_WROT).
	tableRead := regexp.MustCompile(`\b(\w+)\[(?:\(?\w+_x\d+\[gs_c\]\)?|GS_WROT\(gs_c, \d+, \d+, \d+\))\]`)
	for _, fn := range []string{r.w.Trial, r.w.Rev} {
		code := funcs[fn]
		if code == "" {
			t.Fatalf("no function %s in the unit", fn)
		}
		priv, shared := declared(code, privDecl), declared(code, sharedDecl)
		t.Logf("%s: lane-private %v, shared %v", fn, priv, shared)
		if len(priv) < 4 {
			t.Errorf("%s: %d lane-private arrays, want the stages' derivatives (≥ 4)", fn, len(priv))
		}
		for _, name := range priv {
			all := regexp.MustCompile(`\b`+name+`\b(\[[^\]]*\])?`).FindAllStringSubmatch(code, -1)
			for _, m := range all[1:] { // the first is the declaration
				if m[1] != "[gs_c / GS_WSTRIDE]" {
					t.Errorf("%s: private %s accessed as %s%s", fn, name, name, m[1])
				}
			}
		}
		for _, m := range tableRead.FindAllStringSubmatch(code, -1) {
			if slices.Contains(priv, m[1]) {
				t.Errorf("%s: %s, read at other components (%s), is private", fn, m[1], m[0])
			}
		}
	}
	if fn := funcs[r.w.Trial]; len(declared(fn, sharedDecl)) == 0 || !tableRead.MatchString(fn) {
		t.Errorf("%s: no shared array read through an index table or a rotation: the test checks nothing of the gathers", r.w.Trial)
	}

	// By rows (Config.WideRows): the trial's private arrays are arrays of
	// their own, every access a static row in a loop over the lane's rows;
	// the shared memory as without.
	rr := sp.wide(wideVariant{grad: true, rows: true})
	if rr.err != nil {
		t.Fatal(rr.err)
	}
	if rr.w.Len != r.w.Len {
		t.Errorf("by rows: %d reals of shared memory per warp, %d without", rr.w.Len, r.w.Len)
	}
	_, trial, _ := strings.Cut(rr.src.String(), "GS_FUNC void "+rr.w.Trial+"(")
	trial, _, _ = strings.Cut(trial, "\n}\n")
	own := regexp.MustCompile(`gs_real (\w+)\[\d+ \* GS_WPRIV\];`).FindAllStringSubmatch(trial, -1)
	if len(own) < 4 || strings.Contains(trial, "gs_p") || strings.Contains(trial, privRow) {
		t.Errorf("by rows: the trial has %d private arrays of their own (want ≥ 4), gs_p %t, dynamic rows %t",
			len(own), strings.Contains(trial, "gs_p"), strings.Contains(trial, privRow))
	}
	for _, m := range own {
		for _, a := range regexp.MustCompile(`\b`+m[1]+`\b(\[[^\]]*\])`).FindAllStringSubmatch(trial, -1)[1:] {
			if a[1] != "[gs_row]" {
				t.Errorf("by rows: %s accessed as %s%s", m[1], m[1], a[1])
			}
		}
	}
	if n := strings.Count(trial, "for (int gs_row = 0;"); n < 8 {
		t.Errorf("by rows: %d loops over the rows in the trial, want ≥ 8", n)
	}

	cases := []planCase{
		{"lorenz96-64", problems.Lorenz96(64).Field, ode.Tsit5},
		{"lorenz96-256", problems.Lorenz96(256).Field, ode.Tsit5},
	}
	if !testing.Short() {
		cases = append(cases, planCase{"pollution", problems.Pollution().Field, ode.Rodas5P},
			planCase{"hires", problems.HIRES().Field, ode.Rodas5P}, planCase{"brusselator", problems.Brusselator(32).Field, ode.Rodas5P})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sp := c.stepPrograms(t)
			for k := range 4 {
				grad, saves := k&2 != 0, k&1 != 0
				if saves && testing.Short() {
					continue
				}
				old, err := sp.WideSharedPerWarpOf(grad, saves, true)
				if err != nil {
					t.Fatal(err)
				}
				// The replicated scalars all in registers (widespill.go
				// adds slots: TestSpillScalarsPlans).
				now, err := sp.WideSharedPerWarpScalars(grad, saves, false, -1)
				if err != nil {
					t.Fatal(err)
				}
				priv := 0 // the largest gs_p of the kernel's functions, in reals
				for _, m := range regexp.MustCompile(`gs_real gs_p\[(\d+) \* GS_WPRIV\]`).FindAllStringSubmatch(sp.wide(wideVariant{grad: grad, saves: saves}).src.String(), -1) {
					var rows int
					fmt.Sscan(m[1], &rows)
					priv = max(priv, rows)
				}
				t.Logf("%s grad=%t saves=%t: shared memory per warp %d B with every array shared, %d B (%.0f%%) with %d rows of lane-private arrays (%d B per lane)",
					c.name, grad, saves, old, now, 100*float64(now)/float64(old), priv, 8*priv)
				if now > old {
					t.Errorf("%s grad=%t saves=%t: %d B per warp, more than %d with every array shared", c.name, grad, saves, now, old)
				}
				if strings.HasPrefix(c.name, "lorenz96") && now >= old {
					t.Errorf("%s grad=%t saves=%t: %d B per warp, not less than %d with every array shared", c.name, grad, saves, now, old)
				}
			}
		})
	}
}
