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
	t.Parallel()
	fusecheck.CheckNone(t, ".")
}
