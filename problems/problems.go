package problems

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/gradsolve-go/gradsolve/nn"
	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Problem is a built-in initial-value problem y' = F(t, y, p), y(T0) = Y0,
// with default parameters.
type Problem struct {
	// Name is the problem's name as ByName accepts it, as "lorenz".
	Name string

	// Field is the traced right-hand side. Its parameters p are the
	// Field.Params per-trajectory parameters followed by the Field.Shared
	// shared ones.
	Field ode.Field

	// Y0 is the default initial state of one trajectory (len Field.Dim).
	Y0 []float64

	// P holds the default per-trajectory parameters (len Field.Params).
	P []float64

	// Shared holds the default shared parameters (len Field.Shared).
	Shared []float64

	// T0 and T1 are the default start and end times.
	T0, T1 float64

	// Stiff reports whether the problem is stiff at its defaults; it
	// equals Field.Stiff.
	Stiff bool

	// Doc is a one-line description: the equations, what the parameters
	// mean, and a reference.
	Doc string

	// Exact, if not nil, returns the exact solution y(T0+dt) (len
	// Field.Dim) for the initial state y(T0) = y0 and per-trajectory
	// parameters p, in dst (nil allocates). Only problems with a closed
	// form (Linear, Kepler) have it.
	Exact func(dst, y0, p []float64, dt float64) []float64
}

// Ensemble returns the default initial states and per-trajectory
// parameters of n identical trajectories: y0 is row-major [n×Dim] (Y0 in
// every row) and params row-major [n×Params] (P in every row). It panics
// if n < 0.
func (p Problem) Ensemble(n int) (y0, params []float64) {
	if n < 0 {
		panic(fmt.Sprintf("problems: Ensemble: n = %d < 0", n))
	}
	return tile(p.Y0, n), tile(p.P, n)
}

func tile(row []float64, n int) []float64 {
	dst := make([]float64, 0, n*len(row))
	for range n {
		dst = append(dst, row...)
	}
	return dst
}

// LinSpace fills dst with len(dst) evenly spaced values from lo to hi,
// both included (dst[0] = lo and, if len(dst) > 1, dst[len(dst)-1] = hi
// exactly), and returns dst. A dst of length 1 holds lo. Use it to sweep a
// parameter over an ensemble.
func LinSpace(dst []float64, lo, hi float64) []float64 {
	n := len(dst)
	switch n {
	case 0:
		return dst
	case 1:
		dst[0] = lo
		return dst
	}
	step := (hi - lo) / float64(n-1)
	for i := range dst {
		dst[i] = lo + float64(i)*step
	}
	dst[n-1] = hi
	return dst
}

// Lorenz returns the Lorenz (1963) system with all three parameters per
// trajectory, p = (σ, ρ, β):
//
//	y0' = σ(y1 − y0)
//	y1' = y0(ρ − y2) − y1
//	y2' = y0·y1 − β·y2
//
// Defaults: p = (10, 28, 8/3) (the chaotic regime), y0 = (1, 0, 0),
// t ∈ [0, 1].
func Lorenz() Problem {
	return Problem{
		Name: "lorenz",
		Field: ode.Field{Name: "lorenz", Dim: 3, Params: 3,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				s, r, b := p[0], p[1], p[2]
				return []tape.V{
					s.Mul(y[1].Sub(y[0])),
					y[0].Mul(r.Sub(y[2])).Sub(y[1]),
					y[0].Mul(y[1]).Sub(b.Mul(y[2])),
				}
			}},
		Y0: []float64{1, 0, 0},
		P:  []float64{10, 28, 8.0 / 3},
		T1: 1,
		Doc: "Lorenz (1963): y0' = σ(y1−y0), y1' = y0(ρ−y2)−y1, y2' = y0y1−βy2; " +
			"p = (σ, ρ, β) = (10, 28, 8/3); J. Atmos. Sci. 20:130",
	}
}

// vdpField is the Van der Pol field x' = v, v' = μ((1 − x²)v − x).
func vdpField(name string, stiff bool) ode.Field {
	return ode.Field{Name: name, Dim: 2, Params: 1, Stiff: stiff,
		F: func(_ tape.V, y, p []tape.V) []tape.V {
			x, v := y[0], y[1]
			return []tape.V{
				v,
				p[0].Mul(x.Const(1).Sub(x.Square()).Mul(v).Sub(x)),
			}
		}}
}

// VanDerPol returns the Van der Pol oscillator with μ per trajectory,
// state (x, v):
//
//	x' = v
//	v' = μ((1 − x²)v − x)
//
// Defaults: μ = 1, y0 = (2, 0), t ∈ [0, 1]. This is the scaling of Hairer
// & Wanner II (VDPOL, with μ = 1/ε), in which the limit cycle's period
// tends to 3 − 2 ln 2 ≈ 1.614 as μ grows.
func VanDerPol() Problem {
	return Problem{
		Name:  "vdp",
		Field: vdpField("vdp", false),
		Y0:    []float64{2, 0},
		P:     []float64{1},
		T1:    1,
		Doc: "Van der Pol: x' = v, v' = μ((1−x²)v−x); p = (μ) = (1); " +
			"Hairer & Wanner II, VDPOL with μ = 1/ε",
	}
}

// StiffVanDerPol returns the Van der Pol field of VanDerPol with μ = mu
// as its default, marked stiff, with y0 = (2, 0) and t ∈ [0, 2], the span
// of the VDPOL problem of the Bari test set. For large μ the solution
// follows the slow branch of the limit cycle and jumps to the other
// branch in a layer of width O(1/μ) about every 0.81 time units (at
// t ≈ 0.83 and 1.67 for μ = 1e3), so [0, 2] holds a full period and two
// fast transitions; y0 lies off the slow manifold, so there is also an
// initial layer. ByName("vdp-stiff") uses mu = 1e3.
func StiffVanDerPol(mu float64) Problem {
	return Problem{
		Name:  "vdp-stiff",
		Field: vdpField("vdp-stiff", true),
		Y0:    []float64{2, 0},
		P:     []float64{mu},
		T1:    2,
		Stiff: true,
		Doc: fmt.Sprintf("stiff Van der Pol: x' = v, v' = μ((1−x²)v−x); p = (μ) = (%g); t ∈ [0, 2]; "+
			"Hairer & Wanner II, VDPOL with μ = 1/ε", mu),
	}
}

// Lorenz96 returns the cyclic Lorenz-96 system of dimension d ≥ 4 with the
// forcing F per trajectory (Lorenz 1996):
//
//	y_i' = (y_{i+1} − y_{i−2})·y_{i−1} − y_i + F,  indices mod d.
//
// Defaults: F = 8 (chaotic), y0 = (F + 0.01, F, …, F) (the unstable
// equilibrium y = F, perturbed), t ∈ [0, 1]. The problem is not stiff:
// its Jacobian's entries are at most |y| ≈ 10 whatever d, so an explicit
// method's step does not shrink with d, and a step costs O(d).
//
// Its name is "lorenz96" for d = 8 and "lorenz96-<d>" otherwise (as
// "lorenz96-64"). ByName("lorenz96") uses d = 8, ByName("lorenz96-64")
// and ByName("lorenz96-256") d = 64 and 256, the larger states of the
// benchmark suite. It panics if d < 4.
func Lorenz96(d int) Problem {
	if d < 4 {
		panic(fmt.Sprintf("problems: Lorenz96: d = %d; it must be at least 4", d))
	}
	const f = 8.0
	y0 := make([]float64, d)
	for i := range y0 {
		y0[i] = f
	}
	y0[0] += 0.01
	idx := func(i int) int { return (i + d) % d }
	name := "lorenz96"
	if d != 8 {
		name = fmt.Sprintf("lorenz96-%d", d)
	}
	return Problem{
		Name: name,
		Field: ode.Field{Name: name, Dim: d, Params: 1,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				dy := make([]tape.V, d)
				for i := range dy {
					dy[i] = y[idx(i+1)].Sub(y[idx(i-2)]).Mul(y[idx(i-1)]).Sub(y[i]).Add(p[0])
				}
				return dy
			}},
		Y0: y0,
		P:  []float64{f},
		T1: 1,
		Doc: fmt.Sprintf("Lorenz-96, d = %d: y_i' = (y_{i+1}−y_{i−2})y_{i−1} − y_i + F, cyclic; "+
			"p = (F) = (8); Lorenz (1996), ECMWF seminar on predictability", d),
	}
}

// Robertson returns Robertson's chemical kinetics (Robertson 1966; Hairer
// & Wanner II, ROBER), stiff, with the three rates per trajectory,
// p = (k1, k2, k3):
//
//	y0' = −k1·y0 + k3·y1·y2
//	y1' =  k1·y0 − k3·y1·y2 − k2·y1²
//	y2' =  k2·y1²
//
// (y1, y2, y3 and f1, f2, f3 in the literature). The sum y0+y1+y2 is
// conserved. Defaults: p = (0.04, 3e7, 1e4), y0 = (1, 0, 0), t ∈ [0, 100];
// the literature also uses t1 = 1e4 and longer (the Bari test set goes to
// 1e11).
func Robertson() Problem {
	return Problem{
		Name: "robertson",
		Field: ode.Field{Name: "robertson", Dim: 3, Params: 3, Stiff: true,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				r := p[2].Mul(y[1]).Mul(y[2])
				return robertsonRates(y, p[0], p[1], r)
			}},
		Y0:    []float64{1, 0, 0},
		P:     []float64{0.04, 3e7, 1e4},
		T1:    100,
		Stiff: true,
		Doc: "Robertson: y0' = −k1y0 + k3y1y2, y1' = k1y0 − k3y1y2 − k2y1², y2' = k2y1²; " +
			"p = (k1, k2, k3) = (0.04, 3e7, 1e4); Hairer & Wanner II, ROBER",
	}
}

// robertsonRates returns Robertson's right-hand side with the
// autocatalytic term r = k3·y1·y2 given.
func robertsonRates(y []tape.V, k1, k2, r tape.V) []tape.V {
	a := k1.Mul(y[0])
	q := k2.Mul(y[1].Square())
	return []tape.V{
		r.Sub(a),
		a.Sub(r).Sub(q),
		q,
	}
}

// HIRES returns the HIRES problem (Schäfer 1975; Hairer & Wanner II; Bari
// test set, hires.f): 8 states, autonomous, stiff, no parameters. In the
// literature's numbering (y1…y8 here are y[0]…y[7]):
//
//	f1 = −1.71·y1 + 0.43·y2 + 8.32·y3 + 0.0007
//	f2 =  1.71·y1 − 8.75·y2
//	f3 = −10.03·y3 + 0.43·y4 + 0.035·y5
//	f4 =  8.32·y2 + 1.71·y3 − 1.12·y4
//	f5 = −1.745·y5 + 0.43·y6 + 0.43·y7
//	f6 = −280·y6·y8 + 0.69·y4 + 1.71·y5 − 0.43·y6 + 0.69·y7
//	f7 =  280·y6·y8 − 1.81·y7
//	f8 = −f7
//
// Defaults: y0 = (1, 0, 0, 0, 0, 0, 0, 0.0057), t ∈ [0, 321.8122]. The
// Bari test set gives y(321.8122) (HIRESRef).
func HIRES() Problem {
	return Problem{
		Name: "hires",
		Field: ode.Field{Name: "hires", Dim: 8, Stiff: true,
			F: func(_ tape.V, y, _ []tape.V) []tape.V {
				r := y[5].Mul(y[7]).MulC(280) // the one nonlinear term
				f7 := r.Sub(y[6].MulC(1.81))
				return []tape.V{
					y[0].MulC(-1.71).Add(y[1].MulC(0.43)).Add(y[2].MulC(8.32)).AddC(0.0007),
					y[0].MulC(1.71).Sub(y[1].MulC(8.75)),
					y[2].MulC(-10.03).Add(y[3].MulC(0.43)).Add(y[4].MulC(0.035)),
					y[1].MulC(8.32).Add(y[2].MulC(1.71)).Sub(y[3].MulC(1.12)),
					y[4].MulC(-1.745).Add(y[5].MulC(0.43)).Add(y[6].MulC(0.43)),
					r.Neg().Add(y[3].MulC(0.69)).Add(y[4].MulC(1.71)).Sub(y[5].MulC(0.43)).Add(y[6].MulC(0.69)),
					f7,
					f7.Neg(),
				}
			}},
		Y0:    []float64{1, 0, 0, 0, 0, 0, 0, 0.0057},
		T1:    321.8122,
		Stiff: true,
		Doc: "HIRES: 8-state photomorphogenesis kinetics, one nonlinear term 280·y6·y8; " +
			"Schäfer (1975), Hairer & Wanner II, Bari test set hires.f",
	}
}

// HIRESRef is the HIRES solution at t = 321.8122 from y0 = (1, 0, 0, 0, 0,
// 0, 0, 0.0057): "computed using true double precision RADAU5 on Cray C90,
// uround = 1.01e-19, rtol = atol = h0 = 1.1e-18" (Bari test set, hires.f,
// subroutine solut).
var HIRESRef = [8]float64{
	0.7371312573325668e-3, 0.1442485726316185e-3, 0.5888729740967575e-4,
	0.1175651343283149e-2, 0.2386356198831331e-2, 0.6238968252742796e-2,
	0.2849998395185769e-2, 0.2850001604814231e-2,
}

// Scales of NeuralRobertson's network: its inputs are (neuralY1Scale·y1,
// y2) and its output times neuralRateScale is the learned rate.
const (
	neuralY1Scale   = 1e4
	neuralRateScale = 1e4
)

// NeuralRobertsonMLP returns the network of NeuralRobertson: 2 inputs → 16
// tanh → 16 tanh → 1 softplus, 337 parameters (nn.MLP layout).
func NeuralRobertsonMLP() nn.MLP {
	return nn.NewMLP([]int{2, 16, 16, 1}, nn.Tanh, nn.Softplus)
}

// NeuralRobertson returns Robertson's kinetics (see Robertson) with the
// rate of the autocatalytic reaction learned by a small neural network,
// a universal differential equation in the sense of Rackauckas et al.
// (2020): the term k3·y1·y2 becomes
//
//	r = 1e4 · N(1e4·y1, y2) · y1·y2
//
// where N is NeuralRobertsonMLP (2 → 16 tanh → 16 tanh → 1 softplus).
// The factor y1·y2 is kept, so the term vanishes with either reactant and
// y0+y1+y2 is still conserved; the softplus output keeps the learned rate
// positive. The input scale 1e4 maps y1 (at most about 3.7e-5 with the
// default rates) to O(1), and the output scale 1e4 makes N ≈ 1 the
// classical k3 = 1e4.
//
// Per-trajectory parameters p = (k1, k2), default (0.04, 3e7). The
// network's weights are the shared parameters (Field.Shared = 337), with
// defaults NeuralRobertsonMLP().Init(nil, rand.New(rand.NewPCG(seed,
// seed))). Defaults otherwise as Robertson: y0 = (1, 0, 0), t ∈ [0, 100],
// stiff. ByName("neural-robertson") uses seed 1.
func NeuralRobertson(seed uint64) Problem {
	mlp := NeuralRobertsonMLP()
	return Problem{
		Name: "neural-robertson",
		Field: ode.Field{Name: "neural-robertson", Dim: 3, Params: 2, Shared: mlp.NumParams(), Stiff: true,
			F: func(_ tape.V, y, p []tape.V) []tape.V {
				n := mlp.Apply(p[2:], []tape.V{y[1].MulC(neuralY1Scale), y[2]})[0]
				r := n.MulC(neuralRateScale).Mul(y[1]).Mul(y[2])
				return robertsonRates(y, p[0], p[1], r)
			}},
		Y0:     []float64{1, 0, 0},
		P:      []float64{0.04, 3e7},
		Shared: mlp.Init(nil, rand.New(rand.NewPCG(seed, seed))),
		T1:     100,
		Stiff:  true,
		Doc: "neural Robertson: Robertson with k3·y1·y2 → 1e4·N(1e4·y1, y2)·y1·y2, N a 2-16-16-1 tanh/softplus MLP " +
			"(shared weights); p = (k1, k2) = (0.04, 3e7)",
	}
}

// The names ByName accepts, in the order Names returns them, with the
// constructors and arguments they stand for.
var byName = []struct {
	name string
	f    func() Problem
}{
	{"lorenz", Lorenz},
	{"vdp", VanDerPol},
	{"vdp-stiff", func() Problem { return StiffVanDerPol(1e3) }},
	{"lorenz96", func() Problem { return Lorenz96(8) }},
	{"lorenz96-64", func() Problem { return Lorenz96(64) }},
	{"lorenz96-256", func() Problem { return Lorenz96(256) }},
	{"linear", func() Problem { return Linear(defaultLinearA(), 3) }},
	{"kepler", Kepler},
	{"robertson", Robertson},
	{"hires", HIRES},
	{"pollution", Pollution},
	{"brusselator", func() Problem { return Brusselator(32) }},
	{"neural-robertson", func() Problem { return NeuralRobertson(1) }},
	{"pleiades", Pleiades},
}

// Names returns the names of the built-in problems, in a fixed order:
// lorenz, vdp, vdp-stiff, lorenz96, lorenz96-64, lorenz96-256, linear,
// kepler, robertson, hires, pollution, brusselator, neural-robertson,
// pleiades.
func Names() []string {
	names := make([]string, len(byName))
	for i, e := range byName {
		names[i] = e.name
	}
	return names
}

// ByName returns the built-in problem with the given name (see Names) at
// its defaults. Where a constructor takes arguments, ByName uses:
// vdp-stiff StiffVanDerPol(1e3); lorenz96 Lorenz96(8); lorenz96-64
// Lorenz96(64); lorenz96-256 Lorenz96(256); brusselator Brusselator(32)
// (d = 64); linear Linear with
// d = 3 and A = [[−0.5, 2, 0], [−2, −0.5, 0], [0.5, 0, −1]];
// neural-robertson NeuralRobertson(1).
//
// It also accepts the names Lorenz96 and Brusselator give the other sizes,
// so that a problem's Name finds it again: "lorenz96-<d>" is Lorenz96(d)
// for 4 ≤ d ≤ MaxSizedDim and "brusselator-<cells>" Brusselator(cells)
// for 1 ≤ cells ≤ MaxSizedDim/2, the number in decimal without leading
// zeros (as "lorenz96-40"). An unknown name, or a size out of range,
// gives an error that lists the valid names.
func ByName(name string) (Problem, error) {
	for _, e := range byName {
		if e.name == name {
			return e.f(), nil
		}
	}
	for _, s := range sized {
		num, ok := strings.CutPrefix(name, s.prefix)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || strconv.Itoa(n) != num {
			break
		}
		if n < s.min || n > s.max {
			return Problem{}, fmt.Errorf("problems: %q: %s takes %s from %d to %d; valid names are %s", name, s.pattern, s.what, s.min, s.max, validNames())
		}
		return s.f(n), nil
	}
	return Problem{}, fmt.Errorf("problems: unknown problem %q; valid names are %s", name, validNames())
}

// MaxSizedDim bounds the state dimension of the problems ByName makes
// from a sized name ("lorenz96-<d>", "brusselator-<cells>"): larger ones
// would take a long time to trace before they fail elsewhere.
const MaxSizedDim = 1 << 16

// sized lists the name patterns ByName accepts besides Names.
var sized = []struct {
	prefix, pattern, what string
	min, max              int
	f                     func(int) Problem
}{
	{"lorenz96-", "lorenz96-<d>", "a state dimension d", 4, MaxSizedDim, Lorenz96},
	{"brusselator-", "brusselator-<cells>", "a number of cells", 1, MaxSizedDim / 2, Brusselator},
}

// validNames lists Names and the sized patterns, for errors.
func validNames() string {
	return strings.Join(Names(), ", ") + ", and lorenz96-<d> (d ≥ 4), brusselator-<cells> (cells ≥ 1) of other sizes"
}

// isFinite reports whether x is neither NaN nor infinite.
func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
