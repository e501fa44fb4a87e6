package fusecheck

import (
	"slices"
	"testing"
)

// Fused finds the fused expression of testdata/fused and not the rounded
// one.
func TestFused(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a package for arm64")
	}
	at, err := Fused("testdata/fused")
	if err != nil {
		t.Skip(err)
	}
	if want := []string{"fused.go:6"}; !slices.Equal(at, want) {
		t.Errorf("Fused: %v, want %v", at, want)
	}
}
