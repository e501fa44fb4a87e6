package tape_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The executor against a hand-written Go loop on the Lorenz right-hand
// side over 2^16 trajectories (inputs t, y0, y1, y2 per trajectory):
//
//	go test -run XXX -bench Lorenz -benchtime 200x ./tape/
//
// Metrics: ns/traj per Run, ns/traj/node divided by the number of ops the
// executor runs per trajectory, and (BenchmarkExecVsHandLorenz) ratio, the
// executor's time over the hand loop's, both timed in the same iterations.

const benchN = 1 << 16

var benchBlockSizes = []int{0, 64, 128, 256, 512, 1024} // 0: chosen by the executor

// lorenzVariant is one way of passing σ, ρ, β.
type lorenzVariant struct {
	name string
	in   []tape.Input
	f    func(in []tape.V) []tape.V
	hand func(out, in [][]float64)
}

const sigma, rho, beta = 10.0, 28.0, 8.0 / 3

var lorenzVariants = []lorenzVariant{
	{
		name: "const",
		in:   withNames("t", "y0", "y1", "y2"),
		f: func(in []tape.V) []tape.V {
			c := in[0].Const
			return lorenzF([]tape.V{in[0], in[1], in[2], in[3], c(sigma), c(rho), c(beta)})
		},
		hand: func(out, in [][]float64) {
			y0, y1, y2 := in[1], in[2], in[3]
			d0, d1, d2 := out[0][:len(y0)], out[1][:len(y0)], out[2][:len(y0)]
			y1, y2 = y1[:len(y0)], y2[:len(y0)]
			for i, a := range y0 {
				b, c := y1[i], y2[i]
				d0[i] = sigma * (b - a)
				d1[i] = a*(rho-c) - b
				d2[i] = a*b - beta*c
			}
		},
	},
	{
		name: "shared",
		in: []tape.Input{{Name: "t"}, {Name: "y0"}, {Name: "y1"}, {Name: "y2"},
			{Name: "sigma", Shared: true}, {Name: "rho", Shared: true}, {Name: "beta", Shared: true}},
		f: lorenzF,
		hand: func(out, in [][]float64) {
			y0, y1, y2 := in[1], in[2], in[3]
			s, r, bt := in[4][0], in[5][0], in[6][0]
			d0, d1, d2 := out[0][:len(y0)], out[1][:len(y0)], out[2][:len(y0)]
			y1, y2 = y1[:len(y0)], y2[:len(y0)]
			for i, a := range y0 {
				b, c := y1[i], y2[i]
				d0[i] = s * (b - a)
				d1[i] = a*(r-c) - b
				d2[i] = a*b - bt*c
			}
		},
	},
	{
		name: "pertraj-rho",
		in:   withNames("t", "y0", "y1", "y2", "rho"),
		f: func(in []tape.V) []tape.V {
			c := in[0].Const
			return lorenzF([]tape.V{in[0], in[1], in[2], in[3], c(sigma), in[4], c(beta)})
		},
		hand: func(out, in [][]float64) {
			y0, y1, y2, r := in[1], in[2], in[3], in[4]
			d0, d1, d2 := out[0][:len(y0)], out[1][:len(y0)], out[2][:len(y0)]
			y1, y2, r = y1[:len(y0)], y2[:len(y0)], r[:len(y0)]
			for i, a := range y0 {
				b, c := y1[i], y2[i]
				d0[i] = sigma * (b - a)
				d1[i] = a*(r[i]-c) - b
				d2[i] = a*b - beta*c
			}
		},
	},
}

// benchSetup traces the variant, makes its inputs and outputs and checks
// that the executor and the hand loop agree.
func benchSetup(b *testing.B, v lorenzVariant) (p *tape.Program, in, out, hout [][]float64, nodes int) {
	p = mustTrace(b, "lorenz-"+v.name, v.in, v.f)
	rnd := rand.New(rand.NewPCG(1, 1))
	in = make([][]float64, len(p.Inputs))
	for k, s := range p.Inputs {
		m := benchN
		if s.Shared {
			m = 1
		}
		in[k] = make([]float64, m)
		for i := range in[k] {
			in[k][i] = uniform(rnd, -20, 20)
		}
	}
	for k, name := range []string{"sigma", "rho", "beta"} {
		for j, s := range p.Inputs {
			if s.Name == name {
				in[j][0] = []float64{sigma, rho, beta}[k]
			}
		}
	}
	out = [][]float64{make([]float64, benchN), make([]float64, benchN), make([]float64, benchN)}
	hout = [][]float64{make([]float64, benchN), make([]float64, benchN), make([]float64, benchN)}
	for _, val := range p.Values {
		if val.Op != ops.OpInput && val.Op != ops.OpConst {
			nodes++
		}
	}
	e, err := tape.NewExec(p, &tape.ExecSettings{Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	if err := e.Run(out, in, benchN); err != nil {
		b.Fatal(err)
	}
	v.hand(hout, in)
	for k := range out {
		for i := range out[k] {
			if out[k][i] != hout[k][i] {
				b.Fatalf("Case %v: output %d trajectory %d: executor %v, hand loop %v", v.name, k, i, out[k][i], hout[k][i])
			}
		}
	}
	return p, in, out, hout, nodes
}

func benchWorkers() []int {
	if w := runtime.GOMAXPROCS(0); w > 1 {
		return []int{1, w}
	}
	return []int{1}
}

func reportPerTraj(b *testing.B, d time.Duration, nodes int) {
	ns := float64(d.Nanoseconds()) / float64(b.N) / benchN
	b.ReportMetric(ns, "ns/traj")
	b.ReportMetric(ns/float64(nodes), "ns/traj/node")
}

func BenchmarkExecLorenz(b *testing.B) {
	for _, v := range lorenzVariants {
		for _, bs := range benchBlockSizes {
			for _, nw := range benchWorkers() {
				b.Run(fmt.Sprintf("%s/bs=%d/workers=%d", v.name, bs, nw), func(b *testing.B) {
					p, in, out, _, nodes := benchSetup(b, v)
					e, err := tape.NewExec(p, &tape.ExecSettings{BlockSize: bs, Workers: nw})
					if err != nil {
						b.Fatal(err)
					}
					e.Run(out, in, benchN)
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						e.Run(out, in, benchN)
					}
					reportPerTraj(b, b.Elapsed(), nodes)
				})
			}
		}
	}
}

func BenchmarkHandLorenz(b *testing.B) {
	for _, v := range lorenzVariants {
		b.Run(v.name, func(b *testing.B) {
			_, in, _, hout, nodes := benchSetup(b, v)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				v.hand(hout, in)
			}
			reportPerTraj(b, b.Elapsed(), nodes)
		})
	}
}

// BenchmarkExecVsHandLorenz times the executor and the hand loop in the
// same iterations and reports the ratio of their times: "ratio" of the
// fastest iterations (robust to other load on the machine) and
// "mean-ratio" of the totals. With workers > 1 the executor runs in
// parallel against the single-threaded hand loop.
func BenchmarkExecVsHandLorenz(b *testing.B) {
	for _, v := range lorenzVariants {
		for _, bs := range benchBlockSizes {
			for _, nw := range benchWorkers() {
				b.Run(fmt.Sprintf("%s/bs=%d/workers=%d", v.name, bs, nw), func(b *testing.B) {
					p, in, out, hout, nodes := benchSetup(b, v)
					e, err := tape.NewExec(p, &tape.ExecSettings{BlockSize: bs, Workers: nw})
					if err != nil {
						b.Fatal(err)
					}
					e.Run(out, in, benchN)
					var te, th time.Duration
					me, mh := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						t0 := time.Now()
						e.Run(out, in, benchN)
						t1 := time.Now()
						v.hand(hout, in)
						t2 := time.Now()
						te, th = te+t1.Sub(t0), th+t2.Sub(t1)
						me, mh = min(me, t1.Sub(t0)), min(mh, t2.Sub(t1))
					}
					b.ReportMetric(float64(me)/float64(mh), "ratio")
					b.ReportMetric(float64(te)/float64(th), "mean-ratio")
					b.ReportMetric(float64(me.Nanoseconds())/benchN, "min-ns/traj")
					b.ReportMetric(float64(mh.Nanoseconds())/benchN, "hand-min-ns/traj")
					reportPerTraj(b, te, nodes)
				})
			}
		}
	}
}

// BenchmarkExecGradMLP runs the gradient program of the 2→16→16→1 MLP
// (shared weights, gradients summed) over 2^14 trajectories: a larger
// program, with many live values per block, for choosing the block size.
func BenchmarkExecGradMLP(b *testing.B) {
	const n = 1 << 14
	p := mlpProgram(b)
	g, err := tape.Grad(p, nil)
	if err != nil {
		b.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 1))
	w := mlp2x16x16x1.weights(rnd)
	in := make([][]float64, len(g.Inputs))
	for k, s := range g.Inputs {
		if s.Shared {
			in[k] = []float64{w[k-2]}
		} else {
			in[k] = randVec(rnd, n)
		}
	}
	out := make([][]float64, len(g.Outputs))
	for k, o := range g.Outputs {
		if o.Sum {
			out[k] = make([]float64, 1)
		} else {
			out[k] = make([]float64, n)
		}
	}
	for _, bs := range benchBlockSizes {
		for _, nw := range benchWorkers() {
			b.Run(fmt.Sprintf("bs=%d/workers=%d", bs, nw), func(b *testing.B) {
				e, err := tape.NewExec(g, &tape.ExecSettings{BlockSize: bs, Workers: nw})
				if err != nil {
					b.Fatal(err)
				}
				e.Run(out, in, n)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					e.Run(out, in, n)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/traj")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n/float64(len(g.Values)), "ns/traj/value")
			})
		}
	}
}
