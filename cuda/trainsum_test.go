package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// trainSumSim runs train.cuh's CUDA branch of gs_t_sum on the host
// (blockSim): each block's GS_TB threads as threads of their own
// (__syncthreads a barrier, the atomics the compiler's), the blocks one
// after another on the same threads. It reads the inputs from argv[1]
// and writes the sum block after a mode-0 and a mode-1 sum to argv[2].
const trainSumSim = blockSim + `
#include <math.h>
#define __device__
static void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
static unsigned long long atomicExch(unsigned long long* p, unsigned long long v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static unsigned long long atomicMax(unsigned long long* p, unsigned long long v) {
  unsigned long long o = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (v > o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {}
  return o;
}
` + "#include \"train.cuh\"\n" + `
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb");
  long long n;
  if (!f || fread(&n, 8, 1, f) != 1) return 2;
  std::vector<int> status(n), flags(n), acc(n);
  std::vector<double> terms(n), src(n), partial(n / GS_TCH + 1), sum(32);
  if (fread(status.data(), 4, n, f) != (size_t)n || fread(flags.data(), 4, n, f) != (size_t)n || fread(acc.data(), 4, n, f) != (size_t)n ||
      fread(terms.data(), 8, n, f) != (size_t)n || fread(src.data(), 8, n, f) != (size_t)n || fread(sum.data(), 8, 32, f) != 32) return 3;
  fclose(f);
  gs_targs a;
  memset(&a, 0, sizeof a);
  a.n = n, a.count = n, a.scale = 0.25;
  a.status = status.data(), a.flags = flags.data(), a.acc = acc.data(), a.terms = terms.data(), a.src = src.data();
  a.partial = partial.data(), a.sum = sum.data();
  for (int mode = 0; mode < 2; mode++) {
    a.mode = mode, a.dst = a.sum + mode;
    gs_blocks(n > 0 ? (n + GS_TCH - 1) / GS_TCH : 1, GS_TB, [&a] { gs_t_sum(a); });
  }
  FILE* o = fopen(argv[2], "wb");
  if (!o || fwrite(sum.data(), 8, 32, o) != 32) return 4;
  fclose(o);
  return 0;
}
`

// TestHostTrainSumSimulated checks that the CUDA branch of the fused
// chunked sum (gs_t_sum, on simulated blocks: trainSumSim) gives the
// two-pass sum's order bit for bit: each thread's
// strided run of its block's chunk, the block's tree, then each thread a
// contiguous run of the partials and the tree again (the arithmetic of
// the former gs_t_chunks and gs_t_total, written out here); the last
// block moves the counters into the summary and zeroes them and the
// ticket.
func TestHostTrainSumSimulated(t *testing.T) {
	needHost(t)
	t.Parallel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(8, 9))
	// The kernels' blocks, and blocks of 32 threads and chunks of 64
	// elements, for sums of more chunks than a block has threads.
	for _, geo := range []struct {
		block, chunk int
		ns           []int
	}{
		{trainBlock, trainChunk, []int{1, 300, trainChunk, 5*trainChunk + 17}},
		{32, 64, []int{32 * 64, 45*64 + 5, 100 * 64}},
	} {
		exe := buildSim(t, dir, fmt.Sprintf("sim%d", geo.block), trainSumSim, "train.cuh", trainSource,
			fmt.Sprintf("GS_TB=%d", geo.block), fmt.Sprintf("GS_TCH=%d", geo.chunk))
		for _, n := range geo.ns {
			status, flags, acc := make([]int32, n), make([]int32, n), make([]int32, n)
			terms, sq := make([]float64, n), make([]float64, n)
			var failed, over, maxAcc uint64
			for i := range n {
				terms[i] = math.Exp(8 * rng.NormFloat64())
				sq[i] = rng.NormFloat64()
				acc[i] = int32(rng.IntN(1000))
				maxAcc = max(maxAcc, uint64(acc[i]))
				switch rng.IntN(20) {
				case 0:
					flags[i] = 2
					over++
				case 1:
					status[i] = 1
					failed++
				case 2:
					flags[i] = 1 // stiff
					failed++
				}
			}
			in := binary.LittleEndian.AppendUint64(nil, uint64(n))
			for _, a := range [][]int32{status, flags, acc} {
				for _, v := range a {
					in = binary.LittleEndian.AppendUint32(in, uint32(v))
				}
			}
			for _, a := range [][]float64{terms, sq} {
				in = append(in, f64bytes(a)...)
			}
			var sum [32]uint64
			sum[swAcc+tcNonFinite] = 7 // an update's count, moved by the mode-0 sum
			for _, v := range sum {
				in = binary.LittleEndian.AppendUint64(in, v)
			}
			raw := runSim(t, exe, dir, fmt.Sprintf("n%d-b%d", n, geo.block), in)
			word := func(i int) uint64 { return binary.LittleEndian.Uint64(raw[8*i:]) }
			squares := make([]float64, n)
			for i, v := range sq {
				squares[i] = v * v
			}
			for _, c := range []struct {
				what string
				got  float64
				want float64
			}{
				{"loss", math.Float64frombits(word(0)), twoPassSum(terms, geo.block, geo.chunk) * 0.25},
				{"Σg²", math.Float64frombits(word(1)), twoPassSum(squares, geo.block, geo.chunk) * 0.25},
			} {
				if math.Float64bits(c.got) != math.Float64bits(c.want) {
					t.Errorf("blocks of %d, n = %d: %s %v, the two passes' order gives %v", geo.block, n, c.what, c.got, c.want)
				}
			}
			if got, want := [4]uint64{word(2 + tcFailed), word(2 + tcOver), word(2 + tcMaxAcc), word(2 + tcNonFinite)}, [4]uint64{failed, over, maxAcc, 7}; got != want {
				t.Errorf("n = %d: counters (failed, over, max accepted, non-finite) %v, want %v", n, got, want)
			}
			for i := swAcc; i <= swTicket; i++ {
				if word(i) != 0 {
					t.Errorf("n = %d: word %d of the sum block is %d after the sums, want 0", n, i, word(i))
				}
			}
		}
	}
}

// twoPassSum is the two-pass chunked sum's order on a GPU with blocks of
// block threads and chunks of chunk elements: block c sums chunk c,
// thread t the elements t, t + block, … of it, then the block's tree; one
// block sums the partials, thread t a contiguous run of ⌈chunks/block⌉,
// then the tree.
func twoPassSum(x []float64, block, chunk int) float64 {
	tree := func(red []float64) float64 {
		for w := block / 2; w > 0; w >>= 1 {
			for t := range w {
				red[t] += red[t+w]
			}
		}
		return red[0]
	}
	chunks := max(1, (len(x)+chunk-1)/chunk)
	partial := make([]float64, chunks)
	for c := range chunks {
		lo, hi := c*chunk, min((c+1)*chunk, len(x))
		red := make([]float64, block)
		for t := range block {
			for k := lo + t; k < hi; k += block {
				red[t] += x[k]
			}
		}
		partial[c] = tree(red)
	}
	per := (chunks + block - 1) / block
	red := make([]float64, block)
	for t := range block {
		for c := t * per; c < (t+1)*per && c < chunks; c++ {
			red[t] += partial[c]
		}
	}
	return tree(red)
}
