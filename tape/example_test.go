package tape_test

import (
	"fmt"
	"log"

	"github.com/gradsolve-go/gradsolve/tape"
)

func ExampleTrace() {
	// The Van der Pol field (v, μ((1−x²)v − x)) as a program with inputs
	// x, v and the shared parameter μ.
	p, err := tape.Trace("vdp", []tape.Input{{Name: "x"}, {Name: "v"}, {Name: "mu", Shared: true}},
		func(in []tape.V) []tape.V {
			x, v, mu := in[0], in[1], in[2]
			return []tape.V{v, mu.Mul(x.Const(1).Sub(x.Square()).Mul(v).Sub(x))}
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(p)
	fmt.Printf("f(2, 3; μ=0.5) = %.4g\n", p.Eval(nil, []float64{2, 3, 0.5}))
	// Output:
	// program vdp: 3 inputs, 9 values, 2 outputs
	// v0 = Input [0] x
	// v1 = Input [1] v
	// v2 = Input [2] mu shared
	// v3 = Const [1]
	// v4 = Square v0
	// v5 = Sub v3 v4
	// v6 = Mul v5 v1
	// v7 = Sub v6 v0
	// v8 = Mul v2 v7
	// out 0 out0 = v1
	// out 1 out1 = v8
	// f(2, 3; μ=0.5) = [3 -5.5]
}

func ExampleGrad() {
	// The loss ½‖Wx − 1‖² of a 1×2 linear layer whose weights are shared.
	p, err := tape.Trace("loss", []tape.Input{{Name: "x0"}, {Name: "x1"}, {Name: "w0", Shared: true}, {Name: "w1", Shared: true}},
		func(in []tape.V) []tape.V {
			y := tape.Dense(in[2:4], in[0:2], []tape.V{in[0].Const(-1)})
			return []tape.V{y[0].Square().MulC(0.5)}
		})
	if err != nil {
		log.Fatal(err)
	}
	g, err := tape.Grad(p, nil)
	if err != nil {
		log.Fatal(err)
	}
	v := g.Eval(nil, []float64{1, 2, 1.5, 0.25})
	for k, o := range g.Outputs {
		fmt.Printf("%-8s = %.4g (summed over trajectories: %v)\n", o.Name, v[k], o.Sum)
	}
	// Output:
	// value    = 0.5 (summed over trajectories: false)
	// grad_x0  = 1.5 (summed over trajectories: false)
	// grad_x1  = 0.25 (summed over trajectories: false)
	// grad_w0  = 1 (summed over trajectories: true)
	// grad_w1  = 2 (summed over trajectories: true)
}

func ExampleExec() {
	// The Lorenz field for 5 trajectories, σ, ρ, β shared.
	p, err := tape.Trace("lorenz", []tape.Input{{Name: "y0"}, {Name: "y1"}, {Name: "y2"},
		{Name: "sigma", Shared: true}, {Name: "rho", Shared: true}, {Name: "beta", Shared: true}},
		func(in []tape.V) []tape.V {
			y0, y1, y2, sigma, rho, beta := in[0], in[1], in[2], in[3], in[4], in[5]
			return []tape.V{
				sigma.Mul(y1.Sub(y0)),
				y0.Mul(rho.Sub(y2)).Sub(y1),
				y0.Mul(y1).Sub(beta.Mul(y2)),
			}
		})
	if err != nil {
		log.Fatal(err)
	}
	e, err := tape.NewExec(p, &tape.ExecSettings{BlockSize: 2, CheckFinite: true})
	if err != nil {
		log.Fatal(err)
	}
	const n = 5
	in := [][]float64{
		{1, 2, 3, 4, 5},       // y0 of each trajectory
		{0, 1, 0, 1, 0},       // y1
		{10, 20, 30, 40, 50},  // y2
		{10}, {28}, {8.0 / 3}, // shared
	}
	out := [][]float64{make([]float64, n), make([]float64, n), make([]float64, n)}
	if err := e.Run(out, in, n); err != nil {
		log.Fatal(err)
	}
	for k := range out {
		fmt.Printf("dy%d/dt = %.4g\n", k, out[k])
	}
	// Output:
	// dy0/dt = [-10 -10 -30 -30 -50]
	// dy1/dt = [18 15 -6 -49 -110]
	// dy2/dt = [-26.67 -51.33 -80 -102.7 -133.3]
}

func ExampleJacobian() {
	// The Jacobian of the Robertson field with respect to the state.
	p, err := tape.Trace("robertson", []tape.Input{{Name: "y1"}, {Name: "y2"}, {Name: "y3"}},
		func(in []tape.V) []tape.V {
			y1, y2, y3 := in[0], in[1], in[2]
			a := y1.MulC(0.04)
			b := y2.Mul(y3).MulC(1e4)
			c := y2.Square().MulC(3e7)
			return []tape.V{a.Neg().Add(b), a.Sub(b).Sub(c), c}
		})
	if err != nil {
		log.Fatal(err)
	}
	j, err := tape.Jacobian(p, nil)
	if err != nil {
		log.Fatal(err)
	}
	v := j.Eval(nil, []float64{1, 1e-5, 0.01})
	fmt.Printf("f = %.4g\n", v[:3])
	for i := 0; i < 3; i++ {
		fmt.Printf("J[%d] = %.4g\n", i, v[3+3*i:6+3*i])
	}
	// Output:
	// f = [-0.039 0.036 0.003]
	// J[0] = [-0.04 100 0.1]
	// J[1] = [0.04 -700 -0.1]
	// J[2] = [0 600 0]
}

func ExampleCallFunc() {
	// The field f(y; k) = −ky, called twice by a midpoint step
	// y1 = y + h·f(y + h/2·f(y)) without being inlined.
	f, err := tape.Trace("decay", []tape.Input{{Name: "y"}, {Name: "k", Shared: true}},
		func(in []tape.V) []tape.V { return []tape.V{in[1].Mul(in[0]).Neg()} })
	if err != nil {
		log.Fatal(err)
	}
	step, err := tape.Trace("midpoint", []tape.Input{{Name: "y"}, {Name: "h"}, {Name: "k", Shared: true}},
		func(in []tape.V) []tape.V {
			y, h, k := in[0], in[1], in[2]
			k1 := tape.CallFunc(f, []tape.V{y, k})
			k2 := tape.CallFunc(f, []tape.V{y.Add(h.MulC(0.5).Mul(k1[0])), k})
			return []tape.V{y.Add(h.Mul(k2[0]))}
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(step)
	x := []float64{1, 0.1, 2}
	fmt.Printf("y1 = %.4g\n", step.Eval(nil, x))

	// The CPU executor runs the inlined program; the transforms keep the
	// calls: the VJP of the step calls the VJP of the field.
	flat, err := tape.Inline(step)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("inlined: %d values, %d funcs, y1 = %.4g\n", len(flat.Values), len(flat.Funcs), flat.Eval(nil, x))
	vjp, err := tape.VJP(step, []int{0})
	if err != nil {
		log.Fatal(err)
	}
	for _, fn := range vjp.Funcs {
		fmt.Printf("VJP calls %s: %d inputs, %d outputs\n", fn.Name, len(fn.Inputs), len(fn.Outputs))
	}
	fmt.Printf("∂y1/∂y = %.4g\n", vjp.Eval(nil, append(x, 1)))
	// Output:
	// program midpoint: 3 inputs, 13 values, 1 outputs, 1 funcs
	// v0 = Input [0] y
	// v1 = Input [1] h
	// v2 = Input [2] k shared
	// v3 = Call [0] decay v0 v2
	// v4 = Extract [0] v3
	// v5 = Const [0.5]
	// v6 = Mul v5 v1
	// v7 = Mul v6 v4
	// v8 = Add v0 v7
	// v9 = Call [0] decay v8 v2
	// v10 = Extract [0] v9
	// v11 = Mul v1 v10
	// v12 = Add v0 v11
	// out 0 out0 = v12
	// func 0:
	// 	program decay: 2 inputs, 4 values, 1 outputs
	// 	v0 = Input [0] y
	// 	v1 = Input [1] k shared
	// 	v2 = Mul v1 v0
	// 	v3 = Neg v2
	// 	out 0 out0 = v3
	// y1 = [0.82]
	// inlined: 13 values, 0 funcs, y1 = [0.82]
	// VJP calls decay: 2 inputs, 1 outputs
	// VJP calls decay.vjp: 3 inputs, 2 outputs
	// ∂y1/∂y = [0.82]
}
