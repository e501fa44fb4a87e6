#!/usr/bin/env bash
# test.sh runs gradsolve's checks, as CI does (.ci/run):
#
#   gofmt -l, go vet ./..., go test ./..., go test -race on ./tape, ./scan and
#   ./internal/par, on ode's concurrency and determinism tests and (-short) on
#   ./fit, ./optim, ./progress/..., ./plot, ./examples/concurrent-fits and
#   ./cmd/gradsolve,
#   a short fuzz run of each fuzz target listed below, and the notebook
#   (scripts/notebook.sh: installs Debian's jupyter and GoNB, executes
#   examples/notebooks/quickstart.ipynb; skipped with a note if they cannot
#   be installed; NOTEBOOK=0 skips it).
#
# Every check runs even if an earlier one fails; the script ends by listing
# the failed checks and exits 1 if there are any. FUZZTIME sets the length of
# each fuzz run (default 10s). Nothing here needs a GPU; the whole run takes
# about half an hour on two cores (package cuda's tests most of it).
set -euo pipefail

cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-10s}

# The fuzz targets, as "package target"; a target that does not exist (yet) is
# skipped with a note.
FUZZ_TARGETS=(
	"./cmd/gradsolve FuzzParseFloats"
	"./cmd/gradsolve FuzzParseVary"
	"./cmd/gradsolve FuzzCLI"
	"./cmd/gradsolve FuzzFitData"
	"./cmd/gradsolve FuzzFitArgs"
	"./tape FuzzTraceExpr"
)

failed=()

# check runs a command, noting it if it fails.
check() {
	echo "== $*"
	if ! "$@"; then
		failed+=("$*")
	fi
}

gofmt_clean() {
	local files
	files=$(gofmt -l .)
	if [[ -n $files ]]; then
		echo "these files need gofmt -w:" >&2
		echo "$files" >&2
		return 1
	fi
}

check gofmt_clean
check go vet ./...
# Package cuda's host-backend tests (kernels compiled as host C++, warps
# simulated) take 20-30 minutes on two cores: past go test's default
# ten-minute limit.
check go test -timeout 60m ./...
check go test -race ./tape ./scan ./internal/par
check go test -race -run 'Concurrent|Determinism' ./ode
# The packages users drive from several goroutines (fits run concurrently,
# progress bars, callbacks): with -short, 39 s here with the race build cached
# and about 2.5 minutes from cold (session 50, two loaded cores).
check go test -race -short ./fit ./optim ./progress/... ./plot ./examples/concurrent-fits ./cmd/gradsolve

# fuzz_run runs one fuzz target. On a loaded machine Go's fuzzing engine
# sometimes stops at the end of -fuzztime with "context deadline exceeded"
# while a worker is between inputs, having found nothing (FuzzFitArgs, whose
# inputs run fits, in two of session 50's three runs); such a run (no
# failing input written) is repeated, up to twice. A real failure always
# writes its input under testdata/fuzz and fails as it should.
fuzz_run() {
	local out rc try
	for try in 1 2 3; do
		rc=0
		out=$(go test -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" "$1" 2>&1) || rc=$?
		echo "$out"
		if ((rc == 0)) || ! grep -q 'context deadline exceeded' <<<"$out" || grep -q 'Failing input written' <<<"$out"; then
			return "$rc"
		fi
		((try < 3)) && echo "== $2: the fuzzing engine timed out with nothing found; running it again"
	done
	return "$rc"
}

for entry in "${FUZZ_TARGETS[@]}"; do
	read -r pkg target <<<"$entry"
	listed=$(go test -list "^${target}\$" "$pkg" 2>/dev/null || true)
	if grep -qx "$target" <<<"$listed"; then
		check fuzz_run "$pkg" "$target"
	else
		echo "== skipping $target: not defined in $pkg (or $pkg does not build; go vet reports that)"
	fi
done

notebook_check() {
	local rc=0
	bash scripts/notebook.sh || rc=$?
	if ((rc == 3)); then
		echo "== skipped the notebook check: jupyter or GoNB could not be installed (see the SKIP line above)"
		return 0
	fi
	return "$rc"
}
if [[ ${NOTEBOOK:-1} == 0 ]]; then
	echo "== skipping the notebook check: NOTEBOOK=0"
else
	check notebook_check
fi

if ((${#failed[@]} > 0)); then
	echo "test.sh: ${#failed[@]} check(s) failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "test.sh: all checks passed"
