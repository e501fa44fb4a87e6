package kernelgen

import (
	"strconv"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
	"github.com/gradsolve-go/gradsolve/tape"
)

// TestWideRematerializeSame checks that the wide functions' line-wise
// rematerialization (rematerialize) and one-pass placement of the arrays
// (setOffsets) write the code that the whole-code passes they replace
// write (rematerializeFrom; a strings.ReplaceAll per array), on the
// forward and reverse steps of Lorenz-96 (d = 64) with Tsit5 and of
// Pollution and the Brusselator with Rodas5P, and on code whose stores
// and declarations are not whole lines (rematerialize then finishes on
// the whole code).
func TestWideRematerializeSame(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		field ode.Field
		m     ode.Method
	}{
		{"lorenz96-64", problems.Lorenz96(64).Field, ode.Tsit5},
		{"pollution", problems.Pollution().Field, ode.Rodas5P},
		{"brusselator", problems.Brusselator(32).Field, ode.Rodas5P},
	}
	for _, c := range cases {
		pl, rev, drev := planReverses(t, c.field, c.m)
		arrays := 0
		for _, p := range []*tape.Program{pl.Init, pl.Trial, pl.DenseStep, rev, drev} {
			src := NewSource(&SourceSettings{Precision: Float64})
			src.reroll = true
			in, err := tape.Inline(p)
			if err != nil {
				t.Fatal(err)
			}
			w := &wideEmitter{e: &emitter{src: src, p: in, name: "f"}}
			raw, err := w.emitRaw()
			if err != nil {
				t.Fatal(err)
			}
			arrays += len(w.remat)
			want := rematerializeFrom(raw, w.remat, nil)
			if got := w.rematerialize(raw); got != want {
				t.Errorf("%s %s: line-wise rematerialization differs from the whole code's", c.name, p.Name)
			}
			got, _ := allocate(want)
			if ref := allocateRef(want); got != ref {
				t.Errorf("%s %s: one-pass offsets differ from a pass per array", c.name, p.Name)
			}
			// Stores, or declarations, indented deeper, and so not whole
			// lines of their own: the whole code's passes from there.
			for _, odd := range []string{
				strings.ReplaceAll(raw, "\n    gs_l", "\n      gs_l"),
				strings.ReplaceAll(raw, "\n  gs_real* const gs_l", "\n   gs_real* const gs_l"),
			} {
				if got, want := w.rematerialize(odd), rematerializeFrom(odd, w.remat, nil); got != want {
					t.Errorf("%s %s: with stores or declarations not whole lines, line-wise rematerialization differs", c.name, p.Name)
				}
			}
		}
		if arrays == 0 {
			t.Errorf("%s: no arrays to recompute: the test compares nothing", c.name)
		}
	}
}

// allocateRef is allocate's placement of the offsets as it was: a
// strings.ReplaceAll per array.
func allocateRef(code string) string {
	offs, _ := placeArraysBy(code, wideArray)
	for n, off := range offs {
		code = strings.ReplaceAll(code, offMark(n), strconv.Itoa(off))
	}
	return code
}
