package cuda

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// omitEngines are the engines TestOmit compares: the CPU's, the kernels
// on the host in both precisions, and two fake devices.
var omitEngines = []string{"cpu", "cuda-host", "cuda-host-f32", "cuda-multi-host2"}

var omitMasks = []ode.Omit{ode.OmitStates, ode.OmitStats, ode.OmitStates | ode.OmitStats}

// gradOmit runs a Grad of case c on engine with Omit o twice on one dst
// (the second call reuses it) and returns the second result, the first
// call's trace and the error.
func gradOmit(t *testing.T, engine string, c engineCase, o ode.Omit, mesh *ode.Mesh) (*ode.Gradient, TraceStats, error) {
	t.Helper()
	set := c.set
	set.Engine = engine
	sv, err := ode.NewSolver(c.prob.Field, &set)
	if err != nil {
		t.Fatal(err)
	}
	// The first call is traced: a fresh MultiEngine executor splits the
	// trajectories evenly, so that its launches are laid out alike.
	g := &ode.Gradient{Omit: o}
	var tr Trace
	if _, err := sv.GradContext(WithTrace(context.Background(), &tr), g, &c.prob, c.loss, mesh); err != nil {
		return nil, TraceStats{}, err
	}
	if g.Omit != o {
		t.Fatalf("%s: Grad changed dst.Omit from %v to %v", engine, o, g.Omit)
	}
	_, err = sv.Grad(g, &c.prob, c.loss, mesh)
	return g, tr.Stats(), err
}

// TestOmit checks Gradient.Omit on every engine, for a record and for a
// replay of the record's mesh: every array the call returns is the same,
// bit for bit, as without Omit, the omitted ones are nil, and a GPU
// engine copies back fewer bytes, by the omitted arrays' (to their
// alignment in the arena).
func TestOmit(t *testing.T) {
	needHost(t)
	c := lorenzSharedCase(70)
	K, d := len(c.prob.SaveAt), c.prob.Field.Dim
	for _, engine := range omitEngines {
		for _, replay := range []bool{false, true} {
			c := c
			if engine == "cuda-host-f32" {
				c.set.RelTol, c.set.AbsTol = 1e-4, 1e-7
			}
			var mesh *ode.Mesh
			if replay {
				set := c.set
				set.Engine = engine
				sv, err := ode.NewSolver(c.prob.Field, &set)
				if err != nil {
					t.Fatal(err)
				}
				if mesh, _, err = sv.Record(&c.prob); err != nil {
					t.Fatal(err)
				}
			}
			want, wtr, err := gradOmit(t, engine, c, 0, mesh)
			if err != nil {
				t.Fatalf("%s: %v", engine, err)
			}
			if want.Solution.Y == nil || want.Solution.Ys == nil || want.Solution.Stats.Rejected == nil || want.Solution.Stats.FieldEvals == nil {
				t.Fatalf("%s: a Grad without Omit returned nil states or counts", engine)
			}
			for _, o := range omitMasks {
				name := fmt.Sprintf("%s/replay=%v/omit=%d", engine, replay, o)
				got, gtr, err := gradOmit(t, engine, c, o, mesh)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				same := func(what string, a, b []float64) {
					if ok, i := bitsEqual(a, b); !ok || len(a) != len(b) {
						t.Errorf("%s: %s differs at %d (lengths %d, %d)", name, what, i, len(a), len(b))
					}
				}
				if got.Loss != want.Loss {
					t.Errorf("%s: loss %v, without Omit %v", name, got.Loss, want.Loss)
				}
				same("Y0 gradient", got.Y0, want.Y0)
				same("P gradient", got.P, want.P)
				same("Shared gradient", got.Shared, want.Shared)
				gs, ws := got.Solution, want.Solution
				same("T", gs.T, ws.T)
				if !slices.Equal(gs.Status, ws.Status) || !slices.Equal(gs.Stats.Accepted, ws.Stats.Accepted) || !slices.Equal(gs.Stiff, ws.Stiff) {
					t.Errorf("%s: statuses, accepted counts or stiffness flags differ", name)
				}
				states, stats := o&ode.OmitStates == 0, o&ode.OmitStats == 0
				if states {
					same("Y", gs.Y, ws.Y)
					same("Ys", gs.Ys, ws.Ys)
				} else if gs.Y != nil || gs.Ys != nil {
					t.Errorf("%s: Y or Ys not nil", name)
				}
				if stats {
					if !slices.Equal(gs.Stats.Rejected, ws.Stats.Rejected) || !slices.Equal(gs.Stats.FieldEvals, ws.Stats.FieldEvals) {
						t.Errorf("%s: rejected or field evaluation counts differ", name)
					}
				} else if gs.Stats.Rejected != nil || gs.Stats.FieldEvals != nil {
					t.Errorf("%s: Stats.Rejected or FieldEvals not nil", name)
				}
				gm, wm := got.Mesh, want.Mesh
				if !replay {
					if err := gm.Host(); err != nil {
						t.Fatal(err)
					}
					if err := wm.Host(); err != nil {
						t.Fatal(err)
					}
					same("mesh", gm.H[:gm.Rows*gm.N], wm.H[:wm.Rows*wm.N])
					if !slices.Equal(gm.Len, wm.Len) || !slices.Equal(gm.Status, wm.Status) || !slices.Equal(gm.Stats.Accepted, wm.Stats.Accepted) {
						t.Errorf("%s: the recorded mesh's lengths, statuses or counts differ", name)
					}
					if !stats && (gm.Stats.Rejected != nil || gm.Stats.FieldEvals != nil) {
						t.Errorf("%s: the recorded mesh's Stats.Rejected or FieldEvals not nil", name)
					}
				} else if gm != mesh || mesh.Stats.Rejected == nil {
					t.Errorf("%s: the given mesh was replaced or changed", name)
				}
				if engine == "cpu" {
					continue
				}
				// The bytes not copied back: the arrays of every launch,
				// each up to its 256-byte alignment.
				es := int64(8)
				if engine == "cuda-host-f32" {
					es = 4
				}
				n := int64(c.prob.N)
				var saved int64
				arrays := 0
				if !states {
					saved += n*int64(d)*es + n*int64(K*d)*es
					arrays += 2
				}
				if !stats && !replay { // a replay has no counts
					saved += 4 * n
					arrays++
				}
				if gtr.Launches != wtr.Launches {
					t.Fatalf("%s: %d launches, without Omit %d", name, gtr.Launches, wtr.Launches)
				}
				// (The array before a range cut short loses its alignment
				// padding too.)
				less := wtr.Download - gtr.Download
				if arrays == 0 && less != 0 || arrays > 0 && (less < saved || less >= saved+int64((arrays+1)*256*gtr.Launches)) {
					t.Errorf("%s: copied back %d bytes, without Omit %d: %d fewer, want the omitted %d (+ alignment)", name, gtr.Download, wtr.Download, less, saved)
				}
			}
		}
	}
}

// TestOmitFailures checks that failures are reported with Omit as
// without it: trajectories that run out of steps (Grad's error and
// GradPartial's failures, with the same messages, the others' gradients
// the same bit for bit), and a loss term that is not finite (the same
// error, which evaluates the loss at the states the call did not
// return).
func TestOmitFailures(t *testing.T) {
	needHost(t)
	pr := problems.Lorenz()
	const n = 40
	p := lorenzRhoSweep(n)
	t1 := make([]float64, n)
	for i := range t1 {
		t1[i] = 2
		if i%7 == 3 {
			t1[i] = 20 // ten times longer than MaxSteps allows
		}
	}
	prob := ode.Problem{Field: pr.Field, N: n, Y0: []float64{1, 0, 0}, P: p, T1s: t1, SaveAt: []float64{0.5, 1}}
	ok := prob
	ok.T1s = nil
	ok.T1 = 2
	data := make([]float64, n)
	for i := range data {
		data[i] = 1
	}
	data[13] = -1 // log(-1): the term of trajectory 13 is NaN
	nanLoss := ode.Loss{Name: "log-data", DataDim: 1, Data: data, FP: func(y, ys, dt, _, _ []tape.V) tape.V {
		return dt[0].Log().Mul(y[0].Square()).Add(ys[4])
	}}
	for _, engine := range omitEngines {
		rtol := 1e-8
		if engine == "cuda-host-f32" {
			rtol = 1e-4
		}
		sv, err := ode.NewSolver(pr.Field, &ode.Settings{Method: ode.Tsit5, RelTol: rtol, AbsTol: rtol * 1e-3, MaxSteps: 300, Engine: engine})
		if err != nil {
			t.Fatal(err)
		}
		type outcome struct {
			g     *ode.Gradient
			fails []string
			err   string
		}
		partial := func(o ode.Omit) outcome {
			g, fails, err := sv.GradPartial(t.Context(), &ode.Gradient{Omit: o}, &prob, ode.SumSquares(), nil, nil)
			if err != nil {
				t.Fatalf("%s: GradPartial: %v", engine, err)
			}
			out := outcome{g: g}
			for _, f := range fails {
				out.fails = append(out.fails, f.Error())
			}
			return out
		}
		errOf := func(o ode.Omit, p *ode.Problem, loss ode.Loss) string {
			_, err := sv.Grad(&ode.Gradient{Omit: o}, p, loss, nil)
			if err == nil {
				t.Fatalf("%s: Grad with Omit %d: no error", engine, o)
			}
			return err.Error()
		}
		want := partial(0)
		if len(want.fails) == 0 || len(want.fails) == n {
			t.Fatalf("%s: %d of %d trajectories fail; want some", engine, len(want.fails), n)
		}
		wantErr, wantNaN := errOf(0, &prob, ode.SumSquares()), errOf(0, &ok, nanLoss)
		for _, o := range omitMasks {
			name := fmt.Sprintf("%s/omit=%d", engine, o)
			got := partial(o)
			if !slices.Equal(got.fails, want.fails) {
				t.Errorf("%s: GradPartial's failures\n%q\nwithout Omit\n%q", name, got.fails, want.fails)
			}
			if ok, i := bitsEqual(got.g.P, want.g.P); !ok || got.g.Loss != want.g.Loss {
				t.Errorf("%s: GradPartial's loss or P gradient differs (at %d)", name, i)
			}
			if !slices.Equal(got.g.Solution.Status, want.g.Solution.Status) {
				t.Errorf("%s: GradPartial's statuses differ", name)
			}
			if o&ode.OmitStates != 0 && (got.g.Solution.Y != nil || got.g.Solution.Ys != nil) {
				t.Errorf("%s: GradPartial returned states", name)
			}
			if o&ode.OmitStats != 0 && (got.g.Solution.Stats.Rejected != nil || got.g.Mesh.Stats.Rejected != nil) {
				t.Errorf("%s: GradPartial returned rejected counts", name)
			}
			if e := errOf(o, &prob, ode.SumSquares()); e != wantErr {
				t.Errorf("%s: Grad's error\n%s\nwithout Omit\n%s", name, e, wantErr)
			}
			if e := errOf(o, &ok, nanLoss); e != wantNaN {
				t.Errorf("%s: Grad's error for a NaN loss term\n%s\nwithout Omit\n%s", name, e, wantNaN)
			}
		}
	}
}
