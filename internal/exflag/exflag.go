// Package exflag checks the command lines of the example programs before
// any work: numbers out of range and outputs that cannot be written are
// errors that name the flag, the value and what it wants, rather than a
// library error about an empty ensemble, a panic, or a failure to write
// after minutes of work.
package exflag

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gradsolve-go/gradsolve/internal/atomicfile"
)

// Check is one flag's check: nil if the value is valid.
type Check func() error

// First runs the checks in order and returns the first error, or nil.
func First(checks ...Check) error {
	for _, c := range checks {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

// AtLeast checks an integer flag against its smallest valid value; what
// names its unit ("trajectory", "step").
func AtLeast(name string, v, least int, what string) Check {
	return func() error {
		if v < least {
			return fmt.Errorf("-%s %d: want at least %d %s", name, v, least, what)
		}
		return nil
	}
}

// Positive checks that a float flag is finite and greater than 0.
func Positive(name string, v float64) Check {
	return func() error {
		if !(v > 0) || math.IsInf(v, 1) {
			return fmt.Errorf("-%s %v: want a positive finite number", name, v)
		}
		return nil
	}
}

// NonNegative checks that a float flag is finite and at least 0.
func NonNegative(name string, v float64) Check {
	return func() error {
		if !(v >= 0) || math.IsInf(v, 1) {
			return fmt.Errorf("-%s %v: want a finite number, 0 or more", name, v)
		}
		return nil
	}
}

// Finite checks that a float flag is a finite number.
func Finite(name string, v float64) Check {
	return func() error {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("-%s %v: want a finite number", name, v)
		}
		return nil
	}
}

// Writable checks an output flag's path ("" is no output): that its
// extension is one of formats (any, if formats is nil) and that the file
// can be created there (a temporary file is made and removed; the file
// itself is not touched).
func Writable(name, path string, formats []string) Check {
	return func() error {
		if path == "" {
			return nil
		}
		if formats != nil {
			ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
			if !slices.Contains(formats, ext) {
				return fmt.Errorf("-%s %s: want a file name ending in .%s", name, path, strings.Join(formats, ", ."))
			}
		}
		f, err := atomicfile.Create(path)
		if err != nil {
			return fmt.Errorf("-%s: %v", name, err)
		}
		f.Abort()
		return nil
	}
}

// NoArgs checks that no arguments are left after the flags (a flag given
// with a space in its list, "-hosts 1, 2", leaves one).
func NoArgs(args []string) Check {
	return func() error {
		if len(args) > 0 {
			return fmt.Errorf("unexpected argument %q: flags start with -, and lists are comma-separated without spaces", args[0])
		}
		return nil
	}
}
