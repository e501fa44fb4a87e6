package fit

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/optim"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The Lorenz calibration of issue 23: n independent fits of ρ, one
// trajectory each, y0 = (1, 0, 0), t ∈ [0, 1], rtol 1e-6; the targets are
// the final states at ρ* = linspace(5, 20, n), the fits start at ρ = 10,
// Adam lr 0.1.
const calibrationN = 1 << 18

var calibration struct {
	once sync.Once
	p    Problem
	set  *ode.Settings
	err  error
}

func lorenzCalibration(b *testing.B) (Problem, *ode.Settings) {
	c := &calibration
	c.once.Do(func() {
		n := calibrationN
		lz := problems.Lorenz()
		y0, p := lz.Ensemble(n)
		rho := problems.LinSpace(make([]float64, n), 5, 20)
		for i := range n {
			p[3*i+1] = rho[i]
		}
		c.set = &ode.Settings{RelTol: 1e-6}
		prob := ode.Problem{Field: lz.Field, Y0: y0, P: p, T1: 1}
		sol, err := ode.Solve(prob, c.set)
		if err != nil {
			c.err = err
			return
		}
		for i := range n {
			p[3*i+1] = 10
		}
		loss := ode.Loss{Name: "sq", DataDim: 3, Data: sol.Y, F: func(y, _, data []tape.V) tape.V {
			s := y[0].Sub(data[0]).Square()
			for j := 1; j < 3; j++ {
				s = s.Add(y[j].Sub(data[j]).Square())
			}
			return s
		}}
		c.p = Problem{ODE: prob, Loss: loss, Vars: Vars{P: []int{1}}, Fits: n}
	})
	if c.err != nil {
		b.Fatal(c.err)
	}
	return c.p, c.set
}

// BenchmarkNew builds the Fitter of the Lorenz calibration at 262,144
// fits: issue 23's target is that it takes no longer than BenchmarkStep.
func BenchmarkNew(b *testing.B) {
	p, set := lorenzCalibration(b)
	sv, err := ode.NewSolver(p.ODE.Field, set)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := NewWithSolver(sv, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStep is one step of that fit (record, gradient, Adam update),
// as Run takes it.
func BenchmarkStep(b *testing.B) {
	p, set := lorenzCalibration(b)
	f, err := New(p, set)
	if err != nil {
		b.Fatal(err)
	}
	opt := &optim.Adam{LearnRate: 0.1}
	s := &Settings{Steps: 1, Optimizer: opt, SkipFinal: true}
	if _, err := f.Run(context.Background(), s); err != nil { // warm: executors, buffers
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := f.Run(context.Background(), s); err != nil {
			b.Fatal(err)
		}
	}
}

// harnessCalibration is the calibration as the training suite's
// lorenz-fit case builds it (bench/train.go): one initial state for all
// trajectories (Y0 of one row, expanded to N rows by the solver), P of N
// rows, Tsit5 at rtol 1e-6, atol 1e-9.
func harnessCalibration(b *testing.B) (Problem, *ode.Settings) {
	p, _ := lorenzCalibration(b)
	p.ODE.N, p.ODE.Y0 = calibrationN, []float64{1, 0, 0}
	return p, &ode.Settings{Method: ode.Tsit5, RelTol: 1e-6, AbsTol: 1e-9}
}

// BenchmarkNewFresh is fit.New of the calibration as the training suite
// times it (its new_ms): each call builds a new solver (ode.NewSolver:
// the field's trace, the method's programs, the engine's preparation),
// checks the inputs and traces the loss into the new solver's cache.
// BenchmarkNewSolver is the solver's part.
func BenchmarkNewFresh(b *testing.B) {
	p, set := harnessCalibration(b)
	b.ResetTimer()
	for range b.N {
		if _, err := New(p, set); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewSolver is ode.NewSolver of the calibration's field and
// settings, the part of BenchmarkNewFresh that does not depend on N.
func BenchmarkNewSolver(b *testing.B) {
	p, set := harnessCalibration(b)
	b.ResetTimer()
	for range b.N {
		if _, err := ode.NewSolver(p.ODE.Field, set); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewSizes is BenchmarkNew at 65,536 and 262,144 fits (the first
// rows of the calibration): New's cost is linear in the number of fits
// when the ratio of the two is about 4.
func BenchmarkNewSizes(b *testing.B) {
	p, set := lorenzCalibration(b)
	sv, err := ode.NewSolver(p.ODE.Field, set)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1 << 16, 1 << 18} {
		q := p
		q.ODE.N, q.Fits = n, n
		q.ODE.Y0, q.ODE.P, q.Loss.Data = p.ODE.Y0[:3*n], p.ODE.P[:3*n], p.Loss.Data[:3*n]
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for range b.N {
				if _, err := NewWithSolver(sv, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
