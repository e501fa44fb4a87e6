package main

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gradsolve-go/gradsolve/ode"
)

// atomicFile is an output file written through a temporary file in the
// same directory and renamed to its name by commit, so that a run that
// fails, is interrupted or cannot write leaves no half-written file: the
// file is complete or as it was. A symbolic link is followed (the file it
// names is replaced, the link kept). A path that is not a regular file (a
// device such as /dev/stdout, a pipe), or that is or leads into /dev or
// /proc, is written directly, appending.
type atomicFile struct {
	path string   // the name the user gave
	f    *os.File // the temporary file, or the file itself if direct
	w    *bufio.Writer
	dest string // the file to rename f to; "" if direct
	done bool
}

// createAtomic creates the temporary file of path. It is called before
// the run, so that a path that cannot be written is reported before any
// work. Errors name path.
func createAtomic(path string) (*atomicFile, error) {
	target, direct, err := resolveOutput(path)
	if err != nil {
		return nil, fmt.Errorf("cannot write %s: %v", path, pathErr(err))
	}
	fi, err := os.Stat(target)
	switch {
	case err == nil && fi.IsDir():
		return nil, fmt.Errorf("cannot write %s: it is a directory", path)
	case err == nil && !fi.Mode().IsRegular():
		direct = true
	}
	if direct {
		f, err := os.OpenFile(target, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return nil, fmt.Errorf("cannot write %s: %v", path, pathErr(err))
		}
		return &atomicFile{path: path, f: f, w: bufio.NewWriter(f)}, nil
	}
	mode := fs.FileMode(0o644)
	if err == nil {
		mode = fi.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("cannot write %s: %v", path, pathErr(err))
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("cannot write %s: %v", path, pathErr(err))
	}
	return &atomicFile{path: path, f: f, w: bufio.NewWriter(f), dest: target}, nil
}

// resolveOutput follows the symbolic links of path's last element and
// returns the file they lead to, and whether it must be written directly
// (the path or a link leads into /dev or /proc, as /dev/stdout does).
func resolveOutput(path string) (target string, direct bool, err error) {
	special := func(p string) bool {
		abs, err := filepath.Abs(p)
		return err == nil && (strings.HasPrefix(abs, "/dev/") || strings.HasPrefix(abs, "/proc/"))
	}
	target = path
	for hops := 0; ; hops++ {
		if special(target) {
			return target, true, nil
		}
		fi, err := os.Lstat(target)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			return target, false, nil // a missing file is created
		}
		if hops == 40 {
			return "", false, errors.New("too many levels of symbolic links")
		}
		link, err := os.Readlink(target)
		if err != nil {
			return "", false, err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(target), link)
		}
		target = link
	}
}

// pathErr returns the cause of a *fs.PathError (the path in it is the
// temporary file's, which means nothing to the user), or err.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Write writes to the file's buffer.
func (a *atomicFile) Write(p []byte) (int, error) { return a.w.Write(p) }

// commit flushes the file to disk and renames it to its path.
func (a *atomicFile) commit() error {
	if a.done {
		return nil
	}
	a.done = true
	err := a.w.Flush()
	if err == nil && a.dest != "" {
		err = a.f.Sync()
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	if err == nil && a.dest != "" {
		err = os.Rename(a.f.Name(), a.dest)
	}
	if err != nil {
		if a.dest != "" {
			os.Remove(a.f.Name())
		}
		return fmt.Errorf("writing %s: %v", a.path, pathErr(err))
	}
	return nil
}

// abort removes the temporary file unless the file was committed.
func (a *atomicFile) abort() {
	if a.done {
		return
	}
	a.done = true
	a.f.Close()
	if a.dest != "" {
		os.Remove(a.f.Name())
	}
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
