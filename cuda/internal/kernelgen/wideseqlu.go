package kernelgen

import (
	"fmt"
	"strings"
)

// The sparse LU of a thin pattern, sequential (session 48). Past
// WideSparseMaxDim rows a matrix takes the sparse form only where its
// factors' pattern is thin (wideSparseLU: WideSparseMaxWork), as the
// Brusselator's band (d = 64: two rows below the diagonal a step, two
// columns right of it; 249 updates, a solve's 250 products). Split over
// the lanes (wideSparseLU's column form) such a factor's steps and a
// solve's columns each keep two lanes busy between __syncwarp()s, the
// factor's interchange checks a butterfly each: 64 steps and 128 columns
// a solve of latency. Here the group's lane 0 runs them alone, in
// registers where it can:
//
//   - the factor: each step's check that no row of the pattern beats the
//     diagonal (the same test as the column form's), the pivot's entry,
//     then each row's multiplier and its updates in column order, all at
//     constant indices; where a row would beat the diagonal, lane 0
//     stops before the step and every lane runs gs_wide_lu_factor_from
//     from it (the dense steps, pivoting), as the column form does; where
//     the diagonal is not above the tolerance, the factor fails (NaNs).
//     The step lane 0 stopped at reaches every lane by gs_wide_from.
//   - the solves (a factor marked D − ½, no interchange; else the dense
//     solves): each row of a triangle, in the order the column form
//     reaches it, its products subtracted in the column form's order
//     (the forward triangles in ascending columns, the backward ones in
//     descending columns) from a register, its solution in a register,
//     then the solution stored.
//
// So each entry of the factors and of the solutions takes the same
// operations in the same order as in the column form, and the results
// are its values bit for bit (the dense form's, but for the signs of
// zeros: wideSparseLU). The amax (every entry, all lanes) is as before.

// wideSeqLU returns the code of the sequential sparse factor and solves
// (gs_wlus_factor_<tag>, gs_wlus_solve_<tag>, gs_wlus_solve_t_<tag>) of a
// d×d matrix whose factors' pattern without interchanges is pat (row
// major, luPattern's).
func wideSeqLU(pat []bool, d int, tag string) string {
	ld := d | 1
	at := func(r, c int) int { return r*ld + c }
	var sb strings.Builder
	fmt.Fprintf(&sb, "// The sparse LU of pattern %s, sequential on lane 0 (wideseqlu.go).\n", tag)
	fmt.Fprintf(&sb, "GS_DEVICE void gs_wlus_factor_%s(gs_real* f) {\n", tag)
	fmt.Fprintf(&sb, "  constexpr int D = %d, LD = GS_WLD(D);\n  const int lane = GS_WLANE;\n", d)
	sb.WriteString("  GS_SYNCWARP();\n  const gs_real amax = gs_wide_lu_amax<D>(f);\n  const gs_real tol = (gs_real)D * GS_EPS * amax;\n")
	sb.WriteString("  // stop: D (done), -1 (failed) or the step whose pivot a row below beats.\n  int stop = D;\n")
	sb.WriteString("  if (lane == 0) {\n    do {\n")
	for k := 0; k < d; k++ {
		var rows, cols []int
		for r := k + 1; r < d; r++ {
			if pat[r*d+k] {
				rows = append(rows, r)
			}
		}
		for c := k + 1; c < d; c++ {
			if pat[k*d+c] {
				cols = append(cols, c)
			}
		}
		fmt.Fprintf(&sb, "      {  // step %d: rows %v, columns %v\n", k, rows, cols)
		fmt.Fprintf(&sb, "        const gs_real dk = fabs(f[%d]);\n", at(k, k))
		if len(rows) > 0 {
			beat := make([]string, len(rows))
			for i, r := range rows {
				beat[i] = fmt.Sprintf("fabs(f[%d]) > dk", at(r, k))
			}
			fmt.Fprintf(&sb, "        if (dk == dk && (%s)) {\n          stop = %d;\n          break;\n        }\n", strings.Join(beat, " || "), k)
		}
		sb.WriteString("        if (!(dk > tol) || amax == 0) {\n          stop = -1;\n          break;\n        }\n")
		piv := fmt.Sprintf("(gs_real)%d", k)
		if k == d-1 {
			piv = fmt.Sprintf("(gs_real)%d - (gs_real)0.5", d)
		}
		fmt.Fprintf(&sb, "        f[D * LD + %d] = %s;\n", k, piv)
		if len(rows) > 0 {
			fmt.Fprintf(&sb, "        const gs_real inv = (gs_real)1 / f[%d];\n", at(k, k))
			for _, r := range rows {
				fmt.Fprintf(&sb, "        {\n          const gs_real l = f[%d] * inv;\n          f[%d] = l;\n", at(r, k), at(r, k))
				if len(cols) > 0 {
					sb.WriteString("          if (l != 0) {\n")
					for _, c := range cols {
						fmt.Fprintf(&sb, "            f[%d] -= l * f[%d];\n", at(r, c), at(k, c))
					}
					sb.WriteString("          }\n")
				}
				sb.WriteString("        }\n")
			}
		}
		sb.WriteString("      }\n")
	}
	sb.WriteString("    } while (0);\n  }\n")
	sb.WriteString("  stop = (int)gs_wide_from((gs_real)stop, 0);\n  GS_SYNCWARP();\n")
	sb.WriteString("  if (stop < 0) {\n    gs_wide_lu_fail<D>(f);\n    return;\n  }\n")
	sb.WriteString("  if (stop < D) gs_wide_lu_factor_from<D, true>(f, stop, amax, tol);\n}\n")

	// The solves. row(r, cs, trans) subtracts row r's products of columns
	// cs (in that order) from x<r>: f[r][c]·x<c>, or f[c][r]·x<c>
	// transposed.
	row := func(r int, cs []int, trans bool) {
		for _, c := range cs {
			q := at(r, c)
			if trans {
				q = at(c, r)
			}
			fmt.Fprintf(&sb, "    x%d -= f[%d] * x%d;\n", r, q, c)
		}
	}
	// cols returns the columns c of row r in the pattern (trans: the rows
	// c of column r) from lo to hi (exclusive), ascending or descending.
	cols := func(r, lo, hi int, trans, desc bool) []int {
		var cs []int
		for c := lo; c < hi; c++ {
			if trans && pat[c*d+r] || !trans && pat[r*d+c] {
				cs = append(cs, c)
			}
		}
		if desc {
			for i, j := 0, len(cs)-1; i < j; i, j = i+1, j-1 {
				cs[i], cs[j] = cs[j], cs[i]
			}
		}
		return cs
	}
	mark := fmt.Sprintf("f[D * LD + D - 1] != (gs_real)%d - (gs_real)0.5", d)
	solve := func(name string, trans bool) {
		fmt.Fprintf(&sb, "GS_WLU_OUTLINE void %s_%s(gs_real* x, const gs_real* f) {\n", name, tag)
		fmt.Fprintf(&sb, "  constexpr int D = %d, LD = GS_WLD(D);\n  (void)LD;\n", d)
		dense := "gs_wide_lu_solve"
		if trans {
			dense = "gs_wide_lu_solve_t"
		}
		fmt.Fprintf(&sb, "  GS_SYNCWARP();\n  if (%s) {\n    %s<D>(x, f);\n    return;\n  }\n", mark, dense)
		// Each row's right-hand side is loaded where the forward triangle
		// reaches it (so that loads need not all be live at once).
		sb.WriteString("  if (GS_WLANE == 0) {\n")
		if !trans {
			// L (unit): rows ascending, columns ascending; then U: rows
			// descending, columns descending, then the diagonal.
			for r := 0; r < d; r++ {
				fmt.Fprintf(&sb, "    gs_real x%d = x[%d];\n", r, r)
				row(r, cols(r, 0, r, false, false), false)
			}
			for r := d - 1; r >= 0; r-- {
				row(r, cols(r, r+1, d, false, true), false)
				fmt.Fprintf(&sb, "    x%d = x%d / f[%d];\n", r, r, at(r, r))
			}
		} else {
			// Uᵀ: rows ascending, columns ascending, then the diagonal;
			// Lᵀ (unit): rows descending, columns descending.
			for r := 0; r < d; r++ {
				fmt.Fprintf(&sb, "    gs_real x%d = x[%d];\n", r, r)
				row(r, cols(r, 0, r, true, false), true)
				fmt.Fprintf(&sb, "    x%d = x%d / f[%d];\n", r, r, at(r, r))
			}
			for r := d - 2; r >= 0; r-- {
				row(r, cols(r, r+1, d, true, true), true)
			}
		}
		for r := 0; r < d; r++ {
			fmt.Fprintf(&sb, "    x[%d] = x%d;\n", r, r)
		}
		sb.WriteString("  }\n  GS_SYNCWARP();\n}\n")
	}
	solve("gs_wlus_solve", false)
	solve("gs_wlus_solve_t", true)
	return sb.String()
}
