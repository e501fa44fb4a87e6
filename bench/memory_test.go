package bench

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

var memoryRSS = flag.Bool("memory", false, "TestMemoryRSS: measure the peak RSS of Lorenz gradients at 2^16, 2^17 and 2^18 trajectories (about a minute)")

// memoryCaseEnv carries the MemoryConfig (JSON) of one TestMemoryRSS case
// to the child process that runs it.
const memoryCaseEnv = "GRADSOLVE_MEMORY_CASE"

// memoryRowMark starts the child's result line.
const memoryRowMark = "memory-row: "

// TestMemoryChild runs one case of TestMemoryRSS; it does nothing unless
// started by TestMemoryRSS in a child process.
func TestMemoryChild(t *testing.T) {
	spec := os.Getenv(memoryCaseEnv)
	if spec == "" {
		t.Skip("runs one case of TestMemoryRSS in a child process")
	}
	var cfg MemoryConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		t.Fatal(err)
	}
	row, err := RunMemory(io.Discard, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%s%s\n", memoryRowMark, b)
}

// runMemoryChild runs cfg in a fresh process (this test binary, running
// TestMemoryChild), so that its peak resident set is its own.
func runMemoryChild(t *testing.T, cfg MemoryConfig) *MemoryRow {
	t.Helper()
	spec, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), memoryCaseEnv+"="+string(spec))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("child for %s: %v\n%s", spec, err, out.String())
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if s, ok := strings.CutPrefix(line, memoryRowMark); ok {
			var row MemoryRow
			if err := json.Unmarshal([]byte(s), &row); err != nil {
				t.Fatal(err)
			}
			return &row
		}
	}
	t.Fatalf("child for %s printed no result:\n%s", spec, out.String())
	return nil
}

// TestMemoryRSS measures the peak resident set (VmHWM) of one Lorenz
// gradient (RunMemory: Tsit5, rtol 1e-6, the mesh recorded first) per
// child process, with the default memory limit and with MemoryLimit =
// 16 MiB and 1 MiB, and reports it beside StoredBytes, the mesh and the
// resident set before the gradient. Plain go test runs 2^12 trajectories;
// -memory runs 2^16, 2^17 and 2^18 (the figures of bench/RESULTS.md,
// "Memory").
//
// It checks that the states a gradient stores honour the limit: the CPU
// engine gives each worker MemoryLimit/workers for its chunk's states,
// and StoredBytes is the largest chunk's. With -memory it also checks the
// peak the gradient adds to the resident set against memoryAllowance: the
// limit, the inputs and outputs, the mesh (an output, held about 2.2
// times at the peak by the CPU engine) and the runtime's overhead.
func TestMemoryRSS(t *testing.T) {
	sizes := []int{1 << 12}
	if *memoryRSS {
		sizes = []int{1 << 16, 1 << 17, 1 << 18}
	}
	t.Logf("%8s %10s %8s %10s %10s %10s %10s %10s %10s", "n", "limit", "rows", "mesh", "stored", "rss-before", "VmHWM", "added", "allowed")
	for _, n := range sizes {
		for _, lim := range []int64{0, 16 << 20, 1 << 20} {
			row := runMemoryChild(t, MemoryConfig{N: n, MemoryLimit: lim})
			if row.StoredBytes <= 0 || row.MeshBytes <= 0 {
				t.Errorf("n = %d, MemoryLimit %d: row not filled: %+v", n, lim, row)
			}
			if lim > 0 && row.StoredBytes > lim/int64(row.Workers) {
				t.Errorf("n = %d, MemoryLimit %d: StoredBytes %d exceeds a worker's share of the limit (%d workers)", n, lim, row.StoredBytes, row.Workers)
			}
			if !row.PeakReset || row.VmHWM == 0 {
				t.Logf("n = %d: the peak resident set cannot be measured here (reset %v, VmHWM %d)", n, row.PeakReset, row.VmHWM)
				continue
			}
			added := int64(row.VmHWM) - int64(row.RSSBefore)
			allowed := memoryAllowance(row)
			t.Logf("%8d %10s %8d %10s %10s %10s %10s %10s %10s", n, limitText(lim), row.Rows, mib(row.MeshBytes), mib(row.StoredBytes),
				mib(int64(row.RSSBefore)), mib(int64(row.VmHWM)), mib(added), mib(allowed))
			if *memoryRSS && lim > 0 && added > allowed {
				t.Errorf("n = %d, MemoryLimit %s: the gradient added %s to the resident set, more than the limit plus its working set (%s)",
					n, mib(lim), mib(added), mib(allowed))
			}
		}
	}
}

// memoryAllowance returns what a gradient with a memory limit may add to
// the resident set: the limit; twice (the garbage collector's headroom at
// GOGC = 100) the inputs and outputs (y0, p, y(t1), ∂L/∂y0, ∂L/∂p,
// statuses and step counts: 16 values per Lorenz trajectory); 2.5 times
// the mesh (the CPU engine holds each chunk's mesh rows, allocated by
// doubling, until it copies them into the mesh it returns); and 16 MiB for
// the runtime, the executors and the per-chunk scratch.
func memoryAllowance(row *MemoryRow) int64 {
	return row.MemoryLimit + 2*int64(row.N)*16*8 + row.MeshBytes*5/2 + 16<<20
}

func limitText(lim int64) string {
	if lim == 0 {
		return "default"
	}
	return mib(lim)
}
