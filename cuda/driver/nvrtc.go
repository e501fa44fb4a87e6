package driver

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// nvrtcSonames are NVRTC's library names, tried in order before the
// install folders.
var nvrtcSonames = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.11.1", "libnvrtc.so.11.0", "libnvrtc.so"}

// nvrtc holds NVRTC's entry points. It is loaded once per process.
type nvrtc struct {
	path         string // the library that was loaded
	major, minor int
	archs        []int // supported sm_XY as 10·X+Y, ascending; nil if NVRTC cannot tell

	mu sync.Mutex // serialises compilations of NVRTC before 12 (see compile)

	nvrtcVersion           func(major, minor *int32) int32
	nvrtcGetErrorString    func(int32) *byte
	nvrtcCreateProgram     func(prog *uintptr, src, name *byte, nhdr int32, hdrs, incs **byte) int32
	nvrtcDestroyProgram    func(prog *uintptr) int32
	nvrtcCompileProgram    func(prog uintptr, nopt int32, opts **byte) int32
	nvrtcGetProgramLogSize func(prog uintptr, n *uint64) int32
	nvrtcGetProgramLog     func(prog uintptr, log *byte) int32
	nvrtcGetPTXSize        func(prog uintptr, n *uint64) int32
	nvrtcGetPTX            func(prog uintptr, ptx *byte) int32
	nvrtcGetCUBINSize      func(prog uintptr, n *uint64) int32 // nil before NVRTC 11.1
	nvrtcGetCUBIN          func(prog uintptr, cubin *byte) int32
}

var (
	nvrtcOnce sync.Once
	nvrtcLib  *nvrtc
	nvrtcErr  error
)

// loadNVRTC finds and loads NVRTC once per process. Its error wraps
// ErrNoNVRTC.
func loadNVRTC() (*nvrtc, error) {
	nvrtcOnce.Do(func() { nvrtcLib, nvrtcErr = openNVRTC(nvrtcCandidates()) })
	return nvrtcLib, nvrtcErr
}

// LoadNVRTC finds and loads NVRTC (once per process) and returns an error
// wrapping ErrNoNVRTC if there is none.
func LoadNVRTC() error {
	_, err := loadNVRTC()
	return err
}

// NVRTCVersion returns the version of the NVRTC library Compile uses and
// its path, loading it if need be. Its error wraps ErrNoNVRTC if none is
// found.
func NVRTCVersion() (major, minor int, path string, err error) {
	l, err := loadNVRTC()
	if err != nil {
		return 0, 0, "", err
	}
	return l.major, l.minor, l.path, nil
}

// nvrtcCandidates lists the libraries to try: the sonames (found through
// the loader's search path), then the libnvrtc.so.* files of
// $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64 and
// /usr/local/cuda-*/lib64 (newest first), each newest first.
func nvrtcCandidates() []string {
	c := slices.Clone(nvrtcSonames)
	var dirs []string
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if v := os.Getenv(env); v != "" {
			dirs = append(dirs, filepath.Join(v, "lib64"), filepath.Join(v, "lib"))
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64")
	versioned, _ := filepath.Glob("/usr/local/cuda-*/lib64")
	sortNewestFirst(versioned)
	dirs = append(dirs, versioned...)
	for _, dir := range dirs {
		libs, _ := filepath.Glob(filepath.Join(dir, "libnvrtc.so.*"))
		sortNewestFirst(libs)
		c = append(c, libs...)
		c = append(c, filepath.Join(dir, "libnvrtc.so"))
	}
	return c
}

// sortNewestFirst sorts paths by the version numbers they contain,
// highest first ("cuda-13.0" before "cuda-12.9", "so.12" before "so.11.2").
func sortNewestFirst(paths []string) {
	version := func(s string) []int {
		var v []int
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
			n, _ := strconv.Atoi(f)
			v = append(v, n)
		}
		return v
	}
	slices.SortStableFunc(paths, func(a, b string) int { return slices.Compare(version(b), version(a)) })
}

// openNVRTC loads the first candidate that opens.
func openNVRTC(candidates []string) (*nvrtc, error) {
	var lib uintptr
	var path string
	for _, c := range candidates {
		if strings.ContainsRune(c, '/') {
			if _, err := os.Stat(c); err != nil {
				continue
			}
			// NVRTC loads its builtins library by name; where it is
			// not on the loader's path, load it from beside NVRTC.
			if bs, _ := filepath.Glob(filepath.Join(filepath.Dir(c), "libnvrtc-builtins.so.*")); len(bs) > 0 {
				sortNewestFirst(bs)
				purego.Dlopen(bs[0], purego.RTLD_NOW|purego.RTLD_GLOBAL)
			}
		}
		if h, err := purego.Dlopen(c, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			lib, path = h, c
			break
		}
	}
	if lib == 0 {
		return nil, fmt.Errorf("cuda: %w: none of libnvrtc.so.{13,12,11.2} found by the loader, nor in $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64 or /usr/local/cuda-*/lib64", ErrNoNVRTC)
	}
	l := &nvrtc{path: path}
	for _, e := range []struct {
		name     string
		fn       any
		optional bool
	}{
		{"nvrtcVersion", &l.nvrtcVersion, false},
		{"nvrtcGetErrorString", &l.nvrtcGetErrorString, false},
		{"nvrtcCreateProgram", &l.nvrtcCreateProgram, false},
		{"nvrtcDestroyProgram", &l.nvrtcDestroyProgram, false},
		{"nvrtcCompileProgram", &l.nvrtcCompileProgram, false},
		{"nvrtcGetProgramLogSize", &l.nvrtcGetProgramLogSize, false},
		{"nvrtcGetProgramLog", &l.nvrtcGetProgramLog, false},
		{"nvrtcGetPTXSize", &l.nvrtcGetPTXSize, false},
		{"nvrtcGetPTX", &l.nvrtcGetPTX, false},
		{"nvrtcGetCUBINSize", &l.nvrtcGetCUBINSize, true},
		{"nvrtcGetCUBIN", &l.nvrtcGetCUBIN, true},
	} {
		sym, err := purego.Dlsym(lib, e.name)
		if err != nil {
			if e.optional {
				continue
			}
			return nil, fmt.Errorf("cuda: %w: %s has no %s", ErrNoNVRTC, path, e.name)
		}
		purego.RegisterFunc(e.fn, sym)
	}
	if l.nvrtcGetCUBIN == nil {
		l.nvrtcGetCUBINSize = nil
	}
	var major, minor int32
	if r := l.nvrtcVersion(&major, &minor); r != 0 {
		return nil, fmt.Errorf("cuda: %w: nvrtcVersion failed: %s", ErrNoNVRTC, l.errName(r))
	}
	l.major, l.minor = int(major), int(minor)
	l.archs = supportedArchs(lib)
	return l, nil
}

// supportedArchs asks NVRTC (11.2 and later) which sm_XY it compiles
// for; nil if it cannot tell.
func supportedArchs(lib uintptr) []int {
	numSym, err1 := purego.Dlsym(lib, "nvrtcGetNumSupportedArchs")
	getSym, err2 := purego.Dlsym(lib, "nvrtcGetSupportedArchs")
	if err1 != nil || err2 != nil {
		return nil
	}
	var num func(*int32) int32
	var get func(*int32) int32
	purego.RegisterFunc(&num, numSym)
	purego.RegisterFunc(&get, getSym)
	var n int32
	if num(&n) != 0 || n <= 0 {
		return nil
	}
	a := make([]int32, n)
	if get(&a[0]) != 0 {
		return nil
	}
	archs := make([]int, n)
	for i, v := range a {
		archs[i] = int(v)
	}
	slices.Sort(archs)
	return archs
}

func (l *nvrtc) errName(r int32) string {
	if p := l.nvrtcGetErrorString(r); p != nil {
		return gostring(p)
	}
	return fmt.Sprintf("NVRTC error %d", r)
}

// Arch is a compute capability, as 9.0 for the H100 and H200.
type Arch struct{ Major, Minor int }

// SM returns the architecture number, 10·Major + Minor (90 for 9.0).
func (a Arch) SM() int { return 10*a.Major + a.Minor }

// String returns the architecture's name, as "sm_90".
func (a Arch) String() string { return fmt.Sprintf("sm_%d", a.SM()) }

// target chooses what to compile for a device of arch a: a cubin for
// sm_XY where NVRTC produces cubins and supports the architecture, else
// PTX for the newest compute_XY it supports not above a (the driver
// compiles PTX for the device when it loads it).
func (l *nvrtc) target(a Arch) (arch string, cubin bool) {
	sm := a.SM()
	if l.archs == nil {
		return fmt.Sprintf("compute_%d", sm), false
	}
	if l.nvrtcGetCUBIN != nil && slices.Contains(l.archs, sm) {
		return fmt.Sprintf("sm_%d", sm), true
	}
	best := l.archs[0]
	for _, s := range l.archs {
		if s <= sm {
			best = s
		}
	}
	return fmt.Sprintf("compute_%d", best), false
}

// CompileSettings are the options of Compile. The zero value means the
// defaults.
type CompileSettings struct {
	// Name is the program's name in NVRTC's log; "" means "gradsolve.cu".
	Name string

	// FMA lets the compiler contract a*b + c into one fused multiply-add
	// (--fmad=true). The default, false, keeps every operation rounded
	// as written, so that the device rounds as the CPU engine does and
	// a recorded solve and its replay agree bit for bit (what contraction
	// is worth is measured in bench/RESULTS.md).
	FMA bool

	// Options are further NVRTC options, appended to the defaults
	// (--gpu-architecture, --fmad, -std=c++17, -default-device). The
	// option -minimal (--minimal), which NVRTC 12.4 introduced, is left
	// out where the NVRTC loaded is older (nvrtcVersion; see
	// versionOptions), so that callers may pass it whatever the version.
	Options []string

	// NoCache skips the disk cache (see Compile).
	NoCache bool
}

// Image is compiled device code, ready for Device.Load.
type Image struct {
	Data    []byte   // a cubin, or NUL-terminated PTX if PTX is set
	PTX     bool     // Data is PTX, which the driver compiles when loading
	Target  string   // the architecture compiled for, as "sm_90" or "compute_90"
	Options []string // the NVRTC options used
	Log     string   // NVRTC's log (warnings); empty when read from the cache
	Cached  bool     // read from the disk cache
	Key     string   // the cache key: hex SHA-256 of source, options, target and NVRTC version
}

// Compile compiles CUDA C++ source for a device of architecture arch with
// NVRTC: to a cubin for sm_XY where the NVRTC supports it, else to PTX for
// compute_XY; with --fmad=false unless s.FMA,
// -std=c++17 and -default-device. On failure it returns a *CompileError
// holding NVRTC's log. Its error wraps ErrNoNVRTC if NVRTC is not found.
//
// Results are cached on disk under the key SHA-256(source, options,
// target, NVRTC version), in $GRADSOLVE_CUDA_CACHE if set (the value
// "off" disables the cache), else in os.UserCacheDir()/gradsolve/cuda.
// Each entry carries the hash of its key and of its data, checked before
// it is used: a damaged entry (truncated, altered, or written for another
// key) is compiled and written again, with a warning on standard error
// (once per entry and process). Entries are written to a temporary file
// in the cache folder, synced and renamed into place, so processes may
// share a folder. A failure to write the cache is not an error. Compiling
// a large program takes NVRTC seconds; a cache hit costs a file read.
func Compile(src string, arch Arch, s *CompileSettings) (*Image, error) {
	if s == nil {
		s = &CompileSettings{}
	}
	l, err := loadNVRTC()
	if err != nil {
		return nil, err
	}
	img, name, cubin := l.image(src, arch, s)
	cache, ok := fromCache(s, name, img)
	if ok {
		return img, nil
	}
	if err := l.compile(img, src, name, cubin); err != nil {
		return nil, err
	}
	cacheWrite(cache, name, img)
	return img, nil
}

// image returns the image Compile makes of src, without its data: its
// target, options and cache key, with the program's name and whether it
// is a cubin.
func (l *nvrtc) image(src string, arch Arch, s *CompileSettings) (img *Image, name string, cubin bool) {
	name = s.Name
	if name == "" {
		name = "gradsolve.cu"
	}
	target, cubin := l.target(arch)
	fmad := "--fmad=false"
	if s.FMA {
		fmad = "--fmad=true"
	}
	opts := append([]string{"--gpu-architecture=" + target, fmad, "-std=c++17", "-default-device"}, versionOptions(s.Options, l.major, l.minor)...)
	img = &Image{PTX: !cubin, Target: target, Options: opts}
	img.Key = cacheKey(src, name, opts, target, l.major, l.minor)
	return img, name, cubin
}

// Cached reports whether Compile(src, arch, s) would find its image in
// the disk cache (an entry of its key is present) rather than run NVRTC:
// false where the cache is off, s.NoCache is set or NVRTC is not found.
// It reads no entry (whether one is intact is checked when Compile reads
// it), so it costs a hash of the source and a stat: a caller decides with
// it whether a compile will be long (package cuda's first calls run on
// the CPU engine while a long one runs).
func Cached(src string, arch Arch, s *CompileSettings) bool {
	return cachedEntry(s, func(l *nvrtc, s *CompileSettings) (*Image, string) {
		img, name, _ := l.image(src, arch, s)
		return img, name
	})
}

// fromCache fills img's data from its entry (name) of the disk cache
// (cacheDir; none with s.NoCache), warning of a damaged entry, and
// reports whether it did; it returns the cache's folder ("" where off),
// where the caller writes the image it makes instead.
func fromCache(s *CompileSettings, name string, img *Image) (cache string, ok bool) {
	if !s.NoCache {
		cache = cacheDir()
	}
	data, ok, bad := cacheRead(cache, name, img)
	if bad != nil {
		cacheWarn(bad)
	}
	if ok {
		img.Data, img.Cached = data, true
	}
	return cache, ok
}

// cachedEntry reports whether the disk cache holds the entry that entry
// names (its image's key and name) under settings s (nil: the
// defaults): false where the cache is off, s.NoCache is set or NVRTC is
// not found (Cached, Device.CachedUnits).
func cachedEntry(s *CompileSettings, entry func(l *nvrtc, s *CompileSettings) (*Image, string)) bool {
	if s == nil {
		s = &CompileSettings{}
	}
	l, err := loadNVRTC()
	if err != nil || s.NoCache {
		return false
	}
	dir := cacheDir()
	if dir == "" {
		return false
	}
	img, name := entry(l, s)
	_, err = os.Stat(cacheFile(dir, name, img))
	return err == nil
}

// minimalSince is the NVRTC version that introduced -minimal, which
// omits from a program the texture and surface functions and types, the
// runtime functions of cudadevrt, kernel launches from device code and
// the runtime's and driver's types and macros (cudaError_t, ...), "to
// reduce compile time for small programs" (nvrtc.h, CUDA 12.4). The
// generated kernels use none of them.
var minimalSince = [2]int{12, 4}

// versionOptions returns opts without the options that NVRTC major.minor
// does not have: -minimal (--minimal) before 12.4. It returns opts itself
// where it drops nothing.
func versionOptions(opts []string, major, minor int) []string {
	if major > minimalSince[0] || major == minimalSince[0] && minor >= minimalSince[1] {
		return opts
	}
	if !slices.Contains(opts, "-minimal") && !slices.Contains(opts, "--minimal") {
		return opts
	}
	var kept []string
	for _, o := range opts {
		if o != "-minimal" && o != "--minimal" {
			kept = append(kept, o)
		}
	}
	return kept
}

// compile runs NVRTC and fills img.Data and img.Log.
// NVRTC 12 and later compile programs concurrently (each its own
// nvrtcProgram); older ones are serialised, as their thread safety is
// not documented.
func (l *nvrtc) compile(img *Image, src, name string, cubin bool) error {
	if l.major < 12 {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	var prog uintptr
	if r := l.nvrtcCreateProgram(&prog, cstring(src), cstring(name), 0, nil, nil); r != 0 {
		return &CompileError{Program: name, Options: img.Options, Code: int(r), Msg: l.errName(r)}
	}
	defer l.nvrtcDestroyProgram(&prog)

	var pin runtime.Pinner
	defer pin.Unpin()
	copts := make([]*byte, len(img.Options))
	for i, o := range img.Options {
		copts[i] = cstring(o)
		pin.Pin(copts[i])
	}
	r := l.nvrtcCompileProgram(prog, int32(len(copts)), &copts[0])
	var n uint64
	if l.nvrtcGetProgramLogSize(prog, &n) == 0 && n > 1 {
		log := make([]byte, n)
		if l.nvrtcGetProgramLog(prog, &log[0]) == 0 {
			img.Log = string(log[:clen(log)])
		}
	}
	if r != 0 {
		return &CompileError{Program: name, Options: img.Options, Code: int(r), Msg: l.errName(r), Log: img.Log}
	}
	size, get, what := l.nvrtcGetPTXSize, l.nvrtcGetPTX, "PTX"
	if cubin {
		size, get, what = l.nvrtcGetCUBINSize, l.nvrtcGetCUBIN, "CUBIN"
	}
	if r := size(prog, &n); r != 0 {
		return &CompileError{Program: name, Options: img.Options, Code: int(r), Msg: "nvrtcGet" + what + "Size: " + l.errName(r), Log: img.Log}
	}
	img.Data = make([]byte, n)
	if r := get(prog, &img.Data[0]); r != 0 {
		return &CompileError{Program: name, Options: img.Options, Code: int(r), Msg: "nvrtcGet" + what + ": " + l.errName(r), Log: img.Log}
	}
	return nil
}

// Build compiles src for the device's architecture (Compile) and loads
// the result (Load).
func (d *Device) Build(src string, s *CompileSettings) (*Module, *Image, error) {
	img, err := Compile(src, d.info.Arch, s)
	if err != nil {
		return nil, nil, err
	}
	m, err := d.Load(img)
	return m, img, err
}

// CompilePTX compiles src (named name in NVRTC's log) to PTX for
// compute_XY of arch with the options Compile uses by default
// (--fmad=false), bypassing the disk cache; the image's Log holds NVRTC's
// warnings. It is for inspecting generated code.
func CompilePTX(src, name string, arch Arch) (*Image, error) {
	l, err := loadNVRTC()
	if err != nil {
		return nil, err
	}
	img := &Image{PTX: true, Target: fmt.Sprintf("compute_%d%d", arch.Major, arch.Minor)}
	img.Options = []string{"--gpu-architecture=" + img.Target, "--fmad=false", "-std=c++17", "-default-device"}
	if err := l.compile(img, src, name, false); err != nil {
		return nil, err
	}
	return img, nil
}
