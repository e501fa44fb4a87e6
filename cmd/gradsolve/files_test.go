package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gradsolve-go/gradsolve/progress"
)

// This file tests the guarantees of the output files (see doc.go, "Output
// files"): nothing is written before the command line is valid, two
// outputs never name one file, a failed or interrupted run leaves every
// file as it was and no temporary file, and every write error, stdout's
// included, gives a non-zero exit status.

// TestMain runs the command itself, not the tests, when the environment
// says so: the signal tests start the test binary as the command.
func TestMain(m *testing.M) {
	if os.Getenv("GRADSOLVE_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// writeOld writes "old\n" to dir/name and returns its path.
func writeOld(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkOld fails if path no longer holds "old\n".
func checkOld(t *testing.T, what, path string) {
	t.Helper()
	if b, err := os.ReadFile(path); err != nil || string(b) != "old\n" {
		t.Errorf("%s: %s is now %.40q (%v), want it untouched", what, path, b, err)
	}
}

// TestSameOutputRefused checks that two outputs, or an output and an
// input, that name one file (directly, through a symbolic link to the file
// or through a link to its directory) are refused as a command-line error
// naming both flags, before anything is written.
func TestSameOutputRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fig := writeOld(t, dir, "fig.svg")
	obs := filepath.Join(dir, "obs.csv")
	if err := os.WriteFile(obs, []byte("traj,t,x,v\n0,0.5,1.5,-0.5\n0,1,1.2,-0.7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink("fig.svg", link); err != nil {
		t.Skip("no symbolic links:", err)
	}
	dirLink := filepath.Join(dir, "d")
	if err := os.Symlink(".", dirLink); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		flags []string
	}{
		{[]string{"solve", "-problem", "vdp", "-plot", fig, "-out", fig}, []string{"-plot", "-out"}},
		{[]string{"solve", "-problem", "vdp", "-plot", fig, "-out", link}, []string{"-plot", "-out"}},
		{[]string{"grad", "-problem", "vdp", "-plot", filepath.Join(dirLink, "fig.svg"), "-out", filepath.Join(dir, "fig.svg")}, []string{"-plot", "-out"}},
		{[]string{"fit", "-problem", "vdp", "-fit", "mu", "-steps", "1", "-plot", fig, "-out", link}, []string{"-plot", "-out"}},
		{[]string{"fit", "-problem", "vdp", "-fit", "mu", "-steps", "1", "-data", obs, "-out", filepath.Join(dirLink, "obs.csv")}, []string{"-data", "-out"}},
		{[]string{"bench", "-suite", "lorenz", "-n", "8", "-reps", "1", "-out", fig, "-cpuprofile", link}, []string{"-out", "-cpuprofile"}},
	} {
		code, _, stderr := runArgs(tc.args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d:\n%s", tc.args, code, exitUsage, stderr)
		}
		for _, f := range tc.flags {
			if !strings.Contains(stderr, f) || !strings.Contains(stderr, "same file") {
				t.Errorf("%q: the message does not name %s as the same file:\n%s", tc.args, f, stderr)
			}
		}
		checkOld(t, strings.Join(tc.args, " "), fig)
	}
	if b, _ := os.ReadFile(obs); !strings.HasPrefix(string(b), "traj,t") {
		t.Errorf("the data file was overwritten: %q", b)
	}
	checkNoTemp(t, dir)
}

// TestNothingWrittenBeforeValid checks that a command line found invalid
// (after the output flags) leaves every output file as it was: the CPU
// profile of bench, bench -out, and the outputs of solve, grad and fit.
func TestNothingWrittenBeforeValid(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prof := writeOld(t, dir, "cpu.prof")
	out := writeOld(t, dir, "out.txt")
	fig := writeOld(t, dir, "fig.png")
	for _, args := range [][]string{
		{"bench", "-cpuprofile", prof, "-suite", "nope"},
		{"bench", "-cpuprofile", prof, "-out", out, "-reps", "0"},
		{"bench", "-cpuprofile", prof, "unexpected"},
		{"solve", "-out", out, "-plot", fig, "-rtol", "NaN"},
		{"grad", "-out", out, "-plot", fig, "-loss", "nope"},
		{"fit", "-out", out, "-plot", fig, "-fit", "rho", "-lr", "NaN"},
		{"fit", "-out", out, "-plot", fig, "-fit", "rho", "-data", filepath.Join(dir, "missing.csv")},
	} {
		code, _, stderr := runArgs(args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d:\n%s", args, code, exitUsage, stderr)
		}
		for _, p := range []string{prof, out, fig} {
			checkOld(t, strings.Join(args, " "), p)
		}
	}
	checkNoTemp(t, dir)
}

// TestBenchFailedSuiteKeepsOut checks that a bench suite that fails
// (here: a GPU suite without a GPU engine) leaves -out and -cpuprofile as
// they were.
func TestBenchFailedSuiteKeepsOut(t *testing.T) {
	// Not parallel: a process has one CPU profile at a time.
	dir := t.TempDir()
	out := writeOld(t, dir, "table.txt")
	prof := writeOld(t, dir, "cpu.prof")
	args := []string{"bench", "-suite", "gpu-lorenz", "-engine", "no-such-engine", "-n", "8", "-reps", "1", "-out", out, "-cpuprofile", prof}
	code, _, stderr := runArgs(args...)
	if code == exitOK {
		t.Fatalf("%q: exit 0, want a failure:\n%s", args, stderr)
	}
	checkOld(t, "a failed suite", out)
	checkOld(t, "a failed suite", prof)
	checkNoTemp(t, dir)
}

// TestBenchProfileWritten checks that a successful bench writes its CPU
// profile and its table through temporary files renamed into place.
func TestBenchProfileWritten(t *testing.T) {
	// Not parallel: a process has one CPU profile at a time.
	dir := t.TempDir()
	out := writeOld(t, dir, "table.txt")
	prof := writeOld(t, dir, "cpu.prof")
	args := []string{"bench", "-suite", "lorenz", "-n", "8", "-rtol", "1e-4", "-reps", "1", "-ref-sample", "2", "-quiet", "-out", out, "-cpuprofile", prof}
	if code, _, stderr := runArgs(args...); code != exitOK {
		t.Fatalf("%q: exit %d:\n%s", args, code, stderr)
	}
	for _, p := range []string{out, prof} {
		if b, _ := os.ReadFile(p); len(b) < 10 || string(b) == "old\n" {
			t.Errorf("%s was not written: %.40q", p, b)
		}
	}
	checkNoTemp(t, dir)
}

// TestStdoutWriteError checks that a write error on stdout (a full disk,
// /dev/full) gives exit status 1 and a message, for every command that
// writes to stdout.
func TestStdoutWriteError(t *testing.T) {
	t.Parallel()
	cmds := [][]string{
		{"fit", "-problem", "vdp", "-fit", "mu", "-steps", "2", "-quiet"},
		{"fit", "-problem", "vdp", "-fit", "mu", "-steps", "2", "-json"},
		{"fit", "-problem", "vdp", "-fit", "mu", "-steps", "2", "-format", "csv"},
		{"solve", "-problem", "vdp"},
		{"grad", "-problem", "vdp", "-json"},
		{"solve", "-problem", "vdp", "-n", "2", "-format", "csv"},
		{"problems"},
		{"help", "fit"},
	}
	for _, args := range cmds {
		var stderr bytes.Buffer
		code := run(args, failWriter{}, &stderr)
		if code != exitFail || !strings.Contains(stderr.String(), "disk full") {
			t.Errorf("%q to a failing stdout: exit %d, want %d with the error:\n%s", args, code, exitFail, stderr.String())
		}
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	defer full.Close()
	for _, args := range cmds[:4] {
		var stderr bytes.Buffer
		if code := run(args, full, &stderr); code != exitFail {
			t.Errorf("%q > /dev/full: exit %d, want %d:\n%s", args, code, exitFail, stderr.String())
		}
	}
}

// TestOutputErrors checks outputs that cannot be written: a read-only
// directory (not as root, where permissions do not apply) and /dev/full.
// The run is refused or fails with exit status 1; no temporary file is
// left.
func TestOutputErrors(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err == nil {
		for _, args := range [][]string{
			{"solve", "-problem", "vdp", "-out", "/dev/full"},
			{"fit", "-problem", "vdp", "-fit", "mu", "-steps", "1", "-out", "/dev/full"},
			{"fit", "-problem", "vdp", "-fit", "mu", "-steps", "1", "-format", "csv", "-out", "/dev/full"},
		} {
			if code, _, stderr := runArgs(args...); code != exitFail {
				t.Errorf("%q: exit %d, want %d:\n%s", args, code, exitFail, stderr)
			}
		}
	}
	if os.Geteuid() == 0 {
		return // root writes into a read-only directory
	}
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	old := writeOld(t, ro, "loss.png")
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(ro, 0o755)
	for _, args := range [][]string{
		{"fit", "-problem", "vdp", "-fit", "mu", "-steps", "1", "-plot", old},
		{"solve", "-problem", "vdp", "-out", filepath.Join(ro, "x.csv")},
	} {
		if code, _, stderr := runArgs(args...); code != exitFail || !strings.Contains(stderr, ro) {
			t.Errorf("%q: exit %d, want %d naming the file:\n%s", args, code, exitFail, stderr)
		}
	}
	checkOld(t, "a read-only directory", old)
	checkNoTemp(t, ro)
}

// TestInterrupt starts the command as a process, a long fit with a loss
// plot over an existing file, waits until the plot's temporary file
// exists (the run has started), then sends SIGINT or SIGTERM: the process
// exits with a non-zero status, the temporary file is removed and the old
// plot is left as it was.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			plot := writeOld(t, dir, "loss.png")
			out := writeOld(t, dir, "fit.json")
			cmd := exec.Command(exe, "fit", "-problem", "lorenz", "-fit", "rho", "-n", "64", "-steps", "1000000", "-quiet", "-plot", plot, "-out", out)
			cmd.Env = append(os.Environ(), "GRADSOLVE_TEST_MAIN=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			deadline := time.Now().Add(20 * time.Second)
			for {
				if temps, _ := filepath.Glob(filepath.Join(dir, ".*.tmp-*")); len(temps) == 2 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("no temporary files after 20 s; stderr:\n%s", stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // into the fit
			cmd.Process.Signal(sig)
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("still running 20 s after %v", sig)
			}
			if err == nil {
				t.Errorf("exit status 0 after %v", sig)
			}
			if !strings.Contains(stderr.String(), "interrupted") {
				t.Errorf("stderr does not say the run was interrupted:\n%s", stderr.String())
			}
			checkOld(t, sig.String(), plot)
			checkOld(t, sig.String(), out)
			checkNoTemp(t, dir)
		})
	}
}

// TestBrokenPipe starts the command as a process whose stdout is a pipe
// closed at once (as "gradsolve bench | head -0" does) with a CPU profile
// over an existing file: the process is not killed by SIGPIPE but fails
// with exit status 1, leaving the profile as it was and no temporary
// file.
func TestBrokenPipe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	prof := writeOld(t, dir, "cpu.prof")
	cmd := exec.Command(exe, "bench", "-suite", "lorenz", "-n", "8", "-rtol", "1e-4", "-reps", "1", "-ref-sample", "2", "-quiet", "-cpuprofile", prof)
	cmd.Env = append(os.Environ(), "GRADSOLVE_TEST_MAIN=1")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd.Stdout = w
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	w.Close()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFail {
		t.Errorf("exit: %v, want status %d:\n%s", err, exitFail, stderr.String())
	}
	checkOld(t, "a broken pipe", prof)
	checkNoTemp(t, dir)
}

// TestBarCountsTrajectories checks that the bar of grad counts each
// trajectory once (the record and the gradient are two halves of its
// work), so that its count and rate are those of the report, which
// prints trajectories per second of the whole run.
func TestBarCountsTrajectories(t *testing.T) {
	t.Parallel()
	code, _, stderr := runBars(barConfig{force: true}, "grad", "-problem", "lorenz", "-n", "64", "-vary", "p1=0:21")
	if code != exitOK || !strings.Contains(stderr, "64/64") || strings.Contains(stderr, "/128") {
		t.Errorf("exit %d; the bar should end at 64/64 trajectories:\n%q", code, stderr)
	}
	// The passes: record, then gradient, map to one count of n.
	var r passReports
	p := newPasses(&r, 10)
	p.passes = 2
	p.progress(4, 10) // record: 4 of 10
	p.progress(10, 10)
	p.next()
	p.progress(6, 10) // gradient: 6 of 10
	p.progress(10, 10)
	want := []int{2, 5, 8, 10}
	if len(r.done) != len(want) {
		t.Fatalf("reports %v, want %v", r.done, want)
	}
	for i := range want {
		if r.done[i] != want[i] {
			t.Fatalf("reports %v, want %v", r.done, want)
		}
	}
}

// passReports records what a passes reports.
type passReports struct{ done []int }

func (r *passReports) Report(done int, _ float64) { r.done = append(r.done, done) }
func (r *passReports) Finish()                    {}

var _ progress.Reporter = (*passReports)(nil)
