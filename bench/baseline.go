package bench

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// Tsit5 coefficients of the baseline, transcribed from Ch. Tsitouras,
// "Runge–Kutta pairs of order 5(4) satisfying only the first column
// simplifying assumption", Comput. Math. Appl. 62(2):770–775, 2011, with the
// digits of diffrax's _tsit5_tableau (the library's ode/tableau_tsit5.go
// holds the same digits, unexported). TestBaselineMatchesLibrary checks
// that both integrators take the same steps.
const (
	t5a21 = 161.0 / 1000

	t5a31 = -0.8480655492356988544426874250230774675121177393430391537369234245294192976164141156943e-2
	t5a32 = 0.3354806554923569885444268742502307746751211773934303915373692342452941929761641411569

	t5a41 = 2.897153057105493432130432594192938764924887287701866490314866693455023795137503079289
	t5a42 = -6.359448489975074843148159912383825625952700647415626703305928850207288721235210244366
	t5a43 = 4.362295432869581411017727318190886861027813359713760212991062156752264926097707165077

	t5a51 = 5.325864828439256604428877920840511317836476253097040101202360397727981648835607691791
	t5a52 = -11.74888356406282787774717033978577296188744178259862899288666928009020615663593781589
	t5a53 = 7.495539342889836208304604784564358155658679161518186721010132816213648793440552049753
	t5a54 = -0.9249506636175524925650207933207191611349983406029535244034750452930469056411389539635e-1

	t5a61 = 5.861455442946420028659251486982647890394337666164814434818157239052507339770711679748
	t5a62 = -12.92096931784710929170611868178335939541780751955743459166312250439928519268343184452
	t5a63 = 8.159367898576158643180400794539253485181918321135053305748355423955009222648673734986
	t5a64 = -0.7158497328140099722453054252582973869127213147363544882721139659546372402303777878835e-1
	t5a65 = -0.2826905039406838290900305721271224146717633626879770007617876201276764571291579142206e-1

	// Solution weights b1…b6 (b7 = 0; they are also row 7 of A: FSAL).
	t5b1 = 0.9646076681806522951816731316512876333711995238157997181903319145764851595234062815396e-1
	t5b2 = 1.0 / 100
	t5b3 = 0.4798896504144995747752495322905965199130404621990332488332634944254542060153074523509
	t5b4 = 1.379008574103741893192274821856872770756462643091360525934940067397245698027561293331
	t5b5 = -3.290069515436080679901047585711363850115683290894936158531296799594813811049925401677
	t5b6 = 2.324710524099773982415355918398765796109060233222962411944060046314465391054716027841

	// Embedded order-4 weights b̂1…b̂7.
	t5bh1 = 0.9468075576583945807478876255758922856117527357724631226139574065785592789071067303271e-1
	t5bh2 = 0.9183565540343253096776363936645313759813746240984095238905939532922955247253608687270e-2
	t5bh3 = 0.4877705284247615707855642599631228241516691959761363774365216240304071651579571959813
	t5bh4 = 1.234297566930478985655109673884237654035539930748192848315425833500484878378061439761
	t5bh5 = -2.707712349983525454881109975059321670689605166938197378763992255714444407154902012702
	t5bh6 = 1.866628418170587035753719399566211498666255505244122593996591602841258328965767580089
	t5bh7 = 1.0 / 66

	// Error weights e = b − b̂, each rounded once (Go constant arithmetic
	// is exact).
	t5e1 = t5b1 - t5bh1
	t5e2 = t5b2 - t5bh2
	t5e3 = t5b3 - t5bh3
	t5e4 = t5b4 - t5bh4
	t5e5 = t5b5 - t5bh5
	t5e6 = t5b6 - t5bh6
	t5e7 = 0 - t5bh7
)

// Step-size control of the baseline: the library's integral controller
// for Tsit5 (ode.Controller's zero value).
const (
	ctlBeta     = 1.0 / 5 // 1/(ErrOrder+1)
	ctlSafety   = 0.9
	ctlFacMin   = 0.2
	ctlFacMax   = 5.0
	ctlErrFloor = 1e-10
	tsit5Order  = 5
)

// LorenzEnsemble is an ensemble of Lorenz systems
//
//	y0' = σ(y1 − y0),  y1' = y0(ρ − y2) − y1,  y2' = y0·y1 − β·y2
//
// sharing σ, β, the initial state and the time span, with one ρ per
// trajectory.
type LorenzEnsemble struct {
	Sigma, Beta float64
	Rho         []float64 // one per trajectory; len(Rho) is the ensemble size
	Y0          [3]float64
	T0, T1      float64
}

// ProtocolLorenz returns the ensemble of gradsolve's Lorenz protocol
// (REFERENCE.md §5.1): σ = 10, β = 8/3, ρ = linspace(0, 21, n),
// y0 = (1, 0, 0), t ∈ [0, 1].
func ProtocolLorenz(n int) *LorenzEnsemble {
	return &LorenzEnsemble{
		Sigma: 10, Beta: 8.0 / 3,
		Rho: problems.LinSpace(make([]float64, n), 0, 21),
		Y0:  [3]float64{1, 0, 0},
		T0:  0, T1: 1,
	}
}

// Problem returns the ensemble as an ode.Problem on problems.Lorenz's
// field, whose per-trajectory parameters are (σ, ρ, β): P is [n×3] with
// ρ_i in column 1.
func (e *LorenzEnsemble) Problem() ode.Problem {
	n := len(e.Rho)
	p := make([]float64, 3*n)
	for i, r := range e.Rho {
		p[3*i], p[3*i+1], p[3*i+2] = e.Sigma, r, e.Beta
	}
	return ode.Problem{
		Field: problems.Lorenz().Field,
		N:     n,
		Y0:    e.Y0[:],
		P:     p,
		T0:    e.T0, T1: e.T1,
	}
}

// BaselineSettings configure LorenzTsit5. The zero value means the
// library's defaults.
type BaselineSettings struct {
	// RelTol and AbsTol are the tolerances of the error norm; 0 means
	// ode.DefaultRelTol and ode.DefaultAbsTol.
	RelTol, AbsTol float64

	// MaxSteps caps the attempted steps of a trajectory; 0 means
	// ode.DefaultMaxSteps.
	MaxSteps int

	// Workers is the number of goroutines: 1 runs single-threaded, 0 means
	// runtime.GOMAXPROCS(0). Trajectories are handed out in chunks of
	// baselineChunk.
	Workers int
}

// baselineChunk is the number of trajectories a worker takes at a time.
const baselineChunk = 256

// BaselineStats counts the work of LorenzTsit5, per trajectory.
type BaselineStats struct {
	Accepted, Rejected []int
}

// LorenzTsit5 integrates every trajectory of e with a hand-written Tsit5
// loop in plain float64 arithmetic and stores the final states in dst
// ([n×3]; nil allocates), which it returns. It is the baseline of the
// library's forward solve and integrates exactly as the library's recorder
// does: per trajectory, Hairer's initial step, the integral controller
// h·clip(0.9·max(err, 1e-10)^(−1/5), 0.2, 5) after accepted and rejected
// steps alike, the error norm sqrt(mean((e_i/(atol + rtol·max(|y_i|,
// |y⁺_i|)))²)) accepted when ≤ 1, FSAL, and a last step that ends on T1.
//
// If stats is not nil its slices are resized to n and filled. A failed
// trajectory (step budget exhausted, step-size underflow, non-finite state)
// makes LorenzTsit5 return an *ode.TrajectoryError for the first one.
func LorenzTsit5(dst []float64, e *LorenzEnsemble, s *BaselineSettings, stats *BaselineStats) ([]float64, error) {
	n := len(e.Rho)
	if dst == nil {
		dst = make([]float64, 3*n)
	}
	if len(dst) != 3*n {
		panic(badDstLength)
	}
	var set BaselineSettings
	if s != nil {
		set = *s
	}
	if set.RelTol == 0 {
		set.RelTol = ode.DefaultRelTol
	}
	if set.AbsTol == 0 {
		set.AbsTol = ode.DefaultAbsTol
	}
	if set.MaxSteps == 0 {
		set.MaxSteps = ode.DefaultMaxSteps
	}
	if set.Workers <= 0 {
		set.Workers = runtime.GOMAXPROCS(0)
	}
	if !(e.T1 > e.T0) {
		return nil, fmt.Errorf("bench: Lorenz baseline: T1 = %v must exceed T0 = %v", e.T1, e.T0)
	}
	var acc, rej []int
	if stats != nil {
		stats.Accepted = resizeInts(stats.Accepted, n)
		stats.Rejected = resizeInts(stats.Rejected, n)
		acc, rej = stats.Accepted, stats.Rejected
	}
	status := make([]ode.Status, n)
	tEnd := make([]float64, n)
	run := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := lorenzTsit5One(e.Sigma, e.Rho[i], e.Beta, e.Y0, e.T0, e.T1, &set)
			dst[3*i], dst[3*i+1], dst[3*i+2] = r.y.x, r.y.y, r.y.z
			status[i], tEnd[i] = r.status, r.t
			if acc != nil {
				acc[i], rej[i] = r.accepted, r.rejected
			}
		}
	}
	workers := min(set.Workers, (n+baselineChunk-1)/baselineChunk)
	if workers <= 1 {
		run(0, n)
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					lo := int(next.Add(baselineChunk)) - baselineChunk
					if lo >= n {
						return
					}
					run(lo, min(lo+baselineChunk, n))
				}
			}()
		}
		wg.Wait()
	}
	for i, st := range status {
		if st != ode.OK {
			failed := 0
			for _, x := range status {
				if x != ode.OK {
					failed++
				}
			}
			return dst, &ode.TrajectoryError{Index: i, T: tEnd[i], Status: st, Method: "Tsit5 (baseline)", Failed: failed}
		}
	}
	return dst, nil
}

const badDstLength = "bench: destination slice length does not match input"

func resizeInts(x []int, n int) []int {
	if cap(x) < n {
		return make([]int, n)
	}
	return x[:n]
}

// vec3 is a Lorenz state; a small struct, unlike an array, is kept in
// registers by the Go compiler.
type vec3 struct{ x, y, z float64 }

// lorenzField returns the Lorenz field at y.
func lorenzField(y vec3, sigma, rho, beta float64) vec3 {
	return vec3{
		sigma * (y.y - y.x),
		y.x*(rho-y.z) - y.y,
		y.x*y.y - beta*y.z,
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// trajResult is the outcome of one baseline trajectory.
type trajResult struct {
	y                  vec3
	t                  float64
	accepted, rejected int
	status             ode.Status
}

// lorenzTsit5One integrates one Lorenz trajectory with Tsit5.
func lorenzTsit5One(sigma, rho, beta float64, y0 [3]float64, t0, t1 float64, set *BaselineSettings) trajResult {
	rtol, atol := set.RelTol, set.AbsTol
	y := vec3{y0[0], y0[1], y0[2]}
	t := t0
	k1 := lorenzField(y, sigma, rho, beta)
	hmin := 4 * 0x1p-52 * max(math.Abs(t0), math.Abs(t1-t0))

	// Hairer's initial step (Solving ODEs I, §II.4), as the recorder.
	sc := vec3{atol + rtol*math.Abs(y.x), atol + rtol*math.Abs(y.y), atol + rtol*math.Abs(y.z)}
	d0 := math.Sqrt((sq(y.x/sc.x) + sq(y.y/sc.y) + sq(y.z/sc.z)) / 3)
	d1 := math.Sqrt((sq(k1.x/sc.x) + sq(k1.y/sc.y) + sq(k1.z/sc.z)) / 3)
	h0 := 1e-6
	if d0 >= 1e-5 && d1 >= 1e-5 {
		h0 = 0.01 * d0 / d1
	}
	if !(h0 > 0) || math.IsInf(h0, 0) {
		h0 = 1e-6
	}
	h0 = math.Min(h0, t1-t)
	f1 := lorenzField(vec3{y.x + h0*k1.x, y.y + h0*k1.y, y.z + h0*k1.z}, sigma, rho, beta)
	d2 := math.Sqrt((sq((f1.x-k1.x)/sc.x)+sq((f1.y-k1.y)/sc.y)+sq((f1.z-k1.z)/sc.z))/3) / h0
	dm := math.Max(d1, d2)
	var hh float64
	if dm <= 1e-15 || math.IsNaN(dm) {
		hh = math.Max(1e-6, h0*1e-3)
	} else {
		hh = math.Pow(0.01/dm, 1.0/(tsit5Order+1))
	}
	h := math.Min(100*h0, hh)
	last := false
	if span := t1 - t; h >= span {
		h, last = span, true
	}

	var res trajResult
	nonfinite := 0
	for {
		// One Tsit5 trial step, written out component by component (the
		// state lives in registers). Lorenz is autonomous, so the stage
		// times are not needed.
		y2 := vec3{
			y.x + h*(t5a21*k1.x),
			y.y + h*(t5a21*k1.y),
			y.z + h*(t5a21*k1.z),
		}
		k2 := lorenzField(y2, sigma, rho, beta)
		y3 := vec3{
			y.x + h*(t5a31*k1.x+t5a32*k2.x),
			y.y + h*(t5a31*k1.y+t5a32*k2.y),
			y.z + h*(t5a31*k1.z+t5a32*k2.z),
		}
		k3 := lorenzField(y3, sigma, rho, beta)
		y4 := vec3{
			y.x + h*(t5a41*k1.x+t5a42*k2.x+t5a43*k3.x),
			y.y + h*(t5a41*k1.y+t5a42*k2.y+t5a43*k3.y),
			y.z + h*(t5a41*k1.z+t5a42*k2.z+t5a43*k3.z),
		}
		k4 := lorenzField(y4, sigma, rho, beta)
		y5 := vec3{
			y.x + h*(t5a51*k1.x+t5a52*k2.x+t5a53*k3.x+t5a54*k4.x),
			y.y + h*(t5a51*k1.y+t5a52*k2.y+t5a53*k3.y+t5a54*k4.y),
			y.z + h*(t5a51*k1.z+t5a52*k2.z+t5a53*k3.z+t5a54*k4.z),
		}
		k5 := lorenzField(y5, sigma, rho, beta)
		y6 := vec3{
			y.x + h*(t5a61*k1.x+t5a62*k2.x+t5a63*k3.x+t5a64*k4.x+t5a65*k5.x),
			y.y + h*(t5a61*k1.y+t5a62*k2.y+t5a63*k3.y+t5a64*k4.y+t5a65*k5.y),
			y.z + h*(t5a61*k1.z+t5a62*k2.z+t5a63*k3.z+t5a64*k4.z+t5a65*k5.z),
		}
		k6 := lorenzField(y6, sigma, rho, beta)
		yn := vec3{
			y.x + h*(t5b1*k1.x+t5b2*k2.x+t5b3*k3.x+t5b4*k4.x+t5b5*k5.x+t5b6*k6.x),
			y.y + h*(t5b1*k1.y+t5b2*k2.y+t5b3*k3.y+t5b4*k4.y+t5b5*k5.y+t5b6*k6.y),
			y.z + h*(t5b1*k1.z+t5b2*k2.z+t5b3*k3.z+t5b4*k4.z+t5b5*k5.z+t5b6*k6.z),
		}
		k7 := lorenzField(yn, sigma, rho, beta)
		e := vec3{
			h * (t5e1*k1.x + t5e2*k2.x + t5e3*k3.x + t5e4*k4.x + t5e5*k5.x + t5e6*k6.x + t5e7*k7.x),
			h * (t5e1*k1.y + t5e2*k2.y + t5e3*k3.y + t5e4*k4.y + t5e5*k5.y + t5e6*k6.y + t5e7*k7.y),
			h * (t5e1*k1.z + t5e2*k2.z + t5e3*k3.z + t5e4*k4.z + t5e5*k5.z + t5e6*k6.z + t5e7*k7.z),
		}

		// Error norm and controller.
		bad := !finite(yn.x) || !finite(yn.y) || !finite(yn.z)
		errn := math.Sqrt((sq(e.x/(atol+rtol*max(math.Abs(y.x), math.Abs(yn.x)))) +
			sq(e.y/(atol+rtol*max(math.Abs(y.y), math.Abs(yn.y)))) +
			sq(e.z/(atol+rtol*max(math.Abs(y.z), math.Abs(yn.z))))) / 3)
		if !finite(errn) {
			bad = true
		}
		var factor float64
		accepted := false
		switch {
		case bad:
			res.rejected++
			nonfinite++
			factor = ctlFacMin
		case errn <= 1:
			accepted = true
			res.accepted++
			nonfinite = 0
			t += h
			y, k1 = yn, k7
			factor = ctlSafety * math.Exp(-ctlBeta*math.Log(max(errn, ctlErrFloor)))
		default:
			res.rejected++
			nonfinite = 0
			factor = ctlSafety * math.Exp(-ctlBeta*math.Log(errn))
		}
		if accepted && last {
			res.status = ode.OK
			break
		}
		if res.accepted+res.rejected >= set.MaxSteps {
			res.status = ode.MaxStepsReached
			break
		}
		h *= min(ctlFacMax, max(ctlFacMin, factor))
		if h < hmin || t+h == t {
			res.status = ode.StepSizeUnderflow
			if nonfinite > 0 {
				res.status = ode.NonFinite
			}
			break
		}
		span := t1 - t
		last = h >= span
		if last {
			h = span
		}
	}
	res.y, res.t = y, t
	if res.status != ode.OK {
		res.y = vec3{math.NaN(), math.NaN(), math.NaN()}
	}
	return res
}

func sq(x float64) float64 { return x * x }
