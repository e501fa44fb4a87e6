package cuda

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen/kerneltest"
)

// The tests of kernel generation on the host (g++, a simulated warp) are
// package kernelgen's; these are the host compiler's helpers the engine's
// tests use (kerneltest).

// gxx returns the path of g++, or skips the test.
func gxx(t *testing.T) string { return kerneltest.GXX(t) }

// firstLines returns the first n lines of s.
func firstLines(s string, n int) string { return kerneltest.FirstLines(s, n) }

// warpSim simulates a warp on the host (kerneltest.WarpSim).
const warpSim = kerneltest.WarpSim

// blockSim is the C++ the simulations of a kernel's CUDA branch on
// blocks of threads begin with (gradsCheckSim, trainSumSim): CUDA's
// names for a thread's place (threadIdx and blockIdx each thread's own,
// blockDim and gridDim shared), __syncthreads a barrier of the block's
// threads (gs_bar), shared memory static, and the kernels' function
// qualifiers. gs_blocks runs the blocks.
const blockSim = `
#include <stdio.h>
#include <string.h>
#include <barrier>
#include <thread>
#include <vector>
#define GS_CUDA 1
#define GS_DEVICE static inline
#define GS_GLOBAL static
#define __shared__ static
struct gs_dim3 { unsigned x, y, z; };
thread_local gs_dim3 threadIdx, blockIdx;
gs_dim3 blockDim, gridDim;
std::barrier<>* gs_bar;
static void __syncthreads() { gs_bar->arrive_and_wait(); }
static unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
// gs_blocks runs kernel() on blocks blocks of threads threads: the blocks
// one after another on the same threads, which meet after each block
// (the block's shared memory is the next block's).
template <class F> static void gs_blocks(long long blocks, int threads, F kernel) {
  gridDim.x = blocks, blockDim.x = threads;
  std::barrier<> br(threads);
  gs_bar = &br;
  std::vector<std::thread> th;
  for (int t = 0; t < threads; t++) th.emplace_back([&br, &kernel, t, blocks] {
    for (long long b = 0; b < blocks; b++) {
      threadIdx.x = t, blockIdx.x = b;
      kernel();
      br.arrive_and_wait();
    }
  });
  for (auto& t : th) t.join();
}
`

// buildSim writes a block simulation's C++ source src (blockSim, its own
// lines and an #include of header) as name.cpp in dir, beside header
// with its text headerSrc, compiles it with g++ (C++20, -O1, threads,
// no contracted multiply-adds) and the -D definitions defs, and returns
// the executable's path. It skips the test where g++ is missing.
func buildSim(t *testing.T, dir, name, src, header, headerSrc string, defs ...string) string {
	t.Helper()
	cc := gxx(t)
	file, exe := filepath.Join(dir, name+".cpp"), filepath.Join(dir, name)
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, header), []byte(headerSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-std=c++20", "-O1", "-pthread", "-ffp-contract=off", "-w"}
	for _, d := range defs {
		args = append(args, "-D"+d)
	}
	if out, err := exec.Command(cc, append(args, "-o", exe, file)...).CombinedOutput(); err != nil {
		t.Fatalf("g++: %v\n%s", err, firstLines(string(out), 30))
	}
	return exe
}

// runSim runs the simulation exe on the input in (a file name.in in
// dir, its first argument) and returns what it wrote to its second
// argument (name.out).
func runSim(t *testing.T, exe, dir, name string, in []byte) []byte {
	t.Helper()
	inF, outF := filepath.Join(dir, name+".in"), filepath.Join(dir, name+".out")
	if err := os.WriteFile(inF, in, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(exe, inF, outF).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	raw, err := os.ReadFile(outF)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
