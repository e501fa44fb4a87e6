package kernelgen

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Lane-private arrays of the wide layout. A wide function's array whose
// every access is at the loop's own component, component c on lane
// c mod 32 (a stage's derivative k_j, written by the field's loop and
// read by the stage combinations; a reverse step's adjoint of one), is
// never read by another lane: it needs no shared memory. Such an array
// lives in the lane's own storage instead (gs_p: a per-thread array,
// local memory, L1-cached, or registers where the compiler resolves its
// indices): entry c at row c / 32 of the array's rows (ceil(n/32)), so
// that the warp's shared memory holds only the arrays read at other
// components (the gathers' operands, Lorenz-96's y[c−1], y[c+1],
// y[c−2]; the factor of W, widelu.go; a window's or a shifted loop's
// operands; entries read by lane 0 or after a loop) and more warps fit
// on a multiprocessor. Only the storage moves: the same operations in
// the same order, the same bits.
//
// The check is on the function's code and conservative: an array is
// private where every mention but its declaration is name[gs_c] (or
// name[(gs_c)]) inside a loop split over the lanes in the canonical
// stride (for (int gs_c = gs_lane; gs_c < n; gs_c += GS_WSTRIDE)), or
// inside a window loop's own repetition (if (gs_c == gs_c0), gs_c0 of
// that stride); any other mention (a constant index, a shifted or
// gathered index, a sequential loop, a call that takes the array) keeps
// it in shared memory. Config.WideShared turns the pass off.

// wideLanes is the lanes of a warp, the rows' unit of a private array.
const wideLanes = 32

// wideCanonLoop matches the head of a loop split over the lanes in the
// canonical stride: a block ("{" ends the line) or a one-line loop.
var wideCanonLoop = regexp.MustCompile(`^  for \(int gs_c = gs_lane; gs_c < \d+; gs_c \+= GS_WSTRIDE\)( \{)?`)

// wideWindowLoop matches the head of a window loop's outer loop
// (wideEmitter.loop), whose gs_c0 is the lane's component.
var wideWindowLoop = regexp.MustCompile(`^  for \(int gs_c0 = gs_lane; gs_c0 < \d+; gs_c0 \+= GS_WSTRIDE\) \{`)

// wideSizeOf matches an array declaration's size comment.
var wideSizeOf = regexp.MustCompile(`// \[(\d+)\]`)

// privateArrays returns the arrays of the scratch declared in a wide
// function's code that are only ever accessed at the lane's own
// component (see above), by name.
func privateArrays(code string) map[string]bool {
	lines := strings.Split(code, "\n")
	cand := map[string]bool{}
	declAt := map[string]int{}
	for i, ln := range lines {
		if m := wideArray.FindStringSubmatch(ln); m != nil {
			cand[m[1]] = true
			declAt[m[1]] = i
		}
	}
	if len(cand) == 0 {
		return cand
	}
	// own: the line runs at the lane's component (gs_c ≡ lane mod 32).
	inCanon, inWindow, inOwn := false, 0, false
	for i, ln := range lines {
		own := false
		switch {
		case inCanon:
			if ln == "  }" {
				inCanon = false
			} else {
				own = true
			}
		case inWindow > 0:
			switch {
			case ln == "  }":
				inWindow--
			case ln == "    if (gs_c == gs_c0) {":
				inOwn = true
			case inOwn && ln == "    }":
				inOwn = false
			case inOwn:
				own = true
			}
		default:
			if m := wideCanonLoop.FindStringSubmatch(ln); m != nil {
				if m[1] != "" {
					inCanon = true
				} else {
					own = true // a one-line loop
				}
			} else if wideWindowLoop.MatchString(ln) {
				inWindow = 2 // the outer and the inner loop
			}
		}
		forIdents(ln, func(from, to int) {
			name := ln[from:to]
			if !cand[name] || declAt[name] == i {
				return
			}
			rest := ln[to:]
			if !own || !(strings.HasPrefix(rest, "[gs_c]") || strings.HasPrefix(rest, "[(gs_c)]")) {
				delete(cand, name)
			}
		})
	}
	return cand
}

// forIdents calls f with the bounds of each C identifier of ln (a run of
// identifier characters not starting with a digit).
func forIdents(ln string, f func(from, to int)) {
	for i := 0; i < len(ln); {
		if !isIdent(ln[i]) {
			i++
			continue
		}
		j := i
		for j < len(ln) && isIdent(ln[j]) {
			j++
		}
		if ln[i] < '0' || ln[i] > '9' {
			f(i, j)
		}
		i = j
	}
}

// privatize moves the arrays of code that privateArrays finds (priv)
// from the warp's scratch (gs_w) into the lane's own storage, and
// returns the code and the length in rows of gs_p (times GS_WPRIV reals:
// one on a warp, wideLanes where a lane runs every component), whose
// arrays it places as allocate places the scratch's (by rows of
// wideLanes components). Entry c of a private array is its row
// c / GS_WSTRIDE. With rows (Config.WideRows) the loops split over the
// lanes that touch private arrays run over the lane's rows instead
// (unrollRows), and an array that no other loop touches is an array of
// its own, whose indices are then static, not in gs_p.
func privatize(code string, priv map[string]bool, rows bool) (string, int) {
	if len(priv) == 0 {
		return code, 0
	}
	lines := strings.Split(code, "\n")
	for i, ln := range lines {
		if m := wideArray.FindStringSubmatch(ln); m != nil && priv[m[1]] {
			n := 0
			if s := wideSizeOf.FindStringSubmatch(ln); s != nil {
				n, _ = strconv.Atoi(s[1])
			}
			rows := (n + wideLanes - 1) / wideLanes
			lines[i] = fmt.Sprintf("  gs_real* const %s = gs_p + %s * GS_WPRIV;  // [%d] rows, %d components, lane-private", m[1], privMark(m[1]), rows, n)
			continue
		}
		if strings.Contains(ln, "[") {
			lines[i] = privateRows(ln, priv)
		}
	}
	if rows {
		lines = unrollRows(lines)
		all := strings.Join(lines, "\n")
		for i, ln := range lines {
			m := widePrivArray.FindStringSubmatch(ln)
			if m == nil || strings.Contains(all, m[1]+privRow) {
				continue
			}
			r := wideSizeOf.FindStringSubmatch(ln)
			lines[i] = fmt.Sprintf("  gs_real %s[%s * GS_WPRIV];  // lane-private, its rows' indices static", m[1], r[1])
		}
	}
	code = strings.Join(lines, "\n")
	offs, top := placeArraysBy(code, widePrivArray)
	return setOffsetsBy(code, offs, privMarkPrefix), top
}

// privateRows returns line ln with each access name[gs_c] or
// name[(gs_c)] of an array of priv written name[gs_c / GS_WSTRIDE].
func privateRows(ln string, priv map[string]bool) string {
	var sb strings.Builder
	last := 0
	forIdents(ln, func(from, to int) {
		if !priv[ln[from:to]] {
			return
		}
		for _, idx := range []string{"[gs_c]", "[(gs_c)]"} {
			if strings.HasPrefix(ln[to:], idx) {
				sb.WriteString(ln[last:to])
				sb.WriteString(privRow)
				last = to + len(idx)
				return
			}
		}
	})
	if last == 0 {
		return ln
	}
	sb.WriteString(ln[last:])
	return sb.String()
}

// privRow is a private array's index of the lane's component gs_c.
const privRow = "[gs_c / GS_WSTRIDE]"

// unrollRows returns lines with each loop split over the lanes that
// touches a private array (privRow) as a loop over the lane's rows,
//
//	#pragma unroll
//	for (int gs_row = 0; gs_row < (n + GS_WSTRIDE - 1) / GS_WSTRIDE; gs_row++) {
//	  const int gs_c = gs_lane + gs_row * GS_WSTRIDE;
//	  if (gs_c >= n) break;
//	  the body, with the private arrays' rows gs_row
//	}
//
// the same components in the same order on each lane; a window loop's
// accesses stay as they are.
func unrollRows(lines []string) []string {
	out := make([]string, 0, len(lines))
	head := func(n string) []string {
		return []string{"#pragma unroll",
			fmt.Sprintf("  for (int gs_row = 0; gs_row < (%s + GS_WSTRIDE - 1) / GS_WSTRIDE; gs_row++) {", n),
			"    const int gs_c = gs_lane + gs_row * GS_WSTRIDE;",
			fmt.Sprintf("    if (gs_c >= %s) break;", n)}
	}
	for i := 0; i < len(lines); i++ {
		ln := lines[i]
		m := wideCanonHead.FindStringSubmatch(ln)
		if m == nil || len(out) == 0 || out[len(out)-1] != "#pragma unroll 1" {
			out = append(out, ln)
			continue
		}
		if m[2] == " {" {
			end := i + 1
			for end < len(lines) && lines[end] != "  }" {
				end++
			}
			body := strings.Join(lines[i+1:end], "\n")
			if end == len(lines) || !strings.Contains(body, privRow) {
				out = append(out, ln)
				continue
			}
			out = append(out[:len(out)-1], head(m[1])...)
			out = append(out, strings.Split(strings.ReplaceAll(body, privRow, "[gs_row]"), "\n")...)
			i = end - 1 // the loop's "  }" next
			continue
		}
		stmt := ln[len(m[0]):]
		if !strings.Contains(stmt, privRow) {
			out = append(out, ln)
			continue
		}
		out = append(out[:len(out)-1], head(m[1])...)
		out = append(out, "   "+strings.ReplaceAll(stmt, privRow, "[gs_row]"), "  }")
	}
	return out
}

// wideCanonHead is wideCanonLoop with its bound captured.
var wideCanonHead = regexp.MustCompile(`^  for \(int gs_c = gs_lane; gs_c < (\d+); gs_c \+= GS_WSTRIDE\)( \{)?`)

// privMarkPrefix begins the placeholder of a private array's offset.
const privMarkPrefix = "@poff:"

// privMark is the placeholder of a private array's offset in gs_p (in
// rows), set once the arrays' lifetimes are known.
func privMark(name string) string { return privMarkPrefix + name + "@" }

// widePrivArray matches the declaration of a private array.
var widePrivArray = regexp.MustCompile(`gs_real\* const (gs_\w+|t\d+) = gs_p \+ @poff:`)

// declarePrivate returns a wide function's code with gs_p's declaration,
// of rows rows (none where rows is 0), after the function's lane.
func declarePrivate(code string, rows int) string {
	if rows == 0 {
		return code
	}
	const after = "  (void)gs_lane;\n"
	i := strings.Index(code, after)
	if i < 0 {
		panic("kernelgen: a wide function without its lane")
	}
	i += len(after)
	decl := fmt.Sprintf("  gs_real gs_p[%d * GS_WPRIV];  // the lane-private arrays (wideprivate.go)\n", rows)
	return code[:i] + decl + code[i:]
}
