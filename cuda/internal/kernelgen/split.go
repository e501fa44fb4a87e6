package kernelgen

import (
	"fmt"
	"regexp"
	"strings"
)

// Split kernels: NVRTC inlines every program's function (GS_FUNC) into
// the kernel, and optimises the whole as one function, in time that grows
// faster than its size. A large kernel's step programs are instead
// compiled as functions of their own (GS_STEP: __noinline__ on the
// device), called from the kernel: the same arithmetic, in the same
// order (the device compiles without contraction, --fmad=false), so the
// same results bit for bit.

// emittedFunc is a function of a program in a Source: its name, its
// qualifier macro (GS_FUNC, GS_CALLEE, ...), the start of its first line
// (sig: "GS_FUNC NAME_out NAME(", as emitter.signature writes it, or a
// wide function's "GS_FUNC void NAME("; "" if not found), the part that
// holds it and the part's bytes.
type emittedFunc struct {
	name, qual, sig string
	part, size      int
}

// signature returns the start of the function's first line.
func (f emittedFunc) signature() string { return f.sig }

// funcSignature returns the start of the first line of the function
// called name in code, up to its opening parenthesis, if that line starts
// with qual; else "".
func funcSignature(code, name, qual string) string {
	at := strings.Index(code, " "+name+"(")
	if at < 0 {
		return ""
	}
	sig := code[strings.LastIndexByte(code[:at], '\n')+1 : at+len(name)+2]
	if !strings.HasPrefix(sig, qual+" ") {
		return ""
	}
	return sig
}

// asStep returns the function's code p with its qualifier GS_STEP.
func (f emittedFunc) asStep(p string) string {
	return strings.Replace(p, f.signature(), "GS_STEP"+strings.TrimPrefix(f.signature(), f.qual), 1)
}

// addFunc appends the code of a program's function called name, with
// qualifier qual, to the unit.
func (s *Source) addFunc(name, qual, code string) {
	s.emitted = append(s.emitted, emittedFunc{name: name, qual: qual, sig: funcSignature(code, name, qual), part: len(s.parts), size: len(code)})
	s.parts = append(s.parts, code)
}

// FuncBytes returns the bytes of the unit's functions of programs (Func,
// AccFunc and their callees): its generated code, without the prelude,
// the helpers and the code added (Add), such as the kernel templates.
func (s *Source) FuncBytes() int {
	n := 0
	for _, f := range s.emitted {
		n += f.size
	}
	return n
}

// splitFuncMin is the size (bytes) from which a program's function of a
// split kernel is a GS_STEP function; smaller ones stay inlined, as a
// call costs more than it saves on them: a controller, an initial step
// or a loss (6-19 kB on the built-in problems), the reverse steps of a
// small network's field, whose VJP is a callee of its own (17-29 kB up
// to 2-128-128-2), and an explicit method's forward steps (11-30 kB).
const splitFuncMin = 32 << 10

// split returns the functions that String qualifies GS_STEP instead of
// GS_FUNC, by part: none unless splitFrom is positive and the unit's
// functions of programs total at least splitFrom bytes (FuncBytes);
// then the GS_FUNC functions of at least splitFuncMin bytes.
func (s *Source) split() map[int]emittedFunc {
	if s.splitFrom <= 0 || s.FuncBytes() < s.splitFrom {
		return nil
	}
	var m map[int]emittedFunc
	for _, f := range s.emitted {
		if f.qual != "GS_FUNC" || f.size < splitFuncMin || f.sig == "" {
			continue
		}
		if m == nil {
			m = make(map[int]emittedFunc)
		}
		m[f.part] = f
	}
	return m
}

// splitHelper defines GS_STEP, written after the prelude of a split unit.
// On the host it is static and not inlined either, so that the host
// engines compile the structure the device runs. A definition before
// the unit's text takes precedence (bench/ptxas_profile.py's variant
// inlined: "#define GS_STEP __device__", the unsplit kernel).
const splitHelper = `// GS_STEP qualifies the function of a large program (a step) of a
// large kernel: compiled once, on its own, and called, not inlined.
#ifndef GS_STEP
#ifdef GS_CUDA
#define GS_STEP __device__ __noinline__
#else
#define GS_STEP static __attribute__((noinline))
#endif
#endif
`

// Units of a split kernel: with Config.SplitUnits, a split kernel is
// compiled as several translation units, linked into one module: the
// kernel's unit, which declares the GS_STEP functions it calls, and one
// unit per GS_STEP function, which defines it. Each unit holds the
// prelude, the helpers and the functions of programs that its own code
// calls (their callees included), with internal linkage (static), so
// that two units may hold the same callee; only the GS_STEP functions
// have external linkage. Their text, names and arithmetic are those of
// the one-unit split kernel (Source.String): the results are the same
// bit for bit, and the units compile concurrently.

// Unit is one translation unit of a kernel compiled in parts
// (Source.Units, KernelUnits).
type Unit struct {
	// Name names the unit in compiler messages: KernelUnitName for the
	// unit that holds the kernel, else the name of the GS_STEP function
	// the unit defines.
	Name string
	// Text is the unit's CUDA C++ source, also valid host C++.
	Text string
}

// KernelUnitName is the Name of a kernel's own unit.
const KernelUnitName = "kernel"

// unitsHelper is written first in every unit of a kernel compiled in
// parts (before the prelude, whose #ifndef guards it overrides): on the
// device the functions of programs have internal linkage, as on the host,
// and GS_STEP functions external linkage (defined in one unit, declared
// in the others) and are not inlined.
const unitsHelper = `// A unit of a kernel compiled in parts: only GS_STEP functions are
// shared between units. GS_UNITS leaves out the kernel's launch bounds:
// every unit is compiled with the register cap they would give
// (Config.UnitRegs, --maxrregcount), which the compiler ignores for a
// kernel with launch bounds.
#define GS_UNITS 1
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GS_FUNC static __device__
#define GS_CALLEE static __device__ __noinline__
#define GS_CALLEE_INLINE static __device__ __forceinline__
#define GS_STEP __device__ __noinline__
#else
#define GS_STEP __attribute__((noinline))
#endif
`

// Registers of a kernel compiled in parts. The driver's linker refuses a
// kernel that calls a function of another unit compiled to use more
// registers than the kernel may (session 42, Pollution's wide Rodas5P
// gradient kernel on an H100: "entry function 'gs_engine' with max
// regcount of 128 calls function '…_wide_0…' with regcount of 254",
// CUDA_ERROR_INVALID_SOURCE): compiled as one unit, ptxas compiles the
// kernel's callees under the cap its launch bounds give it; compiled in
// parts, each unit knows only its own. Every unit of a kernel in parts
// is therefore compiled with one cap (Config.UnitRegs, NVRTC's
// --maxrregcount), the kernel's launch bounds left out of its unit
// (GS_UNITS; the compiler ignores --maxrregcount for a kernel with launch
// bounds), so that the kernel and its callees have the same cap, the one
// the bounds give the one-unit kernel.

// Registers of the devices of compute capability 7.0 to 9.0 (the Volta
// to Hopper tuning guides): 64 Ki 32-bit registers a multiprocessor, in
// four quarters of 16 Ki, each running its own warps; a warp's registers
// allocated in units of 256 (8 a thread); at most 255 a thread.
const (
	quarterRegs   = 16 << 10
	smQuarters    = 4
	regUnitThread = 8
	maxThreadRegs = 255
)

// BoundsRegs returns the registers per thread that let minBlocks blocks
// of threads threads run at once on a multiprocessor (the cap ptxas
// derives from __launch_bounds__(threads, minBlocks)): the most, a
// multiple of 8 and at most 255, with which each quarter of the
// register file holds its share of the blocks' warps (rounded up). It
// is 0 (no cap) for minBlocks below 1. Blocks of two warps: 1-4 blocks
// 255, 5-6 168, 7-8 128 (on an H100, session 42, BenchmarkGPUWideRegs: 6
// blocks' bounds gave 168 registers, 7 blocks' 128, where a count of the
// whole register file, not its quarters, would give 144).
func BoundsRegs(threads, minBlocks int) int {
	if minBlocks < 1 {
		return 0
	}
	warps := (max(threads, 1) + LaneWidth - 1) / LaneWidth * minBlocks
	perQuarter := (warps + smQuarters - 1) / smQuarters
	regs := quarterRegs / (perQuarter * LaneWidth) / regUnitThread * regUnitThread
	return max(regUnitThread, min(regs, maxThreadRegs))
}

// UnitRegs returns the register cap of every unit of kernel v compiled
// in parts (NVRTC's --maxrregcount; 0: none), the cap its launch bounds
// give the kernel compiled as one unit: a wide kernel's
// (WideMinBlocks: blocks of WideBlockWarps warps), a thread kernel's
// (ThreadMinBlocks: blocks of ThreadBoundsBlock threads), none for a
// kernel without bounds. Lanes and tile kernels, which have bounds,
// never split.
func (v Config) UnitRegs() int {
	if v.Lanes {
		return 0
	}
	if !v.Wide {
		return BoundsRegs(ThreadBoundsBlock, int(v.ThreadMinBlocks))
	}
	return BoundsRegs(v.WideBlockWarps()*LaneWidth, v.WideMinBlocks)
}

// gsIdent matches the generated C names (functions, their result
// structs, helpers).
var gsIdent = regexp.MustCompile(`gs_[A-Za-z0-9_]+`)

// Units returns the unit's translation units: one, String(), unless the
// unit splits (Config.SplitFrom) and splitUnits is set; then the kernel's
// unit first and one unit per GS_STEP function, in order of emission.
// It returns an error if a GS_STEP function's first line is not in the
// form the emitters write ("QUAL TYPE NAME(...) {").
func (s *Source) Units() ([]Unit, error) {
	split := s.split()
	if split == nil || !s.splitUnits {
		return []Unit{{Name: KernelUnitName, Text: s.String()}}, nil
	}
	byName := make(map[string]int, len(s.emitted))
	isFunc := make(map[int]bool, len(s.emitted))
	for _, f := range s.emitted {
		byName[f.name] = f.part
		isFunc[f.part] = true
	}
	// refs[k]: the parts of functions that part k names, itself aside.
	refs := make([][]int, len(s.parts))
	for k, p := range s.parts {
		seen := map[int]bool{k: true}
		for _, id := range gsIdent.FindAllString(p, -1) {
			j, ok := byName[id]
			if !ok {
				j, ok = byName[strings.TrimSuffix(id, "_out")]
			}
			if ok && !seen[j] {
				seen[j] = true
				refs[k] = append(refs[k], j)
			}
		}
	}
	decls := make(map[int]string, len(split))
	for k, f := range split {
		d, err := declaration(s.parts[k], f)
		if err != nil {
			return nil, err
		}
		decls[k] = d
	}
	head := s.header(unitsHelper)
	// unit writes the parts that roots need: a GS_STEP function other
	// than own is declared, every other function defined, in the order
	// of emission (callees before callers).
	unit := func(roots []int, own int) string {
		need := map[int]bool{}
		var walk func(k int)
		walk = func(k int) {
			if need[k] {
				return
			}
			need[k] = true
			if _, ok := split[k]; ok && k != own {
				return // declared: its callees are its unit's
			}
			for _, j := range refs[k] {
				walk(j)
			}
		}
		for _, r := range roots {
			walk(r)
		}
		var sb strings.Builder
		sb.WriteString(head)
		for k, p := range s.parts {
			if !need[k] {
				continue
			}
			sb.WriteString("\n")
			f, isStep := split[k]
			switch {
			case isStep && k != own:
				sb.WriteString(decls[k])
			case isStep:
				sb.WriteString(f.asStep(p))
			default:
				sb.WriteString(p)
			}
		}
		return sb.String()
	}
	var roots []int
	for k := range s.parts {
		if !isFunc[k] {
			roots = append(roots, k) // the kernel templates and adapters
		}
	}
	units := []Unit{{Name: KernelUnitName, Text: unit(roots, -1)}}
	for _, f := range s.emitted {
		if _, ok := split[f.part]; ok {
			units = append(units, Unit{Name: f.name, Text: unit([]int{f.part}, f.part)})
		}
	}
	return units, nil
}

// declaration returns what a unit that calls GS_STEP function f (of part
// p) but does not define it holds of p: the text before its first line
// (its comment and result struct), then that line as a GS_STEP
// declaration.
func declaration(p string, f emittedFunc) (string, error) {
	sig := f.signature()
	at := strings.Index(p, sig)
	end := -1
	if at >= 0 {
		end = strings.Index(p[at:], ") {\n")
	}
	if at < 0 || end < 0 || (at > 0 && p[at-1] != '\n') {
		return "", fmt.Errorf("cuda: split function %s: no first line %q… in its code", f.name, sig)
	}
	line := p[at : at+end+1]
	return p[:at] + "GS_STEP" + strings.TrimPrefix(line, f.qual) + ";\n", nil
}
