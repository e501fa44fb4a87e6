package ode

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/tape"
)

// stopAllEngine runs the CPU engine and, when a trajectory fails, leaves
// every other trajectory NotRun, as an engine that stops the whole
// ensemble on the first failure would: GradPartial must give the same
// results on it.
type stopAllEngine struct{}

func (stopAllEngine) Name() string     { return "stopall-test" }
func (stopAllEngine) Available() error { return nil }
func (stopAllEngine) Prepare(p *Plan) (Executor, error) {
	ex, err := cpuEngine{}.Prepare(p)
	return stopAllExec{ex}, err
}

type stopAllExec struct{ Executor }

func (e stopAllExec) Run(ctx context.Context, j *Job) (*Result, error) {
	res, err := e.Executor.Run(ctx, j)
	if err != nil || res.Status == nil {
		return res, err
	}
	failed := false
	for i, s := range res.Status {
		failed = failed || s != OK && s != NotRun || res.Stiff != nil && res.Stiff[i]
	}
	if failed {
		for i, s := range res.Status {
			if s == OK && !(res.Stiff != nil && res.Stiff[i]) {
				res.Status[i] = NotRun
			}
		}
	}
	return res, nil
}

func init() { Register(stopAllEngine{}) }

// blowUp is y' = p0·y² (a blow-up at t = 1/(p0·y0)), y2' = −p1·y2: with
// p0·y0 > 1/T1 the trajectory fails before T1.
var blowUp = Field{Name: "blowup", Dim: 2, Params: 2, F: func(_ tape.V, y, p []tape.V) []tape.V {
	return []tape.V{p[0].Mul(y[0].Square()), p[1].Mul(y[1]).Neg()}
}}

// partialCase returns n trajectories with random healthy parameters and
// data; those listed in bad blow up (fail), and those in nanLoss have a
// data row that makes the loss term's logarithm NaN.
func partialCase(n int, bad, nanLoss []int) (Problem, Loss) {
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	y0 := make([]float64, 2*n)
	p := make([]float64, 2*n)
	data := make([]float64, n)
	for i := range n {
		y0[2*i], y0[2*i+1] = 0.5+0.5*rng.Float64(), 1+rng.Float64()
		p[2*i], p[2*i+1] = 0.2*rng.Float64(), rng.Float64()
		data[i] = 1 + rng.Float64()
	}
	for _, i := range bad {
		p[2*i] = 5 // blows up at t ≤ 0.4
	}
	for _, i := range nanLoss {
		data[i] = -10
	}
	loss := Loss{Name: "logfit", DataDim: 1, Data: data, F: func(y, _, d []tape.V) tape.V {
		return y[0].Add(d[0]).Log().Square().Add(y[1].Square())
	}}
	return Problem{Field: blowUp, Y0: y0, P: p, T1: 1}, loss
}

// without returns the problem and loss without trajectories out.
func without(p Problem, l Loss, out []int) (Problem, Loss, []int) {
	drop := map[int]bool{}
	for _, i := range out {
		drop[i] = true
	}
	var keep []int
	for i := 0; i < len(p.Y0)/2; i++ {
		if !drop[i] {
			keep = append(keep, i)
		}
	}
	q := p
	q.Y0, q.P = rowsOf(p.Y0, 2, keep), rowsOf(p.P, 2, keep)
	m := l
	m.Data = rowsOf(l.Data, 1, keep)
	return q, m, keep
}

func TestGradPartial(t *testing.T) {
	t.Parallel()
	const n = 300 // several chunks of the CPU engine
	for _, tc := range []struct {
		name       string
		engine     string
		bad, nan   []int
		skip       []int
		mean, mesh bool
	}{
		{"one fails", "cpu", []int{17}, nil, nil, false, false},
		{"several fail", "cpu", []int{0, 130, 131, 299}, nil, nil, false, false},
		{"loss NaN", "cpu", nil, []int{5, 260}, nil, false, false},
		{"fail, NaN and skip", "cpu", []int{40}, []int{41}, []int{42, 200}, false, false},
		{"mean", "cpu", []int{3}, nil, nil, true, false},
		{"replay a mesh", "cpu", []int{3, 150}, []int{7}, []int{9}, false, true},
		{"engine stops all", "stopall-test", []int{17, 250}, []int{100}, nil, false, false},
		{"engine stops all, mesh", "stopall-test", []int{17}, []int{100}, []int{1}, false, true},
		{"none fails", "cpu", nil, nil, nil, false, false},
	} {
		p, loss := partialCase(n, tc.bad, tc.nan)
		loss.Mean = tc.mean
		sv, err := NewSolver(p.Field, &Settings{Engine: tc.engine})
		if err != nil {
			t.Fatal(err)
		}
		var skip []bool
		if tc.skip != nil {
			skip = make([]bool, n)
			for _, i := range tc.skip {
				skip[i] = true
			}
		}
		var m *Mesh
		if tc.mesh {
			// A mesh recorded with failures: replaying it leaves them out.
			set := sv.Settings()
			set.AllowFailures, set.Engine = true, "cpu"
			rsv, err := NewSolver(p.Field, &set)
			if err != nil {
				t.Fatal(err)
			}
			if m, _, err = rsv.Record(&p); err != nil {
				t.Fatal(err)
			}
		}
		g, fails, err := sv.GradPartial(context.Background(), nil, &p, loss, m, skip)
		if err != nil {
			t.Fatalf("Case %s: %v", tc.name, err)
		}
		// The reference: Grad of the ensemble without the left-out
		// trajectories, on the CPU engine.
		out := append(append(append([]int(nil), tc.bad...), tc.nan...), tc.skip...)
		rp, rl, keep := without(p, loss, out)
		rl.Mean = false
		ref, err := Grad(nil, rp, rl, nil, nil)
		if err != nil {
			t.Fatalf("Case %s: reference: %v", tc.name, err)
		}
		wantLoss := ref.Loss
		if tc.mean {
			// The sum over the healthy terms, divided by all N.
			rlm := rl
			rlm.Mean = false
			wantLoss = ref.Loss * (1 / float64(n))
		}
		if math.Float64bits(g.Loss) != math.Float64bits(wantLoss) && !(tc.mean && math.Abs(g.Loss-wantLoss) <= 1e-15*wantLoss) {
			t.Errorf("Case %s: loss %.17g, want %.17g", tc.name, g.Loss, wantLoss)
		}
		for j, i := range keep {
			for c := range 2 {
				got, want := g.P[2*i+c], ref.P[2*j+c]
				if tc.mean {
					want *= 1 / float64(n)
					if math.Abs(got-want) > 1e-14*math.Abs(want) {
						t.Errorf("Case %s: ∂L/∂P[%d,%d] = %v, want %v", tc.name, i, c, got, want)
					}
					continue
				}
				if math.Float64bits(got) != math.Float64bits(want) || math.Float64bits(g.Y0[2*i+c]) != math.Float64bits(ref.Y0[2*j+c]) {
					t.Errorf("Case %s: trajectory %d: gradient differs from the ensemble without the failures", tc.name, i)
				}
			}
			if g.Solution.Status[i] != OK || math.Float64bits(g.Solution.Y[2*i]) != math.Float64bits(ref.Solution.Y[2*j]) {
				t.Errorf("Case %s: trajectory %d: status %v, y %v; want ok, %v", tc.name, i, g.Solution.Status[i], g.Solution.Y[2*i], ref.Solution.Y[2*j])
			}
		}
		// The left-out ones: zero gradient, NaN states, their statuses.
		for _, i := range out {
			if g.P[2*i] != 0 || g.P[2*i+1] != 0 || g.Y0[2*i] != 0 || !math.IsNaN(g.Solution.Y[2*i]) {
				t.Errorf("Case %s: left-out trajectory %d has gradient %v, state %v", tc.name, i, g.P[2*i:2*i+2], g.Solution.Y[2*i])
			}
		}
		wantFail := map[int]Status{}
		for _, i := range tc.bad {
			if !tc.mesh {
				wantFail[i] = StepSizeUnderflow
			}
		}
		for _, i := range tc.nan {
			wantFail[i] = NonFinite
		}
		if len(fails) != len(wantFail) {
			t.Errorf("Case %s: %d failures, want %d: %v", tc.name, len(fails), len(wantFail), fails)
		}
		for k, e := range fails {
			st, ok := wantFail[e.Index]
			if !ok || (st == NonFinite) != (e.Status == NonFinite) || k > 0 && fails[k-1].Index >= e.Index {
				t.Errorf("Case %s: failure %v (status %v) not expected or out of order", tc.name, e, e.Status)
			}
			if g.Solution.Status[e.Index] != e.Status {
				t.Errorf("Case %s: trajectory %d: solution status %v, failure %v", tc.name, e.Index, g.Solution.Status[e.Index], e.Status)
			}
			if !errors.Is(e, e.Status.Err()) || e.Error() == "" {
				t.Errorf("Case %s: failure %v does not unwrap to its status", tc.name, e)
			}
		}
		for _, i := range tc.skip {
			if g.Solution.Status[i] != NotRun {
				t.Errorf("Case %s: skipped trajectory %d has status %v", tc.name, i, g.Solution.Status[i])
			}
		}
		// The mesh (when recorded) leaves the failures out when replayed.
		if m == nil && g.Mesh.N == n {
			g2, f2, err := sv.GradPartial(context.Background(), nil, &p, loss, g.Mesh, skip)
			if err != nil {
				t.Fatalf("Case %s: replay: %v", tc.name, err)
			}
			if math.Float64bits(g2.Loss) != math.Float64bits(g.Loss) || len(f2) != 0 && len(tc.nan) == 0 {
				t.Errorf("Case %s: replay of the returned mesh: loss %v (want %v), failures %v", tc.name, g2.Loss, g.Loss, f2)
			}
		}
	}
}

func TestGradPartialErrors(t *testing.T) {
	t.Parallel()
	p, loss := partialCase(4, nil, nil)
	sv, err := NewSolver(p.Field, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := sv.GradPartial(context.Background(), nil, &p, loss, nil, make([]bool, 3)); err == nil {
		t.Error("a skip of the wrong length was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := sv.GradPartial(ctx, nil, &p, loss, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	// Every trajectory left out: a zero gradient, no error.
	g, _, err := sv.GradPartial(context.Background(), nil, &p, loss, nil, []bool{true, true, true, true})
	if err != nil || g.Loss != 0 || g.P[0] != 0 || g.Solution.Status[3] != NotRun {
		t.Errorf("all skipped: %v, %v", g, err)
	}
}
