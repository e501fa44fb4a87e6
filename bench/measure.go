package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/gradsolve-go/gradsolve/cuda"
	"github.com/gradsolve-go/gradsolve/internal/cputime"
)

// DefaultReps is the number of timed repetitions when a config's Reps is 0.
const DefaultReps = 5

// timing is the median wall and process CPU time of one case, in
// milliseconds.
type timing struct{ wall, cpu float64 }

// timeCases times cases side by side: every case runs once untimed (the
// warm-up; a GPU engine's kernels then finish compiling, cuda.WaitForCompiles),
// then reps rounds run every case once in turn. It returns the
// median wall time and the median CPU time of the process (user + system,
// all threads, garbage collection included) of each case, and stops at the
// first error. On a busy machine the CPU time of a single-threaded case is
// the more robust of the two.
func timeCases(reps int, cases ...func() error) ([]timing, error) {
	if reps <= 0 {
		reps = DefaultReps
	}
	for _, c := range cases {
		if err := c(); err != nil {
			return nil, err
		}
	}
	// (A GPU engine's warm-up may run on the CPU engine while its kernels
	// compile: the timed calls are the device's.)
	if err := cuda.WaitForCompiles(context.Background()); err != nil {
		return nil, err
	}
	wall := make([][]float64, len(cases))
	cpu := make([][]float64, len(cases))
	for range reps {
		for k, c := range cases {
			c0 := cputime.Process()
			start := time.Now()
			if err := c(); err != nil {
				return nil, err
			}
			wall[k] = append(wall[k], ms(time.Since(start)))
			cpu[k] = append(cpu[k], ms(cputime.Process()-c0))
		}
	}
	med := make([]timing, len(cases))
	for k := range cases {
		med[k] = timing{median(wall[k]), median(cpu[k])}
	}
	return med, nil
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the median of x (the mean of the two middle values for
// even lengths), NaN for an empty x. x is not modified.
func median(x []float64) float64 {
	if len(x) == 0 {
		return math.NaN()
	}
	s := slices.Clone(x)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// relErr returns ‖got − want‖₂/‖want‖₂ (the absolute error if want is 0).
func relErr(got, want []float64) float64 {
	var num, den float64
	for i := range want {
		num += sq(got[i] - want[i])
		den += sq(want[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}

// medianRelErr returns the median over the sampled trajectories idx of
// relErr(y_i, ref_k), where y is [n×d] and ref[k] is trajectory idx[k]'s
// reference.
func medianRelErr(y []float64, d int, idx []int, ref [][]float64) float64 {
	errs := make([]float64, len(idx))
	for k, i := range idx {
		errs[k] = relErr(y[i*d:(i+1)*d], ref[k])
	}
	return median(errs)
}

// maxRelDiff returns the largest relErr between the rows of a and b
// ([n×d]).
func maxRelDiff(a, b []float64, d int) float64 {
	m := 0.0
	for i := 0; i+d <= len(a); i += d {
		m = math.Max(m, relErr(a[i:i+d], b[i:i+d]))
	}
	return m
}

// maxDiffOfLargest returns max_i |a_i − b_i| / max_i |b_i| (the
// difference itself where b is zero).
func maxDiffOfLargest(a, b []float64) float64 {
	var d, s float64
	for i := range b {
		d = math.Max(d, math.Abs(a[i]-b[i]))
		s = math.Max(s, math.Abs(b[i]))
	}
	if s == 0 {
		return d
	}
	return d / s
}

// subsample returns min(n, k) evenly spaced indices in [0, n), the first
// and last included. k ≤ 0 means all n.
func subsample(n, k int) []int {
	if k <= 0 || k >= n {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	if k == 1 {
		return []int{0}
	}
	idx := make([]int, k)
	for j := range idx {
		idx[j] = int(math.Round(float64(j) * float64(n-1) / float64(k-1)))
	}
	return idx
}

// meanInts returns the mean of x.
func meanInts(x []int) float64 {
	if len(x) == 0 {
		return 0
	}
	s := 0
	for _, v := range x {
		s += v
	}
	return float64(s) / float64(len(x))
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
