package ode_test

import (
	"math"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestCheckpointMaxInt checks that a Checkpoint interval of MaxInt (one
// checkpoint, the initial states) gives the default gradient bit for bit
// when the gradient recomputes from checkpoints: recording with a memory
// limit too small for the recorder to keep the states, and replaying a
// given mesh. Its interval arithmetic overflowed (rows + K − 1) and
// panicked with an index out of range.
func TestCheckpointMaxInt(t *testing.T) {
	t.Parallel()
	p := lorenzProblem()
	p.N, p.P = 20, nil
	for i := range 20 {
		p.P = append(p.P, 10, 20+float64(i), 8.0/3)
	}
	want, err := ode.Grad(nil, p, ode.SumSquares(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  ode.Settings
		mesh *ode.Mesh
	}{
		{"recorded", ode.Settings{Checkpoint: math.MaxInt, MemoryLimit: 1}, nil},
		{"given mesh", ode.Settings{Checkpoint: math.MaxInt}, want.Mesh},
		{"given mesh, interval just past the mesh", ode.Settings{Checkpoint: want.Mesh.Rows + 1}, want.Mesh},
	} {
		got, err := gradNoPanic(p, tc.mesh, &tc.set)
		if err != nil {
			t.Errorf("Case %v: %v", tc.name, err)
			continue
		}
		if got.Loss != want.Loss || !slices.Equal(got.Y0, want.Y0) || !slices.Equal(got.P, want.P) {
			t.Errorf("Case %v: gradient differs from the default's", tc.name)
		}
	}
}
