// Package atomicfile writes output files so that nothing is lost or
// half-written: a file is written to a temporary file in the same
// directory, synced to disk and renamed to its name only when it is
// complete (File.Commit). Until then, and if the write fails or is given
// up (File.Abort), the file of that name is as it was. A reader sees the
// old file or the new one, never part of either.
//
// A symbolic link is followed: the file it names is replaced and the link
// is kept. A path that is not a regular file (a device such as /dev/null
// or /dev/stdout, a pipe), or that is or leads into /dev or /proc, is
// written directly, appending, as a temporary file cannot stand in for
// it; its write errors (as /dev/full's) are still returned by Commit.
//
// The temporary files not yet committed or aborted are registered, so that
// a signal handler can remove them (RemovePending) before the process
// exits: an interrupted run leaves no temporary file behind. Their names
// are the file's with a leading dot and a ".tmp-" suffix, as
// ".runs.csv.tmp-123456".
//
// Same tells whether two paths name one file, through links and
// relative paths alike, so that a program can refuse two outputs (or an
// output and an input) that would overwrite each other.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ErrInterrupted is returned by Create after RemovePending: the process
// is exiting.
var ErrInterrupted = errors.New("atomicfile: interrupted")

// File is an output file being written. Its methods are not safe for
// concurrent use, except that RemovePending may run at any time.
type File struct {
	path string // the name the caller gave
	dest string // the file f is renamed to; "" if f is written directly
	f    *os.File
	w    *bufio.Writer
	done bool
}

// pending is the registry of the temporary files not yet committed or
// aborted.
var pending struct {
	mu     sync.Mutex
	files  map[string]struct{}
	closed bool // RemovePending ran: no new temporary files
}

// Create starts writing the file at path. Call it before the work whose
// result the file holds, so that a path that cannot be written costs no
// work. Errors name path (not the temporary file).
func Create(path string) (*File, error) {
	target, direct, err := resolveLinks(path)
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
		return &File{path: path, f: f, w: bufio.NewWriter(f)}, nil
	}
	mode := fs.FileMode(0o644)
	if err == nil {
		mode = fi.Mode().Perm()
	}
	pending.mu.Lock()
	defer pending.mu.Unlock()
	if pending.closed {
		return nil, fmt.Errorf("cannot write %s: %w", path, ErrInterrupted)
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
	if pending.files == nil {
		pending.files = make(map[string]struct{})
	}
	pending.files[f.Name()] = struct{}{}
	return &File{path: path, dest: target, f: f, w: bufio.NewWriter(f)}, nil
}

// Path returns the path the file was created with.
func (a *File) Path() string { return a.path }

// Write writes p to the file's buffer. A write error is returned here or
// by Commit.
func (a *File) Write(p []byte) (int, error) {
	if a.done {
		return 0, fmt.Errorf("writing %s: %w", a.path, fs.ErrClosed)
	}
	return a.w.Write(p)
}

// Commit flushes the file, syncs it to disk and renames it to its name.
// On an error the temporary file is removed, the file of that name is left
// as it was and the error names the path. A second Commit, or a Commit
// after Abort, does nothing.
func (a *File) Commit() error {
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
	if a.dest != "" {
		pending.mu.Lock()
		if err == nil && pending.closed {
			err = ErrInterrupted
		}
		if err == nil {
			err = os.Rename(a.f.Name(), a.dest)
		}
		if err != nil {
			os.Remove(a.f.Name())
		}
		delete(pending.files, a.f.Name())
		pending.mu.Unlock()
		if err == nil {
			syncDir(filepath.Dir(a.dest))
		}
	}
	if err != nil {
		return fmt.Errorf("writing %s: %v", a.path, pathErr(err))
	}
	return nil
}

// Abort gives up the file: the temporary file is removed and the file of
// that name is left as it was. It does nothing after Commit, so it may be
// deferred.
func (a *File) Abort() {
	if a.done {
		return
	}
	a.done = true
	a.f.Close()
	if a.dest != "" {
		pending.mu.Lock()
		os.Remove(a.f.Name())
		delete(pending.files, a.f.Name())
		pending.mu.Unlock()
	}
}

// syncDir syncs the directory dir, so that a rename in it survives a
// crash; file systems that cannot sync a directory are left as they are.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// RemovePending removes every temporary file not yet committed or
// aborted and makes later Creates and Commits fail with ErrInterrupted,
// and returns the number removed. It is for a signal handler that then
// exits the process: a Create or Commit under way when it runs either
// completes before it or does not happen.
func RemovePending() int {
	pending.mu.Lock()
	defer pending.mu.Unlock()
	pending.closed = true
	k := 0
	for name := range pending.files {
		if os.Remove(name) == nil {
			k++
		}
		delete(pending.files, name)
	}
	return k
}

// WriteFile writes data to the file at path as Create, Write and Commit
// do: the file is replaced whole or not at all.
func WriteFile(path string, data []byte) error {
	return Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write writes the file at path with write: the file is replaced by what
// write wrote if it returns nil and the file can be written, and left as
// it was otherwise.
func Write(path string, write func(io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := write(f); err != nil {
		return err
	}
	return f.Commit()
}

// Same reports whether the paths a and b name the same file: the same
// path once symbolic links (of the file and of its directories) are
// followed and relative paths made absolute, or, for existing files, one
// file (os.SameFile: also through hard links). Paths that cannot be
// resolved are compared as cleaned absolute paths.
func Same(a, b string) bool {
	ra, rb := Resolve(a), Resolve(b)
	if ra == rb {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// Resolve returns the absolute path of the file that path names once
// every symbolic link is followed: of the file itself (a link to a file
// that does not exist yet resolves to that file) and of its directories.
func Resolve(path string) string {
	target, _, err := resolveLinks(path)
	if err != nil {
		target = path
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return filepath.Clean(target)
	}
	dir, base := filepath.Split(abs)
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		return filepath.Join(d, base)
	}
	return abs
}

// resolveLinks follows the symbolic links of path's last element and
// returns the file they lead to, and whether it must be written directly
// (the path or a link leads into /dev or /proc, as /dev/stdout does).
func resolveLinks(path string) (target string, direct bool, err error) {
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

// special reports whether p is or is inside /dev or /proc.
func special(p string) bool {
	abs, err := filepath.Abs(p)
	return err == nil && (strings.HasPrefix(abs, "/dev/") || strings.HasPrefix(abs, "/proc/"))
}

// pathErr returns the cause of a *fs.PathError (the path in it may be the
// temporary file's, which means nothing to the user), or err.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
