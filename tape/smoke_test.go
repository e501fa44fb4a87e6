package tape

import (
	"math"
	"testing"
)

func lorenzProg(t testing.TB) *Program {
	p, err := Trace("lorenz", []Input{{Name: "t"}, {Name: "y0"}, {Name: "y1"}, {Name: "y2"}, {Name: "rho"}}, func(in []V) []V {
		y0, y1, y2, rho := in[1], in[2], in[3], in[4]
		return []V{
			y1.Sub(y0).MulC(10),
			y0.Mul(rho.Sub(y2)).Sub(y1),
			y0.Mul(y1).Sub(y2.MulC(8.0 / 3)),
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSmoke(t *testing.T) {
	p := lorenzProg(t)
	t.Log(p)
	in := []float64{0, 1, 2, 3, 28}
	got := p.Eval(nil, in)
	want := []float64{10, 1*(28-3) - 2, 2 - 8.0}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-14 {
			t.Fatalf("eval %v want %v", got, want)
		}
	}
	v, err := VJP(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(v)
	j, err := Jacobian(p, []int{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Log(j)
	n := 1000
	ins := make([][]float64, 5)
	for k := range ins {
		ins[k] = make([]float64, n)
		for i := range ins[k] {
			ins[k][i] = float64(k) + float64(i)*0.001
		}
	}
	outs := make([][]float64, 3)
	for k := range outs {
		outs[k] = make([]float64, n)
	}
	e, err := NewExec(p, &ExecSettings{BlockSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(outs, ins, n); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		x := p.Eval(nil, []float64{ins[0][i], ins[1][i], ins[2][i], ins[3][i], ins[4][i]})
		for k := range x {
			if x[k] != outs[k][i] {
				t.Fatalf("traj %d out %d: %v vs %v", i, k, x[k], outs[k][i])
			}
		}
	}
}
