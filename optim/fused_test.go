package optim

import (
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/fusecheck"
)

// Rule.Apply promises every operation rounded in its order, no fused
// multiply-add: the engines that apply a rule in their own memory compile
// without contraction, and their values are Step's bit for bit. Go fuses
// x*y + z on arm64 (a Grace Hopper host, say) unless a conversion rounds
// the product: no line of the package may compile to a fused
// multiply-add there (the schedules' rates included, so a rate is the
// same on every host).
func TestNoFusedMultiplyAdd(t *testing.T) {
	t.Parallel()
	fusecheck.CheckNone(t, ".")
}
