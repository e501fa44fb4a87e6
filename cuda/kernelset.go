package cuda

import (
	"sync"
	"sync/atomic"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// kernelSet is what the executors of one plan share on one backend, in
// one precision and tuning: the plan's step programs for the kernels
// (kernelgen.NewStepPrograms) and the compiled kernels, with the losses'
// facts. ode caches plans per process (a Solver made again for the same
// field and settings gets the plan it had), so a second Solver of a plan,
// a fit.New per training run or a Solver per call of a sweep, finds its
// kernels compiled and loaded instead of generating their sources again
// and reloading them from the disk cache (tens of milliseconds for a
// Lorenz gradient kernel, seconds for a large one). A kernel that failed
// to compile is remembered as failed, as it was by its Solver before, until
// the set forgets it (SetMaxCache).
type kernelSet struct {
	progOnce sync.Once
	progs    *kernelgen.StepPrograms
	progErr  error

	// The wide layout's shared memory per warp (kernelgen.WideSharedPerWarp)
	// of the plan's kernels, by 4·probe + 2·gradient + save times (probe:
	// a record with the stability probe, kernelgen.Config.Probe).
	wideOnce [8]sync.Once
	widePer  [8]int
	wideErr  [8]error
	wideSet  [8]atomic.Bool // widePer and wideErr are set (widePerWarpKnown)

	mu          sync.Mutex
	kernels     *lru[string, *kernelEntry] // by Config.Key, under mu
	lossVectors *lru[string, bool]         // by LossPlan.Hash: whether a loss's programs hold vectors (tile mode's choice), under mu
}

// kernelSetKey names a kernel set.
type kernelSetKey struct {
	be   backend
	plan *ode.Plan
	prec Precision
	tun  Tuning
}

// kernelSets holds the sets of the plans prepared lately (at most
// maxCache of them, the least recently used dropped beyond).
var kernelSets = struct {
	sync.Mutex
	sets *lru[kernelSetKey, *kernelSet]
}{sets: newLRU[kernelSetKey, *kernelSet](&maxCache)}

// kernelSetOf returns the kernel set of plan pl on backend be in
// precision prec with tuning tun, new if there is none.
func kernelSetOf(be backend, pl *ode.Plan, prec Precision, tun Tuning) *kernelSet {
	tun.WaitForCompile = false // (the kernels do not depend on it)
	key := kernelSetKey{be, pl, prec, tun}
	kernelSets.Lock()
	defer kernelSets.Unlock()
	if s, ok := kernelSets.sets.get(key); ok {
		return s
	}
	s := &kernelSet{kernels: newLRU[string, *kernelEntry](&maxCache), lossVectors: newLRU[string, bool](&maxCache)}
	kernelSets.sets.add(key, s)
	return s
}

// stepPrograms returns the plan's step programs, built on first use.
func (s *kernelSet) stepPrograms(pl *ode.Plan) (*kernelgen.StepPrograms, error) {
	s.progOnce.Do(func() { s.progs, s.progErr = kernelgen.NewStepPrograms(pl) })
	return s.progs, s.progErr
}

// trainSets holds the training kernels (train.go), which depend on no
// plan, per backend and tuning.
var trainSets = struct {
	sync.Mutex
	m map[trainSetKey]*trainSet
}{m: map[trainSetKey]*trainSet{}}

type trainSetKey struct {
	be  backend
	tun Tuning
}

type trainSet struct {
	once sync.Once
	k    *trainKernels
	err  error
}

// trainSetOf returns the training kernels' slot of backend be with tuning
// tun.
func trainSetOf(be backend, tun Tuning) *trainSet {
	key := trainSetKey{be, tun}
	trainSets.Lock()
	defer trainSets.Unlock()
	s := trainSets.m[key]
	if s == nil {
		s = &trainSet{}
		trainSets.m[key] = s
	}
	return s
}

// widePerWarp returns the shared memory per warp of plan pl's gradient
// kernels (grad) or other kernels, with save times (saves) or not, with
// the stability probe (probe: kernelgen.Config.Probe, a plan with one) or
// not, in the wide layout, computed once. It generates the wide functions, which the
// plan's step programs keep for the kernel's source
// (kernelgen.StepPrograms.WideSharedPerWarp): a first call's measure and
// source, both on its way to a tiered result (tier.go), generate them
// once.
func (s *kernelSet) widePerWarp(pl *ode.Plan, grad, saves, probe bool) (int, error) {
	k := 4*kernelgen.B2i(probe) + 2*kernelgen.B2i(grad) + kernelgen.B2i(saves)
	s.wideOnce[k].Do(func() {
		sp, err := s.stepPrograms(pl)
		switch {
		case err == nil && probe:
			s.widePer[k], s.wideErr[k] = sp.WideSharedPerWarpFor(kernelgen.Config{Grad: grad, Saves: kernelgen.B2i(saves), Probe: true})
		case err == nil:
			s.widePer[k], s.wideErr[k] = sp.WideSharedPerWarp(grad, saves)
		default:
			s.widePer[k], s.wideErr[k] = kernelgen.WideSharedPerWarp(pl, grad, saves)
		}
		s.wideSet[k].Store(true)
	})
	return s.widePer[k], s.wideErr[k]
}

// widePerWarpKnown is widePerWarp where it has been computed (ok), and
// returns ok false, at once, where it has not.
func (s *kernelSet) widePerWarpKnown(grad, saves, probe bool) (per int, ok bool, err error) {
	k := 4*kernelgen.B2i(probe) + 2*kernelgen.B2i(grad) + kernelgen.B2i(saves)
	if !s.wideSet[k].Load() {
		return 0, false, nil
	}
	return s.widePer[k], true, s.wideErr[k]
}
