package kernelgen

import (
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gradsolve-go/gradsolve/cuda/internal/cname"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// prelude holds the helpers every generated translation unit starts with.
//
//go:embed prelude.cuh
var prelude string

// luShift is the template of ops.OpLUFactorShift, added to the sources
// that use it (Source.helper).
//
//go:embed lushift.cuh
var luShift string

// Prelude returns the prelude of generated code: qualifier macros, the
// gs_real type and the helper functions (gs_powi, gs_min, gs_lu_factor,
// ...) that the ops' C forms and the tuple ops use.
func Prelude() string { return prelude }

// Precision is the floating-point type of generated code.
type Precision uint8

const (
	Float64 Precision = iota // double, the default
	Float32                  // float: half the memory traffic, ~1e-7 relative rounding
)

// SourceSettings are the options of a Source. The zero value means the
// defaults.
type SourceSettings struct {
	Precision Precision // zero: Float64

	// InlineCallees, if positive, emits a called program of at most this
	// many values as a GS_CALLEE_INLINE function (inlined on the device)
	// instead of a GS_CALLEE one (kept a call): a small field costs less
	// inlined into every stage than called. Zero keeps every callee a call.
	InlineCallees int

	// Lanes emits every function for one warp per trajectory (see
	// lanes.go): each function reads gs_sh padded (entry j at j + j/32,
	// in shared memory on the device) and, if it accumulates, adds to the
	// warp's own gs_acc, padded alike; every lane of a warp must make the
	// same calls with the same arguments.
	Lanes bool

	// TileMode emits every function for tiles of eight trajectories per warp
	// (see tiles.go), dense layers as float64 tensor-core products: the
	// shared inputs as with Lanes, and every lane of a warp must make the
	// same calls. It implies Lanes and is float64 only; with Float32 it is
	// ignored.
	TileMode bool
}

// Source builds one CUDA C++ translation unit from programs: the prelude,
// then one device function per program (Func), kernels around them
// (MapKernel) and any code added (Add), in the order they were added.
// The text is deterministic: the same calls give the same source, so its
// hash is a sound cache key.
//
// # Calling convention
//
// The function of program p is
//
//	struct NAME_out { gs_real v[len(p.Outputs)]; };
//	GS_FUNC NAME_out NAME(const gs_real* GS_RESTRICT gs_sh, gs_real a0, gs_real a1, ...);
//
// with one scalar parameter a<k> per input k of p that is not shared, in
// input order, and the shared inputs read from gs_sh: the j-th shared
// input (in input order) is gs_sh[j]. Shared inputs (parameters common to
// the ensemble, network weights) thus stay in global memory, read through
// the cache, instead of being copied into every call; per-trajectory
// inputs and the returned outputs live in registers. Values are const
// locals named v<ID> after the program's values, each line commented with
// its IR, so a compiler message points back to an op; tuples (LU factors,
// solves) are local arrays t<ID>. (A loss's bound functions, bind.go,
// take pointers to the arrays their inputs are in instead, and store
// some outputs themselves.)
//
// A program called by another (a value of op Call, calling one of its
// Funcs) is emitted once, before its first caller, as its own GS_CALLEE
// function (noinline on the device), however many calls it has and
// however many callers: programs are deduplicated by pointer and by
// Program.Hash. A call passes the callee's non-shared inputs as scalars
// and, for its shared inputs, the caller's gs_sh (offset) where the
// arguments are consecutive shared inputs of the caller, the usual case of
// a field called with the step's parameters; otherwise a small local array
// holding them. The call's value is the returned struct, whose v[c] its
// Extracts read. SourceSettings.InlineCallees makes small callees
// GS_CALLEE_INLINE functions instead.
//
// A kernel's unit whose functions of programs are large (Config.SplitFrom,
// split.go) qualifies its large GS_FUNC functions GS_STEP instead: kept
// calls on the device, as GS_CALLEE functions are.
type Source struct {
	prec   Precision
	inline int
	Lanes  bool
	// Tile (with lanes) emits for tiles of eight trajectories per warp
	// (tiles.go).
	Tile bool
	// accShared makes the accumulating functions emitted while it is set
	// add to an accumulator other warps share (lanes mode: atomically,
	// unpadded) instead of the warp's own.
	accShared bool
	// Stage (lanes mode, the engine's kernels) takes vectors' elements
	// through the warp's staging row in shared memory (stage.go) rather
	// than by shuffles; stageTop holds the slots each emitted function
	// uses, itself and its callees.
	Stage    bool
	stageTop map[string]int
	Funcs    map[*tape.Program]string // emitted programs and their names
	hashes   map[string]string        // the same, by Program.Hash
	names    map[string]bool
	parts    []string
	// Defines are macro definitions written before the prelude (the
	// engine's tile reduction, GS_TILES, selects prelude code).
	Defines []string
	// outlined holds tile mode's out-of-line functions of libm ops, by
	// op and aux (tiles.go: outline).
	outlined map[string]string
	// helpers are templates written after the prelude, each once, by
	// the units that use them (helper).
	helpers []string
	// reroll (thread layout) emits runs of values that repeat per state
	// component as loops (reroll.go).
	reroll bool
	// laneRoll (lanes mode, not tile mode) emits runs of repeated lanes
	// statements, a dense layer's reverse row by row, as loops
	// (laneroll.go).
	laneRoll bool
	// wideShared keeps every array of the wide functions in the warp's
	// shared memory, none lane-private (Config.WideShared; wideprivate.go).
	wideShared bool
	// wideRows unrolls the wide functions' loops that touch lane-private
	// arrays over their rows (Config.WideRows; wideprivate.go).
	wideRows bool
	// wideTables reads every gather of one array's entries through an
	// index table, rotations included (Config.WideTables).
	wideTables bool
	// wideRolled keeps a window loop's repetitions a rolled loop
	// (Config.WideRolled).
	wideRolled bool
	// wideBlocked runs the wide functions' loops that it can in the
	// blocked element split (Config.WideBlocked; wideblock.go).
	wideBlocked bool
	// wideRecY reads a gradient's reverse steps' input y from the
	// record's row in global memory (Config.WideRecordY).
	wideRecY bool
	// wideOutPlace places the arrays that the wide functions return
	// whole at their outputs (Config.WideOutInPlace; outputsInPlace).
	wideOutPlace bool
	// wideWarps runs the wide functions on that many warps a trajectory
	// where above 1 (Config.WideTrajWarps: wideWarpsHelper in place of
	// wideHelper; the functions' code is the same).
	wideWarps int
	// wideProbe emits the plan's stability probe (ode.Plan.Probe) among
	// the wide functions (wideLayout.Probe; Config.Probe).
	wideProbe bool
	// wideWindowsCyclic keeps the window loops cyclic where wideBlocked
	// (Config.WideWindowsCyclic).
	wideWindowsCyclic bool
	// wideScalars is the most replicated values of a wide function live
	// in registers at once: Config.WideScalars (0 the default, negative
	// no limit; wideScalarsOf; widespill.go).
	wideScalars int
	// wideMinSplit is Config.WideMinSplit of the wide functions, resolved
	// (wideMinSplitOf; 0: every loop the reroll plan finds).
	wideMinSplit int
	// wideDenseLU keeps the wide functions' LU factors and solves dense
	// (Config.WideDenseLU; widelu.go's sparse factor).
	wideDenseLU bool
	// widePivots is Config.WidePivots of the wide functions' sparse
	// factors (widelu.go's hints).
	widePivots PivotSeq
	// emitted lists the functions of programs in the order of emission
	// (function, accFunction); splitFrom is Config.SplitFrom (split.go).
	emitted   []emittedFunc
	splitFrom int
	// splitUnits makes Units return a split unit's functions in units of
	// their own (Config.SplitUnits).
	splitUnits bool
}

// luLoopsFrom is the matrix dimension from which a source keeps the LU
// templates' loops as loops (GS_LU_ROLLED in prelude.cuh).
// Measured on the H100 host (docs/bench-history.md, session 32): HIRES's
// Rodas5P gradient kernel (d = 8) compiled 1.6× faster in NVRTC's front
// end and 2.6× in ptxas with them kept loops, spilling 232 bytes instead
// of 2,594; Pollution (d = 20) 1.8× and 1.7×; Lorenz's (d = 3) gained
// nothing, and smaller matrices keep their unrolled code.
const luLoopsFrom = 8

// luDim notes that the unit factors or solves with a d×d matrix.
func (s *Source) luDim(d int) {
	if d >= luLoopsFrom && !slices.Contains(s.Defines, "GS_LU_ROLLED 1") {
		s.Defines = append(s.Defines, "GS_LU_ROLLED 1")
	}
}

// helper adds the template code after the prelude, once.
func (s *Source) helper(code string) {
	for _, h := range s.helpers {
		if h == code {
			return
		}
	}
	s.helpers = append(s.helpers, code)
}

// NewSource starts a translation unit.
func NewSource(s *SourceSettings) *Source {
	src := &Source{Funcs: make(map[*tape.Program]string), hashes: make(map[string]string), names: make(map[string]bool), stageTop: make(map[string]int)}
	if s != nil {
		src.prec = s.Precision
		src.inline = s.InlineCallees
		src.Lanes = s.Lanes
		if s.TileMode && s.Precision == Float64 {
			src.Lanes, src.Tile = true, true
		}
	}
	return src
}

// Precision returns the unit's floating-point type.
func (s *Source) Precision() Precision { return s.prec }

// String returns the translation unit.
func (s *Source) String() string {
	var sb strings.Builder
	sb.WriteString(s.header(""))
	split := s.split()
	if split != nil {
		sb.WriteString("\n")
		sb.WriteString(splitHelper)
	}
	for k, p := range s.parts {
		sb.WriteString("\n")
		if f, ok := split[k]; ok {
			p = f.asStep(p)
		}
		sb.WriteString(p)
	}
	return sb.String()
}

// header returns what every translation unit of s starts with: the
// generated-code line, the defines, first (before the prelude, whose
// macros it may define) and the prelude and helpers.
func (s *Source) header(first string) string {
	var sb strings.Builder
	sb.WriteString("// Code generated by gradsolve's cuda package. DO NOT EDIT.\n")
	sb.WriteString(first)
	if s.prec == Float32 {
		sb.WriteString("#define GS_FLOAT32 1\n")
	}
	if s.Tile {
		sb.WriteString("#define GS_TILEMODE 1\n")
	}
	for _, d := range s.Defines {
		sb.WriteString("#define " + d + "\n")
	}
	if s.Stage {
		fmt.Fprintf(&sb, "#define GS_STAGE_LEN %d\n", LaneStageLen)
	}
	sb.WriteString(prelude)
	for _, h := range s.helpers {
		sb.WriteString("\n")
		sb.WriteString(h)
	}
	return sb.String()
}

// Add appends code (a kernel template, say) after what the unit holds.
func (s *Source) Add(code string) { s.parts = append(s.parts, code) }

// Func emits the device function of p (see the calling convention of
// Source), once: a second call with the same program returns the same
// name. It returns an error if p is not valid or holds an op without a
// C form.
func (s *Source) Func(p *tape.Program) (string, error) {
	return s.function(p, "GS_FUNC")
}

// outType returns the name of the struct that the function called name
// returns.
func outType(name string) string { return name + "_out" }

// function emits p with the given qualifier macro.
func (s *Source) function(p *tape.Program, qual string) (string, error) {
	if name, ok := s.Funcs[p]; ok {
		return name, nil
	}
	if err := p.Validate(); err != nil {
		return "", err
	}
	hash := p.Hash()
	if name, ok := s.hashes[hash]; ok {
		s.Funcs[p] = name
		return name, nil
	}
	name := s.newName(p.Name)
	e := &emitter{src: s, p: p, name: name}
	code, err := e.emit(qual)
	if err != nil {
		return "", err
	}
	s.Funcs[p] = name
	s.hashes[hash] = name
	s.addFunc(name, qual, code)
	return name, nil
}

// newName returns an unused C name for a function of a program called
// pname: gs_<pname>_<k>.
func (s *Source) newName(pname string) string {
	base := "gs_" + cname.Ident(pname)
	for k := 0; ; k++ {
		n := fmt.Sprintf("%s_%d", base, k)
		if !s.names[n] {
			s.names[n] = true
			return n
		}
	}
}

// MapKernel emits p's function and a kernel that evaluates p over an
// ensemble, one thread per trajectory, and returns the kernel's name:
//
//	GS_GLOBAL void NAME(long long n, const gs_real* in, const gs_real* sh, gs_real* out);
//
// Thread i < n reads the non-shared inputs step-major, input k (counting
// non-shared inputs only) of trajectory i at in[k*n+i], so a warp reads
// consecutive addresses; the shared inputs at sh[j] (as Func); and
// writes output m at out[m*n+i]. A summed output is written per
// trajectory too; the caller sums. Compiled as host C++ the kernel is a
// loop over i, so the same code runs under g++. In lanes mode
// (SourceSettings.Lanes) warp i runs trajectory i, in tile mode
// (SourceSettings.TileMode) trajectories 8i to 8i+7, and sh must hold the
// shared inputs padded (input j at j + j/32, as SharedPad).
func (s *Source) MapKernel(p *tape.Program) (string, error) {
	f, err := s.Func(p)
	if err != nil {
		return "", err
	}
	kname := "gs_map_" + strings.TrimPrefix(f, "gs_")
	var sb strings.Builder
	fmt.Fprintf(&sb, "// %s evaluates %s for trajectories 0 <= i < n.\n", kname, f)
	fmt.Fprintf(&sb, "GS_DEVICE void %s_body(long long i, long long n, const gs_real* GS_RESTRICT in, const gs_real* GS_RESTRICT sh, gs_real* GS_RESTRICT out) {\n", kname)
	// A lane past the end (tile mode's last tile) computes trajectory n-1
	// again and writes nothing.
	sb.WriteString("  const long long ii = i < n ? i : n - 1;\n")
	fmt.Fprintf(&sb, "  const %s r = %s(sh", outType(f), f)
	k := 0
	for _, in := range p.Inputs {
		if !in.Shared {
			fmt.Fprintf(&sb, ", in[%d * n + ii]", k)
			k++
		}
	}
	sb.WriteString(");\n")
	sb.WriteString("  if (i >= n) return;\n")
	for m := range p.Outputs {
		fmt.Fprintf(&sb, "  out[%d * n + i] = r.v[%d];\n", m, m)
	}
	sb.WriteString("}\n")
	fmt.Fprintf(&sb, "GS_GLOBAL void %s(long long n, const gs_real* GS_RESTRICT in, const gs_real* GS_RESTRICT sh, gs_real* GS_RESTRICT out) {\n", kname)
	sb.WriteString("#ifdef GS_CUDA\n")
	switch {
	case s.Tile:
		sb.WriteString("  const long long i = (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * 8 + ((threadIdx.x & 31) >> 2);\n")
		fmt.Fprintf(&sb, "  if ((i & ~7LL) < n) %s_body(i, n, in, sh, out);\n", kname)
	case s.Lanes:
		sb.WriteString("  const long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;\n")
		fmt.Fprintf(&sb, "  if (i < n) %s_body(i, n, in, sh, out);\n", kname)
	default:
		sb.WriteString("  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n")
		fmt.Fprintf(&sb, "  if (i < n) %s_body(i, n, in, sh, out);\n", kname)
	}
	sb.WriteString("#else\n")
	fmt.Fprintf(&sb, "  for (long long i = 0; i < n; i++) %s_body(i, n, in, sh, out);\n", kname)
	sb.WriteString("#endif\n}\n")
	s.parts = append(s.parts, sb.String())
	return kname, nil
}

// SharedPad returns sh padded as lanes-mode code reads it: entry j at
// j + j/32, zeros between.
func SharedPad(sh []float64) []float64 { return padded(sh, 0) }

// emitter writes the function of one program.
type emitter struct {
	src  *Source
	p    *tape.Program
	name string
	sb   strings.Builder
	// tuple[i] formats component c of tuple value i.
	tuple map[tape.ID]func(c int) string
	// shIndex[k] is input k's index among the shared inputs, or -1.
	shIndex []int
	// expr holds the expressions of values that have no local (shared
	// inputs, read where used).
	expr map[tape.ID]string
	// acc, if not nil, makes the function accumulate (see AccFunc).
	acc *accSpec
	// callee[k] is the name of the function of Funcs[k], calleeAcc[k]
	// its accumulating spec, or nil.
	callee    []string
	calleeAcc []*accSpec
	// lp is the function's vectors in lanes mode, nil otherwise; bcast
	// marks the elements already taken into a local of every lane.
	lp    *lanePlan
	bcast map[tape.ID]bool
	// accOf maps a value to the accumulator entries it is added to
	// (lanes mode; accTermsOf).
	accOf map[tape.ID][]int
	// parts are the function's code up to its last take (stage.go), and
	// stages the staged vectors' spans over them (Source.Stage); calleeTop
	// is the staging slots the function's callees use.
	parts     []bodyPart
	stages    map[int]*stageSpan
	calleeTop int
	// isLive marks the values the function computes (live); tp is its
	// tile-mode products (tiles.go: planTiles).
	isLive []bool
	tp     *tilePlan
	// vecPos[q] is vector q's place in the order of emission (tile mode).
	vecPos map[int]int
	// biasAcc holds the accumulations of vectors with ones that wait for
	// the product of a layer's weights (tile mode; tileVecAcc).
	biasAcc map[int]biasAcc
	// arrays holds the values read from arrays by index (Source.reroll:
	// loops' arrays, the components of calls' results).
	arrays map[tape.ID]arrayRef
	// ownArr reports whether the function's per-trajectory inputs have
	// been copied into the array gs_a (Source.reroll: a loop indexes
	// them).
	ownArr bool
	// inPos, if not nil, places per-trajectory input j (counted as
	// ownPos counts) at gs_a[inPos[j]] instead of gs_a[j]: a wide
	// function whose inputs lie in the driver's arrays (wideInputs).
	inPos []int
	// inRec, where its n is positive, reads per-trajectory inputs
	// inRec.from … inRec.from + n − 1 (counted as ownPos counts, before
	// inPos) from gs_ry, entry j at gs_ry[j − from], not from gs_a: a
	// wide reverse step's y read from the record's row
	// (Config.WideRecordY).
	inRec inSpan
	// minSplit, if positive, is the fewest repetitions of a loop of a
	// wide function (wideEmitter): a shorter run without a carried
	// operand is not a loop, its values replicated statements
	// (Config.WideMinSplit; planLoops).
	minSplit int
	// bind, if not nil, makes the function a bound one (bind.go): its
	// inputs read from arrays, some outputs stored; loopStored holds
	// those its loops store (loopStores).
	bind       *binding
	loopStored map[int]bool
}

// live marks the values the outputs depend on. The shared arguments of a
// call that passes gs_sh through (directShared) are not uses.
func (e *emitter) live() []bool {
	p := e.p
	l := make([]bool, len(p.Values))
	for m, o := range p.Outputs {
		if !e.acc.dropped(m) {
			l[o.ID] = true
		}
	}
	if e.acc != nil {
		// Terms it adds, and calls that accumulate, have an effect besides
		// the outputs.
		for _, t := range e.acc.terms {
			l[t.id] = true
		}
		for i, v := range p.Values {
			if v.Op == ops.OpCall && e.acc.callee(p.Funcs[int(v.Aux)]) != nil {
				l[i] = true
			}
		}
	}
	for i := len(p.Values) - 1; i >= 0; i-- {
		if !l[i] {
			continue
		}
		v := &p.Values[i]
		var f *tape.Program
		if v.Op == ops.OpCall {
			f = p.Funcs[int(v.Aux)]
			if j0, ok := e.directShared(f, v.Args); !ok || e.src.Lanes && j0%LaneWidth != 0 {
				f = nil
			}
		}
		for k, a := range v.Args {
			if v.Op == ops.OpAttach && k == 1 {
				break // the attached derivative's value is not needed
			}
			if f == nil || !f.Inputs[k].Shared {
				l[a] = true
			}
		}
	}
	return l
}

// directShared reports whether the arguments args of a call of f pass
// the caller's shared inputs j0, j0+1, ... to f's shared inputs, in
// order, so that the call can pass gs_sh + j0. It returns j0 = 0, true if
// f has no shared inputs.
func (e *emitter) directShared(f *tape.Program, args []tape.ID) (j0 int, ok bool) {
	n := 0
	for k, in := range f.Inputs {
		if !in.Shared {
			continue
		}
		av := e.p.Values[args[k]]
		if av.Op != ops.OpInput {
			return 0, false
		}
		j := e.shIndex[int(av.Aux)]
		if j < 0 || (n > 0 && j != j0+n) {
			return 0, false
		}
		if n == 0 {
			j0 = j
		}
		n++
	}
	return j0, true
}

func vname(id tape.ID) string { return fmt.Sprintf("v%d", id) }

// sharedIndex returns, for each input of p, its index among p's shared
// inputs, or -1 for an input that is not shared.
func sharedIndex(p *tape.Program) []int {
	sh := make([]int, len(p.Inputs))
	j := 0
	for k, in := range p.Inputs {
		sh[k] = -1
		if in.Shared {
			sh[k] = j
			j++
		}
	}
	return sh
}

// ref returns the C expression of value id: its local, or for a shared
// input its read from gs_sh.
func (e *emitter) ref(id tape.ID) string {
	if x, ok := e.expr[id]; ok {
		return x
	}
	return vname(id)
}

// maxComment is the most bytes of a value's line that its comment in the
// generated code keeps: a layer's Dot or a call of a network's VJP lists
// thousands of arguments (2.4 MB of a 2-128-128-2 kernel's 3.3 MB).
const maxComment = 160

// commentOf returns the comment of a value from its line of the program's
// text ("v12 = Mul v3 v7"), cut at maxComment bytes.
func commentOf(line string) string {
	line = strings.ReplaceAll(line, "\n", " ")
	if len(line) <= maxComment {
		return line
	}
	cut := strings.LastIndexByte(line[:maxComment], ' ')
	if cut <= 0 {
		for cut = maxComment; cut > 0 && !utf8.RuneStart(line[cut]); cut-- {
		}
	}
	return line[:cut] + " …"
}

// emit writes the function with the given qualifier macro and returns
// its code: its callees first (emitCallees), then its signature, its
// values in the order of emission (plan), and its returned outputs.
func (e *emitter) emit(qual string) (string, error) {
	p := e.p
	e.tuple = make(map[tape.ID]func(int) string)
	e.expr = make(map[tape.ID]string)
	// Callees first: their text must precede this function's.
	if err := e.emitCallees(); err != nil {
		return "", err
	}
	e.signature(qual)
	order, err := e.plan()
	if err != nil {
		return "", err
	}
	var groups map[tape.ID][][]accTerm
	if e.acc != nil && !e.src.Lanes {
		groups = e.accGroups()
	}
	// The program's own lines, "v12 = Mul v3 v7", for the comments.
	lines := strings.Split(p.String(), "\n")[1:]
	ids, loopAt := e.loopsOf(order, groups)
	gathered := map[string]string{}
	for i := 0; i < len(order); i++ {
		nd := order[i]
		if l := loopAt[i]; l != nil {
			for _, nd := range order[i:l.to] {
				if e.p.Values[nd.Id].Op == ops.OpExtract {
					e.tuplePart(nd.Id)
				}
			}
			e.emitLoop(l, ids, lines, gathered)
			for _, nd := range order[i:l.to] {
				if v := &e.p.Values[nd.Id]; v.Op == ops.OpAttach {
					e.expr[nd.Id] = e.ref(v.Args[0])
				}
			}
			i = l.to - 1
			continue
		}
		if nd.Vec >= 0 {
			e.vector(nd.Vec, lines)
			continue
		}
		if err := e.value(nd.Id, commentOf(lines[nd.Id])); err != nil {
			return "", err
		}
		for _, g := range groups[nd.Id] {
			e.emitReduce(g)
		}
	}
	if e.tp != nil {
		e.flushBiasAcc()
	}
	e.returns()
	code, top := e.body()
	if e.src.laneRoll && e.lp != nil {
		code = rollLanes(code)
	}
	if e.src.Stage {
		e.src.stageTop[e.name] = top
	}
	return code, nil
}

// emitCallees emits the programs p calls (e.callee), as GS_CALLEE
// functions or, up to the size SourceSettings.InlineCallees, as
// GS_CALLEE_INLINE ones, accumulating where the function's accSpec says
// (e.calleeAcc).
func (e *emitter) emitCallees() error {
	p := e.p
	e.callee = make([]string, len(p.Funcs))
	e.calleeAcc = make([]*accSpec, len(p.Funcs))
	for k, f := range p.Funcs {
		qual := "GS_CALLEE"
		if e.src.inline > 0 && len(f.Values) <= e.src.inline {
			qual = "GS_CALLEE_INLINE"
		}
		var name string
		var err error
		if fs := e.acc.callee(f); fs != nil {
			e.calleeAcc[k] = fs
			name, err = e.src.accFunction(f, qual, fs)
		} else {
			name, err = e.src.function(f, qual)
		}
		if err != nil {
			return fmt.Errorf("cuda: program %s: func %d: %w", p.Name, k, err)
		}
		e.callee[k] = name
	}
	return nil
}

// signature writes the function's comment, its output struct and its
// opening line (see Source's calling convention and AccFunc).
func (e *emitter) signature(qual string) {
	p, w := e.p, &e.sb
	nshared := 0
	for _, in := range p.Inputs {
		if in.Shared {
			nshared++
		}
	}
	fmt.Fprintf(w, "// program %s: %d inputs (%d shared), %d values, %d outputs\n",
		strings.ReplaceAll(p.Name, "\n", " "), len(p.Inputs), nshared, len(p.Values), len(p.Outputs))
	nret := 0
	for m := range p.Outputs {
		if e.acc.returned(m) && !e.boundOut(m) {
			nret++
		}
	}
	fmt.Fprintf(w, "struct %s { gs_real v[%d]; };\n", outType(e.name), max(nret, 1))
	fmt.Fprintf(w, "%s %s %s(const gs_real* GS_RESTRICT gs_sh", qual, outType(e.name), e.name)
	if e.acc != nil {
		w.WriteString(", gs_real* GS_RESTRICT gs_acc, bool gs_on")
	}
	e.shIndex = sharedIndex(p)
	if e.bind != nil {
		w.WriteString(", " + e.bind.params)
	}
	for k := range p.Inputs {
		if e.shIndex[k] < 0 && e.bind == nil {
			fmt.Fprintf(w, ", gs_real a%d", k)
		}
	}
	w.WriteString(") {\n")
}

// plan returns the nodes to emit (order): the live values and, in lanes
// mode, the vectors they form, and in tile mode the matrix products
// among them (planTiles).
func (e *emitter) plan() ([]laneNode, error) {
	e.isLive = e.live()
	order, err := e.order(e.isLive)
	if err != nil {
		return nil, err
	}
	if e.src.Tile && e.lp != nil {
		e.vecPos = make(map[int]int)
		for k, nd := range order {
			if nd.Vec >= 0 {
				e.vecPos[nd.Vec] = k
			}
		}
		e.tp = e.planTiles()
	}
	return order, nil
}

// value emits replicated value id (comment: its line of the program).
func (e *emitter) value(id tape.ID, comment string) error {
	p := e.p
	v := &p.Values[id]
	if e.src.Tile && e.lp != nil && e.tileScalar(id, comment) {
		e.laneAcc(id)
		return nil
	}
	args := make([]string, 0, len(v.Args))
	for k, a := range v.Args {
		if v.Op == ops.OpAttach && k == 1 {
			break // the attached derivative's value is not needed
		}
		if ops.IsTuple(p.Values[a].Op) {
			args = append(args, "") // read through e.tuple
			continue
		}
		e.need(a)
		args = append(args, e.ref(a))
	}
	if v.Op == ops.OpAttach && e.src.reroll {
		e.expr[id] = args[0] // its operand: a statement less
		return nil
	}
	switch v.Op {
	case ops.OpInput:
		k := int(v.Aux)
		if j := e.shIndex[k]; j >= 0 {
			// Read where used, not up front: a thousand weights loaded
			// at the top of a function would all be live at once.
			e.expr[id] = fmt.Sprintf("gs_sh[%d]", e.shPos(j))
		} else if e.bind != nil && e.src.reroll {
			e.expr[id] = e.boundInput(e.ownPos(k)) // read where used
		} else if e.bind != nil {
			e.scalar(id, e.boundInput(e.ownPos(k)), comment)
		} else if e.src.reroll {
			e.expr[id] = fmt.Sprintf("a%d", k) // a statement less
		} else {
			e.scalar(id, fmt.Sprintf("a%d", k), comment)
		}
	case ops.OpLUFactor:
		d := int(v.Aux)
		e.src.luDim(d)
		e.array(id, d*d+d, args, comment)
		fmt.Fprintf(&e.sb, "  gs_lu_factor<%d>(t%d);\n", d, id)
	case ops.OpLUFactorShift:
		e.src.helper(luShift)
		d := int(v.Aux)
		e.src.luDim(d)
		n := len(args)
		if get := e.tuple[v.Args[0]]; n == 3 && get != nil {
			// M is the last d*d components of the tuple, read in place.
			e.array(id, d*d+d, nil, comment)
			fmt.Fprintf(&e.sb, "  gs_lu_shift<%d>(t%d, &%s, %s, %s);\n", d, id, get(p.Width(v.Args[0])-d*d), args[1], args[2])
		} else {
			e.array(id, d*d+d, args[:n-2], comment)
			fmt.Fprintf(&e.sb, "  gs_lu_shift<%d>(t%d, t%d, %s, %s);\n", d, id, id, args[n-2], args[n-1])
		}
		fmt.Fprintf(&e.sb, "  gs_lu_factor<%d>(t%d);\n", d, id)
	case ops.OpLUSolve, ops.OpLUSolveT:
		d := len(v.Args) - 1
		e.src.luDim(d)
		e.array(id, d, args[1:], comment)
		fn := "gs_lu_solve"
		if v.Op == ops.OpLUSolveT {
			fn = "gs_lu_solve_t"
		}
		fmt.Fprintf(&e.sb, "  %s<%d>(t%d, t%d);\n", fn, d, id, v.Args[0])
	case ops.OpCall:
		k := int(v.Aux)
		e.call(id, p.Funcs[k], e.callee[k], e.calleeAcc[k], v.Args, comment)
	case ops.OpExtract:
		get := e.tuple[v.Args[0]]
		if get == nil {
			return fmt.Errorf("cuda: program %s: %s extracts from %s, which is not a tuple", p.Name, vname(id), vname(v.Args[0]))
		}
		if e.src.reroll {
			e.tuplePart(id)
		} else {
			e.scalar(id, get(int(v.Aux)), comment)
		}
	default:
		def := ops.Lookup(v.Op)
		if def.C == nil {
			return fmt.Errorf("cuda: program %s: %s: op %v has no C form", p.Name, vname(id), v.Op)
		}
		expr := def.C(args, v.Aux)
		if v.Op == ops.OpConst {
			expr = "(gs_real)" + expr
		}
		e.scalar(id, expr, comment)
	}
	if e.lp != nil {
		e.laneAcc(id)
	}
	return nil
}

// returns writes the function's end: its returned outputs (those it does
// not accumulate) into the output struct and, for a bound function, its
// outputs bound to arrays into them (an accumulating one's where gs_on is
// set).
func (e *emitter) returns() {
	p, w := e.p, &e.sb
	for m, o := range p.Outputs {
		if e.acc.returned(m) {
			e.need(o.ID)
		}
	}
	w.WriteString("  " + outType(e.name) + " gs_r;\n")
	var stores strings.Builder
	for m := 0; m < len(p.Outputs); m++ {
		if !e.emits(m) {
			continue
		}
		// Where output m goes: entry i0 of the struct, or of a bound
		// span; runs of outputs stay inside one span.
		ww, i0, end := w, e.retIndex(m), len(p.Outputs)
		at := func(x string) string { return "gs_r.v[" + x + "]" }
		val := func(x string) string { return x }
		if e.bind != nil {
			q, from, to := find(e.bind.out, m)
			end = to
			if sp := e.bind.out[q]; sp.name != "" {
				ww, i0, at, val = &stores, m-from, sp.at, sp.value
			}
		}
		if n, body := e.returnRun(m, end); n > 0 {
			np := len(body)
			if np == 1 {
				fmt.Fprintf(ww, "%s %s = %s;\n", loopHead(n), at(affine(i0, 1)), val(body[0]))
			} else {
				fmt.Fprintf(ww, "%s {\n", loopHead(n))
				for k, x := range body {
					fmt.Fprintf(ww, "    %s = %s;\n", at(affine(i0+k, np)), val(x))
				}
				ww.WriteString("  }\n")
			}
			m += n*np - 1
			continue
		}
		x := val(e.ref(p.Outputs[m].ID))
		if ww == w {
			fmt.Fprintf(w, "  gs_r.v[%d] = %s;\n", i0, x)
		} else {
			q, from, _ := find(e.bind.out, m)
			fmt.Fprintf(ww, "  %s = %s;\n", e.bind.out[q].entry(m-from), x)
		}
	}
	if stores.Len() > 0 {
		if e.acc != nil {
			w.WriteString("  if (gs_on) {\n")
		}
		w.WriteString(stores.String())
		if e.acc != nil {
			w.WriteString("  }\n")
		}
	}
	w.WriteString("  return gs_r;\n}\n")
}

// call emits "const F_out tN = F(sh, args...);" for a call of f (whose
// function is named fname) with arguments args.
func (e *emitter) call(id tape.ID, f *tape.Program, fname string, fs *accSpec, args []tape.ID, comment string) {
	var scalars, shared []string
	for k, in := range f.Inputs {
		if in.Shared {
			shared = append(shared, e.ref(args[k]))
		} else {
			scalars = append(scalars, e.ref(args[k]))
		}
	}
	sh := "gs_sh"
	if j0, ok := e.directShared(f, args); !ok || e.src.Lanes && j0%LaneWidth != 0 {
		if e.src.Lanes {
			shared = padded(shared, "0") // as the callee reads it
		}
		sh = fmt.Sprintf("s%d", id)
		fmt.Fprintf(&e.sb, "  const gs_real s%d[%d] = {%s};\n", id, max(len(shared), 1), strings.Join(shared, ", "))
	} else if j0 > 0 {
		sh = fmt.Sprintf("gs_sh + %d", e.shPos(j0))
	}
	if fs != nil {
		sh += ", gs_acc, gs_on"
	}
	e.calleeTop = max(e.calleeTop, e.src.stageTop[fname])
	fmt.Fprintf(&e.sb, "  const %s t%d = %s(%s);  // %s\n", outType(fname), id, fname, strings.Join(append([]string{sh}, scalars...), ", "), comment)
	e.tuple[id] = func(c int) string { return fmt.Sprintf("t%d.v[%d]", id, fs.index(c)) }
}

// scalar emits "const gs_real vN = expr;".
func (e *emitter) scalar(id tape.ID, expr, comment string) {
	fmt.Fprintf(&e.sb, "  const gs_real %s = %s;  // %s\n", vname(id), expr, comment)
}

// array emits a local tuple array tN of width w initialised with init
// (the rest zero) and registers its component accessor.
func (e *emitter) array(id tape.ID, w int, init []string, comment string) {
	fmt.Fprintf(&e.sb, "  gs_real t%d[%d] = {%s};  // %s\n", id, w, strings.Join(init, ", "), comment)
	e.tuple[id] = func(c int) string { return fmt.Sprintf("t%d[%d]", id, c) }
}
