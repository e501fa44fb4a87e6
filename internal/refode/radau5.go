package refode

import "math"

// Radau IIA (3 stages, order 5) constants as in Hairer's radau5.f
// (subroutine RADCOR, version of 1996/2002). T and TI transform the
// inverse Butcher matrix to block-diagonal form
// TI·A⁻¹·T = diag(γ, [[α, −β], [β, α]]), which splits the 3d-dimensional
// Newton system into one real and one complex d-dimensional system.
var (
	radSq6   = math.Sqrt(6)
	radC1    = (4 - radSq6) / 10
	radC2    = (4 + radSq6) / 10
	radC1M1  = radC1 - 1
	radC2M1  = radC2 - 1
	radC1MC2 = radC1 - radC2
	radDD1   = -(13 + 7*radSq6) / 3
	radDD2   = (-13 + 7*radSq6) / 3
	radDD3   = -1.0 / 3

	// γ = u1, α + iβ: the eigenvalues of A⁻¹.
	radU1, radAlph, radBeta = radauEigen()
)

const (
	radT11 = 9.1232394870892942792e-02
	radT12 = -0.14125529502095420843
	radT13 = -3.0029194105147424492e-02
	radT21 = 0.24171793270710701896
	radT22 = 0.20412935229379993199
	radT23 = 0.38294211275726193779
	radT31 = 0.96604818261509293619 // T32 = 1, T33 = 0

	radTI11 = 4.3255798900631553510
	radTI12 = 0.33919925181580986954
	radTI13 = 0.54177053993587487119
	radTI21 = -4.1787185915519047273
	radTI22 = -0.32768282076106238708
	radTI23 = 0.47662355450055045196
	radTI31 = -0.50287263494578687595
	radTI32 = 2.5719269498556054292
	radTI33 = -0.59603920482822492497
)

func radauEigen() (u1, alph, beta float64) {
	c81, c9 := math.Cbrt(81), math.Cbrt(9)
	u1 = (6 + c81 - c9) / 30
	alph = (12 - c81 + c9) / 60
	beta = (c81 + c9) * math.Sqrt(3) / 60
	cno := alph*alph + beta*beta
	return 1 / u1, alph / cno, beta / cno
}

// Hairer's default parameters for RADAU5.
const (
	radUround = 1e-16
	radSafe   = 0.9
	radNit    = 7     // maximal number of Newton iterations
	radThet   = 0.001 // Jacobian reuse threshold (only seeds θ here)
	radQuot1  = 1.0
	radFacl   = 5.0     // hnew/h >= 1/facl = 0.2
	radFacr   = 1.0 / 8 // hnew/h <= 1/facr = 8
)

// Radau5 integrates y' = f(t, y), y(t0) = y0 with Hairer's RADAU5 (Radau IIA
// of order 5, simplified Newton iterations with the analytic Jacobian jac,
// Hairer's error estimate and Gustafsson's predictive step-size
// controller) and returns y at each time in ts (monotone from t0, in either
// direction). The integration stops exactly on every output time.
//
// As in radau5.f, the user tolerances are mapped to internal ones,
// rtol' = 0.1·rtol^(2/3), atol' = rtol'·atol/rtol, so that the global error
// is roughly of the size of rtol. Unlike radau5.f, the Jacobian and the
// Newton matrices are recomputed after every accepted step (WORK(3) < 0),
// which costs time but makes Newton convergence as robust as possible.
//
// On failure the states reached so far (one per output time) are returned
// together with the error.
func Radau5(f Func, jac JacFunc, t0 float64, y0, ts []float64, rtol, atol float64) ([][]float64, error) {
	ys, _, err := Radau5Opts(f, jac, t0, y0, ts, rtol, atol, nil)
	return ys, err
}

// Radau5Opts is Radau5 with Options (nil for the defaults) and work
// statistics.
func Radau5Opts(f Func, jac JacFunc, t0 float64, y0, ts []float64, rtol, atol float64, o *Options) ([][]float64, Stats, error) {
	a, err := checkArgs(len(y0), t0, ts, rtol, atol, o)
	if err != nil {
		return nil, Stats{}, err
	}
	if rtol <= 10*radUround {
		return nil, Stats{}, errTolTooSmall
	}
	r := newRadau5(f, jac, t0, y0, rtol, a, span(t0, ts), o)
	ys, err := drive(r, ts)
	return ys, r.stats, err
}

type radau5 struct {
	f    Func
	jac  JacFunc
	n    int
	rtol float64   // internal (transformed) tolerance
	atol []float64 // internal (transformed) tolerances

	t, h, hold float64
	y          []float64
	first      bool // no step accepted yet
	reject     bool
	faccon     float64
	hacc       float64
	erracc     float64
	fnewt      float64
	hmax       float64

	fjac                []float64
	e1                  luReal
	e2                  luComplex
	e1m                 []float64
	e2m                 []complex128
	z1, z2, z3          []float64
	f1, f2, f3          []float64
	fy, scal, tmp       []float64
	cont1, cont2, cont3 []float64 // collocation polynomial of the last step
	cbuf                []complex128

	maxSteps int
	stats    Stats
}

func newRadau5(f Func, jac JacFunc, t0 float64, y0 []float64, rtol float64, atol []float64, span float64, o *Options) *radau5 {
	n := len(y0)
	mk := func() []float64 { return make([]float64, n) }
	r := &radau5{
		f: f, jac: jac, n: n,
		t: t0, y: append([]float64(nil), y0...),
		first: true, faccon: 1, hmax: span, maxSteps: 1000000,
		fjac: make([]float64, n*n), e1m: make([]float64, n*n), e2m: make([]complex128, n*n),
		z1: mk(), z2: mk(), z3: mk(), f1: mk(), f2: mk(), f3: mk(),
		fy: mk(), scal: mk(), tmp: mk(), cont1: mk(), cont2: mk(), cont3: mk(),
		cbuf: make([]complex128, n),
	}
	// Tolerance transformation of radau5.f.
	const expm = 2.0 / 3.0
	r.rtol = 0.1 * math.Pow(rtol, expm)
	r.atol = make([]float64, n)
	for i, a := range atol {
		r.atol[i] = r.rtol * a / rtol
	}
	r.fnewt = math.Max(10*radUround/r.rtol, math.Min(0.03, math.Sqrt(r.rtol)))
	if o != nil {
		if o.MaxSteps > 0 {
			r.maxSteps = o.MaxSteps
		}
		if o.MaxStep > 0 {
			r.hmax = o.MaxStep
		}
		r.h = math.Abs(o.InitialStep)
	}
	if r.h <= 10*radUround {
		r.h = 1e-6
	}
	return r
}

func (r *radau5) state() []float64 { return r.y }

func (r *radau5) setScal() {
	for i, v := range r.y {
		r.scal[i] = r.atol[i] + r.rtol*math.Abs(v)
	}
}

// decompose forms and factorises E1 = fac1·I − J and E2 = (α+iβ)/h·I − J.
func (r *radau5) decompose(fac1, alphn, betan float64) bool {
	n := r.n
	for i := 0; i < n*n; i++ {
		r.e1m[i] = -r.fjac[i]
		r.e2m[i] = complex(-r.fjac[i], 0)
	}
	for i := 0; i < n; i++ {
		r.e1m[i*n+i] += fac1
		r.e2m[i*n+i] += complex(alphn, betan)
	}
	r.stats.LUs++
	return r.e1.factor(r.e1m, n) && r.e2.factor(r.e2m, n)
}

// integrate advances (t, y) exactly to tend (core loop of RADCOR).
func (r *radau5) integrate(tend float64) error {
	if tend == r.t {
		return nil
	}
	n := r.n
	y, z1, z2, z3, f1, f2, f3 := r.y, r.z1, r.z2, r.z3, r.f1, r.f2, r.f3
	posneg := sign(tend - r.t)
	hmaxn := math.Min(r.hmax, math.Abs(tend-r.t))
	h := posneg * math.Min(math.Abs(r.h), hmaxn)
	last := false
	if (r.t+h*1.0001-tend)*posneg >= 0 {
		h = tend - r.t
		last = true
	}
	// Zero starting values for the first step of every segment: the
	// collocation polynomial of the previous step may be far from tend.
	startZero := true
	cfac := radSafe * (1 + 2*radNit)
	nsing := 0
	r.setScal()
	r.f(r.t, y, r.fy)
	r.stats.FEvals++
	computeJac := true
	var theta, dynold, thqold float64

	for {
		if computeJac {
			for i := range r.fjac {
				r.fjac[i] = 0
			}
			r.jac(r.t, y, r.fjac)
			r.stats.JEvals++
			computeJac = false
		}
		// Label 20: Newton matrices for the current h.
		fac1 := radU1 / h
		alphn := radAlph / h
		betan := radBeta / h
		if !r.decompose(fac1, alphn, betan) {
			nsing++
			if nsing >= 5 {
				return ErrSingular
			}
			h *= 0.5
			r.reject = true
			last = false
			continue
		}
		// Label 30.
		r.stats.Steps++
		if r.stats.Steps > r.maxSteps {
			return ErrMaxSteps
		}
		if 0.1*math.Abs(h) <= math.Abs(r.t)*radUround {
			return ErrStepTooSmall
		}
		x := r.t
		xph := x + h
		if last {
			xph = tend
		}
		// Starting values for the Newton iteration.
		if r.first || startZero {
			for i := 0; i < n; i++ {
				z1[i], z2[i], z3[i] = 0, 0, 0
				f1[i], f2[i], f3[i] = 0, 0, 0
			}
		} else {
			c3q := h / r.hold
			c1q := radC1 * c3q
			c2q := radC2 * c3q
			for i := 0; i < n; i++ {
				ak1, ak2, ak3 := r.cont1[i], r.cont2[i], r.cont3[i]
				z1i := c1q * (ak1 + (c1q-radC2M1)*(ak2+(c1q-radC1M1)*ak3))
				z2i := c2q * (ak1 + (c2q-radC2M1)*(ak2+(c2q-radC1M1)*ak3))
				z3i := c3q * (ak1 + (c3q-radC2M1)*(ak2+(c3q-radC1M1)*ak3))
				z1[i], z2[i], z3[i] = z1i, z2i, z3i
				f1[i] = radTI11*z1i + radTI12*z2i + radTI13*z3i
				f2[i] = radTI21*z1i + radTI22*z2i + radTI23*z3i
				f3[i] = radTI31*z1i + radTI32*z2i + radTI33*z3i
			}
		}
		// Simplified Newton iteration.
		newt := 0
		r.faccon = math.Pow(math.Max(r.faccon, radUround), 0.8)
		theta = math.Abs(radThet)
		var dyno float64
		redo := false // step must be retried with the new h
		for {
			if newt >= radNit {
				// Unexpected step rejection (label 78).
				h *= 0.5
				r.reject = true
				last = false
				redo = true
				break
			}
			tmp := r.tmp
			for i := 0; i < n; i++ {
				tmp[i] = y[i] + z1[i]
			}
			r.f(x+radC1*h, tmp, z1)
			for i := 0; i < n; i++ {
				tmp[i] = y[i] + z2[i]
			}
			r.f(x+radC2*h, tmp, z2)
			for i := 0; i < n; i++ {
				tmp[i] = y[i] + z3[i]
			}
			r.f(xph, tmp, z3)
			r.stats.FEvals += 3
			for i := 0; i < n; i++ {
				a1, a2, a3 := z1[i], z2[i], z3[i]
				z1[i] = radTI11*a1 + radTI12*a2 + radTI13*a3
				z2[i] = radTI21*a1 + radTI22*a2 + radTI23*a3
				z3[i] = radTI31*a1 + radTI32*a2 + radTI33*a3
			}
			// SLVRAD, full Jacobian, identity mass matrix.
			for i := 0; i < n; i++ {
				s2, s3 := -f2[i], -f3[i]
				z1[i] -= f1[i] * fac1
				r.cbuf[i] = complex(z2[i]+s2*alphn-s3*betan, z3[i]+s3*alphn+s2*betan)
			}
			r.e1.solve(z1)
			r.e2.solve(r.cbuf)
			for i := 0; i < n; i++ {
				z2[i], z3[i] = real(r.cbuf[i]), imag(r.cbuf[i])
			}
			newt++
			dyno = 0
			for i := 0; i < n; i++ {
				s := r.scal[i]
				dyno += (z1[i]/s)*(z1[i]/s) + (z2[i]/s)*(z2[i]/s) + (z3[i]/s)*(z3[i]/s)
			}
			dyno = math.Sqrt(dyno / float64(3*n))
			if newt > 1 && newt < radNit {
				thq := dyno / dynold
				if newt == 2 {
					theta = thq
				} else {
					theta = math.Sqrt(thq * thqold)
				}
				thqold = thq
				if theta < 0.99 {
					r.faccon = theta / (1 - theta)
					dyth := r.faccon * dyno * math.Pow(theta, float64(radNit-1-newt)) / r.fnewt
					if dyth >= 1 {
						qnewt := math.Max(1e-4, math.Min(20, dyth))
						hhfac := 0.8 * math.Pow(qnewt, -1/(4+float64(radNit-1-newt)))
						h *= hhfac
						r.reject = true
						last = false
						redo = true
						break
					}
				} else {
					h *= 0.5 // label 78
					r.reject = true
					last = false
					redo = true
					break
				}
			}
			dynold = math.Max(dyno, radUround)
			for i := 0; i < n; i++ {
				f1i := f1[i] + z1[i]
				f2i := f2[i] + z2[i]
				f3i := f3[i] + z3[i]
				f1[i], f2[i], f3[i] = f1i, f2i, f3i
				z1[i] = radT11*f1i + radT12*f2i + radT13*f3i
				z2[i] = radT21*f1i + radT22*f2i + radT23*f3i
				z3[i] = radT31*f1i + f2i
			}
			if r.faccon*dyno <= r.fnewt {
				break
			}
		}
		if redo {
			continue
		}
		// Error estimation (ESTRAD).
		err := r.estimate(x, h)
		// New step size; we require 0.2 <= hnew/h <= 8.
		fac := math.Min(radSafe, cfac/float64(newt+2*radNit))
		quot := math.Max(radFacr, math.Min(radFacl, math.Pow(err, 0.25)/fac))
		hnew := h / quot
		if err < 1 {
			// Step accepted.
			r.first = false
			startZero = false
			r.stats.Accepted++
			if r.stats.Accepted > 1 {
				// Predictive controller of Gustafsson.
				facgus := (r.hacc / h) * math.Pow(err*err/r.erracc, 0.25) / radSafe
				facgus = math.Max(radFacr, math.Min(radFacl, facgus))
				quot = math.Max(quot, facgus)
				hnew = h / quot
			}
			r.hacc = h
			r.erracc = math.Max(1e-2, err)
			r.hold = h
			r.t = xph
			for i := 0; i < n; i++ {
				y[i] += z3[i]
				z1i, z2i := z1[i], z2[i]
				r.cont1[i] = (z2i - z3[i]) / radC2M1
				ak := (z1i - z2i) / radC1MC2
				acont3 := z1i / radC1
				acont3 = (ak - acont3) / radC2
				r.cont2[i] = (ak - r.cont1[i]) / radC1M1
				r.cont3[i] = r.cont2[i] - acont3
			}
			r.setScal()
			if last {
				r.h = hnew
				return nil
			}
			r.f(r.t, y, r.fy)
			r.stats.FEvals++
			hnew = posneg * math.Min(math.Abs(hnew), hmaxn)
			if r.reject {
				hnew = posneg * math.Min(math.Abs(hnew), math.Abs(h))
			}
			r.reject = false
			if (r.t+hnew/radQuot1-tend)*posneg >= 0 {
				h = tend - r.t
				last = true
			} else {
				h = hnew
			}
			computeJac = true
			nsing = 0
		} else {
			// Step rejected.
			r.reject = true
			last = false
			if r.first {
				h *= 0.1
			} else {
				h = hnew
			}
			if r.stats.Accepted >= 1 {
				r.stats.Rejected++
			}
		}
	}
}

// estimate is Hairer's error estimate (ESTRAD, full Jacobian, identity
// mass): err = ‖(I/(γh) − J)⁻¹·(f(y) + (dd·z)/h)‖ in the RMS norm weighted
// by scal, with one extra filtering solve on the first or a rejected step.
func (r *radau5) estimate(x, h float64) float64 {
	n := r.n
	hee1, hee2, hee3 := radDD1/h, radDD2/h, radDD3/h
	f2, cont := r.f2, r.tmp
	// f2 is free here: it is only needed again as a Newton starting value
	// after it has been recomputed.
	for i := 0; i < n; i++ {
		f2[i] = hee1*r.z1[i] + hee2*r.z2[i] + hee3*r.z3[i]
		cont[i] = f2[i] + r.fy[i]
	}
	r.e1.solve(cont)
	err := 0.0
	for i := 0; i < n; i++ {
		v := cont[i] / r.scal[i]
		err += v * v
	}
	err = math.Max(math.Sqrt(err/float64(n)), 1e-10)
	if err < 1 || !(r.first || r.reject) {
		return err
	}
	for i := 0; i < n; i++ {
		cont[i] += r.y[i]
	}
	f1 := r.f1
	r.f(x, cont, f1)
	r.stats.FEvals++
	for i := 0; i < n; i++ {
		cont[i] = f1[i] + f2[i]
	}
	r.e1.solve(cont)
	err = 0
	for i := 0; i < n; i++ {
		v := cont[i] / r.scal[i]
		err += v * v
	}
	return math.Max(math.Sqrt(err/float64(n)), 1e-10)
}
