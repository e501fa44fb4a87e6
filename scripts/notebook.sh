#!/usr/bin/env bash
# notebook.sh executes examples/notebooks/quickstart.ipynb end to end with the
# GoNB Go kernel and checks the result: the executed notebook must contain a
# PNG image output and no error output.
#
# It installs what it needs if missing:
#   - Debian's jupyter-nbconvert and jupyter-client (apt-get; as root, or
#     through sudo -n when not root),
#   - goimports (golang.org/x/tools, which GoNB runs on every cell) and GoNB
#     itself (github.com/janpfeifer/gonb, version pinned below) with go
#     install, then registers the kernel with `gonb --install`.
#
# Exit status: 0 if the notebook ran and passed the checks; 1 if it failed;
# 3 if jupyter or GoNB could not be installed (scripts/test.sh reports that
# as a skipped check). The executed notebook is written to
# $NOTEBOOK_OUT (default: a temporary directory).
set -uo pipefail

cd "$(dirname "$0")/.."

GONB_VERSION=v0.11.4
GOIMPORTS_VERSION=v0.36.0 # golang.org/x/tools; any recent release works
NB=examples/notebooks/quickstart.ipynb
OUT_DIR=${NOTEBOOK_OUT:-$(mktemp -d)}

skip() {
	echo "notebook.sh: SKIP: $*" >&2
	exit 3
}

as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		return 1
	fi
}

if ! command -v jupyter-nbconvert >/dev/null 2>&1; then
	echo "notebook.sh: installing jupyter-nbconvert and jupyter-client with apt-get"
	if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq ||
		! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			jupyter-nbconvert jupyter-client python3-nbclient python3-nbformat >/dev/null; then
		skip "cannot install Debian's jupyter-nbconvert (apt-get needs root or passwordless sudo)"
	fi
fi
command -v jupyter >/dev/null 2>&1 || skip "jupyter is not on PATH after installing jupyter-nbconvert"

GOBIN=$(go env GOPATH)/bin
export PATH=$GOBIN:$PATH
if ! command -v goimports >/dev/null 2>&1; then
	echo "notebook.sh: installing goimports $GOIMPORTS_VERSION"
	go install "golang.org/x/tools/cmd/goimports@$GOIMPORTS_VERSION" || skip "cannot install goimports"
fi
# (gonb --version prints a stale version string, so read the binary's
# module information instead.)
if ! command -v gonb >/dev/null 2>&1 || ! go version -m "$(command -v gonb)" 2>/dev/null | grep -Eq "github.com/janpfeifer/gonb[[:space:]]+$GONB_VERSION"; then
	echo "notebook.sh: installing GoNB $GONB_VERSION"
	# go install pkg@version also asks the proxy for the module's version list
	# (to report deprecations), which some proxies refuse; building from a
	# scratch module that requires the pinned version needs only the version
	# itself.
	tmp=$(mktemp -d)
	if ! (cd "$tmp" && go mod init gonbinstall >/dev/null 2>&1 &&
		go get "github.com/janpfeifer/gonb@$GONB_VERSION" >/dev/null 2>&1 &&
		go build -o "$GOBIN/gonb" github.com/janpfeifer/gonb); then
		rm -rf "$tmp"
		skip "cannot build GoNB $GONB_VERSION"
	fi
	rm -rf "$tmp"
fi
if ! jupyter kernelspec list 2>/dev/null | grep -qw gonb; then
	# gopls serves only auto-completion, which a batch run does not use.
	gonb --install --force_deps >/dev/null 2>&1 || skip "gonb --install failed"
fi

# The notebook's cells import this repository's packages: point GoNB's
# scratch module at this checkout (the notebook's first cell runs
# "!*go mod edit -replace" with $GRADSOLVE_ROOT).
export GRADSOLVE_ROOT=$PWD
out="$OUT_DIR/quickstart.executed.ipynb"
echo "notebook.sh: executing $NB"
if ! jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
	--ExecutePreprocessor.kernel_name=gonb --output-dir "$OUT_DIR" --output quickstart.executed.ipynb "$NB"; then
	echo "notebook.sh: FAIL: the notebook did not execute" >&2
	exit 1
fi

python3 - "$out" <<'PY'
import json, sys
nb = json.load(open(sys.argv[1]))
png = errors = 0
for cell in nb["cells"]:
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            errors += 1
            print("error output:", o.get("ename"), o.get("evalue"), file=sys.stderr)
        if o.get("output_type") == "stream" and o.get("name") == "stderr" and "error" in "".join(o.get("text", "")).lower():
            errors += 1
            print("stderr output:", "".join(o["text"])[:500], file=sys.stderr)
        if "image/png" in o.get("data", {}):
            png += 1
print(f"notebook.sh: {png} PNG output(s), {errors} error output(s)")
sys.exit(0 if png > 0 and errors == 0 else 1)
PY
status=$?
if [[ $status -ne 0 ]]; then
	echo "notebook.sh: FAIL: want at least one PNG output and no error output ($out)" >&2
	exit 1
fi
echo "notebook.sh: ok ($out)"
