package kernelgen

import (
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"

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
// GS_WLU_OUTLINE qualifies the sparse form's solves (wideSparseLU): one
// copy a unit, called.
#if defined(GS_CUDA)
#define GS_WLU_OUTLINE static __device__ __noinline__
#else
#define GS_WLU_OUTLINE static
#endif
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
// gs_wide_lu_amax returns the largest magnitude of W's entries in f, NaN
// if one is not finite (gs_lu_factor's amax).
template <int D>
GS_DEVICE gs_real gs_wide_lu_amax(const gs_real* f) {
  gs_real amax = 0, bad = 0;
#pragma unroll 1
  for (int q = GS_WLANE; q < D * D; q += GS_WSTRIDE) {
    const gs_real v = fabs(f[GS_WLU_AT(q, D)]);
    if (!(v <= GS_REAL_MAX)) bad = 1;
    else amax = v > amax ? v : amax;
  }
  amax = gs_wide_max(amax);
  if (gs_wide_max(bad) != 0) amax = gs_nan();
  return amax;
}
// gs_wide_lu_fail sets the factor f to NaNs (a failed factorisation).
template <int D>
GS_DEVICE void gs_wide_lu_fail(gs_real* f) {
  GS_SYNCWARP();
#pragma unroll 1
  for (int c = GS_WLANE; c < D * GS_WLD(D) + D; c += GS_WSTRIDE) f[c] = gs_nan();
  GS_SYNCWARP();
}
// gs_wide_lu_factor_from runs steps k0 … D-1 of gs_wide_lu_factor on f
// (steps 0 … k0-1 done, their pivots stored), amax and tol its matrix's.
// With ROWS (the sparse form's dense steps) a lane takes whole rows: its
// multiplier, then, unless it is 0, the row's updates in column order
// (no division of the entry's index, a zero multiplier's row skipped at
// once): the same operations on every entry in the same order.
template <int D, bool ROWS = false>
GS_DEVICE void gs_wide_lu_factor_from(gs_real* f, int k0, gs_real amax, gs_real tol) {
  const int lane = GS_WLANE;
  constexpr int LD = GS_WLD(D);
#pragma unroll 1
  for (int k = k0; k < D; k++) {
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
      gs_wide_lu_fail<D>(f);
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
    if (ROWS) {
#pragma unroll 1
      for (int r = k + 1 + lane; r < D; r += GS_WSTRIDE) {
        const gs_real l = f[r * LD + k] * inv;
        f[r * LD + k] = l;
        if (l != 0) {
#pragma unroll 1
          for (int c = k + 1; c < D; c++) f[r * LD + c] -= l * f[k * LD + c];
        }
      }
      GS_SYNCWARP();
      continue;
    }
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
// gs_wide_lu_factor factors W in f in place, P W = L U, its pivot rows
// after the rows: gs_lu_factor's arithmetic, split over the lanes.
template <int D>
GS_DEVICE void gs_wide_lu_factor(gs_real* f) {
  GS_SYNCWARP();
  const gs_real amax = gs_wide_lu_amax<D>(f);
  gs_wide_lu_factor_from<D>(f, 0, amax, (gs_real)D * GS_EPS * amax);
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
		if tag, code, ok := w.sparseFactor(v, d); ok {
			s.helper(code)
			if w.sparseLU == nil {
				w.sparseLU = map[tape.ID]string{}
			}
			w.sparseLU[id] = tag
			fmt.Fprintf(sb, "  gs_wlus_factor_%s(%s);\n", tag, name)
			break
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
		if tag, ok := w.sparseLU[v.Args[0]]; ok {
			fmt.Fprintf(sb, "  gs_wlus_%s_%s(%s, t%d);\n", strings.TrimPrefix(fn, "gs_wide_lu_"), tag, name, v.Args[0])
			break
		}
		fmt.Fprintf(sb, "  %s<%d>(%s, t%d);\n", fn, d, name, v.Args[0])
	default:
		return fmt.Errorf("%s: %v: the wide layout emits no calls or tuples other than LU factors and solves", vname(id), v.Op)
	}
	e.tuple[id] = func(c int) string { return fmt.Sprintf("%s[%d]", name, c) }
	return nil
}

// sparseFactor returns the tag and code of the sparse form of factor v
// of a d×d matrix (wideSparseLU), its pattern W's entries that are not
// the constant 0 (ops.OpLUFactorShift: and its diagonal, 1 + s·m), and
// false where the kernel keeps the dense form (Config.WideDenseLU) or
// the sparse one would not help.
func (w *wideEmitter) sparseFactor(v *tape.Value, d int) (string, string, bool) {
	if w.e.src.wideDenseLU {
		return "", "", false
	}
	p := w.e.p
	nz := make([]bool, d*d)
	for q := range nz {
		a := &p.Values[v.Args[q]]
		nz[q] = a.Op != ops.OpConst || a.Aux != 0 || v.Op == ops.OpLUFactorShift && q/d == q%d
	}
	return wideSparseLU(nz, d, w.e.src.widePivots.hints(d)...)
}

// PivotSeq is a predicted pivot sequence of the wide layout's sparse LU
// factors (Config.WidePivots): up to 3 row interchanges, interchange i
// in bits 10i … 10i + 9, its step k + 1 in the low 5 bits (0: none), the
// row it takes as the pivot in the high 5; the other steps none (32
// bits: Config stays within 128 bytes, TestConfigSize).
type PivotSeq uint32

// ParsePivots returns the sequence of s, a space-separated list of
// interchanges "k>p" (step k takes row p as its pivot, k < p <
// WideSparseMaxDim, steps increasing, at most 3); "" is 0.
func ParsePivots(s string) (PivotSeq, error) {
	var q PivotSeq
	last := -1
	for i, x := range strings.Fields(s) {
		a, b, found := strings.Cut(x, ">")
		k, err1 := strconv.Atoi(a)
		p, err2 := strconv.Atoi(b)
		if !found || err1 != nil || err2 != nil || i >= 3 || k <= last || p <= k || p >= WideSparseMaxDim {
			return 0, fmt.Errorf("kernelgen: pivot sequence %q: %q is not an interchange k>p (k increasing, k < p < %d, at most 3)", s, x, WideSparseMaxDim)
		}
		q |= PivotSeq(k+1|p<<5) << (10 * i)
		last = k
	}
	return q, nil
}

// String returns q as ParsePivots reads it.
func (q PivotSeq) String() string {
	var parts []string
	for i := 0; i < 3; i++ {
		if x := q >> (10 * i); x&31 != 0 {
			parts = append(parts, fmt.Sprintf("%d>%d", x&31-1, x>>5&31))
		}
	}
	return strings.Join(parts, " ")
}

// hints returns q as wideSparseLU's hints for a d×d factor: the row
// each step takes as its pivot, none where q is 0 or names a row past d.
func (q PivotSeq) hints(d int) [][]int {
	if q == 0 {
		return nil
	}
	piv := make([]int, d)
	for k := range piv {
		piv[k] = k
	}
	for i := 0; i < 3; i++ {
		x := q >> (10 * i)
		if x&31 == 0 {
			continue
		}
		k, p := int(x&31-1), int(x>>5&31)
		if p >= d {
			return nil
		}
		piv[k] = p
	}
	return [][]int{piv}
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

// The sparse factor. A Jacobian traced from a program has structural
// zeros: the entries of W that tupleValue fills with the constant 0 (a
// reaction network's W is mostly zeros: Pollution's 86 of 400 entries
// are not, HIRES's 25 of 64). gs_wide_lu_factor and the solves run over
// every entry regardless (the factor skips a zero multiplier's updates,
// but not its loop's passes and index arithmetic; the solves subtract
// every product). For a matrix of at most WideSparseMaxDim rows with
// structural zeros, the generated form (wideSparseLU) runs only the
// entries of the factors' pattern without pivoting, the fill computed
// here (and past WideSparseMaxDim rows, up to WideSparseBandDim, for a
// thin pattern: WideSparseMaxWork): step k's multipliers are those of
// the rows below whose column k is in the pattern, each row's updates (on its lane, in column order)
// those of row k's pattern right of the diagonal, and the solves
// subtract only the pattern's products, skipping a column with none.
//
// The factor keeps partial pivoting's results: at each step it checks
// whether a row below the diagonal would be the pivot (a magnitude
// greater than the diagonal's, which is gs_wide_lu_factor's test: rows
// outside the pattern hold zeros and never are); where one would, it
// hands the rest of the factorisation to gs_wide_lu_factor_from (the
// dense steps from k on, pivoting, a lane a row), and the solves, finding no mark,
// run the dense ones. A factor that ran to its end without a row
// interchange marks its last pivot entry D − 1/2 (the dense solves read
// it as D − 1, no interchange) and its solves run the sparse triangles
// without the interchanges.
//
// Results: the same operations on the same operands in the same order as
// gs_wide_lu_factor and the wide solves, less those on entries outside
// the pattern, which hold exact zeros (of either sign): a skipped update
// x − l·0 and a skipped product's subtraction s − 0·x leave their value
// as it was but for the sign of a zero result (−0 − (−0) is +0) and
// for x infinite or NaN (0·∞ is NaN). So factors and solutions are the
// dense form's value for value (==), differing at most in the sign of
// zeros; and a solve of a right-hand side with an infinite or NaN
// component spreads the NaN only to the components whose pattern
// depends on it. Package cuda's Tuning.denseLU (Config.WideDenseLU)
// keeps the dense form.

// WideSparseMaxDim is the largest matrix the wide layout factors in the
// sparse form whatever its pattern (its steps unrolled: the generated
// code grows with the pattern). Past it, up to WideSparseBandDim rows,
// a matrix takes the sparse form where its factors' pattern is thin:
// at most WideSparseMaxWork updates and products (see wideSparseWork),
// as a banded Jacobian's (the Brusselator's, d = 64: a band of two
// either side of the diagonal; session 48).
const WideSparseMaxDim = 32

// WideSparseBandDim is the largest matrix of the sparse form (its rows'
// indices packed 8 bits each in constants).
const WideSparseBandDim = 255

// WideSparseMaxWork bounds a matrix of more than WideSparseMaxDim rows
// in the sparse form: its factor's updates plus a solve's products
// (wideSparseWork). The Brusselator's (d = 64): 249 + 250; a dense
// 64×64: 85,344 + 4,032. A d = 32 matrix of any pattern has at most
// 10,416 + 992.
const WideSparseMaxWork = 8192

// wideSparseWork returns the updates of the factor of pattern pat (the
// factors' pattern without interchanges, luPattern's, d×d row major):
// for each step k the rows below the diagonal in column k times the
// columns right of it in row k; and a solve's products: the pattern's
// entries off the diagonal.
func wideSparseWork(pat []bool, d int) (updates, products int) {
	for k := 0; k < d; k++ {
		rows, cols := 0, 0
		for r := k + 1; r < d; r++ {
			if pat[r*d+k] {
				rows++
			}
		}
		for c := k + 1; c < d; c++ {
			if pat[k*d+c] {
				cols++
			}
		}
		updates += rows * cols
		products += rows + cols
	}
	return updates, products
}

// luPattern returns the structural pattern of the factors of W (row
// major, d×d: nz[r*d+c]) without pivoting: W's pattern (nz, true where
// the entry may be nonzero) with the fill of each step.
func luPattern(nz []bool, d int) []bool {
	p, _ := luPatternPivots(nz, d, nil)
	return p
}

// luPatternPivots returns the pattern of the factors of W (pattern nz)
// whose step k interchanges rows k and piv[k] (nil: no interchange), and
// false where piv is not a sequence that partial pivoting may take on
// the pattern: not d long, or a row above k or outside the pattern's
// column k at step k (rows outside it hold zeros, never the pivot).
func luPatternPivots(nz []bool, d int, piv []int) ([]bool, bool) {
	if piv != nil && len(piv) != d {
		return nil, false
	}
	p := append([]bool(nil), nz...)
	for k := 0; k < d; k++ {
		q := k
		if piv != nil {
			q = piv[k]
		}
		if q != k && (q < k || q >= d || !p[q*d+k]) {
			return nil, false
		}
		luPivotStep(p, d, k, q)
	}
	return p, true
}

// luPivotStep applies step k of the elimination to pattern p (d×d, row
// major): rows k and q interchanged whole (the multipliers too, as the
// dense factor does), then the fill of the rows below.
func luPivotStep(p []bool, d, k, q int) {
	if q != k {
		for c := 0; c < d; c++ {
			p[k*d+c], p[q*d+c] = p[q*d+c], p[k*d+c]
		}
	}
	for r := k + 1; r < d; r++ {
		if !p[r*d+k] {
			continue
		}
		for c := k + 1; c < d; c++ {
			if p[k*d+c] {
				p[r*d+c] = true
			}
		}
	}
}

// rowsExpr returns the C expression of the i-th of rows (i a C int
// expression, 0 ≤ i < len(rows)): the rows packed 8 bits each into
// 64-bit constants.
func rowsExpr(rows []int, i string) string {
	if len(rows) == 1 {
		return strconv.Itoa(rows[0])
	}
	var words []string
	for w := 0; w < len(rows); w += 8 {
		var x uint64
		for j := w; j < min(w+8, len(rows)); j++ {
			x |= uint64(rows[j]) << (8 * (j - w))
		}
		words = append(words, fmt.Sprintf("0x%xull", x))
	}
	word := words[len(words)-1]
	for w := len(words) - 2; w >= 0; w-- {
		word = fmt.Sprintf("((%s) < %d ? %s : %s)", i, 8*(w+1), words[w], word)
	}
	if len(words) == 1 {
		return fmt.Sprintf("(int)((%s >> (8 * (%s))) & 0xff)", word, i)
	}
	return fmt.Sprintf("(int)((%s >> (8 * ((%s) & 7))) & 0xff)", word, i)
}

// wideSparseLU returns the tag and the code of the sparse factor and
// solves (gs_wlus_factor_<tag>, gs_wlus_solve_<tag>,
// gs_wlus_solve_t_<tag>) of a d×d matrix of pattern nz (row major), and
// false where the form would not help: no structural zero in the
// factors, or d past WideSparseMaxDim and the pattern not thin (d past
// WideSparseBandDim, or more than WideSparseMaxWork updates and
// products). Past WideSparseMaxDim one lane factors and solves
// (wideSeqLU) and hints are not followed.
//
// hints are predicted pivot sequences (piv[k]: the row that step k
// interchanges with row k, k for none; Config.WidePivots), each followed
// in the sparse form besides no interchange where the pattern allows it
// (luPatternPivots; an impossible one is dropped), so that a matrix that
// partial pivoting interchanges as predicted also runs sparse (package
// cuda's Pollution: rows 5 and 6, then 6 and 7, in 90% of its factors):
// at a step where the sequences part, or one interchanges, the lanes
// find the pivot partial pivoting takes (the first row of the largest
// magnitude over the pattern's rows, the diagonal unless one beats it:
// gs_wide_lu_factor_from's search; rows outside the pattern hold zeros
// and never are the pivot), and the sequence it matches goes on (its
// rows interchanged whole, as the dense form does); one that matches
// none runs the dense steps from there. Each sequence's factor marks its
// last pivot entry with its own fraction past D − 1 (luMark), and its
// solves apply its interchanges (lane 0, statically) and its pattern's
// triangles. The same operations in the same order as the dense form
// but those on the pattern's zeros: the same values as without hints.
func wideSparseLU(nz []bool, d int, hints ...[]int) (string, string, bool) {
	if d > WideSparseBandDim {
		return "", "", false
	}
	pat := luPattern(nz, d)
	if !slices.Contains(pat, false) {
		return "", "", false
	}
	if u, p := wideSparseWork(pat, d); d > WideSparseMaxDim && u+p > WideSparseMaxWork {
		return "", "", false
	}
	if d > WideSparseMaxDim {
		hints = nil // (the one-lane form follows no interchange: wideSeqLU)
	}
	leaves := [][]int{nil} // no interchange: leaf 0
	pats := [][]bool{pat}
	for _, hint := range hints {
		p, ok := luPatternPivots(nz, d, hint)
		ident := true
		for k, q := range hint {
			ident = ident && q == k
		}
		if ok && !ident && !slices.ContainsFunc(leaves, func(l []int) bool { return slices.Equal(l, hint) }) {
			leaves = append(leaves, hint)
			pats = append(pats, p)
		}
	}
	if len(leaves) > 32 {
		leaves, pats = leaves[:32], pats[:32]
	}
	pivOf := func(j, k int) int {
		if leaves[j] == nil {
			return k
		}
		return leaves[j][k]
	}
	h := fnv.New64a()
	for _, x := range nz {
		b := byte('0')
		if x {
			b = '1'
		}
		h.Write([]byte{b})
	}
	for _, l := range leaves[1:] {
		fmt.Fprintf(h, "|%v", l)
	}
	tag := fmt.Sprintf("%d_%016x", d, h.Sum64())
	if d > WideSparseMaxDim {
		return tag, wideSeqLU(pat, d, tag), true
	}
	var sb strings.Builder
	// put writes text with ind before each of its lines.
	put := func(ind, text string) {
		if ind == "" {
			sb.WriteString(text)
			return
		}
		for _, line := range strings.SplitAfter(text, "\n") {
			if line != "" {
				sb.WriteString(ind + line)
			}
		}
	}
	// loop returns a loop over rows split over the lanes, body the
	// statements of row r.
	loop := func(rows []int, indent string, body func(r string) string) string {
		return fmt.Sprintf("%sfor (int i = lane; i < %d; i += GS_WSTRIDE) {\n", indent, len(rows)) +
			fmt.Sprintf("%s  const int r = %s;\n%s%s}\n", indent, rowsExpr(rows, "i"), body("r"), indent)
	}
	fmt.Fprintf(&sb, "// The sparse LU of pattern %s (widelu.go: wideSparseLU).\n", tag)
	fmt.Fprintf(&sb, "GS_DEVICE void gs_wlus_factor_%s(gs_real* f) {\n", tag)
	fmt.Fprintf(&sb, "  constexpr int D = %d, LD = GS_WLD(D);\n  const int lane = GS_WLANE;\n  (void)lane;\n", d)
	sb.WriteString("  GS_SYNCWARP();\n  const gs_real amax = gs_wide_lu_amax<D>(f);\n  const gs_real tol = (gs_real)D * GS_EPS * amax;\n")
	steps := make([][]luStep, len(leaves))
	for j := range leaves {
		steps[j] = luSteps(nz, d, leaves[j])
	}
	// eliminate returns step k's multipliers and updates (the rows of
	// the pattern after its interchange), and its pivot's store.
	eliminate := func(k int, st luStep, j int) string {
		var b strings.Builder
		piv := fmt.Sprintf("(gs_real)%d", st.piv)
		if k == d-1 {
			piv = luMark(d, j)
		}
		fmt.Fprintf(&b, "    if (lane == 0) f[D * LD + %d] = %s;\n", k, piv)
		if len(st.rows) > 0 {
			fmt.Fprintf(&b, "    const gs_real inv = (gs_real)1 / f[%d];\n", k*(d|1)+k)
			b.WriteString(loop(st.rows, "    ", func(r string) string {
				var b strings.Builder
				fmt.Fprintf(&b, "      gs_real* const fr = f + %s * LD;\n      const gs_real l = fr[%d] * inv;\n      fr[%d] = l;\n", r, k, k)
				if len(st.cols) > 0 {
					b.WriteString("      if (l != 0) {\n")
					for _, c := range st.cols {
						fmt.Fprintf(&b, "        fr[%d] -= l * f[%d];\n", c, k*(d|1)+c)
					}
					b.WriteString("      }\n")
				}
				return b.String()
			}))
			b.WriteString("    GS_SYNCWARP();\n")
		}
		return b.String()
	}
	// factor emits steps k … d-1 for the leaves live (those that agree
	// on the pivots of steps 0 … k-1), ind before each line.
	var factor func(k int, live []int, ind string)
	factor = func(k int, live []int, ind string) {
		for ; k < d; k++ {
			st := steps[live[0]][k]
			var choices []int
			for _, j := range live {
				if q := pivOf(j, k); !slices.Contains(choices, q) {
					choices = append(choices, q)
				}
			}
			if len(choices) == 1 && choices[0] == k {
				// No interchange: does a row of the pattern beat the
				// diagonal (the dense search's test)?
				var b strings.Builder
				fmt.Fprintf(&b, "  {  // step %d: rows %v, columns %v\n", k, st.search, st.cols)
				fmt.Fprintf(&b, "    const gs_real dk = fabs(f[%d]);\n", k*(d|1)+k)
				if len(st.search) > 0 {
					b.WriteString("    gs_real beat = 0;\n")
					b.WriteString(loop(st.search, "    ", func(r string) string {
						return fmt.Sprintf("      if (fabs(f[%s * LD + %d]) > dk) beat = 1;\n", r, k)
					}))
					fmt.Fprintf(&b, "    if (dk == dk && gs_wide_max(beat) != 0) {\n      gs_wide_lu_factor_from<D, true>(f, %d, amax, tol);\n      return;\n    }\n", k)
				}
				b.WriteString("    if (!(dk > tol) || amax == 0) {\n      gs_wide_lu_fail<D>(f);\n      return;\n    }\n")
				b.WriteString(eliminate(k, st, live[0]))
				b.WriteString("  }\n")
				put(ind, b.String())
				continue
			}
			// The pivot partial pivoting takes, then the leaves' branches.
			var b strings.Builder
			fmt.Fprintf(&b, "  {  // step %d: rows %v, pivots %v\n", k, st.search, choices)
			fmt.Fprintf(&b, "    const gs_real dk = fabs(f[%d]);\n    int p = -1;\n    gs_real pv = -1;\n", k*(d|1)+k)
			b.WriteString(loop(st.search, "    ", func(r string) string {
				return fmt.Sprintf("      const gs_real v = fabs(f[%s * LD + %d]);\n      if (v > pv) {\n        p = %s;\n        pv = v;\n      }\n", r, k, r)
			}))
			b.WriteString("#ifdef GS_WARPS\n    for (int o = GS_WSTRIDE / 2; o > 0; o >>= 1) {\n" +
				"      const gs_real ov = __shfl_xor_sync(GS_WMASK, pv, o);\n      const int op = __shfl_xor_sync(GS_WMASK, p, o);\n" +
				"      if (ov > pv || (ov == pv && op < p)) {\n        p = op;\n        pv = ov;\n      }\n    }\n#endif\n")
			fmt.Fprintf(&b, "    if (dk != dk || !(pv > dk)) {\n      p = %d;\n      pv = dk;\n    }\n", k)
			b.WriteString("    if (!(pv > tol) || amax == 0) {\n      gs_wide_lu_fail<D>(f);\n      return;\n    }\n")
			put(ind, b.String())
			for _, q := range choices {
				var sub []int
				for _, j := range live {
					if pivOf(j, k) == q {
						sub = append(sub, j)
					}
				}
				qs := steps[sub[0]][k]
				b.Reset()
				fmt.Fprintf(&b, "    if (p == %d) {\n", q)
				if q != k {
					fmt.Fprintf(&b, "      GS_SYNCWARP();  // every lane has read column %d\n", k)
					fmt.Fprintf(&b, "      for (int c = lane; c < D; c += GS_WSTRIDE) {\n        const gs_real t = f[%d + c];\n        f[%d + c] = f[%d + c];\n        f[%d + c] = t;\n      }\n      GS_SYNCWARP();\n",
						k*(d|1), k*(d|1), q*(d|1), q*(d|1))
				}
				put(ind, b.String())
				put(ind+"  ", eliminate(k, qs, sub[0]))
				factor(k+1, sub, ind+"    ")
				put(ind, "      return;\n    }\n")
			}
			put(ind, fmt.Sprintf("    gs_wide_lu_factor_from<D, true>(f, %d, amax, tol);\n    return;\n  }\n", k))
			return
		}
	}
	all := make([]int, len(leaves))
	for j := range all {
		all[j] = j
	}
	factor(0, all, "")
	sb.WriteString("}\n")
	// The solves, a leaf's pattern pat and interchanges swaps (steps k
	// with their rows p).
	var pat0 []bool
	// below returns the rows r > c of column c of L (trans: of row c of
	// U), above the rows r < c of column c of U (trans: of row c of L).
	at := func(r, c int, trans bool) bool {
		if trans {
			return pat0[c*d+r]
		}
		return pat0[r*d+c]
	}
	below := func(c int, trans bool) (rows []int) {
		for r := c + 1; r < d; r++ {
			if at(r, c, trans) {
				rows = append(rows, r)
			}
		}
		return rows
	}
	above := func(c int, trans bool) (rows []int) {
		for r := 0; r < c; r++ {
			if at(r, c, trans) {
				rows = append(rows, r)
			}
		}
		return rows
	}
	fref := func(trans bool, c int) func(r string) string {
		if trans {
			return func(r string) string { return fmt.Sprintf("f[%d + %s]", c*(d|1), r) }
		}
		return func(r string) string { return fmt.Sprintf("f[%s * LD + %d]", r, c) }
	}
	// unit emits a unit triangle's columns (L's forward, Lᵀ's backward):
	// each column's products subtracted from the rows of the pattern.
	unit := func(cs []int, rows func(c int) []int, trans bool) {
		for _, c := range cs {
			rs := rows(c)
			if len(rs) == 0 {
				continue
			}
			fmt.Fprintf(&sb, "  {\n    const gs_real xc = x[%d];\n", c)
			sb.WriteString(loop(rs, "    ", func(r string) string {
				return fmt.Sprintf("      x[%s] -= %s * xc;\n", r, fref(trans, c)(r))
			}))
			sb.WriteString("    GS_SYNCWARP();\n  }\n")
		}
	}
	// diag emits a triangle with U's diagonal (U's backward, Uᵀ's
	// forward): each column's x[c] / u_cc kept in a register, written by
	// lane 0 after the next __syncwarp() (every lane has read x[c]), its
	// products subtracted from the rows of the pattern; a column without
	// any takes no __syncwarp().
	diag := func(cs []int, rows func(c int) []int, trans bool) {
		var pend []int
		flush := func() {
			if len(pend) == 0 {
				return
			}
			sb.WriteString("  if (lane == 0) {\n")
			for _, c := range pend {
				fmt.Fprintf(&sb, "    x[%d] = x%d;\n", c, c)
			}
			sb.WriteString("  }\n")
			pend = pend[:0]
		}
		for _, c := range cs {
			fmt.Fprintf(&sb, "  const gs_real x%d = x[%d] / f[%d];\n", c, c, c*(d|1)+c)
			pend = append(pend, c)
			rs := rows(c)
			if len(rs) == 0 {
				continue
			}
			sb.WriteString(loop(rs, "  ", func(r string) string {
				return fmt.Sprintf("    x[%s] -= %s * x%d;\n", r, fref(trans, c)(r), c)
			}))
			sb.WriteString("  GS_SYNCWARP();\n")
			flush()
		}
		sb.WriteString("  GS_SYNCWARP();\n")
		flush()
		sb.WriteString("  GS_SYNCWARP();\n")
	}
	// swap emits lane 0's interchanges of leaf j, in order (a solve's
	// first step) or in reverse (a transposed solve's last).
	swap := func(j int, reverse bool) {
		var ks []int
		for k := 0; k < d; k++ {
			if pivOf(j, k) != k {
				ks = append(ks, k)
			}
		}
		if reverse {
			slices.Reverse(ks)
		}
		sb.WriteString("  if (lane == 0) {\n")
		for _, k := range ks {
			fmt.Fprintf(&sb, "    const gs_real s%d = x[%d];\n    x[%d] = x[%d];\n    x[%d] = s%d;\n", k, k, k, pivOf(j, k), pivOf(j, k), k)
		}
		sb.WriteString("  }\n  GS_SYNCWARP();\n")
	}
	up, down := make([]int, d), make([]int, d)
	for c := range up {
		up[c], down[c] = c, d-1-c
	}
	mark := func(j int) string { return fmt.Sprintf("f[D * LD + D - 1] != %s", luMark(d, j)) }
	// The solves are out of line (GS_WLU_OUTLINE): a kernel calls them
	// 24 times a Rodas5P step, each an unrolled copy were they inlined.
	for _, trans := range []bool{false, true} {
		name, dense := "solve", "gs_wide_lu_solve"
		if trans {
			name, dense = "solve_t", "gs_wide_lu_solve_t"
		}
		fmt.Fprintf(&sb, "GS_WLU_OUTLINE void gs_wlus_%s_%s(gs_real* x, const gs_real* f) {\n", name, tag)
		fmt.Fprintf(&sb, "  constexpr int D = %d, LD = GS_WLD(D);\n  const int lane = GS_WLANE;\n  (void)lane;\n", d)
		if len(leaves) == 1 {
			fmt.Fprintf(&sb, "  GS_SYNCWARP();\n  if (%s) {\n    %s<D>(x, f);\n    return;\n  }\n", mark(0), dense)
		} else {
			sb.WriteString("  GS_SYNCWARP();\n")
		}
		for j := range leaves {
			pat0 = pats[j]
			if len(leaves) > 1 {
				fmt.Fprintf(&sb, "  if (f[D * LD + D - 1] == %s) {\n", luMark(d, j))
			}
			if trans {
				diag(up, func(c int) []int { return below(c, true) }, true)
				unit(down[:d-1], func(c int) []int { return above(c, true) }, true)
				if j > 0 {
					swap(j, true)
				}
			} else {
				if j > 0 {
					swap(j, false)
				}
				unit(up[:d-1], func(c int) []int { return below(c, false) }, false)
				diag(down, func(c int) []int { return above(c, false) }, false)
			}
			if len(leaves) > 1 {
				sb.WriteString("  return;\n  }\n")
			}
		}
		if len(leaves) > 1 {
			fmt.Fprintf(&sb, "  %s<D>(x, f);\n", dense)
		}
		sb.WriteString("}\n")
	}
	return tag, sb.String(), true
}

// luMark is the last pivot entry of a factor that leaf j of
// wideSparseLU's pivot sequences ran to its end: D − 1/2 for no
// interchange (leaf 0), D − 1 + j/64 for the others; each truncates to
// D − 1, the dense solves' reading.
func luMark(d, j int) string {
	if j == 0 {
		return fmt.Sprintf("(gs_real)%d - (gs_real)0.5", d)
	}
	return "(gs_real)" + strconv.FormatFloat(float64(d-1)+float64(j)/64, 'f', -1, 64)
}

// luStep is step k of a sparse factor: the pattern's rows below the
// diagonal in column k before its interchange (search: the pivot's
// candidates), its pivot row, the rows below the diagonal after the
// interchange (rows: the multipliers') and row k's columns right of the
// diagonal (cols: each row's updates).
type luStep struct {
	search, rows, cols []int
	piv                int
}

// luSteps returns the steps of the factor of pattern nz (d×d, row major)
// that interchanges rows as piv does (nil: none; luPatternPivots).
func luSteps(nz []bool, d int, piv []int) []luStep {
	p := append([]bool(nil), nz...)
	st := make([]luStep, d)
	for k := range st {
		s := &st[k]
		s.piv = k
		if piv != nil {
			s.piv = piv[k]
		}
		for r := k + 1; r < d; r++ {
			if p[r*d+k] {
				s.search = append(s.search, r)
			}
		}
		luPivotStep(p, d, k, s.piv)
		for r := k + 1; r < d; r++ {
			if p[r*d+k] {
				s.rows = append(s.rows, r)
			}
		}
		for c := k + 1; c < d; c++ {
			if p[k*d+c] {
				s.cols = append(s.cols, c)
			}
		}
	}
	return st
}
