#!/bin/bash
# The final measurement of the CUDA engine on an H200, in two halves of at
# most about 510 s each (each fits one device call of 9 minutes):
#
#   bash .gpu/final.sh first    # GPU: gradsolve's GPU suite (Lorenz grid beside the
#                               # hand-written kernels, Robertson, neural), Diffrax
#                               # neural on the GPU, the GPU tests
#   bash .gpu/final.sh second   # Diffrax Lorenz grid and Robertson Kvaerno5 on the GPU;
#                               # the 16-core CPU suites and Diffrax neural on the CPU
#   bash .gpu/final.sh gpu      # the GPU parts of both in one call (under 600 s)
#
# It builds nothing: the binaries are in .gpu/bin (built with CGO_ENABLED=0
# from the commit this script belongs to: cuda.test, bench.test, gradsolve),
# the Diffrax scripts in bench/anchors. Run from the repository root with .gpu
# carried. Every step has a time budget (timeout); logs and JSON lines go to
# $OUT (step.log, step.jsonl), and a summary table is printed last
# (bench/gpu_summary.py; run it on both halves' files for the cross tables:
# python3 bench/gpu_summary.py OUT1 OUT2).
set -u
half=${1:-}
root=$(pwd)
bin=$root/.gpu/bin
out=${OUT:-/tmp/gpu-final}
mkdir -p "$out"
export GRADSOLVE_CUDA_CACHE=/tmp/gradsolve-cuda-cache
export PYTHONUNBUFFERED=1
T0=$(date +%s)
status=()

# step NAME SECONDS COMMAND...: runs the command with a time budget, its
# stdout (JSON lines) to $out/NAME.jsonl and the terminal, stderr to
# $out/NAME.log.
step() {
	local name=$1 budget=$2
	shift 2
	echo "=== $name (budget $budget s, at $(($(date +%s) - T0)) s)"
	local t=$(date +%s)
	timeout --kill-after=5 "$budget" "$@" > >(tee "$out/$name.jsonl") 2> "$out/$name.log"
	local rc=$?
	status+=("$(printf '%-22s rc %3d  %4d s' "$name" "$rc" $(($(date +%s) - t)))")
	[ $rc -eq 0 ] || tail -5 "$out/$name.log"
}

# tests NAME SECONDS COMMAND...: a Go test binary, verbose, its log to
# $out/NAME.log and a digest on the terminal.
tests() {
	local name=$1 budget=$2
	shift 2
	echo "=== $name (budget $budget s, at $(($(date +%s) - T0)) s)"
	local t=$(date +%s)
	timeout --kill-after=5 "$budget" "$@" -test.v > "$out/$name.log" 2>&1
	local rc=$?
	status+=("$(printf '%-22s rc %3d  %4d s' "$name" "$rc" $(($(date +%s) - t)))")
	grep -E '^(--- |    --- |ok|FAIL|PASS|panic)' "$out/$name.log" | cut -c1-200
	grep -E '_test.go:[0-9]+: .*(differ|want|CPU|rel )' "$out/$name.log" | head -20 | cut -c1-220
}

nvidia-smi -L
case "$half" in
first)
	step gs-gpu-lorenz 95 "$bin/gradsolve" bench -suite gpu-lorenz -json -reps 5
	step gs-gpu-robertson 60 "$bin/gradsolve" bench -suite gpu-robertson -json -reps 5
	step gs-gpu-neural 180 "$bin/gradsolve" bench -suite gpu-neural -n 4096,65536 -json -reps 5 -dump /tmp/neural-gpu.json
	step dx-neural-gpu 75 python3 bench/anchors/diffrax_neural.py --problem /tmp/neural-gpu.json --platform gpu --b 4096,65536 --reps 5 --max-seconds 60
	tests gpu-tests 80 "$bin/cuda.test" -test.run 'TestGPUEngine$|TestGPUEngine(SharedSum|FiniteDifferences|Statuses|Chunks|Float32|Lanes)$' -test.timeout 75s
	;;
second)
	step dx-lorenz-gpu 150 python3 bench/anchors/diffrax_lorenz.py --platform gpu --reps 3 --max-seconds 40
	step dx-robertson-gpu 70 python3 bench/anchors/diffrax_robertson.py --platform gpu --n 2048 --rtol 1e-4,1e-5,1e-6,1e-7,1e-8 --reps 3 --max-seconds 30
	tests gpu-tests-2 60 "$bin/cuda.test" -test.run 'TestGPUEngineDims|TestGPUDevice$' -test.timeout 55s
	tests hand-kernels 15 "$bin/bench.test" -test.run 'TestLorenzCUDAGPU' -test.timeout 12s
	step cpu-lorenz 80 "$bin/gradsolve" bench -suite lorenz -n 2048,32768,262144 -rtol 1e-4,1e-6 -json -reps 3 -quiet
	step cpu-stiff-16 20 "$bin/gradsolve" bench -suite stiff -problems robertson -n 2048 -rtol 1e-6 -json -reps 3 -workers 16 -quiet
	step cpu-stiff-1 30 "$bin/gradsolve" bench -suite stiff -problems robertson -n 2048 -rtol 1e-6 -json -reps 3 -workers 1 -quiet
	step cpu-neural 30 "$bin/gradsolve" bench -suite neural -n 256,4096 -json -reps 3 -quiet -dump /tmp/neural-cpu.json
	step dx-neural-cpu 30 python3 bench/anchors/diffrax_neural.py --problem /tmp/neural-cpu.json --platform cpu --b 256,4096 --reps 3 --max-seconds 25
	;;
gpu)
	# The GPU parts of both halves in one call (no Diffrax Robertson, no
	# d = 64 test, no CPU suites): the engine beside the hand-written
	# kernels and Diffrax, and the engine tests.
	step gs-gpu-lorenz 95 "$bin/gradsolve" bench -suite gpu-lorenz -json -reps 5
	step gs-gpu-robertson 60 "$bin/gradsolve" bench -suite gpu-robertson -json -reps 5
	step gs-gpu-neural 150 "$bin/gradsolve" bench -suite gpu-neural -n 4096,65536 -json -reps 5 -dump /tmp/neural-gpu.json
	step dx-neural-gpu 75 python3 bench/anchors/diffrax_neural.py --problem /tmp/neural-gpu.json --platform gpu --b 4096,65536 --reps 5 --max-seconds 60
	step dx-lorenz-gpu 130 python3 bench/anchors/diffrax_lorenz.py --platform gpu --reps 3 --max-seconds 35
	tests gpu-tests 70 "$bin/cuda.test" -test.run 'TestGPUEngine$|TestGPUEngine(SharedSum|FiniteDifferences|Statuses|Chunks|Float32|Lanes)$' -test.timeout 65s
	;;
*)
	echo "usage: bash .gpu/final.sh first|second|gpu" >&2
	exit 2
	;;
esac
echo
echo "=== steps ($(($(date +%s) - T0)) s in all)"
printf '%s\n' "${status[@]}"
echo
python3 bench/gpu_summary.py "$out" 2>&1 || python3 "$root/.gpu/gpu_summary.py" "$out"
