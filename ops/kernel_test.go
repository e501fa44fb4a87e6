package ops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// same reports whether a and b are the same number (NaNs of any payload
// being the same).
func same(a, b float64) bool {
	return a == b && math.Signbit(a) == math.Signbit(b) || a != a && b != b
}

// special holds values the kernels must treat exactly as Eval does.
var special = []float64{0, math.Copysign(0, -1), 1, -1, 0.5, 2, math.Inf(1), math.Inf(-1), math.NaN(), 1e308, -1e-310}

// kernelArity returns the number of arguments to test op with.
func kernelArity(op Op, k int) int {
	if op == OpDot {
		return 2*k + 1
	}
	return Lookup(op).Arity
}

// TestBlockMatchesEval checks every scalar op's CPU kernel against its
// scalar Eval, lane by lane and bit for bit, for block sizes 1 and 13,
// and for Mixed ops with every subset of arguments uniform.
func TestBlockMatchesEval(t *testing.T) {
	t.Parallel()
	type kcase struct {
		op  Op
		aux float64
		k   int // Dot: number of terms
	}
	var cases []kcase
	for op := Op(1); int(op) < NumOps; op++ {
		def := Lookup(op)
		if def.Eval == nil || def.Block == nil {
			continue
		}
		switch op {
		case OpPowi:
			for _, n := range []float64{-3, -1, 0, 1, 2, 5} {
				cases = append(cases, kcase{op: op, aux: n})
			}
		case OpDot:
			for _, k := range []int{0, 1, 2, 5} {
				cases = append(cases, kcase{op: op, k: k})
			}
		default:
			cases = append(cases, kcase{op: op})
		}
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%v/aux=%v/k=%d", tc.op, tc.aux, tc.k)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rnd := rand.New(rand.NewPCG(1, 1))
			def := Lookup(tc.op)
			na := kernelArity(tc.op, tc.k)
			for _, m := range []int{1, 13} {
				full := make([][]float64, na)
				for j := range full {
					full[j] = make([]float64, m)
					for i := range full[j] {
						if rnd.IntN(3) == 0 {
							full[j][i] = special[rnd.IntN(len(special))]
						} else {
							full[j][i] = 6*rnd.Float64() - 3
						}
					}
				}
				masks := 1
				if def.Mixed {
					masks = 1 << na
				}
				for mask := 0; mask < masks; mask++ {
					if mask == masks-1 && masks > 1 && m > 1 {
						continue // all uniform: the executor evaluates it once, with Eval
					}
					args := make([][]float64, na)
					for j := range args {
						args[j] = full[j]
						if mask&(1<<j) != 0 {
							args[j] = full[j][:1]
						}
					}
					dst := make([]float64, m)
					def.Block(dst, args, tc.aux)
					a := make([]float64, na)
					for i := range dst {
						for j := range a {
							if len(args[j]) == 1 {
								a[j] = args[j][0]
							} else {
								a[j] = args[j][i]
							}
						}
						if want := def.Eval(a, tc.aux); !same(dst[i], want) {
							t.Errorf("Case m=%d mask=%b lane %d args %v: want %v, got %v", m, mask, i, a, want, dst[i])
						}
					}
				}
			}
		})
	}
}

func TestPowi(t *testing.T) {
	t.Parallel()
	for _, x := range []float64{-2.5, -1, -0.3, 0.7, 1, 3} {
		for n := -6; n <= 6; n++ {
			got, want := powi(x, n), math.Pow(x, float64(n))
			if math.Abs(got-want) > 1e-14*math.Abs(want) {
				t.Errorf("Case powi(%v, %d): want %v, got %v", x, n, want, got)
			}
		}
	}
	for _, tc := range []struct {
		x    float64
		n    int
		want float64
	}{
		{math.NaN(), 0, 1},
		{math.Inf(1), 0, 1},
		{0, 0, 1},
		{0, -1, math.Inf(1)},
		{2, 10, 1024},
		{2, -2, 0.25},
		{-2, 3, -8},
	} {
		if got := powi(tc.x, tc.n); !same(got, tc.want) {
			t.Errorf("Case powi(%v, %d): want %v, got %v", tc.x, tc.n, tc.want, got)
		}
	}
}

func TestScalarMath(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	negZero := math.Copysign(0, -1)
	for _, tc := range []struct {
		name string
		got  float64
		want float64
	}{
		{"sigmoid(0)", sigmoid(0), 0.5},
		{"sigmoid(800)", sigmoid(800), 1},
		{"sigmoid(-800)", sigmoid(-800), 0},
		{"sigmoid(-inf)", sigmoid(math.Inf(-1)), 0},
		{"softplus(0)", softplus(0), math.Ln2},
		{"softplus(800)", softplus(800), 800},
		{"softplus(-800)", softplus(-800), 0},
		{"softplus(inf)", softplus(math.Inf(1)), math.Inf(1)},
		{"relu(-1)", relu(-1), 0},
		{"relu(2)", relu(2), 2},
		{"relu(nan)", relu(nan), 0},
		{"sign(-3)", sign(-3), -1},
		{"sign(0)", sign(0), 0},
		{"sign(nan)", sign(nan), 0},
		{"min tie", tieMin(negZero, 0), negZero},
		{"max tie", tieMax(0, negZero), 0},
		{"min(1, 2)", tieMin(1, 2), 1},
		{"min(2, 1)", tieMin(2, 1), 1},
		{"max(1, 2)", tieMax(1, 2), 2},
		{"min(nan, 1)", tieMin(nan, 1), nan},
		{"min(1, nan)", tieMin(1, nan), nan},
		{"max(nan, 1)", tieMax(nan, 1), nan},
		{"max(1, nan)", tieMax(1, nan), nan},
	} {
		if !same(tc.got, tc.want) {
			t.Errorf("Case %v: want %v, got %v", tc.name, tc.want, tc.got)
		}
	}
	for x := -30.0; x <= 30; x += 0.25 {
		if got, want := softplus(x)-softplus(-x), x; math.Abs(got-want) > 1e-14*math.Max(1, math.Abs(x)) {
			t.Errorf("Case softplus(%v)-softplus(%v): want %v, got %v", x, -x, want, got)
		}
		if got := sigmoid(x) + sigmoid(-x); math.Abs(got-1) > 1e-15 {
			t.Errorf("Case sigmoid(%v)+sigmoid(%v): want 1, got %v", x, -x, got)
		}
	}
}

// randWellConditioned returns a random d×d row-major matrix with a
// dominant diagonal.
func randWellConditioned(rnd *rand.Rand, d int) []float64 {
	w := make([]float64, d*d)
	for i := range w {
		w[i] = 2*rnd.Float64() - 1
	}
	for i := 0; i < d; i++ {
		w[i*d+i] += float64(d) * (1 + rnd.Float64()) * float64(1-2*rnd.IntN(2))
	}
	return w
}

// TestLU checks the batched factorisation and solves against gonum's
// dense solver, for m lanes at once.
func TestLU(t *testing.T) {
	t.Parallel()
	const m = 11 // more than a group of factorLanes, and a remainder
	for _, d := range []int{1, 2, 3, 5, 8, 20} {
		for _, trans := range []bool{false, true} {
			t.Run(fmt.Sprintf("d=%d/trans=%v", d, trans), func(t *testing.T) {
				t.Parallel()
				rnd := rand.New(rand.NewPCG(1, 1))
				ws := make([][]float64, m)
				bs := make([][]float64, m)
				args := make([][]float64, d*d)
				for c := range args {
					args[c] = make([]float64, m)
				}
				rhs := make([][]float64, d+1)
				for c := range rhs {
					rhs[c] = make([]float64, m)
				}
				for i := 0; i < m; i++ {
					ws[i] = randWellConditioned(rnd, d)
					// A permutation forces row swaps.
					if d > 1 && i == 1 {
						for c := 0; c < d; c++ {
							ws[i][c], ws[i][(d-1)*d+c] = ws[i][(d-1)*d+c], ws[i][c]
						}
					}
					bs[i] = make([]float64, d)
					for c := range bs[i] {
						bs[i][c] = 2*rnd.Float64() - 1
						rhs[c+1][i] = bs[i][c]
					}
					for c := range ws[i] {
						args[c][i] = ws[i][c]
					}
				}
				f := make([]float64, (d*d+d)*m)
				luFactorBlock(f, args, float64(d))
				rhs[0] = f
				x := make([]float64, d*m)
				luSolveBlock(trans)(x, rhs, 0)
				for i := 0; i < m; i++ {
					var want mat.VecDense
					a := mat.NewDense(d, d, ws[i])
					var err error
					if trans {
						err = want.SolveVec(a.T(), mat.NewVecDense(d, bs[i]))
					} else {
						err = want.SolveVec(a, mat.NewVecDense(d, bs[i]))
					}
					if err != nil {
						t.Fatalf("Case lane %d: gonum: %v", i, err)
					}
					// The scalar path (m = 1) must agree with the block path.
					fi := make([]float64, d*d+d)
					ai := make([][]float64, d*d)
					for c := range ai {
						ai[c] = []float64{ws[i][c]}
					}
					luFactorEval(fi, ai, float64(d))
					xi := make([]float64, d)
					ri := make([][]float64, d+1)
					ri[0] = fi
					for c := 0; c < d; c++ {
						ri[c+1] = []float64{bs[i][c]}
					}
					luSolveEval(trans)(xi, ri, 0)
					for c := 0; c < d; c++ {
						got := x[c*m+i]
						if w := want.AtVec(c); math.Abs(got-w) > 1e-13*(1+math.Abs(w)) {
							t.Errorf("Case lane %d x[%d]: want %v, got %v", i, c, w, got)
						}
						if got != xi[c] {
							t.Errorf("Case lane %d x[%d]: block %v, scalar %v", i, c, got, xi[c])
						}
					}
				}
			})
		}
	}
}

func TestLUSingular(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		w    []float64
	}{
		{"zero/d=1", []float64{0}},
		{"zero/d=2", []float64{0, 0, 0, 0}},
		{"equal rows", []float64{1, 2, 3, 1, 2, 3, 4, 5, 7}},
		{"rank 1", []float64{1, 2, 2, 4}},
		{"below tolerance", []float64{1, 2, 2, 4 + 4e-16}},
		{"nan entry", []float64{1, math.NaN(), 0, 1}},
		{"inf entry", []float64{math.Inf(1), 0, 0, 1}},
	} {
		d := int(math.Sqrt(float64(len(tc.w))))
		f := make([]float64, d*d+d)
		args := make([][]float64, d*d)
		for c := range args {
			args[c] = []float64{tc.w[c]}
		}
		luFactorEval(f, args, float64(d))
		for c, v := range f {
			if !math.IsNaN(v) {
				t.Errorf("Case %v: factor component %d want NaN, got %v", tc.name, c, v)
			}
		}
		x := make([]float64, d)
		rhs := [][]float64{f}
		for c := 0; c < d; c++ {
			rhs = append(rhs, []float64{1})
		}
		for _, trans := range []bool{false, true} {
			luSolveEval(trans)(x, rhs, 0)
			for c, v := range x {
				if !math.IsNaN(v) {
					t.Errorf("Case %v trans=%v: x[%d] want NaN, got %v", tc.name, trans, c, v)
				}
			}
		}
	}
	// Just above the tolerance d·ε·max|W| the matrix is factored.
	f := make([]float64, 6)
	luFactorEval(f, [][]float64{{1}, {2}, {2}, {4 + 1e-14}}, 2)
	if math.IsNaN(f[0]) {
		t.Errorf("Case pivot 1e-14 above tolerance: want a factorisation, got NaNs")
	}
}

// TestLUBlockSingularLane checks that a singular lane of a block gives
// NaNs in that lane only, and that the other lanes' solutions are those
// of the scalar path, bit for bit.
func TestLUBlockSingularLane(t *testing.T) {
	t.Parallel()
	const m, d, bad = 10, 12, 9
	rnd := rand.New(rand.NewPCG(2, 2))
	args := make([][]float64, d*d)
	for c := range args {
		args[c] = make([]float64, m)
	}
	ws := make([][]float64, m)
	for i := range ws {
		ws[i] = randWellConditioned(rnd, d)
		if i == bad {
			for c := 0; c < d; c++ {
				ws[i][d+c] = 2 * ws[i][c] // row 1 = 2·row 0
			}
		}
		for c := range ws[i] {
			args[c][i] = ws[i][c]
		}
	}
	f := make([]float64, (d*d+d)*m)
	luFactorBlock(f, args, float64(d))
	for _, trans := range []bool{false, true} {
		rhs := make([][]float64, d+1)
		rhs[0] = f
		for c := 1; c <= d; c++ {
			rhs[c] = make([]float64, m)
			for i := range rhs[c] {
				rhs[c][i] = float64(c) - 0.5*float64(i)
			}
		}
		x := make([]float64, d*m)
		luSolveBlock(trans)(x, rhs, 0)
		for i := 0; i < m; i++ {
			fi := make([]float64, d*d+d)
			ai := make([][]float64, d*d)
			for c := range ai {
				ai[c] = []float64{ws[i][c]}
			}
			luFactorEval(fi, ai, float64(d))
			ri := [][]float64{fi}
			for c := 1; c <= d; c++ {
				ri = append(ri, []float64{rhs[c][i]})
			}
			xi := make([]float64, d)
			luSolveEval(trans)(xi, ri, 0)
			for c := 0; c < d; c++ {
				got := x[c*m+i]
				if i == bad && !math.IsNaN(got) || i != bad && math.Float64bits(got) != math.Float64bits(xi[c]) {
					t.Errorf("trans=%v lane %d x[%d]: block %v, scalar %v", trans, i, c, got, xi[c])
				}
			}
		}
	}
}
