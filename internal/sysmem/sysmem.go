// Package sysmem reports the memory of the machine the process runs on, so
// that the library and the command refuse work that cannot fit before
// allocating it, instead of dying of an out-of-memory error no caller can
// recover from.
package sysmem

import (
	"bufio"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
)

// Limit is the memory a process may use and where that figure comes from.
type Limit struct {
	Bytes  int64  // 0 if unknown
	Source string // as "physical memory (MemTotal in /proc/meminfo)"
}

var (
	once     sync.Once
	physical Limit
)

// Machine returns the machine's physical memory (MemTotal in
// /proc/meminfo), or GOMEMLIMIT if that is smaller; Bytes is 0 if neither
// is known. The physical memory is read once per process.
func Machine() Limit {
	once.Do(func() {
		if b, ok := MemTotal("/proc/meminfo"); ok {
			physical = Limit{Bytes: b, Source: "physical memory (MemTotal in /proc/meminfo)"}
		}
	})
	lim := physical
	if g := debug.SetMemoryLimit(-1); g > 0 && g < math.MaxInt64 && (lim.Bytes == 0 || g < lim.Bytes) {
		lim = Limit{Bytes: g, Source: "GOMEMLIMIT"}
	}
	return lim
}

// MemTotal returns MemTotal from the meminfo file at path, in bytes.
func MemTotal(path string) (int64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb <= 0 || kb > math.MaxInt64/1024 {
			return 0, false
		}
		return kb * 1024, true
	}
	return 0, false
}

// Format formats b bytes with a binary unit and three digits, as
// "1.5 GiB".
func Format(b float64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u := 0
	for b >= 1024 && u < len(units)-1 {
		b /= 1024
		u++
	}
	if u == 0 {
		return strconv.FormatFloat(b, 'f', 0, 64) + " bytes"
	}
	return strconv.FormatFloat(b, 'g', 3, 64) + " " + units[u]
}
