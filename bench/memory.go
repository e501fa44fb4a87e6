package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/tape"
)

// Defaults of MemoryConfig.
const (
	DefaultMemoryN      = 1 << 20
	DefaultMemoryRelTol = 1e-6
)

// MemoryConfig configures RunMemory. The zero value runs the default
// case: one gradient over 2²⁰ protocol Lorenz trajectories at rtol 1e-6.
type MemoryConfig struct {
	// N is the ensemble size; 0 means DefaultMemoryN.
	N int
	// RelTol is the relative tolerance (atol = rtol·1e-3); 0 means
	// DefaultMemoryRelTol.
	RelTol float64
	// MemoryLimit and Checkpoint are passed to ode.Settings; zero means the
	// library's defaults.
	MemoryLimit int64
	Checkpoint  int
	// Workers is the number of goroutines; 0 means runtime.GOMAXPROCS(0).
	Workers int
	// JSON writes the row as a JSON object instead of the table.
	JSON bool
}

// MemoryRow is the result of RunMemory. Sizes are in bytes, times in
// milliseconds (one run each: the case is too large to repeat).
type MemoryRow struct {
	N           int     `json:"n"`
	RelTol      float64 `json:"rtol"`
	AbsTol      float64 `json:"atol"`
	Workers     int     `json:"workers"`
	MemoryLimit int64   `json:"memory_limit"`
	Checkpoint  int     `json:"checkpoint"`

	// Steps is the mean accepted steps per trajectory, Rows the mesh's
	// longest trajectory.
	Steps float64 `json:"steps_per_traj"`
	Rows  int     `json:"mesh_rows"`

	// Wall is the whole ode.Solver.Grad call (record included), Record and
	// Grad its two parts (Gradient.RecordTime and GradTime).
	Wall   float64 `json:"wall_ms"`
	Record float64 `json:"record_ms"`
	Grad   float64 `json:"grad_ms"`

	// MeshBytes is the recorded mesh (H and Len); StoredBytes the
	// gradient's checkpoints (Gradient.StoredBytes); InputBytes the
	// problem's arrays.
	MeshBytes   int64 `json:"mesh_bytes"`
	StoredBytes int64 `json:"stored_bytes"`
	InputBytes  int64 `json:"input_bytes"`

	// HeapSys and TotalAlloc are runtime.MemStats's after the gradient,
	// TotalAlloc counting from the start of the call. PeakHeap is the
	// largest heap (objects, live or not yet swept) seen by a 10 ms
	// sampler, PeakMapped the largest memory mapped by the Go runtime
	// minus what it had released to the OS.
	HeapSys    uint64 `json:"heap_sys"`
	TotalAlloc uint64 `json:"total_alloc"`
	PeakHeap   uint64 `json:"peak_heap"`
	PeakMapped uint64 `json:"peak_mapped"`

	// VmHWM is the process's peak resident set from /proc/self/status (0
	// where unavailable). If PeakReset is false the kernel refused to reset
	// it (through /proc/self/clear_refs) before the run, so it may include
	// earlier work in the process.
	VmHWM     uint64 `json:"vm_hwm"`
	PeakReset bool   `json:"peak_reset"`
	// RSSBefore is the resident set (VmRSS) just before the gradient: the
	// runtime, the solver and the problem's inputs. VmHWM − RSSBefore is
	// what the gradient added at its peak.
	RSSBefore uint64 `json:"rss_before"`
}

// RunMemory computes one gradient of Σ_i ‖y_i(1)‖² with respect to every
// parameter over cfg.N trajectories of the Lorenz protocol (ρ =
// linspace(0, 21, N)) with Tsit5, recording the mesh first, and reports
// its time and memory to w and as a MemoryRow.
func RunMemory(w io.Writer, cfg MemoryConfig) (*MemoryRow, error) {
	n, rtol := cfg.N, cfg.RelTol
	if n <= 0 {
		n = DefaultMemoryN
	}
	if rtol <= 0 {
		rtol = DefaultMemoryRelTol
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	atol := rtol * lorenzAbsTolOverRelTol
	e := ProtocolLorenz(n)
	p := e.Problem()
	set := ode.Settings{Method: ode.Tsit5, RelTol: rtol, AbsTol: atol,
		MemoryLimit: cfg.MemoryLimit, Checkpoint: cfg.Checkpoint, Exec: tape.ExecSettings{Workers: workers}}
	sv, err := ode.NewSolver(p.Field, &set)
	if err != nil {
		return nil, err
	}
	e = nil

	runtime.GC()
	debug.FreeOSMemory()
	reset := resetPeakRSS()
	rssBefore := procStatusBytes("VmRSS")
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	smp := startSampler(10 * time.Millisecond)
	start := time.Now()
	g, err := sv.Grad(nil, &p, ode.SumSquares(), nil)
	wall := time.Since(start)
	peakHeap, peakMapped := smp.stop()
	if err != nil {
		return nil, err
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	m := g.Mesh
	row := &MemoryRow{
		N: n, RelTol: rtol, AbsTol: atol, Workers: workers,
		MemoryLimit: cfg.MemoryLimit, Checkpoint: cfg.Checkpoint,
		Steps:       meanInts(m.Stats.Accepted),
		Rows:        m.Rows,
		Wall:        ms(wall),
		Record:      ms(g.RecordTime),
		Grad:        ms(g.GradTime),
		MeshBytes:   int64(len(m.H))*8 + int64(len(m.Len))*8,
		StoredBytes: g.StoredBytes,
		InputBytes:  int64(len(p.P)+len(p.Y0)) * 8,
		HeapSys:     after.HeapSys,
		TotalAlloc:  after.TotalAlloc - before.TotalAlloc,
		PeakHeap:    peakHeap,
		PeakMapped:  peakMapped,
		VmHWM:       procStatusBytes("VmHWM"),
		PeakReset:   reset,
		RSSBefore:   rssBefore,
	}
	if cfg.JSON {
		return row, writeJSON(w, row)
	}
	fmt.Fprintf(w, "Memory: gradient over %d Lorenz trajectories, Tsit5, rtol %g, atol %g, %d goroutines (MemoryLimit %d, Checkpoint %d; 0 = default)\n",
		n, rtol, atol, workers, cfg.MemoryLimit, cfg.Checkpoint)
	fmt.Fprintf(w, "  steps/traj %.1f, mesh rows %d\n", row.Steps, row.Rows)
	fmt.Fprintf(w, "  wall %.0f ms = record %.0f ms + grad %.0f ms\n", row.Wall, row.Record, row.Grad)
	fmt.Fprintf(w, "  mesh %s, checkpoints (StoredBytes) %s, inputs %s\n", mib(row.MeshBytes), mib(row.StoredBytes), mib(row.InputBytes))
	fmt.Fprintf(w, "  peak heap %s, peak mapped %s, VmHWM %s (reset before the run: %v; VmRSS before %s)\n",
		mib(int64(row.PeakHeap)), mib(int64(row.PeakMapped)), mib(int64(row.VmHWM)), row.PeakReset, mib(int64(row.RSSBefore)))
	fmt.Fprintf(w, "  MemStats after: HeapSys %s, TotalAlloc during the run %s\n", mib(int64(row.HeapSys)), mib(int64(row.TotalAlloc)))
	return row, nil
}

// mib formats a byte count in MiB.
func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// resetPeakRSS resets the kernel's peak resident set (VmHWM) of the
// process, reporting whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// procStatusBytes returns a "kB" field of /proc/self/status in bytes, 0 if
// it is unavailable.
func procStatusBytes(key string) uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		v = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB"))
		kb, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// sampler tracks the peaks of the Go heap and of the runtime's resident
// memory by polling runtime/metrics, which does not stop the world.
type sampler struct {
	done       chan struct{}
	wg         sync.WaitGroup
	heap, maps uint64
}

var samplerMetrics = []string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
}

func startSampler(every time.Duration) *sampler {
	s := &sampler{done: make(chan struct{})}
	samples := make([]metrics.Sample, len(samplerMetrics))
	for i, name := range samplerMetrics {
		samples[i].Name = name
	}
	read := func() {
		metrics.Read(samples)
		s.heap = max(s.heap, samples[0].Value.Uint64())
		s.maps = max(s.maps, samples[1].Value.Uint64()-samples[2].Value.Uint64())
	}
	read()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				read()
				return
			case <-t.C:
				read()
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peaks.
func (s *sampler) stop() (heap, mapped uint64) {
	close(s.done)
	s.wg.Wait()
	return s.heap, s.maps
}
