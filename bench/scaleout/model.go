package scaleout

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// Link is a point-to-point link in the α–β model: a message of b bytes
// takes Latency + b/Bandwidth seconds from the start of its send to its
// arrival, and occupies the sending and the receiving port for b/Bandwidth.
type Link struct {
	Latency   float64 // seconds per message
	Bandwidth float64 // bytes per second, in each direction
}

// Time returns the time a message of b bytes takes on l.
func (l Link) Time(b int) float64 { return l.Latency + float64(b)/l.Bandwidth }

// Defaults of a Cluster. The links are those of H200 SXM/NVL-class hosts:
// NVLink 4 at 900 GB/s per GPU in both directions together (450 GB/s each
// way) and about a microsecond per message; one 400 Gb/s InfiniBand NDR NIC
// per GPU (50 GB/s each way) and about two microseconds per message, switch
// hops included. CallOverhead is the base latency NCCL's tuning model
// charges every collective with the LL protocol (6.6 µs for ring, 6.8 µs for
// tree in src/graph/tuning.cc, NCCL 2.30); KernelOverhead is the cost of one
// more small kernel on a stream; AddTime is one float64 addition streamed
// from and to HBM3e (24 bytes at 4.8 TB/s).
var (
	DefaultNVLink = Link{Latency: 1e-6, Bandwidth: 450e9}
	DefaultNet    = Link{Latency: 2e-6, Bandwidth: 50e9}
)

// Defaults of a Cluster's counts and overheads (see the links above).
const (
	DefaultGPUsPerHost    = 8
	DefaultCallOverhead   = 6.6e-6
	DefaultKernelOverhead = 2e-6
	DefaultAddTime        = 24 / 4.8e12
)

// Cluster describes Hosts hosts of GPUsPerHost GPUs each. GPUs are numbered
// host by host: GPU i is GPU i%G of host i/G. The zero value of every field
// but Hosts means its default.
type Cluster struct {
	Hosts       int  // number of hosts, at least 1
	GPUsPerHost int  // G; 0: DefaultGPUsPerHost
	NVLink      Link // between GPUs of one host; zero: DefaultNVLink
	Net         Link // between hosts, per NIC; zero: DefaultNet
	// NICsPerHost is the number of NICs of a host; GPU k of a host uses NIC
	// k·NICsPerHost/G. 0: one NIC per GPU.
	NICsPerHost int

	CallOverhead   float64 // seconds per call of the communication library; 0: default
	KernelOverhead float64 // seconds per local kernel (sums, conversions); 0: default
	AddTime        float64 // seconds per float64 addition in a local sum; 0: default
}

// GPUs returns the number of GPUs of c with its defaults applied.
func (c *Cluster) GPUs() int { return c.resolve().p }

// cluster is a Cluster with its defaults applied.
type cluster struct {
	h, g, p, nics    int
	nv, net          Link
	call, kern, add  float64
	levelsH, levelsP int // ⌈log₂ H⌉, ⌈log₂ P⌉
}

func (c *Cluster) resolve() cluster {
	r := cluster{h: c.Hosts, g: c.GPUsPerHost, nv: c.NVLink, net: c.Net, nics: c.NICsPerHost,
		call: c.CallOverhead, kern: c.KernelOverhead, add: c.AddTime}
	if r.g == 0 {
		r.g = DefaultGPUsPerHost
	}
	if r.nv == (Link{}) {
		r.nv = DefaultNVLink
	}
	if r.net == (Link{}) {
		r.net = DefaultNet
	}
	if r.nics == 0 {
		r.nics = r.g
	}
	if r.call == 0 {
		r.call = DefaultCallOverhead
	}
	if r.kern == 0 {
		r.kern = DefaultKernelOverhead
	}
	if r.add == 0 {
		r.add = DefaultAddTime
	}
	r.p = r.h * r.g
	r.levelsH, r.levelsP = ceilLog2(r.h), ceilLog2(r.p)
	return r
}

func ceilLog2(n int) int {
	if n <= 1 {
		return 0
	}
	return bits.Len(uint(n - 1))
}

// Workload is one gradient of an ensemble: every GPU records its share of
// the Trajectories and sweeps back, at PerTrajectory seconds of one GPU per
// trajectory, then the GPUs reduce Shared float64 values.
type Workload struct {
	Trajectories  int     // N
	Shared        int     // S, the shared parameters whose gradient is reduced
	PerTrajectory float64 // seconds of one GPU per trajectory, record + adjoint

	// Leaves is the number of fixed partial sums of the shared gradient
	// (slabs of consecutive trajectories) the ensemble is cut into; a
	// multiple of the number of GPUs, each GPU holding as many consecutive
	// leaves. 0: one leaf per GPU.
	Leaves int
}

// Throughputs of the two cases of docs/scale-out.md. LorenzPerTrajectory is
// the hand-written fused record + discrete-adjoint Lorenz kernel
// (bench/lorenz_tsit5.cu, Tsit5, rtol 1e-6, 39 steps per trajectory):
// 1.791 ms for 2²⁰ trajectories on one H200 (bench/RESULTS.md), an upper
// bound measured on a shared GPU. NeuralPerTrajectory is a neural field
// 100 times costlier per trajectory.
const (
	LorenzPerTrajectory = 1.791e-3 / (1 << 20)
	NeuralPerTrajectory = 100 * LorenzPerTrajectory
)

// Algorithm is a way of reducing the shared gradient across GPUs.
type Algorithm int

const (
	Ring       Algorithm = iota // NCCL ring all-reduce; bits depend on the number of GPUs
	Tree                        // NCCL tree all-reduce; bits depend on the number of GPUs
	Gather                      // all-gathers and fixed-order sums; deterministic
	FixedTree                   // recursive doubling in index order; deterministic
	FixedPoint                  // exact fixed-point sum of the leaves; deterministic
	NumAlgorithms
)

var algNames = [NumAlgorithms]string{"ring", "tree", "gather", "fixed-tree", "fixed-point"}

func (a Algorithm) String() string {
	if a >= 0 && a < NumAlgorithms {
		return algNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", int(a))
}

// Deterministic reports whether a gives the same bits for any number of
// GPUs (for FixedTree and Gather: any power of two, with a power-of-two
// number of leaves). FixedTree needs a power-of-two number of GPUs.
func (a Algorithm) Deterministic() bool { return a == Gather || a == FixedTree || a == FixedPoint }

// Cost is the time of one gradient on GPUs GPUs.
type Cost struct {
	GPUs    int
	Serial  float64 // one GPU computing every trajectory, no reduction (s)
	Compute float64 // the slowest GPU's share of the trajectories (s)
	Reduce  float64 // from the end of the compute to the last GPU holding the shared gradient (s)
}

// Total returns the time of one gradient: Compute + Reduce.
func (c Cost) Total() float64 { return c.Compute + c.Reduce }

// CommFraction returns the fraction of the gradient's time spent reducing.
func (c Cost) CommFraction() float64 { return c.Reduce / c.Total() }

// Efficiency returns the scaling efficiency Serial / (GPUs · Total): 1 when
// the GPUs together are GPUs times as fast as one.
func (c Cost) Efficiency() float64 { return c.Serial / (float64(c.GPUs) * c.Total()) }

// ErrInvalid is returned (wrapped) for a Cluster, Workload or Algorithm
// the model cannot handle.
var ErrInvalid = errors.New("scaleout: invalid configuration")

func check(c *Cluster, w Workload, a Algorithm) (cluster, int, error) {
	if c == nil || c.Hosts < 1 || c.GPUsPerHost < 0 || c.NICsPerHost < 0 {
		return cluster{}, 0, fmt.Errorf("%w: need at least one host and non-negative counts", ErrInvalid)
	}
	cl := c.resolve()
	if cl.nics > cl.g {
		return cluster{}, 0, fmt.Errorf("%w: %d NICs for %d GPUs per host", ErrInvalid, cl.nics, cl.g)
	}
	if w.Trajectories < 0 || w.Shared < 1 || w.PerTrajectory < 0 || w.Leaves < 0 {
		return cluster{}, 0, fmt.Errorf("%w: workload %+v", ErrInvalid, w)
	}
	if a < 0 || a >= NumAlgorithms {
		return cluster{}, 0, fmt.Errorf("%w: %v", ErrInvalid, a)
	}
	leaves := w.Leaves
	if leaves == 0 {
		leaves = cl.p
	}
	if leaves%cl.p != 0 {
		return cluster{}, 0, fmt.Errorf("%w: %d leaves on %d GPUs", ErrInvalid, leaves, cl.p)
	}
	if a == FixedTree && cl.p&(cl.p-1) != 0 {
		return cluster{}, 0, fmt.Errorf("%w: fixed-tree needs a power-of-two number of GPUs, not %d", ErrInvalid, cl.p)
	}
	return cl, leaves / cl.p, nil
}

// Predict returns the cost of one gradient in the closed-form α–β model:
// the compute of the largest share, then the sum of the latencies,
// transfer times, additions and overheads along the reduction's critical
// path. Each GPU holds Leaves/GPUs leaves. The bandwidth terms assume one
// NIC per GPU (the default); with fewer NICs Simulate is the reference.
func Predict(c *Cluster, w Workload, a Algorithm) (Cost, error) {
	cl, nl, err := check(c, w, a)
	if err != nil {
		return Cost{}, err
	}
	s := w.Shared
	m := 8 * s
	cost := Cost{GPUs: cl.p, Serial: float64(w.Trajectories) * w.PerTrajectory,
		Compute: float64(ceilDiv(w.Trajectories, cl.p)) * w.PerTrajectory}
	local := 0.0 // a pairwise sum of the leaves of a GPU
	if nl > 1 {
		local = cl.kern + float64((nl-1)*s)*cl.add
	}
	switch a {
	case Ring:
		cost.Reduce = local + cl.ringTime(s)
	case Tree:
		cost.Reduce = local + cl.treeTime(s)
	case Gather:
		cost.Reduce = local + cl.gatherTime(s)
	case FixedTree:
		t := local
		for mask := 1; mask < cl.p; mask <<= 1 {
			l := cl.net
			if mask < cl.g {
				l = cl.nv
			}
			t += cl.call + l.Time(m) + cl.kern + float64(s)*cl.add
		}
		cost.Reduce = t
	case FixedPoint:
		t := cl.kern + float64(nl*s)*cl.add // local maxima
		t += cl.treeTime(s)
		t += cl.kern + float64(nl*limbs*s)*cl.add // limbs of the leaves, summed
		t += cl.treeTime(limbs * s)
		t += cl.kern + float64(limbs*s)*cl.add // rounding
		cost.Reduce = t
	}
	return cost, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// ringTime is the closed form of a ring all-reduce of n values over all
// GPUs: the slowest chunk's path of 2(P−1) hops, of which those crossing a
// host boundary go over the network, with an addition at each of the first
// P−1.
func (cl cluster) ringTime(n int) float64 {
	p := cl.p
	if p == 1 {
		return 0
	}
	worst := 0.0
	for j := 0; j < p; j++ {
		c := (j+1)*n/p - j*n/p
		var net int
		switch {
		case cl.h == 1:
			net = 0
		case cl.g == 1:
			net = 2 * (p - 1)
		default:
			// The path of chunk j starts at GPU j and misses the two links
			// into GPU j−1 and GPU j of the second round.
			net = 2 * cl.h
			if j%cl.g == 0 || j%cl.g == 1 {
				net--
			}
		}
		t := float64(net)*cl.net.Time(8*c) + float64(2*(p-1)-net)*cl.nv.Time(8*c) + float64((p-1)*c)*cl.add
		worst = math.Max(worst, t)
	}
	return cl.call + worst
}

// treeTime is the closed form of the tree all-reduce of n values: a chain
// up each host, a binomial tree across hosts, and back down.
func (cl cluster) treeTime(n int) float64 {
	if cl.p == 1 {
		return 0
	}
	m := 8 * n
	up := float64(cl.g-1)*(cl.nv.Time(m)+float64(n)*cl.add) + float64(cl.levelsH)*(cl.net.Time(m)+float64(n)*cl.add)
	down := float64(cl.levelsH)*cl.net.Time(m) + float64(cl.g-1)*cl.nv.Time(m)
	return cl.call + up + down
}

// gatherTime is the closed form of the deterministic all-gather reduction
// of n values.
func (cl cluster) gatherTime(n int) float64 {
	if cl.p == 1 {
		return 0
	}
	m := 8 * n
	t := 0.0
	if cl.g > 1 {
		t += cl.call + float64(cl.g-1)*cl.nv.Time(m) + cl.kern + float64((cl.g-1)*n)*cl.add
	}
	if cl.h > 1 {
		sl := ceilDiv(n, cl.g) // the largest slice
		t += cl.call + float64(cl.h-1)*cl.net.Time(8*sl) + cl.kern + float64((cl.h-1)*sl)*cl.add
		if cl.g > 1 {
			t += cl.call + float64(cl.g-1)*cl.nv.Time(8*sl)
		}
	}
	return t
}
