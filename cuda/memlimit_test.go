package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// tinyEngine is the host engine on a device of 64 KiB, too small for any
// launch.
var tinyEngine = &Engine{name: "cuda-host-tiny", prec: Float64,
	be: &fakeDevice{hostBackend: newHostBackend(64 << 10), kernels: hostF64.be.(*hostBackend)}}

func init() { ode.Register(tinyEngine) }

// TestHostEngineLaunchTooLarge checks the error of a call whose smallest
// launch (32 trajectories) does not fit: it wraps ode.ErrTooLarge and
// names the limit that refused it and the fix, Settings.MemoryLimit where
// the caller set it too small, the device's free memory otherwise, for
// Solve and Grad.
func TestHostEngineLaunchTooLarge(t *testing.T) {
	needHost(t)
	c := lorenzCase(40, 1e-6)
	cases := []struct {
		name   string
		engine string
		limit  int64
		want   []string
	}{
		{"MemoryLimit 1", hostF64.name, 1, []string{"more than Settings.MemoryLimit = 1 bytes", "raise MemoryLimit to at least"}},
		{"MemoryLimit 1000", hostF64.name, 1000, []string{"more than Settings.MemoryLimit = 1000 bytes", "raise MemoryLimit to at least"}},
		{"small device", tinyEngine.name, 0, []string{"bytes are free for it", "free device memory"}},
	}
	for _, tc := range cases {
		set := c.set
		set.Engine, set.MemoryLimit = tc.engine, tc.limit
		sv, err := ode.NewSolver(c.prob.Field, &set)
		if err != nil {
			t.Fatal(err)
		}
		_, serr := sv.Solve(&c.prob)
		_, gerr := sv.Grad(nil, &c.prob, c.loss, nil)
		for op, err := range map[string]error{"Solve": serr, "Grad": gerr} {
			if !errors.Is(err, ode.ErrTooLarge) {
				t.Errorf("%s: %s: error %v, want one wrapping ErrTooLarge", tc.name, op, err)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %s: error %q does not say %q", tc.name, op, err, w)
				}
			}
		}
	}
}
