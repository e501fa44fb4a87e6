// Package bench measures gradsolve against its targets: the Lorenz
// reverse-mode protocol of gradsolve (REFERENCE.md §5.1), stiff ensembles
// (Robertson and HIRES with Rodas5P and Rosenbrock23), a neural ODE whose
// field is a small MLP with shared weights (RunNeural, ProtocolNeural), and
// the memory of a gradient over 2²⁰ trajectories. It also holds the
// hand-written Go Tsit5 loop for Lorenz ensembles (LorenzTsit5) that the
// library's forward solve is compared with, and its CUDA twins in
// lorenz_tsit5.cu: a fused forward kernel and a record + discrete adjoint
// kernel (LorenzTsit5CUDA, LorenzGradCUDA), the baselines of the GPU
// engine. neural_tsit5.cu holds the same two kernels for the neural
// protocol's network (NeuralTsit5CUDA, NeuralGradCUDA), in a layout the
// engine does not have: a warp per tile of eight trajectories, the layers
// as float64 tensor-core products over the tile. Their sources are also
// host C++; the tests compile them with g++ and check them against
// LorenzTsit5 and ode.Grad.
//
// The folder anchors holds Python scripts that run Diffrax (JAX) on the same
// protocols, on the CPU or a GPU, for comparison: the Lorenz grid, the neural
// suite (reading the problem that "gradsolve bench -suite neural -dump"
// writes, so both solve the same weights and initial states) and Robertson
// with Kvaerno5.
//
// The training suite (RunTrain; "gradsolve bench -suite train", and
// "-suite gpu-train" on a GPU engine) times what a user runs: steps of
// fit.Run (a fresh mesh, the gradient and an Adam update every step) for
// one fit of the neural protocol's shared weights and for the Lorenz
// calibration of n independent fits of ρ, fit.New, and whole
// ode.Solver.Grad calls of the Lorenz protocol with host slices in and
// out, with the record and on a reused mesh, beside the kernels' device
// time where the GPU engine's trace sees it (issue 23). Its dump
// (TrainDump) holds the fits' problems and gradsolve's losses for the
// anchors diffrax_train.py (jitted Diffrax + optax train steps) and
// torchdiffeq_train.py; gpu_train.sh runs the three on the GPU host and
// anchors/train_summary.py tabulates them.
//
// The large-state suite (RunGPULarge; "gradsolve bench -suite gpu-large")
// times the gradients of the larger built-in problems (Lorenz-96 with
// d = 64 and 256, POLL, the Brusselator on 32 cells, HIRES, neural
// Robertson) on a GPU engine, kernels and whole calls, beside the CPU
// engine's whole call on the same ensemble (issue 26); anchors/
// diffrax_large.py runs Diffrax on the first four.
//
// saves_split.sh splits the GPU Kepler gradient's time with 1,000 save
// times (issue 25) into its parts: cuda.test built with one part of the
// adjoint removed at a time (timing-only variants, wrong gradients), run
// alternated with the unchanged binary on BenchmarkGPUSaveSplit's rows.
//
// Every suite times its cases side by side in one process: one untimed
// warm-up, then the median of Reps repetitions, the cases of a row taking
// turns within each repetition so that drift in the machine's speed affects
// them alike. Accuracy is the median over trajectories of the relative
// error ‖y − y_ref‖₂/‖y_ref‖₂ of the final state against a tight reference
// from package internal/refode (DOP853 for Lorenz and HIRES, Radau5 for
// Robertson), computed once per ensemble, on an evenly spaced subsample of
// the trajectories when the ensemble is large. Timings are wall-clock; the
// Lorenz suite also reports process CPU time for its single-threaded runs,
// which a busy machine disturbs less.
//
// Ensemble arrays are row-major [n×Dim]: y[i*Dim+j]. Times are reported in
// milliseconds.
//
// RESULTS.md holds the current figures of every suite, each table with the
// command that produced it, and the known limits; docs/bench-history.md is
// the log of the runs behind them. cmd/gradsolve's "bench" command runs the
// suites.
package bench
