package ode

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gradsolve-go/gradsolve/internal/par"
)

// TestAllWell checks allWell, Grad's one read of a record's statuses and
// stiffness flags, against a test of each entry: every failure status and
// a stiff flag at the first, a middle and the last trajectory, on arrays
// read by one goroutine and split over the cores (par.FirstSerial), with
// and without flags.
func TestAllWell(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, n := range []int{1, 7, 1000, par.FirstSerial + 3*par.FirstTask + 11} {
		for _, at := range []int{0, n / 2, n - 1, rng.IntN(n)} {
			for _, bad := range []Status{OK, MaxStepsReached, StepSizeUnderflow, NonFinite, NotRun, Stiff, EventNonFinite, EventAtStart, TooManyEvents} {
				for _, flag := range []bool{false, true} {
					for _, withStiff := range []bool{false, true} {
						if flag && !withStiff {
							continue
						}
						status := make([]Status, n)
						status[at] = bad
						var stiff []bool
						if withStiff {
							stiff = make([]bool, n)
							stiff[(at+n/3)%n] = flag
						}
						want := !slices.ContainsFunc(status, func(s Status) bool { return s != OK }) && !slices.Contains(stiff, true)
						if got := allWell(status, stiff); got != want {
							t.Errorf("%s: allWell = %v, want %v", fmt.Sprintf("n=%d at=%d status=%v stiff=%v/%v", n, at, bad, withStiff, flag), got, want)
						}
					}
				}
			}
		}
	}
	// Flags of another length than the statuses: read whole.
	if allWell(make([]Status, 4), []bool{false, true}) {
		t.Error("allWell with a stiff flag in a shorter array = true")
	}
}
