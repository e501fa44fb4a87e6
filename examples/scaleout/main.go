// Command scaleout prints the modelled cost of one gradient of a large
// ensemble sharded across hosts of GPUs, for docs/scale-out.md.
//
// It simulates (package bench/scaleout) one gradient of 2^30 trajectories
// with 1,000 shared float64 parameters on 1 to 128 hosts of 8 H200-class
// GPUs (NVLink within a host, one 400 Gb/s InfiniBand NIC per GPU between
// hosts), for two fields: the measured fused Lorenz record + adjoint kernel
// (1.791 ms per 2^20 trajectories on one H200) and a neural field 100 times
// costlier per trajectory. For each it reports the compute of a GPU's
// share, the time of each way of reducing the shared gradient, and the
// time per gradient, communication fraction and scaling efficiency of the
// fastest NCCL all-reduce (tree) and of the deterministic fixed-point
// reduction. The simulation is deterministic: the output is the same on
// every run.
//
// Usage:
//
//	go run ./examples/scaleout [-hosts 1,2,4,8,16,64,128] [-n 1073741824] [-shared 1000] [-lorenz-ms 1.791] [-neural 100]
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gradsolve-go/gradsolve/bench/scaleout"
	"github.com/gradsolve-go/gradsolve/internal/exflag"
)

// config holds the command's flags.
type config struct {
	hosts     []int
	n, shared int
	lorenzMS  float64 // ms for 2^20 trajectories on one GPU
	neural    float64 // cost of the neural field per trajectory, in Lorenz units
	cluster   scaleout.Cluster
}

func main() {
	var c config
	hosts := flag.String("hosts", "1,2,4,8,16,64,128", "comma-separated numbers of hosts")
	flag.IntVar(&c.n, "n", 1<<30, "trajectories")
	flag.IntVar(&c.shared, "shared", 1000, "shared parameters (float64)")
	flag.Float64Var(&c.lorenzMS, "lorenz-ms", 1.791, "ms of one GPU for 2^20 Lorenz trajectories, record + adjoint")
	flag.Float64Var(&c.neural, "neural", 100, "cost of a neural-field trajectory relative to a Lorenz one")
	flag.IntVar(&c.cluster.GPUsPerHost, "gpus", 8, "GPUs per host")
	flag.Float64Var(&c.cluster.Net.Latency, "net-us", 2, "latency of an inter-host message (µs)")
	flag.Float64Var(&c.cluster.NVLink.Latency, "nvlink-us", 1, "latency of an NVLink message (µs)")
	flag.Float64Var(&c.cluster.CallOverhead, "call-us", 6.6, "overhead of a communication-library call (µs)")
	flag.Parse()
	var err error
	if c.hosts, err = parseInts(*hosts); err != nil {
		fmt.Fprintln(os.Stderr, "scaleout: -hosts:", err)
		os.Exit(2)
	}
	if err := c.check(flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "scaleout:", err)
		os.Exit(2)
	}
	c.cluster.Net = scaleout.Link{Latency: 1e-6 * c.cluster.Net.Latency, Bandwidth: scaleout.DefaultNet.Bandwidth}
	c.cluster.NVLink = scaleout.Link{Latency: 1e-6 * c.cluster.NVLink.Latency, Bandwidth: scaleout.DefaultNVLink.Bandwidth}
	c.cluster.CallOverhead *= 1e-6
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scaleout:", err)
		os.Exit(1)
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q: want positive integers", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// run writes the tables for c to w.
// check refuses a command line that run cannot use (args: what is left
// after the flags), naming the flag.
func (c config) check(args []string) error {
	return exflag.First(exflag.NoArgs(args), exflag.AtLeast("n", c.n, 1, "trajectory"),
		exflag.AtLeast("shared", c.shared, 1, "shared parameter"), exflag.AtLeast("gpus", c.cluster.GPUsPerHost, 1, "GPU per host"),
		exflag.Positive("lorenz-ms", c.lorenzMS), exflag.Positive("neural", c.neural),
		exflag.NonNegative("net-us", c.cluster.Net.Latency), exflag.NonNegative("nvlink-us", c.cluster.NVLink.Latency),
		exflag.NonNegative("call-us", c.cluster.CallOverhead))
}

func run(c config, w io.Writer) error {
	if err := c.check(nil); err != nil {
		return err
	}
	lorenz := c.lorenzMS * 1e-3 / (1 << 20)
	cases := []scaleout.Case{
		{Name: fmt.Sprintf("Lorenz-cost field: %.3f ns per trajectory per GPU, N = %d, S = %d", 1e9*lorenz, c.n, c.shared),
			Workload: scaleout.Workload{Trajectories: c.n, Shared: c.shared, PerTrajectory: lorenz}},
		{Name: fmt.Sprintf("Neural field (%g× Lorenz): %.1f ns per trajectory per GPU, N = %d, S = %d", c.neural, 1e9*c.neural*lorenz, c.n, c.shared),
			Workload: scaleout.Workload{Trajectories: c.n, Shared: c.shared, PerTrajectory: c.neural * lorenz}},
	}
	rows, err := scaleout.Rows(c.cluster, c.hosts, cases)
	if err != nil {
		return err
	}
	if err := scaleout.WriteTable(w, rows, scaleout.Tree, scaleout.FixedPoint); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "\nclosed-form α–β model vs simulation: largest difference %.2f%% over %d reduction times\n",
		100*scaleout.MaxDeviation(rows), len(rows)*int(scaleout.NumAlgorithms))
	return err
}
