package cuda

import (
	"errors"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// tinyEngine is the host engine on a device of 64 KiB, too small for any
// launch.
var tinyEngine = &Engine{name: "cuda-host-tiny", prec: Float64,
	be: &fakeDevice{hostBackend: newHostBackend(64 << 10), kernels: hostF64.be.(*hostBackend)}}

func init() { ode.Register(tinyEngine) }

// TestHostEngineLaunchTooLarge checks the error of a call whose smallest
// launch (32 trajectories) does not fit: it wraps ode.ErrTooLarge and
// names the limit that refused it and the fix, Settings.MemoryLimit where
// the caller set it too small (an input error, ode.ErrInput), the
// device's free memory otherwise (the engine's limit), for Solve and Grad.
func TestHostEngineLaunchTooLarge(t *testing.T) {
	needHost(t)
	c := lorenzCase(40, 1e-6)
	cases := []struct {
		name   string
		engine string
		limit  int64
		want   []string
		input  bool // the caller's MemoryLimit refused it: ode.ErrInput too
	}{
		{"MemoryLimit 1", hostF64.name, 1, []string{"more than Settings.MemoryLimit = 1 bytes", "raise MemoryLimit to at least"}, true},
		{"MemoryLimit 1000", hostF64.name, 1000, []string{"more than Settings.MemoryLimit = 1000 bytes", "raise MemoryLimit to at least"}, true},
		{"small device", tinyEngine.name, 0, []string{"bytes are free for it", "free device memory"}, false},
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
			if errors.Is(err, ode.ErrInput) != tc.input {
				t.Errorf("%s: %s: errors.Is(err, ErrInput) = %t, want %t: %v", tc.name, op, !tc.input, tc.input, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %s: error %q does not say %q", tc.name, op, err, w)
				}
			}
		}
	}
}

// TestHostEngineReleasedReuse checks every use of engine memory released
// before it was read (a mesh's steps, a solution's saved states, a
// gradient's kept results): each returns an error wrapping
// ode.ErrReleased that names the call to make again.
func TestHostEngineReleasedReuse(t *testing.T) {
	needHost(t)
	c := lorenzCase(40, 1e-6)
	cpu := c.set // the "other engine" of a released mesh
	c.set.KeepSaves = true
	sv := c.solver(t, hostF64.name)
	c.set.KeepGrads = true
	svk := c.solver(t, hostF64.name)
	released := func() *ode.Mesh {
		m, _, err := sv.Record(&c.prob)
		if err != nil {
			t.Fatal(err)
		}
		if m.Resident == nil {
			t.Fatal("the host engine's mesh is not resident: the test checks nothing")
		}
		m.Release()
		return m
	}
	cases := []struct {
		name string
		use  func() error
		want string
	}{
		{"Grad on a released mesh", func() error { _, err := sv.Grad(nil, &c.prob, c.loss, released()); return err }, "record the mesh again"},
		{"Replay of a released mesh", func() error { _, err := sv.Replay(&c.prob, released()); return err }, "record the mesh again"},
		{"Host of a released mesh", func() error { return released().Host() }, "record the mesh again"},
		{"Grad on another engine", func() error {
			_, err := ode.Grad(nil, c.prob, c.loss, released(), &cpu)
			return err
		}, "record the mesh again"},
		{"HostSaves after Release", func() error {
			s, err := sv.Solve(&c.prob)
			if err != nil {
				return err
			}
			if s.Resident == nil {
				t.Fatal("the host engine's saves are not resident: the case checks nothing")
			}
			s.Release()
			return s.HostSaves()
		}, "solve again"},
		{"HostGrads after Release", func() error {
			g, err := svk.Grad(nil, &c.prob, c.loss, nil)
			if err != nil {
				return err
			}
			g.Release()
			return g.HostGrads()
		}, "call Grad again"},
	}
	for _, tc := range cases {
		err := tc.use()
		if !errors.Is(err, ode.ErrReleased) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v; want one wrapping ErrReleased that says %q", tc.name, err, tc.want)
		}
	}
}

// TestHostEngineNilTrainInputs checks NewTrainer on an engine that keeps
// fits (the host engine) given a nil problem or a nil TrainSpec: an error
// naming it, not a nil-pointer panic.
func TestHostEngineNilTrainInputs(t *testing.T) {
	needHost(t)
	c := lorenzCase(40, 1e-6)
	sv := c.solver(t, hostF64.name)
	spec := &ode.TrainSpec{P: []int{1}}
	for _, tc := range []struct {
		name string
		prob *ode.Problem
		spec *ode.TrainSpec
		want string
	}{
		{"nil problem", nil, spec, "the problem is nil"},
		{"nil spec", &c.prob, nil, "the TrainSpec is nil"},
	} {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: NewTrainer panicked: %v", tc.name, r)
				}
			}()
			var tr ode.Trainer
			if tr, err = sv.NewTrainer(tc.prob, c.loss, tc.spec); tr != nil {
				tr.Release()
			}
		}()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

// TestHostEngineFloat32Range checks that the float32 engine refuses, with
// an error naming the value and the fix, inputs that float64 holds but
// float32 does not: values beyond ±MaxFloat32 (they were infinities in
// the kernel: a non-finite state blamed on the field), spans shorter than
// float32's resolution of their times (T1 rounded onto T0: status OK
// with the initial state returned as the final one), and absolute
// tolerances below the smallest normal float32 (0 in the kernel: a
// component at 0 made the error norm NaN). The CPU engine solves each.
func TestHostEngineFloat32Range(t *testing.T) {
	needHost(t)
	f := ode.Field{Name: "decay", Dim: 1, Params: 1, Shared: 1, F: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{p[0].Mul(y[0]).Neg()} }}
	good := ode.Problem{Field: f, Y0: []float64{1}, P: []float64{1}, Shared: []float64{0}, T1: 1}
	for _, tc := range []struct {
		name string
		mod  func(p *ode.Problem, s *ode.Settings)
		want string
	}{
		{"Y0 beyond float32", func(p *ode.Problem, _ *ode.Settings) { p.Y0 = []float64{1e39} }, "Y0[0] = 1e+39 is beyond the range of float32"},
		{"P beyond float32", func(p *ode.Problem, _ *ode.Settings) { p.P = []float64{-1e-40}; p.T1 = 1e40 }, "T1[0] = 1e+40 is beyond the range of float32"},
		{"Shared beyond float32", func(p *ode.Problem, _ *ode.Settings) { p.Shared = []float64{-4e38} }, "Shared[0] = -4e+38 is beyond the range of float32"},
		{"T1s beyond float32", func(p *ode.Problem, _ *ode.Settings) { p.N, p.P, p.T1s = 2, []float64{-1e-40}, []float64{1, 1e39} }, "T1s[1] = 1e+39 is beyond"},
		{"span below float32's resolution", func(p *ode.Problem, _ *ode.Settings) { p.T0, p.T1 = 1e8, 1e8+1 }, "shorter than the smallest step float32"},
		{"one T1s below float32's resolution", func(p *ode.Problem, _ *ode.Settings) { p.N, p.T0, p.T1s = 2, 1e8, []float64{1e8 + 1000, 1e8 + 1} },
			"of trajectory 1 is 1 long, shorter than the smallest step float32"},
		{"AbsTol below float32's normals", func(_ *ode.Problem, s *ode.Settings) { s.AbsTol = 1e-50 }, "AbsTol = 1e-50 is below 2^-126"},
		{"AbsTols below float32's normals", func(_ *ode.Problem, s *ode.Settings) { s.AbsTols = []float64{1e-40} }, "AbsTols[0] = 1e-40 is below 2^-126"},
	} {
		p := good
		set := ode.Settings{RelTol: 1e-4}
		tc.mod(&p, &set)
		if _, err := ode.Solve(p, &set); err != nil {
			t.Errorf("%s: the CPU engine: %v", tc.name, err)
		}
		set.Engine = hostF32.name
		_, err := ode.Solve(p, &set)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "float64 engine") {
			t.Errorf("%s: the float32 engine: error %v, want one saying %q and naming the float64 engines", tc.name, err, tc.want)
		}
	}
}

// TestHostEngineFloat32FarOrigin checks the hint of a float32 solve on a
// span far from the time origin, just above float32's resolution of its
// times: a step-size underflow whose hint names float32's smallest step
// there and the shift of the origin (it said the step size shrank to
// zero, blaming the field's scale).
func TestHostEngineFloat32FarOrigin(t *testing.T) {
	needHost(t)
	f := ode.Field{Name: "decay", Dim: 1, Params: 1, F: func(_ tape.V, y, p []tape.V) []tape.V { return []tape.V{p[0].Mul(y[0]).Neg()} }}
	p := ode.Problem{Field: f, Y0: []float64{1}, P: []float64{1}, T0: 1e8, T1: 1e8 + 100}
	_, err := ode.Solve(p, &ode.Settings{RelTol: 1e-4, Engine: hostF32.name})
	for _, want := range []string{"step size underflow", "float32 resolves no step below 4ε·|t| = 47.7", "far from the time origin", "t replaced by t + T0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want one saying %q", err, want)
		}
	}
}
