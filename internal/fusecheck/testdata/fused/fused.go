// Package fused has one expression that Go fuses on arm64 and one that it
// does not, for fusecheck's test.
package fused

// Fused returns a*b + c, which arm64 computes with one rounding.
func Fused(a, b, c float64) float64 { return a*b + c }

// Rounded returns a*b + c with the product rounded first.
func Rounded(a, b, c float64) float64 { return float64(a*b) + c }
