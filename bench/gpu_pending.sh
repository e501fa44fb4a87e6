#!/bin/bash
# The device checks prepared but not yet run on a GPU (sessions 29 and 30
# were lent no machine after their third call, and none at all), in two
# device calls of at most ten minutes each:
#
#   bash bench/gpu_pending.sh tests   (about 8 minutes)
#     1. the GPU tests touched since the last device run: events on every
#        engine (cuda, cuda-f32, cuda-multi over GPU 0 twice; balls at rest,
#        the accumulation rule), rerolled kernels (Lorenz-96 in
#        TestGPUEngineDims, the Rosenbrock problems in TestGPUEngineProblems
#        and TestGPUEnginePublished: NVRTC must accept '#pragma unroll 1'
#        loops), save times, training;
#     2. TestGPUColdStart: every built-in problem's first Grad with an empty
#        kernel cache (issue 26: <= 3 s up to d = 64), now with rerolled
#        Rosenbrock and explicit kernels;
#   bash bench/gpu_pending.sh bench   (about 7 minutes)
#     3. gradsolve bench -suite gpu-events beside bench/anchors/diffrax_events.py
#        (issue 25's >= 100x comparison);
#     4. whole Lorenz Grad calls (grad-call: everything returned, and
#        Gradient.Omit's loss and gradients only) with an execution trace and
#        a CPU profile, BenchmarkCallHostWork on the host's 16 cores (issue
#        23), and the fits.
#
#   bash bench/gpu_pending.sh compile (about 4 minutes): bench/ptxas_profile.py
#     on .gpu/srcs (TestSizeDiag's sources) beside the GPU tests of events,
#     multi-GPU, training and problems;
#   bash bench/gpu_pending.sh one (under 10 minutes): the most wanted checks in one call.
#   bash bench/gpu_pending.sh s36a, then s36b (under 10 minutes each):
#     session 36's work, none of it yet run on a device, most wanted first: the trainer's CUDA graphs
#     and fused sums (TestGPUTrainGraph, BenchmarkGPUTrainStep), chunk-staged
#     inputs and end times in the result pass (TestGPUChunkLaunch,
#     BenchmarkGPUCallBound), Method Auto continued from the switch
#     (TestGPUAutoContinue, BenchmarkGPUAuto), saved states copied back in
#     groups (TestGPUSaveGroups, BenchmarkGPUSaveSplit), Rosenbrock methods
#     in the wide layout (TestGPUWideRosenbrock, BenchmarkGPUWide's
#     Rosenbrock rows), then `bash bench/gpu_train.sh` (its own call).
#   bash bench/gpu_pending.sh s37 (under 10 minutes): session 37's checks in
#     one call (the mended Auto and wide Rosenbrock tests, TestGPUInputReuse,
#     TestGPUKeepSaves, BenchmarkGPUSaveSplit's kept rows,
#     BenchmarkGPUCallBound with and without input reuse, the events suite
#     beside Diffrax, TestGPUColdStart's tiered phase).
#   bash bench/gpu_pending.sh s37b (under 9 minutes): Method Auto on the GPU
#     (TestGPUAutoContinue, BenchmarkGPUAuto, BenchmarkGPUAutoTrace), then the
#     gpu-large suite (Rosenbrock methods wide by default from d = 16).
#   bash bench/gpu_pending.sh s37keep (about 5 minutes): saved states kept
#     on the device until read (ode.Settings.KeepSaves: TestGPUKeepSaves,
#     bit for bit against the saves returned, and BenchmarkGPUSaveSplit's
#     -kept and -kept-read rows, BenchmarkGPUSaveRatio's solveto-kept and
#     grad-kept against solveto and grad: issue 25's 1.5x / 2x).
#   bash bench/gpu_pending.sh s39 (about 6 minutes) and s39b (about 4):
#     session 39's checks (the wide layout at small d and BenchmarkGPULayoutFill,
#     Method Auto's trace, the events suite beside Diffrax, the call bound,
#     tiered first calls; then the engine tests under the new thresholds).
#   bash bench/gpu_pending.sh ncu (about 4 minutes, never yet run): Nsight
#     Compute on the large-state kernels (NCU_PROBLEMS, NCU_S, NCU_LAUNCHES).
#   bash bench/gpu_pending.sh s45a, then s45b (under 10 minutes each):
#     session 45's calls: the gpu-large ratios and WideMinSplit on the
#     Brusselator, the save cotangents' tests; then Method Auto and the call
#     bound against 303d2d7, the events suite traced beside Diffrax, the
#     Brusselator at matched error.
#   bash bench/gpu_pending.sh s49b (under 470 s): the device tests of
#     session 49's and 50's merged helpers, then Lorenz-96's kernels (the loss VJP
#     in shared memory, blocked windows, y from the record) beside
#     b9a028d and gpu-large's Lorenz-96 calls.
#   bash bench/gpu_pending.sh s49c (under 430 s): the changed-input call,
#     the 1,000-save calls, the kept events calls beside b9a028d, and
#     Diffrax's Lorenz-96 gradients.
#   bash bench/gpu_pending.sh s51 (under 470 s): s49b's device tests with
#     session 51's, Lorenz-96's kernels beside b9a028d, one round of the
#     1,000-save calls with the deferred saves (-defer) and -divsaves.
#   bash bench/gpu_pending.sh s52 (under 540 s): TestGPUWide and the save
#     tests with the deferred saves by default, session 52's helpers' tests
#     (Method Auto's stiffness test, events on unseen cases), the 1,000-save calls against -inline, Method Auto's
#     benchmark, Vern7's gradient compiled cold at -O1 and in full, and
#     Nsight Compute's stalls of Lorenz-96 d = 256's gradient.
#   bash bench/gpu_pending.sh s53 (under 540 s): s52 with session 53's H3
#     merged (the wide layout on several warps a trajectory: TestGPUWideWarps,
#     GPUWideLanes' warps= rows: warps=2, -b0, -b8, -recy-outplace, warps=4,
#     -b0, -b4; if one wins, set defaultWideWarps from d and the bounds from
#     the -b0 rows' registers) and TestGPUWideRosenbrock, the stability
#     probe's tests (TestGPUProbe, TestGPUProbeWide) and cost (GPUProbeCost),
#     and the unseen problems on the device (TestGPUEngineUnseen53*).
#   bash bench/gpu_pending.sh s49src (under 5 minutes): Nsight Compute's
#     stall samples by SASS instruction of Lorenz-96 d = 256's gradient
#     and the 1,000-save solve.
#   bash bench/gpu_pending.sh s49sass (under 4 minutes): the SASS of
#     Lorenz-96 d = 256's gradient kernel and the 1,000-save kernels,
#     loads and stores counted by state space.
#   bash bench/gpu_pending.sh s49a (under 560 s): the device tests not
#     yet run to their end (tile mode, the wide layout, events), the
#     changed-input call at 32,768 and the events check's memset in three
#     rounds, Nsight Compute on the 1,000-save solve, Vern7's 1,000-save
#     gradient and Lorenz-96 d = 256's gradient.
#   bash bench/gpu_pending.sh s48e (under 280 s): the device tests s48d
#     cut (the Brusselator's band LU against dense alone, tile mode, the
#     wide layout against the thread layout), then gpu-large's Brusselator
#     (rtol 1e-9) and Lorenz-96 d = 64 beside Diffrax's gradients.
#   bash bench/gpu_pending.sh s48d (under 540 s; S48D_MAX): s48c's device
#     tests cut to 230 s (with the kept quotients' test), then the band
#     LU against dense on the Brusselator at rtol 1e-9, Lorenz-96 d = 64 /
#     256 default against a warp and the blocked split, the call bound
#     against cb6dce9 (base48.test.gz), the events calls with and without
#     the compare's help and the check's memset, the 1,000-save Grad with
#     the kept quotients.
#   bash bench/gpu_pending.sh s48c (under 420 s): the device tests of
#     session 48's merged work (fewer lanes to d = 64 and their shared
#     sums, the band LU, the blocked split, predicted pivots, the AVX
#     scatter, the events call's help and check, tile mode from 4,096).
#   bash bench/gpu_pending.sh s48b (under 480 s): tile mode against lanes
#     mode (GPUTileFill), gpu-large whole calls of neural Robertson and
#     Lorenz-96 d = 64 / 256 beside the 16-core CPU engine, the Brusselator
#     at rtol 1e-9, Diffrax's gradients of the three beside them.
#   bash bench/gpu_pending.sh s48a (under 420 s): the device tests s47c's
#     limit cut (TestGPUWideTablesSame, TestGPUThreadSaves), tile mode
#     against lanes mode at n = 1,024 / 4,096 / 16,384 (GPUTileFill), three
#     rounds of the crew against the pool (GPUCallWorkers), the events suite
#     beside Diffrax.
#   bash bench/gpu_pending.sh s47c (RUN FIRST: never ran in session 47;
#     S47C_MAX=465 by default): the device tests of the
#     wide layout's merged defaults and s47b's unreached ones, the sparse
#     LU against dense, Lorenz-96 d = 64 against warp-old, gpu-large.
#   bash bench/gpu_pending.sh s47b (under 450 s): the device tests of the
#     defaults made without a device run, the call bound against ae9dc05,
#     grouped save cotangents, the events calls.
#   bash bench/gpu_pending.sh s47a (under 400 s): the events suite beside
#     Diffrax, TestGPUWideLanesSame, the Brusselator at matched error
#     beside Diffrax.
#   bash bench/gpu_pending.sh s46d (under 400 s; never ran: session 46's
#     budget ran out): the device tests of every launch run ahead of its
#     inputs' compare (H4) and of kept saves written in place (H6), the
#     call bound against ae9dc05 (base46.test.gz), tile mode against lanes
#     mode (BenchmarkGPUTileFill), SolveTo/Grad with kept saves against
#     their old forms, gpu-large with fewer lanes by default; s46e is the
#     same cut to 200 s.
#   bash bench/gpu_pending.sh s46a (under 9 minutes): the call bound at
#     every size three times, TestGPUEngineChunks against 303d2d7, the
#     1,000-save kernel without its loss VJP, Tuning.wideRound's bounds.
#   bash bench/gpu_pending.sh regs (about 4 minutes), then regs-bench
#     (under 10 minutes; REGS_BENCH narrows it), then
#     NCU_PROBLEMS=pollution ... ncu: the wide Rodas5P kernels' register
#     levers (Tuning.WideScalars, WideMinBlocks): TestGPUStiffLayouts/pollution
#     and TestGPUWideRosenbrock, BenchmarkGPUWideRegs, Nsight Compute.
#   bash bench/gpu_pending.sh auto (about 4 minutes): BenchmarkGPUAuto.
#   bash bench/gpu_pending.sh wide (under 10 minutes): TestGPUWide in full
#     and BenchmarkGPUWide (the wide layout against the thread layout).
#   bash bench/gpu_pending.sh chunks (under 8 minutes): a kernel per
#     result chunk (TestGPUChunkLaunch, BenchmarkGPUCall) and the wide
#     layout (TestGPUWide, BenchmarkGPUWide).
#   bash bench/gpu_pending.sh saves (about 5 minutes): BenchmarkGPUSaveSplit
#     (kernels, copies and host work of calls with 1 and 1,000 save times),
#     then BenchmarkGPUSaveRatio's interpolated rows.
#   bash bench/gpu_pending.sh large (under 10 minutes): -suite gpu-large beside
#     bench/anchors/diffrax_large.py.
#   bash bench/gpu_pending.sh cold (about 5 minutes): Pollution's and
#     HIRES's first calls with the LU loops kept loops, and
#     TestGPUEngineProblems.
#   bash bench/gpu_pending.sh compile2 (about 9 minutes): split kernels
#     (kernelgen's Config.SplitFrom) and NVRTC's -minimal, --split-compile
#     and precompiled headers: bench/ptxas_profile.py on five Rodas5P
#     gradient sources of .gpu/srcs (5 processes, ptxas at -O1, the
#     engine's level for them), then TestGPUColdStart's split phase
#     (split and unsplit kernels, cold and warm, with the engine's
#     options), then TestGPUEngineProblems (NVRTC takes the split
#     sources; GPU = CPU). .gpu/srcs must be the split sources:
#     GS_SIZE_DIAG=.gpu/srcs GS_SIZE_ONLY=Rodas5P go test ./cuda -run TestSizeDiag
#   bash bench/gpu_pending.sh s42split (about 9 minutes), then
#     s42split-check (about 5): kernels compiled in parts (Tuning.SplitUnits):
#     the driver's link (TestBuildUnits), cold first calls with the units
#     on and off (TestGPUColdStart phase units), TestGPUEngineProblemsSplitUnits;
#     then TestGPUSplitUnits (bit for bit against one unit; session 33's
#     one-unit split of Pollution, compute-sanitizer where it fails).
#
# It builds nothing. Before the call, on the development machine:
#
#   mkdir -p .gpu/bin
#   CGO_ENABLED=0 go build -ldflags='-s -w' -o .gpu/bin/gradsolve ./cmd/gradsolve
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .gpu/bin/cuda.test ./cuda
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .gpu/bin/fit.test ./fit   (bench part)
#   CGO_ENABLED=0 go test -c -ldflags='-s -w' -o .gpu/bin/driver.test ./cuda/driver   (s42split)
#
# carry .gpu, and run `bash bench/gpu_pending.sh PART` from the repository
# root. Logs go to $OUT/l (packed as $OUT/logs.tgz); a summary is printed
# last. Read the traces with
# `go tool trace -d=parsed FILE | scripts/trace_regions.py`.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/l"
export PATH=$PATH:/usr/local/cuda/bin
export GRADSOLVE_CUDA_CACHE=${GRADSOLVE_CUDA_CACHE:-/tmp/gradsolve-cuda-cache} PYTHONUNBUFFERED=1
bin=.gpu/bin
T0=$(date +%s)
el() { echo "rc $1 at $(($(date +%s) - T0)) s"; }

part=${1:-tests}

if [ "$part" = tests ]; then
echo "=== GPU tests"
timeout 300 "$bin/cuda.test" -test.v -test.timeout 6m -test.run \
	'TestGPUEvents|TestGPUMultiEvents|TestGPUMultiEngine|TestGPUEngine$|TestGPUEngineDims|TestGPUEngineSaveTimes|TestGPUEngineProblems|TestGPUEnginePublished|TestGPUTrain' \
	>"$out/l/tests.log" 2>&1
el $?
grep -E '^(--- |ok|FAIL|PASS)|panic' "$out/l/tests.log" | head -60

echo "=== cold start"
GS_COLDSTART_JSON="$out/l/coldstart.json" GS_COLDSTART_BUDGET=150 timeout 200 \
	"$bin/cuda.test" -test.run TestGPUColdStart -test.v -test.timeout 10m >"$out/l/cold.log" 2>&1
el $?
grep -E '^(--- |ok|FAIL)|panic' "$out/l/cold.log" | head
fi

if [ "$part" = compile ]; then
# Where compile time goes (bench/ptxas_profile.py) on the sources in
# .gpu/srcs (TestSizeDiag's), beside the GPU tests the last call did not
# reach, in three processes.
echo "=== tests (background)"
timeout 480 "$bin/cuda.test" -test.v -test.timeout 8m -test.run 'TestGPUEvents$/(Rodas5P|Rosenbrock23)' >"$out/l/tests-ev.log" 2>&1 &
p1=$!
timeout 480 "$bin/cuda.test" -test.v -test.timeout 8m -test.run 'TestGPUMultiEvents|TestGPUMultiEngine|TestGPUTrain' >"$out/l/tests-multi.log" 2>&1 &
p2=$!
timeout 480 "$bin/cuda.test" -test.v -test.timeout 8m -test.run 'TestGPUEngineProblems|TestGPUEnginePublished' >"$out/l/tests-prob.log" 2>&1 &
p3=$!
echo "=== ptxas profile"
big="pollution-Rodas5P-grad hires-Rodas5P-grad brusselator-Rodas5P-grad lorenz-Rodas5P-grad"
small="lorenz-Tsit5-grad lorenz96-64-Tsit5-grad pollution-Rodas5P-record lorenz96-64-Rodas5P-grad"
timeout 420 python3 bench/ptxas_profile.py -out /tmp/ptx -workers 10 -timeout 180 -variants base,noinline,lurolled,both \
	$(for s in $big; do echo .gpu/srcs/$s.cu; done) >"$out/l/ptxas.jsonl" 2>"$out/l/ptxas.log"
el $?
timeout 200 python3 bench/ptxas_profile.py -out /tmp/ptx -workers 4 -timeout 180 -variants base \
	$(for s in $small; do echo .gpu/srcs/$s.cu; done) >>"$out/l/ptxas.jsonl" 2>>"$out/l/ptxas.log"
el $?
wait $p1; el $?
wait $p2; el $?
wait $p3; el $?
for f in tests-ev tests-multi tests-prob; do grep -E '^(--- |ok|FAIL|PASS)|panic' "$out/l/$f.log" | grep -v '^    --- PASS' | head -30; done
python3 - "$out/l/ptxas.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    o3, o1 = r.get("ptxas_O3", {}), r.get("ptxas_O1", {})
    print("%-28s %-9s src %7s ptx %8s fe %6s O3 %7s O1 %7s regs %4s spill %6s stack %6s %s" % (
        r.get("source"), r.get("variant"), r.get("src_bytes"), r.get("ptx_bytes"), r.get("nvrtc_ptx_s"),
        o3.get("s"), o1.get("s"), o3.get("regs_max"), o3.get("spill_st"), o3.get("stack_max"),
        (r.get("error") or o3.get("error") or "")[:80]))
PY
fi

if [ "$part" = cold ]; then
# The LU loops kept loops (d >= 8, GS_LU_ROLLED): Pollution's and HIRES's
# first calls and warm kernels (TestGPUColdStart), then the problems' GPU
# test (NVRTC must accept the rolled sources; GPU = CPU).
echo "=== cold first calls"
GS_COLDSTART_ONLY=pollution GS_COLDSTART_BUDGET=110 GS_COLDSTART_JSON="$out/l/cold-poll.json" timeout 140 \
	"$bin/cuda.test" -test.run TestGPUColdStart -test.v >"$out/l/cold-poll.log" 2>&1
el $?
GS_COLDSTART_PHASES=problems GS_COLDSTART_ONLY=hires GS_COLDSTART_BUDGET=50 GS_COLDSTART_JSON="$out/l/cold-hires.json" timeout 70 \
	"$bin/cuda.test" -test.run TestGPUColdStart -test.v >"$out/l/cold-hires.log" 2>&1
el $?
timeout 100 "$bin/cuda.test" -test.run 'TestGPUEngineProblems' -test.v >"$out/l/problems.log" 2>&1
el $?
grep -hE "options  |problems  " "$out"/l/cold-*.log | grep -v rejected | cut -c1-220
grep -E "^(--- |ok|FAIL|PASS)|^    --- FAIL|panic" "$out/l/problems.log" | head
fi

if [ "$part" = chunks ]; then
# A kernel per chunk of a large launch's results, copied while the next
# chunks run (TestGPUChunkLaunch: bit for bit against one kernel;
# BenchmarkGPUCall: whole 2^20 Lorenz Grad calls, both forms alternated),
# and the wide layout (TestGPUWide: Lorenz-96 d = 64, 256 against the
# CPU; BenchmarkGPUWide: its solves against the thread layout's).
echo "=== chunk launches, wide layout: tests"
timeout 200 "$bin/cuda.test" -test.v -test.timeout 4m -test.run 'TestGPUChunkLaunch|TestGPUWide$' >"$out/l/chunks-tests.log" 2>&1
el $?
grep -E '^(--- |ok|FAIL|PASS)|^    |panic' "$out/l/chunks-tests.log" | head -30
echo "=== whole calls, chunk kernels against one"
timeout 150 "$bin/cuda.test" -test.run XXX -test.bench 'GPUCall$' -test.benchtime 10x -test.count 3 >"$out/l/chunks-calls.log" 2>&1
el $?
grep Benchmark "$out/l/chunks-calls.log"
echo "=== wide against thread"
timeout 150 "$bin/cuda.test" -test.run XXX -test.bench 'GPUWide' -test.benchtime 5x -test.count 2 >"$out/l/wide.log" 2>&1
el $?
grep -E 'Benchmark|FAIL|panic' "$out/l/wide.log"
fi

if [ "$part" = wide ]; then
# The wide layout's device checks (issue 26): TestGPUWide in full (d = 64
# and 256, every case against the CPU and the thread layout; more than a
# minute), then BenchmarkGPUWide (solves and gradients, wide against the
# thread layout; the thread layout's d = 256 gradient kernel takes ~95 s
# to compile on a cold cache).
echo "=== TestGPUWide"
timeout 300 "$bin/cuda.test" -test.v -test.timeout 5m -test.run 'TestGPUWide$' >"$out/l/wide-test.log" 2>&1
el $?
grep -E '^(--- |ok|FAIL|PASS)|wide against thread|panic' "$out/l/wide-test.log" | head -30
echo "=== BenchmarkGPUWide"
timeout 250 "$bin/cuda.test" -test.run XXX -test.bench 'GPUWide' -test.benchtime 5x >"$out/l/wide-bench.log" 2>&1
el $?
grep -E 'Benchmark|FAIL|panic' "$out/l/wide-bench.log"
fi

if [ "$part" = saves ]; then
# Save times on the GPU (issue 25): where a call's time goes with 1 and
# 1,000 save times (kernels, copies, the rest), then the save ratios.
echo "=== save split"
timeout 120 "$bin/cuda.test" -test.run '^$' -test.bench 'GPUSaveSplit' -test.benchtime 5x >"$out/l/savesplit.log" 2>&1
el $?
grep -E "^Benchmark|FAIL|panic" "$out/l/savesplit.log"
echo "=== save ratios"
timeout 240 "$bin/cuda.test" -test.run '^$' -test.bench 'GPUSaveRatio/.*/(solveto|grad|grad-omit)/interp' -test.benchtime 5x >"$out/l/saves.log" 2>&1
el $?
grep -E "^Benchmark|FAIL|panic" "$out/l/saves.log"
fi

if [ "$part" = auto ]; then
# Method Auto on the GPU engine (restarting stiff trajectories from T0)
# against Tsit5 and Rodas5P alone, n = 16384 (issue 25's 1.5x target).
echo "=== Method Auto"
timeout 300 "$bin/cuda.test" -test.run '^$' -test.bench 'GPUAuto' -test.benchtime 5x >"$out/l/auto.log" 2>&1
el $?
grep -E "^Benchmark|FAIL|panic" "$out/l/auto.log"
fi

if [ "$part" = one ]; then
# Everything most wanted in one call of under ten minutes: the rolled LU
# kernels through NVRTC (TestGPUEngineProblems), the events suite after
# the event marks' fix (with its trace and profile, no Diffrax), POLL's
# first call split and not (cold and warm), and the large-state suite.
timeout 100 "$bin/cuda.test" -test.run 'TestGPUEngineProblems' -test.v >"$out/l/problems.log" 2>&1
el $?
grep -E "^(--- |ok|FAIL|PASS)|^    --- FAIL|panic" "$out/l/problems.log" | head
timeout 40 "$bin/gradsolve" bench -suite gpu-events -engine cuda -json -out "$out/l/events.jsonl" \
	-trace "$out/l/events.trace" -cpuprofile "$out/l/events.prof" >"$out/l/events.log" 2>&1
el $?
GS_COLDSTART_PHASES=split GS_COLDSTART_ONLY=pollution GS_COLDSTART_BUDGET=110 GS_COLDSTART_JSON="$out/l/cold-poll.json" timeout 130 \
	"$bin/cuda.test" -test.run TestGPUColdStart -test.v >"$out/l/cold-poll.log" 2>&1
el $?
grep -hE "split  |skipped" "$out"/l/cold-poll.log | cut -c1-220
LARGE_S=240 bash "$0" large-go
fi

if [[ "$part" =~ ^s[345][0-9] ]] || [ "$part" = regs ] || [ "$part" = regs-bench ]; then
t() { # name, seconds, test binary arguments...
	local name=$1 secs=$2
	shift 2
	echo "=== $name"
	timeout "$secs" "${TB:-$bin/cuda.test}" "$@" >"$out/l/$name.log" 2>&1
	el $?
	grep -E '^(--- |    --- |ok|FAIL|PASS)|^Benchmark|panic' "$out/l/$name.log" | head -40
}
tp() { # name, seconds, -test.run pattern: a test process (run it in the background with &)
	timeout "$2" "$bin/cuda.test" -test.v -test.timeout "$(($2 - 5))s" -test.run "$3" >"$out/l/$1.log" 2>&1
	echo "rc $? $1 at $(($(date +%s) - T0)) s"
}
jrows() { # keys (comma-separated; empty: every scalar), files under $out/l: their JSON lines
	python3 - "$out/l" "$@" <<'PY'
import json, os, sys
d, keys, files = sys.argv[1], [k for k in sys.argv[2].split(",") if k], sys.argv[3:]
for f in files:
    p = os.path.join(d, f)
    if not os.path.exists(p):
        continue
    for line in open(p):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        keep = {k: r[k] for k in keys if k in r} if keys else {k: v for k, v in r.items() if not isinstance(v, (list, dict))}
        print(f, json.dumps(keep)[:400])
PY
}
ev() { # diffrax seconds: the gpu-events suite, then Diffrax's events anchor beside it
	echo "=== events"
	timeout 40 "$bin/gradsolve" bench -suite gpu-events -engine cuda -json -out "$out/l/events.jsonl" >"$out/l/events.log" 2>&1
	el $?
	timeout "$1" python3 bench/anchors/diffrax_events.py --platform gpu --out "$out/l/diffrax_events.jsonl" >/dev/null 2>"$out/l/diffrax_events.log"
	el $?
	tail -3 "$out/l/diffrax_events.log"
}
nb() { # name, seconds, benchmark pattern, [launches skipped, 2]: Nsight Compute on one gs_engine launch of a cuda.test benchmark
	echo "=== ncu $1"
	timeout "$2" ncu --clock-control none -k regex:gs_engine --launch-skip "${4:-2}" --launch-count 1 \
		--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
		--metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' --page details --csv \
		--log-file "$out/l/ncu-$1.csv" "$bin/cuda.test" -test.run '^$' -test.bench "$3" -test.benchtime 3x \
		>"$out/l/ncu-$1.log" 2>&1
	el $?
	python3 bench/ncu_sum.py "$out/l/ncu-$1.csv"
}
tiered() { # budget, seconds: TestGPUColdStart's tiered first calls
	echo "=== first calls (tiered)"
	GS_COLDSTART_PHASES=tiered GS_COLDSTART_BUDGET=$1 GS_COLDSTART_JSON="$out/l/tiered.json" timeout "$2" \
		"$bin/cuda.test" -test.run TestGPUColdStart -test.v -test.timeout 590s >"$out/l/tiered.log" 2>&1
	el $?
	grep -hE "tiered|FAIL|ok" "$out/l/tiered.log" | grep -v skipped | cut -c1-200 | head -12
}
fi
if [ "$part" = s36a ]; then
t train-tests 120 -test.v -test.run 'TestGPUTrainGraph|TestGPUTrainMatchesHost|TestGPUTrainHandsBack|TestGPUTrainUpdateBitwise|TestGPUTrainResume'
t train-step 60 -test.run '^$' -test.bench 'GPUTrainStep' -test.benchtime 20x
t chunks 90 -test.v -test.run 'TestGPUChunkLaunch|TestGPUEngine$'
t call-bound 90 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x -test.count 3
t host-work 40 -test.run '^$' -test.bench 'CallHostWork(Mid)?$' -test.cpu 1,16 -test.benchtime 40x
t auto 120 -test.v -test.run 'TestGPUAutoContinue'
t auto-bench 90 -test.run '^$' -test.bench 'GPUAuto' -test.benchtime 5x
fi
if [ "$part" = s36b ]; then
t saves 60 -test.v -test.run 'TestGPUSaveGroups|TestGPUEngineSaveTimes'
t save-split 60 -test.run '^$' -test.bench 'GPUSaveSplit' -test.benchtime 5x
t wide-ros 150 -test.v -test.run 'TestGPUWideRosenbrock'
t wide-ros-bench 200 -test.run '^$' -test.bench 'GPUWide/grad/(pollution|brusselator)' -test.benchtime 3x
fi

if [ "$part" = s37 ]; then
# Session 37's work in one call: the mended device tests (Auto continued,
# wide Rosenbrock now the default from d = 16), unchanged inputs not
# uploaded again, saves kept on the device, the events suite beside
# Diffrax (whole calls reuse their inputs), first calls served by the
# CPU engine while the kernels compile (issue 26's six cases).
t tests37 240 -test.v -test.run 'TestGPUWideRosenbrock|TestGPUAutoContinue|TestGPUInputReuse|TestGPUKeepSaves'
t keep-split 60 -test.run '^$' -test.bench 'GPUSaveSplit' -test.benchtime 5x
t call-bound 60 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x -test.count 2
ev 110
tiered 100 150
fi

if [ "$part" = s37b ]; then
# Method Auto's host work between segments cut (BenchmarkGPUAuto,
# BenchmarkGPUAutoTrace: kernel, transfer and host time), TestGPUAutoContinue,
# then the large-state suite with the Rosenbrock wide layout the default.
t auto37 120 -test.v -test.run 'TestGPUAutoContinue'
t auto-bench 100 -test.run '^$' -test.bench 'GPUAuto$' -test.benchtime 5x
t auto-trace 60 -test.run '^$' -test.bench 'GPUAutoTrace' -test.benchtime 5x
LARGE_S=230 bash "$0" large-go
fi

if [ "$part" = s37keep ]; then
t keep-tests 150 -test.v -test.run 'TestGPUKeepSaves|TestGPUSaveGroups'
t keep-split 150 -test.run '^$' -test.bench 'GPUSaveSplit' -test.benchtime 5x
t keep-ratio 200 -test.run '^$' -test.bench 'GPUSaveRatio/.*/(solveto|grad)(-kept)?/interp' -test.benchtime 5x
fi

if [ "$part" = s38 ]; then
# Session 38's work in one call: events' marks kept on the device, Method
# Auto's first-pass columns gathered there, the adaptive input record and
# the cut host work per call, tiered first calls racing the compile.
t tests38 140 -test.v -test.run 'TestGPUEvents$|TestGPUAutoContinue|TestGPUInputReuse|TestGPUChunkLaunch|TestGPUEngine$|TestGPUKeepSaves'
t call-bound 50 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x -test.count 2
ev 90
t auto-trace 70 -test.run '^$' -test.bench 'GPUAutoTrace' -test.benchtime 5x
tiered 60 90
fi

if [ "$part" = s38rest ]; then
# What session 38's one 170-s call did not reach: TestGPUEvents in full,
# Method Auto's trace, the tiered first calls, the events suite beside
# Diffrax at both tolerances; then run `large` and `s37keep`.
t events-tests 200 -test.v -test.run 'TestGPUEvents$|TestGPUInputReuse|TestGPUChunkLaunch|TestGPUKeepSaves'
t auto-trace 70 -test.run '^$' -test.bench 'GPUAutoTrace' -test.benchtime 5x
tiered 80 120
ev 110
fi

if [ "$part" = s39 ]; then
# Session 39's work in one call: the wide layout forced at small d and
# the occupancy measure that sets its thresholds (BenchmarkGPULayoutFill),
# Method Auto's host work cut (sub-problems shared, inputs kept per
# layout), the events' end times written in the result pass, the host
# split of whole calls, tiered first calls (the wide functions emitted
# once, rematerialised in one pass).
t tests39 150 -test.v -test.run 'TestGPUWideSmall|TestGPUAutoContinue|TestGPUInputReuse|TestCallHandOvers|TestGPUChunkLaunch'
t events-driven 60 -test.v -test.run 'TestGPUEvents/(driven-ball|ball|pk)-(Vern7|Tsit5)'
t layout-fill 170 -test.run '^$' -test.bench 'GPULayoutFill/(hires|robertson|lorenz96-16)/' -test.benchtime 3x
t auto-trace 60 -test.run '^$' -test.bench 'GPUAutoTrace' -test.benchtime 5x
ev 70
t call-bound 40 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x -test.count 2
tiered 50 80
t layout-fill2 150 -test.run '^$' -test.bench 'GPULayoutFill/(pollution|neural-robertson)/' -test.benchtime 3x
fi

if [ "$part" = s39b ]; then
# The wide layout's thresholds for jobs that do not fill the device set
# from s39's BenchmarkGPULayoutFill (Rosenbrock d >= 8, explicit d >= 16),
# and the reroller's mend of the thread layout's shared-gradient terms:
# the engine tests under the new defaults, the neural Robertson rows, and
# HIRES and Pollution beside the 16-core CPU engine.
t engine 150 -test.v -test.run 'TestGPUEngine$|TestGPUEngineProblems|TestGPUEnginePublished'
t layout-neural 80 -test.run '^$' -test.bench 'GPULayoutFill/neural-robertson/' -test.benchtime 3x
echo "=== gpu-large"
timeout 120 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 3 -json -quiet -problems hires,pollution \
	>"$out/l/large.jsonl" 2>"$out/l/large.log"
el $?
fi

if [ "$part" = s40 ]; then
# Session 40's first call: the stiff problems' gradients in the wide and
# thread layouts against the CPU (Pollution-Rodas5P's dL/dy0 parted in
# session 39's call 4), then session 38's end (cuda-base.test.gz, 3a51fee)
# and main side by side on one machine: Method Auto's trace (the shared
# sub-problems and two kept arenas of session 39) and the whole-call bound;
# then Nsight Compute on Lorenz-96 d = 256 and Pollution.
t stiff-layouts 130 -test.v -test.run 'TestGPUStiffLayouts'
grep -hE "largest difference|want .* within" "$out/l/stiff-layouts.log" | cut -c1-220 | head -12
gunzip -c $bin/cuda-base.test.gz >/tmp/cuda-base.test && chmod +x /tmp/cuda-base.test
t auto-main 60 -test.run '^$' -test.bench 'GPUAutoTrace' -test.benchtime 5x
TB=/tmp/cuda-base.test t auto-base 60 -test.run '^$' -test.bench 'GPUAutoTrace' -test.benchtime 5x
for r in 1 2; do
t cb-main-$r 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x
TB=/tmp/cuda-base.test t cb-base-$r 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x
done
NCU_PROBLEMS="lorenz96-256 pollution" NCU_S=70 bash "$0" ncu
fi

if [ "$part" = s40b ]; then
# Pollution-Rodas5P in the wide layout against the mended spread
# (compareOwnMesh), the tiered first calls of every case with a budget
# that reaches them all (issue 26's table), and the Brusselator's Diffrax
# gradient alone (cut at 230 s in session 39 beside the other problems).
t stiff-poll 90 -test.v -test.run 'TestGPUStiffLayouts/pollution-Rodas5P'
grep -hE "largest difference|want .* within" "$out/l/stiff-poll.log" | cut -c1-220 | head -6
tiered 200 250
grep -hE "skipped" "$out/l/tiered.log" | cut -c1-300 | head
echo "=== diffrax brusselator"
timeout 200 python3 bench/anchors/diffrax_large.py --platform gpu --problems brusselator --rtol 1e-6 --reps 1 --no-forward \
	--ref-sample 4 --max-seconds 0 --out "$out/l/diffrax_bruss.jsonl" >/dev/null 2>"$out/l/diffrax_bruss.log"
el $?
tail -4 "$out/l/diffrax_bruss.log"
fi

if [ "$part" = s40c ]; then
# Session 40's merged work, first the tests: gradients kept on the device
# (KeepGrads: its check kernel's first NVRTC compile), save times tried
# with TrialDense, the wide layout's lane-private arrays, Method Auto's
# parts used in place; then the events suite with its call-keep column
# beside Diffrax, the kept events calls, the wide layout's three forms on
# Lorenz-96 and HIRES, Method Auto's trace.
t tests40 170 -test.v -test.run 'TestGPUKeepGrads|TestGPUKeepSaves|TestGPUWide$|TestGPUAutoContinue|TestGPUEngineSaveTimes|TestGPUSaveGroups|TestGPUEngine$|TestGPUInputReuse|TestCallHandOvers'
ev 70
t events-keep 45 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk)/(record-omit|record-keep|record-keep-read)$' -test.benchtime 200x -test.count 3
t wide-private 120 -test.run '^$' -test.bench 'GPUWidePrivate/grad/(lorenz96-64|lorenz96-256|hires)/' -test.benchtime 5x
t auto-trace 60 -test.run '^$' -test.bench 'GPUAutoTrace' -test.benchtime 5x -test.benchmem
fi

if [ "$part" = s40d ]; then
# The rest of session 40's checks: the whole-call bound and the save
# split beside da29ff7 (cuda-base.test.gz) on one machine, the wide Rosenbrock
# tests, Lorenz-96's whole calls beside the CPU engine and Diffrax.
gunzip -c $bin/cuda-base.test.gz >/tmp/cuda-base.test && chmod +x /tmp/cuda-base.test
t cb-main 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x
TB=/tmp/cuda-base.test t cb-base 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x
t cb-main2 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x
t saves-main 50 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|grad-kept)$' -test.benchtime 5x
TB=/tmp/cuda-base.test t saves-base 50 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|grad-kept)$' -test.benchtime 5x
echo "=== gpu-large"
timeout 90 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 3 -json -quiet -problems lorenz96-64,lorenz96-256 \
	>"$out/l/large.jsonl" 2>"$out/l/large.log"
el $?
echo "=== diffrax_large"
timeout 100 python3 bench/anchors/diffrax_large.py --platform gpu --problems lorenz96-64,lorenz96-256 --rtol 1e-6 --reps 3 --max-seconds 40 \
	--out "$out/l/diffrax_large.jsonl" >/dev/null 2>"$out/l/diffrax_large.log"
el $?
tail -4 "$out/l/diffrax_large.log"
t wide-ros 90 -test.v -test.run 'TestGPUWideRosenbrock|TestGPUStiffLayouts/pollution'
fi

if [ "$part" = s40e ]; then
# Session 40's last call: KeepGrads after the mend of the kept run (every
# kept gradient read as written over in s40c), the events suite's
# call-keep column beside Diffrax, the kept events calls on the device
# alone, and the whole-call bound beside da29ff7 on one machine.
t keep 90 -test.v -test.run 'TestGPUKeepGrads|TestGPUEvents/(ball|pk)-Tsit5$'
ev 90
t events-keep 40 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk)/(record-omit|record-keep|record-keep-read)$' -test.benchtime 200x -test.count 3
gunzip -c $bin/cuda-base.test.gz >/tmp/cuda-base.test && chmod +x /tmp/cuda-base.test
t cb-main 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x
TB=/tmp/cuda-base.test t cb-base 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x
fi

if [ "$part" = s40f ]; then
# The wide layout's lane-private arrays on the device (TestGPUWide was cut
# by s40c's budget): Lorenz-96 d = 64 and 256 against the CPU, Pollution's
# wide Rodas5P gradient.
t wide 150 -test.v -test.run 'TestGPUWide$'
t stiff-poll-wide 60 -test.v -test.run 'TestGPUStiffLayouts/pollution-Rodas5P/wide'
fi

if [ "$part" = s41a ]; then
# Session 41's first call: the wide layout's private arrays by rows, now
# the default, against the CPU (TestGPUWide whole) and their first calls
# (Lorenz-96 d = 64 and 256 with Tsit5, compiled cold); the float32
# events test after its mend; the save split beside da29ff7
# (cuda-base.test.gz: before the saves tried with TrialDense); MLP fields'
# first calls (issue 26: 2-128-128-2 within 5 s).
gunzip -c $bin/cuda-base.test.gz >/tmp/cuda-base.test && chmod +x /tmp/cuda-base.test
t wide 220 -test.v -test.run 'TestGPUWide$'
for c in lorenz96-64-Tsit5 lorenz96-256-Tsit5; do
echo "=== cold $c"
GS_COLDSTART_PHASES=problems GS_COLDSTART_ONLY=$c timeout 45 "$bin/cuda.test" -test.run TestGPUColdStart -test.v >"$out/l/cold-$c.log" 2>&1
el $?
grep -hE "problems  |FAIL|^ok" "$out/l/cold-$c.log" | cut -c1-220
done
t evf32 50 -test.v -test.run 'TestGPUEventsFloat32'
t saves-main 40 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|grad-kept)$' -test.benchtime 5x
TB=/tmp/cuda-base.test t saves-base 40 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|grad-kept)$' -test.benchtime 5x
echo "=== cold mlp"
GS_COLDSTART_PHASES=problems GS_COLDSTART_ONLY=mlp- timeout 90 "$bin/cuda.test" -test.run TestGPUColdStart -test.v >"$out/l/cold-mlp.log" 2>&1
el $?
grep -hE "problems  |FAIL|^ok" "$out/l/cold-mlp.log" | cut -c1-220
fi

if [ "$part" = s41b ]; then
# Session 41's merged work (kept gradients with the loss summed on the
# device and repeated inputs compared beside the launch, the scatter beside
# the device's work, Method Auto's memory reused and stop times in the first
# read, the wide layout's placement and lane-private lambda', the float32
# events test's derived bounds): the device tests, then each change's
# benchmark beside 5556989 (cuda-base.test.gz, the session's start) on one
# machine (the save split's reverse sweep too); the MLP fields' rolled
# layer reverses (their first calls, compiled cold).
gunzip -c $bin/cuda-base.test.gz >/tmp/cuda-base.test && chmod +x /tmp/cuda-base.test
t tests41 120 -test.v -test.run 'TestGPUKeepGrads|TestGPUInputReuse|TestGPUKeepSaves|TestGPUAutoContinue|TestGPUChunkLaunch|TestGPUEngine$|TestCallHandOvers|TestGPUEvents/(ball|pk)-Tsit5$'
t evf32 80 -test.v -test.run 'TestGPUEventsFloat32'
t lanes 70 -test.v -test.run 'TestGPULanesRolled|TestGPUEngineLanes'
echo "=== cold mlp"
GS_COLDSTART_PHASES=problems GS_COLDSTART_ONLY=mlp- timeout 40 "$bin/cuda.test" -test.run TestGPUColdStart -test.v >"$out/l/cold-mlp.log" 2>&1
el $?
grep -hE "problems  |FAIL|^ok" "$out/l/cold-mlp.log" | cut -c1-220
for r in 1 2; do
t cb-main-$r 20 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x
TB=/tmp/cuda-base.test t cb-base-$r 20 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x
done
t events-keep-main 30 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk)/(record-omit|record-keep)$' -test.benchtime 200x -test.count 3
TB=/tmp/cuda-base.test t events-keep-base 30 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk)/(record-omit|record-keep)$' -test.benchtime 200x -test.count 3
t auto-main 35 -test.run '^$' -test.bench 'GPUAutoTrace/(robertson|vdp-stiff|mixed)/grad/' -test.benchtime 5x -test.benchmem
TB=/tmp/cuda-base.test t auto-base 35 -test.run '^$' -test.bench 'GPUAutoTrace/(robertson|vdp-stiff|mixed)/grad/' -test.benchtime 5x -test.benchmem
t saves-main 30 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|grad-kept)$' -test.benchtime 5x
TB=/tmp/cuda-base.test t saves-base 30 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|grad-kept)$' -test.benchtime 5x
fi

if [ "$part" = s41c ]; then
# Session 41's last checks: the events suite (kept calls with the loss
# summed on the device) beside Diffrax; Pollution's wide Rodas5P gradient
# with its replicated values past 64 in shared memory (the new default)
# against the CPU, and its kernel beside every value in registers
# (BenchmarkGPUWideRegs none / s64); Lorenz-96's wide gradient with the
# rows form (the new default) beside the loops and every array shared.
ev 70
t stiff-poll-wide 70 -test.v -test.run 'TestGPUStiffLayouts/pollution-Rodas5P/wide'
grep -hE 'largest difference|want .* within' "$out/l/stiff-poll-wide.log" | cut -c1-220 | head -4
t regs-poll 170 -test.run XXX -test.bench 'GPUWideRegs/grad/pollution/(none|s64)$' -test.benchtime 5x
t wide-private 70 -test.run '^$' -test.bench 'GPUWidePrivate/grad/(lorenz96-64|lorenz96-256)/' -test.benchtime 5x
fi

if [ "$part" = s41d ] || [ "$part" = s42a ]; then
# (Part s42a runs this first, then its own below.) Session 41's mends: the MLP fields' first calls compiled cold before any
# other process on the machine compiled their kernels (LaneRollMinShared
# 8192: 2-128-128-2 rolled, 2-64-64-2 not); the kept gradients' shared
# sums to the rounding of the device's atomics; the rolled 2-128-128-2
# against unrolled on engines of their own; float32 events with Rodas5P
# and save times (cut in s41b).
echo "=== cold mlp"
GS_COLDSTART_PHASES=problems GS_COLDSTART_ONLY=mlp- timeout 60 "$bin/cuda.test" -test.run TestGPUColdStart -test.v >"$out/l/cold-mlp.log" 2>&1
el $?
grep -hE "problems  |FAIL|^ok" "$out/l/cold-mlp.log" | cut -c1-220
t keep 40 -test.v -test.run 'TestGPUKeepGrads$'
t lanes-rolled 60 -test.v -test.run 'TestGPULanesRolled'
grep -hE 'laneroll_test' "$out/l/lanes-rolled.log" | cut -c1-200
t evf32-ros 60 -test.v -test.run 'TestGPUEventsFloat32/(ball|pk)-Rodas5P-saves'
fi

if [ "$part" = s42a ]; then
# Session 42's first call: session 41's part s41d (the MLP fields' cold
# first calls before anything else on a fresh machine; the kept shared
# sums; the rolled lanes; float32 events with Rodas5P), the call bound
# after the scatter's revert, and the wide kernels' launch bounds
# (Tuning.WideMinBlocks 6 and 7) on HIRES, Lorenz-96 and the Brusselator
# beside the default before the bounds become a default.
t call-bound 60 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 20x -test.count 3
t wide-host 60 -test.run '^$' -test.bench 'GPUWidePrivate/grad/(lorenz96-64|lorenz96-256)/rows$' -test.benchtime 5x
t wide-regs 230 -test.run XXX -test.bench 'GPUWideRegs/grad/(hires|lorenz96-64|lorenz96-256|brusselator)/(s64|s64-b6|s64-b7)$' -test.benchtime 5x
# Nsight Compute on the Kepler gradient with 1 and 1,000 save times (issue
# 25: its kernel 6.7x one save's): where the reverse sweep's warps stall.
for s in 1 1000; do nb saves-$s 100 "GPUSaveSplit/saves=$s/grad-kept\$"; done
fi

if [ "$part" = s42b ]; then
# Session 42's second call: the wide kernels' default launch bounds (as
# many blocks as shared memory runs, at most 7) against none (s64-b0) on
# Pollution (7 by the rule, unmeasured), the Brusselator (none by the
# rule) and HIRES (7); Lorenz-96's wide gradient calls with the result
# loops in blocks sized by a trajectory's values, beside the session's
# start (cuda-base.test.gz, 90f9650), alternated; TestGPUWide whole (its
# d = 256 case with save times was cut in session 41).
gunzip -c $bin/cuda-base.test.gz >/tmp/cuda-base.test && chmod +x /tmp/cuda-base.test
for r in 1 2; do
t wide-main-$r 40 -test.run '^$' -test.bench 'GPUWidePrivate/grad/(lorenz96-64|lorenz96-256)/rows$' -test.benchtime 5x
TB=/tmp/cuda-base.test t wide-base-$r 40 -test.run '^$' -test.bench 'GPUWidePrivate/grad/(lorenz96-64|lorenz96-256)/rows$' -test.benchtime 5x
done
t call-bound 60 -test.run '^$' -test.bench 'GPUCallBound/n=32768' -test.benchtime 40x -test.count 3
t wide-regs2 180 -test.run XXX -test.bench 'GPUWideRegs/grad/(pollution/(s64|s64-b0|s64-b6)|brusselator/(s64|s64-b0)|hires/s64)$' -test.benchtime 5x
t wide-test 200 -test.v -test.run 'TestGPUWide$'
fi

if [ "$part" = s42c ]; then
# Session 42's third call: the thread layout's save times at d = 64 that
# TestGPUWide found off (TestGPUThreadSaves); the merged helpers' device
# tests (H1 save loads issued ahead, H2 Auto's spare arrays, H4 kept
# results written in place) and their benchmarks beside the session's
# start (cuda-base.test.gz, 90f9650); the events suite beside Diffrax;
# then the first calls of Lorenz-96 d = 256 and Pollution compiled in
# units and not (H3, Tuning.SplitUnits), each on an empty cache.
gunzip -c $bin/cuda-base.test.gz >/tmp/cuda-base.test && chmod +x /tmp/cuda-base.test
t thread-saves 90 -test.v -test.run 'TestGPUThreadSaves'
grep -hE 'entries differ|largest' "$out/l/thread-saves.log" | cut -c1-200 | head -12
t saves-tests 70 -test.v -test.run 'TestGPUEngineSaveTimes|TestGPUSaveGroups|TestGPUKeepSaves'
t keep-tests 40 -test.v -test.run 'TestGPUKeepGrads'
t auto-tests 60 -test.v -test.run 'TestGPUAutoContinue'
t saves-main 25 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|grad-kept)$' -test.benchtime 5x
TB=/tmp/cuda-base.test t saves-base 25 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|grad-kept)$' -test.benchtime 5x
for r in 1 2; do
t events-keep-main-$r 20 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk)/record-keep$' -test.benchtime 200x
TB=/tmp/cuda-base.test t events-keep-base-$r 20 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk)/record-keep$' -test.benchtime 200x
done
t auto-main 30 -test.run '^$' -test.bench 'GPUAutoTrace/(robertson|vdp-stiff)/grad/' -test.benchtime 5x -test.benchmem
TB=/tmp/cuda-base.test t auto-base 30 -test.run '^$' -test.bench 'GPUAutoTrace/(robertson|vdp-stiff)/grad/' -test.benchtime 5x -test.benchmem
ev 70
for c in lorenz96-256-Tsit5 pollution-Rodas5P; do
	echo "=== cold units $c"
	GS_COLDSTART_PHASES=units GS_COLDSTART_ONLY=$c GS_COLDSTART_BUDGET=600 GS_COLDSTART_JSON="$out/l/cold-units-$c.json" \
		timeout 100 "$bin/cuda.test" -test.run TestGPUColdStart -test.v -test.timeout 590s >"$out/l/cold-units-$c.log" 2>&1
	el $?
	grep -hE "units  |FAIL|^ok" "$out/l/cold-units-$c.log" | cut -c1-230
done
fi

if [ "$part" = s42d ]; then
# Session 42's fourth call: where TestGPUThreadSaves (the thread layout's
# save times at d = 64 against the CPU, found off in call 2) started to
# fail: its test built into session 41's commits 0624d6c (TestGPUWide
# passed there), 2f69195 (helpers H1-H4, H6 merged), 382738d (all of
# session 41's helpers), and the current binary.
for c in 0624d6c 2f69195 382738d; do
	gunzip -c $bin/ts-$c.test.gz >/tmp/ts-$c.test && chmod +x /tmp/ts-$c.test
	TB=/tmp/ts-$c.test t ts-$c 60 -test.v -test.run 'TestGPUThreadSaves/fresh'
	grep -hE 'entries differ' "$out/l/ts-$c.log" | head -3
done
t ts-main 60 -test.v -test.run 'TestGPUThreadSaves/fresh'
fi

if [ "$part" = s42e ]; then
# The thread layout's save times at d = 64 (TestGPUThreadSaves): session
# 41's H7 change to gs_coef_bar (each save time's d cotangents read into
# a local array before its theta's test) undone in the current source.
gunzip -c $bin/ts-A.test.gz >/tmp/ts-A.test && chmod +x /tmp/ts-A.test
TB=/tmp/ts-A.test t ts-A 60 -test.v -test.run 'TestGPUThreadSaves'
grep -hE 'entries differ' "$out/l/ts-A.log" | head -3
fi

if [ "$part" = s43a ]; then
# Session 43's first call: TestGPUThreadSaves (the thread layout's save
# times at d = 64, off on the device since session 41's merges) on the
# current binary (with every kernel of the case and with ptxas -O3), the
# bisect finished (session 41's merges 423b097: H8, 7f975a2: H5, built
# with the test beside the current binary), then compute-sanitizer's
# memcheck on the failing case.
t ts-main 200 -test.v -test.run 'TestGPUThreadSaves'
grep -hE 'entries differ|differ at|rel ' "$out/l/ts-main.log" | head -24
for c in 423b097 7f975a2; do
	gunzip -c $bin/ts-$c.test.gz >/tmp/ts-$c.test && chmod +x /tmp/ts-$c.test
	TB=/tmp/ts-$c.test t ts-$c 60 -test.v -test.run 'TestGPUThreadSaves/fresh'
	grep -hE 'entries differ' "$out/l/ts-$c.log" | head -3
done
if grep -q -- '--- FAIL: TestGPUThreadSaves/fresh ' "$out/l/ts-main.log"; then
	echo "=== compute-sanitizer memcheck"
	timeout 240 compute-sanitizer --tool memcheck --print-limit 20 "$bin/cuda.test" -test.v -test.run 'TestGPUThreadSaves/fresh$' \
		>"$out/l/sanitizer-ts.log" 2>&1
	el $?
	grep -E "^=========|FAIL|^ok|entries differ" "$out/l/sanitizer-ts.log" | head -30
fi
fi

if [ "$part" = s43b ]; then
# Session 43's second call (then the call bound's block below). 1. cuda/driver: kernels in parts linked under
# one register cap (TestBuildUnitsRegs: a kernel with launch bounds and
# its callee in another unit), Batch waiting for a queued copy
# (TestBatchWaitsQueued). 2. TestGPUSplitUnits' wide (default-layout)
# units of Pollution and HIRES (launch bounds of 7 blocks: the link that
# failed in session 42) against their one-unit kernels, bit for bit.
# 3. Pollution's wide gradient with the default 7-block bounds against
# none (BenchmarkGPUWideRegs). 4. The gpu-large suite's POLL, HIRES and
# neural Robertson beside the 16-core CPU engine (issue 26: >= 10x).
TB=$bin/driver.test t link 60 -test.v -test.run 'TestBuildUnits|TestBuildUnitsRegs|TestLinkKey|TestUnitError|TestBatchWaitsQueued'
grep -hE 'linker|regs|registers' "$out/l/link.log" | head -6
# The call bound at n = 32768 (issue 23; H2's status pass in functions of
# their own), main against 79f0f18 (before it) alternated; the copy back
# in halves scattered as they land (Tuning.midHalves, removed after this
# call: slower); the scatter
# alone on 4, 8 and 16 cores (host only).
gunzip -c $bin/base.test.gz >/tmp/base.test && chmod +x /tmp/base.test
for r in 1 2; do
	t bound-main-$r 40 -test.run '^$' -test.bench 'GPUCallBound/n=32768/' -test.benchtime 400x
	TB=/tmp/base.test t bound-base-$r 40 -test.run '^$' -test.bench 'GPUCallBound/n=32768/' -test.benchtime 400x
done
# Method Auto keeping its Tsit5 pass's rows of the trajectories that did
# not stop (H1): its tests, then Auto against Rodas5P, main and 79f0f18
# alternated.
t auto-tests 60 -test.v -test.run 'TestGPUAutoContinue|TestGPUAutoKeptGrads'
for r in 1 2; do
	t auto-main-$r 30 -test.run '^$' -test.bench 'GPUAutoTrace/(robertson|vdp-stiff)/grad/' -test.benchtime 10x -test.benchmem
	TB=/tmp/base.test t auto-base-$r 30 -test.run '^$' -test.bench 'GPUAutoTrace/(robertson|vdp-stiff)/grad/' -test.benchtime 10x -test.benchmem
done
t halves 60 -test.run '^$' -test.bench 'GPUCallHalves' -test.benchtime 200x -test.count 2
t scatter 60 -test.run '^$' -test.bench 'Scatter$|ScatterStatus' -test.benchtime 400x -test.cpu 4,8,16
echo "=== gpu-large"
timeout 200 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 3 -json -quiet \
	-problems pollution,hires,neural-robertson >"$out/l/large.jsonl" 2>"$out/l/large.log"
el $?
tail -8 "$out/l/large.log"
t split-units-wide 150 -test.v -test.run 'TestGPUSplitUnits/(pollution|hires)/default-units'
t regs-poll 120 -test.run XXX -test.bench 'GPUWideRegs/grad/pollution/(s64|s64-b0)$' -test.benchtime 5x
fi

if [ "$part" = s43c ]; then
# Session 43's third call. 1. compute-sanitizer's memcheck on the source
# that made the thread layout's d = 64 saves wrong (382738d, its
# TestGPUThreadSaves/fresh): an out-of-bounds access would name the
# mechanism. 2. The first Grad compiled cold in units now that every unit
# shares the kernel's register cap (Pollution with Rodas5P, or COLD_UNITS'
# cases; units on and off, each on an empty cache). The 382738d binary:
# a worktree at 382738d with TestGPUThreadSaves' fresh case (cuda/
# wide_test.go) copied into cuda/zz_threadsaves_test.go, built with
# CGO_ENABLED=0 go test -c -ldflags='-s -w', gzipped into
# .gpu/bin/ts-382738d.test.gz.
gunzip -c $bin/ts-382738d.test.gz >/tmp/ts-382738d.test && chmod +x /tmp/ts-382738d.test
for b in ts-382738d; do
	tb=/tmp/$b.test
	echo "=== memcheck $b"
	timeout 150 compute-sanitizer --tool memcheck --print-limit 10 $tb -test.v -test.run 'TestGPUThreadSaves/fresh$' \
		>"$out/l/memcheck-$b.log" 2>&1
	el $?
	grep -E "^=========|--- |entries differ" "$out/l/memcheck-$b.log" | head -16
done
for c in ${COLD_UNITS:-pollution-Rodas5P}; do
	echo "=== cold units $c"
	GS_COLDSTART_PHASES=units GS_COLDSTART_ONLY=$c GS_COLDSTART_BUDGET=600 GS_COLDSTART_JSON="$out/l/cold-units-$c.json" \
		timeout 110 "$bin/cuda.test" -test.run TestGPUColdStart -test.v -test.timeout 590s >"$out/l/cold-units-$c.log" 2>&1
	el $?
	grep -hE "units  |FAIL|^ok" "$out/l/cold-units-$c.log" | cut -c1-230
done
fi

if [ "$part" = s44a ]; then
# Session 44's second call. 1. The save times' cotangents computed in the
# reverse sweep (H4, kernelgen's savecot.go; Tuning.StoreSaveCots the
# stored form: the -tb rows): the save tests, then the Kepler split at 1
# and 1,000 save times, the two forms alternated by runs of the binary.
t saves-tests 180 -test.v -test.timeout 170s -test.run '^(TestGPUSaveCots|TestGPUCotGroups|TestGPUMeshZero|TestGPUSaveGroups|TestGPUEngineSaveTimes|TestGPUKeepSaves|TestGPUThreadSaves)$'
for r in 1 2 3; do
	for v in grad-kept grad-kept-tb; do
		t saves-$v-$r 40 -test.run '^$' -test.bench "GPUSaveSplit/saves=(1|1000)/$v\$" -test.benchtime 20x
	done
done
# 2. A mid-size gradient's results in two parts (H2, splitAt: the
# statuses, counts and loss terms first, scattered while the states and
# gradients copy): its device test, one copy against two parts
# (GPUCallSplit), the call bound against 303d2d7 (base.test.gz) alternated.
t split-tests 90 -test.v -test.run 'TestGPUSplitDownload|TestGPUChunkLaunch|TestCallHandOvers'
t callsplit 60 -test.run '^$' -test.bench 'GPUCallSplit' -test.benchtime 200x -test.count 3
gunzip -c $bin/base.test.gz >/tmp/base.test && chmod +x /tmp/base.test
for r in 1 2; do
	t bound-main-$r 40 -test.run '^$' -test.bench 'GPUCallBound/n=(32768|262144)/' -test.benchtime 100x
	TB=/tmp/base.test t bound-base-$r 40 -test.run '^$' -test.bench 'GPUCallBound/n=(32768|262144)/' -test.benchtime 100x
done
# 3. The wide layout's short runs as replicated statements (H3,
# Tuning.WideMinSplit): Pollution and HIRES at 16 against the default bit
# for bit, then their gradient kernels at 0 and 16 (three rounds in turn).
t widesplit-test 200 -test.v -test.timeout 190s -test.run 'TestGPUWideMinSplitSame/.*/split=16'
t widesplit 120 -test.run XXX -test.bench 'GPUWideSplit/grad/.*/split=(0|16)' -test.benchtime 5x
fi

if [ "$part" = s44b ]; then
# Session 44's third call.
# 1. The events suite beside Diffrax, with an execution trace of the
# gradsolve side (its regions: where a kept call's time goes besides the
# kernel, the copies, staging and scatter).
echo "=== events (traced)"
timeout 60 "$bin/gradsolve" bench -suite gpu-events -engine cuda -json -out "$out/l/events.jsonl" -trace "$out/l/events.trace" >"$out/l/events.log" 2>&1
el $?
timeout 100 python3 bench/anchors/diffrax_events.py --platform gpu --out "$out/l/diffrax_events.jsonl" >/dev/null 2>"$out/l/diffrax_events.log"
el $?
tail -3 "$out/l/diffrax_events.log"
# 2. The Brusselator at matched error (issue 26): Rodas5P at rtol 1e-9
# (5.8e-10 on the CPU engine's 16 trajectories) beside Diffrax's Kvaerno5
# at 1e-6 (6.1e-10 in session 40).
echo "=== brusselator matched"
timeout 150 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 1 -json -quiet -problems brusselator -n 1024 -rtol 1e-9 \
	>"$out/l/bruss.jsonl" 2>"$out/l/bruss.log"
el $?
timeout 150 python3 bench/anchors/diffrax_large.py --platform gpu --problems brusselator --rtol 1e-6 --reps 1 --no-forward --max-seconds 60 \
	--out "$out/l/diffrax_bruss.jsonl" >/dev/null 2>"$out/l/diffrax_bruss.log"
el $?
tail -3 "$out/l/diffrax_bruss.log"
fi

if [ "$part" = s45a ]; then
# Session 45's first call (run with .gpu/bin/cuda.test and gradsolve
# unzipped from their .gz), the most wanted first.
# 0. H3's direct driver calls (purego.SyscallN) against the real libcuda,
# and its kept-call tests (before it is merged).
gunzip -c $bin/h3-driver.test.gz >/tmp/h3-driver.test && chmod +x /tmp/h3-driver.test
gunzip -c $bin/h3-cuda.test.gz >/tmp/h3-cuda.test && chmod +x /tmp/h3-cuda.test
TB=/tmp/h3-driver.test t h3-driver 40 -test.v -test.count 1
TB=/tmp/h3-cuda.test t h3-tests 90 -test.run 'TestGPUKeepGrads|TestGPUEvents$|TestGPUKeepGradsAhead' -test.count 1
# 4. The call bound at 32,768 (H1's scatter) and the 1,000-save grad-kept
# call (H2's re-trace) against 303d2d7 (session 44's start), alternated.
gunzip -c $bin/base.test.gz >/tmp/base.test && chmod +x /tmp/base.test
for r in 1 2; do
	t bound-main-$r 25 -test.run '^$' -test.bench 'GPUCallBound/n=32768/' -test.benchtime 200x
	TB=/tmp/base.test t bound-base-$r 25 -test.run '^$' -test.bench 'GPUCallBound/n=32768/' -test.benchtime 200x
	t saves-main-$r 30 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/grad-kept$' -test.benchtime 20x
	TB=/tmp/base.test t saves-base-$r 30 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/grad-kept$' -test.benchtime 20x
done
# Method Auto (H4: the continuation's inputs sent once; session 44 H1:
# package ode's host loops in tasks) against 303d2d7.
t auto-main 40 -test.run '^$' -test.bench 'GPUAutoTrace/(robertson|vdp-stiff)/grad/' -test.benchtime 10x
TB=/tmp/base.test t auto-base 40 -test.run '^$' -test.bench 'GPUAutoTrace/(robertson|vdp-stiff)/grad/' -test.benchtime 10x
# 1. The gpu-large suite's POLL, HIRES, neural Robertson beside the
# 16-core CPU engine (issue 26: >= 10x) under Tuning.WideMinSplit's default.
echo "=== gpu-large"
timeout 170 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 3 -json -quiet \
	-problems pollution,hires,neural-robertson >"$out/l/large.jsonl" 2>"$out/l/large.log"
el $?
tail -4 "$out/l/large.log"
python3 -c "
import json
for l in open('$out/l/large.jsonl'):
    r=json.loads(l)
    print(r['problem'], 'gpu', round(r['grad_record_call_ms'],2), 'kernel', round(r['grad_record_ms'],2), 'cpu', round(r.get('cpu_grad_record_call_ms',0),2), 'ratio', round(r.get('cpu_over_gpu_call',0),2))
" 2>&1 | tail -4
# 2. Tests of the session's changes: the save times' cotangents in the
# sweep (the shared sums to 1e-13) and the loss re-traced against the
# previous program (H2: every kept-saves loss), results' finite checks
# from sums and the status strips (H1).
t tests 150 -test.v -test.timeout 145s -test.run '^(TestGPUSaveCots|TestGPUThreadSaves|TestGPUKeepSaves|TestGPUEngineSaveTimes|TestGPUSplitDownload|TestGPUChunkLaunch|TestGPUEngineChunks|TestCallHandOvers|TestGPUAutoContinue|TestGPUAutoKeptGrads|TestGPUInputReuse)$'
grep -hE 'largest relative|differs' "$out/l/tests.log" | head -8
for r in 1 2; do
	TB=/tmp/h3-cuda.test t h3-kept-$r 25 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk)/record-keep(-apart|-goroutine)?$' -test.benchtime 400x
	t main-kept-$r 25 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk)/record-keep$' -test.benchtime 400x
done
# 5. HIRES's wide gradient with launch bounds of 10, 12, 16 blocks (n =
# 4096 takes two rounds of the default's 16 warps a multiprocessor).
t hires-blocks 90 -test.run XXX -test.timeout 85s -test.bench 'GPUWideRegs/grad/hires/' -test.benchtime 5x
fi





if [ "$part" = s49b ]; then
# Session 49's second device call (under 470 s; S49B_MAX), on main with
# the helpers merged: their device tests, four processes side by side,
# then issue 26's benchmarks (the loss VJP in shared memory, H8; the
# blocked windows, H1; y from the record and returned arrays in place,
# H2) beside b9a028d (base49.test.gz), and gpu-large's Lorenz-96 calls.
MAX=${S49B_MAX:-465}
gunzip -c $bin/base49.test.gz >/tmp/base49.test && chmod +x /tmp/base49.test
tp wide 235 '^TestGPUWide$' &
tp wide2 235 '^(TestGPUWideRecordY|TestGPUWideBlockedSame|TestGPUWideLanesShared)$' &
tp saves 235 '^(TestGPUDivideSaves|TestGPUEngineSaveTimes|TestGPUThreadSaves|TestGPUKeepSaves|TestGPUKeptThetas|TestGPUCotGroups|TestGPUSaveCots)$' &
tp calls 235 '^(TestGPUStageParts|TestGPUKeepGradsShared|TestGPUKeepGrads|TestGPUKeepGradsAhead|TestGPUKeepGradsLossSum|TestGPUSplitDownload|TestGPUInputReuse|TestGPUGradAhead|TestGPUEndsInBatch)$' &
# Session 50's device tests (H2's float32 checks, H4's event and dense
# cases with the event-time save fixes in events.cuh, H5's trainer).
tp new50 235 '^(TestGPUEventCases|TestGPUDenseSolution|TestGPUEventsSaveEdges|TestGPUEventsReruns|TestGPUEngineFloat32|TestGPUEventsFloat32|TestGPUTrainHugeGradient|TestGPUTrainResumeEveryStop|TestGPUTrainUpdateManySteps|TestGPUTrainMatchesHost|TestGPUTrainResume|TestGPUTrainUpdateBitwise)$' &
# Session 51's (H1's events whose roots coincide, H4's problems).
tp new51 235 '^(TestGPUEventCoinciding|TestGPUEngineMoreProblems|TestGPUDeferSaves)$' &
wait
for f in wide wide2 saves calls new50 new51; do echo "--- $f"; grep -E '^(--- |ok|FAIL|PASS)|^    --- FAIL|panic|out of memory' -A2 "$out/l/$f.log" | grep -v '^    --- PASS' | head -14; done
t l96 130 -test.run XXX -test.timeout 125s -test.bench 'GPUWideLanes/grad/(lorenz96-256/^(default|blocked|blocked-s48|recy|recy-outplace)|lorenz96-64/^(default|blocked|blocked-s48|recy-outplace))(#[0-9]+)?$' -test.benchtime 5x
TB=/tmp/base49.test t l96-base 60 -test.run XXX -test.timeout 55s -test.bench 'GPUWideLanes/grad/lorenz96-(64|256)/^default(#[0-9]+)?$' -test.benchtime 5x
echo "=== gpu-large"
timeout $((MAX - $(date +%s) + T0)) "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 3 -json -quiet -problems lorenz96-64,lorenz96-256 \
	>"$out/l/l96.jsonl" 2>"$out/l/l96-large.log"
el $?
echo "=== summary"
sum() { grep -h '^Benchmark' "$@" | sed 's/#0[0-9]//' | awk '{m = ""; for (i = 3; i < NF; i++) if ($(i+1) ~ /^(kernel-ms\/op|regs|local-B|warps\/SM)$/) m = m " " $(i+1) " " $i; print $1, $3 / 1e6, m}'; }
echo main; sum "$out/l/l96.log" | sort
echo base; sum "$out/l/l96-base.log" | sort
jrows problem,n,grad_record_ms,grad_record_call_ms,grad_keep_call_ms,cpu_grad_record_call_ms,steps_per_traj l96.jsonl
fi

if [ "$part" = s51 ]; then
# Session 51's one device call (under 470 s; S51_MAX), for a session whose
# starts were mostly refused: the device tests of sessions 49-51's merged
# helpers (s49b's six processes side by side), then Lorenz-96's gradient
# kernels by default beside b9a028d (session 49 H8's loss VJP in shared
# memory), and one round of the 1,000-save calls with H3's deferred saves
# (-defer) and -divsaves beside the default.
MAX=${S51_MAX:-465}
gunzip -c $bin/base49.test.gz >/tmp/base49.test && chmod +x /tmp/base49.test
tp wide 230 '^TestGPUWide$' &
tp wide2 230 '^(TestGPUWideRecordY|TestGPUWideBlockedSame|TestGPUWideLanesShared)$' &
tp saves 230 '^(TestGPUDivideSaves|TestGPUEngineSaveTimes|TestGPUThreadSaves|TestGPUKeepSaves|TestGPUKeptThetas|TestGPUCotGroups|TestGPUSaveCots|TestGPUDeferSaves)$' &
tp calls 230 '^(TestGPUStageParts|TestGPUKeepGradsShared|TestGPUKeepGrads|TestGPUKeepGradsAhead|TestGPUKeepGradsLossSum|TestGPUSplitDownload|TestGPUInputReuse|TestGPUGradAhead|TestGPUEndsInBatch)$' &
tp new50 230 '^(TestGPUEventCases|TestGPUDenseSolution|TestGPUEventsSaveEdges|TestGPUEventsReruns|TestGPUEngineFloat32|TestGPUEventsFloat32|TestGPUTrainHugeGradient|TestGPUTrainResumeEveryStop|TestGPUTrainUpdateManySteps|TestGPUTrainMatchesHost|TestGPUTrainResume|TestGPUTrainUpdateBitwise)$' &
tp new51 230 '^(TestGPUEventCoinciding|TestGPUEngineMoreProblems|TestGPUEventsAtRest|TestGPUEventsBadInput)$' &
wait
for f in wide wide2 saves calls new50 new51; do echo "--- $f"; grep -E '^(--- |ok|FAIL|PASS)|^    --- FAIL|panic|out of memory' -A2 "$out/l/$f.log" | grep -v '^    --- PASS' | head -14; done
t l96 45 -test.run XXX -test.timeout 40s -test.bench 'GPUWideLanes/grad/lorenz96-(64|256)/^default(#[0-9]+)?$' -test.benchtime 5x
TB=/tmp/base49.test t l96-base 40 -test.run XXX -test.timeout 35s -test.bench 'GPUWideLanes/grad/lorenz96-(64|256)/^default(#[0-9]+)?$' -test.benchtime 5x
t bsaves 70 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|grad-kept)(-divsaves|-defer)?$' -test.benchtime 20x
t bsaves7 $((MAX - $(date +%s) + T0)) -test.run '^$' -test.bench 'GPUSaveSplit/Vern7/saves=(1|1000)/(solveto-kept|grad-kept)(-divsaves|-defer)?$' -test.benchtime 20x
echo "=== summary"
sum() { grep -h '^Benchmark' "$@" | sed 's/#0[0-9]//' | awk '{m = ""; for (i = 3; i < NF; i++) if ($(i+1) ~ /^(kernel-ms\/op|regs|local-B|warps\/SM)$/) m = m " " $(i+1) " " $i; print $1, $3 / 1e6, m}'; }
echo main; sum "$out/l/l96.log" | sort
echo base; sum "$out/l/l96-base.log" | sort
sum "$out/l/bsaves.log" "$out/l/bsaves7.log" | sort
fi

# s52 ran on no device (session 52's six refused starts, session 53's
# seven): s53 holds its checks.
if [ "$part" = s52 ]; then part=s53; fi

if [ "$part" = s53 ]; then
# Session 53's call (under 540 s; S53_MAX), with session 53's H3 merged
# (the wide layout on several warps a trajectory): s52's device tests
# (TestGPUWide and the save tests with the deferred saves by default,
# Method Auto's stiffness test, events on unseen cases) beside
# TestGPUWideWarps, Lorenz-96's gradient kernels on 1, 2 and 4 warps a
# trajectory, then s52's benchmarks (1,000 saves against -inline, Method
# Auto, the 1,000-save gradient's host profile, Vern7's cold compile at
# -O1 and in full) and Nsight Compute's stalls of d = 256's gradient.
MAX=${S53_MAX:-540}
TPS=${S53_TP:-230}
tp warps53 $TPS '^(TestGPUWideWarps|TestGPUWideRosenbrock|TestGPUWideLanesSame|TestGPUWideLanesShared)$' &
tp wide $TPS '^TestGPUWide$' &
tp saves $TPS '^(TestGPUEngineSaveTimes|TestGPUThreadSaves|TestGPUKeepSaves|TestGPUSaveCots|TestGPUDeferSaves)$' &
tp auto52 $TPS '^(TestGPUAutoStiffTest|TestGPUAutoContinue|TestGPUAutoKeptGrads|TestGPUEngineMoreProblems|TestGPUEnginePublished)$' &
tp events52 $TPS '^(TestGPUEventUnseen|TestGPUEvents|TestGPUEventCases|TestGPUEventCoinciding|TestGPUEventsSaveEdges|TestGPUDenseSolution|TestGPUMultiEvents)$' &
tp probe53 $TPS '^(TestGPUProbe|TestGPUProbeWide|TestGPUEngineUnseen53|TestGPUEngineUnseen53BadInput|TestGPUEngineUnseen53Layouts)$' &
wait
for f in warps53 wide saves auto52 events52 probe53; do echo "--- $f"; grep -E '^(--- |ok|FAIL|PASS)|^    --- FAIL|panic|out of memory' -A2 "$out/l/$f.log" | grep -v '^    --- PASS' | head -14; done
t l96w 100 -test.run '^$' -test.bench 'GPUWideLanes/grad/lorenz96-(64|256)/^(default|warps=[^#]*)(#0[12])?$' -test.benchtime 5x
t bsaves 40 -test.run '^$' -test.bench 'GPUSaveSplit/(Vern7/)?saves=(1|1000)/(solveto-kept|grad-kept)(-inline|-defer)?$' -test.benchtime 20x
t auto 40 -test.run '^$' -test.bench '^BenchmarkGPUAuto$/^(vdp|mixed|robertson-1e-8)$/' -test.benchtime 3x
t prof 25 -test.run '^$' -test.bench 'GPUSaveSplit/saves=1000/grad-kept$' -test.benchtime 200x -test.cpuprofile "$out/l/grad1000.prof"
t probecost 25 -test.run '^$' -test.bench 'GPUProbeCost' -test.count 3
GRADSOLVE_CUDA_CACHE=/tmp/gs-cold-1 t cold7 45 -test.run '^$' -test.bench 'GPUSaveSplit/Vern7/saves=1000/grad-kept(-full)?$' -test.benchtime 1x
echo "=== ncu source l96-256"
timeout $((MAX - $(date +%s) + T0)) ncu --clock-control none -k regex:gs_engine --launch-skip 1 --launch-count 1 \
	--section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
	--log-file "$out/l/src-l96-256.csv" "$bin/cuda.test" -test.run '^$' -test.bench 'GPUWideLanes/grad/lorenz96-256/default$' -test.benchtime 2x >"$out/l/src-l96-256.log" 2>&1
el $?
gzip -9 "$out/l/src-l96-256.csv"
echo "=== summary"
sum() { grep -h '^Benchmark' "$@" | sed 's/#0[0-9]//' | awk '{m = ""; for (i = 3; i < NF; i++) if ($(i+1) ~ /^(kernel-ms\/op|compile-s|regs|local-B|warps\/SM)$/) m = m " " $(i+1) " " $i; print $1, $3 / 1e6, m}'; }
sum "$out/l/l96w.log" | sort
sum "$out/l/bsaves.log" "$out/l/cold7.log" | sort
sum "$out/l/auto.log" "$out/l/probecost.log"
fi

if [ "$part" = s49c ]; then
# Session 49's third device call (under 430 s; S49C_MAX): issue 23's
# changed-input call (H5's staging), issue 25's save times (H3/H4's
# quotients) and kept events calls (H7) beside b9a028d, Diffrax's
# Lorenz-96 gradients (issue 26).
MAX=${S49C_MAX:-425}
gunzip -c $bin/base49.test.gz >/tmp/base49.test && chmod +x /tmp/base49.test
t bound 50 -test.run '^$' -test.bench 'GPUCallBound/n=32768/' -test.benchtime 100x -test.count 3
for r in 1 2; do
	t saves-$r 80 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|grad-kept)(-divsaves|-defer)?$' -test.benchtime 20x
	t saves7-$r 80 -test.run '^$' -test.bench 'GPUSaveSplit/Vern7/saves=(1|1000)/(solveto-kept|grad-kept)(-divsaves|-defer)?$' -test.benchtime 20x
done
for r in 1 2; do
	t events-$r 35 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk|suite-bounce|suite-threshold)/record-keep-untraced(-uploadshared)?$' -test.benchtime 400x
	TB=/tmp/base49.test t events-base-$r 25 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk|suite-bounce|suite-threshold)/record-keep-untraced$' -test.benchtime 400x
done
timeout $((MAX - 60 - $(date +%s) + T0)) python3 bench/anchors/diffrax_large.py --platform gpu --problems lorenz96-64,lorenz96-256 \
	--rtol 1e-6 --reps 2 --no-forward --max-seconds 60 --ref-sample 4 --out "$out/l/diffrax_large.jsonl" >/dev/null 2>"$out/l/diffrax_large.log"
el $?
tail -3 "$out/l/diffrax_large.log"
t saves7-full $((MAX - $(date +%s) + T0)) -test.run '^$' -test.bench 'GPUSaveSplit/Vern7/saves=(1|1000)/grad-kept-full$' -test.benchtime 20x
echo "=== summary"
sum() { grep -h '^Benchmark' "$@" | sed 's/#0[0-9]//' | awk '{m = ""; for (i = 3; i < NF; i++) if ($(i+1) ~ /^(kernel-ms\/op|bound-ms\/op|stage-ms\/op|regs|local-B)$/) m = m " " $(i+1) " " $i; print $1, $3 / 1e6, m}'; }
sum "$out/l/bound.log" | sort
sum "$out"/l/saves-*.log "$out"/l/saves7-*.log | sort
echo main; sum "$out"/l/events-[12].log | sort
echo base; sum "$out"/l/events-base-*.log | sort
jrows problem,n,rtol,grad_ms,grad_ms_median,median_rel_err,steps_per_traj diffrax_large.jsonl
fi

if [ "$part" = s49src ]; then
# Nsight Compute's warp-state samples by SASS instruction (--page source)
# of Lorenz-96 d = 256's gradient kernel and the 1,000-save solve: where
# the long-scoreboard stalls are. The CSVs come back gzipped.
for x in "l96-256 GPUWideLanes/grad/lorenz96-256/default\$ 1" "solve-1000 GPUSaveSplit/saves=1000/solveto-kept\$ 2"; do
	set -- $x
	echo "=== ncu source $1"
	timeout 150 ncu --clock-control none -k regex:gs_engine --launch-skip "$3" --launch-count 1 \
		--section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
		--log-file "$out/l/src-$1.csv" "$bin/cuda.test" -test.run '^$' -test.bench "$2" -test.benchtime 2x >"$out/l/src-$1.log" 2>&1
	el $?
	head -c 600 "$out/l/src-$1.csv"; echo
	gzip -9 "$out/l/src-$1.csv"
done
fi

if [ "$part" = s49sass ]; then
# The SASS of Lorenz-96 d = 256's wide gradient kernel and of the 1,000-save
# solve and Vern7 gradient kernels (issues 25, 26): each benchmark run once
# on an empty cache, then every cached cubin disassembled and its loads and
# stores counted by state space (bench/sass_count.py).
export GRADSOLVE_CUDA_CACHE=/tmp/sass-cache
rm -rf "$GRADSOLVE_CUDA_CACHE"
t l96 120 -test.run '^$' -test.bench 'GPUWideLanes/grad/lorenz96-256/default$' -test.benchtime 1x
t saves 90 -test.run '^$' -test.bench 'GPUSaveSplit/(Vern7/)?saves=1000/(solveto|grad)-kept$' -test.benchtime 1x
mkdir -p "$out/l/sass"
for f in $(find "$GRADSOLVE_CUDA_CACHE" -name '*.cubin'); do
	b=$(basename "$f" .cubin)
	tail -n +5 "$f" >"/tmp/$b.cubin" # the cache entry's four header lines off (cuda/driver/cache.go)
	cuobjdump -sass "/tmp/$b.cubin" >"$out/l/sass/$b.sass" 2>&1 || nvdisasm "/tmp/$b.cubin" >"$out/l/sass/$b.sass" 2>&1
	ls -la "$f" | awk '{print $5, $9}'
done
python3 bench/sass_count.py "$out"/l/sass/*.sass
fi

if [ "$part" = s49a ]; then
# Session 49's first call (under 560 s; S49A_MAX), on main at b9a028d.
# 1. The device tests not yet run to their end on session 48's last code
# (tile mode's comparison mended; the wide layout against the CPU engine
# and the thread layout; events), a process each.
MAX=${S49A_MAX:-555}
tp tile 280 '^TestGPUTileMode$' &
tp wide 280 '^TestGPUWide$' &
tp events 280 '^TestGPUEvents$' &
wait
for f in tile wide events; do echo "--- $f"; grep -E '^(--- |ok|FAIL|PASS)|^    --- FAIL|panic|out of memory' -A2 "$out/l/$f.log" | grep -v '^    --- PASS' | head -12; done
# 2. Issue 23: the changed-input call at 32,768 beside the reused one,
# three rounds; issue 25: the events check's memset, three rounds.
t bound 40 -test.run '^$' -test.bench 'GPUCallBound/n=32768/stage(-noreuse)?$' -test.benchtime 100x -test.count 3
t events 80 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(pk|suite-bounce|suite-threshold)/record-keep-untraced(-checkmemset)?$' -test.benchtime 400x -test.count 3
# 3. Where the time goes: the 1,000-save solve and Vern7 gradient
# (issue 25), Lorenz-96 d = 256's gradient (issue 26).
nb solve-1000 50 'GPUSaveSplit/saves=1000/solveto-kept$'
nb solve-1 40 'GPUSaveSplit/saves=1/solveto-kept$'
nb grad7-1000 60 'GPUSaveSplit/Vern7/saves=1000/grad-kept$'
nb l96-256 $((MAX - $(date +%s) + T0)) 'GPUWideLanes/grad/lorenz96-256/default$' 1
echo "=== summary"
sum() { grep -h '^Benchmark' "$@" | sed 's/#0[0-9]//' | awk '{m = ""; for (i = 3; i < NF; i++) if ($(i+1) ~ /^(kernel|bound|host|stage)-ms\/op$/) m = m " " $(i+1) " " $i; print $1, $3 / 1e6, m}'; }
sum "$out/l/bound.log" "$out/l/events.log" | sort
fi

if [ "$part" = s48e ]; then
# Session 48's last call (under 280 s).
tp bruss-lu 110 '^TestGPUWideSparseLU$/^brusselator$' &
tp tile 110 '^(TestGPUTileMode|TestGPUSaveCots)$' &
tp wide 110 '^TestGPUWide$' &
wait
for f in bruss-lu tile wide; do echo "--- $f"; grep -E '^(--- |ok|FAIL|PASS)|^    --- FAIL|panic|running tests|out of memory' -A2 "$out/l/$f.log" | grep -v '^    --- PASS' | head -12; done
echo "=== gpu-large"
timeout 70 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 3 -json -quiet -problems brusselator -n 1024 -rtol 1e-9 \
	>"$out/l/bruss.jsonl" 2>"$out/l/bruss.log"
el $?
timeout 30 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 5 -json -quiet -problems lorenz96-64 \
	>"$out/l/l96.jsonl" 2>"$out/l/l96.log"
el $?
timeout $((275 - $(date +%s) + T0)) python3 bench/anchors/diffrax_large.py --platform gpu --problems lorenz96-64,brusselator \
	--rtol 1e-6 --reps 2 --no-forward --max-seconds 60 --ref-sample 4 --out "$out/l/diffrax_large.jsonl" >/dev/null 2>"$out/l/diffrax_large.log"
el $?
tail -3 "$out/l/diffrax_large.log"
echo "=== summary"
jrows problem,n,rtol,grad_record_ms,grad_record_call_ms,grad_keep_call_ms,cpu_grad_record_call_ms,cpu_over_gpu_call,grad_ms,grad_ms_median,median_rel_err,steps_per_traj,compile_ms \
	bruss.jsonl l96.jsonl diffrax_large.jsonl
fi

if [ "$part" = s48d ]; then
# Session 48's device call with tests and benchmarks in one (under 540 s).
MAX=${S48D_MAX:-535}
tp lanes 230 '^(TestGPUWideLanesShared|TestGPUWideTablesSame|TestGPUWideLanesSame)$' &
tp lu 230 '^(TestGPUWideSparseLU|TestGPUWideBlockedSame|TestGPUTileMode)$' &
tp calls 230 '^(TestScatterRowsAVX|TestStripLoopsAVX|TestOrInt32AVX|TestFiniteSums|TestStripLoops|TestGPUSplitDownload|TestGPUChunkLaunch|TestGPUEndsInBatch|TestGPUGradAhead|TestGPUInputReuse|TestGPUKeepGradsLossSum|TestGPUKeepGradsAhead|TestGPUKeepGrads|TestGPUCheckLaneAtomics|TestGPUMeshZero)$' &
tp saves 230 '^(TestGPUKeptThetas|TestGPUEngineSaveTimes|TestGPUSaveCots|TestGPUEvents|TestGPUWide)$' &
wait
for f in lanes lu calls saves; do echo "--- $f"; grep -E '^(--- |ok|FAIL|PASS)|^    --- FAIL|panic|running tests' -A2 "$out/l/$f.log" | grep -v '^    --- PASS' | head -16; done
gunzip -c $bin/base48.test.gz >/tmp/base48.test && chmod +x /tmp/base48.test
t band 85 -test.run XXX -test.timeout 80s -test.bench 'GPUWideBandLU' -test.benchtime 3x
t l96 60 -test.run XXX -test.timeout 55s -test.bench 'GPUWideLanes/grad/lorenz96-(64|256)/(default|warp|blocked)(#[0-9]+)?$' -test.benchtime 5x
for r in 1 2; do
	t bound-main-$r 20 -test.run '^$' -test.bench 'GPUCallBound/n=32768' -test.benchtime 100x
	TB=/tmp/base48.test t bound-base-$r 20 -test.run '^$' -test.bench 'GPUCallBound/n=32768' -test.benchtime 100x
done
t events-main 35 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(pk|suite-bounce|suite-threshold)/record-keep-untraced(-nohelp|-checkmemset)?$' -test.benchtime 400x
TB=/tmp/base48.test t events-base 25 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(pk|suite-bounce|suite-threshold)/record-keep-untraced$' -test.benchtime 400x
t saves 30 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/grad-kept(-thetas)?$' -test.benchtime 20x
t saves7 $((MAX - $(date +%s) + T0)) -test.run '^$' -test.bench 'GPUSaveSplit/Vern7/saves=(1|1000)/grad-kept(-thetas)?$' -test.benchtime 20x
echo "=== summary"
sum() { grep -h '^Benchmark' "$@" | sed 's/#0[0-9]//' | awk '{k = "-"; b = "-"; for (i = 3; i < NF; i++) { if ($(i+1) == "kernel-ms/op") k = $i; if ($(i+1) == "bound-ms/op") b = $i }; print $1, $3 / 1e6, "kernel", k, "bound", b}'; }
sum "$out/l/band.log" "$out/l/l96.log" | sort
echo "main"; sum "$out"/l/bound-main-*.log; echo "base"; sum "$out"/l/bound-base-*.log
echo "main"; sum "$out/l/events-main.log"; echo "base"; sum "$out/l/events-base.log"
sum "$out/l/saves.log" "$out/l/saves7.log" | sort
fi

if [ "$part" = s48c ]; then
# Session 48's fourth call (under 420 s): the device tests of the merged
# helpers' work, four processes side by side (NVRTC on all cores).
tp lanes 400 '^(TestGPUWideLanesShared|TestGPUWideLanesSame|TestGPUWideTablesSame|TestGPUWide)$' &
tp lu 400 '^(TestGPUWideSparseLU|TestGPUWideRosenbrock|TestGPUWidePivots)$' &
tp calls 400 '^(TestScatterRowsAVX|TestStripLoopsAVX|TestOrInt32AVX|TestFiniteSums|TestStripLoops|TestGPUSplitDownload|TestGPUChunkLaunch|TestGPUEndsInBatch|TestGPUGradAhead|TestGPUInputReuse|TestGPUKeepGradsLossSum|TestGPUKeepGradsAhead|TestGPUKeepGrads|TestGPUEvents|TestGPUCheckLaneAtomics|TestGPUMeshZero|TestGPUEngineSaveTimes|TestGPUSaveCots)$' &
tp tiles 400 '^(TestGPUWideBlockedSame|TestGPUTileMode|TestGPUTileStatuses|TestGPUTrainGraph|TestGPUSplitUnits)$' &
wait
echo "=== summary"
for f in lanes lu calls tiles; do echo "--- $f"; grep -E '^(--- |ok|FAIL|PASS)|^    --- FAIL|panic|running tests' -A2 "$out/l/$f.log" | grep -v '^    --- PASS' | head -24; done
fi

if [ "$part" = s48b ]; then
# Session 48's third call (under 480 s; issue 26). 1. Where tile mode
# belongs (neural Robertson at 4,096).
MAX=${S48B_MAX:-470}
t tilefill 110 -test.run XXX -test.timeout 105s -test.bench 'GPUTileFill/grad/.*/.*/(lanes|tile)$' -test.benchtime 5x
# 2. Whole calls beside the 16-core CPU engine, then the Brusselator at
# rtol 1e-9 (Diffrax's Kvaerno5 at 1e-6 reaches about its error).
echo "=== gpu-large"
timeout 130 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 2 -json -quiet \
	-problems neural-robertson,lorenz96-64,lorenz96-256 >"$out/l/large.jsonl" 2>"$out/l/large.log"
el $?
timeout 90 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 1 -json -quiet -problems brusselator -n 1024 -rtol 1e-9 \
	>"$out/l/bruss.jsonl" 2>"$out/l/bruss.log"
el $?
# 3. Diffrax's gradients of the same cells.
timeout $((MAX - $(date +%s) + T0)) python3 bench/anchors/diffrax_large.py --platform gpu --problems lorenz96-64,lorenz96-256,brusselator \
	--rtol 1e-6 --reps 2 --no-forward --max-seconds 60 --ref-sample 4 --out "$out/l/diffrax_large.jsonl" >/dev/null 2>"$out/l/diffrax_large.log"
el $?
tail -4 "$out/l/diffrax_large.log"
echo "=== summary"
grep -h '^Benchmark' "$out/l/tilefill.log" | sed 's/#0[0-9]//' | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "kernel-ms/op") k = $i; print $1, $3 / 1e6, k}' | sort
jrows problem,n,rtol,grad_record_ms,grad_record_call_ms,cpu_grad_record_call_ms,cpu_over_gpu_call,grad_ms,grad_ms_median,median_rel_err,steps_per_traj,compile_ms,layout \
	large.jsonl bruss.jsonl diffrax_large.jsonl
fi

if [ "$part" = s48a ]; then
# Session 48's second call (under 420 s). 1. The device tests s47c's
# limit cut, two processes side by side.
timeout 150 "$bin/cuda.test" -test.v -test.timeout 145s -test.run '^(TestGPUWideTablesSame)$' >"$out/l/tables-tests.log" 2>&1 &
p1=$!
timeout 150 "$bin/cuda.test" -test.v -test.timeout 145s -test.run '^(TestGPUThreadSaves)$' >"$out/l/threadsaves-tests.log" 2>&1 &
p2=$!
wait $p1; el $?
wait $p2; el $?
for f in tables-tests threadsaves-tests; do echo "--- $f"; grep -E '^(--- |ok|FAIL|PASS)|^    --- FAIL|panic' "$out/l/$f.log" | head -20; done
# 2. Where tile mode belongs (issue 26: neural Robertson at 4,096).
t tilefill 100 -test.run XXX -test.timeout 95s -test.bench 'GPUTileFill/grad/.*/.*/(lanes|tile)$' -test.benchtime 5x
# 3. The crew against the pool at 32,768 (issue 23), three rounds.
t workers 75 -test.run '^$' -test.bench 'GPUCallWorkers/one/(all|crew|all-noreuse|crew-noreuse)$' -test.benchtime 200x -test.count 3
# 4. The events suite beside Diffrax (issue 25's 100x marks).
ev $((410 - $(date +%s) + T0))
echo "=== summary"
grep -h '^Benchmark' "$out/l/tilefill.log" | sed 's/#0[0-9]//' | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "kernel-ms/op") k = $i; print $1, $3 / 1e6, k}' | sort
grep -h '^Benchmark' "$out/l/workers.log" | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "bound-ms/op") k = $i; print $1, $3 / 1e6 " ms, bound", k}' | sort
jrows "" events.jsonl diffrax_events.jsonl
fi

if [ "$part" = s47c ]; then
# Session 47's second call (under 470 s). 1. The device tests left: the
# wide layout's merged defaults (H4's sparse LU, H6's sums in a warp's
# order and computed rotations, fewer lanes) and s47b's unreached ones,
# in three processes side by side (NVRTC on all cores).
MAX=${S47C_MAX:-465} # the seconds this call may take
timeout 140 "$bin/cuda.test" -test.v -test.timeout 135s -test.run '^(TestGPUWideTablesSame|TestGPUWideLanesSame|TestGPUWideSparseLU)$' >"$out/l/wide-tests.log" 2>&1 &
p1=$!
timeout 140 "$bin/cuda.test" -test.v -test.timeout 135s -test.run '^(TestGPULossFold)$' >"$out/l/fold-tests.log" 2>&1 &
p2=$!
timeout 140 "$bin/cuda.test" -test.v -test.timeout 135s -test.run '^(TestGPUSaveCots|TestGPUCotGroups|TestGPUMeshZero|TestGPUSaveGroups|TestGPUThreadSaves|TestGPUThreadRound|TestGPUCheckLaneAtomics|TestGPUSplitDownload|TestGPUInputReuse|TestGPUChunkLaunch)$' >"$out/l/rest-tests.log" 2>&1 &
p3=$!
wait $p1; el $?
wait $p2; el $?
wait $p3; el $?
for f in wide-tests fold-tests rest-tests; do echo "--- $f"; grep -E '^(--- |ok|FAIL|PASS)|^    --- FAIL|panic' "$out/l/$f.log" | head -20; done
# 2. Issue 26: HIRES and Pollution with the sparse LU against dense, then
# Lorenz-96 d = 64 (rotations computed; a warp, and 16 lanes) against the kernel
# before session 47 (warp-old), neural Robertson in tile mode at 4,096.
t wl-stiff $(( (MAX - $(date +%s) + T0) / 2 )) -test.run XXX -test.timeout 105s -test.bench 'GPUWideLanes/grad/(hires|pollution)/(default|dense)(#[0-9]+)?$' -test.benchtime 5x
t wl-l96 50 -test.run XXX -test.timeout 45s -test.bench 'GPUWideLanes/grad/lorenz96-64/(default|lanes16|warp-old)(#[0-9]+)?$' -test.benchtime 5x
t wl-nr 50 -test.run XXX -test.timeout 45s -test.bench 'GPUWideLanes/grad/neural-robertson/(default|tile)(#[0-9]+)?$' -test.benchtime 5x
# 3. Whole calls beside the 16-core CPU engine (gpu-large).
echo "=== gpu-large"
timeout $((MAX - $(date +%s) + T0)) "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 2 -json -quiet \
	-problems hires,pollution >"$out/l/large.jsonl" 2>"$out/l/large.log"
el $?
echo "=== summary"
grep -h '^Benchmark' "$out"/l/wl-*.log | sed 's/#0[0-9]//' | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "kernel-ms/op") k = $i; print $1, $3 / 1e6, k}'
python3 - "$out/l/large.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    print({k: v for k, v in r.items() if not isinstance(v, (list, dict))})
PY
fi

if [ "$part" = s47b ]; then
# Session 47's first call (under 450 s): the device tests of the defaults
# made without a device run (session 46's H4 launches ahead of their
# compare, H6 kept saves in place; session 47's H1 lossform, H3 grouped
# save cotangents, H5 compare on all cores and check sums by shuffles),
# then the call bound against ae9dc05 (base46.test.gz), the 1,000-save
# Grad with grouped and ungrouped cotangents, the events calls.
t tests 150 -test.v -test.timeout 145s -test.run '^(TestGPUGradAhead|TestGPUKeepGradsAhead|TestGPUInputReuse|TestGPUChunkLaunch|TestCallHandOvers|TestGPUKeepSaves|TestGPUSaveCots|TestGPULossFold|TestGPUEngineSaveTimes|TestGPUSaveGroups|TestGPUThreadSaves|TestGPUCotGroups|TestGPUThreadRound|TestGPUCheckLaneAtomics|TestGPUKeepGrads|TestGPUKeepGradsLossSum|TestGPUWideLanesSame|TestGPUEndsInBatch|TestGPUCrew|TestGPUSplitDownload)$'
gunzip -c $bin/base46.test.gz >/tmp/base46.test && chmod +x /tmp/base46.test
for r in 1 2; do
	t bound-main-$r 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 100x
	TB=/tmp/base46.test t bound-base-$r 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 100x
done
t workers 45 -test.run '^$' -test.bench 'GPUCallWorkers|GPUCallChangedP' -test.benchtime 200x
for r in 1 2; do
	t saves-$r 35 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(grad-kept|grad-kept-ungrouped|solveto-kept|solveto-kept-old)$' -test.benchtime 20x
done
t events $((430 - $(date +%s) + T0)) -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk|suite-bounce|suite-threshold)/record-keep-untraced(-each|-lanes|-round)?$' -test.benchtime 400x
echo "=== summary"
grep -E '^(--- FAIL|FAIL|ok|PASS)|panic' "$out/l/tests.log" | head -20
grep -h '^Benchmark' "$out"/l/bound-main-*.log | awk '{printf "main %-48s %8.3f ms  bound %s\n", $1, $3/1e6, $5}' | sort
grep -h '^Benchmark' "$out"/l/bound-base-*.log | awk '{printf "base %-48s %8.3f ms  bound %s\n", $1, $3/1e6, $5}' | sort
grep -h '^Benchmark' "$out"/l/workers.log | awk '{print $1, $3 / 1e6 " ms"}'
grep -h '^Benchmark' "$out"/l/saves-[12].log | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "kernel-ms/op") k = $i; print $1, $3 / 1e6, k}' | sort
grep -h '^Benchmark' "$out"/l/events.log | awk '{print $1, $3 / 1e3 " us"}'
fi

if [ "$part" = s47a ]; then
# Session 47's second call (under 400 s): the events suite beside
# Diffrax (issue 25's 100x marks), fewer lanes a trajectory's device test
# (bit for bit with a warp each), the Brusselator at matched error beside
# Diffrax (issue 26; session 44's s44b never ran).
ev 90
t lanes-same 60 -test.v -test.run '^(TestGPUWideLanesSame)$'
echo "=== brusselator matched"
timeout 100 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 1 -json -quiet -problems brusselator -n 1024 -rtol 1e-9 \
	>"$out/l/bruss.jsonl" 2>"$out/l/bruss.log"
el $?
timeout $((390 - $(date +%s) + T0)) python3 bench/anchors/diffrax_large.py --platform gpu --problems brusselator --rtol 1e-6 --reps 1 --no-forward --max-seconds 60 \
	--out "$out/l/diffrax_bruss.jsonl" >/dev/null 2>"$out/l/diffrax_bruss.log"
el $?
tail -3 "$out/l/diffrax_bruss.log"
jrows "" events.jsonl diffrax_events.jsonl bruss.jsonl diffrax_bruss.jsonl
fi

if [ "$part" = s46e ]; then
# s46d cut to 200 s (the budget left): the device tests of every launch
# run ahead (H4) and of kept saves written in place (H6), the call bound
# against ae9dc05 once, tile mode against lanes mode at n = 4,096.
t ahead-tests 50 -test.v -test.run '^(TestGPUGradAhead|TestGPUKeepGradsAhead|TestGPUInputReuse|TestCallHandOvers)$'
t saves-tests 60 -test.v -test.run '^(TestGPUKeepSaves|TestGPUSaveCots|TestGPULossFold)$'
gunzip -c $bin/base46.test.gz >/tmp/base46.test && chmod +x /tmp/base46.test
t bound-main 25 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 100x
TB=/tmp/base46.test t bound-base 25 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 100x
grep -h '^Benchmark' "$out"/l/bound-main.log | awk '{printf "main %-48s %8.3f ms  bound %s\n", $1, $3/1e6, $5}'
grep -h '^Benchmark' "$out"/l/bound-base.log | awk '{printf "base %-48s %8.3f ms  bound %s\n", $1, $3/1e6, $5}'
t tilefill $((195 - $(date +%s) + T0)) -test.run XXX -test.timeout 90s -test.bench 'GPUTileFill/grad/.*/n=4096/' -test.benchtime 5x
grep -h '^Benchmark' "$out/l/tilefill.log" | sed 's/#0[0-9]//' | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "kernel-ms/op") k = $i; print $1, k}' | awk '{a[$1] = a[$1] " " $2} END {for (x in a) print x, a[x]}' | sort
fi

if [ "$part" = s46d ]; then
# Session 46's last call (under 400 s), main with every helper merged and
# a wide kernel's trajectories on fewer lanes by default
# (defaultWideLanes), base46.test.gz = ae9dc05 (the session's start).
# 1. Issue 23: every launch runs ahead of its inputs' compare (H4): its
# tests, then the call bound against ae9dc05, two rounds alternated.
t ahead-tests 50 -test.v -test.run '^(TestGPUGradAhead|TestGPUKeepGradsAhead|TestGPUInputReuse|TestGPUChunkLaunch|TestCallHandOvers)$'
gunzip -c $bin/base46.test.gz >/tmp/base46.test && chmod +x /tmp/base46.test
for r in 1 2; do
	t bound-main-$r 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 100x
	TB=/tmp/base46.test t bound-base-$r 30 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 100x
done
grep -h '^Benchmark' "$out"/l/bound-main-*.log | awk '{printf "main %-48s %8.3f ms  bound %s\n", $1, $3/1e6, $5}' | sort
grep -h '^Benchmark' "$out"/l/bound-base-*.log | awk '{printf "base %-48s %8.3f ms  bound %s\n", $1, $3/1e6, $5}' | sort
# 2. Issue 26: neural fields in tile mode against lanes mode at n =
# 1,024 / 4,096 / 16,384 (tile mode's threshold).
t tilefill 100 -test.run XXX -test.timeout 95s -test.bench 'GPUTileFill' -test.benchtime 5x
grep -h '^Benchmark' "$out/l/tilefill.log" | sed 's/#0[0-9]//' | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "kernel-ms/op") k = $i; print $1, k}' | awk '{a[$1] = a[$1] " " $2} END {for (x in a) print x, a[x]}' | sort
# 3. Issue 25: kept saves written in place, save steps in gradient
# kernels only (H6), beside the loss's fold (H1): SolveTo and Grad with
# kept saves against their old forms, two rounds.
for r in 1 2; do
	t saves-$r 30 -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/(solveto-kept|solveto-kept-old|grad-kept|grad-kept-old)$' -test.benchtime 20x
done
grep -h '^Benchmark' "$out"/l/saves-[12].log | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "kernel-ms/op") k = $i; print $1, $3 / 1e6, k}' | sort
# 4. The gpu-large suite's HIRES, Pollution and neural Robertson (fewer
# lanes by default) beside the 16-core CPU engine: whole calls.
echo "=== gpu-large"
timeout 90 "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 3 -json -quiet \
	-problems hires,pollution,neural-robertson >"$out/l/large.jsonl" 2>"$out/l/large.log"
el $?
# 5. The saves' device tests with what time is left.
t saves-tests $((385 - $(date +%s) + T0)) -test.v -test.run '^(TestGPUKeepSaves|TestGPUEngineSaveTimes|TestGPUSaveGroups|TestGPUThreadSaves|TestGPUSaveCots|TestGPULossFold)$'
fi

if [ "$part" = s46c ]; then
# Session 46's third call (on the machine s46b left warm): fewer lanes a
# trajectory (H5) on neural Robertson, Lorenz-96 d = 64 and Pollution.
t widelanes-nr 150 -test.run XXX -test.timeout 145s -test.bench 'GPUWideLanes/grad/(neural-robertson|lorenz96-64)/' -test.benchtime 5x
t widelanes-poll $((290 - $(date +%s) + T0)) -test.run XXX -test.timeout 280s -test.bench 'GPUWideLanes/grad/pollution/(default|lanes16|lanes8)(#[0-9]+)?$' -test.benchtime 5x
grep -h '^Benchmark' "$out"/l/widelanes*.log | sed 's/#0[0-9]//' | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "kernel-ms/op") k = $i; print $1, k}' | awk '{a[$1] = a[$1] " " $2} END {for (x in a) print x, a[x]}' | sort
fi

if [ "$part" = s46b ]; then
# Session 46's second call. 1. The kept events call without its mesh
# memset and, untraced, without its clock (H2): the mesh's rows zeroed by
# the kernel (TestGPUMeshZero), the kept call's modes alternated
# (record-keep against -memset; -untraced, the user's figure, against
# -untraced-clock).
t meshzero 100 -test.v -test.run 'TestGPUMeshZero|TestGPUKeepGrads|TestGPUEvents$'
t kept 50 -test.run '^$' -test.bench 'GradEventsCall/^cuda$/(ball|pk)/record(-keep)?(-memset|-untraced|-untraced-clock)?$' -test.benchtime 400x -test.count 3
grep -h '^Benchmark' "$out/l/kept.log" | awk '{print $1, $3}' | sort | awk '{a[$1] = a[$1] " " $2} END {for (x in a) print x, a[x]}' | sort
# 2. The loss's value folded into the forward pass (H1): its device
# tests, then grad-kept against grad-kept-oldloss, three rounds.
t fold-tests 80 -test.v -test.run 'TestGPULossFold|TestGPUSaveCots|TestGPUKeepSaves'
for r in 1 2 3; do
	for v in grad-kept grad-kept-oldloss; do
		t saves-$v-$r 25 -test.run '^$' -test.bench "GPUSaveSplit/saves=(1|1000)/$v\$" -test.benchtime 20x
	done
done
grep -h '^Benchmark' "$out"/l/saves-grad-*.log | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "kernel-ms/op") k = $i; print $1, $3 / 1e6, k}' | sort
# 3. A wide kernel's trajectories on fewer lanes (H5, Tuning.wideLanes)
# and launch bounds of one round (Tuning.wideRound) against the default,
# three rounds alternated by BenchmarkGPUWideLanes: HIRES.
t widelanes $((545 - $(date +%s) + T0)) -test.run XXX -test.timeout 300s -test.bench 'GPUWideLanes/grad/hires/' -test.benchtime 5x
grep -h '^Benchmark' "$out"/l/widelanes*.log | sed 's/#0[0-9]//' | awk '{for (i = 3; i < NF; i++) if ($(i+1) == "kernel-ms/op") k = $i; print $1, k}' | awk '{a[$1] = a[$1] " " $2} END {for (x in a) print x, a[x]}' | sort
fi

if [ "$part" = s46a ]; then
# Session 46's first call, the most wanted first (.gpu/bin/cuda.test and
# gradsolve unzipped from their .gz; cuda-noloss.test.gz from
# `SAVES_VARIANTS=noloss SAVES_GZIP=1 bash bench/saves_split.sh build`).
# 1. Issue 23: the call bound at 32,768, 262,144 and 2^20, every variant,
# three rounds.
for r in 1 2 3; do
	t bound-$r 60 -test.run '^$' -test.bench 'GPUCallBound' -test.benchtime 100x
done
grep -h '^Benchmark' "$out"/l/bound-*.log | awk '{printf "%-48s %8.3f ms  bound %s\n", $1, $3/1e6, $5}'
# 2. TestGPUEngineChunks (failed in s45a on dL/dY0, 3.7e-10 against
# 1e-10) on main and on 303d2d7.
gunzip -c $bin/base.test.gz >/tmp/base.test && chmod +x /tmp/base.test
t chunks-main 40 -test.v -test.run '^TestGPUEngineChunks$'
TB=/tmp/base.test t chunks-base 40 -test.v -test.run '^TestGPUEngineChunks$'
grep -hE 'rel|differ|within' "$out"/l/chunks-*.log | head -8
# 2b. Issue 23: whole Lorenz calls as the training suite times them (n =
# 128 whole <= 0.2 ms, on a resident mesh <= 1.2x kernel + 0.05 ms).
echo "=== grad calls"
timeout 60 "$bin/gradsolve" bench -suite gpu-train -engine cuda -reps 9 -json -quiet -cases grad-call >"$out/l/calls.jsonl" 2>"$out/l/calls.log"
el $?
python3 -c "
import json
for l in open('$out/l/calls.jsonl'):
    r=json.loads(l); print({k: v for k, v in r.items() if not isinstance(v, (list, dict))})
" 2>&1 | cut -c1-400 | tail -8
# 3. Issue 25: the 1,000-save kernel without its loss VJP (noloss).
echo "=== saves split (noloss)"
SAVES_VARIANTS=noloss timeout 110 bash bench/saves_split.sh run >"$out/l/saves-split.log" 2>&1
el $?
tail -6 "$out/l/saves-split.log"
# 4. Issue 26: launch bounds of one round of the job's warps
# (Tuning.wideRound) against the default on every wide case.
t ahead 30 -test.v -test.run '^TestGPUKeepGradsAhead$'
t wideround $((530 - $(date +%s) + T0)) -test.run XXX -test.timeout 500s -test.bench 'GPUWideRegs/grad/.*/s64(-round)?$' -test.benchtime 5x
fi

if [ "$part" = s45c ]; then
# Session 45's last call (about 200 s of device budget left):
# TestGPUEngineChunks (failed in s45a on dL/dY0, 3.7e-10 against 1e-10)
# on main and on 303d2d7, the kept compare's device test (on a goroutine
# by default again), then the events suite beside Diffrax.
gunzip -c $bin/base.test.gz >/tmp/base.test && chmod +x /tmp/base.test
t chunks-main 30 -test.v -test.run '^TestGPUEngineChunks$'
TB=/tmp/base.test t chunks-base 30 -test.v -test.run '^TestGPUEngineChunks$'
grep -h 'rel \|FAIL\|PASS' "$out"/l/chunks-*.log | head -8
t ahead 40 -test.v -test.run '^TestGPUKeepGradsAhead$'
ev 90
fi

if [ "$part" = s45b ]; then
# Session 45's second call (never ran; its timeouts add to more than
# one call's ten minutes: the most wanted first): WideMinSplit on the
# Brusselator, Tuning.wideRound's launch bounds, Method Auto against
# 303d2d7 (base.test.gz) alternated, the events suite traced beside
# Diffrax, the loss loop's share of the 1,000-save kernel
# (bench/saves_split.sh's noloss; the Brusselator at matched error is
# part s44b).
t widesplit 140 -test.run XXX -test.timeout 135s -test.bench 'GPUWideSplit/grad/(brusselator|lorenz96-64)/split=(-1|16)' -test.benchtime 5x
# Launch bounds of one round of the job's warps (Tuning.wideRound: HIRES
# 37.2 ms at 16 blocks against 43.1 in s45a) against the default on every
# wide problem of BenchmarkGPUWideRegs.
t wideround 200 -test.run XXX -test.timeout 195s -test.bench 'GPUWideRegs/grad/.*/s64(-round)?$' -test.benchtime 5x
gunzip -c $bin/base.test.gz >/tmp/base.test && chmod +x /tmp/base.test
for r in 1 2; do
	t auto-main-$r 40 -test.run '^$' -test.bench 'GPUAutoTrace/(robertson|vdp-stiff)/grad/' -test.benchtime 10x
	TB=/tmp/base.test t auto-base-$r 40 -test.run '^$' -test.bench 'GPUAutoTrace/(robertson|vdp-stiff)/grad/' -test.benchtime 10x
done
echo "=== events (traced)"
timeout 60 "$bin/gradsolve" bench -suite gpu-events -engine cuda -json -out "$out/l/events.jsonl" -trace "$out/l/events.trace" >"$out/l/events.log" 2>&1
el $?
timeout 100 python3 bench/anchors/diffrax_events.py --platform gpu --out "$out/l/diffrax_events.jsonl" >/dev/null 2>"$out/l/diffrax_events.log"
el $?
tail -3 "$out/l/diffrax_events.log"
echo "=== saves split (noloss)"
SAVES_VARIANTS=noloss SAVES_GZIP=1 timeout 120 bash bench/saves_split.sh run >"$out/l/saves-split.log" 2>&1
el $?
tail -6 "$out/l/saves-split.log"
fi

if [ "$part" = s42split ]; then
# Issue 26's parallel split (session 42, H3; Tuning.SplitUnits): a split
# kernel compiled as units (the kernel's and one per large step function,
# NVRTC -rdc=true each, concurrently), linked by the driver (cuLink*).
# 1. TestBuildUnits (driver): two units linked and run, the linked image
#    cached, a unit that fails named, an undefined function at the link.
# 2. TestGPUColdStart phase units: the first Grad cold, units on and off,
#    each on a fresh GRADSOLVE_CUDA_CACHE folder (the test makes one per
#    run), one process per problem: Pollution, HIRES, the Brusselator,
#    Lorenz-96 d = 64 with Rodas5P, d = 256 with Tsit5 (wide layouts, the
#    engine's defaults). About 5 minutes.
# 3. TestGPUEngineProblemsSplitUnits: every built-in problem with the
#    units on, GPU = CPU (about 3 minutes). Then run s42split-check.
TB=$bin/driver.test t link 60 -test.v -test.run 'TestBuildUnits|TestLinkKey|TestUnitError'
for c in pollution-Rodas5P hires-Rodas5P brusselator-Rodas5P lorenz96-64-Rodas5P lorenz96-256-Tsit5; do
	echo "=== cold units $c"
	GS_COLDSTART_PHASES=units GS_COLDSTART_ONLY=$c GS_COLDSTART_BUDGET=600 GS_COLDSTART_JSON="$out/l/cold-units-$c.json" \
		timeout 150 "$bin/cuda.test" -test.run TestGPUColdStart -test.v -test.timeout 590s >"$out/l/cold-units-$c.log" 2>&1
	el $?
	grep -hE "units  |FAIL|^ok" "$out/l/cold-units-$c.log" | cut -c1-230
done
t problems-units 240 -test.v -test.run 'TestGPUEngineProblemsSplitUnits'
fi

if [ "$part" = s42split-check ]; then
# The units against the one-unit kernels on the device, bit for bit
# (TestGPUSplitUnits: thread layout in units, the one-unit split of
# session 33, which ran non-finite on Pollution, and the default (wide)
# layouts in units); where the one-unit split of Pollution fails again,
# compute-sanitizer's memcheck (stack overflow, out-of-bounds local or
# global accesses) and initcheck (uninitialised global memory) on it.
t split-units 300 -test.v -test.run 'TestGPUSplitUnits'
if grep -q -- '--- FAIL: TestGPUSplitUnits/pollution-Rodas5P/thread-one-unit' "$out/l/split-units.log"; then
	for tool in memcheck initcheck; do
		echo "=== compute-sanitizer $tool"
		timeout 120 compute-sanitizer --tool $tool --print-limit 20 "$bin/cuda.test" -test.run 'TestGPUSplitUnits/pollution-Rodas5P/thread-one-unit' \
			>"$out/l/sanitizer-$tool.log" 2>&1
		el $?
		grep -E "^=========|FAIL|^ok" "$out/l/sanitizer-$tool.log" | head -30
	done
fi
fi

if [ "$part" = ncu ]; then
# Nsight Compute on the large-state kernels (issue 26: the GPU call is
# 2.3-6.1x the 16-core CPU engine's where 10x is the target): occupancy,
# issue stalls and throughput of the first gs_engine launches of one rep of
# each problem (forward, record, gradient; ncu's clocks left alone).
for p in ${NCU_PROBLEMS:-hires pollution lorenz96-256 brusselator}; do
echo "=== ncu $p"
timeout ${NCU_S:-100} ncu --clock-control none -k regex:gs_engine --launch-count ${NCU_LAUNCHES:-6} \
	--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
	--section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --page details --csv \
	--log-file "$out/l/ncu-$p.csv" "$bin/gradsolve" bench -suite gpu-large -engine cuda -problems $p -reps 1 -json -quiet \
	>"$out/l/ncu-$p.jsonl" 2>"$out/l/ncu-$p.log"
el $?
python3 bench/ncu_sum.py "$out/l/ncu-$p.csv"
done
fi

if [ "$part" = regs ]; then
# Issue 26, session 41: the wide Rodas5P kernels' register levers
# (kernelgen's widespill.go: replicated scalars past Tuning.WideScalars
# in the warp's shared memory, by default 64; Tuning.WideMinBlocks: launch
# bounds). The results (bit for bit with WideScalars -1 on the host) on
# the device against the CPU engine and the thread layout. Then, each in
# a call of its own: `bash bench/gpu_pending.sh regs-bench` and
# `NCU_PROBLEMS=pollution bash bench/gpu_pending.sh ncu` (the default:
# registers, spills, occupancy of the suite's kernels).
t stiff-poll 240 -test.v -test.run 'TestGPUStiffLayouts/pollution|TestGPUWideRosenbrock'
grep -hE 'largest difference|want .* within' "$out/l/stiff-poll.log" | cut -c1-220 | head -8
fi

if [ "$part" = regs-bench ]; then
# BenchmarkGPUWideRegs (Pollution and HIRES, n = 4096: kernel-ms, regs,
# local-B per variant; each variant compiles its kernel, about a minute
# for Pollution's on an empty cache).
# The -O3 variants (ptxas at full optimisation: minutes of compile each)
# only where REGS_BENCH names them ('GPUWideRegs/grad/pollution/.*-O3$').
t regs-bench 570 -test.run XXX -test.bench "${REGS_BENCH:-GPUWideRegs/grad/./(none|s64|s48|s96|s64-b6|s64-b7|none-b6)\$}" -test.benchtime 5x -test.timeout 30m
fi

if [ "$part" = first ]; then
# One call for both when the device is scarce: the cold part's checks,
# then the large-state suite without its Diffrax anchor.
bash "$0" cold
LARGE_S=280 bash "$0" large-go
fi

if [ "$part" = large ] || [ "$part" = large-go ]; then
# The large-state suite (issue 26: GPU call >= 10x the 16-core CPU engine on
# POLL, HIRES, neural Robertson at n = 4096; >= 30x Diffrax on Lorenz-96
# d = 64/256, POLL, the Brusselator) beside Diffrax on the same cells.
echo "=== gpu-large"
timeout ${LARGE_S:-330} "$bin/gradsolve" bench -suite gpu-large -engine cuda -reps 3 -json -quiet \
	-problems pollution,hires,neural-robertson,lorenz96-64,brusselator,lorenz96-256 >"$out/l/large.jsonl" 2>"$out/l/large.log"
el $?
tail -3 "$out/l/large.log"
fi
if [ "$part" = large ]; then
echo "=== diffrax_large"
timeout 230 python3 bench/anchors/diffrax_large.py --platform gpu --rtol 1e-6 --reps 3 --max-seconds 40 \
	--out "$out/l/diffrax_large.jsonl" >/dev/null 2>"$out/l/diffrax_large.log"
el $?
tail -4 "$out/l/diffrax_large.log"
fi

if [ "$part" = compile2 ]; then
# Variants (bench/ptxas_profile.py): base = as the engine now generates
# (large kernels split), inlined = unsplit (as before), minimal, splitc
# (--split-compile=0), pch (the prelude precompiled), and minimal+splitc;
# -nvrtc-time records NVRTC's own phase times.
echo "=== ptxas profile 2"
srcs="pollution-Rodas5P-grad hires-Rodas5P-grad brusselator-Rodas5P-grad lorenz96-64-Rodas5P-grad lorenz-Rodas5P-grad"
timeout 250 python3 bench/ptxas_profile.py -out /tmp/ptx2 -workers 5 -timeout 120 -levels 1 -nvrtc-time \
	-variants base,inlined,minimal,splitc,pch,minimal+splitc \
	$(for s in $srcs; do echo .gpu/srcs/$s.cu; done) >"$out/l/ptxas2.jsonl" 2>"$out/l/ptxas2.log"
el $?
echo "=== split kernels cold and warm"
GS_COLDSTART_PHASES=split GS_COLDSTART_BUDGET=180 GS_COLDSTART_JSON="$out/l/cold-split.json" timeout 230 \
	"$bin/cuda.test" -test.run TestGPUColdStart -test.v >"$out/l/cold-split.log" 2>&1
el $?
timeout 90 "$bin/cuda.test" -test.run 'TestGPUEngineProblems' -test.v >"$out/l/problems2.log" 2>&1
el $?
grep -hE "split  |skipped" "$out/l/cold-split.log" | cut -c1-220
grep -E "^(--- |ok|FAIL|PASS)|^    --- FAIL|panic" "$out/l/problems2.log" | head
python3 - "$out/l/ptxas2.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    o1 = r.get("ptxas_O1", {})
    print("%-28s %-15s src %7s ptx %8s fe %6s pch1 %6s O1 %7s regs %4s spill %6s stack %6s %s" % (
        r.get("source"), r.get("variant"), r.get("src_bytes"), r.get("ptx_bytes"), r.get("nvrtc_ptx_s"),
        r.get("pch_create_s", "-"), o1.get("s"), o1.get("regs_max"), o1.get("spill_st"), o1.get("stack_max"),
        (r.get("error") or o1.get("error") or " ".join(r.get("pch_log", [])))[:100]))
PY
fi

if [ "$part" = bench ]; then
echo "=== events"
timeout 40 "$bin/gradsolve" bench -suite gpu-events -engine cuda -json -out "$out/l/events.jsonl" \
	-trace "$out/l/events.trace" -cpuprofile "$out/l/events.prof" >"$out/l/events.log" 2>&1
el $?
timeout 150 python3 bench/anchors/diffrax_events.py --platform gpu --out "$out/l/diffrax_events.jsonl" >/dev/null 2>"$out/l/diffrax_events.log"
el $?
tail -4 "$out/l/diffrax_events.log"

echo "=== whole calls and fits"
timeout 60 "$bin/gradsolve" bench -suite gpu-train -engine cuda -reps 9 -json -quiet -cases grad-call \
	-trace "$out/l/calls.trace" -cpuprofile "$out/l/calls.prof" >"$out/l/calls.jsonl" 2>"$out/l/calls.log"
el $?
timeout 60 "$bin/cuda.test" -test.run XXX -test.bench CallHostWork -test.benchtime 10x -test.count 3 >"$out/l/hostwork.log" 2>&1
el $?
grep Benchmark "$out/l/hostwork.log"
timeout 40 "$bin/gradsolve" bench -suite gpu-train -engine cuda -reps 9 -json -quiet -cases neural,lorenz-fit \
	>"$out/l/fits.jsonl" 2>"$out/l/fits.log"
el $?
if [ -x "$bin/fit.test" ]; then
timeout 60 "$bin/fit.test" -test.run XXX -test.bench 'New$|NewFresh|NewSolver' -test.benchtime 20x -test.cpu 1,16 >"$out/l/fitnew.log" 2>&1
el $?
grep Benchmark "$out/l/fitnew.log"
fi
echo "=== save times (1 against 1,000)"
timeout 150 "$bin/cuda.test" -test.run '^$' -test.bench 'GPUSaveRatio/.*/.*/interp' -test.benchtime 5x >"$out/l/saves.log" 2>&1
el $?
grep Benchmark "$out/l/saves.log"
fi

tar czf "$out/logs.tgz" -C "$out" l
echo "done at $(($(date +%s) - T0)) s"
python3 - "$out/l" <<'PY'
import json, os, sys
d = sys.argv[1]
for name in ("calls.jsonl", "fits.jsonl", "events.jsonl", "diffrax_events.jsonl", "large.jsonl", "diffrax_large.jsonl"):
    try:
        for line in open(os.path.join(d, name)):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            keys = ("case", "problem", "n", "rtol", "ms", "kernel_ms", "grad_record_ms",
                    "grad_record_call_ms", "cpu_grad_record_call_ms", "grad_ms", "grad_ms_median",
                    "median_grad_err", "median_rel_err", "steps_per_traj", "steps_mean", "compile_ms", "error")
            print(name, {k: r[k] for k in keys if k in r})
    except OSError as e:
        print(name, e)
PY
