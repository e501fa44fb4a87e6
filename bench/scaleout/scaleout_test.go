package scaleout

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSimulateMatchesClosedForm checks the discrete-event simulation
// against the closed-form α–β model for every algorithm on clusters of 1 to
// 16 hosts, with a small and a large shared gradient (latency- and
// bandwidth-bound), one and several leaves per GPU, and other host shapes.
// They are built independently (the simulation only knows the message
// pattern and the ports), so agreement within 3% checks both.
func TestSimulateMatchesClosedForm(t *testing.T) {
	t.Parallel()
	type cs struct {
		c Cluster
		w Workload
	}
	var cases []cs
	for _, h := range []int{1, 2, 4, 16} {
		cases = append(cases, cs{Cluster{Hosts: h}, Workload{Trajectories: 1 << 24, Shared: 1000, PerTrajectory: LorenzPerTrajectory}})
		if h <= 4 { // bandwidth-bound: 80 kB messages (1 µs and more on the network)
			cases = append(cases, cs{Cluster{Hosts: h}, Workload{Trajectories: 1 << 24, Shared: 10000, PerTrajectory: LorenzPerTrajectory}})
		}
		cases = append(cases, cs{Cluster{Hosts: h}, Workload{Trajectories: 1 << 20, Shared: 64, PerTrajectory: NeuralPerTrajectory, Leaves: 4 * 8 * h}})
	}
	cases = append(cases,
		cs{Cluster{Hosts: 4, GPUsPerHost: 4}, Workload{Trajectories: 1000, Shared: 500, PerTrajectory: 1e-6}},
		cs{Cluster{Hosts: 8, GPUsPerHost: 1}, Workload{Trajectories: 1000, Shared: 500, PerTrajectory: 1e-6}},
		cs{Cluster{Hosts: 8, GPUsPerHost: 2, NVLink: Link{5e-7, 1e11}, Net: Link{5e-6, 1e10}}, Workload{Trajectories: 1000, Shared: 3000, PerTrajectory: 1e-6}},
		cs{Cluster{Hosts: 1, GPUsPerHost: 1}, Workload{Trajectories: 1000, Shared: 10, PerTrajectory: 1e-6}},
	)
	for _, c := range cases {
		for a := Algorithm(0); a < NumAlgorithms; a++ {
			want, err := Predict(&c.c, c.w, a)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Simulate(&c.c, c.w, a, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got.Compute != want.Compute {
				t.Errorf("Case %+v %v: compute: Want: %g, Got: %g.", c, a, want.Compute, got.Compute)
			}
			if want.Reduce == 0 {
				if got.Reduce != 0 {
					t.Errorf("Case %+v %v: reduce: Want: 0, Got: %g.", c, a, got.Reduce)
				}
				continue
			}
			if d := math.Abs(got.Reduce-want.Reduce) / want.Reduce; d > 0.03 {
				t.Errorf("Case %+v %v: reduce: closed form %.3g s, simulation %.3g s (%.1f%% apart).", c, a, want.Reduce, got.Reduce, 100*d)
			}
		}
	}
}

// TestSimulateSums checks the values the simulation carries: every GPU ends
// with the same vector; Ring and Tree give the sum of the leaves to
// rounding; Gather and FixedTree give exactly the pairwise sum of the
// leaves and FixedPoint exactly FixedPointSum, for every number of hosts,
// that is, the same bits on 8 to 128 GPUs. Ring's bits change with the
// number of GPUs, which is why it is not used when they matter.
func TestSimulateSums(t *testing.T) {
	t.Parallel()
	const k, s = 256, 40 // 256 leaves: 32 to 2 per GPU
	rnd := rand.New(rand.NewPCG(1, 1))
	leaves := make([][]float64, k)
	for i := range leaves {
		leaves[i] = make([]float64, s)
		for j := range leaves[i] {
			leaves[i][j] = rnd.NormFloat64() * math.Ldexp(1, rnd.IntN(40)-20)
		}
	}
	orig := make([][]float64, k)
	for i := range leaves {
		orig[i] = slices.Clone(leaves[i])
	}
	exact := make([]float64, s)
	for c := range exact {
		exact[c], _ = exactSum(leaves, c)
	}
	pw, fp := PairwiseSum(leaves), FixedPointSum(leaves)
	w := Workload{Trajectories: 1 << 20, Shared: s, PerTrajectory: LorenzPerTrajectory}
	ring := map[int][]float64{}
	for _, h := range []int{1, 2, 4, 8, 16} {
		c := Cluster{Hosts: h}
		for a := Algorithm(0); a < NumAlgorithms; a++ {
			o, err := Simulate(&c, w, a, leaves)
			if err != nil {
				t.Fatal(err)
			}
			for r, v := range o.Sum {
				if !slices.Equal(v, o.Sum[0]) {
					t.Fatalf("Case %d hosts %v: GPU %d holds %v, GPU 0 %v.", h, a, r, v[:2], o.Sum[0][:2])
				}
			}
			got := o.Sum[0]
			switch a {
			case Ring, Tree:
				for c := range got {
					if d := math.Abs(got[c] - exact[c]); d > 1e-12*math.Abs(exact[c])+1e-15 {
						t.Errorf("Case %d hosts %v: component %d: Want: %g, Got: %g.", h, a, c, exact[c], got[c])
					}
				}
				if a == Ring {
					ring[h] = got
				}
			case Gather, FixedTree:
				if !slices.Equal(got, pw) {
					t.Errorf("Case %d hosts %v: not the pairwise sum bit for bit.", h, a)
				}
			case FixedPoint:
				if !slices.Equal(got, fp) {
					t.Errorf("Case %d hosts %v: not FixedPointSum bit for bit.", h, a)
				}
			}
		}
	}
	if slices.Equal(ring[1], ring[16]) {
		t.Errorf("ring: the same bits on 8 and 128 GPUs; the seeded leaves should tell them apart")
	}
	for i := range leaves {
		if !slices.Equal(leaves[i], orig[i]) {
			t.Fatalf("leaf %d was modified", i)
		}
	}
}

// TestFixedPointSum checks the fixed-point sum against an exact reference
// (math/big) on leaves of mixed signs and magnitudes: within one rounding
// of the sum plus the truncation, 2^−96 of the largest leaf per leaf; and
// that permuting the leaves does not change a bit.
func TestFixedPointSum(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(2, 2))
	for _, k := range []int{1, 2, 7, 64, 1000} {
		leaves := make([][]float64, k)
		for i := range leaves {
			leaves[i] = []float64{
				rnd.NormFloat64() * math.Ldexp(1, rnd.IntN(60)-30),
				rnd.Float64(),
				-1e300 * rnd.Float64(),
				0,
			}
		}
		got := FixedPointSum(leaves)
		for c := range got {
			exact, mx := exactSum(leaves, c)
			tol := 0x1p-53*math.Abs(exact) + float64(k)*mx*0x1p-95
			if d := math.Abs(got[c] - exact); d > tol {
				t.Errorf("Case k=%d c=%d: Want: %g, Got: %g (|d| %g > %g).", k, c, exact, got[c], d, tol)
			}
		}
		if k == 1 && !slices.Equal(got, leaves[0]) {
			t.Errorf("Case k=1: one leaf must come back unchanged: Want: %v, Got: %v.", leaves[0], got)
		}
		perm := rnd.Perm(k)
		shuf := make([][]float64, k)
		for i, j := range perm {
			shuf[i] = leaves[j]
		}
		if !slices.Equal(FixedPointSum(shuf), got) {
			t.Errorf("Case k=%d: permuting the leaves changed the bits.", k)
		}
	}
}

// TestNICContention checks that GPUs sharing a NIC queue on it, which the
// closed form ignores. With one NIC per host instead of eight, the ring
// (one message across each host boundary at a time) does not slow down;
// in the gather reduction the eight rails' slices (10 kB, 0.2 µs on the
// wire) queue behind each other: the last one starts 7 × 0.2 µs late.
func TestNICContention(t *testing.T) {
	t.Parallel()
	w := Workload{Trajectories: 1 << 20, Shared: 10000, PerTrajectory: LorenzPerTrajectory}
	slice := float64(8*w.Shared/8) / DefaultNet.Bandwidth
	for _, c := range []struct {
		a     Algorithm
		extra float64 // the least extra time expected from sharing
	}{
		{Ring, 0},
		{Gather, 7 * slice},
	} {
		one, err := Simulate(&Cluster{Hosts: 4, NICsPerHost: 1}, w, c.a, nil)
		if err != nil {
			t.Fatal(err)
		}
		eight, err := Simulate(&Cluster{Hosts: 4}, w, c.a, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := one.Reduce - eight.Reduce; d < 0.99*c.extra {
			t.Errorf("Case %v: 1 NIC per host %.4g s, 8 NICs %.4g s: Want: at least %.3g s more, Got: %.3g s.", c.a, one.Reduce, eight.Reduce, c.extra, d)
		}
	}
}

// exactSum returns the sum of leaves[i][c] over i rounded once to float64
// (math/big with enough bits to hold any sum of float64 exactly), and the
// largest magnitude.
func exactSum(leaves [][]float64, c int) (sum, max float64) {
	acc := new(big.Float).SetPrec(4096)
	var x big.Float
	for _, v := range leaves {
		acc.Add(acc, x.SetPrec(4096).SetFloat64(v[c]))
		max = math.Max(max, math.Abs(v[c]))
	}
	sum, _ = acc.Float64()
	return sum, max
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	w := Workload{Trajectories: 10, Shared: 3, PerTrajectory: 1}
	for _, c := range []struct {
		c Cluster
		w Workload
		a Algorithm
	}{
		{Cluster{}, w, Ring},
		{Cluster{Hosts: 1, NICsPerHost: 9}, w, Ring},
		{Cluster{Hosts: 1}, Workload{Shared: 0}, Ring},
		{Cluster{Hosts: 2}, Workload{Trajectories: 10, Shared: 3, Leaves: 12}, Tree},
		{Cluster{Hosts: 2, GPUsPerHost: 6}, w, FixedTree},
		{Cluster{Hosts: 1}, w, NumAlgorithms},
	} {
		if _, err := Predict(&c.c, c.w, c.a); !errors.Is(err, ErrInvalid) {
			t.Errorf("Case %+v: Predict: Want: ErrInvalid, Got: %v.", c, err)
		}
		if _, err := Simulate(&c.c, c.w, c.a, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("Case %+v: Simulate: Want: ErrInvalid, Got: %v.", c, err)
		}
	}
}
