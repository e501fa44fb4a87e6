// Package cname turns names into fragments of C identifiers, for the
// generated kernels' functions (package kernelgen) and the kernel cache's
// file names (package driver).
package cname

import "strings"

// Ident returns s as a C identifier fragment of at most 40 bytes: ASCII
// letters, digits and underscores kept, every other rune an underscore;
// "p" for an empty s.
func Ident(s string) string {
	var sb strings.Builder
	for _, r := range s {
		if sb.Len() >= 40 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			sb.WriteRune(r)
		default:
			sb.WriteByte('_')
		}
	}
	if sb.Len() == 0 {
		return "p"
	}
	return sb.String()
}
