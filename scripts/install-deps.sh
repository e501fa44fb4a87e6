#!/usr/bin/env bash
# install-deps.sh checks the tools gradsolve's tests need: Go 1.25 or newer
# (go.mod's version) on PATH. It installs nothing; the only downloads are the
# module's dependencies (gonum), fetched through the Go module proxy.
set -euo pipefail

cd "$(dirname "$0")/.."

want_major=1
want_minor=25

if ! command -v go >/dev/null 2>&1; then
	echo "install-deps: go is not on PATH; install Go ${want_major}.${want_minor} or newer from https://go.dev/dl/" >&2
	exit 1
fi

version=$(go env GOVERSION 2>/dev/null || true) # as go1.26.8, or devel ...
if [[ $version =~ ^go([0-9]+)\.([0-9]+) ]]; then
	major=${BASH_REMATCH[1]}
	minor=${BASH_REMATCH[2]}
	if ((major < want_major || (major == want_major && minor < want_minor))); then
		echo "install-deps: $(go version) is too old; gradsolve needs Go ${want_major}.${want_minor} or newer (https://go.dev/dl/)" >&2
		exit 1
	fi
else
	echo "install-deps: cannot read the Go version from '$(go version)'; assuming a development build" >&2
fi
echo "install-deps: $(go version)"

go mod download
