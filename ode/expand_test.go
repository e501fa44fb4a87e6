package ode

import (
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/par"
)

// TestExpansions checks that a Solver's expanded single rows are shared
// by the calls that expand the same row to the same N, equal the row
// repeated, are told apart by row and N, and survive concurrent use.
func TestExpansions(t *testing.T) {
	var c expansions
	row := []float64{1, 2, 3}
	a := c.expand(row, 3, 100000)
	for i := 0; i < 100000; i++ {
		if !slices.Equal(a[3*i:3*i+3], row) {
			t.Fatalf("row %d: %v, want %v", i, a[3*i:3*i+3], row)
		}
	}
	if b := c.expand([]float64{1, 2, 3}, 3, 100000); &b[0] != &a[0] {
		t.Error("the same row expanded again: a new array")
	}
	if b := c.expand([]float64{1, 2, 4}, 3, 100000); &b[0] == &a[0] || b[2] != 4 {
		t.Error("another row: the first row's array")
	}
	if b := c.expand(row, 3, 10); len(b) != 30 {
		t.Errorf("another N: len %d, want 30", len(b))
	}
	full := make([]float64, 30)
	if b := c.expand(full, 3, 10); &b[0] != &full[0] {
		t.Error("N rows given: not used as they are")
	}
	for k := 0; k < 2*maxExpansions; k++ {
		c.expand([]float64{float64(k)}, 1, 8)
	}
	if len(c.e) > maxExpansions {
		t.Errorf("%d expansions kept, want at most %d", len(c.e), maxExpansions)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			x := []float64{float64(g % 3)}
			if b := c.expand(x, 1, 1000); b[999] != x[0] {
				t.Errorf("concurrent expansion of %v: %v", x, b[999])
			}
		})
	}
	wg.Wait()
}

// TestFiniteAll checks that the first non-finite entry is found, in any
// block of a large array read on all cores.
func TestFiniteAll(t *testing.T) {
	x := make([]float64, 5*par.Block+17)
	if i := finiteAll(x); i != -1 {
		t.Fatalf("all finite: %d", i)
	}
	for _, c := range []struct{ at []int }{{[]int{0}}, {[]int{len(x) - 1}}, {[]int{4*par.Block + 3, par.Block + 1}}, {[]int{2 * par.Block, 2*par.Block + 1}}} {
		y := slices.Clone(x)
		for k, i := range c.at {
			y[i] = []float64{math.NaN(), math.Inf(-1)}[k%2]
		}
		if got, want := finiteAll(y), slices.Min(c.at); got != want {
			t.Errorf("non-finite at %v: got %d, want %d", c.at, got, want)
		}
	}
}
