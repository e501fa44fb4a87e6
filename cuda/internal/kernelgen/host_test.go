package kernelgen

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
	"github.com/gradsolve-go/gradsolve/ops"
	"github.com/gradsolve-go/gradsolve/tape"
)

// The generated code is valid host C++: these tests compile it with g++
// (kerneltest.GXX) and run it against tape's Eval, so code generation is
// tested on machines without a GPU. They skip where g++ is missing.

var long = flag.Bool("long", false, "run the long host simulations")

// longTests reports whether the long tests run: -long, or
// GRADSOLVE_LONG_TESTS=1 (as package cuda's tests).
func longTests() bool { return *long || os.Getenv("GRADSOLVE_LONG_TESTS") == "1" }

// harness is a host main that runs the map kernels named in kernels on
// records read from argv[1], writing the outputs to argv[2]. A record is
// five int64 (kernel, n, number of inputs, of shared inputs, of outputs)
// followed by the inputs and shared inputs as gs_real.
func harness(kernels []string) string {
	var sb strings.Builder
	sb.WriteString(`
#include <stdio.h>
#include <stdlib.h>
typedef void (*gs_kernel)(long long, const gs_real*, const gs_real*, gs_real*);
static const gs_kernel gs_kernels[] = {` + strings.Join(kernels, ", ") + `};
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb");
  FILE* o = fopen(argv[2], "wb");
  if (!f || !o) return 2;
  long long h[5];
  while (fread(h, sizeof h, 1, f) == 1) {
    gs_real* in = (gs_real*)malloc((h[2] + 1) * sizeof(gs_real));
    gs_real* sh = (gs_real*)malloc((h[3] + 1) * sizeof(gs_real));
    gs_real* out = (gs_real*)malloc((h[4] + 1) * sizeof(gs_real));
    if (fread(in, sizeof(gs_real), h[2], f) != (size_t)h[2] || fread(sh, sizeof(gs_real), h[3], f) != (size_t)h[3]) return 3;
    gs_kernels[h[0]](h[1], in, sh, out);
    fwrite(out, sizeof(gs_real), h[4], o);
    free(in); free(sh); free(out);
  }
  fclose(o);
  return 0;
}
`)
	return sb.String()
}

// runHost generates one translation unit with a map kernel per program,
// compiles it with g++ once, runs every program and returns the outputs,
// [program][output][trajectory].
func runHost(t *testing.T, tps []kerneltest.Program, prec Precision) [][][]float64 {
	t.Helper()
	return runHostWith(t, tps, &SourceSettings{Precision: prec})
}

// runHostWith is runHost with the given settings.
func runHostWith(t *testing.T, tps []kerneltest.Program, set *SourceSettings) [][][]float64 {
	t.Helper()
	return runHostSim(t, tps, set, false)
}

// runHostSim is runHostWith; with sim (lanes mode) the device code of
// every trajectory runs on a warp simulated with 32 threads (kerneltest.WarpSim),
// and the run fails unless every lane returns the same outputs.
func runHostSim(t *testing.T, tps []kerneltest.Program, set *SourceSettings, sim bool) [][][]float64 {
	t.Helper()
	return runHostStaged(t, tps, set, sim, false)
}

// runHostStaged is runHostSim; with stage the functions take vectors'
// elements through the warp's staging row (Source.stage).
func runHostStaged(t *testing.T, tps []kerneltest.Program, set *SourceSettings, sim, stage bool) [][][]float64 {
	t.Helper()
	prec := set.Precision
	src := NewSource(set)
	src.Stage = stage
	kernels := make([]string, len(tps))
	for j, tp := range tps {
		k, err := src.MapKernel(tp.P)
		if err != nil {
			t.Fatalf("program %s: %v", tp.P.Name, err)
		}
		kernels[j] = k
	}
	dir := t.TempDir()
	var exe string
	if stage && !strings.Contains(src.String(), "GS_STAGE(0, u") {
		t.Errorf("stage: no vector staged")
	}
	if sim {
		head, body, _ := strings.Cut(src.String(), "#ifndef GS_PRELUDE_CUH")
		bodies := make([]string, len(kernels))
		for j, k := range kernels {
			bodies[j] = k + "_body"
		}
		file := filepath.Join(dir, "sim.cpp")
		per := LaneWidth
		if src.Tile {
			per = LaneWidth / TileWidth
		}
		main := simHarness(bodies, per)
		if err := os.WriteFile(file, []byte(head+kerneltest.WarpSim+"#ifndef GS_PRELUDE_CUH"+body+main), 0o644); err != nil {
			t.Fatal(err)
		}
		exe = filepath.Join(dir, "sim")
		if out, err := exec.Command(kerneltest.GXX(t), append(append([]string(nil), kerneltest.GXXFlags...), "-std=c++20", "-pthread", "-o", exe, file)...).CombinedOutput(); err != nil {
			t.Fatalf("g++: %v\n%s\nsource in %s", err, kerneltest.FirstLines(string(out), 30), file)
		}
	} else {
		exe = kerneltest.CompileHost(t, dir, src.String()+harness(kernels))
	}

	var rec bytes.Buffer
	put := func(xs []float64) {
		for _, x := range xs {
			if prec == Float32 {
				binary.Write(&rec, binary.LittleEndian, float32(x))
			} else {
				binary.Write(&rec, binary.LittleEndian, x)
			}
		}
	}
	for j, tp := range tps {
		n := tp.N()
		sh := tp.Sh
		if set.Lanes || set.TileMode {
			sh = SharedPad(sh)
		}
		binary.Write(&rec, binary.LittleEndian, []int64{int64(j), int64(n), int64(len(tp.In) * n), int64(len(sh)), int64(len(tp.P.Outputs) * n)})
		for _, col := range tp.In {
			put(col)
		}
		put(sh)
	}
	inFile, outFile := filepath.Join(dir, "in.bin"), filepath.Join(dir, "out.bin")
	if err := os.WriteFile(inFile, rec.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(exe, inFile, outFile).CombinedOutput(); err != nil {
		t.Fatalf("running the generated code: %v\n%s", err, out)
	}
	data, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	r := bytes.NewReader(data)
	res := make([][][]float64, len(tps))
	for j, tp := range tps {
		res[j] = make([][]float64, len(tp.P.Outputs))
		for m := range res[j] {
			res[j][m] = make([]float64, tp.N())
			for i := range res[j][m] {
				if prec == Float32 {
					var v float32
					binary.Read(r, binary.LittleEndian, &v)
					res[j][m][i] = float64(v)
				} else {
					binary.Read(r, binary.LittleEndian, &res[j][m][i])
				}
			}
		}
	}
	if r.Len() != 0 {
		t.Fatalf("the generated code wrote %d bytes too many", r.Len())
	}
	return res
}

func TestPreludeCompiles(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	// Every template instantiated, in both precisions.
	use := `
int main() {
  gs_real f[12] = {4, 1, 0, 1, 3, 1, 0, 1, 2};
  gs_lu_shift<3>(f, f, 0.5, 1);
  gs_lu_factor<3>(f);
  gs_real x[3] = {1, 2, 3};
  gs_lu_solve<3>(x, f);
  gs_lu_solve_t<3>(x, f);
  gs_real s = gs_powi(x[0], -3) + gs_min(x[1], x[2]) + gs_max(x[1], x[2]) + gs_relu(x[0]) +
      gs_sign(x[1]) + gs_sigmoid(x[2]) + gs_softplus(x[0]) + gs_nan();
  return s == s;  // NaN: returns 0
}
`
	for _, prec := range []Precision{Float64, Float32} {
		src := NewSource(&SourceSettings{Precision: prec}).String() + luShift + use
		dir := t.TempDir()
		exe := kerneltest.CompileHost(t, dir, src)
		if out, err := exec.Command(exe).CombinedOutput(); err != nil {
			t.Errorf("precision %d: %v %s", prec, err, out)
		}
	}
}

// TestOpCoverage walks ops' registry: every op must be classified for the
// tests, and emitted by the generator (a C form or a tuple-op case), so a
// new op without a CUDA form fails here.
func TestOpCoverage(t *testing.T) {
	t.Parallel()
	tuple := map[ops.Op]bool{ops.OpInput: true, ops.OpLUFactor: true, ops.OpLUFactorShift: true, ops.OpLUSolve: true, ops.OpLUSolveT: true, ops.OpExtract: true, ops.OpCall: true}
	tps := kerneltest.AllPrograms(t, 1)
	seen := make(map[ops.Op]bool)
	for _, tp := range tps {
		for _, v := range tp.P.Values {
			seen[v.Op] = true
		}
	}
	for op := ops.Op(1); int(op) < ops.NumOps; op++ {
		if _, ok := kerneltest.OpClasses[op]; !ok {
			t.Errorf("op %v is not classified in kerneltest.OpClasses; add it and a test program", op)
		}
		if ops.Lookup(op).C == nil && !tuple[op] {
			t.Errorf("op %v has no C form and the generator has no case for it", op)
		}
		if !seen[op] {
			t.Errorf("op %v appears in no test program", op)
		}
	}
}

func TestHostFloat64(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	tps := kerneltest.AllPrograms(t, 64)
	got := runHost(t, tps, Float64)
	for j, tp := range tps {
		tp.Compare(t, "g++ float64", got[j], tp.Tol)
	}
}

// TestHostLanes runs every test program in lanes mode (one warp per
// trajectory; on the host, lanes as loops): the same results as the
// programs' Eval, bit for bit where that holds one thread per trajectory.
func TestHostLanes(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	tps := kerneltest.AllPrograms(t, 64)
	got := runHostWith(t, tps, &SourceSettings{Lanes: true})
	for j, tp := range tps {
		tp.Compare(t, "g++ lanes", got[j], tp.Tol)
	}
}

// simHarness is harness for the bodies of map kernels run on a simulated
// warp, per lanes per trajectory (32 in lanes mode, 4 in tile mode, where
// a warp runs 32/per trajectories): 32 threads per warp, lane l on
// trajectory first + l/per, each lane writing its own copy of the
// outputs; the lanes of a trajectory must agree (else exit status 4), and
// its first lane's are written out.
func simHarness(bodies []string, per int) string {
	return `
#include <string.h>
typedef void (*gs_body_fn)(long long, long long, const gs_real*, const gs_real*, gs_real*);
static const gs_body_fn gs_bodies[] = {` + strings.Join(bodies, ", ") + `};
int main(int argc, char** argv) {
  const int per = ` + strconv.Itoa(per) + `, tpw = 32 / per;
  FILE* f = fopen(argv[1], "rb");
  FILE* o = fopen(argv[2], "wb");
  if (!f || !o) return 2;
  long long h[5];
  int bad = 0;
  while (fread(h, sizeof h, 1, f) == 1) {
    const long long n = h[1], nout = h[4];
    gs_real* in = (gs_real*)malloc((h[2] + 1) * sizeof(gs_real));
    gs_real* sh = (gs_real*)malloc((h[3] + 1) * sizeof(gs_real));
    std::vector<std::vector<gs_real>> out(32, std::vector<gs_real>(nout + 1));
    std::vector<gs_real> res(nout + 1);
    if (fread(in, sizeof(gs_real), h[2], f) != (size_t)h[2] || fread(sh, sizeof(gs_real), h[3], f) != (size_t)h[3]) return 3;
    for (long long first = 0; first < n; first += tpw) {
      std::barrier<> bar(32);
      gs_sim_bar = &bar;
      std::vector<std::thread> th;
      for (int lane = 0; lane < 32; lane++) th.emplace_back([&, lane] {
        threadIdx.x = lane;
        gs_bodies[h[0]](first + lane / per, n, in, sh, out[lane].data());
      });
      for (auto& t : th) t.join();
      for (long long i = first; i < n && i < first + tpw; i++) {
        const int l0 = per * (int)(i - first);
        for (long long m = 0; m < nout / n; m++) {
          const gs_real v = out[l0][m * n + i];
          for (int q = 1; q < per; q++)
            if (memcmp(&out[l0 + q][m * n + i], &v, sizeof v) != 0) bad = 1;
          res[m * n + i] = v;
        }
      }
    }
    fwrite(res.data(), sizeof(gs_real), nout, o);
    free(in); free(sh);
  }
  fclose(o);
  return bad ? 4 : 0;
}
`
}

// TestLanesWarpSim runs the device form of lanes-mode code (shuffles,
// lanes computing their own elements) for the test programs on a warp
// simulated with threads: every lane ends with the results of Eval.
//
// With stage the vectors go through the warp's staging row, and a program
// whose staged layer is read again after a call of a function that stages
// its own (nestedStaging) checks that callees keep to slots below their
// callers'.
func TestLanesWarpSim(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	// Without longTests, staged only (the engine's default), and 8 of the
	// 40 random exact programs.
	stages := []bool{true}
	if longTests() {
		stages = []bool{false, true}
	}
	for _, stage := range stages {
		t.Run(fmt.Sprintf("stage=%t", stage), func(t *testing.T) {
			t.Parallel()
			tps := append(kerneltest.AllPrograms(t, 3), nestedStaging(t, 3))
			if !longTests() {
				tps = fewExact(tps, 8)
			}
			got := runHostStaged(t, tps, &SourceSettings{Lanes: true}, true, stage)
			for j, tp := range tps {
				tp.Compare(t, "warp sim", got[j], tp.Tol)
			}
		})
	}
}

func TestHostFloat32(t *testing.T) {
	t.Parallel()
	kerneltest.GXX(t)
	var tps []kerneltest.Program
	for _, tp := range kerneltest.AllPrograms(t, 64) {
		if !tp.Float {
			continue
		}
		// The reference runs on the inputs rounded to float32.
		for _, col := range tp.In {
			for i := range col {
				col[i] = float64(float32(col[i]))
			}
		}
		for i := range tp.Sh {
			tp.Sh[i] = float64(float32(tp.Sh[i]))
		}
		tps = append(tps, tp)
	}
	got := runHost(t, tps, Float32)
	for j, tp := range tps {
		tp.Compare(t, "g++ float32", got[j], kerneltest.Tolerance{Rel: 1e-4})
	}
}

// TestSourceDeterministic: the same calls give the same text, and a
// program is emitted once however often it is asked for.
func TestSourceDeterministic(t *testing.T) {
	t.Parallel()
	gen := func() (string, []string) {
		tps := kerneltest.AllPrograms(t, 1)
		src := NewSource(nil)
		var names []string
		for _, tp := range tps[:5] {
			a, err := src.Func(tp.P)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := src.Func(tp.P)
			if a != b {
				t.Errorf("program %s emitted twice: %s, %s", tp.P.Name, a, b)
			}
			names = append(names, a)
		}
		return src.String(), names
	}
	s1, n1 := gen()
	s2, n2 := gen()
	if s1 != s2 || fmt.Sprint(n1) != fmt.Sprint(n2) {
		t.Errorf("two generations of the same programs differ")
	}
	for _, n := range n1 {
		if c := strings.Count(s1, "struct "+outType(n)+" {"); c != 1 {
			t.Errorf("function %s defined %d times", n, c)
		}
	}
}

// TestSourceCalls: a callee is defined once however many calls and
// callers it has, before its first caller, and called at every call.
func TestSourceCalls(t *testing.T) {
	t.Parallel()
	field := kerneltest.LorenzField(t)
	step, scaled := kerneltest.RK4Step(t, field, false), kerneltest.RK4Step(t, field, true)
	src := NewSource(nil)
	for _, p := range []*tape.Program{step, scaled} {
		if _, err := src.MapKernel(p); err != nil {
			t.Fatal(err)
		}
	}
	code := src.String()
	fname, _ := src.Func(field)
	cname := src.Funcs[field.Funcs[0]]
	for _, tc := range []struct {
		what string
		got  int
		want int
	}{
		{"definitions of the field", strings.Count(code, "struct "+outType(fname)+" {"), 1},
		{"definitions of the nested callee", strings.Count(code, "struct "+outType(cname)+" {"), 1},
		{"calls of the field", strings.Count(code, " = "+fname+"("), 8},
		{"calls of the field with gs_sh + 1", strings.Count(code, " = "+fname+"(gs_sh + 1, "), 4},
		{"calls of the nested callee", strings.Count(code, " = "+cname+"(gs_sh, "), 2},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %d, want %d", tc.what, tc.got, tc.want)
		}
	}
	if strings.Index(code, "struct "+outType(cname)) > strings.Index(code, "struct "+outType(fname)) ||
		strings.Index(code, "struct "+outType(fname)) > strings.Index(code, "// program rk4") {
		t.Errorf("a callee is defined after its caller")
	}
	if !strings.Contains(code, "GS_CALLEE "+outType(fname)+" "+fname+"(") {
		t.Errorf("the field is not a GS_CALLEE function")
	}
}

// TestSourceErrors: invalid programs are reported, naming the program.
func TestSourceErrors(t *testing.T) {
	t.Parallel()
	b, x := kerneltest.NewProg("bad", 1, 0)
	b.Add(ops.OpAdd, 0, x[0], 5) // uses a value not defined before it
	b.P.Outputs = []tape.Output{{Name: "o", ID: 1}}
	if _, err := NewSource(nil).Func(b.P); err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("want an error naming program bad, got %v", err)
	}
}

// warpSimMain runs the warp collectives on random lanes and prints the
// largest error against plain sums.
const warpSimMain = `
static double val(int lane, int k) { return (double)((lane * 7919 + k * 104729) % 1000) / 7.0 - 50.0; }
static bool onOf(int lane) { return (lane * 37) % 5 != 0; }
int main() {
  std::barrier<> bar(32);
  gs_sim_bar = &bar;
  const int NS = 70;
  static double acc32a[32], acc32b[32], acc3[3], accNS[NS];
  int maxv[32];
  std::vector<std::thread> th;
  for (int lane = 0; lane < 32; lane++) th.emplace_back([&, lane] {
    threadIdx.x = lane;
    double x[NS];
    for (int k = 0; k < NS; k++) x[k] = val(lane, k);
    gs_acc32(acc32a, x, onOf(lane), 32);
    gs_acc32(acc32b, x, lane == 5, 7);
    gs_warp_add<3>(acc3, x, onOf(lane));
    gs_warp_add<NS>(accNS, x, onOf(lane));
    maxv[lane] = gs_warp_max((lane * 13) % 29);
  });
  for (auto& t : th) t.join();
  double err = 0;
  auto check = [&](double got, double want) { double e = got - want; if (e < 0) e = -e; if (e > err) err = e; };
  for (int k = 0; k < NS; k++) {
    double all = 0;
    for (int lane = 0; lane < 32; lane++) if (onOf(lane)) all += val(lane, k);
    if (k < 32) check(acc32a[k], all);
    if (k < 7) check(acc32b[k], val(5, k));
    if (k >= 7 && k < 32) check(acc32b[k], 0);
    if (k < 3) check(acc3[k], all);
    check(accNS[k], all);
  }
  int bad = 0;
  for (int lane = 0; lane < 32; lane++) bad += maxv[lane] != 28;
  printf("%g %d\n", err, bad);
  return 0;
}
`

// TestWarpCollectives runs the device code of the warp collectives (the
// transposing reduction of shared gradients, by shuffles and through
// shared memory (GS_XPOSE), and the warp maximum) on a warp simulated with
// threads.
func TestWarpCollectives(t *testing.T) {
	t.Parallel()
	for _, xpose := range []bool{false, true} {
		t.Run(fmt.Sprintf("xpose=%t", xpose), func(t *testing.T) {
			t.Parallel()
			src := NewSource(nil)
			if xpose {
				src.Defines = []string{"GS_XPOSE 1"}
			}
			runWarpSim(t, src.String())
		})
	}
}

// runWarpSim compiles the unit src (a prelude) with the warp simulation
// and checks the collectives' results.
func runWarpSim(t *testing.T, src string) {
	cc := kerneltest.GXX(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "warp.cpp")
	// The unit's defines come before the simulation, which reads GS_XPOSE.
	head, body, _ := strings.Cut(src, "#ifndef GS_PRELUDE_CUH")
	if err := os.WriteFile(file, []byte(head+kerneltest.WarpSim+"#ifndef GS_PRELUDE_CUH"+body+warpSimMain), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "warp")
	if out, err := exec.Command(cc, "-std=c++20", "-O1", "-pthread", "-w", "-o", exe, file).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, kerneltest.FirstLines(string(out), 30))
	}
	out, err := exec.Command(exe).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var maxErr float64
	var bad int
	if _, err := fmt.Sscan(string(out), &maxErr, &bad); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if maxErr > 1e-9 || bad != 0 {
		t.Errorf("warp sums off by %g, %d lanes with a wrong maximum", maxErr, bad)
	}
}

// TestCommentOf: a value's comment keeps a short line whole and cuts a
// long one at a space, or at a character boundary, under maxComment bytes.
func TestCommentOf(t *testing.T) {
	t.Parallel()
	long := "v9 = Dot" + strings.Repeat(" v1234", 100)
	runes := strings.Repeat("⁺", 100)
	for _, c := range []struct{ in, want string }{
		{"v12 = Mul v3 v7", "v12 = Mul v3 v7"},
		{"a\nb", "a b"},
		{long, long[:strings.LastIndexByte(long[:maxComment], ' ')] + " …"},
		{runes, strings.Repeat("⁺", maxComment/len("⁺")) + " …"},
	} {
		got := commentOf(c.in)
		if got != c.want || !utf8.ValidString(got) || len(got) > maxComment+len(" …") {
			t.Errorf("commentOf(%.20q…) = %q, want %q", c.in, got, c.want)
		}
	}
}

// nestedStaging is a program whose layer h = tanh(W₁x + b₁) (width 20) is
// taken element by element before and after a call of a network of its
// own vectors (2 → 12 → 2, tanh): out = W₃h + b₃ + 0.5·net(h₀, h₁). In
// lanes mode with staging the call's vectors take slots while h's is held.
func nestedStaging(t testing.TB, n int) kerneltest.Program {
	const wide = 20
	net := kerneltest.TanhNet(t, "inner", 12)
	in := []tape.Input{{Name: "x0"}, {Name: "x1"}}
	nw := wide*5 + 2
	for k := range nw + len(net.Inputs) - 2 {
		in = append(in, tape.Input{Name: fmt.Sprintf("w%d", k), Shared: true})
	}
	p := kerneltest.Trace(t, "nested", in, func(v []tape.V) []tape.V {
		x, w := v[:2], v[2:]
		h := tape.Dense(w[:2*wide], x, w[2*wide:3*wide])
		for i := range h {
			h[i] = h[i].Tanh()
		}
		z := tape.CallFunc(net, append([]tape.V{h[0], h[1]}, w[nw:]...))
		o := w[3*wide : nw]
		out := tape.Dense(o[:2*wide], h, o[2*wide:])
		for c := range out {
			out[c] = out[c].Add(z[c].MulC(0.5))
		}
		return out
	})
	r := rand.New(rand.NewPCG(7, 8))
	ins, sh := kerneltest.RandInputs(p, n, func() float64 { return 2*r.Float64() - 1 })
	return kerneltest.Program{P: p, In: ins, Sh: sh, Tol: kerneltest.Tolerance{Rel: 1e-13}, Float: true}
}

// fewExact returns tps without the random exact programs (kerneltest.AllPrograms)
// past the first keep.
func fewExact(tps []kerneltest.Program, keep int) []kerneltest.Program {
	var out []kerneltest.Program
	for _, tp := range tps {
		var k int
		if n, err := fmt.Sscanf(tp.P.Name, "exact%d", &k); n == 1 && err == nil && k >= keep {
			continue
		}
		out = append(out, tp)
	}
	return out
}
