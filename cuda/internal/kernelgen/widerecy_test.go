package kernelgen

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
	"github.com/gradsolve-go/gradsolve/problems"
)

// TestWideRecordY checks Config.WideRecordY on Lorenz-96's gradient
// kernel (Tsit5, d = 64 and 256, without save times and with): the
// reverse sweep's part of a warp's shared memory (wideLayout.RevLen) is
// d reals less than by default, the reverse steps' scratch the same; the
// forward loop's part is unchanged; the reverse steps take the record's
// row (recName) and read y from it at the loop's component and at its
// rotations, never through gs_a; the other kernels' layouts are as
// without the switch. At d = 256 without save times the warp's bytes
// are pinned: 20,464 by default (the reverse sweep's 2,558 reals),
// 18,712 with the switch (the forward loop's 2,339 now the larger; the
// reverse sweep's 2,302), 10 and 12 warps a multiprocessor of an H100's
// 227 KiB (WideOccupancy). It fails if the switch leaves a copy of y in
// the reverse steps' inputs or changes their scratch.
func TestWideRecordY(t *testing.T) {
	t.Parallel()
	for _, saves := range []bool{false, true} {
		for _, d := range []int{64, 256} {
			t.Run(fmt.Sprintf("d=%d/saves=%v", d, saves), func(t *testing.T) {
				t.Parallel()
				sp := widePlanCase(d).stepPrograms(t)
				def := sp.wide(wideVariantOf(Config{Grad: true, Saves: B2i(saves)}, sp.plan))
				rec := sp.wide(wideVariantOf(Config{Grad: true, Saves: B2i(saves), WideRecordY: true}, sp.plan))
				if def.err != nil || rec.err != nil {
					t.Fatal(def.err, rec.err)
				}
				dw, rw := def.w, rec.w
				if dw.RecY || !rw.RecY {
					t.Fatalf("RecY %v by default, %v with WideRecordY", dw.RecY, rw.RecY)
				}
				fwd := sp.wide(wideVariantOf(Config{Saves: B2i(saves)}, sp.plan)).w.Len // the forward loop's part
				if got, want := rw.RevLen, dw.RevLen-d; got != want {
					t.Errorf("reverse sweep %d reals with WideRecordY, want %d (default %d less d = %d)", got, want, dw.RevLen, d)
				}
				if got, want := rw.RSCR, dw.RSCR-d; got != want {
					t.Errorf("reverse steps' scratch from %d with WideRecordY, want %d", got, want)
				}
				if got, want := rw.Len, max(fwd, rw.RevLen); got != want {
					t.Errorf("a warp's %d reals with WideRecordY, want %d (forward %d, reverse %d)", got, want, fwd, rw.RevLen)
				}
				src := rec.src.String()
				revs := regexp.MustCompile(`GS_FUNC void (\w+_rev_wide_\d+)\(([^)]*)\)`).FindAllStringSubmatch(src, -1)
				if len(revs) != 1+B2i(saves) {
					t.Fatalf("%d reverse steps in the source, want %d", len(revs), 1+B2i(saves))
				}
				for _, m := range revs {
					if !strings.HasSuffix(m[2], ", const gs_real* "+recName) {
						t.Errorf("%s(%s): no record's row", m[1], m[2])
					}
					_, body, _ := strings.Cut(src, m[0])
					body, _, _ = strings.Cut(body, "\n}\n")
					own := strings.Count(body, recName+"[gs_c]")
					rot := strings.Count(body, recName+"[GS_WROT(")
					// y's entries in gs_a by default: from 2 to d + 1.
					ya := 0
					for _, x := range regexp.MustCompile(`gs_a\[(\d+) \+ gs_c\]`).FindAllStringSubmatch(body, -1) {
						if x[1] == "2" {
							ya++
						}
					}
					if own < 5 || rot < 3 || ya > 0 {
						t.Errorf("%s: %d reads of y at the component, %d at rotations from the record; %d through gs_a", m[1], own, rot, ya)
					}
				}
				per, on := WideOccupancy(8*dw.Len, 227<<10)
				rper, ron := WideOccupancy(8*rw.Len, 227<<10)
				t.Logf("d = %d, saves %v: a warp %d → %d B (forward %d, reverse %d → %d reals), warps a multiprocessor %d → %d (blocks of %d, %d)",
					d, saves, 8*dw.Len, 8*rw.Len, fwd, dw.RevLen, rw.RevLen, on, ron, per, rper)
				if d == 256 && !saves && (8*dw.Len != 20464 || 8*rw.Len != 18712 || on != 10 || ron != 12) {
					t.Errorf("d = 256: a warp %d → %d B, %d → %d warps a multiprocessor; want 20,464 → 18,712, 10 → 12", 8*dw.Len, 8*rw.Len, on, ron)
				}
			})
		}
	}
	// Without a gradient the switch changes nothing.
	sp := widePlanCase(256).stepPrograms(t)
	a, b := sp.wide(wideVariantOf(Config{}, sp.plan)), sp.wide(wideVariantOf(Config{WideRecordY: true}, sp.plan))
	if a.w != b.w || a.src.String() != b.src.String() {
		t.Errorf("a solve's kernel: WideRecordY changed its layout or source (%+v, %+v)", a.w, b.w)
	}
}

// widePlanCase is Lorenz-96 with d components and Tsit5, its forcing
// per trajectory.
func widePlanCase(d int) planCase {
	return planCase{name: fmt.Sprintf("lorenz96-%d", d), field: problems.Lorenz96(d).Field, m: ode.Tsit5}
}

// TestWideOutInPlace checks Config.WideOutInPlace on Lorenz-96's kernels
// (Tsit5, d = 64 and 256, the solve's and the gradient's, without save
// times and with): the forward loop's part of a warp's shared memory
// (the solve's) falls by Init's and the trial's returned arrays (at d =
// 256 without save times 2,339 → 1,827 reals: the trial's y⁺ and last
// stage's derivative, 2d, were its scratch's peak), the reverse sweep's
// does not grow; the trial returns y⁺ and its last stage from arrays at
// its outputs, and no copy of a whole array to the outputs is left in
// any function. It fails if an array is still copied or if the scratch
// does not shrink.
func TestWideOutInPlace(t *testing.T) {
	t.Parallel()
	for _, saves := range []bool{false, true} {
		for _, d := range []int{64, 256} {
			t.Run(fmt.Sprintf("d=%d/saves=%v", d, saves), func(t *testing.T) {
				t.Parallel()
				sp := widePlanCase(d).stepPrograms(t)
				of := func(v Config) *wideRecord {
					r := sp.wide(wideVariantOf(v, sp.plan))
					if r.err != nil {
						t.Fatal(r.err)
					}
					return r
				}
				fwd, fwdOut := of(Config{Saves: B2i(saves)}), of(Config{Saves: B2i(saves), WideOutInPlace: true})
				grad, gradOut := of(Config{Grad: true, Saves: B2i(saves)}), of(Config{Grad: true, Saves: B2i(saves), WideOutInPlace: true})
				if fwdOut.w.Len >= fwd.w.Len || gradOut.w.RevLen > grad.w.RevLen {
					t.Errorf("the forward loop %d → %d reals, the reverse sweep %d → %d; want fewer, no more", fwd.w.Len, fwdOut.w.Len, grad.w.RevLen, gradOut.w.RevLen)
				}
				if d == 256 && !saves && (fwd.w.Len != 2339 || fwdOut.w.Len != 1827) {
					t.Errorf("d = 256: the forward loop %d → %d reals, want 2,339 → 1,827", fwd.w.Len, fwdOut.w.Len)
				}
				src := gradOut.src.String()
				if m := outputCopy.FindAllString(src, -1); len(m) > 0 {
					t.Errorf("%d copies of a whole array to the outputs left: %q", len(m), m)
				}
				_, trial, _ := strings.Cut(src, "GS_FUNC void "+gradOut.w.Trial+"(")
				trial, _, _ = strings.Cut(trial, "\n}\n")
				if n := strings.Count(trial, " = gs_o + "); n != 2 {
					t.Errorf("the trial places %d arrays at its outputs, want 2 (y⁺, the last stage's derivative)", n)
				}
				if outputCopy.FindAllString(grad.src.String(), -1) == nil {
					t.Errorf("by default no copy of an array to the outputs: the test's pattern is stale")
				}
				t.Logf("d = %d, saves %v: the forward loop %d → %d reals, the reverse sweep %d → %d", d, saves, fwd.w.Len, fwdOut.w.Len, grad.w.RevLen, gradOut.w.RevLen)
			})
		}
	}
}
