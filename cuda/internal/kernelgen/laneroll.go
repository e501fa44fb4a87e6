package kernelgen

import (
	"fmt"
	"strconv"
	"strings"
)

// Rolled lanes code (Source.laneRoll). In lanes mode a dense layer's
// forward Dots are a few vector statements, but its reverse is one group
// of statements per row i of W: ȳ_i taken from its lane (GS_STAGED), then
// per 32 columns the weights' cotangents ȳ_i·x (a vector Mul and its
// accumulator add) and the inputs' cotangents' running sums s += W_i·ȳ_i
// (a vector Mul and Add). A 2-128-128-2 network's VJP holds some 2,300
// such statements, and the device compiler's time grows faster than
// their number (11.5 s for the gradient kernel on an H100).
//
// The groups repeat with only integer literals changing, and those in
// arithmetic progressions (weight and accumulator offsets, the staged
// element): rolled, each run of them becomes one loop over gs_c whose
// body is the first group with its literals as base + stride·gs_c. This
// is done on the function's emitted lines, after staging (body), so
// every statement of the loop is one of the unrolled code, in the same
// order, with the same operands: the results are the same bit for bit.
//
// A run is found as reroll.go's are: from a line s, a body of P lines
// (P ≤ rerollMaxBody) repeated n ≥ rerollMinRun times, every repetition
// the same text but for its names (u<k> vectors, v<k> values, a<k>
// parameters, t<k> tuples) and decimal literals, each literal an
// arithmetic progression over the repetitions, each name read one of
//
//   - the same name, defined before the run (invariant);
//   - the value of an earlier line of the same repetition (body);
//   - the value of a line of the previous repetition, the first
//     repetition's defined before the run (carried: a running sum),
//     from a line at or after the reader's own, read by the line that
//     defines its next value elementwise (GS_EL) only.
//
// A carried line's value, and a line's value read after the run (only
// its last repetition's may be), live in a variable declared before the
// loop (gs_k<loop>_<line>) that the line updates in place; every other
// name is the first repetition's, declared in the loop's block. Only the
// lines of the lanes code (a vector's statement, a replicated value, an
// accumulator add, a staging) are rolled; the rest stay as they are.

// LaneRollMinShared is the number of shared parameters from which a
// lanes-mode kernel (not tile mode; Config.Unrolled never) rolls its
// repeated lanes statements. Measured (MLP fields 2-w-w-2, tanh, Tsit5,
// the gradient kernel with its record at n = 4096, lanes layout as
// chosen for an H100): unrolled, the device's first Grad took 1.79 s
// (w = 32, 1,218 weights), 3.50 s (64, 4,482) and 11.61 s (128, 17,154),
// nearly all of it compiling; the sources, unrolled → rolled, are 182 →
// 160 kB, 255 → 179 kB and 516 → 243 kB, and g++ -O0 compiles them as host
// C++ in 4.6 → 3.1 s, 5.3 → 4.0 s and 13.3 → 5.0 s. On an H100
// (session 41, TestGPULanesRolled, medians of 7 alternated warm Grads)
// the rolled kernel of 2-64-64-2 ran 1.833 ms against the unrolled one's
// 1.419 (29% slower), of 2-128-128-2 15.93 against 17.37 (8% faster);
// compiled cold (TestGPUColdStart) the rolled 2-128-128-2 took 2.31 s
// to its first result against 8.4–11.6 s unrolled. The bound lies
// between the two networks: 2-64-64-2 keeps its faster unrolled kernel
// (3.3–3.5 s cold, within the 5 s of issue 26's networks), and below it
// the neural benchmark's 2-32-32-2 too.
const LaneRollMinShared = 8192

// rollLine is a line of a function's code, split for rolling.
type rollLine struct {
	raw     string      // the line as emitted
	toks    []rollToken // its code (no comment), tokenised
	comment string      // its comment, with the "//"
	key     string      // its code with names and literals blanked
	ok      bool        // a line that may be rolled
	def     int         // the token of the name it defines, or -1
	vec     bool        // it defines a vector (GS_VEC)
}

// rollToken is a piece of a line's code: text, a name or a decimal
// literal (num).
type rollToken struct {
	s    string
	name bool
	num  bool
	val  int
}

// rollPrefixes are the lines that may be rolled (after their indent).
var rollPrefixes = []string{"GS_VEC(u", "const gs_real v", "GS_ACC_LANES(", "if (gs_on && GS_LANE0) GS_ACC_", "GS_SYNCWARP();", "GS_STAGE("}

// isRollName reports whether identifier id is a generated name: u, v, a
// or t and digits.
func isRollName(id string) bool {
	if len(id) < 2 || !strings.ContainsRune("uvat", rune(id[0])) {
		return false
	}
	for _, c := range id[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// tokenize splits code into tokens.
func tokenize(code string) []rollToken {
	var toks []rollToken
	text := func(s string) {
		if n := len(toks); n > 0 && !toks[n-1].name && !toks[n-1].num {
			toks[n-1].s += s
			return
		}
		toks = append(toks, rollToken{s: s})
	}
	for i := 0; i < len(code); {
		c := code[i]
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(code) && (code[j] == '_' || code[j] >= 'a' && code[j] <= 'z' || code[j] >= 'A' && code[j] <= 'Z' || code[j] >= '0' && code[j] <= '9') {
				j++
			}
			if id := code[i:j]; isRollName(id) {
				toks = append(toks, rollToken{s: id, name: true})
			} else {
				text(id)
			}
			i = j
		case c >= '0' && c <= '9':
			j := i + 1
			for j < len(code) {
				d := code[j]
				if d == '_' || d == '.' || d >= 'a' && d <= 'z' || d >= 'A' && d <= 'Z' || d >= '0' && d <= '9' {
					j++
					continue
				}
				// An exponent's sign: 1e-06.
				if (d == '+' || d == '-') && (code[j-1] == 'e' || code[j-1] == 'E') && !strings.HasPrefix(code[i:], "0x") {
					j++
					continue
				}
				break
			}
			lit := code[i:j]
			if v, err := strconv.Atoi(lit); err == nil && (lit == "0" || lit[0] != '0') {
				toks = append(toks, rollToken{s: lit, num: true, val: v})
			} else {
				text(lit)
			}
			i = j
		default:
			text(code[i : i+1])
			i++
		}
	}
	return toks
}

// splitRollLine splits a line of code.
func splitRollLine(raw string) rollLine {
	l := rollLine{raw: raw, def: -1}
	code := raw
	if k := strings.Index(raw, "//"); k >= 0 {
		code, l.comment = raw[:k], raw[k:]
	}
	l.toks = tokenize(code)
	trimmed := strings.TrimLeft(code, " ")
	for _, p := range rollPrefixes {
		if strings.HasPrefix(trimmed, p) && !strings.ContainsAny(trimmed, "\n{}") || strings.HasPrefix(trimmed, p) && (p == "GS_ACC_LANES(" || p == "if (gs_on && GS_LANE0) GS_ACC_") {
			l.ok = true
			break
		}
	}
	switch {
	case strings.HasPrefix(trimmed, "GS_VEC(u"):
		l.vec = true
		for k, t := range l.toks {
			if t.name {
				l.def = k
				break
			}
		}
		// GS_VEC(uA); GS_LANES(w) GS_EL(uA) = …: its own name's
		// second mention is the same definition.
	case strings.HasPrefix(trimmed, "const gs_real v"):
		for k, t := range l.toks {
			if t.name {
				l.def = k
				break
			}
		}
	}
	var sb strings.Builder
	for k, t := range l.toks {
		switch {
		case t.name && k == l.def:
			sb.WriteString("@D")
		case t.name:
			sb.WriteString("@N")
		case t.num:
			sb.WriteString("@I")
		default:
			sb.WriteString(t.s)
		}
	}
	l.key = sb.String()
	return l
}

// rollArgKind is how a name of a run's line is read.
type rollArgKind uint8

const (
	rollInv rollArgKind = iota
	rollBody
	rollCarry
	rollSelf // the line's own definition (or its repeated mention)
)

// rollSlot is a name or literal of a run's body line, over the
// repetitions.
type rollSlot struct {
	kind         rollArgKind
	k            int // body line (rollBody, rollCarry)
	base, stride int // a literal's progression
}

// rollRun is a run of a function's lines: n repetitions of p lines from
// line start.
type rollRun struct {
	start, p, n int
	slots       [][]rollSlot // by body line and token
	kept        []bool       // body lines whose values live across repetitions
}

// saved returns the statements run r saves: n·p less its body, its head
// and two per kept line (its declaration and initial copy).
func (r *rollRun) saved() int {
	cost := r.p + 2
	for _, k := range r.kept {
		if k {
			cost += 2
		}
	}
	return r.n*r.p - cost
}

// roller rolls the runs of one function's lines.
type roller struct {
	lines []rollLine
	// defAt is the line that defines each name.
	defAt map[string]int
	// uses lists, by name, the lines that read it.
	uses map[string][]int
	// vecs marks the kept variables that are vectors.
	vecs map[string]bool
}

// rollLanes returns code with its runs of repeated lanes statements as
// loops (see rolled lanes code above).
func rollLanes(code string) string {
	raw := strings.Split(code, "\n")
	r := &roller{lines: make([]rollLine, len(raw)), defAt: map[string]int{}, uses: map[string][]int{}, vecs: map[string]bool{}}
	for i, s := range raw {
		r.lines[i] = splitRollLine(s)
		l := &r.lines[i]
		for k, t := range l.toks {
			if !t.name {
				continue
			}
			if k == l.def {
				r.defAt[t.s] = i
			} else if l.vec && t.s == l.toks[l.def].s {
				continue
			} else {
				r.uses[t.s] = append(r.uses[t.s], i)
			}
		}
	}
	var out strings.Builder
	rename := map[string]string{}
	nloop := 0
	for s := 0; s < len(r.lines); {
		var best *rollRun
		if r.lines[s].ok {
			for p := 1; p <= rerollMaxBody; p++ {
				if run := r.try(s, p); run != nil && run.saved() > 0 && (best == nil || run.saved() > best.saved()) {
					best = run
				}
			}
		}
		if best == nil {
			out.WriteString(r.text(s, rename))
			if s < len(r.lines)-1 {
				out.WriteByte('\n')
			}
			s++
			continue
		}
		r.emit(&out, best, nloop, rename)
		nloop++
		s += best.n * best.p
	}
	return out.String()
}

// text returns line i with the renamed names replaced.
func (r *roller) text(i int, rename map[string]string) string {
	l := &r.lines[i]
	changed := false
	for _, t := range l.toks {
		if t.name && rename[t.s] != "" {
			changed = true
			break
		}
	}
	if !changed {
		return l.raw
	}
	var sb strings.Builder
	for _, t := range l.toks {
		if t.name && rename[t.s] != "" {
			sb.WriteString(rename[t.s])
		} else {
			sb.WriteString(t.s)
		}
	}
	sb.WriteString(l.comment)
	return sb.String()
}

// at returns the line of repetition c's body line k.
func (run *rollRun) at(c, k int) int { return run.start + c*run.p + k }

// try returns the run from line s with a body of p lines, or nil.
func (r *roller) try(s, p int) *rollRun {
	if s+p*rerollMinRun > len(r.lines) {
		return nil
	}
	run := &rollRun{start: s, p: p, n: 1, slots: make([][]rollSlot, p)}
	for k := 0; k < p; k++ {
		l := &r.lines[s+k]
		if !l.ok || l.key != r.lines[s+p+k].key {
			return nil
		}
	}
	def := func(name string) int {
		if i, ok := r.defAt[name]; ok {
			return i
		}
		return -1
	}
	for c := 1; run.at(c, p-1) < len(r.lines); c++ {
		ok := true
		for k := 0; k < p && ok; k++ {
			l0, l := &r.lines[s+k], &r.lines[run.at(c, k)]
			if !l.ok || l.key != l0.key {
				ok = false
				break
			}
			if c == 1 {
				run.slots[k] = make([]rollSlot, len(l0.toks))
			}
			for j, t0 := range l0.toks {
				t := l.toks[j]
				sl := &run.slots[k][j]
				switch {
				case t0.num && c == 1:
					sl.base, sl.stride = t0.val, t.val-t0.val
				case t0.num:
					ok = t.val == sl.base+sl.stride*c
				case !t0.name:
				case j == l0.def || l0.vec && t0.s == l0.toks[l0.def].s:
					sl.kind = rollSelf
				case c == 1:
					d0, d1 := def(t0.s), def(t.s)
					switch {
					case d0 >= s && d0 < s+k && d1 == d0+p:
						sl.kind, sl.k = rollBody, d0-s
					case d0 < s && d1 >= s+k && d1 < s+p:
						sl.kind, sl.k = rollCarry, d1-s
					case t.s == t0.s && d0 < s:
						sl.kind = rollInv
					default:
						ok = false
					}
				default:
					d := def(t.s)
					switch sl.kind {
					case rollBody:
						ok = d == run.at(c, sl.k)
					case rollCarry:
						ok = d == run.at(c-1, sl.k)
					case rollInv:
						ok = t.s == t0.s
					}
				}
				if !ok {
					break
				}
			}
		}
		if !ok {
			break
		}
		run.n = c + 1
	}
	if run.n < rerollMinRun {
		return nil
	}
	return r.check(run)
}

// check decides the run's kept lines: carried ones and those whose
// last repetition's value is read after the run. It returns nil where a
// value is read after the run otherwise, a carried value is read where
// updating it in place would change what is read, or a kept vector's
// width varies.
func (r *roller) check(run *rollRun) *rollRun {
	run.kept = make([]bool, run.p)
	end := run.at(run.n, 0)
	for k := 0; k < run.p; k++ {
		for j, sl := range run.slots[k] {
			if sl.kind != rollCarry || !r.lines[run.start+k].toks[j].name {
				continue
			}
			if sl.k < k {
				return nil // read after this repetition updated it
			}
			if sl.k == k {
				l := &r.lines[run.start+k]
				if l.vec && (j == 0 || !strings.HasSuffix(l.toks[j-1].s, "GS_EL(")) {
					return nil // an update in place reads it elementwise only
				}
			}
			run.kept[sl.k] = true
		}
	}
	for c := 0; c < run.n; c++ {
		for k := 0; k < run.p; k++ {
			l := &r.lines[run.at(c, k)]
			if l.def < 0 {
				continue
			}
			for _, u := range r.uses[l.toks[l.def].s] {
				if u < end {
					continue
				}
				if c != run.n-1 {
					return nil
				}
				run.kept[k] = true
			}
		}
	}
	for k, kept := range run.kept {
		l := &r.lines[run.start+k]
		if !kept {
			continue
		}
		if l.def < 0 {
			return nil
		}
		if l.vec {
			w, ok := r.width(run, k)
			if !ok || w <= 0 {
				return nil
			}
		}
	}
	// A kept value carried from a vector before the run.
	for k := 0; k < run.p; k++ {
		for j, sl := range run.slots[k] {
			if sl.kind == rollCarry && r.lines[run.start+k].toks[j].name && r.lines[run.start+k].toks[j].s[0] == 'u' && !r.lines[run.start+sl.k].vec {
				return nil
			}
		}
	}
	return run
}

// width returns the lanes (GS_LANES) of vector line k of the run, if the
// same in every repetition.
func (r *roller) width(run *rollRun, k int) (int, bool) {
	l := &r.lines[run.start+k]
	for j, t := range l.toks {
		if t.num && j > 0 && strings.HasSuffix(l.toks[j-1].s, "GS_LANES(") {
			sl := run.slots[k][j]
			return sl.base, sl.stride == 0
		}
	}
	return 0, false
}

// keptName names the variable of kept line k of loop idx.
func keptName(idx, k int) string { return fmt.Sprintf("gs_k%d_%d", idx, k) }

// emit writes run as loop idx and records the names read after it that
// are now its kept variables in rename.
func (r *roller) emit(w *strings.Builder, run *rollRun, idx int, rename map[string]string) {
	fmt.Fprintf(w, "  // rolled: %d repetitions of %d statements\n", run.n, run.p)
	// The kept variables, the carried ones with their first values.
	init := make([]string, run.p)
	for k := 0; k < run.p; k++ {
		for j, sl := range run.slots[k] {
			if sl.kind == rollCarry {
				init[sl.k] = r.lines[run.start+k].toks[j].s
			}
		}
	}
	for k, kept := range run.kept {
		if !kept {
			continue
		}
		name, l := keptName(idx, k), &r.lines[run.start+k]
		x0 := init[k]
		if x0 != "" && rename[x0] != "" {
			x0 = rename[x0]
		}
		switch {
		case l.vec && x0 == "":
			fmt.Fprintf(w, "  GS_VEC(%s);\n", name)
		case l.vec:
			wd, _ := r.width(run, k)
			el := x0
			if x0[0] == 'u' || r.vecs[x0] {
				el = "GS_EL(" + x0 + ")"
			}
			fmt.Fprintf(w, "  GS_VEC(%s); GS_LANES(%d) GS_EL(%s) = %s; GS_END\n", name, wd, name, el)
		case x0 == "":
			fmt.Fprintf(w, "  gs_real %s;\n", name)
		default:
			fmt.Fprintf(w, "  gs_real %s = %s;\n", name, x0)
		}
	}
	fmt.Fprintf(w, "%s {\n", loopHead(run.n))
	for k := 0; k < run.p; k++ {
		l := &r.lines[run.start+k]
		var sb strings.Builder
		for j, t := range l.toks {
			sl := run.slots[k][j]
			switch {
			case t.num && sl.stride != 0:
				fmt.Fprintf(&sb, "(%s)", affine(sl.base, sl.stride))
			case t.num || !t.name:
				sb.WriteString(t.s)
			case sl.kind == rollSelf && run.kept[k]:
				sb.WriteString(keptName(idx, k))
			case sl.kind == rollSelf:
				sb.WriteString(t.s)
			case sl.kind == rollBody && run.kept[sl.k]:
				sb.WriteString(keptName(idx, sl.k))
			case sl.kind == rollBody:
				sb.WriteString(r.lines[run.start+sl.k].toks[r.lines[run.start+sl.k].def].s)
			case sl.kind == rollCarry:
				sb.WriteString(keptName(idx, sl.k))
			default: // invariant
				if n := rename[t.s]; n != "" {
					sb.WriteString(n)
				} else {
					sb.WriteString(t.s)
				}
			}
		}
		code := sb.String()
		if run.kept[k] {
			// The kept variable is declared before the loop.
			trimmed := strings.TrimLeft(code, " ")
			if l.vec {
				decl := "GS_VEC(" + keptName(idx, k) + "); "
				trimmed = strings.TrimPrefix(trimmed, decl)
			} else {
				trimmed = strings.TrimPrefix(trimmed, "const gs_real ")
			}
			code = "  " + trimmed
		}
		w.WriteString("  " + strings.TrimRight(code, " ") + "\n")
	}
	w.WriteString("  }\n")
	last := run.n - 1
	for k, kept := range run.kept {
		if kept {
			l := &r.lines[run.at(last, k)]
			rename[l.toks[l.def].s] = keptName(idx, k)
		}
	}
	r.vecKept(idx, run)
}

// vecKept notes the run's kept vectors.
func (r *roller) vecKept(idx int, run *rollRun) {
	for k, kept := range run.kept {
		if kept && r.lines[run.start+k].vec {
			r.vecs[keptName(idx, k)] = true
		}
	}
}
