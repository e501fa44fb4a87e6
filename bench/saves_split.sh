#!/bin/bash
# Issue 25 (1,000 save times <= 2x one in Grad, Tsit5, on the GPU): where
# the Kepler gradient kernel's time with 1,000 save times goes, measured
# by removing one part of the adjoint at a time (BenchmarkGPUSaveSplit's
# saves=1 and saves=1000 grad-kept rows, 4,096 orbits). Each variant is
# cuda.test built from HEAD with one edit of adjoint.cuh (or reroll.go);
# the gradients of all but nopf and nolosspf are wrong (timing only,
# never a test):
#
#   base       HEAD as it is
#   nosweep    no reverse steps (forward, saves and loss VJP only)
#   noloss     no loss VJP (the sweep reads stale cotangents; since
#              session 46 the Kepler loss's value is folded in the forward
#              pass, so the VJP left is dL/dy, dL/dp, dL/ds, zero here:
#              base - noloss is what the prologue still costs)
#   nofold     the fold's terms not added where the saves are written
#              (gs_fold_save's call: the loss value wrong): base - nofold
#              is what the fold costs the forward pass
#   nocoef     the steps' coefficient cotangents (gs_coef_bar) not summed:
#              wb zero, the dense reverse still run where a save lies
#              inside: the sweep of a pre-pass that cost nothing, so
#              base - nocoef bounds what any pre-pass (issue 25's idea: wb
#              for every step computed before the sweep, by these threads
#              or more) can save
#   nolam      the saves' cotangents not added to lambda
#   nocoeflam  both: all save-time work of the sweep gone but the
#              prefetches and the dense reverse
#   nopf       the sweep's save cotangents not prefetched a step ahead
#              (gs_prefetch_step's a.tb or ys lines; results unchanged)
#   nolosspf   the bound loss's loops not prefetching (reroll.go's
#              GS_PREFETCH lines; results unchanged)
#
#   bash bench/saves_split.sh build   (here, no GPU: about 2 minutes)
#     writes .gpu/bin/cuda-VARIANT.test (base is .gpu/bin/cuda.test, which
#     this builds too);
#   bash bench/saves_split.sh run     (on the device, carrying .gpu: about
#     4 minutes) runs every variant three times, alternated, and prints
#     each row's median kernel-ms/op and ns/op.
set -eu
root=$(git rev-parse --show-toplevel)
cd "$root"
bin=.gpu/bin
# SAVES_VARIANTS picks some (a call carries at most 64 MiB: three
# variants gzipped fit beside the other binaries); SAVES_GZIP=1 gzips the
# variants' binaries, which run unzips into /tmp.
variants=${SAVES_VARIANTS:-nosweep noloss nofold nocoef nolam nocoeflam nopf nolosspf}

# mutate VARIANT DIR edits the copy of the repository in DIR for VARIANT
# and fails if the edit no longer matches the source.
mutate() {
	local f=cuda/internal/kernelgen/adjoint.cuh
	local coef='s|    const gs_real theta = (a.saveat\[k\] - ts) / h;|    any = true; break;\n&|'
	local lam='s|for (int c = 0; c < GS_D; c++) lam\[c\] += a.tb\[|if (0) for (int c = 0; c < GS_D; c++) lam[c] += a.tb[|'
	# (Since session 44 the default kernel computes the save times'
	# cotangents in the sweep, gs_save_cot: each variant edits that form's
	# lines too.)
	local lam2='s|for (int c = 0; c < GS_D; c++) lam\[c\] += sc \* gs_save_cot(|if (0) for (int c = 0; c < GS_D; c++) lam[c] += sc * gs_save_cot(|'
	case $1 in
	nosweep) sed -i 's|const int smax = gs_warp_max(act ? len : 0);|const int smax = 0 * gs_warp_max(act ? len : 0);|' "$2/$f" ;;
	noloss) sed -i 's|      r = gs_a_loss_grad(sh, y, a.ys|      r = gs_lgrad_out{}; if (0) r = gs_a_loss_grad(sh, y, a.ys|' "$2/$f" ;;
	nofold)
		f=cuda/internal/kernelgen/kernel.cuh
		sed -i 's|  gs_fold_save(lf, a, k, i, y);|  (void)lf;|' "$2/$f"
		;;
	nocoef) sed -i "$coef" "$2/$f" ;;
	nolam) sed -i -e "$lam" -e "$lam2" "$2/$f" ;;
	nocoeflam) sed -i -e "$coef" -e "$lam" -e "$lam2" "$2/$f" ;;
	nopf) sed -i -e 's|    for (int c = 0; c < GS_D; c++) GS_PREFETCH(&a.tb|    if (0) for (int c = 0; c < GS_D; c++) GS_PREFETCH(\&a.tb|' \
		-e 's|  for (int k = k0; k < k1; k++) gs_save_cot_prefetch(|  if (0) for (int k = k0; k < k1; k++) gs_save_cot_prefetch(|' "$2/$f" ;;
	nolosspf)
		f=cuda/internal/kernelgen/reroll.go
		sed -i 's|"      GS_PREFETCH(&%s);\\n"|"      (void)\&%s;\\n"|' "$2/$f"
		;;
	esac
	if cmp -s "$2/$f" "$root/$f"; then
		echo "saves_split: variant $1 no longer matches $f" >&2
		exit 1
	fi
}

if [ "${1:-}" = build ]; then
	mkdir -p "$bin"
	CGO_ENABLED=0 go test -c -trimpath -ldflags='-s -w' -o "$bin/cuda.test" ./cuda
	for v in $variants; do
		src=$(mktemp -d)
		git archive HEAD | tar -x -C "$src"
		mutate "$v" "$src"
		(cd "$src" && CGO_ENABLED=0 go test -c -trimpath -ldflags='-s -w' -o "$root/$bin/cuda-$v.test" ./cuda)
		rm -rf "$src"
		if [ "${SAVES_GZIP:-}" = 1 ]; then
			gzip -f "$bin/cuda-$v.test"
		fi
		echo "built $bin/cuda-$v.test"
	done
	exit 0
fi

if [ "${1:-}" = run ]; then
	out=${OUT:-/tmp/out}
	mkdir -p "$out/l"
	export GRADSOLVE_CUDA_CACHE=${GRADSOLVE_CUDA_CACHE:-/tmp/gradsolve-cuda-cache}
	for v in $variants; do
		if [ -f "$bin/cuda-$v.test.gz" ]; then
			gunzip -c "$bin/cuda-$v.test.gz" >"/tmp/cuda-$v.test" && chmod +x "/tmp/cuda-$v.test"
		fi
	done
	for r in 1 2 3; do
		for v in base $variants; do
			b=$bin/cuda-$v.test
			[ -f "/tmp/cuda-$v.test" ] && b=/tmp/cuda-$v.test
			rows='grad-kept$'
			[ "$v" = base ] && b=$bin/cuda.test
			timeout 100 "$b" -test.run '^$' -test.bench "GPUSaveSplit/saves=(1|1000)/$rows" -test.benchtime 20x |
				grep '^Benchmark' | sed "s/^/$v /" >>"$out/l/saves_split.txt" || echo "$v round $r failed"
		done
	done
	timeout 60 "$bin/cuda.test" -test.run '^$' -test.bench 'GPUSaveSplit/saves=(1|1000)/solveto-kept$' -test.benchtime 20x |
		grep '^Benchmark' | sed "s/^/base /" >>"$out/l/saves_split.txt" || true
	# Medians of kernel-ms/op and ns/op per variant and row.
	python3 - "$out/l/saves_split.txt" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(lambda: ([], []))
for line in open(sys.argv[1]):
    f = line.split()
    m = {f[i]: f[i - 1] for i in range(1, len(f))}
    if "ns/op" in m and "kernel-ms/op" in m:
        r = rows[(f[0], f[1])]
        r[0].append(float(m["kernel-ms/op"]))
        r[1].append(float(m["ns/op"]) / 1e6)
for (v, b), (k, t) in sorted(rows.items(), key=lambda x: (x[0][1], x[0][0])):
    print("%-10s %-55s kernel %.3f ms  whole %.3f ms  (%d runs)" % (v, b, statistics.median(k), statistics.median(t), len(k)))
PY
	exit 0
fi
echo "usage: bash bench/saves_split.sh build|run" >&2
exit 2
