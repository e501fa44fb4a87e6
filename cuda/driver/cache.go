package driver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cacheFormat changes whenever the cache's layout or the meaning of its
// files changes, so old entries are never read.
const cacheFormat = "gradsolve-cuda-cache-1"

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
	return filepath.Join(dir, fmt.Sprintf("gs_%s_%s.%s.%s", cIdent(base), img.Key[:16], img.Target, ext))
}

// cacheRead returns the cached image data, if any.
func cacheRead(dir, name string, img *Image) ([]byte, bool) {
	if dir == "" {
		return nil, false
	}
	data, err := os.ReadFile(cacheFile(dir, name, img))
	if err != nil || len(data) == 0 {
		return nil, false
	}
	return data, true
}

// cacheWrite stores img's data, atomically (a temporary file renamed into
// place), ignoring failures: a cache that cannot be written only costs
// the next run a compilation.
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
	_, werr := f.Write(img.Data)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), cacheFile(dir, name, img)) != nil {
		os.Remove(f.Name())
	}
}

// cIdent returns s as a C identifier of at most 40 bytes (as package
// kernelgen names functions), for a cache file's name.
func cIdent(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if sb.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	if sb.Len() == 0 {
		return "p"
	}
	return sb.String()
}
