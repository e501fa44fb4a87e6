package cuda

import (
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The test programs of kernel generation (kerneltest), in the form the
// GPU tests of map kernels (gpu_test.go) read them.

// testProgram is a kerneltest.Program.
type testProgram struct {
	p     *tape.Program
	in    [][]float64 // non-shared inputs, [k][i]
	sh    []float64   // shared inputs
	tol   tolerance
	float bool // well conditioned: also checked in float32
}

// tolerance is a kerneltest.Tolerance.
type tolerance struct {
	ulps int64
	rel  float64
}

// programOf returns kp as a testProgram.
func programOf(kp kerneltest.Program) testProgram {
	return testProgram{p: kp.P, in: kp.In, sh: kp.Sh, tol: tolerance{ulps: kp.Tol.ULPs, rel: kp.Tol.Rel}, float: kp.Float}
}

// kt returns tp as a kerneltest.Program.
func (tp *testProgram) kt() *kerneltest.Program {
	return &kerneltest.Program{P: tp.p, In: tp.in, Sh: tp.sh, Tol: tp.tol.kt(), Float: tp.float}
}

// kt returns tol as a kerneltest.Tolerance.
func (tol tolerance) kt() kerneltest.Tolerance {
	return kerneltest.Tolerance{ULPs: tol.ulps, Rel: tol.rel}
}

// allPrograms is kerneltest.AllPrograms.
func allPrograms(t testing.TB, n int) []testProgram {
	var tps []testProgram
	for _, kp := range kerneltest.AllPrograms(t, n) {
		tps = append(tps, programOf(kp))
	}
	return tps
}

// lorenzTest is kerneltest.LorenzTest.
func lorenzTest(t testing.TB, r *rand.Rand, n int) testProgram {
	return programOf(kerneltest.LorenzTest(t, r, n))
}

// n returns the number of trajectories.
func (tp *testProgram) n() int { return tp.kt().N() }

// compare checks got ([m][i]) against the program's Eval
// (kerneltest.Program.Compare).
func (tp *testProgram) compare(t *testing.T, what string, got [][]float64, tol tolerance) {
	t.Helper()
	tp.kt().Compare(t, what, got, tol.kt())
}

// trace is kerneltest.Trace.
func trace(t testing.TB, name string, in []tape.Input, f func([]tape.V) []tape.V) *tape.Program {
	return kerneltest.Trace(t, name, in, f)
}
