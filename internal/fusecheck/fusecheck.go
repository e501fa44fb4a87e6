// Package fusecheck finds the fused multiply-adds that the Go compiler
// contracts on its own, for tests of code that promises every operation
// rounded (no fused multiply-add), as the device's code is compiled
// (NVRTC --fmad=false, g++ -ffp-contract=off).
//
// The Go specification lets an implementation fuse x*y + z across an
// expression, and the compiler does on arm64, ppc64le, s390x, riscv64 and
// loong64 (not on amd64, where tests usually run); an explicit conversion,
// float64(x*y) + z, rounds the product and prevents it. Fused compiles
// a package for such an architecture and lists where it fused, so a test
// on amd64 can check the code another host would run.
package fusecheck

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fusedOps are arm64's fused multiply-add instructions on float64.
var fusedOps = regexp.MustCompile(`\s(FMADDD|FMSUBD|FNMADDD|FNMSUBD)\s.*`)

// position is the "(file:line)" of an instruction in the compiler's -S
// listing.
var position = regexp.MustCompile(`\(([^()]+\.go:\d+)\)`)

// Fused compiles the package in directory dir for linux/arm64 and returns
// the source positions ("file.go:line", sorted, each once) of the fused
// multiply-adds in its own code. It returns an error if the go command is
// missing or the build fails.
func Fused(dir string) ([]string, error) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("fusecheck: the go command: %w", err)
	}
	cmd := exec.Command(gocmd, "build", "-o", os.DevNull, "-gcflags=-S", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=arm64", "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("fusecheck: go build for arm64: %w\n%s", err, out)
	}
	var at []string
	for _, line := range strings.Split(string(out), "\n") {
		if !fusedOps.MatchString(line) {
			continue
		}
		if m := position.FindStringSubmatch(line); m != nil {
			file := m[1][strings.LastIndex(m[1], "/")+1:]
			at = append(at, file)
		}
	}
	slices.Sort(at)
	return slices.Compact(at), nil
}

// CheckNone fails t, naming the lines, if the package in directory dir
// compiles to a fused multiply-add on arm64; it skips where -short is set
// (the compile takes seconds) or the go command cannot build for arm64.
// A test of a package that promises every product rounded calls it with
// ".".
func CheckNone(t testing.TB, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("compiles the package for arm64")
	}
	at, err := Fused(dir)
	if err != nil {
		t.Skip(err)
	}
	if len(at) > 0 {
		t.Errorf("fused multiply-adds on arm64 at %v; round each product with float64(…)", at)
	}
}
