#!/bin/sh
# Debian prerm: before removal (not before an upgrade), stop the service, as
# debhelper's prerm does, so no daemon runs from a deleted binary.
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ] && command -v deb-systemd-invoke >/dev/null; then
	deb-systemd-invoke stop pvans.service >/dev/null || true
fi
exit 0
