package kernelgen

// Split kernels: NVRTC inlines every program's function (GS_FUNC) into
// the kernel, and optimises the whole as one function, in time that grows
// faster than its size. A large kernel's step programs are instead
// compiled as functions of their own (GS_STEP: __noinline__ on the
// device), called from the kernel: the same arithmetic, in the same
// order (the device compiles without contraction, --fmad=false), so the
// same results bit for bit.

// emittedFunc is a function of a program in a Source: its name, its
// qualifier macro (GS_FUNC, GS_CALLEE, ...), the part that holds it and
// the part's bytes.
type emittedFunc struct {
	name, qual string
	part, size int
}

// signature returns the start of the function's first line, as signature
// writes it.
func (f emittedFunc) signature() string { return f.qual + " " + outType(f.name) + " " + f.name + "(" }

// addFunc appends the code of a program's function called name, with
// qualifier qual, to the unit.
func (s *Source) addFunc(name, qual, code string) {
	s.emitted = append(s.emitted, emittedFunc{name: name, qual: qual, part: len(s.parts), size: len(code)})
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
		if f.qual != "GS_FUNC" || f.size < splitFuncMin {
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
