package cuda

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/ode"
)

// defaultMaxSource is the largest kernel source, in bytes, the engines
// compile (8 MiB; Tuning.maxSource for the tests). NVRTC's time grows
// with the source: on an H200 host a 5 MB gradient kernel (Pollution with
// Rodas5P, d = 20, in the explicit Rosenbrock form, which unrolled J, W̄
// and J̄ entry by entry) took about a minute. From d = 16 the Rosenbrock
// steps are matrix-free (package ode's rosenbrock.go) and a kernel with
// save times has one forward and one reverse step program, not two each
// (kernelgen's shareDim): that kernel is now 1.1 MB, Lorenz-96 with
// d = 64 3.1 MB (42 MB before). From d = 16 an explicit method's kernels
// (thread layout) write runs of per-component values as loops
// (kernelgen's reroll.go): Lorenz-96's gradient kernel with Tsit5 at
// d = 64 is 0.2 MB (1.6 MB unrolled), with Vern7 at d = 256 0.8 MB
// (16 MB, over the bound, unrolled); a Rosenbrock method's kernels do so
// at every d (the Brusselator's gradient kernel with Rodas5P, d = 64:
// 3.3 MB unrolled, 0.68 MB).
const defaultMaxSource = 8 << 20

// SizeError is the error of a kernel whose source is past the engine's
// bound: it names the source's size, the limit and the engines that run
// it (the engine's name is in the error that wraps it). The size is the
// source's own: writing it takes a small part of a second even at the
// bound (a count of the programs' values could not tell: a network's
// layers are vectors, a few bytes a value in lanes mode, 70 bytes in a
// Rosenbrock step). It wraps ode.ErrTooLarge.
type SizeError struct {
	Engine, Field, Method string
	Bytes, Limit          int
}

func (e *SizeError) Error() string {
	return fmt.Sprintf("the kernel of field %s with %s is %.1f MB of CUDA C, over the %.1f MB the GPU engines compile "+
		"(NVRTC's time grows with it: 5 MB take about a minute); run it on the CPU engine (ode.Settings.Engine \"cpu\"), which has no such limit, "+
		"or with an explicit method (Tsit5 or Vern7), whose kernels are smaller",
		e.Field, e.Method, float64(e.Bytes)/(1<<20), float64(e.Limit)/(1<<20))
}

func (e *SizeError) Unwrap() error { return ode.ErrTooLarge }

// maxSource returns the executor's bound on a kernel's source.
func (ex *executor) maxSource() int {
	if m := ex.tun.maxSource; m > 0 {
		return m
	}
	return defaultMaxSource
}

// checkSourceSize returns a *SizeError if a kernel's source of the given
// bytes is past the executor's bound.
func (ex *executor) checkSourceSize(bytes int) error {
	if lim := ex.maxSource(); bytes > lim {
		field := "?"
		if ex.plan.Field != nil {
			field = ex.plan.Field.Name
		}
		return &SizeError{Engine: ex.name, Field: field, Method: ex.plan.Method, Bytes: bytes, Limit: lim}
	}
	return nil
}
