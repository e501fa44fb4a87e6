package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"

	"github.com/gradsolve-go/gradsolve/internal/atomicfile"
	"github.com/gradsolve-go/gradsolve/ode"
)

// atomicFile is an output file written through a temporary file in the
// same directory and renamed to its name by Commit, so that a run that
// fails, is interrupted or cannot write leaves no half-written file: the
// file is complete or as it was (see package internal/atomicfile).
type atomicFile = atomicfile.File

// createAtomic creates the temporary file of path. It is called once the
// command line and its inputs are valid, before the run, so that a path
// that cannot be written is reported before any work. Errors name path.
func createAtomic(path string) (*atomicFile, error) { return atomicfile.Create(path) }

// fileArg is a file named on the command line: the flag and the path.
type fileArg struct {
	flag, path string
	input      bool // read, not written
}

// checkFiles returns a *usageError if two of files, at least one of them
// written, name one file: the same path, through a symbolic link to the
// file or to a directory above it, or a hard link. The error names both
// flags. Paths that are the standard output or a device (/dev/...) are
// not compared: writing one twice replaces nothing.
func checkFiles(files ...fileArg) error {
	var fs []fileArg
	for _, f := range files {
		if f.path != "" && (f.input || !writesStdout(f.path)) && !strings.HasPrefix(atomicfile.Resolve(f.path), "/dev/") {
			fs = append(fs, f)
		}
	}
	for i, a := range fs {
		for _, b := range fs[i+1:] {
			if (a.input && b.input) || !atomicfile.Same(a.path, b.path) {
				continue
			}
			how := "one output would overwrite the other"
			if a.input || b.input {
				how = "the output would overwrite the input"
			}
			return usagef("%s %s and %s %s name the same file (%s), %s; give them different files", a.flag, a.path, b.flag, b.path, atomicfile.Resolve(a.path), how)
		}
	}
	return nil
}

// benchOutputs are the files of bench: -out and the CPU profile; nil
// where not asked for (-out empty, "-" or /dev/stdout: stdout).
type benchOutputs struct {
	out, prof *atomicFile
	trace     *atomicFile // the execution trace (-trace)
	stdout    *errWriter  // the results' writer when they go to stdout
}

// writer returns the writer of the results: -out's file, or stdout.
func (b *benchOutputs) writer(stdout io.Writer) io.Writer {
	if b.out != nil {
		return b.out
	}
	b.stdout = &errWriter{w: stdout}
	return b.stdout
}

// startBenchOutputs creates the temporary files of bench's -out,
// -cpuprofile and -trace and starts the CPU profile and the execution
// trace. Call it once the command line is valid.
func startBenchOutputs(out, prof, tr string) (_ *benchOutputs, err error) {
	b := &benchOutputs{}
	defer func() {
		if err != nil {
			b.finish(err)
		}
	}()
	if !writesStdout(out) {
		if b.out, err = createAtomic(out); err != nil {
			return nil, fmt.Errorf("-out: %v", err)
		}
	}
	if prof != "" {
		if b.prof, err = createAtomic(prof); err != nil {
			return nil, fmt.Errorf("-cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(b.prof); err != nil {
			return nil, fmt.Errorf("-cpuprofile: %v", err)
		}
	}
	if tr != "" {
		if b.trace, err = createAtomic(tr); err != nil {
			return nil, fmt.Errorf("-trace: %v", err)
		}
		if err := trace.Start(b.trace); err != nil {
			return nil, fmt.Errorf("-trace: %v", err)
		}
	}
	return b, nil
}

// finish stops the profile and, if err is nil and the results could be
// written to stdout, commits the files; else it aborts them (the files
// are as they were). It returns err, or the first error writing.
func (b *benchOutputs) finish(err error) error {
	if b.prof != nil {
		pprof.StopCPUProfile()
	}
	if b.trace != nil {
		trace.Stop()
	}
	if err == nil && b.stdout != nil && b.stdout.err != nil {
		err = fmt.Errorf("writing the results: %v", b.stdout.err)
	}
	err = commitIf(b.out, err)
	err = commitIf(b.trace, err)
	return commitIf(b.prof, err)
}

// commitIf commits f if err is nil and aborts it otherwise, and returns
// err or the error of the commit. A nil f is nothing to do.
func commitIf(f *atomicFile, err error) error {
	if f == nil {
		return err
	}
	if err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// savedPath returns the name of the saved-states table written beside
// the CSV file path: runs.csv → runs.saved.csv.
func savedPath(path string) string {
	ext := filepath.Ext(path)
	return strings.TrimSuffix(path, ext) + ".saved" + ext
}

// csvFloat formats x for a CSV field: the shortest form that reads back
// exactly, or an empty field if x is NaN or infinite (a value that could
// not be computed, null in the JSON output).
func csvFloat(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return ""
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// csvHeader returns the columns of the trajectory table.
func (j *job) csvHeader() []string {
	d := j.prob.Field.Dim
	hdr := []string{"i"}
	for c := 0; c < d; c++ {
		hdr = append(hdr, fmt.Sprintf("y0[%d]", c))
	}
	hdr = append(hdr, j.pnames...)
	hdr = append(hdr, "t")
	for c := 0; c < d; c++ {
		hdr = append(hdr, fmt.Sprintf("y[%d]", c))
	}
	hdr = append(hdr, "status", "accepted", "rejected")
	if j.opts.cmd == "grad" {
		for c := 0; c < d; c++ {
			hdr = append(hdr, fmt.Sprintf("dL/dy0[%d]", c))
		}
		for _, p := range j.pnames {
			hdr = append(hdr, "dL/d"+p)
		}
	}
	return hdr
}

// writeCSV writes the trajectory table of out to w: a header, then one
// row per trajectory with its index, initial state, parameters, the time
// it reached and its state there, its status and step counts and, for
// grad, its gradient. Fields that were not computed are empty. It writes
// the header alone if the run produced no solution.
func (j *job) writeCSV(w io.Writer, out *outcome) error {
	n, d, np := j.n(), j.prob.Field.Dim, j.prob.Field.Params
	cw := csv.NewWriter(w)
	hdr := j.csvHeader()
	if err := cw.Write(hdr); err != nil {
		return err
	}
	sol, g := out.sol, out.grad
	if sol == nil {
		cw.Flush()
		return cw.Error()
	}
	refused := out.refusedStiff() // the stiff trajectories are the cause
	row := make([]string, 0, len(hdr))
	for i := 0; i < n; i++ {
		row = append(row[:0], strconv.Itoa(i))
		for _, x := range j.prob.Y0[i*d : (i+1)*d] {
			row = append(row, csvFloat(x))
		}
		for _, x := range j.prob.P[i*np : (i+1)*np] {
			row = append(row, csvFloat(x))
		}
		row = append(row, csvFloat(at(sol.T, i)))
		for c := 0; c < d; c++ {
			row = append(row, csvFloat(at(sol.Y, i*d+c)))
		}
		st := ""
		if i < len(sol.Status) {
			st = sol.Status[i].String()
		}
		if refused && i < len(sol.Stiff) && sol.Stiff[i] {
			st = ode.Stiff.String()
		}
		row = append(row, st, strconv.Itoa(atInt(sol.Stats.Accepted, i)), strconv.Itoa(atInt(sol.Stats.Rejected, i)))
		if j.opts.cmd == "grad" {
			for c := 0; c < d; c++ {
				x := math.NaN()
				if g != nil {
					x = at(g.Y0, i*d+c)
				}
				row = append(row, csvFloat(x))
			}
			for k := 0; k < np; k++ {
				x := math.NaN()
				if g != nil {
					x = at(g.P, i*np+k)
				}
				row = append(row, csvFloat(x))
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// writeSavedCSV writes the saved-states table of out to w, in long form:
// a header (i, t, y[0], …), then one row per trajectory and save time.
func (j *job) writeSavedCSV(w io.Writer, out *outcome) error {
	n, d, K := j.n(), j.prob.Field.Dim, len(j.prob.SaveAt)
	cw := csv.NewWriter(w)
	hdr := []string{"i", "t"}
	for c := 0; c < d; c++ {
		hdr = append(hdr, fmt.Sprintf("y[%d]", c))
	}
	if err := cw.Write(hdr); err != nil {
		return err
	}
	if out.sol == nil || len(out.sol.Ys) != n*K*d {
		cw.Flush()
		return cw.Error()
	}
	ys := out.sol.Ys
	row := make([]string, 0, len(hdr))
	for i := 0; i < n; i++ {
		for k, tau := range j.prob.SaveAt {
			row = append(row[:0], strconv.Itoa(i), csvFloat(tau))
			for _, x := range ys[(i*K+k)*d : (i*K+k+1)*d] {
				row = append(row, csvFloat(x))
			}
			if err := cw.Write(row); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// at returns xs[i], or NaN if xs is too short (not computed).
func at(xs []float64, i int) float64 {
	if i < len(xs) {
		return xs[i]
	}
	return math.NaN()
}

// atInt returns xs[i], or 0 if xs is too short.
func atInt(xs []int, i int) int {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}
