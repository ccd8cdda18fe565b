#!/usr/bin/env bash
# Runs every test of pvans: formatting, vet, staticcheck, unit and integration tests
# (network-namespace tests need root and iproute2; they skip otherwise),
# the race detector on the packages with goroutines, and short fuzz runs.
# Every test runs once: the packages that get the race pass run only under
# -race (but for their //go:build !race tests, run without it).
# Environment: FUZZTIME (default 3s) per fuzz target; set FUZZTIME=0 to skip.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
FUZZTIME="${FUZZTIME:-3s}"

# Each section's seconds, printed at the end: what CI time is spent on.
times=()
step_name=
step_start=$SECONDS
step() {
	if [ -n "$step_name" ]; then times+=("$(printf '%5ds  %s' $((SECONDS - step_start)) "$step_name")"); fi
	step_name="$1" step_start=$SECONDS
	[ -z "$1" ] || echo "== $1"
}

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
command -v cpio >/dev/null 2>&1 || need+=(cpio) # the .rpm's files, read through rpm2cpio
command -v man >/dev/null 2>&1 || need+=(man-db)
command -v zsh >/dev/null 2>&1 || need+=(zsh)
if [ "$(id -u)" = 0 ] && [ "${#need[@]}" -gt 0 ] && [ -z "${PVANS_NO_INSTALL:-}" ]; then
	step "installing ${need[*]}"
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

step "gofmt"
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
if [ -n "$unformatted" ]; then
	echo "gofmt needed:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./...

step "go mod tidy"
# go.mod and go.sum as go mod tidy leaves them: a dependency a test imports
# directly is a direct requirement. Checked from the module cache alone
# (GOPROXY=off); when tidy would need the network, the check is skipped
# with a message, since CI must not fail on a download.
tidy_err="$(mktemp)"
if tidy_diff="$(GOPROXY=off go mod tidy -diff 2>"$tidy_err")"; then
	:
elif [ -n "$tidy_diff" ]; then
	echo "go.mod or go.sum is not tidy; run go mod tidy:"; echo "$tidy_diff"; rm -f "$tidy_err"; exit 1
else
	echo "skipped: go mod tidy needs modules not in the cache ($(tail -n 1 "$tidy_err"))"
fi
rm -f "$tidy_err"

step "staticcheck"
# A Go tool of this module (go.mod's tool block): the version is pinned
# there, so every machine checks the same rules.
go tool staticcheck ./...

# The race detector checks the goroutines of the test binary itself. The
# suites under test/ drive pvans as a separate process (test/harness), so
# under -race they would check only their harness: they run once, without
# it. The daemon's goroutines are raced in process: by internal/daemon's
# tests, by test/ioc, and by test/chaos's soak, which run a whole daemon
# against a simulated site inside the test binary. internal/pva is pure
# codec functions with no goroutines.
race_pkgs="$(go list ./internal/... ./test/ioc | grep -v -E '/internal/pva$')"
plain_pkgs="$(go list ./... | grep -v -x -F "$race_pkgs")"

# How the passes below are run, for time: go vet above checked every
# package with its tests, so go test's own vet (a subset) is off. The
# suites that drive pvans processes spend most of their time waiting (for
# the daemon, a timer, a namespace), so four of them run at once (-p 4)
# and test/trust's tests, which wait side by side, four at a time
# (-parallel 4). The race pass keeps go test's default (one package per
# core): its in-process tests keep the cores busy, and its timings are
# tighter. go test starts packages in the order given: the slowest go
# first, or one started last runs on alone at the end.
testflags=(-count=1 -timeout 20m -vet=off)
first() { # first LIST PKG...: the packages of LIST, the PKGs among them first
	local named
	named="$(go list -e "${@:2}" 2>/dev/null | grep -x -F "$1" || true)"
	if [ -z "$named" ]; then echo "$1"; return; fi
	echo "$named"
	grep -v -x -F "$named" <<<"$1" || true
}
plain_pkgs="$(first "$plain_pkgs" ./test/hostile ./test/trust ./test/chaos ./test/release ./test/perf ./test/reload)"
race_pkgs="$(first "$race_pkgs" ./internal/udpsearch ./internal/registry ./internal/daemon ./internal/httpapi)"

step "go test (packages without the race pass)"
# TestSoak (test/chaos) runs under -race below. (-skip matches the name in
# every package; no other package has a TestSoak.)
go test "${testflags[@]}" -p 4 -parallel 4 -skip '^TestSoak$' $plain_pkgs

step "go test (tests the race build leaves out)"
# A test the race detector cannot run (allocation counts, heap figures,
# sizes that take minutes under it) sits in a //go:build !race file of its
# package; those files' tests run here, without -race. The files are the
# ones a -race listing of the package leaves out.
files='{{$p := .ImportPath}}{{$d := .Dir}}{{range .TestGoFiles}}{{$p}} {{$d}}/{{.}}{{"\n"}}{{end}}{{range .XTestGoFiles}}{{$p}} {{$d}}/{{.}}{{"\n"}}{{end}}'
all_files="$(go list -f "$files" $race_pkgs | sort)"
race_files="$(go list -race -f "$files" $race_pkgs | sort)"
norace="$(comm -23 <(echo "$all_files") <(echo "$race_files"))"
if [ -n "$norace" ]; then
	norace_pkgs="$(cut -d' ' -f1 <<<"$norace" | sort -u)"
	tests="$(cut -d' ' -f2 <<<"$norace" | xargs grep -ho -E '^func (Test|Fuzz|Example)[A-Za-z0-9_]*' | sed 's/^func //' | sort -u | paste -sd'|')"
	if [ -n "$tests" ]; then
		go test "${testflags[@]}" -run "^($tests)\$" $norace_pkgs
	fi
fi

step "go test -race (packages with goroutines)"
go test "${testflags[@]}" -race $race_pkgs
go test "${testflags[@]}" -race -run '^TestSoak$' ./test/chaos

# Every benchmark once: their figures live in docs/PERFORMANCE.md and are
# taken by hand, but one that no longer runs (a setup that panics on a
# changed option) must fail here, not at the next measurement.
step "benchmarks, one iteration each"
go test -count=1 -vet=off -run '^$' -bench . -benchtime 1x ./internal/... ./cmd/...

if [ "$FUZZTIME" != "0" ]; then
	step "fuzz ($FUZZTIME per target)"
	# Each package with fuzz targets is built once, instrumented as go test
	# -fuzz builds it, and its test binary fuzzes one target after another,
	# run as go test -fuzz runs it (from the package's directory, with go
	# test's corpus cache): a go test -fuzz per target spent seconds more
	# in the go command each time.
	fuzzdir="$(mktemp -d)"
	trap 'rm -rf "$fuzzdir"' EXIT
	fuzzcache="$(go env GOCACHE)/fuzz"
	dirs="$(go list -f '{{.ImportPath}} {{.Dir}}' ./...)"
	while read -r pkg dir; do
		targets="$(cd "$dir" && grep -ho '^func Fuzz[A-Za-z0-9_]*' *_test.go 2>/dev/null | sed 's/^func //')" || true
		[ -n "$targets" ] || continue
		bin="$fuzzdir/${pkg//\//_}.test"
		go test -c -vet=off -fuzz=. -o "$bin" "$pkg"
		for fz in $targets; do
			echo "-- $pkg $fz"
			# Go's fuzz coordinator sometimes ends a run with "context deadline
			# exceeded" when the time runs out while a worker is still
			# minimizing a new (non-failing) input. That is not a finding: a
			# real crasher says "Failing input written". Retry such a run once.
			for attempt in 1 2; do
				if (cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^${fz}\$" -test.fuzztime="$FUZZTIME" \
					-test.fuzzcachedir="$fuzzcache/$pkg" -test.timeout=10m) >"$fuzzdir/log" 2>&1; then
					tail -n 2 "$fuzzdir/log"
					break
				fi
				cat "$fuzzdir/log"
				if [ "$attempt" = 1 ] && grep -q "context deadline exceeded" "$fuzzdir/log" && ! grep -q "Failing input written" "$fuzzdir/log"; then
					echo "(fuzz engine timeout without a finding; retrying $fz once)"
					continue
				fi
				exit 1
			done
		done
	done <<<"$dirs"
fi
step ""
echo "== seconds per section"
printf '%s\n' "${times[@]}"
printf '%5ds  in all\n' "$SECONDS"
echo "== all tests passed"
