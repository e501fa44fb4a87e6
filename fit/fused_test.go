package fit

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/fusecheck"
)

// The fit's own arithmetic (the patience test's margin) rounds every
// product on every host: no line of the package compiles to a fused
// multiply-add on arm64, where Go would fuse x*y + z, so a fit stops at
// the same step on an arm64 host as on amd64.
func TestNoFusedMultiplyAdd(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles the package for arm64")
	}
	t.Parallel()
	at, err := fusecheck.Fused(".")
	if err != nil {
		t.Skip(err)
	}
	if len(at) > 0 {
		t.Errorf("fused multiply-adds on arm64 at %v; round each product with float64(…)", at)
	}
}
