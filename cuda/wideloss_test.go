package cuda

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/ode"
)

// TestWideLossSource checks the wide layout's loss functions (issue 26)
// in the kernels of Lorenz-96's gradient case with d = 256
// (wideBenchGradCase; the sum of the squares of the final state): the
// gradient kernel and the loss kernel (its forward loss), the latter
// also with save times. No function of the source takes d or more
// scalar parameters (the thread layout's calling convention, which lane 0
// ran through local memory: the state copied into a local array, the
// VJP's outputs returned in a struct of 1 + d + np reals), no struct holds
// d or more reals and no function of the loss declares a local array of
// d or more reals; the gradient's loss VJP stores dL/dy and dL/dp into
// the warp's shared memory (its lam and gp parameters).
func TestWideLossSource(t *testing.T) {
	t.Parallel()
	const d = 256
	params := regexp.MustCompile(`(?m)^(?:GS_\w+ )+\w+ (\w+)\(([^)]*)\) \{$`)
	arrays := regexp.MustCompile(`gs_real (\w+)\[(\d+)\]`)
	for _, x := range []struct {
		name  string
		saves bool
		grad  bool
	}{{"grad", false, true}, {"loss", false, false}, {"loss-saves", true, false}} {
		t.Run(x.name, func(t *testing.T) {
			t.Parallel()
			c := wideBenchGradCase(4, d)
			if x.saves {
				c.prob.SaveAt = []float64{c.prob.T0 + 0.5*(c.prob.T1-c.prob.T0), c.prob.T1}
			}
			src := kernelSourceWith(t, c, ode.OpGrad, func(v *kernelgen.Config) {
				v.Wide = true
				if !x.grad {
					v.Grad, v.Store, v.Loss = false, false, true
				}
			})
			for _, m := range params.FindAllStringSubmatch(src, -1) {
				if n := strings.Count(m[2], "gs_real a"); n >= d {
					t.Errorf("%s: %s takes %d scalar parameters", x.name, m[1], n)
				}
			}
			for _, m := range regexp.MustCompile(`struct (\w+) \{ gs_real v\[(\d+)\]; \};`).FindAllStringSubmatch(src, -1) {
				if n, _ := strconv.Atoi(m[2]); n >= d {
					t.Errorf("%s: %s holds %d reals", x.name, m[1], n)
				}
			}
			// The loss functions: from the first loss program's
			// function to the adapter's end.
			name := "gs_a_loss("
			if x.grad {
				name = "gs_a_loss_grad("
			}
			at := strings.Index(src, "// program sumsq")
			end := strings.Index(src, name)
			if at < 0 || end < at {
				t.Fatalf("%s: no loss program before %s in the source", x.name, name)
			}
			for _, m := range arrays.FindAllStringSubmatch(src[at:end], -1) {
				if n, _ := strconv.Atoi(m[2]); n >= d {
					t.Errorf("%s: the loss declares a local array %s", x.name, m[0])
				}
			}
			call := regexp.MustCompile(`gs_a_loss(_grad)?\(sh, y, a\.ys, n, i, a\.data, p[^;]*;`).FindString(src[end+len(name):])
			want := fmt.Sprintf("gs_a_loss(sh, y, a.ys, n, i, a.data, p);")
			if x.grad {
				want = "gs_a_loss_grad(sh, y, a.ys, n, i, a.data, p, sc, a.loss, a.tb, lam, gp);"
			}
			if call != want {
				t.Errorf("%s: the kernel calls %q, want %q", x.name, call, want)
			}
		})
	}
}

// wideLossBits are the FNV-64a hashes of the bits of the wide layout's
// results on the simulated warp (resultBits: the gradient's loss, dL/dy0,
// dL/dp, dL/dShared; the loss's value) as the kernels gave them before
// session 49, whose loss functions took the state by value (main at
// e6d218c): Lorenz-96 with d = 64 to t = 0.25, with shared parameters
// and a loss of them (wideSharedCase, three trajectories), and without,
// with Σ‖y(T)‖² (five).
var wideLossBits = map[string]uint64{
	"shared/grad": 0x030c019e03379d9a,
	"shared/loss": 0x50bddb30eebb029c,
	"sumsq/grad":  0x01214b24da3d661c,
	"sumsq/loss":  0xd00ca619cbdb51ff,
}

// TestHostWideLossSame checks the wide layout's bound loss functions
// (issue 26: they read the state and parameters in the warp's shared
// memory and store dL/dy and dL/dp there) against the functions before
// them, bit for bit, on the simulated warp: the gradient with the record
// and the loss of wideLossBits's cases hash as before. It fails if a bit
// of the results changes.
func TestHostWideLossSame(t *testing.T) {
	needHost(t)
	t.Parallel()
	shared := wideSharedCase(3, 64)
	shared.prob.T1 = 0.25
	sumsq := lorenz96Case(5, 64, ode.Tsit5)
	sumsq.prob.T1, sumsq.prob.SaveAt, sumsq.loss = 0.25, nil, ode.SumSquares()
	for _, x := range []struct {
		name string
		c    engineCase
	}{{"shared", shared}, {"sumsq", sumsq}} {
		t.Run(x.name, func(t *testing.T) {
			t.Parallel()
			eng := tuned(t, "cuda-host-sim-227k", Tuning{Layout: LayoutWide})
			grad := wideResults(t, x.c, eng, "grad")
			p := x.c.prob
			l, _, err := x.c.solver(t, eng).Loss(&p, x.c.loss, nil)
			if err != nil {
				t.Fatal(err)
			}
			for op, got := range map[string][]float64{"grad": grad, "loss": {l}} {
				if h, want := resultBits(got), wideLossBits[x.name+"/"+op]; h != want {
					t.Errorf("%s %s: %d results hash to %#x, want %#x (before session 49): a bit changed", x.name, op, len(got), h, want)
				}
			}
		})
	}
}
