package kernelgen

import (
	"testing"
	"unsafe"
)

// TestConfigSize checks that a Config stays within 128 bytes: package
// cuda keeps kernels in maps keyed by their Config, and a map stores a key
// or value past 128 bytes out of line, an allocation on every insert (a
// kept call's fill and scatter: TestKeptCallAllocs). New fields go into
// the padding after a run of bools, not after an int.
func TestConfigSize(t *testing.T) {
	if s := unsafe.Sizeof(Config{}); s > 128 {
		t.Errorf("kernelgen.Config is %d bytes, want at most 128: reorder its fields so that bools share words", s)
	}
}
