package driver

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/gradsolve-go/gradsolve/cuda/internal/cname"
)

// cacheFormat changes whenever the cache's layout or the meaning of its
// files changes, so old entries are never read.
const cacheFormat = "gradsolve-cuda-cache-2"

// cacheEnv names the environment variable that overrides the cache
// folder; its value "off" disables the cache.
const cacheEnv = "GRADSOLVE_CUDA_CACHE"

// cacheDir returns the cache folder, or "" if caching is off or no
// folder can be named.
func cacheDir() string {
	if v := os.Getenv(cacheEnv); v != "" {
		if v == "off" {
			return ""
		}
		return v
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "gradsolve", "cuda")
}

// cacheKey hashes everything a compiled image depends on.
func cacheKey(src, name string, opts []string, target string, major, minor int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00nvrtc %d.%d\x00%s\x00%s\x00", cacheFormat, major, minor, target, name)
	for _, o := range opts {
		fmt.Fprintf(h, "%s\x00", o)
	}
	h.Write([]byte(src))
	return hex.EncodeToString(h.Sum(nil))
}

// cacheFile names img's cache entry, after warp's artefacts:
// gs_<name>_<key16>.<target>.<cubin|ptx>.
func cacheFile(dir, name string, img *Image) string {
	ext := "cubin"
	if img.PTX {
		ext = "ptx"
	}
	base := strings.TrimSuffix(name, filepath.Ext(name))
	return filepath.Join(dir, fmt.Sprintf("gs_%s_%s.%s.%s", cname.Ident(base), img.Key[:16], img.Target, ext))
}

// An entry is a header, then the image's data:
//
//	gradsolve-cuda-cache-2
//	<key: hex SHA-256 of the ingredients, as cacheKey>
//	<hex SHA-256 of the data>
//	<length of the data in bytes>
//
// (four lines), so that a truncated entry, a damaged byte or an entry
// written for another key (a file copied or renamed) is found before the
// driver loads it.

// errCacheEntry is the error of a damaged cache entry.
var errCacheEntry = errors.New("damaged kernel cache entry")

// cacheRead returns the cached image data, if any. A present entry that
// fails its checks is removed and reported in bad (the caller compiles
// and writes it anew).
func cacheRead(dir, name string, img *Image) (data []byte, ok bool, bad error) {
	if dir == "" {
		return nil, false, nil
	}
	path := cacheFile(dir, name, img)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, false, nil
	}
	data, err = cacheDecode(raw, img.Key)
	if err != nil {
		os.Remove(path)
		return nil, false, fmt.Errorf("%w %s: %v", errCacheEntry, path, err)
	}
	return data, true, nil
}

// cacheDecode checks entry raw against key and returns its data.
func cacheDecode(raw []byte, key string) ([]byte, error) {
	lines := bytes.SplitN(raw, []byte("\n"), 5)
	if len(lines) < 5 {
		return nil, errors.New("truncated header")
	}
	if string(lines[0]) != cacheFormat {
		return nil, fmt.Errorf("format %q, want %q", lines[0], cacheFormat)
	}
	if string(lines[1]) != key {
		return nil, errors.New("written for another key")
	}
	n, err := strconv.Atoi(string(lines[3]))
	if err != nil {
		return nil, fmt.Errorf("length %q", lines[3])
	}
	data := lines[4]
	if len(data) != n {
		return nil, fmt.Errorf("%d bytes of data, want %d", len(data), n)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != string(lines[2]) {
		return nil, errors.New("data does not match its hash")
	}
	if n == 0 {
		return nil, errors.New("no data")
	}
	return data, nil
}

// cacheEncode returns img's entry.
func cacheEncode(img *Image) []byte {
	sum := sha256.Sum256(img.Data)
	head := fmt.Sprintf("%s\n%s\n%s\n%d\n", cacheFormat, img.Key, hex.EncodeToString(sum[:]), len(img.Data))
	return append([]byte(head), img.Data...)
}

// cacheWrite stores img's entry: written to a temporary file in the same
// folder, synced, then renamed into place, so that processes sharing the
// folder read whole entries only. Failures are ignored: a cache that
// cannot be written only costs the next run a compilation.
func cacheWrite(dir, name string, img *Image) {
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return
	}
	_, werr := f.Write(cacheEncode(img))
	serr := f.Sync()
	cerr := f.Close()
	if werr != nil || serr != nil || cerr != nil || os.Rename(f.Name(), cacheFile(dir, name, img)) != nil {
		os.Remove(f.Name())
	}
}

// cacheWarned holds the damaged entries already reported.
var cacheWarned sync.Map

// cacheWarn reports a damaged entry on standard error, once per entry and
// process.
func cacheWarn(err error) {
	if _, seen := cacheWarned.LoadOrStore(err.Error(), true); !seen {
		fmt.Fprintf(os.Stderr, "gradsolve: %v; compiling it again\n", err)
	}
}
