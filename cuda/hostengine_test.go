package cuda

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda/internal/kernelgen"
	"github.com/gradsolve-go/gradsolve/internal/cputime"
	"github.com/gradsolve-go/gradsolve/ode"
)

// The host backend runs the engine's kernels on the CPU: it compiles the
// kernel source (the text NVRTC compiles, its qualifiers as host C++) with
// g++ together with a small main, and runs each launch as a process that
// reads the launch's argument words and arena from a file, runs the
// kernel (a loop over the trajectories) and writes the arena back. The
// executor above it is the GPU engine's own: chunking, record buffers and
// reruns, layouts and result assembly are tested on machines without a GPU.

// Engines on the host backend, registered for the tests.
//
// cuda-host-sim runs each launch on one warp simulated with 32 threads
// (warpSim): the device form of the kernels' warp code (tile mode's
// lockstep, shuffles and tensor-core products) on the host.
var (
	hostF64 = &Engine{name: "cuda-host", prec: Float64, be: newHostBackend(1 << 30)}
	hostF32 = &Engine{name: "cuda-host-f32", prec: Float32, be: newHostBackend(1 << 30)}
	hostSim = &Engine{name: "cuda-host-sim", prec: Float64, be: newSimBackend(1 << 30)}
	// cuda-host-sim-227k is cuda-host-sim with an H100's shared memory
	// per block (227 KiB, opted in), for the layouts' choices that depend
	// on it.
	hostSimBig = &Engine{name: "cuda-host-sim-227k", prec: Float64, be: func() *hostBackend {
		b := newSimBackend(1 << 30)
		b.shared = 227 << 10
		return b
	}()}
)

func init() {
	ode.Register(hostF64)
	ode.Register(hostF32)
	ode.Register(hostSim)
	ode.Register(hostSimBig)
}

// hostDir holds the compiled host kernels of the test process.
var (
	hostDirOnce sync.Once
	hostDir     string
	hostDirErr  error
)

func TestMain(m *testing.M) {
	// The device tests compare kernels' results with the CPU engine's and
	// count their launches: the registered engines wait for their
	// compiles (a first call would otherwise run on the CPU engine; see
	// tier.go), as do tuned's engines on them unless a test of tiered
	// calls asks otherwise (TestGPUColdStart's phase "tiered").
	for _, e := range registered {
		tun := envTuning()
		tun.WaitForCompile = true
		e.SetTuning(tun)
	}
	code := m.Run()
	if hostDir != "" && os.Getenv("GRADSOLVE_KEEP_HOST") == "" {
		os.RemoveAll(hostDir)
	}
	os.Exit(code)
}

// hostMainOf returns the main function of a host kernel executable, which
// runs the kernel with the statements run (the launch's arguments in a).
func hostMainOf(run string) string {
	return `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static_assert(sizeof(GS_HOST_ARGS) == 8 * GS_HOST_WORDS, "the argument struct is not made of 8-byte words");
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  FILE* f = fopen(argv[1], "rb");
  if (!f) return 3;
  unsigned long long w[GS_HOST_WORDS], base, size;
  if (fread(w, 8, GS_HOST_WORDS, f) != GS_HOST_WORDS || fread(&base, 8, 1, f) != 1 || fread(&size, 8, 1, f) != 1) return 4;
  unsigned char* mem = (unsigned char*)malloc(size + 1);
  if (fread(mem, 1, size, f) != size) return 5;
  fclose(f);
  for (int k = GS_HOST_PTR; k < GS_HOST_WORDS; k++)
    if (w[k]) w[k] = (unsigned long long)(mem + (w[k] - base));
  GS_HOST_ARGS a;
  memcpy(&a, w, sizeof a);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
` + run + `
  clock_gettime(CLOCK_MONOTONIC, &t1);
  // The kernel's own time (ns) follows the memory: the launch's time
  // without the process and its files.
  const long long ns = (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec);
  FILE* o = fopen(argv[2], "wb");
  if (!o || fwrite(mem, 1, size, o) != size || fwrite(&ns, 8, 1, o) != 1) return 6;
  fclose(o);
  return 0;
}
`
}

// hostMain runs the kernel as a loop over the trajectories.
var hostMain = hostMainOf("  gs_engine(a);")

// hostSimMainOf is the host executable's main that runs the module's
// kernel name on a simulated warp, 32 threads each running it as one
// lane, or for a wide kernel of several warps a trajectory
// (GS_WIDE_WARPS) on a simulated block of that many warps.
func hostSimMainOf(name string) string {
	return hostMainOf(`#ifdef GS_WIDE_WARPS
  const int warps = GS_WIDE_WARPS;
#else
  const int warps = 1;
#endif
  std::barrier<> bar(32);
  gs_sim_bar = &bar;
  std::vector<std::barrier<>*> wbars;
  for (int w = 1; w < warps; w++) wbars.push_back(gs_sim_wbars[w] = new std::barrier<>(32));
  std::barrier<> bbar(32 * warps);
  gs_sim_bbar = &bbar;
  std::vector<std::thread> th;
  for (int lane = 0; lane < 32 * warps; lane++) th.emplace_back([&, lane] {
    threadIdx.x = lane;
    ` + name + `(a);
  });
  for (auto& t : th) t.join();
  for (auto* b : wbars) delete b;`)
}

// hostBackend is the backend of the host engines.
type hostBackend struct {
	total int64 // memory it reports

	mu    sync.Mutex
	next  uint64
	mem   map[uint64][]byte
	used  int64
	exes  map[string]*hostKernel
	calls int // launches, for the tests
	// batches counts the batches (hand-overs to the device), for the
	// tests.
	batches int
	sim     bool
	// shared is the shared memory per block it reports (0: maxShared, a
	// device's default).
	shared int
	// host counts the staging memory handed out by hostAlloc and given
	// back by hostFree, by first byte (a double free is an error).
	host     map[*byte]int64
	hostErr  error
	hostGets int
	// batching holds the goroutines inside a batch (goid).
	batching sync.Map
	// launched is the time the enqueued launches took, for clocks.
	launched time.Duration
	// spent is the wall time of the enqueued launches as a whole: the
	// kernel's process and the backend's staging of its memory around it
	// (files, copies), which no device call has (BenchmarkHostAutoTrace
	// takes it out of the host work).
	spent time.Duration
	// spentCPU is the CPU time of this process in the enqueued launches
	// (the backend's staging; the kernel's process is another's):
	// BenchmarkHostAutoTrace takes it out of the host CPU time.
	spentCPU time.Duration
	// noCapture makes every graph capture fail (graph_host_test.go).
	noCapture bool
	// opts are the compiles' sources' sizes and options, in order
	// (Tuning.FastCompile); g++ does not take NVRTC's options.
	opts []compiled
	// cold makes cached report no kernel cached, so that long compiles
	// run in the background (tier_test.go); without it every compile is
	// taken as a cache hit and runs in place, as the tests expect.
	cold bool
	// optimize compiles the kernels with -O2 instead of -O0 (a longer
	// compile, kernels several times faster; -ffp-contract=off keeps
	// their arithmetic the same): for benchmarks of the host work around
	// the launches (BenchmarkHostAutoTrace).
	optimize bool
	// memo, if not nil, holds the launches' results by kernel, arguments
	// and memory before the launch: a launch seen before writes its
	// result again without running (for benchmarks of the host work
	// around the launches, whose kernels are deterministic).
	memo map[[32]byte]hostMemo
	// flags are further g++ flags (TestHostSplitUninitialised's
	// -ftrivial-auto-var-init=pattern).
	flags []string
	// poison fills new allocations with 0xFF bytes (NaNs) where Go's are
	// zero, as a device's memory holds whatever it held
	// (TestHostSplitUninitialised).
	poison bool
}

// hostMemo is a launch's result held by hostBackend.memo: the memory
// after it and the kernel's time.
type hostMemo struct {
	mem []byte
	dt  time.Duration
}

func (b *hostBackend) cached(string, string, []string) bool { return !b.cold }

// compiled is a compile of the host backend: the source's bytes and the
// options the engine passed.
type compiled struct {
	src   int // bytes, the units' together
	opts  []string
	units int // translation units (Tuning.SplitUnits)
}

func newHostBackend(total int64) *hostBackend {
	return &hostBackend{total: total, mem: make(map[uint64][]byte), exes: make(map[string]*hostKernel)}
}

// newSimBackend is newHostBackend on a simulated warp (hostSimMainOf).
func newSimBackend(total int64) *hostBackend {
	b := newHostBackend(total)
	b.sim = true
	return b
}

type hostKernel struct {
	once sync.Once
	exe  string
	err  error
	// words is the length of the kernel's argument struct, ptr the first
	// of its words that are pointers (gs_args's or gs_targs's).
	words, ptr int
}

// hostKernelArgs returns the defines of a host kernel executable of the
// kernel called name: its argument struct, its words and its first
// pointer word.
func hostKernelArgs(name string) (words, ptr int, defs string) {
	words, ptr, typ := numArgs, argSh, "gs_args"
	switch name {
	case kernelgen.KernelName, kernelgen.SavesKernelName, kernelgen.RevKernelName:
	case savesKernelName:
		words, ptr, typ = numSavesWords, swStatus, "gs_sargs"
	case meshColsKernelName:
		words, ptr, typ = numMeshColsWords, mwCols, "gs_margs"
	case gradsKernelName:
		words, ptr, typ = numGradsWords, gwStatus, "gs_gargs"
	default:
		words, ptr, typ = numTrainWords, trainFirstPtr, "gs_targs"
	}
	return words, ptr, fmt.Sprintf("\n#define GS_HOST_WORDS %d\n#define GS_HOST_PTR %d\n#define GS_HOST_ARGS %s\n", words, ptr, typ)
}

func (*hostKernel) maxBlock() int { return 0 }

// hostAddrBits is the address space of one host arena.
const hostAddrBits = 40

func (b *hostBackend) compile(src, name string, opts []string) (backendKernel, error) {
	return b.build([]kernelgen.Unit{{Name: kernelgen.KernelUnitName, Text: src}}, name, opts)
}

func (b *hostBackend) compileUnits(units []kernelgen.Unit, name string, opts []string) (backendKernel, error) {
	return b.build(units, name, opts)
}

func (b *hostBackend) cachedUnits([]kernelgen.Unit, string, []string) bool { return !b.cold }

// build compiles a kernel's translation units (one, or a kernel's in
// parts: Tuning.SplitUnits) with g++ into an executable: each unit but
// the first is compiled on its own (-c, concurrently), the first with the
// host's main and linked with their objects, so that a unit that is not
// self-contained fails as on the device. A unit that fails is named in
// the error.
func (b *hostBackend) build(units []kernelgen.Unit, name string, opts []string) (backendKernel, error) {
	b.direct("compile")
	size := 0
	h := sha256.New()
	for _, u := range units {
		size += len(u.Text)
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", u.Name, len(u.Text), u.Text)
	}
	b.mu.Lock()
	b.opts = append(b.opts, compiled{src: size, opts: opts, units: len(units)})
	b.mu.Unlock()
	cc, err := exec.LookPath("g++")
	if err != nil {
		return nil, fmt.Errorf("host backend: %w", err)
	}
	hostDirOnce.Do(func() { hostDir, hostDirErr = os.MkdirTemp("", "gradsolve-cuda-host-") })
	if hostDirErr != nil {
		return nil, hostDirErr
	}
	h.Write([]byte(name + "\x00" + strings.Join(b.flags, " ")))
	key := hex.EncodeToString(h.Sum(nil)[:8])
	if b.sim {
		key += "-sim"
	}
	if b.optimize {
		key += "-O2"
	}
	if b.noCapture {
		// A backend of its own compiles its own executables: another's
		// may be being written under the same name.
		key += "-nocapture"
	}
	b.mu.Lock()
	k := b.exes[key]
	if k == nil {
		k = &hostKernel{}
		b.exes[key] = k
	}
	b.mu.Unlock()
	k.once.Do(func() {
		words, ptr, defs := hostKernelArgs(name)
		k.words, k.ptr = words, ptr
		file := filepath.Join(hostDir, key+".cpp")
		main := hostMain
		if name != kernelgen.KernelName {
			main = hostMainOf("  " + name + "(a);")
		}
		// sim inserts the simulated warp before a unit's prelude.
		sim := func(src string) string { return src }
		flags := []string{"-std=c++17", "-O0"}
		if b.optimize {
			flags[1] = "-O2"
		}
		// (The saves kernels, the mesh's columns and the gradients' sums
		// have no warp code: a loop.)
		if b.sim && name != savesKernelName && name != meshColsKernelName && name != gradsKernelName && name != kernelgen.SavesKernelName {
			if name != kernelgen.KernelName && name != kernelgen.RevKernelName {
				k.err = fmt.Errorf("host backend: kernel %s on a simulated warp", name)
				return
			}
			sim = func(src string) string {
				head, body, _ := strings.Cut(src, "#ifndef GS_PRELUDE_CUH")
				return head + warpSim + "#ifndef GS_PRELUDE_CUH" + body
			}
			main = hostSimMainOf(name)
			flags = []string{"-std=c++20", "-O1", "-pthread"}
		}
		flags = append(append(flags, "-ffp-contract=off", "-fno-fast-math", "-w"), b.flags...)
		objs := make([]string, len(units)-1)
		errs := make([]error, len(units)-1)
		var wg sync.WaitGroup
		for u := 1; u < len(units); u++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ufile := filepath.Join(hostDir, fmt.Sprintf("%s-u%d.cpp", key, u))
				if errs[u-1] = os.WriteFile(ufile, []byte(sim(units[u].Text)), 0o644); errs[u-1] != nil {
					return
				}
				obj := strings.TrimSuffix(ufile, ".cpp") + ".o"
				if out, err := exec.Command(cc, append(slices.Clone(flags), "-c", "-o", obj, ufile)...).CombinedOutput(); err != nil {
					errs[u-1] = fmt.Errorf("host backend: unit %d of %d (%s): g++: %v\n%s\n(source in %s)", u+1, len(units), units[u].Name, err, firstLines(string(out), 30), ufile)
					return
				}
				objs[u-1] = obj
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				k.err = err
				return
			}
		}
		if k.err = os.WriteFile(file, []byte(sim(units[0].Text)+defs+main), 0o644); k.err != nil {
			return
		}
		exe := filepath.Join(hostDir, key)
		out, err := exec.Command(cc, append(append(flags, "-o", exe, file), objs...)...).CombinedOutput()
		if err != nil {
			what := "g++"
			if len(units) > 1 {
				what = fmt.Sprintf("unit 1 of %d (%s) and the link: g++", len(units), units[0].Name)
			}
			k.err = fmt.Errorf("host backend: %s: %v\n%s\n(source in %s)", what, err, firstLines(string(out), 30), file)
			return
		}
		k.exe = exe
	})
	return k, k.err
}

func (b *hostBackend) alloc(n int64) (uint64, error) {
	b.direct("alloc")
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.total {
		return 0, fmt.Errorf("host backend: out of memory (%d + %d > %d)", b.used, n, b.total)
	}
	b.next++
	addr := b.next << hostAddrBits
	m := make([]byte, n)
	if b.poison {
		for i := range m {
			m[i] = 0xff // every float64 a NaN
		}
	}
	b.mem[addr] = m
	b.used += n
	return addr, nil
}

func (b *hostBackend) free(addr uint64) error {
	b.direct("free")
	b.mu.Lock()
	defer b.mu.Unlock()
	m, ok := b.mem[addr]
	if !ok {
		return fmt.Errorf("host backend: free of unknown %#x", addr)
	}
	b.used -= int64(len(m))
	delete(b.mem, addr)
	return nil
}

// at returns the arena holding addr and addr's offset in it.
func (b *hostBackend) at(addr uint64) ([]byte, uint64, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	base := addr &^ (1<<hostAddrBits - 1)
	return b.mem[base], base, addr - base
}

func (b *hostBackend) writeRaw(addr uint64, src []byte) error {
	m, _, off := b.at(addr)
	if m == nil || off+uint64(len(src)) > uint64(len(m)) {
		return fmt.Errorf("host backend: write out of bounds")
	}
	copy(m[off:], src)
	return nil
}

func (b *hostBackend) readRaw(dst []byte, addr uint64) error {
	m, _, off := b.at(addr)
	if m == nil || off+uint64(len(dst)) > uint64(len(m)) {
		return fmt.Errorf("host backend: read out of bounds")
	}
	copy(dst, m[off:])
	return nil
}

func (b *hostBackend) zeroRaw(addr uint64, n int64) error {
	m, _, off := b.at(addr)
	if m == nil || off+uint64(n) > uint64(len(m)) {
		return fmt.Errorf("host backend: zero out of bounds")
	}
	clear(m[off : off+uint64(n)])
	return nil
}

// hostAlloc hands out Go memory, as a GPU hands out page-locked memory,
// and keeps count, so that the tests see the executor give every buffer
// it drops back once.
func (b *hostBackend) hostAlloc(n int64) []byte {
	b.direct("hostAlloc")
	b.mu.Lock()
	defer b.mu.Unlock()
	m := make([]byte, n)
	if b.host == nil {
		b.host = make(map[*byte]int64)
	}
	b.host[&m[0]] = n
	b.hostGets++
	return m
}

func (b *hostBackend) hostFree(m []byte) {
	b.direct("hostFree")
	b.mu.Lock()
	defer b.mu.Unlock()
	p := &m[:1][0]
	if _, ok := b.host[p]; !ok || cap(m) != int(b.host[p]) {
		b.hostErr = fmt.Errorf("host backend: hostFree of %d bytes not from hostAlloc (or freed twice)", cap(m))
		return
	}
	delete(b.host, p)
}

// hostHeld returns the staging buffers handed out and not given back,
// their bytes, the buffers handed out in all, and the first misuse.
func (b *hostBackend) hostHeld() (bufs int, bytes int64, gets int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.host {
		bufs++
		bytes += n
	}
	return bufs, bytes, b.hostGets, b.hostErr
}

// The host backend's copies and launches are synchronous. A batch runs on
// the caller's goroutine; a call of the backend's own methods from inside
// one panics, as on a GPU it would wait forever for the device's
// goroutine (which runs the batch).
func (b *hostBackend) batch(f func(q queue) error) error {
	b.direct("batch")
	b.mu.Lock()
	b.batches++
	b.mu.Unlock()
	id := goid()
	b.batching.Store(id, true)
	defer b.batching.Delete(id)
	return f(hostQueue{b})
}

// direct panics if the calling goroutine is inside a batch of b.
func (b *hostBackend) direct(call string) {
	if _, in := b.batching.Load(goid()); in {
		panic("host backend: " + call + " called inside a batch (on a GPU: a deadlock)")
	}
}

// goid returns the calling goroutine's id, from its stack header.
func goid() uint64 {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	s = bytes.TrimPrefix(s, []byte("goroutine "))
	var id uint64
	for _, c := range s {
		if c < '0' || c > '9' {
			break
		}
		id = 10*id + uint64(c-'0')
	}
	return id
}

func (b *hostBackend) write(addr uint64, src []byte) error {
	b.direct("write")
	return b.writeRaw(addr, src)
}

func (b *hostBackend) read(dst []byte, addr uint64) error {
	b.direct("read")
	return b.readRaw(dst, addr)
}

func (b *hostBackend) zero(addr uint64, n int64) error {
	b.direct("zero")
	return b.zeroRaw(addr, n)
}

// hostQueue is the queue of a host batch.
type hostQueue struct{ b *hostBackend }

func (q hostQueue) write(addr uint64, src []byte) error { return q.b.writeRaw(addr, src) }
func (q hostQueue) read(dst []byte, addr uint64) error  { return q.b.readRaw(dst, addr) }
func (q hostQueue) writeQueued(addr uint64, src []byte) error {
	return q.b.writeRaw(addr, src) // (the host runs it in order, at once)
}
func (q hostQueue) zero(addr uint64, n int64) error { return q.b.zeroRaw(addr, n) }

func (q hostQueue) enqueue(bk backendKernel, threads, block, shmem int, args []uint64) error {
	b := q.b
	// (On one thread, whose CPU time is the launch's.)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, c0 := time.Now(), cputime.Thread()
	dt, err := b.launchRaw(bk, threads, block, shmem, args)
	all, cpu := time.Since(start), cputime.Thread()-c0
	b.mu.Lock()
	b.launched += dt
	b.spent += all
	b.spentCPU += cpu
	b.mu.Unlock()
	return err
}

// hostClock times a host launch: the launch between its marks.
type hostClock struct{ at, dt time.Duration }

func (*hostClock) free() {}

func (b *hostBackend) newClock() (clock, error) {
	b.direct("newClock")
	return &hostClock{}, nil
}

func (q hostQueue) mark(c clock, end bool) error {
	b := q.b
	hc := c.(*hostClock)
	b.mu.Lock()
	defer b.mu.Unlock()
	if !end {
		hc.at = b.launched
		return nil
	}
	hc.dt = b.launched - hc.at
	return nil
}

func (q hostQueue) elapsed(c clock) (time.Duration, error) { return c.(*hostClock).dt, nil }

// readAfter reads: the host's launches are done when enqueue returns.
func (q hostQueue) readAfter(_ clock, dst [][]byte, src []uint64) (time.Duration, error) {
	for k, b := range dst {
		if err := q.read(b, src[k]); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

func (q hostQueue) copyDevice(dst, src uint64, n int64) error {
	b := q.b
	ms, _, so := b.at(src)
	md, _, do := b.at(dst)
	if ms == nil || md == nil || so+uint64(n) > uint64(len(ms)) || do+uint64(n) > uint64(len(md)) {
		return fmt.Errorf("host backend: copyDevice out of bounds")
	}
	copy(md[do:do+uint64(n)], ms[so:so+uint64(n)])
	return nil
}

func (b *hostBackend) sms() int { return 0 }

func (b *hostBackend) sharedLimit() int {
	if b.shared > 0 {
		return b.shared
	}
	return maxShared
}

func (b *hostBackend) memFree() (int64, error) {
	b.direct("memFree")
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total - b.used, nil
}

func (b *hostBackend) launchRaw(bk backendKernel, threads, block, shmem int, args []uint64) (time.Duration, error) {
	k := bk.(*hostKernel)
	if len(args) != k.words {
		return 0, fmt.Errorf("host backend: %d argument words, want %d", len(args), k.words)
	}
	// The kernel sees one block of memory at base: the allocations its
	// pointer arguments point into (the arena first, for the engine's
	// kernel), the arguments rebased to their place in it.
	args = slices.Clone(args)
	type part struct {
		mem []byte
		at  uint64 // offset in the block
	}
	var parts []part
	placed := map[uint64]uint64{}
	base, size := uint64(0), uint64(0)
	for a := k.ptr; a < len(args); a++ {
		if args[a] == 0 {
			continue
		}
		m, mb, off := b.at(args[a])
		if m == nil {
			return 0, fmt.Errorf("host backend: argument %d points to no allocation", a)
		}
		if parts == nil {
			base = mb
		}
		at, ok := placed[mb]
		if !ok {
			at = (size + 255) &^ 255
			placed[mb] = at
			parts = append(parts, part{m, at})
			size = at + uint64(len(m))
		}
		args[a] = base + at + off
	}
	if parts == nil {
		return 0, fmt.Errorf("host backend: launch without memory")
	}
	b.mu.Lock()
	b.calls++
	memo := b.memo != nil
	b.mu.Unlock()
	var key [32]byte
	if memo {
		// The key of the memory before the launch, read where it lies:
		// a launch seen before writes its result back to the parts
		// without allocating the block (hundreds of megabytes a launch
		// whose collection would otherwise fall in the host work that
		// BenchmarkHostAutoTrace measures).
		h := sha256.New()
		h.Write([]byte(k.exe))
		binary.Write(h, binary.LittleEndian, []uint64{uint64(threads), uint64(block), uint64(shmem), base, size})
		binary.Write(h, binary.LittleEndian, args)
		for _, q := range parts {
			binary.Write(h, binary.LittleEndian, []uint64{q.at, uint64(len(q.mem))})
			h.Write(q.mem)
		}
		h.Sum(key[:0])
		b.mu.Lock()
		m, ok := b.memo[key]
		b.mu.Unlock()
		if ok {
			for _, q := range parts {
				copy(q.mem, m.mem[q.at:q.at+uint64(len(q.mem))])
			}
			return m.dt, nil
		}
	}
	mem := make([]byte, size)
	for _, q := range parts {
		copy(mem[q.at:], q.mem)
	}
	defer func() {
		for _, q := range parts {
			copy(q.mem, mem[q.at:q.at+uint64(len(q.mem))])
		}
	}()
	dir, err := os.MkdirTemp(hostDir, "launch-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	var in bytes.Buffer
	binary.Write(&in, binary.LittleEndian, args)
	binary.Write(&in, binary.LittleEndian, []uint64{base, uint64(len(mem))})
	in.Write(mem)
	inFile, outFile := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.WriteFile(inFile, in.Bytes(), 0o644); err != nil {
		return 0, err
	}
	if out, err := exec.Command(k.exe, inFile, outFile).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("host backend: kernel: %v\n%s", err, out)
	}
	data, err := os.ReadFile(outFile)
	if err != nil {
		return 0, err
	}
	if len(data) != len(mem)+8 {
		return 0, fmt.Errorf("host backend: kernel wrote %d bytes, want %d and its time", len(data), len(mem))
	}
	// The launch's time is the kernel's own, as a device's events time it.
	dt := time.Duration(binary.LittleEndian.Uint64(data[len(mem):]))
	data = data[:len(mem)]
	copy(mem, data)
	if memo {
		b.mu.Lock()
		b.memo[key] = hostMemo{data, dt}
		b.mu.Unlock()
	}
	return dt, nil
}
