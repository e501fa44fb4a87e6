package ode

import (
	"slices"
	"sync"

	"github.com/gradsolve-go/gradsolve/internal/par"
)

// expansions keeps the arrays a Solver's calls expand from single rows (a
// Y0 or P given as one row, one end time T1) to all N trajectories. They
// are read-only and shared by every call that expands the same row to the
// same N, so a training loop's calls on one problem fill them once instead
// of allocating and filling tens of megabytes per call. It keeps the most
// recent maxExpansions; the zero value is ready to use.
type expansions struct {
	mu sync.Mutex
	e  []expansion // most recently used first
}

type expansion struct {
	row []float64
	n   int
	out []float64
}

// maxExpansions is the number of expanded arrays a Solver keeps: Y0, P
// and T1 of one problem, and one more.
const maxExpansions = 4

// expand returns x if it has n rows of width, else the row x repeated n
// times: kept from an earlier call where c holds it (c may be nil).
func (c *expansions) expand(x []float64, width, n int) []float64 {
	if len(x) == width*n {
		return x
	}
	if c == nil {
		return fill(x, width, n)
	}
	if out, ok := c.kept(x, n); ok {
		return out
	}
	out := fill(x, width, n)
	c.mu.Lock()
	c.e = append([]expansion{{row: slices.Clone(x), n: n, out: out}}, c.e...)
	if len(c.e) > maxExpansions {
		c.e = c.e[:maxExpansions]
	}
	c.mu.Unlock()
	return out
}

// kept returns the expansion of row x to n rows that c keeps, if it
// keeps one (then the most recently used); x is only read.
func (c *expansions) kept(x []float64, n int) ([]float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.e {
		if e.n == n && slices.Equal(e.row, x) {
			copy(c.e[1:k+1], c.e[:k])
			c.e[0] = e
			return e.out, true
		}
	}
	return nil, false
}

// expandOne is expand of the one value x (a row of width 1, an end
// time), which it reads from a local where c keeps the expansion: the
// row expand keeps is a slice of its own.
func (c *expansions) expandOne(x float64, n int) []float64 {
	if c != nil && n != 1 {
		if out, ok := c.kept([]float64{x}, n); ok {
			return out
		}
	}
	return c.expand([]float64{x}, 1, n)
}

// fill returns the row x repeated n times, written on all cores for a
// large n.
func fill(x []float64, width, n int) []float64 {
	out := make([]float64, width*n)
	if width == 0 {
		return out
	}
	rows := max(1, par.Block/width)
	par.Run((n+rows-1)/rows, 0, func(_, b int) {
		for i := b * rows; i < min(n, (b+1)*rows); i++ {
			copy(out[i*width:], x)
		}
	})
	return out
}
