package bench

import (
	"fmt"
	"math"
	"testing"

	"github.com/gradsolve-go/gradsolve/ode"
)

// TestBaselineMatchesLibrary checks the hand-written Tsit5 loop against the
// library's recorder: the same accepted and rejected steps per trajectory
// and final states that agree to 1e-11 relative. It checks the transcribed
// coefficients and, independently, the recorder. (The library evaluates
// the stage sums as fused multiply-adds, the baseline in plain arithmetic;
// the differences are rounding errors, at most 2.4e-12 here, at rtol 1e-3
// where few long steps amplify them most, and below 1e-13 elsewhere.)
func TestBaselineMatchesLibrary(t *testing.T) {
	for _, tc := range []struct {
		n    int
		rtol float64
	}{
		{16, 1e-3}, {33, 1e-4}, {64, 1e-6}, {300, 1e-8}, {40, 1e-10},
	} {
		t.Run(fmt.Sprintf("n=%d/rtol=%g", tc.n, tc.rtol), func(t *testing.T) {
			t.Parallel()
			e := ProtocolLorenz(tc.n)
			atol := tc.rtol * 1e-3
			var st BaselineStats
			got, err := LorenzTsit5(nil, e, &BaselineSettings{RelTol: tc.rtol, AbsTol: atol, Workers: 3}, &st)
			if err != nil {
				t.Fatal(err)
			}
			p := e.Problem()
			sol, err := ode.Solve(p, &ode.Settings{Method: ode.Tsit5, RelTol: tc.rtol, AbsTol: atol})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("max relative difference %.2g", maxRelDiff(got, sol.Y, 3))
			for i := 0; i < tc.n; i++ {
				if st.Accepted[i] != sol.Stats.Accepted[i] || st.Rejected[i] != sol.Stats.Rejected[i] {
					t.Errorf("trajectory %d: baseline %d accepted, %d rejected; library %d, %d",
						i, st.Accepted[i], st.Rejected[i], sol.Stats.Accepted[i], sol.Stats.Rejected[i])
				}
				if rel := relErr(got[3*i:3*i+3], sol.Y[3*i:3*i+3]); !(rel <= 1e-11) {
					t.Errorf("trajectory %d: baseline %v, library %v (rel %.2g)", i, got[3*i:3*i+3], sol.Y[3*i:3*i+3], rel)
				}
			}
		})
	}
}

// TestBaselineSerialParallel checks that the worker count does not change
// the baseline's results.
func TestBaselineSerialParallel(t *testing.T) {
	e := ProtocolLorenz(1000)
	s := &BaselineSettings{RelTol: 1e-6, AbsTol: 1e-9, Workers: 1}
	a, err := LorenzTsit5(nil, e, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Workers = 4
	b, err := LorenzTsit5(nil, e, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("y[%d]: serial %v, parallel %v", i, a[i], b[i])
		}
	}
}

// TestBaselineFailure checks that a starved step budget is reported.
func TestBaselineFailure(t *testing.T) {
	_, err := LorenzTsit5(nil, ProtocolLorenz(4), &BaselineSettings{RelTol: 1e-8, AbsTol: 1e-11, MaxSteps: 5}, nil)
	te, ok := err.(*ode.TrajectoryError)
	if !ok || te.Status != ode.MaxStepsReached || te.Failed != 4 {
		t.Fatalf("err = %v, want a MaxStepsReached *ode.TrajectoryError for 4 trajectories", err)
	}
	if math.IsNaN(te.T) {
		t.Errorf("T is NaN")
	}
}
