package ode

import (
	"math"
	"strings"
	"testing"
)

// This file checks the method coefficient tables: their algebraic identities
// and order conditions, their transcription against independent sources, and
// the order of plain float64 steps built from them on non-autonomous fields.
// The steps here are deliberately naive test oracles, not the package's
// integrators.

func TestTableauValidate(t *testing.T) {
	t.Parallel()
	for _, tab := range []*ERKTableau{tsit5Tableau, vern7Tableau} {
		if err := tab.validate(); err != nil {
			t.Errorf("Case %v: unexpected error: %v", tab.Name, err)
		}
	}
	if err := rodas5PTableau.validate(); err != nil {
		t.Errorf("Case %v: unexpected error: %v", rodas5PTableau.Name, err)
	}
}

func TestTableauValidateRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		modify func(*ERKTableau)
		want   string
	}{
		{"empty", func(t *ERKTableau) { *t = ERKTableau{Name: "x", Order: 1, ErrOrder: 1} }, "no stages"},
		{"zero order", func(t *ERKTableau) { t.ErrOrder = 0 }, "orders must be positive"},
		{"short B", func(t *ERKTableau) { t.B = t.B[:3] }, "len(B) = 3"},
		{"ragged A", func(t *ERKTableau) { t.A[3] = t.A[3][:2] }, "A[3] has 2 entries"},
		{"nonzero c0", func(t *ERKTableau) { t.C[0] = 0.1 }, "C[0] = 0"},
		{"row sum", func(t *ERKTableau) { t.A[4][1] += 1e-12 }, "row 4 of A sums to"},
		{"node", func(t *ERKTableau) { t.C[2] += 1e-12 }, "want C[2]"},
		{"weights", func(t *ERKTableau) { t.B[0] += 1e-13 }, "weights B sum to"},
		{"error weights", func(t *ERKTableau) { t.E[6] += 1e-13 }, "error weights E sum to"},
		{"NaN", func(t *ERKTableau) { t.A[5][2] = math.NaN() }, "A[5][2] is NaN"},
		{"Inf", func(t *ERKTableau) { t.E[1] = math.Inf(-1) }, "E[1] is -Inf"},
	} {
		tab := tabCopyERK(tsit5Tableau)
		tc.modify(tab)
		err := tab.validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Case %v: want error containing %q, got %v", tc.name, tc.want, err)
		}
	}
	if err := tsit5Tableau.validate(); err != nil {
		t.Errorf("Case tsit5 after mutations: tableau was modified: %v", err)
	}
}

func TestRosenbrockValidateRejects(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		modify func(*RosenbrockTableau)
		want   string
	}{
		{"gamma", func(t *RosenbrockTableau) { t.Gamma = 0 }, "Gamma must be positive"},
		{"short MHat", func(t *RosenbrockTableau) { t.MHat = t.MHat[1:] }, "len(MHat) = 7"},
		{"ragged GammaL", func(t *RosenbrockTableau) { t.GammaL[2] = t.GammaL[2][:1] }, "GammaL[2] have 2 and 1 entries"},
		{"alpha row", func(t *RosenbrockTableau) { t.Alpha[3][0] += 1e-9 }, "row 3 of Alpha sums to"},
		{"D", func(t *RosenbrockTableau) { t.D[4] += 1e-9 }, "want D[4]"},
		{"D without the diagonal γ", func(t *RosenbrockTableau) { t.D[2] -= t.Gamma }, "want D[2]"},
		{"M", func(t *RosenbrockTableau) { t.M[7] += 1e-9 }, "weights M sum to"},
		{"MHat", func(t *RosenbrockTableau) { t.MHat[0] += 1e-9 }, "embedded weights MHat sum to"},
		{"H row length", func(t *RosenbrockTableau) { t.H[1] = t.H[1][:7] }, "H[1] has 7 entries"},
		{"H row sum", func(t *RosenbrockTableau) { t.H[2][3] += 1e-7 }, "H[2] sums to"},
		{"NaN", func(t *RosenbrockTableau) { t.GammaL[6][5] = math.NaN() }, "GammaL[6][5] is NaN"},
	} {
		tab := tabCopyRosenbrock(rodas5PTableau)
		tc.modify(tab)
		err := tab.validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Case %v: want error containing %q, got %v", tc.name, tc.want, err)
		}
	}
	if err := rodas5PTableau.validate(); err != nil {
		t.Errorf("Case rodas5P after mutations: tableau was modified: %v", err)
	}
}

func TestTableauFSAL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tab  *ERKTableau
		want bool
	}{
		{tsit5Tableau, true},
		{vern7Tableau, false},
	} {
		if got := tc.tab.FSAL(); got != tc.want {
			t.Errorf("Case %v: FSAL want %v, got %v", tc.tab.Name, tc.want, got)
		}
	}
	for _, tc := range []struct {
		name   string
		modify func(*ERKTableau)
	}{
		{"last node", func(t *ERKTableau) { t.C[6] = 0.99 }},
		{"last weight", func(t *ERKTableau) { t.B[6] = 1e-300 }},
		{"last row", func(t *ERKTableau) { t.A[6][3] = math.Nextafter(t.A[6][3], 0) }},
	} {
		tab := tabCopyERK(tsit5Tableau)
		tc.modify(tab)
		if tab.FSAL() {
			t.Errorf("Case %v: FSAL want false, got true", tc.name)
		}
	}
}

func TestTableauStages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		got, want  int
		order, err int
		wantOrders [2]int
	}{
		{"Tsit5", tsit5Tableau.Stages(), 7, tsit5Tableau.Order, tsit5Tableau.ErrOrder, [2]int{5, 4}},
		{"Vern7", vern7Tableau.Stages(), 10, vern7Tableau.Order, vern7Tableau.ErrOrder, [2]int{7, 6}},
		{"Rodas5P", rodas5PTableau.Stages(), 8, rodas5PTableau.Order, rodas5PTableau.ErrOrder, [2]int{5, 4}},
	} {
		if tc.got != tc.want {
			t.Errorf("Case %v: Stages want %v, got %v", tc.name, tc.want, tc.got)
		}
		if [2]int{tc.order, tc.err} != tc.wantOrders {
			t.Errorf("Case %v: (Order, ErrOrder) want %v, got %v", tc.name, tc.wantOrders, [2]int{tc.order, tc.err})
		}
	}
}

// TestTableauTsit5Coefficients checks sentinels from the paper and compares
// the error weights with the float64 btilde of OrdinaryDiffEq.jl (a second,
// independently written source), where btilde = b̂ − b = −E.
func TestTableauTsit5Coefficients(t *testing.T) {
	t.Parallel()
	tab := tsit5Tableau
	wantC := []float64{0, 0.161, 0.327, 0.9, 0.9800255409045097, 1, 1}
	for i, want := range wantC {
		if tab.C[i] != want {
			t.Errorf("Case C[%d]: want %v, got %v", i, want, tab.C[i])
		}
	}
	if tab.B[6] != 0 {
		t.Errorf("Case B[6]: want 0, got %v", tab.B[6])
	}
	if want := -1.0 / 66; tab.E[6] != want {
		t.Errorf("Case E[6]: want %v, got %v", want, tab.E[6])
	}
	if tab.A[6][1] != 0.01 || tab.B[1] != 0.01 {
		t.Errorf("Case a72 = b2: want 0.01, got %v and %v", tab.A[6][1], tab.B[1])
	}
	juliaBTilde := []float64{
		-0.00178001105222577714, -0.0008164344596567469, 0.007880878010261995,
		-0.1447110071732629, 0.5823571654525552, -0.45808210592918697, 0.015151515151515152,
	}
	for i, bt := range juliaBTilde {
		if d := math.Abs(tab.E[i] + bt); d > 1e-15 {
			t.Errorf("Case E[%d] vs OrdinaryDiffEq.jl: want %v, got %v (diff %v)", i, -bt, tab.E[i], d)
		}
	}
	// Float64 literals of OrdinaryDiffEq.jl's Tsit5ConstantCacheActual.
	juliaA := [][]float64{
		{},
		{0.161},
		{-0.008480655492356989, 0.335480655492357},
		{2.8971530571054935, -6.359448489975075, 4.3622954328695815},
		{5.325864828439257, -11.748883564062828, 7.4955393428898365, -0.09249506636175525},
		{5.86145544294642, -12.92096931784711, 8.159367898576159, -0.071584973281401, -0.028269050394068383},
		{0.09646076681806523, 0.01, 0.4798896504144996, 1.379008574103742, -3.290069515436081, 2.324710524099774},
	}
	for i, row := range juliaA {
		for j, want := range row {
			if d := math.Abs(tab.A[i][j] - want); d > 1e-15*math.Max(1, math.Abs(want)) {
				t.Errorf("Case A[%d][%d] vs OrdinaryDiffEq.jl: want %v, got %v", i, j, want, tab.A[i][j])
			}
		}
	}
}

// TestTableauVern7Coefficients checks node consistency, the linear order
// conditions and sentinels against the exact rationals of Verner's tableau.
func TestTableauVern7Coefficients(t *testing.T) {
	t.Parallel()
	tab := vern7Tableau
	for i, row := range tab.A {
		sum, _ := tableauSum(row)
		if d := math.Abs(sum - tab.C[i]); d > 1e-13 {
			t.Errorf("Case node %d: Σ_j a_ij want %v, got %v", i+1, tab.C[i], sum)
		}
	}
	bhat := make([]float64, len(tab.B))
	for i := range bhat {
		bhat[i] = tab.B[i] - tab.E[i]
	}
	// Quadrature conditions Σ b_i c_i^(k-1) = 1/k and the tall trees
	// b·A^(k-1)·1 = 1/k!, through k = 7 for b and k = 6 for b̂.
	for _, tc := range []struct {
		name     string
		w        []float64
		maxOrder int
	}{
		{"b", tab.B, 7},
		{"bhat", bhat, 6},
	} {
		v := tabOnes(len(tab.C))
		fact := 1.0
		for k := 1; k <= tc.maxOrder; k++ {
			fact *= float64(k)
			var quad float64
			for i, w := range tc.w {
				quad += w * math.Pow(tab.C[i], float64(k-1))
			}
			if d := math.Abs(quad - 1/float64(k)); d > 1e-14 {
				t.Errorf("Case %v, k=%d: Σ w c^(k-1) want %v, got %v", tc.name, k, 1/float64(k), quad)
			}
			if k > 1 {
				v = tabMatVec(tab.A, v)
			}
			if got := tabDot(tc.w, v); math.Abs(got-1/fact) > 1e-14 {
				t.Errorf("Case %v, k=%d: w·A^(k-1)·1 want %v, got %v", tc.name, k, 1/fact, got)
			}
		}
	}
	// The embedded method must not be of order 7.
	var quad7 float64
	for i, w := range bhat {
		quad7 += w * math.Pow(tab.C[i], 6)
	}
	if d := math.Abs(quad7 - 1.0/7); d < 1e-6 {
		t.Errorf("Case bhat, k=7: Σ b̂ c^6 unexpectedly equals 1/7 (diff %v)", d)
	}
	// Sentinels: the compiler rounds these exact rationals (from the same
	// source file) once, so they must equal the decimal literals bit for bit
	// or within one ulp.
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"c6", tab.C[5], 3480084980.0 / 5709648941},
		{"a021", tab.A[1][0], 1.0 / 200},
		{"a031", tab.A[2][0], -4361.0 / 4050},
		{"a096", tab.A[8][5], 273847823027445129865693702689010278588244606493753883568739168819449761.0 / 136252034448398939768371761610231099586032870552034688235302796640584360},
		{"a103", tab.A[9][2], 2822037469238841750.0 / 15064746656776439},
		{"a106", tab.A[9][5], -6259648732772142303029374363607629515525848829303541906422993.0 / 876479353814142962817551241844706205620792843316435566420120},
		{"b6", tab.B[5], 72367769693133178898676076432831566019684378142853445230956642801.0 / 475600216991873963561768100160364792981629064220601844848928537580},
		{"b8", tab.B[7], -66898316144057728000.0 / 227310933007074849597},
		{"btilde6", tab.E[5], -3171408959554499061315206389277085667739969057641653677018211151.0 / 47560021699187396356176810016036479298162906422060184484892853758},
		{"btilde10", tab.E[9], -2152106665253777.0 / 106040260335225546},
	} {
		if math.Abs(tc.got-tc.want) > math.Abs(math.Nextafter(tc.want, math.Inf(1))-tc.want) {
			t.Errorf("Case %v: want %v, got %v", tc.name, tc.want, tc.got)
		}
	}
	for _, tc := range []struct {
		name string
		got  float64
	}{
		{"a042", tab.A[3][1]}, {"a102", tab.A[9][1]}, {"a108", tab.A[9][7]}, {"a109", tab.A[9][8]},
		{"b2", tab.B[1]}, {"b3", tab.B[2]}, {"b10", tab.B[9]}, {"E2", tab.E[1]}, {"E3", tab.E[2]},
	} {
		if tc.got != 0 {
			t.Errorf("Case %v: want 0, got %v", tc.name, tc.got)
		}
	}
}

// TestTableauOrderConditions checks Butcher's order conditions
// Σ_i w_i·Φ_i(τ) = 1/γ(τ) for every rooted tree τ up to the order of the
// solution weights, and up to the order of the embedded weights (which must
// fail at the next order).
func TestTableauOrderConditions(t *testing.T) {
	t.Parallel()
	trees := tabRootedTrees(8)
	counts := make([]int, 9)
	for _, tr := range trees {
		counts[tr.order]++
	}
	if want := []int{0, 1, 1, 2, 4, 9, 20, 48, 115}; !tabEqualInts(counts, want) {
		t.Fatalf("Case tree census: want %v, got %v", want, counts)
	}
	for _, tc := range []struct {
		tab *ERKTableau
		tol float64
	}{
		{tsit5Tableau, 1e-14},
		{vern7Tableau, 1e-13},
	} {
		tab := tc.tab
		bhat := make([]float64, len(tab.B))
		for i := range bhat {
			bhat[i] = tab.B[i] - tab.E[i]
		}
		phi := tabElementaryWeights(trees, len(tab.C), func(tr tabRootedTree, v []float64) []float64 {
			return tabMatVec(tab.A, v)
		})
		tabCheckTreeConditions(t, tab.Name+" b", trees, phi, tab.B, 1, tab.Order, tc.tol)
		tabCheckTreeConditions(t, tab.Name+" bhat", trees, phi, bhat, 1, tab.ErrOrder, tc.tol)
	}
}

// TestRosenbrockOrderConditions checks the order conditions of Rodas5P in the
// α/Γ form (Hairer & Wanner II, §IV.7): a vertex with exactly one child
// reaches it through β = α + Γ (Γ with its diagonal γ), a vertex with several
// children through α. M must satisfy them through order 5, MHat through order
// 4 only, and the dense output weights b_i(θ) = θ·M_i + θ(1−θ)·(H_0i +
// θ·H_1i + θ²·H_2i) must satisfy Σ b_i(θ)·Φ_i(τ) = θ^|τ|/γ(τ) through order
// 4.
func TestRosenbrockOrderConditions(t *testing.T) {
	t.Parallel()
	tab := rodas5PTableau
	s := tab.Stages()
	trees := tabRootedTrees(6)
	beta := tabRosenbrockBeta(tab)
	alpha := tabLowerToDense(tab.Alpha, s, 0)
	phi := tabElementaryWeights(trees, s, func(tr tabRootedTree, v []float64) []float64 {
		if len(tr.children) == 1 {
			return tabMatVec(beta, v)
		}
		return tabMatVec(alpha, v)
	})
	const tol = 1e-12
	tabCheckTreeConditions(t, "Rodas5P M", trees, phi, tab.M, 1, 5, tol)
	tabCheckTreeConditions(t, "Rodas5P MHat", trees, phi, tab.MHat, 1, 4, tol)

	// diffrax's m_sol, (a_6·, 1, 1, 0) on u, is our MHat: the conditions
	// above already show it to be of order 4 only. The stability function
	// R(z) = 1 + Σ_k z^k·w·β^(k-1)·1 (the tall trees) must match exp(z)
	// through z⁵ for M (Rodas5P's in fact matches through z⁶) and break at
	// z⁵ for MHat.
	for _, tc := range []struct {
		name           string
		w              []float64
		match, breakAt int
	}{
		{"M", tab.M, 6, 0},
		{"MHat", tab.MHat, 4, 5},
	} {
		v := tabOnes(s)
		fact := 1.0
		for k := 1; k <= 6; k++ {
			fact *= float64(k)
			got := tabDot(tc.w, v)
			ok := math.Abs(got-1/fact) <= tol
			if k <= tc.match && !ok {
				t.Errorf("Case R(z) %v, z^%d: want %v, got %v", tc.name, k, 1/fact, got)
			}
			if k == tc.breakAt && ok {
				t.Errorf("Case R(z) %v, z^%d: unexpectedly matches exp(z) (%v)", tc.name, k, got)
			}
			v = tabMatVec(beta, v)
		}
	}

	for _, theta := range []float64{0.2, 0.5, 0.9} {
		w := tabRodas5PDenseWeights(tab, theta)
		tabCheckTreeConditions(t, "Rodas5P dense", trees, phi, w, theta, 4, tol)
	}
}

// TestRosenbrockRodas5PConversion checks the conversion from the published
// (a, C) form to the α/Γ form.
func TestRosenbrockRodas5PConversion(t *testing.T) {
	t.Parallel()
	tab, src := rodas5PTableau, rodas5PStored
	s := tab.Stages()
	const tol = 1e-11
	// Row sums, D including the diagonal γ.
	for i := range s {
		if got, _ := tableauSum(tab.Alpha[i]); math.Abs(got-tab.C[i]) > tol {
			t.Errorf("Case Σα row %d: want c = %v, got %v", i, tab.C[i], got)
		}
		sum, _ := tableauSum(tab.GammaL[i])
		if got := tab.Gamma + sum; math.Abs(got-tab.D[i]) > tol {
			t.Errorf("Case ΣΓ row %d: want d = %v, got %v", i, tab.D[i], got)
		}
	}
	// Γ·(I/γ − C) = I.
	gam := tabLowerToDense(tab.GammaL, s, tab.Gamma)
	inv := tabLowerToDense(src.C, s, 0)
	for i := range s {
		for j := range s {
			inv[i][j] = -inv[i][j]
		}
		inv[i][i] = 1 / src.Gamma
	}
	for i := range s {
		for j := range s {
			var got float64
			for k := range s {
				got += gam[i][k] * inv[k][j]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(got-want) > tol {
				t.Errorf("Case Γ·(I/γ − C)[%d][%d]: want %v, got %v", i, j, want, got)
			}
		}
	}
	// Weight sums, and the dense-output rows sum to zero (H·d = 0 on u, so
	// that Σ_i b_i(θ) = θ).
	for _, tc := range []struct {
		name string
		w    []float64
		want float64
	}{
		{"ΣM", tab.M, 1}, {"ΣMHat", tab.MHat, 1},
		{"ΣH[0]", tab.H[0], 0}, {"ΣH[1]", tab.H[1], 0}, {"ΣH[2]", tab.H[2], 0},
	} {
		if got, _ := tableauSum(tc.w); math.Abs(got-tc.want) > tol {
			t.Errorf("Case %v: want %v, got %v", tc.name, tc.want, got)
		}
	}
	for r, row := range src.H {
		if got := tabDot(row, src.D); math.Abs(got) > tol {
			t.Errorf("Case H_u·d row %d: want 0, got %v", r, got)
		}
	}
	// Stiff accuracy: y⁺ = (argument of stage 8) + u_8, so M_j = α_8j + Γ_8j,
	// M_8 = γ; the embedded solution is the argument of stage 8, MHat_j =
	// α_8j, MHat_8 = 0; hence the error estimate is u_8.
	for j := 0; j < s-1; j++ {
		if want := tab.Alpha[s-1][j] + tab.GammaL[s-1][j]; math.Abs(tab.M[j]-want) > tol {
			t.Errorf("Case stiffly accurate M[%d]: want %v, got %v", j, want, tab.M[j])
		}
		if want := tab.Alpha[s-1][j]; math.Abs(tab.MHat[j]-want) > tol {
			t.Errorf("Case embedded MHat[%d]: want %v, got %v", j, want, tab.MHat[j])
		}
	}
	if tab.M[s-1] != tab.Gamma || tab.MHat[s-1] != 0 {
		t.Errorf("Case last weights: want (γ, 0) = (%v, 0), got (%v, %v)", tab.Gamma, tab.M[s-1], tab.MHat[s-1])
	}
	// Sentinels: exact literals of the source, and simple consequences of
	// the conversion (α_21 = a_21·γ = 3γ = c_2; Γ_21 = d_2 − γ = −3γ).
	for _, tc := range []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"gamma", tab.Gamma, 0.21193756319429014, 0},
		{"c2", tab.C[1], 0.6358126895828704, 0},
		{"c5", tab.C[4], 0.4288403609558664, 0},
		{"d4", tab.D[3], 1.8046452872882734, 0},
		{"d5", tab.D[4], 2.325825639765069, 0},
		{"a21", src.A[1][0], 3, 0},
		{"a65", src.A[5][4], 0.030198172008377946, 0},
		{"C87", src.C[7][6], -9.48861652309627, 0},
		{"C41", src.C[3][0], 147.12150275711716, 0},
		{"H_u[2][3]", src.H[2][3], 80.12511834622643, 0},
		{"α21 = 3γ", tab.Alpha[1][0], 3 * 0.21193756319429014, 1e-15},
		{"Γ21 = −3γ", tab.GammaL[1][0], -3 * 0.21193756319429014, 1e-15},
		// Converted values, computed independently from the stored form with
		// 50-digit arithmetic (mpmath) and rounded to 20 digits.
		{"α43", tab.Alpha[3][2], -2.1954603902496502204, 4e-16},
		{"α83", tab.Alpha[7][2], 1.525941760806278059, 4e-16},
		{"α87 = γ", tab.Alpha[7][6], 0.21193756319429013502, 4e-16},
		{"Γ32", tab.GammaL[2][1], -0.12845036137023835543, 4e-16},
		{"Γ87", tab.GammaL[7][6], -0.42620522390775709567, 4e-16},
		{"M1", tab.M[0], 0.12236007991300805349, 4e-16},
		{"M3", tab.M[2], 1.3238392208663682797, 4e-16},
		{"MHat6", tab.MHat[5], -1.049703485919803033, 4e-16},
		{"H[0][0]", tab.H[0][0], 0.82327449168051049966, 4e-16},
		{"H[2][3]", tab.H[2][3], 14.112585514422288543, 4e-15},
	} {
		if math.Abs(tc.got-tc.want) > tc.tol {
			t.Errorf("Case %v: want %v, got %v", tc.name, tc.want, tc.got)
		}
	}
	// One step in the (a, C) form on u and one in the α/Γ form on k agree
	// to round-off.
	for _, fld := range tabFields() {
		for _, h := range []float64{0.3, 0.01} {
			k := tabRosenbrockStep(tab, fld, fld.t0, fld.y0, h)
			u := tabRosenbrockACStep(src, fld, fld.t0, fld.y0, h)
			for i := range fld.y0 {
				for _, c := range []struct {
					name      string
					got, want float64
				}{{"y⁺", k.y[i], u.y[i]}, {"err", k.y[i] - k.yhat[i], u.y[i] - u.yhat[i]}} {
					if d := math.Abs(c.got - c.want); d > 1e-14*math.Max(1, math.Abs(c.want)) {
						t.Errorf("Case %v, h=%v, %v[%d]: (a, C) step want %v, α/Γ step got %v (diff %v)", fld.name, h, c.name, i, c.want, c.got, d)
					}
				}
			}
		}
	}
}

// The order tests below measure the error of one step from (t0, y0) against
// a reference solution for h = 2^-k, and fit the slope of log2(error)
// against log2(h) by least squares. The ranges of k are chosen, per method,
// inside the asymptotic regime and above round-off (the errors at the
// smallest fitted h stay above about 1e-12), and the accepted intervals allow for
// the remaining pre-asymptotic drift; the measured slopes are logged.

func TestTableauTsit5Order(t *testing.T) {
	t.Parallel()
	for _, fld := range tabFields() {
		var errs, ests []float64
		hs := tabPowersOfTwo(-3, -7)
		for _, h := range hs {
			y, est := tabERKStep(tsit5Tableau, fld, fld.t0, fld.y0, h)
			ref := tabReferenceSolution(fld, fld.t0, fld.y0, h)
			errs = append(errs, tabMaxAbsDiff(y, ref))
			ests = append(ests, tabMaxAbs(est))
		}
		// The local error reaches round-off at h = 2⁻⁷.
		tabCheckSlope(t, "Tsit5 local error, "+fld.name, hs[:4], errs[:4], 5.6, 6.7)
		tabCheckSlope(t, "Tsit5 error estimate, "+fld.name, hs, ests, 4.7, 5.3)
	}
}

func TestTableauVern7Order(t *testing.T) {
	t.Parallel()
	for _, fld := range tabFields() {
		var errs, ests []float64
		hs := tabPowersOfTwo(-2, -5)
		for _, h := range hs {
			y, est := tabERKStep(vern7Tableau, fld, fld.t0, fld.y0, h)
			ref := tabReferenceSolution(fld, fld.t0, fld.y0, h)
			errs = append(errs, tabMaxAbsDiff(y, ref))
			ests = append(ests, tabMaxAbs(est))
		}
		// The local error reaches round-off at h = 2⁻⁵.
		tabCheckSlope(t, "Vern7 local error, "+fld.name, hs[:3], errs[:3], 7.6, 8.7)
		tabCheckSlope(t, "Vern7 error estimate, "+fld.name, hs, ests, 6.5, 7.5)
	}
}

// TestRosenbrockRodas5POrder measures the local order of one Rodas5P step in
// the α/Γ form on non-autonomous nonlinear fields: local error slope ≈ 6
// (order 5) for M; ≈ 5 (order 4) for the embedded MHat, which is diffrax's
// m_sol; and ≈ 5 for the error estimate.
func TestRosenbrockRodas5POrder(t *testing.T) {
	t.Parallel()
	for _, fld := range tabFields() {
		var errs, errsHat, ests []float64
		hs := tabPowersOfTwo(-4, -8)
		for _, h := range hs {
			st := tabRosenbrockStep(rodas5PTableau, fld, fld.t0, fld.y0, h)
			ref := tabReferenceSolution(fld, fld.t0, fld.y0, h)
			errs = append(errs, tabMaxAbsDiff(st.y, ref))
			errsHat = append(errsHat, tabMaxAbsDiff(st.yhat, ref))
			ests = append(ests, tabMaxAbsDiff(st.y, st.yhat))
		}
		// The local error of y⁺ reaches round-off at h = 2⁻⁷.
		tabCheckSlope(t, "Rodas5P local error, "+fld.name, hs[:3], errs[:3], 5.5, 6.4)
		tabCheckSlope(t, "Rodas5P embedded local error, "+fld.name, hs, errsHat, 4.6, 5.3)
		tabCheckSlope(t, "Rodas5P error estimate, "+fld.name, hs, ests, 4.6, 5.3)
	}
}

// TestRosenbrockRodas5PDense measures the local error of the dense output
// inside one step, max over θ ∈ {1/4, 1/2, 3/4} of |y(θ) − y_exact(t + θh)|:
// the interpolant satisfies the order conditions through order 4 (see
// TestRosenbrockOrderConditions), so the slope is ≈ 5. It also checks the
// endpoint identities y(0) = y and y(1) = y⁺.
func TestRosenbrockRodas5PDense(t *testing.T) {
	t.Parallel()
	for _, fld := range tabFields() {
		var errs []float64
		hs := tabPowersOfTwo(-4, -7)
		for _, h := range hs {
			st := tabRosenbrockStep(rodas5PTableau, fld, fld.t0, fld.y0, h)
			var worst float64
			for _, theta := range []float64{0.25, 0.5, 0.75} {
				ref := tabReferenceSolution(fld, fld.t0, fld.y0, theta*h)
				worst = math.Max(worst, tabMaxAbsDiff(st.dense(theta), ref))
			}
			errs = append(errs, worst)
			if d := tabMaxAbsDiff(st.dense(0), fld.y0); d != 0 {
				t.Errorf("Case %v, h=%v: dense(0) want y, got diff %v", fld.name, h, d)
			}
			if d := tabMaxAbsDiff(st.dense(1), st.y); d > 1e-15 {
				t.Errorf("Case %v, h=%v: dense(1) want y⁺, got diff %v", fld.name, h, d)
			}
		}
		tabCheckSlope(t, "Rodas5P dense output, "+fld.name, hs, errs, 4.6, 5.3)
	}
}

// TestRosenbrockRosenbrock23Order checks the constants, measures the local
// order of one non-autonomous Rosenbrock23 step (slope ≈ 3, order 2) and of
// its error estimate (slope ≈ 3), and checks that the estimate is
// asymptotically the true local error, err ≈ y_exact − y⁺.
//
// The error stage needs h·d·T, the same f_t term as k1: with h·T instead, as
// written in REFERENCE.md and DiffEqGPU.jl, the estimate carries an extra
// (h²/6)·(1 − d)·T and is only O(h²) on a non-autonomous field. The second
// case pins that difference.
func TestRosenbrockRosenbrock23Order(t *testing.T) {
	t.Parallel()
	c := rosenbrock23Tableau
	if got, want := c.D, 1/(2+math.Sqrt2); math.Abs(got-want) > 1e-16 {
		t.Errorf("Case d: want %v, got %v", want, got)
	}
	if got, want := c.D, 1-math.Sqrt2/2; math.Abs(got-want) > 1e-16 {
		t.Errorf("Case d = 1 − √2/2: want %v, got %v", want, got)
	}
	if got, want := c.E32, 6+math.Sqrt2; got != want {
		t.Errorf("Case e32: want %v, got %v", want, got)
	}
	if c.Order != 2 || c.ErrOrder != 3 {
		t.Errorf("Case orders: want (2, 3), got (%v, %v)", c.Order, c.ErrOrder)
	}
	for _, tc := range []struct {
		name           string
		errStageT      float64 // coefficient of h·T in the error stage
		estLo, estHi   float64
		estimateIsTrue bool
	}{
		{"h·d·T in the error stage", c.D, 2.7, 3.2, true},
		{"h·T in the error stage", 1, 1.8, 2.3, false},
	} {
		for _, fld := range tabFields() {
			var errs, ests, misfit []float64
			hs := tabPowersOfTwo(-4, -9)
			for _, h := range hs {
				y, est := tabRosenbrock23Step(c, tc.errStageT, fld, fld.t0, fld.y0, h)
				ref := tabReferenceSolution(fld, fld.t0, fld.y0, h)
				errs = append(errs, tabMaxAbsDiff(y, ref))
				ests = append(ests, tabMaxAbs(est))
				trueErr := make([]float64, len(y))
				for i := range y {
					trueErr[i] = ref[i] - y[i]
				}
				misfit = append(misfit, tabMaxAbsDiff(est, trueErr)/tabMaxAbs(trueErr))
			}
			name := "Rosenbrock23, " + tc.name + ", " + fld.name
			tabCheckSlope(t, name+": local error", hs, errs, 2.7, 3.2)
			tabCheckSlope(t, name+": error estimate", hs, ests, tc.estLo, tc.estHi)
			if !tc.estimateIsTrue {
				continue
			}
			// The misfit is O(h⁴)/O(h³) = O(h).
			tabCheckSlope(t, name+": relative misfit of the estimate", hs, misfit, 0.8, 1.2)
			if last := misfit[len(misfit)-1]; last > 0.01 {
				t.Errorf("Case %v: relative misfit of the estimate at h=%v want < 0.01, got %v", name, hs[len(hs)-1], last)
			}
		}
	}
}

// ---- Test fields and reference solutions ----

// tabField is a non-autonomous ODE y' = f(t, y) with its analytic Jacobian
// ∂f/∂y and time derivative ∂f/∂t.
type tabField struct {
	name string
	t0   float64
	y0   []float64
	f    func(t float64, y []float64) []float64
	jac  func(t float64, y []float64) [][]float64
	ft   func(t float64, y []float64) []float64
}

// tabFields returns the fields used for order measurements. Both are
// nonlinear, depend on t through terms that multiply the state (so f_t
// depends on y), and start at t0 ≠ 0.
func tabFields() []tabField {
	// REFERENCE.md's stiff test field (−p0·(y1 − y2²), y1 − y2 − p1·y2³),
	// with p0 = 2 so that the asymptotic regime of every method is reached at
	// step sizes where the local error is still far above round-off,
	// with added time dependence.
	const p0, p1 = 2.0, 1.0
	stiff := tabField{
		name: "forced stiff field",
		t0:   0.3,
		y0:   []float64{1, 0.5},
		f: func(t float64, y []float64) []float64 {
			return []float64{
				-p0*(y[0]-y[1]*y[1]) + math.Sin(2*t),
				y[0]*(1+0.5*math.Cos(t)) - y[1] - p1*y[1]*y[1]*y[1],
			}
		},
		jac: func(t float64, y []float64) [][]float64 {
			return [][]float64{
				{-p0, 2 * p0 * y[1]},
				{1 + 0.5*math.Cos(t), -1 - 3*p1*y[1]*y[1]},
			}
		},
		ft: func(t float64, y []float64) []float64 {
			return []float64{2 * math.Cos(2*t), -0.5 * math.Sin(t) * y[0]}
		},
	}
	// A Van der Pol oscillator (μ = 1) with a parametric and an additive
	// forcing.
	const mu = 1.0
	vdp := tabField{
		name: "forced Van der Pol",
		t0:   0.7,
		y0:   []float64{2, -0.5},
		f: func(t float64, y []float64) []float64 {
			return []float64{
				y[1],
				mu*(1-y[0]*y[0])*y[1] - y[0] + 0.4*math.Sin(2*t)*y[0] + math.Cos(t),
			}
		},
		jac: func(t float64, y []float64) [][]float64 {
			return [][]float64{
				{0, 1},
				{-2*mu*y[0]*y[1] - 1 + 0.4*math.Sin(2*t), mu * (1 - y[0]*y[0])},
			}
		},
		ft: func(t float64, y []float64) []float64 {
			return []float64{0, 0.8*math.Cos(2*t)*y[0] - math.Sin(t)}
		},
	}
	return []tabField{stiff, vdp}
}

// tabReferenceSolution returns y(t0 + h) for y(t0) = y0, from classical RK4
// with n and 2n substeps (n ≥ 64, substeps ≤ 2⁻¹²), combined by Richardson
// extrapolation (16·y_2n − y_n)/15, with compensated accumulation of y. Its
// error, O(h·δ⁵) with δ = h/n, plus round-off, is below 1e-15 for the fields
// and steps used here.
func tabReferenceSolution(fld tabField, t0 float64, y0 []float64, h float64) []float64 {
	n := max(64, int(math.Ceil(h*4096)))
	a := tabRK4(fld, t0, y0, h, n)
	b := tabRK4(fld, t0, y0, h, 2*n)
	out := make([]float64, len(y0))
	for i := range out {
		out[i] = b[i] + (b[i]-a[i])/15
	}
	return out
}

func tabRK4(fld tabField, t0 float64, y0 []float64, h float64, n int) []float64 {
	d := len(y0)
	y := append([]float64(nil), y0...)
	comp := make([]float64, d)
	dt := h / float64(n)
	tmp := make([]float64, d)
	for step := range n {
		t := t0 + float64(step)*dt
		k1 := fld.f(t, y)
		for i := range tmp {
			tmp[i] = y[i] + dt/2*k1[i]
		}
		k2 := fld.f(t+dt/2, tmp)
		for i := range tmp {
			tmp[i] = y[i] + dt/2*k2[i]
		}
		k3 := fld.f(t+dt/2, tmp)
		for i := range tmp {
			tmp[i] = y[i] + dt*k3[i]
		}
		k4 := fld.f(t+dt, tmp)
		for i := range y {
			// Kahan summation of the increments.
			inc := dt/6*(k1[i]+2*k2[i]+2*k3[i]+k4[i]) - comp[i]
			next := y[i] + inc
			comp[i] = (next - y[i]) - inc
			y[i] = next
		}
	}
	return y
}

// ---- Plain float64 steps (test oracles) ----

// tabERKStep takes one explicit Runge–Kutta step and returns y⁺ and the error
// estimate h·Σ E_i k_i.
func tabERKStep(tab *ERKTableau, fld tabField, t float64, y []float64, h float64) (yNew, est []float64) {
	s, d := tab.Stages(), len(y)
	k := make([][]float64, s)
	arg := make([]float64, d)
	for i := range s {
		for m := range d {
			var acc float64
			for j, a := range tab.A[i] {
				acc += a * k[j][m]
			}
			arg[m] = y[m] + h*acc
		}
		k[i] = fld.f(t+tab.C[i]*h, arg)
	}
	yNew = make([]float64, d)
	est = make([]float64, d)
	for m := range d {
		var acc, e float64
		for i := range s {
			acc += tab.B[i] * k[i][m]
			e += tab.E[i] * k[i][m]
		}
		yNew[m] = y[m] + h*acc
		est[m] = h * e
	}
	return yNew, est
}

// tabRosenbrockResult is one Rosenbrock step: the solution, the embedded
// solution and the dense output on the step.
type tabRosenbrockResult struct {
	y, yhat []float64
	dense   func(theta float64) []float64
}

// tabRosenbrockStep takes one step with the α/Γ stage formula documented on
// RosenbrockTableau.
func tabRosenbrockStep(tab *RosenbrockTableau, fld tabField, t float64, y []float64, h float64) tabRosenbrockResult {
	s, d := tab.Stages(), len(y)
	J := fld.jac(t, y)
	ft := fld.ft(t, y)
	W := make([][]float64, d)
	for i := range d {
		W[i] = make([]float64, d)
		for j := range d {
			W[i][j] = -h * tab.Gamma * J[i][j]
		}
		W[i][i] += 1
	}
	k := make([][]float64, s)
	arg := make([]float64, d)
	gk := make([]float64, d)
	for i := range s {
		for m := range d {
			var a, g float64
			for j := range i {
				a += tab.Alpha[i][j] * k[j][m]
				g += tab.GammaL[i][j] * k[j][m]
			}
			arg[m] = y[m] + a
			gk[m] = g
		}
		fi := fld.f(t+tab.C[i]*h, arg)
		jg := tabMatVec(J, gk)
		rhs := make([]float64, d)
		for m := range d {
			rhs[m] = h*fi[m] + h*jg[m] + h*h*tab.D[i]*ft[m]
		}
		k[i] = tabGaussSolve(W, rhs)
	}
	res := tabRosenbrockResult{y: tabCombine(y, tab.M, k), yhat: tabCombine(y, tab.MHat, k)}
	dk := make([][]float64, len(tab.H))
	for r := range tab.H {
		dk[r] = tabCombine(make([]float64, d), tab.H[r], k)
	}
	res.dense = func(theta float64) []float64 {
		out := make([]float64, d)
		for m := range d {
			inner := dk[0][m] + theta*(dk[1][m]+theta*dk[2][m])
			out[m] = (1-theta)*y[m] + theta*(res.y[m]+(1-theta)*inner)
		}
		return out
	}
	return res
}

// tabRosenbrockACStep takes one step in the published (a, C) form, as
// OrdinaryDiffEq.jl and diffrax do: (I/(hγ) − J)·u_i = f(t + c_i·h, y +
// Σ a_ij·u_j) + Σ (C_ij/h)·u_j + h·d_i·f_t.
func tabRosenbrockACStep(src *rosenbrockACForm, fld tabField, t float64, y []float64, h float64) tabRosenbrockResult {
	s, d := len(src.Nodes), len(y)
	J := fld.jac(t, y)
	ft := fld.ft(t, y)
	W := make([][]float64, d)
	for i := range d {
		W[i] = make([]float64, d)
		for j := range d {
			W[i][j] = -J[i][j]
		}
		W[i][i] += 1 / (h * src.Gamma)
	}
	u := make([][]float64, s)
	arg := make([]float64, d)
	for i := range s {
		cu := make([]float64, d)
		for m := range d {
			var a, c float64
			for j := range i {
				a += src.A[i][j] * u[j][m]
				c += src.C[i][j] * u[j][m]
			}
			arg[m] = y[m] + a
			cu[m] = c / h
		}
		fi := fld.f(t+src.Nodes[i]*h, arg)
		rhs := make([]float64, d)
		for m := range d {
			rhs[m] = fi[m] + cu[m] + h*src.D[i]*ft[m]
		}
		u[i] = tabGaussSolve(W, rhs)
	}
	return tabRosenbrockResult{y: tabCombine(y, src.B, u), yhat: tabCombine(y, src.BHat, u)}
}

// tabRosenbrock23Step takes one non-autonomous Rosenbrock23 step as documented
// in tableau_rosenbrock23.go, except that the error stage adds
// h·errStageT·T (errStageT = d there), and returns y⁺ and the error estimate.
func tabRosenbrock23Step(c rosenbrock23Consts, errStageT float64, fld tabField, t float64, y []float64, h float64) (yNew, est []float64) {
	d := len(y)
	J := fld.jac(t, y)
	T := fld.ft(t, y)
	W := make([][]float64, d)
	for i := range d {
		W[i] = make([]float64, d)
		for j := range d {
			W[i][j] = -h * c.D * J[i][j]
		}
		W[i][i] += 1
	}
	F0 := fld.f(t, y)
	rhs := make([]float64, d)
	for m := range d {
		rhs[m] = F0[m] + h*c.D*T[m]
	}
	k1 := tabGaussSolve(W, rhs)
	arg := make([]float64, d)
	for m := range d {
		arg[m] = y[m] + h/2*k1[m]
	}
	F1 := fld.f(t+h/2, arg)
	for m := range d {
		rhs[m] = F1[m] - k1[m]
	}
	k2 := tabGaussSolve(W, rhs)
	yNew = make([]float64, d)
	for m := range d {
		k2[m] += k1[m]
		yNew[m] = y[m] + h*k2[m]
	}
	F2 := fld.f(t+h, yNew)
	for m := range d {
		rhs[m] = F2[m] - c.E32*(k2[m]-F1[m]) - 2*(k1[m]-F0[m]) + h*errStageT*T[m]
	}
	k3 := tabGaussSolve(W, rhs)
	est = make([]float64, d)
	for m := range d {
		est[m] = h / 6 * (k1[m] - 2*k2[m] + k3[m])
	}
	return yNew, est
}

// tabGaussSolve solves A·x = b by Gaussian elimination with partial pivoting.
// A and b are not modified.
func tabGaussSolve(A [][]float64, b []float64) []float64 {
	n := len(b)
	m := make([][]float64, n)
	for i := range n {
		m[i] = append(append([]float64(nil), A[i]...), b[i])
	}
	for col := range n {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[p][col]) {
				p = r
			}
		}
		m[col], m[p] = m[p], m[col]
		for r := col + 1; r < n; r++ {
			f := m[r][col] / m[col][col]
			for c := col; c <= n; c++ {
				m[r][c] -= f * m[col][c]
			}
		}
	}
	x := make([]float64, n)
	for i := n - 1; i >= 0; i-- {
		acc := m[i][n]
		for j := i + 1; j < n; j++ {
			acc -= m[i][j] * x[j]
		}
		x[i] = acc / m[i][i]
	}
	return x
}

// ---- Rooted trees and elementary weights ----

// tabRootedTree is a rooted tree; children index earlier trees of the list
// returned by tabRootedTrees, in non-decreasing order.
type tabRootedTree struct {
	order    int
	children []int
	density  float64 // γ(τ) = |τ|·Π γ(children)
}

// tabRootedTrees returns all rooted trees with at most maxOrder vertices,
// sorted by order.
func tabRootedTrees(maxOrder int) []tabRootedTree {
	trees := []tabRootedTree{{order: 1, density: 1}}
	for n := 2; n <= maxOrder; n++ {
		limit := len(trees) // trees of order < n
		var gen func(rem, minIdx int, acc []int)
		gen = func(rem, minIdx int, acc []int) {
			if rem == 0 {
				density := float64(n)
				for _, c := range acc {
					density *= trees[c].density
				}
				trees = append(trees, tabRootedTree{order: n, children: append([]int(nil), acc...), density: density})
				return
			}
			for c := minIdx; c < limit; c++ {
				if trees[c].order <= rem {
					gen(rem-trees[c].order, c, append(acc, c))
				}
			}
		}
		gen(n-1, 0, nil)
	}
	return trees
}

// tabElementaryWeights returns Φ(τ) ∈ R^s for every tree: Φ(•) = 1 and
// Φ_i(τ) = Π_children (X·Φ(child))_i, where edge(τ, v) applies the matrix X
// that joins τ's root to its children.
func tabElementaryWeights(trees []tabRootedTree, s int, edge func(tr tabRootedTree, v []float64) []float64) [][]float64 {
	phi := make([][]float64, len(trees))
	for n, tr := range trees {
		v := tabOnes(s)
		for _, c := range tr.children {
			w := edge(tr, phi[c])
			for i := range v {
				v[i] *= w[i]
			}
		}
		phi[n] = v
	}
	return phi
}

// tabCheckTreeConditions checks Σ_i w_i·Φ_i(τ) = θ^|τ|/γ(τ) for every tree
// with |τ| ≤ order, to tol relative to max(1, Σ_i |w_i·Φ_i(τ)|), and that
// at least one tree of order+1 (if listed) violates it by more than 1e-6.
func tabCheckTreeConditions(t *testing.T, name string, trees []tabRootedTree, phi [][]float64, w []float64, theta float64, order int, tol float64) {
	t.Helper()
	var worst float64
	broken := false
	hasNext := false
	for n, tr := range trees {
		if tr.order > order+1 {
			continue
		}
		var got, scale float64
		for i := range w {
			got += w[i] * phi[n][i]
			scale += math.Abs(w[i] * phi[n][i])
		}
		want := math.Pow(theta, float64(tr.order)) / tr.density
		res := math.Abs(got - want)
		if tr.order == order+1 {
			hasNext = true
			if res > 1e-6 {
				broken = true
			}
			continue
		}
		worst = math.Max(worst, res/math.Max(1, scale))
		if res > tol*math.Max(1, scale) {
			t.Errorf("Case %v, θ=%v, tree %d (order %d, children %v): Σ w Φ want %v, got %v", name, theta, n, tr.order, tr.children, want, got)
		}
	}
	if hasNext && !broken {
		t.Errorf("Case %v, θ=%v: unexpectedly satisfies every order-%d condition", name, theta, order+1)
	}
	t.Logf("%v, θ=%v: worst scaled residual through order %d: %.2g", name, theta, order, worst)
}

// tabRosenbrockBeta returns β = α + Γ as a dense s×s matrix, Γ with its
// diagonal γ.
func tabRosenbrockBeta(tab *RosenbrockTableau) [][]float64 {
	s := tab.Stages()
	b := tabLowerToDense(tab.Alpha, s, tab.Gamma)
	for i := range s {
		for j, g := range tab.GammaL[i] {
			b[i][j] += g
		}
	}
	return b
}

// tabRodas5PDenseWeights returns b_i(θ) such that the dense output is
// y(θ) = y + Σ_i b_i(θ)·k_i.
func tabRodas5PDenseWeights(tab *RosenbrockTableau, theta float64) []float64 {
	w := make([]float64, tab.Stages())
	for i := range w {
		w[i] = theta*tab.M[i] + theta*(1-theta)*(tab.H[0][i]+theta*(tab.H[1][i]+theta*tab.H[2][i]))
	}
	return w
}

// ---- Small helpers ----

// tabCheckSlope fits log2(err) against log2(h) by least squares and checks the
// slope lies in [lo, hi].
func tabCheckSlope(t *testing.T, name string, hs, errs []float64, lo, hi float64) {
	t.Helper()
	var sx, sy, sxx, sxy float64
	for i := range hs {
		x, y := math.Log2(hs[i]), math.Log2(errs[i])
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	n := float64(len(hs))
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	t.Logf("%v: slope %.3f (errors %.3g)", name, slope, errs)
	if !(slope >= lo && slope <= hi) {
		t.Errorf("Case %v: slope want in [%v, %v], got %.3f (errors %.3g at h = %v)", name, lo, hi, slope, errs, hs)
	}
}

func tabPowersOfTwo(from, to int) []float64 {
	var hs []float64
	for k := from; k >= to; k-- {
		hs = append(hs, math.Ldexp(1, k))
	}
	return hs
}

func tabMatVec(A [][]float64, v []float64) []float64 {
	out := make([]float64, len(A))
	for i, row := range A {
		for j, a := range row {
			out[i] += a * v[j]
		}
	}
	return out
}

// tabLowerToDense returns the s×s matrix with strictly lower part L and
// diagonal diag.
func tabLowerToDense(L [][]float64, s int, diag float64) [][]float64 {
	m := make([][]float64, s)
	for i := range s {
		m[i] = make([]float64, s)
		copy(m[i], L[i])
		m[i][i] = diag
	}
	return m
}

// tabCombine returns y + Σ_i w_i·k_i.
func tabCombine(y, w []float64, k [][]float64) []float64 {
	out := append([]float64(nil), y...)
	for m := range out {
		var acc float64
		for i := range w {
			acc += w[i] * k[i][m]
		}
		out[m] += acc
	}
	return out
}

func tabDot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func tabOnes(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

func tabMaxAbs(x []float64) float64 {
	var m float64
	for _, v := range x {
		m = math.Max(m, math.Abs(v))
	}
	return m
}

func tabMaxAbsDiff(a, b []float64) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(a[i]-b[i]))
	}
	return m
}

func tabEqualInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func tabCopyERK(t *ERKTableau) *ERKTableau {
	c := *t
	c.C = append([]float64(nil), t.C...)
	c.B = append([]float64(nil), t.B...)
	c.E = append([]float64(nil), t.E...)
	c.A = tabCopyRows(t.A)
	return &c
}

func tabCopyRosenbrock(t *RosenbrockTableau) *RosenbrockTableau {
	c := *t
	c.C = append([]float64(nil), t.C...)
	c.D = append([]float64(nil), t.D...)
	c.M = append([]float64(nil), t.M...)
	c.MHat = append([]float64(nil), t.MHat...)
	c.Alpha = tabCopyRows(t.Alpha)
	c.GammaL = tabCopyRows(t.GammaL)
	c.H = tabCopyRows(t.H)
	return &c
}

func tabCopyRows(x [][]float64) [][]float64 {
	out := make([][]float64, len(x))
	for i, r := range x {
		out[i] = append([]float64(nil), r...)
	}
	return out
}
