package kernelgen

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The factor in shared memory: the wide layout's Rosenbrock steps. A
// wide function (wideFunc) emits the tuple ops of a Rosenbrock step
// warp-cooperatively, each tuple an array in the warp's scratch named as
// the thread layout names its local tuple (t<ID>, so that the rerolled
// loops and the Extracts read its components in place):
//
//   - ops.OpLUFactorShift (inlined: the d×d matrix M as d² scalars, then
//     s and live) and ops.OpLUFactor (the d² entries of W): an array of
//     d·ld + d reals (ld = d | 1, an odd row stride, so that the lanes'
//     reads of a column fall in distinct banks), its pivots after the
//     rows; filled (wideEmitter.fillArray), shifted in place to W = I + s·M
//     (gs_wide_lu_shift: the thread layout's gs_lu_shift per entry) and
//     factored (gs_wide_lu_factor);
//   - ops.OpLUSolve and ops.OpLUSolveT: an array of d reals filled with
//     the right-hand side and solved in place (gs_wide_lu_solve,
//     gs_wide_lu_solve_t).
//
// gs_wide_lu_factor is ops' luLane (the thread layout's gs_lu_factor)
// operation for operation: the same pivots (the largest magnitude of the
// column, the first of equals, found by each lane over its rows and a
// butterfly of shuffles), the same multipliers and the same updates of
// each entry in the same order, so the factors are the thread layout's
// bit for bit; step k's multipliers and then its (d−k−1)² updates are
// split over the lanes, between __syncwarp()s. The solves run the
// triangles column by column, the rows of a column split over the lanes:
// the forward triangle (L's, and Uᵀ's in the transposed solve) subtracts
// each row's terms in the thread layout's order (bit for bit), the
// backward one (U's, Lᵀ's) in the reverse order (the thread layout sums
// row r's terms from column r + 1 on, which would serialise the lanes),
// so solutions agree with the thread layout's to rounding (with
// GS_WIDE_LU_SEQ defined, lane 0 runs the backward triangles in the
// thread layout's order: bit for bit). The pivots' row swaps are lane
// 0's.
const wideLUHelper = `// The wide layout's LU factors (widelu.go): a d×d matrix in the warp's
// shared memory, row r at r*GS_WLD(D), the pivot rows after the D rows.
// Defined, GS_WIDE_LU_SEQ has lane 0 run the solves' backward triangles
// in the thread layout's order (bit for bit, sequential): for a device
// measurement against the column-by-column form.
#define GS_WLD(D) ((D) | 1)
#define GS_WLU_AT(q, D) ((q) / (D) * GS_WLD(D) + (q) % (D))
GS_DEVICE gs_real gs_wide_max(gs_real x) {
#ifdef GS_WARPS
  for (int o = GS_WSTRIDE / 2; o > 0; o >>= 1) {
    const gs_real y = __shfl_xor_sync(GS_WMASK, x, o);
    x = y > x ? y : x;
  }
#endif
  return x;
}
// gs_wide_lu_shift sets f (holding M) to W = I + s*(live != 0 ? M : 0),
// each entry rounded as gs_lu_shift rounds it.
template <int D>
GS_DEVICE void gs_wide_lu_shift(gs_real* f, gs_real s, gs_real live) {
  GS_SYNCWARP();
#pragma unroll 1
  for (int q = GS_WLANE; q < D * D; q += GS_WSTRIDE) {
    const int at = GS_WLU_AT(q, D);
    gs_real x = live != 0 ? f[at] : (gs_real)0;
    gs_real w = s * x;
    f[at] = q / D == q % D ? w + (gs_real)1 : w;
  }
}
// gs_wide_lu_factor factors W in f in place, P W = L U, its pivot rows
// after the rows: gs_lu_factor's arithmetic, split over the lanes.
template <int D>
GS_DEVICE void gs_wide_lu_factor(gs_real* f) {
  const int lane = GS_WLANE;
  constexpr int LD = GS_WLD(D);
  GS_SYNCWARP();
  gs_real amax = 0, bad = 0;
#pragma unroll 1
  for (int q = lane; q < D * D; q += GS_WSTRIDE) {
    const gs_real v = fabs(f[GS_WLU_AT(q, D)]);
    if (!(v <= GS_REAL_MAX)) bad = 1;
    else amax = v > amax ? v : amax;
  }
  amax = gs_wide_max(amax);
  if (gs_wide_max(bad) != 0) amax = gs_nan();
  const gs_real tol = (gs_real)D * GS_EPS * amax;
#pragma unroll 1
  for (int k = 0; k < D; k++) {
    // The pivot: the first row of the largest magnitude (a NaN on the
    // diagonal keeps row k, NaNs below it are passed over).
    int p = -1;
    gs_real pv = -1;
#pragma unroll 1
    for (int r = k + 1 + lane; r < D; r += GS_WSTRIDE) {
      const gs_real v = fabs(f[r * LD + k]);
      if (v > pv) {
        p = r;
        pv = v;
      }
    }
#ifdef GS_WARPS
    for (int o = GS_WSTRIDE / 2; o > 0; o >>= 1) {
      const gs_real ov = __shfl_xor_sync(GS_WMASK, pv, o);
      const int op = __shfl_xor_sync(GS_WMASK, p, o);
      if (ov > pv || (ov == pv && op < p)) {
        p = op;
        pv = ov;
      }
    }
#endif
    const gs_real dk = fabs(f[k * LD + k]);
    if (dk != dk || !(pv > dk)) {
      p = k;
      pv = dk;
    }
    GS_SYNCWARP();  // every lane has read column k
    if (!(pv > tol) || amax == 0) {
#pragma unroll 1
      for (int c = lane; c < D * LD + D; c += GS_WSTRIDE) f[c] = gs_nan();
      GS_SYNCWARP();
      return;
    }
    if (lane == 0) f[D * LD + k] = (gs_real)p;
    if (p != k) {
#pragma unroll 1
      for (int c = lane; c < D; c += GS_WSTRIDE) {
        gs_real t = f[k * LD + c];
        f[k * LD + c] = f[p * LD + c];
        f[p * LD + c] = t;
      }
    }
    GS_SYNCWARP();
    const gs_real inv = (gs_real)1 / f[k * LD + k];
#pragma unroll 1
    for (int r = k + 1 + lane; r < D; r += GS_WSTRIDE) f[r * LD + k] = f[r * LD + k] * inv;
    GS_SYNCWARP();
    const int m = D - 1 - k;
#pragma unroll 1
    for (int q = lane; q < m * m; q += GS_WSTRIDE) {
      const int r = k + 1 + q / m, c = k + 1 + q % m;
      const gs_real l = f[r * LD + k];
      if (l != 0) f[r * LD + c] -= l * f[k * LD + c];
    }
    GS_SYNCWARP();
  }
}
// gs_wide_lu_nan reports whether f is a failed factorisation, and then
// sets x to NaNs.
template <int D>
GS_DEVICE bool gs_wide_lu_nan(gs_real* x, const gs_real* f) {
  if (f[D * GS_WLD(D)] == f[D * GS_WLD(D)]) return false;
#pragma unroll 1
  for (int k = GS_WLANE; k < D; k += GS_WSTRIDE) x[k] = gs_nan();
  GS_SYNCWARP();
  return true;
}
// gs_wide_lu_swap applies the row interchanges of W's factors f to x,
// in order (a solve's first step) or in reverse (a transposed solve's
// last), on lane 0.
template <int D>
GS_DEVICE void gs_wide_lu_swap(gs_real* x, const gs_real* f, bool reverse) {
  constexpr int LD = GS_WLD(D);
  if (GS_WLANE == 0) {
#pragma unroll 1
    for (int j = 0; j < D; j++) {
      const int k = reverse ? D - 1 - j : j;
      const int p = (int)f[D * LD + k];
      if (p != k) {
        gs_real t = x[k];
        x[k] = x[p];
        x[p] = t;
      }
    }
  }
  GS_SYNCWARP();
}
// gs_wide_lu_solve overwrites x (holding b) with the solution of W x = b
// given W's factors f: L's rows in gs_lu_solve's order, U's in the
// reverse order.
template <int D>
GS_DEVICE void gs_wide_lu_solve(gs_real* x, const gs_real* f) {
  const int lane = GS_WLANE;
  constexpr int LD = GS_WLD(D);
  GS_SYNCWARP();
  if (gs_wide_lu_nan<D>(x, f)) return;
  gs_wide_lu_swap<D>(x, f, false);
#pragma unroll 1
  for (int c = 0; c < D - 1; c++) {
    const gs_real xc = x[c];
#pragma unroll 1
    for (int r = c + 1 + lane; r < D; r += GS_WSTRIDE) x[r] -= f[r * LD + c] * xc;
    GS_SYNCWARP();
  }
#ifdef GS_WIDE_LU_SEQ
  if (lane == 0) {
#pragma unroll 1
    for (int r = D - 1; r >= 0; r--) {
      gs_real s = x[r];
#pragma unroll 1
      for (int c = r + 1; c < D; c++) s -= f[r * LD + c] * x[c];
      x[r] = s / f[r * LD + r];
    }
  }
  GS_SYNCWARP();
  return;
#endif
  // U: x[c] is stored in the next column's round, after every lane has
  // read it.
  gs_real prev = 0;
#pragma unroll 1
  for (int c = D - 1; c >= 0; c--) {
    const gs_real xc = x[c] / f[c * LD + c];
    if (lane == 0 && c < D - 1) x[c + 1] = prev;
#pragma unroll 1
    for (int r = lane; r < c; r += GS_WSTRIDE) x[r] -= f[r * LD + c] * xc;
    prev = xc;
    GS_SYNCWARP();
  }
  if (lane == 0) x[0] = prev;
  GS_SYNCWARP();
}
// gs_wide_lu_solve_t overwrites x (holding b) with the solution of
// W^T x = b given W's factors f: U^T's rows in gs_lu_solve_t's order,
// L^T's in the reverse order.
template <int D>
GS_DEVICE void gs_wide_lu_solve_t(gs_real* x, const gs_real* f) {
  const int lane = GS_WLANE;
  constexpr int LD = GS_WLD(D);
  GS_SYNCWARP();
  if (gs_wide_lu_nan<D>(x, f)) return;
  gs_real prev = 0;
#pragma unroll 1
  for (int c = 0; c < D; c++) {
    const gs_real xc = x[c] / f[c * LD + c];
    if (lane == 0 && c > 0) x[c - 1] = prev;
#pragma unroll 1
    for (int r = c + 1 + lane; r < D; r += GS_WSTRIDE) x[r] -= f[c * LD + r] * xc;
    prev = xc;
    GS_SYNCWARP();
  }
  if (lane == 0) x[D - 1] = prev;
  GS_SYNCWARP();
#ifdef GS_WIDE_LU_SEQ
  if (lane == 0) {
#pragma unroll 1
    for (int r = D - 2; r >= 0; r--) {
      gs_real s = x[r];
#pragma unroll 1
      for (int c = r + 1; c < D; c++) s -= f[c * LD + r] * x[c];
      x[r] = s;
    }
  }
  GS_SYNCWARP();
#else
#pragma unroll 1
  for (int c = D - 1; c > 0; c--) {
    const gs_real xc = x[c];
#pragma unroll 1
    for (int r = lane; r < c; r += GS_WSTRIDE) x[r] -= f[c * LD + r] * xc;
    GS_SYNCWARP();
  }
#endif
  gs_wide_lu_swap<D>(x, f, true);
}
`

// WideFactorReals returns the reals of a d×d factor's array in a wide
// function's scratch: d rows of stride d | 1, then the d pivot rows.
func WideFactorReals(d int) int { return d*(d|1) + d }

// tupleValue emits a tuple op of a wide function (see the factor in
// shared memory above): its array in the scratch, filled and factored or
// solved by the warp.
func (w *wideEmitter) tupleValue(id tape.ID, comment string) error {
	e := w.e
	p := e.p
	v := &p.Values[id]
	sb := &e.sb
	name := fmt.Sprintf("t%d", id)
	s := e.src
	s.helper(wideLUHelper)
	refs := make([]string, len(v.Args))
	for k, a := range v.Args {
		if ops.IsTuple(p.Values[a].Op) {
			continue
		}
		refs[k] = w.argRef(a)
	}
	switch v.Op {
	case ops.OpLUFactor, ops.OpLUFactorShift:
		d := int(v.Aux)
		m := refs
		if v.Op == ops.OpLUFactorShift {
			if len(v.Args) != d*d+2 {
				return fmt.Errorf("%s: %v of %d arguments: the wide layout takes the inlined form (d² entries, s, live)", vname(id), v.Op, len(v.Args))
			}
			m = refs[:d*d]
		}
		fmt.Fprintf(sb, "  gs_real* const %s = gs_w + %s;  // [%d]\n", name, offMark(name), WideFactorReals(d))
		fmt.Fprintf(sb, "  // %s\n", comment)
		w.fillArray(name, m, func(q string) string { return fmt.Sprintf("GS_WLU_AT(%s, %d)", q, d) })
		if v.Op == ops.OpLUFactorShift {
			fmt.Fprintf(sb, "  gs_wide_lu_shift<%d>(%s, %s, %s);\n", d, name, refs[d*d], refs[d*d+1])
		}
		fmt.Fprintf(sb, "  gs_wide_lu_factor<%d>(%s);\n", d, name)
	case ops.OpLUSolve, ops.OpLUSolveT:
		d := len(v.Args) - 1
		fn := "gs_wide_lu_solve"
		if v.Op == ops.OpLUSolveT {
			fn = "gs_wide_lu_solve_t"
		}
		fmt.Fprintf(sb, "  gs_real* const %s = gs_w + %s;  // [%d]\n", name, offMark(name), d)
		fmt.Fprintf(sb, "  // %s\n", comment)
		w.fillArray(name, refs[1:], func(q string) string { return q })
		fmt.Fprintf(sb, "  %s<%d>(%s, t%d);\n", fn, d, name, v.Args[0])
	default:
		return fmt.Errorf("%s: %v: the wide layout emits no calls or tuples other than LU factors and solves", vname(id), v.Op)
	}
	e.tuple[id] = func(c int) string { return fmt.Sprintf("%s[%d]", name, c) }
	return nil
}

// argRef is the C expression of operand a of a tuple op: a constant's
// literal (so that the many zeros of a Jacobian are one value), else its
// reference.
func (w *wideEmitter) argRef(a tape.ID) string {
	v := &w.e.p.Values[a]
	if v.Op == ops.OpConst {
		return ops2C(v, nil)
	}
	return w.e.ref(a)
}

// fillArray writes the statements that set entries q of array name (at
// the index at(q), a C expression of q) to refs[q]: after a __syncwarp()
// (the space may have held arrays that other lanes were still reading),
// the most frequent value, if it is at least rerollMinRun entries', by
// a loop over all entries split over the lanes; then the others as
// fillRuns writes them. The array is complete for every lane after the
// function the writes are for starts (its __syncwarp()).
func (w *wideEmitter) fillArray(name string, refs []string, at func(q string) string) {
	sb := &w.e.sb
	n := len(refs)
	sb.WriteString("  GS_SYNCWARP();\n")
	count := map[string]int{}
	for _, r := range refs {
		count[r]++
	}
	def := ""
	for r, c := range count {
		if c >= rerollMinRun && (def == "" || c > count[def] || c == count[def] && r < def) {
			def = r
		}
	}
	if def != "" {
		fmt.Fprintf(sb, "#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < %d; gs_c += GS_WSTRIDE) %s[%s] = %s;\n", n, name, at("gs_c"), def)
		sb.WriteString("  GS_SYNCWARP();\n")
	}
	loops, lane0 := fillRuns(name, refs, at, def)
	for _, l := range loops {
		sb.WriteString(l)
	}
	if len(lane0) > 0 {
		sb.WriteString("  if (gs_lane == 0) {\n")
		for _, l := range lane0 {
			sb.WriteString(l)
		}
		sb.WriteString("  }\n")
	}
}

// fillRuns returns the statements that set entries q of array name (at
// the index at(q)) to refs[q], but for those equal to skip: the runs of
// at least rerollMinRun entries that read one array at entries in
// arithmetic progression as q does (a loop's array read in order, a
// species of a grid of two read every other entry, a band of a Jacobian
// entries d + 1 apart) as loops split over the lanes (loops), the others
// one by one for lane 0 (lane0).
func fillRuns(name string, refs []string, at func(q string) string, skip string) (loops, lane0 []string) {
	type entry struct{ q, idx int }
	byArr := map[string][]entry{}
	var rest []int
	for q, r := range refs {
		if r == skip {
			continue
		}
		if m := entryRef.FindStringSubmatch(r); m != nil {
			idx, _ := strconv.Atoi(m[2])
			byArr[m[1]] = append(byArr[m[1]], entry{q, idx})
			continue
		}
		rest = append(rest, q)
	}
	arrs := make([]string, 0, len(byArr))
	for a := range byArr {
		arrs = append(arrs, a)
	}
	sort.Strings(arrs)
	for _, a := range arrs {
		es := byArr[a]
		for i := 0; i < len(es); {
			if i+1 < len(es) {
				dq, di := es[i+1].q-es[i].q, es[i+1].idx-es[i].idx
				run := 2
				for ; i+run < len(es); run++ {
					if es[i+run].q-es[i+run-1].q != dq || es[i+run].idx-es[i+run-1].idx != di {
						break
					}
				}
				if run >= rerollMinRun {
					loops = append(loops, fmt.Sprintf("#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < %d; gs_c += GS_WSTRIDE) %s[%s] = %s[%s];\n",
						run, name, at(affine(es[i].q, dq)), a, affine(es[i].idx, di)))
					i += run
					continue
				}
			}
			rest = append(rest, es[i].q)
			i++
		}
	}
	sort.Ints(rest)
	for _, q := range rest {
		lane0 = append(lane0, fmt.Sprintf("    %s[%s] = %s;\n", name, at(strconv.Itoa(q)), refs[q]))
	}
	return loops, lane0
}
