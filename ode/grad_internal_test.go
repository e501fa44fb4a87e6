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

// TestEndTimesWell checks endTimesWell, Grad's one pass over a record's
// end times and statuses, against endTimes and allWell: one end time and
// one per trajectory, one array and two (in storage that is reused, or
// too short), with and without statuses, on one goroutine and split
// over blocks of par.Block.
func TestEndTimesWell(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 4))
	for _, n := range []int{1, 1000, par.Block, 2*par.Block + 17} {
		t1s := make([]float64, n)
		for i := range t1s {
			t1s[i] = 1 + rng.Float64()
		}
		for _, perTraj := range []bool{false, true} {
			q := &problem{Problem: &Problem{T1: 2.5}, n: n}
			if perTraj {
				q.T1s, q.t1 = t1s, t1s
			}
			for _, twice := range []bool{false, true} {
				for _, bad := range []int{-1, 0, n - 1} {
					for _, checks := range []bool{false, true} {
						var status []Status
						stiff := make([]bool, n)
						stiff[n/2] = bad == n-1 // a stiff flag with a failure, and alone
						if bad == 0 && n > 1 {
							stiff[n/2] = true
						}
						if checks {
							status = make([]Status, n)
							if bad == n-1 {
								status[bad] = NotRun
							}
						}
						a, b := make([]float64, n+3), []float64{7} // reused; too short
						ta, tb, well := q.endTimesWell(a, b, twice, status, stiff)
						what := fmt.Sprintf("n=%d T1s=%v twice=%v bad=%d checks=%v", n, perTraj, twice, bad, checks)
						want := q.endTimes(nil)
						if !slices.Equal(ta, want) || &ta[0] != &a[0] {
							t.Errorf("%s: the first end times are wrong or not in its storage", what)
						}
						if twice && !slices.Equal(tb, want) || !twice && tb != nil {
							t.Errorf("%s: the second end times are wrong", what)
						}
						if wantWell := !checks || allWell(status, stiff); well != wantWell {
							t.Errorf("%s: well = %v, want %v", what, well, wantWell)
						}
					}
				}
			}
		}
	}
}
