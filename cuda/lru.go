package cuda

import (
	"container/list"
	"sync/atomic"
)

// defaultMaxCache is the default of SetMaxCache.
const defaultMaxCache = 64

// maxCache is the number of compiled kernels, and of losses' facts, a
// plan's kernel set keeps in memory, and of kernel sets kept for later
// Solvers (SetMaxCache).
var maxCache atomic.Int64

func init() { maxCache.Store(defaultMaxCache) }

// SetMaxCache sets how many compiled kernels each plan keeps in memory on
// an engine (the Solvers of one field and settings share a plan, and its
// kernels), how many losses' facts it remembers, and how many plans'
// kernels are kept for Solvers made later, and returns the previous
// bound: 64 by default; n <= 0 restores the default. The least recently
// used kernel beyond the bound is forgotten (its module is unloaded once
// no operation uses it); using it again loads it from the disk cache, or
// compiles it. Kernels differ per kind of operation, number of save times,
// layout and loss, so only a program that runs many losses on one Solver
// comes near the bound.
func SetMaxCache(n int) int {
	if n <= 0 {
		n = defaultMaxCache
	}
	return int(maxCache.Swap(int64(n)))
}

// lru is a map that keeps its most recently used entries only: at most
// *limit of them. It is not safe for concurrent use.
type lru[K comparable, V any] struct {
	limit *atomic.Int64
	order *list.List // of *lruItem, most recently used first
	items map[K]*list.Element
}

type lruItem[K comparable, V any] struct {
	k K
	v V
}

// newLRU returns an empty lru bounded by *limit (maxCache for executors).
func newLRU[K comparable, V any](limit *atomic.Int64) *lru[K, V] {
	return &lru[K, V]{limit: limit, order: list.New(), items: make(map[K]*list.Element)}
}

// get returns the value of k and marks it used.
func (c *lru[K, V]) get(k K) (V, bool) {
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruItem[K, V]).v, true
}

// add sets the value of k, marks it used, and forgets the least recently
// used entries beyond the limit.
func (c *lru[K, V]) add(k K, v V) {
	if e, ok := c.items[k]; ok {
		e.Value.(*lruItem[K, V]).v = v
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&lruItem[K, V]{k, v})
	for limit := max(int(c.limit.Load()), 1); c.order.Len() > limit; {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruItem[K, V]).k)
	}
}

// len returns the number of entries.
func (c *lru[K, V]) len() int { return c.order.Len() }
