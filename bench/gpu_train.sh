#!/bin/bash
# Training steps and whole Grad calls on the GPU beside Diffrax + optax and
# torchdiffeq, in one device call (issue 23; under 10 minutes with the
# default budgets):
#
#   1. gradsolve bench -suite gpu-train -json: the neural fit (B = 4096,
#      65536) and the Lorenz calibration (65536 and 262144 fits), writing
#      their problems to $OUT/train.json (-dump), then, in a second run,
#      whole Lorenz Grad calls (n = 128 ... 2^20);
#   2. bench/anchors/diffrax_train.py on that file (jitted Diffrax + optax
#      train steps, both protocols, on the GPU);
#   3. bench/anchors/torchdiffeq_train.py on it (dopri5, backprop and
#      odeint_adjoint, neural at B = 4096 and, as its budget allows, 65536);
#   4. with "all": bench/anchors/diffrax_lorenz.py at rtol 1e-6 on the Grad
#      calls' sizes (the jitted Diffrax gradient beside the whole calls);
#   5. bench/anchors/train_summary.py $OUT: the tables.
#
#   bash bench/gpu_train.sh             # 1, 2, 3, 5: under 10 minutes
#   bash bench/gpu_train.sh dx-lorenz   # 4 and 5 alone (a second call: about 2.5 minutes;
#                                       # then train_summary.py DIR1 DIR2 on both calls' folders)
#   bash bench/gpu_train.sh all         # 1-5: over 10 minutes unless the budgets are lowered
#
# It builds nothing. Before the call, build on the development machine, from
# the commit this script belongs to,
#
#   mkdir -p .gpu/bin && CGO_ENABLED=0 go build -o .gpu/bin/gradsolve ./cmd/gradsolve
#
# and carry .gpu (the binary may also be .gpu/gradsolve, or named by
# $GRADSOLVE_BIN). Run from the repository root. Environment:
#   ENGINE   the GPU engine (default cuda)
#   SUITE    gpu-train (default), or train for a dry run on the CPU (CPU
#            engine, anchors on the CPU, the CPU suite's sizes)
#   REPS     timed steps and calls per case (default 5; every fit runs
#            REPS + 1 steps, and so do the anchors, from the dump)
#   GS_ARGS  more flags of both gradsolve runs, e.g. "-fits 65536 -calls 128,1048576"
#   FIT_BUDGET, CALL_BUDGET, DX_BUDGET, TORCH_BUDGET, DXL_BUDGET: seconds
#            for each part (default 150, 60, 220, 90, 150; the anchors skip
#            a cell predicted to take more than half their budget, and lines
#            written before a timeout stay). The dump appears only if the
#            fits' run completes.
# Logs and JSON lines go to $OUT (default /tmp/gpu-train).
set -u
root=$(pwd); out=${OUT:-/tmp/gpu-train}; mkdir -p "$out"
bin=${GRADSOLVE_BIN:-}
if [ -z "$bin" ]; then
	for b in "$root/.gpu/bin/gradsolve" "$root/.gpu/gradsolve"; do
		if [ -x "$b" ]; then bin=$b; break; fi
	done
fi
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
	echo "gpu_train.sh: no gradsolve binary: build it into .gpu/bin/gradsolve (CGO_ENABLED=0 go build -o .gpu/bin/gradsolve ./cmd/gradsolve) and carry .gpu" >&2
	exit 2
fi
export GRADSOLVE_CUDA_CACHE=${GRADSOLVE_CUDA_CACHE:-/tmp/gradsolve-cuda-cache} PYTHONUNBUFFERED=1
ENGINE=${ENGINE:-cuda}; REPS=${REPS:-5}
FIT_BUDGET=${FIT_BUDGET:-150}; CALL_BUDGET=${CALL_BUDGET:-60}; DX_BUDGET=${DX_BUDGET:-220}; TORCH_BUDGET=${TORCH_BUDGET:-90}
DXL_BUDGET=${DXL_BUDGET:-150}
dump=$out/train.json
SUITE=${SUITE:-gpu-train}
if [ "$SUITE" = train ]; then
	engine_args=(); dx_platform=cpu; torch_device=cpu; torch_b=256,4096
else
	engine_args=(-engine "$ENGINE"); dx_platform=gpu; torch_device=cuda; torch_b=4096,65536
fi
T0=$(date +%s)
step() {
	local name=$1 budget=$2
	shift 2
	echo "=== $name at $(($(date +%s) - T0)) s (budget $budget s)"
	timeout --kill-after=5 "$budget" "$@" > "$out/$name.jsonl" 2> "$out/$name.log"
	echo "rc $? after $(($(date +%s) - T0)) s"
	tail -3 "$out/$name.log" | cut -c1-300
	cut -c1-600 "$out/$name.jsonl" | grep -v '"header"'
}
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.used,memory.total,utilization.gpu --format=csv,noheader
mode=${1:-}
if [ "$mode" != dx-lorenz ]; then
rm -f "$dump"
# shellcheck disable=SC2086 # GS_ARGS is a list of flags
step gradsolve-fits "$FIT_BUDGET" "$bin" bench -suite "$SUITE" "${engine_args[@]}" -reps "$REPS" -json -quiet \
	-cases neural,lorenz-fit,pk-fit -dump "$dump" ${GS_ARGS:-}
# shellcheck disable=SC2086
step gradsolve-calls "$CALL_BUDGET" "$bin" bench -suite "$SUITE" "${engine_args[@]}" -reps "$REPS" -json -quiet \
	-cases grad-call ${GS_ARGS:-}
if [ -s "$dump" ]; then
	step diffrax "$DX_BUDGET" python3 bench/anchors/diffrax_train.py --problem "$dump" --platform "$dx_platform" \
		--max-seconds $((DX_BUDGET / 2))
	step torchdiffeq "$TORCH_BUDGET" python3 bench/anchors/torchdiffeq_train.py --problem "$dump" --device "$torch_device" \
		--b "$torch_b" --max-seconds $((TORCH_BUDGET / 2))
else
	echo "no dump at $dump: the anchors are not run"
fi
fi
if [ "$mode" = all ] || [ "$mode" = dx-lorenz ]; then
	step diffrax-lorenz "$DXL_BUDGET" python3 bench/anchors/diffrax_lorenz.py --platform "$dx_platform" --rtol 1e-6 \
		--n 128,32768,262144,1048576 --no-forward --reps "$REPS" --max-seconds $((DXL_BUDGET / 2))
fi
echo "=== summary at $(($(date +%s) - T0)) s"
python3 bench/anchors/train_summary.py "$out" | tee "$out/summary.txt"
echo "done at $(($(date +%s) - T0)) s"
