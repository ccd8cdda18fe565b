#!/usr/bin/env bash
# Runs every test of pvans: formatting, vet, staticcheck, unit and integration tests
# (network-namespace tests need root and iproute2; they skip otherwise),
# the race detector on the packages with goroutines, and short fuzz runs.
# Environment: FUZZTIME (default 10s) per fuzz target; set FUZZTIME=0 to skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
FUZZTIME="${FUZZTIME:-10s}"

# Namespace, chaos, browser, alert-rule and package tests need tools a fresh machine
# lacks; install them when we can (CI runs as root). Each test skips with a
# message when its tool is missing, so a non-root run still works.
need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v nft >/dev/null 2>&1 || need+=(nftables)
# test/routed: a DNS server started inside its namespace. dnsmasq-base is the
# binary without the dnsmasq package's system service.
command -v dnsmasq >/dev/null 2>&1 || need+=(dnsmasq-base)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
# test/release: Debian's package checker, rpm's queries, man -l, zsh -n.
command -v lintian >/dev/null 2>&1 || need+=(lintian)
command -v rpm >/dev/null 2>&1 || need+=(rpm)
command -v man >/dev/null 2>&1 || need+=(man-db)
command -v zsh >/dev/null 2>&1 || need+=(zsh)
if [ "$(id -u)" = 0 ] && [ "${#need[@]}" -gt 0 ] && [ -z "${PVANS_NO_INSTALL:-}" ]; then
	echo "== installing ${need[*]}"
	# The tests need only promtool from the prometheus package, which would
	# start a Prometheus server on install. Tell invoke-rc.d (Debian's policy
	# layer) to start no service during this install, so nothing needs ending
	# afterwards; an existing policy file is left as it is.
	policy=/usr/sbin/policy-rc.d
	own_policy=
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && own_policy=1
	fi
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null) ||
		echo "warning: could not install ${need[*]}; the tests that need them will skip" >&2
	if [ -n "$own_policy" ]; then rm -f "$policy"; fi
fi

echo "== gofmt"
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
if [ -n "$unformatted" ]; then
	echo "gofmt needed:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== staticcheck"
# A Go tool of this module (go.mod's tool block): the version is pinned
# there, so every machine checks the same rules.
go tool staticcheck ./...

echo "== go test"
go test -count=1 -timeout 20m ./...

echo "== go test -race (packages with goroutines)"
# The race detector checks the goroutines of the test binary itself. The
# suites under test/ drive pvans as a separate process (test/harness), so
# under -race they would check only their harness and cost a second full
# run; they ran above. The daemon's goroutines are raced in process: by
# internal/daemon's tests, by test/ioc, and by test/chaos's soak, which run
# a whole daemon against a simulated site inside the test binary.
# internal/pva is pure codec functions with no goroutines.
race_pkgs="$(go list ./internal/... ./test/ioc | grep -v -E '/internal/pva$')"
go test -race -count=1 -timeout 20m $race_pkgs
go test -race -count=1 -timeout 20m -run '^TestSoak$' ./test/chaos

if [ "$FUZZTIME" != "0" ]; then
	echo "== fuzz ($FUZZTIME per target)"
	fuzzlog="$(mktemp)"
	trap 'rm -f "$fuzzlog"' EXIT
	for pkg in $(go list ./...); do
		dir="$(go list -f '{{.Dir}}' "$pkg")"
		grep -lq '^func Fuzz' "$dir"/*_test.go 2>/dev/null || continue
		for fz in $(cd "$dir" && grep -ho '^func Fuzz[A-Za-z0-9_]*' *_test.go | sed 's/^func //'); do
			echo "-- $pkg $fz"
			# Go's fuzz coordinator sometimes ends a run with "context deadline
			# exceeded" when the time runs out while a worker is still
			# minimizing a new (non-failing) input. That is not a finding: a
			# real crasher says "Failing input written". Retry such a run once.
			for attempt in 1 2; do
				if go test -run='^$' -fuzz="^${fz}\$" -fuzztime="$FUZZTIME" "$pkg" >"$fuzzlog" 2>&1; then
					tail -n 2 "$fuzzlog"
					break
				fi
				cat "$fuzzlog"
				if [ "$attempt" = 1 ] && grep -q "context deadline exceeded" "$fuzzlog" && ! grep -q "Failing input written" "$fuzzlog"; then
					echo "(fuzz engine timeout without a finding; retrying $fz once)"
					continue
				fi
				exit 1
			done
		done
	done
fi
echo "== all tests passed"
