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

// TestWideLU runs the wide layout's LU helpers (gs_wide_lu_shift,
// gs_wide_lu_factor, gs_wide_lu_solve, gs_wide_lu_solve_t) on a
// simulated warp against the thread layout's (gs_lu_shift, gs_lu_factor,
// gs_lu_solve, gs_lu_solve_t) on seeded random matrices W = I + s·M of d
// = 1, 3, 20, 33 (past a warp) and 64, and on the cases that test the
// pivoting and the failures: a column of equal magnitudes (the first row
// of the largest is the pivot), a NaN or an infinite entry and a
// singular matrix (a factor of NaNs, solutions of NaNs), a padded step
// (live = 0: W = I). The shifted matrices and
// the factors (pivots included) must be the thread layout's bit for bit;
// the solutions of W x = b and Wᵀ x = b within 1e-13 relative (their
// backward triangles subtract in another order), NaN where NaN, and bit
// for bit with GS_WIDE_LU_SEQ defined.
func TestWideLU(t *testing.T) {
	t.Parallel()
	cc := kerneltest.GXX(t)
	type tc struct {
		name    string
		d       int
		m       []float64 // row-major M
		s, live float64
	}
	r := rand.New(rand.NewPCG(36, 1))
	rnd := func(d int) []float64 {
		m := make([]float64, d*d)
		for k := range m {
			m[k] = r.NormFloat64()
		}
		return m
	}
	var cases []tc
	for _, d := range []int{1, 3, 20, 33, 64} {
		cases = append(cases, tc{fmt.Sprintf("random-%d", d), d, rnd(d), -0.7, 1})
	}
	ties := make([]float64, 5*5)
	for k := range ties {
		ties[k] = float64(1 - 2*((k*7)%3%2)) // ±1: every column's magnitudes equal
	}
	cases = append(cases, tc{"ties", 5, ties, 1, 1})
	nan := rnd(6)
	nan[4*6+1] = math.NaN()
	cases = append(cases, tc{"nan", 6, nan, 1, 1})
	inf := rnd(4)
	inf[2] = math.Inf(1)
	cases = append(cases, tc{"inf", 4, inf, 1, 1})
	sing := rnd(20)
	for i := 0; i < 20; i++ {
		sing[i*20+7] = 0
	}
	cases = append(cases, tc{"singular", 20, sing, 1e30, 1})
	cases = append(cases, tc{"padded", 20, rnd(20), -0.5, 0})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := make([]float64, c.d)
			for k := range b {
				b[k] = r.NormFloat64()
			}
			out := runWideLU(t, cc, c.d, c.m, b, c.s, c.live, false)
			want, got := out["thread"], out["wide"]
			seq := runWideLU(t, cc, c.d, c.m, b, c.s, c.live, true)["wide"]
			same := func(what string, got map[string][]float64, parts ...string) {
				for _, part := range parts {
					for k := range want[part] {
						x, y := got[part][k], want[part][k]
						if math.Float64bits(x) != math.Float64bits(y) && !(math.IsNaN(x) && math.IsNaN(y)) {
							t.Fatalf("%s %s[%d]: %v, thread %v (want the same bits)", what, part, k, x, y)
						}
					}
				}
			}
			same("wide", got, "w", "f")
			same("wide with GS_WIDE_LU_SEQ", seq, "w", "f", "x", "xt")
			failed := math.IsNaN(want["f"][c.d*c.d])
			if want := c.name == "singular" || c.name == "inf" || c.name == "nan"; failed != want {
				t.Errorf("factor failed %v, want %v", failed, want)
			}
			for _, part := range []string{"x", "xt"} {
				for k := range want[part] {
					x, y := got[part][k], want[part][k]
					if math.IsNaN(y) != math.IsNaN(x) || !(math.Abs(x-y) <= 1e-13*math.Max(math.Abs(y), 1)) && !math.IsNaN(y) {
						t.Errorf("%s[%d]: wide %v, thread %v", part, k, x, y)
					}
				}
			}
		})
	}
}

// runWideLU compiles and runs both layouts' LU helpers on M (d×d, row
// major), s, live and b (with GS_WIDE_LU_SEQ if seq), and returns, by layout, the shifted matrix w,
// the factor f (the d² entries row-major, then the d pivots) and the
// solutions x and xt.
func runWideLU(t *testing.T, cc string, d int, m, b []float64, s, live float64, seq bool) map[string]map[string][]float64 {
	t.Helper()
	vec := func(xs []float64) string {
		out := make([]string, len(xs))
		for k, x := range xs {
			switch {
			case math.IsNaN(x):
				out[k] = "gs_nan()"
			case math.IsInf(x, 1):
				out[k] = "1.0 / 0.0"
			default:
				out[k] = strconv.FormatFloat(x, 'x', -1, 64)
			}
		}
		return "{" + strings.Join(out, ", ") + "}"
	}
	ld := d | 1
	var sb strings.Builder
	if seq {
		sb.WriteString("#define GS_WIDE_LU_SEQ 1\n")
	}
	sb.WriteString(kerneltest.WarpSim)
	sb.WriteString(prelude)
	sb.WriteString(luShift)
	sb.WriteString(wideHelper)
	sb.WriteString(wideLUHelper)
	fmt.Fprintf(&sb, `
const int D = %d, LD = %d;
static gs_real M[D * D] = %s, B[D] = %s;
static gs_real wf[D * LD + D], wx[D], wxt[D];
static void put(const char* what, const gs_real* x, int n) {
  for (int k = 0; k < n; k++) printf("%%s %%a\n", what, x[k]);
}
int main() {
  const gs_real s = %s, live = %s;
  // The thread layout.
  static gs_real f[D * D + D], x[D], xt[D];
  gs_lu_shift<D>(f, M, s, live);
  put("thread.w", f, D * D);
  gs_lu_factor<D>(f);
  put("thread.f", f, D * D + D);
  for (int k = 0; k < D; k++) x[k] = xt[k] = B[k];
  gs_lu_solve<D>(x, f);
  gs_lu_solve_t<D>(xt, f);
  put("thread.x", x, D);
  put("thread.xt", xt, D);
  // The wide layout, on a simulated warp.
  for (int q = 0; q < D * D; q++) wf[GS_WLU_AT(q, D)] = M[q];
  static gs_real ws[D * D];
  std::barrier<> bar(32);
  gs_sim_bar = &bar;
  std::vector<std::thread> th;
  for (int lane = 0; lane < 32; lane++)
    th.emplace_back([&, lane] {
      threadIdx.x = lane;
      gs_wide_lu_shift<D>(wf, s, live);
      GS_SYNCWARP();
      if (lane == 0)
        for (int q = 0; q < D * D; q++) ws[q] = wf[GS_WLU_AT(q, D)];
      gs_wide_lu_factor<D>(wf);
      for (int k = lane; k < D; k += 32) wx[k] = wxt[k] = B[k];
      gs_wide_lu_solve<D>(wx, wf);
      gs_wide_lu_solve_t<D>(wxt, wf);
    });
  for (auto& x : th) x.join();
  put("wide.w", ws, D * D);
  for (int q = 0; q < D * D; q++) ws[q] = wf[GS_WLU_AT(q, D)];
  put("wide.f", ws, D * D);
  put("wide.f", wf + D * LD, D);
  put("wide.x", wx, D);
  put("wide.xt", wxt, D);
  return 0;
}
`, d, ld, vec(m), vec(b), strconv.FormatFloat(s, 'x', -1, 64), strconv.FormatFloat(live, 'x', -1, 64))
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
	res := map[string]map[string][]float64{"thread": {}, "wide": {}}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		layout, part, _ := strings.Cut(f[0], ".")
		x, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			x = math.NaN() // "nan", "-nan"
		}
		res[layout][part] = append(res[layout][part], x)
	}
	for _, l := range []string{"thread", "wide"} {
		if len(res[l]["f"]) != d*d+d || len(res[l]["x"]) != d || len(res[l]["xt"]) != d || len(res[l]["w"]) != d*d {
			t.Fatalf("%s: the harness printed %d, %d, %d, %d values", l, len(res[l]["w"]), len(res[l]["f"]), len(res[l]["x"]), len(res[l]["xt"]))
		}
	}
	return res
}
