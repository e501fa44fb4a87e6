package cuda

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// defaultMaxSource is the largest kernel source, in bytes, the engines
// compile (8 MiB; Tuning.maxSource for the tests). NVRTC's time grows
// with the source: on an H200 host a 5 MB gradient kernel (Pollution with
// Rodas5P, d = 20, in the explicit Rosenbrock form, which unrolled J, W̄
// and J̄ entry by entry) took about a minute. From d = 16 the Rosenbrock
// steps are matrix-free (package ode's rosenbrock.go): that kernel is now
// 2.0 MB, Lorenz-96 with d = 64 5.8 MB (42 MB before).
const defaultMaxSource = 8 << 20

// sourcePerValue is the generated C of one value of a plan's programs, in
// bytes: at most 150 on the built-in problems (cuda's TestSizeDiag), 60–105
// for the matrix-free Rosenbrock steps (whose attached derivatives count
// as values but are not emitted in a forward program), so the estimate
// errs high.
const sourcePerValue = 170

// SizeError is the error of a plan whose kernel source would be past the
// engine's bound: it names the size (estimated from the plan's programs
// before any source is written, or the source's own), the limit and the
// engines that run it (the engine's name is in the error that wraps it).
// It wraps ode.ErrTooLarge.
type SizeError struct {
	Engine, Field, Method string
	Bytes, Limit          int
	Estimated             bool
}

func (e *SizeError) Error() string {
	what := "is"
	if e.Estimated {
		what = "would be about"
	}
	return fmt.Sprintf("the kernel of field %s with %s %s %.1f MB of CUDA C, over the %.1f MB the GPU engines compile "+
		"(NVRTC's time grows with it: 5 MB take about a minute); run it on the CPU engine (ode.Settings.Engine \"cpu\"), which has no such limit, "+
		"or with an explicit method (Tsit5 or Vern7), whose kernels are smaller",
		e.Field, e.Method, what, float64(e.Bytes)/(1<<20), float64(e.Limit)/(1<<20))
}

func (e *SizeError) Unwrap() error { return ode.ErrTooLarge }

// maxSource returns the executor's bound on a kernel's source.
func (ex *executor) maxSource() int {
	if m := ex.tun.maxSource; m > 0 {
		return m
	}
	return defaultMaxSource
}

// checkSourceSize returns a *SizeError if the source of a kernel (bytes
// of it, or, with bytes < 0, the estimate from the plan's programs, with
// the reverse ones for a gradient kernel) is past the executor's bound.
func (ex *executor) checkSourceSize(bytes int, grad bool) error {
	est := bytes < 0
	if est {
		n, err := planValues(ex.plan, grad)
		if err != nil {
			return err
		}
		bytes = sourcePerValue * n
	}
	if lim := ex.maxSource(); bytes > lim {
		field := "?"
		if ex.plan.Field != nil {
			field = ex.plan.Field.Name
		}
		return &SizeError{Engine: ex.name, Field: field, Method: ex.plan.Method, Bytes: bytes, Limit: lim, Estimated: est}
	}
	return nil
}

// planValues returns the values of the programs a kernel of pl holds
// (the initial step, the trial step, the controller, the replay, the dense
// output's and, for a gradient, the replay's reverse), each called program
// counted once.
func planValues(pl *ode.Plan, grad bool) (int, error) {
	var rev *tape.Program
	if grad {
		var err error
		if rev, err = pl.Reverse(); err != nil {
			return 0, err
		}
	}
	seen := map[*tape.Program]bool{}
	var count func(p *tape.Program) int
	count = func(p *tape.Program) int {
		if p == nil || seen[p] {
			return 0
		}
		seen[p] = true
		n := len(p.Values)
		for _, f := range p.Funcs {
			n += count(f)
		}
		return n
	}
	n := 0
	for _, p := range []*tape.Program{pl.Init, pl.Trial, pl.Control, pl.Replay, rev, pl.DenseStep} {
		n += count(p)
	}
	return n, nil
}
