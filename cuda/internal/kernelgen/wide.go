package kernelgen

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The wide layout (Config.Wide; wide.cuh): one warp per trajectory for
// an explicit method on a large state. The thread layout keeps a
// trajectory's state, its stages and the other d-long arrays of the
// driver loop in one thread's local memory, and an ensemble of n
// trajectories is n/32 warps; the lanes layout replicates the state in
// every lane. In the wide layout the step programs are inlined and
// rerolled (reroll.go) and emitted warp-cooperatively (wideFunc):
//
//   - every d-long array (the driver's state, the programs' inputs and
//     outputs, the loops' arrays and gathers) lives in the warp's part of
//     the block's shared memory, but for a loop's array only ever
//     accessed at the lane's own component, which is the lane's own
//     (wideprivate.go), and a gather of one array's run, read in place
//     (gatherRun);
//   - a rerolled loop over the components runs component c on lane
//     c mod 32 (for (gs_c = lane; gs_c < n; gs_c += 32)), between two
//     __syncwarp()s;
//   - a loop's carried chained sum (an error norm) becomes each lane's
//     partial sum and a butterfly of shuffles, after which every lane holds
//     the same bits (IEEE addition is commutative); any other carried
//     operand keeps its loop sequential, run alike by every lane;
//   - every other value (the controller's scalars) is computed by every
//     lane alike, replicated, as in lanes mode; lane 0 writes the scalars
//     of a function's outputs and of the results.
//
// The sums' order differs from the thread layout's, so results agree to
// rounding (the tests ask 1e-12 relative of the states after the same
// accepted and rejected steps), not bit for bit.

// WideMinDim is the smallest state the wide layout is meant for (package
// cuda's choice: its default from this d, Tuning.NoWide turns it off).
const WideMinDim = 64

// WideMinDimFactor is the smallest state of a Rosenbrock method (a plan
// whose steps factor W = I − γhJ: WideFactors) from which package cuda
// runs the wide layout by default (cuda.Tuning.NoWideStiff turns it off;
// on an H100 Pollution's gradient, d = 20, ran 2.65 times as fast as in
// the thread layout, the Brusselator's, d = 64, 12.4 times: cuda's
// BenchmarkGPUWide, the Rosenbrock rows). From d =
// 16 a Rosenbrock step is matrix-free (package ode's matrixFreeDim) and
// its factor's O(d³/3) updates per step, serial in a thread of the thread
// layout, split over 32 lanes; the thread layout's d×d local arrays
// (3.3 KB at d = 20, 33 KB at d = 64 per thread) live in local memory.
const WideMinDimFactor = 16

// WideFillMinDim and WideFillMinDimFactor are the smallest states from
// which package cuda runs the wide layout by default, in place of
// WideMinDim (an explicit method) and WideMinDimFactor (a Rosenbrock
// method: WideFactors), for a job whose trajectories, one thread each,
// would not fill the device (ThreadsFillDevice false: fewer than
// LanesThreadFill per multiprocessor), where the thread layout runs about
// a warp per multiprocessor or less (n = 4096 on an H100: 128 warps for
// 132) and a warp per trajectory puts 32 times as many threads to work.
// Zero turns the rule off (the thresholds apply at every n); a value at or
// above the default threshold changes nothing. Never with tile sums
// (cuda-multi), whose layout does not depend on a job's size.
//
// Set from the device's measure (package cuda's BenchmarkGPULayoutFill,
// gradient with the record, kernels, H100, session 39; thread against
// wide layout at n = 1,024, 4,096, 16,384, 65,536): HIRES (d = 8,
// Rodas5P) 82.9 / 92.3 / 214.3 / 660.9 ms against 20.0 / 52.7 / 186.6 /
// 713.7 (wide 4.1×, 1.75×, 1.15× faster until the threads fill the
// device, 0.93× after); Robertson (d = 3) 1.71 / 1.80 / 3.99 / 15.7
// against 1.66 / 6.46 / 25.7 / 100.5 (wide slower from n = 4096);
// Lorenz-96 with d = 16 (Tsit5) 1.27 / 1.29 / 3.53 / 14.3 against 0.23 /
// 0.52 / 1.96 / 7.53 (wide faster at every n: with one problem measured,
// only the rule below uses it); Pollution (d = 20, wide by default)
// 107.7 / 151.9 / 332.7 / 869.5 against 14.5 / 57.7 / 228.0 / 898.0.
// Hence d ≥ 8 for a Rosenbrock method and d ≥ 16 for an explicit one
// where the threads do not fill the device; states between 3 and 8 were
// not measured.
const (
	WideFillMinDim       = 16
	WideFillMinDimFactor = 8
)

// WideWarps is the number of warps of a wide-layout block (at most),
// where a trajectory runs on a warp or fewer lanes.
const WideWarps = 2

// WideMaxTrajWarps is the most warps a trajectory of the wide layout
// runs on (Config.WideTrajWarps).
const WideMaxTrajWarps = 8

// WideExchange returns the reals at the start of a wide-layout block's
// shared memory that a trajectory on warps warps (Config.WideTrajWarps)
// exchanges its warps' partial sums and single values through
// (GS_WX: wideWarpsHelper), before the trajectory's part; none on a warp.
func WideExchange(warps int) int {
	if warps <= 1 {
		return 0
	}
	return warps
}

// WideTrajLaunch returns the threads, threads per block and bytes of
// dynamic shared memory of a wide-layout launch of n trajectories on
// warps warps each (Config.WideTrajWarps above 1), a block a trajectory
// (its barriers are the block's), whose block takes perTraj bytes of
// shared memory (KernelInfo.WideShared: the trajectory's part and its
// exchange slots).
func WideTrajLaunch(n, warps, perTraj int) (threads, block, shmem int) {
	return n * warps * LaneWidth, warps * LaneWidth, perTraj
}

// WideTrajOccupancy returns the trajectories of warps warps each (a
// block each) a multiprocessor runs at once by its shared memory (limit
// + 1 KiB, a block's reserve each), each taking perTraj bytes (the
// trajectory's part of a warp's WideSharedPerWarp plus its exchange
// slots), at most wideSMBlocks blocks and wideSMWarps warps; 0 where
// limit is 0, unknown, or no block fits.
func WideTrajOccupancy(warps, perTraj, limit int) int {
	if limit <= 0 || perTraj > limit {
		return 0
	}
	return min((limit+wideBlockReserve)/(perTraj+wideBlockReserve), wideSMBlocks, wideSMWarps/max(warps, 1))
}

// wideSMBlocks and wideSMWarps are the most blocks and warps a
// multiprocessor runs at once (compute capability 8.0 and 9.0).
const (
	wideSMBlocks = 32
	wideSMWarps  = 64
)

// wideBlockReserve is the shared memory a multiprocessor reserves per
// block (1 KiB on the H100), and the multiprocessor's shared memory is
// taken as a block's limit plus one reserve (227 + 1 KiB).
const wideBlockReserve = 1 << 10

// WideLaunch returns the threads, threads per block and bytes of dynamic
// shared memory of a wide-layout launch of n trajectories whose warps
// each use perWarp bytes of shared memory: a warp per trajectory, blocks
// of WideWarps warps or fewer, as many as put the most warps on a
// multiprocessor whose shared memory is limit + 1 KiB (limit: a device's
// per-block limit; 0: none, WideWarps): a gradient's 61 KB warps (d =
// 256) run three to a multiprocessor in blocks of one, two in blocks of
// two. A trajectory takes lanes lanes (Config.WideLanesOf: 32, or a
// power of two below, 32 / lanes trajectories a warp; perWarp is then
// the warp's, its groups' parts together).
func WideLaunch(n, lanes, perWarp, limit int) (threads, block, shmem int) {
	warps, _ := WideOccupancy(perWarp, limit)
	return (n*lanes + LaneWidth - 1) / LaneWidth * LaneWidth, warps * LaneWidth, warps * perWarp
}

// WideOccupancy returns the warps of a wide-layout block (WideLaunch's
// rule) and the warps a multiprocessor runs at once by its shared memory
// (0 where limit is 0, unknown, or no block fits), for warps of perWarp
// bytes of shared memory each on a device whose blocks may take limit
// bytes.
func WideOccupancy(perWarp, limit int) (warps, on int) {
	warps = WideWarps
	if limit <= 0 {
		return warps, 0
	}
	for w := WideWarps; w >= 1; w-- {
		if w*perWarp > limit {
			continue
		}
		if k := w * ((limit + wideBlockReserve) / (w*perWarp + wideBlockReserve)); k > on {
			warps, on = w, k
		}
	}
	if on == 0 {
		warps = 1
	}
	return warps, on
}

// WideAllowed reports whether kernel v of plan pl can run in the wide
// layout: an adaptive solve, record, loss or gradient with the record of
// an explicit or a Rosenbrock method (its factor of W in the warp's
// shared memory: widelu.go), in float64, without events, its save times
// (if any) read from the continuous extension (Settings.Saves =
// SaveInterpolate). The wide layout runs the trial and the dense step
// apart, forward and reverse, where the thread layout may share them
// (kernelPlan.ShareFwd, ShareRev).
func WideAllowed(v Config, pl *ode.Plan, prec Precision) bool {
	return wideCheck(v, pl, prec) == nil
}

// The reasons wideCheck gives (made once: WideAllowed runs on every
// call's choice of layout).
var (
	errWideKind      = errors.New("cuda: the wide layout runs adaptive solves, records, losses and gradients with the record only (no given mesh, events or tile sums)")
	errWideFloat64   = errors.New("cuda: the wide layout runs in float64 only")
	errWidePlan      = errors.New("cuda: the wide layout needs the plan's Init, Trial and Control")
	errWideDenseSave = errors.New("cuda: the wide layout reads save times from the continuous extension only (Settings.Saves = SaveInterpolate)")
	errWideWarps     = errors.New("cuda: the wide layout runs a trajectory on several warps (Config.WideTrajWarps) for explicit methods only, without the blocked element split (Config.WideBlocked): a Rosenbrock method's factors and the blocked split's neighbours take a warp's shuffles")
)

// wideCheck returns why kernel v of pl cannot run in the wide layout, or
// nil.
func wideCheck(v Config, pl *ode.Plan, prec Precision) error {
	switch {
	case !v.Adaptive || v.Events || v.Lanes || v.TileSums:
		return errWideKind
	case prec != Float64:
		return errWideFloat64
	case pl.Trial == nil || pl.Init == nil || pl.Control == nil:
		return errWidePlan
	case v.Saves > 0 && pl.DenseStep == nil:
		return errWideDenseSave
	case v.WideWarpsOf() > 1 && (WideFactors(pl) || v.WideBlocked && !v.WideShared):
		return errWideWarps
	}
	return nil
}

// WideFactors reports whether plan pl's steps factor a matrix (a
// Rosenbrock method: ops.IsFactor ops in its Trial), which the wide
// layout keeps in the warp's shared memory (widelu.go).
func WideFactors(pl *ode.Plan) bool {
	if pl.Trial == nil {
		return false
	}
	for _, x := range pl.Trial.Values {
		if ops.IsFactor(x.Op) {
			return true
		}
	}
	return false
}

// wideLayout is a warp's part of the block's shared memory in the wide
// layout, in reals from the part's start (kernelPlan.W; wide.cuh).
//
// The forward loop: the trial's inputs TI (t, h, y[D], p[NP], k1[D] with
// FSAL: y, p and k1 are the driver's own), its outputs TO (y⁺[D], err[D],
// k_s[D] with FSAL, hρ), the controller's own inputs CI (state[NumState],
// t1; its y, y⁺, err and hρ it reads in TI and TO: inputs) and outputs
// CO (state'[NumState], accept, status), with save times the dense
// step's outputs DO (y⁺[D], w[DenseTerms·D]; its inputs are TI's first),
// and the scratch SCR of the programs' arrays (the largest of the
// functions'). Init's inputs t0 and t1 use CI's place (y and p are TI's)
// and its outputs (h, last, f0[D]) TO's.
//
// A gradient's reverse sweep (Rev set) reuses the space from the start:
// the reverse step's inputs RI (t, h, y[D], p[NP], λ[D], then gp[NP], or
// with save times (DRev) w̄[DenseTerms·D] and gp[NP] for the dense step's
// reverse: y and p where TI has them), its outputs RO (λ'[D], gp'[NP],
// gs[NS]), the trajectory's gp GP[NP] and sum GA of gs[NS], and the
// steps' scratch RSCR. With PrivOut the reverse steps write λ' into the
// lane's own storage (the driver's gs_real array of ⌈D/32⌉ rows, entry c
// at row c / 32 of lane c mod 32), not into RO, which then holds gp' and
// gs only: the driver reads λ' at each lane's own components alone.
type wideLayout struct {
	TI, TO, CI, CO, DO, SCR int
	RO, GP, GA, RSCR        int
	Len                     int
	// RevLen is the reverse sweep's part of Len (RSCR and the reverse
	// steps' scratch; 0 without a gradient): Len is the larger of it and
	// the forward loop's.
	RevLen int
	// PrivOut: the reverse steps' λ' is the lanes' own (a gradient's
	// kernel without Config.WideShared).
	PrivOut bool
	// RecY: the reverse steps read their input y from the record's row
	// (the stored state the step starts from, in global memory), not
	// from RI, which then holds t, h, p[NP], λ[D] and gp[NP] (with save
	// times w̄ before gp), d reals less (Config.WideRecordY). The loss
	// VJP before the first reverse step reads the final state and p
	// where the forward loop left them (TI's y and p), and p moves then
	// to its place in RI.
	RecY bool
	// Copies keeps the controller's inputs y, y⁺, err and hρ and Init's
	// y and p as copies in CI (the layout before wideLayout.inputs; with
	// every array shared, Config.WideShared: the layout as it was).
	Copies bool
	// Init, Trial, Control, Dense, Rev and DRev are the names of the
	// programs' wide functions: Dense (with save times) of DenseStep, Rev
	// (a gradient) of Reverse, DRev (a gradient with save times) of
	// DenseStepReverse; "" where the kernel has none.
	Init, Trial, Control, Dense, Rev, DRev string
	// Probe is the name of the wide function of the plan's stability
	// probe (ode.Plan.Probe; Config.Probe), "" where the kernel has none.
	// Its inputs t, h, y and p are the trial's (TI), v[D] at PV, rprev,
	// u and accept at CI's first three places (the controller's inputs,
	// read before the probe runs); its outputs v'[D], rprev', u' and
	// stiff at PO.
	Probe string
	// PV (with Probe) is the probe's vector v[D], kept between the
	// probed trials, after the forward loop's other arrays, before SCR;
	// PO its outputs (D + 3 reals) in SCR, after the probe's own scratch
	// (the scratch grows only where the other forward functions' is
	// smaller than the two together).
	PV, PO int
}

// wideKind is what of a kernel shapes its wide layout: a gradient, save
// times, and the programs' scratch: the forward functions' and the
// reverse steps'.
type wideKind struct {
	grad, saves, copies bool
	// privOut: the reverse steps write λ' to the lanes' own storage
	// (wideLayout.PrivOut).
	privOut bool
	// recY: the reverse steps read y from the record's row
	// (wideLayout.RecY).
	recY bool
	// probe: the forward loop runs the plan's stability probe
	// (wideLayout.Probe).
	probe               bool
	scratch, revScratch int
}

// inputs returns the places, from the warp's part's start, of the
// per-trajectory inputs of plan pl's Init (control false) or Control
// program p, which read the driver's arrays where they are rather than
// copies (wideFunc's pos): Init's t0 and t1 at CI, y and p at the
// trial's inputs; Control's state and t1 at CI, y at the trial's inputs,
// y⁺, err and hρ at the trial's outputs. It returns an error where p's
// inputs are not those.
func (w wideLayout) inputs(pl *ode.Plan, p *tape.Program, control bool) ([]int, error) {
	d, np := pl.Dim, pl.Params
	seq := func(from, n int) []int {
		out := make([]int, n)
		for c := range out {
			out[c] = from + c
		}
		return out
	}
	var pos []int
	if control {
		pos = append(seq(w.CI, ode.NumState+1), seq(2, d)...) // state, t1; y
		pos = append(pos, seq(w.TO, 2*d)...)                  // y⁺, err
		pos = append(pos, w.TO+(2+B2i(pl.FSAL))*d)            // hρ
	} else {
		pos = append(seq(w.CI, 2), seq(2, d+np)...) // t0, t1; y, p
	}
	own := 0
	for _, x := range p.Inputs {
		if !x.Shared {
			own++
		}
	}
	if own != len(pos) {
		return nil, fmt.Errorf("cuda: the wide layout: program %s has %d per-trajectory inputs, want %d", p.Name, own, len(pos))
	}
	return pos, nil
}

// probeInputs returns the places, from the warp's part's start, of the
// per-trajectory inputs of plan pl's stability probe p (ode.Plan.Probe:
// t, h, y[D], p[NP], v[D], rprev, u, accept): t, h, y and p the trial's
// (TI), v at PV, rprev, u and accept at CI. It returns an error where
// p's inputs are not those.
func (w wideLayout) probeInputs(pl *ode.Plan, p *tape.Program) ([]int, error) {
	d, np := pl.Dim, pl.Params
	var pos []int
	for j := 0; j < 2+d+np; j++ {
		pos = append(pos, j)
	}
	for j := 0; j < d; j++ {
		pos = append(pos, w.PV+j)
	}
	pos = append(pos, w.CI, w.CI+1, w.CI+2)
	own := 0
	for _, x := range p.Inputs {
		if !x.Shared {
			own++
		}
	}
	if own != len(pos) {
		return nil, fmt.Errorf("cuda: the wide layout: probe %s has %d per-trajectory inputs, want %d", p.Name, own, len(pos))
	}
	return pos, nil
}

// newWideLayout returns the layout of plan pl's kernel of kind k.
func newWideLayout(pl *ode.Plan, k wideKind) wideLayout {
	d, np, ns := pl.Dim, pl.Params, pl.Shared
	f := B2i(pl.FSAL)
	dw := 0 // the dense step's coefficients
	if k.saves {
		dw = pl.DenseTerms * d
	}
	var w wideLayout
	w.TO = 2 + d + np + f*d
	w.CI = w.TO + max((2+f)*d+1, 2+d)
	w.CO = w.CI + ode.NumState + 1
	if k.copies {
		w.CO = w.CI + max(ode.NumState+3*d+2, 2+d+np)
	}
	w.Copies = k.copies
	w.DO = w.CO + ode.NumState + 2
	w.SCR = w.DO
	if k.saves {
		w.SCR += d + dw
	}
	if k.probe {
		w.PV = w.SCR
		w.SCR += d
	}
	w.Len = w.SCR + k.scratch
	if k.grad {
		w.PrivOut, w.RecY = k.privOut, k.recY
		w.RO = 2 + (2-B2i(k.recY))*d + 2*np + dw
		w.GP = w.RO + d*(1-B2i(k.privOut)) + np + ns
		w.GA = w.GP + np
		w.RSCR = w.GA + ns
		scr := k.revScratch
		if k.recY {
			scr = max(scr, d+np) // the loss VJP's dL/dy and dL/dp (wide.cuh)
		}
		w.RevLen = w.RSCR + scr
		w.Len = max(w.Len, w.RevLen)
	}
	return w
}

// WideSharedPerWarp returns the shared memory of one warp of a wide
// kernel of plan pl in bytes (float64): of a gradient's kernel (grad) or
// another, with save times (saves) or not. The forward loop takes 2 +
// (1+f)d + np reals for the trial's inputs (f = 1 with FSAL), (2+f)d + 1
// for its outputs, NumState + 1 for the controller's own inputs (it
// reads y, y⁺, err and hρ in the trial's) and NumState + 2 for its
// outputs, (3+2f)d + np + 2·NumState + 6 in all, with save times (1+m)d
// more for the dense
// step's outputs (m = DenseTerms), plus the programs' scratch (the most
// reals of arrays live at once in one of Init, Trial, Control and
// DenseStep: for Lorenz-96 with Tsit5 about 8d); a gradient's reverse
// sweep 2 + 3d + 4np + 2ns, with save times md more, plus the reverse
// steps' scratch (Lorenz-96 with Tsit5: about 22d), and the kernel the
// larger of the two; all times 8. It returns an error where the plan's
// programs do not emit.
//
// The programs' arrays that only the lane of their component reads
// (wideprivate.go) take no shared memory: the scratch counts the others
// only (Lorenz-96 with Tsit5: the stages' derivatives are the lanes'
// own). WideSharedPerWarpAll counts every array, as Config.WideShared
// places them.
func WideSharedPerWarp(pl *ode.Plan, grad, saves bool) (int, error) {
	return (&StepPrograms{plan: pl}).WideSharedPerWarp(grad, saves)
}

// WideSharedPerWarpAll is WideSharedPerWarp of a kernel with every array
// in shared memory (Config.WideShared).
func WideSharedPerWarpAll(pl *ode.Plan, grad, saves bool) (int, error) {
	return (&StepPrograms{plan: pl}).WideSharedPerWarpOf(grad, saves, true)
}

// WideSharedPerWarp is the package function WideSharedPerWarp of sp's
// plan. It emits the kernel's wide functions (seconds for the reverse
// steps of the largest stiff problems) once and keeps them in sp, for
// KernelSource to use rather than emit them again.
func (sp *StepPrograms) WideSharedPerWarp(grad, saves bool) (int, error) {
	return sp.WideSharedPerWarpOf(grad, saves, false)
}

// WideSharedPerWarpOf is WideSharedPerWarp, or with every array in shared
// memory (all: Config.WideShared) WideSharedPerWarpAll, of sp's plan.
func (sp *StepPrograms) WideSharedPerWarpOf(grad, saves, all bool) (int, error) {
	return sp.WideSharedPerWarpScalars(grad, saves, all, 0)
}

// WideSharedPerWarpScalars is WideSharedPerWarpOf of the kernels with a
// budget of scalars replicated values in registers (Config.WideScalars:
// 0 the default, negative none), whose slots take shared memory too.
func (sp *StepPrograms) WideSharedPerWarpScalars(grad, saves, all bool, scalars int) (int, error) {
	r := sp.wide(wideVariantOf(Config{Grad: grad, Saves: B2i(saves), WideShared: all, WideScalars: scalars}, sp.plan))
	return 8 * r.w.Len, r.err
}

// WideSharedPerWarpFor is WideSharedPerWarp of kernel v's wide
// functions: its Grad, Saves, WideShared, WideScalars, WideMinSplit,
// WideRecordY, WideOutInPlace and Probe (the stability probe's function
// and arrays).
func (sp *StepPrograms) WideSharedPerWarpFor(v Config) (int, error) {
	r := sp.wide(wideVariantOf(Config{Grad: v.Grad, Saves: v.Saves, WideShared: v.WideShared, WideScalars: v.WideScalars, WideMinSplit: v.WideMinSplit, WideRecordY: v.WideRecordY, WideOutInPlace: v.WideOutInPlace, Probe: v.Probe}, sp.plan))
	return 8 * r.w.Len, r.err
}

// wideRecord is the wide functions of a kernel of one kind (a gradient's
// or another's, with save times or not): wideFuncs's layout and error,
// and the unit that holds them alone.
type wideRecord struct {
	w   wideLayout
	err error
	src *Source
}

// wideVariant is what of a kernel selects its wide functions: a
// gradient's or another's (grad), with save times or not (saves), with
// every array in shared memory (all: Config.WideShared) or not, with the
// private arrays' loops unrolled over their rows (rows: Config.WideRows)
// or not.
//
// scalars is the budget of replicated values in registers
// (Config.WideScalars, resolved by wideScalarsOf: -1 for none).
type wideVariant struct {
	grad, saves, all, rows bool
	// tables keeps every gather of one array read through an index
	// table (Config.WideTables), rotations included.
	tables bool
	// rolled keeps a window loop's repetitions a rolled loop
	// (Config.WideRolled).
	rolled bool
	// blocked runs the loops it can in the blocked element split
	// (Config.WideBlocked; wideblock.go).
	blocked bool
	// recY reads the reverse steps' y from the record's row
	// (Config.WideRecordY).
	recY bool
	// outPlace places the arrays returned whole at their outputs
	// (Config.WideOutInPlace).
	outPlace bool
	// cycWindows keeps the window loops cyclic where blocked
	// (Config.WideWindowsCyclic).
	cycWindows bool
	scalars    int
	// minSplit is Config.WideMinSplit, resolved (wideMinSplitOf; 0: none).
	minSplit int
	// denseLU is Config.WideDenseLU.
	denseLU bool
	// pivots is Config.WidePivots.
	pivots PivotSeq
	// warps is Config.WideWarpsOf where above 1, else 0.
	warps int
	// probe is Config.Probe (the plan's stability probe among the
	// forward functions).
	probe bool
}

// wideVariantOf returns kernel v's wide variant, of plan pl.
func wideVariantOf(v Config, pl *ode.Plan) wideVariant {
	return wideVariant{grad: v.Grad, saves: v.Saves > 0, all: v.WideShared, rows: v.WideRows && !v.WideShared, tables: v.WideTables, rolled: v.WideRolled, blocked: v.WideBlocked && !v.WideShared,
		recY: v.WideRecordY && v.Grad && !v.WideShared && !v.WideBlocked, outPlace: v.WideOutInPlace && !v.WideShared && !v.WideBlocked, cycWindows: v.WideBlocked && v.WideWindowsCyclic && !v.WideShared,
		scalars: wideScalarsOf(v.WideScalars), minSplit: wideMinSplitOf(v.WideMinSplit, pl), denseLU: v.WideDenseLU, pivots: v.WidePivots, warps: wideWarpsOf(v), probe: v.Probe && pl.Probe != nil}
}

// wideWarpsOf returns kernel v's warps a trajectory where above 1
// (Config.WideWarpsOf), else 0 (wideVariant.warps).
func wideWarpsOf(v Config) int {
	if w := v.WideWarpsOf(); w > 1 {
		return w
	}
	return 0
}

// DefaultWideMinSplit is Config.WideMinSplit's default in a Rosenbrock
// method's kernels (WideFactors) of a system of WideSplitMinDim
// components or more; other kernels keep every run a loop. On an H100
// (session 44, package cuda's BenchmarkGPUWideSplit, n = 4096, the
// gpu-large suite's shapes, three rounds) replicating the runs shorter
// than 16 made Pollution's (d = 20) Rodas5P gradient kernel 56.4 → 39.0
// ms (shared memory a warp 14,256 → 13,544 B: 16 warps a multiprocessor,
// n in two rounds, not three; a reverse step's __syncwarp()s 1,002 →
// 352) and HIRES's (d = 8, every loop of 8 components or fewer, all of
// it then replicated) 43.1 → 46.7 ms. An explicit method's kernels
// (Lorenz-96's: regular loops over d) keep their statements independent
// of d (TestRerolledSize), which replicated short runs would not.
const (
	DefaultWideMinSplit = 16
	WideSplitMinDim     = 16
)

// wideMinSplitOf resolves Config.WideMinSplit w of plan pl: w where
// positive, 0 (every run a loop) where negative, and where 0
// DefaultWideMinSplit for a Rosenbrock method (WideFactors) from
// WideSplitMinDim components, else 0.
func wideMinSplitOf(w int, pl *ode.Plan) int {
	switch {
	case w > 0:
		return w
	case w < 0 || pl.Dim < WideSplitMinDim || !WideFactors(pl):
		return 0
	}
	return DefaultWideMinSplit
}

// wide returns the record of sp's plan's wide functions of variant k,
// emitted on first use.
func (sp *StepPrograms) wide(k wideVariant) *wideRecord {
	k.scalars = wideScalarsOf(k.scalars)
	sp.wideMu.Lock()
	o := sp.wideOnce[k]
	if o == nil {
		o = &wideOnce{}
		if sp.wideOnce == nil {
			sp.wideOnce = map[wideVariant]*wideOnce{}
		}
		sp.wideOnce[k] = o
	}
	sp.wideMu.Unlock()
	o.once.Do(func() {
		src := NewSource(&SourceSettings{Precision: Float64})
		src.reroll = true
		src.wideShared, src.wideRows, src.wideScalars, src.wideMinSplit, src.wideDenseLU, src.wideTables, src.wideRolled = k.all, k.rows, k.scalars, k.minSplit, k.denseLU, k.tables, k.rolled
		src.widePivots = k.pivots
		src.wideBlocked, src.wideRecY, src.wideOutPlace, src.wideWindowsCyclic = k.blocked, k.recY, k.outPlace, k.cycWindows
		src.wideWarps, src.wideProbe = k.warps, k.probe
		w, err := src.wideFuncs(sp.plan, k.grad, k.saves)
		o.rec = &wideRecord{w: w, err: err, src: src}
	})
	return o.rec
}

// wideOnce emits one variant's wide functions once (StepPrograms.wide).
type wideOnce struct {
	once sync.Once
	rec  *wideRecord
}

// wideFuncsOf is s.wideFuncs of sp's plan for kernel v (its
// wideVariant), taken from sp's record (StepPrograms.wide) where s holds
// nothing yet and emits as the record's unit does: the same functions,
// names, helpers and defines.
func (s *Source) wideFuncsOf(sp *StepPrograms, v Config) (wideLayout, error) {
	k := wideVariantOf(v, sp.plan)
	if !s.blank() || s.prec != Float64 || s.Lanes || s.Tile || s.Stage || !s.reroll {
		s.wideShared, s.wideRows, s.wideScalars, s.wideMinSplit, s.wideDenseLU, s.wideTables, s.wideRolled = k.all, k.rows, k.scalars, k.minSplit, k.denseLU, k.tables, k.rolled
		s.widePivots = k.pivots
		s.wideBlocked, s.wideRecY, s.wideOutPlace, s.wideWindowsCyclic = k.blocked, k.recY, k.outPlace, k.cycWindows
		s.wideWarps, s.wideProbe = k.warps, k.probe
		return s.wideFuncs(sp.plan, k.grad, k.saves)
	}
	r := sp.wide(k)
	if r.err != nil {
		return wideLayout{}, r.err
	}
	s.adopt(r.src)
	return r.w, nil
}

// blank reports whether s holds no code, names or helpers yet (its
// settings and Defines aside).
func (s *Source) blank() bool {
	return len(s.parts) == 0 && len(s.emitted) == 0 && len(s.helpers) == 0 && len(s.names) == 0 &&
		len(s.Funcs) == 0 && len(s.hashes) == 0 && len(s.stageTop) == 0 && len(s.outlined) == 0
}

// adopt makes blank unit s hold what unit o holds, as if s had emitted
// it: o's helpers, its Defines that s lacks (luDim's), names, functions
// and code.
func (s *Source) adopt(o *Source) {
	for _, h := range o.helpers {
		s.helper(h)
	}
	for _, d := range o.Defines {
		if !slices.Contains(s.Defines, d) {
			s.Defines = append(s.Defines, d)
		}
	}
	maps.Copy(s.names, o.names)
	maps.Copy(s.Funcs, o.Funcs)
	maps.Copy(s.hashes, o.hashes)
	maps.Copy(s.stageTop, o.stageTop)
	if o.outlined != nil {
		s.outlined = maps.Clone(o.outlined)
	}
	s.parts = append(s.parts, o.parts...)
	s.emitted = append(s.emitted, o.emitted...)
}

// wideFuncs emits the wide functions of plan pl's kernel, a gradient's
// (grad) or another's, with save times (saves) or not, and returns
// their layout.
func (s *Source) wideFuncs(pl *ode.Plan, grad, saves bool) (wideLayout, error) {
	k := wideKind{grad: grad, saves: saves, copies: s.wideShared, privOut: grad && !s.wideShared}
	k.recY = k.privOut && s.wideRecY && !s.wideBlocked
	k.probe = s.wideProbe && pl.Probe != nil
	fwd := []*tape.Program{pl.Init, pl.Trial, pl.Control}
	if saves {
		fwd = append(fwd, pl.DenseStep)
	}
	probeAt := -1 // the probe's index in fwd (k.probe)
	if k.probe {
		probeAt = len(fwd)
		fwd = append(fwd, pl.Probe)
	}
	var rev []*tape.Program
	if grad {
		r, err := pl.Reverse()
		if err != nil {
			return wideLayout{}, err
		}
		rev = append(rev, r)
		if saves {
			if r, err = pl.DenseStepReverse(); err != nil {
				return wideLayout{}, err
			}
			rev = append(rev, r)
		}
	}
	names := make([]string, 7)
	probeScr := 0                // the probe's scratch (its outputs follow it in SCR)
	base := newWideLayout(pl, k) // the driver's arrays: no scratch yet
	for m, p := range append(fwd, rev...) {
		if p == nil {
			return wideLayout{}, fmt.Errorf("cuda: the wide layout: plan %s lacks a program", pl.Method)
		}
		var pos []int
		var err error
		if (m == 0 || m == 2) && !k.copies { // Init and Control read the driver's arrays
			if pos, err = base.inputs(pl, p, m == 2); err != nil {
				return wideLayout{}, err
			}
		}
		if m == probeAt {
			if pos, err = base.probeInputs(pl, p); err != nil {
				return wideLayout{}, err
			}
		}
		// A Rosenbrock step's gathers stay copies: read in place they kept
		// larger arrays live (the Brusselator's reverse with save times:
		// 76,024 → 78,856 B a warp).
		privOut := 0 // the reverse steps' λ' outputs, the lanes' own
		if m >= len(fwd) && k.privOut {
			if len(p.Outputs) < pl.Dim {
				return wideLayout{}, fmt.Errorf("cuda: the wide layout: reverse step %s has %d outputs, fewer than the state's %d", p.Name, len(p.Outputs), pl.Dim)
			}
			privOut = pl.Dim
		}
		var rec inSpan
		if m >= len(fwd) && k.recY {
			if pos, err = recInputs(p, pl.Dim); err != nil {
				return wideLayout{}, err
			}
			rec = inSpan{2, pl.Dim}
		}
		name, scr, err := s.wideFunc(p, pos, WideFactors(pl), privOut, rec)
		if err != nil {
			return wideLayout{}, err
		}
		switch {
		case m == probeAt:
			probeScr = scr
		case m < len(fwd):
			k.scratch = max(k.scratch, scr)
		default:
			k.revScratch = max(k.revScratch, scr)
		}
		at := m
		switch {
		case m == probeAt:
			at = 6
		case m >= len(fwd):
			at = 4 + m - len(fwd)
		}
		names[at] = name
	}
	if k.probe {
		k.scratch = max(k.scratch, probeScr+pl.Dim+3)
	}
	w := newWideLayout(pl, k)
	if k.probe {
		w.PO = w.SCR + probeScr
	}
	w.Init, w.Trial, w.Control, w.Dense, w.Rev, w.DRev, w.Probe = names[0], names[1], names[2], names[3], names[4], names[5], names[6]
	return w, nil
}

// recInputs returns the places in gs_a of reverse step p's
// per-trajectory inputs where it reads y from the record's row
// (wideLayout.RecY): t and h first, y (inputs 2 … d+1) in no place of
// gs_a (-1: the emitter reads them from recName), the others after t
// and h in order. It returns an error where p has fewer than d + 2.
func recInputs(p *tape.Program, d int) ([]int, error) {
	own := 0
	for _, x := range p.Inputs {
		if !x.Shared {
			own++
		}
	}
	if own < d+2 {
		return nil, fmt.Errorf("cuda: the wide layout: reverse step %s has %d per-trajectory inputs, fewer than t, h and the state's %d", p.Name, own, d)
	}
	pos := make([]int, own)
	for j := range pos {
		switch {
		case j < 2:
			pos[j] = j
		case j < 2+d:
			pos[j] = -1
		default:
			pos[j] = j - d
		}
	}
	return pos, nil
}

// wideTables is wideHelper's and wideWarpsHelper's part for the
// gathers: where their index tables live, and the rotation computed in
// place of one.
const wideTables = `#ifdef GS_CUDA
#define GS_WIDE_TABLE __device__ const
#else
#define GS_WIDE_TABLE static const
#endif
// GS_WROT(c, b, k, n) is entry c of a gather whose index table would be
// b + (c + k) mod n (wide.go's rotation), 0 <= c, k < n: the index
// computed in place of the table's load.
#define GS_WROT(c, b, k, n) ((b) + ((c) + (k) >= (n) ? (c) + (k) - (n) : (c) + (k)))
`

// wideHelper defines what the wide functions use: the lane and the lanes'
// stride (one lane on the host), the lanes' sum and the qualifier of the
// gathers' index tables.
const wideHelper = `// The wide layout (wide.go): component loops run component c on lane
// c mod GS_WSTRIDE; gs_wide_sum sums a value over the trajectory's lanes
// (a butterfly: every lane gets the same bits). Defined (Config.WideLanes),
// GS_WIDE_LANES runs a trajectory on that many consecutive lanes of a
// warp (a power of two below 32: 32 / GS_WIDE_LANES trajectories a warp),
// its lanes' collectives and __syncwarp()s on its lanes' mask GS_WMASK.
#ifdef GS_WARPS
#ifdef GS_WIDE_LANES
#define GS_WLANE ((int)(threadIdx.x & (GS_WIDE_LANES - 1)))
#define GS_WSTRIDE GS_WIDE_LANES
#define GS_WMASK ((0xffffffffu >> (32 - GS_WIDE_LANES)) << (threadIdx.x & (32 - GS_WIDE_LANES)))
#undef GS_SYNCWARP
#define GS_SYNCWARP() __syncwarp(GS_WMASK)
#else
#define GS_WLANE ((int)(threadIdx.x & 31))
#define GS_WSTRIDE 32
#define GS_WMASK 0xffffffffu
#endif
#else
#define GS_WLANE 0
#define GS_WSTRIDE 1
#endif
// A lane-private array (wideprivate.go) holds component c at row
// c / GS_WSTRIDE of its GS_WPRIV rows per 32 components.
#define GS_WPRIV (32 / GS_WSTRIDE)
` + wideTables + `GS_DEVICE gs_real gs_wide_sum(gs_real x) {
#ifdef GS_WARPS
  for (int o = GS_WSTRIDE / 2; o > 0; o >>= 1) x = x + __shfl_xor_sync(GS_WMASK, x, o);
#endif
  return x;
}
// A chained sum split over the lanes keeps GS_WSUMS partial sums a lane,
// one per lane of a warp whose components it runs: component c adds to
// slot (c / GS_WSTRIDE) mod GS_WSUMS, the partial sum of lane c mod 32 of
// a warp per trajectory; gs_wide_sums adds the slots in the butterfly's
// order (offsets 16 ... GS_WSTRIDE within the lane, then the shuffles),
// so that a trajectory on fewer lanes sums in a warp's order, bit for
// bit. One slot a lane on a warp and on the host's one thread. The slots
// are read and written with constant indices (registers).
#ifdef GS_WARPS
#define GS_WSUMS (32 / GS_WSTRIDE)
#else
#define GS_WSUMS 1
#endif
GS_DEVICE void gs_wsum_zero(gs_real* x) {
#pragma unroll
  for (int q = 0; q < GS_WSUMS; q++) x[q] = (gs_real)-0.0;
}
GS_DEVICE gs_real gs_wsum_get(const gs_real* x, int c) {
  const int s = (c / GS_WSTRIDE) & (GS_WSUMS - 1);
  gs_real r = x[0];
#pragma unroll
  for (int q = 1; q < GS_WSUMS; q++)
    if (q == s) r = x[q];
  return r;
}
GS_DEVICE void gs_wsum_set(gs_real* x, int c, gs_real v) {
  const int s = (c / GS_WSTRIDE) & (GS_WSUMS - 1);
#pragma unroll
  for (int q = 0; q < GS_WSUMS; q++)
    if (q == s) x[q] = v;
}
GS_DEVICE gs_real gs_wide_sums(gs_real* x) {
#pragma unroll
  for (int m = GS_WSUMS / 2; m > 0; m >>= 1)
#pragma unroll
    for (int q = 0; q < m; q++) x[q] = x[q] + x[q + m];
  return gs_wide_sum(x[0]);
}
// gs_wide_from returns lane l's x (of the trajectory's lanes) in every
// lane.
GS_DEVICE gs_real gs_wide_from(gs_real x, int l) {
#ifdef GS_WARPS
  return __shfl_sync(GS_WMASK, x, l, GS_WSTRIDE);
#else
  (void)l;
  return x;
#endif
}
`

// wideWarpsHelper is wideHelper for a trajectory on GS_WIDE_WARPS warps
// (Config.WideTrajWarps: a block a trajectory): the lanes are the
// block's threads, the component loops strided by 32 · GS_WIDE_WARPS,
// GS_SYNCWARP a barrier of the block (the functions' code is
// wideHelper's), the lanes' sums a warp's butterfly then the warps'
// sums through the block's exchange slots GS_WX (WideExchange: the
// first GS_WIDE_WARPS reals of its shared memory; on the simulated
// block, kerneltest.WarpSim, its own array), added by every thread in
// warp order, so that every thread holds the same bits.
const wideWarpsHelper = `// The wide layout (wide.go) on GS_WIDE_WARPS warps a trajectory, a block
// a trajectory (Config.WideTrajWarps): component loops run component c on
// thread c mod GS_WSTRIDE of the block; GS_SYNCWARP() is the block's
// barrier; gs_wide_sum sums a value over the block's threads (each warp's
// butterfly, then the warps' sums in warp order through the exchange
// slots GS_WX, the block's first GS_WIDE_WARPS reals: every thread gets
// the same bits).
#ifdef GS_WARPS
#define GS_WLANE ((int)(threadIdx.x & (32 * GS_WIDE_WARPS - 1)))
#define GS_WSTRIDE (32 * GS_WIDE_WARPS)
#define GS_WMASK 0xffffffffu
#undef GS_SYNCWARP
#ifdef GS_WARP_SIM
#define GS_SYNCWARP() gs_sim_syncthreads()
#define GS_WX gs_sim_wx
#else
#define GS_SYNCWARP() __syncthreads()
extern __shared__ gs_real gs_smem[];
#define GS_WX gs_smem
#endif
#else
#define GS_WLANE 0
#define GS_WSTRIDE 1
#endif
// A lane-private array (wideprivate.go) holds component c at row
// c / GS_WSTRIDE of its GS_WPRIV rows per 32 components (one: the
// thread's rows are fewer).
#ifdef GS_WARPS
#define GS_WPRIV 1
#else
#define GS_WPRIV 32
#endif
` + wideTables + `GS_DEVICE gs_real gs_wide_sum(gs_real x) {
#ifdef GS_WARPS
  for (int o = 16; o > 0; o >>= 1) x = x + __shfl_xor_sync(GS_WMASK, x, o);
  if ((threadIdx.x & 31) == 0) GS_WX[GS_WLANE >> 5] = x;
  GS_SYNCWARP();
  x = GS_WX[0];
  for (int w = 1; w < GS_WIDE_WARPS; w++) x = x + GS_WX[w];
  GS_SYNCWARP();  // every thread has read the slots
#endif
  return x;
}
// A chained sum split over the lanes keeps one partial sum a thread
// (GS_WSUMS slots, wideHelper's interface), summed by gs_wide_sums.
#define GS_WSUMS 1
GS_DEVICE void gs_wsum_zero(gs_real* x) { x[0] = (gs_real)-0.0; }
GS_DEVICE gs_real gs_wsum_get(const gs_real* x, int c) {
  (void)c;
  return x[0];
}
GS_DEVICE void gs_wsum_set(gs_real* x, int c, gs_real v) {
  (void)c;
  x[0] = v;
}
GS_DEVICE gs_real gs_wide_sums(gs_real* x) { return gs_wide_sum(x[0]); }
// gs_wide_from returns thread l's x (of the trajectory's threads) in
// every thread, through the exchange slots.
GS_DEVICE gs_real gs_wide_from(gs_real x, int l) {
#ifdef GS_WARPS
  if (GS_WLANE == l) GS_WX[0] = x;
  GS_SYNCWARP();
  x = GS_WX[0];
  GS_SYNCWARP();  // every thread has read the slot
#else
  (void)l;
#endif
  return x;
}
`

// wideFunc emits p, inlined, as a warp-cooperative function (see the
// wide layout above), its per-trajectory inputs in order in gs_a, or
// input j at gs_a[pos[j]] (pos not nil: wideLayout.inputs), its gathers
// copied into the scratch (noRuns) or read in place where they can be
// (gatherRun), and returns
// its name and the scratch it needs, in reals:
//
//	GS_FUNC void NAME(const gs_real* gs_sh, const gs_real* gs_a, gs_real* gs_o, gs_real* gs_w);
//
// gs_a holds p's per-trajectory inputs in order, gs_o receives its
// outputs in order, gs_w is the warp's scratch; all three in the warp's
// shared memory. Every lane of the warp calls it, after a __syncwarp()
// since gs_a was written; the outputs are visible to every lane when it
// returns.
func (s *Source) wideFunc(p *tape.Program, pos []int, noRuns bool, privOut int, rec inSpan) (string, int, error) {
	if s.wideWarps > 1 {
		s.helper(wideWarpsHelper)
	} else {
		s.helper(wideHelper)
	}
	in, err := tape.Inline(p)
	if err != nil {
		return "", 0, err
	}
	if err := in.Validate(); err != nil {
		return "", 0, err
	}
	name := s.newName(p.Name + ".wide")
	w := &wideEmitter{e: &emitter{src: s, p: in, name: name, inPos: pos, inRec: rec, minSplit: s.wideMinSplit}, noRuns: noRuns, privOut: privOut}
	code, scratch, err := w.emit()
	if err != nil {
		return "", 0, fmt.Errorf("cuda: program %s (wide): %w", p.Name, err)
	}

	s.addFunc(name, "GS_FUNC", code)
	return name, scratch, nil
}

// wideEmitter writes one wide function with an emitter of the thread
// layout's rerolled form: the same values, loops and operands, other
// statements around them.
type wideEmitter struct {
	e      *emitter
	tables strings.Builder // the gathers' index tables, before the function
	ntab   int
	ngath  int
	// order is the function's order of emission that loops index
	// (emitter.loopsOf).
	order []tape.ID
	// remat holds the arrays that may be recomputed where they are read
	// instead of kept (rematerialize), in the order of their loops.
	remat []wideRemat
	// noRuns copies every gather into the scratch (no gatherRun).
	noRuns bool
	// sparseLU holds the tags of the factors emitted in the sparse form
	// (wideSparseLU), whose solves then run it too.
	sparseLU map[tape.ID]string
	// privOut is the number of leading outputs (a reverse step's λ')
	// written to the lanes' own storage gs_po, output c at row
	// c / GS_WSTRIDE of the lane of c, rather than to gs_o, whose outputs
	// then start from output privOut (0: none; wideLayout.PrivOut).
	privOut int
	// blocked holds the block-private arrays of the function before
	// recomputation (ownArrays; Config.WideBlocked, wideblock.go).
	blocked map[string]bool
}

// wideRemat is a loop's array that may be recomputed where it is read:
// its name, its body position's value as an expression of the index
// @i@, and the statement that stores it.
type wideRemat struct {
	name, expr, store string
}

// offMark is the placeholder of an array's offset in the scratch, set
// once the arrays' lifetimes are known (allocate).
func offMark(name string) string { return "@off:" + name + "@" }

// emit writes the function and returns its code and scratch (the
// shared memory's part). Unless the unit keeps every array in shared
// memory (Source.wideShared: the layout as it was, source for source),
// the arrays only ever accessed at the lane's own component are the
// lane's own (wideprivate.go), an array read at other components is not
// recomputed from them where it is read (which would read them at other
// components too), and at most Source.wideScalars replicated values are
// live in registers at once, the others in the scratch (widespill.go).
func (w *wideEmitter) emit() (string, int, error) {
	raw, err := w.emitRaw()
	if err != nil {
		return "", 0, err
	}
	if w.e.src.wideShared {
		code, scratch := allocate(w.rematerialize(raw))
		return w.tables.String() + code, scratch, nil
	}
	all := w.remat
	own := w.ownArrays(raw)
	kept := w.remat[:0:0]
	for _, r := range w.remat {
		if w.mayRecompute(r, own) {
			kept = append(kept, r)
		}
	}
	w.remat = kept
	code := w.rematerialize(raw)
	code, rows := w.privatizeAll(code)
	code = declarePrivate(code, rows)
	// allocate, with the outputs' arrays in place where the unit asks.
	allocate := func(code string) (string, int) {
		if w.e.src.wideOutPlace {
			code = outputsInPlace(code)
		}
		return allocate(code)
	}
	// Each form is placed once (allocate reads the whole function: a
	// second placement of the same code was a second pass for nothing).
	placed, scratch := "", -1
	if rows > 0 {
		// The form with every array shared, where the private arrays
		// leave the scratch larger (allocate's placement is a heuristic:
		// the Brusselator's reverse with save times took one real more).
		// The comparison is of the placements without the replicated
		// values' slots, which the form with every array shared does not
		// take either. Without private rows the shared form is never
		// taken, and neither recomputed nor placed.
		w.remat = all
		sharedCode, sharedScratch := allocate(w.rematerialize(raw))
		if placed, scratch = allocate(code); scratch > sharedScratch {
			return w.tables.String() + sharedCode, sharedScratch, nil
		}
		w.remat = kept
	}
	if spilled, n := spillScalars(code, wideScalarsOf(w.e.src.wideScalars)); n > 0 || scratch < 0 {
		placed, scratch = allocate(spilled)
	}
	return w.tables.String() + placed, scratch, nil
}

// outputCopy matches a loop of returns that copies a run of an array of
// the scratch to the function's outputs: the run's length, its first
// output (none: 0) and the array.
var outputCopy = regexp.MustCompile(`(?m)^#pragma unroll 1\n  for \(int gs_c = gs_lane; gs_c < (\d+); gs_c \+= GS_WSTRIDE\) gs_o\[(?:(\d+) \+ )?gs_c\] = (gs_\w+)\[gs_c\];\n`)

// outputsInPlace returns code with each array of the scratch that
// returns copies whole to a run of the outputs (outputCopy: an array of
// n entries to outputs o … o + n − 1) placed at those outputs instead
// (gs_o + o: Config.WideOutInPlace) and its copy removed: the loop that
// computes it stores it where the driver reads it, the same values, and
// it takes no scratch. The outputs are no function's input (the
// driver's layout, wideLayout, keeps gs_o apart from gs_a and gs_w) and
// each is written once, at the end, so that no other write reaches
// them while the array lives.
func outputsInPlace(code string) string {
	for _, m := range outputCopy.FindAllStringSubmatch(code, -1) {
		n, off, name := m[1], m[2], m[3]
		if off == "" {
			off = "0"
		}
		decl := fmt.Sprintf("  gs_real* const %s = gs_w + %s;  // [%s]\n", name, offMark(name), n)
		if strings.Count(code, decl) != 1 {
			continue
		}
		code = strings.Replace(code, decl, fmt.Sprintf("  gs_real* const %s = gs_o + %s;  // [%s], outputs in place\n", name, off, n), 1)
		code = strings.Replace(code, m[0], "", 1)
	}
	return code
}

// readsAny reports whether a recomputed array's expression reads an
// array of names.
func readsAny(expr string, names map[string]bool) bool {
	for n := range names {
		if strings.Contains(expr, n+"[") {
			return true
		}
	}
	return false
}

// emitRaw writes the function with its arrays neither recomputed
// (rematerialize) nor placed (allocate) and returns its code.
func (w *wideEmitter) emitRaw() (string, error) {
	e := w.e
	p := e.p
	e.tuple = make(map[tape.ID]func(int) string)
	e.expr = make(map[tape.ID]string)
	e.shIndex = sharedIndex(p)
	e.ownArr = true // the inputs are gs_a already
	sb := &e.sb
	fmt.Fprintf(sb, "// program %s, wide (one warp): %d inputs, %d values, %d outputs\n",
		strings.ReplaceAll(p.Name, "\n", " "), len(p.Inputs), len(p.Values), len(p.Outputs))
	po := ""
	if w.privOut > 0 {
		po = ", gs_real* gs_po"
	}
	if e.inRec.n > 0 {
		// Not GS_RESTRICT: the record is written in the same kernel (the
		// forward loop), so its reads must not take the read-only path.
		po += ", const gs_real* " + recName
	}
	fmt.Fprintf(sb, "GS_FUNC void %s(const gs_real* GS_RESTRICT gs_sh, const gs_real* gs_a, gs_real* gs_o, gs_real* gs_w%s) {\n", e.name, po)
	sb.WriteString("  const int gs_lane = GS_WLANE;\n  (void)gs_lane;\n")
	order, err := e.plan()
	if err != nil {
		return "", err
	}
	lines := strings.Split(p.String(), "\n")[1:]
	ids, loopAt := e.loopsOf(order, nil)
	gathered := map[string]string{}
	for i := 0; i < len(order); i++ {
		if l := loopAt[i]; l != nil {
			w.loop(l, ids, lines, gathered)
			for _, nd := range order[i:l.to] {
				if v := &p.Values[nd.Id]; v.Op == ops.OpAttach {
					e.expr[nd.Id] = e.ref(v.Args[0])
				}
			}
			i = l.to - 1
			continue
		}
		id := order[i].Id
		v := &p.Values[id]
		switch {
		case v.Op == ops.OpCall:
			return "", fmt.Errorf("%s: %v: the wide layout emits no calls", vname(id), v.Op)
		case v.Op == ops.OpExtract && p.Values[v.Args[0]].Op == ops.OpCall:
			return "", fmt.Errorf("%s: %v of a call: the wide layout emits no calls", vname(id), v.Op)
		case v.Op == ops.OpExtract:
			e.tuplePart(id) // a factor's or a solve's array entry, read in place
			continue
		case ops.IsTuple(v.Op):
			if err := w.tupleValue(id, commentOf(lines[id])); err != nil {
				return "", err
			}
			continue
		}
		if err := e.value(id, commentOf(lines[id])); err != nil {
			return "", err
		}
		if v.Op == ops.OpInput && e.shIndex[int(v.Aux)] < 0 {
			if j := e.ownIndex(int(v.Aux)); e.inRec.holds(j) {
				e.expr[id] = fmt.Sprintf("%s[%d]", recName, j-e.inRec.from)
			} else {
				e.expr[id] = fmt.Sprintf("gs_a[%d]", e.ownPos(int(v.Aux)))
			}
		}
	}
	w.returns()
	sb.WriteString("  GS_SYNCWARP();\n}\n")
	return sb.String(), nil
}

// wideArray matches the declaration of an array in the scratch.
var wideArray = regexp.MustCompile(`gs_real\* const (gs_\w+|t\d+) = gs_w \+ @off:`)

// allocate places the arrays declared in code in the scratch, each from
// the line that declares it to the last line that names it, two arrays
// sharing space only where those spans do not overlap (first fit in the
// order of declaration), and returns the code with the offsets and the
// scratch's length. A loop that writes an array starts with a
// __syncwarp(), after which no lane reads what the array's space held
// before.
func allocate(code string) (string, int) {
	offs, top := placeArraysBy(code, wideArray)
	return setOffsetsBy(code, offs, "@off:"), top
}

// placeArraysBy returns allocate's offsets of the arrays declared in
// code, by name, and the scratch's length: the declarations those of
// decl (wideArray: the scratch's; widePrivArray: the lane's own,
// wideprivate.go), each with its size in a comment "// [n]".
func placeArraysBy(code string, decl *regexp.Regexp) (map[string]int, int) {
	lines := strings.Split(code, "\n")
	type span struct {
		name           string
		from, to, size int
		off            int
	}
	var spans []*span
	byName := map[string]*span{}
	for i, ln := range lines {
		if m := decl.FindStringSubmatch(ln); m != nil {
			// The size follows the mark: "@off:NAME@;  // [n]".
			n := 0
			if s := wideSizeOf.FindStringSubmatch(ln); s != nil {
				n, _ = strconv.Atoi(s[1])
			}
			sp := &span{name: m[1], from: i, to: i, size: n}
			spans = append(spans, sp)
			byName[sp.name] = sp
		}
	}
	if len(spans) == 0 {
		return nil, 0
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, regexp.QuoteMeta(n))
	}
	sort.Strings(names)
	word := regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\b`)
	for i, ln := range lines {
		for _, m := range word.FindAllString(ln, -1) {
			if sp := byName[m]; i > sp.to {
				sp.to = i
			}
		}
	}
	// First fit in the order of declaration, and in two other orders
	// (larger arrays first; longer-lived ones first): the smallest
	// scratch wins, the first order on a tie. Declaration order alone
	// left holes: Lorenz-96's reverse step (d = 256, Tsit5) took 2296
	// reals where 2040 are live at once at most.
	firstFit := func(order []*span) ([]int, int) {
		offs := make([]int, len(order))
		top := 0
		for k, sp := range order {
			off := 0
			for {
				moved := false
				for j, q := range order[:k] {
					if q.to >= sp.from && q.from <= sp.to && off < offs[j]+q.size && offs[j] < off+sp.size {
						off, moved = offs[j]+q.size, true
					}
				}
				if !moved {
					break
				}
			}
			offs[k] = off
			top = max(top, off+sp.size)
		}
		return offs, top
	}
	bySize := slices.Clone(spans)
	slices.SortStableFunc(bySize, func(a, b *span) int { return b.size - a.size })
	byLife := slices.Clone(spans)
	slices.SortStableFunc(byLife, func(a, b *span) int { return (b.to - b.from) - (a.to - a.from) })
	byArea := slices.Clone(spans)
	slices.SortStableFunc(byArea, func(a, b *span) int { return b.size*(b.to-b.from+1) - a.size*(a.to-a.from+1) })
	top := -1
	for _, order := range [][]*span{spans, bySize, byLife, byArea} {
		offs, t := firstFit(order)
		if top >= 0 && t >= top {
			continue
		}
		top = t
		for k, sp := range order {
			sp.off = offs[k]
		}
	}
	offs := make(map[string]int, len(spans))
	for _, sp := range spans {
		offs[sp.name] = sp.off
	}
	return offs, top
}

// setOffsetsBy returns code with each offset mark (offMark, or
// privMark: mark is the marks' prefix) of an array of offs replaced by
// its offset, in one pass (a pass per array took a second for
// Pollution's reverse steps); other marks stay.
func setOffsetsBy(code string, offs map[string]int, mark string) string {
	var sb strings.Builder
	sb.Grow(len(code))
	for {
		i := strings.Index(code, mark)
		if i < 0 {
			break
		}
		rest := code[i+len(mark):]
		j := strings.IndexByte(rest, '@')
		off, ok := offs[rest[:max(j, 0)]]
		if j < 0 || !ok {
			sb.WriteString(code[:i+len(mark)])
			code = rest
			continue
		}
		sb.WriteString(code[:i])
		sb.WriteString(strconv.Itoa(off))
		code = rest[j+1:]
	}
	sb.WriteString(code)
	return sb.String()
}

// carrySum is how a loop split over the lanes computes a carried body
// value (wideEmitter.sums).
type carrySum struct {
	// j is the body position whose values the chain adds: k itself for a
	// chained sum u_k = carry_k + x (x of the same repetition), the
	// carried position for a delayed one, u_k = carry_k + carry_j (the sum
	// of the previous repetitions' u_j: Tsit5's stiffness estimate).
	j     int
	delay bool
	// x is the operand added (a chained sum), op the carried operand of
	// u_k (and opJ that of u_j, delayed).
	x, op, opJ int
}

// wideMaxWindow is the longest window of a loop split over the lanes
// whose carried operands are earlier repetitions' values (wideSplit).
const wideMaxWindow = 8

// wideSplit is how a loop runs split over the lanes (wideEmitter.split).
type wideSplit struct {
	// red holds the carried body positions summed across the lanes.
	red map[int]carrySum
	// window is the largest number of repetitions back a body value
	// depends on through carried operands that are not sums (0: none):
	// the lane that runs component c recomputes repetitions c − window,
	// ..., c − 1 of the body positions marked need (the ones those
	// operands read), starting from the carried operands' first values,
	// then repetition c whole (a window: see loop).
	window int
	need   []bool
}

// split returns how loop l runs split over the lanes, and false if a
// carried operand keeps it sequential. Each carried body position is
// one of
//
//   - a chained sum u_k = carry_k + x (x of the same repetition) or the
//     delayed u_k = carry_k + carry_j (the sum of the previous
//     repetitions' u_j: Tsit5's stiffness estimate), summed across the
//     lanes (red); a summed position is kept in no array and read by no
//     other body value;
//   - carried into other positions only (a reverse step's cotangents,
//     which the field's VJP builds over neighbouring components): the
//     carried values are then functions of a bounded number of earlier
//     repetitions, at most wideMaxWindow (window), which each lane
//     recomputes with the same operations in the same order: the same
//     bits as the loop run in order.
//
// A delayed sum runs in no window; a cycle among the carried positions
// other than a sum's own keeps the loop sequential.
func (w *wideEmitter) split(l *loop) (wideSplit, bool) {
	out := wideSplit{red: map[int]carrySum{}}
	readers := make([]int, l.p) // other positions' reads of each position
	for q := range l.args {
		for _, a := range l.args[q] {
			if a.kind == argBody || a.kind == argCarry && a.k != q {
				readers[a.k]++
			}
		}
	}
	carried := false // a position carried into another
	delayed := false
	for k := range l.args {
		var carries []int
		for j, a := range l.args[k] {
			switch {
			case a.kind == argBody && a.k >= k:
				return out, false
			case a.kind == argCarry:
				carries = append(carries, j)
			}
		}
		if len(carries) == 0 {
			continue
		}
		self := -1
		for _, j := range carries {
			if l.args[k][j].k == k {
				self = j
			}
		}
		if self < 0 {
			carried = true
			continue
		}
		v := &w.e.p.Values[w.bodyID(l, k)]
		if v.Op != ops.OpAdd || l.arr[k] || readers[k] > 0 {
			return out, false
		}
		switch len(carries) {
		case 1:
			out.red[k] = carrySum{j: k, x: 1 - self, op: self}
		case 2:
			o := carries[0] + carries[1] - self
			j := l.args[k][o].k
			for _, a := range l.args[j] {
				if a.kind == argCarry {
					return out, false
				}
			}
			if readers[j] != 1 {
				return out, false
			}
			out.red[k] = carrySum{j: j, delay: true, op: self, opJ: o}
			delayed = true
		default:
			return out, false
		}
	}
	if !carried {
		return out, true
	}
	if delayed {
		return out, false
	}
	// The depth of each position: how many repetitions back its value
	// reaches through carried operands (a sum's own is not one).
	depth := make([]int, l.p)
	for round := 0; ; round++ {
		changed := false
		for k := range l.args {
			if _, ok := out.red[k]; ok {
				continue
			}
			dk := 0
			for _, a := range l.args[k] {
				switch a.kind {
				case argBody:
					dk = max(dk, depth[a.k])
				case argCarry:
					dk = max(dk, depth[a.k]+1)
				}
			}
			if dk != depth[k] {
				depth[k], changed = dk, true
			}
		}
		if !changed {
			break
		}
		if round > l.p || slices.Max(depth) > wideMaxWindow {
			return out, false // a cycle, or too long a window
		}
	}
	out.window = slices.Max(depth)
	// The positions the window's earlier repetitions compute: those
	// carried into others and what they read.
	out.need = make([]bool, l.p)
	for k := range l.args {
		for _, a := range l.args[k] {
			if a.kind == argCarry && a.k != k {
				out.need[a.k] = true
			}
		}
	}
	for k := l.p - 1; k >= 0; k-- {
		if !out.need[k] {
			continue
		}
		for _, a := range l.args[k] {
			if a.kind == argBody {
				out.need[a.k] = true
			}
		}
	}
	return out, true
}

// bodyID returns the first repetition's value of body position k (set
// by loop before it asks).
func (w *wideEmitter) bodyID(l *loop, k int) tape.ID { return w.order[l.at(0, k)] }

// loop writes loop l: its gathers, arrays and carried operands, then the
// loop over the components, split over the lanes unless a carried
// operand keeps it sequential (every lane runs it alike; split), then the
// sums of the lanes' partial sums. A loop with a window (wideSplit) runs,
// for component c on its lane,
//
//	for (gs_c = max(c - window, 0); gs_c <= c; gs_c++) { the body }
//
// from the carried operands' first values: its earlier repetitions
// compute only the positions that the carried operands read (need), and
// only repetition c stores arrays and adds to the sums; after the loop
// every carried operand is the last component's, from its lane.
func (w *wideEmitter) loop(l *loop, order []tape.ID, lines []string, gathered map[string]string) {
	e := w.e
	w.order = order
	sb := &e.sb
	ids := func(c, k int) tape.ID { return order[l.at(c, k)] }
	sp, split := w.split(l)
	if !split {
		sp = wideSplit{}
	}
	red := sp.red
	mode := "split over the lanes"
	switch {
	case !split:
		mode = "sequential in every lane"
	case sp.window > 0:
		mode = fmt.Sprintf("split over the lanes, a window of %d", sp.window)
	}
	fmt.Fprintf(sb, "  // v%d … v%d: %d components of %d values, %s\n", ids(0, 0), ids(l.n-1, l.p-1), l.n, l.p, mode)
	ref := make([][]string, l.p)
	var fill wideFill   // the gathers' arrays
	var sums []string   // the carried sums' finishing statements
	var resets []string // a window's carried operands' first values
	for k := range l.args {
		ref[k] = make([]string, len(l.args[k]))
		for j := range l.args[k] {
			a := &l.args[k][j]
			switch a.kind {
			case argInv:
				ref[k][j] = e.ref(a.seq[0])
			case argBody:
				ref[k][j] = fmt.Sprintf("gs_u%d", a.k)
			case argCarry:
				name := carryName(l.idx, k, j)
				ref[k][j] = name
				cs, ok := red[k]
				switch {
				case !ok:
					fmt.Fprintf(sb, "  gs_real %s = %s;\n", name, e.ref(a.seq[0]))
					if sp.window > 0 {
						resets = append(resets, fmt.Sprintf("    %s = %s;\n", name, e.ref(a.seq[0])))
						sums = append(sums, fmt.Sprintf("  %s = gs_wide_from(%s, %d %% GS_WSTRIDE);\n", name, name, l.n-1))
					}
				case j == cs.op && !cs.delay:
					declPartial(sb, name)
					ref[k][j] = fmt.Sprintf("gs_wsum_get(%s, gs_c)", partialName(name))
					sums = append(sums, fmt.Sprintf("  %s = %s + gs_wide_sums(%s);\n", name, e.ref(a.seq[0]), partialName(name)))
				case j == cs.op:
					// The sum of the previous repetitions' u_j: the first
					// two operands, then u_j but for the last repetition's.
					declPartial(sb, name)
					init := fmt.Sprintf("(%s + %s)", e.ref(a.seq[0]), e.ref(l.args[k][cs.opJ].seq[0]))
					if cs.opJ < cs.op {
						init = fmt.Sprintf("(%s + %s)", e.ref(l.args[k][cs.opJ].seq[0]), e.ref(a.seq[0]))
					}
					sums = append(sums, fmt.Sprintf("  %s = %s + gs_wide_sums(%s);\n", name, init, partialName(name)))
				default:
					// The last repetition's u_j, from the lane that ran it.
					fmt.Fprintf(sb, "  gs_real %s = %s;\n", name, e.ref(a.seq[0]))
					sums = append(sums, fmt.Sprintf("  %s = gs_wide_from(%s, %d %% GS_WSTRIDE);\n", name, name, l.n-1))
				}
			case argIndex:
				ref[k][j] = fmt.Sprintf("%s[%s]", a.src.name(), affine(a.off, a.stride))
			case argGather:
				ref[k][j] = w.gather(a.seq, l.n, gathered, &fill)
			}
		}
	}
	for k, on := range l.arr {
		if on {
			name := loopArray(l.idx, k)
			fmt.Fprintf(sb, "  gs_real* const %s = gs_w + %s;  // [%d]\n", name, offMark(name), l.n)
			if x, _, ok := w.rematExpr(l, k, ref); ok {
				w.remat = append(w.remat, wideRemat{name: name, expr: x, store: fmt.Sprintf("    %s[gs_c] = gs_u%d;\n", name, k)})
			}
		}
	}
	sb.WriteString("  GS_SYNCWARP();\n")
	if len(fill.lane0)+len(fill.loops) > 0 {
		for _, f := range fill.loops {
			sb.WriteString(f)
		}
		if len(fill.lane0) > 0 {
			sb.WriteString("  if (gs_lane == 0) {\n")
			for _, f := range fill.lane0 {
				sb.WriteString(f)
			}
			sb.WriteString("  }\n")
		}
		sb.WriteString("  GS_SYNCWARP();\n")
	}
	win := sp.window > 0
	switch {
	case win:
		fmt.Fprintf(sb, "#pragma unroll 1\n  for (int gs_c0 = gs_lane; gs_c0 < %d; gs_c0 += GS_WSTRIDE) {\n", l.n)
		for _, r := range resets {
			sb.WriteString(r)
		}
		if e.src.wideRolled {
			fmt.Fprintf(sb, "#pragma unroll 1\n  for (int gs_c = gs_c0 > %d ? gs_c0 - %d : 0; gs_c <= gs_c0; gs_c++) {\n", sp.window, sp.window)
		} else {
			// The repetitions unrolled, in the same order: their loads
			// independent of the carried values may issue together.
			fmt.Fprintf(sb, "#pragma unroll\n  for (int gs_k = %d; gs_k >= 0; gs_k--) {\n    const int gs_c = gs_c0 - gs_k;\n    if (gs_c < 0) continue;\n", sp.window)
		}
	case split:
		fmt.Fprintf(sb, "#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < %d; gs_c += GS_WSTRIDE) {\n", l.n)
	default:
		fmt.Fprintf(sb, "%s {\n", loopHead(l.n))
	}
	value := func(k int) {
		id := ids(0, k)
		v := &e.p.Values[id]
		expr := ops.Lookup(v.Op).C(ref[k], v.Aux)
		if v.Op == ops.OpConst {
			expr = "(gs_real)" + expr
		}
		fmt.Fprintf(sb, "    const gs_real gs_u%d = %s;  // %s\n", k, expr, commentOf(lines[id]))
	}
	store := func(k int) {
		if l.arr[k] {
			fmt.Fprintf(sb, "    %s[gs_c] = gs_u%d;\n", loopArray(l.idx, k), k)
		}
	}
	// update writes the carried operands' updates, of the sums (sum) or
	// of the others.
	update := func(sum bool) {
		for k := range l.args {
			cs, ok := red[k]
			if ok != sum {
				continue
			}
			for j, a := range l.args[k] {
				name := carryName(l.idx, k, j)
				switch {
				case a.kind != argCarry:
				case !ok:
					fmt.Fprintf(sb, "    %s = gs_u%d;\n", name, a.k)
				case !cs.delay:
					fmt.Fprintf(sb, "    gs_wsum_set(%s, gs_c, gs_u%d);\n", partialName(name), a.k)
				case j == cs.op:
					fmt.Fprintf(sb, "    if (gs_c < %d) gs_wsum_set(%s, gs_c, gs_wsum_get(%s, gs_c) + gs_u%d);\n", l.n-1, partialName(name), partialName(name), cs.j)
				default:
					fmt.Fprintf(sb, "    if (gs_c == %d) %s = gs_u%d;\n", l.n-1, name, cs.j)
				}
			}
		}
	}
	if win {
		for k := 0; k < l.p; k++ {
			if sp.need[k] {
				value(k)
			}
		}
		sb.WriteString("    if (gs_c == gs_c0) {\n")
		for k := 0; k < l.p; k++ {
			if !sp.need[k] {
				value(k)
			}
			store(k)
		}
		update(true)
		sb.WriteString("    }\n")
		update(false)
		sb.WriteString("  }\n  }\n  GS_SYNCWARP();\n")
	} else {
		for k := 0; k < l.p; k++ {
			if cs, ok := red[k]; ok && cs.delay {
				continue // its partial sum is updated below
			}
			value(k)
			store(k)
		}
		update(false)
		update(true)
		sb.WriteString("  }\n  GS_SYNCWARP();\n")
	}
	for _, s := range sums {
		sb.WriteString(s)
	}
	for c := 0; c < l.n; c++ {
		for k, on := range l.arr {
			if on {
				e.setArray(ids(c, k), loopArray(l.idx, k), c)
			}
		}
	}
	for k, x := range l.lastVar {
		if x != "" {
			e.expr[ids(l.n-1, k)] = x
		}
	}
}

// declPartial declares the sum name of a loop split over the lanes and
// its lane's partial sums, GS_WSUMS slots (partialName: one per lane of
// a warp whose components the lane runs, gs_wsum_get and gs_wsum_set by
// the component; gs_wide_sums adds them across the lanes in a warp's
// order, so that a trajectory on fewer lanes than a warp's sums as a warp
// does, bit for bit).
func declPartial(sb *strings.Builder, name string) {
	fmt.Fprintf(sb, "  gs_real %s = (gs_real)-0.0;  // the sum\n", name)
	fmt.Fprintf(sb, "  gs_real %s[GS_WSUMS];  // the lane's partial sums, by lane of a warp\n", partialName(name))
	fmt.Fprintf(sb, "  gs_wsum_zero(%s);\n", partialName(name))
}

// partialName is the array of the lane's partial sums of sum name.
func partialName(name string) string { return name + "_p" }

// Rematerialisation: a loop's array whose values are a few operations on
// the function's inputs, the scalars before the loop and other arrays'
// entries (Lorenz-96's reverse step: the stages' differences y[c+1] −
// y[c−2], the weights times λ) is recomputed where it is read instead of
// kept in the scratch, the same operations on the same operands: the
// same bits.
const (
	// wideRematOps is the most operations of a recomputed array's value.
	wideRematOps = 3
	// wideRematReads is the most places a recomputed array is read at.
	wideRematReads = 6
)

// loopIndex matches the loop index in an operand's expression.
var loopIndex = regexp.MustCompile(`\bgs_c\b`)

// rematExpr returns body position k of loop l (whose operands' C
// expressions are ref) as an expression of the index @i@ and the number
// of its operations, and false if it reads a carried operand or takes
// more than wideRematOps operations.
func (w *wideEmitter) rematExpr(l *loop, k int, ref [][]string) (string, int, bool) {
	v := &w.e.p.Values[w.order[l.at(0, k)]]
	n := 1
	args := make([]string, len(l.args[k]))
	for j, a := range l.args[k] {
		switch a.kind {
		case argCarry:
			return "", 0, false
		case argBody:
			x, m, ok := w.rematExpr(l, a.k, ref)
			if n += m; !ok || n > wideRematOps {
				return "", 0, false
			}
			args[j] = "(" + x + ")"
		default:
			args[j] = loopIndex.ReplaceAllString(ref[k][j], "@i@")
		}
	}
	if n > wideRematOps {
		return "", 0, false
	}
	return ops2C(v, args), n, true
}

// ops2C is the C expression of value v with operands args.
func ops2C(v *tape.Value, args []string) string {
	x := ops.Lookup(v.Op).C(args, v.Aux)
	if v.Op == ops.OpConst {
		x = "(gs_real)" + x
	}
	return x
}

// rematerialize returns the function's code with the arrays of w.remat
// that are read at most wideRematReads times, and read no array
// recomputed before them, recomputed where they are read: their
// declarations and stores removed, each read name[idx] replaced by
// their expression of idx.
//
// It works on the lines that name each array (rematLines), not on the
// whole code once per array: the reverse steps of Pollution's Rodas5P
// (650 kB of code, 379 arrays) took seconds on the whole code, the most
// of a tiered first call's wait for its kernel's source. Where a change
// would not stay within its lines (a store or a declaration that is not
// a whole line, a read whose index ends on a later line), it finishes
// on the whole code (rematerializeFrom), the same steps: the same code.
func (w *wideEmitter) rematerialize(code string) string {
	if len(w.remat) == 0 {
		return code
	}
	rl := newRematLines(code, w.remat)
	var done []wideRemat
	for k, r := range w.remat {
		if chainedRemat(r, done) {
			continue
		}
		reads, stored, ok := rl.count(r)
		if !ok {
			return rematerializeFrom(rl.join(), w.remat[k:], done)
		}
		if reads > wideRematReads || !stored {
			continue
		}
		if !rl.apply(r) {
			return rematerializeFrom(rl.join(), w.remat[k:], done)
		}
		done = append(done, r)
	}
	return rl.join()
}

// chainedRemat reports whether r reads an array recomputed before it
// (done), or is read by one.
func chainedRemat(r wideRemat, done []wideRemat) bool {
	for _, q := range done {
		if strings.Contains(r.expr, q.name+"[") || strings.Contains(q.expr, r.name+"[") {
			return true
		}
	}
	return false
}

// rematDecl is the declaration of a recomputed array's place in the
// scratch, which rematerialize removes.
func rematDecl(name string) string {
	return fmt.Sprintf("  gs_real* const %s = gs_w + %s;", name, offMark(name))
}

// rematerializeFrom is rematerialize on the whole code, from the arrays
// rs on, those of done recomputed already.
func rematerializeFrom(code string, rs, done []wideRemat) string {
	for _, r := range rs {
		decl := rematDecl(r.name)
		reads := strings.Count(code, r.name+"[") - strings.Count(code, r.store)
		if reads > wideRematReads || chainedRemat(r, done) || !strings.Contains(code, r.store) {
			continue
		}
		done = append(done, r)
		code = strings.ReplaceAll(code, r.store, "")
		if i := strings.Index(code, decl); i >= 0 {
			j := i + strings.Index(code[i:], "\n") + 1
			code = code[:i] + code[j:]
		}
		code = replaceReads(code, r.name, r.expr)
	}
	return code
}

// rematLines is a function's code as lines (each with its newline), with
// the lines at which each array of a rematerialize names it: a read or
// store name[…] (name ending an identifier before "["), or its
// declaration. A line's list may name lines that no longer name it.
type rematLines struct {
	lines []string
	at    map[string][]int // by array name: lines, each once
}

// newRematLines splits code into lines and finds the arrays of rs in
// them.
func newRematLines(code string, rs []wideRemat) *rematLines {
	rl := &rematLines{lines: strings.SplitAfter(code, "\n"), at: make(map[string][]int, len(rs))}
	for _, r := range rs {
		rl.at[r.name] = nil
	}
	for i, ln := range rl.lines {
		rl.scan(i, ln)
	}
	return rl
}

// scan notes the arrays that line i, ln, names.
func (rl *rematLines) scan(i int, ln string) {
	note := func(name string) {
		if l, ok := rl.at[name]; ok && !slices.Contains(l, i) {
			rl.at[name] = append(l, i)
		}
	}
	for k := 0; k < len(ln); k++ {
		if ln[k] != '[' {
			continue
		}
		j := k
		for j > 0 && isIdent(ln[j-1]) {
			j--
		}
		// Every suffix of the identifier: strings.Count(code, name+"[")
		// counts those too.
		for m := j; m < k; m++ {
			note(ln[m:k])
		}
	}
	for rest := ln; ; {
		var ok bool
		if _, rest, ok = strings.Cut(rest, "gs_real* const "); !ok {
			break
		}
		if name, _, ok := strings.Cut(rest, " "); ok {
			note(name)
		}
	}
}

// lines returns the lines that name array name, ascending.
func (rl *rematLines) linesOf(name string) []int {
	idx := slices.Clone(rl.at[name])
	slices.Sort(idx)
	return idx
}

// count returns the reads of r (its name followed by "[" less its
// stores) and whether its store is in the code, or ok false where its
// store is not a whole line's end (rematerializeFrom then counts).
func (rl *rematLines) count(r wideRemat) (reads int, stored, ok bool) {
	pat := r.name + "["
	for _, i := range rl.at[r.name] {
		ln := rl.lines[i]
		reads += strings.Count(ln, pat)
		if strings.HasSuffix(ln, r.store) {
			reads--
			stored = true
		} else if strings.Contains(ln, r.store) {
			return 0, false, false
		}
	}
	return reads, stored, true
}

// apply removes r's stores and declaration and replaces its reads by its
// expression, in the lines that name r, and notes what the changed lines
// name. It returns false, having changed nothing, where a store or the
// declaration is not a whole line or a read's index does not end on its
// line.
func (rl *rematLines) apply(r wideRemat) bool {
	decl := rematDecl(r.name)
	pat := r.name + "["
	idx := rl.linesOf(r.name)
	out := make([]string, len(idx))
	declAt := -1
	for k, i := range idx {
		ln := rl.lines[i]
		if strings.HasSuffix(ln, r.store) {
			if len(ln) != len(r.store) {
				return false
			}
			ln = ""
		}
		if declAt < 0 {
			if j := strings.Index(ln, decl); j >= 0 {
				if j > 0 || !strings.HasSuffix(ln, "\n") {
					return false
				}
				declAt, ln = i, ""
			}
		}
		if strings.Contains(ln, pat) {
			x, whole := replaceReadsIn(ln, r.name, r.expr)
			if !whole {
				return false
			}
			ln = x
		}
		out[k] = ln
	}
	// The declaration sits on a line that names no array "[": find it.
	if declAt < 0 {
		for i, ln := range rl.lines {
			if j := strings.Index(ln, decl); j >= 0 {
				if j > 0 || !strings.HasSuffix(ln, "\n") || slices.Contains(idx, i) {
					return false
				}
				declAt = i
				break
			}
		}
	}
	for k, i := range idx {
		if rl.lines[i] != out[k] {
			rl.lines[i] = out[k]
			rl.scan(i, out[k])
		}
	}
	if declAt >= 0 {
		rl.lines[declAt] = ""
	}
	return true
}

// join returns the code.
func (rl *rematLines) join() string { return strings.Join(rl.lines, "") }

// replaceReads replaces every read name[idx] in code by expr with @i@
// replaced by (idx), in parentheses.
func replaceReads(code, name, expr string) string {
	out, whole := replaceReadsIn(code, name, expr)
	if !whole {
		panic("kernelgen: a wide function's read " + name + "[ without its ]")
	}
	return out
}

// replaceReadsIn is replaceReads, and false (the code unchanged) where a
// read's index does not end in code.
func replaceReadsIn(code, name, expr string) (string, bool) {
	var out strings.Builder
	all := code
	for {
		i := strings.Index(code, name+"[")
		if i < 0 {
			break
		}
		if i > 0 && (isIdent(code[i-1])) {
			out.WriteString(code[:i+len(name)])
			code = code[i+len(name):]
			continue
		}
		// The matching bracket.
		depth, j := 0, i+len(name)
		for ; j < len(code); j++ {
			if code[j] == '[' {
				depth++
			} else if code[j] == ']' {
				if depth--; depth == 0 {
					break
				}
			}
		}
		if j == len(code) {
			return all, false
		}
		idx := code[i+len(name)+1 : j]
		out.WriteString(code[:i])
		out.WriteString("(" + strings.ReplaceAll(expr, "@i@", "("+idx+")") + ")")
		code = code[j+1:]
	}
	out.WriteString(code)
	return out.String(), true
}

// isIdent reports whether b may be part of a C identifier.
func isIdent(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// entryRef matches an array entry's C expression, "name[idx]".
var entryRef = regexp.MustCompile(`^(gs_\w+|t\d+)\[(\d+)\]$`)

// wideFill is how a loop's gathered arrays are filled before it: runs of
// consecutive entries of one array by loops split over the lanes, the
// other entries by lane 0.
type wideFill struct {
	loops, lane0 []string
}

// gather returns the expression of a gathered operand (its values seq
// by component, n of them): where all are entries of one array, that
// array read through an index table (a Lorenz-96 neighbour, y[(c+1) mod
// d]); else an array in the scratch filled before the loop (fill: runs
// of at least rerollMinRun consecutive entries of one array split over
// the lanes, the rest by lane 0; a reverse step's cotangent, shifted by
// a component, with its first entries scalars). Gathers of the same
// values share their table or array.
func (w *wideEmitter) gather(seq []tape.ID, n int, gathered map[string]string, fill *wideFill) string {
	e := w.e
	xs := make([]string, len(seq))
	for c, x := range seq {
		xs[c] = e.ref(x)
	}
	key := strings.Join(xs, ", ")
	if r, ok := gathered[key]; ok {
		return r
	}
	arr := ""
	idx := make([]string, len(xs))
	for c, x := range xs {
		m := entryRef.FindStringSubmatch(x)
		if m == nil || (arr != "" && m[1] != arr) {
			arr = ""
			break
		}
		arr, idx[c] = m[1], m[2]
	}
	var r string
	if x, ok := gatherRun(xs); ok && !e.src.wideShared && !w.noRuns {
		r = x
	} else if b, k, ok := rotation(idx); arr != "" && ok && !e.src.wideTables {
		r = fmt.Sprintf("%s[GS_WROT(gs_c, %d, %d, %d)]", arr, b, k, n)
	} else if arr != "" {
		tab := fmt.Sprintf("%s_x%d", e.name, w.ntab)
		w.ntab++
		fmt.Fprintf(&w.tables, "GS_WIDE_TABLE int %s[%d] = {%s};\n", tab, n, strings.Join(idx, ", "))
		r = fmt.Sprintf("%s[%s[gs_c]]", arr, tab)
	} else {
		name := fmt.Sprintf("gs_g%d", w.ngath)
		w.ngath++
		fmt.Fprintf(&e.sb, "  gs_real* const %s = gs_w + %s;  // [%d]\n", name, offMark(name), n)
		loops, lane0 := fillRuns(name, xs, func(q string) string { return q }, "")
		fill.loops = append(fill.loops, loops...)
		fill.lane0 = append(fill.lane0, lane0...)
		r = name + "[gs_c]"
	}
	gathered[key] = r
	return r
}

// rotation returns b and k where the gather's indices idx (decimal, by
// component c of n) are b + (c + k) mod n, 0 ≤ k < n: one array's entries
// rotated by k (a Lorenz-96 neighbour y[(c + 1) mod d]), which the loop
// computes (GS_WROT: an add, a compare and a select) in place of an index
// table in global memory, whose load each read waited for: the same
// entries read, the same bits. False for any other gather.
func rotation(idx []string) (b, k int, ok bool) {
	n := len(idx)
	if n == 0 {
		return 0, 0, false
	}
	xs := make([]int, n)
	for c, s := range idx {
		x, err := strconv.Atoi(s)
		if err != nil {
			return 0, 0, false
		}
		xs[c] = x
	}
	b = slices.Min(xs)
	k = xs[0] - b
	if k >= n {
		return 0, 0, false
	}
	for c, x := range xs {
		if x != b+(c+k)%n {
			return 0, 0, false
		}
	}
	return b, k, true
}

// wideGatherScalars is the most entries of a gathered operand besides
// its run that gatherRun reads through a choice of expressions.
const wideGatherScalars = 8

// gatherRun returns a gathered operand's expression of the component
// gs_c where its entries xs (by component) are one run of consecutive
// components reading one array in arithmetic progression of step ±1 (at
// least rerollMinRun long) and at most wideGatherScalars others (a
// reverse step's cotangent shifted by a component, with its first
// entries scalars): the run's entry read in place, the others chosen by
// the component, instead of an array of the scratch filled before the
// loop (gather): the same values, no copy, no shared memory (the source
// array lives on through the loop instead). It returns false for another
// form, or where the run reads a tuple's array.
func gatherRun(xs []string) (string, bool) {
	type entry struct{ q, idx int }
	byArr := map[string][]entry{}
	best := ""
	for q, x := range xs {
		if m := entryRef.FindStringSubmatch(x); m != nil {
			idx, _ := strconv.Atoi(m[2])
			byArr[m[1]] = append(byArr[m[1]], entry{q, idx})
			if n := len(byArr[m[1]]); n > len(byArr[best]) || n == len(byArr[best]) && m[1] < best {
				best = m[1]
			}
		}
	}
	es := byArr[best]
	// A tuple's array (t<ID>: a factor's, d(d | 1) + d reals, or a
	// solve's) read in the loop would live on through it: copy it.
	if !strings.HasPrefix(best, "gs_") || len(es) < rerollMinRun || len(xs)-len(es) > wideGatherScalars {
		return "", false
	}
	di := es[1].idx - es[0].idx
	if di != 1 && di != -1 {
		return "", false
	}
	for i := 1; i < len(es); i++ {
		if es[i].q != es[i-1].q+1 || es[i].idx != es[i-1].idx+di {
			return "", false
		}
	}
	q0, q1 := es[0].q, es[len(es)-1].q+1
	var rest []int
	for q := range xs {
		if q < q0 || q >= q1 {
			rest = append(rest, q)
		}
	}
	x := fmt.Sprintf("%s[%s]", best, affine(es[0].idx-di*q0, di))
	if len(rest) == 0 {
		return x, true
	}
	// The others by the component: the last one where none matches.
	alt := xs[rest[len(rest)-1]]
	for k := len(rest) - 2; k >= 0; k-- {
		alt = fmt.Sprintf("(gs_c == %d ? %s : %s)", rest[k], xs[rest[k]], alt)
	}
	return fmt.Sprintf("((gs_c >= %d && gs_c < %d) ? %s : %s)", q0, q1, x, alt), true
}

// returns writes the function's outputs to gs_o: runs of consecutive
// entries of one array by a loop split over the lanes, the others by
// lane 0; with privOut its first privOut outputs to gs_po, each lane its
// components' rows (wideEmitter.privOut), directly where one run holds
// them all, else through the scratch (gs_lo) and a copy by each lane.
func (w *wideEmitter) returns() {
	e := w.e
	p, sb := e.p, &e.sb
	po := w.privOut
	// runAt returns the array and first entry of the run of consecutive
	// entries of one array that outputs m, m+1, ... read, and its length
	// ("" and 1 where output m is not an array's entry).
	runAt := func(m int) (string, int, int) {
		mm := entryRef.FindStringSubmatch(e.ref(p.Outputs[m].ID))
		if mm == nil {
			return "", 0, 1
		}
		i0, _ := strconv.Atoi(mm[2])
		n := 1
		for ; m+n < len(p.Outputs); n++ {
			y := entryRef.FindStringSubmatch(e.ref(p.Outputs[m+n].ID))
			if y == nil || y[1] != mm[1] || y[2] != strconv.Itoa(i0+n) {
				break
			}
		}
		return mm[1], i0, n
	}
	// The outputs before po, the lanes' own: written by each lane at its
	// components where one run holds them all (direct), else through the
	// scratch's gs_lo, then copied by each lane.
	direct := false
	if po > 0 {
		arr, _, n := runAt(0)
		direct = arr != "" && n >= po
		if !direct {
			fmt.Fprintf(sb, "  gs_real* const gs_lo = gs_w + %s;  // [%d]\n", offMark("gs_lo"), po)
		}
	}
	// dst returns where output m goes: an array and an index.
	dst := func(m int) (string, int) {
		if m < po {
			return "gs_lo", m
		}
		return "gs_o", m - po
	}
	var scalars []string
	for m := 0; m < len(p.Outputs); m++ {
		arr, i0, n := runAt(m)
		if arr != "" && (n >= rerollMinRun || direct && m == 0) {
			if direct && m == 0 {
				fmt.Fprintf(sb, "#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < %d; gs_c += GS_WSTRIDE) gs_po[gs_c / GS_WSTRIDE] = %s[%s];\n", po, arr, affine(i0, 1))
				m, i0, n = po, i0+po, n-po
			}
			for n > 0 { // the run's parts before po and from it
				to, at := dst(m)
				k := n
				if m < po {
					k = min(n, po-m)
				}
				if k >= rerollMinRun {
					fmt.Fprintf(sb, "#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < %d; gs_c += GS_WSTRIDE) %s[%s] = %s[%s];\n", k, to, affine(at, 1), arr, affine(i0, 1))
				} else {
					for q := range k {
						scalars = append(scalars, fmt.Sprintf("    %s[%d] = %s[%d];\n", to, at+q, arr, i0+q))
					}
				}
				m, i0, n = m+k, i0+k, n-k
			}
			m--
			continue
		}
		to, at := dst(m)
		scalars = append(scalars, fmt.Sprintf("    %s[%d] = %s;\n", to, at, e.ref(p.Outputs[m].ID)))
	}
	if len(scalars) > 0 {
		sb.WriteString("  if (gs_lane == 0) {\n")
		for _, s := range scalars {
			sb.WriteString(s)
		}
		sb.WriteString("  }\n")
	}
	if po > 0 && !direct {
		fmt.Fprintf(sb, "  GS_SYNCWARP();\n#pragma unroll 1\n  for (int gs_c = gs_lane; gs_c < %d; gs_c += GS_WSTRIDE) gs_po[gs_c / GS_WSTRIDE] = gs_lo[gs_c];\n", po)
	}
}
