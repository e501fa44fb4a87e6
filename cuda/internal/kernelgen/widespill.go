package kernelgen

import (
	"fmt"
	"regexp"
	"strings"
)

// Replicated scalars in the warp's shared memory. A wide function's
// values outside its component loops (wideEmitter: the field's
// irregular code, the controller's and the stages' scalars) are computed
// by every lane alike: each is a register of every lane, the same bits
// 32 times. Where many are live at once they pass the compiler's 255
// registers and spill to local memory, a copy per lane: Pollution's
// Rodas5P reverse step (d = 20, its field irregular: 4,061 such values)
// keeps up to 183 float64 values live at once, from the step's replay to
// their uses in its reverse (its forward trial 75), and its gradient
// kernel ran at 255 registers with 37 million local-memory spill requests
// on an H100 (Nsight Compute, session 40).
//
// spillScalars keeps at most a budget of them in registers: walking the
// function's top-level lines in order, where more non-constant values
// are live than the budget, it takes out the one whose next read is the
// farthest (Belady's rule), until the budget holds. A value taken out is
// stored, where it is defined, into a slot of the warp's scratch of its
// own (gs_sv<ID>, one real, placed by allocate as a one-entry array), by
// every lane alike (the same bits at the same address), and its reads
// after the point where it was taken out read the slot (a broadcast: one
// load for the warp); reads before it keep the register. The slot's
// span starts at the last top-level __syncwarp() before the value's
// definition, so that the space it shares with an array that other
// lanes may still read is written only after them (the scratch's rule,
// allocate). The operations and their order do not change: the results
// are the same bit for bit, at the cost of one shared store per value
// taken out and a shared load per read past its point, in place of the
// spills' local-memory traffic (a copy per lane), and of a real of
// shared memory per slot live at once.

// DefaultWideScalars is Config.WideScalars's default (0): the most
// replicated float64 values of a wide function kept live in registers
// at once (spillScalars). A proposal, not yet measured on a device: it
// leaves Pollution's forward trial (75 values live at most) nearly as it
// was and cuts its reverse step's 183 to 64, about the registers
// (2 per value, with the addresses and the driver's state: about 150)
// that let a multiprocessor hold as many of its warps as its shared
// memory does (16 KB a warp: 14). Kernels whose functions keep fewer
// values live (Lorenz-96 with Tsit5, the Brusselator's component loops)
// are not changed.
const DefaultWideScalars = 64

// wideScalarsOf returns the budget of Config.WideScalars w: the default
// for 0, none (-1) for a negative w.
func wideScalarsOf(w int) int {
	switch {
	case w < 0:
		return -1
	case w == 0:
		return DefaultWideScalars
	}
	return w
}

// wideScalarDef matches the definition of a replicated value: its name
// and expression.
var wideScalarDef = regexp.MustCompile(`^  const gs_real (v\d+) = (.*);`)

// wideConstExpr matches a constant's expression, which takes no register
// of its own (an immediate or a constant-bank operand).
var wideConstExpr = regexp.MustCompile(`^\(gs_real\)[-+0-9.eE]+$`)

// wideValueRef matches a reference to a value.
var wideValueRef = regexp.MustCompile(`\bv\d+\b`)

// spillSlot is the name of value v's slot in the scratch.
func spillSlot(v string) string { return "gs_s" + v }

// spillScalars returns the wide function code with at most budget of
// its non-constant replicated values live in registers at once (see
// above), and the number of values it moved; where it moves none
// (budget < 0 moves none) it returns code itself, which emit's placement
// of it before then stands.
func spillScalars(code string, budget int) (string, int) {
	if budget < 0 {
		return code, 0
	}
	lines := strings.Split(code, "\n")
	type value struct {
		def   int   // the defining line
		reads []int // the lines that read it, ascending
		out   int   // the line at which it is taken out of registers; -1 never
		sync  int   // the last top-level __syncwarp() before def; -1 none
	}
	vals := map[string]*value{}
	var order []string
	depth, lastSync := 0, -1
	for i, ln := range lines {
		c, _, _ := strings.Cut(ln, "//") // the code, not its comment
		if depth == 1 {
			if strings.TrimSpace(c) == "GS_SYNCWARP();" {
				lastSync = i
			}
			if m := wideScalarDef.FindStringSubmatch(c); m != nil {
				if !wideConstExpr.MatchString(strings.TrimSpace(m[2])) {
					vals[m[1]] = &value{def: i, out: -1, sync: lastSync}
					order = append(order, m[1])
				}
				c = m[2]
			}
		}
		for _, r := range wideValueRef.FindAllString(c, -1) {
			if v := vals[r]; v != nil && v.def < i {
				if n := len(v.reads); n == 0 || v.reads[n-1] != i {
					v.reads = append(v.reads, i)
				}
			}
		}
		depth += strings.Count(c, "{") - strings.Count(c, "}")
	}
	// Belady's rule over the lines: defs enter, the last read leaves.
	enter := map[int][]string{}
	leave := map[int][]string{}
	for _, name := range order {
		v := vals[name]
		if len(v.reads) == 0 {
			continue
		}
		enter[v.def] = append(enter[v.def], name)
		last := v.reads[len(v.reads)-1]
		leave[last] = append(leave[last], name)
	}
	live := map[string]bool{}
	next := func(v *value, i int) int {
		for _, r := range v.reads { // reads are few; a scan is enough
			if r > i {
				return r
			}
		}
		return len(lines)
	}
	moved := 0
	for i := range lines {
		for _, name := range enter[i] {
			live[name] = true
		}
		for len(live) > budget {
			far, at := "", -1
			for name := range live {
				if n := next(vals[name], i); n > at || n == at && name < far {
					far, at = name, n
				}
			}
			delete(live, far)
			vals[far].out = i
			moved++
		}
		for _, name := range leave[i] {
			delete(live, name)
		}
	}
	if moved == 0 {
		return code, 0
	}
	// Rewrite: the slots' declarations after their __syncwarp() (or the
	// lane's declaration), the stores after the definitions, the reads
	// past the points.
	declAfter := map[int][]string{}
	storeAfter := map[int]string{}
	readsFrom := map[int][]string{} // line -> values read from their slots there
	for _, name := range order {
		v := vals[name]
		if v.out < 0 {
			continue
		}
		at := v.sync
		if at < 0 {
			at = laneLine(lines)
		}
		declAfter[at] = append(declAfter[at], name)
		storeAfter[v.def] = name
		for _, r := range v.reads {
			if r > v.out {
				readsFrom[r] = append(readsFrom[r], name)
			}
		}
	}
	var sb strings.Builder
	sb.Grow(len(code) + moved*spillLineBytes)
	for i, ln := range lines {
		if names := readsFrom[i]; len(names) > 0 {
			ln = readSlots(ln, names)
		}
		sb.WriteString(ln)
		if i < len(lines)-1 {
			sb.WriteByte('\n')
		}
		if name, ok := storeAfter[i]; ok {
			fmt.Fprintf(&sb, "  %s[0] = %s;  // %s out of registers (widespill.go)\n", spillSlot(name), name, name)
		}
		for _, name := range declAfter[i] {
			fmt.Fprintf(&sb, "  gs_real* const %s = gs_w + %s;  // [1]\n", spillSlot(name), offMark(spillSlot(name)))
		}
	}
	return sb.String(), moved
}

// spillLineBytes is about the bytes spillScalars adds for a value it
// moves, to size its output once: its slot's declaration and store (two
// lines of about 60 bytes) and a read or so of the slot (8 bytes longer
// than the value's name).
const spillLineBytes = 128

// laneLine returns the index of the line that declares a wide function's
// lane ("(void)gs_lane;"), after which its first declarations go.
func laneLine(lines []string) int {
	for i, ln := range lines {
		if strings.TrimSpace(ln) == "(void)gs_lane;" {
			return i
		}
	}
	panic("kernelgen: a wide function without its lane")
}

// readSlots returns line ln with each reference to a value of names in
// its code (not its comment) replaced by its slot's entry.
func readSlots(ln string, names []string) string {
	code, comment := ln, ""
	if k := strings.Index(ln, "//"); k >= 0 {
		code, comment = ln[:k], ln[k:]
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	code = wideValueRef.ReplaceAllStringFunc(code, func(r string) string {
		if set[r] {
			return spillSlot(r) + "[0]"
		}
		return r
	})
	return code + comment
}
