package bench

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// long runs the long cases of the host-compiled kernel tests as well: by
// default a representative subset runs (every kernel, layout and status
// path), and -long adds the cases that only cost more steps.
var long = flag.Bool("long", false, "run the long cases of the host-compiled kernel tests too")

// hostBuilds holds the harness executables this test process has built,
// one per source and compiler flags, so that the tests that run the same
// executable compile it once. They live in one temporary directory that
// TestMain removes.
var hostBuilds struct {
	sync.Mutex
	dir string
	m   map[string]*hostBuild
}

type hostBuild struct {
	once sync.Once
	exe  string
	out  []byte
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if hostBuilds.dir != "" {
		os.RemoveAll(hostBuilds.dir)
	}
	os.Exit(code)
}

// buildHost compiles harness (a file of testdata) with g++ and the flags
// args, source written as file into a directory on the include path, and
// returns the executable's path; name names the executable. The first
// test to ask builds it, later ones (also in parallel) get the same. It
// skips the test when g++ is not installed.
func buildHost(t *testing.T, name, file, source, harness string, args ...string) string {
	t.Helper()
	gxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("g++ not found: the CUDA kernels cannot be compiled as host C++")
	}
	key := name + "\x00" + file + "\x00" + harness
	for _, a := range args {
		key += "\x00" + a
	}
	hostBuilds.Lock()
	if hostBuilds.m == nil {
		hostBuilds.m = map[string]*hostBuild{}
	}
	if hostBuilds.dir == "" {
		if hostBuilds.dir, err = os.MkdirTemp("", "gradsolve-bench-host"); err != nil {
			hostBuilds.Unlock()
			t.Fatal(err)
		}
	}
	b := hostBuilds.m[key]
	if b == nil {
		b = &hostBuild{}
		hostBuilds.m[key] = b
	}
	base := hostBuilds.dir
	hostBuilds.Unlock()
	b.once.Do(func() {
		var dir string
		if dir, b.err = os.MkdirTemp(base, name); b.err != nil {
			return
		}
		if b.err = os.WriteFile(filepath.Join(dir, file), []byte(source), 0o644); b.err != nil {
			return
		}
		var path string
		if path, b.err = filepath.Abs(filepath.Join("testdata", harness)); b.err != nil {
			return
		}
		exe := filepath.Join(dir, name)
		cmd := exec.Command(gxx, append(append(args[:len(args):len(args)], "-I", dir, "-o", exe), path)...)
		if b.out, b.err = cmd.CombinedOutput(); b.err == nil {
			b.exe = exe
		}
	})
	if b.err != nil {
		t.Fatalf("building %s: %v\n%s", name, b.err, b.out)
	}
	return b.exe
}
