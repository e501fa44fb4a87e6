package ode_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

func sameBitsF(t *testing.T, what string, want, got []float64) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
			t.Fatalf("%s[%d] = %v, want %v bit for bit", what, i, got[i], want[i])
		}
	}
}

func sameInts(t *testing.T, what string, want, got []int) {
	t.Helper()
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// TestEngineDeterminism checks that the CPU engine's meshes, states and
// gradients (shared ones included) are the same bit for bit for any
// number of workers and any chunk size.
func TestEngineDeterminism(t *testing.T) {
	t.Parallel()
	neural := problems.NeuralRobertson(2)
	neural.T1 = 5
	cases := []struct {
		name string
		pr   func() ode.Problem
		set  ode.Settings
		loss ode.Loss
	}{
		{"lorenz-shared", func() ode.Problem {
			n := 37
			pr := ode.Problem{Field: lorenzSharedField(), N: n, Y0: make([]float64, 3*n), P: make([]float64, n), Shared: []float64{10, 8.0 / 3}, T1: 1, SaveAt: []float64{0.3, 0.7}}
			for i := 0; i < n; i++ {
				pr.Y0[3*i] = 1 + 0.01*float64(i)
				pr.P[i] = 21 * float64(i) / float64(n-1)
			}
			return pr
		}, ode.Settings{RelTol: 1e-7}, ode.Loss{Name: "mix", Mean: true, F: func(y, ys, _ []tape.V) tape.V {
			return y[0].Square().Add(ys[1].Mul(ys[4]))
		}}},
		{"neural-robertson", func() ode.Problem {
			n := 19
			y0, p := neural.Ensemble(n)
			for i := 0; i < n; i++ {
				p[2*i] = 0.02 + 0.002*float64(i)
			}
			return ode.Problem{Field: neural.Field, N: n, Y0: y0, P: p, Shared: neural.Shared, T1: neural.T1}
		}, ode.Settings{Method: ode.Rodas5P, RelTol: 1e-5, AbsTol: 1e-9}, ode.Component(2)},
	}
	for _, c := range cases {
		var ref *ode.Gradient
		var refSol *ode.Solution
		for _, workers := range []int{1, 2, 3} {
			for _, chunk := range []int{0, 8, 24, 1000} {
				set := c.set
				set.Exec.Workers, set.Exec.BlockSize = workers, chunk
				pr := c.pr()
				sv, err := ode.NewSolver(pr.Field, &set)
				if err != nil {
					t.Fatal(err)
				}
				g, err := sv.Grad(nil, &pr, c.loss, nil)
				if err != nil {
					t.Fatal(err)
				}
				sol, err := sv.Solve(&pr)
				if err != nil {
					t.Fatal(err)
				}
				if ref == nil {
					ref, refSol = g, sol
					continue
				}
				what := fmt.Sprintf("%s, workers %d, chunk %d", c.name, workers, chunk)
				sameBitsF(t, what+": mesh", ref.Mesh.H, g.Mesh.H)
				sameInts(t, what+": Len", ref.Mesh.Len, g.Mesh.Len)
				sameBitsF(t, what+": dL/dY0", ref.Y0, g.Y0)
				sameBitsF(t, what+": dL/dP", ref.P, g.P)
				sameBitsF(t, what+": dL/dShared", ref.Shared, g.Shared)
				sameBitsF(t, what+": loss", []float64{ref.Loss}, []float64{g.Loss})
				sameBitsF(t, what+": final states", refSol.Y, sol.Y)
				sameBitsF(t, what+": saved states", refSol.Ys, sol.Ys)
			}
		}
	}
}

// TestSolverConcurrent runs one Solver from several goroutines at once
// (run it with -race) and checks that every call gets what a serial call
// gets.
func TestSolverConcurrent(t *testing.T) {
	t.Parallel()
	f := lorenzSharedField()
	sv, err := ode.NewSolver(f, &ode.Settings{RelTol: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	problem := func(k int) ode.Problem {
		n := 5 + k
		pr := ode.Problem{Field: f, N: n, Y0: make([]float64, 3*n), P: make([]float64, n), Shared: []float64{10, 8.0 / 3}, T1: 0.5 + 0.1*float64(k)}
		for i := 0; i < n; i++ {
			pr.Y0[3*i] = 1
			pr.P[i] = 10 + float64(i+k)
		}
		return pr
	}
	const calls = 8
	want := make([]*ode.Gradient, calls)
	for k := range want {
		pr := problem(k)
		if want[k], err = sv.Grad(nil, &pr, ode.SumSquares(), nil); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	got := make([]*ode.Gradient, calls)
	errs := make([]error, calls)
	for rep := 0; rep < 3; rep++ {
		for k := 0; k < calls; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pr := problem(k)
				if k%2 == 1 {
					if _, err := sv.Solve(&pr); err != nil {
						errs[k] = err
						return
					}
				}
				got[k], errs[k] = sv.Grad(nil, &pr, ode.SumSquares(), nil)
			}()
		}
		wg.Wait()
		for k := 0; k < calls; k++ {
			if errs[k] != nil {
				t.Fatal(errs[k])
			}
			what := fmt.Sprintf("call %d", k)
			sameBitsF(t, what+": dL/dP", want[k].P, got[k].P)
			sameBitsF(t, what+": dL/dShared", want[k].Shared, got[k].Shared)
		}
	}
}

// TestEngineSelection checks Settings.Engine and that results name their
// engine.
func TestEngineSelection(t *testing.T) {
	t.Parallel()
	pr := ode.Problem{Field: lorenzField(), Y0: []float64{1, 0, 0}, P: []float64{10, 28, 8.0 / 3}, T1: 0.1}
	for _, name := range []string{"", "cpu", "auto"} {
		sol, err := ode.Solve(pr, &ode.Settings{Engine: name})
		if err != nil {
			t.Fatalf("engine %q: %v", name, err)
		}
		if sol.Engine == "" {
			t.Errorf("engine %q: the solution does not name its engine", name)
		}
	}
	_, err := ode.Solve(pr, &ode.Settings{Engine: "warp"})
	if err == nil || !strings.Contains(err.Error(), `"warp"`) || !strings.Contains(err.Error(), "cpu") {
		t.Errorf("unknown engine: error %v, want one naming it and the registered engines", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sv, err := ode.NewSolver(pr.Field, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sv.SolveContext(ctx, &pr); err != context.Canceled {
		t.Errorf("cancelled context: error %v, want context.Canceled", err)
	}
	if _, err := sv.SolveToContext(ctx, &ode.Solution{}, &pr); err != context.Canceled {
		t.Errorf("SolveToContext, cancelled context: error %v, want context.Canceled", err)
	}
}

// TestMemoryLimitSameGradient checks that a memory limit, which makes the
// CPU engine drop the recorder's states and recompute them from
// checkpoints, changes neither the mesh nor the gradient, and that the
// stored bytes respect it (beyond the working set of one state per
// trajectory of a chunk).
func TestMemoryLimitSameGradient(t *testing.T) {
	t.Parallel()
	n := 24
	pr := ode.Problem{Field: lorenzSharedField(), N: n, Y0: make([]float64, 3*n), P: make([]float64, n), Shared: []float64{10, 8.0 / 3}, T1: 2, SaveAt: []float64{0.5, 1.5}}
	for i := 0; i < n; i++ {
		pr.Y0[3*i] = 1
		pr.P[i] = 28 + float64(i)/4
	}
	loss := ode.Loss{Name: "saved", F: func(y, ys, _ []tape.V) tape.V { return y[2].Add(ys[0].Mul(ys[5])) }}
	want, err := ode.Grad(nil, pr, loss, nil, &ode.Settings{Exec: tape.ExecSettings{Workers: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{1 << 12, 1} {
		g, err := ode.Grad(nil, pr, loss, nil, &ode.Settings{MemoryLimit: limit, Exec: tape.ExecSettings{Workers: 2}})
		if err != nil {
			t.Fatal(err)
		}
		what := fmt.Sprintf("MemoryLimit %d", limit)
		sameBitsF(t, what+": mesh", want.Mesh.H, g.Mesh.H)
		sameBitsF(t, what+": dL/dY0", want.Y0, g.Y0)
		sameBitsF(t, what+": dL/dP", want.P, g.P)
		sameBitsF(t, what+": dL/dShared", want.Shared, g.Shared)
		if one := int64(n * 4 * 8); g.StoredBytes > max(limit, one) {
			t.Errorf("%s: stored %d bytes", what, g.StoredBytes)
		}
		if g.StoredBytes >= want.StoredBytes {
			t.Errorf("%s: stored %d bytes, no fewer than the %d without a limit", what, g.StoredBytes, want.StoredBytes)
		}
	}
}

// servingEngine is an engine whose executor serves every other job on the
// CPU engine (ode.CPU), saying so in Result.Engine, and runs the others on
// the CPU engine as its own.
type servingEngine struct{}

func (servingEngine) Name() string     { return "serving-spy" }
func (servingEngine) Available() error { return nil }
func (servingEngine) Prepare(pl *ode.Plan) (ode.Executor, error) {
	ex, err := ode.CPU().Prepare(pl)
	return &servingExec{cpu: ex}, err
}

type servingExec struct {
	cpu ode.Executor
	mu  sync.Mutex
	k   int
}

func (e *servingExec) Run(ctx context.Context, j *ode.Job) (*ode.Result, error) {
	e.mu.Lock()
	e.k++
	served := e.k%2 == 1
	e.mu.Unlock()
	res, err := e.cpu.Run(ctx, j)
	if err == nil && served {
		res.Engine = "cpu"
	}
	return res, err
}

var registerServing sync.Once

// TestResultEngine checks that a Solution and a recorded Mesh name the
// engine that ran their job: the one an executor served it on
// (Result.Engine, here every other call) or else the solver's.
func TestResultEngine(t *testing.T) {
	registerServing.Do(func() { ode.Register(servingEngine{}) })
	pr := ode.Problem{Field: lorenzField(), N: 4, Y0: []float64{1, 0, 0}, P: []float64{10, 28, 8.0 / 3}, T1: 0.5}
	sv, err := ode.NewSolver(pr.Field, &ode.Settings{Engine: "serving-spy"})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range []string{"cpu", "serving-spy", "cpu", "serving-spy"} {
		var engine, meshEngine string
		if k < 2 {
			sol, err := sv.Solve(&pr)
			if err != nil {
				t.Fatal(err)
			}
			engine, meshEngine = sol.Engine, want
		} else {
			g, err := sv.Grad(nil, &pr, ode.SumSquares(), nil)
			if err != nil {
				t.Fatal(err)
			}
			engine, meshEngine = g.Solution.Engine, g.Mesh.Engine
		}
		if engine != want || meshEngine != want {
			t.Errorf("call %d: solution of %q, mesh of %q: want %q", k, engine, meshEngine, want)
		}
	}
}

// unavailableEngine is registered but cannot run here.
type unavailableEngine struct{ servingEngine }

var errNoHardware = errors.New("no such hardware")

func (unavailableEngine) Name() string     { return "unavailable-spy" }
func (unavailableEngine) Available() error { return errNoHardware }

// TestEngineUnavailable checks NewSolver's error for a registered engine
// that cannot run: it wraps ode.ErrUnavailable and the engine's own
// reason, and says both; "auto" passes it over for the CPU engine; an
// unregistered name wraps ErrNoEngine instead.
func TestEngineUnavailable(t *testing.T) {
	registerUnavailable.Do(func() { ode.Register(unavailableEngine{}) })
	f := ode.Field{Name: "decay", Dim: 1, F: func(_ tape.V, y, _ []tape.V) []tape.V { return []tape.V{y[0].Neg()} }}
	_, err := ode.NewSolver(f, &ode.Settings{Engine: "unavailable-spy"})
	if !errors.Is(err, ode.ErrUnavailable) || !errors.Is(err, errNoHardware) || errors.Is(err, ode.ErrNoEngine) {
		t.Fatalf("NewSolver on an unavailable engine: %v; want ErrUnavailable and the engine's reason", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `engine "unavailable-spy" is not available: no such hardware`) {
		t.Errorf("message %q does not name the engine and its reason", msg)
	}
	sv, err := ode.NewSolver(f, &ode.Settings{Engine: "auto"})
	if err != nil {
		t.Fatalf("auto with an unavailable engine registered: %v", err)
	}
	if got := sv.Engine(); got == "unavailable-spy" {
		t.Errorf("auto chose the unavailable engine")
	}
	if _, err := ode.NewSolver(f, &ode.Settings{Engine: "no-such-engine"}); !errors.Is(err, ode.ErrNoEngine) || errors.Is(err, ode.ErrUnavailable) {
		t.Errorf("an unregistered engine: %v; want ErrNoEngine alone", err)
	}
}

var registerUnavailable sync.Once
