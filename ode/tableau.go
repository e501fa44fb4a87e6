package ode

import (
	"fmt"
	"math"
	"math/big"
)

// Tolerances used by the tableau validators. A residual is compared with the
// tolerance times the absolute sum of the terms that make it up (at least 1),
// because a row whose entries reach 187 (Vern7) cannot sum to better than its
// own rounding errors.
const (
	// tableauERKTol bounds the residuals of explicit tableaus, whose literals are
	// correctly rounded from exact or 30+ digit values.
	tableauERKTol = 1e-14
	// tableauRosenbrockTol bounds the residuals of Rosenbrock tableaus, whose
	// published coefficients carry about 16 significant digits and are
	// converted from the (a, C) form.
	tableauRosenbrockTol = 1e-12
)

// ERKTableau is an explicit Runge–Kutta Butcher tableau with an embedded error
// estimator.
//
// One step of size h from (t, y) computes, for i = 0, …, s-1,
//
//	k_i = f(t + C[i]·h, y + h·Σ_{j<i} A[i][j]·k_j)
//
// and then
//
//	y⁺  = y + h·Σ_i B[i]·k_i,
//	err = h·Σ_i E[i]·k_i,
//
// where err = y⁺ − ŷ⁺ is the difference between the solution and the embedded
// solution ŷ⁺ = y + h·Σ_i b̂_i·k_i. The tableau is plain data: it does not
// change after construction and may be shared.
type ERKTableau struct {
	// Name is the conventional name of the method, such as "Tsit5".
	Name string
	// Order is the order of the solution y⁺ and ErrOrder the order of the
	// embedded solution ŷ⁺. The error estimate is O(h^(ErrOrder+1)).
	Order, ErrOrder int

	// C holds the nodes c_i; len(C) is the number of stages s.
	C []float64
	// A is the strictly lower triangular stage matrix: A[i] holds the i
	// entries a_i0, …, a_i(i-1), so A[0] is empty.
	A [][]float64
	// B holds the solution weights b_i, len s.
	B []float64
	// E holds the error weights e_i = b_i − b̂_i, len s.
	E []float64

	// Interp is the method's continuous extension (dense output), or nil.
	Interp *ERKInterp
}

// ERKInterp is the continuous extension of an explicit Runge–Kutta step
// (Hairer, Nørsett & Wanner, Solving ODEs I, §II.6): after the s stages of
// a step, e = len(ExtraC) extra stages
//
//	k_{s+i} = f(t + ExtraC[i]·h, y + h·Σ_{j<s+i} ExtraA[i][j]·k_j),
//
// and then, for θ ∈ [0, 1],
//
//	y(t + θh) = y + h·Σ_i b_i(θ)·k_i,   b_i(θ) = Σ_{j=1…m} R[i][j−1]·θ^j,
//
// over the s + e stages, with m = len(R[i]) the same for every row. It
// is consistent when b_i(1) = b_i (the step's weights; 0 for the extra
// stages), so that y(t + h) = y⁺, and Σ_i b_i(θ) = θ (R's first column
// sums to 1 and the others to 0); validate checks both.
type ERKInterp struct {
	// ExtraC and ExtraA are the nodes and stage weights of the extra
	// stages: ExtraA[i] has s + i entries.
	ExtraC []float64
	ExtraA [][]float64
	// R holds the polynomial coefficients: R[i][j−1] multiplies θ^j in
	// b_i(θ), one row per stage (s + e rows).
	R [][]float64
}

// Terms returns m, the degree of the interpolating polynomials.
func (p *ERKInterp) Terms() int { return len(p.R[0]) }

// validate checks the extension against its tableau t: the shapes, the
// extra stages' row sums Σ_j ExtraA[i][j] = ExtraC[i], b_i(1) = b_i and
// Σ_i R[i][j] = 1 for j = 0, else 0, each to tableauERKTol relative to the
// absolute sum of its terms.
func (p *ERKInterp) validate(t *ERKTableau) error {
	s, e := len(t.C), len(p.ExtraC)
	if len(p.ExtraA) != e || len(p.R) != s+e || len(p.R) == 0 {
		return fmt.Errorf("ode: tableau %q: interpolant has %d extra nodes, %d extra rows and %d coefficient rows, want %d rows for %d stages",
			t.Name, e, len(p.ExtraA), len(p.R), s+e, s+e)
	}
	for i, row := range p.ExtraA {
		if len(row) != s+i {
			return fmt.Errorf("ode: tableau %q: interpolant's extra stage %d has %d weights, want %d", t.Name, s+i, len(row), s+i)
		}
		if sum, abs := tableauSum(row); !tableauClose(sum, p.ExtraC[i], abs, tableauERKTol) {
			return fmt.Errorf("ode: tableau %q: interpolant's extra stage %d: weights sum to %v, want its node %v", t.Name, s+i, sum, p.ExtraC[i])
		}
	}
	m := p.Terms()
	for i, row := range p.R {
		if len(row) != m {
			return fmt.Errorf("ode: tableau %q: interpolant row %d has %d coefficients, want %d", t.Name, i, len(row), m)
		}
		if err := tableauCheckFinite(t.Name, fmt.Sprintf("R[%d]", i), row); err != nil {
			return err
		}
		want := 0.0
		if i < s {
			want = t.B[i]
		}
		if sum, abs := tableauSum(row); !tableauClose(sum, want, abs, tableauERKTol) {
			return fmt.Errorf("ode: tableau %q: interpolant b_%d(1) = %v, want b_%d = %v", t.Name, i, sum, i, want)
		}
	}
	for j := 0; j < m; j++ {
		col := make([]float64, len(p.R))
		for i, row := range p.R {
			col[i] = row[j]
		}
		want := 0.0
		if j == 0 {
			want = 1
		}
		if sum, abs := tableauSum(col); !tableauClose(sum, want, abs, tableauERKTol) {
			return fmt.Errorf("ode: tableau %q: interpolant's θ^%d coefficients sum to %v, want %v (Σ_i b_i(θ) = θ)", t.Name, j+1, sum, want)
		}
	}
	return nil
}

// Stages returns the number of stages of the method.
func (t *ERKTableau) Stages() int { return len(t.C) }

// FSAL reports whether the method has the first-same-as-last property: the
// last stage is evaluated at (t + h, y⁺), so on an accepted step it can serve
// as the first stage of the next step. It holds when the last row of A equals
// the first s-1 weights, the last weight is zero and the last node is 1.
func (t *ERKTableau) FSAL() bool {
	s := len(t.C)
	if s < 2 || len(t.A) != s || len(t.B) != s || len(t.A[s-1]) != s-1 {
		return false
	}
	if t.C[s-1] != 1 || t.B[s-1] != 0 {
		return false
	}
	for j, a := range t.A[s-1] {
		if a != t.B[j] {
			return false
		}
	}
	return true
}

// validate checks that the tableau is well formed and consistent: the lengths
// agree, every entry is finite, Σ_j A[i][j] = C[i], Σ B = 1 and Σ E = 0, each
// to tableauERKTol relative to the absolute sum of the terms. It returns a
// descriptive error for the first violation found.
func (t *ERKTableau) validate() error {
	s := len(t.C)
	if s == 0 {
		return fmt.Errorf("ode: tableau %q: no stages", t.Name)
	}
	if t.Order < 1 || t.ErrOrder < 1 {
		return fmt.Errorf("ode: tableau %q: orders must be positive, got Order %d, ErrOrder %d", t.Name, t.Order, t.ErrOrder)
	}
	if len(t.A) != s || len(t.B) != s || len(t.E) != s {
		return fmt.Errorf("ode: tableau %q: len(C) = %d but len(A) = %d, len(B) = %d, len(E) = %d", t.Name, s, len(t.A), len(t.B), len(t.E))
	}
	if err := tableauCheckFinite(t.Name, "C", t.C); err != nil {
		return err
	}
	if err := tableauCheckFinite(t.Name, "B", t.B); err != nil {
		return err
	}
	if err := tableauCheckFinite(t.Name, "E", t.E); err != nil {
		return err
	}
	if t.C[0] != 0 {
		return fmt.Errorf("ode: tableau %q: explicit method needs C[0] = 0, got %v", t.Name, t.C[0])
	}
	for i, row := range t.A {
		if len(row) != i {
			return fmt.Errorf("ode: tableau %q: A[%d] has %d entries, want %d (strictly lower triangular)", t.Name, i, len(row), i)
		}
		if err := tableauCheckFinite(t.Name, fmt.Sprintf("A[%d]", i), row); err != nil {
			return err
		}
		sum, abs := tableauSum(row)
		if !tableauClose(sum, t.C[i], abs, tableauERKTol) {
			return fmt.Errorf("ode: tableau %q: row %d of A sums to %v, want C[%d] = %v", t.Name, i, sum, i, t.C[i])
		}
	}
	if sum, abs := tableauSum(t.B); !tableauClose(sum, 1, abs, tableauERKTol) {
		return fmt.Errorf("ode: tableau %q: weights B sum to %v, want 1", t.Name, sum)
	}
	if sum, abs := tableauSum(t.E); !tableauClose(sum, 0, abs, tableauERKTol) {
		return fmt.Errorf("ode: tableau %q: error weights E sum to %v, want 0", t.Name, sum)
	}
	if t.Interp != nil {
		return t.Interp.validate(t)
	}
	return nil
}

// RosenbrockTableau is a Rosenbrock (Rosenbrock–Wanner, ROW) method in the
// α/Γ form used to evaluate a step (Hairer & Wanner, Solving Ordinary
// Differential Equations II, §IV.7, in its non-autonomous form).
//
// One step of size h from (t, y) uses J = ∂f/∂y(t, y), f_t = ∂f/∂t(t, y) and
// W = I − h·γ·J, with γ = Gamma, and computes, for i = 0, …, s-1,
//
//	k_i = W⁻¹·[ h·f(t + C[i]·h, y + Σ_{j<i} Alpha[i][j]·k_j)
//	          + h·J·Σ_{j<i} GammaL[i][j]·k_j
//	          + h²·D[i]·f_t ],
//
// then
//
//	y⁺  = y + Σ_i M[i]·k_i,
//	err = Σ_i (M[i] − MHat[i])·k_i = y⁺ − ŷ⁺.
//
// The k_i already contain h (unlike ERKTableau's stages); W is factored once
// per step. Writing Γ for the lower triangular s×s matrix with diagonal γ and
// off-diagonal part GammaL (Γ_ij = γ_ij of Hairer & Wanner, j < i), the fields
// obey
//
//	C[i] = Σ_{j<i} Alpha[i][j]                       (α_i, the stage times),
//	D[i] = γ + Σ_{j<i} GammaL[i][j] = Σ_{j≤i} Γ_ij   (γ_i, the f_t weights),
//
// which make the non-autonomous method equivalent to the autonomous one
// applied to (t, y); validate checks both. With H non-nil the dense output on
// the step [t_l, t_r = t_l + h] at θ = (τ − t_l)/h ∈ [0, 1] is
//
//	y(θ) = (1−θ)·y_l + θ·(y_r + (1−θ)·(D_0 + θ·(D_1 + θ·D_2))),
//	D_r  = Σ_i H[r][i]·k_i,
//
// with y_l = y and y_r = y⁺.
//
// Published tableaus usually come in the transformed (a, C) form of Hairer &
// Wanner, whose stage variables are u = Γ·k; see rosenbrockACForm for the
// conversion (Γ⁻¹ = I/γ − C, Alpha = a·Γ, M = b·Γ, H = H_u·Γ).
type RosenbrockTableau struct {
	// Name is the conventional name of the method, such as "Rodas5P".
	Name string
	// Order is the order of the solution y⁺ and ErrOrder the order of the
	// embedded solution ŷ⁺. The error estimate is O(h^(ErrOrder+1)).
	Order, ErrOrder int

	// Gamma is the diagonal entry γ of Γ; W = I − h·γ·J.
	Gamma float64
	// Alpha is the strictly lower triangular matrix α: Alpha[i] holds the i
	// entries α_i0, …, α_i(i-1) that combine the k_j into the argument of f.
	Alpha [][]float64
	// GammaL is the strictly lower triangular part of Γ: GammaL[i] holds
	// Γ_i0, …, Γ_i(i-1), the weights of the k_j in the h·J·Σ Γ_ij·k_j term.
	// The diagonal γ is not stored here; it is Gamma, moved into W.
	GammaL [][]float64
	// C holds the nodes c_i = Σ_j α_ij: stage i evaluates f at t + C[i]·h.
	C []float64
	// D holds the f_t weights d_i = γ + Σ_{j<i} Γ_ij, the full row sums of
	// Γ including its diagonal: stage i adds h²·D[i]·f_t.
	D []float64
	// M holds the solution weights and MHat the embedded weights, both
	// applied to the k_i (which include h).
	M, MHat []float64
	// H holds the dense-output rows (3×s for Rodas5P) applied to the k_i, or
	// nil if the method has no continuous extension.
	H [][]float64
}

// Stages returns the number of stages of the method.
func (t *RosenbrockTableau) Stages() int { return len(t.C) }

// validate checks that the tableau is well formed and consistent: the lengths
// agree, every entry is finite, γ > 0, Σ_j Alpha[i][j] = C[i],
// γ + Σ_j GammaL[i][j] = D[i], Σ M = 1, Σ MHat = 1, and every dense-output
// row sums to 0 (so that the interpolant reproduces y(θ) = y_l + θ·h·f for
// constant f). Each sum is checked to tableauRosenbrockTol relative to the absolute
// sum of its terms. It returns a descriptive error for the first violation.
func (t *RosenbrockTableau) validate() error {
	s := len(t.C)
	if s == 0 {
		return fmt.Errorf("ode: tableau %q: no stages", t.Name)
	}
	if t.Order < 1 || t.ErrOrder < 1 {
		return fmt.Errorf("ode: tableau %q: orders must be positive, got Order %d, ErrOrder %d", t.Name, t.Order, t.ErrOrder)
	}
	if !(t.Gamma > 0) || math.IsInf(t.Gamma, 0) {
		return fmt.Errorf("ode: tableau %q: Gamma must be positive and finite, got %v", t.Name, t.Gamma)
	}
	if len(t.Alpha) != s || len(t.GammaL) != s || len(t.D) != s || len(t.M) != s || len(t.MHat) != s {
		return fmt.Errorf("ode: tableau %q: len(C) = %d but len(Alpha) = %d, len(GammaL) = %d, len(D) = %d, len(M) = %d, len(MHat) = %d",
			t.Name, s, len(t.Alpha), len(t.GammaL), len(t.D), len(t.M), len(t.MHat))
	}
	for _, v := range []struct {
		name string
		x    []float64
	}{{"C", t.C}, {"D", t.D}, {"M", t.M}, {"MHat", t.MHat}} {
		if err := tableauCheckFinite(t.Name, v.name, v.x); err != nil {
			return err
		}
	}
	for i := range s {
		if len(t.Alpha[i]) != i || len(t.GammaL[i]) != i {
			return fmt.Errorf("ode: tableau %q: Alpha[%d] and GammaL[%d] have %d and %d entries, want %d (strictly lower triangular)",
				t.Name, i, i, len(t.Alpha[i]), len(t.GammaL[i]), i)
		}
		if err := tableauCheckFinite(t.Name, fmt.Sprintf("Alpha[%d]", i), t.Alpha[i]); err != nil {
			return err
		}
		if err := tableauCheckFinite(t.Name, fmt.Sprintf("GammaL[%d]", i), t.GammaL[i]); err != nil {
			return err
		}
		sum, abs := tableauSum(t.Alpha[i])
		if !tableauClose(sum, t.C[i], abs, tableauRosenbrockTol) {
			return fmt.Errorf("ode: tableau %q: row %d of Alpha sums to %v, want C[%d] = %v", t.Name, i, sum, i, t.C[i])
		}
		sum, abs = tableauSum(t.GammaL[i])
		if d := t.Gamma + sum; !tableauClose(d, t.D[i], abs+t.Gamma, tableauRosenbrockTol) {
			return fmt.Errorf("ode: tableau %q: Gamma + Σ GammaL[%d] = %v, want D[%d] = %v", t.Name, i, d, i, t.D[i])
		}
	}
	if sum, abs := tableauSum(t.M); !tableauClose(sum, 1, abs, tableauRosenbrockTol) {
		return fmt.Errorf("ode: tableau %q: weights M sum to %v, want 1", t.Name, sum)
	}
	if sum, abs := tableauSum(t.MHat); !tableauClose(sum, 1, abs, tableauRosenbrockTol) {
		return fmt.Errorf("ode: tableau %q: embedded weights MHat sum to %v, want 1", t.Name, sum)
	}
	for r, row := range t.H {
		if len(row) != s {
			return fmt.Errorf("ode: tableau %q: H[%d] has %d entries, want %d", t.Name, r, len(row), s)
		}
		if err := tableauCheckFinite(t.Name, fmt.Sprintf("H[%d]", r), row); err != nil {
			return err
		}
		if sum, abs := tableauSum(row); !tableauClose(sum, 0, abs, tableauRosenbrockTol) {
			return fmt.Errorf("ode: tableau %q: dense-output row H[%d] sums to %v, want 0", t.Name, r, sum)
		}
	}
	return nil
}

// rosenbrockACForm is a Rosenbrock method in the transformed (a, C) form in
// which Hairer & Wanner's RODAS and OrdinaryDiffEq.jl's RodasTableau (and
// diffrax's RosenbrockTableau) publish their coefficients. Its stage
// variables are u_i = Σ_{j≤i} Γ_ij·k_j, solved from
//
//	(I/(h·γ) − J)·u_i = f(t + c_i·h, y + Σ_{j<i} a_ij·u_j)
//	                   + Σ_{j<i} (C_ij/h)·u_j + h·d_i·f_t,
//
// with y⁺ = y + Σ b_i·u_i, ŷ⁺ = y + Σ b̂_i·u_i and dense-output rows
// D_r = Σ_i H_ri·u_i. Here C = I/γ − Γ⁻¹ (strictly lower) and d_i = Σ_{j≤i}
// Γ_ij. Substituting u = Γ·k and multiplying by h turns these equations into
// the α/Γ form of RosenbrockTableau; alphaGamma does the conversion.
type rosenbrockACForm struct {
	Name            string
	Order, ErrOrder int
	Gamma           float64
	// A and C are strictly lower triangular: A[i] and C[i] have i entries.
	A, C [][]float64
	// Nodes are the c_i (stage times) and D the d_i (f_t weights), as
	// published; they are copied to the α/Γ form, not recomputed.
	Nodes, D []float64
	// B and BHat are the solution and embedded weights on the u_i.
	B, BHat []float64
	// H are the dense-output rows on the u_i, or nil.
	H [][]float64
}

// alphaGamma converts f to the α/Γ form of RosenbrockTableau:
//
//	Γ = (I/γ − C)⁻¹,  α = a·Γ,  M = b·Γ,  MHat = b̂·Γ,  H_k = H_u·Γ,
//
// because Σ_j a_ij·u_j = Σ_j (a·Γ)_ij·k_j and so on. C and D are copied from
// Nodes and D. The arithmetic is done in 256-bit floating point and rounded
// once, so the result is the correctly rounded transform of the published
// float64 coefficients. alphaGamma panics if the shapes are inconsistent; it
// does not validate the result.
func (f *rosenbrockACForm) alphaGamma() *RosenbrockTableau {
	s := len(f.Nodes)
	if len(f.A) != s || len(f.C) != s || len(f.D) != s || len(f.B) != s || len(f.BHat) != s {
		panic("ode: inconsistent Rosenbrock (a, C) tableau shapes")
	}
	const prec = 256
	newF := func(x float64) *big.Float { return new(big.Float).SetPrec(prec).SetFloat64(x) }
	zero := func() *big.Float { return new(big.Float).SetPrec(prec) }
	gamma := newF(f.Gamma)

	// Γ is lower triangular with diagonal γ. From (I/γ − C)·Γ = I, row i:
	// Γ_ij/γ − Σ_{j≤k<i} C_ik·Γ_kj = 0 for j < i.
	g := make([][]*big.Float, s)
	for i := range s {
		if len(f.A[i]) != i || len(f.C[i]) != i {
			panic("ode: Rosenbrock (a, C) tableau is not strictly lower triangular")
		}
		g[i] = make([]*big.Float, i+1)
		g[i][i] = gamma
		for j := 0; j < i; j++ {
			sum := zero()
			for k := j; k < i; k++ {
				sum.Add(sum, zero().Mul(newF(f.C[i][k]), g[k][j]))
			}
			g[i][j] = sum.Mul(sum, gamma)
		}
	}
	// rowTimesGamma returns v·Γ for a row vector v of length n ≤ s whose
	// entries beyond n are zero: (v·Γ)_j = Σ_{k≥j} v_k·Γ_kj.
	rowTimesGamma := func(v []float64, n int) []float64 {
		out := make([]float64, n)
		for j := range n {
			sum := zero()
			for k := j; k < len(v); k++ {
				sum.Add(sum, zero().Mul(newF(v[k]), g[k][j]))
			}
			out[j], _ = sum.Float64()
		}
		return out
	}

	t := &RosenbrockTableau{
		Name:     f.Name,
		Order:    f.Order,
		ErrOrder: f.ErrOrder,
		Gamma:    f.Gamma,
		Alpha:    make([][]float64, s),
		GammaL:   make([][]float64, s),
		C:        append([]float64(nil), f.Nodes...),
		D:        append([]float64(nil), f.D...),
		M:        rowTimesGamma(f.B, s),
		MHat:     rowTimesGamma(f.BHat, s),
	}
	for i := range s {
		// α_ij = Σ_{j≤k<i} a_ik·Γ_kj: a's row i has entries up to i-1.
		t.Alpha[i] = rowTimesGamma(f.A[i], i)
		t.GammaL[i] = make([]float64, i)
		for j := 0; j < i; j++ {
			t.GammaL[i][j], _ = g[i][j].Float64()
		}
	}
	if f.H != nil {
		t.H = make([][]float64, len(f.H))
		for r, row := range f.H {
			if len(row) != s {
				panic("ode: Rosenbrock (a, C) tableau has a dense-output row of the wrong length")
			}
			t.H[r] = rowTimesGamma(row, s)
		}
	}
	return t
}

// tableauCheckFinite returns an error naming the first NaN or infinite entry of x.
func tableauCheckFinite(tableau, field string, x []float64) error {
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("ode: tableau %q: %s[%d] is %v", tableau, field, i, v)
		}
	}
	return nil
}

// tableauSum returns the sum of x, computed with Neumaier's compensated
// summation, and the sum of the absolute values of x.
func tableauSum(x []float64) (sum, abs float64) {
	var comp float64
	for _, v := range x {
		t := sum + v
		if math.Abs(sum) >= math.Abs(v) {
			comp += (sum - t) + v
		} else {
			comp += (v - t) + sum
		}
		sum = t
		abs += math.Abs(v)
	}
	return sum + comp, abs
}

// tableauClose reports whether |got − want| ≤ tol·max(1, scale).
func tableauClose(got, want, scale, tol float64) bool {
	return math.Abs(got-want) <= tol*math.Max(1, scale)
}
