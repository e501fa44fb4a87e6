package scaleout_test

import (
	"fmt"

	"github.com/gradsolve-go/gradsolve/bench/scaleout"
)

// One gradient of 2^30 Lorenz-cost trajectories with 1,000 shared
// parameters on 16 hosts of 8 GPUs: the closed form and the simulation of
// the NCCL tree all-reduce and of the deterministic fixed-point reduction.
func ExampleSimulate() {
	c := &scaleout.Cluster{Hosts: 16}
	w := scaleout.Workload{Trajectories: 1 << 30, Shared: 1000, PerTrajectory: scaleout.LorenzPerTrajectory}
	for _, a := range []scaleout.Algorithm{scaleout.Tree, scaleout.FixedPoint} {
		p, _ := scaleout.Predict(c, w, a)
		s, _ := scaleout.Simulate(c, w, a, nil)
		fmt.Printf("%-11s compute %.2f ms, reduce %.1f µs (closed form %.1f µs), %d messages, efficiency %.1f%%\n",
			a, 1e3*s.Compute, 1e6*s.Reduce, 1e6*p.Reduce, s.Messages, 100*s.Efficiency())
	}
	// Output:
	// tree        compute 14.33 ms, reduce 38.2 µs (closed form 38.2 µs), 254 messages, efficiency 99.7%
	// fixed-point compute 14.33 ms, reduce 85.6 µs (closed form 85.6 µs), 508 messages, efficiency 99.4%
}

// The fixed-point sum does not depend on how the leaves are ordered or
// grouped; the float64 sum in index order does.
func ExampleFixedPointSum() {
	a := [][]float64{{1e16}, {1}, {-1e16}, {1}}
	b := [][]float64{{1}, {1}, {1e16}, {-1e16}}
	fmt.Println(scaleout.FixedPointSum(a), scaleout.FixedPointSum(b))
	big, one := 1e16, 1.0 // variables: Go evaluates constant expressions exactly
	fmt.Println(((big+one)-big)+one, ((one+one)+big)-big)
	// Output:
	// [2] [2]
	// 1 2
}
