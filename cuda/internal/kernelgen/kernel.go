package kernelgen

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/scan"
	"github.com/gradsolve-go/gradsolve/tape"
)

// engineTemplate is the kernel template of the engine (engine.cuh): the
// driver loop of ode.Plan around generated adapter functions, configured
// by macros.
//
//go:embed engine.cuh
var engineTemplate string

// inlineCallees is the size (values) up to which the engine's kernels
// inline a called program (a small field) instead of calling it.
const inlineCallees = 300

// KernelName is the name of the one kernel of an engine module.
const KernelName = "gs_engine"

// Config is one kernel of a plan: which parts of the driver loop it runs,
// in which layout (package cuda's chooseLayout decides). Its Key is the
// executor's kernel cache key.
type Config struct {
	Adaptive bool // run the controller (else replay the given mesh)
	MeshOut  bool // write the mesh
	Store    bool // keep the states before every step (adjoint)
	Loss     bool // loss terms
	Grad     bool // loss, its VJP and the adjoint sweep
	Saves    int  // save times
	DataDim  int  // loss data per trajectory
	lossKey  string
	// TileSums makes a gradient kernel sum shared gradients per sum tile
	// of scan.TileSize trajectories in a fixed order (GS_TILES; not tile
	// mode's tiles of TileWidth trajectories), for results
	// that do not depend on how an ensemble is split (MultiEngine).
	TileSums bool
	// Lanes runs one warp per trajectory (GS_LANEMODE, lanes.go), for
	// fields that are mostly vectors (stepPrograms.lanes); lanesMinBlocks
	// blocks of it fit in a multiprocessor (GS_LANES_MINB). lanesGlobal
	// keeps the padded shared block and the warps' accumulators in global
	// memory (GS_LANES_GLOBAL), for networks whose weights do not fit in
	// shared memory (lanesFit); lanesBlockAcc then gives a gradient
	// kernel's blocks one accumulator each, in shared memory
	// (GS_LANES_BLOCKACC), where it fits.
	Lanes          bool
	LanesMinBlocks int
	LanesGlobal    bool
	LanesBlockAcc  bool
	// LanesShuffle takes vectors' elements by shuffles rather than through
	// the warps' staging rows (Source.stage).
	LanesShuffle bool
	// TileMode (with lanes, lanesGlobal) runs a warp per tile of eight
	// trajectories in lockstep, dense layers on the tensor cores
	// (GS_TILEMODE, tiles.go; chosen by package cuda's chooseLayout).
	TileMode bool
	// TileSharedAcc (tile mode, a gradient) keeps each warp's accumulator
	// in the block's shared memory (GS_TILE_SACC) instead of global
	// memory, where tileBlocksPerSM blocks' fit (tileSharedAccFits).
	TileSharedAcc bool
	// TileSharedSh (tile mode) copies the padded shared and controller
	// blocks into the block's shared memory (GS_TILE_SSH), before the
	// accumulators, where they fit too (tileSharedFits); a gradient
	// kernel only with tileSharedAcc.
	TileSharedSh bool
	// TileDynamic (tile mode on a device) has warps take their tiles in
	// turn from a counter after the work array's accumulators
	// (GS_TILE_DYNAMIC, GS_TILE_NEXT) instead of every gridth one.
	TileDynamic bool
	// StopStiff (an adaptive record of a gradient, Job.StopOnStiff) ends a
	// trajectory with status Stiff at the step where the stiffness test
	// fires (GS_STOP_STIFF), as the CPU engine does, instead of running it
	// to its end for a gradient that will be refused.
	StopStiff bool
}

// WorkAccs reports whether the warps' accumulators of a lanes-mode
// kernel in global memory are rows of its work array.
func (v Config) WorkAccs() bool { return v.Grad && !v.LanesBlockAcc && !v.TileSharedAcc }

// ConfigOf returns the kernel that runs job j, before its layout is chosen.
func ConfigOf(j *ode.Job) Config {
	v := Config{Saves: len(j.SaveAt), Adaptive: j.Mesh == nil}
	switch j.Op {
	case ode.OpRecord:
		v.MeshOut, v.Saves = true, 0
	case ode.OpReplay:
		v.Adaptive = false
	case ode.OpLoss:
		v.Loss, v.MeshOut = true, v.Adaptive
	case ode.OpGrad:
		v.Grad, v.Store, v.MeshOut = true, true, v.Adaptive
	}
	if (v.Loss || v.Grad) && j.Loss != nil {
		v.DataDim = j.Loss.DataDim
		v.lossKey = j.Loss.Hash
	}
	v.StopStiff = j.StopOnStiff && v.Adaptive
	return v
}

// Xpose reports whether the kernel's warps reduce shared gradients (of ns
// entries) by transposing them through shared memory (GS_XPOSE): every
// gradient kernel that sums with atomics. Each warp then has xposeRow·32
// values of dynamic shared memory before the block's accumulator.
func (v Config) Xpose(ns int) bool { return v.Grad && !v.TileSums && !v.Lanes && ns > 0 }

// SharedAcc reports whether the kernel sums the shared gradient (of ns
// entries) in a block's shared memory (GS_SACC) before adding it to the
// result, else straight into global memory or per tile.
func (v Config) SharedAcc(ns int, prec Precision) bool {
	return v.Grad && !v.TileSums && !v.Lanes && sharedAccumulator(ns, prec)
}

// XposeRow is the row stride of a warp's transposition scratch, in values
// (GS_XPOSE_ROW): 33, so that a lane's row and a column fall in distinct
// banks.
const XposeRow = 33

// Layout names the kernel's layout (TraceStats.Layout).
func (v Config) Layout() string {
	switch {
	case !v.Lanes:
		return "thread"
	case v.TileMode:
		return "tile"
	case !v.LanesGlobal:
		return "lanes"
	case v.LanesBlockAcc:
		return "lanes-global-block"
	}
	return "lanes-global"
}

// Key identifies the kernel among those of one plan.
func (v Config) Key() string {
	return fmt.Sprintf("a%t m%t s%t l%t g%t k%d dd%d t%t w%t%d%t%t%t%t sa%t ss%t td%t st%t %s", v.Adaptive, v.MeshOut, v.Store, v.Loss, v.Grad, v.Saves, v.DataDim,
		v.TileSums, v.Lanes, v.LanesMinBlocks, v.LanesGlobal, v.LanesBlockAcc, v.LanesShuffle, v.TileMode, v.TileSharedAcc, v.TileSharedSh, v.TileDynamic, v.StopStiff, v.lossKey)
}

// StepPrograms are the plan's programs a kernel calls.
type StepPrograms struct {
	plan *ode.Plan
	// rev and tapRev are Plan.Reverse and (for methods with Dense)
	// Plan.DenseReverse: their gs outputs are one step's contribution to
	// the shared gradient, which the kernel reduces across the warp
	// instead of accumulating per thread.
	Rev, tapRev *tape.Program
	// Lanes reports that the plan's kernels run one warp per trajectory
	// (useLanes).
	Lanes bool
}

// NewStepPrograms derives the reverse programs of pl.
func NewStepPrograms(pl *ode.Plan) (*StepPrograms, error) {
	sp := &StepPrograms{plan: pl}
	rev, err := pl.Reverse()
	if err != nil {
		return nil, err
	}
	sp.Rev, sp.tapRev = rev, rev
	if pl.Dense != nil {
		if sp.tapRev, err = pl.DenseReverse(); err != nil {
			return nil, err
		}
	}
	sp.Lanes = useLanes(sp)
	return sp, nil
}

// KernelInfo describes a generated kernel to the executor.
type KernelInfo struct {
	// StoreT reports that the stored rows hold the time (the reverse
	// steps use it, or save times need it).
	StoreT bool
}

// KernelSource returns the translation unit of kernel v of the plan
// (with the loss lp for loss and gradient variants) in precision prec.
func KernelSource(sp *StepPrograms, v Config, lp *ode.LossPlan, prec Precision) (string, KernelInfo, error) {
	var info KernelInfo
	pl := sp.plan
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	src := NewSource(&SourceSettings{Precision: prec, InlineCallees: inlineCallees, Lanes: v.Lanes, TileMode: v.TileMode})
	if v.TileMode && (!v.Lanes || !v.LanesGlobal || prec != Float64 || v.TileSums) {
		return "", info, fmt.Errorf("cuda: tile mode needs lanes mode's global layout, float64 and no tile sums")
	}
	if v.TileSums {
		src.Defines = []string{"GS_TILES 1", fmt.Sprintf("GS_TILE %d", scan.TileSize)}
	}
	if v.Lanes {
		src.Stage = !v.LanesShuffle
		src.Defines = append(src.Defines, "GS_LANEMODE 1")
		if v.LanesMinBlocks > 0 {
			src.Defines = append(src.Defines, fmt.Sprintf("GS_LANES_MINB %d", v.LanesMinBlocks))
		}
		if v.LanesGlobal {
			src.Defines = append(src.Defines, "GS_LANES_GLOBAL 1")
		}
		if v.LanesBlockAcc {
			src.Defines = append(src.Defines, "GS_LANES_BLOCKACC 1", fmt.Sprintf("GS_LANES_BLOCK %d", LanesAccBlock))
		}
		if v.TileSharedAcc {
			src.Defines = append(src.Defines, "GS_TILE_SACC 1")
		}
		if v.TileSharedSh {
			src.Defines = append(src.Defines, "GS_TILE_SSH 1")
		}
		if v.TileDynamic {
			// The counter follows the warps' accumulators in the work
			// array, where they are there (lanesGlobalLayout).
			at := "0"
			if v.WorkAccs() {
				at = "((long long)gridDim.x * (blockDim.x >> 5) * GS_WACC)"
			}
			src.Defines = append(src.Defines, "GS_TILE_DYNAMIC 1", "GS_TILE_NEXT "+at)
		}
	}
	if v.Xpose(ns) {
		src.Defines = append(src.Defines, "GS_XPOSE 1")
	}
	g := &adapters{src: src}
	idx := func(name string, w int) []string {
		x := make([]string, w)
		for c := range x {
			x[c] = fmt.Sprintf("%s[%d]", name, c)
		}
		return x
	}
	glob := func(name string, w int) []string {
		x := make([]string, w)
		for c := range x {
			x[c] = fmt.Sprintf("%s[%dLL * n + i]", name, c)
		}
		return x
	}
	cat := func(xs ...[]string) []string {
		var out []string
		for _, x := range xs {
			out = append(out, x...)
		}
		return out
	}
	y, p := idx("y", d), idx("p", np)
	const real = "gs_real"

	// Init: t0, t1, y, p → h, last, f0.
	g.adapter("gs_a_init", pl.Init, "void",
		"const gs_real* sh, gs_real t0, gs_real t1, const gs_real* y, const gs_real* p, gs_real* h, gs_real* last, gs_real* f0",
		cat([]string{"t0", "t1"}, y, p), cat([]string{"*h", "*last"}, idx("f0", d)))
	// Trial: t, h, y, p[, k1] → y⁺, err[, k_s], hρ.
	tin, tout := cat([]string{"t", "h"}, y, p), cat(idx("yn", d), idx("e", d))
	if pl.FSAL {
		tin, tout = append(tin, idx("k1", d)...), append(tout, idx("ks", d)...)
	}
	g.adapter("gs_a_trial", pl.Trial, "void",
		"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* k1, gs_real* yn, gs_real* e, gs_real* ks, gs_real* hrho",
		tin, append(tout, "*hrho"))
	// Control: state, t1, y, y⁺, err, hρ → state', accept, status.
	g.adapter("gs_a_control", pl.Control, "void",
		"const gs_real* sh, const gs_real* st, gs_real t1, const gs_real* y, const gs_real* yn, const gs_real* e, gs_real hrho, gs_real* st2, gs_real* accept, gs_real* status",
		cat(idx("st", ode.NumState), []string{"t1"}, y, idx("yn", d), idx("e", d), []string{"hrho"}),
		cat(idx("st2", ode.NumState), []string{"*accept", "*status"}))
	// Replay and Dense: t, h, y, p[, θ] → y⁺.
	g.adapter("gs_a_replay", pl.Replay, "void",
		"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, gs_real* yn",
		cat([]string{"t", "h"}, y, p), idx("yn", d))
	if pl.Dense != nil {
		g.adapter("gs_a_dense", pl.Dense, "void",
			"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, gs_real theta, gs_real* yn",
			cat([]string{"t", "h"}, y, p, []string{"theta"}), idx("yn", d))
	}
	revAcc, tapAcc, lossAcc := false, false, false
	if v.Grad {
		// The reverse steps return their output struct. Its last ns
		// entries, the shared-gradient contributions, are reduced in place;
		// or, where the step's form allows, the field's VJP adds them to the
		// accumulator as it computes them (AccFunc), and the struct holds
		// λ' and gp' only.
		revArgs := cat([]string{"t", "h"}, y, p, idx("lam", d), idx("gp", np))
		revParams := "const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* lam, const gs_real* gp"
		accParams := "const gs_real* sh, gs_real* acc, bool on, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* lam, const gs_real* gp"
		if f, ok := g.accFunc(sp.Rev, d+np, ns); ok {
			revAcc = true
			g.accAdapter("gs_a_rev", f, sp.Rev, "gs_rev_out", accParams, revArgs)
		} else if v.TileMode {
			// gs_backward calls a step that returns its shared gradient
			// only for the trajectories on: not in lockstep.
			return "", info, fmt.Errorf("cuda: tile mode: the reverse step of %s does not accumulate its shared gradient", pl.Method)
		} else {
			g.adapter("gs_a_rev", sp.Rev, "gs_rev_out", revParams, revArgs, nil)
		}
		if pl.Dense != nil {
			tapArgs := cat([]string{"t", "h"}, y, p, []string{"theta"}, idx("lam", d), idx("gp", np))
			if f, ok := g.accFunc(sp.tapRev, d+np, ns); ok {
				tapAcc = true
				g.accAdapter("gs_a_tap_rev", f, sp.tapRev, "gs_tap_rev_out",
					"const gs_real* sh, gs_real* acc, bool on, gs_real t, gs_real h, const gs_real* y, const gs_real* p, gs_real theta, const gs_real* lam, const gs_real* gp", tapArgs)
			} else {
				g.adapter("gs_a_tap_rev", sp.tapRev, "gs_tap_rev_out",
					"const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, gs_real theta, const gs_real* lam, const gs_real* gp", tapArgs, nil)
			}
		} else {
			tapAcc = revAcc
			g.sb.WriteString("typedef gs_rev_out gs_tap_rev_out;\n#define gs_a_tap_rev gs_a_rev\n")
		}
		if v.TileMode && v.Saves > 0 && !tapAcc {
			return "", info, fmt.Errorf("cuda: tile mode: the save times' reverse step of %s does not accumulate its shared gradient", pl.Method)
		}
	}
	if v.Loss || v.Grad {
		if lp == nil {
			return "", info, fmt.Errorf("cuda: a loss kernel needs a loss")
		}
		in := cat(y, glob("ys", v.Saves*d), glob("data", v.DataDim), p)
		sig := "const gs_real* sh, const gs_real* y, const gs_real* ys, long long n, long long i, const gs_real* data, const gs_real* p"
		if v.Grad {
			// In lanes mode the loss's own dL/ds goes straight to the
			// result, atomically (engine.cuh, GS_LOSS_ACC_AT).
			src.accShared = v.Lanes
			f, ok := g.accFunc(lp.Grad, 1+d+v.Saves*d+np, ns)
			src.accShared = false
			if ok {
				lossAcc = true
				g.accAdapter("gs_a_loss_grad", f, lp.Grad, "gs_lgrad_out",
					"const gs_real* sh, gs_real* acc, bool on, const gs_real* y, const gs_real* ys, long long n, long long i, const gs_real* data, const gs_real* p", in)
			} else {
				g.adapter("gs_a_loss_grad", lp.Grad, "gs_lgrad_out", sig, in, nil)
			}
		} else {
			g.adapter("gs_a_loss", lp.Term, real, sig, in, []string{"return"})
		}
	}
	if g.err != nil {
		return "", info, g.err
	}
	// An autonomous field's reverse step ignores t: the stored rows then
	// hold y only (a fifth less traffic for Lorenz).
	info.StoreT = v.Store && (v.Saves > 0 || liveInputs(sp.Rev, map[*tape.Program][]bool{})[0])
	var sb strings.Builder
	fmt.Fprintf(&sb, "// Kernel %s of method %s (fingerprint %s): %s\n", KernelName, pl.Method, pl.Fingerprint, v.Key())
	defs := []struct {
		name string
		val  int
	}{
		{"GS_D", d}, {"GS_NP", np}, {"GS_NS", ns}, {"GS_DD", v.DataDim}, {"GS_K", v.Saves},
		{"GS_FSAL", B2i(pl.FSAL)}, {"GS_DENSE", B2i(pl.Dense != nil)},
		{"GS_ADAPTIVE", B2i(v.Adaptive)}, {"GS_MESH_OUT", B2i(v.MeshOut)}, {"GS_STORE", B2i(v.Store)},
		{"GS_LOSS", B2i(v.Loss)}, {"GS_GRAD", B2i(v.Grad)}, {"GS_SACC", B2i(v.SharedAcc(ns, prec))},
		{"GS_REV_ACC", B2i(revAcc)}, {"GS_TAP_ACC", B2i(tapAcc)}, {"GS_LOSS_ACC", B2i(lossAcc)},
		{"GS_STORE_T", B2i(info.StoreT)},
	}
	if v.StopStiff {
		defs = append(defs, struct {
			name string
			val  int
		}{"GS_STOP_STIFF", int(ode.Stiff)})
	}
	for _, x := range defs {
		fmt.Fprintf(&sb, "#define %s %d\n", x.name, x.val)
	}
	fmt.Fprintf(&sb, "#define GS_KERNEL_NAME %s\n", KernelName)
	sb.WriteString(g.sb.String())
	sb.WriteString(engineTemplate)
	src.Add(sb.String())
	return src.String(), info, nil
}

// liveInputs reports which inputs of p its outputs depend on, following
// calls into their callees (memo holds the callees' answers).
func liveInputs(p *tape.Program, memo map[*tape.Program][]bool) []bool {
	if r, ok := memo[p]; ok {
		return r
	}
	live := make([]bool, len(p.Values))
	for _, o := range p.Outputs {
		live[o.ID] = true
	}
	in := make([]bool, len(p.Inputs))
	for i := len(p.Values) - 1; i >= 0; i-- {
		if !live[i] {
			continue
		}
		v := &p.Values[i]
		switch v.Op {
		case ops.OpInput:
			in[int(v.Aux)] = true
		case ops.OpCall:
			fl := liveInputs(p.Funcs[int(v.Aux)], memo)
			for k, a := range v.Args {
				if fl[k] {
					live[a] = true
				}
			}
		default:
			for _, a := range v.Args {
				live[a] = true
			}
		}
	}
	memo[p] = in
	return in
}

// accFunc emits p as an accumulating function (AccFunc) of its outputs
// first…first+n-1, if it has their form and n > 0.
func (g *adapters) accFunc(p *tape.Program, first, n int) (string, bool) {
	if g.err != nil || n == 0 || noAccumulate {
		return "", false
	}
	f, ok, err := g.src.AccFunc(p, first, n)
	if err != nil {
		g.err = err
	}
	return f, ok && err == nil
}

// noAccumulate disables accumulating functions (tests compare both forms).
var noAccumulate bool

// sharedAccumulator reports whether a kernel reduces a shared gradient
// of ns entries in shared memory (one block's copy of its two halves, at
// most 32 KiB), else directly in global memory.
func sharedAccumulator(ns int, prec Precision) bool {
	return ns > 0 && 2*ns*prec.Size() <= 32<<10
}

// Size returns the bytes of one value.
func (p Precision) Size() int {
	if p == Float32 {
		return 4
	}
	return 8
}

func B2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// adapters writes the adapter functions of a kernel: each calls the
// function of one program with scalar arguments taken from the kernel's
// arrays, and stores its outputs.
type adapters struct {
	src *Source
	sb  strings.Builder
	err error
}

// adapter emits
//
//	GS_DEVICE ret name(params) { const F_out r = F(sh, args...); outs[m] = r.v[m]; ... }
//
// for program p. args are the C expressions of p's non-shared inputs, in
// order; outs those receiving its outputs (nil: the function returns r,
// and ret names the typedef of F_out it declares; {"return"}: it returns
// r.v[0]).
func (g *adapters) adapter(name string, p *tape.Program, ret, params string, args, outs []string) {
	if g.err != nil {
		return
	}
	f, err := g.src.Func(p)
	if err != nil {
		g.err = fmt.Errorf("cuda: program %s: %w", p.Name, err)
		return
	}
	g.adapterOf(name, f, "sh", p, ret, params, args, outs)
}

// accAdapter is adapter for the accumulating function f of p (AccFunc),
// whose adapter takes the accumulator and the lane's flag after sh.
func (g *adapters) accAdapter(name, f string, p *tape.Program, ret, params string, args []string) {
	if g.err != nil {
		return
	}
	g.adapterOf(name, f, "sh, acc, on", p, ret, params, args, nil)
}

// adapterOf writes the adapter of function f of p, called with the
// leading arguments lead.
func (g *adapters) adapterOf(name, f, lead string, p *tape.Program, ret, params string, args, outs []string) {
	nin := 0
	for _, in := range p.Inputs {
		if !in.Shared {
			nin++
		}
	}
	if nin != len(args) {
		g.err = fmt.Errorf("cuda: program %s has %d per-trajectory inputs, the kernel passes %d", p.Name, nin, len(args))
		return
	}
	switch {
	case outs == nil:
		fmt.Fprintf(&g.sb, "typedef %s %s;\n", OutType(f), ret)
	case len(outs) == 1 && outs[0] == "return":
		if len(p.Outputs) != 1 {
			g.err = fmt.Errorf("cuda: program %s has %d outputs, want 1", p.Name, len(p.Outputs))
			return
		}
	case len(outs) != len(p.Outputs):
		g.err = fmt.Errorf("cuda: program %s has %d outputs, the kernel takes %d", p.Name, len(p.Outputs), len(outs))
		return
	}
	fmt.Fprintf(&g.sb, "GS_DEVICE %s %s(%s) {\n", ret, name, params)
	call := fmt.Sprintf("%s(%s)", f, strings.Join(append([]string{lead}, args...), ", "))
	switch {
	case outs == nil:
		fmt.Fprintf(&g.sb, "  return %s;\n", call)
	case outs[0] == "return":
		fmt.Fprintf(&g.sb, "  return %s.v[0];\n", call)
	default:
		fmt.Fprintf(&g.sb, "  const %s r = %s;\n", OutType(f), call)
		for m, o := range outs {
			fmt.Fprintf(&g.sb, "  %s = r.v[%d];\n", o, m)
		}
	}
	g.sb.WriteString("}\n")
}
