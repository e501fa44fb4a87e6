package cuda

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
)

// The tests of kernel generation on the host (g++, a simulated warp) are
// package kernelgen's; these are the host compiler's helpers the engine's
// tests use (kerneltest).

// gxx returns the path of g++, or skips the test.
func gxx(t *testing.T) string { return kerneltest.GXX(t) }

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string { return kerneltest.FirstLines(s, n) }

// warpSim simulates a warp on the host (kerneltest.WarpSim).
const warpSim = kerneltest.WarpSim
