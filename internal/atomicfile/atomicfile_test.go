package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkNoTemp fails if dir holds a temporary file.
func checkNoTemp(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file %s left in %s", e.Name(), dir)
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestFile checks that a file is replaced only by Commit: Abort leaves
// the old file and no temporary file, Commit replaces it and keeps its
// mode, and a symbolic link is kept while the file it names is replaced.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.csv")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("half"))
	a.Abort()
	if got := read(t, path); got != "old\n" {
		t.Errorf("after Abort the file is %q, want the old content", got)
	}
	checkNoTemp(t, dir)

	a, err = Create(path)
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("new\n"))
	if got := read(t, path); got != "old\n" {
		t.Errorf("before Commit the file is %q, want the old content", got)
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	a.Abort() // after Commit: nothing
	if got := read(t, path); got != "new\n" {
		t.Errorf("after Commit the file is %q", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want the old file's 0600", fi.Mode().Perm())
	}
	if _, err := a.Write([]byte("late")); err == nil {
		t.Error("Write after Commit: no error")
	}
	checkNoTemp(t, dir)

	link := filepath.Join(dir, "link.csv")
	if err := os.Symlink("out.csv", link); err != nil {
		t.Skip("no symbolic links:", err)
	}
	if err := WriteFile(link, []byte("via link\n")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v, %v", fi, err)
	}
	if got := read(t, path); got != "via link\n" {
		t.Errorf("the link's target is %q", got)
	}

	missing := filepath.Join(dir, "no", "x.csv")
	if _, err := Create(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("a missing directory: error %v, want it to name the path", err)
	}
	if _, err := Create(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory: error %v", err)
	}
	checkNoTemp(t, dir)
}

// TestWriteFails checks that a write function that fails leaves the old
// file and no temporary file, and that a device's write error (/dev/full)
// is returned by Commit.
func TestWriteFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.txt")
	os.WriteFile(path, []byte("old\n"), 0o644)
	boom := errors.New("boom")
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, "half a table")
		return boom
	})
	if !errors.Is(err, boom) || read(t, path) != "old\n" {
		t.Errorf("a failed write: %v, file %q", err, read(t, path))
	}
	checkNoTemp(t, dir)
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	if err := WriteFile("/dev/full", []byte("x")); err == nil || !strings.Contains(err.Error(), "/dev/full") {
		t.Errorf("/dev/full: error %v", err)
	}
	if err := WriteFile("/dev/null", []byte("x")); err != nil {
		t.Errorf("/dev/null: %v", err)
	}
}

// TestReadOnlyDir checks that a file in a directory that cannot be
// written is refused by Create, naming it, and left as it was. Root
// writes anyway, so the test is skipped as root.
func TestReadOnlyDir(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root ignores the permissions")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "x.txt")
	os.WriteFile(path, []byte("old\n"), 0o644)
	os.Chmod(dir, 0o555)
	defer os.Chmod(dir, 0o755)
	if _, err := Create(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("read-only directory: error %v", err)
	}
	if read(t, path) != "old\n" {
		t.Error("the file changed")
	}
}

// TestSame checks Same on the same path spelled differently, through a
// link to the file, a link to its directory, a hard link, and a link to a
// file that does not exist yet.
func TestSame(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.txt")
	os.WriteFile(a, []byte("a"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	must := func(err error) {
		if err != nil {
			t.Skip("links:", err)
		}
	}
	must(os.Symlink("a.txt", filepath.Join(dir, "la")))
	must(os.Symlink(".", filepath.Join(dir, "d")))
	must(os.Link(a, filepath.Join(dir, "hard")))
	must(os.Symlink("new.txt", filepath.Join(dir, "lnew")))
	wd, _ := os.Getwd()
	rel, err := filepath.Rel(wd, a)
	if err != nil {
		rel = a
	}
	for _, tc := range []struct {
		x, y string
		same bool
	}{
		{a, a, true},
		{a, rel, true},
		{a, filepath.Join(dir, "sub", "..", "a.txt"), true},
		{a, filepath.Join(dir, "la"), true},
		{a, filepath.Join(dir, "d", "a.txt"), true},
		{filepath.Join(dir, "d", "la"), filepath.Join(dir, "d", "d", "a.txt"), true},
		{a, filepath.Join(dir, "hard"), true},
		{filepath.Join(dir, "lnew"), filepath.Join(dir, "new.txt"), true},
		{filepath.Join(dir, "d", "new.txt"), filepath.Join(dir, "new.txt"), true},
		{a, filepath.Join(dir, "b.txt"), false},
		{a, filepath.Join(dir, "sub", "a.txt"), false},
	} {
		if got := Same(tc.x, tc.y); got != tc.same {
			t.Errorf("Same(%s, %s) = %v, want %v", tc.x, tc.y, got, tc.same)
		}
	}
}

// TestRemovePending checks that RemovePending removes the temporary
// files of the files being written, leaves the old files, and refuses
// new ones. It changes the package's state, so it is the last test that
// creates a file.
func TestRemovePending(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.txt")
	os.WriteFile(path, []byte("old\n"), 0o644)
	a, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create(filepath.Join(dir, "y.txt"))
	if err != nil {
		t.Fatal(err)
	}
	a.Write([]byte("new"))
	if k := RemovePending(); k != 2 {
		t.Errorf("RemovePending removed %d files, want 2", k)
	}
	checkNoTemp(t, dir)
	if err := a.Commit(); !errors.Is(err, ErrInterrupted) && (err == nil || !strings.Contains(err.Error(), "interrupted")) {
		t.Errorf("Commit after RemovePending: %v", err)
	}
	b.Abort()
	if read(t, path) != "old\n" {
		t.Errorf("the file is %q", read(t, path))
	}
	if _, err := Create(path); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Create after RemovePending: %v", err)
	}
	checkNoTemp(t, dir)
	if _, err := os.Stat(filepath.Join(dir, "y.txt")); err == nil {
		t.Error("y.txt was created")
	}
}
