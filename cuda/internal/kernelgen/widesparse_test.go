package kernelgen

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
)

// TestWideSparseLU runs the sparse factor and solves (wideSparseLU) on a
// simulated warp, a trajectory on 32 lanes and (HIRES's cases and two of
// d = 20) on 8 (GS_WIDE_LANES, four groups each with its copy), against the dense ones (gs_wide_lu_factor,
// gs_wide_lu_solve, gs_wide_lu_solve_t) on seeded random patterns (about
// a quarter of the entries, the diagonal, d = 8, 20, 32) and HIRES's:
// W = I + s·M with a dominant diagonal (no row interchange: the sparse
// path runs to its end and marks its factor), with a row below the
// diagonal larger at step 0 or at a later step (the dense steps take over
// from there: no mark), with a column of equal magnitudes (no
// interchange), with a NaN entry, and singular (factors of NaNs). The
// factors, pivots and solutions of W x = b and Wᵀ x = b must be the dense
// form's value for value (equal, or both NaN; the sign of a zero may
// differ, and is counted). It fails if the marks are not where the cases
// put them or if the sparse form skips an entry of the fill.
func TestWideSparseLU(t *testing.T) {
	t.Parallel()
	cc := kerneltest.GXX(t)
	r := rand.New(rand.NewPCG(47, 4))
	type tc struct {
		name   string
		d      int
		nz     []bool
		m      []float64
		sparse bool // the sparse path runs to its end
	}
	pattern := func(d int) []bool {
		nz := make([]bool, d*d)
		for k := range nz {
			nz[k] = k/d == k%d || r.IntN(4) == 0
		}
		return nz
	}
	// values fills pattern nz with entries of magnitude up to 1 and a
	// diagonal of -(2 + the column's sum), so that W = I - 0.5·M keeps
	// its diagonal the largest magnitude of every column through the
	// elimination (column diagonal dominance).
	values := func(nz []bool, d int) []float64 {
		m := make([]float64, d*d)
		for c := 0; c < d; c++ {
			sum := 0.0
			for row := 0; row < d; row++ {
				if row != c && nz[row*d+c] {
					m[row*d+c] = 2*r.Float64() - 1
					sum += math.Abs(m[row*d+c])
				}
			}
			m[c*d+c] = -(2 + sum)
		}
		return m
	}
	hires := make([]bool, 64)
	for _, q := range []int{0, 1, 2, 8, 9, 10, 18, 19, 20, 25, 26, 27, 28, 36, 37, 38, 43, 44, 45, 46, 47, 53, 54, 55, 61, 62, 63} {
		hires[q] = true
	}
	var cases []tc
	for _, x := range []struct {
		name string
		nz   []bool
	}{{"d=8", pattern(8)}, {"hires", hires}, {"d=20", pattern(20)}, {"d=32", pattern(32)}} {
		d := int(math.Sqrt(float64(len(x.nz))))
		if _, _, ok := wideSparseLU(x.nz, d); !ok {
			t.Fatalf("%s: no sparse form", x.name)
		}
		m := values(x.nz, d)
		cases = append(cases, tc{x.name + "/dominant", d, x.nz, m, true})
		// A row below the diagonal beats it: at step 0 (the first row of
		// column 0 in the pattern) and at the last column with a row of
		// the pattern below it (after elimination the entry is unchanged
		// there only if nothing updated it; a large one wins anyway).
		for _, at := range []string{"first", "late"} {
			pm := append([]float64(nil), m...)
			cols := []int{0}
			if at == "late" {
				cols = nil
				for c := d - 2; c > 0 && len(cols) == 0; c-- {
					for row := c + 1; row < d; row++ {
						if x.nz[row*d+c] {
							cols = []int{c}
							break
						}
					}
				}
			}
			hit := false
			for _, c := range cols {
				for row := c + 1; row < d && !hit; row++ {
					if x.nz[row*d+c] {
						pm[row*d+c] = 1e3 * math.Abs(pm[c*d+c])
						hit = true
					}
				}
			}
			if hit {
				cases = append(cases, tc{x.name + "/pivot-" + at, d, x.nz, pm, false})
			}
		}
		nan := append([]float64(nil), m...)
		nan[d*d-1] = math.NaN()
		cases = append(cases, tc{x.name + "/nan", d, x.nz, nan, false})
		sing := append([]float64(nil), m...)
		for row := 0; row < d; row++ {
			sing[row*d+d/2] = 0
		}
		sing[d/2*d+d/2] = 2 // W's column d/2 all zeros: 1 - 0.5·2
		cases = append(cases, tc{x.name + "/singular", d, x.nz, sing, false})
	}
	// Ties: a row below the diagonal of the same magnitude (the diagonal
	// stays the pivot: the first of equals).
	tie := values(hires, 8)
	tie[1*8+0] = tie[0]
	cases = append(cases, tc{"hires/tie", 8, hires, tie, true})
	for _, c := range cases {
		for _, lanes := range []int{32, 8} {
			if lanes == 8 && !strings.HasPrefix(c.name, "hires/") && c.name != "d=20/dominant" && c.name != "d=20/pivot-late" {
				continue // the groups' collectives: a few cases
			}
			t.Run(fmt.Sprintf("%s/lanes=%d", c.name, lanes), func(t *testing.T) {
				t.Parallel()
				b := make([]float64, c.d)
				for k := range b {
					b[k] = r.NormFloat64()
				}
				b[0] = 0 // a zero right-hand side component
				out := runWideSparseLU(t, cc, c.d, c.nz, c.m, b, -0.5, lanes)
				want, got := out["dense"], out["sparse"]
				mark := got["f"][c.d*c.d+c.d-1] == float64(c.d)-0.5
				if mark != c.sparse {
					t.Errorf("sparse path to its end %v, want %v", mark, c.sparse)
				}
				zeros := map[string]int{}
				for _, part := range []string{"f", "x", "xt"} {
					for k := range want[part] {
						x, y := got[part][k], want[part][k]
						if part == "f" && k >= c.d*c.d {
							x, y = math.Trunc(x), math.Trunc(y)
						}
						if x != y && !(math.IsNaN(x) && math.IsNaN(y)) {
							t.Fatalf("%s[%d]: sparse %v, dense %v", part, k, x, y)
						}
						if math.Float64bits(x) != math.Float64bits(y) && x == y {
							zeros[part]++
						}
					}
				}
				if failed := math.IsNaN(want["f"][0]); failed != (strings.HasSuffix(c.name, "nan") || strings.HasSuffix(c.name, "singular")) {
					t.Errorf("dense factor failed %v", failed)
				}
				t.Logf("zeros of another sign: %v", zeros)
			})
		}
	}
}

// runWideSparseLU compiles and runs the dense and the sparse factor (of
// the predicted pivot sequences hints) and solves of W = I + s·M (M d×d of pattern nz, row major) on a simulated
// warp of trajectories on lanes lanes each (every group the same
// matrix), and returns by form ("dense", "sparse") group 0's factor f
// (the d² entries row-major, then the d pivots) and solutions x and xt
// of W x = b and Wᵀ x = b, after checking that every group's are the
// same.
func runWideSparseLU(t *testing.T, cc string, d int, nz []bool, m, b []float64, s float64, lanes int, hints ...[]int) map[string]map[string][]float64 {
	t.Helper()
	tag, code, ok := wideSparseLU(nz, d, hints...)
	if !ok {
		t.Fatal("no sparse form")
	}
	vec := func(xs []float64) string {
		out := make([]string, len(xs))
		for k, x := range xs {
			if math.IsNaN(x) {
				out[k] = "gs_nan()"
			} else {
				out[k] = strconv.FormatFloat(x, 'x', -1, 64)
			}
		}
		return "{" + strings.Join(out, ", ") + "}"
	}
	var sb strings.Builder
	if lanes < 32 {
		fmt.Fprintf(&sb, "#define GS_WIDE_LANES %d\n", lanes)
	}
	sb.WriteString(kerneltest.WarpSim)
	sb.WriteString(prelude)
	sb.WriteString(wideHelper)
	sb.WriteString(wideLUHelper)
	sb.WriteString(code)
	fmt.Fprintf(&sb, `
const int D = %d, LD = GS_WLD(D), G = 32 / %d, N = D * LD + D;
static gs_real M[D * D] = %s, B[D] = %s;
static gs_real wf[2][G][N], wx[2][G][D], wxt[2][G][D];
static void put(const char* what, const gs_real* x, int n) {
  for (int k = 0; k < n; k++) printf("%%s %%a\n", what, x[k]);
}
int main() {
  const gs_real s = %s;
  for (int v = 0; v < 2; v++)
    for (int g = 0; g < G; g++)
      for (int q = 0; q < D * D; q++) wf[v][g][GS_WLU_AT(q, D)] = M[q];
  std::barrier<> bar(32);
  gs_sim_bar = &bar;
  std::vector<std::thread> th;
  for (int lane = 0; lane < 32; lane++)
    th.emplace_back([&, lane] {
      threadIdx.x = lane;
      const int g = lane / (32 / G);
      for (int v = 0; v < 2; v++) {
        gs_real* f = wf[v][g];
        gs_wide_lu_shift<D>(f, s, 1);
        if (v == 0) gs_wide_lu_factor<D>(f);
        else gs_wlus_factor_%[6]s(f);
        for (int k = GS_WLANE; k < D; k += GS_WSTRIDE) wx[v][g][k] = wxt[v][g][k] = B[k];
        if (v == 0) {
          gs_wide_lu_solve<D>(wx[v][g], f);
          gs_wide_lu_solve_t<D>(wxt[v][g], f);
        } else {
          gs_wlus_solve_%[6]s(wx[v][g], f);
          gs_wlus_solve_t_%[6]s(wxt[v][g], f);
        }
      }
    });
  for (auto& x : th) x.join();
  const char* form[2] = {"dense", "sparse"};
  for (int v = 0; v < 2; v++)
    for (int g = 0; g < G; g++) {
      char name[64];
      static gs_real ws[D * D];
      for (int q = 0; q < D * D; q++) ws[q] = wf[v][g][GS_WLU_AT(q, D)];
      snprintf(name, sizeof name, "%%s.%%d.f", form[v], g);
      put(name, ws, D * D);
      put(name, wf[v][g] + D * LD, D);
      snprintf(name, sizeof name, "%%s.%%d.x", form[v], g);
      put(name, wx[v][g], D);
      snprintf(name, sizeof name, "%%s.%%d.xt", form[v], g);
      put(name, wxt[v][g], D);
    }
  return 0;
}
`, d, lanes, vec(m), vec(b), strconv.FormatFloat(s, 'x', -1, 64), tag)
	dir := t.TempDir()
	file := filepath.Join(dir, "lu.cpp")
	if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "lu")
	if out, err := exec.Command(cc, "-std=c++20", "-O1", "-pthread", "-ffp-contract=off", "-fno-fast-math", "-w", "-o", exe, file).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, kerneltest.FirstLines(string(out), 30))
	}
	out, err := exec.Command(exe).Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	groups := map[string]map[string][]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		x, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			x = math.NaN() // "nan", "-nan"
		}
		key, part, _ := strings.Cut(f[0], ".f")
		if part == "" && strings.HasSuffix(f[0], ".f") {
			part = "f"
		} else {
			i := strings.LastIndex(f[0], ".")
			key, part = f[0][:i], f[0][i+1:]
		}
		if groups[key] == nil {
			groups[key] = map[string][]float64{}
		}
		groups[key][part] = append(groups[key][part], x)
	}
	res := map[string]map[string][]float64{}
	for _, form := range []string{"dense", "sparse"} {
		g0 := groups[form+".0"]
		if len(g0["f"]) != d*d+d || len(g0["x"]) != d || len(g0["xt"]) != d {
			t.Fatalf("%s: the harness printed %d, %d, %d values", form, len(g0["f"]), len(g0["x"]), len(g0["xt"]))
		}
		for g := 1; g < 32/lanes; g++ {
			for part, xs := range groups[fmt.Sprintf("%s.%d", form, g)] {
				for k, x := range xs {
					if math.Float64bits(x) != math.Float64bits(g0[part][k]) && !(math.IsNaN(x) && math.IsNaN(g0[part][k])) {
						t.Fatalf("%s: group %d's %s[%d] %v, group 0's %v", form, g, part, k, x, g0[part][k])
					}
				}
			}
		}
		res[form] = g0
	}
	return res
}

// TestWideSparsePivots runs the sparse factor and solves with predicted
// pivot sequences (wideSparseLU's hints, Config.WidePivots) on a
// simulated warp against the dense ones: seeded random patterns (d = 8,
// 20, 32, about a quarter of the entries) with values whose diagonal
// does not dominate, so that partial pivoting interchanges rows; the
// sequence the dense factor takes (read from its pivots) is the hint,
// beside a decoy (another valid sequence, interchanging at the first
// step the pattern allows). The factor must end on the hint's mark (D −
// 1 + j/64 for hint j), the decoy's case on the decoy's, a matrix with
// a dominant diagonal on no interchange's (D − 1/2), one that takes
// another sequence on none (the dense steps from where it parts), a NaN
// entry's and a singular one's factors NaN; factors, pivots and
// solutions the dense form's value for value (the sign of a zero may
// differ). It fails if a case's dense factor interchanges no rows where
// the case needs it to.
func TestWideSparsePivots(t *testing.T) {
	t.Parallel()
	cc := kerneltest.GXX(t)
	r := rand.New(rand.NewPCG(48, 7))
	type tc struct {
		name  string
		d     int
		nz    []bool
		m     []float64
		lanes int
	}
	var cases []tc
	for _, d := range []int{8, 20, 32} {
		nz := make([]bool, d*d)
		for k := range nz {
			nz[k] = k/d == k%d || r.IntN(4) == 0
		}
		m := make([]float64, d*d)
		for q := range m {
			if nz[q] {
				m[q] = 4*r.Float64() - 2
			}
		}
		for _, lanes := range []int{32, 8} {
			if lanes == 8 && d == 32 {
				continue
			}
			cases = append(cases, tc{fmt.Sprintf("d=%d", d), d, nz, m, lanes})
		}
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/lanes=%d", c.name, c.lanes), func(t *testing.T) {
			t.Parallel()
			d := c.d
			b := make([]float64, d)
			for k := range b {
				b[k] = r.NormFloat64()
			}
			// -2: W = I - 2·M, entries up to 4 against a diagonal of 1 ± 4.
			piv := func(out map[string]map[string][]float64) []int {
				p := make([]int, d)
				for k := range p {
					p[k] = int(out["dense"]["f"][d*d+k])
				}
				return p
			}
			base := runWideSparseLU(t, cc, d, c.nz, c.m, b, -2, c.lanes)
			seq := piv(base)
			swaps := 0
			for k, q := range seq {
				if q != k {
					swaps++
				}
			}
			if swaps == 0 {
				t.Fatalf("the dense factor interchanged no rows")
			}
			if _, ok := luPatternPivots(c.nz, d, seq); !ok {
				t.Fatalf("the dense factor's pivots %v are not a sequence of the pattern", seq)
			}
			decoy := make([]int, d)
			for k := range decoy {
				decoy[k] = k
			}
			for k := 0; k < d && decoy[0] == 0; k++ {
				for q := k + 1; q < d; q++ {
					if c.nz[q*d+k] && q != seq[k] {
						decoy[k] = q
						break
					}
				}
				if decoy[k] != k {
					break
				}
			}
			dominant := append([]float64(nil), c.m...)
			for k := 0; k < d; k++ {
				dominant[k*d+k] = -float64(4 * d)
			}
			nan := append([]float64(nil), c.m...)
			nan[d*d-1] = math.NaN()
			other := append([]float64(nil), c.m...)
			for k := 0; k < d; k++ { // another sequence: no interchange at the hint's first one
				if seq[k] != k {
					other[k*d+k] = -float64(4 * d)
					break
				}
			}
			for _, x := range []struct {
				name  string
				m     []float64
				hints [][]int
				mark  float64 // the factor's last pivot entry, 0: not a sparse leaf's
			}{
				{"hint", c.m, [][]int{seq}, float64(d-1) + 1.0/64},
				{"decoy-first", c.m, [][]int{decoy, seq}, float64(d-1) + 2.0/64},
				{"dominant", dominant, [][]int{seq}, float64(d) - 0.5},
				{"other", other, [][]int{seq}, 0},
				{"nan", nan, [][]int{seq}, math.NaN()},
			} {
				out := runWideSparseLU(t, cc, d, c.nz, x.m, b, -2, c.lanes, x.hints...)
				want, got := out["dense"], out["sparse"]
				last := got["f"][d*d+d-1]
				switch {
				case math.IsNaN(x.mark):
					if !math.IsNaN(last) {
						t.Errorf("%s: factor not NaN", x.name)
					}
				case x.mark == 0:
					if last != float64(d-1) {
						t.Errorf("%s: last pivot entry %v, want %d (the dense steps)", x.name, last, d-1)
					}
				case last != x.mark:
					t.Errorf("%s: last pivot entry %v, want %v", x.name, last, x.mark)
				}
				zeros := 0
				for _, part := range []string{"f", "x", "xt"} {
					for k := range want[part] {
						u, v := got[part][k], want[part][k]
						if part == "f" && k >= d*d {
							u, v = math.Trunc(u), math.Trunc(v)
						}
						if u != v && !(math.IsNaN(u) && math.IsNaN(v)) {
							t.Fatalf("%s: %s[%d]: sparse %v, dense %v", x.name, part, k, u, v)
						}
						if math.Float64bits(u) != math.Float64bits(v) && u == v {
							zeros++
						}
					}
				}
				if !math.IsNaN(x.mark) {
					t.Logf("%s: pivots %v, zeros of another sign %d", x.name, piv(out), zeros)
				}
			}
		})
	}
}

// TestParsePivots checks Config.WidePivots's form: ParsePivots and
// String round trip, the hints of a factor (none where a row passes it),
// and malformed sequences rejected.
func TestParsePivots(t *testing.T) {
	for _, x := range []struct {
		s    string
		ok   bool
		hint map[int]int // d = 20's interchanges
	}{
		{"", true, nil},
		{"5>6 6>7", true, map[int]int{5: 6, 6: 7}},
		{"0>31", true, nil}, // row 31 past d = 20
		{"0>1 2>9 29>30", true, map[int]int{0: 1, 2: 9}},
		{"6>7 5>6", false, nil},
		{"5>5", false, nil},
		{"5>32", false, nil},
		{"0>1 1>2 2>3 3>4", false, nil},
		{"5-6", false, nil},
	} {
		q, err := ParsePivots(x.s)
		if (err == nil) != x.ok {
			t.Errorf("%q: error %v, want ok %v", x.s, err, x.ok)
			continue
		}
		if !x.ok {
			continue
		}
		if q.String() != strings.Join(strings.Fields(x.s), " ") {
			t.Errorf("%q: String %q", x.s, q.String())
		}
		h := q.hints(20)
		if x.s == "0>1 2>9 29>30" {
			if h != nil {
				t.Errorf("%q: hints %v for d = 20, want none (row 30)", x.s, h)
			}
			continue
		}
		if (h == nil) != (x.hint == nil) {
			t.Fatalf("%q: hints %v, want %v", x.s, h, x.hint)
		}
		for k := 0; h != nil && k < 20; k++ {
			want, ok := x.hint[k]
			if !ok {
				want = k
			}
			if h[0][k] != want {
				t.Errorf("%q: step %d's pivot %d, want %d", x.s, k, h[0][k], want)
			}
		}
	}
}
