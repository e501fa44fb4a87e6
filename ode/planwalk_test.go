package ode_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// scalarEngine is a test-only engine that walks a Plan with nothing but
// its exported programs and the scalar interpreter (tape.Program.Eval),
// one trajectory at a time: the driver loop of the Plan's documentation.
// It shows that an engine needs none of package ode's internals. It runs
// records and plain solves only.
type scalarEngine struct{}

func (scalarEngine) Name() string                              { return "scalar-test" }
func (scalarEngine) Available() error                          { return nil }
func (scalarEngine) Prepare(p *ode.Plan) (ode.Executor, error) { return scalarExec{p}, nil }

type scalarExec struct{ pl *ode.Plan }

func (e scalarExec) Run(_ context.Context, j *ode.Job) (*ode.Result, error) {
	if j.Op != ode.OpRecord && j.Op != ode.OpSolve || len(j.SaveAt) > 0 || j.Mesh != nil {
		return nil, errors.New("scalar-test engine: records and plain solves only")
	}
	pl := e.pl
	d, np := pl.Dim, pl.Params
	n := j.N
	res := &ode.Result{T: make([]float64, n), Y: make([]float64, n*d), Status: make([]ode.Status, n), Stiff: make([]bool, n),
		LastH: make([]float64, n), Stats: ode.Stats{Accepted: make([]int, n), Rejected: make([]int, n), FieldEvals: make([]int, n)}}
	var hs [][]float64
	rows := 0
	for i := 0; i < n; i++ {
		y := append([]float64(nil), j.Y0[i*d:(i+1)*d]...)
		p := j.P[i*np : (i+1)*np]
		// Init: t0, t1, y, p, s, rtol, atol → h, last, f0.
		in := append(append(append(append([]float64{j.T0, j.T1[i]}, y...), p...), j.Shared...), j.RelTol)
		in = append(in, j.AbsTol...)
		out := pl.Init.Eval(nil, in)
		st := make([]float64, ode.NumState)
		st[ode.StateT], st[ode.StateH], st[ode.StateErrPrev], st[ode.StateLast] = j.T0, out[0], 1, out[1]
		k1 := append([]float64(nil), out[2:]...)
		var h []float64
		for {
			in = append(append(append([]float64{st[ode.StateT], st[ode.StateH]}, y...), p...), j.Shared...)
			if pl.FSAL {
				in = append(in, k1...)
			}
			tr := pl.Trial.Eval(nil, in)
			yn, errv := tr[:d], tr[d:2*d]
			hrho := tr[len(tr)-1]
			cin := append(append([]float64{}, st...), j.T1[i])
			cin = append(append(append(append(cin, y...), yn...), errv...), hrho, j.RelTol)
			cin = append(append(cin, j.AbsTol...), float64(j.MaxSteps))
			co := pl.Control.Eval(nil, cin)
			if co[ode.NumState] != 0 { // accepted
				h = append(h, st[ode.StateH])
				copy(y, yn)
				if pl.FSAL {
					copy(k1, tr[2*d:3*d])
				}
			}
			res.LastH[i] = st[ode.StateH]
			copy(st, co[:ode.NumState])
			if status := co[ode.NumState+1]; status != ode.StatusRunning {
				res.Status[i] = ode.Status(status)
				break
			}
		}
		res.T[i] = st[ode.StateT]
		copy(res.Y[i*d:], y)
		if res.Status[i] != ode.OK {
			for c := 0; c < d; c++ {
				res.Y[i*d+c] = math.NaN()
			}
		}
		res.Stats.Accepted[i], res.Stats.Rejected[i] = int(st[ode.StateAccepted]), int(st[ode.StateRejected])
		res.Stats.FieldEvals[i] = pl.InitEvals + pl.TrialEvals*(res.Stats.Accepted[i]+res.Stats.Rejected[i])
		res.Stiff[i] = st[ode.StateStiff] != 0
		hs = append(hs, h)
		rows = max(rows, len(h))
	}
	if j.Op == ode.OpRecord {
		m := &ode.Mesh{N: n, Rows: rows, H: make([]float64, rows*n), Len: make([]int, n), Status: res.Status, Stats: res.Stats}
		for i, h := range hs {
			m.Len[i] = len(h)
			for s, x := range h {
				m.H[s*n+i] = x
			}
		}
		res.Mesh = m
	}
	return res, nil
}

func init() { ode.Register(scalarEngine{}) }

// TestPlanWalk checks that an engine built from the Plan alone (the
// scalar interpreter, one trajectory at a time) takes the CPU engine's
// steps bit for bit: the same mesh, statistics, statuses and final states.
func TestPlanWalk(t *testing.T) {
	t.Parallel()
	rob := problems.Robertson()
	rob.T1 = 1e3
	vdp := problems.StiffVanDerPol(300)
	for _, c := range []struct {
		name string
		p    problems.Problem
		set  ode.Settings
	}{
		{"lorenz-tsit5", problems.Lorenz(), ode.Settings{Method: ode.Tsit5, RelTol: 1e-7}},
		{"lorenz-vern7-pi", problems.Lorenz(), ode.Settings{Method: ode.Vern7, Controller: ode.PIController(ode.Vern7)}},
		{"robertson-rodas5p", rob, ode.Settings{Method: ode.Rodas5P, RelTol: 1e-6, AbsTol: 1e-10}},
		{"vdp-stiff-tsit5", vdp, ode.Settings{Method: ode.Tsit5, MaxSteps: 3000, AllowFailures: true}},
	} {
		n := 6
		y0, params := c.p.Ensemble(n)
		for i := 0; i < n; i++ {
			y0[i*c.p.Field.Dim] *= 1 + 0.1*float64(i)
		}
		pr := ode.Problem{Field: c.p.Field, N: n, Y0: y0, P: params, Shared: c.p.Shared, T0: c.p.T0, T1: c.p.T1}
		var meshes [2]*ode.Mesh
		var sols [2]*ode.Solution
		for k, engine := range []string{"cpu", "scalar-test"} {
			set := c.set
			set.Engine = engine
			sv, err := ode.NewSolver(pr.Field, &set)
			if err != nil {
				t.Fatal(err)
			}
			m, sol, err := sv.Record(&pr)
			if err != nil {
				t.Fatalf("%s on %s: %v", c.name, engine, err)
			}
			if sol.Engine != engine || m.Engine != engine {
				t.Errorf("%s: ran on %q, results say %q and %q", c.name, engine, sol.Engine, m.Engine)
			}
			meshes[k], sols[k] = m, sol
		}
		sameBitsF(t, c.name+": mesh", meshes[0].H, meshes[1].H)
		sameInts(t, c.name+": Len", meshes[0].Len, meshes[1].Len)
		sameInts(t, c.name+": rejected", meshes[0].Stats.Rejected, meshes[1].Stats.Rejected)
		sameInts(t, c.name+": field evaluations", meshes[0].Stats.FieldEvals, meshes[1].Stats.FieldEvals)
		sameBitsF(t, c.name+": final states", sols[0].Y, sols[1].Y)
		for i := range sols[0].Status {
			if sols[0].Status[i] != sols[1].Status[i] || sols[0].Stiff[i] != sols[1].Stiff[i] {
				t.Errorf("%s: trajectory %d: cpu status %v stiff %v, scalar %v %v", c.name, i, sols[0].Status[i], sols[0].Stiff[i], sols[1].Status[i], sols[1].Stiff[i])
			}
		}
	}
}
