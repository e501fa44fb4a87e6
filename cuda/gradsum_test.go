package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// gradsCheckSim runs grads.cuh's CUDA branch of gs_g_check on the host
// (blockSim): each block's GS_SIM_THREADS threads as threads of their
// own (__syncthreads a barrier; each warp's shuffles, ballots and votes
// through slots and a barrier of its own; the atomics the compiler's),
// the blocks one after another on the same threads. It reads the blocks
// and the loss terms from argv[1] and writes the check's words and limbs
// to argv[2]; it fails (exit status 5 or 6) where the check through its
// accumulators (gs_gargs.sums, twice) gives other words and limbs or
// leaves them nonzero.
const gradsCheckSim = blockSim + `
std::vector<std::barrier<>*> gs_wbar;
unsigned long long gs_wslot[64][32];
static int gs_w() { return threadIdx.x >> 5; }
static int gs_l() { return threadIdx.x & 31; }
template <class T> static T gs_exch(T v, int src) {
  unsigned long long b = 0;
  memcpy(&b, &v, sizeof v);
  gs_wslot[gs_w()][gs_l()] = b;
  gs_wbar[gs_w()]->arrive_and_wait();
  const unsigned long long r = gs_wslot[gs_w()][src & 31];
  gs_wbar[gs_w()]->arrive_and_wait();
  T out;
  memcpy(&out, &r, sizeof out);
  return out;
}
template <class T> T __shfl_xor_sync(unsigned, T v, int o) { return gs_exch(v, gs_l() ^ o); }
template <class T> T __shfl_sync(unsigned, T v, int src) { return gs_exch(v, src); }
static unsigned __ballot_sync(unsigned, bool p) {
  gs_wslot[gs_w()][gs_l()] = p;
  gs_wbar[gs_w()]->arrive_and_wait();
  unsigned m = 0;
  for (int l = 0; l < 32; l++) m |= gs_wslot[gs_w()][l] ? 1u << l : 0u;
  gs_wbar[gs_w()]->arrive_and_wait();
  return m;
}
static int __all_sync(unsigned, bool p) { return __ballot_sync(0xffffffffu, p) == 0xffffffffu; }
static int __ffs(int x) { return __builtin_ffs(x); }
static unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static int atomicExch(int* p, int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static long long __double_as_longlong(double x) { long long b; memcpy(&b, &x, 8); return b; }
static int atomicOr(int* p, int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
static int atomicMax(int* p, int v) {
  int o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (v > o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return o;
}
` + "#include \"grads.cuh\"\n" + `
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb");
  long long n, blocks;
  if (!f || fread(&n, 8, 1, f) != 1 || fread(&blocks, 8, 1, f) != 1) return 2;
  std::vector<double> terms(n > 0 ? n : 1);
  if (fread(terms.data(), 8, n, f) != (size_t)n) return 3;
  fclose(f);
  std::vector<long long> out(1 + GS_G_LIMBS);
  gs_gargs a;
  memset(&a, 0, sizeof a);
  a.n = n, a.loss = terms.data(), a.out = (int*)out.data();
  for (int w = 0; w < GS_SIM_THREADS / 32; w++) gs_wbar.push_back(new std::barrier<>(32));
  gs_blocks(blocks, GS_SIM_THREADS, [&a] { gs_g_check(a); });
  // Through the accumulators (gs_gargs.sums), twice, the words made
  // garbage before each: the same words and limbs, the sums 0 after.
  std::vector<int> sums(GS_G_SUMS, 0);
  std::vector<long long> again(1 + GS_G_LIMBS);
  for (int rep = 0; rep < 2; rep++) {
    memset(again.data(), 0xa5, 8 * again.size());
    a.out = (int*)again.data(), a.sums = sums.data();
    gs_blocks(blocks, GS_SIM_THREADS, [&a] { gs_g_check(a); });
    if (again != out) return 5;
    for (int s : sums) if (s != 0) return 6;
  }
  FILE* o = fopen(argv[2], "wb");
  if (!o || fwrite(out.data(), 8, out.size(), o) != out.size()) return 4;
  fclose(o);
  return 0;
}
`

// TestHostGradsCheckSimulated runs the CUDA branch of the gradients'
// check (grads.cuh) on simulated blocks and warps: its loss terms' sum
// is the exact sum rounded once (exactSum), bit for bit (also through the
// check's accumulators, the last block moving them: gradsCheckSim), where a warp's
// terms share a limb (the shuffles' path: terms of one size), where
// they do not (the shuffles' rounds, one a first limb: terms over the
// whole range, pk's crossing times on both sides of 2, alternating
// sizes), the check's words and limbs those of the lane-by-lane atomics
// (GS_G_LANE_ATOMICS, Tuning.checkLaneAtomics) bit for bit, with
// zeros and warps of no term, grids of fewer blocks than the terms need
// (the grid-stride loop) and terms not a multiple of a warp; a term that
// is not finite sets the check's bit. TestHostKeepGradsLossSum runs the
// host branch, TestGPUKeepGradsLossSum the device's.
func TestHostGradsCheckSimulated(t *testing.T) {
	needHost(t)
	t.Parallel()
	dir := t.TempDir()
	const threads = 64 // two warps a block: the kernel's code does not depend on the block's size
	defs := []string{fmt.Sprintf("GS_SIM_THREADS=%d", threads), fmt.Sprintf("GS_G_OK=%d", ode.OK)}
	exe := buildSim(t, dir, "sim", gradsCheckSim, "grads.cuh", gradsCuh, defs...)
	// The lane-by-lane atomics of a warp whose terms have several first
	// limbs (Tuning.checkLaneAtomics): the same words and limbs.
	lanes := buildSim(t, dir, "sim-lanes", gradsCheckSim, "grads.cuh", gradsCuh, append(defs, "GS_G_LANE_ATOMICS=1")...)
	rng := rand.New(rand.NewPCG(25, 42))
	gen := func(n int, f func(i int) float64) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = f(i)
		}
		return xs
	}
	cases := []struct {
		name   string
		terms  []float64
		blocks int
		well   bool
	}{
		{"one-size", gen(1000, func(int) float64 { return 0.5 + rng.Float64() }), 16, true},
		{"one-size-strided", gen(5003, func(int) float64 { return 0.5 + rng.Float64() }), 3, true},
		{"signs", gen(777, func(int) float64 { return 1 - 2*rng.Float64() }), 2, true},
		{"wide", gen(2000, func(int) float64 {
			return math.Copysign(math.Ldexp(1+rng.Float64(), rng.IntN(2075)-1075), rng.NormFloat64())
		}), 5, true},
		{"sparse", gen(3000, func(i int) float64 {
			if i%97 != 5 {
				return 0
			}
			return rng.NormFloat64()
		}), 4, true},
		{"few", []float64{1e300, 3, -1e300}, 7, true},
		// pk's crossing times in random order (events_test.go's pkCase):
		// on both sides of 2, two first limbs in most warps.
		{"two-limbs", gen(4000, func(int) float64 { return math.Log((1+rng.Float64())/pkThreshold) / (0.2 + rng.Float64()) }), 6, true},
		{"alternating", gen(1500, func(i int) float64 {
			if i%2 == 0 {
				return -(1 + rng.Float64())
			}
			return math.Ldexp(1+rng.Float64(), 40)
		}), 3, true},
		{"nan", gen(500, func(i int) float64 {
			if i == 321 {
				return math.NaN()
			}
			return 1
		}), 3, false},
	}
	for _, tc := range cases {
		in := make([]byte, 16+8*len(tc.terms))
		binary.LittleEndian.PutUint64(in, uint64(len(tc.terms)))
		binary.LittleEndian.PutUint64(in[8:], uint64(tc.blocks))
		for i, x := range tc.terms {
			binary.LittleEndian.PutUint64(in[16+8*i:], math.Float64bits(x))
		}
		tail := runSim(t, exe, dir, tc.name, in)
		if len(tail) != gradsTail {
			t.Fatalf("%s: %d bytes of the check, want %d", tc.name, len(tail), gradsTail)
		}
		if old := runSim(t, lanes, dir, tc.name+"-lanes", in); !bytes.Equal(tail, old) {
			t.Errorf("%s: the check's words and limbs differ from the lane-by-lane atomics'", tc.name)
		}
		well, _, got := gradsWell(tail)
		if well != tc.well {
			t.Errorf("%s: well %v, want %v", tc.name, well, tc.well)
			continue
		}
		if !well {
			continue
		}
		if want := exactSum(tc.terms); math.Float64bits(got) != math.Float64bits(want) {
			t.Errorf("%s: sum %v, want the exact sum rounded %v", tc.name, got, want)
		}
	}
}

// TestGradsSumWords checks gradsSum's word arithmetic (gradsSumWords)
// against big.Int and big.Float's (gradsSumBig) bit for bit, on limbs as
// the check leaves them and beyond: small and large signed limbs (carries
// across several digits), sums of either sign, one or few limbs at any
// place (subnormal sums, sums past float64's range, the range's edges),
// ties at the 53rd bit broken by a far sticky bit or by evenness, and a
// limb whose carry overflows int64 (the big path).
func TestGradsSumWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(48, 6))
	put := func(l []int64) []byte {
		b := make([]byte, 8*gradsLimbs)
		for k, v := range l {
			binary.LittleEndian.PutUint64(b[8*k:], uint64(v))
		}
		return b
	}
	var cases [][]int64
	for range 3000 {
		l := make([]int64, gradsLimbs)
		switch rng.IntN(6) {
		case 0: // dense, small
			for k := range l {
				l[k] = rng.Int64N(1<<33) - 1<<32
			}
		case 1: // dense, large: carries
			for k := range l {
				l[k] = rng.Int64() - 1<<62
			}
		case 2: // a few at one place, one sign
			k0, s := rng.IntN(gradsLimbs-2), int64(1-2*rng.IntN(2))
			for i := range 3 {
				l[k0+i] = s * rng.Int64N(1<<48)
			}
		case 3: // low limbs: subnormal and small normal sums
			for k := range 3 {
				l[k] = rng.Int64N(1<<40) - 1<<39
			}
		case 4: // high limbs: past the range and at its edge
			for k := gradsLimbs - 3; k < gradsLimbs; k++ {
				l[k] = rng.Int64N(1<<34) - 1<<33
			}
		case 5: // a tie at the 53rd bit: 2^53+1 halves, a sticky bit far below, or none
			k0 := 2 + rng.IntN(gradsLimbs-4)
			l[k0] = (1<<52+int64(rng.IntN(4)))<<1 | 1 // 54 bits, the last 1: a tie
			if rng.IntN(2) == 0 {
				l[0] = 1 // sticky
			}
			if rng.IntN(2) == 0 {
				for k := range l {
					l[k] = -l[k]
				}
			}
		}
		cases = append(cases, l)
	}
	edge := make([]int64, gradsLimbs)
	edge[gradsLimbs-1] = math.MaxInt64
	edge[gradsLimbs-2] = math.MaxInt64 // its carry overflows the next limb
	cases = append(cases, make([]int64, gradsLimbs), edge)
	big := 0
	for i, l := range cases {
		b := put(l)
		want := gradsSumBig(b)
		got, ok := gradsSumWords(b)
		if !ok {
			big++
			got = gradsSum(b)
		}
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("case %d (%v): %v (%#x), want %v (%#x)", i, l, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	}
	if _, ok := gradsSumWords(put(edge)); ok {
		t.Error("a carry past int64 taken in words")
	}
	t.Logf("%d cases, %d through big.Int", len(cases), big)
}

// BenchmarkGradsSum times gradsSum on the limbs of a kept pk call on the
// events suite's inputs (65,536 crossing times in [1.16, 10.4]): in
// words (gradsSumWords, the default) and through big.Int (gradsSumBig,
// before session 48), a kept call's host work after its read.
//
//	go test ./cuda -run '^$' -bench GradsSum -count 5
func BenchmarkGradsSum(b *testing.B) {
	var acc [gradsLimbs]int64
	for i := range 1 << 16 {
		m, e := math.Frexp(1.16 + 9.24*float64(i)/(1<<16)) // m·2^e, m in [0.5, 1)
		mant := uint64(math.Ldexp(m, 53))                  // the 53-bit integer mantissa
		ef := e + 1021                                     // |m|·2^E with E = biased exponent − 1 (grads.cuh)
		o := uint(ef & 31)
		lo, hi := mant<<o, uint64(0)
		if o > 0 {
			hi = mant >> (64 - o)
		}
		k := ef >> 5
		acc[k] += int64(lo & 0xffffffff)
		acc[k+1] += int64(lo >> 32)
		acc[k+2] += int64(hi)
	}
	limbs := make([]byte, 8*gradsLimbs)
	for k, v := range acc {
		binary.LittleEndian.PutUint64(limbs[8*k:], uint64(v))
	}
	for _, x := range []struct {
		name string
		f    func([]byte) float64
	}{{"words", gradsSum}, {"big", gradsSumBig}} {
		b.Run(x.name, func(b *testing.B) {
			b.ReportAllocs()
			s := 0.0
			for range b.N {
				s += x.f(limbs)
			}
			if want := float64(1<<16) * (1.16 + 9.24*0.5); math.Abs(s/float64(b.N)-want) > 1e-3*want {
				b.Fatalf("sum %v, want about %v", s/float64(b.N), want)
			}
		})
	}
}
