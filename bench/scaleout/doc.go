// Package scaleout models the cost of one ensemble gradient sharded across
// hosts of GPUs: every GPU computes its share of the trajectories (record +
// adjoint), then the GPUs combine their shared-parameter gradients, once per
// gradient (once per optimiser step of a fit). Per-trajectory results stay
// where they were computed; only the shared gradient, S float64 values,
// crosses the network.
//
// It is a planning tool for docs/scale-out.md, not part of the library: no
// package of gradsolve imports it, and nothing in it talks to a network or
// a GPU.
//
// # The model
//
// A Cluster is H hosts of G GPUs (default 8). Within a host the GPUs talk
// over NVLink through a non-blocking switch; between hosts each GPU has its
// own InfiniBand NIC (rail-optimised, as on 8-GPU HGX servers). Every link
// follows the α–β (Hockney) model: b bytes take Latency + b/Bandwidth, each
// GPU port sends and receives one message at a time in each direction
// (Thakur, Rabenseifner and Gropp, "Optimization of collective communication
// operations in MPICH", IJHPCA 19(1), 2005). A library call has a fixed
// overhead (Cluster.CallOverhead, the base latency of NCCL's own tuning
// model), a local kernel another (Cluster.KernelOverhead), and every
// floating-point addition AddTime.
//
// The reductions (Algorithm) are those a sharded engine could run on NCCL:
//
//   - Ring: NCCL's flat ring all-reduce over all GPUs (reduce-scatter, then
//     all-gather, one chunk of S/P values per GPU).
//   - Tree: NCCL's tree all-reduce: a chain within each host, a binomial tree
//     across hosts (as deep as NCCL's double binary tree), the reverse to
//     broadcast.
//   - Gather: deterministic; all-gather of every GPU's partial within the
//     host, a fixed-order sum, all-gather of the host partials across hosts
//     (a slice per NIC), a fixed-order sum, all-gather of the slices.
//   - FixedTree: deterministic; recursive doubling over all GPUs in index
//     order built from point-to-point messages: at level l every GPU
//     exchanges its partial with GPU i XOR 2^l and adds (one call and one
//     add kernel per level), so every GPU ends with the sum over a perfect
//     binary tree of the GPUs.
//   - FixedPoint: deterministic; a Tree all-reduce (max) of the shared
//     gradient's magnitudes fixes one exponent per component, every GPU
//     turns its partial sums into three 32-bit fixed-point limbs below that
//     exponent, a Tree all-reduce adds the limbs exactly (integers), and
//     every GPU rounds once.
//
// Ring and Tree give the same bits on every GPU but different bits for
// different numbers of GPUs; Gather and FixedTree give the pairwise
// (fixed-tree) sum of the leaves whatever the number of GPUs, when the
// number of leaves and of GPUs are powers of two; FixedPoint gives the same
// bits for any number of GPUs and any assignment of leaves to GPUs.
//
// # Two implementations
//
// Predict is the closed-form α–β model: a sum of message, addition and
// overhead times along each algorithm's critical path. Simulate is a
// deterministic discrete-event simulation: one event queue, ports with busy
// times, every message sent and received, carrying the real float64 data, so
// its results can be checked for the sum and for bitwise determinism. The
// tests require the two to agree within 3%.
//
// Rows and WriteTable produce the table of docs/scale-out.md;
// examples/scaleout prints it.
package scaleout
