// Package buf reuses the storage of slices: the engines fill a caller's
// arrays from an earlier call instead of allocating new ones, which for
// ensembles of millions of trajectories saves more time than the copies
// into them cost (fresh memory is zeroed and faulted in page by page).
package buf

import "unsafe"

// Make returns a slice of length n with every element zero: s resliced and
// cleared if its capacity is at least n, else a new slice. Its contents
// are those of make([]T, n) either way.
func Make[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// Extend returns a slice of length n (at least len(s)) whose first len(s)
// elements are those of s, without clearing: if s's capacity is at least
// n, s resliced, its elements past len(s) whatever the storage held
// (fresh is false); else a new slice with s copied in and zeros after
// (fresh is true): for a caller that overwrites or clears the new elements
// itself, only where it must.
func Extend[T any](s []T, n int) (e []T, fresh bool) {
	if cap(s) >= n {
		return s[:n], false
	}
	g := make([]T, n)
	copy(g, s)
	return g, true
}

// Same reports whether a and b start at the same element (both non-empty),
// so that copying one into the other would be a copy onto itself.
func Same[T any](a, b []T) bool {
	return len(a) > 0 && len(b) > 0 && &a[0] == &b[0]
}

// Overlap reports whether the storage of a and b up to their capacities
// shares an element (both with a capacity): a slice handed to a writer
// of the whole of b's storage would change a. Slices of one array
// overlap where their capacities' ranges do, a sub-slice and the slice
// it was cut from always.
func Overlap[T any](a, b []T) bool {
	if cap(a) == 0 || cap(b) == 0 {
		return false
	}
	size := unsafe.Sizeof(a[:1][0])
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(cap(b))*size && pb < pa+uintptr(cap(a))*size
}

// fillRun is the elements Fill writes by doubling before it copies them
// on: 4 KiB of float64, in the first-level cache while it is copied.
const fillRun = 512

// Fill sets every element of s to v: v stored once, then copied in
// doubling runs up to fillRun elements, and that run copied over the rest
// (memmove's wide stores). A loop's store an element took 4–5 times as
// long at 32,768 float64 and at 2^20 (BenchmarkFill).
func Fill[T any](s []T, v T) {
	if len(s) == 0 {
		return
	}
	s[0] = v
	k := 1
	for ; k < min(fillRun, len(s)); k *= 2 {
		copy(s[k:min(2*k, len(s))], s[:k])
	}
	for ; k < len(s); k += fillRun {
		copy(s[k:min(k+fillRun, len(s))], s[:fillRun])
	}
}
