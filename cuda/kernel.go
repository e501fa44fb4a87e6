package cuda

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

// kernelName is the name of the one kernel of an engine module.
const kernelName = "gs_engine"

// variant is one kernel of a plan: which parts of the driver loop it runs.
type variant struct {
	adaptive bool // run the controller (else replay the given mesh)
	meshOut  bool // write the mesh
	store    bool // keep the states before every step (adjoint)
	loss     bool // loss terms
	grad     bool // loss, its VJP and the adjoint sweep
	k        int  // save times
	dataDim  int  // loss data per trajectory
	lossKey  string
	// tiles makes a gradient kernel sum shared gradients per tile of
	// scan.TileSize trajectories in a fixed order (GS_TILES), for results
	// that do not depend on how an ensemble is split (MultiEngine).
	tiles bool
	// lanes runs one warp per trajectory (GS_LANEMODE, lanes.go), for
	// fields that are mostly vectors (stepPrograms.lanes); lanesMinBlocks
	// blocks of it fit in a multiprocessor (GS_LANES_MINB). lanesGlobal
	// keeps the padded shared block and the warps' accumulators in global
	// memory (GS_LANES_GLOBAL), for networks whose weights do not fit in
	// shared memory (lanesFit); lanesBlockAcc then gives a gradient
	// kernel's blocks one accumulator each, in shared memory
	// (GS_LANES_BLOCKACC), where it fits.
	lanes          bool
	lanesMinBlocks int
	lanesGlobal    bool
	lanesBlockAcc  bool
	// lanesShuffle takes vectors' elements by shuffles rather than through
	// the warps' staging rows (Source.stage; GRADSOLVE_CUDA_STAGE=0).
	lanesShuffle bool
	// tileMode (with lanes, lanesGlobal) runs a warp per tile of eight
	// trajectories in lockstep, dense layers on the tensor cores
	// (GS_TILEMODE, tiles.go; executor.useTileMode).
	tileMode bool
	// tileSharedAcc (tile mode, a gradient) keeps each warp's accumulator
	// in the block's shared memory (GS_TILE_SACC) instead of global
	// memory, where tileBlocksPerSM blocks' fit (tileSharedAccFits).
	tileSharedAcc bool
	// tileSharedSh (tile mode) copies the padded shared and controller
	// blocks into the block's shared memory (GS_TILE_SSH), before the
	// accumulators, where they fit too (tileSharedFits); a gradient
	// kernel only with tileSharedAcc.
	tileSharedSh bool
	// tileDynamic (tile mode on a device) has warps take their tiles in
	// turn from a counter after the work array's accumulators
	// (GS_TILE_DYNAMIC, GS_TILE_NEXT) instead of every gridth one.
	tileDynamic bool
}

// workAccs reports whether the warps' accumulators of a lanes-mode
// kernel in global memory are rows of its work array.
func (v variant) workAccs() bool { return v.grad && !v.lanesBlockAcc && !v.tileSharedAcc }

// variantOf returns the kernel that runs job j.
func variantOf(j *ode.Job) variant {
	v := variant{k: len(j.SaveAt), adaptive: j.Mesh == nil}
	switch j.Op {
	case ode.OpRecord:
		v.meshOut, v.k = true, 0
	case ode.OpReplay:
		v.adaptive = false
	case ode.OpLoss:
		v.loss, v.meshOut = true, v.adaptive
	case ode.OpGrad:
		v.grad, v.store, v.meshOut = true, true, v.adaptive
	}
	if (v.loss || v.grad) && j.Loss != nil {
		v.dataDim = j.Loss.DataDim
		v.lossKey = j.Loss.Hash
	}
	return v
}

// xpose reports whether the kernel's warps reduce shared gradients (of ns
// entries) by transposing them through shared memory (GS_XPOSE): every
// gradient kernel that sums with atomics. Each warp then has xposeRow·32
// values of dynamic shared memory before the block's accumulator.
func (v variant) xpose(ns int) bool { return v.grad && !v.tiles && !v.lanes && ns > 0 }

// sharedAcc reports whether the kernel sums the shared gradient (of ns
// entries) in a block's shared memory (GS_SACC) before adding it to the
// result, else straight into global memory or per tile.
func (v variant) sharedAcc(ns int, prec Precision) bool {
	return v.grad && !v.tiles && !v.lanes && sharedAccumulator(ns, prec)
}

// xposeRow is the row stride of a warp's transposition scratch, in values
// (GS_XPOSE_ROW): 33, so that a lane's row and a column fall in distinct
// banks.
const xposeRow = 33

// layout names the variant's kernel layout (TraceStats.Layout).
func (v variant) layout() string {
	switch {
	case !v.lanes:
		return "thread"
	case v.tileMode:
		return "tile"
	case !v.lanesGlobal:
		return "lanes"
	case v.lanesBlockAcc:
		return "lanes-global-block"
	}
	return "lanes-global"
}

// key identifies the variant's kernel among those of one plan.
func (v variant) key() string {
	return fmt.Sprintf("a%t m%t s%t l%t g%t k%d dd%d t%t w%t%d%t%t%t%t sa%t ss%t td%t %s", v.adaptive, v.meshOut, v.store, v.loss, v.grad, v.k, v.dataDim,
		v.tiles, v.lanes, v.lanesMinBlocks, v.lanesGlobal, v.lanesBlockAcc, v.lanesShuffle, v.tileMode, v.tileSharedAcc, v.tileSharedSh, v.tileDynamic, v.lossKey)
}

// stepPrograms are the plan's programs a kernel calls.
type stepPrograms struct {
	plan *ode.Plan
	// rev and tapRev are Plan.Reverse and (for methods with Dense)
	// Plan.DenseReverse: their gs outputs are one step's contribution to
	// the shared gradient, which the kernel reduces across the warp
	// instead of accumulating per thread.
	rev, tapRev *tape.Program
	// lanes reports that the plan's kernels run one warp per trajectory
	// (useLanes).
	lanes bool
}

// newStepPrograms derives the reverse programs of pl.
func newStepPrograms(pl *ode.Plan) (*stepPrograms, error) {
	sp := &stepPrograms{plan: pl}
	rev, err := pl.Reverse()
	if err != nil {
		return nil, err
	}
	sp.rev, sp.tapRev = rev, rev
	if pl.Dense != nil {
		if sp.tapRev, err = pl.DenseReverse(); err != nil {
			return nil, err
		}
	}
	sp.lanes = useLanes(sp)
	return sp, nil
}

// kernelInfo describes a generated kernel to the executor.
type kernelInfo struct {
	// storeT reports that the stored rows hold the time (the reverse
	// steps use it, or save times need it).
	storeT bool
}

// kernelSource returns the translation unit of variant v of the plan
// (with the loss lp for loss and gradient variants) in precision prec.
func kernelSource(sp *stepPrograms, v variant, lp *ode.LossPlan, prec Precision) (string, kernelInfo, error) {
	var info kernelInfo
	pl := sp.plan
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	inline := inlineCallees
	if k := envInt(inlineEnv); k > 0 {
		inline = k
	}
	src := NewSource(&SourceSettings{Precision: prec, InlineCallees: inline, Lanes: v.lanes, Tiles: v.tileMode})
	if v.tileMode && (!v.lanes || !v.lanesGlobal || prec != Float64 || v.tiles) {
		return "", info, fmt.Errorf("cuda: tile mode needs lanes mode's global layout, float64 and no tile sums")
	}
	if v.tiles {
		src.defines = []string{"GS_TILES 1", fmt.Sprintf("GS_TILE %d", scan.TileSize)}
	}
	if v.lanes {
		src.stage = !v.lanesShuffle
		src.defines = append(src.defines, "GS_LANEMODE 1")
		if v.lanesMinBlocks > 0 {
			src.defines = append(src.defines, fmt.Sprintf("GS_LANES_MINB %d", v.lanesMinBlocks))
		}
		if v.lanesGlobal {
			src.defines = append(src.defines, "GS_LANES_GLOBAL 1")
		}
		if v.lanesBlockAcc {
			src.defines = append(src.defines, "GS_LANES_BLOCKACC 1", fmt.Sprintf("GS_LANES_BLOCK %d", lanesAccBlock))
		}
		if v.tileSharedAcc {
			src.defines = append(src.defines, "GS_TILE_SACC 1")
		}
		if v.tileSharedSh {
			src.defines = append(src.defines, "GS_TILE_SSH 1")
		}
		if v.tileDynamic {
			// The counter follows the warps' accumulators in the work
			// array, where they are there (lanesGlobalLayout).
			at := "0"
			if v.workAccs() {
				at = "((long long)gridDim.x * (blockDim.x >> 5) * GS_WACC)"
			}
			src.defines = append(src.defines, "GS_TILE_DYNAMIC 1", "GS_TILE_NEXT "+at)
		}
	}
	if v.xpose(ns) {
		src.defines = append(src.defines, "GS_XPOSE 1")
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
	if v.grad {
		// The reverse steps return their output struct. Its last ns
		// entries, the shared-gradient contributions, are reduced in place;
		// or, where the step's form allows, the field's VJP adds them to the
		// accumulator as it computes them (AccFunc), and the struct holds
		// λ' and gp' only.
		revArgs := cat([]string{"t", "h"}, y, p, idx("lam", d), idx("gp", np))
		revParams := "const gs_real* sh, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* lam, const gs_real* gp"
		accParams := "const gs_real* sh, gs_real* acc, bool on, gs_real t, gs_real h, const gs_real* y, const gs_real* p, const gs_real* lam, const gs_real* gp"
		if f, ok := g.accFunc(sp.rev, d+np, ns); ok {
			revAcc = true
			g.accAdapter("gs_a_rev", f, sp.rev, "gs_rev_out", accParams, revArgs)
		} else if v.tileMode {
			// gs_backward calls a step that returns its shared gradient
			// only for the trajectories on: not in lockstep.
			return "", info, fmt.Errorf("cuda: tile mode: the reverse step of %s does not accumulate its shared gradient", pl.Method)
		} else {
			g.adapter("gs_a_rev", sp.rev, "gs_rev_out", revParams, revArgs, nil)
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
		if v.tileMode && v.k > 0 && !tapAcc {
			return "", info, fmt.Errorf("cuda: tile mode: the save times' reverse step of %s does not accumulate its shared gradient", pl.Method)
		}
	}
	if v.loss || v.grad {
		if lp == nil {
			return "", info, fmt.Errorf("cuda: a loss kernel needs a loss")
		}
		in := cat(y, glob("ys", v.k*d), glob("data", v.dataDim), p)
		sig := "const gs_real* sh, const gs_real* y, const gs_real* ys, long long n, long long i, const gs_real* data, const gs_real* p"
		if v.grad {
			// In lanes mode the loss's own dL/ds goes straight to the
			// result, atomically (engine.cuh, GS_LOSS_ACC_AT).
			src.accShared = v.lanes
			f, ok := g.accFunc(lp.Grad, 1+d+v.k*d+np, ns)
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
	info.storeT = v.store && (v.k > 0 || liveInputs(sp.rev, map[*tape.Program][]bool{})[0])
	var sb strings.Builder
	fmt.Fprintf(&sb, "// Kernel %s of method %s (fingerprint %s): %s\n", kernelName, pl.Method, pl.Fingerprint, v.key())
	defs := []struct {
		name string
		val  int
	}{
		{"GS_D", d}, {"GS_NP", np}, {"GS_NS", ns}, {"GS_DD", v.dataDim}, {"GS_K", v.k},
		{"GS_FSAL", b2i(pl.FSAL)}, {"GS_DENSE", b2i(pl.Dense != nil)},
		{"GS_ADAPTIVE", b2i(v.adaptive)}, {"GS_MESH_OUT", b2i(v.meshOut)}, {"GS_STORE", b2i(v.store)},
		{"GS_LOSS", b2i(v.loss)}, {"GS_GRAD", b2i(v.grad)}, {"GS_SACC", b2i(v.sharedAcc(ns, prec))},
		{"GS_REV_ACC", b2i(revAcc)}, {"GS_TAP_ACC", b2i(tapAcc)}, {"GS_LOSS_ACC", b2i(lossAcc)},
		{"GS_STORE_T", b2i(info.storeT)},
	}
	for _, x := range defs {
		fmt.Fprintf(&sb, "#define %s %d\n", x.name, x.val)
	}
	fmt.Fprintf(&sb, "#define GS_KERNEL_NAME %s\n", kernelName)
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
	return ns > 0 && 2*ns*prec.size() <= 32<<10
}

// size returns the bytes of one value.
func (p Precision) size() int {
	if p == Float32 {
		return 4
	}
	return 8
}

func b2i(b bool) int {
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
