#!/usr/bin/env bash
# Runs every test of pvans: formatting, vet, unit and integration tests
# (network-namespace tests need root and iproute2; they skip otherwise),
# the race detector on the packages with goroutines, and short fuzz runs.
# Environment: FUZZTIME (default 10s) per fuzz target; set FUZZTIME=0 to skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
FUZZTIME="${FUZZTIME:-10s}"

# Namespace tests need `ip` (iproute2) and nft/tc for chaos tests; install
# them when we can (CI runs as root on a fresh machine).
if [ "$(id -u)" = 0 ] && ! command -v ip >/dev/null 2>&1; then
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null) ||
		echo "warning: could not install iproute2; namespace tests will skip" >&2
fi

echo "== gofmt"
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
if [ -n "$unformatted" ]; then
	echo "gofmt needed:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test"
go test -count=1 -timeout 20m ./...

echo "== go test -race (packages with goroutines)"
race_pkgs="$(go list ./internal/... | grep -v -E '/internal/pva$')"
go test -race -count=1 -timeout 20m $race_pkgs

if [ "$FUZZTIME" != "0" ]; then
	echo "== fuzz ($FUZZTIME per target)"
	for pkg in $(go list ./...); do
		dir="$(go list -f '{{.Dir}}' "$pkg")"
		grep -lq '^func Fuzz' "$dir"/*_test.go 2>/dev/null || continue
		for fz in $(cd "$dir" && grep -ho '^func Fuzz[A-Za-z0-9_]*' *_test.go | sed 's/^func //'); do
			echo "-- $pkg $fz"
			go test -run='^$' -fuzz="^${fz}\$" -fuzztime="$FUZZTIME" "$pkg"
		done
	done
fi
echo "== all tests passed"
