package kernelgen

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The blocked element split of the wide layout (Config.WideBlocked,
// issue 26; docs/wide-layout.md). By default a loop split over the lanes
// runs component c on lane c mod S (S = GS_WSTRIDE lanes a trajectory),
// and an array read at other components than the lane's own (Lorenz-96's
// stage inputs, read at c + 1, c − 2, c − 1) lives in the warp's shared
// memory. Blocked, a loop over n components (n a multiple of 32) runs
// component c on lane c / R, row c mod R of that lane (R = n / S rows a
// lane: a block of consecutive components), and an array whose every
// access is in such a loop, at the loop's own component or at a rotation
// of it by at most R (GS_WROT(gs_c, 0, k, n), Lorenz-96's neighbours),
// is the lane's own array of R rows: registers (the rows' indices are
// static once the loop over them is unrolled). Its entry at a
// neighbour's component is the lane's own row where it lies in the
// lane's block, else a row of the next or the previous lane, by a
// shuffle (GS_WNB): one per row that crosses the block's end, where the
// default layout reads shared memory for every neighbour of every
// component.
//
// Only the storage and the lane that runs a component change: each
// component's values are the same operations on the same operands in the
// same order, so the results are the same bit for bit. A loop that sums
// over its components (gs_wsum), keeps a carried value, takes a
// component's value out of the loop (a sum's last term), writes the
// lanes' own rows (gs_po, the cyclic private arrays) or runs a window
// stays in the cyclic form, its sums in the warp's order, and so does
// every array it touches (in shared memory, or cyclic private where
// every access is the lane's own: wideprivate.go). So the stage loops
// of an explicit method's trial and of a reverse step's replay run
// blocked, and the error norms, the stiffness estimate and the reverse
// step's window loops (the field's VJP) as before.

// wideBlockHelper defines GS_WNB, a block-private array's entry at a
// neighbour's row.
const wideBlockHelper = `// GS_WNB(a, r, s, R) is entry r + s of block-private array a of R rows a
// lane (wideblock.go), |s| <= R: the lane's own row r + s, or row
// r + s - R of the next lane, or row r + s + R of the previous one (the
// trajectory's lanes in a ring: the rotation of its n components). r is
// the same on every lane (an unrolled loop's row), so every lane takes
// the same branch and the shuffles are the whole group's.
#define GS_WNB(a, r, s, R) ((r) + (s) >= (R) ? gs_wide_from((a)[(r) + (s) - (R)], gs_lane + 1) : ((r) + (s) < 0 ? gs_wide_from((a)[(r) + (s) + (R)], gs_lane + GS_WSTRIDE - 1) : (a)[(r) + (s)]))
// GS_WNBF is GS_WNB where r + s lies in the lanes' blocks next to the
// lane's (a blocked window loop's rows reach w past its block), else x,
// the entry read from shared memory (few rows a lane).
#define GS_WNBF(a, r, s, R, x) ((r) + (s) >= 2 * (R) || (r) + (s) < -(R) ? (x) : GS_WNB(a, r, s, R))
`

// wideBlockLoop is a loop split over the lanes in the canonical stride
// (lines from, the "#pragma unroll 1", to to, its last line) that may
// run blocked: over n components, its body (one statement a line) free
// of what ties a component to its cyclic lane.
type wideBlockLoop struct {
	from, to, n int
	oneLine     bool
}

// wideBlockBan lists what keeps a loop cyclic: its sums, its values
// taken out of the loop or from other lanes, the lanes' own rows, the
// window loops' variables and control flow.
var wideBlockBan = []string{"gs_wsum", "gs_wide_", "__shfl", "gs_lane", "gs_po", "gs_row", "GS_WSTRIDE", "gs_k", "gs_p[", "gs_p +", "for (", "break", "if (", "gs_c ==", "gs_c0"}

// wideBlockStmt matches a statement a blocked loop's body may hold: a
// value of the component, or a store into an array.
var wideBlockStmt = regexp.MustCompile(`^    (const gs_real gs_u\d+ = |[A-Za-z_]\w*\[[^=]*\] = )`)

// wideBlockLoops returns the loops of code's lines that may run blocked
// (see wideBlockLoop).
func wideBlockLoops(lines []string) []wideBlockLoop {
	var out []wideBlockLoop
	for i := 0; i+1 < len(lines); i++ {
		if lines[i] != "#pragma unroll 1" {
			continue
		}
		m := wideCanonHead.FindStringSubmatch(lines[i+1])
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if n < wideLanes || n%wideLanes != 0 {
			continue
		}
		var body []string
		l := wideBlockLoop{from: i, n: n}
		if m[2] == "" {
			l.to, l.oneLine = i+1, true
			body = []string{"    " + strings.TrimSpace(lines[i+1][len(m[0]):])}
		} else {
			end := i + 2
			for end < len(lines) && lines[end] != "  }" {
				end++
			}
			if end == len(lines) {
				continue
			}
			l.to = end
			body = lines[i+2 : end]
		}
		if blockableBody(body) {
			out = append(out, l)
		}
	}
	return out
}

// blockableBody reports whether a loop's body may run blocked.
func blockableBody(body []string) bool {
	for _, ln := range body {
		if !wideBlockStmt.MatchString(ln) {
			return false
		}
		for _, b := range wideBlockBan {
			if strings.Contains(ln, b) {
				return false
			}
		}
	}
	return true
}

// wideBlockIndex matches an access of a block-private array after its
// name: the loop's own component or a rotation of it.
var wideBlockIndex = regexp.MustCompile(`^\[(?:\(?gs_c\)?|\(?GS_WROT\(gs_c, 0, (\d+), (\d+)\)\)?)\]`)

// blockShift returns the shift s of a rotation by k of n components
// (entry (c + k) mod n is entry c + s, −n/2 < s <= n/2).
func blockShift(k, n int) int {
	if k > n/2 {
		return k - n
	}
	return k
}

// blockedArrays returns the arrays of the scratch declared in code that
// may be block-private (see above): every mention but the declaration
// in a loop that may run blocked over as many components as the array
// has (not one of cyclic, by its first line), at the loop's own
// component or at a rotation of it by at most n/32 (the rows a lane
// holds on a warp), and the loops that touch one, which then run
// blocked.
func blockedArrays(code string, cyclic map[int]bool) (map[string]bool, []wideBlockLoop) {
	lines := strings.Split(code, "\n")
	cand := map[string]int{}
	declAt := map[string]int{}
	for i, ln := range lines {
		m := wideArray.FindStringSubmatch(ln)
		if m == nil {
			continue
		}
		if s := wideSizeOf.FindStringSubmatch(ln); s != nil {
			if n, _ := strconv.Atoi(s[1]); n >= wideLanes && n%wideLanes == 0 {
				cand[m[1]] = n
				declAt[m[1]] = i
			}
		}
	}
	var loops []wideBlockLoop
	for _, l := range wideBlockLoops(lines) {
		if !cyclic[l.from] {
			loops = append(loops, l)
		}
	}
	if len(cand) == 0 || len(loops) == 0 {
		return map[string]bool{}, nil
	}
	loopOf := make([]int, len(lines)) // 1 + the loop's index, 0 outside
	for k, l := range loops {
		for i := l.from; i <= l.to; i++ {
			loopOf[i] = k + 1
		}
	}
	for i, ln := range lines {
		forIdents(ln, func(from, to int) {
			name := ln[from:to]
			n, ok := cand[name]
			if !ok || declAt[name] == i {
				return
			}
			k := loopOf[i]
			if k == 0 || loops[k-1].n != n {
				delete(cand, name)
				return
			}
			m := wideBlockIndex.FindStringSubmatch(ln[to:])
			if m == nil {
				delete(cand, name)
				return
			}
			if m[1] != "" {
				rk, _ := strconv.Atoi(m[1])
				rn, _ := strconv.Atoi(m[2])
				if s := blockShift(rk, rn); rn != n || s > n/wideLanes || -s > n/wideLanes {
					delete(cand, name)
					return
				}
				// A rotated access must be a read: the loop's store is
				// at its own component.
				if strings.HasPrefix(ln[to+len(m[0]):], " = ") {
					delete(cand, name)
				}
			}
		})
	}
	blk := map[string]bool{}
	for name := range cand {
		blk[name] = true
	}
	var run []wideBlockLoop
	for _, l := range loops {
		if touchesAny(lines[l.from:l.to+1], blk) {
			run = append(run, l)
		}
	}
	return blk, run
}

// touchesAny reports whether lines name an array of names.
func touchesAny(lines []string, names map[string]bool) bool {
	found := false
	for _, ln := range lines {
		forIdents(ln, func(from, to int) {
			if names[ln[from:to]] {
				found = true
			}
		})
		if found {
			return true
		}
	}
	return false
}

// privateSets returns the arrays of code that are lane-private: in the
// cyclic form (privateArrays) and, with blocked (Config.WideBlocked),
// block-private (blockedArrays). A loop that touches an array private in
// the cyclic form but not blocked (its other loops cyclic) stays cyclic,
// and so do the arrays it touches (again until none is left), so that no
// array loses its privacy.
func privateSets(code string, blocked bool) (cyc, blk map[string]bool) {
	cyc = privateArrays(code)
	if !blocked {
		return cyc, map[string]bool{}
	}
	lines := strings.Split(code, "\n")
	cyclic := map[int]bool{}
	for {
		var loops []wideBlockLoop
		blk, loops = blockedArrays(code, cyclic)
		own := map[string]bool{}
		for name := range cyc {
			if !blk[name] {
				own[name] = true
			}
		}
		more := false
		for _, l := range loops {
			if touchesAny(lines[l.from:l.to+1], own) {
				cyclic[l.from], more = true, true
			}
		}
		if !more {
			for name := range blk {
				delete(cyc, name)
			}
			return cyc, blk
		}
	}
}

// blockLoops returns code with the arrays of blk block-private and the
// loops of code that touch them run blocked: each such loop (still in the
// canonical stride: privatize turned no loop of it into rows, since it
// touches no cyclic private array) becomes
//
//	#pragma unroll
//	for (int gs_row = 0; gs_row < n / GS_WSTRIDE; gs_row++) {
//	  const int gs_c = gs_lane * (n / GS_WSTRIDE) + gs_row;
//	  (void)gs_c;
//	  the body, the block-private arrays' rows gs_row and neighbours GS_WNB
//	}
func blockLoops(code string, blk map[string]bool) string {
	if len(blk) == 0 {
		return code
	}
	lines := strings.Split(code, "\n")
	loops := wideBlockLoops(lines)
	out := make([]string, 0, len(lines))
	next := 0
	for _, l := range loops {
		if !touchesAny(lines[l.from:l.to+1], blk) {
			continue
		}
		for _, ln := range lines[next:l.from] {
			out = append(out, blockDecl(ln, blk))
		}
		rows := fmt.Sprintf("(%d / GS_WSTRIDE)", l.n)
		out = append(out, "#pragma unroll",
			fmt.Sprintf("  for (int gs_row = 0; gs_row < %s; gs_row++) {", rows),
			fmt.Sprintf("    const int gs_c = gs_lane * %s + gs_row;", rows), "    (void)gs_c;")
		if l.oneLine {
			m := wideCanonHead.FindStringSubmatch(lines[l.to])
			out = append(out, blockRows("    "+strings.TrimSpace(lines[l.to][len(m[0]):]), blk, rows), "  }")
		} else {
			for _, ln := range lines[l.from+2 : l.to] {
				out = append(out, blockRows(ln, blk, rows))
			}
			out = append(out, "  }")
		}
		next = l.to + 1
	}
	for _, ln := range lines[next:] {
		out = append(out, blockDecl(ln, blk))
	}
	return strings.Join(out, "\n")
}

// blockDecl returns ln, the declaration of a block-private array of blk
// as the lane's own array of rows.
func blockDecl(ln string, blk map[string]bool) string {
	m := wideArray.FindStringSubmatch(ln)
	if m == nil || !blk[m[1]] {
		return ln
	}
	n := wideSizeOf.FindStringSubmatch(ln)[1]
	return fmt.Sprintf("  gs_real %s[%s / GS_WSTRIDE];  // block-private: %s components, a block of consecutive ones a lane (wideblock.go)", m[1], n, n)
}

// blockRows returns a blocked loop's line ln with each access of a
// block-private array of blk at the loop's own component its row gs_row,
// and each at a rotation its neighbour's entry GS_WNB, of rows rows.
func blockRows(ln string, blk map[string]bool, rows string) string {
	return rewriteIndexed(ln, blk, func(name string, m []string, _, _ int) (string, bool) {
		if m == nil {
			panic("kernelgen: a block-private array's access not blocked: " + ln)
		}
		if m[1] == "" {
			return name + "[gs_row]", true
		}
		k, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[2])
		return fmt.Sprintf("GS_WNB(%s, gs_row, %d, %s)", name, blockShift(k, n), rows), true
	})
}

// rewriteIndexed returns ln with each access of an array of names, the
// array's name and its index at from…end (m: wideBlockIndex's
// submatches of the index, nil where it is of another form, end then
// the name's end), replaced by what f returns for it where f says so
// (true); ln itself where f replaces none.
func rewriteIndexed(ln string, names map[string]bool, f func(name string, m []string, from, end int) (string, bool)) string {
	var sb strings.Builder
	last := 0
	forIdents(ln, func(from, to int) {
		name := ln[from:to]
		if !names[name] || from < last {
			return
		}
		m := wideBlockIndex.FindStringSubmatch(ln[to:])
		end := to
		if m != nil {
			end += len(m[0])
		}
		r, ok := f(name, m, from, end)
		if !ok {
			return
		}
		sb.WriteString(ln[last:from] + r)
		last = end
	})
	if last == 0 {
		return ln
	}
	sb.WriteString(ln[last:])
	return sb.String()
}

// ownArrays returns the arrays of the function's code that no lane reads
// at another lane's component: privateSets' cyclic and block-private
// arrays together (emit's test of what may be recomputed).
func (w *wideEmitter) ownArrays(code string) map[string]bool {
	cyc, blk := privateSets(code, w.e.src.wideBlocked)
	w.blocked = blk
	own := map[string]bool{}
	for name := range cyc {
		own[name] = true
	}
	for name := range blk {
		own[name] = true
	}
	return own
}

// mayRecompute reports whether array r may be recomputed where it is
// read (emit; own: ownArrays): where it is lane-private itself or reads
// no lane-private array (which its reads at other components would then
// read at other components too), and, blocked, where it does not read a
// block-private array: kept, a block-private array read at its
// neighbours (Lorenz-96's stage inputs) takes a shuffle at a block's
// end, where recomputed it would read each of its operands there.
func (w *wideEmitter) mayRecompute(r wideRemat, own map[string]bool) bool {
	return (own[r.name] || !readsAny(r.expr, own)) && !readsAny(r.expr, w.blocked)
}

// privatizeAll moves the function's lane-private arrays out of the
// scratch: the cyclic ones into the lane's rows (privatize, whose rows
// of gs_p it returns), then, with Config.WideBlocked, the block-private
// ones into arrays of their own, their loops blocked (blockLoops).
func (w *wideEmitter) privatizeAll(code string) (string, int) {
	cyc, blk := privateSets(code, w.e.src.wideBlocked)
	code, rows := privatize(code, cyc, w.e.src.wideRows)
	windows := w.e.src.wideBlocked && !w.e.src.wideRolled && !w.e.src.wideWindowsCyclic
	if len(blk) > 0 {
		w.e.src.helper(wideBlockHelper)
		code = dedupSyncs(shadowShared(cacheInputs(blockLoops(code, blk)), windows))
	}
	if windows {
		code = blockWindows(code)
		if strings.Contains(code, "GS_WNB") {
			w.e.src.helper(wideBlockHelper)
		}
	}
	return code, rows
}

// wideBlockedHead matches the head of a blocked loop (blockLoops) and
// captures its components.
var wideBlockedHead = regexp.MustCompile(`^  for \(int gs_row = 0; gs_row < \((\d+) / GS_WSTRIDE\); gs_row\+\+\) \{$`)

// wideInputRead matches a read of a per-trajectory input at a blocked
// loop's component or at a rotation of it: its offset, and the
// rotation's k and n.
var wideInputRead = regexp.MustCompile(`gs_a\[(?:(\d+) \+ (?:\(?gs_c\)?|\(GS_WROT\(gs_c, 0, (\d+), (\d+)\)\))|GS_WROT\(gs_c, (\d+), (\d+), (\d+)\))\]`)

// inputRead returns the offset K, and for a rotation its k and n (else
// 0, 0), of a read wideInputRead matched (m its submatches).
func inputRead(m []string) (off, k, n int) {
	if m[4] != "" {
		off, _ = strconv.Atoi(m[4])
		k, _ = strconv.Atoi(m[5])
		n, _ = strconv.Atoi(m[6])
		return off, k, n
	}
	off, _ = strconv.Atoi(m[1])
	if m[2] != "" {
		k, _ = strconv.Atoi(m[2])
		n, _ = strconv.Atoi(m[3])
	}
	return off, k, n
}

// cacheInputs returns code with the blocked loops' reads of a run of
// per-trajectory inputs (gs_a[K + c] or a rotation of it, the state y and FSAL's k1 of an
// explicit method's trial, read by each stage) taken from the lane's own
// copy of its block of them, gs_inK, loaded once before the first such
// loop, and their neighbours by GS_WNB: in the blocked split the lanes'
// reads of shared memory at components R apart fall on the same banks,
// once where each stage read them. The same values: the inputs are not
// written in the function (it keeps the reads in place where it writes
// an output between the first and the last of them: Control's inputs
// lie in the trial's outputs).
func cacheInputs(code string) string {
	lines := strings.Split(code, "\n")
	type run struct {
		first, last, n int
	}
	runs := map[int]*run{} // by offset K
	var order []int
	bad := map[int]bool{}
	forBlockedLines(lines, func(i, n int) {
		for _, m := range wideInputRead.FindAllStringSubmatch(lines[i], -1) {
			k, rk, rn := inputRead(m)
			if rn != 0 {
				if s := blockShift(rk, rn); rn != n || s > n/wideLanes || -s > n/wideLanes {
					bad[k] = true
				}
			}
			r := runs[k]
			if r == nil {
				r = &run{first: i, n: n}
				runs[k] = r
				order = append(order, k)
			}
			if r.n != n {
				bad[k] = true
			}
			r.last = i
		}
	})
	for _, k := range order {
		r := runs[k]
		for _, ln := range lines[r.first : r.last+1] {
			if strings.Contains(ln, "gs_o[") {
				bad[k] = true
			}
		}
	}
	inputs := map[int]bool{}
	for _, k := range order {
		if !bad[k] {
			inputs[k] = true
		}
	}
	if len(inputs) == 0 {
		return code
	}
	forBlockedLines(lines, func(i, n int) {
		lines[i] = wideInputRead.ReplaceAllStringFunc(lines[i], func(s string) string {
			k, rk, rn := inputRead(wideInputRead.FindStringSubmatch(s))
			if !inputs[k] {
				return s
			}
			if rn == 0 {
				return fmt.Sprintf("gs_in%d[gs_row]", k)
			}
			return fmt.Sprintf("GS_WNB(gs_in%d, gs_row, %d, (%d / GS_WSTRIDE))", k, blockShift(rk, rn), n)
		})
	})
	// The loads, before the first blocked loop that reads each run
	// ("#pragma unroll" before its head).
	loads := map[int][]string{}
	for _, k := range order {
		if !inputs[k] {
			continue
		}
		r := runs[k]
		at := r.first
		for !wideBlockedHead.MatchString(lines[at]) {
			at--
		}
		at-- // its "#pragma unroll"
		rows := fmt.Sprintf("(%d / GS_WSTRIDE)", r.n)
		loads[at] = append(loads[at],
			fmt.Sprintf("  gs_real gs_in%d[%d / GS_WSTRIDE];  // the lane's block of inputs %d … %d (wideblock.go)", k, r.n, k, k+r.n-1),
			"#pragma unroll",
			fmt.Sprintf("  for (int gs_row = 0; gs_row < %s; gs_row++) gs_in%d[gs_row] = gs_a[%d + gs_lane * %s + gs_row];", rows, k, k, rows))
	}
	out := make([]string, 0, len(lines)+3*len(inputs))
	for i, ln := range lines {
		out = append(out, loads[i]...)
		out = append(out, ln)
	}
	return strings.Join(out, "\n")
}

// shadowShared returns code with a lane's own copy (gs_bNAME: registers)
// of its block of each array of the scratch that blocked loops write and
// read but that stays in shared memory, because other loops read it at
// other components (a reverse step's stage inputs, read by its window
// loops; the trial's last stages, read by the error norm): the blocked
// loop that writes it (its only writer, at the loop's own components)
// writes the copy too, and the blocked loops' reads at their own
// components or rotations by at most n/32 read the copy (GS_WNB), where
// on shared memory the lanes' reads R components apart would fall on the
// same banks. With windows, the window loops that blockWindows will run
// backwards count as blocked readers (it rewrites their reads). Other
// loops read the shared array as before: the same values.
func shadowShared(code string, windows bool) string {
	lines := strings.Split(code, "\n")
	size := map[string]int{}
	declAt := map[string]int{}
	for i, ln := range lines {
		if m := wideArray.FindStringSubmatch(ln); m != nil {
			if s := wideSizeOf.FindStringSubmatch(ln); s != nil {
				n, _ := strconv.Atoi(s[1])
				size[m[1]], declAt[m[1]] = n, i
			}
		}
	}
	if len(size) == 0 {
		return code
	}
	inBlocked := make([]int, len(lines)) // the blocked loop's components, 0 outside
	forBlockedLines(lines, func(i, n int) { inBlocked[i] = n })
	// The window loops that blockWindows runs backwards (with windows)
	// read the copy too, at their components' rotations (its K and n by
	// line).
	type win struct{ rev, n int }
	inWindow := make([]win, len(lines))
	for _, x := range wideWindows(lines) {
		if !windows {
			break
		}
		if rev, n := windowOrient(lines, x); rev >= 0 && !windowBanned(lines, x) {
			for i := x.reps + 3; i < x.end; i++ {
				inWindow[i] = win{rev, n}
			}
		}
	}
	// A candidate is written only by blocked loops of its size at their
	// own component, and read by one at least.
	stored, read, bad := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, ln := range lines {
		forIdents(ln, func(from, to int) {
			name := ln[from:to]
			n, ok := size[name]
			if !ok || declAt[name] == i {
				return
			}
			rest := ln[to:]
			if x := inWindow[i]; x.n == n {
				if m := wideReversedRead.FindStringSubmatch(ln[from:]); m != nil && strings.HasPrefix(ln[from:], m[0]) && m[1] == name && (m[4] == "" || m[4] == strconv.Itoa(n)) {
					k, _ := strconv.Atoi(m[2] + m[5])
					if m[3] != "" {
						r, _ := strconv.Atoi(m[3])
						k += r
					}
					if sh := blockShift(((k-x.rev)%n+n)%n, n); sh <= n/wideLanes && -sh <= n/wideLanes {
						if !stored[name] {
							bad[name] = true // a read before the store
						}
						read[name] = true
						return
					}
				}
			}
			m := wideBlockIndex.FindStringSubmatch(rest)
			store := m != nil && strings.HasPrefix(rest[len(m[0]):], " = ") && strings.TrimSpace(ln[:from]) == ""
			if !store {
				// Any other store (a lane-0 gather's, a copy's) keeps it.
				if j := strings.Index(rest, "]"); j >= 0 && strings.HasPrefix(rest, "[") && strings.HasPrefix(rest[j+1:], " = ") {
					bad[name] = true
				}
			}
			switch {
			case inBlocked[i] != n || m == nil:
				if store {
					bad[name] = true
				}
			case store:
				if m[1] != "" {
					bad[name] = true
				}
				stored[name] = true
			case !stored[name]:
				bad[name] = true // a read before the store
			default:
				if m[1] != "" {
					k, _ := strconv.Atoi(m[1])
					rn, _ := strconv.Atoi(m[2])
					if s := blockShift(k, rn); rn != n || s > n/wideLanes || -s > n/wideLanes {
						return
					}
				}
				read[name] = true
			}
		})
	}
	shadow := map[string]bool{}
	for name := range size {
		if stored[name] && read[name] && !bad[name] {
			shadow[name] = true
		}
	}
	if len(shadow) == 0 {
		return code
	}
	out := make([]string, 0, len(lines)+len(shadow))
	for i, ln := range lines {
		if m := wideArray.FindStringSubmatch(ln); m != nil && shadow[m[1]] && declAt[m[1]] == i {
			out = append(out, ln, fmt.Sprintf("  gs_real gs_b%s[%d / GS_WSTRIDE];  // %s's block of the lane (wideblock.go's shadowShared)", m[1], size[m[1]], m[1]))
			continue
		}
		if inBlocked[i] == 0 {
			out = append(out, ln)
			continue
		}
		n := inBlocked[i]
		out = append(out, rewriteIndexed(ln, shadow, func(name string, m []string, from, end int) (string, bool) {
			switch {
			case m == nil:
				return "", false
			case strings.HasPrefix(ln[end:], " = ") && strings.TrimSpace(ln[:from]) == "":
				return ln[from:end] + " = gs_b" + name + "[gs_row]", true
			case m[1] == "":
				return "gs_b" + name + "[gs_row]", true
			}
			k, _ := strconv.Atoi(m[1])
			rn, _ := strconv.Atoi(m[2])
			s := blockShift(k, rn)
			if rn != n || s > n/wideLanes || -s > n/wideLanes {
				return "", false
			}
			return fmt.Sprintf("GS_WNB(gs_b%s, gs_row, %d, (%d / GS_WSTRIDE))", name, s, n), true
		}))
	}
	return strings.Join(out, "\n")
}

// wideNoMemory matches a line of a wide function that touches no memory
// another lane may read or write: a comment, a constant, an array's
// declaration (in the scratch, the lane's own or block-private).
var wideNoMemory = regexp.MustCompile(`^  (//.*|const gs_real v\d+ = \(gs_real\)[-+0-9.eE]+;.*|gs_real\* const \w+ = gs_[wp] \+ [^;]*;.*|gs_real \w+\[[^\]]*\];.*|\(void\)gs_lane;)$`)

// dedupSyncs returns code without the __syncwarp()s that follow another
// with nothing between them but lines that touch no memory
// (wideNoMemory): a loop's closing barrier and the next loop's opening
// one, where the blocked split's loops between them left nothing (a
// barrier right after a barrier orders nothing more).
func dedupSyncs(code string) string {
	lines := strings.Split(code, "\n")
	out := make([]string, 0, len(lines))
	synced := false
	for _, ln := range lines {
		switch {
		case ln == "  GS_SYNCWARP();":
			if synced {
				continue
			}
			synced = true
		case !wideNoMemory.MatchString(ln):
			synced = false
		}
		out = append(out, ln)
	}
	return strings.Join(out, "\n")
}

// forBlockedLines calls f with each line i of a blocked loop of lines
// (the lines between a wideBlockedHead and its closing brace) and the
// loop's components n.
func forBlockedLines(lines []string, f func(i, n int)) {
	for i := 0; i < len(lines); i++ {
		m := wideBlockedHead.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		for i++; i < len(lines) && lines[i] != "  }"; i++ {
			f(i, n)
		}
	}
}

// Window loops blocked (session 49). A window loop (wide.go's loop: a
// field VJP's carried cotangents, each carried value a function of the
// last w repetitions' body values) runs, by default, repetition r on lane
// r mod S, recomputing repetitions r − w … r − 1 from the carried
// operands' first values: w + 1 repetitions a component. Blocked, lane l
// runs a block of R consecutive repetitions in order, from the first
// values w repetitions before its block: R + w repetitions for R
// components. Each repetition's values are the same operations on the
// same operands (the carried operands' values at a repetition depend on
// the last w repetitions only, which both forms run before it), so the
// same bits. The block follows the components the repetitions touch: a
// loop whose repetition r reads its arrays' neighbours at component
// K − r (Lorenz-96's reverse steps run the components backwards,
// GS_WROT((K - gs_c), 0, k, n)) gives lane l the repetitions whose
// components K − r lie in the lane's block of the n components
// (l·R … l·R + R − 1, R = n / S), run from the block's last component
// down; otherwise lane l runs repetitions l·R … l·R + R − 1 (R =
// ⌈N / S⌉ of the loop's N repetitions).
//
// Backwards, the reads of an array at a rotation of K − r or at K' − r
// come from the lane's block where one is kept in registers (a shadowed
// array's gs_bNAME, shadowShared, or the inputs' gs_inK, cacheInputs) by
// GS_WNBF: the step's row R − 1 − k, the next lane's rows from R on; past
// the neighbours' blocks (R < w + 2) the shared entry. Then every lane
// runs every step (a shuffle is the whole group's): a step out of the
// loop's range computes repetition 0's values, unused, and only the own
// repetition's stores and the carried updates are guarded.
//
// The loop's sums (gs_wsum_set of a term plus the partial sum, the
// window's own repetition only) keep the warp's cyclic order: the
// blocked loop stores each repetition's term into an array of the
// scratch (gs_tNAME), or where the term is an entry of an array (no
// value of the loop) a loop after it reads it again, and that loop adds
// each lane's cyclic components' terms to its partial sums in the
// default's order (the same adds of the same values: gs_wide_sums then
// as before). A carried value taken out of the loop (the last
// repetition's) comes from the lane that ran the last repetition. A
// window loop that touches the lanes' own rows (a cyclic private array,
// gs_po) or other lanes' values, or whose sums take another form, stays
// cyclic, and so does the rolled form (Config.WideRolled).

// wideWindowHead matches the head of a window loop (wide.go's loop, the
// repetitions unrolled) and captures its repetitions.
var wideWindowHead = regexp.MustCompile(`^  for \(int gs_c0 = gs_lane; gs_c0 < (\d+); gs_c0 \+= GS_WSTRIDE\) \{$`)

// wideWindowReps matches the head of a window's unrolled repetitions and
// captures the window.
var wideWindowReps = regexp.MustCompile(`^  for \(int gs_k = (\d+); gs_k >= 0; gs_k--\) \{$`)

// wideReversedRot matches a rotation of a reversed component K − r
// (Lorenz-96's reverse steps' neighbours) and captures K and n.
var wideReversedRot = regexp.MustCompile(`GS_WROT\(\((\d+) - gs_c\), \d+, \d+, (\d+)\)`)

// wideSumTerm matches a window's own statement that adds a term to a
// sum's partial sums: the value, the term, the partial sums (term
// first) or the partial sums and the term (partial sums first).
var wideSumTerm = regexp.MustCompile(`^    const gs_real (gs_u\d+) = \((?:(.*) \+ gs_wsum_get\((\w+), gs_c\)|gs_wsum_get\((\w+), gs_c\) \+ (.*))\);(  //.*)?$`)

// wideWindow is a window loop of a function's lines: its head's line
// (after the "#pragma unroll 1"), the repetitions' head, the own
// repetition's "if" and its end, the loop's last line, its repetitions
// and window.
type wideWindow struct {
	head, reps, own, ownEnd, end, n, w int
}

// wideWindows returns the window loops of lines in the unrolled form.
func wideWindows(lines []string) []wideWindow {
	var out []wideWindow
	for i := 1; i < len(lines); i++ {
		m := wideWindowHead.FindStringSubmatch(lines[i])
		if m == nil || lines[i-1] != "#pragma unroll 1" {
			continue
		}
		x := wideWindow{head: i, reps: -1, own: -1, ownEnd: -1, end: -1}
		x.n, _ = strconv.Atoi(m[1])
		for j := i + 1; j+1 < len(lines); j++ {
			if r := wideWindowReps.FindStringSubmatch(lines[j]); r != nil && x.reps < 0 {
				x.reps = j
				x.w, _ = strconv.Atoi(r[1])
				continue
			}
			if lines[j] == "    if (gs_c == gs_c0) {" && x.own < 0 {
				x.own = j
				continue
			}
			if lines[j] == "    }" && x.own >= 0 && x.ownEnd < 0 {
				x.ownEnd = j
				continue
			}
			if lines[j] == "  }" && lines[j+1] == "  }" {
				x.end = j + 1
				break
			}
		}
		if x.reps < 0 || x.own < 0 || x.ownEnd < 0 || x.end < 0 {
			continue
		}
		if lines[x.reps-1] != "#pragma unroll" || lines[x.reps+1] != "    const int gs_c = gs_c0 - gs_k;" || lines[x.reps+2] != "    if (gs_c < 0) continue;" {
			continue
		}
		out = append(out, x)
		i = x.end
	}
	return out
}

// wideWindowBan lists what keeps a window loop cyclic: the lanes' own
// rows (cyclic private arrays, gs_po) and values of other lanes.
var wideWindowBan = []string{"GS_WSTRIDE", "gs_p[", "gs_p +", "gs_po", "gs_row", "gs_wide_", "__shfl", "gs_lane", "for (", "break"}

// blockWindows returns code with its window loops blocked where they can
// be (see above).
func blockWindows(code string) string {
	lines := strings.Split(code, "\n")
	wins := wideWindows(lines)
	if len(wins) == 0 {
		return code
	}
	out := make([]string, 0, len(lines)+8*len(wins))
	next := 0
	for _, x := range wins {
		blocked, decls, after, ok := blockWindow(lines, x)
		if !ok || x.end+1 >= len(lines) || lines[x.end+1] != "  GS_SYNCWARP();" {
			continue
		}
		// What follows the loop's closing barrier: the sums' finishing
		// lines and the carried values taken out, each of these from the
		// lane of the last repetition (else the loop stays cyclic).
		tail, taken := x.end+2, 0
		for ; tail < len(lines); tail++ {
			ln := lines[tail]
			if m := wideTakenOut.FindStringSubmatch(ln); m != nil && after.carried[m[1]] {
				taken++
				continue
			}
			if !strings.HasPrefix(ln, "  gs_r") || !strings.Contains(ln, "gs_wide_sums(") {
				break
			}
		}
		if taken != len(after.carried) {
			continue
		}
		// The terms' arrays are declared before the barrier that opens
		// the loop (allocate: a loop that writes an array starts with a
		// __syncwarp()): right after the last line before the loop that
		// is not a barrier.
		at := x.head - 1
		for at > next && (lines[at-1] == "  GS_SYNCWARP();" || lines[at-1] == "#pragma unroll 1") {
			at--
		}
		out = append(out, lines[next:at]...)
		out = append(out, decls...)
		out = append(out, lines[at:x.head-1]...)
		out = append(out, blocked...)
		// The loop's closing barrier, then the terms' sums in the
		// cyclic order, then what follows (the sums' finishing lines and
		// the carried values taken out, from their lanes).
		out = append(out, lines[x.end+1])
		out = append(out, after.sums...)
		for _, ln := range lines[x.end+2 : tail] {
			if m := wideTakenOut.FindStringSubmatch(ln); m != nil {
				ln = fmt.Sprintf("  %s = gs_wide_from(%s, %s);", m[1], m[1], after.lastLane)
			}
			out = append(out, ln)
		}
		next = tail
	}
	out = append(out, lines[next:]...)
	return strings.Join(out, "\n")
}

// wideLoopValue matches a loop's value or carried operand in an
// expression.
var wideLoopValue = regexp.MustCompile(`\bgs_[ur]\w+`)

// wideShadowDecl matches the declaration of a shadowed array's block
// (shadowShared) and captures the array and its components.
var wideShadowDecl = regexp.MustCompile(`^  gs_real gs_b(gs_\w+)\[(\d+) / GS_WSTRIDE\];`)

// wideReversedRead matches a window's read of an array at a reversed
// component, a rotation of K − r (its K, k and n) or K − r itself.
var wideReversedRead = regexp.MustCompile(`\b(gs_\w+)\[(?:GS_WROT\(\((\d+) - gs_c\), 0, (\d+), (\d+)\)|(\d+) - gs_c)\]`)

// wideInputDecl matches the declaration of a lane's block of inputs
// (cacheInputs) and captures its offset and components.
var wideInputDecl = regexp.MustCompile(`^  gs_real gs_in(\d+)\[(\d+) / GS_WSTRIDE\];`)

// wideReversedInput matches a window's read of an input at a reversed
// component: a rotation of K − r (its K, offset, k and n), or X − r.
var wideReversedInput = regexp.MustCompile(`gs_a\[(?:GS_WROT\(\((\d+) - gs_c\), (\d+), (\d+), (\d+)\)|(\d+) - gs_c)\]`)

// wideTakenOut matches a window's carried value taken out of the loop
// from the lane of its last repetition, and captures its name.
var wideTakenOut = regexp.MustCompile(`^  (gs_r\w+) = gs_wide_from\(gs_r\w+, \d+ % GS_WSTRIDE\);$`)

// wideWindowAfter is what follows a blocked window loop: the terms' sums
// in the cyclic order, the carried operands and the lane of the last
// repetition.
type wideWindowAfter struct {
	sums     []string
	carried  map[string]bool
	lastLane string
}

// windowBanned reports whether window loop x of lines stays cyclic for
// what its repetitions touch (wideWindowBan).
func windowBanned(lines []string, x wideWindow) bool {
	for i, ln := range lines[x.reps+3 : x.end-1] {
		if x.reps+3+i == x.own {
			continue
		}
		for _, b := range append(wideWindowBan, "gs_c0") {
			if strings.Contains(ln, b) {
				return true
			}
		}
	}
	return false
}

// windowOrient returns K and n where window loop x of lines runs
// backwards, its repetition r reading a rotation of component K − r of n
// components (n a multiple of 32, K − (N − 1) >= 0 and K < n for its N
// repetitions), else −1 and 0.
func windowOrient(lines []string, x wideWindow) (rev, n int) {
	for _, ln := range lines[x.head+1 : x.end] {
		if m := wideReversedRot.FindStringSubmatch(ln); m != nil {
			k, _ := strconv.Atoi(m[1])
			d, _ := strconv.Atoi(m[2])
			if d%wideLanes == 0 && k < d && k-x.n+1 >= 0 {
				return k, d
			}
			return -1, 0
		}
	}
	return -1, 0
}

// blockWindow returns window loop x of lines blocked (the lines from its
// "#pragma unroll 1" to its end), its terms' arrays' declarations and
// what follows it, and false where it stays cyclic.
func blockWindow(lines []string, x wideWindow) (blocked, decls []string, after wideWindowAfter, ok bool) {
	body := lines[x.head+1 : x.end]
	if windowBanned(lines, x) {
		return nil, nil, after, false
	}
	// The carried operands' resets (their first values, the lines
	// before the repetitions' head): the declarations before the loop
	// gave them the same values, and a lane runs one block.
	after.carried = map[string]bool{}
	for _, ln := range lines[x.head+1 : x.reps-1] {
		f := strings.Fields(ln)
		if len(f) < 3 || f[1] != "=" || !strings.HasPrefix(f[0], "gs_r") {
			return nil, nil, after, false
		}
		after.carried[f[0]] = true
	}
	// The orientation: backwards where a rotation reads component K − r.
	n := x.n
	rows := fmt.Sprintf("((%d + GS_WSTRIDE - 1) / GS_WSTRIDE)", n)
	rev, d := windowOrient(lines, x)
	if rev >= 0 {
		rows = fmt.Sprintf("(%d / GS_WSTRIDE)", d)
	}
	base := "gs_lane * " + rows
	after.lastLane = fmt.Sprintf("%d / %s", n-1, rows)
	if rev >= 0 {
		// Repetition r is component K − r: lane l runs the repetitions
		// of components l·R + R − 1 down to l·R.
		base = fmt.Sprintf("%d - gs_lane * %s - (%s - 1)", rev, rows, rows)
		after.lastLane = fmt.Sprintf("(%d - %d) / %s", rev, n-1, rows)
	}
	// The own repetition's sums: each term into gs_tNAME, added to the
	// partial sums after the loop, in the cyclic order.
	var own []string
	sets := map[string]bool{}
	for _, ln := range lines[x.own+1 : x.ownEnd] {
		m := wideSumTerm.FindStringSubmatch(ln)
		if m == nil {
			own = append(own, ln)
			continue
		}
		u, t, p, sum := m[1], m[2], m[3], ""
		name := "gs_t" + strings.TrimPrefix(strings.TrimSuffix(p+m[4], "_p"), "gs_")
		if p != "" {
			sum = fmt.Sprintf("    const gs_real %s = (%s[gs_c] + gs_wsum_get(%s, gs_c));%s", u, name, p, m[6])
		} else {
			t, p = m[5], m[4]
			sum = fmt.Sprintf("    const gs_real %s = (gs_wsum_get(%s, gs_c) + %s[gs_c]);%s", u, p, name, m[6])
		}
		// The term's sum must be the value's only use.
		uses := 0
		for _, b := range body {
			forIdents(b, func(from, to int) {
				if b[from:to] == u {
					uses++
				}
			})
		}
		set := fmt.Sprintf("    gs_wsum_set(%s, gs_c, %s);", p, u)
		if uses != 2 || !slices.Contains(lines[x.own+1:x.ownEnd], set) {
			return nil, nil, after, false
		}
		sets[set] = true
		if wideLoopValue.MatchString(t) {
			// A term of the repetition's values goes through the
			// scratch; one of arrays and scalars (Lorenz-96's: an
			// array's entry) is read again by the sum's loop.
			decls = append(decls, fmt.Sprintf("  gs_real* const %s = gs_w + %s;  // [%d] %s's terms, summed in the cyclic order (wideblock.go's blockWindows)", name, offMark(name), n, p))
			own = append(own, fmt.Sprintf("    %s[gs_c] = %s;%s", name, t, m[6]))
		} else {
			sum = strings.Replace(sum, name+"[gs_c]", t, 1)
		}
		after.sums = append(after.sums, "#pragma unroll 1",
			fmt.Sprintf("  for (int gs_c = gs_lane; gs_c < %d; gs_c += GS_WSTRIDE) {", n), sum, set, "  }")
	}
	own = slices.DeleteFunc(own, func(ln string) bool { return sets[ln] })
	for _, ln := range own {
		if strings.Contains(ln, "gs_wsum_") {
			return nil, nil, after, false // a sum of another form
		}
	}
	pre := slices.Clone(lines[x.reps+3 : x.own])
	updates := slices.Clone(lines[x.ownEnd+1 : x.end-1])
	regs := 0
	if rev >= 0 {
		// The shadowed arrays' entries (shadowShared: the lane's block of
		// an array that blocked loops write) from the lane's registers:
		// repetition gs_k's component is row R − 1 − gs_k of the lane's
		// block (rows from R on: the next lane's).
		shadows := map[string]int{}
		for _, ln := range lines {
			if m := wideShadowDecl.FindStringSubmatch(ln); m != nil {
				shadows[m[1]], _ = strconv.Atoi(m[2])
			}
		}
		// And the per-trajectory inputs' block (cacheInputs: gs_inK, the
		// state y) where no output is written since its load.
		inputs := map[int]int{}
		for i, ln := range lines[:x.end] {
			if m := wideInputDecl.FindStringSubmatch(ln); m != nil {
				k, _ := strconv.Atoi(m[1])
				inputs[k], _ = strconv.Atoi(m[2])
				for _, l := range lines[i:x.end] {
					if strings.Contains(l, "gs_o[") {
						delete(inputs, k)
						break
					}
				}
			}
		}
		input := func(a string) string {
			m := wideReversedInput.FindStringSubmatch(a)
			k, off := 0, 0
			if m[1] != "" {
				k, _ = strconv.Atoi(m[1])
				off, _ = strconv.Atoi(m[2])
				r, _ := strconv.Atoi(m[3])
				if m[4] != strconv.Itoa(d) {
					return a
				}
				k += r
			} else {
				// gs_a[X - gs_c]: input off + (X − off − r), of the
				// cached run that holds it.
				at, _ := strconv.Atoi(m[5])
				off = -1
				for o, n := range inputs {
					if n == d && at-o-(x.n-1) >= 0 && at-o < d && (off < 0 || o < off) {
						off = o
					}
				}
				if off < 0 {
					return a
				}
				k = at - off
			}
			if inputs[off] != d {
				return a
			}
			sh := blockShift(((k-rev)%d+d)%d, d)
			if sh > d/wideLanes || -sh > d/wideLanes {
				return a
			}
			regs++
			return fmt.Sprintf("GS_WNBF(gs_in%d, gs_row, %d, %s, %s)", off, sh, rows, a)
		}
		for _, part := range [][]string{pre, own, updates} {
			for i, ln := range part {
				part[i] = wideReversedInput.ReplaceAllStringFunc(ln, input)
				ln = part[i]
				part[i] = wideReversedRead.ReplaceAllStringFunc(ln, func(a string) string {
					m := wideReversedRead.FindStringSubmatch(a)
					if shadows[m[1]] != d || m[4] != "" && m[4] != strconv.Itoa(d) {
						return a
					}
					k, _ := strconv.Atoi(m[2] + m[5])
					if m[3] != "" {
						r, _ := strconv.Atoi(m[3])
						k += r
					}
					sh := blockShift(((k-rev)%d+d)%d, d)
					if sh > d/wideLanes || -sh > d/wideLanes {
						return a
					}
					regs++
					return fmt.Sprintf("GS_WNBF(gs_b%s, gs_row, %d, %s, %s)", m[1], sh, rows, a)
				})
			}
		}
	}
	blocked = append(blocked,
		fmt.Sprintf("  // a window loop blocked: %d repetitions, %s a lane, from %d before its block (wideblock.go's blockWindows)", n, rows, x.w),
		"#pragma unroll",
		fmt.Sprintf("  for (int gs_k = -%d; gs_k < %s; gs_k++) {", x.w, rows))
	if regs == 0 {
		blocked = append(blocked,
			fmt.Sprintf("    const int gs_c = %s + gs_k;", base),
			fmt.Sprintf("    if (gs_c < 0 || gs_c >= %d) continue;", n))
		blocked = append(blocked, pre...)
		blocked = append(blocked, "    if (gs_k >= 0) {")
		blocked = append(blocked, own...)
		blocked = append(blocked, "    }")
		blocked = append(blocked, updates...)
		blocked = append(blocked, "  }")
		return blocked, decls, after, true
	}
	// With shuffles every lane runs every repetition (a repetition out
	// of the loop's range at repetition 0, its values unused), and the
	// own repetition's values too (the shuffles are the whole group's);
	// only its stores are the own repetition's.
	var vals, stores []string
	for _, ln := range own {
		if strings.HasPrefix(ln, "    const gs_real ") {
			vals = append(vals, ln)
		} else {
			stores = append(stores, ln)
		}
	}
	for _, st := range stores {
		if i := strings.Index(st, "["); i < 0 || touchesAny(vals, map[string]bool{strings.TrimSpace(st[:i]): true}) {
			return nil, nil, after, false // a value read after a store
		}
	}
	blocked = append(blocked,
		fmt.Sprintf("    const int gs_row = %s - 1 - gs_k;", rows),
		fmt.Sprintf("    const bool gs_ok = %s + gs_k >= 0 && %s + gs_k < %d;", base, base, n),
		fmt.Sprintf("    const int gs_c = gs_ok ? %s + gs_k : 0;", base))
	blocked = append(blocked, pre...)
	blocked = append(blocked, vals...)
	blocked = append(blocked, "    if (gs_ok && gs_k >= 0) {")
	blocked = append(blocked, stores...)
	blocked = append(blocked, "    }", "    if (gs_ok) {")
	blocked = append(blocked, updates...)
	blocked = append(blocked, "    }", "  }")
	return blocked, decls, after, true
}
