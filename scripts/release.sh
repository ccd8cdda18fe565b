#!/usr/bin/env bash
# Builds a pvans release into dist/ (ignored by git):
#   pvans_VERSION-1_ARCH.deb, pvans-VERSION-1.ARCH.rpm (nfpm, a Go tool of
#   this module), pvans-VERSION-linux-ARCH.tar.gz (binary, configs, unit,
#   docs, man pages, completions, LICENSE) per architecture, and SHA256SUMS.
#
# Usage: scripts/release.sh VERSION      e.g. scripts/release.sh 0.1.0
# Run it from a clean checkout of the commit tagged vVERSION (it refuses any
# other); CHANGELOG.md must have a "## [VERSION]" section. The binaries are static (CGO_ENABLED=0),
# built with -trimpath and without a build ID, and every date in the output
# is the commit's (SOURCE_DATE_EPOCH), so the same commit gives the same
# bytes on any machine with the same Go.
#
# Environment:
#   ARCHES           architectures to build (default "amd64 arm64")
#   DIST             output folder (default dist)
#   PVANS_ALLOW_DIRTY=1  build from a modified or untagged tree (tests); the
#                    commit is then marked -dirty and the output is not a release
set -euo pipefail
cd "$(dirname "$0")/.."

version="${1:-}"
version="${version#v}"
semver='^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'
if ! [[ $version =~ $semver ]]; then
	echo "usage: scripts/release.sh VERSION (a semantic version such as 0.1.0)" >&2
	exit 2
fi
if ! grep -q "^## \[$version\]" CHANGELOG.md; then
	echo "release.sh: CHANGELOG.md has no \"## [$version]\" section" >&2
	exit 1
fi
commit="$(git rev-parse HEAD)"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
	if [ -z "${PVANS_ALLOW_DIRTY:-}" ]; then
		echo "release.sh: the tree has changes; release from a clean checkout" >&2
		exit 1
	fi
	commit="$commit-dirty"
fi
# A release is the commit its tag names: labelling any HEAD with the
# version would give two different builds one version.
if [ "$(git rev-parse -q --verify "refs/tags/v$version^{commit}" 2>/dev/null)" != "$(git rev-parse HEAD)" ]; then
	if [ -z "${PVANS_ALLOW_DIRTY:-}" ]; then
		echo "release.sh: HEAD is not the commit tagged v$version; tag it (git tag -a v$version) or check the tag out" >&2
		exit 1
	fi
	commit="${commit%-dirty}-dirty"
fi
export SOURCE_DATE_EPOCH="$(git log -1 --format=%ct HEAD)"
date="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
arches="${ARCHES:-amd64 arm64}"
dist="${DIST:-dist}"
mkdir -p "$dist"
rm -f "$dist"/pvans[_-]* "$dist"/SHA256SUMS
dist="$(cd "$dist" && pwd)"
stage="$dist/stage"
rm -rf "$stage"

pkg=github.com/pvans-project/pvans/internal/buildinfo
ldflags="-s -w -buildid= -X $pkg.Version=$version -X $pkg.Commit=$commit -X $pkg.Date=$date"
build() { # GOARCH OUT
	CGO_ENABLED=0 GOOS=linux GOARCH="$1" GOFLAGS=-buildvcs=false \
		go build -trimpath -ldflags "$ldflags" -o "$2" ./cmd/pvans
}
# Compile nfpm before the timed part; from a cold module cache this is the
# slowest step (about a minute), later runs reuse Go's build cache.
go tool nfpm --version >/dev/null

# Architecture-independent files, written by the binary being released.
common="$stage/common"
mkdir -p "$common"
host="$stage/host-pvans"
build "$(go env GOARCH)" "$host"
"$host" man 1 | gzip -9n >"$common/pvans.1.gz"
"$host" man 5 | gzip -9n >"$common/pvans.yaml.5.gz"
"$host" completion bash >"$common/pvans.bash"
"$host" completion zsh >"$common/_pvans"
gzip -9nc CHANGELOG.md >"$common/changelog.gz"
# The installed README's links point where the packages put the files:
# /usr/share/doc/pvans holds docs/*.md flat, Debian's changelog as
# changelog.gz, the licence in /usr/share/licenses on rpm systems.
sed 's#](docs/#](#g' README.md >"$common/README.rpm.md"
sed 's#](CHANGELOG.md)#](changelog.gz)#g; s#](LICENSE)#](copyright)#g' "$common/README.rpm.md" >"$common/README.deb.md"
sed -i 's#](LICENSE)#](../../licenses/pvans/LICENSE)#g' "$common/README.rpm.md"
maintainer="$(sed -n 's/^maintainer: //p' packaging/nfpm.yaml)"
{
	echo "pvans ($version-1) unstable; urgency=medium"
	echo
	echo "  * Release $version; its changes are in /usr/share/doc/pvans/changelog.gz."
	echo
	echo " -- $maintainer  $(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$common/changelog.Debian.gz"
{
	echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
	echo "Upstream-Name: pvans"
	echo "Source: https://github.com/pvans-project/pvans"
	echo
	echo "Files: *"
	echo "Copyright: $(sed -n 's/^Copyright (c) //p' LICENSE)"
	echo "License: BSD-3-Clause"
	echo
	echo "License: BSD-3-Clause"
	sed -n '/^Redistribution/,$p' LICENSE | sed 's/^$/./; s/^/ /'
} >"$common/copyright"

for arch in $arches; do
	a="$stage/$arch"
	mkdir -p "$a"
	cp "$common"/* "$a/"
	if [ "$arch" = "$(go env GOARCH)" ]; then
		cp "$host" "$a/pvans" # the same build
	else
		build "$arch" "$a/pvans"
	fi
	# nfpm expands variables in its fields but not in contents' paths.
	sed "s#\${PVANS_STAGE}#$a#g" packaging/nfpm.yaml >"$a/nfpm.yaml"
	for fmt in deb rpm; do
		PVANS_VERSION="$version" PVANS_ARCH="$arch" \
			go tool nfpm package --config "$a/nfpm.yaml" --packager "$fmt" --target "$dist/" >/dev/null
	done
	name="pvans-$version-linux-$arch"
	t="$stage/tar/$name"
	mkdir -p "$t/configs/reach" "$t/deploy/systemd" "$t/deploy/prometheus" "$t/deploy/grafana" "$t/docs" "$t/man/man1" "$t/man/man5" "$t/completions"
	cp "$a/pvans" LICENSE README.md CHANGELOG.md "$t/"
	cp configs/*.yaml configs/web-config.yml "$t/configs/"
	cp configs/reach/*.yaml "$t/configs/reach/"
	cp deploy/systemd/pvans.service deploy/systemd/pvans.env "$t/deploy/systemd/"
	cp deploy/prometheus/alerts.yml "$t/deploy/prometheus/"
	cp deploy/grafana/pvans.json "$t/deploy/grafana/"
	cp docs/operations.md docs/configuration.md docs/upgrading.md docs/SECURITY.md docs/api.md docs/protocol.md "$t/docs/"
	gzip -dc "$a/pvans.1.gz" >"$t/man/man1/pvans.1"
	gzip -dc "$a/pvans.yaml.5.gz" >"$t/man/man5/pvans.yaml.5"
	cp "$a/pvans.bash" "$t/completions/pvans.bash"
	cp "$a/_pvans" "$t/completions/_pvans"
	chmod -R u=rwX,go=rX "$t"
	tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
		-C "$stage/tar" -cf - "$name" | gzip -9n >"$dist/$name.tar.gz"
done
rm -rf "$stage"
(cd "$dist" && rm -f SHA256SUMS && sha256sum -- *.deb *.rpm *.tar.gz >SHA256SUMS)
echo "release $version ($commit, $date) in $dist:"
(cd "$dist" && ls -1)
