package kerneltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The generated code is valid host C++: tests compile it with g++ and
// run it, so code generation is tested on machines without a GPU. They
// skip where g++ is missing.

// GXX returns the path of g++, or skips the test.
func GXX(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("g++ not found; the host C++ tests need it")
	}
	return path
}

// GXXFlags keep IEEE semantics: no contraction into FMA, no fast math.
var GXXFlags = []string{"-std=c++17", "-O1", "-ffp-contract=off", "-fno-fast-math", "-w"}

// CompileHost compiles src with g++ into an executable in dir.
func CompileHost(t *testing.T, dir, src string) string {
	t.Helper()
	cc := GXX(t)
	file := filepath.Join(dir, "gen.cpp")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "gen")
	cmd := exec.Command(cc, append(GXXFlags, "-o", exe, file)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("g++ failed: %v\n%s\nsource in %s", err, FirstLines(string(out), 40), file)
	}
	return exe
}

// FirstLines returns the first n lines of s (a compiler's messages).
func FirstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// WarpSim simulates a warp on the host: 32 threads, shuffles through a
// shared slot array and a barrier (a barrier of their own for the
// collectives of a group of consecutive lanes, a mask below the warp's),
// or a block of up to 8 such warps (the wide layout's trajectory on
// several warps, GS_WIDE_WARPS: each warp's collectives on its own
// slots and barrier, gs_sim_wbars, the block's barrier
// gs_sim_syncthreads and exchange slots gs_sim_wx),
// atomics under a lock, and turns that order the trajectories of a warp's
// groups of lanes in the wide layout (gs_sim_turn). It is defined
// before the prelude, whose warp collectives (GS_WARP_SIM) then run the
// device code. Its variables are inline (one per program, not per
// translation unit), so that the units of a kernel compiled in parts
// share the warp.
const WarpSim = `
#include <atomic>
#include <barrier>
#include <mutex>
#include <thread>
#include <vector>
#include <stdio.h>
#include <stdlib.h>
#define GS_WARP_SIM 1
struct gs_sim_idx { unsigned x; };
inline thread_local gs_sim_idx threadIdx;
inline std::barrier<>* gs_sim_bar;
inline double gs_sim_slot[32 * 8];
inline std::mutex gs_sim_mu;
// gs_sim_wbars[w] is warp w's barrier in a simulated block of several
// warps (warp 0's is gs_sim_bar), gs_sim_bbar the block's, gs_sim_wx
// the block's exchange slots (the wide layout's GS_WX).
inline std::barrier<>* gs_sim_wbars[8];
inline std::barrier<>* gs_sim_bbar;
inline double gs_sim_wx[8];
static void gs_sim_syncthreads() { gs_sim_bbar->arrive_and_wait(); }
// gs_sim_warp_bar is the calling thread's warp's barrier, gs_sim_base
// its warp's first slot.
static std::barrier<>* gs_sim_warp_bar() {
  const unsigned w = threadIdx.x >> 5;
  return w == 0 ? gs_sim_bar : gs_sim_wbars[w];
}
static int gs_sim_base() { return (int)(threadIdx.x & ~31u); }
// gs_sim_gbar[k][s] is the barrier of the 2^k lanes from lane s (k < 5),
// for the collectives of a mask of consecutive lanes below the warp
// (the wide layout's groups, GS_WIDE_LANES): the warp's gs_sim_bar for
// the whole warp.
inline std::barrier<>* gs_sim_gbar[5][32];
inline bool gs_sim_gbar_made = [] {
  for (int k = 0; k < 5; k++)
    for (int s = 0; s < 32; s += 1 << k) gs_sim_gbar[k][s] = new std::barrier<>(1 << k);
  return true;
}();
static std::barrier<>* gs_sim_barrier(unsigned m) {
  if (m == 0xffffffffu) return gs_sim_warp_bar();
  return gs_sim_gbar[__builtin_ctz(__builtin_popcount(m))][__builtin_ctz(m)];
}
template <class T> T __shfl_xor_sync(unsigned m, T v, int o) {
  const int lane = threadIdx.x & 31;
  std::barrier<>* bar = gs_sim_barrier(m);
  gs_sim_slot[gs_sim_base() + lane] = (double)v;
  bar->arrive_and_wait();
  T r = (T)gs_sim_slot[gs_sim_base() + (lane ^ o)];
  bar->arrive_and_wait();
  return r;
}
static int __any_sync(unsigned, bool p) {
  const int lane = threadIdx.x & 31;
  gs_sim_slot[gs_sim_base() + lane] = p ? 1 : 0;
  gs_sim_warp_bar()->arrive_and_wait();
  int any = 0;
  for (int l = 0; l < 32; l++) any |= gs_sim_slot[gs_sim_base() + l] != 0;
  gs_sim_warp_bar()->arrive_and_wait();
  return any;
}
template <class T> T __shfl_sync(unsigned m, T v, int src, int width = 32) {
  const int lane = threadIdx.x & 31;
  std::barrier<>* bar = gs_sim_barrier(m);
  gs_sim_slot[gs_sim_base() + lane] = (double)v;
  bar->arrive_and_wait();
  T r = (T)gs_sim_slot[gs_sim_base() + ((lane & ~(width - 1)) | (src & (width - 1)))];
  bar->arrive_and_wait();
  return r;
}
static void __syncwarp() { gs_sim_warp_bar()->arrive_and_wait(); }
static void __syncwarp(unsigned m) { gs_sim_barrier(m)->arrive_and_wait(); }
inline double gs_sim_slot2[32];
// gs_sim_mma is the m8n8k4 float64 product D = A·B + D (see gs_mma884):
// each lane's C element is the fma chain of its row's four terms in k
// order, as the tensor cores round.
static void gs_sim_mma(double* d, double a, double b) {
  const int lane = threadIdx.x & 31, r = lane >> 2, q = lane & 3;
  gs_sim_slot[lane] = a;
  gs_sim_slot2[lane] = b;
  gs_sim_bar->arrive_and_wait();
  double d0 = d[0], d1 = d[1];
  for (int k = 0; k < 4; k++) {
    const double ark = gs_sim_slot[4 * r + k];
    d0 = __builtin_fma(ark, gs_sim_slot2[4 * (2 * q) + k], d0);
    d1 = __builtin_fma(ark, gs_sim_slot2[4 * (2 * q + 1) + k], d1);
  }
  gs_sim_bar->arrive_and_wait();
  d[0] = d0;
  d[1] = d1;
}
#ifdef GS_XPOSE
inline double gs_smem[32 * 33];  // one warp's transposition scratch
#elif defined(GS_STAGE_LEN)
inline double gs_smem[GS_STAGE_LEN];  // one warp's staging row
#endif
template <class T> T atomicAdd(T* a, T v) {
  std::lock_guard<std::mutex> g(gs_sim_mu);
  T old = *a;
  *a += v;
  return old;
}
// gs_sim_turn orders the wide layout's trajectories on groups of lanes
// (GS_WIDE_LANES: several a warp, running at once) where their order
// shows: trajectory i waits for its turn (gs_sim_turn_wait), then passes
// it to i + 1 (gs_sim_turn_pass); a launch starts at turn 0
// (gs_sim_turn_start). The waiting threads sleep (a spin would take the
// CPUs from the group whose turn it is).
inline std::atomic<long long> gs_sim_turn{0};
static void gs_sim_turn_start() { gs_sim_turn.store(0); }
static void gs_sim_turn_wait(long long i) {
  for (long long t = gs_sim_turn.load(); t != i; t = gs_sim_turn.load()) gs_sim_turn.wait(t);
}
static void gs_sim_turn_pass(long long i) {
  gs_sim_turn.store(i + 1);
  gs_sim_turn.notify_all();
}
`
