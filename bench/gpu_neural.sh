#!/bin/bash
# The neural suite on the GPU beside Diffrax, in one device call (about
# 9 minutes): gradsolve's default (lanes mode, one warp per trajectory, at
# B = 4096; tile mode, a warp per tile of eight trajectories on the tensor
# cores, at 65536), the other layout at each size (GRADSOLVE_CUDA_LAYOUT),
# Diffrax on the same weights, the GPU engine, lanes and tile tests, then
# other network widths (-hidden; the rows' last column names the layout
# the engine chose) beside Diffrax, and, with "all", the widths in tile
# mode and one thread per trajectory (GRADSOLVE_CUDA_LAYOUT=thread) for
# comparison. (The variants with tile mode's memory in global memory, the
# field's VJP inlined and shuffles instead of staging were switches that
# are gone; their results are in bench/RESULTS.md.)
#
#   bash bench/gpu_neural.sh        # default, tests, widths
#   bash bench/gpu_neural.sh all    # and the comparisons
#
# It builds nothing: .gpu/bin holds gradsolve and cuda.test built with
# CGO_ENABLED=0 from the commit this script belongs to. Run from the
# repository root with .gpu carried; logs and JSON lines go to $OUT.
set -u
root=$(pwd); bin=$root/.gpu/bin; out=${OUT:-/tmp/gpu-neural}; mkdir -p "$out"
export GRADSOLVE_CUDA_CACHE=/tmp/gradsolve-cuda-cache PYTHONUNBUFFERED=1
T0=$(date +%s)
step() {
	local name=$1 budget=$2
	shift 2
	echo "=== $name at $(($(date +%s) - T0)) s"
	timeout --kill-after=5 "$budget" "$@" > "$out/$name.jsonl" 2> "$out/$name.log"
	echo "rc $? after $(($(date +%s) - T0)) s"
	tail -3 "$out/$name.log" | cut -c1-300
	cut -c1-900 "$out/$name.jsonl"
}
step neural 200 "$bin/gradsolve" bench -suite gpu-neural -n 4096,65536 -json -reps 5 -dump /tmp/neural-gpu.json
step neural-tile4096 100 env GRADSOLVE_CUDA_LAYOUT=tile "$bin/gradsolve" bench -suite gpu-neural -n 4096 -json -reps 5
step neural-lanes65536 100 env GRADSOLVE_CUDA_LAYOUT=lanes "$bin/gradsolve" bench -suite gpu-neural -n 65536 -json -reps 5
step dx-neural 80 python3 bench/anchors/diffrax_neural.py --problem /tmp/neural-gpu.json --platform gpu --b 4096,65536 --reps 5 --max-seconds 60
echo "=== tests at $(($(date +%s) - T0)) s"
timeout 250 "$bin/cuda.test" -test.run 'TestGPUEngine$|TestGPUEngine(SharedSum|FiniteDifferences|Statuses|Float32|Lanes)$|TestGPULanes|TestGPUMultiEngine|TestGPUTile' -test.v -test.timeout 245s > "$out/tests.log" 2>&1
echo "rc $?"
grep -E '^(--- |    --- |ok|FAIL|PASS|panic)' "$out/tests.log" | cut -c1-200
for h in 8,8 16,16 64,64; do
	step "neural-h$h" 100 "$bin/gradsolve" bench -suite gpu-neural -hidden "$h" -n 4096,65536 -json -reps 3 -dump "/tmp/neural-h$h.json"
	step "dx-neural-h$h" 60 python3 bench/anchors/diffrax_neural.py --problem "/tmp/neural-h$h.json" --platform gpu --b 4096,65536 --reps 3 --max-seconds 45
done
if [ "${1:-}" = all ]; then
	for h in 8,8 16,16 64,64; do
		step "neural-tile-h$h" 100 env GRADSOLVE_CUDA_LAYOUT=tile "$bin/gradsolve" bench -suite gpu-neural -hidden "$h" -n 4096,65536 -json -reps 3
	done
	step neural-threads 150 env GRADSOLVE_CUDA_LAYOUT=thread "$bin/gradsolve" bench -suite gpu-neural -n 4096,65536 -json -reps 5
fi
echo "done at $(($(date +%s) - T0)) s"
