package refode

import (
	"errors"
	"fmt"
	"math"
)

// Method selects the integrator SolveSens uses.
type Method int

const (
	// MethodDOP853 integrates the augmented system with DOP853.
	MethodDOP853 Method = iota
	// MethodRadau5 integrates the augmented system with Radau5.
	MethodRadau5
)

func (m Method) String() string {
	switch m {
	case MethodDOP853:
		return "DOP853"
	case MethodRadau5:
		return "Radau5"
	}
	return fmt.Sprintf("Method(%d)", int(m))
}

// Sensitivity holds the solution and its forward sensitivities at one
// output time.
type Sensitivity struct {
	T float64
	// Y is y(T), length d.
	Y []float64
	// DY0 is ∂y(T)/∂y0, row-major d×d: DY0[i*d+j] = ∂y_i(T)/∂y0_j.
	DY0 []float64
	// DP is ∂y(T)/∂p, row-major d×P: DP[i*P+k] = ∂y_i(T)/∂p_k.
	DP []float64
}

// SolveSens solves y' = f(t, y, p), y(t0) = y0 together with the forward
// variational equations
//
//	S' = J·S + [0 | ∂f/∂p],  S(t0) = [I | 0],  S = ∂y/∂(y0, p) (d×(d+P)),
//
// with the chosen integrator, and returns y and S at each time in ts.
//
// The error control covers S as well as y, so the sensitivities are as
// accurate as the states. Internally the parameter columns are integrated
// as p_k·∂y/∂p_k (same units as y) and unscaled on output.
//
// For MethodRadau5 the augmented Jacobian is built from pr.Jac, with the
// second-derivative blocks ∂(J·S + f_p)/∂y taken by central differences of
// pr.Jac and pr.JacP; they only affect Newton convergence, not the result.
// The augmented dimension is d(1+d+P); this is meant for small systems.
func SolveSens(pr Problem, m Method, t0 float64, y0, p, ts []float64, rtol, atol float64) ([]Sensitivity, error) {
	out, _, err := SolveSensOpts(pr, m, t0, y0, p, ts, rtol, atol, nil)
	return out, err
}

// SolveSensOpts is SolveSens with Options (nil for the defaults; Atol, if
// set, has length d and applies to y_i and to row i of S) and work
// statistics.
func SolveSensOpts(pr Problem, m Method, t0 float64, y0, p, ts []float64, rtol, atol float64, o *Options) ([]Sensitivity, Stats, error) {
	d, P := pr.Dim, pr.NParam
	if len(y0) != d {
		return nil, Stats{}, fmt.Errorf("refode: len(y0) = %d, want %d", len(y0), d)
	}
	if len(p) != P {
		return nil, Stats{}, fmt.Errorf("refode: len(p) = %d, want %d", len(p), P)
	}
	if P > 0 && pr.JacP == nil {
		return nil, Stats{}, errors.New("refode: problem has parameters but no JacP")
	}
	mc := d + P // columns of S
	N := d + d*mc
	p = append([]float64(nil), p...)
	sc := make([]float64, P)
	for k, v := range p {
		sc[k] = v
		if v == 0 {
			sc[k] = 1
		}
	}
	u0 := make([]float64, N)
	copy(u0, y0)
	for i := 0; i < d; i++ {
		u0[d+i*mc+i] = 1
	}
	var oa *Options
	if o != nil {
		c := *o
		if o.Atol != nil {
			if len(o.Atol) != d {
				return nil, Stats{}, fmt.Errorf("refode: len(Options.Atol) = %d, want %d", len(o.Atol), d)
			}
			c.Atol = make([]float64, N)
			copy(c.Atol, o.Atol)
			for i := 0; i < d; i++ {
				for c2 := 0; c2 < mc; c2++ {
					c.Atol[d+i*mc+c2] = o.Atol[i]
				}
			}
		}
		oa = &c
	}

	J := make([]float64, d*d)
	Jp := make([]float64, d*P)
	f := func(t float64, u, du []float64) {
		y := u[:d]
		pr.F(t, y, p, du[:d])
		for i := range J {
			J[i] = 0
		}
		pr.Jac(t, y, p, J)
		if P > 0 {
			for i := range Jp {
				Jp[i] = 0
			}
			pr.JacP(t, y, p, Jp)
		}
		S := u[d:]
		for i := 0; i < d; i++ {
			for c := 0; c < mc; c++ {
				s := 0.0
				for j := 0; j < d; j++ {
					s += J[i*d+j] * S[j*mc+c]
				}
				if c >= d {
					s += sc[c-d] * Jp[i*P+c-d]
				}
				du[d+i*mc+c] = s
			}
		}
	}

	var (
		ys    [][]float64
		stats Stats
		err   error
	)
	switch m {
	case MethodDOP853:
		ys, stats, err = DOP853Opts(f, t0, u0, ts, rtol, atol, oa)
	case MethodRadau5:
		jac := augmentedJac(pr, p, sc)
		ys, stats, err = Radau5Opts(f, jac, t0, u0, ts, rtol, atol, oa)
	default:
		return nil, Stats{}, fmt.Errorf("refode: unknown method %v", m)
	}
	out := make([]Sensitivity, len(ys))
	for n, u := range ys {
		s := Sensitivity{
			T:   ts[n],
			Y:   append([]float64(nil), u[:d]...),
			DY0: make([]float64, d*d),
			DP:  make([]float64, d*P),
		}
		for i := 0; i < d; i++ {
			for j := 0; j < d; j++ {
				s.DY0[i*d+j] = u[d+i*mc+j]
			}
			for k := 0; k < P; k++ {
				s.DP[i*P+k] = u[d+i*mc+d+k] / sc[k]
			}
		}
		out[n] = s
	}
	return out, stats, err
}

// augmentedJac returns the Jacobian of the augmented system (y, Ŝ) where
// the parameter columns of Ŝ are scaled by sc.
func augmentedJac(pr Problem, p, sc []float64) JacFunc {
	d, P := pr.Dim, pr.NParam
	mc := d + P
	N := d + d*mc
	J := make([]float64, d*d)
	Jplus := make([]float64, d*d)
	Jminus := make([]float64, d*d)
	Fpplus := make([]float64, d*P)
	Fpminus := make([]float64, d*P)
	yy := make([]float64, d)
	eval := func(t float64, y []float64, Jo, Fpo []float64) {
		for i := range Jo {
			Jo[i] = 0
		}
		pr.Jac(t, y, p, Jo)
		if P > 0 && Fpo != nil {
			for i := range Fpo {
				Fpo[i] = 0
			}
			pr.JacP(t, y, p, Fpo)
		}
	}
	return func(t float64, u []float64, JA []float64) {
		y, S := u[:d], u[d:]
		eval(t, y, J, nil)
		// ∂y'/∂y = J; ∂S'_{i,c}/∂S_{j,c} = J_ij.
		for i := 0; i < d; i++ {
			for j := 0; j < d; j++ {
				JA[i*N+j] = J[i*d+j]
				for c := 0; c < mc; c++ {
					JA[(d+i*mc+c)*N+d+j*mc+c] = J[i*d+j]
				}
			}
		}
		// ∂S'_{i,c}/∂y_k = Σ_j ∂J_ij/∂y_k·S_jc + sc·∂(f_p)_{i,c−d}/∂y_k,
		// by central differences (only Newton convergence depends on it).
		for k := 0; k < d; k++ {
			del := 6e-6 * math.Max(math.Abs(y[k]), 1e-3)
			copy(yy, y)
			yy[k] = y[k] + del
			eval(t, yy, Jplus, Fpplus)
			yy[k] = y[k] - del
			eval(t, yy, Jminus, Fpminus)
			inv := 1 / (2 * del)
			for i := 0; i < d; i++ {
				for c := 0; c < mc; c++ {
					s := 0.0
					for j := 0; j < d; j++ {
						s += (Jplus[i*d+j] - Jminus[i*d+j]) * S[j*mc+c]
					}
					if c >= d {
						s += sc[c-d] * (Fpplus[i*P+c-d] - Fpminus[i*P+c-d])
					}
					JA[(d+i*mc+c)*N+k] = s * inv
				}
			}
		}
	}
}
