package refode

import "math"

// DOP853 coefficients, transcribed from E. Hairer's dop853.f (version of
// 2004, subroutine DP86CO; identical to scipy's
// scipy/integrate/_ivp/dop853_coefficients.py). Only the 12 stages of the
// step and the embedded 5th- and 3rd-order error estimators are needed:
// the integrator stops on output times instead of interpolating.
const (
	dopC2  = 0.526001519587677318785587544488e-01
	dopC3  = 0.789002279381515978178381316732e-01
	dopC4  = 0.118350341907227396726757197510e+00
	dopC5  = 0.281649658092772603273242802490e+00
	dopC6  = 0.333333333333333333333333333333e+00
	dopC7  = 0.25e+00
	dopC8  = 0.307692307692307692307692307692e+00
	dopC9  = 0.651282051282051282051282051282e+00
	dopC10 = 0.6e+00
	dopC11 = 0.857142857142857142857142857142e+00

	dopB1  = 5.42937341165687622380535766363e-2
	dopB6  = 4.45031289275240888144113950566e0
	dopB7  = 1.89151789931450038304281599044e0
	dopB8  = -5.8012039600105847814672114227e0
	dopB9  = 3.1116436695781989440891606237e-1
	dopB10 = -1.52160949662516078556178806805e-1
	dopB11 = 2.01365400804030348374776537501e-1
	dopB12 = 4.47106157277725905176885569043e-2

	dopBhh1 = 0.244094488188976377952755905512e+00
	dopBhh2 = 0.733846688281611857341361741547e+00
	dopBhh3 = 0.220588235294117647058823529412e-01

	dopEr1  = 0.1312004499419488073250102996e-01
	dopEr6  = -0.1225156446376204440720569753e+01
	dopEr7  = -0.4957589496572501915214079952e+00
	dopEr8  = 0.1664377182454986536961530415e+01
	dopEr9  = -0.3503288487499736816886487290e+00
	dopEr10 = 0.3341791187130174790297318841e+00
	dopEr11 = 0.8192320648511571246570742613e-01
	dopEr12 = -0.2235530786388629525884427845e-01

	dopA21 = 5.26001519587677318785587544488e-2

	dopA31 = 1.97250569845378994544595329183e-2
	dopA32 = 5.91751709536136983633785987549e-2

	dopA41 = 2.95875854768068491816892993775e-2
	dopA43 = 8.87627564304205475450678981324e-2

	dopA51 = 2.41365134159266685502369798665e-1
	dopA53 = -8.84549479328286085344864962717e-1
	dopA54 = 9.24834003261792003115737966543e-1

	dopA61 = 3.7037037037037037037037037037e-2
	dopA64 = 1.70828608729473871279604482173e-1
	dopA65 = 1.25467687566822425016691814123e-1

	dopA71 = 3.7109375e-2
	dopA74 = 1.70252211019544039314978060272e-1
	dopA75 = 6.02165389804559606850219397283e-2
	dopA76 = -1.7578125e-2

	dopA81 = 3.70920001185047927108779319836e-2
	dopA84 = 1.70383925712239993810214054705e-1
	dopA85 = 1.07262030446373284651809199168e-1
	dopA86 = -1.53194377486244017527936158236e-2
	dopA87 = 8.27378916381402288758473766002e-3

	dopA91 = 6.24110958716075717114429577812e-1
	dopA94 = -3.36089262944694129406857109825e0
	dopA95 = -8.68219346841726006818189891453e-1
	dopA96 = 2.75920996994467083049415600797e1
	dopA97 = 2.01540675504778934086186788979e1
	dopA98 = -4.34898841810699588477366255144e1

	dopA101 = 4.77662536438264365890433908527e-1
	dopA104 = -2.48811461997166764192642586468e0
	dopA105 = -5.90290826836842996371446475743e-1
	dopA106 = 2.12300514481811942347288949897e1
	dopA107 = 1.52792336328824235832596922938e1
	dopA108 = -3.32882109689848629194453265587e1
	dopA109 = -2.03312017085086261358222928593e-2

	dopA111  = -9.3714243008598732571704021658e-1
	dopA114  = 5.18637242884406370830023853209e0
	dopA115  = 1.09143734899672957818500254654e0
	dopA116  = -8.14978701074692612513997267357e0
	dopA117  = -1.85200656599969598641566180701e1
	dopA118  = 2.27394870993505042818970056734e1
	dopA119  = 2.49360555267965238987089396762e0
	dopA1110 = -3.0467644718982195003823669022e0

	dopA121  = 2.27331014751653820792359768449e0
	dopA124  = -1.05344954667372501984066689879e1
	dopA125  = -2.00087205822486249909675718444e0
	dopA126  = -1.79589318631187989172765950534e1
	dopA127  = 2.79488845294199600508499808837e1
	dopA128  = -2.85899827713502369474065508674e0
	dopA129  = -8.87285693353062954433549289258e0
	dopA1210 = 1.23605671757943030647266201528e1
	dopA1211 = 6.43392746015763530355970484046e-1
)

// Hairer's default controller parameters for DOP853.
const (
	dopSafe   = 0.9
	dopFac1   = 0.333 // hnew/h >= fac1
	dopFac2   = 6.0   // hnew/h <= fac2
	dopBeta   = 0.0   // Lund stabilisation off (DOP853 default)
	dopUround = 2.3e-16
)

// DOP853 integrates y' = f(t, y), y(t0) = y0 with Hairer's explicit
// Dormand–Prince 8(5,3) method and returns y at each time in ts (which must
// be monotone, in either direction, starting from t0; repeated times and
// t0 itself are allowed). The integration stops exactly on every output
// time. rtol and atol are Hairer's scalar tolerances: the local error of
// component i is kept below about atol + rtol·max(|y_i(t)|, |y_i(t+h)|).
//
// On failure the states reached so far (one per output time) are returned
// together with the error.
func DOP853(f Func, t0 float64, y0, ts []float64, rtol, atol float64) ([][]float64, error) {
	ys, _, err := DOP853Opts(f, t0, y0, ts, rtol, atol, nil)
	return ys, err
}

// DOP853Opts is DOP853 with Options (nil for the defaults) and work
// statistics.
func DOP853Opts(f Func, t0 float64, y0, ts []float64, rtol, atol float64, o *Options) ([][]float64, Stats, error) {
	a, err := checkArgs(len(y0), t0, ts, rtol, atol, o)
	if err != nil {
		return nil, Stats{}, err
	}
	d := newDOP853(f, t0, y0, rtol, a, span(t0, ts), o)
	ys, err := drive(d, ts)
	return ys, d.stats, err
}

type dop853 struct {
	f    Func
	n    int
	rtol float64
	atol []float64

	t      float64
	y      []float64
	k      [11][]float64 // k[1..10] as in dop853.f; k[1] holds f(t, y)
	y1     []float64
	h      float64
	facold float64
	reject bool
	hmax   float64
	fsal   bool // k[1] is valid for (t, y)

	maxSteps int
	stats    Stats
}

func newDOP853(f Func, t0 float64, y0 []float64, rtol float64, atol []float64, span float64, o *Options) *dop853 {
	n := len(y0)
	d := &dop853{
		f: f, n: n, rtol: rtol, atol: atol,
		t: t0, y: append([]float64(nil), y0...), y1: make([]float64, n),
		facold: 1e-4, hmax: span, maxSteps: 10000000,
	}
	for i := 1; i <= 10; i++ {
		d.k[i] = make([]float64, n)
	}
	if o != nil {
		if o.MaxSteps > 0 {
			d.maxSteps = o.MaxSteps
		}
		if o.MaxStep > 0 {
			d.hmax = o.MaxStep
		}
		d.h = math.Abs(o.InitialStep)
	}
	return d
}

func (d *dop853) state() []float64 { return d.y }

func (d *dop853) sk(i int, a, b float64) float64 {
	return d.atol[i] + d.rtol*math.Max(math.Abs(a), math.Abs(b))
}

// hinit is Hairer's initial step-size guess (function HINIT of dop853.f)
// for a method of order iord.
func (d *dop853) hinit(posneg float64, iord int) float64 {
	n, f0, f1, y1 := d.n, d.k[1], d.k[2], d.k[3]
	dnf, dny := 0.0, 0.0
	for i := 0; i < n; i++ {
		sk := d.atol[i] + d.rtol*math.Abs(d.y[i])
		dnf += (f0[i] / sk) * (f0[i] / sk)
		dny += (d.y[i] / sk) * (d.y[i] / sk)
	}
	var h float64
	if dnf <= 1e-10 || dny <= 1e-10 {
		h = 1e-6
	} else {
		h = math.Sqrt(dny/dnf) * 0.01
	}
	h = math.Min(h, d.hmax) * posneg
	for i := 0; i < n; i++ {
		y1[i] = d.y[i] + h*f0[i]
	}
	d.f(d.t+h, y1, f1)
	d.stats.FEvals++
	der2 := 0.0
	for i := 0; i < n; i++ {
		sk := d.atol[i] + d.rtol*math.Abs(d.y[i])
		v := (f1[i] - f0[i]) / sk
		der2 += v * v
	}
	der2 = math.Sqrt(der2) / math.Abs(h)
	der12 := math.Max(der2, math.Sqrt(dnf))
	var h1 float64
	if der12 <= 1e-15 {
		h1 = math.Max(1e-6, math.Abs(h)*1e-3)
	} else {
		h1 = math.Pow(0.01/der12, 1/float64(iord))
	}
	return posneg * math.Min(math.Min(100*math.Abs(h), h1), d.hmax)
}

// integrate advances (t, y) exactly to tend (core loop of DP86CO).
func (d *dop853) integrate(tend float64) error {
	if tend == d.t {
		return nil
	}
	n := d.n
	k1, k2, k3, k4, k5 := d.k[1], d.k[2], d.k[3], d.k[4], d.k[5]
	k6, k7, k8, k9, k10 := d.k[6], d.k[7], d.k[8], d.k[9], d.k[10]
	y, y1 := d.y, d.y1
	posneg := sign(tend - d.t)
	if !d.fsal {
		d.f(d.t, y, k1)
		d.stats.FEvals++
		d.fsal = true
	}
	if d.h == 0 {
		d.h = d.hinit(posneg, 8)
	}
	h := posneg * math.Abs(d.h)
	const expo1 = 1.0/8.0 - dopBeta*0.2
	const facc1, facc2 = 1 / dopFac1, 1 / dopFac2
	last := false
	for {
		if d.stats.Steps >= d.maxSteps {
			return ErrMaxSteps
		}
		if 0.1*math.Abs(h) <= math.Abs(d.t)*dopUround {
			return ErrStepTooSmall
		}
		hpred := h
		if (d.t+1.01*h-tend)*posneg > 0 {
			h = tend - d.t
			last = true
		}
		d.stats.Steps++
		x := d.t
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*dopA21*k1[i]
		}
		d.f(x+dopC2*h, y1, k2)
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*(dopA31*k1[i]+dopA32*k2[i])
		}
		d.f(x+dopC3*h, y1, k3)
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*(dopA41*k1[i]+dopA43*k3[i])
		}
		d.f(x+dopC4*h, y1, k4)
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*(dopA51*k1[i]+dopA53*k3[i]+dopA54*k4[i])
		}
		d.f(x+dopC5*h, y1, k5)
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*(dopA61*k1[i]+dopA64*k4[i]+dopA65*k5[i])
		}
		d.f(x+dopC6*h, y1, k6)
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*(dopA71*k1[i]+dopA74*k4[i]+dopA75*k5[i]+dopA76*k6[i])
		}
		d.f(x+dopC7*h, y1, k7)
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*(dopA81*k1[i]+dopA84*k4[i]+dopA85*k5[i]+dopA86*k6[i]+dopA87*k7[i])
		}
		d.f(x+dopC8*h, y1, k8)
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*(dopA91*k1[i]+dopA94*k4[i]+dopA95*k5[i]+dopA96*k6[i]+dopA97*k7[i]+dopA98*k8[i])
		}
		d.f(x+dopC9*h, y1, k9)
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*(dopA101*k1[i]+dopA104*k4[i]+dopA105*k5[i]+dopA106*k6[i]+
				dopA107*k7[i]+dopA108*k8[i]+dopA109*k9[i])
		}
		d.f(x+dopC10*h, y1, k10)
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*(dopA111*k1[i]+dopA114*k4[i]+dopA115*k5[i]+dopA116*k6[i]+
				dopA117*k7[i]+dopA118*k8[i]+dopA119*k9[i]+dopA1110*k10[i])
		}
		d.f(x+dopC11*h, y1, k2)
		xph := x + h
		if last {
			xph = tend
		}
		for i := 0; i < n; i++ {
			y1[i] = y[i] + h*(dopA121*k1[i]+dopA124*k4[i]+dopA125*k5[i]+dopA126*k6[i]+
				dopA127*k7[i]+dopA128*k8[i]+dopA129*k9[i]+dopA1210*k10[i]+dopA1211*k2[i])
		}
		d.f(xph, y1, k3)
		d.stats.FEvals += 11
		for i := 0; i < n; i++ {
			k4[i] = dopB1*k1[i] + dopB6*k6[i] + dopB7*k7[i] + dopB8*k8[i] + dopB9*k9[i] +
				dopB10*k10[i] + dopB11*k2[i] + dopB12*k3[i]
			k5[i] = y[i] + h*k4[i]
		}
		// Error estimation: Hairer's combination of the 5th- and
		// 3rd-order estimates, err = |h|·err5²/sqrt(n(err5² + 0.01·err3²)).
		err, err2 := 0.0, 0.0
		for i := 0; i < n; i++ {
			sk := d.sk(i, y[i], k5[i])
			e := k4[i] - dopBhh1*k1[i] - dopBhh2*k9[i] - dopBhh3*k3[i]
			err2 += (e / sk) * (e / sk)
			e = dopEr1*k1[i] + dopEr6*k6[i] + dopEr7*k7[i] + dopEr8*k8[i] + dopEr9*k9[i] +
				dopEr10*k10[i] + dopEr11*k2[i] + dopEr12*k3[i]
			err += (e / sk) * (e / sk)
		}
		deno := err + 0.01*err2
		if deno <= 0 {
			deno = 1
		}
		err = math.Abs(h) * err * math.Sqrt(1/(float64(n)*deno))
		// Step-size selection; fac1 <= hnew/h <= fac2.
		fac11 := math.Pow(err, expo1)
		fac := fac11 / math.Pow(d.facold, dopBeta)
		fac = math.Max(facc2, math.Min(facc1, fac/dopSafe))
		hnew := h / fac
		if err <= 1 {
			d.facold = math.Max(err, 1e-4)
			d.stats.Accepted++
			d.f(xph, k5, k4)
			d.stats.FEvals++
			copy(k1, k4)
			copy(y, k5)
			d.t = xph
			if last {
				// Carry the larger of the prediction made before the step
				// was truncated to hit tend and the new one.
				if math.Abs(hpred) > math.Abs(hnew) {
					hnew = hpred
				}
				d.h = hnew
				return nil
			}
			if math.Abs(hnew) > d.hmax {
				hnew = posneg * d.hmax
			}
			if d.reject {
				hnew = posneg * math.Min(math.Abs(hnew), math.Abs(h))
			}
			d.reject = false
		} else {
			hnew = h / math.Min(facc1, fac11/dopSafe)
			d.reject = true
			if d.stats.Accepted >= 1 {
				d.stats.Rejected++
			}
			last = false
		}
		h = hnew
	}
}
